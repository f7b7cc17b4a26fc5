//! The domain's port to durable storage: the [`Store`] trait every store implements, the
//! preconditions a write carries ([`Fence`], [`LimitCheck`], an expected length) and what a store
//! answers. The domain ([`super::domain::Domain`]) is written against this port only; the
//! implementations live in `crate::store`, which re-exports all of it (so `store::Store` reads as
//! before), and the store conformance suite (`tests/it/store_conformance.rs`) judges them.

use super::admission::{Admission, AdmissionError};
use super::history::ChainedEntry;
use super::ids::LimitKind;
use super::ids::{ExecutorId, Holder, LaneId, Millis, OccurrenceId};
use super::lease::{AcquireMode, Lease, LeaseError};
use super::occurrence::Phase;
use crate::digest::Digest;
use serde::Serialize;
use std::future::Future;

/// Why a store call failed.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StoreError {
    /// Lost an optimistic race: the expected length or version no longer holds. Nothing written.
    #[error("conflict: {what}")]
    Conflict { what: String },
    /// The fence's holder is not the lane's current, live lease holder. Nothing written.
    #[error("fenced: {holder} is not the current lease holder")]
    Fenced {
        holder: Holder,
        current: Option<Holder>,
    },
    /// A lease operation was refused. Nothing written.
    #[error("lease: {0:?}")]
    Lease(LeaseError),
    /// A declared limit would be exceeded. Nothing written.
    #[error("{which:?} limit {limit} reached ({current} held)")]
    Limit {
        which: LimitKind,
        limit: u32,
        current: u32,
    },
    /// An admission transition was refused. Nothing written.
    #[error("admission: {0}")]
    Admission(AdmissionError),
    /// The row to change does not exist. Nothing written.
    #[error("not found: {what}")]
    NotFound { what: String },
    /// The backend failed; a commit may or may not have happened only if `during_commit`.
    #[error("backend: {detail}")]
    Backend { detail: String, during_commit: bool },
    /// Stored data does not decode.
    #[error("corrupt: {detail}")]
    Corrupt { detail: String },
}

impl StoreError {
    pub(crate) fn backend(e: impl std::fmt::Display) -> Self {
        StoreError::Backend {
            detail: e.to_string(),
            during_commit: false,
        }
    }
    pub(crate) fn commit(e: impl std::fmt::Display) -> Self {
        StoreError::Backend {
            detail: e.to_string(),
            during_commit: true,
        }
    }
    pub(crate) fn corrupt(e: impl std::fmt::Display) -> Self {
        StoreError::Corrupt {
            detail: e.to_string(),
        }
    }
}

/// The lease a fenced write must still be admitted by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fence {
    pub holder: Holder,
    pub now: Millis,
}

/// A declared limit checked atomically with the write: the number of other occurrences of the
/// lane in `which` must stay below `limit`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LimitCheck {
    pub which: LimitKind,
    pub limit: u32,
}

/// A new occurrence and its first history entry.
#[derive(Clone, Debug)]
pub struct NewOccurrence {
    pub id: OccurrenceId,
    pub lane: LaneId,
    pub creation_binding: Digest,
    /// Set only when the deployment enables the at-most-one action fence (AOC-REQ-002).
    pub action_fence: Option<Digest>,
    pub first: ChainedEntry,
}

/// What `create` did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CreateResult {
    Created,
    /// The creation binding already named this occurrence; nothing written.
    Existing(OccurrenceId),
    /// The action fence already named this occurrence; nothing written.
    ActionFenced(OccurrenceId),
}

/// What an occurrence counts as against the declared limits. Stores keep it per occurrence and
/// update it only when it changes (creation, entry, resolution, release), so most transitions are
/// a single insert.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// Created or reserved, not entered.
    Pending,
    /// Entered, without a terminal decision.
    InFlight,
    /// Resolved or released.
    Closed,
}

impl Class {
    pub fn label(self) -> &'static str {
        match self {
            Class::Pending => "pending",
            Class::InFlight => "in_flight",
            Class::Closed => "closed",
        }
    }
    pub fn from_label(s: &str) -> Result<Class, StoreError> {
        Ok(match s {
            "pending" => Class::Pending,
            "in_flight" => Class::InFlight,
            "closed" => Class::Closed,
            other => {
                return Err(StoreError::corrupt(format!(
                    "unknown class label {other:?}"
                )));
            }
        })
    }
    /// The class a limit counts.
    pub fn of_limit(which: LimitKind) -> Class {
        match which {
            LimitKind::Pending => Class::Pending,
            LimitKind::InFlight => Class::InFlight,
        }
    }
}

impl From<Phase> for Class {
    fn from(p: Phase) -> Class {
        if p.is_pending() {
            Class::Pending
        } else if p.is_in_flight() {
            Class::InFlight
        } else {
            Class::Closed
        }
    }
}

/// An append to an occurrence's history.
#[derive(Clone, Debug)]
pub struct Append {
    pub occurrence: OccurrenceId,
    /// The history length the entries follow: they are written at `expected_len …`, and the
    /// append fails with a conflict if any of those positions is taken or the history is shorter.
    pub expected_len: u64,
    pub entries: Vec<ChainedEntry>,
    /// The occurrence's new class, when this append changes it.
    pub class_change: Option<Class>,
    pub fence: Option<Fence>,
    pub limit: Option<LimitCheck>,
}

