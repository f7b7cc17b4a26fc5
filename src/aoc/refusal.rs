//! Refusals: the domain saying no to a caller. A [`Refusal`] names the occurrence (when there is
//! one), the requirement it protects and what was wrong; nothing was written. A pure core type:
//! the cores that decide (occurrence, lease, admission) refuse with it, without the store.

use crate::aoc::binding::BindingField;
use crate::aoc::ids::{Generation, Holder, LimitKind, Millis, OccurrenceId};
use crate::aoc::requirement::Req;
use serde::Serialize;
use std::fmt;

/// What was wrong with a refused call.
#[derive(Clone, PartialEq, Eq, Debug, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RefusalKind {
    /// The caller's lease is not current: a retired, expired or released generation.
    StaleGeneration {
        holder: Holder,
        current: Option<Holder>,
    },
    /// The occurrence belongs to another generation; a successor must adopt (read) it first.
    NotOwner {
        owner_generation: Generation,
        caller_generation: Generation,
    },
    /// The reservation owner could not be authenticated.
    OwnerTokenMismatch,
    /// A change to a bound field.
    BindingConflict { fields: Vec<BindingField> },
    /// The occurrence has no provider binding yet.
    NotBound,
    /// The occurrence already has its one provider entry.
    AlreadyEntered { attempts: u32 },
    /// A released (tombstoned) occurrence was presented again.
    Tombstoned,
    /// A terminal occurrence may not be admitted again.
    Terminal,
    /// Release asked for after (possible) provider entry.
    NotPreEntry { phase: String },
    /// The operation does not apply in this phase.
    WrongPhase { phase: String, op: String },
    /// A declared finite limit was reached.
    LimitReached {
        which: LimitKind,
        limit: u32,
        current: u32,
    },
    /// A durable action fence already names another occurrence for this action.
    ActionFenced { existing: OccurrenceId },
    /// No such occurrence.
    UnknownOccurrence,
    /// A remedy needs its own authorization, distinct from the original's.
    RemedyAuthorization { msg: String },
    /// The lease is held by a live holder.
    LeaseBusy { holder: Holder, expires_at: Millis },
    /// A holder that does not hold the lease tried to refresh or release it.
    HolderMismatch {
        holder: Holder,
        current: Option<Holder>,
    },
    /// The profile refuses to support this (AOC-REQ-013, §5).
    Unsupported { what: String },
    /// An input value is unusable.
    InvalidInput { field: String, msg: String },
    /// Admission rules (seed 003).
    Admission { msg: String },
    /// A refusal an implementation reported through `aocheck-sut/2` (its own words).
    Reported { msg: String },
}

impl fmt::Display for RefusalKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RefusalKind::StaleGeneration { holder, current } => match current {
                Some(c) => write!(f, "holder {holder} is retired; the lane is held by {c}"),
                None => write!(f, "holder {holder} holds no current lease"),
            },
            RefusalKind::NotOwner {
                owner_generation,
                caller_generation,
            } => write!(
                f,
                "occurrence is owned by generation {owner_generation}; generation {caller_generation} must adopt it (read its state) before acting"
            ),
            RefusalKind::OwnerTokenMismatch => {
                f.write_str("the reservation owner token does not match")
            }
            RefusalKind::BindingConflict { fields } => {
                let names: Vec<String> = fields.iter().map(|x| x.to_string()).collect();
                write!(
                    f,
                    "conflicting operation: {} differ(s) from the immutable provider binding",
                    names.join(", ")
                )
            }
            RefusalKind::NotBound => f.write_str("the occurrence has no provider binding yet"),
            RefusalKind::AlreadyEntered { attempts } => write!(
                f,
                "the occurrence already entered the provider ({attempts} attempt); it never enters again"
            ),
            RefusalKind::Tombstoned => {
                f.write_str("the occurrence was released before entry and is a tombstone")
            }
            RefusalKind::Terminal => f.write_str("the occurrence is terminal"),
            RefusalKind::NotPreEntry { phase } => write!(
                f,
                "release needs serialized proof of non-entry, but the occurrence is {phase}"
            ),
            RefusalKind::WrongPhase { phase, op } => {
                write!(f, "{op} does not apply to a {phase} occurrence")
            }
            RefusalKind::LimitReached {
                which,
                limit,
                current,
            } => write!(f, "{which:?} limit {limit} reached ({current} held)"),
            RefusalKind::ActionFenced { existing } => {
                write!(f, "the action fence already names occurrence {existing}")
            }
            RefusalKind::UnknownOccurrence => f.write_str("no such occurrence"),
            RefusalKind::RemedyAuthorization { msg } => write!(f, "remedy authorization: {msg}"),
            RefusalKind::LeaseBusy { holder, expires_at } => {
                write!(f, "lease held by {holder} until {}", expires_at.0)
            }
            RefusalKind::HolderMismatch { holder, current } => match current {
                Some(c) => write!(f, "holder mismatch: {holder} is not the lease holder {c}"),
                None => write!(f, "holder mismatch: {holder}; the lane has no lease"),
            },
            RefusalKind::Unsupported { what } => write!(f, "unsupported: {what}"),
            RefusalKind::InvalidInput { field, msg } => write!(f, "invalid {field}: {msg}"),
            RefusalKind::Admission { msg } => write!(f, "admission: {msg}"),
            RefusalKind::Reported { msg } => write!(f, "{msg}"),
        }
    }
}

/// A typed refusal: nothing was written.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, thiserror::Error)]
pub struct Refusal {
    pub occurrence: Option<OccurrenceId>,
    pub requirement: Req,
    #[serde(flatten)]
    pub kind: RefusalKind,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.occurrence {
            Some(o) => write!(f, "{} refused for {o}: {}", self.requirement, self.kind),
            None => write!(f, "{} refused: {}", self.requirement, self.kind),
        }
    }
}

impl Refusal {
    pub fn new(occurrence: Option<&OccurrenceId>, requirement: Req, kind: RefusalKind) -> Self {
        Refusal {
            occurrence: occurrence.cloned(),
            requirement,
            kind,
        }
    }
}
