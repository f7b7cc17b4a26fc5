//! `aocheck explore --workload hermes`: both directions for the operator connector. The
//! reference connector runs Hermes schedules with no finding (faults that fired, instances
//! killed, also while fake-hermes held their start); every connector defect is found by
//! exploring, shrunk to a short case that reproduces and that the reference passes; and
//! `restart_takes_own_claim`, which only a combination shows, passes the whole fixed suite and is
//! found from five seeds.

use aocheck::case::{Case, Step};
use aocheck::explore::schedule::{Workload, generate};
use aocheck::explore::{Exploration, ExploreOptions, Outcome, explore, outcome, run_schedule};
use aocheck::operator::connector::ConnectorDefect;
use aocheck::reference::{Knobs, Variant};
use aocheck::report::model::{CaseReport, Verdict};
use aocheck::runner::{RunOptions, run_suite};
use aocheck::store::AnyStore;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

fn memory() -> Arc<AnyStore> {
    Arc::new(AnyStore::Memory(aocheck::MemoryStore::new()))
}

fn run_options(knobs: Knobs, seed: u64, explore: bool) -> RunOptions {
    RunOptions {
        run_id: format!("explore-hermes-{}", uuid::Uuid::new_v4().simple()),
        seed,
        knobs,
        repro_store: None,
        sut: None,
        explore,
    }
}

/// Explores the Hermes workload with a connector defect (`None`: the reference), from `seed`,
/// until the first finding.
fn exploring(defect: Option<ConnectorDefect>, seed: u64) -> ExploreOptions {
    ExploreOptions {
        workload: Workload::Hermes,
        seed,
        schedules: Some(400),
        time: None,
        shard: (1, 1),
        shrink_budget: 300,
        tries: 1,
        replays: 5,
        run: run_options(Knobs::broken(Variant::Conforming, defect), seed, true),
        check_reference: true,
        stop_on_finding: true,
        jobs: 2,
    }
}

/// What one schedule's run showed of the Hermes faults (from its case report and its steps).
#[derive(Debug, Default)]
struct Fired {
    /// Hermes fault rules that fired, by route and kind (`start hold`, `stop stop_stuck` …).
    faults: BTreeMap<String, u64>,
    /// Connector instances killed.
    kills: u64,
    /// Kills of the instance whose start fake-hermes held (the hold fired and was waited for).
    kills_at_hold: u64,
    /// Steps on an instance after it was killed (it started again).
    restarts: u64,
}

impl Fired {
    fn add(&mut self, c: &Case, r: &CaseReport) {
        for f in r.faults.iter().filter(|f| f.fired) {
            if let Some(rest) = f.what.strip_prefix("hermes ") {
                // `hermes <route> <fault>(args)`: counted by route and kind.
                let kind = rest.split('(').next().unwrap_or(rest).to_string();
                *self.faults.entry(kind).or_default() += 1;
            } else if f.what.starts_with("kill connector ") {
                self.kills += 1;
            }
        }
        let hold_fired = |name: &str| {
            r.faults
                .iter()
                .any(|f| f.fired && f.what == format!("hermes start hold({name})"))
        };
        let mut parked: Option<&str> = None;
        let mut killed: Vec<&str> = Vec::new();
        for s in &c.steps {
            match s {
                Step::HermesWaitParked { hold } => parked = Some(hold),
                Step::HermesRelease { .. } => parked = None,
                Step::OperatorKill { instance } => {
                    if parked.is_some_and(hold_fired) {
                        self.kills_at_hold += 1;
                    }
                    killed.push(instance);
                }
                Step::OperatorInvoke { instance, .. }
                | Step::OperatorCancel { instance, .. }
                | Step::OperatorDelegate { instance, .. } => {
                    let me = instance.as_deref().unwrap_or("p1");
                    if let Some(at) = killed.iter().position(|k| *k == me) {
                        killed.remove(at);
                        self.restarts += 1;
                    }
                }
                _ => {}
            }
        }
    }
}

