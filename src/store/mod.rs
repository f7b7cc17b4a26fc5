//! Durable stores of the coordination domain.
//!
//! One [`Store`] trait, three implementations judged by one conformance suite
//! (`tests/it/store_conformance.rs`): [`memory`] (the model; not durable), [`sqlite`] (the embedded
//! default: WAL, `synchronous = FULL`, `BEGIN IMMEDIATE`) and [`postgres`] (many executors on many
//! machines: row locks inside read-committed transactions).
//!
//! # What makes each transition durable
//!
//! Every transition is one store call and one transaction; the single write that makes it durable:
//!
//! | transition | durable when this commits |
//! |---|---|
//! | occurrence creation (AOC-REQ-002) | the `occurrences` row with its unique creation binding, together with history entry 0 (`created`) |
//! | reservation, provider entry, adoption, evidence, resolution, release, remedy link | the new `entries` rows at `seq = expected_len …` (their primary key makes a racing append at the same position fail), with the occurrence's `class` updated in the same transaction when entry, resolution or release changes it |
//! | generation change (AOC-REQ-006) | the `leases` row with the advanced generation (the predecessor is retired by that same write) |
//! | admission, claim, recovery, end (seed 003) | the `admissions` row at its new `version` |
//!
//! Fenced writes ([`Fence`]) read the lane's lease row under the same lock as the write, so a
//! generation change and an entry are serialized: an entry either commits before the change (and
//! stays consumed) or is refused after it. Limit checks ([`LimitCheck`]) count the lane's
//! occurrences under the same lane lock.
//!
//! A store never decides protocol questions: it checks the preconditions it is given (expected
//! length, fence, limit, uniqueness) and writes or refuses, all or nothing.

pub mod memory;
pub mod postgres;
pub mod sqlite;

pub(crate) use crate::aoc::port::check_limit;
/// The port itself (trait, preconditions, answers) is the domain's: `crate::aoc::port`.
pub use crate::aoc::port::{
    Append, Class, CreateResult, Fence, LimitCheck, NewOccurrence, OccurrenceSummary, Store,
    StoreError, StoreInfo, check_fence,
};

use crate::aoc::admission::Admission;
use crate::aoc::history::ChainedEntry;
use crate::aoc::ids::{ExecutorId, Holder, LaneId, Millis, OccurrenceId};
use crate::aoc::lease::{AcquireMode, Lease};
use crate::digest::Digest;

/// Any of the three stores, chosen at run time.
#[derive(Debug)]
pub enum AnyStore {
    Memory(memory::MemoryStore),
    Sqlite(sqlite::SqliteStore),
    Postgres(postgres::PostgresStore),
}

macro_rules! delegate {
    ($self:ident, $s:ident => $e:expr) => {
        match $self {
            AnyStore::Memory($s) => $e,
            AnyStore::Sqlite($s) => $e,
            AnyStore::Postgres($s) => $e,
        }
    };
}

impl Store for AnyStore {
    fn info(&self) -> StoreInfo {
        delegate!(self, s => s.info())
    }
    async fn lease_get(&self, ns: &str, lane: &LaneId) -> Result<Option<Lease>, StoreError> {
        delegate!(self, s => s.lease_get(ns, lane).await)
    }
    async fn lease_acquire(
        &self,
        ns: &str,
        lane: &LaneId,
        executor: &ExecutorId,
        now: Millis,
        ttl_ms: u64,
        mode: AcquireMode,
    ) -> Result<Lease, StoreError> {
        delegate!(self, s => s.lease_acquire(ns, lane, executor, now, ttl_ms, mode).await)
    }
    async fn lease_refresh(
        &self,
        ns: &str,
        holder: &Holder,
        now: Millis,
        ttl_ms: u64,
    ) -> Result<Lease, StoreError> {
        delegate!(self, s => s.lease_refresh(ns, holder, now, ttl_ms).await)
    }
    async fn lease_release(&self, ns: &str, holder: &Holder) -> Result<Lease, StoreError> {
        delegate!(self, s => s.lease_release(ns, holder).await)
    }
    async fn create(
        &self,
        ns: &str,
        new: NewOccurrence,
        fence: Fence,
        limit: Option<LimitCheck>,
    ) -> Result<CreateResult, StoreError> {
        delegate!(self, s => s.create(ns, new, fence, limit).await)
    }
    async fn find_creation(
        &self,
        ns: &str,
        cb: &Digest,
    ) -> Result<Option<OccurrenceId>, StoreError> {
        delegate!(self, s => s.find_creation(ns, cb).await)
    }
    async fn load(
        &self,
        ns: &str,
        occ: &OccurrenceId,
    ) -> Result<Option<Vec<ChainedEntry>>, StoreError> {
        delegate!(self, s => s.load(ns, occ).await)
    }
    async fn append(&self, ns: &str, append: Append) -> Result<(), StoreError> {
        delegate!(self, s => s.append(ns, append).await)
    }
    async fn list(
        &self,
        ns: &str,
        lane: Option<&LaneId>,
    ) -> Result<Vec<OccurrenceSummary>, StoreError> {
        delegate!(self, s => s.list(ns, lane).await)
    }
    async fn admit(
        &self,
        ns: &str,
        lane: &LaneId,
        key: &str,
        payload: &Digest,
        now: Millis,
    ) -> Result<Admission, StoreError> {
        delegate!(self, s => s.admit(ns, lane, key, payload, now).await)
    }
    async fn admission_claim(
        &self,
        ns: &str,
        fence: Fence,
    ) -> Result<Option<Admission>, StoreError> {
        delegate!(self, s => s.admission_claim(ns, fence).await)
    }
    async fn admission_put(
        &self,
        ns: &str,
        next: Admission,
        fence: Option<Fence>,
    ) -> Result<(), StoreError> {
        delegate!(self, s => s.admission_put(ns, next, fence).await)
    }
    async fn admission_get(
        &self,
        ns: &str,
        id: &crate::aoc::ids::AdmissionId,
    ) -> Result<Option<Admission>, StoreError> {
        delegate!(self, s => s.admission_get(ns, id).await)
    }
    async fn admission_list(&self, ns: &str, lane: &LaneId) -> Result<Vec<Admission>, StoreError> {
        delegate!(self, s => s.admission_list(ns, lane).await)
    }
    async fn record_get(
        &self,
        ns: &str,
        key: &str,
    ) -> Result<Option<(u64, serde_json::Value)>, StoreError> {
        delegate!(self, s => s.record_get(ns, key).await)
    }
    async fn record_cas(
        &self,
        ns: &str,
        key: &str,
        expected: Option<u64>,
        value: &serde_json::Value,
    ) -> Result<u64, StoreError> {
        delegate!(self, s => s.record_cas(ns, key, expected, value).await)
    }
}

