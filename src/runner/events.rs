//! The events between the runner and its reporters: one stream, faults included.

use crate::report::model::Verdict;

/// Events between the runner and its reporters.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum RunEvent {
    RunStarted {
        run_id: String,
        seed: u64,
        cases: Vec<String>,
    },
    CaseStarted {
        case: String,
    },
    StepFinished {
        case: String,
        index: usize,
        verb: String,
        result: String,
    },
    CaseFinished {
        case: String,
        verdict: Verdict,
        millis: u64,
        /// Why a case neither passed nor failed (a harness error's cause, what was not
        /// established and why, what is unsupported); `None` for pass and fail.
        why: Option<String>,
    },
    RunFinished {
        passed: usize,
        failed: usize,
        other: usize,
    },
}
