//! Judging a Hermes Workflow runner (seed 002) from the ground truth of what it reached: the
//! runs fake-hermes started, placed under their step by the correlation id
//! `workflow:<run_id>:<node_id>` (the run's session id), the deliveries the channel took by
//! receipt id, and the run state the runner saved. The runner is never believed about an
//! effect: its state is read against the ledgers.
//!
//! - `workflow_one_run_per_step` (AOC-REQ-010): at most one run per agent step, whatever kills
//!   and resumes came between (a resume adopts or parks a step it launched; it never launches it
//!   again).
//! - `workflow_one_delivery_per_output` (AOC-REQ-010): at most one delivery per output step.
//! - `workflow_cursor_recorded` (AOC-REQ-005): the saved cursor never passed a step whose result
//!   the state does not record (an output, a skip, or a receipt); a step the ledger shows
//!   launched is recorded as an attempt in every state saved after it.
//! - `workflow_outcome_from_ledgers` (AOC-REQ-011): what the state says happened is what the
//!   ledgers show: a receipt `ok: true` was taken by the channel, one `ok: false` was not; an
//!   agent step's recorded output (not a person's answer) is the output of a run fake-hermes
//!   completed under the step's correlation. `ok: null` (unknown) is always honest.
//! - `workflow_state_whole` (AOC-REQ-005, judged by the runner in `runner::workflow`): every
//!   read of the run file, by the runner or a reader beside it, finds a whole state.
//! - `workflow_expected` (the case's requirement): a workflow case's expectations.

use super::{Facts, Finding};
use crate::aoc::requirement::Req;
use crate::case::{OneOrMany, WorkflowExpect};
use crate::workflow::design::PlanStep;
use crate::workflow::run::RunState;
use provider_model::hermes::ledger::Ledger;
use std::collections::BTreeMap;

/// Runs per step of run `run_id` in fake-hermes's ledger, by node id.
pub fn runs_per_step(ledger: &Ledger, run_id: &str) -> BTreeMap<String, Vec<String>> {
    let prefix = format!("workflow:{run_id}:");
    let mut m: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in &ledger.runs {
        if let Some(node) = r.session_id.strip_prefix(&prefix) {
            m.entry(node.to_string())
                .or_default()
                .push(r.run_id.clone());
        }
    }
    m
}

/// `workflow_one_run_per_step`: one fact per agent step of the plan.
pub fn one_run_per_step(
    plan: &[PlanStep],
    ledger: &Ledger,
    run_id: &str,
    facts: &mut Facts,
) -> Vec<Finding> {
    let runs = runs_per_step(ledger, run_id);
    let mut out = Vec::new();
    for s in plan.iter().filter(|s| s.kind == "agent") {
        facts.saw(Req::R010);
        if let Some(r) = runs.get(&s.id).filter(|r| r.len() > 1) {
            out.push(
                Finding::new(
                    "workflow_one_run_per_step",
                    Req::R010,
                    format!(
                        "fake-hermes started {} runs for step {} of run {run_id} (correlation workflow:{run_id}:{}): {} (ground truth): a resume adopts or parks a step it launched, it never launches it again",
                        r.len(),
                        s.id,
                        s.id,
                        r.join(", ")
                    ),
                )
                .about(Some(&s.id)),
            );
        }
    }
    out
}

/// `workflow_one_delivery_per_output`: `taken` is the channel's count by receipt id; one fact
/// per output step that delivers.
pub fn one_delivery_per_output(
    plan: &[PlanStep],
    taken: &BTreeMap<String, u32>,
    run_id: &str,
    facts: &mut Facts,
) -> Vec<Finding> {
    let mut out = Vec::new();
    for s in plan
        .iter()
        .filter(|s| s.kind == "output" && s.node.get("deliver").is_some())
    {
        facts.saw(Req::R010);
        let id = format!("workflow:{run_id}:{}", s.id);
        if let Some(n) = taken.get(&id).filter(|n| **n > 1) {
            out.push(
                Finding::new(
                    "workflow_one_delivery_per_output",
                    Req::R010,
                    format!(
                        "the channel took {n} deliveries for output step {} (receipt {id}) (ground truth): a delivery in flight when the runner stopped is unknown, never sent again",
                        s.id
                    ),
                )
                .about(Some(&s.id)),
            );
        }
    }
    out
}

