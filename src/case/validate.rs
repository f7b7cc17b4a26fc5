//! The rulebook: one pure validator that reports every defect of a parsed case at once, naming
//! the file, the case, the field and the fix.

use super::model::*;
use crate::aoc::requirement::Req;
use crate::vocab::{Authority, Flag, Outcome, State};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// A defect if `result` names no operator result status.
fn unknown_result(result: &Option<String>) -> Option<String> {
    result
        .as_ref()
        .filter(|r| !["completed", "failed", "cancelled", "requires_human"].contains(&r.as_str()))
        .map(|r| format!("{r:?} is unknown"))
}

/// An operator step's `error`: one of seed 000's error codes, by its last word
/// (`operator_outcome_unknown` for `connector.hermes_agent.operator_outcome_unknown`).
fn unknown_error_code(error: Option<&String>) -> Option<String> {
    let e = error?;
    let known = crate::operator::error::ErrorCode::ALL
        .iter()
        .any(|c| c.as_str().rsplit('.').next() == Some(e.as_str()));
    (!known).then(|| format!("{e:?} is not one of seed 000's error codes"))
}

/// The binding fields a `rebind` step may name.
pub(crate) const FIELDS: [&str; 7] = [
    "account",
    "environment",
    "native_key",
    "profile_version",
    "status_source",
    "request",
    "provider_ref",
];

