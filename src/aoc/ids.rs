//! Identifiers of the coordination domain. Each is its own type so that a grant id, a task id or an
//! action digest can never be passed where an occurrence id is expected (AOC-REQ-002).

use serde::{Deserialize, Serialize};
use std::fmt;

macro_rules! text_id {
    ($(#[$m:meta])* $name:ident, $prefix:literal) => {
        $(#[$m])*
        #[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
        #[serde(transparent)]
        pub struct $name(String);

        /// Read from a store or a peer: an empty, over-long (above 512 bytes) or
        /// control-character id is refused, never taken as an id.
        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                if s.trim().is_empty() || s.len() > 512 || s.chars().any(char::is_control) {
                    return Err(serde::de::Error::custom(format!(
                        "{} {:?} is not an id (1 to 512 bytes, no control characters)",
                        stringify!($name),
                        s.chars().take(40).collect::<String>()
                    )));
                }
                Ok($name(s))
            }
        }

        impl $name {
            /// The id prefix minted ids carry.
            pub const PREFIX: &'static str = $prefix;
            /// Mints a fresh, time-ordered id (UUID v7).
            pub fn mint() -> Self {
                $name(format!("{}{}", $prefix, uuid::Uuid::now_v7().simple()))
            }
            /// Wraps an id read back from a store or a peer.
            pub fn from_stored(s: impl Into<String>) -> Self {
                $name(s.into())
            }
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

text_id!(
    /// AOC-REQ-002: a stable operation-occurrence id, minted by the domain before provider entry.
    /// Never a grant id, a reusable task id or an action digest.
    OccurrenceId,
    "occ_"
);
text_id!(
    /// One provider-entry attempt (there is at most one per occurrence, AOC-REQ-010).
    AttemptId,
    "att_"
);
text_id!(
    /// A durable admission of work into a lane (seed 003: queued → started → unknown | terminal).
    AdmissionId,
    "adm_"
);

/// A lane is one executor slot of a domain: a lease decides which executor writes for it, and
/// replacing the executor advances the lane's generation (AOC-REQ-006).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Debug)]
#[serde(transparent)]
pub struct LaneId(pub String);

impl fmt::Display for LaneId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The identity an executor process presents (process, host, build …), chosen by the deployment.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Debug)]
#[serde(transparent)]
pub struct ExecutorId(pub String);

impl fmt::Display for ExecutorId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A monotonic executor generation (epoch) of one lane.
#[derive(
    Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Debug, Default,
)]
#[serde(transparent)]
pub struct Generation(pub u64);

impl fmt::Display for Generation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "g{}", self.0)
    }
}

/// Seed 003's holder identity: not just the lane, but the executor and the generation it was
/// granted. A late refresh or release by an older holder cannot touch a successor's lease.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Debug)]
pub struct Holder {
    pub lane: LaneId,
    pub executor: ExecutorId,
    pub generation: Generation,
}

impl fmt::Display for Holder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}@{}", self.lane, self.executor, self.generation)
    }
}

pub use crate::clock::Millis;

/// An owner secret returned once by `reserve` or `adopt`. Only its digest is stored or reported
/// (AOC §7: reports never carry reservation tokens).
#[derive(Clone, PartialEq, Eq)]
pub struct OwnerToken(String);

impl OwnerToken {
    pub fn mint() -> Self {
        OwnerToken(format!(
            "rtok_{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        ))
    }
    pub fn from_secret(s: impl Into<String>) -> Self {
        OwnerToken(s.into())
    }
    pub fn secret(&self) -> &str {
        &self.0
    }
    pub fn digest(&self) -> crate::digest::Digest {
        crate::digest::Digest::of_bytes(self.0.as_bytes())
    }
}

impl fmt::Debug for OwnerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OwnerToken(<redacted>)")
    }
}

/// Which declared limit (AOC-REQ-006). Here, beside the other core vocabulary, so that the store
/// can name it without importing the domain's error module.
#[derive(Clone, Copy, PartialEq, Eq, Debug, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitKind {
    Pending,
    InFlight,
}

#[cfg(test)]
mod display_tests {
    use super::Generation;

    /// Reports and refusals name generations as `g<N>` (a refusal quoting "g0" for every
    /// generation would hide which one was retired).
    #[test]
    fn a_generation_is_written_g_and_its_number() {
        assert_eq!(Generation(3).to_string(), "g3");
        assert_ne!(Generation(1).to_string(), Generation(2).to_string());
    }
}

#[cfg(test)]
mod id_tests {
    use super::*;

    /// An id read from a peer is an id: one it minted passes, an empty, blank, over-long or
    /// control-character one is refused with a message naming the kind.
    #[test]
    fn an_id_from_a_peer_is_checked() {
        let ok: OccurrenceId = serde_json::from_value(serde_json::json!("occ_1")).expect("an id");
        assert_eq!(ok.as_str(), "occ_1");
        for bad in [
            serde_json::json!(""),
            serde_json::json!("   "),
            serde_json::json!("x".repeat(513)),
            serde_json::json!("occ\n1"),
        ] {
            let e = serde_json::from_value::<OccurrenceId>(bad.clone()).expect_err("refused");
            assert!(e.to_string().contains("OccurrenceId"), "{bad}: {e}");
        }
    }
}
