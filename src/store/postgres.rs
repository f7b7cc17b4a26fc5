//! The PostgreSQL store: many executors on many machines sharing one database. Every write is one
//! read-committed transaction that locks what it checks (`SELECT … FOR UPDATE` on the lane's lease
//! row for fenced writes, on the occurrence row for appends), so a generation change and an entry
//! serialize, and two racing transitions cannot both pass their checks. Unique-key violations and
//! serialization failures surface as [`StoreError::Conflict`]. Ordered migrations run under an
//! advisory lock.

use super::rows::{self, AdmissionCols, EntryCols, LeaseCols};
use super::{
    Append, Class, CreateResult, Fence, LimitCheck, NewOccurrence, OccurrenceSummary, Store,
    StoreError, StoreInfo, check_fence,
};
use crate::aoc::admission::{self, Admission, AdmissionState};
use crate::aoc::history::ChainedEntry;
use crate::aoc::ids::{AdmissionId, ExecutorId, Holder, LaneId, Millis, OccurrenceId};
use crate::aoc::lease::{self, AcquireMode, Lease};
use crate::digest::Digest;
use deadpool_postgres::{GenericClient, ManagerConfig, Pool, PoolConfig, RecyclingMethod, Runtime};
use tokio_postgres::NoTls;
use tokio_postgres::error::SqlState;

const MIGRATIONS: &[(i64, &str, &str)] = &[
    (1, "init", include_str!("migrations/postgres/0001_init.sql")),
    (
        2,
        "functions",
        include_str!("migrations/postgres/0002_functions.sql"),
    ),
    (
        3,
        "records",
        include_str!("migrations/postgres/0003_records.sql"),
    ),
    (
        4,
        "lane_counts",
        include_str!("migrations/postgres/0004_lane_counts.sql"),
    ),
];
const MIGRATION_LOCK: i64 = 0x6f63_6865_636b;

/// A PostgreSQL-backed store.
#[derive(Clone)]
pub struct PostgresStore {
    pool: Pool,
    url: String,
    max_connections: usize,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("status", &self.pool.status())
            .finish()
    }
}

/// An error from a statement that commits: a server-side rejection is definite (and named); a
/// lost connection leaves the commit unknown.
fn ce(e: tokio_postgres::Error) -> StoreError {
    if e.as_db_error().is_some() {
        pe(e)
    } else {
        StoreError::commit(e)
    }
}

fn pe(e: tokio_postgres::Error) -> StoreError {
    match e.code() {
        Some(c)
            if *c == SqlState::UNIQUE_VIOLATION
                || *c == SqlState::T_R_SERIALIZATION_FAILURE
                || *c == SqlState::T_R_DEADLOCK_DETECTED =>
        {
            StoreError::Conflict {
                what: e.to_string(),
            }
        }
        // "db error" alone says nothing: keep the server's message, detail and code.
        _ => match e.as_db_error() {
            Some(db) => StoreError::backend(format!(
                "{} ({}){}",
                db.message(),
                db.code().code(),
                db.detail().map(|d| format!(": {d}")).unwrap_or_default()
            )),
            None => StoreError::backend(e),
        },
    }
}

fn pool_err(e: impl std::fmt::Display) -> StoreError {
    StoreError::backend(format!("postgres pool: {e}"))
}

