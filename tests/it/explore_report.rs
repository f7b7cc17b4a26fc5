//! What `aocheck explore` reports and how: the time budget bounds shrinking too, coverage counts
//! the steps that ran, progress stays out of the reports, the HTML page escapes what the
//! implementation said, the report is signed and verified, and shards merge into one report.

use aocheck::explore::schedule::Workload;
use aocheck::explore::{ExploreOptions, explore};
use aocheck::reference::{Knobs, Variant};
use aocheck::store::AnyStore;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn memory() -> Arc<AnyStore> {
    Arc::new(AnyStore::Memory(aocheck::MemoryStore::new()))
}

/// In process, against `knobs`, `schedules` schedules of `seed`, stopping at the first finding.
fn opts(knobs: Knobs, seed: u64, schedules: u64) -> ExploreOptions {
    let mut o = ExploreOptions::new(
        Workload::Aoc,
        seed,
        format!("explore-{}", uuid::Uuid::new_v4().simple()),
    );
    o.run.knobs = knobs;
    o.schedules = Some(schedules);
    o.stop_on_finding = true;
    o
}

/// A seed whose first schedule already finds `v`'s defect (searched, not written down: the
/// generator may change what a seed draws).
async fn seed_found_at_once(v: Variant) -> u64 {
    for seed in 1..=80 {
        let mut o = opts(Knobs::broken(v, None), seed, 1);
        o.shrink_budget = 0;
        o.replays = 0;
        let x = explore(memory(), &o, &mut |_| {}).await;
        if !x.findings.is_empty() {
            return seed;
        }
    }
    panic!("no seed in 1..=80 finds {v:?} in its first schedule");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_time_budget_bounds_shrinking_and_the_report_says_it_was_cut() {
    let v = Variant::ReplayUnknown;
    let seed = seed_found_at_once(v).await;
    let mut o = opts(Knobs::broken(v, None), seed, 1);
    o.schedules = None;
    let budget = Duration::from_secs(2);
    o.time = Some(budget);
    // Every candidate that does not reproduce runs 50 times and the candidate budget is
    // unbounded in practice: shrinking to the end would take many minutes.
    o.tries = 50;
    o.shrink_budget = 100_000;
    o.check_reference = true;
    let started = Instant::now();
    let x = explore(memory(), &o, &mut |_| {}).await;
    let took = started.elapsed();
    let f = x
        .findings
        .first()
        .unwrap_or_else(|| panic!("seed {seed}: no finding"));
    assert!(
        f.shrink_cut_short,
        "{}: shrinking finished within {budget:?} ({} tried)",
        f.key, f.shrink_tried
    );
    assert!(f.steps_after <= f.steps_before);
    // One replay runs past the budget, the others do not.
    assert_eq!(f.replays, 1);
    // Generous: a loaded 2-core machine; without the bound this takes many minutes.
    assert!(
        took < budget + Duration::from_secs(40),
        "the exploration took {took:?} with a budget of {budget:?}"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    aocheck::explore::report::write(dir.path(), &x, &o, "memory").expect("write");
    let json = json_of(&dir.path().join("explore.json"));
    assert_eq!(json["findings"][0]["shrink_cut_short"], true);
    let summary = std::fs::read_to_string(dir.path().join("summary.md")).expect("summary");
    assert!(
        summary.contains("cut short by the time budget"),
        "{summary}"
    );
    assert!(dir.path().join("found").join(&f.case_file).is_file());
}

/// Through the runner: a step on an occurrence the implementation never made is skipped, and
/// the coverage counts it for nothing; the steps that ran are counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn coverage_counts_the_steps_that_ran_not_those_drawn() {
    let case: aocheck::case::Case = serde_saphyr::from_str(
        "id: EXPLORE-SKIP\ntitle: a step on an occurrence never made\nrequirements: [AOC-REQ-006]\nsteps:\n  - {do: join, executor: e1}\n  - {do: replace, executor: e2}\n  - {do: create, occurrence: o1, executor: e1, expect: any}\n  - {do: execute, occurrence: o1, expect: any}\n  - {do: create, occurrence: o2, expect: any}\n  - {do: reserve, occurrence: o2, expect: any}\n  - {do: provider_fault, op: create, fault: {type: garble}}\n  - {do: execute, occurrence: o2, expect: any}\n",
    )
    .expect("the case parses");
    let o = opts(Knobs::default(), 1, 1);
    let r = aocheck::explore::run_schedule(&memory(), &case, &o.run, 1).await;
    // The retired executor's creation was refused, so the execute on o1 was skipped.
    assert!(
        r.steps.get(3).is_some_and(|l| l.contains("skipped")),
        "{:?}",
        r.steps
    );
    let ran = aocheck::explore::coverage::ran(&case, &r.steps);
    assert_eq!(
        ran,
        [true, true, true, false, true, true, true, true],
        "{:?}",
        r.steps
    );
    let mut cov = aocheck::explore::coverage::Coverage::default();
    cov.add(&case, &r);
    assert_eq!(cov.verbs.get("execute"), Some(&1), "{:?}", cov.verbs);
    assert_eq!(cov.verbs.get("create"), Some(&2), "{:?}", cov.verbs);
    assert_eq!(cov.verbs.get("replace"), Some(&1), "{:?}", cov.verbs);
    let garble = cov
        .faults
        .get("garble × create")
        .copied()
        .unwrap_or_default();
    assert_eq!(
        (garble.declared, garble.fired),
        (1, 1),
        "{:?} {:?}",
        r.faults,
        r.steps
    );
    assert_eq!(cov.verbs.get("reserve"), Some(&1), "{:?}", cov.verbs);
}

/// Runs the `aocheck` binary.
fn aocheck(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_aocheck"))
        .args(args)
        .output()
        .expect("aocheck runs")
}

fn utf8(p: &std::path::Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

/// Not on a terminal: the seed first, then plain progress lines at most every few seconds on
/// standard output, and none of them in a report file.
#[test]
fn progress_is_plain_lines_off_a_terminal_and_stays_out_of_the_reports() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("x");
    let started = Instant::now();
    let r = aocheck(&[
        "explore",
        "--seed",
        "4",
        "--time",
        "7s",
        "--store",
        "memory",
        "--out",
        utf8(&out),
    ]);
    let took = started.elapsed();
    let stdout = String::from_utf8_lossy(&r.stdout);
    assert!(stdout.starts_with("aocheck: explore seed 4 "), "{stdout}");
    let progress: Vec<&str> = stdout.lines().filter(|l| l.contains("/min,")).collect();
    // One at most every 5 s of the run (and at least one: the run lasts past 5 s).
    let most = took.as_secs() / 5 + 1;
    assert!(
        !progress.is_empty() && progress.len() as u64 <= most,
        "{} progress lines in {took:?}: {stdout}",
        progress.len()
    );
    assert!(progress[0].contains("/7.0s elapsed"), "{}", progress[0]);
    for f in ["explore.json", "summary.md", "junit.xml"] {
        let text = std::fs::read_to_string(out.join(f)).expect(f);
        assert!(!text.contains("/min,"), "{f} holds a progress line");
    }
}

/// An exploration with one finding whose every string came from a hostile implementation.
fn hostile_exploration() -> aocheck::explore::Exploration {
    let evil = "<script>alert(1)</script>";
    let mut x = aocheck::explore::Exploration {
        schedules: 3,
        clean: 1,
        lengths: vec![4, 6, 9],
        median_steps: 6,
        millis: 1200,
        implementation: Some(
            serde_json::json!({"name": format!("evil{evil}"), "version": "\"><b>1"}),
        ),
        ..Default::default()
    };
    x.undecided
        .insert(format!("the implementation said {evil}"), 1);
    x.findings.push(aocheck::explore::Found {
        key: aocheck::explore::Key {
            checker: "effect_as_asked".into(),
            requirement: aocheck::aoc::Req::R004,
        },
        schedule: 2,
        found_after_millis: 0,
        found_after_schedules: 0,
        step: Some(3),
        line: format!("[effect_as_asked] o1: the implementation said {evil}"),
        schedules: 1,
        steps_before: 9,
        steps_after: 4,
        shrink_tried: 12,
        shrink_cut_short: false,
        case_file: "EXPLORE-9-2-found.yaml".into(),
        shrunk_line: format!("[effect_as_asked] o1: {evil} & more"),
        reproduced: 3,
        replays: 3,
        reference: Some("pass".into()),
        case: None,
    });
    x
}

#[test]
fn the_html_report_escapes_what_the_implementation_said() {
    let dir = tempfile::tempdir().expect("tempdir");
    let x = hostile_exploration();
    let o = opts(Knobs::default(), 9, 3);
    aocheck::explore::report::write(dir.path(), &x, &o, "memory").expect("write");
    let page = std::fs::read_to_string(dir.path().join("explore.html")).expect("explore.html");
    assert!(!page.contains("<script"), "{page}");
    assert!(!page.contains("<b>"), "{page}");
    assert!(
        page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{page}"
    );
    assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt; &amp; more"));
    // What the page must show: the seed, the finding and its file, the reasons, the coverage.
    for want in [
        "seed 9",
        "href=\"found/EXPLORE-9-2-found.yaml\"",
        "3/3",
        "Undecided",
        "<h2>Coverage</h2>",
        "Never fired",
    ] {
        assert!(page.contains(want), "{want} missing: {page}");
    }
    // The other formats too.
    let md = std::fs::read_to_string(dir.path().join("summary.md")).expect("summary.md");
    assert!(!md.contains("<script"));
    let junit = std::fs::read_to_string(dir.path().join("junit.xml")).expect("junit.xml");
    assert!(!junit.contains("<script"));
}

#[test]
fn a_signed_explore_report_verifies_and_one_changed_byte_fails() {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD;
    let dir = tempfile::tempdir().expect("tempdir");
    let key = dir.path().join("k.pem");
    assert_eq!(aocheck(&["keygen", utf8(&key)]).status.code(), Some(0));
    let out = dir.path().join("x");
    let r = aocheck(&[
        "explore",
        "--seed",
        "4",
        "--schedules",
        "3",
        "--store",
        "memory",
        "--out",
        utf8(&out),
        "--sign",
        utf8(&key),
    ]);
    assert_eq!(
        r.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    let envelope = out.join("explore.dsse.json");
    let pubkey = dir.path().join("k.pem.pub");
    let ok = aocheck(&["verify", utf8(&envelope), "--key", utf8(&pubkey)]);
    let said = String::from_utf8_lossy(&ok.stdout);
    assert_eq!(ok.status.code(), Some(0), "{said}");
    assert!(
        said.contains("verified: exploration") && said.contains("seed 4"),
        "{said}"
    );
    // The envelope names every file of the folder by its bytes' digest, explore.json first
    // among them, under the explore-run predicate.
    let env: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&envelope).expect("envelope")).expect("JSON");
    let payload = b64
        .decode(env["payload"].as_str().expect("payload"))
        .expect("base64");
    let statement: serde_json::Value = serde_json::from_slice(&payload).expect("statement");
    assert_eq!(
        statement["predicateType"],
        "https://aocheck.dev/explore-run/v1"
    );
    let written = std::fs::read(out.join("explore.json")).expect("explore.json");
    let digest = aocheck::digest::Digest::of_bytes(&written).hex();
    let subjects = statement["subject"].as_array().expect("subjects");
    assert!(
        subjects
            .iter()
            .any(|s| s["name"] == "explore.json" && s["digest"]["sha256"] == digest.as_str()),
        "{subjects:?}"
    );
    assert_eq!(statement["predicate"]["seed"], 4);
    crate::attest::predicate_satisfies(&envelope, "explore-run-v1.schema.json")
        .expect("the predicate satisfies its documented schema");
    // One byte of explore.json changed: named, exit 5.
    let mut changed = written.clone();
    let at = changed
        .windows(12)
        .position(|w| w == b"\"schedules\":")
        .expect("the count is in the file")
        + 13;
    changed[at] = if changed[at] == b'3' { b'4' } else { b'3' };
    std::fs::write(out.join("explore.json"), &changed).expect("write");
    let bad = aocheck(&["verify", utf8(&out), "--key", utf8(&pubkey)]);
    let err = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(bad.status.code(), Some(5), "{err}");
    assert!(err.contains("changed: explore.json"), "{err}");
    std::fs::write(out.join("explore.json"), &written).expect("write back");
    assert_eq!(
        aocheck(&["verify", utf8(&out), "--key", utf8(&pubkey)])
            .status
            .code(),
        Some(0)
    );
    // A key that cannot be read is refused before anything runs.
    let r = aocheck(&[
        "explore",
        "--seed",
        "4",
        "--schedules",
        "1",
        "--store",
        "memory",
        "--out",
        utf8(&out),
        "--sign",
        utf8(&dir.path().join("none.pem")),
    ]);
    assert_eq!(r.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&r.stderr).contains("--sign"));
}

