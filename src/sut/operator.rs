//! The Hermes operator connector under test: one instance ([`Conn`]) answering the operator
//! operations of `aocheck-sut/2` (`invoke`, `delegate`, `cancel`, `binding`, `manifest`,
//! `policy`), whether it is a process or the reference in process ([`Connection`]).
//!
//! Every call returns `Result<Result<T, ConnectorError>, SutError>`: the inner error is the
//! connector's own answer (judged by the case), the outer one means aocheck could not talk to the
//! implementation (a harness error).

use super::failure_error;
use super::message::{Failure, Op, Request, reply};
use super::{BoxFuture, SutError, decode};
use crate::operator::connector::OperatorResult;
use crate::operator::delegation::DelegationRequest;
use crate::operator::error::ErrorCode;
use crate::operator::{Action, Binding, ConnectorError, Policy};
use serde_json::Value;
use std::sync::Arc;

pub type Answer<T> = Result<Result<T, ConnectorError>, SutError>;

pub use super::message::AipRecord;

/// How one connector instance is reached: a process, or the reference in process.
pub trait Connection: Send + Sync + std::fmt::Debug {
    /// Sends one operator request; the inner error is the instance's own answer.
    fn call(&self, req: Request) -> BoxFuture<'_, Result<Result<Value, Failure>, SutError>>;
    /// The instance stops now (SIGKILL for a process); `why` goes into the case's process log.
    fn stop<'a>(&'a self, why: &'a str) -> BoxFuture<'a, ()>;
}

/// A connector instance, with the typed operator requests.
///
/// On the case's driven clock a foreground call runs on the harness's own busy unit (the
/// harness waits for it; the implementation gives the unit back while it sleeps on the clock),
/// and a detached call holds a unit of its own: time moves only when every call in flight
/// waits on the clock (`crate::providers::SimClock`).
#[derive(Clone, Debug)]
pub struct Conn {
    conn: Arc<dyn Connection>,
    driven: bool,
    clock: Option<crate::providers::SimClock>,
    detached: bool,
}

fn connector_error(f: &Failure) -> Option<ConnectorError> {
    let kind = f.kind.as_str();
    if !kind.starts_with("connector.hermes_agent.") {
        return None;
    }
    if let Some(e) = f
        .details
        .clone()
        .and_then(|d| serde_json::from_value::<ConnectorError>(d).ok())
    {
        return Some(e);
    }
    // A foreign implementation names the seed's code; the rest follows from it.
    ErrorCode::parse(kind).map(|c| ConnectorError::new(c, f.message.clone()))
}

impl Conn {
    pub fn new(c: Arc<dyn Connection>) -> Self {
        Conn {
            conn: c,
            driven: false,
            clock: None,
            detached: false,
        }
    }

    /// Whether the instance said it moves its timers by the harness's clock.
    pub fn with_driven(mut self, driven: bool) -> Self {
        self.driven = driven;
        self
    }

    pub fn is_driven(&self) -> bool {
        self.driven
    }

    /// Calls through this handle are accounted on the case's clock.
    pub fn on_clock(mut self, clock: crate::providers::SimClock) -> Self {
        self.clock = Some(clock);
        self
    }

    /// This handle for a call the harness does not wait for (a background step): the call
    /// holds its own unit and leaves the harness's alone.
    pub fn detached(&self) -> Self {
        let mut c = self.clone();
        c.detached = true;
        c
    }

    async fn call(&self, req: Request) -> Answer<Value> {
        let op = req.op().name();
        let _busy = self
            .clock
            .as_ref()
            .filter(|_| self.detached)
            .map(|c| c.busy());
        match self.conn.call(req).await? {
            Ok(v) => Ok(Ok(v)),
            Err(f) => match connector_error(&f) {
                Some(e) => Ok(Err(e)),
                None => Err(failure_error(op, f)),
            },
        }
    }

    pub async fn invoke(&self, a: &Action) -> Answer<OperatorResult> {
        match self.call(Request::Invoke { action: a.clone() }).await? {
            Ok(v) => Ok(Ok(decode(Op::Invoke, v)?)),
            Err(e) => Ok(Err(e)),
        }
    }

    /// `records` are what AIP holds; a local connector reads them from the store the caller
    /// already wrote them to, a process is handed them with the request.
    pub async fn delegate(
        &self,
        req: &DelegationRequest,
        records: &[AipRecord],
    ) -> Answer<OperatorResult> {
        let req = Request::Delegate {
            request: req.clone(),
            aip_records: records.to_vec(),
        };
        match self.call(req).await? {
            Ok(v) => Ok(Ok(decode(Op::Delegate, v)?)),
            Err(e) => Ok(Err(e)),
        }
    }

    pub async fn cancel(&self, action_id: &str) -> Answer<Binding> {
        let req = Request::Cancel {
            action_id: action_id.into(),
        };
        match self.call(req).await? {
            Ok(v) => Ok(Ok(decode(Op::Cancel, v)?)),
            Err(e) => Ok(Err(e)),
        }
    }

    pub async fn binding(&self, action_id: &str) -> Answer<Option<(u64, Binding)>> {
        let req = Request::Binding {
            action_id: action_id.into(),
        };
        match self.call(req).await? {
            Ok(Value::Null) => Ok(Ok(None)),
            Ok(v) => {
                let r: reply::Binding = decode(Op::Binding, v)?;
                Ok(Ok(Some((r.version, r.binding))))
            }
            Err(e) => Ok(Err(e)),
        }
    }

    /// The binding as stored, or `None` when it cannot be read (checks then skip it).
    pub async fn binding_of(&self, action_id: &str) -> Option<Binding> {
        match self.binding(action_id).await {
            Ok(Ok(Some((_, b)))) => Some(b),
            _ => None,
        }
    }

    pub async fn manifest(&self) -> Result<Value, SutError> {
        match self.call(Request::Manifest).await? {
            Ok(v) => Ok(v),
            Err(e) => Err(SutError::Harness(format!("manifest: {e}"))),
        }
    }

    /// Whether the implementation accepts this policy (`None`) or why not.
    pub async fn validate_policy(
        &self,
        policy: &Policy,
    ) -> Result<Option<ConnectorError>, SutError> {
        let policy =
            serde_json::to_value(policy).map_err(|e| SutError::Harness(format!("policy: {e}")))?;
        Ok(self.call(Request::Policy { policy }).await?.err())
    }

    /// The instance stops now; `why` goes into the case's process log.
    pub async fn stop(&self, why: &str) {
        self.conn.stop(why).await
    }
}
