//! `aocheck explore`: seeded schedules judged by the invariants alone. Both directions: the
//! conforming reference (and each honest alternative) runs schedules with no finding, and every
//! broken variant is found, shrunk to a short case that fails on the variant and passes on the
//! reference when replayed from its file.

use aocheck::explore::schedule::Workload;
use aocheck::explore::{Exploration, ExploreOptions, explore};
use aocheck::reference::{Knobs, Variant};
use aocheck::report::model::Verdict;
use aocheck::runner::{RunOptions, run_suite};
use aocheck::store::AnyStore;
use rstest::rstest;
use std::sync::Arc;

fn memory() -> Arc<AnyStore> {
    Arc::new(AnyStore::Memory(aocheck::MemoryStore::new()))
}

fn options(knobs: Knobs, seed: u64, schedules: u64) -> ExploreOptions {
    ExploreOptions {
        workload: Workload::Aoc,
        seed,
        schedules: Some(schedules),
        time: None,
        shard: (1, 1),
        shrink_budget: 300,
        tries: 1,
        replays: 3,
        run: RunOptions {
            run_id: format!("explore-{}", uuid::Uuid::new_v4().simple()),
            seed,
            knobs,
            repro_store: None,
            sut: None,
            explore: true,
        },
        check_reference: true,
        stop_on_finding: true,
        jobs: 2,
    }
}

/// How many schedules the no-false-alarm tests run (the benchmark runs 10,000).
fn budget(default: u64) -> u64 {
    std::env::var("AOCHECK_EXPLORE_SCHEDULES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn no_finding(x: &Exploration, who: &str) {
    assert!(
        x.findings.is_empty(),
        "{who}: {:?}",
        x.findings
            .iter()
            .map(|f| format!("{} in schedule {}: {}", f.key, f.schedule, f.line))
            .collect::<Vec<_>>()
    );
    let undecided: u64 = x.undecided.values().sum();
    // Undecided schedules are counted, never passed; almost every schedule must be decided,
    // or the explorer explores nothing.
    assert!(
        undecided * 20 <= x.schedules,
        "{who}: {undecided} of {} schedules undecided: {:?}",
        x.schedules,
        x.undecided
    );
    assert_eq!(x.clean + undecided + x.unsupported, x.schedules);
    // Without faults that fired there was nothing to survive: no finding would then say nothing.
    let fired: u64 = x.coverage.faults.values().map(|c| c.fired).sum();
    assert!(
        fired * 4 >= x.schedules,
        "{who}: only {fired} faults fired in {} schedules: {:?}",
        x.schedules,
        x.coverage.faults
    );
    assert!(
        x.coverage
            .crash_points
            .iter()
            .any(|(k, c)| k.starts_with("while the provider holds") && c.fired > 0),
        "{who}: no executor was killed while the provider held its request: {:?}",
        x.coverage.crash_points
    );
}

#[rstest]
#[case::reference(Variant::Conforming)]
#[case::no_labels(Variant::NoLabels)]
#[case::release_and_tombstone(Variant::ReleaseAndTombstone)]
#[case::generic_failure_unresolved(Variant::GenericFailureUnresolved)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_honest_implementation_runs_schedules_without_a_finding(#[case] v: Variant) {
    let mut o = options(Knobs::broken(v, None), 1, budget(150));
    o.stop_on_finding = false;
    let x = explore(memory(), &o, &mut |_| {}).await;
    no_finding(&x, &format!("{v:?}"));
}

/// Explores a broken variant in process until the first finding, from `seed`.
async fn find(v: Variant, seed: u64, schedules: u64) -> Exploration {
    explore(
        memory(),
        &options(Knobs::broken(v, None), seed, schedules),
        &mut |_| {},
    )
    .await
}

