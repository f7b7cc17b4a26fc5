//! The harness must be able to fail: every deliberately broken variant of the reference is caught
//! by the named case for the right requirement, and the unmodified reference passes everything.
//! (Variants are described in `tests/it/broken.md`.)

use aocheck::aoc::Req;
use aocheck::operator::connector::ConnectorDefect;
use aocheck::reference::Variant;
use aocheck::report::model::{Report, Verdict};
use aocheck::runner::{RunOptions, run_suite};
use aocheck::store::AnyStore;
use rstest::rstest;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

async fn suite(variant: Variant) -> Arc<Report> {
    suite_with(variant, None).await
}

/// The whole suite on a memory store with these knobs, run once per test binary: the tests that
/// read the same run (one variant caught by two cases, one connector defect for two
/// requirements) share it. The run is deterministic in its verdicts (seed 7), and a report is
/// only read.
async fn suite_with(variant: Variant, connector_defect: Option<ConnectorDefect>) -> Arc<Report> {
    type Cell = Arc<tokio::sync::OnceCell<Arc<Report>>>;
    static RUNS: std::sync::Mutex<BTreeMap<String, Cell>> = std::sync::Mutex::new(BTreeMap::new());
    let cell = RUNS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .entry(format!("{variant:?}/{connector_defect:?}"))
        .or_default()
        .clone();
    cell.get_or_init(|| async {
        let store = Arc::new(AnyStore::Memory(aocheck::MemoryStore::new()));
        Arc::new(suite_on(store, variant, connector_defect).await)
    })
    .await
    .clone()
}

/// Runs the suite against the reference with these knobs.
async fn suite_on(
    store: Arc<AnyStore>,
    variant: Variant,
    connector_defect: Option<ConnectorDefect>,
) -> Report {
    let (cases, defects) = aocheck::case::load(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("cases")
            .as_path(),
    );
    assert!(defects.is_empty(), "{defects:?}");
    let opts = RunOptions {
        run_id: format!("broken-{}", uuid::Uuid::new_v4().simple()),
        seed: 7,
        knobs: aocheck::reference::Knobs::broken(variant, connector_defect),
        repro_store: None,
        sut: None,
        explore: false,
    };
    run_suite(&cases, store, &opts, &mut |_| {}).await
}

