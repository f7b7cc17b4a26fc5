//! The text every rendering of a report shares: escaping for XML, HTML and Markdown, and the
//! notes a reader must see before the tables. Each format (`formats`, `html`, the exploration's
//! pages) builds on these and on nothing of the others.

use super::model::Report;

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
pub(crate) fn md_code(s: &str) -> String {
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
