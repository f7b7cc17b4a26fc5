//! The Hermes operator checkers and oracles (seed 000): binding transitions, the pinned
//! manifest, the delegated-result resolver, operator answers, and durability across instances.

use crate::aoc::requirement::Req;
use crate::check::Finding;
use crate::operator::{ConnectorError, OperatorResult};

/// durable_binding (seed 000 item 10): each binding read again through a fresh handle (`fresh`)
/// must be the one read before. With no binding written nothing is proven: never a vacuous pass
/// (`Err`, a harness error naming what the case must do first).
pub(crate) fn judge_durability<T: PartialEq>(
    seen: Vec<(String, Option<T>, Option<T>)>,
    fresh: &str,
    facts: &mut crate::check::Facts,
) -> Result<Vec<Finding>, String> {
    facts.saw(Req::R005);
    if seen.iter().all(|(_, before, _)| before.is_none()) {
        return Err(
            "operator_durability found no binding to compare; invoke an Action first".into(),
        );
    }
    Ok(seen
        .iter()
        .filter(|(_, before, after)| before != after)
        .map(|(label, _, _)| {
            Finding::new(
                "durable_binding",
                Req::R005,
                format!("the binding {fresh} reads differs from the one written before"),
            )
            .about(Some(label))
        })
        .collect())
}

/// What the World read for one look at the Hermes side: fake-hermes's ledger, the Actions the
/// case invoked, the delegated children, and each Action's binding as the reader returned it.
#[derive(Debug)]
pub(crate) struct OperatorLook<'a> {
    pub(crate) ledger: &'a provider_model::hermes::ledger::Ledger,
    pub(crate) actions: Vec<&'a str>,
    pub(crate) delegations: &'a [(String, serde_json::Value)],
    /// (case label, Action id, binding)
    pub(crate) bindings: &'a [(String, String, crate::operator::Binding)],
}

