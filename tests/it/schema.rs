//! The report is a contract: `reports/schema/report.schema.json` lists every field and allows no
//! other. Checked by an independent validator (PyPI's jsonschema) on a report with every optional
//! field set, on the committed sample, and against a report with one field too many (which must
//! be refused: a schema that accepts anything checks nothing). The words the schema enumerates
//! are the model's own.

use aocheck::aoc::composition::{BypassKind, BypassPath, CompositionStatus};
use aocheck::report::model::{
    CaseReport, ExpectationsOutcome, Failure, FaultReport, HarnessCause, OccurrenceReport,
    OperatorReport, Report, Shard, Verdict,
};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn schema_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("reports/schema/report.schema.json")
}

/// Whether the validator accepts `v`; its message when not.
fn check(v: &Value) -> Result<(), String> {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = dir.path().join("report.json");
    std::fs::write(&f, serde_json::to_vec(v).expect("json")).expect("write");
    let o = std::process::Command::new("python3")
        .arg("-c")
        .arg("import json,sys,jsonschema; jsonschema.validate(json.load(open(sys.argv[1])), json.load(open(sys.argv[2])))")
        .arg(&f)
        .arg(schema_path())
        .output()
        .expect("python3");
    if o.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&o.stderr).into_owned())
    }
}

/// A report with every field the model has, optional ones included.
fn full() -> Report {
    let mut c = CaseReport::new(
        "AOC-CASE-003",
        "t",
        Path::new("cases/aoc/x.yaml"),
        vec!["AOC-REQ-010".into()],
    );
    c.verdict = Verdict::HarnessError;
    c.failures = vec![Failure {
        requirement: aocheck::Req::R010,
        step: Some(2),
        msg: "m".into(),
    }];
    c.harness = Some("h".into());
    c.harness_cause = Some(HarnessCause::Undecided);
    c.unsupported = Some("u".into());
    c.faults = vec![FaultReport {
        what: "crash e1".into(),
        fired: true,
    }];
    c.steps = vec!["join: ok".into()];
    c.facts.insert("AOC-REQ-010".into(), 2);
    c.not_established = vec!["AOC-REQ-010".into()];
    c.undecided = vec!["why".into()];
    c.key_rule = Some("{occurrence}".into());
    c.occurrences = vec![OccurrenceReport {
        label: "o1".into(),
        occurrence_id: "occ_1".into(),
        executor_generation: 1,
        provider_binding_digest: Some(format!("sha256:{}", "a".repeat(64))),
        state: aocheck::vocab::State::Unresolved,
        outcome: None,
        provider_entry_state: "entered".into(),
        authority_state: aocheck::vocab::Authority::Held,
        entry_attempts: 1,
        evidence_sources: vec!["payments.get".into()],
        missing_knowledge: vec!["transport".into()],
        provider_effects: 1,
        history_len: 4,
    }];
    c.operators = vec![OperatorReport {
        label: "a1".into(),
        status: "outcome_unknown".into(),
        aoc_state: "unresolved".into(),
        runs: 1,
        approvals: 0,
        stops: 0,
        delegated: false,
        missing_knowledge: vec!["x".into()],
    }];
    c.provider_profile = Some(serde_json::json!({"id": "p", "version": "1", "digest": ""}));
    c.bypass_paths = vec![BypassPath {
        kind: BypassKind::Administrator,
        description: "d".into(),
    }];
    c.composition = CompositionStatus::Unsupported { reason: "r".into() };
    c.implementation = Some(serde_json::json!({"name": "x"}));
    c.sut_processes = vec!["e1: 12 killed".into()];
    c.repro = "aocheck run --case AOC-CASE-003".into();
    let mut r = crate::support::report_of(vec![c]);
    r.started_at = "0".into();
    r.aocheck_version = "0.1.0".into();
    r.run_id = "run-1".into();
    r.implementation = serde_json::json!({"name": "n", "version": "1", "same_team": false, "command": "c", "protocol": "aocheck-sut/2", "operations": ["join"], "claims": []});
    r.store = serde_json::json!({"kind": "sqlite", "durable": true});
    r.test_input_digest = format!("sha256:{}", "b".repeat(64));
    r.disclaimer = "d".into();
    r.incomplete = Some("stopped".into());
    r.shard = Some(Shard {
        k: 1,
        n: 2,
        suite_digest: "s".into(),
        suite_cases: 3,
    });
    r.expectations = Some(ExpectationsOutcome {
        file: "aocheck.toml".into(),
        strict: true,
        ..Default::default()
    });
    r
}