impl PostgresStore {
    /// Connects (`postgres://user@host:port/db`), checks the connection and applies migrations.
    pub async fn connect(url: &str, max_connections: usize) -> Result<Self, StoreError> {
        let mut cfg = deadpool_postgres::Config::new();
        cfg.url = Some(url.to_string());
        cfg.manager = Some(ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        });
        cfg.pool = Some(PoolConfig::new(max_connections.max(1)));
        let pool = cfg
            .create_pool(Some(Runtime::Tokio1), NoTls)
            .map_err(|e| StoreError::backend(format!("postgres config {url:?}: {e}")))?;
        let store = PostgresStore {
            pool,
            url: url.to_string(),
            max_connections,
        };
        store.migrate().await?;
        Ok(store)
    }

    /// A fresh pool on the same database (new connections, no shared client state).
    pub async fn reopen(&self) -> Result<Self, StoreError> {
        Self::connect(&self.url, self.max_connections).await
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        let mut c = self.pool.get().await.map_err(pool_err)?;
        let tx = c.transaction().await.map_err(pe)?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .await
            .map_err(pe)?;
        tx.batch_execute("CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY, name TEXT NOT NULL)")
            .await
            .map_err(pe)?;
        let applied: i64 = tx
            .query_one(
                "SELECT COALESCE(MAX(version), 0)::BIGINT FROM schema_migrations",
                &[],
            )
            .await
            .map_err(pe)?
            .get(0);
        for (version, name, sql) in MIGRATIONS {
            if *version > applied {
                tx.batch_execute(sql).await.map_err(|e| {
                    StoreError::backend(format!("migration {version} ({name}): {e}"))
                })?;
                tx.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)",
                    &[version, name],
                )
                .await
                .map_err(pe)?;
            }
        }
        tx.commit().await.map_err(ce)
    }

    /// Creates the benchmark's bare table (outside the domain schema).
    pub async fn prepare_bench(&self) -> Result<(), StoreError> {
        let c = self.pool.get().await.map_err(pool_err)?;
        c.batch_execute("CREATE TABLE IF NOT EXISTS bench_bare (k TEXT PRIMARY KEY)")
            .await
            .map_err(pe)
    }

    /// The bare durable-commit rate's unit of work: one row inserted and committed.
    pub async fn bare_commit(&self, key: String) -> Result<(), StoreError> {
        let c = self.pool.get().await.map_err(pool_err)?;
        let stmt = c
            .prepare_cached("INSERT INTO bench_bare (k) VALUES ($1)")
            .await
            .map_err(pe)?;
        c.execute(&stmt, &[&key]).await.map_err(pe)?;
        Ok(())
    }

    /// Test-only (the `overwrite_history` broken variant): rewrites one stored entry's body in
    /// place, keeping its digest, as a defective implementation would. Never used by the domain.
    #[cfg(feature = "test-knobs")]
    pub async fn tamper_entry_for_tests(
        &self,
        ns: &str,
        occ: &OccurrenceId,
        seq: u64,
        body: String,
    ) -> Result<bool, StoreError> {
        let c = self.pool.get().await.map_err(pool_err)?;
        let n = c
            .execute(
                "UPDATE entries SET body = $1 WHERE ns = $2 AND occurrence = $3 AND seq = $4",
                &[&body, &ns, &occ.as_str(), &(seq as i64)],
            )
            .await
            .map_err(pe)?;
        Ok(n == 1)
    }

    /// Removes every row of one namespace (test isolation; never used by the domain).
    pub async fn drop_namespace(&self, ns: &str) -> Result<(), StoreError> {
        let c = self.pool.get().await.map_err(pool_err)?;
        for t in [
            "leases",
            "lease_log",
            "occurrences",
            "entries",
            "admissions",
            "lane_counts",
        ] {
            c.execute(&format!("DELETE FROM {t} WHERE ns = $1"), &[&ns])
                .await
                .map_err(pe)?;
        }
        Ok(())
    }
}

/// The limit arguments of the SQL functions: the phase labels counted and the limit.
fn limit_args(limit: Option<LimitCheck>) -> (Option<&'static str>, Option<i64>) {
    match limit {
        Some(l) => (
            Some(Class::of_limit(l.which).label()),
            Some(i64::from(l.limit)),
        ),
        None => (None, None),
    }
}

/// Maps a function's `limit:N` answer (or anything unexpected) to the store error.
fn function_refusal_unfenced<T>(limit: Option<LimitCheck>, out: &str) -> Result<T, StoreError> {
    match (out.split_once(':'), limit) {
        (Some(("limit", n)), Some(l)) => Err(StoreError::Limit {
            which: l.which,
            limit: l.limit,
            current: n.parse().unwrap_or(u32::MAX),
        }),
        _ => Err(StoreError::corrupt(format!(
            "unexpected store function answer {out:?}"
        ))),
    }
}