/// Every operator checker over one look (ground truth): delegation payloads are the exact
/// `aip_call` arguments (AOC-REQ-003); every run belongs to an invoked or delegated Action and
/// one run per source Action (AOC-REQ-010); no failure without evidence (AOC-REQ-009); one
/// applied decision per resume command (AOC-REQ-010); terminal only from the provider
/// (AOC-REQ-011); and each binding's transitions since the last look (`seen`, AOC-REQ-003,
/// -004, -005). Facts are counted per thing examined.
pub(crate) fn judge_operator(
    look: &OperatorLook<'_>,
    seen: &mut std::collections::BTreeMap<String, crate::operator::Binding>,
    facts: &mut crate::check::Facts,
) -> Vec<Finding> {
    use crate::operator::BindingStatus;
    let ledger = look.ledger;
    let mut out = Vec::new();
    let mut v = |checker: &'static str, requirement: Req, label: Option<&str>, msg: String| {
        out.push(Finding::new(checker, requirement, msg).about(label))
    };
    for (label, child) in look.delegations {
        let id = child["id"].as_str().unwrap_or_default();
        let Ok(want) = crate::operator::delegation::aip_call_arguments(child) else {
            continue;
        };
        for run in runs_of(ledger, id) {
            facts.saw(Req::R003);
            let sent: Option<serde_json::Value> = serde_json::from_str(&run.prompt).ok();
            let exact = sent.as_ref().is_some_and(|p| {
                p["aip_call_arguments"] == want
                    && p["execution_contract"]["arguments"] == want
                    && p["execution_contract"]["tool"] == "aip_call"
                    && p["execution_contract"]["invocations"] == 1
            });
            if !exact {
                v(
                    "delegation_payload_exact",
                    Req::R003,
                    Some(label),
                    format!(
                        "run {} did not carry the exact aip_call arguments (child id as action_id, identity removed, one invocation)",
                        run.run_id
                    ),
                );
            }
        }
    }
    let mut known = look.actions.clone();
    known.extend(
        look.delegations
            .iter()
            .filter_map(|(_, child)| child["id"].as_str()),
    );
    for _ in &ledger.runs {
        facts.saw(Req::R010);
    }
    for what in unattributed_runs(ledger, &known) {
        v("one_run_per_action", Req::R010, None, what);
    }
    for (label, id, b) in look.bindings {
        let at = Some(label.as_str());
        if let Some(prev) = seen.get(label) {
            for r in [Req::R003, Req::R004, Req::R005] {
                facts.saw(r);
            }
            out.extend(binding_monotonic(label, prev, b));
        }
        seen.insert(label.clone(), b.clone());
        let mut v = |checker: &'static str, requirement: Req, msg: String| {
            out.push(Finding::new(checker, requirement, msg).about(at))
        };
        let runs = runs_of(ledger, id).len();
        facts.saw(Req::R010);
        if runs > 1 {
            v(
                "one_run_per_action",
                Req::R010,
                format!("{runs} Hermes runs started for one source Action (ground truth)"),
            );
        }
        // no_failure_without_evidence examines every start that left no run id: a binding that
        // says `failed` (a claim the ledger can refute) or `outcome_unknown` (where it could
        // have said `failed` and did not).
        if b.run_id.is_none()
            && matches!(
                b.status,
                BindingStatus::Failed | BindingStatus::OutcomeUnknown
            )
        {
            facts.saw(Req::R009);
        }
        if b.run_id.is_none() && b.status == BindingStatus::Failed && runs > 0 {
            v(
                "no_failure_without_evidence",
                Req::R009,
                format!(
                    "binding says the start failed, but Hermes started {runs} run(s) for it (ground truth)"
                ),
            );
        }
        let Some(run) = &b.run_id else {
            continue;
        };
        let applied = ledger.approvals.iter().filter(|a| &a.run_id == run).count();
        if !b.approval_commands.is_empty() || applied > 0 {
            facts.saw(Req::R010);
        }
        if applied > b.approval_commands.len() {
            v(
                "one_command_per_resume",
                Req::R010,
                format!(
                    "{applied} approval decisions applied for {} resume command(s)",
                    b.approval_commands.len()
                ),
            );
        }
        let want = match b.status {
            BindingStatus::Cancelled => Some("cancelled"),
            BindingStatus::Completed => Some("completed"),
            _ => None,
        };
        if let Some(want) = want {
            facts.saw(Req::R011);
            let got = ledger
                .terminal
                .get(run)
                .map_or("not terminal", String::as_str);
            if got != want {
                v(
                    "terminal_only_from_provider",
                    Req::R011,
                    format!("binding says {want}, but Hermes's run is {got}"),
                );
            }
        }
    }
    out
}

/// The Hermes runs fake-hermes really started for a source Action (ground truth).
pub(crate) fn runs_of<'a>(
    ledger: &'a provider_model::hermes::ledger::Ledger,
    action_id: &str,
) -> Vec<&'a provider_model::hermes::ledger::RunStarted> {
    let session = crate::operator::session_id(action_id);
    ledger
        .runs
        .iter()
        .filter(|r| r.session_id == session)
        .collect()
}

