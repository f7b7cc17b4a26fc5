//! Hostile services against `aocheck deploy`: `deploy_hostile/liar.py` is one honest shop and
//! the liars that try to get a green verdict they do not deserve (its MODE), each with its
//! deploy file in `deploy_hostile/`. Each runs in process (`aocheck::deploy::run`) on the cases
//! that land its trick, and must get the verdict it deserves: the honest twin a pass, the liar a
//! fail for the requirement it breaks, or a harness error that names why nothing could be
//! decided, never a pass. After every run no process of the service may be left (each instance's
//! environment names its case's store folder, which is how they are found in /proc).
//!
//! Every liar here exposed a defect of the harness once (each mended with its test); a liar the
//! harness cannot judge yet would be marked `#[ignore = "defect: …"]`, asserting the right verdict.

use aocheck::deploy::file::{self, Loaded};
use aocheck::report::model::{CaseReport, Report, Verdict};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/deploy_hostile")
}

/// A run's report, the service processes still alive after it (killed by the test once
/// counted), and the folder that holds the reports and logs.
struct Judged {
    report: Report,
    leftovers: Vec<String>,
    _out: tempfile::TempDir,
}

impl Judged {
    fn case(&self, id: &str) -> &CaseReport {
        self.report
            .cases
            .iter()
            .find(|c| c.id == id)
            .unwrap_or_else(|| panic!("no case {id} in the report"))
    }
}

fn load(name: &str) -> Result<Loaded, Vec<String>> {
    file::load(&dir().join(format!("{name}.yaml")))
}

async fn judge(name: &str, cases: &[&str]) -> Judged {
    let loaded = load(name).expect("the hostile deploy file loads");
    judge_loaded(&loaded, cases).await
}

async fn judge_loaded(loaded: &Loaded, cases: &[&str]) -> Judged {
    let ok = std::process::Command::new("python3")
        .arg("--version")
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "the hostile services need python3");
    let out = tempfile::tempdir().expect("tempdir");
    let only: Vec<String> = cases.iter().map(|c| c.to_string()).collect();
    let report = aocheck::deploy::run(loaded, out.path(), &only, &mut |_| {}).await;
    let leftovers = leftovers(out.path()).await;
    Judged {
        report,
        leftovers,
        _out: out,
    }
}

