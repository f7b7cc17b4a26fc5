//! Reports: what a run found, in forms people and machines read. [`model`] is the contract (a
//! leaf: it imports only the domain's vocabulary), [`formats`] renders it as JSON, JUnit,
//! Markdown and HTML, and [`attest`] signs and verifies it (an in-toto Statement in a DSSE
//! envelope). Digests come from [`crate::digest`].

pub mod attest;
pub mod formats;
pub mod html;
pub mod model;
pub mod text;
