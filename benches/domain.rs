//! Throughput of the coordination domain on each store, beside the bare durable-commit rate of the
//! same store in the same run (the physical limit).
//!
//! For each store and each concurrency level (1, 4, 16 executors, each holding its own lane's
//! lease) it runs full occurrence lifecycles (create → reserve → enter → authoritative success
//! evidence: four durable transitions) for a fixed time, then the same number of workers doing
//! bare commits (one row inserted and committed) for the same time. One JSON object per line.
//!
//! `cargo bench --bench domain` runs memory and SQLite; set `AOCHECK_BENCH_POSTGRES_URL` to add
//! PostgreSQL; `AOCHECK_BENCH_SECONDS` sets the time per measurement (default 2);
//! `AOCHECK_BENCH_STORES=sqlite,postgres` limits the stores measured;
//! `AOCHECK_BENCH_EXECUTORS=1,16` the concurrency levels (default 1, 4, 16);
//! `AOCHECK_BENCH_DIR=DIR` keeps the SQLite database in a new folder under `DIR`.

use aocheck::aoc::binding::{EvidenceBinding, ProviderBinding};
use aocheck::aoc::domain::CreateRequest;
use aocheck::aoc::ids::{ExecutorId, LaneId};
use aocheck::aoc::profile::{
    Evidence, EvidenceKind, NativeResult, ProviderProfile, SourceKind, StatusClass, StatusMapping,
    StatusSource,
};
use aocheck::digest::Digest;
use aocheck::store::{AnyStore, StoreSpec};
use aocheck::{Clock, Domain, DomainConfig, SystemClock};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const TRANSITIONS_PER_LIFECYCLE: u64 = 4;

/// Time spent in each transition of the lifecycle (create, reserve, enter, evidence), summed over
/// every executor, in nanoseconds: where a transition's time goes, printed as a mean per call.
static STEP_NS: [AtomicU64; 4] = [const { AtomicU64::new(0) }; 4];

/// Runs `f` and adds its wall time to step `i`.
async fn timed<T>(i: usize, f: impl std::future::Future<Output = T>) -> T {
    let t = Instant::now();
    let out = f.await;
    STEP_NS[i].fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
    out
}

fn profile() -> ProviderProfile {
    ProviderProfile {
        id: "bench".into(),
        version: "1".into(),
        provider: "bench".into(),
        account_authority: "bench".into(),
        environments: vec!["test".into()],
        status_sources: vec![StatusSource {
            id: "get".into(),
            pin: "none".into(),
            kind: SourceKind::Lookup,
        }],
        lookup_key: "key".into(),
        key_rule: "key = occurrence".into(),
        retention_ms: None,
        freshness_ms: 600_000,
        complete_listing_proves_absence: false,
        mapping: BTreeMap::from([
            (
                "ok".to_string(),
                StatusMapping {
                    class: StatusClass::Success,
                    proves_no_effect: false,
                },
            ),
            (
                "pending".to_string(),
                StatusMapping {
                    class: StatusClass::Accepted,
                    proves_no_effect: false,
                },
            ),
        ]),
        final_failure_proves_no_effect: false,
    }
}

fn binding(tag: &str) -> ProviderBinding {
    ProviderBinding {
        profile_id: "bench".into(),
        profile_version: "1".into(),
        account: "acct".into(),
        environment: "test".into(),
        request_digest: Digest::of_bytes(tag.as_bytes()),
        key_rule: "key = occurrence".into(),
        native_key: Some(tag.to_string()),
        status_source: "get".into(),
    }
}

async fn lifecycle(
    d: &Domain<AnyStore>,
    h: &aocheck::aoc::Holder,
    tag: &str,
) -> Result<(), String> {
    let b = binding(tag);
    let occ = timed(
        0,
        d.create(
            h,
            CreateRequest {
                creation_key: tag.to_string(),
                request_digest: b.request_digest.clone(),
                labels: Default::default(),
            },
        ),
    )
    .await
    .map_err(|e| e.to_string())?;
    let tok = timed(1, d.reserve(h, &occ, &b, 1))
        .await
        .map_err(|e| e.to_string())?;
    timed(2, d.enter(h, &occ, &tok, &b))
        .await
        .map_err(|e| e.to_string())?;
    let ev = Evidence {
        source: "get".into(),
        kind: EvidenceKind::StatusQuery,
        observed_at: SystemClock.now(),
        authenticated: true,
        bound_to: EvidenceBinding::matching(&b, Some(&format!("ref-{tag}"))),
        native: NativeResult::Status { label: "ok".into() },
        native_digest: Digest::of_bytes(b"ok"),
    };
    let st = timed(3, d.record_evidence(&occ, &ev, None))
        .await
        .map_err(|e| e.to_string())?;
    if st.outcome.is_none() {
        return Err("lifecycle did not resolve".into());
    }
    Ok(())
}