/// The AOC invariants re-expressed for an operator binding between two looks: the binding is
/// constant (AOC-REQ-003), its approval command ledger and event sequence only grow
/// (AOC-REQ-004), and a terminal or unresolved status is never cleared (AOC-REQ-005).
pub(crate) fn binding_monotonic(
    label: &str,
    prev: &crate::operator::Binding,
    now: &crate::operator::Binding,
) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut v = |checker: &'static str, requirement: Req, msg: String| {
        out.push(Finding::new(checker, requirement, msg).about(Some(label)))
    };
    if prev.request_fingerprint != now.request_fingerprint
        || prev.endpoint_id != now.endpoint_id
        || prev.session_id != now.session_id
        || prev.action_id != now.action_id
    {
        v(
            "binding_constant",
            Req::R003,
            "the binding's fingerprint, endpoint, session or Action id changed".into(),
        );
    }
    if prev.run_id.is_some() && prev.run_id != now.run_id {
        v(
            "binding_constant",
            Req::R003,
            format!(
                "the bound run changed from {:?} to {:?}",
                prev.run_id, now.run_id
            ),
        );
    }
    let kept = prev.approval_commands.len() <= now.approval_commands.len()
        && prev
            .approval_commands
            .iter()
            .zip(&now.approval_commands)
            .all(|(a, b)| {
                a.action_id == b.action_id
                    && a.request_fingerprint == b.request_fingerprint
                    && a.claim_id == b.claim_id
                    && a.choice == b.choice
            });
    if !kept {
        v(
            "history_append_only",
            Req::R004,
            "an approval command was removed or rewritten".into(),
        );
    }
    if now.next_sequence < prev.next_sequence {
        v(
            "history_append_only",
            Req::R004,
            format!(
                "the event sequence went back from {} to {}",
                prev.next_sequence, now.next_sequence
            ),
        );
    }
    // An ended binding is a terminal record (seed 000): its status stays, and so do the output
    // or error it ended with; rewriting them hides a prior terminal decision (§4.4).
    if prev.status.is_terminal()
        && prev.status != crate::operator::BindingStatus::OutcomeUnknown
        && now.status == prev.status
        && ((prev.output.is_some() && now.output != prev.output)
            || (prev.error.is_some() && now.error != prev.error))
    {
        v(
            "history_append_only",
            Req::R004,
            format!(
                "the binding ended {:?}, and the output or error it ended with was rewritten",
                prev.status
            ),
        );
    }
    // Unknown may still be resolved by provider evidence (judged by terminal_only_from_provider);
    // it may never go back to an attemptable state, and a resolved binding never changes.
    let resolved_by_evidence = prev.status == crate::operator::BindingStatus::OutcomeUnknown
        && now.status.is_terminal()
        && !(prev.run_id.is_none() && now.run_id.is_some());
    if prev.status.is_terminal() && now.status != prev.status && !resolved_by_evidence {
        v(
            "unresolved_kept",
            Req::R005,
            if prev.run_id.is_none() && now.run_id.is_some() {
                format!(
                    "an unknown unbound start was followed by run {:?}: the start was attempted again",
                    now.run_id
                )
            } else {
                format!("the binding left {:?} for {:?}", prev.status, now.status)
            },
        );
    }
    out
}

/// Seed 000's contract for `cap:hermes_agent:<endpoint>:operator`, as JSON pointers into the
/// manifest: the harness's oracle for item 1 (the connector's manifest is judged against it).
fn pinned_manifest(endpoint: &str) -> Vec<(&'static str, serde_json::Value)> {
    use serde_json::json;
    vec![
        (
            "/id",
            json!(format!("cap:hermes_agent:{endpoint}:operator")),
        ),
        ("/kind", json!("agent")),
        ("/stability", json!("stable")),
        ("/risk", json!("high")),
        ("/approval/required", json!(true)),
        ("/approval/policy", json!("tenant")),
        ("/approval/validity_seconds", json!(900)),
        ("/idempotency/required", json!(true)),
        ("/idempotency/scope", json!("capability")),
        ("/idempotency/ttl_seconds", json!(86400)),
        ("/idempotency/on_replay", json!("return_original_result")),
        (
            "/effects",
            json!([
                "read",
                "write",
                "send_message",
                "external_network",
                "code_execution"
            ]),
        ),
        ("/modes", json!(["sync", "async", "streaming", "cancel"])),
        ("/async_expected", json!(true)),
        ("/timeout_ms", json!(900000)),
        ("/transaction/supported", json!(false)),
        ("/input_schema/additionalProperties", json!(false)),
        (
            "/input_schema/properties/resume/properties/choice/enum",
            json!(["once", "session", "always", "deny"]),
        ),
        (
            "/output_schema/required",
            json!(["endpoint_id", "session_id", "source_action_id", "status"]),
        ),
    ]
}

