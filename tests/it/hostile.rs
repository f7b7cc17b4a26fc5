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
    // Every route of both providers was reached and refused (a probe that ran after its case
    // ended finds no server: status 0, which opens nothing either).
    let shared = [
        "GET /_control/ledger",
        "GET /_control/faults",
        "POST /_control/faults",
        "GET /_control/holds",
        "POST /_control/release",
        "POST /_control/reset",
    ];
    let own = [
        // Rewriting the duplicate's status, expiring it, replacing scripts, a forced restart.
        ("payments", "POST /_control/payments/{id}/status"),
        ("payments", "POST /_control/expire"),
        ("hermes", "POST /_control/scripts"),
        ("hermes", "POST /_control/forget"),
    ];
    let every = ["payments", "hermes"]
        .into_iter()
        .flat_map(|p| shared.iter().map(move |r| (p, *r)))
        .chain(own);
    for (provider, route) in every {
        assert!(
            probes
                .iter()
                .any(|p| p["provider"] == provider && p["route"] == route && p["status"] == 401),
            "{provider} {route} was not refused: {probes:?}"
        );
    }
    for c in &r.cases {
        assert!(
            format!("{:?}", c.harness).contains("control APIs"),
            "{}: {:?}",
            c.id,
            c.harness
        );
    }
    let open: Vec<_> = probes
        .iter()
        .filter(|p| ![0, 401].contains(&p["status"].as_u64().unwrap_or(0)))
        .collect();
    assert!(
        open.is_empty(),
        "control routes answered the implementation: {open:?}"
    );
}

/// The reference behind a wrapper shell that is not `exec`ed (`sh -c 'REF; true'`): every kill
/// takes the whole process group, so the implementation really dies at each crash, and the
/// conforming reference passes every case as it does unwrapped (with real SIGKILLs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_behind_a_wrapper_passes_everything() {
    let command = format!(
        "sh -c \"'{}' sut reference; true\"",
        env!("CARGO_BIN_EXE_aocheck")
    );
    let (r, _d) = run(&command, &[], None, Duration::from_secs(10)).await;
    assert!(r.cases.len() > 30, "{}", r.cases.len());
    crate::protocol::assert_reference_passes(&r);
}

/// Live processes whose command line contains `needle` (zombies are dead).
fn alive_with(needle: &str) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let p = e.path();
        let cmd = std::fs::read(p.join("cmdline")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        let stat = std::fs::read_to_string(p.join("stat")).unwrap_or_default();
        let zombie = stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
        if cmd.contains(needle) && !zombie {
            out.push(format!("{}: {cmd}", p.display()));
        }
    }
    out
}

/// An implementation that forks daemons out of its process group before it starts: one keeps
/// the harness's pipes with a cleared environment, one keeps only its environment. The kill finds
/// both, the case is a harness error naming them (a crash that left survivors did not happen as
/// declared), never a pass, and no process of it outlives the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_implementation_that_escapes_its_process_group_is_found_and_killed() {
    let tag = uuid::Uuid::new_v4().simple().to_string();
    let (piped, marked) = (format!("31{}", &tag[..4]), format!("32{}", &tag[..4]));
    // Numeric sleep lengths make the daemons findable by command line, and unique to this test.
    let piped = u32::from_str_radix(&piped, 16).unwrap_or(317_100) % 900_000 + 100_000;
    let marked = u32::from_str_radix(&marked, 16).unwrap_or(317_200) % 900_000 + 100_000;
    let command = format!(
        "sh -c \"env -i setsid sleep {piped} & setsid sleep {marked} </dev/null >/dev/null 2>&1 & exec '{}' sut reference\"",
        env!("CARGO_BIN_EXE_aocheck")
    );
    let (r, _d) = run(&command, &["AOC-CASE-003"], None, Duration::from_secs(10)).await;
    let c = &r.cases[0];
    assert_eq!(c.verdict, Verdict::HarnessError, "{:?}", c.failures);
    let why = c.harness.clone().unwrap_or_default();
    assert!(why.contains("survived the SIGKILL"), "{why}");
    assert!(why.contains("sleep"), "the survivors are named: {why}");
    // Nothing of it outlives the run (the kill reaches them; give the kernel a moment).
    let mut left = Vec::new();
    for _ in 0..100 {
        left = [
            alive_with(&format!("sleep {piped}")),
            alive_with(&format!("sleep {marked}")),
        ]
        .concat();
        if left.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(left.is_empty(), "processes outlived the run: {left:?}");
}

