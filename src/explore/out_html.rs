//! `explore.html`: the explore report as one self-contained page (no script, no external
//! resource): the seed and the counts, the findings with their shrunk case files and how often
//! each reproduced, the undecided schedules by why, and the coverage. Every string that is not
//! aocheck's own (what the implementation said, its name, the reasons of undecided schedules)
//! is escaped with the suite report's escaping (`report::text::xml`).

use super::report::{ExploreReport, shrinking, tallies};
use crate::report::text::xml as h;
use std::fmt::Write as _;

const STYLE: &str = "body{font:14px/1.45 system-ui,sans-serif;margin:2em;color:#222;max-width:72em}\
table{border-collapse:collapse;margin:.6em 0 1.2em}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}\
th{background:#f3f3f3}td.n{text-align:right}.found{background:#ffd9d9}.undecided{background:#ffefc2}\
.never{color:#a33;font-weight:600}.cut{background:#ffefc2}.small{color:#666;font-size:12px}code{background:#f5f5f5;padding:1px 3px}";

/// One row of cells, each already escaped (or aocheck's own text).
fn row(s: &mut String, cells: &[String]) {
    s.push_str("<tr>");
    for c in cells {
        let _ = write!(s, "<td>{c}</td>");
    }
    s.push_str("</tr>");
}

/// The page.
pub fn html(r: &ExploreReport) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>aocheck explore: seed {}</title><style>{STYLE}</style></head><body>",
        r.seed
    );
    let undecided = r.undecided_total();
    let _ = write!(
        s,
        "<h1>aocheck explore: seed {}, {} workload, {}</h1>",
        r.seed,
        h(&r.workload),
        h(&r.shard_words())
    );
    let name = |k: &str| {
        r.implementation[k]
            .as_str()
            .map(h)
            .unwrap_or_else(|| "?".into())
    };
    let _ = write!(
        s,
        "<p class=\"small\">run <code>{}</code> · implementation {} {} · store {} · aocheck {} · {} · reproduce with <code>aocheck explore --seed {} --shard {}</code></p>",
        h(&r.run_id),
        name("name"),
        name("version"),
        h(&r.store),
        h(&r.aocheck_version),
        h(&r.schema),
        r.seed,
        h(&r.shard),
    );
    s.push_str("<h2>Schedules</h2><table><tr><th>schedules</th><th>without a finding</th><th>with a finding</th><th>distinct findings</th><th>undecided</th><th>unsupported</th><th>median steps</th><th>time</th><th>per minute</th></tr>");
    row(
        &mut s,
        &[
            r.schedules.to_string(),
            r.clean.to_string(),
            r.findings
                .iter()
                .map(|f| f.schedules)
                .sum::<u64>()
                .to_string(),
            r.findings.len().to_string(),
            undecided.to_string(),
            r.unsupported.to_string(),
            r.median_steps.to_string(),
            format!("{:.1} s", r.millis as f64 / 1000.0),
            format!("{:.1}", r.schedules_per_minute),
        ],
    );
    s.push_str("</table>");
    if let Some(m) = &r.merged {
        s.push_str(
            "<h2>Shards merged</h2><table><tr><th>shard</th><th>run</th><th>schedules</th></tr>",
        );
        for x in &m.shards {
            row(
                &mut s,
                &[
                    h(&x.shard),
                    format!("<code>{}</code>", h(&x.run_id)),
                    x.schedules.to_string(),
                ],
            );
        }
        s.push_str("</table>");
        if !m.missing.is_empty() {
            let _ = write!(
                s,
                "<p class=\"undecided\">Missing shards of {}: {}</p>",
                m.of,
                m.missing
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    if !r.findings.is_empty() {
        s.push_str("<h2>Findings</h2><table><tr><th>finding</th><th>first in schedule</th><th>steps</th><th>shrinking</th><th>reproduced</th><th>on the reference</th><th>case file</th></tr>");
        for f in &r.findings {
            let _ = write!(
                s,
                "<tr class=\"found\"><td><code>{}</code></td><td>{} (step {})</td><td>{} → {}</td><td{}>{}</td><td>{}/{}</td><td>{}</td><td><a href=\"found/{}\">found/{}</a></td></tr>",
                h(&f.key.to_string()),
                f.schedule,
                f.step.map_or("–".into(), |i| i.to_string()),
                f.steps_before,
                f.steps_after,
                if f.shrink_cut_short {
                    " class=\"cut\""
                } else {
                    ""
                },
                shrinking(f.shrink_cut_short),
                f.reproduced,
                f.replays,
                h(f.reference.as_deref().unwrap_or("not run")),
                h(&f.case_file),
                h(&f.case_file),
            );
        }
        s.push_str("</table><dl>");
        for f in &r.findings {
            let _ = write!(
                s,
                "<dt><code>{}</code> in schedule {}</dt><dd>first found: <code>{}</code>",
                h(&f.key.to_string()),
                f.schedule,
                h(&f.line)
            );
            if !f.shrunk_line.is_empty() {
                let _ = write!(s, "<br>shrunk: <code>{}</code>", h(&f.shrunk_line));
            }
            s.push_str("</dd>");
        }
        s.push_str("</dl><p>Replay one with <code>aocheck run --cases &lt;out&gt;/found/&lt;file&gt;</code> (and the same <code>--sut</code>).</p>");
    }
    if undecided > 0 {
        s.push_str("<h2>Undecided (never counted as without a finding)</h2><table><tr><th>schedules</th><th>why</th></tr>");
        for (why, n) in &r.undecided {
            row(&mut s, &[n.to_string(), format!("<code>{}</code>", h(why))]);
        }
        s.push_str("</table>");
    }
    s.push_str("<h2>Coverage</h2><table><tr><th>fault × operation</th><th>declared</th><th>fired</th></tr>");
    for (k, c) in &r.coverage.faults {
        let _ = write!(
            s,
            "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n{}\">{}</td></tr>",
            h(k),
            c.declared,
            if c.fired == 0 { " never" } else { "" },
            c.fired
        );
    }
    s.push_str("</table>");
    if !r.never_fired.is_empty() {
        let _ = write!(
            s,
            "<p><span class=\"never\">Never fired</span> ({}): {}</p>",
            r.never_fired.len(),
            h(&r.never_fired.join(", "))
        );
    }
    s.push_str(
        "<h3>Crash points</h3><table><tr><th>where</th><th>declared</th><th>landed</th></tr>",
    );
    for (k, c) in &r.coverage.crash_points {
        row(&mut s, &[h(k), c.declared.to_string(), c.fired.to_string()]);
    }
    s.push_str("</table>");
    for (title, m) in tallies(&r.coverage) {
        let _ = write!(s, "<h3>{title}</h3><table>");
        for (k, n) in m {
            row(&mut s, &[h(k), n.to_string()]);
        }
        s.push_str("</table>");
    }
    s.push_str("</body></html>\n");
    s
}