/// The reference connector: no finding over the schedules, almost all decided, with Hermes
/// faults of every route that fired, instances killed (also while fake-hermes held their start)
/// and started again. The schedules are run one by one as `explore` runs them
/// (`run_schedule`, judged by `outcome`), so that each case report can be counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_connector_runs_hermes_schedules_without_a_finding() {
    let store = memory();
    let o = run_options(Knobs::default(), 1, true);
    // `AOCHECK_EXPLORE_SCHEDULES` runs more (or fewer).
    let n: u64 = std::env::var("AOCHECK_EXPLORE_SCHEDULES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(150);
    let mut fired = Fired::default();
    let (mut clean, mut undecided) = (0u64, Vec::new());
    let mut found = Vec::new();
    for index in 0..n {
        let c = generate(Workload::Hermes, 1, index, None);
        let r = run_schedule(&store, &c, &o, index).await;
        fired.add(&c, &r);
        match outcome(&r) {
            Outcome::Clean => clean += 1,
            Outcome::Found { key, step, line } => {
                found.push(format!("schedule {index}, step {step:?}: {key}: {line}"))
            }
            Outcome::Undecided(why) | Outcome::Unsupported(why) => {
                undecided.push(format!("schedule {index}: {why}"))
            }
        }
    }
    println!(
        "{n} schedules: {clean} clean, {} undecided; Hermes faults fired: {:?}; {} kills, {} while the start was held; {} restarts",
        undecided.len(),
        fired.faults,
        fired.kills,
        fired.kills_at_hold,
        fired.restarts
    );
    assert!(found.is_empty(), "{found:#?}");
    assert!(
        undecided.len() as u64 * 20 <= n,
        "{} of {n} schedules undecided: {undecided:#?}",
        undecided.len()
    );
    assert_eq!(clean + undecided.len() as u64, n);
    let total: u64 = fired.faults.values().sum();
    assert!(
        total >= n,
        "only {total} Hermes faults fired in {n} schedules"
    );
    for kind in [
        "start hold",
        "start commit_then",
        "start commit_then_drop",
        "start reject",
        "events events_404",
        "approval commit_then",
        "stop stop_stuck",
        "stop complete_races_stop",
    ] {
        assert!(
            fired.faults.get(kind).is_some_and(|c| *c > 0),
            "{kind} never fired: {:?}",
            fired.faults
        );
    }
    assert!(
        fired.kills_at_hold * 10 >= n && fired.kills >= fired.kills_at_hold,
        "{} kills, {} of them while fake-hermes held the start, in {n} schedules",
        fired.kills,
        fired.kills_at_hold
    );
    assert!(fired.restarts > 0, "no killed instance started again");
}

/// What is wrong with the exploration of one connector defect from seed 1 (`None`: found,
/// shrunk to at most 8 steps, reproduced when its file is replayed, and passing on the
/// reference).
async fn explored(defect: ConnectorDefect) -> Option<String> {
    let x = explore(memory(), &exploring(Some(defect), 1), &mut |_| {}).await;
    judged(defect, &x)
}

fn judged(defect: ConnectorDefect, x: &Exploration) -> Option<String> {
    // The finding the exploration stopped at: the first that a replay reproduced (one that
    // none did is reported beside it, and the exploration went on).
    let Some(f) = x
        .findings
        .iter()
        .find(|f| f.reproduced > 0)
        .or(x.findings.first())
    else {
        return Some(format!(
            "{defect:?}: nothing found in {} schedules (undecided: {:?})",
            x.schedules, x.undecided
        ));
    };
    // A pass there: never a finding, undecided or missing knowledge.
    let on_reference: &[&str] = &["pass"];
    let wrong: Vec<String> = [
        (f.steps_after > 8).then(|| format!("{} steps after shrinking", f.steps_after)),
        (f.reproduced == 0).then(|| format!("reproduced 0 of {} replays", f.replays)),
        (!f.reference
            .as_deref()
            .is_some_and(|v| on_reference.contains(&v)))
        .then(|| format!("{:?} on the reference", f.reference)),
    ]
    .into_iter()
    .flatten()
    .collect();
    (!wrong.is_empty()).then(|| format!("{defect:?}, {}: {}", f.key, wrong.join("; ")))
}

/// Every connector defect of the fixed suite, two at a time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_connector_defect_is_found_and_shrunk_to_a_short_case() {
    use futures_util::StreamExt;
    let wrong: Vec<String> = futures_util::stream::iter(ConnectorDefect::FIXED)
        .map(explored)
        .buffer_unordered(2)
        .filter_map(|w| async move { w })
        .collect()
        .await;
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// `restart_takes_own_claim` needs a combination no fixed case builds (a kill while fake-hermes
/// holds the start, then a replay on the restarted instance): the whole fixed suite passes with
/// it, on a durable store so that every case runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_takes_own_claim_passes_the_whole_fixed_suite() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(AnyStore::Sqlite(
        aocheck::store::sqlite::SqliteStore::open(dir.path().join("store.db")).expect("sqlite"),
    ));
    let (cases, defects) = aocheck::case::load(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("cases")
            .as_path(),
    );
    assert!(defects.is_empty(), "{defects:?}");
    assert!(cases.iter().any(|c| c.case.id.starts_with("HERMES-")));
    let knobs = Knobs::broken(
        Variant::Conforming,
        Some(ConnectorDefect::RestartTakesOwnClaim),
    );
    let r = run_suite(&cases, store, &run_options(knobs, 7, false), &mut |_| {}).await;
    let not_passed: Vec<_> = r
        .cases
        .iter()
        .filter(|c| c.verdict != Verdict::Pass)
        .map(|c| (&c.id, c.verdict, &c.failures, &c.harness))
        .collect();
    assert!(not_passed.is_empty(), "{not_passed:#?}");
    assert_eq!(r.cases.len(), cases.len());
}