/// A second join on a held lane once waited the lease's 30 minutes of real time. On the case
/// clock the holder's lease cannot expire while the join waits, so it is refused at once, in
/// process and through the protocol, and the case gets the verdict it deserves.
#[rstest::rstest]
#[case::in_process(false)]
#[case::protocol(true)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_on_a_held_lane_is_refused_at_once(#[case] protocol: bool) {
    use aocheck::runner::{RunOptions, run_suite};
    use aocheck::store::AnyStore;
    use std::sync::Arc;
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("X-8-held.yaml"),
        "id: X-8\ntitle: t\nrequirements: [AOC-REQ-006]\nsteps:\n  - {do: join, executor: e1}\n  - {do: join, executor: e2, expect: refused}\n",
    )
    .expect("write");
    let (cases, defects) = aocheck::case::load(dir.path());
    assert!(defects.is_empty(), "{defects:?}");
    let opts = RunOptions {
        run_id: "held".into(),
        seed: 7,
        knobs: aocheck::reference::Knobs::default(),
        repro_store: None,
        sut: protocol.then(|| aocheck::sut::processes::ProcessSpec {
            command: format!("'{}' sut reference", env!("CARGO_BIN_EXE_aocheck")),
            timeout: Duration::from_secs(10),
            dir: dir.path().into(),
            postgres: None,
            user: None,
        }),
        explore: false,
    };
    let store = Arc::new(AnyStore::Memory(aocheck::MemoryStore::new()));
    // A guard against the old behaviour, not a speed target: it would wait 30 minutes.
    let r = tokio::time::timeout(
        Duration::from_secs(30),
        run_suite(&cases, store, &opts, &mut |_| {}),
    )
    .await
    .expect("the run finished");
    let c = &r.cases[0];
    assert_eq!(c.verdict, Verdict::Pass, "{:?} {:?}", c.failures, c.harness);
    assert!(c.steps[1].contains("refused AOC-REQ-006"), "{:?}", c.steps);
}

