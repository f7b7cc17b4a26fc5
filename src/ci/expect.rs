//! Expectations: the failures an implementation knows it has (`aocheck.toml`, or `--expect FILE`).
//!
//! ```toml
//! [[expected]]
//! case = "AOC-CASE-004"          # a case id, a requirement id, or both
//! requirement = "AOC-REQ-006"
//! reason = "fencing lands in 0.4"
//! issue = "https://example.org/tracker/12"   # optional
//! ```
//!
//! An entry covers a case's failure of a requirement: with `case` and `requirement`, that pair;
//! with `case` only, every requirement that case fails; with `requirement` only, that requirement
//! in every case. A failed case whose every failed requirement is covered is an *expected failure*
//! and does not fail the run. An entry that covered nothing the run failed, although its cases
//! ran, is an *unexpected pass* (reported; `--strict` fails the run). Case and requirement ids are
//! the contract: an entry naming an id that does not exist is an error naming the entry, so a
//! rename never silently voids the list.
//!
//! Only failures can be expected. A harness error, an unsupported operation or missing knowledge
//! is not a known failure to wave through: it leaves the run undecided as it would without the file.

use crate::aoc::Req;
use crate::report::model::{ExpectationsOutcome as Outcome, Report, Verdict};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::Path;

/// The file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    expected: Vec<Entry>,
}

/// One known failure.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub case: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requirement: Option<String>,
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issue: Option<String>,
}

impl Entry {
    fn covers(&self, case: &str, req: &str) -> bool {
        self.case.as_deref().is_none_or(|c| c == case)
            && self.requirement.as_deref().is_none_or(|r| r == req)
    }
    /// How the entry is named in a message: its place in the file and its ids.
    fn name(&self, i: usize) -> String {
        let mut ids = Vec::new();
        if let Some(c) = &self.case {
            ids.push(format!("case = {c:?}"));
        }
        if let Some(r) = &self.requirement {
            ids.push(format!("requirement = {r:?}"));
        }
        format!("expected[{i}] ({})", ids.join(", "))
    }
}

/// A checked expectations file.
#[derive(Clone, Debug, PartialEq)]
pub struct Expectations {
    /// The file as given (relative to the working folder where it lies under it).
    pub file: String,
    pub entries: Vec<Entry>,
}

/// Reads and checks an expectations file against the ids that exist (`cases`: every case id of
/// the suite, before any `--case`/`--req` filter). Every defect at once, each naming the file,
/// the entry and the field.
pub fn load(path: &Path, cases: &BTreeSet<String>) -> Result<Expectations, Vec<String>> {
    let shown = crate::runner::repro_case_path(path).display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| vec![format!("{shown}: {e}")])?;
    parse(&shown, &text, cases)
}

/// [`load`] on text already read.
pub fn parse(
    shown: &str,
    text: &str,
    cases: &BTreeSet<String>,
) -> Result<Expectations, Vec<String>> {
    let file: File = toml::from_str(text).map_err(|e| {
        vec![format!(
            "{shown}: {}; the file is a list of [[expected]] tables with case, requirement, reason and issue",
            e.to_string().trim_end()
        )]
    })?;
    let mut defects = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, e) in file.expected.iter().enumerate() {
        let at = e.name(i);
        if e.case.is_none() && e.requirement.is_none() {
            defects.push(format!(
                "{shown}: {at}: names neither a case nor a requirement; give case = \"AOC-CASE-…\", requirement = \"AOC-REQ-…\", or both"
            ));
        }
        if let Some(c) = &e.case
            && !cases.contains(c)
        {
            defects.push(format!(
                "{shown}: {at}.case: no case {c:?} in the suite (was it renamed? case ids are the contract; `aocheck cases check` lists the cases)"
            ));
        }
        if let Some(r) = &e.requirement
            && Req::parse(r).is_none()
        {
            defects.push(format!(
                "{shown}: {at}.requirement: {r:?} is not a requirement id; use AOC-REQ-001 … AOC-REQ-013"
            ));
        }
        if e.reason.trim().is_empty() {
            defects.push(format!(
                "{shown}: {at}.reason: empty; say why the failure is known"
            ));
        }
        if !seen.insert((e.case.clone(), e.requirement.clone())) {
            defects.push(format!(
                "{shown}: {at}: the same case and requirement as an earlier entry; keep one"
            ));
        }
    }
    if defects.is_empty() {
        Ok(Expectations {
            file: shown.to_string(),
            entries: file.expected,
        })
    } else {
        Err(defects)
    }
}

