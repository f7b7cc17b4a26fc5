//! Seed 002's runner over fake-hermes (issue 41): an agent step's run held at Hermes, the runner
//! killed (its future dropped, its connection closed), the run then started; the runner resumed
//! from its saved state. Judged from fake-hermes's ledger: one run per step correlation
//! (`workflow:<run_id>:<node_id>`), whatever the kill; and both ways, a runner that forgets its
//! attempt on resume (the naive one) launches the step a second time.

use aocheck::workflow::WorkflowDefect;
use aocheck::workflow::design::{PlanStep, build_run_plan};
use aocheck::workflow::host::{Channel, DeliveryOutcome, Driven, HermesSeam, Options, drive};
use aocheck::workflow::run::{Delivery, Status};
use aocheck::workflow::store::Home;
use provider_model::hermes::faults::{Fault, Route, Rule};
use serde_json::json;
use std::collections::BTreeMap;
use std::time::Duration;

/// A channel that keeps its own ground truth: every delivery it took, by receipt id.
#[derive(Default)]
struct Ledgered {
    got: BTreeMap<String, u32>,
}

impl Channel for Ledgered {
    async fn deliver(&mut self, d: &Delivery) -> DeliveryOutcome {
        *self.got.entry(d.id.clone()).or_insert(0) += 1;
        DeliveryOutcome::Delivered
    }
}

fn plan() -> Vec<PlanStep> {
    let g = json!({"nodes": [
        {"id": "start", "type": "trigger"},
        {"id": "draft", "type": "agent", "prompt": "Draft the release note", "after": ["start"]},
        {"id": "review", "type": "agent", "prompt": "Review the draft", "after": ["draft"]},
        {"id": "send", "type": "output", "deliver": "channel", "target": "chat:releases", "after": ["review"]},
    ]});
    assert!(aocheck::workflow::design::validate(&g).is_empty());
    build_run_plan(&g).expect("plan")
}

async fn hermes() -> (
    aocheck::providers::Served<aocheck::providers::Hermes>,
    HermesSeam,
) {
    let config = provider_model::hermes::config::Config {
        api_key: "hk_workflow_test".into(),
        control_token: "ctl_workflow_test".into(),
        ..provider_model::hermes::config::Config::default()
    };
    let h = aocheck::providers::start_hermes(config, None)
        .await
        .expect("fake-hermes");
    let client = aocheck::operator::hermes::HermesClient::new(
        &h.url,
        "hk_workflow_test",
        Duration::from_secs(10),
    )
    .expect("client");
    let seam = HermesSeam {
        client,
        poll: Duration::from_millis(50),
        patience: Duration::from_secs(30),
    };
    (h, seam)
}

/// Runs per correlation in fake-hermes's ledger.
fn runs_by_session(h: &aocheck::providers::Hermes) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for r in h.ledger().runs {
        *m.entry(r.session_id).or_insert(0) += 1;
    }
    m
}

/// What the checkers find of a run: its steps' runs in fake-hermes's ledger and its saved state.
fn judged(
    h: &aocheck::providers::Hermes,
    p: &[PlanStep],
    st: &aocheck::workflow::run::RunState,
) -> Vec<aocheck::check::Finding> {
    let ledger = h.ledger();
    let mut facts = aocheck::check::Facts::default();
    let mut f = aocheck::check::workflow::one_run_per_step(p, &ledger, &st.run_id, &mut facts);
    f.extend(aocheck::check::workflow::cursor_recorded(
        p, st, &ledger, &mut facts,
    ));
    f
}

type Killed = (
    BTreeMap<String, usize>,
    Status,
    Vec<aocheck::check::Finding>,
);