/// Text from an implementation cannot break out of the format it lands in: its name, version and
/// refusal messages carry a forged Markdown heading and table row, an HTML script, XML markup and
/// a character XML cannot hold. The summary keeps its one heading and table, the page runs no
/// script, the JUnit file parses (by Python's XML parser, an independent reader), and the
/// third-party footer replaces the same-team label.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn implementation_text_is_escaped_in_every_report_format() {
    let (r, _d) = run(
        &hostile("inject"),
        &["AOC-CASE-005", "AOC-CASE-007"],
        None,
        Duration::from_secs(10),
    )
    .await;
    assert!(
        r.implementation["name"]
            .as_str()
            .is_some_and(|n| n.contains("<script>")),
        "the injection reached the report: {:?}",
        r.implementation
    );
    let all_steps: Vec<&String> = r.cases.iter().flat_map(|c| &c.steps).collect();
    assert!(!all_steps.is_empty());
    let md = aocheck::report::formats::markdown(&r);
    let headings: Vec<&str> = md.lines().filter(|l| l.starts_with('#')).collect();
    assert_eq!(
        headings.len(),
        1 + usize::from(md.contains("\n## Cases")),
        "{md}"
    );
    assert!(headings[0].starts_with("# aocheck conformance:"), "{md}");
    assert!(!md.contains("<script"), "{md}");
    // The only table rows are aocheck's own (requirement rows start with the id and a verdict).
    for l in md.lines().filter(|l| l.starts_with('|')) {
        assert!(
            l.starts_with("| requirement")
                || l.starts_with("|---")
                || (l.starts_with("| AOC-REQ-0") && l.matches(" | ").count() == 2),
            "a forged table row: {l}"
        );
    }
    assert!(
        !md.contains("Same-team"),
        "the same-team label on a third party's run"
    );
    let html = aocheck::report::formats::html(&r);
    assert!(!html.contains("<script"), "a script got into the page");
    assert!(!html.contains("<x a="), "markup got into the page");
    let tmp = tempfile::tempdir().expect("tempdir");
    let junit = tmp.path().join("junit.xml");
    std::fs::write(&junit, aocheck::report::formats::junit(&r)).expect("write");
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg("import sys, xml.etree.ElementTree as E; t = E.parse(sys.argv[1]); print(len(t.getroot().iter('testcase').__next__().attrib))")
        .arg(&junit)
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "junit.xml does not parse: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// An implementation that floods its log (50 MB of stderr before it serves) is judged as any
/// other, while the harness keeps a bounded log of it: the head and the tail, and a line that
/// says how much was dropped between them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flooded_stderr_is_kept_bounded_and_says_what_it_dropped() {
    use aocheck::sut::{STDERR_HEAD, STDERR_TAIL};
    let command = format!(
        "sh -c \"yes 0123456789abcdef | head -c 50000000 >&2; echo the-last-line >&2; exec '{}' sut reference\"",
        env!("CARGO_BIN_EXE_aocheck")
    );
    let (r, dir) = run(&command, &["AOC-CASE-001"], None, Duration::from_secs(20)).await;
    let c = &r.cases[0];
    assert_eq!(c.verdict, Verdict::Pass, "{:?} {:?}", c.failures, c.harness);
    let logs: Vec<_> = walk(dir.path())
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "stderr"))
        .collect();
    assert!(!logs.is_empty());
    for log in logs {
        let text = std::fs::read(&log).expect("log");
        assert!(
            text.len() <= STDERR_HEAD + STDERR_TAIL + 200,
            "{}: {} bytes",
            log.display(),
            text.len()
        );
        let text = String::from_utf8_lossy(&text);
        assert!(
            text.contains("bytes of stderr dropped here"),
            "{}",
            log.display()
        );
        assert!(text.contains("the-last-line"), "the tail was kept");
        assert!(text.starts_with("0123456789abcdef"), "the head was kept");
    }
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// An implementation that keeps its own time (no `"clock": "driven"` in its answer, and no
/// harness clock in its `init`) is judged on real time: the case's clock follows it, so the
/// fake's timers and the connector's agree, and the conforming reference still passes the
/// cases that wait for a claim to expire, a stop to settle and an approval to be answered. The
/// claim's 1 s TTL then really elapses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_implementation_on_its_own_clock_is_judged_in_real_time() {
    let started = std::time::Instant::now();
    let (r, _d) = run(
        &hostile("own_clock"),
        &["HERMES-VERIFY-04", "HERMES-VERIFY-05", "HERMES-VERIFY-06"],
        None,
        Duration::from_secs(20),
    )
    .await;
    assert_eq!(r.cases.len(), 3);
    for c in &r.cases {
        assert_eq!(
            c.verdict,
            Verdict::Pass,
            "{}: {:?} {:?}",
            c.id,
            c.harness,
            c.failures
        );
    }
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "the claim TTL cannot have elapsed: {:?}",
        started.elapsed()
    );
}

