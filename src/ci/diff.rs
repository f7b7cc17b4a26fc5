//! `aocheck diff OLD NEW`: what changed between two run reports, keyed by requirement id and
//! then case id (the ids are the contract). A *regression* is a case that passed and no longer
//! does, or that now fails where it did not; a *fix* is a case that now passes where it did not.
//! Markdown for a pull-request comment, JSON for a machine.

use crate::report::model::{CaseReport, Report, Verdict};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Where a report came from and whether its signature was checked.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Side {
    pub file: String,
    pub run_id: String,
    pub test_input_digest: String,
    /// `signed, verified`, `signed, not verified (no --key)`, `plain`, or `this run` (`--baseline`).
    pub signature: String,
}

/// One case whose verdict moved.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Change {
    /// The requirement the change is filed under: the lowest id the case failed (new side for a
    /// regression, old side for a fix), else the lowest it evaluates.
    pub requirement: String,
    pub case: String,
    pub from: Verdict,
    pub to: Verdict,
    /// The new side's reason (failures, harness error, unsupported), bounded, one line.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub why: String,
}

/// Missing-knowledge flags of a case that appeared or went.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FlagChange {
    pub case: String,
    pub added: Vec<String>,
    pub removed: Vec<String>,
}

/// A requirement whose aggregate verdict moved.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ReqChange {
    pub requirement: String,
    pub from: Option<Verdict>,
    pub to: Option<Verdict>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Diff {
    pub old: Side,
    pub new: Side,
    /// The two runs judged different case files (their test-input digests differ).
    pub suites_differ: bool,
    pub regressions: Vec<Change>,
    pub fixes: Vec<Change>,
    /// Other moves between verdicts that are neither pass (e.g. unsupported → harness error).
    pub changed: Vec<Change>,
    pub new_cases: Vec<Change>,
    pub removed_cases: Vec<Change>,
    pub missing_knowledge: Vec<FlagChange>,
    pub requirements: Vec<ReqChange>,
}

impl Diff {
    pub fn has_regression(&self) -> bool {
        !self.regressions.is_empty()
    }
}

fn flags(c: &CaseReport) -> BTreeSet<String> {
    let occ = c.occurrences.iter().flat_map(|o| {
        o.missing_knowledge
            .iter()
            .map(move |f| format!("{}: {f}", o.label))
    });
    let ops = c.operators.iter().flat_map(|o| {
        o.missing_knowledge
            .iter()
            .map(move |f| format!("{}: {f}", o.label))
    });
    occ.chain(ops).collect()
}

fn why(c: &CaseReport) -> String {
    crate::report::model::one_line(&c.reasons(), 300)
}

fn filed_under(c: &CaseReport) -> String {
    c.failures
        .iter()
        .map(|f| f.requirement.id().to_string())
        .min()
        .or_else(|| c.requirements.iter().min().cloned())
        .unwrap_or_default()
}