/// The runner killed while Hermes holds the start of `review`; the start then goes on, and the
/// runner is resumed: the reference, or the broken variant `resumed_by`. The runs per
/// correlation, the run's status, and what the checkers find.
async fn killed_at_review(resumed_by: Option<WorkflowDefect>) -> Killed {
    let (h, mut seam) = hermes().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let home = Home(dir.path().to_path_buf());
    let p = plan();
    let run_id = "a1b2c3d4e5f6";
    let review = format!("workflow:{run_id}:review");
    h.handle
        .add_rule(Rule {
            route: Route::Start,
            nth: 1,
            times: 1,
            session_id: Some(review.clone()),
            fault: Fault::Hold {
                name: "review-start".into(),
            },
        })
        .expect("rule");
    let mut channel = Ledgered::default();
    {
        let first = drive(
            &home,
            &p,
            run_id,
            "release-note",
            Some(&mut seam),
            &mut channel,
        );
        tokio::pin!(first);
        tokio::select! {
            _ = &mut first => panic!("the run ended while its start should be held"),
            parked = h.handle.wait_parked("review-start", 1, Duration::from_secs(20)) => {
                assert!(parked, "the review step's start was never held");
            }
        }
        // The kill: the runner's future is dropped with its connection.
    }
    assert!(
        h.handle
            .wait_client_gone("review-start", Duration::from_secs(10))
            .await
    );
    h.handle.release(
        "review-start",
        provider_model::holds::ReleaseAction::Proceed,
    );
    // The held start goes on: its run exists at Hermes.
    for _ in 0..100 {
        if runs_by_session(&h.handle).get(&review) == Some(&1) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(runs_by_session(&h.handle).get(&review), Some(&1));
    let st = aocheck::workflow::host::drive_with(
        &home,
        &p,
        (run_id, "release-note"),
        Some(&mut seam),
        &mut channel,
        &Options {
            resume: true,
            defect: resumed_by,
            ..Options::default()
        },
    )
    .await
    .expect("resumed");
    let Driven::Ran(st) = st else {
        panic!("no halt was asked for: {st:?}")
    };
    let st = *st;
    let found = judged(&h.handle, &p, &st);
    (runs_by_session(&h.handle), st.status, found)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runner_killed_after_a_launch_never_launches_the_step_again() {
    let (runs, status, found) = killed_at_review(None).await;
    assert!(runs.values().all(|n| *n == 1), "{runs:?}");
    assert!(found.is_empty(), "{found:?}");
    // The step parks, saying a run may exist under its correlation.
    assert_eq!(status, Status::AwaitingAgent);
}

/// The broken variant that launches a step again on resume when its launch has no recorded
/// result: two runs for one correlation, caught by `workflow_one_run_per_step`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runner_that_relaunches_on_resume_launches_twice() {
    let (runs, _status, found) = killed_at_review(Some(WorkflowDefect::RelaunchOnResume)).await;
    assert_eq!(
        runs.get("workflow:a1b2c3d4e5f6:review"),
        Some(&2),
        "{runs:?}"
    );
    assert!(
        found
            .iter()
            .any(|f| f.checker() == "workflow_one_run_per_step"
                && f.requirement().to_string() == "AOC-REQ-010"),
        "{found:?}"
    );
}

/// Without a kill the run goes through: one run per agent step, one delivery.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_goes_through_hermes_and_delivers_once() {
    let (h, mut seam) = hermes().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let home = Home(dir.path().to_path_buf());
    let mut channel = Ledgered::default();
    let st = drive(
        &home,
        &plan(),
        "abcdef12",
        "release-note",
        Some(&mut seam),
        &mut channel,
    )
    .await
    .expect("ran");
    assert_eq!(st.status, Status::Completed, "{st:?}");
    let runs = runs_by_session(&h.handle);
    assert_eq!(runs.len(), 2);
    assert!(runs.values().all(|n| *n == 1), "{runs:?}");
    assert_eq!(channel.got.get("workflow:abcdef12:send"), Some(&1));
    assert_eq!(st.deliveries[0].ok, Some(true));
    let p = plan();
    assert!(judged(&h.handle, &p, &st).is_empty());
    let mut facts = aocheck::check::Facts::default();
    assert!(
        aocheck::check::workflow::one_delivery_per_output(&p, &channel.got, "abcdef12", &mut facts)
            .is_empty()
    );
}

/// Both ways for the atomic save: the reference replaces the run file at every save (a new
/// file renamed over the old, so a reader sees the old state or the new, whole); the variant
/// that writes in place rewrites the same file, which a reader can catch truncated.
#[test]
fn a_save_replaces_the_run_file_and_the_in_place_writer_does_not() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let home = Home(dir.path().to_path_buf());
    let st = aocheck::workflow::run::RunState::new("abcdef", "x");
    let file = dir.path().join("workflow-runs/abcdef.json");
    let ino = || std::fs::metadata(&file).expect("the run file").ino();
    home.save_run(&st).expect("saved");
    let first = ino();
    home.save_run(&st).expect("saved");
    assert_ne!(
        ino(),
        first,
        "a save must replace the file, never rewrite it"
    );
    home.save_run_broken(&st, WorkflowDefect::WriteInPlace)
        .expect("saved");
    let before = ino();
    home.save_run_broken(&st, WorkflowDefect::WriteInPlace)
        .expect("saved");
    assert_eq!(ino(), before, "the in-place writer rewrites the same file");
}

