//! `aocheck analyze` (issue 24): every verdict of a run derived again from its evidence folder
//! alone, with no implementation and no provider; one changed recorded fact changes the verdict
//! it should, and an unchanged folder changes none.

use crate::support::{aocheck_bin as aocheck, said, utf8};
use serde_json::Value;
use std::path::Path;

fn read(p: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(p).expect("read")).expect("json")
}

fn write(p: &Path, v: &Value) {
    std::fs::write(p, serde_json::to_vec(v).expect("json")).expect("write");
}

#[test]
fn analyze_derives_every_verdict_again_and_sees_a_changed_fact() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("run");
    let key = dir.path().join("k.pem");
    assert_eq!(aocheck(&["keygen", utf8(&key)]).status.code(), Some(0));
    let r = aocheck(&[
        "run",
        "--case",
        "AOC-CASE-001",
        "--case",
        "AOC-CASE-003",
        "--case",
        "AOC-CASE-009",
        "--case",
        "HERMES-VERIFY-05",
        "--store",
        "memory",
        "--out",
        utf8(&out),
        "--sign",
        utf8(&key),
    ]);
    assert_eq!(r.status.code(), Some(0), "{}", said(&r));
    let pubk = format!("{}.pub", key.display());
    let ok = aocheck(&["analyze", utf8(&out), "--key", &pubk]);
    assert_eq!(ok.status.code(), Some(0), "{}", said(&ok));
    assert!(
        said(&ok).contains("4 the same, 0 different"),
        "{}",
        said(&ok)
    );

    // Work on a copy without the signature (the signed folder names any change first).
    let copy = dir.path().join("copy");
    std::fs::create_dir_all(copy.join("evidence")).expect("mkdir");
    std::fs::copy(out.join("report.json"), copy.join("report.json")).expect("copy");
    for e in std::fs::read_dir(out.join("evidence"))
        .expect("evidence")
        .flatten()
    {
        std::fs::copy(e.path(), copy.join("evidence").join(e.file_name())).expect("copy");
    }
    let file = copy.join("evidence").join("AOC-CASE-003.json");
    let original = read(&file);

    // An effect added to the ledger at the last look: a second creation for the occurrence.
    let mut t = original.clone();
    let last = t["looks"].as_array().expect("looks").len() - 1;
    let effects = t["looks"][last]["snapshot"]["provider"]["effects"]
        .as_array_mut()
        .expect("effects");
    let mut second = effects[0].clone();
    second["seq"] = 99.into();
    second["payment_id"] = "pay_second".into();
    second["reply"] = "written".into();
    effects.push(second);
    write(&file, &t);
    let bad = aocheck(&["analyze", utf8(&copy)]);
    let text = said(&bad);
    assert_eq!(bad.status.code(), Some(1), "{text}");
    assert!(text.contains("AOC-CASE-003 (reported pass)"), "{text}");
    assert!(
        text.contains("verdict: reported pass, derived fail"),
        "{text}"
    );
    assert!(text.contains("AOC-REQ-010"), "{text}");
    // The signed folder names the changed file before any analysis.
    std::fs::copy(&file, out.join("evidence").join("AOC-CASE-003.json")).expect("copy");
    let bad = aocheck(&["analyze", utf8(&out), "--key", &pubk]);
    assert_eq!(bad.status.code(), Some(5), "{}", said(&bad));
    assert!(said(&bad).contains("changed: evidence/AOC-CASE-003.json"));

    // An entry dropped from a history the checkers had already seen.
    let mut t = original.clone();
    let looks = t["looks"].as_array_mut().expect("looks");
    let at = (1..looks.len())
        .find(|&i| {
            let n = |l: &Value| {
                l["snapshot"]["occurrences"][0]["answer"]["Ok"]["entries"]
                    .as_array()
                    .map_or(0, Vec::len)
            };
            n(&looks[i - 1]) >= 2 && n(&looks[i]) >= 2
        })
        .expect("a history seen twice with two entries");
    looks[at]["snapshot"]["occurrences"][0]["answer"]["Ok"]["entries"]
        .as_array_mut()
        .expect("entries")
        .remove(0);
    write(&file, &t);
    let bad = aocheck(&["analyze", utf8(&copy)]);
    let text = said(&bad);
    assert_eq!(bad.status.code(), Some(1), "{text}");
    assert!(text.contains("derived fail"), "{text}");
    assert!(text.contains("history_append_only"), "{text}");

    // A final expectation judged again: the case's expectation on the occurrence made
    // stricter than what the implementation's answer holds (six entry attempts).
    let mut t = original.clone();
    assert!(
        !t["finals"].as_array().expect("finals").is_empty(),
        "the case's final expectations are recorded"
    );
    t["finals"][0]["expect"]["entry_attempts"] = 6.into();
    write(&file, &t);
    let bad = aocheck(&["analyze", utf8(&copy)]);
    let text = said(&bad);
    assert_eq!(bad.status.code(), Some(1), "{text}");
    assert!(text.contains("derived fail"), "{text}");
    assert!(text.contains("occurrence_expected"), "{text}");

    // The honest direction: the same facts written differently (members reordered, pretty)
    // derive the same verdicts.
    let pretty = serde_json::to_string_pretty(&original).expect("json");
    std::fs::write(&file, pretty).expect("write");
    let ok = aocheck(&["analyze", utf8(&copy)]);
    assert_eq!(ok.status.code(), Some(0), "{}", said(&ok));

    // A report that claims another verdict than its evidence supports is named.
    let mut report = read(&copy.join("report.json"));
    for c in report["cases"].as_array_mut().expect("cases") {
        if c["id"] == "AOC-CASE-001" {
            c["verdict"] = "fail".into();
        }
    }
    write(&copy.join("report.json"), &report);
    let bad = aocheck(&["analyze", utf8(&copy)]);
    let text = said(&bad);
    assert_eq!(bad.status.code(), Some(1), "{text}");
    assert!(
        text.contains("verdict: reported fail, derived pass"),
        "{text}"
    );

    // Evidence that is not evidence is refused, naming the file.
    std::fs::write(&file, "{\"schema\": \"x\"}").expect("write");
    let bad = aocheck(&["analyze", utf8(&copy)]);
    assert_eq!(bad.status.code(), Some(3), "{}", said(&bad));
    assert!(said(&bad).contains("AOC-CASE-003.json"));
}

