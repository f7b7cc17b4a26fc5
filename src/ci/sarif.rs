//! `report.sarif`: the run as a SARIF 2.1.0 log, for code-scanning views and CI annotations.
//!
//! One rule per requirement id (AOC-REQ-001 … 013) with its draft section as help. One result
//! per case × requirement that did not pass: `error` for a failure, `warning` for a harness
//! error or missing knowledge (aocheck could not decide), `note` for unsupported and not run.
//! A passing case has none. Each result points at the case file, at the line of the step the
//! failure was found after when there is one. A failure the expectations file lists carries an
//! external suppression with its reason. With a baseline, each result carries `baselineState`,
//! and what the baseline had and this run has not is listed as `absent`.

use crate::aoc::Req;
use crate::report::model::{CaseReport, Report, Verdict};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// The draft's section and title of each requirement (AOC §4.1–4.13).
pub fn title(r: Req) -> (&'static str, &'static str) {
    match r {
        Req::R001 => ("4.1", "One authoritative coordination domain"),
        Req::R002 => ("4.2", "Stable occurrence identity, no new namespace"),
        Req::R003 => ("4.3", "Immutable provider binding"),
        Req::R004 => ("4.4", "Append-only attempt evidence"),
        Req::R005 => ("4.5", "Preserve uncertainty through replacement"),
        Req::R006 => ("4.6", "Fence retired executors"),
        Req::R007 => ("4.7", "Historical responses are evidence, not authority"),
        Req::R008 => ("4.8", "Pre-entry release requires serialised non-entry"),
        Req::R009 => ("4.9", "Status-source truth and missing knowledge"),
        Req::R010 => ("4.10", "Refuse rebinding and duplicate attempts"),
        Req::R011 => ("4.11", "Provider-specific terminal interpretation"),
        Req::R012 => ("4.12", "Provider entry consumes authority"),
        Req::R013 => ("4.13", "No migration or format-equivalence claim"),
    }
}

/// The 1-based line where item `n` (0-based) of the top-level `steps:` sequence of a case file
/// starts; `None` when the text has no such item (a flow-style list, a shorter list, not YAML).
pub fn step_line(text: &str, n: usize) -> Option<usize> {
    let mut lines = text.lines().enumerate();
    lines.find(|(_, l)| l.starts_with("steps:"))?;
    let mut indent = None;
    let mut count = 0;
    for (i, l) in lines {
        let t = l.trim_start();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let ind = l.len() - t.len();
        if ind == 0 && !t.starts_with('-') {
            return None;
        }
        if t == "-" || t.starts_with("- ") {
            let at = *indent.get_or_insert(ind);
            if ind == at {
                if count == n {
                    return Some(i + 1);
                }
                count += 1;
            } else if ind < at {
                return None;
            }
        }
    }
    None
}

/// The line of the case's `id:`, else 1.
fn id_line(text: &str) -> usize {
    text.lines()
        .position(|l| l.starts_with("id:"))
        .map_or(1, |i| i + 1)
}

fn level(v: Verdict) -> &'static str {
    match v {
        Verdict::Fail => "error",
        Verdict::HarnessError | Verdict::MissingKnowledge => "warning",
        Verdict::Unsupported | Verdict::NotRun | Verdict::Pass => "note",
    }
}

/// One result before it is written: which case and requirement, at what level, saying what.
struct Row {
    case: String,
    req: Req,
    level: &'static str,
    text: String,
    step: Option<usize>,
    file: String,
    verdict: Verdict,
}

fn bounded(s: &str) -> String {
    crate::report::model::one_line(s, 2000)
}

/// The results a report calls for, in case order then requirement order.
fn rows(r: &Report) -> Vec<Row> {
    let mut out = Vec::new();
    for c in &r.cases {
        match c.verdict {
            Verdict::Pass => {}
            Verdict::Fail => {
                let mut by: BTreeMap<Req, Vec<&crate::report::model::Failure>> = BTreeMap::new();
                for f in &c.failures {
                    by.entry(f.requirement).or_default().push(f);
                }
                for (req, fs) in by {
                    let text = fs
                        .iter()
                        .map(|f| f.msg.as_str())
                        .collect::<Vec<_>>()
                        .join("; ");
                    out.push(Row {
                        case: c.id.clone(),
                        req,
                        level: "error",
                        text: bounded(&format!("{}: {text}", c.id)),
                        step: fs.iter().find_map(|f| f.step),
                        file: c.file.clone(),
                        verdict: c.verdict,
                    });
                }
            }
            v => {
                let why = undecided_why(c);
                let reqs: Vec<Req> =
                    if v == Verdict::MissingKnowledge && !c.not_established.is_empty() {
                        c.not_established
                            .iter()
                            .filter_map(|r| Req::parse(r))
                            .collect()
                    } else {
                        c.requirements
                            .iter()
                            .filter_map(|r| Req::parse(r))
                            .collect()
                    };
                for req in reqs {
                    out.push(Row {
                        case: c.id.clone(),
                        req,
                        level: level(v),
                        text: bounded(&format!("{} {}: {why}", c.id, v.label())),
                        step: None,
                        file: c.file.clone(),
                        verdict: v,
                    });
                }
            }
        }
    }
    out
}

