//! The reference implementation behind the boundary: the AOC executor over `crate::aoc`
//! ([`executor`]), its fake-payments client ([`payments`]: tag verification, evidence), and the
//! `aocheck-sut/2` server (`serve`, `aocheck sut reference`).

pub(crate) mod dispatch;
pub mod envelope;
pub mod executor;
pub mod front;
pub(crate) mod in_process;
mod knobs;
pub mod payments;
pub(crate) mod serve;
pub(crate) mod workflow;

pub use dispatch::implementation;
pub use executor::{ReferenceSut, Variant};
pub use knobs::Knobs;