/// What is wrong with the exploration of one broken variant (`None`: found, its shortest finding
/// shrunk to at most 8 steps, reproduced when its file is replayed, and passing on the
/// reference). `resend_after_forget` shows through two invariants: a second charge (9 steps,
/// each needed: a committed request whose reply was lost, a day, the provider forgetting, a
/// lookup, the entry sent again) and a race its re-entry loses (7 steps).
async fn explored(v: Variant) -> Option<String> {
    // Seeds 1, 2, 3 in turn, 400 schedules each, until one finds it in at most 8 steps. A
    // variant may show through more than one invariant: the shortest finding is the case a
    // person reads.
    let mut tried = Vec::new();
    let mut shortest: Option<aocheck::explore::Found> = None;
    for seed in 1..=3 {
        let x = find(v, seed, 400).await;
        tried.push((x.schedules, x.undecided.values().sum::<u64>()));
        if let Some(f) = x.findings.into_iter().min_by_key(|f| f.steps_after)
            && shortest
                .as_ref()
                .is_none_or(|s| f.steps_after < s.steps_after)
        {
            shortest = Some(f);
        }
        if shortest.as_ref().is_some_and(|f| f.steps_after <= 8) {
            break;
        }
    }
    let Some(f) = shortest else {
        return Some(format!(
            "{v:?}: no finding from seeds 1 to 3 (schedules and undecided per seed: {tried:?})"
        ));
    };
    if f.steps_after > 8 {
        return Some(format!(
            "{v:?}: {} shrunk only to {} steps",
            f.key, f.steps_after
        ));
    }
    if f.reproduced == 0 {
        return Some(format!(
            "{v:?}: the shrunk schedule never reproduced {}",
            f.key
        ));
    }
    (f.reference.as_deref() != Some("pass")).then(|| {
        format!(
            "{v:?}: the shrunk schedule for {} on the reference: {:?}",
            f.key, f.reference
        )
    })
}

/// Every broken variant, the combination-only ones included (the fixed suite passes those), two
/// at a time: a variant added to `Variant::BROKEN` or `Variant::COMBINATION` is explored without
/// a list to keep in step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_broken_variant_is_found_and_shrunk_to_a_short_case() {
    use futures_util::StreamExt;
    let variants: Vec<Variant> = Variant::BROKEN
        .into_iter()
        .chain(Variant::COMBINATION)
        .collect();
    let wrong: Vec<String> = futures_util::stream::iter(variants)
        .map(explored)
        .buffer_unordered(2)
        .filter_map(|w| async move { w })
        .collect()
        .await;
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shrunk_case_file_replays_with_aocheck_run() {
    let x = find(Variant::ReplayUnknown, 3, 400).await;
    let f = x.findings.first().expect("replay_unknown is found");
    let dir = tempfile::tempdir().expect("tempdir");
    let o = options(Knobs::default(), 3, 1);
    aocheck::explore::report::write(dir.path(), &x, &o, "memory").expect("write");
    let file = dir.path().join("found").join(&f.case_file);
    let (cases, defects) = aocheck::case::load(&file);
    assert!(defects.is_empty(), "{defects:?}");
    assert_eq!(cases.len(), 1);
    let run = |knobs: Knobs| {
        let cases = cases.clone();
        async move {
            let opts = RunOptions {
                run_id: format!("replay-{}", uuid::Uuid::new_v4().simple()),
                seed: 3,
                knobs,
                repro_store: None,
                sut: None,
                explore: false,
            };
            run_suite(&cases, memory(), &opts, &mut |_| {}).await
        }
    };
    let broken = run(Knobs::broken(Variant::ReplayUnknown, None)).await;
    assert_eq!(
        broken.cases[0].verdict,
        Verdict::Fail,
        "{:?}",
        broken.cases[0]
    );
    // The reproduction names the file: the case is not in the shipped folder.
    let repro = &broken.cases[0].repro;
    assert!(
        repro.starts_with("aocheck run --cases ") && repro.contains(&f.case_file),
        "{repro}"
    );
    assert!(
        broken.cases[0]
            .failures
            .iter()
            .any(|g| g.requirement == f.key.requirement),
        "{:?}",
        broken.cases[0].failures
    );
    let reference = run(Knobs::default()).await;
    assert_eq!(
        reference.cases[0].verdict,
        Verdict::Pass,
        "{:?} {:?}",
        reference.cases[0].failures,
        reference.cases[0].harness
    );
    // The report names it and the coverage table is there.
    let summary = std::fs::read_to_string(dir.path().join("summary.md")).expect("summary");
    assert!(summary.contains(&f.case_file) && summary.contains("## Coverage"));
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("explore.json")).expect("json"),
    )
    .expect("explore.json parses");
    assert_eq!(json["schema"], "aocheck-explore/1");
    assert_eq!(
        json["findings"][0]["key"]["requirement"],
        f.key.requirement.id()
    );
}

