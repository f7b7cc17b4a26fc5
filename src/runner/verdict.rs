//! The verdict: how the findings of one case, and of a run, become verdicts.
//!
//! Policy. A case **fails** only when a checker or a step expectation found a violation of a
//! requirement (each names the requirement and the sentence it enforces). A case **passes** only
//! when every fault it declares fired, some checker examined it, and nothing was found. Anything
//! aocheck could not decide (the implementation hung, broke the protocol, crashed unasked, or a
//! provider or store was unreachable) is a **harness error**, never a pass or a fail; an operation
//! the implementation does not list makes the case **unsupported** and it is not run; a case that
//! no checker examined is **not run**. A requirement fails in a run if any case failure names it,
//! passes only if every case that evaluates it passed, and is otherwise as undecided as the worst
//! case that evaluates it. The exit code follows from the case verdicts (`crate::exit`).

use crate::aoc::requirement::Req;
use crate::report::model::{CaseReport, RequirementReport, Verdict};

/// Aggregates requirement verdicts: fail if any case failure names the requirement; else a
/// harness error, not-run or other unknown if any case evaluating it had one; pass only if every
/// case evaluating it passed; not run if no case evaluates it.
pub fn aggregate(cases: &[CaseReport]) -> Vec<RequirementReport> {
    Req::ALL
        .iter()
        .map(|r| {
            let evaluating: Vec<&CaseReport> = cases
                .iter()
                .filter(|c| {
                    c.requirements.iter().any(|x| Req::parse(x) == Some(*r))
                        || c.failures.iter().any(|f| f.requirement == *r)
                })
                .collect();
            let verdict = if evaluating.is_empty() {
                Verdict::NotRun
            } else if evaluating
                .iter()
                .any(|c| c.failures.iter().any(|f| f.requirement == *r))
            {
                Verdict::Fail
            } else if let Some(worst) = evaluating
                .iter()
                .map(|c| c.verdict)
                .filter(|v| *v != Verdict::Pass && *v != Verdict::Fail)
                .max()
            {
                worst
            } else if evaluating.iter().all(|c| c.verdict == Verdict::Pass) {
                Verdict::Pass
            } else {
                // Failed for another requirement only: this one held in those cases.
                Verdict::Pass
            };
            RequirementReport {
                id: *r,
                verdict,
                cases: evaluating.iter().map(|c| c.id.clone()).collect(),
                checkers: crate::check::CHECKERS
                    .iter()
                    .filter(|(_, rs)| rs.contains(r))
                    .map(|(n, _)| n.to_string())
                    .collect(),
            }
        })
        .collect()
}
