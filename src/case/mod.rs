//! Conformance cases: the model ([`model`]: what a file says), the rulebook ([`mod@validate`]: every
//! defect at once, naming file, case, field and fix) and the loader ([`load()`]: files to checked
//! cases, each step's expectation parsed once).

pub mod load;
pub mod model;
pub mod validate;
pub mod workflow;

pub use load::load;
pub use model::*;
pub use validate::validate;