/// The facts an operator step's expected result or failure examines (what
/// `check_operator_result` judges them under): an expected error is about an unknown outcome
/// (AOC-REQ-009) or a refusal (AOC-REQ-010); an expected result about its terminal state
/// (AOC-REQ-011).
pub(crate) fn result_facts(
    facts: &mut crate::check::Facts,
    result: &Option<String>,
    error: &Option<String>,
) {
    if let Some(want) = error {
        facts.saw(if want.contains("outcome_unknown") {
            Req::R009
        } else {
            Req::R010
        });
    }
    if result.is_some() {
        facts.saw(Req::R011);
    }
}

/// delegated_result_from_lifecycle (AOC-REQ-011, -007): the harness's own truth about a
/// delegated child against what the connector returned: a result is accepted only from a
/// consistent queue and lifecycle, and only as the lifecycle says.
pub(crate) fn judge_delegated_result(
    r: &Result<OperatorResult, ConnectorError>,
    child: &str,
    label: &str,
    facts: &mut crate::check::Facts,
) -> Option<Finding> {
    let o = r.as_ref().ok()?;
    let d = &o.output["provider"]["delegated"];
    // No delegated result claimed (e.g. waiting for approval, unknown start).
    if d.is_null() {
        return None;
    }
    facts.saw(Req::R011);
    let found = |req: Req, what: String| {
        Some(Finding::new("delegated_result_from_lifecycle", req, what).about(Some(label)))
    };
    if d["authority"] != "aip_native_lifecycle" {
        return found(
            Req::R011,
            format!(
                "the delegated result came from {} instead of the AIP lifecycle",
                d["authority"]
            ),
        );
    }
    match child {
        "ran" if d["result"] == serde_json::json!({"updated": label}) => None,
        "ran" => found(
            Req::R011,
            format!("delegated result {} is not the lifecycle's", d["result"]),
        ),
        "never" => found(
            Req::R011,
            "a result was reported for a child that never ran".into(),
        ),
        other => found(
            Req::R007,
            format!("a result was accepted from a child with {other}"),
        ),
    }
}

/// result_from_provider (AOC-REQ-011: "`success` = pinned status source reports
/// profile-defined success for the exact binding"): an operator result that says its run
/// completed or was cancelled names a run Hermes really started for the result's source Action,
/// which Hermes really ended so; a completed result's provider output is the output that run
/// produced. `ledger` is read after the result came back. One fact per result with a run.
pub(crate) fn result_from_provider(
    o: &OperatorResult,
    ledger: &provider_model::hermes::ledger::Ledger,
    facts: &mut crate::check::Facts,
) -> Vec<Finding> {
    use crate::operator::connector::ResultStatus;
    if matches!(o.status, ResultStatus::Completed | ResultStatus::Cancelled)
        && o.output["run_id"].is_string()
    {
        facts.saw(Req::R011);
    }
    result_from_provider_facts(o, ledger)
        .into_iter()
        .map(|(req, what)| Finding::new("result_from_provider", req, what))
        .collect()
}

