//! AOC §3, §5 and AOC-REQ-013: what the domain does not cover, declared as data that reports
//! disclose, and the composition settings it refuses to claim.
//!
//! Bypass paths are never "fenced": the type has no such field, because fencing inside the domain
//! revokes no credential and stops no outside path (AOC-REQ-006).

use serde::{Deserialize, Serialize};

/// Kinds of path that reach the provider without the domain (AOC §3).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, Debug)]
#[serde(rename_all = "snake_case")]
pub enum BypassKind {
    Direct,
    Administrator,
    BreakGlass,
    Queued,
    AlternateProtocol,
    SystemOfRecord,
}

impl BypassKind {
    pub const ALL: [BypassKind; 6] = [
        BypassKind::Direct,
        BypassKind::Administrator,
        BypassKind::BreakGlass,
        BypassKind::Queued,
        BypassKind::AlternateProtocol,
        BypassKind::SystemOfRecord,
    ];
}

/// One disclosed bypass path.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct BypassPath {
    pub kind: BypassKind,
    pub description: String,
}

/// How AADP permit reservations are accounted beside the AOC occurrence exposure (§5).
#[derive(Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Debug, Default)]
#[serde(rename_all = "snake_case")]
pub enum AadpAccounting {
    /// Not composed with AADP.
    #[default]
    None,
    /// Two distinct native accounting facts: supported.
    Distinct,
    /// One counter for both: contradictory transitions, reported unsupported.
    AliasedToOccurrenceExposure,
}

/// The composition verdict the domain reports about itself.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, Debug)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum CompositionStatus {
    Supported,
    Unsupported { reason: String },
}

/// §5: aliasing the AADP reservation to the AOC exposure counter is unsupported.
pub fn composition_status(aadp: AadpAccounting) -> CompositionStatus {
    match aadp {
        AadpAccounting::None | AadpAccounting::Distinct => CompositionStatus::Supported,
        AadpAccounting::AliasedToOccurrenceExposure => CompositionStatus::Unsupported {
            reason: "the AADP permit reservation is aliased to the AOC occurrence exposure counter; \
                     AADP expiry and AOC provider-entry accounting are contradictory transitions on one \
                     counter (AOC §5)"
                .into(),
        },
    }
}

/// Statements AOC-REQ-013 forbids an implementation to make about itself.
pub const PROHIBITED_CLAIMS: [&str; 4] = [
    "copying an operation record transfers exclusive ownership of a live ledger",
    "a Succession Receipt fences a provider path",
    "AADP and BCR state machines are interchangeable",
    "an EP evidence format is mandatory",
];

/// What the reference domain says about itself (checked against [`PROHIBITED_CLAIMS`]).
pub fn reference_claims() -> Vec<String> {
    vec![
        "One coordination domain per store namespace serializes reservation, provider entry, \
         executor-generation changes and terminal reconciliation for the paths it mediates."
            .into(),
        "Executor-generation fencing applies only inside this domain; it revokes no credential and \
         stops no path outside it."
            .into(),
        "Same-team reference implementation: passing its cases shows consistency with the profile, \
         not interoperability, live-provider correctness, deployment or adoption."
            .into(),
    ]
}

/// Whether a claim text makes one of the prohibited claims (case-insensitive containment).
pub fn prohibited_in(claim: &str) -> Option<&'static str> {
    let lc = claim.to_lowercase();
    PROHIBITED_CLAIMS
        .into_iter()
        .find(|p| lc.contains(&p.to_lowercase()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliasing_is_unsupported_and_distinct_is_supported() {
        assert_eq!(
            composition_status(AadpAccounting::Distinct),
            CompositionStatus::Supported
        );
        assert!(matches!(
            composition_status(AadpAccounting::AliasedToOccurrenceExposure),
            CompositionStatus::Unsupported { .. }
        ));
    }

    #[test]
    fn reference_claims_make_no_prohibited_claim_and_the_check_can_fail() {
        for c in reference_claims() {
            assert_eq!(prohibited_in(&c), None, "{c}");
        }
        assert!(
            prohibited_in("We guarantee a Succession Receipt fences a provider path.").is_some()
        );
    }
}
