//! The rulebook of a Hermes Workflow case (seed 002; `runner::workflow` runs it): its steps are
//! workflow steps, fake-hermes faults and scripts, and channel faults; it starts one run, from a
//! design the seed's validator accepts; each kill names one place; each hold a kill waits at was
//! armed before; each word is one the runner knows. Every defect at once, with its field and fix.

use super::model::{Case, OneOrMany, Step, WorkflowKill};
use crate::providers::channel::ChannelFault;
use provider_model::hermes::faults::Fault;
use std::collections::BTreeSet;

/// A run's statuses, as the state file spells them.
pub const STATUSES: [&str; 5] = [
    "running",
    "awaiting_agent",
    "awaiting_approval",
    "completed",
    "failed",
];

type Pending = Vec<(String, String, &'static str)>;

fn status_word(at: String, s: &Option<OneOrMany>, out: &mut Pending) {
    for w in s.iter().flat_map(OneOrMany::words) {
        if !STATUSES.contains(&w) {
            out.push((
                at.clone(),
                format!("{w:?} is not a run status"),
                "use running, awaiting_agent, awaiting_approval, completed or failed",
            ));
        }
    }
}

fn kill_ok(at: String, k: &Option<WorkflowKill>, holds: &BTreeSet<String>, out: &mut Pending) {
    let Some(k) = k else { return };
    let n = [k.save.is_some(), k.mid_write.is_some(), k.hold.is_some()]
        .iter()
        .filter(|x| **x)
        .count();
    if n != 1 {
        out.push((
            at.clone(),
            format!("names {n} places to kill the runner"),
            "give exactly one of save, mid_write or hold",
        ));
    }
    if k.save == Some(0) || k.mid_write == Some(0) {
        out.push((
            at.clone(),
            "saves are counted from 1".into(),
            "use 1 for the step's first save",
        ));
    }
    if let Some(h) = &k.hold
        && !holds.contains(h)
    {
        out.push((
            format!("{at}.hold"),
            format!("no earlier hermes_fault or channel_fault holds requests as {h:?}"),
            "arm the hold first (fault: {type: hold, name: …})",
        ));
    }
}

/// The hold a fault step arms, if any.
fn armed(s: &Step) -> Option<&str> {
    match s {
        Step::HermesFault {
            fault: Fault::Hold { name },
            ..
        } => Some(name),
        Step::ChannelFault {
            fault: ChannelFault::Hold { name },
            ..
        } => Some(name),
        _ => None,
    }
}

/// The first hold armed for anything but the next drive killed at it: its step and name. A
/// drive that reached a hold it is not killed at would wait for a release that never comes.
pub fn unfair_hold(steps: &[Step]) -> Option<(usize, String)> {
    for (i, s) in steps.iter().enumerate() {
        let Some(h) = armed(s) else { continue };
        let next = steps[i + 1..].iter().find_map(|t| match t {
            Step::WorkflowStart { kill, .. }
            | Step::WorkflowResume { kill, .. }
            | Step::WorkflowAnswer { kill, .. } => Some(kill),
            _ => None,
        });
        match next {
            Some(Some(k)) if k.hold.as_deref() == Some(h) => {}
            _ => return Some((i, h.to_string())),
        }
    }
    None
}

/// The defects of a workflow case, as (field, message, fix); none for any other case, unless
/// it expects a workflow run.
pub fn validate(c: &Case) -> Pending {
    let mut out: Pending = Vec::new();
    if !c.is_workflow() {
        if c.expect.workflow.is_some() {
            out.push((
                "expect.workflow".into(),
                "the case starts no workflow run".into(),
                "add a workflow_start step, or drop expect.workflow",
            ));
        }
        return out;
    }
    let mut plan: Option<Vec<crate::workflow::design::PlanStep>> = None;
    let mut holds = BTreeSet::new();
    let mut started = false;
    for (i, s) in c.steps.iter().enumerate() {
        let at = |f: &str| format!("steps[{i}].{f}");
        let nodes = |plan: &Option<Vec<crate::workflow::design::PlanStep>>| {
            plan.as_ref()
                .map(|p| {
                    p.iter()
                        .map(|s| (s.id.clone(), s.kind.clone()))
                        .collect::<Vec<(String, String)>>()
                })
                .unwrap_or_default()
        };
        match s {
            Step::WorkflowStart { design, kill, status } => {
                if started {
                    out.push((
                        at("do"),
                        "a case starts one run".into(),
                        "resume or answer the run instead",
                    ));
                }
                started = true;
                let defects = crate::workflow::design::validate(design);
                for d in &defects {
                    out.push((
                        at("design"),
                        format!("node {:?} field {:?}: {}", d.node, d.field, d.msg),
                        "give a design seed 002's validator accepts",
                    ));
                }
                if defects.is_empty() {
                    match crate::workflow::design::build_run_plan(design) {
                        Ok(p) => plan = Some(p),
                        Err(ds) => {
                            for d in ds {
                                out.push((
                                    at("design"),
                                    format!("node {:?} field {:?}: {}", d.node, d.field, d.msg),
                                    "give a design that plans",
                                ))
                            }
                        }
                    }
                }
                kill_ok(at("kill"), kill, &holds, &mut out);
                status_word(at("status"), status, &mut out);
            }
            Step::WorkflowResume {
                kill,
                status,
                error,
            } => {
                kill_ok(at("kill"), kill, &holds, &mut out);
                status_word(at("status"), status, &mut out);
                if let Some(e) = error
                    && !["missing", "corrupt"].contains(&e.as_str())
                {
                    out.push((
                        at("error"),
                        format!("{e:?} is not a refusal of a resume"),
                        "use missing or corrupt",
                    ));
                }
                if error.is_some() && (kill.is_some() || status.is_some()) {
                    out.push((
                        at("error"),
                        "a refused resume runs nothing to kill or leave in a status".into(),
                        "drop kill and status, or error",
                    ));
                }
            }
            Step::WorkflowAnswer {
                node, kill, status, ..
            } => {
                kill_ok(at("kill"), kill, &holds, &mut out);
                status_word(at("status"), status, &mut out);
                if plan.is_some()
                    && !nodes(&plan)
                        .iter()
                        .any(|(id, k)| id == node && (k == "approval" || k == "agent"))
                {
                    out.push((
                        at("node"),
                        format!("the design has no approval or agent step {node:?}"),
                        "name the step the run waits for",
                    ));
                }
            }
            Step::WorkflowDamage { how } => {
                if !["corrupt", "remove"].contains(&how.as_str()) {
                    out.push((
                        at("how"),
                        format!("{how:?} is unknown"),
                        "use corrupt or remove",
                    ));
                }
            }
            Step::ChannelFault { fault, nth, times } => {
                if *nth == Some(0) || *times == Some(0) {
                    out.push((
                        at("nth"),
                        "nth and times count from 1".into(),
                        "use 1 or more",
                    ));
                }
                if let ChannelFault::Hold { name } = fault {
                    holds.insert(name.clone());
                }
            }
            Step::HermesFault { fault, .. } => {
                if let Fault::Hold { name } = fault {
                    holds.insert(name.clone());
                }
            }
            Step::HermesScript { .. } => {}
            other => out.push((
                at("do"),
                format!(
                    "{} is not a step of a workflow case",
                    other.verb()
                ),
                "use workflow_start, workflow_resume, workflow_answer, workflow_damage, channel_fault, hermes_fault or hermes_script",
            )),
        }
        if !started && s.is_workflow() && !matches!(s, Step::ChannelFault { .. }) {
            out.push((
                at("do"),
                "the run has not started".into(),
                "begin the run with workflow_start",
            ));
        }
    }
    if let Some((i, h)) = unfair_hold(&c.steps) {
        out.push((
            format!("steps[{i}].fault"),
            format!("the hold {h:?} is not the one the next drive is killed at"),
            "arm a hold right before the drive killed at it (kill: {hold: …})",
        ));
    }
    if let Some(w) = &c.expect.workflow {
        let nodes: Vec<(String, String)> = plan
            .as_ref()
            .map(|p| p.iter().map(|s| (s.id.clone(), s.kind.clone())).collect())
            .unwrap_or_default();
        status_word("expect.workflow.status".into(), &w.status, &mut out);
        for n in w.skipped.iter().flatten() {
            if plan.is_some() && !nodes.iter().any(|(id, _)| id == n) {
                out.push((
                    "expect.workflow.skipped".into(),
                    format!("the design has no step {n:?}"),
                    "name steps of the design",
                ));
            }
        }
        for (field, kind, names) in [
            ("deliveries", "output", w.deliveries.keys()),
            ("runs", "agent", w.runs.keys()),
        ] {
            for n in names {
                if plan.is_some() && !nodes.iter().any(|(id, k)| id == n && k == kind) {
                    out.push((
                        format!("expect.workflow.{field}.{n}"),
                        format!("the design has no {kind} step {n:?}"),
                        "name a step of that kind in the design",
                    ));
                }
            }
        }
    }
    out
}
