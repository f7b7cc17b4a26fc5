//! AOC-REQ-004: the append-only history of an occurrence, chained by digest so that any rewrite,
//! removal or reordering is detectable by [`verify_chain`].
//!
//! Each stored entry is `{seq, prev, digest, body}` where `digest = SHA-256(JCS({seq, prev, body}))`
//! and `prev` is the previous entry's digest (`null` for the first).

use crate::aoc::binding::{ProviderBinding, ProviderRef};
use crate::aoc::ids::{AttemptId, ExecutorId, Generation, LaneId, Millis, OccurrenceId};
use crate::aoc::profile::{Evidence, Interpretation};
use crate::digest::{CanonicalError, Digest, digest_of};
use serde::{Deserialize, Serialize};

/// Caller-chosen labels recorded at creation. They keep their native types and meanings and never
/// establish an occurrence by themselves (AOC-REQ-002).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct CallerLabels {
    pub retry_id: Option<String>,
    pub task_id: Option<String>,
    pub grant_id: Option<String>,
    pub action_digest: Option<Digest>,
    /// AADP `request_id` (a decision-idempotency key, not an occurrence id).
    pub aadp_request_id: Option<String>,
    /// BCR `operation_id` (capability-scoped).
    pub bcr_operation_id: Option<String>,
}

/// A remedy's link to the occurrence it compensates (AOC-REQ-012).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RemedyOf {
    pub original: OccurrenceId,
    /// The separate native authorization for the remedy.
    pub authorization: String,
}

/// The terminal reconciliation decision.
#[derive(Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Debug)]
#[serde(tag = "class", rename_all = "snake_case")]
pub enum Outcome {
    Success,
    NotAccepted,
    /// `no_effect`: authenticated evidence proves no protected effect; otherwise the effect stays
    /// unresolved even though the outcome is final.
    FinalFailure {
        no_effect: bool,
    },
}

/// Why a pre-entry release was asked for. Recorded; never itself the proof (AOC-REQ-008): the proof
/// is the domain's serialized reading that the occurrence is still in its pre-entry state.
#[derive(Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Debug)]
#[serde(rename_all = "snake_case")]
pub enum ReleaseReason {
    /// The owner decided not to enter.
    OwnerAbandoned,
    /// The successor found a reservation its predecessor never entered.
    PredecessorNeverEntered,
    /// The work's deadline passed.
    DeadlineExpired,
}

impl ReleaseReason {
    /// The reason named as cases and `aocheck-sut/2` write it (`owner_abandoned` …).
    pub fn parse(s: &str) -> Option<Self> {
        serde_json::from_value(serde_json::Value::String(s.into())).ok()
    }
}

/// One history entry body. Local labels, never overwritten.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, Debug)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum EntryBody {
    /// Occurrence minted under its creation binding (AOC-REQ-002).
    Created {
        occurrence: OccurrenceId,
        domain: String,
        lane: LaneId,
        generation: Generation,
        creation_binding: Digest,
        request_digest: Digest,
        labels: CallerLabels,
        remedy_of: Option<RemedyOf>,
        at: Millis,
    },
    /// Prepared, no provider entry: binding fixed, authority held (AOC-REQ-003, -008, -012).
    Reserved {
        generation: Generation,
        binding: ProviderBinding,
        binding_digest: Digest,
        amount: u64,
        owner_token_digest: Digest,
        at: Millis,
    },
    /// A successor read the occurrence and took ownership (AOC-REQ-005).
    Adopted {
        from_generation: Generation,
        to_generation: Generation,
        executor: ExecutorId,
        owner_token_digest: Digest,
        at: Millis,
    },
    /// Serialized provider entry: reserved → consumed, before the request leaves (AOC-REQ-012).
    Entered {
        generation: Generation,
        attempt: AttemptId,
        binding_digest: Digest,
        at: Millis,
    },
    /// The provider reference became known (binding item 5).
    Acknowledged {
        attempt: Option<AttemptId>,
        provider_ref: ProviderRef,
        at: Millis,
    },
    /// One status observation: the evidence as received and its interpretation, separately.
    Observed {
        evidence: Evidence,
        interpretation: Interpretation,
        submitted_by: Option<ExecutorId>,
        at: Millis,
    },
    /// The terminal reconciliation decision and the observations it rests on.
    Resolved {
        outcome: Outcome,
        evidence: Vec<EvidenceRef>,
        at: Millis,
    },
    /// Later authenticated evidence proved no effect for a final failure. Authority stays consumed.
    EffectClosed { evidence: EvidenceRef, at: Millis },
    /// Pre-entry release: terminal replay tombstone; held authority returned (AOC-REQ-008).
    Released {
        generation: Generation,
        reason: ReleaseReason,
        at: Millis,
    },
    /// A separately authorized remedy occurrence was linked (AOC-REQ-012).
    RemedyLinked {
        remedy: OccurrenceId,
        authorization: String,
        at: Millis,
    },
}

