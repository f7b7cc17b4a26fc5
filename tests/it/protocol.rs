//! The harness judges an implementation it did not write through `aocheck-sut/2` exactly as it
//! judges its own: the reference, run as one process per executor generation with real SIGKILLs,
//! passes the AOC suite on SQLite and PostgreSQL; its broken variants are caught through the
//! protocol; an implementation that lacks operations, hangs or garbles gets `unsupported` or
//! `harness_error`, never `pass`.

use crate::support::POSTGRES_ENV;
use aocheck::aoc::Req;
use aocheck::report::model::{Report, Verdict};
use aocheck::runner::{RunOptions, run_suite};
use aocheck::store::AnyStore;
use aocheck::sut::processes::ProcessSpec;
use rstest::rstest;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

fn reference(variant: &str) -> String {
    format!(
        "'{}' sut reference --variant {variant}",
        env!("CARGO_BIN_EXE_aocheck")
    )
}

/// Runs the shipped cases (`only` these, when given) against `command` through the protocol.
pub(crate) async fn run(
    command: &str,
    only: &[&str],
    postgres: Option<String>,
    timeout: Duration,
) -> (Report, tempfile::TempDir) {
    let (mut cases, defects) = aocheck::case::load(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("cases")
            .as_path(),
    );
    assert!(defects.is_empty(), "{defects:?}");
    if !only.is_empty() {
        cases.retain(|c| only.contains(&c.case.id.as_str()));
    }
    let dir = tempfile::tempdir().expect("tempdir");
    // The harness's own store holds nothing of the implementation's; it still needs one.
    let store = Arc::new(AnyStore::Memory(aocheck::MemoryStore::new()));
    let opts = RunOptions {
        run_id: format!("protocol-{}", uuid::Uuid::new_v4().simple()),
        seed: 7,
        knobs: aocheck::reference::Knobs::default(),
        repro_store: None,
        sut: Some(ProcessSpec {
            command: command.into(),
            timeout,
            dir: dir.path().into(),
            postgres,
            user: None,
        }),
        explore: false,
    };
    (run_suite(&cases, store, &opts, &mut |_| {}).await, dir)
}

