//! The Hermes operator connector under test: the reference in process, or an implementation
//! process answering the operator operations of `aocheck-sut/1` (`invoke`, `delegate`, `cancel`,
//! `binding`, `manifest`, `policy`). The runner drives both the same way.
//!
//! Every call returns `Result<Result<T, ConnectorError>, SutError>`: the inner error is the
//! connector's own answer (judged by the case), the outer one means aocheck could not talk to the
//! implementation (a harness error).

use super::SutError;
use super::message::{Request, reply};
use super::process::SutProcess;
use super::remote::failure_error;
use crate::operator::connector::OperatorResult;
use crate::operator::delegation::DelegationRequest;
use crate::operator::error::ErrorCode;
use crate::operator::{Action, Binding, Connector, ConnectorError, Policy};
use crate::store::AnyStore;
use serde_json::Value;
use std::sync::Arc;

pub type Answer<T> = Result<Result<T, ConnectorError>, SutError>;

pub use super::message::AipRecord;

/// A connector instance.
#[derive(Clone, Debug)]
pub enum Conn {
    Local(Arc<Connector<AnyStore>>),
    /// An implementation process (its label for messages).
    Remote(SutProcess, String),
}

fn connector_error(kind: &str, f: &super::protocol::SutFailure) -> Option<ConnectorError> {
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
    async fn call(&self, req: Request) -> Answer<Value> {
        let op = req.op().name();
        let Conn::Remote(p, label) = self else {
            return Err(SutError::Harness(format!("{op}: not a process")));
        };
        // Operator requests carry no case clock (the connector keeps its own).
        match p.call(op, req.fields()).await {
            Ok(Ok(v)) => Ok(Ok(v)),
            Ok(Err(f)) => match connector_error(&f.kind.clone(), &f) {
                Some(e) => Ok(Err(e)),
                None => Err(failure_error(op, f)),
            },
            Err(e) => Err(SutError::Harness(format!(
                "implementation process {label}: {e}"
            ))),
        }
    }

    fn decode<T: serde::de::DeserializeOwned>(op: &str, v: Value) -> Result<T, SutError> {
        serde_json::from_value(v.clone())
            .map_err(|e| SutError::Harness(format!("{op} answered something else ({e}): {v}")))
    }

    pub async fn invoke(&self, a: &Action) -> Answer<OperatorResult> {
        match self {
            Conn::Local(c) => Ok(c.invoke(a).await),
            Conn::Remote(..) => match self.call(Request::Invoke { action: a.clone() }).await? {
                Ok(v) => Ok(Ok(Self::decode("invoke", v)?)),
                Err(e) => Ok(Err(e)),
            },
        }
    }

    /// `records` are what AIP holds; a local connector reads them from the store the caller
    /// already wrote them to, a process is handed them with the request.
    pub async fn delegate(
        &self,
        req: &DelegationRequest,
        records: &[AipRecord],
    ) -> Answer<OperatorResult> {
        match self {
            Conn::Local(c) => Ok(c.delegate(req).await),
            Conn::Remote(..) => {
                match self
                    .call(Request::Delegate {
                        request: req.clone(),
                        aip_records: records.to_vec(),
                    })
                    .await?
                {
                    Ok(v) => Ok(Ok(Self::decode("delegate", v)?)),
                    Err(e) => Ok(Err(e)),
                }
            }
        }
    }

    pub async fn cancel(&self, action_id: &str) -> Answer<Binding> {
        match self {
            Conn::Local(c) => Ok(c.cancel(action_id).await),
            Conn::Remote(..) => match self
                .call(Request::Cancel {
                    action_id: action_id.into(),
                })
                .await?
            {
                Ok(v) => Ok(Ok(Self::decode("cancel", v)?)),
                Err(e) => Ok(Err(e)),
            },
        }
    }

    pub async fn binding(&self, action_id: &str) -> Answer<Option<(u64, Binding)>> {
        match self {
            Conn::Local(c) => Ok(c.binding(action_id).await),
            Conn::Remote(..) => {
                match self
                    .call(Request::Binding {
                        action_id: action_id.into(),
                    })
                    .await?
                {
                    Ok(Value::Null) => Ok(Ok(None)),
                    Ok(v) => {
                        let r: reply::Binding = Self::decode("binding", v)?;
                        Ok(Ok(Some((r.version, r.binding))))
                    }
                    Err(e) => Ok(Err(e)),
                }
            }
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
        match self {
            Conn::Local(c) => Ok(c.manifest()),
            Conn::Remote(..) => match self.call(Request::Manifest).await? {
                Ok(v) => Ok(v),
                Err(e) => Err(SutError::Harness(format!("manifest: {e}"))),
            },
        }
    }

    /// Whether the implementation accepts this policy (`None`) or why not (processes only; a
    /// local caller validates the policy itself).
    pub async fn validate_policy(
        &self,
        policy: &Policy,
    ) -> Result<Option<ConnectorError>, SutError> {
        let policy =
            serde_json::to_value(policy).map_err(|e| SutError::Harness(format!("policy: {e}")))?;
        Ok(self.call(Request::Policy { policy }).await?.err())
    }

    /// SIGKILL for a process; a local connector is simply dropped by the caller.
    pub async fn kill(&self) {
        if let Conn::Remote(p, _) = self {
            let _ = p.kill().await;
        }
    }
}
