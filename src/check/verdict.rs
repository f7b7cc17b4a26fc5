//! The judge's words for an outcome: a case's (or a requirement's) [`Verdict`], a [`Failure`]
//! (a requirement, the step, what was seen) and whether a declared fault fired ([`FaultReport`]).
//! The report model (`crate::report::model`) re-exports them: a report renders what the judge
//! decided, and the judge imports nothing of the report.

use crate::aoc::requirement::Req;
use serde::{Deserialize, Serialize};

/// A case's (or a requirement's) verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Pass,
    Fail,
    Unsupported,
    MissingKnowledge,
    NotRun,
    HarnessError,
}

impl Verdict {
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "fail",
            Verdict::Unsupported => "unsupported",
            Verdict::MissingKnowledge => "missing_knowledge",
            Verdict::NotRun => "not_run",
            Verdict::HarnessError => "harness_error",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Failure {
    pub requirement: Req,
    pub step: Option<usize>,
    pub msg: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultReport {
    pub what: String,
    pub fired: bool,
}