pub(crate) fn assert_reference_passes(r: &Report) {
    assert_eq!(r.implementation["name"], "aocheck-reference");
    assert_eq!(r.implementation["protocol"], "aocheck-sut/2");
    for c in &r.cases {
        // A workflow runner run as processes is killed only where a provider holds its
        // request: a case that kills it at a save point is unsupported, and says why (never a
        // pass it did not earn).
        if ["WORKFLOW-04", "WORKFLOW-05"].contains(&c.id.as_str()) {
            assert_eq!(c.verdict, Verdict::Unsupported, "{}", c.id);
            assert!(
                c.unsupported
                    .as_deref()
                    .is_some_and(|u| u.contains("save") && u.contains("holds its request")),
                "{}: {:?}",
                c.id,
                c.unsupported
            );
            continue;
        }
        assert_eq!(
            c.verdict,
            Verdict::Pass,
            "{}: {:?} {:?} {:?}",
            c.id,
            c.failures,
            c.harness,
            c.unsupported
        );
        assert!(
            c.not_established.is_empty() && !c.facts.is_empty(),
            "{}",
            c.id
        );
        assert!(c.faults.iter().all(|f| f.fired), "{}: {:?}", c.id, c.faults);
    }
    // Crashes really were SIGKILLs of separate processes, and successors were new processes.
    for (id, killed, successor) in [
        ("AOC-CASE-002", "e1-", "e2-"),
        ("AOC-CASE-003", "e1-", "e2-"),
        ("AOCHECK-KILL-01", "e1-", "e2-"),
        ("SEED003-B", "e1-", "e2-"),
        ("HERMES-VERIFY-04", "p1-", "p2-"),
        ("HERMES-VERIFY-10", "p1-", "p2-"),
        ("WORKFLOW-02", "runner", "runner-1"),
        ("WORKFLOW-03", "runner", "runner-1"),
    ] {
        let c = r.cases.iter().find(|c| c.id == id).expect("case");
        assert!(
            c.sut_processes
                .iter()
                .any(|p| p.starts_with(killed) && p.contains("killed with SIGKILL")),
            "{id}: {:?}",
            c.sut_processes
        );
        assert!(
            c.sut_processes.iter().any(|p| p.starts_with(successor)),
            "{id}: {:?}",
            c.sut_processes
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_passes_through_the_protocol_on_sqlite() {
    let (r, dir) = run(&reference("conforming"), &[], None, Duration::from_secs(10)).await;
    assert_reference_passes(&r);
    // The page a person reads says what was judged and which processes were killed.
    assert_eq!(r.implementation["same_team"], true);
    let md = aocheck::report::formats::markdown(&r);
    assert!(
        md.contains(&format!(
            "Judged through aocheck-sut/2: aocheck-reference {}",
            env!("CARGO_PKG_VERSION")
        )),
        "{md}"
    );
    let html = aocheck::report::formats::html(&r);
    assert!(html.contains("implementation processes:") && html.contains("killed with SIGKILL"));
    // Each process's stderr is kept in the run folder, and the store is a real file.
    let case_dir = dir.path().join("sut").join("AOC-CASE-002");
    assert!(case_dir.join("store.db").exists());
    let log = std::fs::read_to_string(case_dir.join("e2-2.stderr")).expect("stderr captured");
    assert!(log.contains("executor e2 ready"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_passes_through_the_protocol_on_postgres() {
    let Ok(url) = std::env::var(POSTGRES_ENV) else {
        eprintln!("{POSTGRES_ENV} unset: the PostgreSQL arm was skipped");
        return;
    };
    let (r, _dir) = run(
        &reference("conforming"),
        &[],
        Some(url),
        Duration::from_secs(10),
    )
    .await;
    assert_reference_passes(&r);
}

/// The honest alternatives (`tests/it/broken.rs` checks that each really chose otherwise) pass
/// every case through the protocol as in process.
#[rstest]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_honest_alternative_passes_through_the_protocol(
    #[values("no_labels", "release_and_tombstone", "generic_failure_unresolved")] variant: &str,
) {
    // On SQLite: the store is not their subject (the PostgreSQL arm runs the store conformance
    // table and the reference's whole suite through the protocol above).
    let (r, _dir) = run(&reference(variant), &[], None, Duration::from_secs(10)).await;
    assert_reference_passes(&r);
}

#[rstest]
#[case::replay_unknown("replay_unknown", "AOCHECK-KILL-01", Req::R010)]
#[case::retired_enters("retired_enters", "AOC-CASE-005", Req::R006)]
#[case::rebind_account("rebind_account", "AOC-CASE-007", Req::R010)]
#[case::release_on_timeout("release_on_timeout", "AOC-CASE-003", Req::R008)]
#[case::restore_authority("restore_authority", "AOC-CASE-011", Req::R012)]
#[case::overwrite_history("overwrite_history", "AOC-CASE-001", Req::R004)]
#[case::trust_unauthenticated("trust_unauthenticated", "AOC-CASE-009", Req::R009)]
#[case::trust_forged_late_response("trust_unauthenticated", "AOCHECK-LATE-01", Req::R009)]
#[case::trust_reply_account("trust_reply_account", "AOCHECK-LATE-02", Req::R007)]
#[case::reset_unknown_to_queued("reset_unknown_to_queued", "SEED003-B", Req::R005)]
#[case::resend_same_key("resend_same_key", "AOCHECK-KILL-01", Req::R010)]
#[case::rosy_state("rosy_state", "AOC-CASE-003", Req::R009)]
#[case::drop_observation("drop_observation", "AOC-CASE-009", Req::R004)]
#[case::prohibited_claim("prohibited_claim", "AOCHECK-COMP-01", Req::R013)]
#[case::aadp_expiry_releases("aadp_expiry_releases", "AOCHECK-COMP-01", Req::R010)]
#[case::labels_mint("labels_mint", "AOC-CASE-006", Req::R002)]
#[case::remedy_reuses_grant("remedy_reuses_grant", "AOC-CASE-011", Req::R012)]
#[case::no_action_fence("no_action_fence", "AOCHECK-FENCE-01", Req::R002)]
#[case::replacement_reenters("replacement_reenters", "AOC-CASE-011", Req::R010)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_broken_variant_is_caught_through_the_protocol(
    #[case] variant: &str,
    #[case] case: &str,
    #[case] req: Req,
) {
    assert_caught(variant, case, req).await;
}

#[rstest]
#[case::steal_expired_claim("steal_expired_claim", "HERMES-VERIFY-04", Req::R010)]
#[case::five_xx_is_failed("five_xx_is_failed", "HERMES-VERIFY-04", Req::R009)]
#[case::stopping_is_cancelled("stopping_is_cancelled", "HERMES-VERIFY-06", Req::R011)]
#[case::replay_unknown_start("replay_unknown_start", "HERMES-VERIFY-04", Req::R010)]
#[case::approval_replay("approval_replay", "HERMES-VERIFY-05", Req::R010)]
#[case::accept_prose("accept_prose", "HERMES-VERIFY-09", Req::R011)]
#[case::identity_in_args("identity_in_args", "HERMES-VERIFY-08", Req::R003)]
#[case::manifest_without_approval("manifest_without_approval", "HERMES-VERIFY-01", Req::R009)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_connector_defect_is_caught_through_the_protocol(
    #[case] defect: &str,
    #[case] case: &str,
    #[case] req: Req,
) {
    assert_caught(defect, case, req).await;
}

/// The reference with one knob (a broken domain variant or a connector defect), run through the
/// protocol on one case (on SQLite: the store is not the subject): it must fail that case for
/// `req`, and the run must exit 1.
async fn assert_caught(knob: &str, case: &str, req: Req) {
    let (r, _dir) = run(&reference(knob), &[case], None, Duration::from_secs(10)).await;
    let c = &r.cases[0];
    assert_eq!(
        c.verdict,
        Verdict::Fail,
        "{knob} was not caught by {case}: {:?} {:?}",
        c.failures,
        c.harness
    );
    assert!(
        c.failures.iter().any(|f| f.requirement == req),
        "{knob} failed {case} but not for {req}: {:?}",
        c.failures
    );
    assert_eq!(aocheck::exit::of_report(&r), 1);
}

/// A scripted implementation: answers `init` listing `OPS`, then behaves per `MODE`.
const SCRIPT: &str = r#"
import json, sys, time
mode, ops = sys.argv[1], sys.argv[2].split(",")
for line in sys.stdin:
    req = json.loads(line)
    if req["op"] == "init":
        out = {"id": req["id"], "ok": {"protocol": "aocheck-sut/0" if mode == "version" else "aocheck-sut/2", "name": "scripted", "version": "0", "operations": ops, "key_rule": "{occurrence}"}}
        if mode == "claims":
            out["ok"]["claims"] = ["Executor fencing applies inside this domain only.", "Our EP evidence format is mandatory for every provider."]
        if mode == "bad_claims":
            out["ok"]["claims"] = "we are conforming"
        if mode == "statements":
            out["ok"]["statements"] = [{"about": "fencing", "revokes_credentials": True, "stops_paths_outside_domain": False}, {"about": "evidence_format", "mandatory": []}]
        if mode == "bad_statements":
            out["ok"]["statements"] = [{"about": "fencing", "revokes_credentials": "no"}]
    elif mode == "hang":
        time.sleep(60)
        continue
    elif mode == "garble":
        sys.stdout.write("this is not json\n"); sys.stdout.flush(); continue
    elif mode == "exit":
        sys.stderr.write("scripted: giving up on purpose\n"); sys.exit(3)
    else:
        out = {"id": req["id"], "error": {"kind": "internal", "message": "not implemented"}}
    sys.stdout.write(json.dumps(out) + "\n"); sys.stdout.flush()
"#;

fn scripted(dir: &Path, mode: &str, ops: &str) -> String {
    let path = dir.join("scripted.py");
    std::fs::write(&path, SCRIPT).expect("write script");
    format!("python3 '{}' {mode} {ops}", path.display())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_operations_make_cases_unsupported_never_pass() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (r, _dir) = run(
        &scripted(tmp.path(), "answer", "state,lane,join,create,settle"),
        &["AOC-CASE-001", "SEED003-A"],
        None,
        Duration::from_secs(5),
    )
    .await;
    for c in &r.cases {
        assert_eq!(c.verdict, Verdict::Unsupported, "{}: {:?}", c.id, c.harness);
        let why = c.unsupported.clone().unwrap_or_default();
        assert!(why.contains("reserve") || why.contains("submit"), "{why}");
        assert!(c.facts.is_empty(), "{:?}", c.facts);
    }
    assert_eq!(r.implementation["name"], "scripted");
    assert_ne!(aocheck::exit::of_report(&r), 0);
}

/// What an implementation says of itself is judged in every case, whatever the case runs: a
/// forbidden statement fails its requirement even in a case the implementation cannot run, and
/// so does free text that plainly makes a prohibited claim (AOC-REQ-013); free text is no fact,
/// a statement of AOC-REQ-013's vocabulary is one; a malformed `claims` or `statements` is a
/// protocol violation naming the field.
#[rstest]
#[case::free_text("claims", "bad_claims", Req::R013, &["an EP evidence format is mandatory"], None, "`claims`")]
#[case::statements("statements", "bad_statements", Req::R006, &["[statement_permitted]", "revoking credentials"], Some(1), "statements[0]")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_an_implementation_says_of_itself_is_judged_in_every_case(
    #[case] mode: &str,
    #[case] malformed: &str,
    #[case] req: Req,
    #[case] needles: &[&str],
    #[case] r013_facts: Option<u32>,
    #[case] field: &str,
) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (r, _dir) = run(
        &scripted(tmp.path(), mode, "state,lane,join,create,settle"),
        &["AOC-CASE-001", "SEED003-A"],
        None,
        Duration::from_secs(5),
    )
    .await;
    for c in &r.cases {
        assert_eq!(c.verdict, Verdict::Fail, "{}", c.id);
        assert!(
            c.failures
                .iter()
                .any(|f| f.requirement == req && needles.iter().all(|n| f.msg.contains(n))),
            "{:?}",
            c.failures
        );
        // Free text is no fact: it establishes nothing, and only fails where it plainly says
        // a prohibited claim; each AOC-REQ-013 statement is one.
        assert_eq!(
            c.facts.get("AOC-REQ-013").copied(),
            r013_facts,
            "{:?}",
            c.facts
        );
    }
    if mode == "claims" {
        assert_eq!(
            r.implementation["claims"][1],
            "Our EP evidence format is mandatory for every provider."
        );
    }
    assert_eq!(aocheck::exit::of_report(&r), 1);
    let (r, _dir) = run(
        &scripted(tmp.path(), malformed, "state"),
        &["AOC-CASE-001"],
        None,
        Duration::from_secs(5),
    )
    .await;
    let c = &r.cases[0];
    assert_eq!(c.verdict, Verdict::HarnessError);
    assert!(
        c.harness.as_deref().unwrap_or_default().contains(field),
        "{:?}",
        c.harness
    );
}

#[rstest]
#[case::hang("hang", "no response to `")]
#[case::garble("garble", "this is not json")]
#[case::exit("exit", "giving up on purpose")]
#[case::version("version", "\"aocheck-sut/0\", aocheck speaks aocheck-sut/2")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_misbehaving_implementation_is_a_harness_error_quoting_it(
    #[case] mode: &str,
    #[case] quoted: &str,
) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let all = aocheck::sut::message::Op::ALL
        .iter()
        .map(|o| o.name())
        .collect::<Vec<_>>()
        .join(",");
    let started = std::time::Instant::now();
    let (r, _dir) = run(
        &scripted(tmp.path(), mode, &all),
        &["AOC-CASE-001"],
        None,
        Duration::from_secs(1),
    )
    .await;
    let c = &r.cases[0];
    assert_eq!(c.verdict, Verdict::HarnessError, "{:?}", c.failures);
    let h = c.harness.clone().unwrap_or_default();
    assert!(h.contains(quoted), "{h}");
    // Bounded by the per-request deadline, not by the script's 60 s sleep.
    assert!(started.elapsed() < Duration::from_secs(20));
}

