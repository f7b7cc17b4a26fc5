//! A finding: a requirement that the providers' ledgers or the implementation's answers show
//! broken, with the checker or oracle that read it and the facts it read. Findings are values:
//! only `check/` makes one (its fields are private to this module tree), the World records the
//! ones its steps' oracles return, and the runner places each at its step in the report. A step's
//! own result is only ever what the implementation answered, so a step expecting `refused` is
//! met by the implementation's refusal and never by a finding of the harness.

use crate::aoc::requirement::Req;
use serde::Serialize;

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub(in crate::check) checker: &'static str,
    pub(in crate::check) requirement: Req,
    pub(in crate::check) occurrence: Option<String>,
    pub(in crate::check) facts: String,
}

impl Finding {
    /// Every checker that finds is named in [`super::CHECKERS`] under the requirement it
    /// reports (asserted in debug builds, so every test that finds checks it); the final
    /// expectations' checkers report under the requirement the case picks.
    pub(in crate::check) fn new(
        checker: &'static str,
        requirement: Req,
        facts: impl Into<String>,
    ) -> Self {
        debug_assert!(
            super::CHECKERS.iter().any(|(name, reqs)| *name == checker
                && (reqs.contains(&requirement) || is_expectation(name))),
            "the finding's checker {checker} ({requirement}) is not in CHECKERS under its requirement"
        );
        Finding {
            checker,
            requirement,
            occurrence: None,
            facts: facts.into(),
        }
    }

    /// The same finding, about one occurrence (or Action) of the case, by its label.
    pub(in crate::check) fn about(mut self, label: Option<&str>) -> Self {
        self.occurrence = label.map(str::to_string);
        self
    }

    /// The checker or oracle that found it: a name in [`super::CHECKERS`].
    pub fn checker(&self) -> &'static str {
        self.checker
    }
    pub fn requirement(&self) -> Req {
        self.requirement
    }
    pub fn occurrence(&self) -> Option<&str> {
        self.occurrence.as_deref()
    }
    /// What the checker read, in words.
    pub fn facts(&self) -> &str {
        &self.facts
    }
    /// The report's line: `[checker] label: facts`.
    pub fn line(&self) -> String {
        format!(
            "[{}] {}{}",
            self.checker,
            self.occurrence
                .as_deref()
                .map(|o| format!("{o}: "))
                .unwrap_or_default(),
            self.facts
        )
    }
}

/// The final expectations' checkers (`check/expect.rs`) report under the requirement the case
/// picks, whichever it is.
fn is_expectation(name: &str) -> bool {
    name.ends_with("_expected") || name == "bypass_disclosed"
}