/// The one escape the group, mark and pipe checks cannot see: a daemon that leaves its session
/// and group, clears its environment and closes every pipe. `aocheck run` is the reaper of the
/// orphans below it, so once the implementation dies the daemon becomes aocheck's child and is
/// found, named and killed: the case is a harness error, never a pass, and nothing outlives the
/// run. The honest direction: the conforming reference behind a non-`exec` wrapper, whose own
/// child is reparented the same way when the wrapper dies, still passes (its group is killed
/// with it).
#[test]
fn the_binary_finds_a_daemon_that_left_its_group_environment_and_pipes() {
    let bin = env!("CARGO_BIN_EXE_aocheck");
    let tag = uuid::Uuid::new_v4().as_u128();
    let secs = (tag % 900_000 + 100_000) as u32;
    let tmp = tempfile::tempdir().expect("tempdir");
    let run = |sut: &str, out: &str| {
        std::process::Command::new(bin)
            .args([
                "run",
                "--case",
                "AOC-CASE-003",
                "--seed",
                "7",
                "--sut",
                sut,
                "--out",
            ])
            .arg(tmp.path().join(out))
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .expect("aocheck run")
    };
    let escaper = format!(
        "sh -c \"env -i setsid sleep {secs} </dev/null >/dev/null 2>&1 & exec '{bin}' sut reference\""
    );
    let out = run(&escaper, "escaper");
    let report: serde_json::Value = serde_json::from_slice(
        &std::fs::read(tmp.path().join("escaper").join("report.json")).expect("report"),
    )
    .expect("report JSON");
    let case = &report["cases"][0];
    assert_eq!(
        case["verdict"],
        "harness_error",
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let why = case["harness"].to_string();
    assert!(why.contains("survived") && why.contains("sleep"), "{why}");
    assert_ne!(out.status.code(), Some(0));
    let mut left = Vec::new();
    for _ in 0..100 {
        left = alive_with(&format!("sleep {secs}"));
        if left.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(left.is_empty(), "processes outlived the run: {left:?}");

    let honest = run(&format!("sh -c \"'{bin}' sut reference; true\""), "honest");
    assert_eq!(
        honest.status.code(),
        Some(0),
        "{}\n{}",
        String::from_utf8_lossy(&honest.stdout),
        String::from_utf8_lossy(&honest.stderr)
    );
}

/// A liar (`tests/it/scripts/liar_sut.py`) in front of the reference.
fn liar(mode: &str) -> String {
    format!(
        "python3 '{}' {mode} '{}' sut reference",
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/it/scripts/liar_sut.py")
            .display(),
        env!("CARGO_BIN_EXE_aocheck")
    )
}

/// These liars run on SQLite: the store is not their subject (the PostgreSQL arm runs the store
/// conformance table and the reference's whole suite through the protocol).
///
/// Issue 21: every lie the providers' ledgers (or the implementation's own answers) can expose
/// fails the case for the requirement it breaks, although each
/// liar's history is consistent with itself. The honest counterpart of every row is the
/// reference itself, which passes these cases through the protocol
/// (`protocol::the_reference_passes_through_the_protocol_on_sqlite` and `_on_postgres`) and in process.
/// Runs liar `mode` on `case` (its implementation on PostgreSQL when `postgres` names one) and
/// asserts the case fails for `req` with a finding that holds every part of `needle`, in order
/// (parts separated by " … "; a finding starts with its checker's name, `[checker]`).
async fn assert_liar_fails(
    mode: &str,
    case: &str,
    req: Req,
    needle: &str,
    postgres: Option<String>,
) {
    let (r, _d) = run(&liar(mode), &[case], postgres, Duration::from_secs(10)).await;
    let c = &r.cases[0];
    assert_eq!(
        c.verdict,
        Verdict::Fail,
        "{mode}: {:?} {:?}",
        c.harness,
        c.failures
    );
    let names = |msg: &str| {
        let mut rest = msg;
        needle.split(" … ").all(|part| match rest.find(part) {
            Some(at) => {
                rest = &rest[at + part.len()..];
                true
            }
            None => false,
        })
    };
    assert!(
        c.failures
            .iter()
            .any(|f| f.requirement == req && names(&f.msg)),
        "{mode}: no {req} finding naming {needle:?}: {:?}",
        c.failures
    );
}

#[rstest::rstest]
#[case::wrong_amount("wrong_amount", "AOC-CASE-001", Req::R003, "[effect_as_asked]")]
#[case::refund(
    "refund",
    "AOC-CASE-001",
    Req::R012,
    "[provider_accounting] … refunded"
)]
#[case::phantom_lookup(
    "phantom_lookup",
    "AOC-CASE-001",
    Req::R009,
    "[evidence_served] … lookup observation"
)]
#[case::conflict_flag(
    "conflict_flag",
    "AOC-CASE-001",
    Req::R009,
    "[state_matches_history] … over conflicting evidence"
)]
#[case::late_charge(
    "late_charge",
    "AOC-CASE-005",
    Req::R010,
    "[provider_accounting] … that no occurrence's key is"
)]
#[case::observer_charges("late_charge", "AOC-CASE-005", Req::R006, "[observer_reads_only]")]
#[case::domain_blank("domain_blank", "AOC-CASE-001", Req::R001, "[one_domain]")]
#[case::binding_drift("binding_drift", "AOC-CASE-001", Req::R003, "[binding_constant]")]
#[case::unbound_reply("unbound_reply", "AOC-CASE-004", Req::R007, "[responses_bound]")]
#[case::release_entered(
    "release_entered",
    "AOC-CASE-003",
    Req::R008,
    "[release_only_before_entry]"
)]
#[case::describe_supported(
    "describe_supported",
    "AOCHECK-COMP-01",
    Req::R013,
    "[composition_expected]"
)]
#[case::describe_no_bypass(
    "describe_no_bypass",
    "AOCHECK-BYPASS-01",
    Req::R001,
    "[bypass_disclosed]"
)]
#[case::recreate_after_expire(
    "recreate_after_expire",
    "AOC-CASE-008",
    Req::R010,
    "[one_effect_per_occurrence]"
)]
#[case::generation_back(
    "generation_back",
    "AOC-CASE-003",
    Req::R005,
    "[generations_together] … does not advance"
)]
#[case::hide_takeover(
    "hide_takeover",
    "AOC-CASE-005",
    Req::R006,
    "[generations_together] … never took the occurrence over"
)]
#[case::fail_over_paid(
    "fail_over_paid",
    "AOC-CASE-001",
    Req::R011,
    "[no_invented_outcome] … provider shows the payment succeeded"
)]
#[case::phantom_remedy(
    "phantom_remedy",
    "AOC-CASE-001",
    Req::R012,
    "[report_backed] … never links"
)]
#[case::phantom_source(
    "phantom_source",
    "AOC-CASE-001",
    Req::R009,
    "[report_backed] … never observed"
)]
#[case::wrong_ref(
    "wrong_ref",
    "AOC-CASE-001",
    Req::R003,
    "[evidence_served] … provider reference"
)]
#[case::other_report("other_report", "AOC-CASE-001", Req::R002, "report is about")]
#[case::lane_lie("lane_lie", "AOC-CASE-005", Req::R006, "[lane_matches_fence]")]
#[case::claim_unicode(
    "claim_unicode",
    "AOC-CASE-001",
    Req::R013,
    "Succession Receipt fences"
)]
#[case::claim_mixed("claim_mixed", "AOC-CASE-001", Req::R013, "mixes scripts")]
#[case::remedy_wrong(
    "remedy_wrong",
    "AOC-CASE-011",
    Req::R012,
    "[mutation_accounted] … moves no money back"
)]
#[case::refund_own_key(
    "refund_own_key",
    "AOC-CASE-001",
    Req::R012,
    "[mutation_accounted] … which is no remedy linked"
)]
#[case::hermes_extra(
    "hermes_extra",
    "HERMES-VERIFY-05",
    Req::R010,
    "no invoked or delegated"
)]
#[case::hermes_output(
    "hermes_output",
    "HERMES-VERIFY-05",
    Req::R011,
    "[result_from_provider]"
)]
#[case::claim_other("claim_other", "SEED003-B", Req::R005, "[claim_in_order] claimed")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_liar_fails_for_the_requirement_it_breaks(
    #[case] mode: &str,
    #[case] case: &str,
    #[case] req: Req,
    #[case] needle: &str,
) {
    assert_liar_fails(mode, case, req, needle, None).await;
}

