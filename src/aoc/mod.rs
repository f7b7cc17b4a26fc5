//! The AOC coordination domain (draft-schrock-agent-operation-continuity-00): a reference
//! implementation of one authoritative domain that serializes occurrence creation, reservation,
//! provider entry, executor-generation changes, pre-entry release and terminal reconciliation.
//!
//! Layout: pure cores ([`occurrence`], [`lease`], [`admission`], [`profile`], [`history`]) and one
//! service ([`domain::Domain`]) that folds histories from a [`port::Store`] (its port to durable
//! storage; the implementations are `crate::store`'s), decides, and appends under the store's fences.

pub mod admission;
pub mod binding;
pub mod composition;
pub mod domain;
pub mod error;
pub mod history;
pub mod ids;
pub mod lease;
pub mod occurrence;
pub mod port;
pub mod profile;
pub mod refusal;
pub mod requirement;

pub use binding::{BindingField, EvidenceBinding, ProviderBinding};
pub use domain::{Domain, DomainConfig, Limits};
pub use error::{DomainError, Refusal, RefusalKind};
pub use history::{CallerLabels, ChainedEntry, EntryBody, Outcome, ReleaseReason};
pub use ids::{
    AttemptId, ExecutorId, Generation, Holder, LaneId, Millis, OccurrenceId, OwnerToken,
};
pub use occurrence::{OccurrenceState, Phase};
pub use profile::{
    Evidence, EvidenceKind, MissingKnowledge, NativeResult, ProviderProfile, StatusClass,
};
pub use requirement::Req;