/// The rows of the conformance set a validator misses, by rule.
fn rows_missed(rows: &[aocheck::workflow::conformance::RowResult]) -> Vec<String> {
    rows.iter()
        .filter(|r| !r.missed.is_empty())
        .map(|r| r.rule.clone())
        .collect()
}

fn shipped_set() -> aocheck::workflow::conformance::Set {
    aocheck::workflow::conformance::read(aocheck::workflow::conformance::SHIPPED)
        .expect("the set reads")
}

/// Both ways for the whole-number rule: the reference validator meets every row of the
/// conformance set; the variant that truncates a retry count misses exactly the retries row
/// (2.5 and true taken as 2 and 1).
#[test]
fn the_truncating_validator_misses_the_retries_row_of_the_conformance_set() {
    use aocheck::workflow::conformance::judge;
    let set = shipped_set();
    assert!(
        rows_missed(&judge(
            &set,
            &mut |g| aocheck::workflow::design::validate(g),
            true
        ))
        .is_empty()
    );
    let truncating = judge(
        &set,
        &mut |g| aocheck::workflow::design::validate_broken(g, WorkflowDefect::TruncateRetries),
        true,
    );
    assert_eq!(rows_missed(&truncating), ["retries"]);
}

/// The same through the process protocol (`workflow_validate`): the reference run as a process
/// meets every row, and its truncating variant misses exactly the retries row; `aocheck
/// workflow-validator` exits 0 and 1 for them, and 2 for an implementation that does not list
/// the operation (unsupported, never a pass).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_validator_in_another_process_is_held_to_the_conformance_set() {
    let bin = env!("CARGO_BIN_EXE_aocheck");
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = |variant: &str| aocheck::sut::processes::ProcessSpec {
        command: format!("'{bin}' sut reference --variant {variant}"),
        timeout: Duration::from_secs(30),
        dir: dir.path().join(variant),
        postgres: None,
        user: None,
    };
    let set = shipped_set();
    let judged = |v: &str| {
        let (s, set) = (spec(v), &set);
        async move {
            aocheck::sut::validator::judge_set(Some(&s), set)
                .await
                .expect("judged")
        }
    };
    assert!(rows_missed(&judged("conforming").await).is_empty());
    assert_eq!(rows_missed(&judged("truncate_retries").await), ["retries"]);
    let cli = |sut: String| {
        let out = std::process::Command::new(bin)
            .args(["workflow-validator", "--sut", &sut, "--out"])
            .arg(dir.path().join("cli"))
            .output()
            .expect("aocheck runs");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (code, stdout, _) = cli(format!("'{bin}' sut reference --variant truncate_retries"));
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout.contains("missed  retries") && stdout.contains("12 met, 1 missed"),
        "{stdout}"
    );
    let (code, stdout, _) = cli(format!("'{bin}' sut reference"));
    assert_eq!(code, Some(0), "{stdout}");
    let python = format!(
        "python3 {}/examples/python-sut/sut.py",
        env!("CARGO_MANIFEST_DIR")
    );
    let (code, _, stderr) = cli(python);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("does not list `workflow_validate`"),
        "{stderr}"
    );
}

/// A seam that answers every launch at once, counting launches by step.
#[derive(Default)]
struct Counted {
    launched: BTreeMap<String, u32>,
}

impl aocheck::workflow::host::Seam for Counted {
    async fn launch(
        &mut self,
        l: &aocheck::workflow::run::Launch,
    ) -> aocheck::workflow::host::AgentOutcome {
        *self.launched.entry(l.node.clone()).or_insert(0) += 1;
        aocheck::workflow::host::AgentOutcome::Returned(
            json!({"output": format!("did {}", l.node)}),
        )
    }
}

