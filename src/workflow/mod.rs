//! Seed 002's Hermes Workflow, as a reference: the designer graph's one rulebook
//! ([`design::validate`], seed 002's `validate_designer_graph`), the run plan
//! ([`design::build_run_plan`]), the names that become file names ([`names`]) and the
//! sequential runner as a state machine that records each effect before it happens
//! ([`run`]). Sans-IO: nothing here reads a file, a clock or the network.
//!
//! Still to come (issue 41): the runner's host over fake-hermes and a delivery channel (atomic
//! saves), its continuity rules judged from the ledgers, the workflow cases, the process
//! protocol's operations, broken variants and exploration.

pub mod design;
pub mod names;
pub mod run;