/// The processes whose environment names a store folder under `out` (every instance of the
/// service gets `STORE_DIR={store.dir}`, a folder under `out/work`), after a grace of 3 s for
/// the ones being killed; each is then killed by its pid (they were started by this test).
async fn leftovers(out: &Path) -> Vec<String> {
    let root = std::fs::canonicalize(out).unwrap_or_else(|_| out.to_path_buf());
    let needle = format!("STORE_DIR={}/", root.display());
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let found = scan(&needle);
        if found.is_empty() || Instant::now() > deadline {
            for (pid, _) in &found {
                if let Some(p) = rustix::process::Pid::from_raw(*pid) {
                    let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
                }
            }
            return found
                .into_iter()
                .map(|(pid, cmd)| format!("{pid} {cmd}"))
                .collect();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn scan(needle: &str) -> Vec<(i32, String)> {
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        // A zombie's environment reads empty: it is dead, only not yet reaped.
        let Ok(env) = std::fs::read(p.path().join("environ")) else {
            continue;
        };
        if env
            .split(|b| *b == 0)
            .any(|v| v.starts_with(needle.as_bytes()))
        {
            let cmd = std::fs::read(p.path().join("cmdline"))
                .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
                .unwrap_or_default();
            out.push((pid, cmd));
        }
    }
    out
}

fn explain(c: &CaseReport) -> String {
    format!(
        "{} {}: {} | {:?}",
        c.id,
        c.verdict.label(),
        c.reasons(),
        c.steps
    )
}

/// The requirements a case failed.
fn failed(c: &CaseReport) -> Vec<String> {
    let mut r: Vec<String> = c
        .failures
        .iter()
        .map(|f| f.requirement.to_string())
        .collect();
    r.dedup();
    r
}

fn assert_fails_for(c: &CaseReport, reqs: &[&str]) {
    assert_eq!(c.verdict, Verdict::Fail, "{}", explain(c));
    let got = failed(c);
    for r in reqs {
        assert!(
            got.iter().any(|g| g == r),
            "{r} not in {got:?}: {}",
            explain(c)
        );
    }
}

fn assert_harness_error(c: &CaseReport, said: &str) {
    assert_eq!(c.verdict, Verdict::HarnessError, "{}", explain(c));
    let h = c.harness.as_deref().unwrap_or_default();
    assert!(h.contains(said), "{said:?} not in {h:?}");
}

fn assert_no_leftovers(j: &Judged) {
    assert!(
        j.leftovers.is_empty(),
        "service processes outlived the run: {:?}",
        j.leftovers
    );
}

// ---------- the honest twins ----------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_honest_shop_passes_every_case_with_its_fault_fired_and_one_charge() {
    let j = judge(
        "honest",
        &[
            "DEPLOY-001",
            "DEPLOY-002",
            "DEPLOY-003",
            "DEPLOY-004",
            "DEPLOY-005",
        ],
    )
    .await;
    for id in [
        "DEPLOY-001",
        "DEPLOY-002",
        "DEPLOY-003",
        "DEPLOY-004",
        "DEPLOY-005",
    ] {
        let c = j.case(id);
        assert_eq!(c.verdict, Verdict::Pass, "{}", explain(c));
        assert!(
            !c.faults.is_empty() && c.faults.iter().all(|f| f.fired),
            "{}",
            explain(c)
        );
        assert!(
            c.occurrences.iter().all(|o| o.provider_effects == 1),
            "{}",
            explain(c)
        );
    }
    assert_no_leftovers(&j);
}

/// Faults own the webhooks (issue 39): with its webhook route declared, the honest shop's
/// events are held by the provider until the shop has shown a final outcome, so its own path
/// (the reconciliation after a 5xx, the successor after a kill) settles each order: a pass it
/// earned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_its_events_held_the_honest_shop_settles_by_its_own_path() {
    let j = judge("honest-webhooks", &["DEPLOY-003", "DEPLOY-005"]).await;
    for id in ["DEPLOY-003", "DEPLOY-005"] {
        let c = j.case(id);
        assert_eq!(c.verdict, Verdict::Pass, "{}", explain(c));
        assert!(
            c.steps.iter().any(|s| s.contains("events are held")),
            "{}",
            explain(c)
        );
        // The held event came after all, with its time, attempt and answer in the steps.
        assert!(
            c.steps
                .iter()
                .any(|s| s.contains("payment_intent.succeeded") && s.contains("sent at")),
            "{}",
            explain(c)
        );
        // And it was held: released once the service's own path had shown the order paid,
        // and sent after that (else this pass would not have been earned by that path).
        let at = |s: &str| {
            s.split_whitespace()
                .next()
                .and_then(|t| t.parse::<u64>().ok())
        };
        let released = c
            .steps
            .iter()
            .find(|s| {
                s.contains("held event(s) released, the service having shown a final outcome")
            })
            .and_then(|s| at(s))
            .unwrap_or_else(|| panic!("never released: {}", explain(c)));
        let paid = c
            .steps
            .iter()
            .find(|s| s.contains("reports \"paid\""))
            .and_then(|s| at(s))
            .unwrap_or_else(|| panic!("never paid: {}", explain(c)));
        let sent = c
            .steps
            .iter()
            .filter(|s| s.contains("payment_intent.succeeded"))
            .filter_map(|s| {
                let t = s.split("sent at ").nth(1)?;
                t.split(" ms").next()?.parse::<u64>().ok()
            })
            .min()
            .unwrap_or_else(|| panic!("no event time: {}", explain(c)));
        // The steps count on the case's monotonic clock, the provider's send times on the
        // wall clock read at the same moment: 1 ms apart at most by rounding.
        assert!(paid <= released && released <= sent + 1, "{}", explain(c));
    }
    assert_no_leftovers(&j);
}