/// A relay in front of the reference that rewrites its errors as another implementation might:
/// `relabel` drops or changes every refusal's requirement label (an honest choice: the draft
/// requires the refusal, not its label); `accept` answers every refusal with `ok` (a liar: the
/// reference refused, the relay claims it was accepted); `refuse_settle` answers every `settle`
/// with an unlabelled refusal, as an implementation that declined a late reply in the
/// background would.
fn relay(dir: &Path, mode: &str) -> String {
    let script = dir.join(format!("relay_{mode}.py"));
    std::fs::write(
        &script,
        format!(
            r#"import json, subprocess, sys, threading
child = subprocess.Popen(["{exe}", "sut", "reference"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
settles = set()
def answers():
    for line in child.stdout:
        msg = json.loads(line)
        err = msg.get("error")
        if "{mode}" == "refuse_settle" and msg["id"] in settles:
            msg = {{"id": msg["id"], "error": {{"kind": "refused", "message": "declined a late reply", "outcome": "definite"}}}}
        elif "{mode}" == "refuse_settle":
            pass
        elif err and err.get("kind") == "refused":
            if "{mode}" == "accept":
                msg = {{"id": msg["id"], "ok": {{}}}}
            elif msg["id"] % 2 == 0:
                err.pop("requirement", None)
            else:
                err["requirement"] = "AOC-REQ-001"
        sys.stdout.write(json.dumps(msg) + "\n")
        sys.stdout.flush()
t = threading.Thread(target=answers, daemon=True)
t.start()
for line in sys.stdin:
    if json.loads(line).get("op") == "settle":
        settles.add(json.loads(line)["id"])
    child.stdin.write(line.encode())
    child.stdin.flush()
child.stdin.close()
t.join(timeout=5)
"#,
            exe = env!("CARGO_BIN_EXE_aocheck"),
        ),
    )
    .expect("write the relay");
    format!("python3 '{}'", script.display())
}

/// Both directions of D22: refusals under other labels, or none, pass every case that expects a
/// refusal; claiming acceptance of what was refused fails, for the requirement the case names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusal_labels_are_an_implementations_choice_but_a_refusal_is_not() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // Cases that expect labelled refusals and crash nothing (a relay is not killed with its
    // child, so crash cases are out of its reach).
    let cases = ["AOC-CASE-005", "AOC-CASE-006", "AOC-CASE-007", "SEED003-C"];
    let (r, _d) = run(
        &relay(tmp.path(), "relabel"),
        &cases,
        None,
        Duration::from_secs(10),
    )
    .await;
    assert_eq!(r.cases.len(), cases.len());
    // The relay really relabelled: refusals arrived without a label and under a wrong one.
    let steps: Vec<&String> = r.cases.iter().flat_map(|c| &c.steps).collect();
    assert!(
        steps
            .iter()
            .any(|s| s.ends_with("refused (no requirement named)")),
        "{steps:?}"
    );
    assert!(
        steps.iter().any(|s| s.ends_with("refused AOC-REQ-001")),
        "{steps:?}"
    );
    for c in &r.cases {
        assert_eq!(
            c.verdict,
            Verdict::Pass,
            "{}: an honest relabelling was failed: {:?} {:?}",
            c.id,
            c.failures,
            c.harness
        );
    }
    let (r, _d) = run(
        &relay(tmp.path(), "accept"),
        &["AOC-CASE-007"],
        None,
        Duration::from_secs(10),
    )
    .await;
    let c = &r.cases[0];
    assert_eq!(
        c.verdict,
        Verdict::Fail,
        "a claimed acceptance passed: {:?}",
        c.harness
    );
    assert!(
        c.failures
            .iter()
            .any(|f| f.requirement == Req::R010 && f.msg.contains("must be refused")),
        "{:?}",
        c.failures
    );
}

/// A refusal while settling background work is the implementation's choice (it may decline a
/// late reply): with no expectation, at the end of a case, it is reported and judged by what it
/// left behind; a `settle` step that expects `ok` still fails on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_while_settling_is_reported_and_judged_only_where_expected() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (r, _d) = run(
        &relay(tmp.path(), "refuse_settle"),
        &["AOCHECK-LATE-01", "AOCHECK-LATE-02"],
        None,
        Duration::from_secs(10),
    )
    .await;
    let case = |id: &str| r.cases.iter().find(|c| c.id == id).expect("case");
    let late2 = case("AOCHECK-LATE-02");
    assert_eq!(
        late2.verdict,
        Verdict::Pass,
        "{:?} {:?}",
        late2.failures,
        late2.harness
    );
    assert!(
        late2
            .steps
            .iter()
            .any(|s| s == "settle (end of case): refused (no requirement named)"),
        "{:?}",
        late2.steps
    );
    let late1 = case("AOCHECK-LATE-01");
    assert_eq!(late1.verdict, Verdict::Fail, "{:?}", late1.harness);
    assert!(
        late1
            .failures
            .iter()
            .any(|f| f.step.is_some() && f.msg.contains("settle")),
        "{:?}",
        late1.failures
    );
}