fn result_from_provider_facts(
    o: &OperatorResult,
    ledger: &provider_model::hermes::ledger::Ledger,
) -> Vec<(Req, String)> {
    use crate::operator::connector::ResultStatus;
    let mut out = Vec::new();
    let want = match o.status {
        ResultStatus::Completed => "completed",
        ResultStatus::Cancelled => "cancelled",
        _ => return out,
    };
    let source = o.output["source_action_id"].as_str().unwrap_or_default();
    let Some(run) = o.output["run_id"].as_str() else {
        out.push((
            Req::R011,
            format!("the result says {want}, and names no Hermes run"),
        ));
        return out;
    };
    if !runs_of(ledger, source).iter().any(|r| r.run_id == run) {
        out.push((
            Req::R011,
            format!(
                "the result says {want} with run {run}, which Hermes never started for Action {source} (ground truth)"
            ),
        ));
        return out;
    }
    let ended = ledger.terminal.get(run).map_or("not ended", String::as_str);
    if ended != want {
        out.push((
            Req::R011,
            format!("the result says {want}, but Hermes's run {run} is {ended} (ground truth)"),
        ));
    } else if want == "completed" {
        let produced = ledger.results.get(run).and_then(|r| r.output.as_deref());
        let reported = o.output["provider"]["output"].as_str();
        if reported != produced {
            out.push((
                Req::R011,
                format!(
                    "the result reports output {reported:?}, but Hermes's run {run} produced {produced:?} (ground truth)"
                ),
            ));
        }
    }
    out
}

/// unattributed_runs (AOC-REQ-010): every run Hermes started belongs to the session of an
/// Action the case invoked or delegated (seed 000: "the stable Hermes session ID
/// `aip-operator-<action_id>`"); any other run is a provider start no binding accounts for.
pub(crate) fn unattributed_runs(
    ledger: &provider_model::hermes::ledger::Ledger,
    actions: &[&str],
) -> Vec<String> {
    let sessions: Vec<String> = actions
        .iter()
        .map(|a| crate::operator::session_id(a))
        .collect();
    ledger
        .runs
        .iter()
        .filter(|r| !sessions.contains(&r.session_id))
        .map(|r| {
            format!(
                "Hermes started run {} in session {:?}, which is no invoked or delegated Action's (ground truth)",
                r.run_id, r.session_id
            )
        })
        .collect()
}

pub(crate) fn check_operator_result(
    r: &Result<OperatorResult, ConnectorError>,
    result: &Option<String>,
    error: &Option<String>,
) -> Option<Finding> {
    let found = |req: Req, what: String| Some(Finding::new("operator_result_expected", req, what));
    let got_status = match r {
        Ok(o) => serde_json::to_value(o.status)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
        Err(_) => "error".into(),
    };
    let got_error = match r {
        Ok(o) => o.error.as_ref().map(|e| e.code.as_str().to_string()),
        Err(e) => Some(e.code.as_str().to_string()),
    };
    let detail = match r {
        Ok(o) => o.error.as_ref().map(|e| e.message.clone()),
        Err(e) => Some(e.message.clone()),
    }
    .map_or(String::new(), |m| format!(": {m}"));
    if let Some(want) = error
        && !got_error
            .as_deref()
            .is_some_and(|g| g.ends_with(want.as_str()))
    {
        let req = if want.contains("outcome_unknown") {
            Req::R009
        } else {
            Req::R010
        };
        return found(
            req,
            format!(
                "expected failure {want}, got {} ({got_status}){detail}",
                got_error.unwrap_or_else(|| "none".into())
            ),
        );
    }
    if let Some(want) = result
        && &got_status != want
    {
        return found(
            Req::R011,
            format!(
                "expected result {want}, got {got_status} {}{detail}",
                got_error.unwrap_or_default()
            ),
        );
    }
    if error.is_none() && result.is_none() && r.is_err() {
        return found(
            Req::R010,
            format!("invocation failed: {}", got_error.unwrap_or_default()),
        );
    }
    None
}

/// manifest_pinned (AOC-REQ-009): the connector's manifest carries seed 000's contract, field
/// by field.
pub(crate) fn manifest_departures(
    m: &serde_json::Value,
    facts: &mut crate::check::Facts,
) -> Option<Finding> {
    facts.saw(Req::R009);
    let wrong: Vec<String> = pinned_manifest("primary")
        .into_iter()
        .filter_map(|(ptr, want)| {
            let got = m.pointer(ptr).cloned().unwrap_or(serde_json::Value::Null);
            (got != want).then(|| format!("{ptr} is {got}, the contract pins {want}"))
        })
        .collect();
    (!wrong.is_empty()).then(|| {
        Finding::new(
            "manifest_pinned",
            Req::R009,
            format!(
                "the manifest departs from seed 000's contract: {}",
                wrong.join("; ")
            ),
        )
    })
}

