//! Seed 002's Hermes Workflow, as a reference: the designer graph's one rulebook
//! ([`design::validate`], seed 002's `validate_designer_graph`), the run plan
//! ([`design::build_run_plan`]) and the names that become file names ([`names`]). Sans-IO:
//! nothing here reads a file, a clock or the network.
//!
//! Still to come (issue 41): the resumable runner over fake-hermes and a delivery channel, its
//! continuity rules judged from the ledgers, the workflow cases and their exploration.

pub mod design;
pub mod names;
