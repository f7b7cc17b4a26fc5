//! What a CI pipeline needs beyond verdicts: expectations (known failures, unexpected passes),
//! diffs between two reports (regressions and fixes), and merging the reports of shards.

pub mod diff;
pub mod expect;
pub mod merge;
pub mod sarif;

/// Writes every format (and the signed envelope when a key is given); `report.sarif` marks its
/// results against `baseline` when one is given.
pub fn write_reports(
    report: &crate::report::model::Report,
    out: &std::path::Path,
    key: Option<&ed25519_dalek::SigningKey>,
    baseline: Option<&crate::report::model::Report>,
) -> Result<(), String> {
    use crate::report::formats;
    let w = |name: &str, body: &[u8]| {
        std::fs::write(out.join(name), body).map_err(|e| format!("{name}: {e}"))
    };
    w(
        "report.json",
        formats::json(report).map_err(|e| e.to_string())?.as_bytes(),
    )?;
    w("junit.xml", formats::junit(report).as_bytes())?;
    // Case files are named relative to the working folder (or absolute, as given).
    let read = |f: &str| std::fs::read_to_string(f).ok();
    w(
        "report.sarif",
        serde_json::to_string_pretty(&sarif::sarif(report, baseline, &read))
            .map_err(|e| e.to_string())?
            .as_bytes(),
    )?;
    w("summary.md", formats::markdown(report).as_bytes())?;
    w("report.html", formats::html(report).as_bytes())?;
    if let Some(k) = key {
        let value = serde_json::to_value(report).map_err(|e| e.to_string())?;
        crate::setup::write_signed(
            out,
            "report.json",
            crate::report::attest::PREDICATE_TYPE,
            &value,
            k,
        )?;
    }
    Ok(())
}

/// A report of the given cases (id, verdict, failed requirements), for the unit tests.
#[cfg(test)]
pub(crate) fn report_of(
    cases: &[(&str, crate::report::model::Verdict, &[crate::aoc::Req])],
) -> crate::report::model::Report {
    use crate::report::model::{CaseReport, Failure, Report, Summary};
    let cases: Vec<CaseReport> = cases
        .iter()
        .map(|(id, v, reqs)| {
            let mut c = CaseReport::new(
                id,
                "t",
                std::path::Path::new("cases/x.yaml"),
                vec!["AOC-REQ-001".into(), "AOC-REQ-009".into()],
            );
            c.verdict = *v;
            c.failures = reqs
                .iter()
                .map(|r| Failure {
                    requirement: *r,
                    step: None,
                    msg: "m".into(),
                })
                .collect();
            c
        })
        .collect();
    Report {
        schema: crate::report::model::SCHEMA.into(),
        run_id: "r".into(),
        seed: 1,
        started_at: String::new(),
        aocheck_version: String::new(),
        implementation: serde_json::json!({}),
        provider_profile: None,
        store: serde_json::json!({}),
        test_input_digest: "d".into(),
        requirements: crate::runner::aggregate(&cases),
        summary: Summary {
            cases: cases.len(),
            pass: 0,
            fail: 0,
            other: 0,
        },
        cases,
        disclaimer: String::new(),
        incomplete: None,
        shard: None,
        expectations: None,
    }
}