/// The other direction: a service that leaves an ambiguous order to the provider's event has
/// no recovery path of its own to judge. The events are held until the deadline, so its order
/// is still pending then: AOC-REQ-011 not established, never a pass (before issue 39 the
/// prompt event settled it and it passed). The same for a handler that acts on the event and
/// answers 500.
#[rstest::rstest]
#[case::webhook_only("webhook-only")]
#[case::webhook_only_answering_500("webhook-only-500")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_only_a_held_event_would_settle_is_never_a_pass(#[case] name: &str) {
    let j = judge(name, &["DEPLOY-003"]).await;
    let c = j.case("DEPLOY-003");
    assert_eq!(c.verdict, Verdict::MissingKnowledge, "{}", explain(c));
    assert!(
        c.not_established.iter().any(|r| r == "AOC-REQ-011"),
        "{}",
        explain(c)
    );
    assert!(
        c.steps
            .iter()
            .any(|s| s.contains("released, the deadline passed with no final outcome")),
        "{}",
        explain(c)
    );
    assert!(
        c.occurrences.iter().all(|o| o
            .missing_knowledge
            .iter()
            .any(|m| m.contains("at the deadline"))),
        "{}",
        explain(c)
    );
    assert_no_leftovers(&j);
}

/// An attribution that misses never hides a charge (issue 39): the naive shop sends no key,
/// its deploy file says `order-{occurrence}`. Both charges of the order are failures (entries
/// nobody accounts for), with their keys and amounts, and the steps name the rule and the keys
/// the provider saw; before, the case was "exercised nothing" (exit 2) over a double charge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attribution_that_misses_shows_both_charges_and_the_rule() {
    let j = judge("misattributed", &["DEPLOY-003"]).await;
    let c = j.case("DEPLOY-003");
    assert_fails_for(c, &["AOC-REQ-010"]);
    let stray = c
        .failures
        .iter()
        .filter(|f| f.msg.contains("places under no order of the case"))
        .count();
    assert_eq!(stray, 2, "{}", explain(c));
    assert!(
        c.steps.iter().any(|s| s
            .contains("the declared attribution (Idempotency-Key order-{occurrence})")
            && s.contains("gives 2 charge(s) to no order")
            && s.contains("fix `attribution`")),
        "{}",
        explain(c)
    );
    assert!(
        c.faults
            .iter()
            .any(|f| f.what.contains("does not give to order")),
        "{:?}",
        c.faults
    );
    assert_eq!(
        aocheck::deploy::exit_code(&j.report),
        aocheck::exit::REQUIREMENT_FAILED
    );
    // DEPLOY-HISTORY has nothing to replay: no empty "reproduce:" line in the summary or on
    // the page (issue 39).
    let md = aocheck::report::formats::markdown(&j.report);
    let lines: Vec<&str> = md.lines().filter(|l| l.contains("reproduce:")).collect();
    assert!(!lines.is_empty(), "{md}");
    assert!(
        lines.iter().all(|l| l.contains("aocheck deploy run")),
        "{md}"
    );
    let page = aocheck::report::html::html(&j.report);
    assert!(!page.contains("reproduce: <code></code>"), "{page}");
    // The headline counts the case that ran, and says DEPLOY-HISTORY could not.
    assert!(
        md.starts_with("# aocheck conformance: 0 of 1 cases passed (1 unsupported)"),
        "{md}"
    );
    assert_no_leftovers(&j);
}

