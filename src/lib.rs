//! # aocheck
//!
//! A conformance harness for agent executors: does an executor survive crashes, lost responses and
//! 5xx results without duplicating a consequential effect or inventing an outcome? It judges an
//! implementation against the *Agent Operation Continuity* draft and the AIP Hermes operator
//! connector, with the providers' ground truth.
//!
//! ```text
//!  cases/*.yaml ─► case (model · validate · load: typed once) ─┐
//!                                                             ▼
//!      runner: World (step → typed Request | provider verb) ─► check (after every step)
//!         │  RunEvent stream ─► report (model · formats · attest)
//!         ▼
//!      trait sut::Sut  (one boundary; messages in sut::message)
//!         ├─ reference::in_process  ─┐  the reference answers the same typed requests
//!         └─ sut::processes (any     ─┘  through reference::dispatch, in process or over
//!            language, aocheck-sut/2)     stdin/stdout (`aocheck sut reference`)
//!         │ HTTP                          ground truth read only by the harness
//!         ▼
//!      fake-payments · fake-hermes  (crates of their own, on fake-control)
//!         ▲
//!      store: memory · SQLite · PostgreSQL      aoc: the coordination domain (pure cores + Domain)
//!      operator: the Hermes connector           digest, vocab: the base everything may use
//! ```
//!
//! Layers point one way: [`digest`] and [`vocab`] at the base; [`aoc`] (pure cores, then the
//! `Domain` service) over [`store`]; [`operator`] over both; [`reference`](mod@reference) behind the [`sut`]
//! boundary; [`case`], [`check`], [`runner`] and [`report`] on top; [`cli`] and [`exit`] for the
//! binary. The entry points are re-exported below.

/// The version `aocheck --version` prints: the package version and the git commit it was built
/// from (`build.rs`).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("AOCHECK_GIT_COMMIT"),
    ")"
);

pub mod aoc;
pub mod case;
pub mod check;
pub mod ci;
pub mod cli;
pub mod clock;
pub mod deploy;
pub mod digest;
pub mod exit;
pub mod explore;
pub mod operator;
pub mod providers;
pub mod reference;
pub mod report;
pub mod runner;
pub mod secrets;
pub mod setup;
pub mod store;
pub mod sut;
pub mod vocab;
pub mod workflow;

pub use aoc::{Domain, DomainConfig, DomainError, Refusal, Req};
pub use case::{LoadedCase, load as load_cases};
pub use clock::{Clock, ManualClock, SystemClock};
pub use report::model::{CaseReport, Report, Verdict};
pub use runner::{RunEvent, RunOptions, run_suite};
pub use store::{
    AnyStore, Store, memory::MemoryStore, postgres::PostgresStore, sqlite::SqliteStore,
};
pub use sut::{Sut, SutError};
