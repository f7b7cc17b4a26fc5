//! Report formats, each an independent rendering of the [`Report`]:
//! `report.json`, `junit.xml` (failure = requirement violated, error = the harness could not
//! decide, skipped = unsupported or not run), `summary.md` (fits a CI job summary) and a
//! self-contained `report.html`.

use super::model::{Report, Verdict};
use super::text::{md, md_code, run_notes, xml};
use std::fmt::Write as _;

/// `report.json`: the report as pretty JSON.
pub fn json(r: &Report) -> Result<String, serde_json::Error> {
    serde_json::to_string_pretty(r)
}

/// `junit.xml`: one test suite per run, one test case per conformance case.
pub fn junit(r: &Report) -> String {
    let fails = r
        .cases
        .iter()
        .filter(|c| c.verdict == Verdict::Fail)
        .count();
    let errors = r
        .cases
        .iter()
        .filter(|c| c.verdict == Verdict::HarnessError)
        .count();
    let skipped = r
        .cases
        .iter()
        .filter(|c| {
            !matches!(
                c.verdict,
                Verdict::Pass | Verdict::Fail | Verdict::HarnessError
            )
        })
        .count();
    let total: u64 = r.cases.iter().map(|c| c.millis).sum();
    let mut s = String::new();
    let _ = writeln!(s, r#"<?xml version="1.0" encoding="UTF-8"?>"#);
    let _ = writeln!(
        s,
        r#"<testsuites name="aocheck" tests="{}" failures="{fails}" errors="{errors}" skipped="{skipped}" time="{:.3}">"#,
        r.cases.len(),
        total as f64 / 1000.0
    );
    let _ = writeln!(
        s,
        r#"  <testsuite name="aocheck.{}" tests="{}" failures="{fails}" errors="{errors}" skipped="{skipped}" time="{:.3}">"#,
        xml(&r.run_id),
        r.cases.len(),
        total as f64 / 1000.0
    );
    let _ = writeln!(
        s,
        r#"    <properties><property name="seed" value="{}"/><property name="test_input_digest" value="{}"/></properties>"#,
        r.seed,
        xml(&r.test_input_digest)
    );
    for c in &r.cases {
        // Hermes bindings against the ground truth, one line each.
        let sysout = if c.operators.is_empty() {
            String::new()
        } else {
            let lines: Vec<String> = c
                .operators
                .iter()
                .map(|o| {
                    format!(
                        "{}: binding {} ({}), runs {}, approvals {}, stops {}{}",
                        o.label,
                        o.status,
                        o.aoc_state,
                        o.runs,
                        o.approvals,
                        o.stops,
                        if o.missing_knowledge.is_empty() {
                            String::new()
                        } else {
                            format!(", missing knowledge: {}", o.missing_knowledge.join(" "))
                        }
                    )
                })
                .collect();
            format!(
                "      <system-out>{}</system-out>\n",
                xml(&lines.join("\n"))
            )
        };
        let _ = write!(
            s,
            r#"    <testcase classname="{}" name="{} {}" time="{:.3}""#,
            xml(&c.requirements.join(" ")),
            xml(&c.id),
            xml(&c.title),
            c.millis as f64 / 1000.0
        );
        match c.verdict {
            Verdict::Pass if sysout.is_empty() => s.push_str("/>\n"),
            Verdict::Pass => {
                s.push_str(">\n");
                s.push_str(&sysout);
                s.push_str("    </testcase>\n");
            }
            Verdict::Fail => {
                s.push_str(">\n");
                let reqs: Vec<String> = c
                    .failures
                    .iter()
                    .map(|f| f.requirement.to_string())
                    .collect();
                let body: Vec<String> = c
                    .failures
                    .iter()
                    .map(|f| format!("{}: {}", f.requirement, f.msg))
                    .collect();
                let _ = writeln!(
                    s,
                    r#"      <failure message="{}" type="requirement_violated">{}&#10;reproduce: {}</failure>"#,
                    xml(&format!("violates {}", reqs.join(", "))),
                    xml(&body.join("\n")),
                    xml(&c.repro)
                );
                s.push_str(&sysout);
                s.push_str("    </testcase>\n");
            }
            Verdict::HarnessError => {
                s.push_str(">\n");
                let _ = writeln!(
                    s,
                    r#"      <error message="harness could not decide" type="harness_error">{}</error>"#,
                    xml(c.harness.as_deref().unwrap_or(""))
                );
                s.push_str(&sysout);
                s.push_str("    </testcase>\n");
            }
            other => {
                s.push_str(">\n");
                let why = c
                    .unsupported
                    .as_deref()
                    .map_or(String::new(), |u| format!(": {u}"));
                let _ = writeln!(
                    s,
                    r#"      <skipped message="{}"/>"#,
                    xml(&format!("{}{why}", other.label()))
                );
                s.push_str(&sysout);
                s.push_str("    </testcase>\n");
            }
        }
    }
    s.push_str("  </testsuite>\n</testsuites>\n");
    s
}

fn mark(v: Verdict) -> &'static str {
    match v {
        Verdict::Pass => "✅ pass",
        Verdict::Fail => "❌ fail",
        Verdict::HarnessError => "⚠️ harness error",
        Verdict::Unsupported => "➖ unsupported",
        Verdict::MissingKnowledge => "❔ missing knowledge",
        Verdict::NotRun => "➖ not run",
    }
}

