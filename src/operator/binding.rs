//! The durable operator binding (profile-state record keyed by the source Action id), its states
//! and the request fingerprint.

use super::input::Action;
use crate::digest::{CanonicalError, digest_of};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BindingStatus {
    Starting,
    Running,
    WaitingForApproval,
    Cancelling,
    Completed,
    Failed,
    Cancelled,
    OutcomeUnknown,
}

impl BindingStatus {
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            BindingStatus::Completed
                | BindingStatus::Failed
                | BindingStatus::Cancelled
                | BindingStatus::OutcomeUnknown
        )
    }
}

/// The start-claim fence.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartClaim {
    pub claim_id: String,
    pub instance_id: String,
    pub claimed_at: u64,
    pub expires_at: u64,
}

/// One approval command of a resume Action.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ApprovalCommand {
    pub action_id: String,
    pub request_fingerprint: String,
    pub approval_generation: u64,
    pub choice: String,
    pub resolve_all: bool,
    pub claim_id: String,
    pub instance_id: String,
    /// `claimed`, `applied`, `rejected` or `outcome_unknown`.
    pub status: String,
    pub diagnostic: Option<String>,
    pub created_at: u64,
    pub updated_at: u64,
    pub expires_at: u64,
}

/// The binding record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Binding {
    pub action_id: String,
    pub request_fingerprint: String,
    pub endpoint_id: String,
    pub run_id: Option<String>,
    pub session_id: String,
    pub start_claim: Option<StartClaim>,
    pub delegation_id: Option<String>,
    pub parent_action_id: Option<String>,
    pub status: BindingStatus,
    pub cancel_requested: bool,
    pub last_event: Option<String>,
    pub next_sequence: u64,
    pub approval_generation: u64,
    pub approval_commands: Vec<ApprovalCommand>,
    pub pending_approval: Option<Value>,
    pub output: Option<String>,
    pub error: Option<Value>,
    pub created_at: u64,
    pub updated_at: u64,
}

/// Hex SHA-256 of RFC 8785 `{endpoint_id, action, delegation}`: any change of the Action is a
/// different request.
pub fn fingerprint(endpoint_id: &str, action: &Action) -> Result<String, CanonicalError> {
    Ok(digest_of(
        &json!({"endpoint_id": endpoint_id, "action": action, "delegation": action.delegation}),
    )?
    .hex())
}