/// `workflow_cursor_recorded`: a saved state against the plan and the ledger. One fact per
/// state.
pub fn cursor_recorded(
    plan: &[PlanStep],
    st: &RunState,
    ledger: &Ledger,
    facts: &mut Facts,
) -> Vec<Finding> {
    facts.saw(Req::R005);
    let mut out = Vec::new();
    let runs = runs_per_step(ledger, &st.run_id);
    for s in plan.iter().take(st.cursor) {
        let recorded = st.outputs.contains_key(&s.id)
            || st.skipped.contains(&s.id)
            || st.deliveries.iter().any(|r| r.node == s.id);
        if !recorded {
            out.push(
                Finding::new(
                    "workflow_cursor_recorded",
                    Req::R005,
                    format!(
                        "the saved state's cursor ({}) is past step {} but records no result for it (no output, no skip, no receipt)",
                        st.cursor, s.id
                    ),
                )
                .about(Some(&s.id)),
            );
        }
    }
    for (node, r) in &runs {
        if !st.attempts.contains_key(node) {
            out.push(
                Finding::new(
                    "workflow_cursor_recorded",
                    Req::R005,
                    format!(
                        "fake-hermes ran step {node} ({}), but the saved state records no attempt for it: a launch is written before it is made",
                        r.join(", ")
                    ),
                )
                .about(Some(node)),
            );
        }
    }
    out
}

/// `workflow_outcome_from_ledgers`: a saved state's receipts and agent outputs against the
/// channel's and fake-hermes's ledgers. One fact per state.
pub fn outcomes_from_ledgers(
    plan: &[PlanStep],
    st: &RunState,
    ledger: &Ledger,
    channel: &crate::providers::channel::ChannelLedger,
    facts: &mut Facts,
) -> Vec<Finding> {
    facts.saw(Req::R011);
    let mut out = Vec::new();
    let mut said = |node: &str, msg: String| {
        out.push(Finding::new("workflow_outcome_from_ledgers", Req::R011, msg).about(Some(node)))
    };
    let taken = channel.by_id();
    for r in &st.deliveries {
        let n = taken.get(&r.id).copied().unwrap_or(0);
        match r.ok {
            Some(true) if n == 0 => said(
                &r.node,
                format!(
                    "the state says output step {} was delivered (receipt {}), and the channel took nothing under it (ground truth)",
                    r.node, r.id
                ),
            ),
            Some(false) if n > 0 => said(
                &r.node,
                format!(
                    "the state says output step {}'s delivery failed (receipt {}), and the channel took it (ground truth): a delivery whose answer was lost is unknown, not failed",
                    r.node, r.id
                ),
            ),
            _ => {}
        }
    }
    let runs = runs_per_step(ledger, &st.run_id);
    for s in plan.iter().filter(|s| s.kind == "agent") {
        let Some(v) = st.outputs.get(&s.id) else {
            continue;
        };
        if st.answers.contains_key(&s.id) {
            continue;
        }
        let completed: Vec<&String> = runs
            .get(&s.id)
            .into_iter()
            .flatten()
            .filter(|r| ledger.terminal.get(*r).map(String::as_str) == Some("completed"))
            .collect();
        let produced = completed.iter().any(|r| {
            let o = ledger.results.get(*r).and_then(|x| x.output.clone());
            o.as_deref() == v.as_str() || o.map(serde_json::Value::String).as_ref() == Some(v)
        });
        if !produced {
            said(
                &s.id,
                format!(
                    "the state records an output for agent step {} ({}) that no run fake-hermes completed under workflow:{}:{} produced (runs there: {}) (ground truth)",
                    s.id,
                    v.to_string().chars().take(80).collect::<String>(),
                    st.run_id,
                    s.id,
                    runs.get(&s.id).map_or("none".into(), |r| r.join(", "))
                ),
            );
        }
    }
    out
}

