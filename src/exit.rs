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
//! | 6 | the run was stopped (`--timeout`) before every case ended, and nothing that ended failed |
//! | 101 | a bug in aocheck (panic) |

pub const OK: u8 = 0;
pub const REQUIREMENT_FAILED: u8 = 1;
pub const UNDECIDED: u8 = 2;
pub const INVALID_INPUT: u8 = 3;
pub const UNREACHABLE: u8 = 4;
pub const SIGNATURE_FAILED: u8 = 5;
pub const INCOMPLETE: u8 = 6;
/// A bug in aocheck found without a panic (an invariant of its own that did not hold).
pub const BUG: u8 = 101;

use crate::report::model::{HarnessCause, Report, Verdict};

/// The exit code a run calls for: a failure outranks an unreachable or misbehaving
/// implementation (a harness error whose cause is `unreachable`), which outranks a run stopped
/// before its end, which outranks any other verdict that is not a pass (unsupported, not run, or
/// a harness error that left the case undecided: a declared fault that never fired, another
/// protocol version); no case at all is undecided. A failure the expectations file lists is not a
/// failure here, and an unexpected pass is one under `--strict` (`report.expectations`).
pub fn of_report(report: &Report) -> u8 {
    let cases = &report.cases;
    let expected = |id: &str| {
        report
            .expectations
            .as_ref()
            .is_some_and(|x| x.expected_failures.iter().any(|e| e == id))
    };
    let failed = cases
        .iter()
        .any(|c| c.verdict == Verdict::Fail && !expected(&c.id))
        || report.expectations.as_ref().is_some_and(|x| x.fails());
    if failed {
        REQUIREMENT_FAILED
    } else if cases.iter().any(|c| {
        c.verdict == Verdict::HarnessError && c.harness_cause != Some(HarnessCause::Undecided)
    }) {
        UNREACHABLE
    } else if report.incomplete.is_some() {
        INCOMPLETE
    } else if cases.is_empty()
        || cases
            .iter()
            .any(|c| c.verdict != Verdict::Pass && !(c.verdict == Verdict::Fail && expected(&c.id)))
    {
        UNDECIDED
    } else {
        OK
    }
}
