//! # aocheck
//!
//! A conformance harness for agent executors: does an executor survive crashes, lost responses and
//! 5xx results without duplicating a consequential effect or inventing an outcome?
//!
//! Today the crate holds the reference implementation of the Agent Operation Continuity profile
//! ([`aoc`]) over three stores ([`store`]), and the canonical digests reports will use
//! ([`report::canonical`]).

pub mod aoc;
pub mod case;
pub mod check;
pub mod cli;
pub mod clock;
pub mod digest;
pub mod exit;
pub mod operator;
pub mod reference;
pub mod report;
pub mod runner;
pub mod store;
pub mod sut;
pub mod vocab;

pub use aoc::{Domain, DomainConfig, DomainError, Refusal, Req};
pub use clock::{Clock, ManualClock, SystemClock};
pub use store::{
    AnyStore, Store, memory::MemoryStore, postgres::PostgresStore, sqlite::SqliteStore,
};
