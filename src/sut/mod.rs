//! The harness side of the boundary. The runner drives every implementation through one trait,
//! [`Sut`], with the typed messages of [`message`]: the reference in process (the reference's
//! `in_process`) and any implementation as processes speaking `aocheck-sut/2`
//! ([`processes::ProcessSut`]) answer the same requests, are read by the same observer requests
//! and are judged by the same checkers. Connector instances are started through [`Connect`] and
//! answer through [`operator::Conn`], whichever they are.
//!
//! A refusal keeps the requirement the implementation names; anything else it reports is quoted
//! in a [`SutError`] (see [`failure_error`]).

pub mod message;
pub mod operator;
pub(crate) mod process;
pub mod processes;
pub(crate) mod protocol;
pub mod validator;
/// How much of each implementation process's stderr the run folder keeps.
pub use process::{STDERR_HEAD, STDERR_TAIL};

use crate::aoc::admission::Admission;
use crate::aoc::composition::{BypassPath, CompositionStatus};
use crate::aoc::ids::{AdmissionId, OccurrenceId};
use crate::check::evidence::{Report, StateAnswer};

use message::{Hello, HermesInit, Op, OperatorInit, Request};
use serde_json::Value;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// What went wrong with one SUT call.
#[derive(Debug, thiserror::Error)]
pub enum SutError {
    #[error(transparent)]
    Refused(crate::aoc::Refusal),
    /// The SUT's own state is impossible (a corrupt history): a finding, not a harness error.
    #[error("corrupt: {0}")]
    Corrupt(String),
    /// The harness could not decide (an unknown executor, a store that failed …).
    #[error("{0}")]
    Harness(String),
    /// An implementation refused (through the protocol) without naming the requirement.
    #[error("{0}")]
    RefusedUnnamed(String),
    /// The implementation speaks another protocol version: nothing can be judged.
    #[error("{0}")]
    Version(String),
}

impl From<crate::aoc::DomainError> for SutError {
    fn from(e: crate::aoc::DomainError) -> Self {
        match e {
            crate::aoc::DomainError::Refused(r) => SutError::Refused(r),
            crate::aoc::DomainError::Corrupt { .. } => SutError::Corrupt(e.to_string()),
            other => SutError::Harness(other.to_string()),
        }
    }
}

/// A boxed future: the boundary's methods are called through `dyn`.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Where a request goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum To<'a> {
    /// The live executor of that name.
    Executor(&'a str),
    /// The observer: it never joins the lane and only reads (and submits, as a client would).
    Observer,
}

/// The one boundary the runner drives.
pub trait Sut: Send + Sync + std::fmt::Debug {
    /// What the implementation said about itself at `init`.
    fn hello(&self) -> &Hello;
    /// Starts a new executor generation `name` (a process, or an in-process executor) and sends
    /// it `req` (`join` or `takeover`). An earlier executor of that name is retired, not killed.
    fn start<'a>(
        &'a mut self,
        name: &'a str,
        req: Request,
    ) -> BoxFuture<'a, Result<Value, SutError>>;
    /// Sends one request and returns its ok result.
    fn call<'a>(&'a mut self, to: To<'a>, req: Request) -> BoxFuture<'a, Result<Value, SutError>>;
    /// The executor dies now, with everything in its memory and its background work.
    fn crash<'a>(&'a mut self, name: &'a str) -> BoxFuture<'a, Result<(), SutError>>;
    /// A race (AOC-REQ-001): every request is sent to its executor before any answer is awaited,
    /// and the answers come back in the order of `calls`. Requests to one executor reach it
    /// together too; the implementation may answer them in any order, or one at a time.
    fn race<'a>(
        &'a mut self,
        calls: Vec<(String, Request)>,
    ) -> BoxFuture<'a, Vec<Result<Value, SutError>>>;
    /// Every executor still alive (retired ones included), by the name calls reach it under.
    fn executors(&self) -> Vec<String>;
    /// Where connector instances come from.
    fn connectors(&self) -> Arc<dyn Connect>;
    /// The implementation's self-description for the report (`None`: the in-process reference,
    /// which the run's report describes).
    fn implementation(&self) -> Option<Value>;
    /// Every process started, with how it ended (empty in process).
    fn processes(&self) -> Vec<String>;
    /// Processes that outlived a kill of their implementation's process group (each was killed
    /// then): a crash that did not happen as declared.
    fn escaped(&self) -> Vec<String> {
        Vec::new()
    }
    /// The end of a case: every executor and instance stops.
    fn shutdown(&mut self) -> BoxFuture<'_, ()>;
}

/// Starts Hermes connector instances for a case.
pub trait Connect: Send + Sync + std::fmt::Debug {
    /// Starts instance `instance` with the case's Hermes endpoint and operator configuration.
    fn connect<'a>(
        &'a self,
        instance: &'a str,
        hermes: HermesInit,
        operator: OperatorInit,
    ) -> BoxFuture<'a, Result<operator::Conn, SutError>>;
    /// After every instance was stopped: instances started later open the store anew. `false`
    /// when the store keeps nothing beyond one handle (the memory store).
    fn reopen(&self) -> BoxFuture<'_, Result<bool, SutError>>;
}