/// Through `aocheck-sut/2`: the reference's processes, broken and not.
fn process(variant: &str, dir: &std::path::Path) -> aocheck::sut::processes::ProcessSpec {
    aocheck::sut::processes::ProcessSpec {
        command: format!(
            "'{}' sut reference --variant {variant}",
            env!("CARGO_BIN_EXE_aocheck")
        ),
        timeout: std::time::Duration::from_secs(20),
        dir: dir.into(),
        postgres: None,
        user: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_the_protocol_a_broken_variant_is_found_and_the_reference_is_clean() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut o = options(Knobs::default(), 2, 200);
    o.run.sut = Some(process("replay_unknown", dir.path()));
    let x = explore(memory(), &o, &mut |_| {}).await;
    let f = x.findings.first().unwrap_or_else(|| {
        panic!(
            "replay_unknown through the protocol: no finding in {} schedules ({:?})",
            x.schedules, x.undecided
        )
    });
    assert!(f.steps_after <= 8, "{} → {} steps", f.key, f.steps_after);
    assert!(f.reproduced >= 1);
    assert_eq!(f.reference.as_deref(), Some("pass"), "{}", f.key);
    assert!(
        x.operations
            .as_ref()
            .is_some_and(|o| o.iter().any(|n| n == "execute")),
        "the declared operations were learned: {:?}",
        x.operations
    );
    // 100 schedules: seed 2 kills an executor while the provider holds its request (and then
    // commits) first in its 61st to 100th.
    let mut o = options(Knobs::default(), 2, budget(100));
    o.run.sut = Some(process("conforming", dir.path()));
    o.stop_on_finding = false;
    let x = explore(memory(), &o, &mut |_| {}).await;
    no_finding(&x, "the reference through the protocol");
}

/// Two combination-only defects (which the fixed suite passes) through `aocheck-sut/2`, two at a
/// time: found, shrunk to at most 8 steps, reproduced, and passing on the reference. In process,
/// every one is explored above; `benches/explore-find.sh` runs the full table through the
/// protocol (every variant, five seeds each, 60 s each, release build).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn combination_only_defects_are_found_through_the_protocol() {
    use futures_util::StreamExt;
    let picked = [
        (Variant::SuccessorReads5xxAsFailed, 1u64),
        (Variant::RebindAfterTakeover, 1),
    ];
    let wrong: Vec<String> = futures_util::stream::iter(picked)
        .map(|(v, seed)| {
            async move {
                // A folder (and so a store) of its own: two explorations at once must not share
                // a lane.
                let dir = tempfile::tempdir().expect("tempdir");
                let name = serde_json::to_value(v)
                    .ok()
                    .and_then(|n| n.as_str().map(str::to_string))
                    .expect("a variant has a name");
                let mut o = options(Knobs::default(), seed, 400);
                o.run.sut = Some(process(&name, dir.path()));
                let x = explore(memory(), &o, &mut |_| {}).await;
                // A variant may show through more than one invariant: the shortest finding is the case a
                // person reads.
                let Some(f) = x.findings.iter().min_by_key(|f| f.steps_after) else {
                    return Some(format!(
                        "{name}, seed {seed}: no finding in {} schedules ({:?})",
                        x.schedules, x.undecided
                    ));
                };
                let ok = f.steps_after <= 8
                    && f.reproduced >= 1
                    && f.reference.as_deref() == Some("pass");
                (!ok).then(|| {
                format!(
                    "{name}, seed {seed}: {} shrunk to {} steps, reproduced {}/{}, reference {:?}",
                    f.key, f.steps_after, f.reproduced, f.replays, f.reference
                )
            })
            }
        })
        .buffer_unordered(2)
        .filter_map(|w| async move { w })
        .collect()
        .await;
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn the_command_writes_its_report_and_refuses_bad_flags() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("x");
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_aocheck"))
            .args(args)
            .current_dir(dir.path())
            .output()
            .expect("aocheck runs")
    };
    let ok = run(&[
        "explore",
        "--seed",
        "4",
        "--schedules",
        "8",
        "--store",
        "memory",
        "--out",
        out.to_str().expect("utf-8 path"),
    ]);
    let stdout = String::from_utf8_lossy(&ok.stdout);
    assert_eq!(ok.status.code(), Some(0), "{stdout}");
    assert!(stdout.starts_with("aocheck: explore seed 4"), "{stdout}");
    for f in ["explore.json", "summary.md", "junit.xml"] {
        assert!(out.join(f).is_file(), "{f}");
    }
    // A folder another run is writing is refused (their per-case stores would collide).
    let busy = dir.path().join("busy");
    std::fs::create_dir_all(&busy).expect("mkdir");
    let lock = std::fs::File::create(busy.join(".aocheck.lock")).expect("lock file");
    lock.try_lock().expect("the test holds the lock");
    let second = run(&[
        "explore",
        "--schedules",
        "2",
        "--store",
        "memory",
        "--out",
        busy.to_str().expect("utf-8 path"),
    ]);
    let err = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(3), "{err}");
    assert!(
        err.contains("another aocheck run is writing this folder"),
        "{err}"
    );
    drop(lock);
    // An implementation that cannot start is said at once (exit 4), not explored for its budget.
    let dead = run(&[
        "explore",
        "--sut",
        "sh -c 'echo no such implementation >&2; exit 3'",
        "--schedules",
        "500",
        "--out",
        dir.path().join("dead").to_str().expect("utf-8 path"),
    ]);
    let err = String::from_utf8_lossy(&dead.stderr);
    assert_eq!(dead.status.code(), Some(4), "{err}");
    assert!(
        err.contains("could not be started") && err.contains("no such implementation"),
        "{err}"
    );
    for (args, flag) in [
        (vec!["explore", "--shard", "0/2"], "--shard"),
        (vec!["explore", "--time", "1d"], "--time"),
        (vec!["explore", "--workload", "nope"], "--workload"),
        (vec!["explore", "--schedules", "0"], "--schedules"),
        (vec!["explore", "--jobs", "0"], "--jobs"),
    ] {
        let r = run(&args);
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(3), "{args:?}: {err}");
        assert!(err.contains(flag), "{args:?}: {err}");
        // A refused command makes no output folder.
        assert!(
            !dir.path().join("reports").exists(),
            "{args:?} left an output folder"
        );
    }
}