impl PostgresStore {
    /// Maps a function's `fenced` answer to the store error, naming the current live holder.
    async fn function_refusal<T>(
        &self,
        c: &deadpool_postgres::Object,
        ns: &str,
        fence: &Fence,
        limit: Option<LimitCheck>,
        out: &str,
    ) -> Result<T, StoreError> {
        if out == "fenced" {
            let lease = get_lease(c, ns, &fence.holder.lane.0, false).await?;
            return Err(check_fence(lease.as_ref(), fence).err().unwrap_or_else(|| {
                StoreError::Fenced {
                    holder: fence.holder.clone(),
                    current: None,
                }
            }));
        }
        function_refusal_unfenced(limit, out)
    }
}

async fn get_lease(
    c: &impl GenericClient,
    ns: &str,
    lane: &str,
    lock: bool,
) -> Result<Option<Lease>, StoreError> {
    let sql = if lock {
        "SELECT lane, executor, generation, acquired_at, expires_at, released FROM leases WHERE ns = $1 AND lane = $2 FOR UPDATE"
    } else {
        "SELECT lane, executor, generation, acquired_at, expires_at, released FROM leases WHERE ns = $1 AND lane = $2"
    };
    let row = c.query_opt(sql, &[&ns, &lane]).await.map_err(pe)?;
    row.map(|r| {
        rows::decode_lease(LeaseCols {
            lane: r.get(0),
            executor: r.get(1),
            generation: r.get(2),
            acquired_at: r.get(3),
            expires_at: r.get(4),
            released: r.get(5),
        })
    })
    .transpose()
}

async fn put_lease(
    c: &impl GenericClient,
    ns: &str,
    l: &Lease,
    log_mode: Option<&str>,
) -> Result<(), StoreError> {
    let v = rows::encode_lease(l)?;
    c.execute(
        "INSERT INTO leases (ns, lane, executor, generation, acquired_at, expires_at, released)
         VALUES ($1, $2, $3, $4, $5, $6, $7)
         ON CONFLICT (ns, lane) DO UPDATE SET executor = excluded.executor, generation = excluded.generation,
           acquired_at = excluded.acquired_at, expires_at = excluded.expires_at, released = excluded.released",
        &[&ns, &v.lane, &v.executor, &v.generation, &v.acquired_at, &v.expires_at, &v.released],
    )
    .await
    .map_err(pe)?;
    if let Some(mode) = log_mode {
        c.execute(
            "INSERT INTO lease_log (ns, lane, generation, executor, acquired_at, mode) VALUES ($1, $2, $3, $4, $5, $6)",
            &[&ns, &v.lane, &v.generation, &v.executor, &v.acquired_at, &mode],
        )
        .await
        .map_err(pe)?;
    }
    Ok(())
}

async fn fence_check(c: &impl GenericClient, ns: &str, f: &Fence) -> Result<(), StoreError> {
    let l = get_lease(c, ns, &f.holder.lane.0, true).await?;
    check_fence(l.as_ref(), f)
}

const ADMISSION_COLS: &str =
    "id, lane, seq, submission_key, payload_digest, state, occurrence, version, admitted_at";

fn admission_of(r: &tokio_postgres::Row) -> Result<Admission, StoreError> {
    rows::decode_admission(AdmissionCols {
        id: r.get(0),
        lane: r.get(1),
        seq: r.get(2),
        submission_key: r.get(3),
        payload_digest: r.get(4),
        state: r.get(5),
        occurrence: r.get(6),
        version: r.get(7),
        admitted_at: r.get(8),
    })
}