/// An approval answered after the runner restarted: the run goes on from its saved state,
/// without launching the step before the approval again, and delivers once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_answered_after_a_restart_goes_on_from_the_saved_state() {
    let g = json!({"nodes": [
        {"id": "start", "type": "trigger"},
        {"id": "ask", "type": "agent", "prompt": "Draft", "after": ["start"]},
        {"id": "hold", "type": "approval", "question": "Ship it?", "after": ["ask"]},
        {"id": "send", "type": "output", "deliver": "notification", "after": ["hold", "ask"]},
    ]});
    let p = build_run_plan(&g).expect("plan");
    let dir = tempfile::tempdir().expect("tempdir");
    let home = Home(dir.path().to_path_buf());
    let (mut seam, mut channel) = (Counted::default(), Ledgered::default());
    let st = drive(&home, &p, "abcdef", "ship", Some(&mut seam), &mut channel)
        .await
        .expect("ran");
    assert_eq!(st.status, Status::AwaitingApproval);
    // The restart: nothing in memory, the state from disk; the answer recorded there.
    let mut st = home.load_run("abcdef").expect("saved");
    aocheck::workflow::run::answer(&p, &mut st, "hold", json!("approve")).expect("answered");
    home.save_run(&st).expect("saved");
    let mut seam = Counted {
        launched: seam.launched,
    };
    let st = drive(&home, &p, "abcdef", "ship", Some(&mut seam), &mut channel)
        .await
        .expect("resumed");
    assert_eq!(st.status, Status::Completed, "{st:?}");
    assert_eq!(seam.launched.get("ask"), Some(&1));
    assert_eq!(channel.got.get("workflow:abcdef:send"), Some(&1));
    assert_eq!(
        st.outputs["send"],
        json!({"hold": "approve", "ask": "did ask"})
    );
}

/// A corrupt run file is named and left as it is: the runner never starts the run again over
/// it (only a missing file starts a run).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_run_file_is_named_and_never_started_over() {
    let p = plan();
    let dir = tempfile::tempdir().expect("tempdir");
    let home = Home(dir.path().to_path_buf());
    let file = dir.path().join("workflow-runs/abcdef.json");
    std::fs::create_dir_all(file.parent().expect("folder")).expect("folder");
    std::fs::write(&file, b"{\"run_id\": \"abcdef\", \"cur").expect("write");
    let (mut seam, mut channel) = (Counted::default(), Ledgered::default());
    let r = drive(&home, &p, "abcdef", "x", Some(&mut seam), &mut channel).await;
    match r {
        Err(aocheck::workflow::store::StoreError::Corrupt(m)) => {
            assert!(m.contains("run abcdef"), "{m}")
        }
        other => panic!("a corrupt file must be refused, named: {other:?}"),
    }
    assert!(seam.launched.is_empty());
    assert_eq!(
        std::fs::read(&file).expect("still there"),
        b"{\"run_id\": \"abcdef\", \"cur"
    );
}

/// The workflow cases (`cases/workflow/`) against the reference with `knobs`.
async fn workflow_cases(knobs: aocheck::reference::Knobs) -> aocheck::report::model::Report {
    let (cases, defects) = aocheck::case::load(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("cases/workflow")
            .as_path(),
    );
    assert!(defects.is_empty(), "{defects:?}");
    assert!(cases.len() >= 12, "{} cases", cases.len());
    let opts = aocheck::runner::RunOptions {
        run_id: format!("workflow-{}", uuid::Uuid::new_v4().simple()),
        seed: 7,
        knobs,
        repro_store: None,
        sut: None,
        explore: false,
    };
    let store = std::sync::Arc::new(aocheck::store::AnyStore::Memory(aocheck::MemoryStore::new()));
    aocheck::runner::run_suite(&cases, store, &opts, &mut |_| {}).await
}

/// The reference passes every workflow case, and every case exercised what it declares (a kill
/// or a fault that never happened would be a harness error, not a pass).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_passes_every_workflow_case() {
    let r = workflow_cases(aocheck::reference::Knobs::default()).await;
    for c in &r.cases {
        assert_eq!(
            c.verdict,
            aocheck::report::model::Verdict::Pass,
            "{}: {:?} {:?} {:?}",
            c.id,
            c.failures,
            c.harness,
            c.steps
        );
        assert!(c.faults.iter().all(|f| f.fired), "{}: {:?}", c.id, c.faults);
        // No machine path in a report: the runner's home is named, not shown.
        assert!(
            c.steps.iter().all(|s| !s.contains("/aocheck-workflow-")),
            "{:?}",
            c.steps
        );
    }
}

