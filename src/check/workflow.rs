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

use super::{Facts, Finding};
use crate::aoc::requirement::Req;
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
}