async fn get_admission(
    c: &impl GenericClient,
    ns: &str,
    id: &str,
) -> Result<Option<Admission>, StoreError> {
    let r = c
        .query_opt(
            &format!("SELECT {ADMISSION_COLS} FROM admissions WHERE ns = $1 AND id = $2"),
            &[&ns, &id],
        )
        .await
        .map_err(pe)?;
    r.as_ref().map(admission_of).transpose()
}

async fn lane_admissions(
    c: &impl GenericClient,
    ns: &str,
    lane: &str,
    lock: bool,
) -> Result<Vec<Admission>, StoreError> {
    let sql = format!(
        "SELECT {ADMISSION_COLS} FROM admissions WHERE ns = $1 AND lane = $2 ORDER BY seq{}",
        if lock { " FOR UPDATE" } else { "" }
    );
    let rs = c.query(&sql, &[&ns, &lane]).await.map_err(pe)?;
    rs.iter().map(admission_of).collect()
}

async fn put_admission(c: &impl GenericClient, ns: &str, a: &Admission) -> Result<(), StoreError> {
    let v = rows::encode_admission(a)?;
    let prev = v.version - 1;
    let n = c
        .execute(
            "UPDATE admissions SET state = $3, occurrence = $4, version = $5 WHERE ns = $1 AND id = $2 AND version = $6",
            &[&ns, &v.id, &v.state, &v.occurrence, &v.version, &prev],
        )
        .await
        .map_err(pe)?;
    if n != 1 {
        return Err(StoreError::Conflict {
            what: format!("admission {} is not at version {prev}", a.id),
        });
    }
    Ok(())
}

impl Store for PostgresStore {
    async fn record_get(
        &self,
        ns: &str,
        key: &str,
    ) -> Result<Option<(u64, serde_json::Value)>, StoreError> {
        let c = self.pool.get().await.map_err(pool_err)?;
        let row = c
            .query_opt(
                "SELECT version, value FROM records WHERE ns = $1 AND key = $2",
                &[&ns, &key],
            )
            .await
            .map_err(pe)?;
        row.map(|r| {
            let v: i64 = r.get(0);
            let text: String = r.get(1);
            Ok((
                rows::u64_of(v)?,
                serde_json::from_str(&text).map_err(StoreError::corrupt)?,
            ))
        })
        .transpose()
    }

    async fn record_cas(
        &self,
        ns: &str,
        key: &str,
        expected: Option<u64>,
        value: &serde_json::Value,
    ) -> Result<u64, StoreError> {
        let c = self.pool.get().await.map_err(pool_err)?;
        let text = value.to_string();
        let next = expected.map_or(1, |v| v + 1);
        let n = match expected {
            None => c
                .execute("INSERT INTO records (ns, key, version, value) VALUES ($1, $2, 1, $3) ON CONFLICT DO NOTHING", &[&ns, &key, &text])
                .await
                .map_err(pe)?,
            Some(v) => c
                .execute(
                    "UPDATE records SET version = $3, value = $4 WHERE ns = $1 AND key = $2 AND version = $5",
                    &[&ns, &key, &rows::i64_of(next)?, &text, &rows::i64_of(v)?],
                )
                .await
                .map_err(pe)?,
        };
        if n != 1 {
            return Err(StoreError::Conflict {
                what: format!("record {key} is not at version {expected:?}"),
            });
        }
        Ok(next)
    }

    fn info(&self) -> StoreInfo {
        StoreInfo {
            kind: "postgres",
            durable: true,
        }
    }

    async fn lease_get(&self, ns: &str, lane: &LaneId) -> Result<Option<Lease>, StoreError> {
        let c = self.pool.get().await.map_err(pool_err)?;
        get_lease(&c, ns, &lane.0, false).await
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
        let mut c = self.pool.get().await.map_err(pool_err)?;
        let tx = c.transaction().await.map_err(pe)?;
        tx.execute("SELECT aoc_lane_lock($1, $2)", &[&ns, &lane.0])
            .await
            .map_err(pe)?;
        let cur = get_lease(&tx, ns, &lane.0, true).await?;
        let next = lease::acquire(cur.as_ref(), lane, executor, now, ttl_ms, mode)
            .map_err(StoreError::Lease)?;
        let m = match mode {
            AcquireMode::IfFree => "if_free",
            AcquireMode::Replace => "replace",
        };
        put_lease(&tx, ns, &next, Some(m)).await?;
        tx.commit().await.map_err(ce)?;
        Ok(next)
    }

