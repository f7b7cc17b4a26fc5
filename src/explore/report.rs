//! The explore report: `explore.json` (schema `aocheck-explore/1`), `summary.md`, `junit.xml`
//! (one test per finding and one for the schedules without a finding), and each finding's
//! shrunk schedule as a case file under `found/`.

use super::{Exploration, ExploreOptions};
use crate::report::formats::{md, xml};
use serde_json::json;
use std::path::Path;

pub const SCHEMA: &str = "aocheck-explore/1";

/// The report as JSON: what was explored, on what, and what was found and exercised.
pub fn json_of(x: &Exploration, o: &ExploreOptions, store_kind: &str) -> serde_json::Value {
    let per_minute = if x.millis == 0 {
        0.0
    } else {
        x.schedules as f64 * 60_000.0 / x.millis as f64
    };
    json!({
        "schema": SCHEMA,
        "aocheck_version": env!("CARGO_PKG_VERSION"),
        "run_id": o.run.run_id,
        "seed": o.seed,
        "workload": o.workload.name(),
        "shard": format!("{}/{}", o.shard.0, o.shard.1),
        "store": store_kind,
        "implementation": x.implementation.clone().unwrap_or_else(|| crate::reference::implementation(o.run.knobs)),
        "operations": x.operations,
        "schedules": x.schedules,
        "clean": x.clean,
        "undecided": x.undecided,
        "unsupported": x.unsupported,
        "findings": x.findings,
        "coverage": x.coverage,
        "never_fired": x.coverage.never_fired(),
        "median_steps": x.median_steps,
        "millis": x.millis,
        "schedules_per_minute": (per_minute * 10.0).round() / 10.0,
    })
}

/// The Markdown summary.
pub fn markdown(x: &Exploration, o: &ExploreOptions) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "# aocheck explore: seed {}, {} workload, shard {}/{}\n\n",
        o.seed,
        o.workload.name(),
        o.shard.0,
        o.shard.1
    ));
    let undecided: u64 = x.undecided.values().sum();
    s.push_str(&format!(
        "{} schedules (median {} steps) in {:.1} s: {} without a finding, {} with one ({} distinct), {} undecided, {} unsupported.\n\n",
        x.schedules,
        x.median_steps,
        x.millis as f64 / 1000.0,
        x.clean,
        x.findings.iter().map(|f| f.schedules).sum::<u64>(),
        x.findings.len(),
        undecided,
        x.unsupported
    ));
    if !x.findings.is_empty() {
        s.push_str("## Findings\n\n| finding | first in schedule | steps | shrinking | reproduced | on the reference | case file |\n|---|---|---|---|---|---|---|\n");
        for f in &x.findings {
            s.push_str(&format!(
                "| {} | {} (step {}) | {} → {} | {} | {}/{} | {} | `found/{}` |\n",
                md(&f.key.to_string()),
                f.schedule,
                f.step.map_or("–".into(), |i| i.to_string()),
                f.steps_before,
                f.steps_after,
                shrinking(f.shrink_cut_short),
                f.reproduced,
                f.replays,
                md(f.reference.as_deref().unwrap_or("not run")),
                md(&f.case_file)
            ));
        }
        s.push('\n');
        for f in &x.findings {
            s.push_str(&format!("- {}: {}\n", md(&f.key.to_string()), md(&f.line)));
        }
        s.push_str(&format!(
            "\nReplay one with `aocheck run --cases {}/found/<file>` (and the same `--sut`).\n\n",
            "<out>"
        ));
    }
    if undecided > 0 {
        s.push_str("## Undecided (never counted as without a finding)\n\n");
        for (why, n) in &x.undecided {
            s.push_str(&format!("- {n} × {}\n", md(why)));
        }
        s.push('\n');
    }
    s.push_str("## Coverage\n\n| fault × operation | declared | fired |\n|---|---|---|\n");
    for (k, c) in &x.coverage.faults {
        s.push_str(&format!("| {} | {} | {} |\n", md(k), c.declared, c.fired));
    }
    let missing = x.coverage.never_fired();
    if !missing.is_empty() {
        s.push_str(&format!(
            "\n**Never fired** ({}): {}\n",
            missing.len(),
            md(&missing.join(", "))
        ));
    }
    s.push_str("\n**Crash points** (declared / landed): ");
    s.push_str(
        &x.coverage
            .crash_points
            .iter()
            .map(|(k, c)| format!("{} {}/{}", md(k), c.declared, c.fired))
            .collect::<Vec<_>>()
            .join(", "),
    );
    s.push('\n');
    for (title, m) in [
        ("Held requests (declared)", &x.coverage.held),
        ("Idempotency profiles", &x.coverage.idempotency),
        ("Verbs", &x.coverage.verbs),
    ] {
        s.push_str(&format!("\n**{title}**: "));
        s.push_str(
            &m.iter()
                .map(|(k, n)| format!("{} {n}", md(k)))
                .collect::<Vec<_>>()
                .join(", "),
        );
        s.push('\n');
    }
    s
}

