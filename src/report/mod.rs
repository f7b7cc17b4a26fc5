//! Reports: what a run found, in forms people and machines read. Today this module holds only the
//! one place where aocheck computes digests (`canonical`); the report model and its formats arrive
//! with the harness.

pub mod attest;
pub mod canonical;
pub mod formats;
pub mod model;

pub use canonical::{CanonicalError, Digest, canonical_bytes, digest_of};