    async fn lease_refresh(
        &self,
        ns: &str,
        holder: &Holder,
        now: Millis,
        ttl_ms: u64,
    ) -> Result<Lease, StoreError> {
        let mut c = self.pool.get().await.map_err(pool_err)?;
        let tx = c.transaction().await.map_err(pe)?;
        tx.execute("SELECT aoc_lane_lock($1, $2)", &[&ns, &holder.lane.0])
            .await
            .map_err(pe)?;
        let cur = get_lease(&tx, ns, &holder.lane.0, true).await?;
        let next = lease::refresh(cur.as_ref(), holder, now, ttl_ms).map_err(StoreError::Lease)?;
        put_lease(&tx, ns, &next, None).await?;
        tx.commit().await.map_err(ce)?;
        Ok(next)
    }

    async fn lease_release(&self, ns: &str, holder: &Holder) -> Result<Lease, StoreError> {
        let mut c = self.pool.get().await.map_err(pool_err)?;
        let tx = c.transaction().await.map_err(pe)?;
        tx.execute("SELECT aoc_lane_lock($1, $2)", &[&ns, &holder.lane.0])
            .await
            .map_err(pe)?;
        let cur = get_lease(&tx, ns, &holder.lane.0, true).await?;
        let next = lease::release(cur.as_ref(), holder).map_err(StoreError::Lease)?;
        put_lease(&tx, ns, &next, None).await?;
        tx.commit().await.map_err(ce)?;
        Ok(next)
    }

    async fn create(
        &self,
        ns: &str,
        new: NewOccurrence,
        fence: Fence,
        limit: Option<LimitCheck>,
    ) -> Result<CreateResult, StoreError> {
        let c = self.pool.get().await.map_err(pool_err)?;
        let stmt = c
            .prepare_cached("SELECT aoc_create($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)")
            .await
            .map_err(pe)?;
        let first = rows::encode_entry(&new.first)?;
        let (phases, max) = limit_args(limit);
        let out: String = c
            .query_one(
                &stmt,
                &[
                    &ns,
                    &new.id.as_str(),
                    &new.lane.0,
                    &new.creation_binding.to_string(),
                    &new.action_fence.as_ref().map(|d| d.to_string()),
                    &fence.holder.executor.0,
                    &rows::i64_of(fence.holder.generation.0)?,
                    &rows::i64_of(fence.now.0)?,
                    &phases,
                    &max,
                    &first.digest,
                    &first.body,
                ],
            )
            .await
            .map_err(ce)?
            .get(0);
        match out.split_once(':').unwrap_or((out.as_str(), "")) {
            ("created", _) => Ok(CreateResult::Created),
            ("existing", id) => Ok(CreateResult::Existing(OccurrenceId::from_stored(id))),
            ("action_fenced", id) => Ok(CreateResult::ActionFenced(OccurrenceId::from_stored(id))),
            ("conflict", _) => Err(StoreError::Conflict {
                what: "concurrent creation under the same binding".into(),
            }),
            _ => self.function_refusal(&c, ns, &fence, limit, &out).await,
        }
    }

    async fn find_creation(
        &self,
        ns: &str,
        cb: &Digest,
    ) -> Result<Option<OccurrenceId>, StoreError> {
        let c = self.pool.get().await.map_err(pool_err)?;
        let r = c
            .query_opt(
                "SELECT id FROM occurrences WHERE ns = $1 AND creation_binding = $2",
                &[&ns, &cb.to_string()],
            )
            .await
            .map_err(pe)?;
        Ok(r.map(|r| OccurrenceId::from_stored(r.get::<_, String>(0))))
    }