/// The whole suite on a durable store of its own (so that every case runs, seed 000 item 10
/// included).
pub(crate) async fn suite_on_sqlite(
    variant: Variant,
    connector_defect: Option<ConnectorDefect>,
) -> Report {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(AnyStore::Sqlite(
        aocheck::store::sqlite::SqliteStore::open(dir.path().join("store.db")).expect("sqlite"),
    ));
    suite_on(store, variant, connector_defect).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_passes_every_case_and_evaluates_every_requirement() {
    // On a durable store, so that seed 000 item 10 (durability) is exercised too.
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(AnyStore::Sqlite(
        aocheck::store::sqlite::SqliteStore::open(dir.path().join("store.db")).expect("sqlite"),
    ));
    let r = suite_on(store, Variant::Conforming, None).await;
    for c in &r.cases {
        assert_eq!(
            c.verdict,
            Verdict::Pass,
            "{}: {:?} {:?}",
            c.id,
            c.failures,
            c.harness
        );
        assert!(
            c.not_established.is_empty() && !c.facts.is_empty(),
            "{}: not established {:?}",
            c.id,
            c.not_established
        );
        assert!(
            c.faults.iter().all(|f| f.fired),
            "{}: a declared fault never fired",
            c.id
        );
    }
    for q in &r.requirements {
        assert_eq!(q.verdict, Verdict::Pass, "{} is {:?}", q.id, q.verdict);
        assert!(!q.cases.is_empty(), "{} is evaluated by no case", q.id);
    }
    assert_eq!(aocheck::exit::of_report(&r), 0);
}

/// Every conforming choice other than the reference's own passes everything, in process and
/// through the protocol: the harness judges by the draft, not by the reference's model.
#[rstest]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_honest_alternative_passes_every_case(
    #[values(
        Variant::NoLabels,
        Variant::ReleaseAndTombstone,
        Variant::GenericFailureUnresolved
    )]
    variant: Variant,
) {
    assert!(Variant::HONEST.contains(&variant));
    let r = suite_on_sqlite(variant, None).await;
    let bad: Vec<_> = r
        .cases
        .iter()
        .filter(|c| c.verdict != Verdict::Pass || !c.not_established.is_empty())
        .map(|c| {
            (
                &c.id,
                c.verdict,
                &c.failures,
                &c.harness,
                &c.not_established,
            )
        })
        .collect();
    assert!(bad.is_empty(), "{variant:?}: {bad:#?}");
    assert_eq!(aocheck::exit::of_report(&r), 0);
    // The alternative really chose otherwise: a pass that never met the choice proves nothing.
    let case = |id: &str| r.cases.iter().find(|c| c.id == id).expect("case ran");
    let state_of = |id: &str, label: &str| {
        case(id)
            .occurrences
            .iter()
            .find(|o| o.label == label)
            .map(|o| o.state)
            .expect("occurrence reported")
    };
    match variant {
        Variant::NoLabels => {
            let steps: Vec<&String> = r.cases.iter().flat_map(|c| &c.steps).collect();
            assert!(
                steps
                    .iter()
                    .any(|s| s.ends_with("refused (no requirement named)"))
            );
            assert!(
                !steps.iter().any(|s| s.contains("refused AOC-REQ-")),
                "{steps:?}"
            );
        }
        Variant::ReleaseAndTombstone => {
            assert_eq!(
                state_of("AOC-CASE-005", "o1"),
                aocheck::vocab::State::Released
            )
        }
        Variant::GenericFailureUnresolved => {
            assert_eq!(
                state_of("AOC-CASE-010", "o1"),
                aocheck::vocab::State::Unresolved
            )
        }
        other => panic!("{other:?} is not an honest alternative"),
    }
}

/// Each combination-only defect passes the whole fixed suite (on a durable store, so that every
/// case runs): it needs a combination no fixed case builds, and only `aocheck explore` finds it
/// (tests/it/explore.rs).
#[rstest]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_combination_only_defect_passes_the_fixed_suite(
    #[values(
        Variant::SuccessorResendsAfter5xx,
        Variant::RebindAfterTakeover,
        Variant::RetiredRetriesLate5xx,
        Variant::ResendAfterForget,
        Variant::ReleaseAfterForget,
        Variant::SuccessorReads5xxAsFailed
    )]
    variant: Variant,
) {
    assert!(Variant::COMBINATION.contains(&variant));
    let r = suite_on_sqlite(variant, None).await;
    let bad: Vec<_> = r
        .cases
        .iter()
        .filter(|c| c.verdict != Verdict::Pass)
        .map(|c| (&c.id, c.verdict, &c.failures, &c.harness))
        .collect();
    assert!(bad.is_empty(), "{variant:?}: {bad:#?}");
}

