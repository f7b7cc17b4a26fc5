//! Seed 002's sequential runner as a pure state machine: the run state (`RunState`, JSON as the
//! seed shows it), one step decided at a time ([`next`]), and what the host reports back
//! ([`agent_returned`], [`agent_failed`], [`delivered`], [`answer`]). The host does every I/O:
//! it saves the state after each decision (atomically: a temp file in the folder, then a
//! rename), and only then performs the decision's effect.
//!
//! The continuity rule, one level above the AOC draft: an effect is written into the state
//! before it is performed, so a runner killed at any point resumes knowing what it may have done.
//! An agent step's launch is recorded in `attempts` (its correlation id
//! `workflow:<run_id>:<node_id>`) before the spawn seam is called; a delivery's receipt is
//! recorded in flight (`ok: null`) before the message goes out. A resume that finds an attempt
//! with no result never launches again: it parks the step at `awaiting_agent`, saying that a run
//! may exist under that correlation (seed 002's "nothing is guessed"). A resume that finds a
//! receipt in flight never delivers again: the receipt stays `ok: null`, marked unknown, and the
//! run goes on (a delivery's failure never fails a run). Where seed 002 is silent (how a resume
//! finds an earlier run) this is the reading that fails closed (docs/decisions.md D81).

use super::design::{Condition, PlanStep, parse_condition};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// A run's status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Running,
    AwaitingAgent,
    AwaitingApproval,
    Completed,
    Failed,
}

/// An agent step's launch, recorded before the seam is called. Read from another runner's
/// state, only its presence is judged (docs/sut-protocol.md): every member may be missing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Attempt {
    /// `workflow:<run_id>:<node_id>`.
    pub correlation: String,
    /// Launches recorded for the step (a retry after a definitive failure is another).
    pub launches: u32,
    /// `launching` until its result is recorded, then `done`; `failed` after a definitive
    /// failure.
    pub state: String,
}

impl Default for Attempt {
    fn default() -> Self {
        Attempt {
            correlation: String::new(),
            launches: 0,
            state: "launching".into(),
        }
    }
}

/// A delivery's receipt: `ok` is `None` while it is in flight or when its fate is unknown.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Receipt {
    pub node: String,
    /// `workflow:<run_id>:<node_id>`: one delivery per output step, whatever resumes.
    pub id: String,
    #[serde(default)]
    pub deliver: String,
    #[serde(default)]
    pub target: Option<String>,
    pub ok: Option<bool>,
    #[serde(default)]
    pub detail: Option<String>,
}

/// The run state on disk (seed 002's fields).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunState {
    pub run_id: String,
    pub name: String,
    /// The index of the next step of the plan.
    pub cursor: usize,
    pub status: Status,
    pub outputs: BTreeMap<String, Value>,
    /// A list, not a set, so the state stays JSON.
    pub skipped: Vec<String>,
    pub pending: Option<Value>,
    pub error: Option<String>,
    pub answers: BTreeMap<String, Value>,
    pub deliveries: Vec<Receipt>,
    pub attempts: BTreeMap<String, Attempt>,
}

impl RunState {
    /// A new run of the design `name`.
    pub fn new(run_id: &str, name: &str) -> RunState {
        RunState {
            run_id: run_id.to_string(),
            name: name.to_string(),
            cursor: 0,
            status: Status::Running,
            outputs: BTreeMap::new(),
            skipped: Vec::new(),
            pending: None,
            error: None,
            answers: BTreeMap::new(),
            deliveries: Vec::new(),
            attempts: BTreeMap::new(),
        }
    }
    /// The correlation id of a step's agent run (and of an output's delivery).
    pub fn correlation(&self, node: &str) -> String {
        format!("workflow:{}:{node}", self.run_id)
    }
}

/// An agent step to launch through the spawn seam.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Launch {
    pub node: String,
    pub prompt: String,
    /// The parents' outputs, by id.
    pub context: Value,
    pub correlation: String,
}

/// An output step's delivery.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Delivery {
    pub node: String,
    pub id: String,
    pub deliver: String,
    pub target: Option<String>,
    pub payload: Value,
}

/// What the host does next. After every one: save the state; then perform the effect, if any.
#[derive(Clone, Debug, PartialEq)]
pub enum Next {
    /// A step was decided with no effect (skipped, a condition, an output collected): save and
    /// call [`next`] again.
    Stepped,
    /// Launch this agent step; its attempt is in the state already.
    Launch(Launch),
    /// Deliver this output; its receipt is in the state already, in flight.
    Deliver(Delivery),
    /// The run waits (`awaiting_agent` or `awaiting_approval`; `pending` says for what).
    Parked,
    /// The run is over (`completed` or `failed`).
    Finished,
}

/// Decides the run's next step. `seam`: whether an agent step can be launched (without one the
/// run parks at `awaiting_agent`, seed 002).
pub fn next(plan: &[PlanStep], st: &mut RunState, seam: bool) -> Next {
    decide(plan, st, seam, None)
}