/// Validates one parsed case (pure): every defect at once.
pub fn validate(file: &str, c: &Case) -> Vec<CaseDefect> {
    let mut out = Vec::new();
    let mut d = |field: String, msg: String, fix: &str| {
        out.push(CaseDefect {
            file: file.into(),
            case: Some(c.id.clone()),
            field,
            line: None,
            msg,
            fix: fix.into(),
        })
    };
    let stem = Path::new(file)
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default();
    if c.id.trim().is_empty()
        || !c
            .id
            .chars()
            .all(|ch| ch.is_ascii_uppercase() || ch.is_ascii_digit() || ch == '-')
    {
        d(
            "id".into(),
            format!(
                "{:?} is not an id of upper-case letters, digits and dashes",
                c.id
            ),
            "use an id like AOC-CASE-003",
        );
    } else if !stem.starts_with(&c.id) {
        d(
            "id".into(),
            format!(
                "the file name {stem:?} does not start with the id {:?}",
                c.id
            ),
            "name the file <id>-<slug>.yaml",
        );
    }
    if c.title.trim().is_empty() {
        d("title".into(), "empty".into(), "say what the case checks");
    }
    if c.requirements.is_empty() {
        d(
            "requirements".into(),
            "no requirement is evaluated".into(),
            "list the AOC-REQ ids the case evaluates",
        );
    }
    for (i, r) in c.requirements.iter().enumerate() {
        if Req::parse(r).is_none() || !r.starts_with("AOC-REQ-") {
            d(
                format!("requirements[{i}]"),
                format!("{r:?} is not a requirement id"),
                "use AOC-REQ-001 … AOC-REQ-013",
            );
        }
    }
    if let Some(p) = &c.config.idempotency
        && !["stripe-v1", "ietf-draft", "none"].contains(&p.as_str())
    {
        d(
            "config.idempotency".into(),
            format!("{p:?} is unknown"),
            "use stripe-v1, ietf-draft or none",
        );
    }
    if c.steps.is_empty() {
        d(
            "steps".into(),
            "no steps".into(),
            "add the steps the case performs",
        );
    }
    let mut executors: BTreeSet<String> = BTreeSet::new();
    let mut current: Option<String> = None;
    // Who holds the lane, as far as the steps tell (an advance may expire the lease).
    let mut held: Option<String> = None;
    let mut occurrences: BTreeSet<String> = BTreeSet::new();
    let mut submissions: BTreeSet<String> = BTreeSet::new();
    let mut holds: BTreeSet<String> = BTreeSet::new();
    let mut actions: BTreeSet<String> = BTreeSet::new();
    for (i, s) in c.steps.iter().enumerate() {
        let at = |f: &str| format!("steps[{i}].{f}");
        if let Some(e) = s.expect()
            && let Err(m) = e.parse()
        {
            d(
                at("expect"),
                m,
                "use ok, any, refused or refused AOC-REQ-00N",
            );
        }
        let need_exec = |e: &Option<String>, out: &mut Vec<(String, String, &str)>| match e {
            Some(name) if !executors.contains(name) => out.push((
                at("executor"),
                format!("executor {name:?} has not joined"),
                "join or replace with it first",
            )),
            None if current.is_none() => out.push((
                at("executor"),
                "no executor has joined yet".into(),
                "start with a join step",
            )),
            _ => {}
        };
        let mut pending: Vec<(String, String, &str)> = Vec::new();
        let occ_known = |o: &str, pending: &mut Vec<(String, String, &str)>| {
            if !occurrences.contains(o) {
                pending.push((
                    at("occurrence"),
                    format!("occurrence {o:?} was not created by an earlier step"),
                    "create it first",
                ));
            }
        };
        let error = match s {
            Step::OperatorInvoke { error, .. }
            | Step::OperatorConfigure { error, .. }
            | Step::OperatorDelegate { error, .. } => error.as_ref(),
            _ => None,
        };
        // An operator step's answer is judged by `result` / `error` / `status`; `expect` only
        // says `any` (judged by the invariants alone), and then nothing else about the answer.
        let operator_expect = match s {
            Step::OperatorInvoke {
                expect,
                result,
                error,
                ..
            }
            | Step::OperatorDelegate {
                expect,
                result,
                error,
                ..
            } => Some((expect, result.is_some() || error.is_some())),
            Step::OperatorCancel { expect, status, .. } => Some((expect, status.is_some())),
            _ => None,
        };
        if let Some((e, judged)) = operator_expect
            && !e.is_unset()
            && (!e.is_any() || judged)
        {
            pending.push((
                at("expect"),
                format!(
                    "{:?}: an operator step's answer is stated with result, error or status",
                    e.0.as_deref().unwrap_or_default()
                ),
                "use expect: any alone, or result / error / status without expect",
            ));
        }
        if let Some(m) = unknown_error_code(error) {
            pending.push((
                at("error"),
                m,
                "use operator_policy, operator_state, operator_outcome_unknown, operator_start_rejected, operator_failed, configuration_or_input … (seed 000 §errors)",
            ));
        }
        match s {
            Step::Join { executor, expect } => {
                // A held lane refuses a join (its holder's lease does not expire on the case
                // clock by itself): a case that expects otherwise blames the implementation for
                // its own mistake.
                if let Some(holder) = &held
                    && matches!(expect.parse(), Ok(Expected::Ok))
                {
                    pending.push((
                        at("expect"),
                        format!("the lane is held by {holder:?}: a second join is refused"),
                        "use replace to take the lane over, release or advance past the lease first, or expect: refused",
                    ));
                }
                executors.insert(executor.clone());
                current = Some(executor.clone());
                held = Some(executor.clone());
            }
            Step::Replace { executor, .. } => {
                executors.insert(executor.clone());
                current = Some(executor.clone());
                held = Some(executor.clone());
            }
            Step::LeaseRelease { executor, .. } if held.as_ref() == Some(executor) => {
                need_exec(&Some(executor.clone()), &mut pending);
                held = None;
            }
            Step::Advance { ms } => {
                held = None;
                if *ms == 0 || *ms > MAX_ADVANCE_MS {
                    pending.push((
                        at("ms"),
                        format!("{ms} ms is not a clock advance"),
                        "advance by 1 ms to 10 years (315360000000 ms)",
                    ));
                }
            }
            Step::HermesRelease {
                reject: Some(status),
                ..
            } if !(400..=599).contains(status) => {
                pending.push((
                    at("reject"),
                    format!("{status} is not a 4xx or 5xx status"),
                    "reject with a status from 400 to 599",
                ));
            }
            Step::Crash {
                executor,
                at_hold: Some(h),
                ..
            } => {
                need_exec(&Some(executor.clone()), &mut pending);
                if !holds.contains(h) {
                    pending.push((
                        at("at_hold"),
                        format!("no earlier provider_fault declares the hold {h:?}"),
                        "declare it with {do: provider_fault, op: create, fault: {type: hold, name: …}}",
                    ));
                }
            }
            Step::Crash { executor, .. }
            | Step::LeaseRefresh { executor, .. }
            | Step::LeaseRelease { executor, .. } => {
                need_exec(&Some(executor.clone()), &mut pending)
            }
            Step::Create {
                occurrence,
                executor,
                amount,
                simulate,
                ..
            } => {
                need_exec(executor, &mut pending);
                if let Some(a) = amount
                    && *a <= 0
                {
                    pending.push((
                        at("amount"),
                        format!("{a} is not a positive amount"),
                        "use minor units above 0",
                    ));
                }
                if let Some(sim) = simulate
                    && !provider_model::payments::profile::STATUSES.contains(&sim.as_str())
                {
                    pending.push((
                        at("simulate"),
                        format!("{sim:?} is not a provider status"),
                        "use one of the profile's native statuses",
                    ));
                }
                occurrences.insert(occurrence.clone());
            }
            Step::Reserve {
                occurrence,
                executor,
                ..
            }
            | Step::Enter {
                occurrence,
                executor,
                ..
            }
            | Step::Send {
                occurrence,
                executor,
                ..
            }
            | Step::Execute {
                occurrence,
                executor,
                ..
            }
            | Step::Adopt {
                occurrence,
                executor,
                ..
            }
            | Step::Reconcile {
                occurrence,
                executor,
                ..
            }
            | Step::AadpExpire {
                occurrence,
                executor,
                ..
            } => {
                need_exec(executor, &mut pending);
                occ_known(occurrence, &mut pending);
            }
            Step::Release {
                occurrence,
                executor,
                reason,
                ..
            } => {
                need_exec(executor, &mut pending);
                occ_known(occurrence, &mut pending);
                if let Some(r) = reason
                    && crate::aoc::ReleaseReason::parse(r).is_none()
                {
                    pending.push((
                        at("reason"),
                        format!("{r:?} is unknown"),
                        "use owner_abandoned, predecessor_never_entered or deadline_expired",
                    ));
                }
            }
            Step::Rebind {
                occurrence,
                executor,
                field,
                ..
            } => {
                need_exec(executor, &mut pending);
                occ_known(occurrence, &mut pending);
                if !FIELDS.contains(&field.as_str()) {
                    pending.push((at("field"), format!("{field:?} is not a binding field"), "use account, environment, native_key, profile_version, status_source, request or provider_ref"));
                }
            }
            Step::Remedy {
                occurrence,
                remedy,
                executor,
                ..
            } => {
                need_exec(executor, &mut pending);
                occ_known(occurrence, &mut pending);
                occurrences.insert(remedy.clone());
            }
            Step::ProviderRelease {
                hold,
                reject,
                forged,
                mismatched,
            } => {
                if !holds.contains(hold) {
                    pending.push((
                        at("hold"),
                        format!("no earlier provider_fault declares the hold {hold:?}"),
                        "declare it with {do: provider_fault, op: create, fault: {type: hold, name: …}}",
                    ));
                }
                if let Some(status) = reject
                    && !(400..=599).contains(status)
                {
                    pending.push((
                        at("reject"),
                        format!("{status} is not a 4xx or 5xx status"),
                        "reject with a status from 400 to 599",
                    ));
                }
                if reject.is_some() && *forged {
                    pending.push((
                        at("forged"),
                        "a rejected request has no reply to forge".into(),
                        "use reject or forged, not both",
                    ));
                }
                if *mismatched && (reject.is_some() || *forged) {
                    pending.push((
                        at("mismatched"),
                        "a mismatched reply is neither rejected nor forged".into(),
                        "use one of reject, forged or mismatched",
                    ));
                }
            }
            Step::ProviderFault { fault, .. } => {
                if let provider_model::payments::faults::Fault::Hold { name } = fault {
                    holds.insert(name.clone());
                }
                let plan = provider_model::payments::faults::Plan {
                    rules: s.payments_rule().into_iter().collect(),
                };
                for m in plan.validate() {
                    pending.push((
                        at("fault"),
                        m.replace("rules[0].", ""),
                        "see the provider's fault vocabulary",
                    ));
                }
            }
            Step::ProviderStatus { occurrence, status } => {
                occ_known(occurrence, &mut pending);
                if !provider_model::payments::profile::STATUSES.contains(&status.as_str()) {
                    pending.push((
                        at("status"),
                        format!("{status:?} is not a provider status"),
                        "use a native status",
                    ));
                }
            }
            Step::ProviderExpire {
                occurrence: Some(o),
            } => occ_known(o, &mut pending),
            Step::Submit { submission, .. } => {
                submissions.insert(submission.clone());
            }
            Step::Claim {
                submission,
                executor,
                ..
            }
            | Step::ResolveUnknown {
                submission,
                executor,
                ..
            } => {
                need_exec(executor, &mut pending);
                if !submissions.contains(submission) {
                    pending.push((
                        at("submission"),
                        format!("submission {submission:?} was not submitted"),
                        "submit it first",
                    ));
                }
            }
            Step::Link {
                submission,
                occurrence,
                executor,
                ..
            } => {
                need_exec(executor, &mut pending);
                occ_known(occurrence, &mut pending);
                if !submissions.contains(submission) {
                    pending.push((
                        at("submission"),
                        format!("submission {submission:?} was not submitted"),
                        "submit it first",
                    ));
                }
            }
            Step::Finish {
                submission,
                end,
                executor,
                ..
            } => {
                need_exec(executor, &mut pending);
                if !submissions.contains(submission) {
                    pending.push((
                        at("submission"),
                        format!("submission {submission:?} was not submitted"),
                        "submit it first",
                    ));
                }
                if crate::aoc::admission::AdmissionEnd::parse(end).is_none() {
                    pending.push((
                        at("end"),
                        format!("{end:?} is unknown"),
                        "use completed, failed, cancelled or not_executed",
                    ));
                }
            }
            Step::Recover { executor, .. } => need_exec(executor, &mut pending),
            Step::OperatorInvoke {
                action,
                objective,
                resume,
                choice,
                result,
                ..
            } => {
                match (objective, resume) {
                    (Some(_), None) => {}
                    (None, Some(src)) => {
                        if !actions.contains(src) {
                            pending.push((
                                at("resume"),
                                format!("action {src:?} was not invoked earlier"),
                                "resume an Action invoked by an earlier step",
                            ));
                        }
                        if !choice
                            .as_deref()
                            .is_some_and(|c| ["once", "session", "always", "deny"].contains(&c))
                        {
                            pending.push((
                                at("choice"),
                                "a resume needs a choice".into(),
                                "use once, session, always or deny",
                            ));
                        }
                    }
                    _ => pending.push((
                        at("objective"),
                        "give exactly one of objective or resume".into(),
                        "set objective, or resume with a choice",
                    )),
                }
                if let Some(d) = unknown_result(result) {
                    pending.push((
                        at("result"),
                        d,
                        "use completed, failed, cancelled or requires_human",
                    ));
                }
                actions.insert(action.clone());
            }
            Step::OperatorConfigure { policy, .. } => {
                let mut base =
                    serde_json::to_value(crate::operator::Policy::default()).unwrap_or_default();
                if let Some(m) = base.as_object_mut() {
                    m.extend(policy.clone());
                }
                if let Err(e) = serde_json::from_value::<crate::operator::Policy>(base) {
                    pending.push((
                        at("policy"),
                        format!("not an operator policy: {e}"),
                        "use the policy fields of seed 000 (delegation_enabled, delegation_capability_prefixes, …)",
                    ));
                }
            }
            Step::OperatorDelegate {
                action,
                approval,
                child,
                result,
                ..
            } => {
                if !approval.as_deref().is_none_or(|a| {
                    ["approved", "none", "unstored", "expired", "other_action"].contains(&a)
                }) {
                    pending.push((
                        at("approval"),
                        format!("{approval:?} is unknown"),
                        "use approved, none, unstored, expired or other_action",
                    ));
                }
                if !child
                    .as_deref()
                    .is_none_or(|c| DELEGATED_CHILD.contains(&c))
                {
                    pending.push((
                        at("child"),
                        format!("{child:?} is unknown"),
                        "use ran, never, altered_contract, forged_owner, identity_drift, tenant_drift or stores_disagree",
                    ));
                }
                if let Some(d) = unknown_result(result) {
                    pending.push((
                        at("result"),
                        d,
                        "use completed, failed, cancelled or requires_human",
                    ));
                }
                actions.insert(action.clone());
            }
            Step::OperatorCancel { action, .. } | Step::OperatorWaitBound { action }
                if !actions.contains(action) =>
            {
                pending.push((
                    at("action"),
                    format!("action {action:?} was not invoked earlier"),
                    "invoke it first",
                ));
            }
            Step::HermesFault { .. } => {
                let plan = provider_model::hermes::faults::Plan {
                    rules: s.hermes_rule().into_iter().collect(),
                };
                for m in plan.validate() {
                    pending.push((
                        at("fault"),
                        m.replace("rules[0].", ""),
                        "see fake-hermes's fault vocabulary",
                    ));
                }
            }
            Step::HermesScript { script } => {
                for d in provider_model::hermes::script::validate(script) {
                    pending.push((
                        at("script"),
                        format!("step {:?} field {:?}: {}", d.step, d.field, d.msg),
                        "fix the script",
                    ));
                }
            }
            Step::Race { steps } => {
                race_steps(i, steps, &executors, &current, &occurrences, &mut pending)
            }
            _ => {}
        }
        for (f, m, fix) in pending {
            d(f, m, fix);
        }
    }
    for (label, e) in &c.expect.occurrences {
        let at = |f: &str| format!("expect.occurrences.{label}.{f}");
        if !occurrences.contains(label) {
            d(
                format!("expect.occurrences.{label}"),
                "no step creates this occurrence".into(),
                "name an occurrence the steps create",
            );
        }
        occurrence_words(e, &at, &mut d);
        if e.any_of.len() == 1 {
            d(
                at("any_of"),
                "one alternative is no choice".into(),
                "list two or more alternatives, or put the fields outside any_of",
            );
        }
        for (i, alt) in e.any_of.iter().enumerate() {
            let at = |f: &str| format!("expect.occurrences.{label}.any_of[{i}].{f}");
            if !alt.any_of.is_empty() {
                d(
                    at("any_of"),
                    "alternatives do not nest".into(),
                    "list every path at one level",
                );
            }
            if alt == &crate::case::OccurrenceExpect::default() {
                d(
                    format!("expect.occurrences.{label}.any_of[{i}]"),
                    "an empty alternative accepts anything".into(),
                    "say what this path must show",
                );
            }
            occurrence_words(alt, &at, &mut d);
        }
    }
    for (label, e) in &c.expect.operators {
        if let Some(st) = &e.status
            && serde_json::from_value::<crate::operator::binding::BindingStatus>(
                serde_json::Value::String(st.clone()),
            )
            .is_err()
        {
            d(
                format!("expect.operators.{label}.status"),
                format!("{st:?} is not a binding status"),
                "use starting, running, waiting_for_approval, cancelling, completed, failed, cancelled or outcome_unknown",
            );
        }
        if !actions.contains(label) {
            d(
                format!("expect.operators.{label}"),
                "no step invokes this Action".into(),
                "name an Action the steps invoke",
            );
        }
    }
    for (sub, state) in &c.expect.admissions {
        if !submissions.contains(sub) {
            d(
                format!("expect.admissions.{sub}"),
                "no step submits this".into(),
                "name a submission the steps submit",
            );
        }
        let ok = ["queued", "started", "unknown"].contains(&state.as_str())
            || state
                .strip_prefix("ended:")
                .is_some_and(|e| crate::aoc::admission::AdmissionEnd::parse(e).is_some());
        if !ok {
            d(
                format!("expect.admissions.{sub}"),
                format!("{state:?} is unknown"),
                "use queued, started, unknown or ended:<end>",
            );
        }
    }
    if let Some(cmp) = &c.expect.composition
        && !["supported", "unsupported"].contains(&cmp.as_str())
    {
        d(
            "expect.composition".into(),
            format!("{cmp:?} is unknown"),
            "use supported or unsupported",
        );
    }
    for (f, m, fix) in super::workflow::validate(c) {
        d(f, m, fix);
    }
    out
}