async fn run_lifecycles(store: Arc<AnyStore>, executors: usize, secs: f64) -> Result<u64, String> {
    let ns = format!("bench_{}", uuid::Uuid::new_v4().simple());
    let d = Domain::new(
        store,
        DomainConfig::new(&ns, profile()),
        Arc::new(SystemClock),
    )
    .map_err(|e| e.join("; "))?;
    let done = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let mut tasks = Vec::new();
    for i in 0..executors {
        let (d, done) = (d.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            let h = d
                .join(
                    &LaneId(format!("lane-{i}")),
                    &ExecutorId(format!("bench-{i}")),
                )
                .await
                .map_err(|e| e.to_string())?;
            let mut n = 0u64;
            while Instant::now() < deadline {
                lifecycle(&d, &h, &format!("{i}-{n}")).await?;
                n += 1;
                done.fetch_add(1, Ordering::Relaxed);
            }
            Ok::<(), String>(())
        }));
    }
    for t in tasks {
        t.await.map_err(|e| e.to_string())??;
    }
    Ok(done.load(Ordering::Relaxed))
}

async fn bare(store: &AnyStore, key: String) -> Result<(), String> {
    match store {
        AnyStore::Sqlite(s) => s.bare_commit(key).await.map_err(|e| e.to_string()),
        AnyStore::Postgres(p) => p.bare_commit(key).await.map_err(|e| e.to_string()),
        AnyStore::Memory(_) => Err("the memory store has no durable commit".into()),
    }
}

async fn run_bare(store: Arc<AnyStore>, workers: usize, secs: f64) -> Result<u64, String> {
    match &*store {
        AnyStore::Sqlite(s) => s.prepare_bench().await.map_err(|e| e.to_string())?,
        AnyStore::Postgres(p) => p.prepare_bench().await.map_err(|e| e.to_string())?,
        AnyStore::Memory(_) => return Ok(0),
    }
    let run = uuid::Uuid::new_v4().simple().to_string();
    let done = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let mut tasks = Vec::new();
    for i in 0..workers {
        let (store, done, run) = (store.clone(), done.clone(), run.clone());
        tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            while Instant::now() < deadline {
                bare(&store, format!("{run}-{i}-{n}")).await?;
                n += 1;
                done.fetch_add(1, Ordering::Relaxed);
            }
            Ok::<(), String>(())
        }));
    }
    for t in tasks {
        t.await.map_err(|e| e.to_string())??;
    }
    Ok(done.load(Ordering::Relaxed))
}

