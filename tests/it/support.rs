//! Shared test builder: store arms, a provider profile and binding, evidence, and a snapshot of a
//! domain's durable state for "a refusal writes nothing" checks.

use aocheck::aoc::admission::Admission;
use aocheck::aoc::binding::{EvidenceBinding, ProviderBinding};
use aocheck::aoc::domain::CreateRequest;
use aocheck::aoc::history::{CallerLabels, ChainedEntry};
use aocheck::aoc::ids::{ExecutorId, LaneId, Millis, OccurrenceId};
use aocheck::aoc::lease::Lease;
use aocheck::aoc::profile::{
    Evidence, EvidenceKind, NativeResult, ProviderProfile, SourceKind, StatusClass, StatusMapping,
    StatusSource,
};
use aocheck::digest::Digest;
use aocheck::store::{AnyStore, Store, StoreSpec};
use aocheck::{Domain, DomainConfig, ManualClock};
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::{Arc, Once};

pub const POSTGRES_ENV: &str = "AOCHECK_TEST_POSTGRES_URL";
static SKIP_NOTE: Once = Once::new();

/// Which store a test runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arm {
    Memory,
    Sqlite,
    Postgres,
}

/// An opened arm: the store, a fresh namespace, and how to open the same store again.
pub struct Opened {
    pub store: Arc<AnyStore>,
    pub ns: String,
    pub spec: StoreSpec,
    _dir: Option<tempfile::TempDir>,
}

impl Opened {
    /// A second, independent handle on the same durable store (a second process's connection).
    pub async fn reopen(&self) -> Option<Arc<AnyStore>> {
        match self.spec {
            StoreSpec::Memory => match &*self.store {
                AnyStore::Memory(m) => Some(Arc::new(AnyStore::Memory(m.clone()))),
                _ => None,
            },
            _ => Some(Arc::new(self.spec.open().await.expect("reopen store"))),
        }
    }
}

fn note(msg: &str) {
    // Written past libtest's capture so that a plain `cargo test` shows it.
    let _ = writeln!(std::io::stderr(), "{msg}");
}

/// Opens an arm, or returns `None` (with a visible note) when the PostgreSQL arm is not configured.
/// With the variable set, an unreachable PostgreSQL fails the test.
pub async fn open(arm: Arm) -> Option<Opened> {
    let ns = format!("t_{}", uuid::Uuid::new_v4().simple());
    match arm {
        Arm::Memory => Some(Opened {
            store: Arc::new(AnyStore::Memory(aocheck::MemoryStore::new())),
            ns,
            spec: StoreSpec::Memory,
            _dir: None,
        }),
        Arm::Sqlite => {
            let dir = tempfile::tempdir().expect("tempdir");
            let spec = StoreSpec::Sqlite(dir.path().join("aoc.db"));
            Some(Opened {
                store: Arc::new(spec.open().await.expect("open sqlite")),
                ns,
                spec,
                _dir: Some(dir),
            })
        }
        Arm::Postgres => {
            let Ok(url) = std::env::var(POSTGRES_ENV) else {
                SKIP_NOTE.call_once(|| {
                    note(&format!(
                        "note: PostgreSQL arm skipped: set {POSTGRES_ENV}=postgres://postgres@127.0.0.1:5432/test to run it"
                    ))
                });
                return None;
            };
            let spec = StoreSpec::Postgres(url.clone());
            let store = spec.open().await.unwrap_or_else(|e| {
                panic!("{POSTGRES_ENV} is set but PostgreSQL is unusable at {url}: {e}")
            });
            Some(Opened {
                store: Arc::new(store),
                ns,
                spec,
                _dir: None,
            })
        }
    }
}

pub fn lane(s: &str) -> LaneId {
    LaneId(s.to_string())
}
pub fn ex(s: &str) -> ExecutorId {
    ExecutorId(s.to_string())
}

/// The synthetic payment provider's profile: every AOC-REQ-009 item, one deliberately unmapped
/// status (`disputed`), a no-effect-confirmed status, final failure not proving no effect.
pub fn profile() -> ProviderProfile {
    let m = |class, proves_no_effect| StatusMapping {
        class,
        proves_no_effect,
    };
    ProviderProfile {
        id: "fake-payments".into(),
        version: "1".into(),
        provider: "fake-payments (synthetic)".into(),
        account_authority: "the provider's account registry; Bearer credential per account".into(),
        environments: vec!["test".into()],
        status_sources: vec![
            StatusSource {
                id: "payments.get".into(),
                pin: "ed25519:test-provider-key".into(),
                kind: SourceKind::Lookup,
            },
            StatusSource {
                id: "payments.list".into(),
                pin: "ed25519:test-provider-key".into(),
                kind: SourceKind::Listing,
            },
        ],
        lookup_key: "payment id, or Idempotency-Key".into(),
        key_rule: "Idempotency-Key = occurrence id".into(),
        retention_ms: Some(86_400_000),
        freshness_ms: 60_000,
        complete_listing_proves_absence: true,
        mapping: BTreeMap::from([
            ("processing".to_string(), m(StatusClass::Accepted, false)),
            (
                "requires_capture".to_string(),
                m(StatusClass::Accepted, false),
            ),
            ("succeeded".to_string(), m(StatusClass::Success, false)),
            ("failed".to_string(), m(StatusClass::FinalFailure, false)),
            (
                "no_effect_confirmed".to_string(),
                m(StatusClass::FinalFailure, true),
            ),
            ("declined".to_string(), m(StatusClass::NotAccepted, false)),
        ]),
        final_failure_proves_no_effect: false,
    }
}