/// Compares two reports.
pub fn diff(old: &Report, old_side: Side, new: &Report, new_side: Side) -> Diff {
    let olds: BTreeMap<&str, &CaseReport> = old.cases.iter().map(|c| (c.id.as_str(), c)).collect();
    let news: BTreeMap<&str, &CaseReport> = new.cases.iter().map(|c| (c.id.as_str(), c)).collect();
    let mut d = Diff {
        suites_differ: old.test_input_digest != new.test_input_digest,
        old: old_side,
        new: new_side,
        regressions: Vec::new(),
        fixes: Vec::new(),
        changed: Vec::new(),
        new_cases: Vec::new(),
        removed_cases: Vec::new(),
        missing_knowledge: Vec::new(),
        requirements: Vec::new(),
    };
    for (id, n) in &news {
        let Some(o) = olds.get(id) else {
            d.new_cases.push(Change {
                requirement: filed_under(n),
                case: id.to_string(),
                from: Verdict::NotRun,
                to: n.verdict,
                why: why(n),
            });
            continue;
        };
        let (from, to) = (o.verdict, n.verdict);
        if from != to {
            let regression = (from == Verdict::Pass) || (to == Verdict::Fail);
            let change = Change {
                requirement: if to == Verdict::Pass {
                    filed_under(o)
                } else {
                    filed_under(n)
                },
                case: id.to_string(),
                from,
                to,
                why: why(n),
            };
            if regression {
                d.regressions.push(change);
            } else if to == Verdict::Pass {
                d.fixes.push(change);
            } else {
                d.changed.push(change);
            }
        } else if from == Verdict::Fail {
            // Still failing, for other requirements: a new requirement failed is a regression.
            let was: BTreeSet<_> = o.failures.iter().map(|f| f.requirement).collect();
            if let Some(f) = n.failures.iter().find(|f| !was.contains(&f.requirement)) {
                d.regressions.push(Change {
                    requirement: f.requirement.id().to_string(),
                    case: id.to_string(),
                    from,
                    to,
                    why: why(n),
                });
            }
        }
        // Flags are compared between two runs of the case (a case not run has none to compare).
        let (fo, fnew) = (flags(o), flags(n));
        if fo != fnew && from != Verdict::NotRun && to != Verdict::NotRun {
            d.missing_knowledge.push(FlagChange {
                case: id.to_string(),
                added: fnew.difference(&fo).cloned().collect(),
                removed: fo.difference(&fnew).cloned().collect(),
            });
        }
    }
    for (id, o) in &olds {
        if !news.contains_key(id) {
            d.removed_cases.push(Change {
                requirement: filed_under(o),
                case: id.to_string(),
                from: o.verdict,
                to: Verdict::NotRun,
                why: String::new(),
            });
        }
    }
    let key = |c: &Change| (c.requirement.clone(), c.case.clone());
    for v in [
        &mut d.regressions,
        &mut d.fixes,
        &mut d.changed,
        &mut d.new_cases,
        &mut d.removed_cases,
    ] {
        v.sort_by_key(key);
    }
    let reqs = |r: &Report| -> BTreeMap<String, Verdict> {
        r.requirements
            .iter()
            .map(|q| (q.id.id().to_string(), q.verdict))
            .collect()
    };
    let (ro, rn) = (reqs(old), reqs(new));
    let ids: BTreeSet<&String> = ro.keys().chain(rn.keys()).collect();
    for id in ids {
        let (from, to) = (ro.get(id).copied(), rn.get(id).copied());
        if from != to {
            d.requirements.push(ReqChange {
                requirement: id.clone(),
                from,
                to,
            });
        }
    }
    d
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('`', "'")
}

/// `run --baseline`: the diff of the run's report (written in `out`) against the baseline,
/// written beside it as `diff.md` and `diff.json`.
pub fn against_baseline(
    old: &Report,
    old_side: &Side,
    report: &Report,
    out: &Path,
) -> Result<Diff, String> {
    let new_side = Side {
        file: crate::runner::repro_case_path(&out.join("report.json"))
            .display()
            .to_string(),
        run_id: report.run_id.clone(),
        test_input_digest: report.test_input_digest.clone(),
        signature: "this run".into(),
    };
    let d = diff(old, old_side.clone(), report, new_side);
    let json = serde_json::to_string_pretty(&d).map_err(|e| e.to_string())?;
    for (name, body) in [("diff.md", markdown(&d)), ("diff.json", json)] {
        std::fs::write(out.join(name), body)
            .map_err(|e| format!("writing {name} to {}: {e}", out.display()))?;
    }
    Ok(d)
}