fn main() {
    let secs: f64 = std::env::var("AOCHECK_BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2.0);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    // `AOCHECK_BENCH_DIR` keeps the SQLite database for inspection; a temporary folder otherwise.
    let dir = match std::env::var("AOCHECK_BENCH_DIR") {
        Ok(d) => tempfile::Builder::new()
            .prefix("aocheck-bench-")
            .disable_cleanup(true)
            .tempdir_in(d),
        Err(_) => tempfile::tempdir(),
    }
    .expect("tempdir");
    let mut specs = vec![
        ("memory", StoreSpec::Memory),
        ("sqlite", StoreSpec::Sqlite(dir.path().join("bench.db"))),
    ];
    if let Ok(url) = std::env::var("AOCHECK_BENCH_POSTGRES_URL") {
        specs.push(("postgres", StoreSpec::Postgres(url)));
    } else {
        eprintln!("note: PostgreSQL skipped: set AOCHECK_BENCH_POSTGRES_URL to include it");
    }
    let only: Option<Vec<String>> = std::env::var("AOCHECK_BENCH_STORES")
        .ok()
        .map(|s| s.split(',').map(|x| x.trim().to_string()).collect());
    let levels: Vec<usize> = match std::env::var("AOCHECK_BENCH_EXECUTORS") {
        Ok(s) => match s.split(',').map(|x| x.trim().parse::<usize>()).collect() {
            Ok(v) => v,
            Err(e) => {
                eprintln!("error: AOCHECK_BENCH_EXECUTORS={s:?}: {e}; give counts like 1,4,16");
                std::process::exit(2);
            }
        },
        Err(_) => vec![1, 4, 16],
    };
    for (name, spec) in specs {
        if only.as_ref().is_some_and(|o| !o.iter().any(|x| x == name)) {
            continue;
        }
        let store = match rt.block_on(spec.open()) {
            Ok(s) => Arc::new(s),
            Err(e) => {
                eprintln!("error: cannot open {name}: {e}");
                std::process::exit(4);
            }
        };
        for &executors in &levels {
            for s in &STEP_NS {
                s.store(0, Ordering::Relaxed);
            }
            let result = rt.block_on(async {
                let t0 = busy_ticks();
                let lifecycles = run_lifecycles(store.clone(), executors, secs).await?;
                let t1 = busy_ticks();
                let bare = run_bare(store.clone(), executors, secs).await?;
                let t2 = busy_ticks();
                let cpu = (
                    cpu_us_per(t0, t1, lifecycles * TRANSITIONS_PER_LIFECYCLE),
                    cpu_us_per(t1, t2, bare),
                    t0.zip(t1).map(|(a, b)| (b - a) as f64 / 100.0 / secs),
                    t1.zip(t2).map(|(a, b)| (b - a) as f64 / 100.0 / secs),
                );
                Ok::<_, String>((lifecycles, bare, cpu))
            });
            match result {
                Ok((lifecycles, bare, cpu)) => {
                    let lps = lifecycles as f64 / secs;
                    let tps = lps * TRANSITIONS_PER_LIFECYCLE as f64;
                    let bare_ps = bare as f64 / secs;
                    let ratio = if bare > 0 { Some(tps / bare_ps) } else { None };
                    let mean_us = |i: usize| {
                        let ns = STEP_NS[i].load(Ordering::Relaxed) as f64;
                        (ns / lifecycles.max(1) as f64 / 100.0).round() / 10.0
                    };
                    let bare_us = if bare > 0 {
                        Some((secs * 1e7 * executors as f64 / bare as f64).round() / 10.0)
                    } else {
                        None
                    };
                    println!(
                        "{}",
                        serde_json::json!({
                            "store": name,
                            "executors": executors,
                            "seconds": secs,
                            "lifecycles_per_sec": (lps * 10.0).round() / 10.0,
                            "durable_transitions_per_sec": (tps * 10.0).round() / 10.0,
                            "bare_commits_per_sec": if bare > 0 { Some((bare_ps * 10.0).round() / 10.0) } else { None },
                            "ratio_transitions_to_bare": ratio.map(|r| (r * 1000.0).round() / 1000.0),
                            "durable": store_durable(&store),
                            "mean_us_per_call": {
                                "create": mean_us(0), "reserve": mean_us(1), "enter": mean_us(2),
                                "evidence": mean_us(3), "bare_commit": bare_us,
                            },
                            // Busy CPU of the whole machine (client, store server, kernel) per
                            // unit, and the cores busy: where a level is CPU-bound, the ratio is
                            // the ratio of these costs.
                            "cpu_us_per_transition": cpu.0,
                            "cpu_us_per_bare_commit": cpu.1,
                            "cores_busy": {
                                "transitions": cpu.2.map(|c| (c * 100.0).round() / 100.0),
                                "bare": cpu.3.map(|c| (c * 100.0).round() / 100.0),
                            },
                        })
                    );
                }
                Err(e) => {
                    eprintln!("error: {name} with {executors} executors: {e}");
                    std::process::exit(4);
                }
            }
        }
    }
}

/// The machine's busy CPU time so far (every core, every process: the store's server too), in
/// clock ticks, from `/proc/stat`; `None` off Linux.
fn busy_ticks() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let cpu = stat.lines().next()?.strip_prefix("cpu ")?;
    let v: Vec<u64> = cpu
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal: busy is all but idle and iowait.
    (v.len() >= 8).then(|| v[0] + v[1] + v[2] + v[5] + v[6] + v[7])
}

/// Microseconds of busy CPU (machine-wide) per unit of work between two readings.
fn cpu_us_per(before: Option<u64>, after: Option<u64>, units: u64) -> Option<f64> {
    let ticks = after?.checked_sub(before?)?;
    // Linux reports /proc/stat in USER_HZ, 100 per second on every supported architecture.
    (units > 0).then(|| (ticks as f64 * 10_000.0 / units as f64).round())
}

fn store_durable(s: &AnyStore) -> bool {
    use aocheck::store::Store;
    s.info().durable
}
