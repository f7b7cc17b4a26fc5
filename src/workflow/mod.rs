//! Seed 002's Hermes Workflow, as a reference: the designer graph's one rulebook
//! ([`design::validate`], seed 002's `validate_designer_graph`), the run plan
//! ([`design::build_run_plan`]), the names that become file names ([`names`]) and the
//! sequential runner as a state machine that records each effect before it happens
//! ([`run`]); these are sans-IO. Around them: where designs and runs are kept, written
//! atomically ([`store`]), and the runner's host ([`host`]), which saves before every effect
//! and launches agent steps as Hermes runs under their correlation ids.
//!
//! Still to come (issue 41): a delivery channel with a ground-truth ledger, the continuity rules
//! as checkers, the workflow cases, the process protocol's operations, broken variants and
//! exploration.

pub mod design;
pub mod host;
pub mod names;
pub mod run;
pub mod store;