/// Column encodings shared by the SQL stores.
pub(crate) mod rows {
    use super::StoreError;
    use crate::aoc::admission::{Admission, AdmissionState};
    use crate::aoc::history::{ChainedEntry, EntryBody};
    use crate::aoc::ids::{
        AdmissionId, ExecutorId, Generation, Holder, LaneId, Millis, OccurrenceId,
    };
    use crate::aoc::lease::Lease;
    use crate::digest::Digest;

    pub fn i64_of(v: u64) -> Result<i64, StoreError> {
        i64::try_from(v)
            .map_err(|_| StoreError::backend(format!("value {v} does not fit a BIGINT")))
    }
    pub fn u64_of(v: i64) -> Result<u64, StoreError> {
        u64::try_from(v).map_err(|_| StoreError::corrupt(format!("negative stored value {v}")))
    }
    pub fn digest_of(s: String) -> Result<Digest, StoreError> {
        Digest::try_from(s).map_err(StoreError::corrupt)
    }

    pub struct EntryCols {
        pub seq: i64,
        pub prev: Option<String>,
        pub digest: String,
        pub body: String,
    }

    pub fn encode_entry(e: &ChainedEntry) -> Result<EntryCols, StoreError> {
        Ok(EntryCols {
            seq: i64_of(e.seq)?,
            prev: e.prev.as_ref().map(|d| d.to_string()),
            digest: e.digest.to_string(),
            body: serde_json::to_string(&e.body).map_err(StoreError::backend)?,
        })
    }

    pub fn decode_entry(c: EntryCols) -> Result<ChainedEntry, StoreError> {
        let body: EntryBody = serde_json::from_str(&c.body)
            .map_err(|e| StoreError::corrupt(format!("entry {}: {e}", c.seq)))?;
        Ok(ChainedEntry {
            seq: u64_of(c.seq)?,
            prev: c.prev.map(digest_of).transpose()?,
            digest: digest_of(c.digest)?,
            body,
        })
    }

    pub struct LeaseCols {
        pub lane: String,
        pub executor: String,
        pub generation: i64,
        pub acquired_at: i64,
        pub expires_at: i64,
        pub released: bool,
    }

    pub fn encode_lease(l: &Lease) -> Result<LeaseCols, StoreError> {
        Ok(LeaseCols {
            lane: l.holder.lane.0.clone(),
            executor: l.holder.executor.0.clone(),
            generation: i64_of(l.holder.generation.0)?,
            acquired_at: i64_of(l.acquired_at.0)?,
            expires_at: i64_of(l.expires_at.0)?,
            released: l.released,
        })
    }

    pub fn decode_lease(c: LeaseCols) -> Result<Lease, StoreError> {
        Ok(Lease {
            holder: Holder {
                lane: LaneId(c.lane),
                executor: ExecutorId(c.executor),
                generation: Generation(u64_of(c.generation)?),
            },
            acquired_at: Millis(u64_of(c.acquired_at)?),
            expires_at: Millis(u64_of(c.expires_at)?),
            released: c.released,
        })
    }

    pub struct AdmissionCols {
        pub id: String,
        pub lane: String,
        pub seq: i64,
        pub submission_key: String,
        pub payload_digest: String,
        pub state: String,
        pub occurrence: Option<String>,
        pub version: i64,
        pub admitted_at: i64,
    }

