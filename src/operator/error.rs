//! Failure codes exactly as seed 000 names them (`connector.hermes_agent.*`). Stored operator
//! errors are never retryable; an outcome-unknown error says an external mutation may have
//! happened.

use serde::Serialize;
use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum ErrorCode {
    /// Policy denial, changed-input reuse of an Action id, a missing source binding.
    OperatorPolicy,
    /// Profile-state read, parse, compare-and-set or contention failure.
    OperatorState,
    /// The start may have happened.
    OperatorOutcomeUnknown,
    /// An approval command may have been applied.
    ApprovalOutcomeUnknown,
    /// The stop's effect could not be established within the grace period.
    CancellationOutcomeUnknown,
    /// Hermes refused the start with a definitive 4xx.
    OperatorStartRejected,
    /// Hermes reported the run failed.
    OperatorFailed,
    /// Invalid configuration or input.
    ConfigurationOrInput,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::OperatorPolicy => "connector.hermes_agent.operator_policy",
            ErrorCode::OperatorState => "connector.hermes_agent.operator_state",
            ErrorCode::OperatorOutcomeUnknown => "connector.hermes_agent.operator_outcome_unknown",
            ErrorCode::ApprovalOutcomeUnknown => "connector.hermes_agent.approval_outcome_unknown",
            ErrorCode::CancellationOutcomeUnknown => {
                "connector.hermes_agent.cancellation_outcome_unknown"
            }
            ErrorCode::OperatorStartRejected => "connector.hermes_agent.operator_start_rejected",
            ErrorCode::OperatorFailed => "connector.hermes_agent.operator_failed",
            ErrorCode::ConfigurationOrInput => "connector.hermes_agent.configuration_or_input",
        }
    }
    /// Whether the failure leaves an external mutation possible.
    pub fn uncertain_outcome(self) -> bool {
        matches!(
            self,
            ErrorCode::OperatorOutcomeUnknown
                | ErrorCode::ApprovalOutcomeUnknown
                | ErrorCode::CancellationOutcomeUnknown
        )
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A connector failure.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ConnectorError {
    pub code: ErrorCode,
    pub message: String,
    pub details: serde_json::Value,
    /// Never true: an operator error is not retried automatically.
    pub retryable: bool,
    pub uncertain_outcome: bool,
}

impl ConnectorError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ConnectorError {
            code,
            message: message.into(),
            details: serde_json::Value::Null,
            retryable: false,
            uncertain_outcome: code.uncertain_outcome(),
        }
    }
    pub fn with(mut self, details: serde_json::Value) -> Self {
        self.details = details;
        self
    }
}