/// A listing row.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct OccurrenceSummary {
    pub id: OccurrenceId,
    pub lane: LaneId,
    pub class: Class,
    pub len: u64,
}

/// What a store is, for reports.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StoreInfo {
    pub kind: &'static str,
    /// Whether a committed transition survives a process crash.
    pub durable: bool,
}

/// The durable state of coordination domains, one namespace per domain.
pub trait Store: Send + Sync + 'static {
    fn info(&self) -> StoreInfo;

    fn lease_get(
        &self,
        ns: &str,
        lane: &LaneId,
    ) -> impl Future<Output = Result<Option<Lease>, StoreError>> + Send;

    /// Acquire (or, with [`AcquireMode::Replace`], take over) a lane's lease, advancing its
    /// generation.
    fn lease_acquire(
        &self,
        ns: &str,
        lane: &LaneId,
        executor: &ExecutorId,
        now: Millis,
        ttl_ms: u64,
        mode: AcquireMode,
    ) -> impl Future<Output = Result<Lease, StoreError>> + Send;

    fn lease_refresh(
        &self,
        ns: &str,
        holder: &Holder,
        now: Millis,
        ttl_ms: u64,
    ) -> impl Future<Output = Result<Lease, StoreError>> + Send;

    fn lease_release(
        &self,
        ns: &str,
        holder: &Holder,
    ) -> impl Future<Output = Result<Lease, StoreError>> + Send;

    /// Creates an occurrence unless its creation binding (or action fence) already exists. An
    /// existing creation binding is answered before the fence is checked: a creation retry is a
    /// read and writes nothing.
    fn create(
        &self,
        ns: &str,
        new: NewOccurrence,
        fence: Fence,
        limit: Option<LimitCheck>,
    ) -> impl Future<Output = Result<CreateResult, StoreError>> + Send;

    fn find_creation(
        &self,
        ns: &str,
        creation_binding: &Digest,
    ) -> impl Future<Output = Result<Option<OccurrenceId>, StoreError>> + Send;

    /// The whole history, in order.
    fn load(
        &self,
        ns: &str,
        occurrence: &OccurrenceId,
    ) -> impl Future<Output = Result<Option<Vec<ChainedEntry>>, StoreError>> + Send;

    /// Appends entries at `expected_len`, all or nothing.
    fn append(
        &self,
        ns: &str,
        append: Append,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    fn list(
        &self,
        ns: &str,
        lane: Option<&LaneId>,
    ) -> impl Future<Output = Result<Vec<OccurrenceSummary>, StoreError>> + Send;

    /// Durable admission, idempotent on `submission_key` (returns the existing row unchanged).
    fn admit(
        &self,
        ns: &str,
        lane: &LaneId,
        submission_key: &str,
        payload_digest: &Digest,
        now: Millis,
    ) -> impl Future<Output = Result<Admission, StoreError>> + Send;

    /// Claims the lane's FIFO head for the fence's holder (queued → started).
    fn admission_claim(
        &self,
        ns: &str,
        fence: Fence,
    ) -> impl Future<Output = Result<Option<Admission>, StoreError>> + Send;

    /// Replaces an admission row whose stored version is `next.version - 1`.
    fn admission_put(
        &self,
        ns: &str,
        next: Admission,
        fence: Option<Fence>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    fn admission_get(
        &self,
        ns: &str,
        id: &crate::aoc::ids::AdmissionId,
    ) -> impl Future<Output = Result<Option<Admission>, StoreError>> + Send;

    fn admission_list(
        &self,
        ns: &str,
        lane: &LaneId,
    ) -> impl Future<Output = Result<Vec<Admission>, StoreError>> + Send;

    /// A versioned record (the operator connector's profile state), if present.
    fn record_get(
        &self,
        ns: &str,
        key: &str,
    ) -> impl Future<Output = Result<Option<(u64, serde_json::Value)>, StoreError>> + Send;

    /// Compare-and-set: creates the record when `expected` is `None` and none exists, or replaces
    /// it when its stored version is `expected`; returns the new version. Anything else is a
    /// [`StoreError::Conflict`] and writes nothing. Durable when this single write commits.
    fn record_cas(
        &self,
        ns: &str,
        key: &str,
        expected: Option<u64>,
        value: &serde_json::Value,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send;
}

/// Checks a fence against the lane's lease row (shared by every store).
pub fn check_fence(lease: Option<&Lease>, fence: &Fence) -> Result<(), StoreError> {
    match lease {
        Some(l) if l.admits(&fence.holder, fence.now) => Ok(()),
        other => Err(StoreError::Fenced {
            holder: fence.holder.clone(),
            current: other
                .filter(|l| l.is_live(fence.now))
                .map(|l| l.holder.clone()),
        }),
    }
}

/// Checks a limit against the lane's current count (shared by every store).
pub(crate) fn check_limit(
    limit: Option<LimitCheck>,
    count_for: impl FnOnce(LimitKind) -> Result<u32, StoreError>,
) -> Result<(), StoreError> {
    if let Some(l) = limit {
        let current = count_for(l.which)?;
        if current >= l.limit {
            return Err(StoreError::Limit {
                which: l.which,
                limit: l.limit,
                current,
            });
        }
    }
    Ok(())
}