/// Each broken runner fails the cases of its rule, by the checker of that rule.
#[rstest::rstest]
#[case(WorkflowDefect::RelaunchOnResume, &["WORKFLOW-02", "WORKFLOW-04", "WORKFLOW-10"], "[workflow_one_run_per_step]")]
#[case(WorkflowDefect::WriteInPlace, &["WORKFLOW-01", "WORKFLOW-05", "WORKFLOW-08"], "[workflow_state_whole]")]
#[case(WorkflowDefect::LostReplyIsFailed, &["WORKFLOW-12"], "[workflow_outcome_from_ledgers]")]
#[case(WorkflowDefect::UnknownIsDone, &["WORKFLOW-10"], "[workflow_outcome_from_ledgers]")]
#[case(WorkflowDefect::EagerOutput, &["WORKFLOW-01", "WORKFLOW-02"], "[workflow_outcome_from_ledgers]")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_broken_runner_fails_the_cases_of_its_rule(
    #[case] defect: WorkflowDefect,
    #[case] cases: &[&str],
    #[case] checker: &str,
) {
    let r = workflow_cases(aocheck::reference::Knobs::workflow_broken(defect)).await;
    for id in cases {
        let c = r.cases.iter().find(|c| c.id == *id).expect("the case ran");
        assert_eq!(
            c.verdict,
            aocheck::report::model::Verdict::Fail,
            "{defect:?} {id}: {:?} {:?}",
            c.steps,
            c.harness
        );
        assert!(
            c.failures.iter().any(|f| f.msg.starts_with(checker)),
            "{defect:?} {id}: {:?}",
            c.failures
        );
    }
}

/// A runner written in another language from seed 002 and the protocol alone
/// (`examples/python-workflow/`, Python's standard library) passes every workflow case a runner
/// in another process can be judged on, with every declared fault and kill fired, and so does
/// each choice the seed leaves open (another stable topological order; an approval kept only in
/// `answers`, as its choice): honest alternatives, never failed for their choice. The two cases
/// that kill at a save point are unsupported, never a pass.
#[rstest::rstest]
#[case("")]
#[case("--plan fifo")]
#[case("--approval answers")]
#[case("--plan fifo --approval answers")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runner_in_python_passes_the_workflow_cases(#[case] choices: &str) {
    let cmd = format!(
        "python3 {}/examples/python-workflow/runner.py {choices}",
        env!("CARGO_MANIFEST_DIR")
    );
    let ids: Vec<String> = (1..=16).map(|i| format!("WORKFLOW-{i:02}")).collect();
    let only: Vec<&str> = ids.iter().map(String::as_str).collect();
    let (r, _dir) = crate::protocol::run(&cmd, &only, None, Duration::from_secs(30)).await;
    assert_eq!(r.cases.len(), 16);
    for c in &r.cases {
        if ["WORKFLOW-04", "WORKFLOW-05"].contains(&c.id.as_str()) {
            assert_eq!(
                c.verdict,
                aocheck::report::model::Verdict::Unsupported,
                "{}",
                c.id
            );
            continue;
        }
        assert_eq!(
            c.verdict,
            aocheck::report::model::Verdict::Pass,
            "{choices} {}: {:?} {:?} {:?}",
            c.id,
            c.failures,
            c.harness,
            c.steps
        );
        assert!(c.faults.iter().all(|f| f.fired), "{}: {:?}", c.id, c.faults);
    }
}

/// Lies a runner in another process can tell about an effect or an outcome (each the honest
/// Python runner with one function wrapped: `tests/it/workflow_liars/liar.py`), each failed by
/// the checker of its rule in a case that exercises it: a delivery to another target, or of
/// another payload, or of a run not asked the step's prompt (`workflow_effect_as_designed`); an
/// unknown delivery said delivered; a retry of a delivery whose fate was unknown; a guessed
/// output; a flipped approval; no receipts; a damaged run written over after refusing it.
#[rstest::rstest]
#[case("wrong_target", "WORKFLOW-01", "[workflow_effect_as_designed]")]
#[case("fake_payload", "WORKFLOW-03", "[workflow_effect_as_designed]")]
#[case("wrong_prompt", "WORKFLOW-13", "[workflow_effect_as_designed]")]
#[case(
    "unknown_is_delivered",
    "WORKFLOW-16",
    "[workflow_outcome_from_ledgers]"
)]
#[case("retry_unknown", "WORKFLOW-14", "[workflow_one_delivery_per_output]")]
#[case("guess_output", "WORKFLOW-10", "[workflow_outcome_from_ledgers]")]
#[case("approval_flip", "WORKFLOW-08", "[workflow_outcome_from_ledgers]")]
#[case("no_receipts", "WORKFLOW-11", "[workflow_cursor_recorded]")]
#[case("damage_rewrite", "WORKFLOW-06", "[workflow_state_whole]")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lying_runner_fails_for_its_lie(
    #[case] lie: &str,
    #[case] case: &str,
    #[case] checker: &str,
) {
    let cmd = format!(
        "python3 {}/tests/it/workflow_liars/liar.py {lie}",
        env!("CARGO_MANIFEST_DIR")
    );
    let (r, _dir) = crate::protocol::run(&cmd, &[case], None, Duration::from_secs(30)).await;
    let c = r.cases.first().expect("the case ran");
    assert_eq!(
        c.verdict,
        aocheck::report::model::Verdict::Fail,
        "{lie} {case}: {:?} {:?}",
        c.steps,
        c.harness
    );
    assert!(
        c.failures.iter().any(|f| f.msg.starts_with(checker)),
        "{lie} {case}: {:?}",
        c.failures
    );
}