#[test]
fn every_field_of_the_model_is_in_the_schema_and_no_other_is_allowed() {
    let v = serde_json::to_value(full()).expect("json");
    // Every optional field is really there (the check below would miss one left out).
    let case = &v["cases"][0];
    for k in [
        "harness_cause",
        "unsupported",
        "not_established",
        "undecided",
        "key_rule",
        "operators",
        "implementation",
        "sut_processes",
    ] {
        assert!(case.get(k).is_some(), "{k}");
    }
    for k in ["incomplete", "shard", "expectations"] {
        assert!(v.get(k).is_some(), "{k}");
    }
    check(&v).expect("the full report satisfies the schema");
    // One field too many, at each level, is refused.
    for at in [
        "/extra",
        "/cases/0/extra",
        "/cases/0/occurrences/0/extra",
        "/cases/0/operators/0/extra",
        "/cases/0/failures/0/extra",
        "/summary/extra",
        "/shard/extra",
        "/expectations/extra",
    ] {
        let mut bad = v.clone();
        let (parent, _) = at.rsplit_once('/').expect("a path");
        let target = if parent.is_empty() {
            &mut bad
        } else {
            bad.pointer_mut(parent).expect("the parent exists")
        };
        target
            .as_object_mut()
            .expect("an object")
            .insert("extra".into(), Value::Bool(true));
        assert!(check(&bad).is_err(), "{at} was accepted");
    }
    // A wrong word is refused too.
    let mut bad = v.clone();
    bad["cases"][0]["verdict"] = "passed".into();
    assert!(check(&bad).is_err());
}

#[test]
fn the_committed_sample_satisfies_the_schema() {
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("reports/examples/report.json");
    let v: Value = serde_json::from_slice(&std::fs::read(sample).expect("sample")).expect("json");
    check(&v).expect("the sample satisfies the schema");
}

/// The words the schema enumerates are the model's words, in both directions.
#[test]
fn the_schema_enumerates_the_model_s_words() {
    let s: Value =
        serde_json::from_slice(&std::fs::read(schema_path()).expect("schema")).expect("json");
    let words = |v: &Value| -> Vec<String> {
        let mut w: Vec<String> = v["enum"]
            .as_array()
            .expect("an enum")
            .iter()
            .filter_map(|x| x.as_str().map(String::from))
            .collect();
        w.sort();
        w
    };
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    let d = &s["$defs"];
    assert_eq!(
        words(&d["occurrence"]["properties"]["state"]),
        sorted(
            aocheck::vocab::State::ALL
                .iter()
                .map(|x| x.name().to_string())
                .collect()
        )
    );
    assert_eq!(
        words(&d["occurrence"]["properties"]["outcome"]),
        sorted(
            aocheck::vocab::Outcome::ALL
                .iter()
                .map(|x| x.name().to_string())
                .collect()
        )
    );
    assert_eq!(
        words(&d["occurrence"]["properties"]["authority_state"]),
        sorted(
            aocheck::vocab::Authority::ALL
                .iter()
                .map(|x| x.name().to_string())
                .collect()
        )
    );
    assert_eq!(
        words(&d["bypass_path"]["properties"]["kind"]),
        sorted(
            BypassKind::ALL
                .iter()
                .map(|k| serde_json::to_value(k)
                    .expect("json")
                    .as_str()
                    .unwrap_or_default()
                    .to_string())
                .collect()
        )
    );
    let verdicts = [
        Verdict::Pass,
        Verdict::Fail,
        Verdict::Unsupported,
        Verdict::MissingKnowledge,
        Verdict::NotRun,
        Verdict::HarnessError,
    ];
    assert_eq!(
        words(&d["verdict"]),
        sorted(verdicts.iter().map(|v| v.label().to_string()).collect())
    );
}
