//! Exit codes of the `aocheck` binary: one table, used by every subcommand.
//!
//! | code | meaning |
//! |---|---|
//! | 0 | every required check passed |
//! | 1 | a requirement failed |
//! | 2 | some verdict is unknown, unsupported or not run (a harness error that left a case undecided included) |
//! | 3 | invalid input (case file, config, profile, key, command line) |
//! | 4 | the system under test, a provider or a store could not be reached, hung or broke the protocol |
//! | 5 | signature verification failed |
//! | 101 | a bug in aocheck (panic) |

pub const OK: u8 = 0;
pub const REQUIREMENT_FAILED: u8 = 1;
pub const UNDECIDED: u8 = 2;
pub const INVALID_INPUT: u8 = 3;
pub const UNREACHABLE: u8 = 4;
pub const SIGNATURE_FAILED: u8 = 5;

use crate::report::model::{HarnessCause, Report, Verdict};

/// The exit code a finished run calls for: a failure outranks an unreachable or misbehaving
/// implementation (a harness error whose cause is `unreachable`), which outranks any other
/// verdict that is not a pass (unsupported, not run, or a harness error that left the case
/// undecided: a declared fault that never fired, another protocol version); no case at all is
/// undecided.
pub fn of_report(report: &Report) -> u8 {
    let cases = &report.cases;
    if cases.iter().any(|c| c.verdict == Verdict::Fail) {
        REQUIREMENT_FAILED
    } else if cases.iter().any(|c| {
        c.verdict == Verdict::HarnessError && c.harness_cause != Some(HarnessCause::Undecided)
    }) {
        UNREACHABLE
    } else if cases.is_empty() || cases.iter().any(|c| c.verdict != Verdict::Pass) {
        UNDECIDED
    } else {
        OK
    }
}