/// The diff as Markdown (a pull-request comment).
pub fn markdown(d: &Diff) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(s, "# aocheck diff\n");
    let _ = writeln!(
        s,
        "**{} regression(s), {} fix(es)**, {} other change(s), {} new and {} removed case(s), {} case(s) with changed missing-knowledge flags.\n",
        d.regressions.len(),
        d.fixes.len(),
        d.changed.len(),
        d.new_cases.len(),
        d.removed_cases.len(),
        d.missing_knowledge.len()
    );
    let _ = writeln!(
        s,
        "- old: `{}` (run `{}`, {})\n- new: `{}` (run `{}`, {})",
        cell(&d.old.file),
        cell(&d.old.run_id),
        d.old.signature,
        cell(&d.new.file),
        cell(&d.new.run_id),
        d.new.signature
    );
    if d.suites_differ {
        let _ = writeln!(
            s,
            "- the two runs judged different case files (their test-input digests differ)"
        );
    }
    for (title, rows) in [
        ("Regressions", &d.regressions),
        ("Fixes", &d.fixes),
        ("Other changes", &d.changed),
        ("New cases", &d.new_cases),
        ("Removed cases", &d.removed_cases),
    ] {
        if rows.is_empty() {
            continue;
        }
        let _ = writeln!(
            s,
            "\n## {title}\n\n| requirement | case | was | now | why |\n|---|---|---|---|---|"
        );
        for c in rows {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} |",
                cell(&c.requirement),
                cell(&c.case),
                c.from.label(),
                c.to.label(),
                cell(&c.why)
            );
        }
    }
    if !d.missing_knowledge.is_empty() {
        let _ = writeln!(
            s,
            "\n## Missing-knowledge flags\n\n| case | added | removed |\n|---|---|---|"
        );
        for f in &d.missing_knowledge {
            let _ = writeln!(
                s,
                "| {} | {} | {} |",
                cell(&f.case),
                cell(&f.added.join(", ")),
                cell(&f.removed.join(", "))
            );
        }
    }
    if !d.requirements.is_empty() {
        let _ = writeln!(
            s,
            "\n## Requirements\n\n| requirement | was | now |\n|---|---|---|"
        );
        let l = |v: Option<Verdict>| v.map_or("absent", |v| v.label());
        for r in &d.requirements {
            let _ = writeln!(s, "| {} | {} | {} |", r.requirement, l(r.from), l(r.to));
        }
    }
    s
}