/// policy_validated (AOC-REQ-001): the connector accepts the policy the case says is valid and
/// refuses the one it says is not, with the error code the case names (`want`: the code's end).
pub(crate) fn policy_validation(
    want: Option<&str>,
    got: Option<&ConnectorError>,
    facts: &mut crate::check::Facts,
) -> Option<Finding> {
    facts.saw(Req::R001);
    match (want, got) {
        (None, None) => None,
        (Some(w), Some(e)) if e.code.as_str().ends_with(w) => None,
        (want, got) => Some(Finding::new(
            "policy_validated",
            Req::R001,
            format!(
                "policy validation: expected {}, got {}",
                want.unwrap_or("acceptance"),
                got.map_or("acceptance".into(), |e| e.to_string())
            ),
        )),
    }
}

/// cancel_binding (AOC-REQ-011): a cancel the connector answers leaves the binding in the status
/// the case expects (`want`); a cancel it fails is a finding, not a refusal.
pub(crate) fn cancel_binding(
    label: &str,
    answer: &Result<crate::operator::Binding, ConnectorError>,
    want: Option<&str>,
    facts: &mut crate::check::Facts,
) -> Option<Finding> {
    // Examined when there is a status to compare or a failure to report.
    if want.is_some() || answer.is_err() {
        facts.saw(Req::R011);
    }
    let found =
        |what: String| Some(Finding::new("cancel_binding", Req::R011, what).about(Some(label)));
    match answer {
        Err(e) => found(format!("cancel failed: {e}")),
        Ok(b) => {
            let want = want?;
            let got = serde_json::to_value(b.status)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            (got != want)
                .then(|| format!("binding is {got} after the cancel, expected {want}"))
                .and_then(found)
        }
    }
}

#[cfg(test)]
mod binding_tests {
    use super::binding_monotonic;
    use crate::operator::{Binding, BindingStatus as B};

    pub(super) fn b(status: B, run: Option<&str>) -> Binding {
        Binding {
            action_id: "act_1".into(),
            request_fingerprint: "fp".into(),
            endpoint_id: "primary".into(),
            run_id: run.map(str::to_string),
            session_id: "aip-operator-act_1".into(),
            start_claim: None,
            delegation_id: None,
            parent_action_id: None,
            status,
            cancel_requested: false,
            last_event: None,
            next_sequence: 3,
            approval_generation: 0,
            approval_commands: Vec::new(),
            pending_approval: None,
            output: None,
            error: None,
            created_at: 0,
            updated_at: 0,
        }
    }

    fn cmd(
        fingerprint: &str,
        claim: &str,
        choice: &str,
    ) -> crate::operator::binding::ApprovalCommand {
        crate::operator::binding::ApprovalCommand {
            action_id: "act_1".into(),
            request_fingerprint: fingerprint.into(),
            approval_generation: 1,
            choice: choice.into(),
            resolve_all: false,
            claim_id: claim.into(),
            instance_id: "i1".into(),
            status: "applied".into(),
            diagnostic: None,
            created_at: 0,
            updated_at: 0,
            expires_at: 0,
        }
    }

    /// A running binding holding these approval commands.
    fn with(commands: &[crate::operator::binding::ApprovalCommand]) -> Binding {
        Binding {
            approval_commands: commands.to_vec(),
            ..b(B::Running, Some("r1"))
        }
    }

