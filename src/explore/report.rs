//! The explore report: [`ExploreReport`], written as `explore.json` (schema
//! `aocheck-explore/1`), and rendered from it alone as `summary.md`, `junit.xml` (one test per
//! finding and one for the schedules without a finding) and `explore.html`; each finding's
//! shrunk schedule is a case file under `found/`. A merge of shards (`merge`) reads the JSON
//! back and renders the same formats, so every format holds for one shard and for many.

use super::coverage::Coverage;
use super::{Exploration, ExploreOptions, Found};
use crate::exit;
use crate::report::text::{md, xml};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const SCHEMA: &str = "aocheck-explore/1";

/// What was explored, on what, and what was found and exercised: the contents of
/// `explore.json`, and all that every other format renders.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ExploreReport {
    pub schema: String,
    pub aocheck_version: String,
    pub run_id: String,
    pub seed: u64,
    pub workload: String,
    /// `K/N`; a merged report lists the shards it holds, `1,3/4`.
    pub shard: String,
    pub store: String,
    pub implementation: serde_json::Value,
    pub operations: Option<Vec<String>>,
    pub schedules: u64,
    pub clean: u64,
    /// Undecided schedules, by why.
    pub undecided: BTreeMap<String, u64>,
    pub unsupported: u64,
    pub findings: Vec<Found>,
    pub coverage: Coverage,
    pub never_fired: Vec<String>,
    /// Schedules by their number of steps (what a merge takes the median of).
    pub step_counts: BTreeMap<usize, u64>,
    pub median_steps: usize,
    /// Time spent exploring (a merge: summed over its shards).
    pub millis: u64,
    pub schedules_per_minute: f64,
    /// A merge of shards: which it holds and which of N are missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged: Option<Merged>,
}

/// The shards a merged report holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Merged {
    /// N: how many shards the seed's schedules were split into.
    pub of: u64,
    /// The shards merged, in order of K.
    pub shards: Vec<MergedShard>,
    /// The K of every shard of N that was not merged.
    pub missing: Vec<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MergedShard {
    pub shard: String,
    pub run_id: String,
    pub schedules: u64,
}

/// Schedules per minute, to one decimal.
pub fn per_minute(schedules: u64, millis: u64) -> f64 {
    if millis == 0 {
        0.0
    } else {
        (schedules as f64 * 600_000.0 / millis as f64).round() / 10.0
    }
}

/// The median of schedules counted by their number of steps.
pub fn median(step_counts: &BTreeMap<usize, u64>) -> usize {
    let total: u64 = step_counts.values().sum();
    let mut seen = 0;
    for (steps, n) in step_counts {
        seen += n;
        if seen > total / 2 {
            return *steps;
        }
    }
    0
}

impl ExploreReport {
    /// The report of one exploration.
    pub fn of(x: &Exploration, o: &ExploreOptions, store_kind: &str) -> Self {
        let mut step_counts = BTreeMap::new();
        for n in &x.lengths {
            *step_counts.entry(*n).or_default() += 1;
        }
        ExploreReport {
            schema: SCHEMA.into(),
            aocheck_version: env!("CARGO_PKG_VERSION").into(),
            run_id: o.run.run_id.clone(),
            seed: o.seed,
            workload: o.workload.name().into(),
            shard: format!("{}/{}", o.shard.0, o.shard.1),
            store: store_kind.into(),
            implementation: x
                .implementation
                .clone()
                .unwrap_or_else(|| crate::reference::implementation(o.run.knobs)),
            operations: x.operations.clone(),
            schedules: x.schedules,
            clean: x.clean,
            undecided: x.undecided.clone(),
            unsupported: x.unsupported,
            findings: x.findings.clone(),
            coverage: x.coverage.clone(),
            never_fired: x.coverage.never_fired(o.workload.name()),
            step_counts,
            median_steps: x.median_steps,
            millis: x.millis,
            schedules_per_minute: per_minute(x.schedules, x.millis),
            merged: None,
        }
    }

    pub fn undecided_total(&self) -> u64 {
        self.undecided.values().sum()
    }

    /// The shards, in words: `shard 2/4`, or `shards 1, 2 of 4 (missing: 3, 4)`.
    pub fn shard_words(&self) -> String {
        match &self.merged {
            None => format!("shard {}", self.shard),
            Some(m) => {
                let ks: Vec<String> = m
                    .shards
                    .iter()
                    .map(|s| s.shard.split('/').next().unwrap_or("?").to_string())
                    .collect();
                let missing = if m.missing.is_empty() {
                    String::new()
                } else {
                    format!(
                        " (missing: {})",
                        m.missing
                            .iter()
                            .map(u64::to_string)
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                };
                format!("shards {} of {}{missing}", ks.join(", "), m.of)
            }
        }
    }

    /// The exit code the report calls for: 1 on a finding; 2 when any schedule was undecided
    /// or unsupported, none was without a finding, or a merge lacks a shard (never a pass); 0
    /// otherwise.
    pub fn exit_code(&self) -> u8 {
        if !self.findings.is_empty() {
            exit::REQUIREMENT_FAILED
        } else if self.clean == 0
            || self.undecided_total() > 0
            || self.unsupported > 0
            || self.merged.as_ref().is_some_and(|m| !m.missing.is_empty())
        {
            exit::UNDECIDED
        } else {
            exit::OK
        }
    }
}

/// How a finding's shrinking ended, in words.
pub fn shrinking(cut_short: bool) -> &'static str {
    if cut_short {
        "cut short by the time budget"
    } else {
        "complete"
    }
}