/// A workflow case's evidence is derived again too: unchanged, the same verdict; a second run
/// under one step's correlation added to the last look's ledger, a derived failure of
/// `workflow_one_run_per_step`.
#[test]
fn analyze_derives_a_workflow_case_again_from_its_looks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("run");
    let r = aocheck(&[
        "run",
        "--case",
        "WORKFLOW-02",
        "--store",
        "memory",
        "--out",
        utf8(&out),
    ]);
    assert_eq!(r.status.code(), Some(0), "{}", said(&r));
    let ok = aocheck(&["analyze", utf8(&out)]);
    assert_eq!(ok.status.code(), Some(0), "{}", said(&ok));
    assert!(
        said(&ok).contains("1 the same, 0 different"),
        "{}",
        said(&ok)
    );
    let file = out.join("evidence").join("WORKFLOW-02.json");
    let mut t = read(&file);
    let looks = t["workflow"]["looks"]
        .as_array_mut()
        .expect("workflow looks");
    assert!(looks.len() >= 3, "a look after every step");
    let last = looks.len() - 1;
    let runs = looks[last]["hermes"]["runs"].as_array_mut().expect("runs");
    let mut second = runs[0].clone();
    second["run_id"] = "run_second".into();
    runs.push(second);
    write(&file, &t);
    let bad = aocheck(&["analyze", utf8(&out)]);
    let text = said(&bad);
    assert_eq!(bad.status.code(), Some(1), "{text}");
    assert!(text.contains("derived fail"), "{text}");
    assert!(text.contains("workflow_one_run_per_step"), "{text}");
}