#[rstest]
#[case::replay_unknown(Variant::ReplayUnknown, "AOC-CASE-003", Req::R010)]
#[case::retired_enters(Variant::RetiredEnters, "AOC-CASE-005", Req::R006)]
#[case::rebind_account(Variant::RebindAccount, "AOC-CASE-007", Req::R010)]
#[case::release_on_timeout(Variant::ReleaseOnTimeout, "AOC-CASE-003", Req::R008)]
#[case::restore_authority(Variant::RestoreAuthority, "AOC-CASE-011", Req::R012)]
#[case::overwrite_history(Variant::OverwriteHistory, "AOC-CASE-001", Req::R004)]
#[case::trust_unauthenticated(Variant::TrustUnauthenticated, "AOC-CASE-009", Req::R009)]
#[case::trust_forged_late_response(Variant::TrustUnauthenticated, "AOCHECK-LATE-01", Req::R009)]
#[case::trust_reply_account(Variant::TrustReplyAccount, "AOCHECK-LATE-02", Req::R007)]
#[case::reset_unknown_to_queued(Variant::ResetUnknownToQueued, "SEED003-B", Req::R005)]
#[case::resend_same_key(Variant::ResendSameKey, "AOC-CASE-003", Req::R010)]
#[case::rosy_state(Variant::RosyState, "AOC-CASE-003", Req::R009)]
#[case::drop_observation(Variant::DropObservation, "AOC-CASE-009", Req::R004)]
#[case::prohibited_claim(Variant::ProhibitedClaim, "AOC-CASE-001", Req::R013)]
#[case::aadp_expiry_releases(Variant::AadpExpiryReleases, "AOCHECK-COMP-02", Req::R010)]
#[case::labels_mint(Variant::LabelsMint, "AOC-CASE-006", Req::R002)]
#[case::remedy_reuses_grant(Variant::RemedyReusesGrant, "AOC-CASE-011", Req::R012)]
#[case::no_action_fence(Variant::NoActionFence, "AOCHECK-FENCE-01", Req::R002)]
#[case::replacement_reenters(Variant::ReplacementReenters, "AOC-CASE-011", Req::R010)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_broken_variant_is_caught_for_the_right_requirement(
    #[case] variant: Variant,
    #[case] case: &str,
    #[case] req: Req,
) {
    // The whole suite runs (nothing else may err), on memory: the store is not the subject (the
    // PostgreSQL arm runs the store conformance table).
    let r = suite(variant).await;
    let c = r.cases.iter().find(|c| c.id == case).expect("case ran");
    assert_eq!(
        c.verdict,
        Verdict::Fail,
        "{variant:?} was not caught by {case}: {:?} {:?}",
        c.failures,
        c.harness
    );
    assert!(
        c.failures.iter().any(|f| f.requirement == req),
        "{variant:?} failed {case} but not for {req}: {:?}",
        c.failures
    );
    let q = r
        .requirements
        .iter()
        .find(|q| q.id == req)
        .expect("requirement");
    assert_eq!(q.verdict, Verdict::Fail);
    assert_eq!(aocheck::exit::of_report(&r), 1);
    // No case errs: the harness decided everything it ran.
    assert!(
        r.cases.iter().all(|c| c.verdict != Verdict::HarnessError),
        "{:?}",
        r.cases
            .iter()
            .filter(|c| c.verdict == Verdict::HarnessError)
            .map(|c| (&c.id, &c.harness))
            .collect::<Vec<_>>()
    );
}

#[rstest]
#[case::steal_expired_claim(ConnectorDefect::StealExpiredClaim, "HERMES-VERIFY-04", Req::R010)]
#[case::five_xx_is_failed(ConnectorDefect::FiveXxIsFailed, "HERMES-VERIFY-04", Req::R009)]
#[case::stopping_is_cancelled(ConnectorDefect::StoppingIsCancelled, "HERMES-VERIFY-06", Req::R011)]
#[case::replay_unknown_start(ConnectorDefect::ReplayUnknownStart, "HERMES-VERIFY-04", Req::R010)]
#[case::replay_unknown_start_keeps_nothing(
    ConnectorDefect::ReplayUnknownStart,
    "HERMES-VERIFY-04",
    Req::R005
)]
#[case::approval_replay(ConnectorDefect::ApprovalReplay, "HERMES-VERIFY-05", Req::R010)]
#[case::accept_prose(ConnectorDefect::AcceptProse, "HERMES-VERIFY-09", Req::R011)]
#[case::identity_in_args(ConnectorDefect::IdentityInArgs, "HERMES-VERIFY-08", Req::R003)]
#[case::manifest_without_approval(
    ConnectorDefect::ManifestWithoutApproval,
    "HERMES-VERIFY-01",
    Req::R009
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_broken_connector_is_caught_for_the_right_requirement(
    #[case] defect: ConnectorDefect,
    #[case] case: &str,
    #[case] req: Req,
) {
    let r = suite_with(Variant::Conforming, Some(defect)).await;
    let c = r.cases.iter().find(|c| c.id == case).expect("case ran");
    assert_eq!(
        c.verdict,
        Verdict::Fail,
        "{defect:?} was not caught by {case}: {:?} {:?}",
        c.failures,
        c.harness
    );
    assert!(
        c.failures.iter().any(|f| f.requirement == req),
        "{defect:?} failed {case} but not for {req}: {:?}",
        c.failures
    );
    assert_eq!(aocheck::exit::of_report(&r), 1);
    // The AOC cases do not use the connector: a connector defect must not leak into them.
    for other in r.cases.iter().filter(|c| c.id.starts_with("AOC-")) {
        assert_eq!(other.verdict, Verdict::Pass, "{} was disturbed", other.id);
    }
    // The memory store claims no durability: item 10 is unsupported there, never a pass.
    let d = r
        .cases
        .iter()
        .find(|c| c.id == "HERMES-VERIFY-10")
        .expect("durability case");
    assert!(
        d.verdict == Verdict::Unsupported || d.verdict == Verdict::Fail,
        "{:?}",
        d.verdict
    );
}