/// The issue-37 liars on PostgreSQL too (the implementation's store is not their subject, but a
/// rule must hold on every store): each fails for its requirement, and honest caution passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_issue_37_liars_fail_on_postgres_too() {
    // Never a silent pass: without PostgreSQL this test fails and names the fix.
    let url = std::env::var(crate::support::POSTGRES_ENV).unwrap_or_else(|_| {
        panic!(
            "set {}=postgres://postgres@127.0.0.1:5432/test, or run scripts/test (it starts PostgreSQL and sets it)",
            crate::support::POSTGRES_ENV
        )
    });
    for (mode, case, req, needle) in [
        (
            "conflict_flag",
            "AOC-CASE-001",
            Req::R009,
            "over conflicting evidence",
        ),
        (
            "late_charge",
            "AOC-CASE-005",
            Req::R010,
            "that no occurrence's key is",
        ),
        (
            "generation_back",
            "AOC-CASE-003",
            Req::R005,
            "[generations_together]",
        ),
        (
            "hide_takeover",
            "AOC-CASE-005",
            Req::R006,
            "[generations_together]",
        ),
        (
            "fail_over_paid",
            "AOC-CASE-001",
            Req::R011,
            "provider shows the payment succeeded",
        ),
        (
            "phantom_remedy",
            "AOC-CASE-001",
            Req::R012,
            "[report_backed]",
        ),
        (
            "phantom_source",
            "AOC-CASE-001",
            Req::R009,
            "[report_backed]",
        ),
        (
            "remedy_refund",
            "AOC-CASE-011",
            Req::R004,
            "[entry_before_request]",
        ),
    ] {
        assert_liar_fails(mode, case, req, needle, Some(url.clone())).await;
    }
    let (r, _d) = run(
        &liar("caution_flags"),
        &["AOC-CASE-003"],
        Some(url),
        Duration::from_secs(10),
    )
    .await;
    let c = &r.cases[0];
    assert_eq!(c.verdict, Verdict::Pass, "{:?} {:?}", c.failures, c.harness);
}

