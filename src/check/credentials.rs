//! What each process's own provider credentials prove (issue 21): the providers' ledgers record
//! the label of the credential behind every request, and a killed process's credentials are
//! revoked at its kill. So a request made with a revoked credential was made by a process that
//! should be dead: the crash did not happen as declared, and nothing in the case can be judged
//! (`harness_error`). A request made with the account's own key, which aocheck gives no process,
//! was made with a credential the implementation was never given.

/// Why the ledgers disprove the case's crashes or credentials, if they do.
pub fn crash_disproved(
    payments: &fake_payments::ledger::Ledger,
    hermes: Option<&fake_hermes::app::Ledger>,
) -> Option<String> {
    let mut why = Vec::new();
    for r in payments.requests.iter().filter(|r| r.revoked) {
        why.push(format!(
            "fake-payments received a {} request (#{}) made with the credential of {}, after aocheck killed it",
            r.op, r.seq, r.credential
        ));
    }
    if let Some(r) = payments.requests.iter().find(|r| r.credential == "account") {
        why.push(format!(
            "fake-payments received a {} request (#{}) made with the account's own key, which aocheck gave no process",
            r.op, r.seq
        ));
    }
    if let Some(h) = hermes {
        for label in &h.revoked_uses {
            why.push(format!(
                "fake-hermes received a request made with the credential of {label}, after aocheck killed it"
            ));
        }
        if let Some(r) = h.runs.iter().find(|r| r.credential == "api_key") {
            why.push(format!(
                "fake-hermes started run {} for a request made with the configured API key, which aocheck gave no process",
                r.run_id
            ));
        }
    }
    (!why.is_empty()).then(|| {
        format!(
            "the providers' ledgers disprove the case's processes: {} (every process must use its own credentials, and a killed one makes no request)",
            why.join("; ")
        )
    })
}
