//! The runner's host: the I/O around [`super::run`]. It loads the run (or starts one), and for
//! every decision saves the state first ([`super::store`], atomically) and only then performs
//! the effect through the spawn seam ([`Seam`]) or the delivery channel ([`Channel`]), then
//! records what came back and saves again. Killed anywhere, it resumes from the last save; what
//! the state says was launched or sent is never launched or sent again ([`super::run`]).
//!
//! [`HermesSeam`] launches an agent step as a Hermes run (`POST /v1/runs`, its session id the
//! step's correlation id `workflow:<run_id>:<node_id>`, so the provider's ledger places every
//! run under its step) and waits for the run's end by polling its status.

use super::design::PlanStep;
use super::run::{self, Delivery, Launch, Next, RunState};
use super::store::{Home, StoreError};
use crate::operator::hermes::{HermesClient, PollError, StartOutcome};
use serde_json::{Value, json};
use std::time::Duration;

/// What a launch came to.
#[derive(Clone, Debug, PartialEq)]
pub enum AgentOutcome {
    /// The step's result (`{"structured": …}` or `{"output": …}`).
    Returned(Value),
    /// It definitively failed (refused before any run, or the run ended failed).
    Failed(String),
    /// A run may exist and its end is not known (a 5xx or a lost answer to the start, a run
    /// the provider forgot): the attempt stays as it is, and the step parks.
    Unknown(String),
}

/// Who performs an agent step.
pub trait Seam {
    fn launch(&mut self, l: &Launch) -> impl Future<Output = AgentOutcome>;
}

/// Where an output is delivered: `Ok` delivered, `Err` why not (a receipt with `ok: false`).
pub trait Channel {
    fn deliver(&mut self, d: &Delivery) -> impl Future<Output = Result<(), String>>;
}

/// Runs `plan` as run `run_id` of design `name` until it parks or ends, saving under `home`
/// after every decision. Without a seam an agent step parks at `awaiting_agent`.
pub async fn drive<S: Seam, C: Channel>(
    home: &Home,
    plan: &[PlanStep],
    run_id: &str,
    name: &str,
    seam: Option<&mut S>,
    channel: &mut C,
) -> Result<RunState, StoreError> {
    drive_as(home, plan, run_id, name, seam, channel, None).await
}

/// [`drive`], or with one deliberate defect (test builds only).
#[cfg(feature = "test-knobs")]
pub async fn drive_with<S: Seam, C: Channel>(
    home: &Home,
    plan: &[PlanStep],
    (run_id, name): (&str, &str),
    seam: Option<&mut S>,
    channel: &mut C,
    defect: Option<super::WorkflowDefect>,
) -> Result<RunState, StoreError> {
    drive_as(home, plan, run_id, name, seam, channel, defect).await
}

async fn drive_as<S: Seam, C: Channel>(
    home: &Home,
    plan: &[PlanStep],
    run_id: &str,
    name: &str,
    mut seam: Option<&mut S>,
    channel: &mut C,
    defect: Option<super::WorkflowDefect>,
) -> Result<RunState, StoreError> {
    let save = |st: &RunState| -> Result<(), StoreError> {
        match defect {
            #[cfg(feature = "test-knobs")]
            Some(d) => home.save_run_broken(st, d),
            _ => home.save_run(st),
        }
    };
    let mut st = match home.load_run(run_id) {
        Ok(st) => st,
        Err(StoreError::Missing(_)) => RunState::new(run_id, name),
        Err(e) => return Err(e),
    };
    loop {
        let n = match defect {
            #[cfg(feature = "test-knobs")]
            Some(d) => run::next_broken(plan, &mut st, seam.is_some(), d),
            _ => run::next(plan, &mut st, seam.is_some()),
        };
        save(&st)?;
        match n {
            Next::Stepped => {}
            Next::Parked | Next::Finished => return Ok(st),
            Next::Launch(l) => {
                let Some(s) = seam.as_deref_mut() else {
                    return Ok(st);
                };
                match s.launch(&l).await {
                    AgentOutcome::Returned(v) => run::agent_returned(plan, &mut st, &l.node, &v),
                    AgentOutcome::Failed(e) => run::agent_failed(plan, &mut st, &l.node, &e),
                    // The attempt stays `launching`: the next decision parks the step.
                    AgentOutcome::Unknown(_) => {}
                }
                save(&st)?;
            }
            Next::Deliver(d) => {
                let (ok, detail) = match channel.deliver(&d).await {
                    Ok(()) => (true, None),
                    Err(why) => (false, Some(why)),
                };
                run::delivered(plan, &mut st, &d.node, ok, detail);
                save(&st)?;
            }
        }
    }
}

/// Agent steps as Hermes runs.
#[derive(Debug)]
pub struct HermesSeam {
    pub client: HermesClient,
    /// How often the run's status is read, and for how long at most.
    pub poll: Duration,
    pub patience: Duration,
}

impl Seam for HermesSeam {
    async fn launch(&mut self, l: &Launch) -> AgentOutcome {
        let input = format!(
            "{}\n\nContext (the outputs of the steps before):\n{}",
            l.prompt,
            serde_json::to_string_pretty(&l.context).unwrap_or_default()
        );
        let body = json!({"input": input, "session_id": l.correlation});
        let run_id = match self.client.start(&body).await {
            StartOutcome::Started { run_id } => run_id,
            StartOutcome::Rejected { status } => {
                return AgentOutcome::Failed(format!("Hermes refused the run: HTTP {status}"));
            }
            StartOutcome::NoRunId => {
                return AgentOutcome::Unknown("the start was answered without a run id".into());
            }
            StartOutcome::Unknown { reason } => return AgentOutcome::Unknown(reason),
        };
        let until = tokio::time::Instant::now() + self.patience;
        loop {
            match self.client.status(&run_id).await {
                Ok(doc) => match doc["status"].as_str().unwrap_or_default() {
                    "completed" => {
                        return AgentOutcome::Returned(json!({"output": doc["output"].clone()}));
                    }
                    "failed" | "cancelled" => {
                        return AgentOutcome::Failed(format!(
                            "run {run_id} ended {}: {}",
                            doc["status"], doc["error"]
                        ));
                    }
                    _ => {}
                },
                Err(PollError::NotFound) => {
                    return AgentOutcome::Unknown(format!(
                        "run {run_id} is no longer known to Hermes (a restart): its end is unknown"
                    ));
                }
                Err(_) => {}
            }
            if tokio::time::Instant::now() > until {
                return AgentOutcome::Unknown(format!(
                    "run {run_id} had not ended within {} s",
                    self.patience.as_secs()
                ));
            }
            tokio::time::sleep(self.poll).await;
        }
    }
}