/// Through the process protocol too: each broken runner, run as processes
/// (`aocheck sut reference --variant NAME`, a process per drive, killed with SIGKILL at a held
/// request), fails the cases of its rule that a runner in another process can be judged on.
#[rstest::rstest]
#[case("relaunch_on_resume", &["WORKFLOW-02", "WORKFLOW-10"], "[workflow_one_run_per_step]")]
#[case("write_in_place", &["WORKFLOW-01", "WORKFLOW-08"], "[workflow_state_whole]")]
#[case("lost_reply_is_failed", &["WORKFLOW-12"], "[workflow_outcome_from_ledgers]")]
#[case("unknown_is_done", &["WORKFLOW-10"], "[workflow_outcome_from_ledgers]")]
#[case("eager_output", &["WORKFLOW-01", "WORKFLOW-02"], "[workflow_outcome_from_ledgers]")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_broken_runner_fails_its_rule_through_the_protocol(
    #[case] variant: &str,
    #[case] cases: &[&str],
    #[case] checker: &str,
) {
    let cmd = format!(
        "'{}' sut reference --variant {variant}",
        env!("CARGO_BIN_EXE_aocheck")
    );
    let (r, _dir) = crate::protocol::run(&cmd, cases, None, Duration::from_secs(60)).await;
    assert_eq!(r.cases.len(), cases.len());
    for c in &r.cases {
        assert_eq!(
            c.verdict,
            aocheck::report::model::Verdict::Fail,
            "{variant} {}: {:?} {:?}",
            c.id,
            c.steps,
            c.harness
        );
        assert!(
            c.failures.iter().any(|f| f.msg.starts_with(checker)),
            "{variant} {}: {:?}",
            c.id,
            c.failures
        );
    }
}

fn explore_options(
    knobs: aocheck::reference::Knobs,
    seed: u64,
) -> aocheck::explore::ExploreOptions {
    let mut o = aocheck::explore::ExploreOptions::new(
        aocheck::explore::schedule::Workload::Workflow,
        seed,
        format!("explore-workflow-{}", uuid::Uuid::new_v4().simple()),
    );
    o.run.knobs = knobs;
    o.schedules = Some(200);
    o.shrink_budget = 200;
    o.tries = 1;
    o.replays = 3;
    o.check_reference = true;
    o.stop_on_finding = true;
    o.jobs = 2;
    o
}

fn memory() -> std::sync::Arc<aocheck::store::AnyStore> {
    std::sync::Arc::new(aocheck::store::AnyStore::Memory(aocheck::MemoryStore::new()))
}

/// The reference runs workflow schedules with no finding, every one decided, and the kills and
/// faults they draw happen: kills after a save, in the middle of one and at a held request (at
/// fake-hermes and at the channel), lost answers and refusals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_explores_workflow_schedules_with_no_finding() {
    let store = memory();
    let opts = explore_options(aocheck::reference::Knobs::default(), 11).run;
    // Each kind of kill and fault, as the report names it.
    const KINDS: [&str; 8] = [
        "after save",
        "in the middle of save",
        "while",
        "hermes start hold",
        "hermes start commit_then_drop",
        "lose_reply",
        "refuse",
        "\"hold\"",
    ];
    let mut fired: BTreeMap<&str, u32> = BTreeMap::new();
    for index in 0..40 {
        let c = aocheck::explore::schedule::generate(
            aocheck::explore::schedule::Workload::Workflow,
            11,
            index,
            None,
        );
        let r = aocheck::explore::run_schedule(&store, &c, &opts, index).await;
        assert!(
            matches!(
                aocheck::explore::outcome(&r),
                aocheck::explore::Outcome::Clean
            ),
            "schedule {index}: {:?} {:?} {:?}\n{}",
            r.failures,
            r.harness,
            r.steps,
            aocheck::explore::yaml::case(&c)
        );
        for f in r.faults.iter().filter(|f| f.fired) {
            for kind in KINDS {
                if f.what.contains(kind) {
                    *fired.entry(kind).or_default() += 1;
                }
            }
        }
    }
    for kind in KINDS {
        assert!(
            fired.get(kind).is_some_and(|n| *n > 0),
            "{kind} never fired: {fired:?}"
        );
    }
}