/// Every checker has the power to fail (issue 37, GUIDE §4 "a check that cannot fail is a
/// defect"): each name in `CHECKERS` is asserted here, by name, as the checker of some failure of
/// a broken variant or connector defect in the fixed suite, or named with the test that makes it
/// fire elsewhere (a liar relay, a scripted implementation, a deployment, a unit table).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_checker_fires_for_some_broken_implementation() {
    let mut fired: BTreeMap<String, String> = BTreeMap::new();
    let mut note = |r: &Report, by: String| {
        for c in &r.cases {
            for f in &c.failures {
                if let Some(name) = f.msg.strip_prefix('[').and_then(|m| m.split_once(']')) {
                    fired
                        .entry(name.0.to_string())
                        .or_insert_with(|| format!("{by} in {}", c.id));
                }
            }
        }
    };
    for v in Variant::BROKEN {
        note(&*suite(v).await, format!("{v:?}"));
    }
    for d in ConnectorDefect::FIXED {
        note(
            &*suite_with(Variant::Conforming, Some(d)).await,
            format!("{d:?}"),
        );
    }
    // Made to fire, by name, by another test.
    // Each of these tests asserts the checker's name.
    let elsewhere: BTreeMap<&str, &str> = BTreeMap::from([
        (
            "deploy_one_entry",
            "check::deploy::each_deploy_checker_fires_by_name",
        ),
        (
            "deploy_entry_matches_order",
            "check::deploy::each_deploy_checker_fires_by_name",
        ),
        (
            "deploy_outcome_from_ledger",
            "check::deploy::each_deploy_checker_fires_by_name",
        ),
        (
            "generations_together",
            "hostile: generation_back, hide_takeover",
        ),
        (
            "entry_before_request",
            "hostile: a_refund_under_a_remedy_s_key_…",
        ),
        ("report_backed", "hostile: phantom_remedy, phantom_source"),
        (
            "remedy_own_binding",
            "check::a_remedy_needs_a_binding_of_its_own",
        ),
        (
            "statement_permitted",
            "protocol: a_forbidden_statement_fails_every_case_…",
        ),
        ("lane_matches_fence", "hostile: lane_lie"),
        ("effect_as_asked", "hostile: wrong_amount"),
        ("evidence_served", "hostile: phantom_lookup, wrong_ref"),
        (
            "mutation_accounted",
            "hostile: remedy_wrong, refund_own_key",
        ),
        ("result_from_provider", "hostile: hermes_output"),
        ("one_domain", "hostile: domain_blank"),
        (
            "observer_reads_only",
            "hostile: late_charge (observer_charges)",
        ),
        (
            "one_effect_per_occurrence",
            "hostile: recreate_after_expire",
        ),
        ("binding_constant", "hostile: binding_drift"),
        ("responses_bound", "hostile: unbound_reply"),
        ("release_only_before_entry", "hostile: release_entered"),
        ("composition_expected", "hostile: describe_supported"),
        ("bypass_disclosed", "hostile: describe_no_bypass"),
        ("limits_respected", "python_sut: AOC-CASE-012"),
        ("unresolved_kept", "check::hermes::binding_tests"),
        ("race_serialised", "check::steps::a_race_admits_at_most_one"),
        ("durable_binding", "check::hermes::oracle_tests"),
        ("policy_validated", "check::hermes::oracle_tests"),
        (
            "deploy_one_run",
            "check::connector::each_connector_checker_fires_by_name",
        ),
        (
            "deploy_result_from_provider",
            "check::connector::each_connector_checker_fires_by_name",
        ),
        (
            "deploy_one_decision",
            "check::connector::one_decision_per_resume_command",
        ),
        (
            "workflow_one_run_per_step",
            "check::workflow::one_run_per_step_reads_the_correlation",
        ),
        (
            "workflow_one_delivery_per_output",
            "check::workflow::one_delivery_per_output_reads_the_channel",
        ),
        (
            "workflow_cursor_recorded",
            "check::workflow::the_cursor_never_passes_an_unrecorded_step",
        ),
        (
            "workflow_state_whole",
            "workflow::each_broken_runner_fails_the_cases_of_its_rule (write in place)",
        ),
        (
            "workflow_outcome_from_ledgers",
            "workflow::each_broken_runner_fails_the_cases_of_its_rule (lost reply is failed, unknown is done)",
        ),
        (
            "workflow_expected",
            "check::workflow::an_expectation_is_judged_under_the_case_s_requirement",
        ),
        (
            "workflow_effect_as_designed",
            "check::workflow::the_effect_is_the_one_the_design_asks_for",
        ),
        (
            "deploy_one_call",
            "check::mcp::each_answer_is_judged_against_the_ledger; deploy_mcp (the retrying example)",
        ),
        (
            "deploy_effect_from_ledger",
            "check::mcp::each_answer_is_judged_against_the_ledger",
        ),
    ]);
    // Each named elsewhere is asserted by name there: `[name]` (a finding's first words) in a
    // test under tests/it, or the quoted name in a unit test of src/.
    let asserted = test_sources();
    let unasserted: Vec<&&str> = elsewhere
        .keys()
        .filter(|n| {
            !asserted.contains(&format!("[{n}]")) && !asserted.contains(&format!("\"{n}\""))
        })
        .collect();
    assert!(
        unasserted.is_empty(),
        "said to fire elsewhere, but no test asserts them by name: {unasserted:?}"
    );
    let never: Vec<&str> = aocheck::check::CHECKERS
        .iter()
        .map(|(n, _)| *n)
        .filter(|n| !fired.contains_key(*n) && !elsewhere.contains_key(n))
        .collect();
    assert!(
        never.is_empty(),
        "{} of {} checkers fire for no broken implementation here: {never:?}\nfired: {fired:#?}",
        never.len(),
        aocheck::check::CHECKERS.len()
    );
}

/// The text of the tests that could assert a checker by name: every file of tests/it but this
/// one (which lists them), and the unit tests of src/ (each file from its first `#[cfg(test)]`).
fn test_sources() -> String {
    fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).expect("readable folder").flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    walk(&root.join("tests/it"), &mut files);
    let mut units = Vec::new();
    walk(&root.join("src"), &mut units);
    let mut text = String::new();
    for f in files.iter().filter(|f| !f.ends_with("broken.rs")) {
        text.push_str(&std::fs::read_to_string(f).expect("readable test"));
    }
    for f in &units {
        let src = std::fs::read_to_string(f).expect("readable source");
        if let Some(at) = src.find("#[cfg(test)]") {
            text.push_str(&src[at..]);
        }
    }
    text
}