    async fn load(
        &self,
        ns: &str,
        occ: &OccurrenceId,
    ) -> Result<Option<Vec<ChainedEntry>>, StoreError> {
        let c = self.pool.get().await.map_err(pool_err)?;
        let rs = c
            .query(
                "SELECT seq, prev, digest, body FROM entries WHERE ns = $1 AND occurrence = $2 ORDER BY seq",
                &[&ns, &occ.as_str()],
            )
            .await
            .map_err(pe)?;
        let mut out = Vec::with_capacity(rs.len());
        for r in &rs {
            out.push(rows::decode_entry(EntryCols {
                seq: r.get(0),
                prev: r.get(1),
                digest: r.get(2),
                body: r.get(3),
            })?);
        }
        Ok(if out.is_empty() { None } else { Some(out) })
    }

    async fn append(&self, ns: &str, a: Append) -> Result<(), StoreError> {
        let c = self.pool.get().await.map_err(pool_err)?;
        let stmt = c
            .prepare_cached(
                "SELECT aoc_append($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)",
            )
            .await
            .map_err(pe)?;
        let mut seq = Vec::with_capacity(a.entries.len());
        let mut prev = Vec::with_capacity(a.entries.len());
        let mut digest = Vec::with_capacity(a.entries.len());
        let mut body = Vec::with_capacity(a.entries.len());
        for e in &a.entries {
            let v = rows::encode_entry(e)?;
            seq.push(v.seq);
            prev.push(v.prev);
            digest.push(v.digest);
            body.push(v.body);
        }
        let (phases, max) = limit_args(a.limit);
        let (lane, executor, generation, now) = match &a.fence {
            Some(f) => (
                f.holder.lane.0.clone(),
                f.holder.executor.0.clone(),
                rows::i64_of(f.holder.generation.0)?,
                rows::i64_of(f.now.0)?,
            ),
            None => (String::new(), String::new(), 0, 0),
        };
        let out: String = c
            .query_one(
                &stmt,
                &[
                    &ns,
                    &a.occurrence.as_str(),
                    &rows::i64_of(a.expected_len)?,
                    &a.class_change.map(Class::label),
                    &a.fence.is_some(),
                    &lane,
                    &executor,
                    &generation,
                    &now,
                    &phases,
                    &max,
                    &seq,
                    &prev,
                    &digest,
                    &body,
                ],
            )
            .await
            .map_err(ce)?
            .get(0);
        match out.split_once(':').unwrap_or((out.as_str(), "")) {
            ("ok", _) => Ok(()),
            ("not_found", _) => Err(StoreError::NotFound {
                what: format!("occurrence {}", a.occurrence),
            }),
            ("conflict", why) => Err(StoreError::Conflict {
                what: format!(
                    "occurrence {}: history is not {} entries long ({why})",
                    a.occurrence, a.expected_len
                ),
            }),
            _ => match &a.fence {
                Some(f) => self.function_refusal(&c, ns, f, a.limit, &out).await,
                None => function_refusal_unfenced(a.limit, &out),
            },
        }
    }

    async fn list(
        &self,
        ns: &str,
        lane: Option<&LaneId>,
    ) -> Result<Vec<OccurrenceSummary>, StoreError> {
        let c = self.pool.get().await.map_err(pool_err)?;
        let lane = lane.map(|l| l.0.clone());
        let rs = c
            .query(
                "SELECT o.id, o.lane, o.class,
                        (SELECT count(*) FROM entries e WHERE e.ns = o.ns AND e.occurrence = o.id)
                 FROM occurrences o WHERE o.ns = $1 AND ($2::TEXT IS NULL OR o.lane = $2) ORDER BY o.id",
                &[&ns, &lane],
            )
            .await
            .map_err(pe)?;
        rs.iter()
            .map(|r| {
                Ok(OccurrenceSummary {
                    id: OccurrenceId::from_stored(r.get::<_, String>(0)),
                    lane: LaneId(r.get(1)),
                    class: Class::from_label(r.get(2))?,
                    len: rows::u64_of(r.get(3))?,
                })
            })
            .collect()
    }