/// Whether the explore schema accepts `v` (for the refusals).
fn explore_schema_accepts(v: &serde_json::Value) -> bool {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = dir.path().join("explore.json");
    std::fs::write(&f, serde_json::to_vec(v).expect("json")).expect("write");
    let schema =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("reports/schema/explore.schema.json");
    std::process::Command::new("python3")
        .arg("-c")
        .arg("import json,sys,jsonschema; jsonschema.validate(json.load(open(sys.argv[1])), json.load(open(sys.argv[2])))")
        .arg(&f)
        .arg(&schema)
        .output()
        .expect("python3")
        .status
        .success()
}

/// An `explore.json`, checked against `reports/schema/explore.schema.json` by an independent
/// validator (PyPI's jsonschema): every field listed, no other.
fn json_of(path: &std::path::Path) -> serde_json::Value {
    let schema =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("reports/schema/explore.schema.json");
    let o = std::process::Command::new("python3")
        .arg("-c")
        .arg("import json,sys,jsonschema; jsonschema.validate(json.load(open(sys.argv[1])), json.load(open(sys.argv[2])))")
        .arg(path)
        .arg(&schema)
        .output()
        .expect("python3");
    assert!(
        o.status.success(),
        "{} does not satisfy the explore schema: {}",
        path.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_str(&std::fs::read_to_string(path).expect("readable")).expect("JSON")
}

/// Explores shard `shard` of `seed` into `out`, `schedules` schedules.
fn explore_shard(seed: &str, shard: &str, schedules: &str, out: &std::path::Path) -> i32 {
    let r = aocheck(&[
        "explore",
        "--seed",
        seed,
        "--shard",
        shard,
        "--schedules",
        schedules,
        "--store",
        "memory",
        "--out",
        utf8(out),
    ]);
    r.status.code().expect("an exit code")
}

#[test]
fn shards_merge_into_one_report_and_shards_of_another_seed_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    // Seed 4's first schedules are all decided without a finding (see `explore`'s tests).
    assert_eq!(explore_shard("4", "1/2", "3", &a), 0);
    assert_eq!(explore_shard("4", "2/2", "3", &b), 0);
    let key = dir.path().join("k.pem");
    assert_eq!(aocheck(&["keygen", utf8(&key)]).status.code(), Some(0));
    let out = dir.path().join("merged");
    let r = aocheck(&[
        "merge",
        utf8(&out),
        utf8(&a),
        utf8(&b),
        "--sign",
        utf8(&key),
    ]);
    let said = String::from_utf8_lossy(&r.stdout);
    assert_eq!(
        r.status.code(),
        Some(0),
        "{said}{}",
        String::from_utf8_lossy(&r.stderr)
    );
    for f in [
        "explore.json",
        "summary.md",
        "junit.xml",
        "explore.html",
        "explore.dsse.json",
    ] {
        assert!(out.join(f).is_file(), "{f}");
    }
    let (ja, jb, m) = (
        json_of(&a.join("explore.json")),
        json_of(&b.join("explore.json")),
        json_of(&out.join("explore.json")),
    );
    // The schema allows no field it does not list, at the top or in the merge block.
    for at in ["", "/merged", "/coverage"] {
        let mut bad = m.clone();
        bad.pointer_mut(at)
            .and_then(|x| x.as_object_mut())
            .expect("an object")
            .insert("extra".into(), serde_json::Value::Bool(true));
        assert!(!explore_schema_accepts(&bad), "extra at {at:?} accepted");
    }
    assert!(explore_schema_accepts(&m));
    let n = |v: &serde_json::Value, k: &str| v[k].as_u64().unwrap_or_else(|| panic!("{k}: {v}"));
    for k in ["schedules", "clean", "unsupported", "millis"] {
        assert_eq!(n(&m, k), n(&ja, k) + n(&jb, k), "{k}");
    }
    assert_eq!(n(&m, "schedules"), 6);
    assert_eq!(
        m["findings"].as_array().map(Vec::len),
        Some(
            ja["findings"].as_array().map_or(0, Vec::len)
                + jb["findings"].as_array().map_or(0, Vec::len)
        )
    );
    // Coverage is united: every verb and fault count is the sum of the shards'.
    for (table, count) in [
        ("verbs", None),
        ("faults", Some("declared")),
        ("faults", Some("fired")),
    ] {
        let keys: std::collections::BTreeSet<&String> = [&ja, &jb, &m]
            .iter()
            .flat_map(|j| {
                j["coverage"][table]
                    .as_object()
                    .into_iter()
                    .flat_map(|o| o.keys())
            })
            .collect();
        assert!(!keys.is_empty(), "{table}");
        for k in keys {
            let of = |j: &serde_json::Value| {
                let c = &j["coverage"][table][k.as_str()];
                count.map_or(c.as_u64(), |f| c[f].as_u64()).unwrap_or(0)
            };
            assert_eq!(of(&m), of(&ja) + of(&jb), "{table} {k} {count:?}");
        }
    }
    assert_eq!(m["shard"], "1,2/2");
    assert_eq!(m["merged"]["missing"], serde_json::json!([]));
    assert_eq!(m["seed"], 4);
    let verify = aocheck(&[
        "verify",
        utf8(&out.join("explore.dsse.json")),
        "--key",
        utf8(&dir.path().join("k.pem.pub")),
    ]);
    assert_eq!(verify.status.code(), Some(0));
    // One shard of two: merged, and the missing one named (never a pass).
    let half = dir.path().join("half");
    let r = aocheck(&["merge", utf8(&half), utf8(&a)]);
    assert_eq!(r.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&r.stdout).contains("missing: 2"));
    assert_eq!(
        json_of(&half.join("explore.json"))["merged"]["missing"],
        serde_json::json!([2])
    );
    // A shard of another seed is refused, naming its file and the field.
    let c = dir.path().join("c");
    assert!([0, 1, 2].contains(&explore_shard("5", "2/2", "1", &c)));
    let refused = dir.path().join("refused");
    let r = aocheck(&["merge", utf8(&refused), utf8(&a), utf8(&c)]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(3), "{err}");
    assert!(
        err.contains(utf8(&c.join("explore.json"))) && err.contains("field `seed`"),
        "{err}"
    );
    assert!(!refused.join("explore.json").exists());
    // The same shard twice, and a folder with no report.
    let r = aocheck(&["merge", utf8(&refused), utf8(&a), utf8(&a)]);
    assert_eq!(r.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&r.stderr).contains("given twice"));
    let r = aocheck(&["merge", utf8(&refused), utf8(&dir.path().join("none"))]);
    assert_eq!(r.status.code(), Some(3));
}
