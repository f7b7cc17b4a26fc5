//! Seed 002's Hermes Workflow, as a reference: the designer graph's one rulebook
//! ([`design::validate`], seed 002's `validate_designer_graph`), the run plan
//! ([`design::build_run_plan`]), the names that become file names ([`names`]) and the
//! sequential runner as a state machine that records each effect before it happens
//! ([`run`]); these are sans-IO. Around them: where designs and runs are kept, written
//! atomically ([`store`]), and the runner's host ([`host`]), which saves before every effect
//! and launches agent steps as Hermes runs under their correlation ids.
//!
//! The workflow cases (`cases/workflow/`) run this runner in process (`runner::workflow`) over
//! fake-hermes and the simulated channel, and `check::workflow` judges it from their ledgers.

pub mod conformance;
pub mod design;
pub mod host;
pub mod names;
pub mod run;
pub mod store;

/// A deliberately broken runner, one defect each (issue 41), to show that the checks catch it:
/// reachable only in test builds (`test-knobs`: `design::validate_broken`, `run::next_broken`,
/// `store::Home::save_run_broken`, `host::drive_with`), never from a configuration.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkflowDefect {
    /// Launches an agent step again on resume when its launch has no recorded result.
    RelaunchOnResume,
    /// Writes the run file in place (truncate, then write) instead of a temp file and a rename.
    WriteInPlace,
    /// Records a delivery whose answer was lost as failed (`ok: false`), though it may have been
    /// delivered.
    LostReplyIsFailed,
    /// Takes an agent step whose launch has no known end as done with an empty output.
    UnknownIsDone,
    /// Saves a placeholder output for an agent step before launching it (corrected when the
    /// result comes): a state a reader beside it sees that no run backs.
    EagerOutput,
    /// Takes a fractional or boolean count as the whole number a cast makes of it (2.5 → 2,
    /// true → 1) instead of refusing it.
    TruncateRetries,
}
