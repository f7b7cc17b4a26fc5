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
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = RunOptions {
        run_id: format!("python-{}", uuid::Uuid::new_v4().simple()),
        seed: 7,
        knobs: aocheck::reference::Knobs::default(),
        repro_store: None,
        sut: Some(ProcessSpec {
            command: format!(
                "python3 '{}'",
                root.join("examples/python-sut/sut.py").display()
            ),
            timeout: Duration::from_secs(20),
            dir: dir.path().into(),
            postgres: None,
        }),
    };
    let store = Arc::new(AnyStore::Memory(aocheck::MemoryStore::new()));
    let r = run_suite(&cases, store, &opts, &mut |_| {}).await;
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
    ] {
        let (v, c) = verdict(id);
        assert_eq!(v, Verdict::Pass, "{id}: {:?} {:?}", c.failures, c.harness);
        assert!(c.faults.iter().all(|f| f.fired), "{id}: {:?}", c.faults);
    }
    for (id, req) in [("AOC-CASE-008", Req::R009), ("AOC-CASE-012", Req::R006)] {
        let (v, c) = verdict(id);
        assert_eq!(v, Verdict::Fail, "{id}: {:?}", c.harness);
        assert!(
            c.failures.iter().any(|f| f.requirement == req),
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
            // Nothing was examined but what the implementation claims (AOC-REQ-013, every case).
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