/// An ok result as the type its operation answers with; anything else is a harness error that
/// quotes the answer.
pub fn decode<T: serde::de::DeserializeOwned>(op: Op, v: Value) -> Result<T, SutError> {
    serde_json::from_value(v.clone())
        .map_err(|e| SutError::Harness(format!("{op} answered something else ({e}): {v}")))
}

/// The generic request helpers the World uses, and the observations the checkers read (through
/// the observer), for every implementation alike. A new operation needs nothing here: the World
/// sends its `Request` with `exec` or `ask`.
impl dyn Sut {
    /// Sends `req` and decodes its typed ok result.
    pub async fn ask<T: serde::de::DeserializeOwned>(
        &mut self,
        to: To<'_>,
        req: Request,
    ) -> Result<T, SutError> {
        let op = req.op();
        let v = self.call(to, req).await?;
        decode(op, v)
    }

    /// Sends `req` to the executor `who`; its ok result carries nothing the World needs.
    pub async fn exec(&mut self, who: &str, req: Request) -> Result<(), SutError> {
        self.call(To::Executor(who), req).await.map(|_| ())
    }

    pub fn supports(&self, op: Op) -> bool {
        self.hello().supports(op)
    }

    /// Every live executor finishes its background work.
    pub async fn settle(&mut self) -> Result<(), SutError> {
        for n in self.executors() {
            self.exec(&n, Request::Settle).await?;
        }
        Ok(())
    }
    /// The implementation's `state` answer for an occurrence (its history in the evidence
    /// envelope and its §7 report), read by the observer. An answer that is not the envelope is
    /// corruption (AOC-REQ-004), naming the field.
    pub async fn observe(&mut self, o: &OccurrenceId) -> Result<StateAnswer, SutError> {
        let req = Request::State {
            occurrence: o.clone(),
        };
        let v = self.call(To::Observer, req).await?;
        StateAnswer::decode(v).map_err(|e| {
            SutError::Corrupt(format!(
                "the state answer for {o} is not the evidence envelope (docs/sut-protocol.md): {e}"
            ))
        })
    }
    /// The §7 report alone.
    pub async fn state(&mut self, o: &OccurrenceId) -> Result<Report, SutError> {
        Ok(self.observe(o).await?.report)
    }
    /// The lane's current generation (0 when nobody holds it).
    /// The lane's current holder generation, typed strictly: a string, a negative number or
    /// anything but a non-negative integer or `null` is a protocol violation.
    pub async fn lane_generation(&mut self) -> Result<Option<u64>, SutError> {
        let v = self.call(To::Observer, Request::Lane).await?;
        Ok(decode::<message::reply::Generation>(Op::Lane, v)?.generation)
    }
    pub async fn admission(&mut self, a: &AdmissionId) -> Result<Admission, SutError> {
        let admission = a.clone();
        self.ask(To::Observer, Request::Admission { admission })
            .await
    }
    /// The composition status and the bypass paths the implementation discloses, when it lists
    /// `describe`.
    pub async fn describe_if_supported(
        &mut self,
    ) -> Result<Option<(CompositionStatus, Vec<BypassPath>)>, SutError> {
        if !self.supports(Op::Describe) {
            return Ok(None);
        }
        let v = self.call(To::Observer, Request::Describe).await?;
        let c = serde_json::from_value(v["composition"].clone()).map_err(|e| {
            SutError::Harness(format!("describe: `composition` does not parse: {e}"))
        })?;
        let b = serde_json::from_value(v["bypass_paths"].clone()).map_err(|e| {
            SutError::Harness(format!("describe: `bypass_paths` does not parse: {e}"))
        })?;
        Ok(Some((c, b)))
    }
    /// As `describe_if_supported`; an implementation that does not list it cannot be
    /// judged on what it discloses.
    pub async fn describe(&mut self) -> Result<(CompositionStatus, Vec<BypassPath>), SutError> {
        self.describe_if_supported()
            .await?
            .ok_or_else(|| SutError::Harness("the implementation does not list `describe`".into()))
    }
}

/// A protocol error as the runner's error. A refusal keeps its requirement; anything else the
/// implementation reports is quoted.
pub fn failure_error(op: &str, f: protocol::SutFailure) -> SutError {
    match f.kind.as_str() {
        "refused" => match f.requirement.as_deref().and_then(crate::aoc::Req::parse) {
            Some(req) => SutError::Refused(crate::aoc::Refusal::new(
                None,
                req,
                crate::aoc::RefusalKind::Reported {
                    msg: f.message.clone(),
                },
            )),
            None => SutError::RefusedUnnamed(format!(
                "{op} was refused without naming a requirement ({:?}): {}",
                f.requirement.unwrap_or_default(),
                f.message
            )),
        },
        "corrupt" => SutError::Corrupt(f.message),
        kind => SutError::Harness(format!(
            "{op} failed ({kind}, outcome {}): {}",
            match f.outcome {
                protocol::Outcome::Definite => "definite",
                protocol::Outcome::Indefinite => "indefinite",
            },
            f.message
        )),
    }
}