impl EntryBody {
    /// The entry's type label, as stored.
    pub fn kind(&self) -> &'static str {
        match self {
            EntryBody::Created { .. } => "created",
            EntryBody::Reserved { .. } => "reserved",
            EntryBody::Adopted { .. } => "adopted",
            EntryBody::Entered { .. } => "entered",
            EntryBody::Acknowledged { .. } => "acknowledged",
            EntryBody::Observed { .. } => "observed",
            EntryBody::Resolved { .. } => "resolved",
            EntryBody::EffectClosed { .. } => "effect_closed",
            EntryBody::Released { .. } => "released",
            EntryBody::RemedyLinked { .. } => "remedy_linked",
        }
    }
}

/// A pointer to an earlier entry by sequence number and digest.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct EvidenceRef {
    pub seq: u64,
    pub digest: Digest,
}

/// A stored history entry.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct ChainedEntry {
    pub seq: u64,
    pub prev: Option<Digest>,
    pub digest: Digest,
    pub body: EntryBody,
}

#[derive(Serialize)]
struct Hashed<'a> {
    seq: u64,
    prev: &'a Option<Digest>,
    body: &'a EntryBody,
}

impl ChainedEntry {
    /// Chains `body` after `prev` (the digest of entry `seq - 1`, or `None` for `seq == 0`).
    pub fn seal(seq: u64, prev: Option<Digest>, body: EntryBody) -> Result<Self, CanonicalError> {
        let digest = digest_of(&Hashed {
            seq,
            prev: &prev,
            body: &body,
        })?;
        Ok(ChainedEntry {
            seq,
            prev,
            digest,
            body,
        })
    }

    /// Chains a list of bodies after `head` (`len` entries already present).
    pub fn seal_all(
        len: u64,
        head: Option<Digest>,
        bodies: Vec<EntryBody>,
    ) -> Result<Vec<ChainedEntry>, CanonicalError> {
        let mut out = Vec::with_capacity(bodies.len());
        let mut prev = head;
        for (i, body) in bodies.into_iter().enumerate() {
            let e = ChainedEntry::seal(len + i as u64, prev.clone(), body)?;
            prev = Some(e.digest.clone());
            out.push(e);
        }
        Ok(out)
    }
}

/// A break in a history chain.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error, Serialize)]
#[error("history entry {seq}: {reason}")]
pub struct ChainBreak {
    pub seq: u64,
    pub reason: String,
}

/// Verifies sequence numbers, links and digests of a whole history.
pub fn verify_chain(entries: &[ChainedEntry]) -> Result<(), ChainBreak> {
    verify_chain_with(entries, &Verified::default())
}

/// Entries whose digest was recomputed and matched, by digest: an entry equal in every field
/// to one of them verifies without hashing it again. Bounded: past `Verified::MAX` entries it
/// starts again empty.
#[derive(Debug, Default)]
pub struct Verified(std::sync::Mutex<std::collections::HashMap<Digest, ChainedEntry>>);

impl Verified {
    pub const MAX: usize = 100_000;
    fn knows(&self, e: &ChainedEntry) -> bool {
        self.0
            .lock()
            .is_ok_and(|m| m.get(&e.digest).is_some_and(|k| k == e))
    }
    fn add(&self, e: &ChainedEntry) {
        if let Ok(mut m) = self.0.lock() {
            if m.len() >= Self::MAX {
                m.clear();
            }
            m.insert(e.digest.clone(), e.clone());
        }
    }
}

/// [`verify_chain`], not hashing again an entry `verified` holds (equal in every field).
pub fn verify_chain_with(entries: &[ChainedEntry], verified: &Verified) -> Result<(), ChainBreak> {
    let mut prev: Option<Digest> = None;
    for (i, e) in entries.iter().enumerate() {
        let i = i as u64;
        if e.seq != i {
            return Err(ChainBreak {
                seq: i,
                reason: format!("sequence number {} where {i} was expected", e.seq),
            });
        }
        if e.prev != prev {
            return Err(ChainBreak {
                seq: i,
                reason: "link to the previous entry does not match its digest".into(),
            });
        }
        if verified.knows(e) {
            prev = Some(e.digest.clone());
            continue;
        }
        let recomputed =
            ChainedEntry::seal(e.seq, e.prev.clone(), e.body.clone()).map_err(|err| {
                ChainBreak {
                    seq: i,
                    reason: format!("entry cannot be canonicalised: {err}"),
                }
            })?;
        if recomputed.digest != e.digest {
            return Err(ChainBreak {
                seq: i,
                reason: "digest does not match the entry's content (rewritten)".into(),
            });
        }
        verified.add(e);
        prev = Some(e.digest.clone());
    }
    Ok(())
}

/// Whether `after` keeps every entry of `before` byte for byte, in order (append-only).
pub fn is_prefix_preserving(before: &[ChainedEntry], after: &[ChainedEntry]) -> bool {
    after.len() >= before.len() && before.iter().zip(after).all(|(a, b)| a == b)
}
