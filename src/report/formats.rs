//! Report formats, each an independent rendering of the [`Report`]:
//! `report.json`, `junit.xml` (failure = requirement violated, error = the harness could not
//! decide, skipped = unsupported or not run), `summary.md` (fits a CI job summary) and a
//! self-contained `report.html`.

use super::model::{Report, Verdict};
use std::fmt::Write as _;

/// Text for XML and HTML, content or attribute: the five special characters escaped, and every
/// character XML 1.0 does not allow at all (control characters but tab and line breaks, lone
/// surrogates cannot occur in a `str`, U+FFFE and U+FFFF) replaced by U+FFFD, so no string from
/// an implementation can end an element, open one, or make the document unreadable.
pub(crate) fn xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(xml_char(c)),
        }
    }
    out
}

/// A character as XML 1.0 can hold it: itself, or U+FFFD for the control characters (but tab
/// and line breaks), U+FFFE and U+FFFF.
pub(crate) fn xml_char(c: char) -> char {
    match c {
        '\t' | '\n' | '\r' => c,
        c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => '\u{FFFD}',
        c => c,
    }
}

/// Text for Markdown, on one line: line breaks and control characters become spaces (so nothing
/// can start a heading, a list item or a table row), HTML's special characters become entities
/// (so nothing can open a tag), and Markdown's inline markers are escaped with a backslash (so
/// nothing can emphasise, link, strike out or split a table cell).
pub(crate) fn md(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\\' | '`' | '*' | '_' | '[' | ']' | '|' | '~' | '#' | '!' => {
                out.push('\\');
                out.push(ch);
            }
            c if breaks_line(c) => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// A character that would end or disturb a Markdown line: a control character or a Unicode line
/// or paragraph separator.
fn breaks_line(c: char) -> bool {
    c.is_control() || c == '\u{2028}' || c == '\u{2029}'
}

/// Text as one Markdown code span: on one line, fenced by more backticks than it holds in a row,
/// so it cannot close the span early; inside a span nothing else is interpreted, so the text
/// shows exactly as written. Not for table cells (a row is split at `|` before spans are read):
/// those take [`md`].
fn md_code(s: &str) -> String {
    let line: String = s
        .chars()
        .map(|c| if breaks_line(c) { ' ' } else { c })
        .collect();
    if line.is_empty() {
        return "` `".into();
    }
    let mut longest = 0;
    let mut run = 0;
    for c in line.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat(longest + 1);
    let pad = if line.starts_with('`') || line.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{line}{pad}{fence}")
}

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
/// What a reader must know before the tables: a run stopped early, a shard, the expectations.
pub(crate) fn run_notes(r: &Report) -> Vec<String> {
    let mut v = Vec::new();
    if let Some(why) = &r.incomplete {
        v.push(format!(
            "Incomplete run: {why}. The cases it never ended are listed as not_run."
        ));
    }
    if let Some(sh) = &r.shard {
        v.push(format!(
            "Shard {}/{} of a {}-case suite (suite digest {}); `aocheck merge` joins the shards.",
            sh.k, sh.n, sh.suite_cases, sh.suite_digest
        ));
    }
    if let Some(x) = &r.expectations {
        let list = |l: &[String]| {
            if l.is_empty() {
                "none".to_string()
            } else {
                l.join(", ")
            }
        };
        v.push(format!(
            "Expectations ({}): expected failures: {}; unexpected failures: {}; unexpected passes: {}{}.",
            x.file,
            list(&x.expected_failures),
            list(&x.unexpected_failures),
            list(&x.unexpected_passes),
            if x.strict { " (--strict: they fail the run)" } else { "" }
        ));
    }
    v
}

pub fn markdown(r: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# aocheck conformance: {} of {} cases passed\n",
        r.summary.pass, r.summary.cases
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
            let _ = writeln!(s, "  - reproduce: {}", md_code(&c.repro));
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
