//! Failure codes exactly as seed 000 names them (`connector.hermes_agent.*`). Stored operator
//! errors are never retryable; an outcome-unknown error says an external mutation may have
//! happened.

use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
    /// The queued child Action differs from the delegated contract.
    DelegatedActionContractMismatch,
    /// No unexpired transport-authenticated principal with `action:write`.
    DelegatedIdentityUnverified,
    /// Queue owner, authenticated owner and actor are not the expected Hermes principal.
    DelegatedIdentityMismatch,
    /// The Action's identity is not the resolved trusted identity.
    DelegatedIdentityIntegrity,
    DelegatedTenantMismatch,
    DelegatedTenantExpired,
    /// Queue and lifecycle disagree, a terminal status has no durable result, or the result is
    /// bound to another Action.
    DelegatedResultIntegrity,
    /// The child Action was never observed in the queue.
    DelegatedExecutionNotObserved,
    /// Observed, but not terminal by the operator deadline (retryable).
    DelegatedResultNotReady,
    /// No resolver is configured: a delegated result cannot be established.
    DelegatedResultResolverMissing,
}

impl ErrorCode {
    pub const ALL: [ErrorCode; 18] = [
        ErrorCode::OperatorPolicy,
        ErrorCode::OperatorState,
        ErrorCode::OperatorOutcomeUnknown,
        ErrorCode::ApprovalOutcomeUnknown,
        ErrorCode::CancellationOutcomeUnknown,
        ErrorCode::OperatorStartRejected,
        ErrorCode::OperatorFailed,
        ErrorCode::ConfigurationOrInput,
        ErrorCode::DelegatedActionContractMismatch,
        ErrorCode::DelegatedIdentityUnverified,
        ErrorCode::DelegatedIdentityMismatch,
        ErrorCode::DelegatedIdentityIntegrity,
        ErrorCode::DelegatedTenantMismatch,
        ErrorCode::DelegatedTenantExpired,
        ErrorCode::DelegatedResultIntegrity,
        ErrorCode::DelegatedExecutionNotObserved,
        ErrorCode::DelegatedResultNotReady,
        ErrorCode::DelegatedResultResolverMissing,
    ];

    /// The code named by its seed-000 string (`connector.hermes_agent.*`).
    pub fn parse(s: &str) -> Option<ErrorCode> {
        ErrorCode::ALL.into_iter().find(|c| c.as_str() == s)
    }

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
            ErrorCode::DelegatedActionContractMismatch => {
                "connector.hermes_agent.delegated_action_contract_mismatch"
            }
            ErrorCode::DelegatedIdentityUnverified => {
                "connector.hermes_agent.delegated_identity_unverified"
            }
            ErrorCode::DelegatedIdentityMismatch => {
                "connector.hermes_agent.delegated_identity_mismatch"
            }
            ErrorCode::DelegatedIdentityIntegrity => {
                "connector.hermes_agent.delegated_identity_integrity"
            }
            ErrorCode::DelegatedTenantMismatch => {
                "connector.hermes_agent.delegated_tenant_mismatch"
            }
            ErrorCode::DelegatedTenantExpired => "connector.hermes_agent.delegated_tenant_expired",
            ErrorCode::DelegatedResultIntegrity => {
                "connector.hermes_agent.delegated_result_integrity"
            }
            ErrorCode::DelegatedExecutionNotObserved => {
                "connector.hermes_agent.delegated_execution_not_observed"
            }
            ErrorCode::DelegatedResultNotReady => {
                "connector.hermes_agent.delegated_result_not_ready"
            }
            ErrorCode::DelegatedResultResolverMissing => {
                "connector.hermes_agent.delegated_result_resolver_missing"
            }
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
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ConnectorError {
    pub code: ErrorCode,
    pub message: String,
    pub details: serde_json::Value,
    /// False except for `delegated_result_not_ready`: an operator error is not retried.
    pub retryable: bool,
    pub uncertain_outcome: bool,
}

impl ConnectorError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ConnectorError {
            code,
            message: message.into(),
            details: serde_json::Value::Null,
            // Only "not ready yet" may be asked again; everything else is final.
            retryable: code == ErrorCode::DelegatedResultNotReady,
            uncertain_outcome: code.uncertain_outcome(),
        }
    }
    pub fn with(mut self, details: serde_json::Value) -> Self {
        self.details = details;
        self
    }
}

#[cfg(test)]
mod display_tests {
    use super::*;

    /// An error code is written as its seed 000 code, every one of them.
    #[test]
    fn each_code_is_written_as_its_seed_000_name() {
        for c in ErrorCode::ALL {
            assert_eq!(c.to_string(), c.as_str());
            assert!(c.as_str().starts_with("connector.hermes_agent."));
        }
    }
}