/// … and exploring finds it from five seeds, each within 60 s of exploring in process, shrunk
/// to at most 8 steps: a kill during a held start and a replay by the restarted instance.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_takes_own_claim_is_found_from_five_seeds() {
    let defect = ConnectorDefect::RestartTakesOwnClaim;
    for seed in 1..=5 {
        let mut o = exploring(Some(defect), seed);
        o.schedules = None;
        o.time = Some(Duration::from_secs(60));
        let x = explore(memory(), &o, &mut |_| {}).await;
        if let Some(wrong) = judged(defect, &x) {
            panic!("seed {seed}: {wrong}");
        }
        let f = &x.findings[0];
        println!(
            "seed {seed}: found after {:?} schedules, {} ms in all, {} -> {} steps",
            x.schedules_to_first, x.millis, f.steps_before, f.steps_after
        );
        assert_eq!(
            (f.key.checker.as_str(), f.key.requirement.id()),
            ("one_run_per_action", "AOC-REQ-010"),
            "seed {seed}: {}",
            f.line
        );
        // The core of it: the instance killed while its start was held is the one that replays.
        let case = f
            .case
            .as_ref()
            .expect("a finding of this run carries its shrunk case");
        let steps = &case.steps;
        let killed = steps.iter().enumerate().find_map(|(i, s)| match s {
            Step::OperatorKill { instance } => Some((i, instance.as_str())),
            _ => None,
        });
        let replayed_by_it = killed.is_some_and(|(at, me)| {
            steps[at..].iter().any(|s| {
                matches!(s, Step::OperatorInvoke { instance, .. }
                    if instance.as_deref().unwrap_or("p1") == me)
            })
        });
        assert!(
            killed.is_some() && replayed_by_it,
            "seed {seed}: {}",
            aocheck::explore::yaml::case(case)
        );
    }
}

/// The same seed gives the same Hermes schedules, byte for byte; `all` alternates the workloads
/// by index; the names parse.
#[test]
fn hermes_schedules_repeat_byte_for_byte() {
    for index in 0..40 {
        let a = aocheck::explore::yaml::case(&generate(Workload::Hermes, 5, index, None));
        let b = aocheck::explore::yaml::case(&generate(Workload::Hermes, 5, index, None));
        assert_eq!(a, b, "schedule {index}");
        let all = generate(Workload::All, 5, index, None);
        let same = if index % 2 == 1 {
            generate(Workload::Hermes, 5, index, None)
        } else {
            generate(Workload::Aoc, 5, index, None)
        };
        assert_eq!(all, same, "schedule {index} of all");
    }
    assert_ne!(
        generate(Workload::Hermes, 5, 0, None),
        generate(Workload::Hermes, 6, 0, None)
    );
    for name in ["aoc", "hermes", "all"] {
        assert_eq!(Workload::parse(name).map(Workload::name), Some(name));
    }
}

/// `expect: any` on an operator step, both directions: a resume of an Action that is not
/// waiting for approval fails; without `any` that failure is a finding (the step demanded a
/// success), with `any` it is not (only the invariants judge, and they examined the runs).
/// The validator accepts `any` alone and refuses anything else there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_step_that_expects_any_is_judged_by_the_invariants_alone() {
    let text = |expect: &str| {
        format!(
            "id: ANY-1\ntitle: t\nrequirements: [AOC-REQ-010]\nsteps:\n  - {{do: operator_invoke, action: a1, objective: x}}\n  - {{do: operator_invoke, action: r1, resume: a1, choice: once{expect}}}\n"
        )
    };
    let run = |yaml: String| async move {
        let c: Case = serde_saphyr::from_str(&yaml).expect("case");
        assert!(aocheck::case::validate("ANY-1-x.yaml", &c).is_empty());
        let lc = aocheck::case::LoadedCase {
            path: "ANY-1-x.yaml".into(),
            checked: aocheck::case::Checked::of(&c).ok(),
            case: c,
            bytes: Vec::new(),
        };
        let o = run_options(Knobs::default(), 1, false);
        aocheck::runner::run_case(memory(), &lc, &o, &mut |_| {}).await
    };
    let judged = run(text("")).await;
    assert_eq!(judged.verdict, Verdict::Fail, "{:?}", judged.failures);
    assert!(
        judged.failures[0].msg.contains("operator_result_expected"),
        "{:?}",
        judged.failures
    );
    let any = run(text(", expect: any")).await;
    assert_eq!(
        any.verdict,
        Verdict::Pass,
        "{:?} {:?}",
        any.failures,
        any.harness
    );
    for (bad, field) in [
        (", expect: refused", "expect"),
        (", expect: any, error: operator_policy", "expect"),
    ] {
        let c: Case = serde_saphyr::from_str(&text(bad)).expect("case");
        let d = aocheck::case::validate("ANY-1-x.yaml", &c);
        assert!(d.iter().any(|x| x.field.ends_with(field)), "{bad}: {d:?}");
    }
}

