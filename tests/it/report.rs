//! Reports: the committed sample run under `reports/examples/` stays reproducible (a fresh run
//! with the same seed matches it once times and ids are redacted), every format is a pure
//! rendering of the report, and the signed envelope verifies against the committed public key.

use aocheck::report::model::Report;
use aocheck::runner::{RunOptions, run_suite};
use aocheck::store::AnyStore;
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Replaces what differs between two runs of the same seed: run id, times, store, minted ids.
fn redact(mut v: Value) -> Value {
    v["run_id"] = "[run_id]".into();
    v["started_at"] = "[time]".into();
    v["store"] = "[store]".into();
    if let Some(cases) = v["cases"].as_array_mut() {
        for c in cases {
            c["millis"] = 0.into();
            c["file_sha256"] = "[sha256]".into();
            let file = c["file"]
                .as_str()
                .and_then(|f| Path::new(f).file_name())
                .and_then(|f| f.to_str())
                .unwrap_or("")
                .to_string();
            c["file"] = file.into();
            // Which requirements were established is stable; how many facts a Hermes case saw
            // depends on when a background binding first appears.
            if let Some(facts) = c["facts"].as_object_mut() {
                for n in facts.values_mut() {
                    *n = "[facts]".into();
                }
            }
            if let Some(occs) = c["occurrences"].as_array_mut() {
                for o in occs {
                    o["occurrence_id"] = "[occurrence_id]".into();
                    if !o["provider_binding_digest"].is_null() {
                        o["provider_binding_digest"] = "[binding_digest]".into();
                    }
                }
            }
        }
    }
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sample_run_is_reproducible_and_its_formats_and_signature_hold() {
    let (cases, defects) = aocheck::case::load(&root().join("cases"));
    assert!(defects.is_empty(), "{defects:?}");
    // SQLite, like the committed sample: item 10 (durability) is unsupported on memory.
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(AnyStore::Sqlite(
        aocheck::store::sqlite::SqliteStore::open(tmp.path().join("store.db")).expect("sqlite"),
    ));
    let opts = RunOptions {
        run_id: "snapshot".into(),
        seed: 7,
        knobs: aocheck::reference::Knobs::default(),
        repro_store: None,
        sut: None,
        explore: false,
    };
    let fresh = run_suite(&cases, store, &opts, &mut |_| {}).await;
    let fresh_v = redact(serde_json::to_value(&fresh).expect("json"));
    insta::assert_json_snapshot!("sample_report", fresh_v);

    let dir = root().join("reports").join("examples");
    let committed_text =
        std::fs::read_to_string(dir.join("report.json")).expect("committed sample report");
    let mut committed: Report =
        serde_json::from_str(&committed_text).expect("the sample matches the report schema");
    // The page draws each case's timeline from the case's evidence beside the report.
    for c in &mut committed.cases {
        let e = std::fs::read(dir.join("evidence").join(format!("{}.json", c.id)))
            .expect("every case of the sample has evidence");
        c.evidence = Some(std::sync::Arc::new(
            serde_json::from_slice(&e).expect("evidence is JSON"),
        ));
    }
    assert_eq!(
        redact(serde_json::to_value(&committed).expect("json")),
        fresh_v,
        "reports/examples is stale: regenerate it (README)"
    );
    // Every committed format is exactly the rendering of the committed report.
    use aocheck::report::formats;
    assert_eq!(
        std::fs::read_to_string(dir.join("junit.xml")).expect("junit"),
        formats::junit(&committed)
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("summary.md")).expect("summary"),
        formats::markdown(&committed)
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("report.html")).expect("html"),
        formats::html(&committed)
    );
    // What aocheck itself says in the pages a person reads makes none of AOC-REQ-013's claims.
    for page in [formats::markdown(&committed), formats::html(&committed)] {
        for line in page.lines() {
            assert_eq!(
                aocheck::aoc::composition::prohibited_in(line),
                None,
                "the report says: {line}"
            );
        }
    }
    // The envelope verifies with the committed public key, names every file of the folder
    // exactly, and its predicate carries this report's verdicts.
    use aocheck::report::attest;
    let pem = std::fs::read_to_string(dir.join("signing-key.pub.pem")).expect("public key");
    let key = attest::verifying_key(&pem).expect("key");
    let checked = attest::verify_folder(&dir.join("report.dsse.json"), &key)
        .expect("the committed envelope verifies");
    assert_eq!(
        checked.problems,
        Vec::<String>::new(),
        "reports/examples is not as signed: regenerate it (README)"
    );
    assert_eq!(checked.predicate_type, attest::RUN_PREDICATE_TYPE);
    // Its evidence derives every verdict again (`aocheck analyze`).
    let analysis = aocheck::report::analyze::analyze_folder(&dir).expect("the sample's evidence");
    assert_eq!(analysis.len(), committed.cases.len());
    for a in &analysis {
        assert!(a.derived.is_some(), "{}: no evidence", a.case);
        assert_eq!(a.differences, Vec::<String>::new(), "{}", a.case);
    }
    for c in &committed.cases {
        assert_eq!(
            checked.statement["predicate"]["verdicts"][&c.id],
            c.verdict.label()
        );
    }
    // One changed byte anywhere in the signed payload is rejected.
    let env = std::fs::read(dir.join("report.dsse.json")).expect("envelope");
    let mut tampered = env.clone();
    let at = String::from_utf8_lossy(&env)
        .find("\"payload\"")
        .expect("payload")
        + 20;
    tampered[at] = if tampered[at] == b'A' { b'B' } else { b'A' };
    assert!(attest::verify_statement(&tampered, &key).is_err());
}

