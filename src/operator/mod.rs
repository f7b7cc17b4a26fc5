//! The AIP Hermes operator connector (seed 000): a durable binding around Hermes's
//! non-idempotent `POST /v1/runs`, a compare-and-set start-claim fence, event observation (SSE
//! first, polling as fallback), an approval command ledger for resume Actions, and cancellation
//! reconciliation. Its profile state lives in a [`crate::store::Store`]'s versioned records under
//! the namespace [`NAMESPACE`].
//!
//! Mapped onto AOC: occurrence = source Action, provider entry = start-claim acquisition
//! immediately before the POST, unresolved = `outcome_unknown` (and a `cancelling` run).

pub mod binding;
pub mod connector;
pub mod delegation;
pub mod error;
pub mod hermes;
pub mod input;
pub mod manifest;
pub mod policy;

pub use binding::{Binding, BindingStatus};
pub use connector::{Connector, OperatorResult};
pub use error::{ConnectorError, ErrorCode};
pub use input::{Action, OperatorInput};
pub use policy::Policy;

/// The profile-state namespace of operator bindings.
/// The Hermes session of a source Action (`aip-operator-<action_id>`).
pub fn session_id(action_id: &str) -> String {
    format!("aip-operator-{action_id}")
}

pub const NAMESPACE: &str = "aip.connector.hermes_agent.operator_runs.v1";