/// The liars a harness error must stop, never judge: each case is `harness_error`, the message
/// names what the liar did, and no finding is credited to a liar that only looked.
/// - `lane_string`: a lane answer that is not a non-negative integer or `null` is a protocol
///   violation, never a generation 0 to judge by.
/// - `claims_vary`: one implementation, one self-description; a process whose `init` answer
///   differs from the first process's is a protocol violation naming both.
/// - `dead_key`: each process has its own provider credentials, revoked at its kill; a request
///   made with a killed process's credential proves the crash did not happen, whatever process
///   tree made it (here a successor borrows it). The honest counterpart is every protocol test
///   of the reference and the Python example: each uses the credential it was given and passes.
/// - `peek`: a look at the ground truth is enough; one refused request to a control route means
///   the case cannot pass (the harness reaches the fakes only in process).
/// - `fake_driven`: `clock: driven` is measured, not believed; a connector that says it but
///   waits in real time never sleeps on the case's clock, so its call runs into the request
///   deadline, and the harness error says why.
/// - `clock_push`: no implementation moves the case's clock at will; a sleep asked while no call
///   of the harness is in flight on the asker (an hour, after each answer) is refused and named.
#[rstest::rstest]
#[case::lane_string("lane_string", &["AOC-CASE-001"], 10, &["lane"], false)]
#[case::claims_vary("claims_vary", &["AOC-CASE-001", "HERMES-VERIFY-01"], 10, &["claims", "aocheck-observer"], false)]
#[case::dead_key("dead_key", &["AOC-CASE-003"], 10, &["after aocheck killed it"], false)]
#[case::peek("peek", &["AOC-CASE-001"], 10, &["/_control/ledger (refused)"], true)]
#[case::fake_driven("fake_driven", &["HERMES-VERIFY-05"], 3, &["never slept on the case's clock"], false)]
#[case::clock_push("clock_push", &["HERMES-VERIFY-05"], 10, &["it refused"], false)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_liar_a_harness_error_stops_is_named(
    #[case] mode: &str,
    #[case] cases: &[&str],
    #[case] timeout_secs: u64,
    #[case] needles: &[&str],
    #[case] no_findings: bool,
) {
    let (r, _d) = run(&liar(mode), cases, None, Duration::from_secs(timeout_secs)).await;
    assert_eq!(r.cases.len(), cases.len(), "{mode}");
    for c in &r.cases {
        assert_ne!(
            c.verdict,
            Verdict::Pass,
            "{mode} {}: {:?}",
            c.id,
            c.failures
        );
        assert_eq!(
            c.verdict,
            Verdict::HarnessError,
            "{mode} {}: {:?}",
            c.id,
            c.failures
        );
        if no_findings {
            assert!(c.failures.is_empty(), "{mode} {}: {:?}", c.id, c.failures);
        }
        let why = format!("{:?}", c.harness);
        for n in needles {
            assert!(why.contains(n), "{mode} {}: no {n:?} in {why}", c.id);
        }
    }
}

