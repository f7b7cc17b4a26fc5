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
//! `AOCHECK_BENCH_STORES=sqlite,postgres` limits the stores measured.

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
    let occ = d
        .create(
            h,
            CreateRequest {
                creation_key: tag.to_string(),
                request_digest: b.request_digest.clone(),
                labels: Default::default(),
            },
        )
        .await
        .map_err(|e| e.to_string())?;
    let tok = d.reserve(h, &occ, &b, 1).await.map_err(|e| e.to_string())?;
    d.enter(h, &occ, &tok, &b)
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
    let st = d
        .record_evidence(&occ, &ev, None)
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
    let dir = tempfile::tempdir().expect("tempdir");
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
        for executors in [1usize, 4, 16] {
            let result = rt.block_on(async {
                let lifecycles = run_lifecycles(store.clone(), executors, secs).await?;
                let bare = run_bare(store.clone(), executors, secs).await?;
                Ok::<_, String>((lifecycles, bare))
            });
            match result {
                Ok((lifecycles, bare)) => {
                    let lps = lifecycles as f64 / secs;
                    let tps = lps * TRANSITIONS_PER_LIFECYCLE as f64;
                    let bare_ps = bare as f64 / secs;
                    let ratio = if bare > 0 { Some(tps / bare_ps) } else { None };
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

fn store_durable(s: &AnyStore) -> bool {
    use aocheck::store::Store;
    s.info().durable
}
