//! The reference implementation behind the boundary: the AOC executor over `crate::aoc`
//! ([`executor`]), its fake-payments client ([`payments`]: tag verification, evidence), and the
//! `aocheck-sut/1` server ([`serve`], `aocheck sut reference`).

pub mod dispatch;
pub mod executor;
pub mod in_process;
pub mod knobs;
pub mod payments;
pub mod serve;

pub use executor::{ReferenceSut, Variant, implementation};
pub use knobs::Knobs;