/// Claims are data (issue 37): a free-text claim, here a prohibited one reworded past any word
/// list, establishes nothing. The case that evaluates AOC-REQ-013 is `missing_knowledge` for
/// it, never a pass, and the claim is published verbatim for review; the same implementation
/// without it (the reference, statements only) passes that case (`protocol` tests).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn free_text_leaves_the_claim_requirement_undecided() {
    let (r, _d) = run(
        &liar("free_text"),
        &["AOCHECK-COMP-01"],
        None,
        Duration::from_secs(10),
    )
    .await;
    let c = &r.cases[0];
    assert_eq!(
        c.verdict,
        Verdict::MissingKnowledge,
        "{:?} {:?}",
        c.failures,
        c.harness
    );
    assert!(
        c.not_established.iter().any(|x| x == "AOC-REQ-013"),
        "{:?}",
        c.not_established
    );
    assert!(
        c.undecided.iter().any(|u| u.contains("free text")),
        "{:?}",
        c.undecided
    );
    assert!(
        r.implementation["claims"].as_array().is_some_and(|a| a
            .iter()
            .any(|x| x.as_str().is_some_and(|x| x.contains("sole master")))),
        "{}",
        r.implementation
    );
}

/// The judged party cannot read the judge (issue 37). Three ways to run it:
/// - `same_user`: aocheck makes itself non-dumpable, so an implementation running as the same
///   user (here `nobody`, switched to with `setpriv` when the test runs as root) cannot read
///   aocheck's environment or memory map, nor open its memory, through /proc;
/// - `sut_user`: aocheck runs as root and starts the implementation as `nobody`
///   (`--sut-user nobody`), which a root implementation could not be kept from;
/// - `root_both`: the control: both run as root, and the implementation reads all three, so
///   the log really tells what the implementation could reach.
///
/// The implementation (`tests/it/scripts/peek_judge.py`, then the reference) logs what it got;
/// the case itself passes. Before non-dumpable, the same-user run read all three.
#[rstest::rstest]
#[case::same_user("same_user")]
#[case::sut_user("sut_user")]
#[case::root_both("root_both")]
fn the_implementation_cannot_read_the_judge_s_memory(#[case] how: &str) {
    let root = rustix::process::geteuid().is_root();
    if how != "same_user" && !root {
        eprintln!("note: skipped: {how} needs the test to run as root");
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let log = dir.join("peek.log");
    // Everything the run needs is copied into the world-readable folder, so `nobody` can reach
    // it wherever the checkout lives (a home folder closed to other users, say).
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bin = dir.join("aocheck");
    std::fs::copy(env!("CARGO_BIN_EXE_aocheck"), &bin).expect("copy aocheck");
    let peek = dir.join("peek_judge.py");
    std::fs::copy(repo.join("tests/it/scripts/peek_judge.py"), &peek).expect("copy peek");
    let case = dir.join("AOC-CASE-001.yaml");
    std::fs::copy(
        repo.join("cases/aoc/AOC-CASE-001-normal-success.yaml"),
        &case,
    )
    .expect("copy the case");
    let sut = format!(
        "python3 '{}' '{}' sut reference",
        peek.display(),
        bin.display()
    );
    let mut cmd = if root && how == "same_user" {
        let mut c = std::process::Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&bin);
        c
    } else {
        std::process::Command::new(&bin)
    };
    cmd.arg("run")
        .arg("--cases")
        .arg(&case)
        .args(["--sut", &sut])
        .args(if how == "sut_user" {
            &["--sut-user", "nobody"][..]
        } else {
            &[]
        })
        .arg("--out")
        .arg(dir.join("run"))
        .env("AOCHECK_PEEK_LOG", &log)
        .env("HOME", dir)
        // The system's python3: a virtual environment under the checkout may be closed to `nobody`.
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .current_dir(dir);
    // The copy of the binary may still be open for writing in a process another test thread
    // forked meanwhile (ETXTBSY until that child execs): try again for a while.
    let mut tries = 0;
    let o = loop {
        match cmd.output() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < 100 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            r => break r.expect(
                "aocheck runs (setpriv, from util-linux, when the test runs as root: scripts/test checks it)",
            ),
        }
    };
    let said = format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(o.status.code(), Some(0), "{said}");
    let lines = std::fs::read_to_string(&log).expect("the implementation logged what it read");
    let mut seen = 0;
    for l in lines.lines() {
        let v: serde_json::Value = serde_json::from_str(l).expect("log line");
        assert!(
            v["judge"].is_u64(),
            "the implementation did not find aocheck: {v}"
        );
        for what in ["environ", "maps", "mem"] {
            if how == "root_both" {
                assert_ne!(v[what], "denied", "{what}: {v}\n{said}");
            } else {
                assert_eq!(v[what], "denied", "{what}: {v}\n{said}");
            }
        }
        seen += 1;
    }
    assert!(seen >= 2, "every process of the case tried: {lines}");
}

