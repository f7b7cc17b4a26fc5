//! Reports: what a run found, in forms people and machines read. [`model`] is the contract (a
//! leaf: it imports only the domain's vocabulary), [`formats`] renders it as JSON, JUnit,
//! Markdown and HTML, and [`attest`] signs and verifies it (an in-toto Statement in a DSSE
//! envelope); [`analyze`] derives a run folder's verdicts again from its evidence. Digests come
//! from [`crate::digest`]. The verdict words themselves (`Verdict`, `Failure`, `FaultReport`) are
//! the judge's (`crate::check::verdict`); the model re-exports them.

pub mod analyze;
pub mod attest;
pub mod formats;
pub mod html;
pub mod model;
pub mod story;
pub mod text;
pub mod timeline_workflow;