/// [`next`] with one deliberate defect (test builds only).
#[cfg(feature = "test-knobs")]
pub fn next_broken(
    plan: &[PlanStep],
    st: &mut RunState,
    seam: bool,
    d: super::WorkflowDefect,
) -> Next {
    decide(plan, st, seam, Some(d))
}

fn decide(
    plan: &[PlanStep],
    st: &mut RunState,
    seam: bool,
    defect: Option<super::WorkflowDefect>,
) -> Next {
    if matches!(st.status, Status::Completed | Status::Failed) {
        return Next::Finished;
    }
    if matches!(st.status, Status::AwaitingAgent | Status::AwaitingApproval) {
        return Next::Parked;
    }
    let Some(step) = plan.get(st.cursor) else {
        st.status = Status::Completed;
        st.pending = None;
        return Next::Finished;
    };
    let id = step.id.clone();
    // Skip propagation: a step with a skipped parent is skipped.
    if step.after.iter().any(|p| st.skipped.contains(p)) {
        st.skipped.push(id);
        st.cursor += 1;
        return Next::Stepped;
    }
    match step.kind.as_str() {
        "agent" => agent(
            step,
            st,
            seam,
            defect == Some(super::WorkflowDefect::RelaunchOnResume),
        ),
        "condition" => {
            let holds = text(&step.node, "expression")
                .and_then(|e| parse_condition(&e).ok())
                .is_some_and(|c| evaluate(&c, &st.outputs));
            if holds {
                st.outputs.insert(id, Value::Bool(true));
            } else {
                st.skipped.push(id);
            }
            st.cursor += 1;
            Next::Stepped
        }
        "approval" => {
            if let Some(a) = st.answers.get(&id).cloned() {
                st.outputs.insert(id, a);
                st.cursor += 1;
                return Next::Stepped;
            }
            st.status = Status::AwaitingApproval;
            st.pending = Some(json!({
                "node": id,
                "kind": "approval",
                "question": text(&step.node, "question").unwrap_or_default(),
                "options": step.node.get("options").cloned().unwrap_or(json!(["approve", "reject"])),
                "context": context(step, st),
            }));
            Next::Parked
        }
        "output" => output(step, st),
        other => {
            st.status = Status::Failed;
            st.error = Some(format!("step {id}: unknown kind {other:?}"));
            Next::Finished
        }
    }
}

fn agent(step: &PlanStep, st: &mut RunState, seam: bool, relaunch: bool) -> Next {
    let id = step.id.clone();
    let correlation = st.correlation(&id);
    let prompt = text(&step.node, "prompt").unwrap_or_default();
    match st.attempts.get(&id).map(|a| a.state.as_str()) {
        // Launched before and its result never recorded: a run may exist under the
        // correlation. Never launched again; the step waits for its result to be given.
        Some("launching") if !relaunch => {
            st.status = Status::AwaitingAgent;
            st.pending = Some(json!({
                "node": id,
                "kind": "agent",
                "prompt": prompt,
                "context": context(step, st),
                "correlation": correlation,
                "unknown": true,
                "reason": "this step was launched and its result was not recorded: a run may exist under its correlation id; it is not launched again",
            }));
            return Next::Parked;
        }
        Some("done") => {
            st.cursor += 1;
            return Next::Stepped;
        }
        _ => {}
    }
    if !seam {
        st.status = Status::AwaitingAgent;
        st.pending = Some(json!({
            "node": id, "kind": "agent", "prompt": prompt, "context": context(step, st),
            "correlation": correlation,
        }));
        return Next::Parked;
    }
    let launches = st.attempts.get(&id).map_or(0, |a| a.launches) + 1;
    st.attempts.insert(
        id.clone(),
        Attempt {
            correlation: correlation.clone(),
            launches,
            state: "launching".into(),
        },
    );
    Next::Launch(Launch {
        node: id,
        prompt,
        context: context(step, st),
        correlation,
    })
}

fn output(step: &PlanStep, st: &mut RunState) -> Next {
    let id = step.id.clone();
    let payload = context(step, st);
    let rid = st.correlation(&id);
    if let Some(r) = st.deliveries.iter_mut().find(|r| r.id == rid) {
        // A receipt from before: in flight when the runner stopped, its fate is unknown; it is
        // never sent again.
        if r.ok.is_none() && r.detail.is_none() {
            r.detail = Some(
                "in flight when the runner stopped: its outcome is unknown, and it is not sent again"
                    .into(),
            );
        }
        st.outputs.insert(id, payload);
        st.cursor += 1;
        return Next::Stepped;
    }
    let Some(deliver) = text(&step.node, "deliver") else {
        st.outputs.insert(id, payload);
        st.cursor += 1;
        return Next::Stepped;
    };
    let target = text(&step.node, "target");
    st.deliveries.push(Receipt {
        node: id.clone(),
        id: rid.clone(),
        deliver: deliver.clone(),
        target: target.clone(),
        ok: None,
        detail: None,
    });
    Next::Deliver(Delivery {
        node: id,
        id: rid,
        deliver,
        target,
        payload,
    })
}