/// The Markdown summary.
pub fn markdown(r: &ExploreReport) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "# aocheck explore: seed {}, {} workload, {}\n\n",
        r.seed,
        md(&r.workload),
        md(&r.shard_words())
    ));
    let undecided = r.undecided_total();
    s.push_str(&format!(
        "{} schedules (median {} steps) in {:.1} s: {} without a finding, {} with one ({} distinct), {} undecided, {} unsupported.\n\n",
        r.schedules,
        r.median_steps,
        r.millis as f64 / 1000.0,
        r.clean,
        r.findings.iter().map(|f| f.schedules).sum::<u64>(),
        r.findings.len(),
        undecided,
        r.unsupported
    ));
    if !r.findings.is_empty() {
        s.push_str("## Findings\n\n| finding | first in schedule | steps | shrinking | reproduced | on the reference | case file |\n|---|---|---|---|---|---|---|\n");
        for f in &r.findings {
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
        for f in &r.findings {
            s.push_str(&format!("- {}: {}\n", md(&f.key.to_string()), md(&f.line)));
        }
        s.push_str(&format!(
            "\nReplay one with `aocheck run --cases {}/found/<file>` (and the same `--sut`).\n\n",
            "<out>"
        ));
    }
    if undecided > 0 {
        s.push_str("## Undecided (never counted as without a finding)\n\n");
        for (why, n) in &r.undecided {
            s.push_str(&format!("- {n} × {}\n", md(why)));
        }
        s.push('\n');
    }
    s.push_str("## Coverage\n\n| fault × operation | declared | fired |\n|---|---|---|\n");
    for (k, c) in &r.coverage.faults {
        s.push_str(&format!("| {} | {} | {} |\n", md(k), c.declared, c.fired));
    }
    if !r.never_fired.is_empty() {
        s.push_str(&format!(
            "\n**Never fired** ({}): {}\n",
            r.never_fired.len(),
            md(&r.never_fired.join(", "))
        ));
    }
    s.push_str("\n**Crash points** (declared / landed): ");
    s.push_str(
        &r.coverage
            .crash_points
            .iter()
            .map(|(k, c)| format!("{} {}/{}", md(k), c.declared, c.fired))
            .collect::<Vec<_>>()
            .join(", "),
    );
    s.push('\n');
    for (title, m) in tallies(&r.coverage) {
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

/// The coverage's plain tallies, titled.
pub fn tallies(c: &Coverage) -> [(&'static str, &BTreeMap<String, u64>); 3] {
    [
        ("Held requests (declared)", &c.held),
        ("Idempotency profiles", &c.idempotency),
        ("Verbs (steps that ran)", &c.verbs),
    ]
}

/// JUnit: one test per distinct finding (a failure), one for the schedules without one.
pub fn junit(r: &ExploreReport) -> String {
    let undecided = r.undecided_total();
    let tests = r.findings.len() + 1 + usize::from(undecided > 0);
    let mut s = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    s.push_str(&format!(
        "<testsuites name=\"aocheck explore\" tests=\"{tests}\" failures=\"{}\">\n<testsuite name=\"explore seed {} {}\" tests=\"{tests}\" failures=\"{}\" skipped=\"{}\">\n",
        r.findings.len(),
        r.seed,
        xml(&r.workload),
        r.findings.len(),
        u64::from(undecided > 0)
    ));
    for f in &r.findings {
        s.push_str(&format!(
            "<testcase classname=\"explore.{}\" name=\"{}\">\n<properties><property name=\"requirement\" value=\"{}\"/><property name=\"case_file\" value=\"found/{}\"/><property name=\"shrinking\" value=\"{}\"/></properties>\n<failure message=\"{}\">{}</failure>\n</testcase>\n",
            xml(f.key.requirement.id()),
            xml(&f.key.checker),
            xml(f.key.requirement.id()),
            xml(&f.case_file),
            shrinking(f.shrink_cut_short),
            xml(&f.key.to_string()),
            xml(&f.line)
        ));
    }
    s.push_str(&format!(
        "<testcase classname=\"explore\" name=\"schedules without a finding\"><system-out>{} of {} schedules without a finding; {} undecided; {}</system-out></testcase>\n",
        r.clean,
        r.schedules,
        undecided,
        xml(&r.shard_words())
    ));
    if undecided > 0 {
        s.push_str(&format!(
            "<testcase classname=\"explore\" name=\"undecided schedules\"><skipped message=\"{undecided} schedule(s) the checkers could not decide\"/></testcase>\n"
        ));
    }
    s.push_str("</testsuite>\n</testsuites>\n");
    s
}

pub use super::{write, write_formats};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_is_read_from_the_counts() {
        let counts = |pairs: &[(usize, u64)]| pairs.iter().copied().collect::<BTreeMap<_, _>>();
        assert_eq!(median(&counts(&[])), 0);
        assert_eq!(median(&counts(&[(7, 1)])), 7);
        // 3, 3, 5, 9, 9, 9: the element at index 3 of six, as `lengths[len / 2]` takes it.
        assert_eq!(median(&counts(&[(3, 2), (5, 1), (9, 3)])), 9);
        assert_eq!(median(&counts(&[(3, 2), (5, 2), (9, 1)])), 5);
        assert_eq!(per_minute(30, 60_000), 30.0);
        assert_eq!(per_minute(1, 0), 0.0);
    }
}