/// The ledger is judged whatever else happened: a service waiting for the held event that
/// charges the order again meanwhile fails AOC-REQ-010, never undecided (review of issue 39).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_double_charge_while_the_event_is_held_fails_not_undecided() {
    let j = judge("event-then-retry", &["DEPLOY-003"]).await;
    let c = j.case("DEPLOY-003");
    assert_fails_for(c, &["AOC-REQ-010"]);
    assert_no_leftovers(&j);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_honest_shop_attributed_by_metadata_passes() {
    let j = judge("honest-metadata", &["DEPLOY-003"]).await;
    assert_eq!(
        j.case("DEPLOY-003").verdict,
        Verdict::Pass,
        "{}",
        explain(j.case("DEPLOY-003"))
    );
    assert_no_leftovers(&j);
}

// ---------- 1. paid at once, nothing charged ----------

/// The label is a lie the ledger already shows (no entry at all), but the case's fault never
/// acted on a charge: a harness error that says so, never a pass. (A fail for AOC-REQ-011 would
/// name the lie more plainly; GUIDE's rule that a case whose fault never fired is no pass is
/// kept either way.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paid_without_a_charge_is_no_pass() {
    let j = judge("paid-at-once", &["DEPLOY-003"]).await;
    let c = j.case("DEPLOY-003");
    // The ledger is judged before "the fault did not act" (issue 39): "paid" with no charge at
    // the provider is an invented outcome, a failure, not only an undecided case.
    assert_fails_for(c, &["AOC-REQ-011"]);
    assert!(
        c.steps.iter().any(
            |s| s.contains("it could not have passed") && s.contains("did not act on a charge")
        ),
        "{}",
        explain(c)
    );
    assert!(
        c.steps.iter().any(|s| s.contains("reports \"paid\"")),
        "{}",
        explain(c)
    );
    assert_no_leftovers(&j);
}

// ---------- 2. a failure inferred from a 5xx or a lost reply ----------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn declined_after_a_5xx_or_a_lost_reply_fails_011_and_009() {
    let j = judge("declined-after-error", &["DEPLOY-002", "DEPLOY-003"]).await;
    for id in ["DEPLOY-002", "DEPLOY-003"] {
        assert_fails_for(j.case(id), &["AOC-REQ-011", "AOC-REQ-009"]);
    }
    assert_no_leftovers(&j);
}

