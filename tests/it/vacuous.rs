//! A case that did not exercise what it claims is never a pass: a Hermes fault that never fired,
//! a forged or mismatched release with nobody left to answer, or a durability check with nothing written, makes
//! the case a harness error.

use aocheck::report::model::Verdict;
use aocheck::runner::{RunOptions, run_case};
use aocheck::store::AnyStore;
use rstest::rstest;
use std::sync::Arc;

#[rstest]
#[case::hermes_fault_never_fired(
    // The stop fault is armed, but nothing is ever cancelled.
    "steps:\n  - {do: hermes_fault, route: stop, fault: {type: stop_stuck}}\n  - {do: operator_invoke, action: a1, objective: x, result: completed}\n",
    "never fired"
)]
#[case::forged_release_with_nobody_to_answer(
    // The sender dies while its request is parked: the release proceeds, but a reply to nobody
    // is not a forged reply, so the case did not exercise a forged late response.
    "steps:\n  - {do: join, executor: e1}\n  - {do: create, occurrence: o1}\n  - {do: reserve, occurrence: o1}\n  - {do: provider_fault, op: create, fault: {type: hold, name: h}}\n  - {do: enter, occurrence: o1}\n  - {do: send, occurrence: o1, background: true}\n  - {do: crash, executor: e1, at_hold: h}\n  - {do: provider_release, hold: h, forged: true}\n  - {do: replace, executor: e2}\n  - {do: adopt, occurrence: o1}\n  - {do: reconcile, occurrence: o1}\n",
    "no forged reply"
)]
#[case::mismatched_release_with_nobody_to_answer(
    // The same with a reply signed for another account: sent to nobody, it was never delivered.
    "steps:\n  - {do: join, executor: e1}\n  - {do: create, occurrence: o1}\n  - {do: reserve, occurrence: o1}\n  - {do: provider_fault, op: create, fault: {type: hold, name: h}}\n  - {do: enter, occurrence: o1}\n  - {do: send, occurrence: o1, background: true}\n  - {do: crash, executor: e1, at_hold: h}\n  - {do: provider_release, hold: h, mismatched: true}\n  - {do: replace, executor: e2}\n  - {do: adopt, occurrence: o1}\n  - {do: reconcile, occurrence: o1}\n",
    "no misdirected reply"
)]
#[case::durability_with_nothing_written(
    "steps:\n  - {do: operator_durability}\n",
    "no binding to compare"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unexercised_case_is_a_harness_error(#[case] steps: &str, #[case] needle: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("X-1-vacuous.yaml"),
        format!("id: X-1\ntitle: t\nrequirements: [AOC-REQ-009]\n{steps}"),
    )
    .expect("write");
    let (cases, defects) = aocheck::case::load(dir.path());
    assert!(defects.is_empty(), "{defects:?}");
    let store = Arc::new(AnyStore::Sqlite(
        aocheck::store::sqlite::SqliteStore::open(dir.path().join("store.db")).expect("sqlite"),
    ));
    let opts = RunOptions {
        run_id: "vacuous".into(),
        seed: 7,
        knobs: aocheck::reference::Knobs::default(),
        repro_store: None,
        sut: None,
        explore: false,
    };
    let r = run_case(store, &cases[0], &opts, &mut |_| {}).await;
    assert_eq!(
        r.verdict,
        Verdict::HarnessError,
        "{:?} {:?}",
        r.failures,
        r.harness
    );
    assert!(
        r.harness.as_deref().is_some_and(|h| h.contains(needle)),
        "{:?}",
        r.harness
    );
}
