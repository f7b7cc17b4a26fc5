//! Deployment policy, validated before every run with the seed's defaults and ranges.

use super::error::{ConnectorError, ErrorCode};
use serde::{Deserialize, Serialize};

/// The governed default instructions: downstream Action ids are server-assigned, the operator's
/// own id is never reused, nothing is fabricated.
pub const DEFAULT_INSTRUCTIONS: &str = "You are the governed AIP operator. Call admitted AIP tools only through aip_call, omit action_id in every downstream aip_call so the server assigns it, never reuse the operator Action id, never fabricate results or approvals, make exactly one aip_call with the given arguments when delegated a child Action, and stop when the objective is met.";

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Policy {
    pub delegation_enabled: bool,
    pub delegation_requires_approval: bool,
    pub model: Option<String>,
    pub system_instructions: String,
    pub timeout_ms: u64,
    pub poll_interval_ms: u64,
    pub max_events: u64,
    pub max_input_bytes: u64,
    pub max_delegation_depth: u64,
    pub start_claim_ttl_ms: u64,
    pub cancel_grace_ms: u64,
    pub delegation_capability_prefixes: Vec<String>,
    pub delegation_scope_prefixes: Vec<String>,
    /// Capabilities whose delegation needs no Approved decision (ideally one full id each).
    pub delegation_approval_exempt_capability_prefixes: Vec<String>,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            delegation_enabled: false,
            delegation_requires_approval: true,
            model: None,
            system_instructions: DEFAULT_INSTRUCTIONS.into(),
            timeout_ms: 900_000,
            poll_interval_ms: 250,
            max_events: 4096,
            max_input_bytes: 1_048_576,
            max_delegation_depth: 16,
            start_claim_ttl_ms: 60_000,
            cancel_grace_ms: 15_000,
            delegation_capability_prefixes: Vec::new(),
            delegation_scope_prefixes: Vec::new(),
            delegation_approval_exempt_capability_prefixes: Vec::new(),
        }
    }
}

impl Policy {
    /// Every bound at once; the error quotes the ranges.
    pub fn validate(&self) -> Result<(), ConnectorError> {
        let mut bad = Vec::new();
        let mut range = |name: &str, v: u64, lo: u64, hi: u64| {
            if !(lo..=hi).contains(&v) {
                bad.push(format!("{name} {v} is outside {lo}–{hi}"));
            }
        };
        range("timeout_ms", self.timeout_ms, 1_000, 86_400_000);
        range("poll_interval_ms", self.poll_interval_ms, 10, 60_000);
        range("max_events", self.max_events, 1, 100_000);
        range("max_input_bytes", self.max_input_bytes, 1_024, 16_777_216);
        range("max_delegation_depth", self.max_delegation_depth, 1, 128);
        range(
            "start_claim_ttl_ms",
            self.start_claim_ttl_ms,
            1_000,
            300_000,
        );
        range("cancel_grace_ms", self.cancel_grace_ms, 1_000, 300_000);
        if self.system_instructions.trim().is_empty() || self.system_instructions.len() > 131_072 {
            bad.push("system_instructions must be non-empty and at most 131072 bytes".into());
        }
        for p in self
            .delegation_capability_prefixes
            .iter()
            .chain(&self.delegation_scope_prefixes)
            .chain(&self.delegation_approval_exempt_capability_prefixes)
        {
            if p.is_empty() || p.len() > 512 {
                bad.push(format!("delegation prefix {p:?} must be 1–512 bytes"));
            }
        }
        if self.delegation_enabled
            && (self.delegation_capability_prefixes.is_empty()
                || self.delegation_scope_prefixes.is_empty())
        {
            bad.push("delegation_enabled needs both delegation_capability_prefixes and delegation_scope_prefixes (use \"*\" to opt into an unrestricted dimension)".into());
        }
        if bad.is_empty() {
            Ok(())
        } else {
            Err(ConnectorError::new(
                ErrorCode::ConfigurationOrInput,
                bad.join("; "),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::timeout_low(Policy { timeout_ms: 999, ..Policy::default() }, "timeout_ms 999 is outside 1000–86400000")]
    #[case::poll_high(Policy { poll_interval_ms: 60_001, ..Policy::default() }, "poll_interval_ms")]
    #[case::events_zero(Policy { max_events: 0, ..Policy::default() }, "max_events")]
    #[case::input_small(Policy { max_input_bytes: 10, ..Policy::default() }, "max_input_bytes")]
    #[case::depth(Policy { max_delegation_depth: 129, ..Policy::default() }, "max_delegation_depth")]
    #[case::claim_ttl(Policy { start_claim_ttl_ms: 300_001, ..Policy::default() }, "start_claim_ttl_ms")]
    #[case::grace(Policy { cancel_grace_ms: 999, ..Policy::default() }, "cancel_grace_ms")]
    #[case::instructions(Policy { system_instructions: " ".into(), ..Policy::default() }, "system_instructions")]
    #[case::delegation_without_allowlists(Policy { delegation_enabled: true, ..Policy::default() }, "needs both")]
    #[case::empty_prefix(Policy { delegation_scope_prefixes: vec![String::new()], ..Policy::default() }, "must be 1–512 bytes")]
    #[case::long_prefix(Policy { delegation_capability_prefixes: vec!["c".repeat(513)], ..Policy::default() }, "must be 1–512 bytes")]
    #[case::delegation_one_allowlist(Policy { delegation_enabled: true, delegation_capability_prefixes: vec!["cap:".into()], ..Policy::default() }, "needs both")]
    fn bounds_are_enforced(#[case] p: Policy, #[case] needle: &str) {
        let e = p.validate().expect_err("out of bounds");
        assert_eq!(e.code, ErrorCode::ConfigurationOrInput);
        assert!(e.message.contains(needle), "{}", e.message);
    }

    #[test]
    fn defaults_are_valid_and_delegation_is_off() {
        let p = Policy::default();
        assert!(p.validate().is_ok());
        assert!(!p.delegation_enabled && p.delegation_requires_approval);
    }
}