// ---------- 3, 4, 5. a second charge the attribution should catch ----------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_charge_without_a_key_fails_010() {
    let j = judge("retry-unkeyed", &["DEPLOY-003"]).await;
    assert_fails_for(j.case("DEPLOY-003"), &["AOC-REQ-010"]);
    assert_no_leftovers(&j);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_charge_without_metadata_fails_010() {
    let j = judge("metadata-none", &["DEPLOY-003"]).await;
    assert_fails_for(j.case("DEPLOY-003"), &["AOC-REQ-010"]);
    assert_no_leftovers(&j);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_order_charged_again_on_another_account_fails_010() {
    let j = judge("other-account", &["DEPLOY-003"]).await;
    assert_fails_for(j.case("DEPLOY-003"), &["AOC-REQ-010"]);
    assert_no_leftovers(&j);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stray_unkeyed_charge_fails_010() {
    let j = judge("stray-unkeyed", &["DEPLOY-003"]).await;
    assert_fails_for(j.case("DEPLOY-003"), &["AOC-REQ-010"]);
    assert_no_leftovers(&j);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_charge_under_a_key_outside_the_orders_fails_010() {
    let j = judge("retry-other-key", &["DEPLOY-003"]).await;
    assert_fails_for(j.case("DEPLOY-003"), &["AOC-REQ-010"]);
    assert_no_leftovers(&j);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_charge_with_another_orders_metadata_fails_010() {
    let j = judge("metadata-other-order", &["DEPLOY-003"]).await;
    assert_fails_for(j.case("DEPLOY-003"), &["AOC-REQ-010"]);
    assert_no_leftovers(&j);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stray_charge_for_an_order_nobody_submitted_fails_010() {
    let j = judge("stray-keyed", &["DEPLOY-003"]).await;
    assert_fails_for(j.case("DEPLOY-003"), &["AOC-REQ-010"]);
    assert_no_leftovers(&j);
}

// ---------- 6. labels that change ----------

/// "declined" for 1.5 s after a 5xx that charged, then "paid" before the watch ends: the lie
/// was told, and every final label is judged (it passed while only the last one was).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn declined_after_a_5xx_then_paid_before_the_watch_ends_fails_011_and_009() {
    let j = judge("flip-declined-then-paid", &["DEPLOY-003"]).await;
    let c = j.case("DEPLOY-003");
    assert!(
        c.steps.iter().any(|s| s.contains("reports \"declined\"")),
        "the lie was on show: {}",
        explain(c)
    );
    assert_fails_for(c, &["AOC-REQ-011", "AOC-REQ-009"]);
    assert_no_leftovers(&j);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paid_before_any_charge_fails_011() {
    let j = judge("paid-before-charge", &["DEPLOY-003"]).await;
    assert_fails_for(j.case("DEPLOY-003"), &["AOC-REQ-011"]);
    assert_no_leftovers(&j);
}

/// "paid" (true), then "queued" to the end: the service's last word is that it does not know.
/// D71: a label still pending at the deadline is never a pass; a terminal interpretation
/// withdrawn is relabelled. Before every final label was judged this was missing knowledge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_final_label_that_goes_back_to_pending_is_no_pass() {
    let j = judge("regress-to-queued", &["DEPLOY-003"]).await;
    let c = j.case("DEPLOY-003");
    assert!(
        c.steps.iter().any(|s| s.contains("reports \"queued\"")),
        "the label went back: {}",
        explain(c)
    );
    assert!(
        matches!(c.verdict, Verdict::Fail | Verdict::MissingKnowledge),
        "{}",
        explain(c)
    );
    assert_no_leftovers(&j);
}

// ---------- 7. processes ----------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_that_ignores_sigterm_is_killed_confirmed_and_cleaned_up() {
    let j = judge("ignore-sigterm", &["DEPLOY-001"]).await;
    let c = j.case("DEPLOY-001");
    assert_eq!(c.verdict, Verdict::Pass, "{}", explain(c));
    assert!(
        c.steps.iter().any(|s| s.contains("signal 9")
            && s.contains("the provider saw the parked request's connection close")),
        "{}",
        explain(c)
    );
    assert_no_leftovers(&j);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_that_exits_by_itself_while_its_charge_is_parked_is_no_kill() {
    let j = judge("exits-at-hold", &["DEPLOY-001"]).await;
    assert_harness_error(j.case("DEPLOY-001"), "not by the kill");
    assert_no_leftovers(&j);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_that_exits_by_itself_during_the_watch_is_a_harness_error() {
    let j = judge("exits-later", &["DEPLOY-003"]).await;
    assert_harness_error(j.case("DEPLOY-003"), "exited unasked");
    assert_no_leftovers(&j);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_the_service_started_outlives_the_run() {
    let j = judge("setsid-daemon", &["DEPLOY-003"]).await;
    assert_eq!(
        j.case("DEPLOY-003").verdict,
        Verdict::Pass,
        "{}",
        explain(j.case("DEPLOY-003"))
    );
    assert_no_leftovers(&j);
}

// ---------- 8. a service the harness cannot read ----------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ready_check_that_never_answers_2xx_is_a_harness_error_naming_it() {
    let j = judge("ready-never", &["DEPLOY-003"]).await;
    assert_harness_error(j.case("DEPLOY-003"), "service.ready");
    assert_no_leftovers(&j);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_ready_only_after_its_timeout_is_a_harness_error_naming_it() {
    let j = judge("ready-late", &["DEPLOY-003"]).await;
    assert_harness_error(j.case("DEPLOY-003"), "service.ready");
    assert_no_leftovers(&j);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_answer_the_file_cannot_read_is_a_harness_error_naming_the_template() {
    for (name, said) in [
        ("status-not-json", "drive.status: the answer is not JSON"),
        (
            "status-no-path",
            "drive.status: $.state is not in the answer",
        ),
        ("status-unmapped", "a label the deploy file does not map"),
    ] {
        let j = judge(name, &["DEPLOY-003"]).await;
        assert_harness_error(j.case("DEPLOY-003"), said);
        assert_no_leftovers(&j);
    }
}

// ---------- 9. no attribution ----------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_attribution_neither_the_honest_nor_the_double_charger_is_green() {
    for name in ["no-attribution-honest", "no-attribution-naive"] {
        let j = judge(name, &["DEPLOY-003"]).await;
        let c = j.case("DEPLOY-003");
        assert_eq!(
            c.verdict,
            Verdict::MissingKnowledge,
            "{name}: {}",
            explain(c)
        );
        assert!(
            c.occurrences.iter().all(|o| o
                .missing_knowledge
                .iter()
                .any(|m| m.contains("no attribution declared"))),
            "{name}: {}",
            explain(c)
        );
        assert_no_leftovers(&j);
    }
}

// ---------- the fault must meet the charge ----------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_naive_shop_fails_010_after_a_crash_and_after_a_5xx() {
    let j = judge("naive", &["DEPLOY-001", "DEPLOY-003"]).await;
    for id in ["DEPLOY-001", "DEPLOY-003"] {
        assert_fails_for(j.case(id), &["AOC-REQ-010"]);
    }
    assert_no_leftovers(&j);
}

/// The naive shop, with one unconfirmed intent (no payment, no money) sent first on each
/// attempt: the case's fault is set on the first creation, so it meets the decoy and the
/// charge is never at risk. The 5xx then never even happens (a commit fault on a request with
/// no effect does nothing), yet the fault is reported fired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decoy_that_absorbs_the_fault_is_no_pass() {
    let j = judge("decoy", &["DEPLOY-001", "DEPLOY-003", "DEPLOY-005"]).await;
    for id in ["DEPLOY-001", "DEPLOY-003", "DEPLOY-005"] {
        let c = j.case(id);
        assert!(
            matches!(c.verdict, Verdict::HarnessError | Verdict::Fail),
            "{}",
            explain(c)
        );
    }
    assert_no_leftovers(&j);
}

// ---------- the ground truth is the harness's alone ----------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_that_reads_the_ground_truth_is_no_pass() {
    let j = judge("peek-ledger", &["DEPLOY-003"]).await;
    assert_harness_error(j.case("DEPLOY-003"), "control");
    assert_no_leftovers(&j);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_that_rewrites_the_ground_truth_is_no_pass() {
    let j = judge("tamper-reset", &["DEPLOY-003"]).await;
    let c = j.case("DEPLOY-003");
    assert!(
        matches!(c.verdict, Verdict::HarnessError | Verdict::Fail),
        "{}",
        explain(c)
    );
    assert_no_leftovers(&j);
}

// ---------- what the ledger shows after the creation ----------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paid_for_a_voided_authorisation_fails_011() {
    let j = judge("cancel-auth-paid", &["DEPLOY-003"]).await;
    assert_fails_for(j.case("DEPLOY-003"), &["AOC-REQ-011"]);
    assert_no_leftovers(&j);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_for_a_voided_authorisation_passes() {
    let j = judge("cancel-auth-failed", &["DEPLOY-003"]).await;
    let c = j.case("DEPLOY-003");
    assert_eq!(c.verdict, Verdict::Pass, "{}", explain(c));
    assert_no_leftovers(&j);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paid_for_a_charge_of_another_amount_fails() {
    let j = judge("wrong-amount", &["DEPLOY-003"]).await;
    let c = j.case("DEPLOY-003");
    assert_eq!(c.verdict, Verdict::Fail, "{}", explain(c));
    assert!(
        c.failures.iter().any(|f| f.msg.contains("amount")),
        "{}",
        explain(c)
    );
    assert_no_leftovers(&j);
}

// ---------- a late duplicate ----------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duplicate_charge_a_second_after_paid_fails_010() {
    let j = judge("late-duplicate", &["DEPLOY-003"]).await;
    assert_fails_for(j.case("DEPLOY-003"), &["AOC-REQ-010"]);
    assert_no_leftovers(&j);
}

/// The same service with `settle_ms: 0` in its own deploy file: the watch ends at the first
/// final label and the instance is stopped before its duplicate leaves. A file that turns the
/// settle watch off must be refused, or the case judged as if it had settled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switching_off_the_settle_watch_is_no_pass() {
    match load("late-duplicate-no-settle") {
        Err(d) => assert!(d.iter().any(|x| x.contains("settle_ms")), "{d:?}"),
        Ok(l) => {
            let j = judge_loaded(&l, &["DEPLOY-003"]).await;
            assert_fails_for(j.case("DEPLOY-003"), &["AOC-REQ-010"]);
            assert_no_leftovers(&j);
        }
    }
}

/// A service that charges inside its own request handler (no queue in front of the provider):
/// its answer waits for the provider, so a hold parks the order's own request; the harness sends
/// the order on a task of its own and lands the fault all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_that_charges_inside_its_request_handler_is_judged() {
    let j = judge("sync-honest", &["DEPLOY-001", "DEPLOY-003", "DEPLOY-004"]).await;
    for id in ["DEPLOY-001", "DEPLOY-003", "DEPLOY-004"] {
        let c = j.case(id);
        assert_eq!(c.verdict, Verdict::Pass, "{id}: {}", explain(c));
    }
    assert!(
        j.case("DEPLOY-001")
            .steps
            .iter()
            .any(|s| s.contains("the order's own answer")),
        "{}",
        explain(j.case("DEPLOY-001"))
    );
    assert_no_leftovers(&j);
}

/// The report route (`drive.report`), the liar's direction: a twin of `examples/shop-keyed`
/// that charges exactly as it does, but whose served record lies in one way
/// (`deploy_hostile/record_liar.py`), fails DEPLOY-001 for the requirement that lie breaks. The
/// honest direction is the keyed example itself, which passes every case with its route
/// (tests/it/deploy.rs).
#[rstest::rstest]
#[case::an_entry_removed("record-rewrite", "AOC-REQ-004", "history_append_only")]
#[case::the_entry_recorded_after_the_request(
    "record-late-entry",
    "AOC-REQ-004",
    "entry_before_request"
)]
#[case::a_source_never_observed("record-unbacked-source", "AOC-REQ-009", "report_backed")]
#[case::an_entry_by_the_retired_generation(
    "record-retired-generation",
    "AOC-REQ-006",
    "no_retired_entry"
)]
#[case::another_binding_reported("record-wrong-binding", "AOC-REQ-003", "state_matches_history")]
#[case::an_outcome_nothing_decided("record-invented-outcome", "AOC-REQ-009", "no_invented_outcome")]
// Found passing by a hostile review of the route (issue 39), each now caught:
#[case::a_second_entry_in_the_record(
    "record-second-entry",
    "AOC-REQ-010",
    "one_effect_per_occurrence"
)]
#[case::busy_before_the_kill_then_a_retired_entry(
    "record-reentry-retired-refuse",
    "AOC-REQ-010",
    "one_effect_per_occurrence"
)]
#[case::an_entry_without_its_generation(
    "record-reentry-no-generation",
    "AOC-REQ-004",
    "history_append_only"
)]
#[case::a_response_without_its_source_kind(
    "record-phantom-reply",
    "AOC-REQ-004",
    "history_append_only"
)]
#[case::an_acknowledgement_no_reply_named(
    "record-ack-without-ref",
    "AOC-REQ-009",
    "evidence_served"
)]
#[case::success_resting_on_accepted(
    "record-success-from-accepted",
    "AOC-REQ-009",
    "no_invented_outcome"
)]
#[case::a_lookup_about_another_binding(
    "record-lookup-other-binding",
    "AOC-REQ-007",
    "responses_bound"
)]
#[case::a_decision_citing_no_observation(
    "record-evidence-not-observation",
    "AOC-REQ-004",
    "history_append_only"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_that_lies_fails_for_its_lie(
    #[case] name: &str,
    #[case] req: &str,
    #[case] checker: &str,
) {
    lies_in_case(name, "DEPLOY-001", req, checker).await;
}

