//! AOC-REQ-009 and AOC-REQ-011: the provider profile, and the one pure function that turns native
//! provider evidence into a profile interpretation or into missing knowledge.
//!
//! Terminal state is never inferred from an HTTP class, transport completion, absence from an
//! incomplete listing, exception text, elapsed time or a label the profile does not map: each of
//! those yields a [`MissingKnowledge`] flag and no status class.

use crate::aoc::binding::EvidenceBinding;
use crate::aoc::ids::{AttemptId, Millis};
use crate::digest::{CanonicalError, Digest, digest_of};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// The four profile-level interpretations (AOC-REQ-011). Anything else is unresolved.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Debug)]
#[serde(rename_all = "snake_case")]
pub enum StatusClass {
    /// The provider acknowledged receipt or ownership. Not success.
    Accepted,
    /// Authoritative evidence of non-acceptance. Does not prove that entry did not happen.
    NotAccepted,
    /// Terminal failure under the pinned semantics; proves no effect only where the mapping says so.
    FinalFailure,
    /// The pinned status source reports profile-defined success for the exact binding.
    Success,
}

impl StatusClass {
    pub fn is_terminal(self) -> bool {
        !matches!(self, StatusClass::Accepted)
    }
}

/// How one native status maps (AOC-REQ-011).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct StatusMapping {
    pub class: StatusClass,
    /// Whether this native status is authenticated proof that no protected effect happened
    /// (a `NO_EFFECT_CONFIRMED` equivalent). Never a refund (AOC-REQ-012).
    #[serde(default)]
    pub proves_no_effect: bool,
}

/// An authenticated status source the profile pins.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct StatusSource {
    pub id: String,
    /// What authenticates its answers (for example a signing key's fingerprint).
    pub pin: String,
    /// Whether the source answers authoritatively about the exact binding (a lookup by reference
    /// or key), as opposed to a listing whose completeness is governed by `completeness`.
    pub kind: SourceKind,
}

#[derive(Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Debug)]
#[serde(rename_all = "snake_case")]
pub enum SourceKind {
    Lookup,
    Listing,
    Response,
}

/// A provider profile (AOC §6, AOC-REQ-009). Its digest is reported with every run.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct ProviderProfile {
    pub id: String,
    pub version: String,
    /// Provider identity.
    pub provider: String,
    /// (2) Who is authoritative for the account / environment.
    pub account_authority: String,
    pub environments: Vec<String>,
    /// (1) Authenticated status sources and their pins.
    pub status_sources: Vec<StatusSource>,
    /// (3) The lookup key or reference the status sources answer for.
    pub lookup_key: String,
    /// Native key derivation rule.
    pub key_rule: String,
    /// (4) Retention horizon: a not-found beyond it is missing knowledge. `None`: unknown, so
    /// every not-found is missing knowledge.
    pub retention_ms: Option<u64>,
    /// (4) Freshness horizon: an observation older than this at interpretation is stale.
    pub freshness_ms: u64,
    /// (5) Whether absence from a listing the provider marks complete, within retention, is
    /// authoritative non-acceptance. `false`: absence never means anything.
    pub complete_listing_proves_absence: bool,
    /// (6) Native status → interpretation. Unmapped labels stay unresolved.
    pub mapping: BTreeMap<String, StatusMapping>,
    /// (6) Whether every `final_failure` proves that no protected effect happened.
    pub final_failure_proves_no_effect: bool,
}

/// A required item missing from a profile (AOC-REQ-009 lists seven).
#[derive(Clone, PartialEq, Eq, Debug, Serialize)]
pub struct ProfileDefect {
    pub field: &'static str,
    pub msg: String,
}

impl ProviderProfile {
    pub fn digest(&self) -> Result<Digest, CanonicalError> {
        digest_of(self)
    }

    /// Every defect at once: a profile lacking any AOC-REQ-009 item is not usable.
    pub fn validate(&self) -> Vec<ProfileDefect> {
        let mut d = Vec::new();
        let mut need = |ok: bool, field: &'static str, msg: &str| {
            if !ok {
                d.push(ProfileDefect {
                    field,
                    msg: msg.to_string(),
                });
            }
        };
        need(!self.id.trim().is_empty(), "id", "name the profile");
        need(
            !self.version.trim().is_empty(),
            "version",
            "pin a profile version",
        );
        need(
            !self.provider.trim().is_empty(),
            "provider",
            "name the provider identity",
        );
        need(
            !self.account_authority.trim().is_empty(),
            "account_authority",
            "say who is authoritative for accounts and environments",
        );
        need(
            !self.environments.is_empty(),
            "environments",
            "list at least one environment",
        );
        need(
            !self.status_sources.is_empty(),
            "status_sources",
            "pin at least one authenticated status source",
        );
        for s in &self.status_sources {
            need(
                !s.pin.trim().is_empty(),
                "status_sources.pin",
                &format!("status source {:?} needs an authentication pin", s.id),
            );
        }
        need(
            !self.lookup_key.trim().is_empty(),
            "lookup_key",
            "say which key or reference status sources answer for",
        );
        need(
            self.freshness_ms > 0,
            "freshness_ms",
            "declare a freshness horizon above zero",
        );
        for class in [StatusClass::Accepted, StatusClass::Success] {
            need(
                self.mapping.values().any(|m| m.class == class),
                "mapping",
                &format!("map at least one native status to {class:?}"),
            );
        }
        d
    }

    pub fn source(&self, id: &str) -> Option<&StatusSource> {
        self.status_sources.iter().find(|s| s.id == id)
    }
}

