//! What aocheck's simulated providers record and how they can be faulted, as data: the
//! contract between the fakes (`fake-payments`, `fake-hermes`), the harness that judges from
//! their ground truth, and the evidence an auditor verifies. No server, no runtime: serde types,
//! their vocabularies and the pure rules over them.
//!
//! - [`rules`]: targeted fault rules ("the nth … of the matching requests") every fake shares;
//! - [`holds`]: what a held request is and how it is released;
//! - [`clock`]: what the case's simulated clock saw of each participant;
//! - [`graph`]: a step graph's shared rules (whole numbers, cycles, stable order), for Hermes's
//!   run scripts and seed 002's workflow designs;
//! - [`control`]: what a fake's control log records;
//! - [`payments`]: fake-payments's ledger, fault vocabulary, configuration, wire contract
//!   (signatures, keys) and published profile (its status list);
//! - [`hermes`]: fake-hermes's ledger, fault vocabulary, configuration and script vocabulary;
//! - [`mcp`]: fake-mcp's ledger, fault vocabulary and tool set.
//!
//! The evidence format is a contract of this crate: a change to a type here is a change to what
//! a signed run holds.

pub mod clock;
pub mod control;
pub mod graph;
pub mod holds;
pub mod rules;

pub mod payments {
    //! fake-payments's ground truth and vocabularies.
    pub mod config;
    pub mod contract;
    pub mod faults;
    pub mod ledger;
    pub mod profile;
}

pub mod hermes {
    //! fake-hermes's ground truth and vocabularies.
    pub mod config;
    pub mod faults;
    pub mod ledger;
    pub mod script;
}

pub mod mcp {
    //! fake-mcp's ground truth and vocabularies.
    pub mod faults;
    pub mod ledger;
    pub mod tools;
}