    pub fn encode_admission(a: &Admission) -> Result<AdmissionCols, StoreError> {
        Ok(AdmissionCols {
            id: a.id.to_string(),
            lane: a.lane.0.clone(),
            seq: i64_of(a.seq)?,
            submission_key: a.submission_key.clone(),
            payload_digest: a.payload_digest.to_string(),
            state: serde_json::to_string(&a.state).map_err(StoreError::backend)?,
            occurrence: a.occurrence.as_ref().map(|o| o.to_string()),
            version: i64_of(a.version)?,
            admitted_at: i64_of(a.admitted_at.0)?,
        })
    }

    pub fn decode_admission(c: AdmissionCols) -> Result<Admission, StoreError> {
        let state: AdmissionState = serde_json::from_str(&c.state)
            .map_err(|e| StoreError::corrupt(format!("admission {}: {e}", c.id)))?;
        Ok(Admission {
            id: AdmissionId::from_stored(c.id),
            lane: LaneId(c.lane),
            seq: u64_of(c.seq)?,
            submission_key: c.submission_key,
            payload_digest: digest_of(c.payload_digest)?,
            state,
            occurrence: c.occurrence.map(OccurrenceId::from_stored),
            version: u64_of(c.version)?,
            admitted_at: Millis(u64_of(c.admitted_at)?),
        })
    }
}

/// A store named on the command line: `memory`, `sqlite:PATH` or `postgres:URL`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreSpec {
    Memory,
    Sqlite(std::path::PathBuf),
    Postgres(String),
}

impl std::str::FromStr for StoreSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "memory" {
            return Ok(StoreSpec::Memory);
        }
        if let Some(p) = s.strip_prefix("sqlite:") {
            if p.is_empty() {
                return Err("`sqlite:` needs a file path, e.g. `sqlite:aocheck.db`".into());
            }
            return Ok(StoreSpec::Sqlite(p.into()));
        }
        if let Some(u) = s.strip_prefix("postgres:") {
            if !u.starts_with("postgres://") && !u.starts_with("postgresql://") {
                // The value is not repeated: it may hold a password.
                return Err(
                    "`postgres:` needs a URL starting postgres:// or postgresql://, such as `postgres:postgres://user@127.0.0.1:5432/db`".into(),
                );
            }
            return Ok(StoreSpec::Postgres(u.to_string()));
        }
        // The value is not repeated: it may hold a password. Only a kind that is a plain word
        // is named.
        let kind = s.split(':').next().unwrap_or_default();
        if !kind.is_empty() && kind.len() <= 16 && kind.chars().all(|c| c.is_ascii_lowercase()) {
            Err(format!(
                "unknown store kind {kind:?}: use `memory`, `sqlite:PATH` or `postgres:URL`"
            ))
        } else {
            Err("unknown store: use `memory`, `sqlite:PATH` or `postgres:URL`".into())
        }
    }
}

/// `--store`'s parser, clap's default for a [`StoreSpec`] argument: a refused value is never
/// echoed (clap's own message repeats the value whole, password and all); the error says what
/// is wrong without it.
#[derive(Clone, Debug)]
pub struct StoreParser;

impl clap::builder::ValueParserFactory for StoreSpec {
    type Parser = StoreParser;
    fn value_parser() -> StoreParser {
        StoreParser
    }
}

impl clap::builder::TypedValueParser for StoreParser {
    type Value = StoreSpec;
    fn parse_ref(
        &self,
        cmd: &clap::Command,
        _arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<StoreSpec, clap::Error> {
        let refused = |why: String| {
            clap::Error::raw(
                clap::error::ErrorKind::ValueValidation,
                format!("invalid value for '--store': {why}\n"),
            )
            .with_cmd(cmd)
        };
        let s = value
            .to_str()
            .ok_or_else(|| refused("not UTF-8".to_string()))?;
        s.parse::<StoreSpec>().map_err(refused)
    }
}

impl AnyStore {
    /// A fresh handle on the same durable backing (a new SQLite connection to the same file, a
    /// new PostgreSQL pool), or `None` for the memory store, which claims no durability.
    pub async fn reopen(&self) -> Option<Result<AnyStore, StoreError>> {
        match self {
            AnyStore::Memory(_) => None,
            AnyStore::Sqlite(s) => Some(s.reopen().map(AnyStore::Sqlite)),
            AnyStore::Postgres(p) => Some(p.reopen().await.map(AnyStore::Postgres)),
        }
    }
}

impl StoreSpec {
    /// Opens the store (applying migrations for the SQL stores).
    pub async fn open(&self) -> Result<AnyStore, StoreError> {
        Ok(match self {
            StoreSpec::Memory => AnyStore::Memory(memory::MemoryStore::new()),
            StoreSpec::Sqlite(p) => AnyStore::Sqlite(sqlite::SqliteStore::open(p)?),
            StoreSpec::Postgres(u) => {
                AnyStore::Postgres(postgres::PostgresStore::connect(u, 16).await?)
            }
        })
    }
}