/// The judge stays reachable (issue 37): an implementation that opens 1,000 connections to
/// fake-payments at `init` and leaves them idle is judged like any other, even where aocheck
/// starts with the common soft limit of 1,024 open files (the fakes serve in aocheck's own
/// process, which raises its soft limit to the hard one). The relay logs how many connections
/// it really held, so the pass is earned only under the flood.
#[test]
fn a_thousand_idle_connections_do_not_cut_the_judge_off() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let log = tmp.path().join("idle.jsonl");
    let out = tmp.path().join("run");
    let sut = format!(
        "env AOCHECK_LIAR_LOG='{}' {}",
        log.display(),
        liar("idle_flood")
    );
    let o = std::process::Command::new("sh")
        .arg("-c")
        .arg("ulimit -Sn 1024 && exec \"$0\" run --case AOC-CASE-001 --sut \"$1\" --out \"$2\"")
        .arg(env!("CARGO_BIN_EXE_aocheck"))
        .arg(&sut)
        .arg(&out)
        .output()
        .expect("aocheck runs");
    let said = format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(o.status.code(), Some(0), "{said}");
    let held: serde_json::Value = serde_json::from_str(
        std::fs::read_to_string(&log)
            .expect("the relay logged its connections")
            .lines()
            .next()
            .expect("one line"),
    )
    .expect("log line");
    assert_eq!(held["idle"], 1000, "{said}");
}

/// Honest caution passes (issue 37, GUIDE §4): reports that raise missing knowledge no
/// observation raised (in aocheck's words and in their own) say less than their histories
/// allow, which is never an invented outcome, whether the occurrence ends resolved or not.
#[rstest::rstest]
#[case::resolved("AOC-CASE-001")]
#[case::unresolved("AOC-CASE-003")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn honest_caution_passes(#[case] case: &str) {
    let (r, _d) = run(
        &liar("caution_flags"),
        &[case],
        None,
        Duration::from_secs(10),
    )
    .await;
    let c = &r.cases[0];
    assert_eq!(c.verdict, Verdict::Pass, "{:?} {:?}", c.failures, c.harness);
    // The caution is published as said.
    assert!(
        c.occurrences
            .iter()
            .all(|o| o.missing_knowledge.iter().any(|f| f == "effect unknown")),
        "{:?}",
        c.occurrences
    );
}

/// Both sides of a refund under a remedy's key: `mutation_accounted` accounts it to the refund
/// remedy linked to the original (no finding of it), and the remedy's own history, which records
/// no provider entry, fails `entry_before_request` (issue 37: a refund under a remedy's key
/// while its history says "not entered"). The relay logs what the provider answered its refund,
/// so the finding is earned only if the refund was really made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refund_under_a_remedy_s_key_is_accounted_and_needs_the_remedy_s_entry() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let log = tmp.path().join("refunds.jsonl");
    let command = format!(
        "env AOCHECK_LIAR_LOG='{}' {}",
        log.display(),
        liar("remedy_refund")
    );
    let (r, _d) = run(&command, &["AOC-CASE-011"], None, Duration::from_secs(10)).await;
    let c = &r.cases[0];
    assert_eq!(c.verdict, Verdict::Fail, "{:?} {:?}", c.failures, c.harness);
    assert!(
        c.failures.iter().all(|f| f.requirement == Req::R004
            && f.msg.contains("[entry_before_request]")
            && f.msg.contains("records no provider entry")),
        "{:?}",
        c.failures
    );
    let made: Vec<serde_json::Value> = std::fs::read_to_string(&log)
        .expect("the relay logged its refund")
        .lines()
        .map(|l| serde_json::from_str(l).expect("log line"))
        .collect();
    assert!(
        made.iter().any(|m| m["status"] == 201),
        "no refund was made: {made:?}"
    );
}