/// Schedules run at once are taken in order: one at a time or three, the same exploration
/// (schedules, counts, coverage, findings and their shrunk cases). A crash at a hold counts as
/// landed only on the request that hold parked (D67: a stray `client_gone` of another request,
/// which depends on timing, once made the counts differ under load).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_report_does_not_depend_on_how_many_schedules_run_at_once() {
    let run = async |jobs: usize| {
        let mut o = options(Knobs::broken(Variant::ReplayUnknown, None), 1, 40);
        o.stop_on_finding = false;
        o.jobs = jobs;
        explore(memory(), &o, &mut |_| {}).await
    };
    // What the exploration decided: schedules, counts, coverage and each finding with its
    // shrunk case's steps and configuration (its description quotes the ids minted).
    let seen = |x: &aocheck::explore::Exploration| {
        let found = x
            .findings
            .iter()
            .map(|f| {
                let case = f.case.as_ref().map(|c| (c.steps.clone(), c.config.clone()));
                (
                    f.key.to_string(),
                    f.schedule,
                    f.schedules,
                    f.steps_after,
                    case,
                )
            })
            .collect::<Vec<_>>();
        format!(
            "indices {:?}\nclean {} undecided {:?} unsupported {}\ncoverage {:?}\nfindings {found:?}",
            x.indices, x.clean, x.undecided, x.unsupported, x.coverage
        )
    };
    // Under heavy load (the whole suite on two cores) a crash at a hold has been seen to land
    // in one exploration and not in another of the same schedules, about once in 40 runs,
    // whatever the number of jobs (D67, open). A pair that differs is run again once: a
    // dependence on the number of jobs differs both times; the first difference is printed.
    let mut differed = None;
    for attempt in 1..=2 {
        let (one, three) = (run(1).await, run(3).await);
        assert!(
            !one.findings.is_empty(),
            "replay_unknown found in 40 schedules"
        );
        let (a, b) = (seen(&one), seen(&three));
        if a == b {
            if let Some(d) = differed {
                eprintln!("attempt 1 differed (load, not jobs: attempt {attempt} agreed):\n{d}");
            }
            return;
        }
        let lines = a
            .lines()
            .zip(b.lines())
            .filter(|(x, y)| x != y)
            .map(|(x, y)| format!("one:   {x}\nthree: {y}"))
            .collect::<Vec<_>>()
            .join("\n");
        differed = Some(lines);
    }
    panic!(
        "one at a time and three at once differ in two attempts; the second:\n{}",
        differed.unwrap_or_default()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_split_a_seed_into_disjoint_parts() {
    let mut seen = std::collections::BTreeMap::new();
    for k in 1..=3u64 {
        let mut o = options(Knobs::default(), 6, 4);
        o.shard = (k, 3);
        o.stop_on_finding = false;
        let x = explore(memory(), &o, &mut |_| {}).await;
        assert_eq!(x.schedules, 4);
        for i in &x.indices {
            assert_eq!(i % 3, k - 1, "shard {k}/3 ran schedule {i}");
            assert!(seen.insert(*i, k).is_none(), "schedule {i} ran twice");
        }
    }
    assert_eq!(seen.len(), 12);
}