/// The lies that need a 5xx after commit (DEPLOY-003) to show.
#[rstest::rstest]
#[case::a_500_read_as_success(
    "record-error-read-as-success",
    "AOC-REQ-009",
    "authentic_as_claimed"
)]
#[case::flags_mapped_to_null_then_dropped(
    "record-flags-null",
    "AOC-REQ-009",
    "state_matches_history"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_that_lies_after_a_5xx_fails_for_its_lie(
    #[case] name: &str,
    #[case] req: &str,
    #[case] checker: &str,
) {
    lies_in_case(name, "DEPLOY-003", req, checker).await;
}

/// A record refused (503) at every look while the order is open, tidy once it is settled: what
/// it hid in flight is not established (AOC-REQ-004 missing knowledge), never a pass; and a
/// record refused before a kill retires nothing, which leaves AOC-REQ-006 not established.
#[rstest::rstest]
#[case::refused_in_flight("record-refuse-hide-uncertainty", "DEPLOY-003", &["AOC-REQ-004"])]
#[case::refused_before_the_kill("record-reentry-retired-refuse", "DEPLOY-005", &["AOC-REQ-006", "AOC-REQ-004"])]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_refused_while_the_order_is_open_is_no_pass(
    #[case] name: &str,
    #[case] case: &str,
    #[case] blind: &[&str],
) {
    let j = judge(name, &[case]).await;
    let c = j.case(case);
    assert_ne!(c.verdict, Verdict::Pass, "{}", explain(c));
    for r in blind {
        assert!(
            c.not_established.iter().any(|x| x == r),
            "{r} established: {}",
            explain(c)
        );
    }
    assert!(
        c.occurrences.iter().any(|o| o
            .missing_knowledge
            .iter()
            .any(|m| m.contains("the service's record"))),
        "{}",
        explain(c)
    );
    assert_no_leftovers(&j);
}

