//! Hostile implementations (issue 13): an implementation under test is an adversary. Each one
//! here attacks the harness or its ground truth; none may get `pass`, hang the harness or leave a
//! process behind.

use crate::protocol::run;
use aocheck::aoc::Req;
use aocheck::report::model::Verdict;
use std::path::Path;
use std::time::Duration;

/// The hostile relay (`tests/it/scripts/hostile_sut.py`) in front of the reference.
fn hostile(mode: &str) -> String {
    format!(
        "python3 '{}' {mode} '{}' sut reference",
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/it/scripts/hostile_sut.py")
            .display(),
        env!("CARGO_BIN_EXE_aocheck")
    )
}

/// The ground truth is out of the judged party's reach: it pays twice, then tries every control
/// route of both providers with every credential it holds or could guess (the fakes' default
/// tokens, its API key, none) to read, wipe or rewrite the ledger. Every probe is refused, and
/// the duplicate it could not hide fails the case under AOC-REQ-010.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_control_planes_refuse_the_implementation() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let log = tmp.path().join("probes.jsonl");
    // The relay reads the log's path from its environment.
    let command = format!(
        "env AOCHECK_HOSTILE_LOG='{}' {}",
        log.display(),
        hostile("control")
    );
    let (r, _d) = run(
        &command,
        &["AOC-CASE-001", "HERMES-VERIFY-01"],
        None,
        Duration::from_secs(10),
    )
    .await;
    for c in &r.cases {
        assert_eq!(c.verdict, Verdict::Fail, "{}: {:?}", c.id, c.harness);
        assert!(
            c.failures.iter().any(|f| f.requirement == Req::R010),
            "{}: {:?}",
            c.id,
            c.failures
        );
    }
    let probes: Vec<serde_json::Value> = std::fs::read_to_string(&log)
        .expect("the relay logged its probes")
        .lines()
        .map(|l| serde_json::from_str(l).expect("probe line"))
        .collect();
    for provider in ["payments", "hermes"] {
        assert!(
            probes.iter().any(|p| p["provider"] == provider),
            "no probe of {provider}: {probes:?}"
        );
    }
    for route in [
        "POST /_control/reset",
        "GET /_control/ledger",
        "POST /_control/faults",
    ] {
        assert!(
            probes.iter().any(|p| p["route"] == route),
            "{route} not probed"
        );
    }
    let open: Vec<_> = probes.iter().filter(|p| p["status"] != 401).collect();
    assert!(
        open.is_empty(),
        "control routes answered the implementation: {open:?}"
    );
}