pub fn request_digest(tag: &str) -> Digest {
    Digest::of_bytes(format!("POST /v1/payments {tag}").as_bytes())
}

pub fn binding(tag: &str) -> ProviderBinding {
    ProviderBinding {
        profile_id: "fake-payments".into(),
        profile_version: "1".into(),
        account: "acct_a".into(),
        environment: "test".into(),
        request_digest: request_digest(tag),
        key_rule: "Idempotency-Key = occurrence id".into(),
        native_key: Some(format!("key-{tag}")),
        status_source: "payments.get".into(),
    }
}

pub fn create_req(tag: &str) -> CreateRequest {
    CreateRequest {
        creation_key: format!("invoice-{tag}"),
        request_digest: request_digest(tag),
        labels: CallerLabels {
            retry_id: Some("retry-1".into()),
            grant_id: Some("grant-1".into()),
            ..CallerLabels::default()
        },
    }
}

pub const T0: u64 = 1_800_000_000_000;

pub fn config(ns: &str) -> DomainConfig {
    let mut c = DomainConfig::new(ns, profile());
    c.limits.max_pending = 8;
    c.limits.max_in_flight = 8;
    c
}

pub fn domain(store: Arc<AnyStore>, cfg: DomainConfig, clock: &ManualClock) -> Domain<AnyStore> {
    Domain::new(store, cfg, Arc::new(clock.clone())).expect("valid config")
}

/// Evidence a faithful provider would give for `b`.
pub fn evidence(
    b: &ProviderBinding,
    kind: EvidenceKind,
    native: NativeResult,
    provider_ref: Option<&str>,
    at: Millis,
) -> Evidence {
    Evidence {
        source: b.status_source.clone(),
        kind,
        observed_at: at,
        authenticated: true,
        bound_to: EvidenceBinding::matching(b, provider_ref),
        native_digest: Digest::of_bytes(format!("{native:?}").as_bytes()),
        native,
    }
}

pub fn status(label: &str) -> NativeResult {
    NativeResult::Status {
        label: label.to_string(),
    }
}

/// Everything durable about a domain's named lanes and occurrences.
#[derive(Debug, PartialEq)]
pub struct Snapshot {
    pub histories: BTreeMap<OccurrenceId, Vec<ChainedEntry>>,
    pub leases: Vec<Option<Lease>>,
    pub admissions: Vec<Vec<Admission>>,
}

pub async fn snapshot(store: &AnyStore, ns: &str, lanes: &[&str]) -> Snapshot {
    let mut histories = BTreeMap::new();
    for row in store.list(ns, None).await.expect("list") {
        let h = store
            .load(ns, &row.id)
            .await
            .expect("load")
            .expect("history");
        histories.insert(row.id, h);
    }
    let mut leases = Vec::new();
    let mut admissions = Vec::new();
    for l in lanes {
        leases.push(store.lease_get(ns, &lane(l)).await.expect("lease"));
        admissions.push(
            store
                .admission_list(ns, &lane(l))
                .await
                .expect("admissions"),
        );
    }
    Snapshot {
        histories,
        leases,
        admissions,
    }
}

/// A run report of these case reports, with placeholder run fields (run id `r`, seed 1) and the
/// requirements and summary derived from the cases: for tests of the formats and schemas.
pub fn report_of(cases: Vec<aocheck::report::model::CaseReport>) -> aocheck::report::model::Report {
    aocheck::report::model::Report {
        schema: aocheck::report::model::SCHEMA.into(),
        run_id: "r".into(),
        seed: 1,
        started_at: "0".into(),
        aocheck_version: "0".into(),
        implementation: serde_json::json!({}),
        provider_profile: None,
        store: serde_json::json!({}),
        test_input_digest: "d".into(),
        requirements: aocheck::runner::aggregate(&cases),
        summary: aocheck::report::model::Summary::of(&cases),
        cases,
        disclaimer: String::new(),
        incomplete: None,
        shard: None,
        expectations: None,
    }
}

/// The `aocheck` binary of this build, run with `args` (no `AOCHECK_STORE` from outside).
pub fn aocheck_bin(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_aocheck"))
        .args(args)
        .env_remove("AOCHECK_STORE")
        .output()
        .expect("run aocheck")
}

/// A path as a command-line word (test paths are UTF-8).
pub fn utf8(p: &std::path::Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// What a process said, stdout then stderr.
pub fn said(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}