#[test]
fn junit_marks_failures_errors_and_skips() {
    use aocheck::report::model::{CaseReport, Failure, Verdict};
    let (cases, _) = aocheck::case::load(
        &root()
            .join("cases")
            .join("aoc")
            .join("AOC-CASE-001-normal-success.yaml"),
    );
    let mut fail = CaseReport::new(
        &cases[0].case.id,
        &cases[0].case.title,
        &cases[0].path,
        cases[0].case.requirements.clone(),
    );
    fail.verdict = Verdict::Fail;
    fail.failures.push(Failure {
        requirement: aocheck::Req::R010,
        step: Some(3),
        msg: "2 provider effects <&>".into(),
    });
    let mut err = fail.clone();
    err.id = "X-2".into();
    err.verdict = Verdict::HarnessError;
    err.failures.clear();
    err.harness = Some("provider unreachable".into());
    let mut skip = err.clone();
    skip.id = "X-3".into();
    skip.verdict = Verdict::Unsupported;
    let report = crate::support::report_of(vec![fail, err, skip]);
    let x = aocheck::report::formats::junit(&report);
    assert!(x.contains(r#"failures="1" errors="1" skipped="1""#), "{x}");
    assert!(
        x.contains("type=\"requirement_violated\"") && x.contains("&lt;&amp;&gt;"),
        "{x}"
    );
    assert!(x.contains("<skipped message=\"unsupported\"/>"));
    assert_eq!(aocheck::exit::of_report(&report), 1);
}

/// Our envelopes verify with the independent `dsse` crate, and its envelopes verify with ours.
#[test]
fn dsse_interoperates_both_directions() {
    use aocheck::report::attest;
    let seed = [9u8; 32];
    let key = ed25519_dalek::SigningKey::from_bytes(&seed);
    let report =
        serde_json::json!({"schema": "aocheck.report/1", "run_id": "interop", "cases": []});
    // ours → theirs
    let ours = serde_json::to_vec(&attest::sign(&report, &key).expect("sign")).expect("json");
    let env = dsse::Envelope::from_json(&ours).expect("their parser reads our envelope");
    let verifier =
        dsse::Ed25519Verifier::from_bytes(key.verifying_key().as_bytes()).expect("verifier");
    let verified =
        dsse::verify(&env, &[&verifier], 1).expect("their verifier accepts our signature");
    assert_eq!(verified.payload_type, attest::PAYLOAD_TYPE);
    let statement: serde_json::Value =
        serde_json::from_slice(&verified.payload).expect("statement");
    assert_eq!(statement["predicate"], report);
    // A changed payload fails theirs too.
    let mut bad = env.clone();
    bad.payload = bad.payload.replacen('e', "f", 1);
    assert!(dsse::verify(&bad, &[&verifier], 1).is_err());
    // theirs → ours
    let payload = aocheck::digest::canonical_bytes(&attest::statement(&report).expect("statement"))
        .expect("bytes");
    let signer = dsse::Ed25519Signer::from_bytes(&seed).expect("signer");
    let theirs = dsse::sign(attest::PAYLOAD_TYPE, &payload, &signer)
        .expect("sign")
        .to_json()
        .expect("json");
    assert_eq!(
        attest::verify(&theirs, &key.verifying_key()).expect("we accept their envelope"),
        report
    );
}