/// An agent step's result: `structured` if the key is there, else `output` if it is there,
/// else `""` (key presence, not truthiness: `0`, `false` and `{}` are results).
pub fn agent_returned(plan: &[PlanStep], st: &mut RunState, node: &str, result: &Value) {
    let out = match result {
        Value::Object(m) if m.contains_key("structured") => m["structured"].clone(),
        Value::Object(m) if m.contains_key("output") => m["output"].clone(),
        _ => Value::String(String::new()),
    };
    st.outputs.insert(node.to_string(), out);
    if let Some(a) = st.attempts.get_mut(node) {
        a.state = "done".into();
    }
    resume_after(plan, st, node);
}

/// An agent step failed and the seam says so definitively (the run ended failed at the
/// provider): another launch while the step's `retries` allow, else the run fails. An
/// ambiguous failure is not reported here: the attempt stays `launching`.
pub fn agent_failed(plan: &[PlanStep], st: &mut RunState, node: &str, error: &str) {
    let retries = plan
        .iter()
        .find(|s| s.id == node)
        .and_then(|s| s.node.get("retries"))
        .and_then(Value::as_u64)
        .unwrap_or(0) as u32;
    let launches = st.attempts.get(node).map_or(1, |a| a.launches);
    if let Some(a) = st.attempts.get_mut(node) {
        a.state = "failed".into();
    }
    if launches > retries {
        st.status = Status::Failed;
        st.error = Some(format!("step {node}: {error}"));
    }
}

/// A delivery's answer: delivered, refused (`Some(false)`: recorded, and the run goes on), or
/// none came (`None`: it may have been delivered; the receipt stays `ok: null` with why, and it
/// is never sent again).
pub fn delivered(
    plan: &[PlanStep],
    st: &mut RunState,
    node: &str,
    ok: Option<bool>,
    detail: Option<String>,
) {
    let rid = st.correlation(node);
    if let Some(r) = st.deliveries.iter_mut().find(|r| r.id == rid) {
        r.ok = ok;
        r.detail = detail;
    }
    if let Some(step) = plan.iter().find(|s| s.id == node) {
        let payload = context(step, st);
        st.outputs.insert(node.to_string(), payload);
    }
    resume_after(plan, st, node);
}

/// The answer to a parked step: an approval's choice, or an agent step's result given by a
/// person or a cron session (`workflow_design_respond`). `Err` when the run waits for nothing,
/// or for another step.
pub fn answer(
    plan: &[PlanStep],
    st: &mut RunState,
    node: &str,
    value: Value,
) -> Result<(), String> {
    let waiting = st
        .pending
        .as_ref()
        .and_then(|p| p.get("node"))
        .and_then(Value::as_str)
        .map(str::to_string);
    if waiting.as_deref() != Some(node) {
        return Err(format!(
            "the run waits for {}, not {node:?}",
            waiting.map_or("nothing".to_string(), |w| format!("{w:?}"))
        ));
    }
    match st.status {
        Status::AwaitingApproval => {
            st.answers.insert(node.to_string(), value.clone());
            st.outputs.insert(node.to_string(), value);
            resume_after(plan, st, node);
            Ok(())
        }
        Status::AwaitingAgent => {
            st.answers.insert(node.to_string(), value.clone());
            agent_returned(plan, st, node, &value);
            Ok(())
        }
        _ => Err("the run is not waiting".into()),
    }
}

/// A step's result recorded: the cursor moves past it (only past the step it records) and the
/// run runs again.
fn resume_after(plan: &[PlanStep], st: &mut RunState, node: &str) {
    if plan.get(st.cursor).is_some_and(|s| s.id == node) {
        st.cursor += 1;
    }
    st.status = Status::Running;
    st.pending = None;
}

/// The parents' outputs, by id (a skipped parent has none).
fn context(step: &PlanStep, st: &RunState) -> Value {
    let mut m = Map::new();
    for p in &step.after {
        if let Some(v) = st.outputs.get(p) {
            m.insert(p.clone(), v.clone());
        }
    }
    Value::Object(m)
}

fn text(node: &Value, field: &str) -> Option<String> {
    node.get(field).and_then(Value::as_str).map(str::to_string)
}

/// A condition against the outputs so far: the value at `out.<node>.<path>` compared with the
/// literal (JSON when it reads as JSON, else the bare word). A value that is not there makes
/// the condition false; an order on anything but two numbers is false.
pub fn evaluate(c: &Condition, outputs: &BTreeMap<String, Value>) -> bool {
    let Some(mut v) = outputs.get(&c.node) else {
        return false;
    };
    for p in &c.path {
        match v.get(p.as_str()) {
            Some(x) => v = x,
            None => return false,
        }
    }
    let lit: Value =
        serde_json::from_str(&c.literal).unwrap_or_else(|_| Value::String(c.literal.clone()));
    let num = |x: &Value| x.as_f64();
    match c.op.as_str() {
        "==" => same(v, &lit),
        "!=" => !same(v, &lit),
        op => match (num(v), num(&lit)) {
            (Some(a), Some(b)) => match op {
                "<" => a < b,
                "<=" => a <= b,
                ">" => a > b,
                ">=" => a >= b,
                _ => false,
            },
            _ => false,
        },
    }
}

fn same(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

#[cfg(test)]
mod tests;