/// `workflow_state_whole`: what a reader beside the runner saw of the run file while the runner
/// saved: a read that was not a whole state (`partial`), or new contents in the same file
/// (`in_place`: rewritten where it is, so a read can catch it half written). One fact.
pub fn reader_saw(
    run_id: &str,
    partial: Option<&str>,
    in_place: bool,
    facts: &mut Facts,
) -> Vec<Finding> {
    facts.saw(Req::R005);
    let mut out = Vec::new();
    if let Some(p) = partial {
        out.push(Finding::new(
            "workflow_state_whole",
            Req::R005,
            format!(
                "a reader beside the runner read run {run_id}'s file while it saved and got a partial state ({p}): a state is written to a temp file and renamed over the old one"
            ),
        ));
    }
    if in_place {
        out.push(Finding::new(
            "workflow_state_whole",
            Req::R005,
            format!(
                "run {run_id}'s file took new contents while it stayed the same file: it is rewritten in place, and a reader can see it partial (seed 002: a temp file, then os.replace)"
            ),
        ));
    }
    out
}

/// `workflow_state_whole`: the runner's saved state, which nobody but the runner wrote, cannot
/// be read (`why`).
pub fn state_unreadable(why: &str, facts: &mut Facts) -> Finding {
    facts.saw(Req::R005);
    Finding::new(
        "workflow_state_whole",
        Req::R005,
        format!("the run's saved state cannot be read: {why}"),
    )
}

/// `workflow_state_whole`: a run whose saved state was `how` (missing or corrupt) was not
/// refused; the runner went on, starting `runs` run(s) at fake-hermes.
pub fn started_over(run_id: &str, how: &str, runs: usize, facts: &mut Facts) -> Finding {
    facts.saw(Req::R005);
    Finding::new(
        "workflow_state_whole",
        Req::R005,
        format!(
            "run {run_id}'s saved state was {how}, and the runner went on instead of refusing it (it started {runs} run(s) at fake-hermes): a run it cannot read is named, never started over"
        ),
    )
}

/// `workflow_expected`: a workflow case's expectation, under the requirement the case picks.
pub fn expected(requirement: Req, msg: String, facts: &mut Facts) -> Finding {
    facts.saw(requirement);
    Finding::new("workflow_expected", requirement, msg)
}

/// A workflow case's evidence (in its `check::replay::Tape`): the design and run id, and every
/// look the checkers took, so that `aocheck analyze` derives each finding again.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkflowTape {
    pub design: serde_json::Value,
    pub run_id: String,
    pub looks: Vec<WorkflowLook>,
}

/// What the checkers were given after a step (or at the end of the case), and what they found.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkflowLook {
    pub after_step: Option<usize>,
    /// The run's saved state as read (`Ok(None)`: no file; `Err`: why it could not be read);
    /// not read once the harness damaged it (`damaged`).
    pub state: Result<Option<RunState>, String>,
    pub damaged: bool,
    pub hermes: Ledger,
    pub channel: crate::providers::channel::ChannelLedger,
    pub found: Vec<String>,
    pub facts: BTreeMap<String, u32>,
}

/// Every checker over one look: runs per step and deliveries per output from the ledgers, and,
/// unless the harness damaged it, the saved state against both ledgers (a state that cannot be
/// read fails `workflow_state_whole`).
pub fn judge_look(
    plan: &[PlanStep],
    run_id: &str,
    look: &WorkflowLook,
    facts: &mut Facts,
) -> Vec<Finding> {
    let mut out = one_run_per_step(plan, &look.hermes, run_id, facts);
    out.extend(one_delivery_per_output(
        plan,
        &look.channel.by_id(),
        run_id,
        facts,
    ));
    if look.damaged {
        return out;
    }
    match &look.state {
        Ok(Some(st)) => {
            out.extend(cursor_recorded(plan, st, &look.hermes, facts));
            out.extend(outcomes_from_ledgers(
                plan,
                st,
                &look.hermes,
                &look.channel,
                facts,
            ));
        }
        Ok(None) => {}
        Err(why) => out.push(state_unreadable(why, facts)),
    }
    out
}