fn undecided_why(c: &CaseReport) -> String {
    c.harness
        .clone()
        .or_else(|| c.unsupported.clone())
        .or_else(|| (!c.undecided.is_empty()).then(|| c.undecided.join("; ")))
        .or_else(|| {
            (!c.not_established.is_empty())
                .then(|| format!("not established: {}", c.not_established.join(", ")))
        })
        .unwrap_or_else(|| match c.verdict {
            Verdict::NotRun => "the case did not run".into(),
            v => v.label().into(),
        })
}

/// The SARIF log of `report`. `case_text` reads a case file by the path the report names (for
/// the line of a step); `baseline` adds `baselineState` to every result.
pub fn sarif(
    report: &Report,
    baseline: Option<&Report>,
    case_text: &dyn Fn(&str) -> Option<String>,
) -> Value {
    let rules: Vec<Value> = Req::ALL
        .iter()
        .map(|r| {
            let (section, name) = title(*r);
            json!({
                "id": r.id(),
                "name": name.replace(|c: char| !c.is_ascii_alphanumeric(), ""),
                "shortDescription": {"text": format!("{}: {name}", r.id())},
                "fullDescription": {"text": format!("{name} (AOC draft §{section})")},
                "help": {"text": format!("AOC draft (draft-schrock-agent-operation-continuity-00) §{section}, {name}. Only a MUST of the section fails a case; what aocheck could not decide is reported as a warning, never a pass.")},
                "properties": {"section": section},
            })
        })
        .collect();
    let index = |r: Req| Req::ALL.iter().position(|x| *x == r).unwrap_or(0);
    let expected: BTreeMap<&str, ()> = report
        .expectations
        .as_ref()
        .map(|x| {
            x.expected_failures
                .iter()
                .map(|c| (c.as_str(), ()))
                .collect()
        })
        .unwrap_or_default();
    let before: Option<BTreeMap<(String, Req), &'static str>> = baseline.map(|b| {
        rows(b)
            .into_iter()
            .map(|r| ((r.case, r.req), r.level))
            .collect()
    });
    let mut texts: BTreeMap<String, Option<String>> = BTreeMap::new();
    let mut location = |file: &str, step: Option<usize>| {
        let text = texts
            .entry(file.to_string())
            .or_insert_with(|| case_text(file))
            .clone();
        let line = text.as_deref().map_or(1, |t| {
            step.and_then(|n| step_line(t, n))
                .unwrap_or_else(|| id_line(t))
        });
        // A path under the working folder is relative to it (SRCROOT); one given absolute stays so.
        let uri = file.replace('\\', "/");
        let artifact = if uri.starts_with('/') {
            json!({"uri": format!("file://{uri}")})
        } else {
            json!({"uri": uri, "uriBaseId": "SRCROOT"})
        };
        json!([{"physicalLocation": {
            "artifactLocation": artifact,
            "region": {"startLine": line},
        }}])
    };
    let now = rows(report);
    let mut results = Vec::new();
    for r in &now {
        let mut v = json!({
            "ruleId": r.req.id(),
            "ruleIndex": index(r.req),
            "level": r.level,
            "message": {"text": r.text},
            "locations": location(&r.file, r.step),
            "partialFingerprints": {"aocheck/case-requirement": format!("{}/{}", r.case, r.req.id())},
            "properties": {"case": r.case, "verdict": r.verdict.label()},
        });
        if r.level == "error" && expected.contains_key(r.case.as_str()) {
            v["suppressions"] = json!([{"kind": "external", "justification": format!("listed as a known failure in {}", report.expectations.as_ref().map_or("", |x| x.file.as_str()))}]);
        }
        if let Some(b) = &before {
            v["baselineState"] = match b.get(&(r.case.clone(), r.req)) {
                None => "new",
                Some(l) if *l == r.level => "unchanged",
                Some(_) => "updated",
            }
            .into();
        }
        results.push(v);
    }
    if let (Some(b), Some(base)) = (&before, baseline) {
        let files: BTreeMap<&str, &str> = base
            .cases
            .iter()
            .map(|c| (c.id.as_str(), c.file.as_str()))
            .collect();
        for (case, req) in b.keys() {
            if now.iter().any(|r| &r.case == case && r.req == *req) {
                continue;
            }
            let file = files.get(case.as_str()).copied().unwrap_or("");
            results.push(json!({
                "ruleId": req.id(),
                "ruleIndex": index(*req),
                "level": "none",
                "message": {"text": format!("{case}: no longer reported for {} (it passes, or it no longer runs)", req.id())},
                "locations": location(file, None),
                "partialFingerprints": {"aocheck/case-requirement": format!("{case}/{}", req.id())},
                "properties": {"case": case},
                "baselineState": "absent",
            }));
        }
    }
    let mut run = json!({
        "tool": {"driver": {
            "name": "aocheck",
            "version": report.aocheck_version,
            "semanticVersion": report.aocheck_version.split_whitespace().next().unwrap_or(""),
            "rules": rules,
        }},
        "originalUriBaseIds": {"SRCROOT": {"description": {"text": "the folder aocheck ran in"}}},
        "automationDetails": {"id": format!("aocheck/{}", report.run_id)},
        "results": results,
        "properties": {"seed": report.seed, "test_input_digest": report.test_input_digest},
    });
    if let Some(why) = &report.incomplete {
        run["invocations"] = json!([{"executionSuccessful": false, "exitCodeDescription": why}]);
    }
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [run],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const CASE: &str = "id: X\ntitle: t\nrequirements: [AOC-REQ-001]\nsteps:\n  # a comment\n  - do: join\n    executor: e1\n  - {do: create, occurrence: o1}\n\n  - do: crash\n    executor: e1\nexpect: {}\n";

    #[test]
    fn step_lines_are_found_and_missing_ones_are_none() {
        assert_eq!(step_line(CASE, 0), Some(6));
        assert_eq!(step_line(CASE, 1), Some(8));
        assert_eq!(step_line(CASE, 2), Some(10));
        assert_eq!(step_line(CASE, 3), None);
        assert_eq!(step_line("steps: [a, b]\n", 0), None);
        assert_eq!(step_line("no steps\n", 0), None);
        assert_eq!(id_line(CASE), 1);
    }

    proptest! {
        #[test]
        fn any_text_gives_a_line_inside_it_or_none(text in "\\PC*(\n\\PC*){0,8}", n in 0usize..6) {
            if let Some(l) = step_line(&text, n) {
                prop_assert!(l >= 1 && l <= text.lines().count());
            }
        }
    }

    #[test]
    fn levels_follow_verdicts_and_a_pass_has_no_result() {
        use crate::aoc::Req::{R004, R009};
        let r = crate::ci::report_of(&[
            ("A", Verdict::Pass, &[]),
            ("B", Verdict::Fail, &[R004, R009, R004]),
            ("C", Verdict::HarnessError, &[]),
            ("D", Verdict::Unsupported, &[]),
        ]);
        let s = sarif(&r, None, &|_| None);
        let res = s["runs"][0]["results"].as_array().expect("results").clone();
        let got: Vec<(String, String, String)> = res
            .iter()
            .map(|v| {
                (
                    v["properties"]["case"].as_str().unwrap_or_default().into(),
                    v["ruleId"].as_str().unwrap_or_default().into(),
                    v["level"].as_str().unwrap_or_default().into(),
                )
            })
            .collect();
        let t = |c: &str, r: &str, l: &str| (c.to_string(), r.to_string(), l.to_string());
        assert_eq!(
            got,
            [
                t("B", "AOC-REQ-004", "error"),
                t("B", "AOC-REQ-009", "error"),
                t("C", "AOC-REQ-001", "warning"),
                t("C", "AOC-REQ-009", "warning"),
                t("D", "AOC-REQ-001", "note"),
                t("D", "AOC-REQ-009", "note"),
            ]
        );
        assert!(res.iter().all(|v| v.get("baselineState").is_none()));
        assert_eq!(
            s["runs"][0]["tool"]["driver"]["rules"]
                .as_array()
                .map(Vec::len),
            Some(13)
        );
    }

    #[test]
    fn what_the_implementation_said_is_bounded_and_has_no_control_characters() {
        let mut r = crate::ci::report_of(&[("A", Verdict::Fail, &[crate::aoc::Req::R004])]);
        r.cases[0].failures[0].msg = format!("\u{0}\u{1b}[31m</script>{}", "x".repeat(5000));
        let s = serde_json::to_string(&sarif(&r, None, &|_| None)).expect("json");
        let back: Value = serde_json::from_str(&s).expect("parses");
        let text = back["runs"][0]["results"][0]["message"]["text"]
            .as_str()
            .expect("text");
        assert!(!text.chars().any(|c| c.is_control()), "{text:?}");
        assert!(text.chars().count() <= 2000);
    }

    #[test]
    fn a_baseline_marks_new_unchanged_updated_and_absent() {
        use crate::aoc::Req::{R004, R009};
        let old = crate::ci::report_of(&[
            ("A", Verdict::Fail, &[R004]),
            ("B", Verdict::Fail, &[R009]),
            ("C", Verdict::HarnessError, &[]),
        ]);
        let new = crate::ci::report_of(&[
            ("A", Verdict::Fail, &[R004]),
            ("B", Verdict::Pass, &[]),
            ("C", Verdict::Fail, &[R009]),
        ]);
        let s = sarif(&new, Some(&old), &|_| None);
        let got: BTreeMap<String, String> = s["runs"][0]["results"]
            .as_array()
            .expect("results")
            .iter()
            .map(|v| {
                (
                    format!(
                        "{}/{}",
                        v["properties"]["case"].as_str().unwrap_or_default(),
                        v["ruleId"].as_str().unwrap_or_default()
                    ),
                    v["baselineState"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect();
        let want: BTreeMap<String, String> = [
            ("A/AOC-REQ-004", "unchanged"),
            ("B/AOC-REQ-009", "absent"),
            ("C/AOC-REQ-009", "updated"),
            ("C/AOC-REQ-001", "absent"),
        ]
        .into_iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        assert_eq!(got, want);
    }
}
