//! `examples/python-sut/`: an implementation aocheck did not write (Python, standard library only,
//! its own SQLite file) judged through `aocheck-sut/2`. It passes the core AOC cases; the cases it
//! lacks operations for are `unsupported`; and the two requirements it deliberately leaves out
//! (declared limits, the retention horizon) are caught as failures, never passed.

use aocheck::aoc::Req;
use aocheck::report::model::Verdict;
use aocheck::runner::{RunOptions, run_suite};
use aocheck::store::AnyStore;
use aocheck::sut::processes::ProcessSpec;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_example_is_judged_like_any_implementation() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (cases, defects) = aocheck::case::load(root.join("cases").as_path());
    assert!(defects.is_empty(), "{defects:?}");
    let r = run_python(&cases, &root.join("examples/python-sut/sut.py"), "").await;
    assert_eq!(
        r.implementation["name"], "python-sut-example",
        "{:?}",
        r.cases[0].harness
    );
    let verdict = |id: &str| {
        let c = r.cases.iter().find(|c| c.id == id).expect("case");
        (c.verdict, c)
    };
    for id in [
        "AOC-CASE-001",
        "AOC-CASE-002",
        "AOC-CASE-003",
        "AOC-CASE-004",
        "AOC-CASE-009",
        "AOCHECK-KILL-01",
        "AOCHECK-LATE-01",
        "AOCHECK-LATE-02",
        "AOCHECK-FENCE-01",
        "AOCHECK-RACE-01",
        "AOCHECK-RACE-02",
    ] {
        let (v, c) = verdict(id);
        assert_eq!(v, Verdict::Pass, "{id}: {:?} {:?}", c.failures, c.harness);
        assert!(c.faults.iter().all(|f| f.fired), "{id}: {:?}", c.faults);
    }
    for (id, req, checker) in [
        ("AOC-CASE-008", Req::R009, "["),
        ("AOC-CASE-012", Req::R006, "[limits_respected]"),
    ] {
        let (v, c) = verdict(id);
        assert_eq!(v, Verdict::Fail, "{id}: {:?}", c.harness);
        assert!(
            c.failures
                .iter()
                .any(|f| f.requirement == req && f.msg.starts_with(checker)),
            "{id}: {:?}",
            c.failures
        );
    }
    for c in &r.cases {
        assert_ne!(
            c.verdict,
            Verdict::HarnessError,
            "{}: {:?}",
            c.id,
            c.harness
        );
        if c.verdict == Verdict::Unsupported {
            // Nothing was examined but what the implementation states about itself (its
            // statements, AOC-REQ-013, judged in every case).
            assert!(
                c.facts.keys().all(|k| k == "AOC-REQ-013"),
                "{}: {:?}",
                c.id,
                c.facts
            );
        }
    }
    assert_eq!(aocheck::exit::of_report(&r), 1);
}

/// Runs `cases` against a Python implementation through `aocheck-sut/2`.
async fn run_python(
    cases: &[aocheck::case::LoadedCase],
    script: &Path,
    args: &str,
) -> aocheck::report::model::Report {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = RunOptions {
        run_id: format!("python-{}", uuid::Uuid::new_v4().simple()),
        seed: 7,
        knobs: aocheck::reference::Knobs::default(),
        repro_store: None,
        sut: Some(ProcessSpec {
            command: format!("python3 '{}' {args}", script.display()),
            timeout: Duration::from_secs(20),
            dir: dir.path().into(),
            postgres: None,
            user: None,
        }),
        explore: false,
    };
    let store = Arc::new(AnyStore::Memory(aocheck::MemoryStore::new()));
    run_suite(cases, store, &opts, &mut |_| {}).await
}

/// AOC-REQ-001 both ways, with requests that really run together (one thread per request): an
/// implementation whose transactions serialise entry passes the races; one that decides entry on
/// a read outside its transaction enters twice and fails AOC-REQ-001 for it (and AOC-REQ-010 for
/// the second request the provider saw), never passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_requests_are_judged_by_their_serialisation() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (cases, defects) = aocheck::case::load(root.join("cases").as_path());
    assert!(defects.is_empty(), "{defects:?}");
    let races: Vec<_> = cases
        .into_iter()
        .filter(|c| c.case.id.starts_with("AOCHECK-RACE-") || c.case.id == "AOC-CASE-003")
        .collect();
    assert_eq!(races.len(), 3);
    let script = root.join("tests/it/scripts/concurrent_sut.py");
    let safe = run_python(&races, &script, "safe").await;
    for c in &safe.cases {
        assert_eq!(
            c.verdict,
            Verdict::Pass,
            "{}: {:?} {:?}",
            c.id,
            c.failures,
            c.harness
        );
    }
    let unsafe_ = run_python(&races, &script, "unsafe").await;
    let race = unsafe_
        .cases
        .iter()
        .find(|c| c.id == "AOCHECK-RACE-01")
        .expect("case");
    assert_eq!(race.verdict, Verdict::Fail, "{:?}", race.harness);
    assert!(
        race.failures
            .iter()
            .any(|f| f.requirement == Req::R001 && f.msg.contains("2 provider entries")),
        "{:?}",
        race.failures
    );
    assert!(race.failures.iter().any(|f| f.requirement == Req::R010));
    // The fence is checked inside its transaction even here: the retired executor never enters.
    for id in ["AOC-CASE-003", "AOCHECK-RACE-02"] {
        let c = unsafe_.cases.iter().find(|c| c.id == id).expect("case");
        assert_eq!(
            c.verdict,
            Verdict::Pass,
            "{id}: {:?} {:?}",
            c.failures,
            c.harness
        );
    }
}
