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

mod effects;
pub use effects::{deliveries_recorded, effect_as_designed, second_attempts};

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

/// The retries an agent step allows (seed 002: 0 to 3; anything else is none).
fn retries(s: &PlanStep) -> usize {
    s.node
        .get("retries")
        .and_then(serde_json::Value::as_u64)
        .map_or(0, |n| n.min(3) as usize)
}

/// `workflow_one_run_per_step`: one fact per agent step of the plan, and one for the ledger's
/// runs as a whole. A step may run again only as a retry: after its run before ended `failed`,
/// and at most `retries` times. Every run fake-hermes started belongs to an agent step's
/// correlation: a run under any other session is an effect no step accounts for.
pub fn one_run_per_step(
    plan: &[PlanStep],
    ledger: &Ledger,
    run_id: &str,
    facts: &mut Facts,
) -> Vec<Finding> {
    let runs = runs_per_step(ledger, run_id);
    let mut out = Vec::new();
    let mut said = |node: &str, msg: String| {
        out.push(
            Finding::new("workflow_one_run_per_step", Req::R010, msg)
                .about((!node.is_empty()).then_some(node)),
        )
    };
    for s in plan.iter().filter(|s| s.kind == "agent") {
        facts.saw(Req::R010);
        let Some(r) = runs.get(&s.id) else { continue };
        let before_failed = r
            .windows(2)
            .all(|w| ledger.terminal.get(&w[0]).map(String::as_str) == Some("failed"));
        if r.len() > 1 + retries(s) || !before_failed {
            said(
                &s.id,
                format!(
                    "fake-hermes started {} runs for step {} of run {run_id} (correlation workflow:{run_id}:{}): {} (ground truth), with {} retr{} allowed{}: a resume adopts or parks a step it launched, it never launches it again",
                    r.len(),
                    s.id,
                    s.id,
                    r.join(", "),
                    retries(s),
                    if retries(s) == 1 { "y" } else { "ies" },
                    if before_failed {
                        ""
                    } else {
                        ", and a run started again before the one before it failed"
                    }
                ),
            );
        }
    }
    facts.saw(Req::R010);
    let steps: Vec<String> = plan
        .iter()
        .filter(|s| s.kind == "agent")
        .map(|s| format!("workflow:{run_id}:{}", s.id))
        .collect();
    for r in ledger
        .runs
        .iter()
        .filter(|r| !steps.contains(&r.session_id))
    {
        said(
            "",
            format!(
                "fake-hermes started run {} under session {:?}, which is no agent step's correlation (workflow:{run_id}:<node>) (ground truth): every run a runner starts is one of its steps'",
                r.run_id, r.session_id
            ),
        );
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
    facts.saw(Req::R010);
    let outputs: Vec<String> = plan
        .iter()
        .filter(|s| s.kind == "output" && s.node.get("deliver").is_some())
        .map(|s| format!("workflow:{run_id}:{}", s.id))
        .collect();
    for (id, n) in taken.iter().filter(|(id, _)| !outputs.contains(id)) {
        out.push(Finding::new(
            "workflow_one_delivery_per_output",
            Req::R010,
            format!(
                "the channel took {n} deliver{} under receipt {id:?}, which is no delivering output step's (workflow:{run_id}:<node>) (ground truth): every delivery a runner makes is one of its output steps'",
                if *n == 1 { "y" } else { "ies" }
            ),
        ));
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
    let said = |out: &mut Vec<Finding>, node: &str, msg: String| {
        out.push(Finding::new("workflow_cursor_recorded", Req::R005, msg).about(Some(node)))
    };
    // A step's result: its output, a skip, or (for an output step that delivers) its receipt
    // under its own id.
    let recorded = |s: &PlanStep| {
        st.outputs.contains_key(&s.id)
            || st.skipped.contains(&s.id)
            // An answer given to an approval or an agent step, where a runner keeps it (D83;
            // that it was given is judged by `workflow_outcome_from_ledgers`).
            || (matches!(s.kind.as_str(), "approval" | "agent") && st.answers.contains_key(&s.id))
            || (s.kind == "output"
                && st
                    .deliveries
                    .iter()
                    .any(|r| r.node == s.id && r.id == st.correlation(&s.id)))
    };
    // The cursor counts the steps the run went past, in the runner's own plan order: seed 002
    // fixes a stable topological order, not which one (docs/decisions.md D83). Whatever the
    // order, a cursor of n needs n steps recorded, and no step is recorded before its parents.
    let done = plan.iter().filter(|s| recorded(s)).count();
    if st.cursor > done {
        let first = plan
            .iter()
            .find(|s| !recorded(s))
            .map_or("?", |s| s.id.as_str());
        said(
            &mut out,
            first,
            format!(
                "the saved state's cursor ({}) is past {} steps, but only {done} record a result (an output, a skip or a receipt under its id): in any order of the plan it passed a step whose result it does not record (the first unrecorded: {first})",
                st.cursor, st.cursor
            ),
        );
    }
    for s in plan.iter().filter(|s| recorded(s)) {
        for p in s.after.iter().filter(|p| plan.iter().any(|q| &q.id == *p)) {
            if !plan.iter().any(|q| &q.id == p && recorded(q)) {
                said(
                    &mut out,
                    &s.id,
                    format!(
                        "the saved state records a result for step {} but none for its parent {p}: no topological order of the plan runs {} first",
                        s.id, s.id
                    ),
                );
            }
        }
    }
    // A skip has a cause (seed 002): a condition false over the outputs recorded, or a parent
    // skipped (skip propagation is transitive).
    for id in &st.skipped {
        let Some(s) = plan.iter().find(|s| &s.id == id) else {
            said(
                &mut out,
                id,
                format!("the saved state skips {id:?}, which is no step of the plan"),
            );
            continue;
        };
        let parent_skipped = s.after.iter().any(|p| st.skipped.contains(p));
        let false_condition = s.kind == "condition"
            && s.node
                .get("expression")
                .and_then(serde_json::Value::as_str)
                .and_then(|e| crate::workflow::design::parse_condition(e).ok())
                .is_some_and(|c| !crate::workflow::run::evaluate(&c, &st.outputs));
        if !parent_skipped && !false_condition {
            said(
                &mut out,
                id,
                format!(
                    "the saved state skips step {id}, but no parent of it is skipped and it is no condition that is false over the outputs recorded: a step is skipped only by a false condition above it (seed 002)"
                ),
            );
        }
    }
    // At rest (parked or ended), the cursor stands exactly after the steps recorded: one that
    // lags behind them hides how far the run went (only a receipt in flight, recorded before
    // its delivery, is ahead of the cursor, and never at rest).
    let at_rest = !matches!(st.status, crate::workflow::run::Status::Running);
    if at_rest && st.cursor < done {
        said(
            &mut out,
            plan.iter()
                .find(|s| recorded(s))
                .map_or("?", |s| s.id.as_str()),
            format!(
                "the saved state is {} with its cursor at {}, but {done} steps record a result: at rest, the cursor stands after the steps recorded",
                status_word(st),
                st.cursor
            ),
        );
    }
    if st.status == crate::workflow::run::Status::Completed {
        let open: Vec<&str> = plan
            .iter()
            .filter(|s| !recorded(s))
            .map(|s| s.id.as_str())
            .collect();
        if !open.is_empty() {
            said(
                &mut out,
                open[0],
                format!(
                    "the saved state says the run completed, and records no result for {}",
                    open.join(", ")
                ),
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

/// Whether `v` is the answer `given` to a step: the answer itself, or what it carries (an
/// approval's `choice`, an agent result's `output` or `structured`). Where and in which form a
/// runner keeps an answer is its own choice (docs/decisions.md D83); that it was given is not.
fn carries(given: &serde_json::Value, v: &serde_json::Value) -> bool {
    given == v
        || ["choice", "output", "structured"]
            .iter()
            .any(|k| given.get(k) == Some(v))
}

/// `workflow_outcome_from_ledgers`: a saved state's receipts, agent outputs and answers against
/// the channel's and fake-hermes's ledgers and the answers the harness gave (`given`, by node).
/// One fact per receipt, per agent or approval step with a recorded result or attempt, and per
/// answer.
pub fn outcomes_from_ledgers(
    plan: &[PlanStep],
    st: &RunState,
    (ledger, channel): (&Ledger, &crate::providers::channel::ChannelLedger),
    given: &BTreeMap<String, serde_json::Value>,
    facts: &mut Facts,
) -> Vec<Finding> {
    outcomes_as_of(plan, st, (ledger, channel), given, false, facts)
}

/// [`outcomes_from_ledgers`]; `later`: the ledgers were read after `st` was saved and may hold
/// what came after it, so only what no later effect can excuse is judged (a receipt `ok: false`
/// is not: a delivery after a proven failure is the runner's right).
fn outcomes_as_of(
    plan: &[PlanStep],
    st: &RunState,
    (ledger, channel): (&Ledger, &crate::providers::channel::ChannelLedger),
    given: &BTreeMap<String, serde_json::Value>,
    later: bool,
    facts: &mut Facts,
) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut said = |node: &str, msg: String| {
        out.push(Finding::new("workflow_outcome_from_ledgers", Req::R011, msg).about(Some(node)))
    };
    let taken = channel.by_id();
    for r in &st.deliveries {
        facts.saw(Req::R011);
        let n = taken.get(&r.id).copied().unwrap_or(0);
        match r.ok {
            Some(true) if n == 0 => said(
                &r.node,
                format!(
                    "the state says output step {} was delivered (receipt {}), and the channel took nothing under it (ground truth)",
                    r.node, r.id
                ),
            ),
            Some(false) if n > 0 && !later => said(
                &r.node,
                format!(
                    "the state says output step {}'s delivery failed (receipt {}), and the channel took it (ground truth): a delivery whose answer was lost is unknown, not failed",
                    r.node, r.id
                ),
            ),
            _ => {}
        }
    }
    // Answers: only the harness gave any, and the state keeps each as given.
    for (node, v) in &st.answers {
        facts.saw(Req::R011);
        if !given.get(node).is_some_and(|g| carries(g, v)) {
            said(
                node,
                format!(
                    "the state records an answer for step {node} ({}) that nobody gave{}",
                    v.to_string().chars().take(80).collect::<String>(),
                    given
                        .get(node)
                        .map(|g| format!(" (the answer given was {g})"))
                        .unwrap_or_default()
                ),
            );
        }
    }
    let runs = runs_per_step(ledger, &st.run_id);
    for s in plan.iter() {
        let recorded = st.outputs.get(&s.id);
        match s.kind.as_str() {
            // An approval's result is the answer given to it.
            "approval" => {
                if let Some(v) = recorded {
                    facts.saw(Req::R011);
                    if !given.get(&s.id).is_some_and(|g| carries(g, v)) {
                        said(
                            &s.id,
                            format!(
                                "the state records a result for approval step {} ({}) that nobody gave{}",
                                s.id,
                                v.to_string().chars().take(80).collect::<String>(),
                                given
                                    .get(&s.id)
                                    .map(|g| format!(" (the answer given was {g})"))
                                    .unwrap_or_default()
                            ),
                        );
                    }
                }
            }
            "agent" => {
                if recorded.is_none() && !st.attempts.contains_key(&s.id) {
                    continue;
                }
                facts.saw(Req::R011);
                let Some(v) = recorded else { continue };
                // A result a person or a session gave is not a run's.
                if given.get(&s.id).is_some_and(|g| carries(g, v)) {
                    continue;
                }
                let produced = runs.get(&s.id).into_iter().flatten().any(|r| {
                    ledger.terminal.get(r).map(String::as_str) == Some("completed")
                        && ledger
                            .results
                            .get(r)
                            .and_then(|x| x.output.as_deref())
                            .is_some_and(|o| v.as_str() == Some(o))
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
            _ => {}
        }
    }
    out
}

/// `workflow_state_whole`: what a reader beside the runner saw of the run file while the runner
/// saved: a read that was not a whole state (`partial`), or new contents in the same file
/// (`in_place`: rewritten where it is, so a read can catch it half written). One fact.
pub fn reader_saw(
    run_id: &str,
    (partial, not_state): (Option<&str>, Option<&str>),
    (in_place, vanished): (bool, bool),
    facts: &mut Facts,
) -> Vec<Finding> {
    facts.saw(Req::R005);
    let mut out = Vec::new();
    let mut said = |msg: String| out.push(Finding::new("workflow_state_whole", Req::R005, msg));
    if let Some(p) = partial {
        said(format!(
            "a reader beside the runner read run {run_id}'s file while it saved and got a partial state ({p}): a state is written to a temp file and renamed over the old one"
        ));
    }
    if let Some(p) = not_state {
        said(format!(
            "a reader beside the runner read a whole JSON document from run {run_id}'s file that is not a run state ({p}): every state a reader can see is one the runner could resume from"
        ));
    }
    if in_place {
        said(format!(
            "run {run_id}'s file took new contents while it stayed the same file: it is rewritten in place, and a reader can see it partial (seed 002: a temp file, then os.replace)"
        ));
    }
    if vanished {
        said(format!(
            "run {run_id}'s file was gone while the runner saved, after a reader had read a whole state from it: a reader never finds the run missing (a temp file, then os.replace)"
        ));
    }
    out
}

/// `workflow_state_whole`: a drive the runner refused (a damaged run, an answer it does not
/// wait for) changed the run file all the same. One fact.
pub fn changed_after_refusal(run_id: &str, facts: &mut Facts) -> Finding {
    facts.saw(Req::R005);
    Finding::new(
        "workflow_state_whole",
        Req::R005,
        format!(
            "the runner refused to go on with run {run_id}, and its run file changed all the same: a refusal leaves the run as it was (it acts on nothing it refused)"
        ),
    )
}

/// `workflow_state_whole`: what a drive said it left (`returned`) against the run file read
/// right after (`saved`): the same state, or a finding. One fact.
pub fn returned_as_saved(
    returned: &RunState,
    saved: Result<&RunState, &str>,
    facts: &mut Facts,
) -> Option<Finding> {
    facts.saw(Req::R005);
    let why = match saved {
        Ok(st) if st == returned => return None,
        Ok(st) => format!(
            "the runner ended its drive saying the run is {} at cursor {}, and its saved state says {} at cursor {}",
            status_word(returned),
            returned.cursor,
            status_word(st),
            st.cursor
        ),
        Err(e) => format!(
            "the runner ended its drive with the run {}, and its saved state cannot be read: {e}",
            status_word(returned)
        ),
    };
    Some(Finding::new(
        "workflow_state_whole",
        Req::R005,
        format!("{why}: what a runner says it left is what it saved"),
    ))
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
    /// The final expectations, judged against the last look.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finals: Option<WorkflowFinals>,
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
    /// The answers the harness gave, by node, up to this look.
    #[serde(default)]
    pub given: BTreeMap<String, serde_json::Value>,
    /// The whole states a reader beside the runner read while the step ran, each once, in the
    /// order read (the canvas shows each of them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub between: Vec<RunState>,
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
    out.extend(second_attempts(&look.channel, run_id, facts));
    if look.damaged {
        return out;
    }
    // Each state saved during the step, judged by what the look's ledgers (read after it) cannot
    // excuse: a cursor past an unrecorded step, a skip without a cause, a completed run with a
    // step unrecorded (the state alone), a receipt or an output no effect backs, an answer
    // nobody gave.
    for st in &look.between {
        out.extend(cursor_recorded(plan, st, &Ledger::default(), facts));
        out.extend(outcomes_as_of(
            plan,
            st,
            (&look.hermes, &look.channel),
            &look.given,
            true,
            facts,
        ));
    }
    match &look.state {
        Ok(Some(st)) => {
            out.extend(cursor_recorded(plan, st, &look.hermes, facts));
            out.extend(deliveries_recorded(plan, st, &look.channel, facts));
            out.extend(effect_as_designed(
                plan,
                st,
                (&look.hermes, &look.channel),
                facts,
            ));
            out.extend(outcomes_from_ledgers(
                plan,
                st,
                (&look.hermes, &look.channel),
                &look.given,
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

/// `workflow_expected`: a workflow case's final expectations, against its closing look (the
/// state the runner saved, as read then, and the two ledgers). What the state shows (status,
/// skips) is judged under the case's requirement `req`; what the ledgers show (runs per agent
/// step, deliveries per output step) under AOC-REQ-010.
pub fn final_expectations(
    w: &WorkflowExpect,
    look: &WorkflowLook,
    (run_id, req): (&str, Req),
    facts: &mut Facts,
) -> Vec<Finding> {
    let mut out = Vec::new();
    let last = match &look.state {
        Ok(Some(st)) if !look.damaged => Some(st),
        _ => None,
    };
    if w.status.is_some() || w.skipped.is_some() {
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
            None => msgs.push("the runner left no saved state to judge".into()),
        }
        if msgs.is_empty() {
            facts.saw(req);
        }
        out.extend(msgs.into_iter().map(|m| expected(req, m, facts)));
    }
    let taken = look.channel.by_id();
    let runs = runs_per_step(&look.hermes, run_id);
    let mut counts = Vec::new();
    for (node, n) in &w.deliveries {
        let got = taken
            .get(&format!("workflow:{run_id}:{node}"))
            .copied()
            .unwrap_or(0);
        counts.push((got != *n).then(|| {
            format!("the channel took {got} deliveries for {node}, not {n} (ground truth)")
        }));
    }
    for (node, n) in &w.runs {
        let got = runs.get(node).map_or(0, Vec::len) as u32;
        counts.push(
            (got != *n).then(|| {
                format!("fake-hermes started {got} runs for {node}, not {n} (ground truth)")
            }),
        );
    }
    for c in counts {
        match c {
            None => facts.saw(Req::R010),
            Some(m) => out.push(expected(Req::R010, m, facts)),
        }
    }
    out
}

/// A workflow case's final expectations as judged (for the evidence).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkflowFinals {
    pub expect: WorkflowExpect,
    /// The requirement the case's expectations on the state are judged under.
    pub requirement: String,
    pub found: Vec<String>,
    pub facts: BTreeMap<String, u32>,
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

    /// Both ways: one run per step passes; two fail, and so does a run under a correlation no
    /// step of this run has (an effect nothing accounts for); a retry after a failed run passes
    /// where the step allows one, and fails where it does not or the run before had not failed.
    #[rstest::rstest]
    #[case(&["workflow:abcdef:ask"], 0, None, false)]
    #[case(&["workflow:abcdef:ask", "workflow:abcdef:ask"], 0, None, true)]
    #[case(&["workflow:abcdef:ask", "workflow:ffffff:ask"], 0, None, true)]
    #[case(&["workflow:abcdef:ask", "workflow:abcdef:ask"], 1, Some("failed"), false)]
    #[case(&["workflow:abcdef:ask", "workflow:abcdef:ask"], 1, Some("completed"), true)]
    #[case(&["workflow:abcdef:ask", "workflow:abcdef:ask"], 0, Some("failed"), true)]
    fn one_run_per_step_reads_the_correlation(
        #[case] sessions: &[&str],
        #[case] retries: u64,
        #[case] first_ended: Option<&str>,
        #[case] fails: bool,
    ) {
        let mut facts = Facts::default();
        let p = build_run_plan(&json!({"nodes": [
            {"id": "start", "type": "trigger"},
            {"id": "ask", "type": "agent", "prompt": "P", "retries": retries, "after": ["start"]},
        ]}))
        .expect("plan");
        let mut l = ledger(sessions);
        if let Some(end) = first_ended {
            l.terminal.insert("run_0".into(), end.into());
        }
        let f = one_run_per_step(&p, &l, "abcdef", &mut facts);
        assert_eq!(f.len(), usize::from(fails), "{f:?}");
        assert!(f.iter().all(|x| x.checker() == "workflow_one_run_per_step"));
        assert_eq!(facts.count(Req::R010), 2);
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

    /// The cursor is read in any topological order of the plan (D83), both ways: a runner that
    /// ran the second of two independent steps first (cursor 1, that step recorded) passes; a
    /// cursor past more steps than are recorded fails, and so does a step recorded before its
    /// parent (no order runs it first).
    #[test]
    fn the_cursor_is_read_in_any_topological_order() {
        let p = build_run_plan(&json!({"nodes": [
            {"id": "start", "type": "trigger"},
            {"id": "a", "type": "condition", "expression": "out.start.x == 1", "after": ["start"]},
            {"id": "b", "type": "condition", "expression": "out.start.x == 1", "after": ["start"]},
            {"id": "send", "type": "output", "deliver": "notification", "after": ["a", "b"]},
        ]}))
        .expect("plan");
        assert_eq!(p[0].id, "a", "the reference's own order runs a first");
        let l = Ledger::default();
        let judged = |st: &RunState| cursor_recorded(&p, st, &l, &mut Facts::default());
        let mut other_order = RunState::new("abcdef", "x");
        other_order.cursor = 1;
        other_order.outputs.insert("b".into(), json!(true));
        assert!(
            judged(&other_order).is_empty(),
            "{:?}",
            judged(&other_order)
        );
        let mut past = other_order.clone();
        past.cursor = 2;
        assert_eq!(judged(&past).len(), 1, "{:?}", judged(&past));
        let mut before_parent = other_order.clone();
        before_parent.outputs.insert("send".into(), json!({}));
        before_parent.cursor = 2;
        let f = judged(&before_parent);
        assert!(f.len() == 1 && f[0].line().contains("parent a"), "{f:?}");
    }

    /// Both ways: a skip under a false condition (and below it) passes, a skip without a cause
    /// fails; a completed run with every step recorded passes, one with a step unrecorded fails;
    /// a receipt counts for its own output step only; a delivery under no output step's receipt
    /// id fails.
    #[test]
    fn skips_need_a_cause_and_a_completed_run_records_every_step() {
        let p = build_run_plan(&json!({"nodes": [
            {"id": "start", "type": "trigger"},
            {"id": "gate", "type": "condition", "expression": "out.start.x == 1", "after": ["start"]},
            {"id": "ask", "type": "agent", "prompt": "P", "after": ["gate"]},
            {"id": "send", "type": "output", "deliver": "notification", "after": ["ask"]},
        ]}))
        .expect("plan");
        let l = Ledger::default();
        let judged = |st: &RunState| cursor_recorded(&p, st, &l, &mut Facts::default());
        let mut st = RunState::new("abcdef", "x");
        st.cursor = 3;
        st.skipped = vec!["gate".into(), "ask".into(), "send".into()];
        st.status = crate::workflow::run::Status::Completed;
        assert!(judged(&st).is_empty(), "{:?}", judged(&st));
        // The agent step skipped, though its parent was not.
        let mut no_cause = st.clone();
        no_cause.skipped = vec!["ask".into(), "send".into()];
        no_cause.outputs.insert("gate".into(), json!(true));
        assert!(
            judged(&no_cause)
                .iter()
                .any(|f| f.line().contains("no parent of it is skipped")),
            "{:?}",
            judged(&no_cause)
        );
        // Completed, with the output step's result missing (a receipt of another node's).
        let mut open = st.clone();
        open.skipped = vec!["gate".into(), "ask".into()];
        open.cursor = 2;
        open.deliveries.push(crate::workflow::run::Receipt {
            node: "send".into(),
            id: "workflow:abcdef:other".into(),
            deliver: "notification".into(),
            target: None,
            ok: Some(true),
            detail: None,
        });
        assert!(
            judged(&open).iter().any(|f| f
                .line()
                .contains("completed, and records no result for send")),
            "{:?}",
            judged(&open)
        );
        let stray = BTreeMap::from([("workflow:abcdef:other".to_string(), 1)]);
        let f = one_delivery_per_output(&p, &stray, "abcdef", &mut Facts::default());
        assert_eq!(f.len(), 1, "{f:?}");
    }

    fn taken(
        id: &str,
        deliver: &str,
        target: Option<&str>,
        payload: &serde_json::Value,
        seq: u64,
        reply: crate::providers::channel::Reply,
    ) -> crate::providers::channel::Taken {
        crate::providers::channel::Taken {
            seq,
            id: id.into(),
            deliver: deliver.into(),
            target: target.map(str::to_string),
            digest: crate::providers::channel::digest(payload),
            reply,
        }
    }

    /// `workflow_effect_as_designed`, both ways: a run asked the step's prompt and a delivery
    /// where the design says with what the state collected pass; a run asked something else, a
    /// delivery to another target, a payload other than the one collected, and a collection
    /// that is not what the parents recorded each fail.
    #[test]
    fn the_effect_is_the_one_the_design_asks_for() {
        use crate::providers::channel::{ChannelLedger, Reply};
        let p = build_run_plan(&json!({"nodes": [
            {"id": "start", "type": "trigger"},
            {"id": "ask", "type": "agent", "prompt": "Draft it", "after": ["start"]},
            {"id": "send", "type": "output", "deliver": "channel", "target": "chat:x", "after": ["ask"]},
        ]}))
        .expect("plan");
        let mut l = ledger(&["workflow:abcdef:ask"]);
        l.runs[0].prompt = "Draft it\n\nContext: {}".into();
        let mut st = RunState::new("abcdef", "x");
        st.outputs.insert("ask".into(), json!("done"));
        let collected = json!({"ask": "done"});
        st.outputs.insert("send".into(), collected.clone());
        let channel = |target: &str, payload: &serde_json::Value| ChannelLedger {
            taken: vec![taken(
                "workflow:abcdef:send",
                "channel",
                Some(target),
                payload,
                1,
                Reply::Answered,
            )],
            ..ChannelLedger::default()
        };
        let judged = |l: &Ledger, c: &ChannelLedger, st: &RunState| {
            effect_as_designed(&p, st, (l, c), &mut Facts::default())
        };
        assert!(judged(&l, &channel("chat:x", &collected), &st).is_empty());
        // In flight: nothing collected yet, the parents' outputs are what goes.
        let mut in_flight = st.clone();
        in_flight.outputs.remove("send");
        assert!(judged(&l, &channel("chat:x", &collected), &in_flight).is_empty());
        let mut asked_else = l.clone();
        asked_else.runs[0].prompt = "Say something nice".into();
        let f = judged(&asked_else, &channel("chat:x", &collected), &st);
        assert!(
            f.len() == 1 && f[0].checker() == "workflow_effect_as_designed",
            "{f:?}"
        );
        assert_eq!(judged(&l, &channel("chat:y", &collected), &st).len(), 1);
        assert_eq!(
            judged(&l, &channel("chat:x", &json!({"ask": "INVENTED"})), &st).len(),
            1
        );
        let mut invented = st.clone();
        invented
            .outputs
            .insert("send".into(), json!({"ask": "INVENTED"}));
        let f = judged(
            &l,
            &channel("chat:x", &json!({"ask": "INVENTED"})),
            &invented,
        );
        assert!(
            f.iter()
                .any(|x| x.line().contains("not what that parent recorded")),
            "{f:?}"
        );
    }

    /// Both ways: a delivery the channel took or refused has its receipt in the state, and was
    /// sent after its parents were recorded; a delivery with no receipt, or before its parent,
    /// fails.
    #[test]
    fn every_delivery_the_channel_saw_is_recorded() {
        use crate::providers::channel::{ChannelLedger, Reply, Untaken};
        use crate::workflow::run::Receipt;
        let p = plan();
        let mut st = RunState::new("abcdef", "x");
        st.outputs.insert("ask".into(), json!("done"));
        st.deliveries.push(Receipt {
            node: "send".into(),
            id: "workflow:abcdef:send".into(),
            deliver: "notification".into(),
            target: None,
            ok: Some(false),
            detail: None,
        });
        let refused = ChannelLedger {
            untaken: vec![Untaken {
                seq: 1,
                id: "workflow:abcdef:send".into(),
                status: Some(422),
            }],
            ..ChannelLedger::default()
        };
        let judged = |st: &RunState, c: &ChannelLedger| {
            deliveries_recorded(&p, st, c, &mut Facts::default())
        };
        assert!(judged(&st, &refused).is_empty());
        let mut none = st.clone();
        none.deliveries.clear();
        let f = judged(&none, &refused);
        assert!(
            f.len() == 1 && f[0].checker() == "workflow_cursor_recorded",
            "{f:?}"
        );
        let took = ChannelLedger {
            taken: vec![taken(
                "workflow:abcdef:send",
                "notification",
                None,
                &json!({}),
                1,
                Reply::Answered,
            )],
            ..ChannelLedger::default()
        };
        let mut early = st.clone();
        early.outputs.clear();
        assert!(
            judged(&early, &took)
                .iter()
                .any(|x| x.line().contains("parent"))
        );
    }

    /// Both ways: after a 4xx refusal a second request is a runner's right; after a drop, a
    /// 5xx or a delivery whose answer was lost it is a second attempt, whatever came of it.
    #[test]
    fn a_request_after_an_unknown_fate_is_a_second_attempt() {
        use crate::providers::channel::{ChannelLedger, Reply, Untaken};
        let id = "workflow:abcdef:send";
        let then_taken = |status: Option<u16>| ChannelLedger {
            untaken: vec![Untaken {
                seq: 1,
                id: id.into(),
                status,
            }],
            taken: vec![taken(
                id,
                "notification",
                None,
                &json!({}),
                2,
                Reply::Answered,
            )],
            ..ChannelLedger::default()
        };
        let judged = |c: &ChannelLedger| second_attempts(c, "abcdef", &mut Facts::default());
        assert!(judged(&then_taken(Some(422))).is_empty());
        let f = judged(&then_taken(None));
        assert!(
            f.len() == 1 && f[0].checker() == "workflow_one_delivery_per_output",
            "{f:?}"
        );
        assert_eq!(judged(&then_taken(Some(503))).len(), 1);
        let lost_then_refused = ChannelLedger {
            taken: vec![taken(id, "notification", None, &json!({}), 1, Reply::Lost)],
            untaken: vec![Untaken {
                seq: 2,
                id: id.into(),
                status: Some(422),
            }],
            ..ChannelLedger::default()
        };
        assert_eq!(judged(&lost_then_refused).len(), 1);
    }

    /// Both ways: at rest, a cursor that stands after the steps recorded passes; one that lags
    /// behind them fails; while running (between saves) it may.
    #[test]
    fn at_rest_the_cursor_stands_after_the_steps_recorded() {
        let p = plan();
        let l = ledger(&["workflow:abcdef:ask"]);
        let mut st = RunState::new("abcdef", "x");
        st.outputs.insert("ask".into(), json!("done"));
        st.attempts
            .insert("ask".into(), crate::workflow::run::Attempt::default());
        st.cursor = 1;
        st.status = crate::workflow::run::Status::AwaitingApproval;
        assert!(cursor_recorded(&p, &st, &l, &mut Facts::default()).is_empty());
        st.cursor = 0;
        let f = cursor_recorded(&p, &st, &l, &mut Facts::default());
        assert!(f.len() == 1 && f[0].line().contains("at rest"), "{f:?}");
        st.status = crate::workflow::run::Status::Running;
        assert!(cursor_recorded(&p, &st, &l, &mut Facts::default()).is_empty());
    }

    /// Both ways: an approval's recorded result is the answer given (as given, or its choice);
    /// another choice is an invented outcome.
    #[test]
    fn an_approval_records_the_choice_given() {
        let p = build_run_plan(&json!({"nodes": [
            {"id": "start", "type": "trigger"},
            {"id": "ok", "type": "approval", "question": "Ship?", "after": ["start"]},
        ]}))
        .expect("plan");
        let l = Ledger::default();
        let c = crate::providers::channel::ChannelLedger::default();
        let given = BTreeMap::from([("ok".to_string(), json!({"choice": "approve"}))]);
        let judged = |v: serde_json::Value| {
            let mut st = RunState::new("abcdef", "x");
            st.outputs.insert("ok".into(), v);
            outcomes_from_ledgers(&p, &st, (&l, &c), &given, &mut Facts::default())
        };
        assert!(judged(json!({"choice": "approve"})).is_empty());
        assert!(judged(json!("approve")).is_empty());
        assert_eq!(judged(json!({"choice": "reject"})).len(), 1);
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
            ..ChannelLedger::default()
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
            let none = BTreeMap::new();
            let f = outcomes_from_ledgers(&p, &st, (&l, &taken(n)), &none, &mut Facts::default());
            assert_eq!(f.len(), usize::from(fails), "{ok:?} {n}: {f:?}");
            assert!(
                f.iter()
                    .all(|x| x.checker() == "workflow_outcome_from_ledgers")
            );
        }
        let judged = |st: &RunState, given: &BTreeMap<String, serde_json::Value>| {
            outcomes_from_ledgers(&p, st, (&l, &taken(0)), given, &mut Facts::default())
        };
        let nobody = BTreeMap::new();
        let mut st = RunState::new("abcdef", "x");
        st.outputs.insert("ask".into(), json!("done"));
        assert!(judged(&st, &nobody).is_empty());
        st.outputs.insert("ask".into(), json!("invented"));
        assert_eq!(judged(&st, &nobody).len(), 1);
        // A result given by the harness (as an answer) is not a run's output …
        let answer = json!({"output": "invented"});
        st.answers.insert("ask".into(), answer.clone());
        let given = BTreeMap::from([("ask".to_string(), answer)]);
        assert!(judged(&st, &given).is_empty());
        // … and an answer nobody gave is an invented outcome, whatever it says.
        let f = judged(&st, &nobody);
        assert!(f.iter().any(|x| x.line().contains("nobody gave")), "{f:?}");
        // Where and in which form a runner keeps an answer is its choice (D83): the result
        // given, kept as what it carries and only in `answers`, passes; another value fails.
        let mut kept = RunState::new("abcdef", "x");
        kept.answers.insert("ask".into(), json!("invented"));
        assert!(
            judged(&kept, &given).is_empty(),
            "{:?}",
            judged(&kept, &given)
        );
        kept.answers.insert("ask".into(), json!("other"));
        assert_eq!(judged(&kept, &given).len(), 1);
        let mut output_only = RunState::new("abcdef", "x");
        output_only.outputs.insert("ask".into(), json!("invented"));
        assert!(judged(&output_only, &given).is_empty());
    }

    /// Both ways: a drive that says it left the state it saved passes; one that says another,
    /// or whose state cannot be read, fails.
    #[test]
    fn a_drive_leaves_what_it_saved() {
        let st = RunState::new("abcdef", "x");
        let mut facts = Facts::default();
        assert!(returned_as_saved(&st, Ok(&st), &mut facts).is_none());
        let mut other = st.clone();
        other.status = crate::workflow::run::Status::Completed;
        let f = returned_as_saved(&other, Ok(&st), &mut facts).expect("a finding");
        assert_eq!(f.checker(), "workflow_state_whole");
        assert!(returned_as_saved(&st, Err("no file"), &mut facts).is_some());
        assert_eq!(facts.count(Req::R005), 3);
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
        assert!(reader_saw("abcdef", (None, None), (false, false), &mut facts).is_empty());
        assert_eq!(
            reader_saw(
                "abcdef",
                (None, Some("9 bytes")),
                (false, false),
                &mut facts
            )
            .len(),
            1
        );
        let f = reader_saw("abcdef", (Some("3 bytes"), None), (true, true), &mut facts);
        assert_eq!(f.len(), 3);
        assert!(f.iter().all(|x| x.checker() == "workflow_state_whole"));
        assert_eq!(facts.count(Req::R005), 3);
    }
}
