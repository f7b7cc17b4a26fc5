//! What each process's own provider credentials prove (issue 21): the providers' ledgers record
//! the label of the credential behind every request, and a killed process's credentials are
//! revoked at its kill. So a request made with a revoked credential was made by a process that
//! should be dead: the crash did not happen as declared, and nothing in the case can be judged
//! (`harness_error`). A request made with the account's own key, which aocheck gives no process,
//! was made with a credential the implementation was never given.

/// Why the ledgers disprove the case's crashes or credentials, if they do.
pub fn crash_disproved(
    payments: &provider_model::payments::ledger::Ledger,
    hermes: Option<&provider_model::hermes::ledger::Ledger>,
) -> Option<String> {
    let mut why = Vec::new();
    for r in payments.requests.iter().filter(|r| r.revoked) {
        why.push(format!(
            "fake-payments received a {} request (#{}) made with the credential of {}, after aocheck killed it",
            r.op.label(),
            r.seq,
            r.credential
        ));
    }
    if let Some(r) = payments.requests.iter().find(|r| r.credential == "account") {
        why.push(format!(
            "fake-payments received a {} request (#{}) made with the account's own key, which aocheck gave no process",
            r.op.label(),
            r.seq
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

/// Why a case cannot pass because the judged party reached a fake's control routes (the
/// harness itself reaches them only through the fakes' handles, in process): every request,
/// refused or not, named by provider, method and path.
pub fn control_reached(
    reached: &[(&str, &[provider_model::control::ControlAttempt])],
) -> Option<String> {
    let mut seen: Vec<String> = Vec::new();
    let mut n = 0;
    for (who, attempts) in reached {
        n += attempts.len();
        for a in attempts.iter() {
            let line = format!(
                "{who} {} {}{}",
                a.method,
                a.path,
                if a.authorized {
                    " (with the control token)"
                } else {
                    " (refused)"
                }
            );
            if !seen.contains(&line) {
                seen.push(line);
            }
        }
    }
    (!seen.is_empty()).then(|| {
        format!(
            "the implementation sent {n} request(s) to the providers' control APIs, which hold the ground truth: {}; a case whose judged party reached for the ground truth cannot pass",
            seen.join(", ")
        )
    })
}

/// Why the case's Hermes clock was misused, if it was (issue 21, "nothing on trust that can be
/// measured"): a participant whose sleep the clock refused (none of the harness's calls in
/// flight on it, or longer than its policy's longest wait) moved, or tried to move, the fakes'
/// time at will. One that declared `clock: driven`, never slept on the clock, and had a call
/// that ran into the harness's request deadline (`deadline_ms`) waited in real time while the
/// case's clock stood still for it: that is what its harness error is, and the message says so.
pub fn clock_misused(
    participants: &std::collections::BTreeMap<String, provider_model::clock::Participant>,
    follows_real_time: bool,
    deadline_ms: u64,
) -> Option<String> {
    let mut why = Vec::new();
    for (label, p) in participants {
        if let Some(r) = p.refused.first() {
            why.push(format!(
                "{label} asked the case's clock for {} sleep(s) it refused ({r})",
                p.refused.len()
            ));
        }
        if p.driven
            && !follows_real_time
            && p.sleeps == 0
            && p.longest_call_real_ms >= deadline_ms.saturating_mul(9) / 10
        {
            why.push(format!(
                "{label} declared clock: driven but never slept on the case's clock, and one of its calls waited {} ms of real time, while the clock stood still for it: it keeps its own time (answer clock: own, or do every wait as a sleep on the clock)",
                p.longest_call_real_ms
            ));
        }
    }
    (!why.is_empty()).then(|| {
        format!(
            "the case's clock was not used as declared: {}",
            why.join("; ")
        )
    })
}