/// How a finding's shrinking ended, in words.
fn shrinking(cut_short: bool) -> &'static str {
    if cut_short {
        "cut short by the time budget"
    } else {
        "complete"
    }
}

/// JUnit: one test per distinct finding (a failure), one for the schedules without one.
pub fn junit(x: &Exploration, o: &ExploreOptions) -> String {
    let undecided: u64 = x.undecided.values().sum();
    let mut s = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    s.push_str(&format!(
        "<testsuites name=\"aocheck explore\" tests=\"{}\" failures=\"{}\">\n<testsuite name=\"explore seed {} {}\" tests=\"{}\" failures=\"{}\" skipped=\"{}\">\n",
        x.findings.len() + 1 + usize::from(undecided > 0),
        x.findings.len(),
        o.seed,
        o.workload.name(),
        x.findings.len() + 1 + usize::from(undecided > 0),
        x.findings.len(),
        u64::from(undecided > 0)
    ));
    for f in &x.findings {
        s.push_str(&format!(
            "<testcase classname=\"explore.{}\" name=\"{}\">\n<properties><property name=\"requirement\" value=\"{}\"/><property name=\"case_file\" value=\"found/{}\"/></properties>\n<failure message=\"{}\">{}</failure>\n</testcase>\n",
            xml(f.key.requirement.id()),
            xml(&f.key.checker),
            xml(f.key.requirement.id()),
            xml(&f.case_file),
            xml(&f.key.to_string()),
            xml(&f.line)
        ));
    }
    s.push_str(&format!(
        "<testcase classname=\"explore\" name=\"schedules without a finding\"><system-out>{} of {} schedules without a finding; {} undecided</system-out></testcase>\n",
        x.clean, x.schedules, undecided
    ));
    if undecided > 0 {
        s.push_str(&format!(
            "<testcase classname=\"explore\" name=\"undecided schedules\"><skipped message=\"{undecided} schedule(s) the checkers could not decide\"/></testcase>\n"
        ));
    }
    s.push_str("</testsuite>\n</testsuites>\n");
    s
}

/// Writes every format and the shrunk cases into `out`.
pub fn write(
    out: &Path,
    x: &Exploration,
    o: &ExploreOptions,
    store_kind: &str,
) -> std::io::Result<()> {
    std::fs::create_dir_all(out.join("found"))?;
    for f in &x.findings {
        std::fs::write(
            out.join("found").join(&f.case_file),
            super::yaml::case(&f.case),
        )?;
    }
    let j =
        serde_json::to_string_pretty(&json_of(x, o, store_kind)).map_err(std::io::Error::other)?;
    std::fs::write(out.join("explore.json"), j + "\n")?;
    std::fs::write(out.join("summary.md"), markdown(x, o))?;
    std::fs::write(out.join("junit.xml"), junit(x, o))?;
    Ok(())
}
