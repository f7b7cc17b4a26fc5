//! Systems under test. Today: the reference implementation (the AOC domain plus an executor that
//! talks to fake-payments). The language-neutral process protocol arrives with its own issue.

pub mod payments;
pub mod process;
pub mod protocol;
pub mod reference;

pub use reference::{ReferenceSut, Variant};