/// `summary.md`: requirement verdicts, failing cases with their reproduction command.
pub fn markdown(r: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# aocheck conformance: {}\n",
        super::model::passed_of_ran(&r.cases)
    );
    // Every string that is not aocheck's own is escaped for Markdown: an implementation's name,
    // version and messages, and what case files say.
    let _ = writeln!(
        s,
        "Run {} · seed `{}` · implementation {} · store {} · test input {}\n",
        md_code(&r.run_id),
        r.seed,
        md(r.implementation["name"].as_str().unwrap_or("?")),
        md_code(r.store["kind"].as_str().unwrap_or("?")),
        md_code(&r.test_input_digest)
    );
    if let Some(p) = r.implementation["protocol"].as_str() {
        let _ = writeln!(
            s,
            "Judged through {}: {} {} ({}).\n",
            md(p),
            md(r.implementation["name"].as_str().unwrap_or("?")),
            md(r.implementation["version"].as_str().unwrap_or("?")),
            md(r.implementation["command"].as_str().unwrap_or("?"))
        );
    }
    for line in run_notes(r) {
        let _ = writeln!(s, "> {}\n", md(&line));
    }
    let _ = writeln!(s, "| requirement | verdict | cases |\n|---|---|---|");
    for q in &r.requirements {
        let _ = writeln!(
            s,
            "| {} | {} | {} |",
            q.id,
            mark(q.verdict),
            md(&q.cases.join(", "))
        );
    }
    let bad: Vec<_> = r
        .cases
        .iter()
        .filter(|c| c.verdict != Verdict::Pass)
        .collect();
    if !bad.is_empty() {
        let _ = writeln!(s, "\n## Cases that did not pass\n");
        for c in bad {
            let _ = writeln!(
                s,
                "- **{}** {}: {}",
                md(&c.id),
                md(&c.title),
                mark(c.verdict)
            );
            for f in &c.failures {
                let _ = writeln!(s, "  - {}: {}", f.requirement, md(&f.msg));
            }
            if let Some(h) = &c.harness {
                let _ = writeln!(s, "  - harness: {}", md(h));
            }
            if !c.not_established.is_empty() {
                let _ = writeln!(
                    s,
                    "  - not established: {}",
                    md(&c.not_established.join(", "))
                );
            }
            for u in &c.undecided {
                let _ = writeln!(s, "  - undecided: {}", md(u));
            }
            if let Some(u) = &c.unsupported {
                let _ = writeln!(s, "  - unsupported: {}", md(u));
            }
            // A case with nothing to replay (deploy's DEPLOY-HISTORY) has no reproduce line.
            if !c.repro.is_empty() {
                let _ = writeln!(s, "  - reproduce: {}", md_code(&c.repro));
            }
        }
    }
    let hermes: Vec<_> = r.cases.iter().filter(|c| !c.operators.is_empty()).collect();
    if !hermes.is_empty() {
        let _ = writeln!(s, "\n## Hermes operator connector\n");
        let _ = writeln!(
            s,
            "Bindings against fake-hermes's ground truth (runs, decisions and stops Hermes really applied).\n"
        );
        let _ = writeln!(
            s,
            "| case | verdict | Action | binding | AOC state | runs | approvals | stops | missing knowledge |"
        );
        let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|");
        for c in hermes {
            for o in &c.operators {
                let _ = writeln!(
                    s,
                    "| {} | {} | {}{} | {} | {} | {} | {} | {} | {} |",
                    md(&c.id),
                    c.verdict.label(),
                    md(&o.label),
                    if o.delegated { " (delegated)" } else { "" },
                    md(&o.status),
                    md(&o.aoc_state),
                    o.runs,
                    o.approvals,
                    o.stops,
                    if o.missing_knowledge.is_empty() {
                        "—".to_string()
                    } else {
                        md(&o.missing_knowledge.join(", "))
                    }
                );
            }
        }
    }
    let mk: usize = r
        .cases
        .iter()
        .flat_map(|c| &c.occurrences)
        .filter(|o| !o.missing_knowledge.is_empty())
        .count();
    if mk > 0 {
        let _ = writeln!(
            s,
            "\n{mk} occurrence(s) carry missing-knowledge flags: see report.html."
        );
    }
    let _ = writeln!(s, "\n_{}_", r.disclaimer);
    s
}

/// `report.html` (see [`super::html`]).
pub fn html(r: &Report) -> String {
    super::html::html(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Whatever an implementation says, it stays on one line with no tag, no unescaped
        /// marker and no character XML cannot hold.
        #[test]
        fn escaped_text_cannot_break_out(s in any::<String>()) {
            let m = md(&s);
            prop_assert!(!m.contains('\n') && !m.contains('\r') && !m.contains('<'));
            prop_assert!(!m.chars().any(char::is_control));
            let c = md_code(&s);
            let fence = c.chars().take_while(|x| *x == '`').count();
            // No run of backticks inside is as long as the fence that opens the span.
            let inner = &c[fence..c.len() - fence];
            prop_assert!(!inner.contains(&"`".repeat(fence)));
            prop_assert!(!c.contains('\n'));
            let x = xml(&s);
            prop_assert!(!x.contains('<') && !x.contains('"') && !x.contains('\''));
            prop_assert!(x.chars().all(|ch| ch == '\t' || ch == '\n' || ch == '\r' || (ch as u32) >= 0x20));
        }
    }

    #[test]
    fn markdown_markers_are_escaped_and_shown_as_written() {
        assert_eq!(md("a\n# b | c"), "a \\# b \\| c");
        assert_eq!(md("<b>&"), "&lt;b&gt;&amp;");
        assert_eq!(md_code("x`y"), "``x`y``");
        assert_eq!(md_code("`y"), "`` `y ``");
        assert_eq!(xml("a\u{1}b<"), "a\u{FFFD}b&lt;");
    }
}