    #[rstest::rstest]
    #[case::running_to_completed(b(B::Running, Some("r1")), b(B::Completed, Some("r1")), None)]
    #[case::unknown_resolved_same_run(
        b(B::OutcomeUnknown, Some("r1")),
        b(B::Completed, Some("r1")),
        None
    )]
    #[case::completed_reopened(
        b(B::Completed, Some("r1")),
        b(B::Running, Some("r1")),
        Some("unresolved_kept")
    )]
    #[case::unknown_reset(
        b(B::OutcomeUnknown, None),
        b(B::Starting, None),
        Some("unresolved_kept")
    )]
    #[case::unknown_started_again(
        b(B::OutcomeUnknown, None),
        b(B::Completed, Some("r2")),
        Some("unresolved_kept")
    )]
    #[case::run_swapped(
        b(B::Running, Some("r1")),
        b(B::Running, Some("r2")),
        Some("binding_constant")
    )]
    #[case::fingerprint_changed(b(B::Running, Some("r1")), Binding { request_fingerprint: "other".into(), ..b(B::Running, Some("r1")) }, Some("binding_constant"))]
    #[case::endpoint_changed(b(B::Running, Some("r1")), Binding { endpoint_id: "other".into(), ..b(B::Running, Some("r1")) }, Some("binding_constant"))]
    #[case::session_changed(b(B::Running, Some("r1")), Binding { session_id: "other".into(), ..b(B::Running, Some("r1")) }, Some("binding_constant"))]
    #[case::action_changed(b(B::Running, Some("r1")), Binding { action_id: "other".into(), ..b(B::Running, Some("r1")) }, Some("binding_constant"))]
    #[case::ended_output_rewritten(Binding { output: Some("the summary".into()), ..b(B::Completed, Some("r1")) }, Binding { output: Some("a rosier summary".into()), ..b(B::Completed, Some("r1")) }, Some("history_append_only"))]
    #[case::ended_output_kept(Binding { output: Some("the summary".into()), ..b(B::Completed, Some("r1")) }, Binding { output: Some("the summary".into()), ..b(B::Completed, Some("r1")) }, None)]
    #[case::sequence_back(b(B::Running, Some("r1")), Binding { next_sequence: 1, ..b(B::Running, Some("r1")) }, Some("history_append_only"))]
    #[case::command_appended(with(&[cmd("fp", "c1", "once")]), with(&[cmd("fp", "c1", "once"), cmd("fp", "c2", "deny")]), None)]
    #[case::command_kept(with(&[cmd("fp", "c1", "once")]), with(&[cmd("fp", "c1", "once")]), None)]
    #[case::command_removed(with(&[cmd("fp", "c1", "once")]), with(&[]), Some("history_append_only"))]
    #[case::command_choice_rewritten(with(&[cmd("fp", "c1", "once")]), with(&[cmd("fp", "c1", "always")]), Some("history_append_only"))]
    #[case::command_fingerprint_rewritten(with(&[cmd("fp", "c1", "once")]), with(&[cmd("fp2", "c1", "once")]), Some("history_append_only"))]
    #[case::command_claim_rewritten(with(&[cmd("fp", "c1", "once")]), with(&[cmd("fp", "c9", "once")]), Some("history_append_only"))]
    fn binding_transitions_are_judged(
        #[case] prev: Binding,
        #[case] now: Binding,
        #[case] want: Option<&str>,
    ) {
        let v = binding_monotonic("a1", &prev, &now);
        match want {
            None => assert!(v.is_empty(), "{v:?}"),
            Some(c) => assert!(v.iter().any(|x| x.checker == c), "{v:?}"),
        }
    }
}

#[cfg(test)]
mod oracle_tests {
    use super::*;
    use crate::check::Facts;
    use crate::operator::error::ErrorCode;