/// The provider's answer, as received. Kept separately from its interpretation (AOC-REQ-009).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, Debug)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum NativeResult {
    /// A decoded status label.
    Status { label: String },
    /// The source said it has no such record.
    NotFound,
    /// A listing, with the provider's own completeness flag and the label found, if any.
    Listing {
        complete: bool,
        found: Option<String>,
    },
    /// An HTTP error status without a decodable status document.
    HttpError { status: u16 },
    /// No reply (connection closed, timeout). `detail` is the local error text, never evidence.
    Transport { detail: String },
    /// A reply that could not be decoded.
    Undecodable,
}

/// Where a piece of evidence came from.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, Debug)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum EvidenceKind {
    /// The reply to a provider-entry attempt.
    Response { attempt: AttemptId },
    /// A status-source lookup by reference.
    StatusQuery,
    /// A status-source listing (by key): what it said, even when the listing failed.
    Listing,
}

/// One piece of provider evidence submitted to the domain.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct Evidence {
    /// The status source (profile id of the source) it came from.
    pub source: String,
    pub kind: EvidenceKind,
    pub observed_at: Millis,
    /// Whether its authentication (signature, tag) verified against the source's pin.
    pub authenticated: bool,
    /// What it says it is about.
    pub bound_to: EvidenceBinding,
    pub native: NativeResult,
    /// Digest of the raw bytes received (the raw response itself is never stored or reported).
    pub native_digest: Digest,
}

/// An explicit "the sources cannot establish this" flag. Never a failure, a non-entry, a success
/// or a retry right.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Debug)]
#[serde(tag = "flag", rename_all = "snake_case")]
pub enum MissingKnowledge {
    /// The evidence's authentication did not verify.
    Unauthenticated,
    /// A response that cannot be bound to the exact entry attempt (AOC-REQ-007).
    UnboundAttempt,
    /// A native label the profile does not map.
    Unmapped { label: String },
    /// The source has no record, within or without a known retention horizon.
    NotFound,
    /// Not found, and the entry is older than the profile's retention horizon.
    BeyondRetention,
    /// Absent from a listing that is not complete (or whose completeness the profile disowns).
    IncompleteListing,
    /// Older than the profile's freshness horizon.
    Stale,
    /// Only an HTTP status, no status document.
    HttpStatusOnly { status: u16 },
    /// No reply at all.
    Transport,
    /// The reply did not decode.
    Undecodable,
    /// Authoritative observations disagree; none is selected.
    Conflicting,
    /// Evidence about an occurrence that has no recorded provider entry.
    NoEntryRecorded,
    /// The composition is unsupported (AOC §5 aliasing).
    CompositionUnsupported,
}

impl fmt::Display for MissingKnowledge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MissingKnowledge::Unmapped { label } => write!(f, "unmapped native status {label:?}"),
            MissingKnowledge::HttpStatusOnly { status } => write!(f, "only HTTP status {status}"),
            other => {
                let v = serde_json::to_value(other).unwrap_or_default();
                write!(f, "{}", v["flag"].as_str().unwrap_or("missing knowledge"))
            }
        }
    }
}

/// The profile's reading of one piece of evidence.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct Interpretation {
    /// `None` whenever anything is missing.
    pub class: Option<StatusClass>,
    pub proves_no_effect: bool,
    pub missing: BTreeSet<MissingKnowledge>,
}

impl ProviderProfile {
    /// Interprets evidence under this profile (pure). `entered_at` is the occurrence's provider
    /// entry time (for retention), `now` the interpretation time (for freshness).
    pub fn interpret(
        &self,
        ev: &Evidence,
        entered_at: Option<Millis>,
        now: Millis,
    ) -> Interpretation {
        let mut missing = BTreeSet::new();
        if !ev.authenticated {
            missing.insert(MissingKnowledge::Unauthenticated);
        }
        if now.since(ev.observed_at) > self.freshness_ms {
            missing.insert(MissingKnowledge::Stale);
        }
        let beyond_retention = match (self.retention_ms, entered_at) {
            (Some(r), Some(at)) => now.since(at) > r,
            _ => false,
        };
        let label_class =
            |label: &str, missing: &mut BTreeSet<MissingKnowledge>| match self.mapping.get(label) {
                Some(m) => Some((
                    m.class,
                    m.proves_no_effect
                        || (m.class == StatusClass::FinalFailure
                            && self.final_failure_proves_no_effect),
                )),
                None => {
                    missing.insert(MissingKnowledge::Unmapped {
                        label: label.to_string(),
                    });
                    None
                }
            };
        let read = match &ev.native {
            NativeResult::Status { label } => label_class(label, &mut missing),
            NativeResult::NotFound => {
                missing.insert(if beyond_retention {
                    MissingKnowledge::BeyondRetention
                } else {
                    MissingKnowledge::NotFound
                });
                None
            }
            NativeResult::Listing {
                found: Some(label), ..
            } => label_class(label, &mut missing),
            NativeResult::Listing {
                complete,
                found: None,
            } => {
                if *complete && self.complete_listing_proves_absence && !beyond_retention {
                    Some((StatusClass::NotAccepted, false))
                } else if beyond_retention {
                    missing.insert(MissingKnowledge::BeyondRetention);
                    None
                } else {
                    missing.insert(MissingKnowledge::IncompleteListing);
                    None
                }
            }
            NativeResult::HttpError { status } => {
                missing.insert(MissingKnowledge::HttpStatusOnly { status: *status });
                None
            }
            NativeResult::Transport { .. } => {
                missing.insert(MissingKnowledge::Transport);
                None
            }
            NativeResult::Undecodable => {
                missing.insert(MissingKnowledge::Undecodable);
                None
            }
        };
        match read {
            Some((class, no_effect)) if missing.is_empty() => Interpretation {
                class: Some(class),
                proves_no_effect: no_effect,
                missing,
            },
            _ => Interpretation {
                class: None,
                proves_no_effect: false,
                missing,
            },
        }
    }
}