    async fn admit(
        &self,
        ns: &str,
        lane: &LaneId,
        key: &str,
        payload: &Digest,
        now: Millis,
    ) -> Result<Admission, StoreError> {
        let mut c = self.pool.get().await.map_err(pool_err)?;
        let tx = c.transaction().await.map_err(pe)?;
        // One admission sequence per namespace: serialize admitters on a transaction lock.
        tx.execute("SELECT pg_advisory_xact_lock(hashtext($1))", &[&ns])
            .await
            .map_err(pe)?;
        if let Some(r) = tx
            .query_opt(
                &format!(
                    "SELECT {ADMISSION_COLS} FROM admissions WHERE ns = $1 AND submission_key = $2"
                ),
                &[&ns, &key],
            )
            .await
            .map_err(pe)?
        {
            return admission_of(&r);
        }
        let seq: i64 = tx
            .query_one(
                "SELECT COALESCE(MAX(seq), 0)::BIGINT + 1 FROM admissions WHERE ns = $1",
                &[&ns],
            )
            .await
            .map_err(pe)?
            .get(0);
        let a = Admission {
            id: AdmissionId::mint(),
            lane: lane.clone(),
            seq: rows::u64_of(seq)?,
            submission_key: key.to_string(),
            payload_digest: payload.clone(),
            state: AdmissionState::Queued,
            occurrence: None,
            version: 0,
            admitted_at: now,
        };
        let v = rows::encode_admission(&a)?;
        tx.execute(
            &format!("INSERT INTO admissions ({ADMISSION_COLS}, ns) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"),
            &[&v.id, &v.lane, &v.seq, &v.submission_key, &v.payload_digest, &v.state, &v.occurrence, &v.version, &v.admitted_at, &ns],
        )
        .await
        .map_err(pe)?;
        tx.commit().await.map_err(ce)?;
        Ok(a)
    }

    async fn admission_claim(
        &self,
        ns: &str,
        fence: Fence,
    ) -> Result<Option<Admission>, StoreError> {
        let mut c = self.pool.get().await.map_err(pool_err)?;
        let tx = c.transaction().await.map_err(pe)?;
        fence_check(&tx, ns, &fence).await?;
        let rows = lane_admissions(&tx, ns, &fence.holder.lane.0, true).await?;
        let Some(head) = admission::choose_next(&rows).map_err(StoreError::Admission)? else {
            return Ok(None);
        };
        let next = admission::start(head, fence.holder.generation, &fence.holder.executor)
            .map_err(StoreError::Admission)?;
        put_admission(&tx, ns, &next).await?;
        tx.commit().await.map_err(ce)?;
        Ok(Some(next))
    }

    async fn admission_put(
        &self,
        ns: &str,
        next: Admission,
        fence: Option<Fence>,
    ) -> Result<(), StoreError> {
        let mut c = self.pool.get().await.map_err(pool_err)?;
        let tx = c.transaction().await.map_err(pe)?;
        if let Some(f) = &fence {
            fence_check(&tx, ns, f).await?;
        }
        if get_admission(&tx, ns, next.id.as_str()).await?.is_none() {
            return Err(StoreError::NotFound {
                what: format!("admission {}", next.id),
            });
        }
        put_admission(&tx, ns, &next).await?;
        tx.commit().await.map_err(ce)
    }

    async fn admission_get(
        &self,
        ns: &str,
        id: &AdmissionId,
    ) -> Result<Option<Admission>, StoreError> {
        let c = self.pool.get().await.map_err(pool_err)?;
        get_admission(&c, ns, id.as_str()).await
    }

    async fn admission_list(&self, ns: &str, lane: &LaneId) -> Result<Vec<Admission>, StoreError> {
        let c = self.pool.get().await.map_err(pool_err)?;
        lane_admissions(&c, ns, &lane.0, false).await
    }
}