/// The longest clock advance a step may ask for (ten years): beyond it the case clock would
/// run off the end of time.
const MAX_ADVANCE_MS: u64 = 315_360_000_000;

/// The steps of a race: two or more requests to executors that already joined, each on an
/// occurrence an earlier step created, sent together (so none carries an `expect`, and none runs
/// in the background).
fn race_steps(
    i: usize,
    steps: &[Step],
    executors: &BTreeSet<String>,
    current: &Option<String>,
    occurrences: &BTreeSet<String>,
    pending: &mut Vec<(String, String, &'static str)>,
) {
    if steps.len() < 2 {
        pending.push((
            format!("steps[{i}].steps"),
            format!("{} step(s): a race needs two or more", steps.len()),
            "list the requests that race, e.g. two execute steps on one occurrence",
        ));
    }
    // A race is there to judge AOC-REQ-001: two of its requests must admit one occurrence.
    let mut admitting: BTreeMap<&str, u32> = BTreeMap::new();
    for s in steps {
        if let Step::Enter { occurrence, .. }
        | Step::Send { occurrence, .. }
        | Step::Execute { occurrence, .. } = s
        {
            *admitting.entry(occurrence).or_default() += 1;
        }
    }
    if steps.len() >= 2 && !admitting.values().any(|n| *n > 1) {
        pending.push((
            format!("steps[{i}].steps"),
            "no two of its requests admit the same occurrence, so nothing is raced".into(),
            "race two enter, send or execute steps on one occurrence",
        ));
    }
    for (j, s) in steps.iter().enumerate() {
        let at = |f: &str| format!("steps[{i}].steps[{j}].{f}");
        let (executor, occurrence, expect) = match s {
            Step::Reserve {
                executor,
                occurrence,
                expect,
            }
            | Step::Enter {
                executor,
                occurrence,
                expect,
            }
            | Step::Execute {
                executor,
                occurrence,
                expect,
            }
            | Step::Adopt {
                executor,
                occurrence,
                expect,
            }
            | Step::Reconcile {
                executor,
                occurrence,
                expect,
            }
            | Step::Release {
                executor,
                occurrence,
                expect,
                ..
            } => (executor, occurrence, expect),
            Step::Send {
                executor,
                occurrence,
                expect,
                background,
            } => {
                if *background {
                    pending.push((
                        at("background"),
                        "a racing send is answered in the race".into(),
                        "remove background: true",
                    ));
                }
                (executor, occurrence, expect)
            }
            other => {
                pending.push((
                    at("do"),
                    format!("{:?} cannot race", other.verb()),
                    "race reserve, enter, send, execute, adopt, reconcile or release steps",
                ));
                continue;
            }
        };
        if expect.0.is_some() {
            pending.push((
                at("expect"),
                "which racing request wins depends on the order".into(),
                "remove expect: the race is judged by the history and the provider's ledger",
            ));
        }
        match executor {
            Some(name) if !executors.contains(name) => pending.push((
                at("executor"),
                format!("executor {name:?} has not joined"),
                "join or replace with it before the race",
            )),
            None if current.is_none() => pending.push((
                at("executor"),
                "no executor has joined yet".into(),
                "start with a join step",
            )),
            _ => {}
        }
        if !occurrences.contains(occurrence) {
            pending.push((
                at("occurrence"),
                format!("occurrence {occurrence:?} was not created by an earlier step"),
                "create it before the race",
            ));
        }
    }
}

/// The words of one occurrence expectation (or of one of its alternatives).
fn occurrence_words(
    e: &crate::case::OccurrenceExpect,
    at: &dyn Fn(&str) -> String,
    d: &mut dyn FnMut(String, String, &str),
) {
    for s in e.state.iter().flat_map(|s| s.words()) {
        if State::parse(s).is_none() {
            d(
                at("state"),
                format!("{s:?} is unknown"),
                &format!("use {}, or a list of them", State::listed()),
            );
        }
    }
    if e.state.as_ref().is_some_and(|s| s.words().is_empty()) {
        d(
            at("state"),
            "an empty list accepts nothing".into(),
            "name at least one state",
        );
    }
    if let Some(o) = &e.outcome
        && Outcome::parse(o).is_none()
    {
        d(
            at("outcome"),
            format!("{o:?} is unknown"),
            &format!("use {}", Outcome::listed()),
        );
    }
    if let Some(a) = &e.authority
        && Authority::parse(a).is_none()
    {
        d(
            at("authority"),
            format!("{a:?} is unknown"),
            &format!("use {}", Authority::listed()),
        );
    }
    for f in &e.missing_knowledge {
        if Flag::parse(f).is_none() {
            d(
                at("missing_knowledge"),
                format!("{f:?} is not a missing-knowledge flag"),
                "use a flag name such as transport or unauthenticated",
            );
        }
    }
}