/// `aocheck explore --workload workflow` finds the runner that launches a step again when its
/// launch has no recorded result (two runs under one correlation in fake-hermes's ledger), and
/// shrinks it to one fault (a kill, or a start whose answer is lost) and the drives it needs,
/// which reproduces and which the reference passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exploring_finds_the_relaunching_runner_and_shrinks_it_to_one_kill() {
    let o = explore_options(
        aocheck::reference::Knobs::workflow_broken(WorkflowDefect::RelaunchOnResume),
        3,
    );
    let x = aocheck::explore::explore(memory(), &o, &mut |_| {}).await;
    let f = x.findings.first().unwrap_or_else(|| {
        panic!(
            "nothing found in {} schedules (undecided: {:?})",
            x.schedules, x.undecided
        )
    });
    assert_eq!(f.key.checker, "workflow_one_run_per_step", "{f:?}");
    assert_eq!(f.key.requirement.to_string(), "AOC-REQ-010");
    let c = f.case.as_ref().expect("the shrunk schedule");
    let faults = c
        .steps
        .iter()
        .filter(|s| {
            matches!(
                s,
                aocheck::case::Step::HermesFault { .. } | aocheck::case::Step::ChannelFault { .. }
            ) || matches!(
                s,
                aocheck::case::Step::WorkflowStart { kill: Some(_), .. }
                    | aocheck::case::Step::WorkflowResume { kill: Some(_), .. }
                    | aocheck::case::Step::WorkflowAnswer { kill: Some(_), .. }
            )
        })
        .count();
    println!(
        "found after {:?} schedules, {} -> {} steps, {} ms:\n{}",
        x.schedules_to_first,
        f.steps_before,
        f.steps_after,
        x.millis,
        aocheck::explore::yaml::case(c)
    );
    assert!(f.steps_after <= 3, "{} steps", f.steps_after);
    assert!(faults <= 2, "{faults} fault steps");
    assert_eq!(f.reproduced, f.replays, "{f:?}");
    assert_eq!(f.reference.as_deref(), Some("pass"), "{f:?}");
}

/// Exploring a runner in another process (`aocheck sut reference --variant relaunch_on_resume`,
/// a process per drive, killed with SIGKILL at held requests only) finds its second run in
/// fake-hermes's ledger too, and the reference in process passes the shrunk schedule.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exploring_a_runner_in_another_process_finds_the_relaunch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut o = explore_options(aocheck::reference::Knobs::default(), 3);
    o.run.sut = Some(aocheck::sut::processes::ProcessSpec {
        command: format!(
            "'{}' sut reference --variant relaunch_on_resume",
            env!("CARGO_BIN_EXE_aocheck")
        ),
        timeout: Duration::from_secs(60),
        dir: dir.path().into(),
        postgres: None,
        user: None,
    });
    o.shrink_budget = 60;
    let x = aocheck::explore::explore(memory(), &o, &mut |_| {}).await;
    assert_eq!(x.unsupported, 0, "{:?}", x.undecided);
    let f = x.findings.first().unwrap_or_else(|| {
        panic!(
            "nothing found in {} schedules (undecided: {:?})",
            x.schedules, x.undecided
        )
    });
    assert_eq!(f.key.checker, "workflow_one_run_per_step", "{f:?}");
    let c = f.case.as_ref().expect("the shrunk schedule");
    assert!(
        c.steps.iter().all(|s| !matches!(
            s,
            aocheck::case::Step::WorkflowStart { kill: Some(k), .. }
                | aocheck::case::Step::WorkflowResume { kill: Some(k), .. }
                | aocheck::case::Step::WorkflowAnswer { kill: Some(k), .. }
                if k.hold.is_none()
        )),
        "{}",
        aocheck::explore::yaml::case(c)
    );
    assert_eq!(f.reference.as_deref(), Some("pass"), "{f:?}");
}