/// Judges a finished report against the expectations.
pub fn apply(x: &Expectations, report: &Report, strict: bool) -> Outcome {
    let mut out = Outcome {
        file: x.file.clone(),
        strict,
        ..Outcome::default()
    };
    let mut used = vec![false; x.entries.len()];
    for c in &report.cases {
        if c.verdict != Verdict::Fail {
            continue;
        }
        let reqs: BTreeSet<String> = c
            .failures
            .iter()
            .map(|f| f.requirement.id().to_string())
            .collect();
        let mut all = !reqs.is_empty();
        for r in &reqs {
            let mut covered = false;
            for (i, e) in x.entries.iter().enumerate() {
                if e.covers(&c.id, r) {
                    used[i] = true;
                    covered = true;
                }
            }
            all &= covered;
        }
        if all {
            out.expected_failures.push(c.id.clone());
        } else {
            out.unexpected_failures.push(c.id.clone());
        }
    }
    for (i, e) in x.entries.iter().enumerate() {
        if used[i] {
            continue;
        }
        // Did a case the entry names run to a verdict that could have shown the failure?
        let ran = report.cases.iter().any(|c| {
            e.case.as_deref().is_none_or(|id| id == c.id)
                && e.requirement
                    .as_deref()
                    .is_none_or(|r| c.requirements.iter().any(|q| q == r))
                && matches!(c.verdict, Verdict::Pass | Verdict::Fail)
        });
        if ran {
            out.unexpected_passes.push(e.name(i));
        } else {
            out.not_exercised.push(e.name(i));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids() -> BTreeSet<String> {
        ["AOC-CASE-001", "AOC-CASE-004"]
            .into_iter()
            .map(String::from)
            .collect()
    }

    #[test]
    fn a_good_file_parses() {
        let x = parse(
            "aocheck.toml",
            "[[expected]]\ncase = \"AOC-CASE-004\"\nrequirement = \"AOC-REQ-006\"\nreason = \"later\"\nissue = \"https://example.org/1\"\n",
            &ids(),
        )
        .expect("valid");
        assert_eq!(x.entries.len(), 1);
        assert!(x.entries[0].covers("AOC-CASE-004", "AOC-REQ-006"));
        assert!(!x.entries[0].covers("AOC-CASE-004", "AOC-REQ-007"));
    }

    #[test]
    fn every_defect_is_named_at_once() {
        let e = parse(
            "aocheck.toml",
            "[[expected]]\ncase = \"AOC-CASE-099\"\nreason = \"x\"\n[[expected]]\nrequirement = \"AOC-REQ-100\"\nreason = \" \"\n[[expected]]\nreason = \"nothing named\"\n",
            &ids(),
        )
        .expect_err("defects");
        assert_eq!(e.len(), 4, "{e:#?}");
        assert!(e[0].contains("expected[0] (case = \"AOC-CASE-099\").case: no case"));
        assert!(e[1].contains("expected[1] (requirement = \"AOC-REQ-100\").requirement"));
        assert!(e[2].contains(".reason: empty"));
        assert!(e[3].contains("expected[2] ()") && e[3].contains("neither"));
    }

    fn entries(text: &str) -> Expectations {
        let ids = ["A", "B", "C"].into_iter().map(String::from).collect();
        parse("aocheck.toml", text, &ids).expect("valid")
    }

    #[test]
    fn a_failure_is_expected_only_when_every_failed_requirement_is_covered() {
        use crate::aoc::Req::{R004, R009};
        use crate::report::model::Verdict::{Fail, NotRun, Pass};
        let x = entries(
            "[[expected]]\ncase = \"A\"\nreason = \"r\"\n[[expected]]\ncase = \"B\"\nrequirement = \"AOC-REQ-009\"\nreason = \"r\"\n[[expected]]\ncase = \"C\"\nreason = \"r\"\n",
        );
        // A: every requirement it fails (a case-only entry); B fails one more than listed.
        let mut r = crate::ci::report_of(&[
            ("A", Fail, &[R004, R009]),
            ("B", Fail, &[R004, R009]),
            ("C", NotRun, &[]),
        ]);
        let o = apply(&x, &r, false);
        assert_eq!(o.expected_failures, ["A"]);
        assert_eq!(o.unexpected_failures, ["B"]);
        assert!(o.unexpected_passes.is_empty());
        assert_eq!(o.not_exercised, ["expected[2] (case = \"C\")"]);
        r.expectations = Some(o);
        assert_eq!(crate::exit::of_report(&r), crate::exit::REQUIREMENT_FAILED);
        // B fixed to what the file says: the run does not fail; C not run leaves it undecided.
        let mut r = crate::ci::report_of(&[
            ("A", Fail, &[R004]),
            ("B", Fail, &[R009]),
            ("C", NotRun, &[]),
        ]);
        r.expectations = Some(apply(&x, &r, true));
        assert_eq!(crate::exit::of_report(&r), crate::exit::UNDECIDED);
        // Everything as expected, nothing else undecided: exit 0.
        let mut r = crate::ci::report_of(&[
            ("A", Fail, &[R004]),
            ("B", Fail, &[R009]),
            ("C", Fail, &[R004]),
        ]);
        r.expectations = Some(apply(&x, &r, true));
        assert_eq!(crate::exit::of_report(&r), crate::exit::OK);
        // C passes: an unexpected pass, which fails the run only under --strict.
        let mut r =
            crate::ci::report_of(&[("A", Fail, &[R004]), ("B", Fail, &[R009]), ("C", Pass, &[])]);
        let o = apply(&x, &r, false);
        assert_eq!(o.unexpected_passes, ["expected[2] (case = \"C\")"]);
        r.expectations = Some(o);
        assert_eq!(crate::exit::of_report(&r), crate::exit::OK);
        r.expectations = Some(apply(&x, &r, true));
        assert_eq!(crate::exit::of_report(&r), crate::exit::REQUIREMENT_FAILED);
    }

    #[test]
    fn a_harness_error_is_never_expected_away() {
        use crate::report::model::Verdict::HarnessError;
        let x = entries("[[expected]]\ncase = \"A\"\nreason = \"r\"\n");
        let mut r = crate::ci::report_of(&[("A", HarnessError, &[])]);
        let o = apply(&x, &r, false);
        assert!(o.expected_failures.is_empty());
        r.expectations = Some(o);
        assert_ne!(crate::exit::of_report(&r), crate::exit::OK);
    }

    #[test]
    fn unknown_fields_and_bad_toml_name_the_file() {
        for text in [
            "[[expected]]\ncase = \"AOC-CASE-001\"\nreason = \"r\"\nwhy = 1\n",
            "[[expected]\n",
            "expected = 3\n",
        ] {
            let e = parse("dir/aocheck.toml", text, &ids()).expect_err(text);
            assert!(e[0].starts_with("dir/aocheck.toml: "), "{e:?}");
        }
    }
}
