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

/// What a delivery came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeliveryOutcome {
    Delivered,
    /// Refused: nothing was delivered (a receipt with `ok: false`).
    Refused(String),
    /// No answer came: it may have been delivered (the receipt stays `ok: null`, and it is never
    /// sent again).
    Unknown(String),
}

/// Where an output is delivered.
pub trait Channel {
    fn deliver(&mut self, d: &Delivery) -> impl Future<Output = DeliveryOutcome>;
}

/// Where a drive stops by itself, as a kill would stop it: the harness's kills at the save
/// points (the reference's own; another runner is killed where it holds a request).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Halt {
    /// Stop right after the nth save of this drive (counted from 1).
    pub after_save: Option<u32>,
    /// The nth save is cut off mid-write: part of the new state is in a temp file, the run
    /// file is as it was, and the drive stops.
    pub mid_write: Option<u32>,
}

/// How a drive begins and where it stops.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    pub halt: Halt,
    /// A resume: the run's file must be there (missing is an error, never a new run).
    pub resume: bool,
    /// A deliberate defect (test builds only; `None` otherwise).
    pub defect: Option<super::WorkflowDefect>,
}

/// How a drive ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Driven {
    /// Parked or finished: the state as saved.
    Ran(Box<RunState>),
    /// Stopped at this save ([`Halt`]).
    Halted { save: u32 },
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
    match drive_with(
        home,
        plan,
        (run_id, name),
        seam,
        channel,
        &Options::default(),
    )
    .await?
    {
        Driven::Ran(st) => Ok(*st),
        // No halt was asked for.
        Driven::Halted { save } => Err(StoreError::Io(format!("halted at save {save}"))),
    }
}

/// [`drive`] as `opts` say: a resume, halted at a save point, or (test builds only) with a
/// deliberate defect.
pub async fn drive_with<S: Seam, C: Channel>(
    home: &Home,
    plan: &[PlanStep],
    (run_id, name): (&str, &str),
    mut seam: Option<&mut S>,
    channel: &mut C,
    opts: &Options,
) -> Result<Driven, StoreError> {
    let defect = opts.defect;
    let mut saves = 0u32;
    let mut save = |st: &RunState| -> Result<bool, StoreError> {
        saves += 1;
        if opts.halt.mid_write == Some(saves) {
            home.save_run_cut(st)?;
            return Ok(false);
        }
        match defect {
            #[cfg(feature = "test-knobs")]
            Some(d) => home.save_run_broken(st, d)?,
            _ => home.save_run(st)?,
        }
        Ok(opts.halt.after_save != Some(saves))
    };
    let mut st = match home.load_run(run_id) {
        Ok(st) => st,
        Err(StoreError::Missing(_)) if !opts.resume => RunState::new(run_id, name),
        Err(e) => return Err(e),
    };
    macro_rules! saved {
        ($st:expr) => {
            if !save($st)? {
                return Ok(Driven::Halted { save: saves });
            }
        };
    }
    loop {
        let n = match defect {
            #[cfg(feature = "test-knobs")]
            Some(d) => run::next_broken(plan, &mut st, seam.is_some(), d),
            _ => run::next(plan, &mut st, seam.is_some()),
        };
        saved!(&st);
        match n {
            Next::Stepped => {}
            Next::Parked | Next::Finished => return Ok(Driven::Ran(Box::new(st))),
            Next::Launch(l) => {
                let Some(s) = seam.as_deref_mut() else {
                    return Ok(Driven::Ran(Box::new(st)));
                };
                #[cfg(feature = "test-knobs")]
                if defect == Some(super::WorkflowDefect::EagerOutput) {
                    st.outputs
                        .insert(l.node.clone(), serde_json::json!("(pending)"));
                    saved!(&st);
                }
                match s.launch(&l).await {
                    AgentOutcome::Returned(v) => run::agent_returned(plan, &mut st, &l.node, &v),
                    AgentOutcome::Failed(e) => run::agent_failed(plan, &mut st, &l.node, &e),
                    #[cfg(feature = "test-knobs")]
                    AgentOutcome::Unknown(_)
                        if defect == Some(super::WorkflowDefect::UnknownIsDone) =>
                    {
                        run::agent_returned(plan, &mut st, &l.node, &serde_json::json!({}))
                    }
                    // The attempt stays `launching`: the next decision parks the step.
                    AgentOutcome::Unknown(_) => {}
                }
                saved!(&st);
            }
            Next::Deliver(d) => {
                let (ok, detail) = match channel.deliver(&d).await {
                    DeliveryOutcome::Delivered => (Some(true), None),
                    DeliveryOutcome::Refused(why) => (Some(false), Some(why)),
                    #[cfg(feature = "test-knobs")]
                    DeliveryOutcome::Unknown(why)
                        if defect == Some(super::WorkflowDefect::LostReplyIsFailed) =>
                    {
                        (Some(false), Some(why))
                    }
                    DeliveryOutcome::Unknown(why) => (None, Some(why)),
                };
                run::delivered(plan, &mut st, &d.node, ok, detail);
                saved!(&st);
            }
        }
    }
}

/// Answers the step run `run_id` waits for (an approval's choice, or an agent step's result),
/// and saves; the caller drives the run on. A run that is missing, corrupt or waiting for
/// something else is refused, and nothing is saved.
pub fn answer(
    home: &Home,
    plan: &[PlanStep],
    run_id: &str,
    node: &str,
    value: Value,
) -> Result<RunState, AnswerError> {
    let mut st = home.load_run(run_id).map_err(AnswerError::Store)?;
    run::answer(plan, &mut st, node, value).map_err(AnswerError::NotWaiting)?;
    home.save_run(&st).map_err(AnswerError::Store)?;
    Ok(st)
}

/// Why an answer was refused.
#[derive(Debug, PartialEq)]
pub enum AnswerError {
    Store(StoreError),
    /// The run waits for nothing, or for another step.
    NotWaiting(String),
}

impl std::fmt::Display for AnswerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AnswerError::Store(e) => e.fmt(f),
            AnswerError::NotWaiting(m) => f.write_str(m),
        }
    }
}

/// Deliveries over HTTP: `POST {base}/v1/deliveries` with the receipt id, kind, target and
/// payload. A 2xx is delivered; a 4xx is a refusal (nothing was delivered); a 5xx, a closed
/// connection or a timeout leaves the delivery unknown (it may have been delivered: the runner
/// never sends it again).
#[derive(Debug)]
pub struct HttpChannel {
    pub http: reqwest::Client,
    pub base: String,
}

impl Channel for HttpChannel {
    async fn deliver(&mut self, d: &Delivery) -> DeliveryOutcome {
        let body =
            json!({"id": d.id, "deliver": d.deliver, "target": d.target, "payload": d.payload});
        let url = format!("{}/v1/deliveries", self.base.trim_end_matches('/'));
        match self.http.post(&url).json(&body).send().await {
            Ok(r) if r.status().is_success() => DeliveryOutcome::Delivered,
            Ok(r) if r.status().is_client_error() => DeliveryOutcome::Refused(format!(
                "the channel refused it: HTTP {}",
                r.status().as_u16()
            )),
            Ok(r) => DeliveryOutcome::Unknown(format!(
                "the channel answered HTTP {}: it may have been delivered",
                r.status().as_u16()
            )),
            Err(e) => DeliveryOutcome::Unknown(format!(
                "no answer from the channel ({}): it may have been delivered",
                if e.is_timeout() {
                    "timed out"
                } else {
                    "connection closed"
                }
            )),
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