/// A schedule whose only witness of the relaunching runner is a kill (the runner killed while
/// fake-hermes holds the agent step's start, among faults that show nothing) shrinks to that one
/// kill and the resume after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relaunch_after_a_kill_shrinks_to_the_kill_and_the_resume() {
    use aocheck::case::{Step, WorkflowKill};
    let store = memory();
    let opts = explore_options(
        aocheck::reference::Knobs::workflow_broken(WorkflowDefect::RelaunchOnResume),
        1,
    )
    .run;
    let start = aocheck::explore::schedule::generate(
        aocheck::explore::schedule::Workload::Workflow,
        1,
        0,
        None,
    );
    let design = start
        .steps
        .iter()
        .find_map(|s| match s {
            Step::WorkflowStart { design, .. } => Some(design.clone()),
            _ => None,
        })
        .expect("a design");
    let resume = |kill: Option<WorkflowKill>| Step::WorkflowResume {
        kill,
        status: None,
        error: None,
    };
    let mut c = start.clone();
    c.steps = vec![
        Step::ChannelFault {
            fault: aocheck::providers::channel::ChannelFault::Refuse { status: 503 },
            nth: None,
            times: None,
        },
        Step::HermesFault {
            route: Route::Start,
            fault: Fault::Hold { name: "h1".into() },
            nth: None,
            times: None,
        },
        Step::WorkflowStart {
            design,
            kill: Some(WorkflowKill {
                save: None,
                mid_write: None,
                hold: Some("h1".into()),
            }),
            status: None,
        },
        resume(Some(WorkflowKill {
            save: Some(7),
            mid_write: None,
            hold: None,
        })),
        resume(None),
        resume(None),
    ];
    let first = aocheck::explore::run_schedule(&store, &c, &opts, 0).await;
    let aocheck::explore::Outcome::Found { key, .. } = aocheck::explore::outcome(&first) else {
        panic!("no finding: {:?} {:?}", first.steps, first.harness)
    };
    assert_eq!(key.checker, "workflow_one_run_per_step");
    let mut attempt = 0;
    let shrunk = aocheck::explore::shrink::shrink(c, 100, None, async |cand: &aocheck::case::Case| {
        attempt += 1;
        let r = aocheck::explore::run_schedule(&store, cand, &opts, attempt).await;
        matches!(aocheck::explore::outcome(&r), aocheck::explore::Outcome::Found { key: k, .. } if k == key)
    })
    .await;
    let steps: Vec<String> = shrunk.case.steps.iter().map(|s| s.verb()).collect();
    assert_eq!(
        steps,
        ["hermes_fault", "workflow_start", "workflow_resume"],
        "{}",
        aocheck::explore::yaml::case(&shrunk.case)
    );
    assert!(matches!(
        &shrunk.case.steps[1],
        Step::WorkflowStart { kill: Some(k), .. } if k.hold.as_deref() == Some("h1")
    ));
}

/// The channel over HTTP, as the reference's host reaches it: a delivery is delivered; a 4xx
/// refusal is a refusal; a 5xx refusal and a lost answer (the connection closed with no reply)
/// are unknown; the ledger holds exactly what was delivered, and a body that is no delivery
/// delivers nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_served_channel_answers_as_its_faults_say() {
    use aocheck::providers::channel::{ChannelFault, ChannelRule, Reply, start_channel};
    let served = start_channel().await.expect("channel");
    for (nth, fault) in [
        (2, ChannelFault::Refuse { status: 422 }),
        (3, ChannelFault::Refuse { status: 503 }),
        (4, ChannelFault::LoseReply),
    ] {
        served.handle.add_rule(ChannelRule {
            fault,
            nth,
            times: 1,
        });
    }
    let mut ch = aocheck::workflow::host::HttpChannel {
        http: reqwest::Client::new(),
        base: served.url.clone(),
    };
    let d = |n: u32| Delivery {
        node: format!("n{n}"),
        id: format!("workflow:abcdef:n{n}"),
        deliver: "channel".into(),
        target: Some("chat:x".into()),
        payload: json!({"n": n}),
    };
    assert_eq!(ch.deliver(&d(1)).await, DeliveryOutcome::Delivered);
    assert!(matches!(ch.deliver(&d(2)).await, DeliveryOutcome::Refused(m) if m.contains("422")));
    assert!(matches!(ch.deliver(&d(3)).await, DeliveryOutcome::Unknown(m) if m.contains("503")));
    assert!(
        matches!(ch.deliver(&d(4)).await, DeliveryOutcome::Unknown(m) if m.contains("connection closed"))
    );
    let bad = reqwest::Client::new()
        .post(format!("{}/v1/deliveries", served.url))
        .json(&json!({"id": "x", "extra": 1}))
        .send()
        .await
        .expect("answer");
    assert_eq!(bad.status().as_u16(), 400);
    let l = served.handle.ledger();
    let got: Vec<(&str, Reply)> = l.taken.iter().map(|t| (t.id.as_str(), t.reply)).collect();
    assert_eq!(
        got,
        [
            ("workflow:abcdef:n1", Reply::Answered),
            ("workflow:abcdef:n4", Reply::Lost)
        ]
    );
    assert_eq!(l.refused, 2);
    served.task.abort();
}