    /// one_command_per_resume examines AOC-REQ-010 only where there is something to count: a
    /// bound run with no resume command and no applied decision adds no fact beyond the two
    /// its run counts (one run per Action, the run's Action invoked); one applied decision
    /// (here without a command, so it also fails) adds one.
    #[rstest::rstest]
    #[case::nothing_to_resume(0, 2, false)]
    #[case::a_decision_applied(1, 3, true)]
    fn resume_facts_count_what_was_resumed(
        #[case] applied: usize,
        #[case] r010: u32,
        #[case] fails: bool,
    ) {
        use provider_model::hermes::ledger::{ApprovalApplied, Ledger, Reply, RunStarted};
        let run = RunStarted {
            body_digest: "d".into(),
            prompt: "p".into(),
            credential: "c1".into(),
            ..RunStarted::example("r1", "aip-operator-act_1")
        };
        let ledger = Ledger {
            runs: vec![run],
            approvals: (0..applied)
                .map(|_| ApprovalApplied {
                    run_id: "r1".into(),
                    session_id: "aip-operator-act_1".into(),
                    choice: "once".into(),
                    resolved: 1,
                    request_id: None,
                    fault: None,
                    reply: Reply::Written,
                })
                .collect(),
            ..Ledger::default()
        };
        let binding = crate::operator::Binding {
            run_id: Some("r1".into()),
            ..super::binding_tests::b(crate::operator::BindingStatus::Running, Some("r1"))
        };
        let bindings = vec![("a1".to_string(), "act_1".to_string(), binding)];
        let look = OperatorLook {
            ledger: &ledger,
            actions: vec!["act_1"],
            delegations: &[],
            bindings: &bindings,
        };
        let mut facts = crate::check::Facts::default();
        let found = judge_operator(&look, &mut Default::default(), &mut facts);
        assert_eq!(facts.count(Req::R010), r010, "{facts:?}");
        assert_eq!(
            found
                .iter()
                .any(|f| f.checker() == "one_command_per_resume"),
            fails,
            "{found:?}"
        );
    }

    /// durable_binding, both directions: a binding read again alike passes, one that differs
    /// fails, and nothing written proves nothing (an error, never a vacuous pass).
    #[test]
    fn durability_is_judged_by_what_was_written() {
        let same = vec![("a1".to_string(), Some(1), Some(1))];
        assert_eq!(
            judge_durability(same, "a fresh reader", &mut Facts::default()).map(|f| f.len()),
            Ok(0)
        );
        let changed = vec![("a1".to_string(), Some(1), Some(2))];
        let found =
            judge_durability(changed, "a fresh reader", &mut Facts::default()).expect("judged");
        assert_eq!(
            found
                .iter()
                .map(|f| (f.checker(), f.requirement()))
                .collect::<Vec<_>>(),
            vec![("durable_binding", Req::R005)]
        );
        let nothing: Vec<(String, Option<u8>, Option<u8>)> = vec![("a1".into(), None, None)];
        assert!(judge_durability(nothing, "a fresh reader", &mut Facts::default()).is_err());
    }

    /// policy_validated, both directions: the expected acceptance or refusal passes; accepting
    /// an invalid policy or refusing a valid one fails.
    #[rstest::rstest]
    #[case::valid_accepted(None, None, false)]
    #[case::invalid_refused(Some("operator_policy"), Some(ErrorCode::OperatorPolicy), false)]
    #[case::invalid_accepted(Some("operator_policy"), None, true)]
    #[case::valid_refused(None, Some(ErrorCode::OperatorPolicy), true)]
    fn policy_validation_is_judged(
        #[case] want: Option<&str>,
        #[case] got: Option<ErrorCode>,
        #[case] fails: bool,
    ) {
        let got = got.map(|c| ConnectorError::new(c, "refused"));
        let mut facts = Facts::default();
        let f = policy_validation(want, got.as_ref(), &mut facts);
        assert_eq!(facts.count(Req::R001), 1);
        assert_eq!(
            f.map(|f| (f.checker(), f.requirement())),
            fails.then_some(("policy_validated", Req::R001))
        );
    }
}
