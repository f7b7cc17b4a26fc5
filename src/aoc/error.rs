//! Error policy of the coordination domain.
//!
//! - A [`Refusal`] is the domain saying no to a caller: it names the occurrence (when there is one),
//!   the requirement it protects, and what was wrong. Nothing was written.
//! - A [`DomainError::Store`] means the store could not answer; the transition may or may not have
//!   committed only where the store error says so (`Backend` on commit).
//! - A [`DomainError::Corrupt`] means a stored history does not fold or does not verify: a typed
//!   finding, never a panic.
//!
//! Domain errors never carry HTTP statuses; the edges map them.

use crate::aoc::ids::OccurrenceId;
use crate::aoc::port::StoreError;

pub use crate::aoc::ids::LimitKind;
pub use crate::aoc::refusal::{Refusal, RefusalKind};

/// Everything a domain call can fail with.
#[derive(Debug, thiserror::Error)]
pub enum DomainError {
    #[error(transparent)]
    Refused(#[from] Refusal),
    #[error("store: {0}")]
    Store(StoreError),
    #[error("occurrence {occurrence}: stored history is corrupt: {detail}")]
    Corrupt {
        occurrence: OccurrenceId,
        detail: String,
    },
    #[error("occurrence {occurrence}: gave up after {attempts} contended attempts")]
    Contention {
        occurrence: OccurrenceId,
        attempts: u32,
    },
}

impl DomainError {
    /// The refusal, if this is one.
    pub fn refusal(&self) -> Option<&Refusal> {
        match self {
            DomainError::Refused(r) => Some(r),
            _ => None,
        }
    }
}