/// The run's status as the state file spells it.
pub fn status_word(st: &RunState) -> String {
    serde_json::to_value(st.status)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// Why `st`'s status is none of `want` (`None`: it is one, or nothing is wanted).
pub fn status_differs(want: &Option<OneOrMany>, st: &RunState) -> Option<String> {
    let w = want.as_ref()?;
    let got = status_word(st);
    (!w.words().contains(&got.as_str())).then(|| {
        format!(
            "the run is {got}, not {} (as saved: {})",
            w.words().join(" or "),
            st.error
                .clone()
                .or_else(|| st.pending.as_ref().map(|p| p.to_string()))
                .unwrap_or_default()
        )
    })
}

/// `workflow_expected`: a workflow case's final expectations, against the last state the
/// runner saved (`None`: it saved none that could be read) and the two ledgers; every
/// finding and fact under the case's requirement `req`.
pub fn final_expectations(
    w: &WorkflowExpect,
    last: Option<&RunState>,
    ledger: &Ledger,
    channel: &crate::providers::channel::ChannelLedger,
    (run_id, req): (&str, Req),
    facts: &mut Facts,
) -> Vec<Finding> {
    let mut msgs = Vec::new();
    match last {
        Some(st) => {
            msgs.extend(status_differs(&w.status, st));
            if let Some(want) = &w.skipped {
                let mut a = want.clone();
                let mut b = st.skipped.clone();
                a.sort();
                b.sort();
                if a != b {
                    msgs.push(format!("the run skipped {b:?}, not {a:?}"));
                }
            }
        }
        None if w.status.is_some() || w.skipped.is_some() => {
            msgs.push("the runner saved no state to judge".into())
        }
        None => {}
    }
    let taken = channel.by_id();
    for (node, n) in &w.deliveries {
        let got = taken
            .get(&format!("workflow:{run_id}:{node}"))
            .copied()
            .unwrap_or(0);
        if got != *n {
            msgs.push(format!(
                "the channel took {got} deliveries for {node}, not {n} (ground truth)"
            ));
        }
    }
    let runs = runs_per_step(ledger, run_id);
    for (node, n) in &w.runs {
        let got = runs.get(node).map_or(0, Vec::len) as u32;
        if got != *n {
            msgs.push(format!(
                "fake-hermes started {got} runs for {node}, not {n} (ground truth)"
            ));
        }
    }
    if msgs.is_empty() && w != &WorkflowExpect::default() {
        facts.saw(req);
    }
    msgs.into_iter().map(|m| expected(req, m, facts)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workflow::design::build_run_plan;
    use crate::workflow::run::{Attempt, RunState};
    use provider_model::hermes::ledger::RunStarted;
    use serde_json::json;

    fn plan() -> Vec<PlanStep> {
        build_run_plan(&json!({"nodes": [
            {"id": "start", "type": "trigger"},
            {"id": "ask", "type": "agent", "prompt": "P", "after": ["start"]},
            {"id": "send", "type": "output", "deliver": "notification", "after": ["ask"]},
        ]}))
        .expect("plan")
    }

    fn ledger(sessions: &[&str]) -> Ledger {
        Ledger {
            runs: sessions
                .iter()
                .enumerate()
                .map(|(i, s)| RunStarted::example(&format!("run_{i}"), s))
                .collect(),
            ..Ledger::default()
        }
    }

    /// Both ways: one run per step passes (another run's steps are not this run's); two fail.
    #[rstest::rstest]
    #[case(&["workflow:abcdef:ask", "workflow:ffffff:ask"], false)]
    #[case(&["workflow:abcdef:ask", "workflow:abcdef:ask"], true)]
    fn one_run_per_step_reads_the_correlation(#[case] sessions: &[&str], #[case] fails: bool) {
        let mut facts = Facts::default();
        let f = one_run_per_step(&plan(), &ledger(sessions), "abcdef", &mut facts);
        assert_eq!(f.len(), usize::from(fails), "{f:?}");
        assert!(f.iter().all(|x| x.checker() == "workflow_one_run_per_step"));
        assert_eq!(facts.count(Req::R010), 1);
    }

    #[rstest::rstest]
    #[case(1, false)]
    #[case(2, true)]
    fn one_delivery_per_output_reads_the_channel(#[case] n: u32, #[case] fails: bool) {
        let taken = BTreeMap::from([("workflow:abcdef:send".to_string(), n)]);
        let f = one_delivery_per_output(&plan(), &taken, "abcdef", &mut Facts::default());
        assert_eq!(f.len(), usize::from(fails), "{f:?}");
        assert!(
            f.iter()
                .all(|x| x.checker() == "workflow_one_delivery_per_output")
        );
    }

    /// Both ways: a cursor past a recorded step, with the launch attempted in the state, passes;
    /// a cursor past an unrecorded step, or a run the state never wrote an attempt for, fails.
    #[test]
    fn the_cursor_never_passes_an_unrecorded_step() {
        let p = plan();
        let mut st = RunState::new("abcdef", "x");
        st.cursor = 1;
        st.outputs.insert("ask".into(), json!("done"));
        st.attempts.insert(
            "ask".into(),
            Attempt {
                correlation: "workflow:abcdef:ask".into(),
                launches: 1,
                state: "done".into(),
            },
        );
        let l = ledger(&["workflow:abcdef:ask"]);
        assert!(cursor_recorded(&p, &st, &l, &mut Facts::default()).is_empty());
        let mut skipped_ahead = st.clone();
        skipped_ahead.outputs.clear();
        let f = cursor_recorded(&p, &skipped_ahead, &l, &mut Facts::default());
        assert!(
            f.iter().any(|x| x.checker() == "workflow_cursor_recorded"),
            "{f:?}"
        );
        let mut unwritten = st.clone();
        unwritten.attempts.clear();
        assert_eq!(
            cursor_recorded(&p, &unwritten, &l, &mut Facts::default()).len(),
            1
        );
    }

    /// Both ways: an unknown receipt and a delivered one the channel took pass; a receipt that
    /// says failed while the channel took it, or delivered while it took nothing, fails; an agent
    /// output no completed run produced fails, and a person's answer is not a run's output.
    #[test]
    fn receipts_and_outputs_are_read_against_the_ledgers() {
        use crate::providers::channel::{ChannelLedger, Reply, Taken};
        use crate::workflow::run::Receipt;
        let p = plan();
        let taken = |n: usize| ChannelLedger {
            taken: (0..n)
                .map(|i| Taken {
                    seq: i as u64,
                    id: "workflow:abcdef:send".into(),
                    deliver: "notification".into(),
                    target: None,
                    digest: String::new(),
                    reply: Reply::Lost,
                })
                .collect(),
            refused: 0,
        };
        let receipt = |ok: Option<bool>| Receipt {
            node: "send".into(),
            id: "workflow:abcdef:send".into(),
            deliver: "notification".into(),
            target: None,
            ok,
            detail: None,
        };
        let mut l = ledger(&["workflow:abcdef:ask"]);
        l.terminal.insert("run_0".into(), "completed".into());
        l.results.insert(
            "run_0".into(),
            provider_model::hermes::ledger::RunResult {
                output: Some("done".into()),
                error: None,
            },
        );
        for (ok, n, fails) in [
            (None, 1, false),
            (None, 0, false),
            (Some(true), 1, false),
            (Some(false), 0, false),
            (Some(false), 1, true),
            (Some(true), 0, true),
        ] {
            let mut st = RunState::new("abcdef", "x");
            st.deliveries.push(receipt(ok));
            let f = outcomes_from_ledgers(&p, &st, &l, &taken(n), &mut Facts::default());
            assert_eq!(f.len(), usize::from(fails), "{ok:?} {n}: {f:?}");
            assert!(
                f.iter()
                    .all(|x| x.checker() == "workflow_outcome_from_ledgers")
            );
        }
        let mut st = RunState::new("abcdef", "x");
        st.outputs.insert("ask".into(), json!("done"));
        assert!(outcomes_from_ledgers(&p, &st, &l, &taken(0), &mut Facts::default()).is_empty());
        st.outputs.insert("ask".into(), json!("invented"));
        assert_eq!(
            outcomes_from_ledgers(&p, &st, &l, &taken(0), &mut Facts::default()).len(),
            1
        );
        st.answers
            .insert("ask".into(), json!({"output": "invented"}));
        assert!(outcomes_from_ledgers(&p, &st, &l, &taken(0), &mut Facts::default()).is_empty());
    }

    /// A workflow expectation is a finding of `workflow_expected` under the case's requirement,
    /// and a fact about it; the reader's findings are whole-state findings, none when it saw
    /// whole states in new files.
    #[test]
    fn an_expectation_is_judged_under_the_case_s_requirement() {
        let mut facts = Facts::default();
        let f = expected(Req::R010, "two runs".into(), &mut facts);
        assert_eq!(f.checker(), "workflow_expected");
        assert_eq!(facts.count(Req::R010), 1);
        assert!(reader_saw("abcdef", None, false, &mut facts).is_empty());
        let f = reader_saw("abcdef", Some("3 bytes"), true, &mut facts);
        assert_eq!(f.len(), 2);
        assert!(f.iter().all(|x| x.checker() == "workflow_state_whole"));
        assert_eq!(facts.count(Req::R005), 2);
    }
}