/// Reads a report: `report.json`, a folder holding one, or a signed envelope
/// (`report.dsse.json`), verified with `key` when one is given. Errors name the file and the
/// exit code they call for.
pub fn read_report(path: &Path, key: Option<&Path>) -> Result<(Report, Side), (u8, String)> {
    use crate::exit;
    let file = if path.is_dir() {
        let signed = path.join("report.dsse.json");
        if key.is_some() && signed.is_file() {
            signed
        } else {
            path.join("report.json")
        }
    } else {
        path.to_path_buf()
    };
    let shown = crate::runner::repro_case_path(&file).display().to_string();
    let bytes = std::fs::read(&file).map_err(|e| (exit::INVALID_INPUT, format!("{shown}: {e}")))?;
    let value: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| {
        (
            exit::INVALID_INPUT,
            format!("{shown}: not JSON ({e}); give a report.json or a report.dsse.json"),
        )
    })?;
    // A signed run: the envelope signs the folder's files; the report is the folder's
    // `report.json`, read once every subject is verified (with a key) or as it is (without).
    let (value, signature) = if value.get("payloadType").is_some() {
        let dir = file.parent().unwrap_or(Path::new("."));
        let beside = dir.join("report.json");
        let read_beside = || -> Result<serde_json::Value, (u8, String)> {
            let b = std::fs::read(&beside)
                .map_err(|e| (exit::INVALID_INPUT, format!("{}: {e}", beside.display())))?;
            serde_json::from_slice(&b).map_err(|e| {
                (
                    exit::INVALID_INPUT,
                    format!("{}: not JSON ({e})", beside.display()),
                )
            })
        };
        match key {
            Some(k) => {
                let pem = std::fs::read_to_string(k)
                    .map_err(|e| (exit::INVALID_INPUT, format!("{}: {e}", k.display())))?;
                let vk = crate::report::attest::verifying_key(&pem)
                    .map_err(|e| (exit::INVALID_INPUT, format!("{}: {e}", k.display())))?;
                let checked = crate::report::attest::verify_folder(&file, &vk).map_err(|e| {
                    (
                        exit::SIGNATURE_FAILED,
                        format!(
                            "{shown}: the signature does not verify with {}: {e}",
                            k.display()
                        ),
                    )
                })?;
                if !checked.problems.is_empty() {
                    return Err((
                        exit::SIGNATURE_FAILED,
                        format!(
                            "{shown}: the folder is not as signed: {}",
                            checked.problems.join("; ")
                        ),
                    ));
                }
                (read_beside()?, "signed, verified".to_string())
            }
            None => (
                read_beside()?,
                "signed, not verified (no --key)".to_string(),
            ),
        }
    } else {
        (value, "plain".to_string())
    };
    let report: Report = serde_json::from_value(value).map_err(|e| {
        (
            exit::INVALID_INPUT,
            format!("{shown}: not an aocheck run report ({e})"),
        )
    })?;
    let side = Side {
        file: shown,
        run_id: report.run_id.clone(),
        test_input_digest: report.test_input_digest.clone(),
        signature,
    };
    Ok((report, side))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aoc::Req::{R004, R009};
    use crate::report::model::Verdict::{Fail, HarnessError, NotRun, Pass, Unsupported};

    fn side() -> Side {
        Side {
            file: "f".into(),
            run_id: "r".into(),
            test_input_digest: "d".into(),
            signature: "plain".into(),
        }
    }

    #[test]
    fn regressions_fixes_and_moves_are_told_apart() {
        let old = crate::ci::report_of(&[
            ("A", Pass, &[]),
            ("B", Fail, &[R004]),
            ("C", Fail, &[R004]),
            ("D", Unsupported, &[]),
            ("E", Pass, &[]),
            ("F", Pass, &[]),
        ]);
        let new = crate::ci::report_of(&[
            ("A", Fail, &[R009]),
            ("B", Pass, &[]),
            ("C", Fail, &[R004, R009]),
            ("D", HarnessError, &[]),
            ("E", Pass, &[]),
            ("G", Pass, &[]),
        ]);
        let d = diff(&old, side(), &new, side());
        let ids = |v: &[Change]| v.iter().map(|c| c.case.clone()).collect::<Vec<_>>();
        // A passed and fails; C still fails, for one more requirement.
        assert_eq!(ids(&d.regressions), ["A", "C"]);
        assert_eq!(d.regressions[1].requirement, "AOC-REQ-009");
        assert_eq!(ids(&d.fixes), ["B"]);
        assert_eq!(ids(&d.changed), ["D"]);
        assert_eq!(ids(&d.new_cases), ["G"]);
        assert_eq!(ids(&d.removed_cases), ["F"]);
        assert!(d.has_regression());
        let md = markdown(&d);
        assert!(md.contains("**2 regression(s), 1 fix(es)**"), "{md}");
        // Nothing moved: no regression, empty lists.
        let same = diff(&old, side(), &old, side());
        assert!(!same.has_regression());
        assert!(same.fixes.is_empty() && same.changed.is_empty() && same.requirements.is_empty());
    }

    #[test]
    fn a_pass_that_stopped_running_is_a_regression_and_its_flags_are_not_compared() {
        let mut old = crate::ci::report_of(&[("A", Pass, &[])]);
        let new = crate::ci::report_of(&[("A", NotRun, &[])]);
        old.cases[0].occurrences.clear();
        let d = diff(&old, side(), &new, side());
        assert_eq!(d.regressions.len(), 1);
        assert!(d.missing_knowledge.is_empty());
    }

    #[test]
    fn a_table_cell_cannot_break_the_markdown() {
        let old = crate::ci::report_of(&[("A", Pass, &[])]);
        let mut new = crate::ci::report_of(&[("A", Fail, &[R004])]);
        new.cases[0].failures[0].msg = "x | y `z`\n| forged | row |".into();
        let md = markdown(&diff(&old, side(), &new, side()));
        let rows: Vec<&str> = md
            .lines()
            .filter(|l| l.starts_with("| AOC-REQ-004 | A |"))
            .collect();
        assert_eq!(rows.len(), 1, "{md}");
        assert!(rows[0].contains("x \\| y 'z'"), "{md}");
    }
}