/// Issue 40, the liar's direction for one decision per resume command: a twin of
/// `examples/connector-keyed` that answers the replay of a resume command with its stored
/// state, as the keyed connector does, and sends the decision again 5 s later
/// (`deploy_hostile/connector_liar.py`). Its labels are honest; fake-hermes's ledger shows the
/// second decision, because the case watches (and keeps the connector running) to its own end
/// whatever the labels say. The honest direction is the keyed example (tests/it/deploy.rs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connector_that_resends_a_decision_late_fails() {
    let j = judge("connector-late-resend", &["CONNECTOR-007"]).await;
    let c = j.case("CONNECTOR-007");
    assert_fails_for(c, &["AOC-REQ-010"]);
    assert!(
        c.failures
            .iter()
            .any(|f| f.msg.contains("[deploy_one_decision]")
                && f.msg.contains("applied 2 approval decisions")),
        "{}",
        explain(c)
    );
    assert_no_leftovers(&j);
}

async fn lies_in_case(name: &str, case: &str, req: &str, checker: &str) {
    let j = judge(name, &[case]).await;
    let c = j.case(case);
    assert_fails_for(c, &[req]);
    assert!(
        c.failures
            .iter()
            .any(|f| f.requirement.to_string() == req && f.msg.contains(checker)),
        "{checker} not among the failures: {}",
        explain(c)
    );
    // The charges themselves were shop-keyed's: one, so only the record is at fault.
    assert!(
        c.occurrences.iter().all(|o| o.provider_effects == 1),
        "{}",
        explain(c)
    );
    assert_no_leftovers(&j);
}