/// What exploring found in the reference connector (fixed): a stop stuck in `stopping` ends the
/// cancel's grace as `outcome_unknown`, and the background invocation still polling the run then
/// saw `stopping` and wrote the binding back to `cancelling` (`unresolved_kept`, AOC-REQ-005).
/// The reference now keeps it unresolved. (With the binding moved back, as before the fix, this
/// case's first finding is `unresolved_kept` at its step 5.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unresolved_cancel_stays_unresolved_while_the_run_is_stopping() {
    let yaml = "id: EXPLORE-STUCK-1\ntitle: t\nrequirements: [AOC-REQ-005]\nsteps:\n  - {do: hermes_script, script: {steps: [{id: t, kind: tool, tool: search, duration_ms: 5000}, {id: m, kind: message, text: done, after: [t]}]}}\n  - {do: operator_invoke, action: a1, objective: x, background: true, instance: p3, expect: any}\n  - {do: operator_wait_bound, action: a1}\n  - {do: hermes_fault, route: stop, fault: {type: stop_stuck}}\n  - {do: operator_cancel, action: a1, instance: p2, expect: any}\n  - {do: operator_invoke, action: a2, objective: two, instance: p2, expect: any}\n  - {do: operator_kill, instance: p3}\n";
    let c: Case = serde_saphyr::from_str(yaml).expect("case");
    assert!(aocheck::explore::hermes::fair(&c.steps));
    let store = memory();
    for attempt in 0..5 {
        let r = run_schedule(&store, &c, &run_options(Knobs::default(), 1, true), attempt).await;
        assert_eq!(outcome(&r), Outcome::Clean, "{:?}", r.steps);
    }
}

/// The command: `--workload hermes` and `--workload all` explore and write their report.
#[test]
fn the_command_explores_the_hermes_workload() {
    for workload in ["hermes", "all"] {
        let dir = tempfile::tempdir().expect("tempdir");
        let out = dir.path().join("x");
        let r = std::process::Command::new(env!("CARGO_BIN_EXE_aocheck"))
            .args([
                "explore",
                "--workload",
                workload,
                "--seed",
                "4",
                "--schedules",
                "6",
                "--store",
                "memory",
                "--out",
                out.to_str().expect("utf-8 path"),
            ])
            .output()
            .expect("aocheck runs");
        let stdout = String::from_utf8_lossy(&r.stdout);
        assert_eq!(r.status.code(), Some(0), "{workload}: {stdout}");
        let json: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(out.join("explore.json")).expect("explore.json"),
        )
        .expect("explore.json parses");
        assert_eq!(json["workload"], workload);
        assert_eq!(json["schedules"], 6, "{json}");
    }
}

/// Through `aocheck-sut/2`: connector instances are processes, and a kill is a SIGKILL. The
/// reference's processes run Hermes schedules without a finding; with `restart_takes_own_claim`
/// the combination is found and shrunk as in process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_the_protocol_the_hermes_workload_finds_the_combination_defect() {
    let dir = tempfile::tempdir().expect("tempdir");
    let process = |variant: &str| aocheck::sut::processes::ProcessSpec {
        command: format!(
            "'{}' sut reference --variant {variant}",
            env!("CARGO_BIN_EXE_aocheck")
        ),
        timeout: Duration::from_secs(20),
        dir: dir.path().into(),
        postgres: None,
        user: None,
    };
    let mut o = exploring(None, 2);
    o.schedules = Some(30);
    o.stop_on_finding = false;
    o.run.sut = Some(process("conforming"));
    let x = explore(memory(), &o, &mut |_| {}).await;
    assert!(x.findings.is_empty(), "{:?}", x.findings);
    assert_eq!(x.clean, x.schedules, "{:?}", x.undecided);
    let mut o = exploring(None, 1);
    o.run.sut = Some(process("restart_takes_own_claim"));
    let x = explore(memory(), &o, &mut |_| {}).await;
    if let Some(wrong) = judged(ConnectorDefect::RestartTakesOwnClaim, &x) {
        panic!("{wrong}");
    }
}
