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
    Ok(())
}

/// Writes each case's evidence to `out/evidence/<case>.json` (compact JSON, every registered
/// credential scrubbed).
pub fn write_evidence(
    out: &std::path::Path,
    evidence: &[(String, std::sync::Arc<serde_json::Value>)],
) -> Result<(), String> {
    if evidence.is_empty() {
        return Ok(());
    }
    let dir = out.join("evidence");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for (id, tape) in evidence {
        if id.is_empty()
            || !id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(format!("case id {id:?} cannot name a file"));
        }
        let body = crate::secrets::json_text(&**tape)?;
        let f = dir.join(format!("{id}.json"));
        std::fs::write(&f, body).map_err(|e| format!("{}: {e}", f.display()))?;
    }
    Ok(())
}

/// Scrubs again the evidence files of `cases` already written (`out/evidence/<case>.json`), with
/// every secret registered since: one file in memory at a time.
pub fn rescrub_evidence(out: &std::path::Path, cases: &[String]) -> Result<(), String> {
    for id in cases {
        let f = out.join("evidence").join(format!("{id}.json"));
        let text = std::fs::read_to_string(&f).map_err(|e| format!("{}: {e}", f.display()))?;
        let clean = crate::secrets::scrub_json_text(&text);
        if clean != text {
            std::fs::write(&f, clean).map_err(|e| format!("{}: {e}", f.display()))?;
        }
    }
    Ok(())
}

/// What a run writes at the top of its folder (and `evidence/`, `sut/`): removed before a run
/// or a merge writes there, so that nothing an earlier run left (above all a signed envelope)
/// stands beside the new files as if it were theirs.
pub const RUN_OUTPUTS: [&str; 11] = [
    "report.json",
    "junit.xml",
    "report.sarif",
    "summary.md",
    "report.html",
    "report.dsse.json",
    crate::report::attest::PUBLIC_KEY_FILE,
    "diff.md",
    "diff.json",
    "evidence",
    "store.db",
];

/// Removes what an earlier run left in `out` (see [`RUN_OUTPUTS`]; `sut/` too).
pub fn clear_outputs(out: &std::path::Path) -> Result<(), String> {
    for name in RUN_OUTPUTS
        .iter()
        .chain(&["sut", "store.db-wal", "store.db-shm"])
    {
        remove_output(&out.join(name))?;
    }
    Ok(())
}

/// Removes what an earlier run left at `p` (a folder whole; a link itself, never its target).
pub fn remove_output(p: &std::path::Path) -> Result<(), String> {
    let gone = match std::fs::symlink_metadata(p) {
        Err(_) => Ok(()),
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(p),
        Ok(_) => std::fs::remove_file(p),
    };
    gone.map_err(|e| format!("removing an earlier run's {}: {e}", p.display()))
}

/// The predicate of a signed run (`https://aocheck.dev/conformance-run/v1`, documented with its
/// JSON Schema in `docs/attestation.md`): the harness, the suite (every case file's digest and
/// the providers' profiles), the store's kind (never its URL), the seed and the implementation
/// (its self-description, its command with credentials removed, the digests of what the command
/// runs), and the verdicts.
pub fn run_predicate(r: &crate::report::model::Report) -> serde_json::Value {
    use serde_json::json;
    let mut profiles: Vec<serde_json::Value> = Vec::new();
    for p in r
        .provider_profile
        .iter()
        .chain(r.cases.iter().filter_map(|c| c.provider_profile.as_ref()))
    {
        if !profiles.contains(p) {
            profiles.push(p.clone());
        }
    }
    json!({
        "harness": {
            "name": "aocheck",
            "version": r.aocheck_version,
            "commit": env!("AOCHECK_GIT_COMMIT"),
        },
        "report": "report.json",
        "run_id": r.run_id,
        "seed": r.seed,
        "started_at": r.started_at,
        "suite": {
            "test_input_digest": r.test_input_digest,
            "cases": r.cases.iter().map(|c| json!({
                "id": c.id,
                "file": c.file,
                "sha256": c.file_sha256,
            })).collect::<Vec<_>>(),
            "provider_profiles": profiles,
            "shard": r.shard,
        },
        "store": {"kind": r.store["kind"], "durable": r.store["durable"]},
        "implementation": r.implementation,
        "summary": r.summary,
        "verdicts": r.cases.iter().map(|c| (c.id.clone(), json!(c.verdict.label()))).collect::<serde_json::Map<_, _>>(),
    })
}

/// Signs every file of a run's folder (`report.dsse.json`, with the run predicate); returns how
/// many files the statement names.
pub fn seal_run(
    report: &crate::report::model::Report,
    out: &std::path::Path,
    key: &ed25519_dalek::SigningKey,
) -> Result<usize, String> {
    crate::report::attest::seal(
        out,
        "report.dsse.json",
        crate::report::attest::RUN_PREDICATE_TYPE,
        run_predicate(report),
        key,
    )
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
