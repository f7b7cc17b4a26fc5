//! The SQLite store: the embedded default. WAL journal, `synchronous = FULL` (a commit is on disk
//! when `COMMIT` returns), ordered migrations recorded in `schema_migrations`.
//!
//! **Group commit.** Every write goes to one writer thread that owns the write connection. It
//! takes the first waiting write at once, and every write that queued up while the previous
//! commit was on its way to disk, and runs them in one `BEGIN IMMEDIATE` transaction, each under
//! its own savepoint (a write that fails or is refused is rolled back alone and leaves the others
//! untouched), then commits once. No caller is answered before the `COMMIT` that holds its write
//! returned: nothing is acknowledged before it is durable, and a failed commit fails every write
//! in it. With one writer waiting there is nothing to batch and no savepoint: the write runs
//! exactly as a lone transaction did. Reads use a connection of their own (WAL readers do not
//! wait for the writer) and see every acknowledged write.
//!
//! Writes within one batch run in the order they arrived, each seeing the ones before it, so a
//! batch is equivalent to committing them one after another. Several `SqliteStore`s (or
//! processes) may open the same file; they serialize on SQLite's lock.

use super::rows::{self, AdmissionCols, EntryCols, LeaseCols};
use super::{
    Append, Class, CreateResult, Fence, LimitCheck, NewOccurrence, OccurrenceSummary, Store,
    StoreError, StoreInfo, check_fence, check_limit,
};
use crate::aoc::admission::{self, Admission, AdmissionState};
use crate::aoc::history::ChainedEntry;
use crate::aoc::ids::LimitKind;
use crate::aoc::ids::{AdmissionId, ExecutorId, Holder, LaneId, Millis, OccurrenceId};
use crate::aoc::lease::{self, AcquireMode, Lease};
use crate::digest::Digest;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, mpsc};

/// Ordered migrations; each runs once, in one transaction with its `schema_migrations` row.
const MIGRATIONS: &[(i64, &str, &str)] = &[
    (1, "init", include_str!("migrations/sqlite/0001_init.sql")),
    (
        2,
        "records",
        include_str!("migrations/sqlite/0002_records.sql"),
    ),
];

/// A SQLite-backed store.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    /// The read connection.
    conn: Arc<Mutex<Connection>>,
    /// The writer thread and its queue.
    writer: Arc<Writer>,
    /// The benchmark's baseline connection (see [`SqliteStore::bare_commit`]), opened on demand.
    bare: Arc<Mutex<Option<Connection>>>,
    path: PathBuf,
}

fn be(e: rusqlite::Error) -> StoreError {
    StoreError::backend(e)
}

/// Hands a write's result to its caller once the commit holding it has returned (`None`) or
/// failed (`Some`, the commit's error).
type Deliver = Box<dyn FnOnce(Option<&str>) + Send>;

/// One write for the writer thread. Given the open transaction it runs and says whether it
/// succeeded (a failed one is rolled back to its savepoint) and how to answer its caller; given
/// `Err(why)` it does not run and answers with `why`.
type Job = Box<dyn FnOnce(Result<&Connection, &str>) -> (bool, Deliver) + Send>;

/// The writer thread's queue and handle. When the last handle on the store goes, the queue
/// closes and the drop waits for the thread: it has answered every write and closed its
/// connection (the last checkpoint included) before the store is gone, so a caller that then
/// reads, copies or hashes the database file sees it finished.
#[derive(Debug)]
struct Writer {
    queue: Option<mpsc::Sender<Job>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.queue.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The most writes one commit holds (bounds a batch's latency and its rollback).
const MAX_BATCH: usize = 256;

fn connect(path: &Path) -> Result<Connection, StoreError> {
    let conn = Connection::open(path)
        .map_err(|e| StoreError::backend(format!("open {}: {e}", path.display())))?;
    conn.busy_timeout(std::time::Duration::from_secs(30))
        .map_err(be)?;
    conn.pragma_update(None, "journal_mode", "WAL")
        .map_err(be)?;
    conn.pragma_update(None, "synchronous", "FULL")
        .map_err(be)?;
    conn.pragma_update(None, "wal_autocheckpoint", 8000)
        .map_err(be)?;
    Ok(conn)
}

/// The writer thread: one transaction per batch of waiting writes, one commit, then the answers.
/// Ends when every handle on the store is gone.
fn writer_loop(conn: Connection, jobs: mpsc::Receiver<Job>) {
    let mut batch: Vec<Job> = Vec::with_capacity(MAX_BATCH);
    let mut answers: Vec<Deliver> = Vec::with_capacity(MAX_BATCH);
    while let Ok(first) = jobs.recv() {
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match jobs.try_recv() {
                Ok(j) => batch.push(j),
                Err(_) => break,
            }
        }
        if let Err(e) = conn.execute_batch("BEGIN IMMEDIATE") {
            let why = format!("begin: {e}");
            for job in batch.drain(..) {
                let (_, deliver) = job(Err(&why));
                deliver(None);
            }
            continue;
        }
        let alone = batch.len() == 1;
        let mut all_ok = true;
        for job in batch.drain(..) {
            let (ok, deliver) = run_job(&conn, job, !alone);
            all_ok &= ok;
            answers.push(deliver);
        }
        // A lone write that failed leaves nothing behind; in a batch, its savepoint did that.
        let end = if alone && !all_ok {
            "ROLLBACK"
        } else {
            "COMMIT"
        };
        let failed = conn.execute_batch(end).err().map(|e| format!("{end}: {e}"));
        if !conn.is_autocommit() {
            let _ = conn.execute_batch("ROLLBACK");
        }
        for deliver in answers.drain(..) {
            deliver(failed.as_deref());
        }
    }
}

/// Runs one write, under a savepoint when it shares the transaction with others. A write that
/// panics is rolled back and its caller answered as a backend failure; the thread goes on.
fn run_job(conn: &Connection, job: Job, savepoint: bool) -> (bool, Deliver) {
    if savepoint && let Err(e) = conn.execute_batch("SAVEPOINT w") {
        let (_, deliver) = job(Err(&format!("savepoint: {e}")));
        return (false, deliver);
    }
    let (ok, deliver) =
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(Ok(conn)))) {
            Ok(r) => r,
            // The job's own answer went down with it: its caller sees the writer's channel close.
            Err(_) => (false, Box::new(|_: Option<&str>| {}) as Deliver),
        };
    if savepoint {
        if !ok {
            let _ = conn.execute_batch("ROLLBACK TO w");
        }
        let _ = conn.execute_batch("RELEASE w");
    }
    (ok, deliver)
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path` and applies pending migrations.
    /// A new connection to the same file.
    pub fn reopen(&self) -> Result<Self, StoreError> {
        Self::open(&self.path)
    }

    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let path = path.as_ref().to_path_buf();
        let mut wconn = connect(&path)?;
        migrate(&mut wconn)?;
        let conn = connect(&path)?;
        let (queue, jobs) = mpsc::channel::<Job>();
        let thread = std::thread::Builder::new()
            .name("aocheck-sqlite-writer".into())
            .spawn(move || writer_loop(wconn, jobs))
            .map_err(|e| StoreError::backend(format!("start the writer thread: {e}")))?;
        Ok(SqliteStore {
            conn: Arc::new(Mutex::new(conn)),
            writer: Arc::new(Writer {
                queue: Some(queue),
                thread: Some(thread),
            }),
            bare: Arc::default(),
            path,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `f` inside the writer's transaction (see the module's group commit) and answers once
    /// the commit holding it is durable: `Ok` only then; `f`'s error, or the commit's.
    async fn write<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let (tx, rx) = tokio::sync::oneshot::channel::<Result<T, StoreError>>();
        let job: Job = Box::new(move |conn| {
            let out = match conn {
                Ok(c) => f(c),
                Err(why) => Err(StoreError::backend(why)),
            };
            let ok = out.is_ok();
            let deliver: Deliver = Box::new(move |failed| {
                let answer = match (out, failed) {
                    (Ok(_), Some(why)) => Err(StoreError::commit(why)),
                    (out, _) => out,
                };
                let _ = tx.send(answer);
            });
            (ok, deliver)
        });
        self.writer
            .queue
            .as_ref()
            .ok_or_else(|| StoreError::backend("the sqlite writer thread has stopped"))?
            .send(job)
            .map_err(|_| StoreError::backend("the sqlite writer thread has stopped"))?;
        rx.await.map_err(|_| {
            StoreError::backend(
                "the sqlite writer dropped this write (it panicked); it was rolled back",
            )
        })?
    }

    async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let conn = self.conn.clone();
        tokio::task::spawn_blocking(move || {
            let c = conn
                .lock()
                .map_err(|_| StoreError::backend("sqlite mutex poisoned"))?;
            f(&c)
        })
        .await
        .map_err(|e| StoreError::backend(format!("blocking task: {e}")))?
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
        let (ns, occ) = (ns.to_string(), occ.to_string());
        self.write(move |tx| {
            let n = tx
                .execute(
                    "UPDATE entries SET body = ?1 WHERE ns = ?2 AND occurrence = ?3 AND seq = ?4",
                    params![body, ns, occ, seq as i64],
                )
                .map_err(be)?;
            Ok(n == 1)
        })
        .await
    }

    /// Creates the benchmark's bare table (outside the domain schema) and opens the baseline's
    /// own connection.
    pub async fn prepare_bench(&self) -> Result<(), StoreError> {
        self.write(|tx| {
            exec(
                tx,
                "CREATE TABLE IF NOT EXISTS bench_bare (k TEXT PRIMARY KEY) WITHOUT ROWID",
                [],
            )
            .map_err(be)?;
            Ok(())
        })
        .await?;
        let conn = connect(&self.path)?;
        *self
            .bare
            .lock()
            .map_err(|_| StoreError::backend("sqlite mutex poisoned"))? = Some(conn);
        Ok(())
    }

    /// The benchmark's physical limit, kept as it was before group commit: one row inserted and
    /// committed in its own `BEGIN IMMEDIATE` transaction, on a connection of its own with the
    /// same settings, callers taking turns on it (no batching). Needs [`Self::prepare_bench`].
    pub async fn bare_commit(&self, key: String) -> Result<(), StoreError> {
        let conn = self.bare.clone();
        tokio::task::spawn_blocking(move || {
            let mut c = conn
                .lock()
                .map_err(|_| StoreError::backend("sqlite mutex poisoned"))?;
            let c = c
                .as_mut()
                .ok_or_else(|| StoreError::backend("bare_commit before prepare_bench"))?;
            let tx = c
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(be)?;
            exec(&tx, "INSERT INTO bench_bare (k) VALUES (?1)", params![key]).map_err(be)?;
            tx.commit().map_err(StoreError::commit)
        })
        .await
        .map_err(|e| StoreError::backend(format!("blocking task: {e}")))?
    }
}

/// `execute` through the connection's statement cache.
fn exec(c: &Connection, sql: &str, p: impl rusqlite::Params) -> rusqlite::Result<usize> {
    c.prepare_cached(sql)?.execute(p)
}

/// `query_row` through the connection's statement cache.
fn query_row<T>(
    c: &Connection,
    sql: &str,
    p: impl rusqlite::Params,
    f: impl FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    c.prepare_cached(sql)?.query_row(p, f)
}

fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(be)?;
    exec(&tx,
        "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL)",
        [],
    )
    .map_err(be)?;
    let applied: i64 = query_row(
        &tx,
        "SELECT COALESCE(MAX(version), 0) FROM schema_migrations",
        [],
        |r| r.get(0),
    )
    .map_err(be)?;
    for (version, name, sql) in MIGRATIONS {
        if *version > applied {
            tx.execute_batch(sql)
                .map_err(|e| StoreError::backend(format!("migration {version} ({name}): {e}")))?;
            exec(
                &tx,
                "INSERT INTO schema_migrations (version, name) VALUES (?1, ?2)",
                params![version, name],
            )
            .map_err(be)?;
        }
    }
    tx.commit().map_err(StoreError::commit)
}

fn get_lease(c: &Connection, ns: &str, lane: &str) -> Result<Option<Lease>, StoreError> {
    query_row(c,
        "SELECT lane, executor, generation, acquired_at, expires_at, released FROM leases WHERE ns = ?1 AND lane = ?2",
        params![ns, lane],
        |r| {
            Ok(LeaseCols {
                lane: r.get(0)?,
                executor: r.get(1)?,
                generation: r.get(2)?,
                acquired_at: r.get(3)?,
                expires_at: r.get(4)?,
                released: r.get(5)?,
            })
        },
    )
    .optional()
    .map_err(be)?
    .map(rows::decode_lease)
    .transpose()
}

fn put_lease(
    c: &Connection,
    ns: &str,
    l: &Lease,
    log_mode: Option<&str>,
) -> Result<(), StoreError> {
    let v = rows::encode_lease(l)?;
    exec(c,
        "INSERT INTO leases (ns, lane, executor, generation, acquired_at, expires_at, released)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
         ON CONFLICT (ns, lane) DO UPDATE SET executor = excluded.executor, generation = excluded.generation,
           acquired_at = excluded.acquired_at, expires_at = excluded.expires_at, released = excluded.released",
        params![ns, v.lane, v.executor, v.generation, v.acquired_at, v.expires_at, v.released],
    )
    .map_err(be)?;
    if let Some(mode) = log_mode {
        exec(c,
            "INSERT INTO lease_log (ns, lane, generation, executor, acquired_at, mode) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![ns, v.lane, v.generation, v.executor, v.acquired_at, mode],
        )
        .map_err(be)?;
    }
    Ok(())
}

fn fence_check(c: &Connection, ns: &str, f: &Fence) -> Result<(), StoreError> {
    let l = get_lease(c, ns, &f.holder.lane.0)?;
    check_fence(l.as_ref(), f)
}

fn count(
    c: &Connection,
    ns: &str,
    lane: &str,
    which: LimitKind,
    except: &str,
) -> Result<u32, StoreError> {
    let n: i64 = query_row(
        c,
        "SELECT COUNT(*) FROM occurrences WHERE ns = ?1 AND lane = ?2 AND class = ?3 AND id <> ?4",
        params![ns, lane, Class::of_limit(which).label(), except],
        |r| r.get(0),
    )
    .map_err(be)?;
    Ok(n as u32)
}

fn insert_entries(
    c: &Connection,
    ns: &str,
    occ: &str,
    entries: &[ChainedEntry],
) -> Result<(), StoreError> {
    let mut stmt = c
        .prepare_cached("INSERT INTO entries (ns, occurrence, seq, prev, digest, body) VALUES (?1, ?2, ?3, ?4, ?5, ?6)")
        .map_err(be)?;
    for e in entries {
        let v = rows::encode_entry(e)?;
        stmt.execute(params![ns, occ, v.seq, v.prev, v.digest, v.body])
            .map_err(|err| match err {
                rusqlite::Error::SqliteFailure(f, _)
                    if f.code == rusqlite::ErrorCode::ConstraintViolation =>
                {
                    StoreError::Conflict {
                        what: format!("entry {} of {occ} already exists", e.seq),
                    }
                }
                other => be(other),
            })?;
    }
    Ok(())
}

fn get_admission(c: &Connection, ns: &str, id: &str) -> Result<Option<Admission>, StoreError> {
    query_row(c,
        "SELECT id, lane, seq, submission_key, payload_digest, state, occurrence, version, admitted_at
         FROM admissions WHERE ns = ?1 AND id = ?2",
        params![ns, id],
        admission_cols,
    )
    .optional()
    .map_err(be)?
    .map(rows::decode_admission)
    .transpose()
}

fn admission_cols(r: &rusqlite::Row<'_>) -> rusqlite::Result<AdmissionCols> {
    Ok(AdmissionCols {
        id: r.get(0)?,
        lane: r.get(1)?,
        seq: r.get(2)?,
        submission_key: r.get(3)?,
        payload_digest: r.get(4)?,
        state: r.get(5)?,
        occurrence: r.get(6)?,
        version: r.get(7)?,
        admitted_at: r.get(8)?,
    })
}

fn lane_admissions(c: &Connection, ns: &str, lane: &str) -> Result<Vec<Admission>, StoreError> {
    let mut stmt = c
        .prepare_cached(
            "SELECT id, lane, seq, submission_key, payload_digest, state, occurrence, version, admitted_at
             FROM admissions WHERE ns = ?1 AND lane = ?2 ORDER BY seq",
        )
        .map_err(be)?;
    let rows = stmt
        .query_map(params![ns, lane], admission_cols)
        .map_err(be)?;
    let mut out = Vec::new();
    for r in rows {
        out.push(rows::decode_admission(r.map_err(be)?)?);
    }
    Ok(out)
}

fn put_admission(c: &Connection, ns: &str, a: &Admission) -> Result<(), StoreError> {
    let v = rows::encode_admission(a)?;
    let n = c
        .execute(
            "UPDATE admissions SET state = ?3, occurrence = ?4, version = ?5 WHERE ns = ?1 AND id = ?2 AND version = ?6",
            params![ns, v.id, v.state, v.occurrence, v.version, v.version - 1],
        )
        .map_err(be)?;
    if n != 1 {
        return Err(StoreError::Conflict {
            what: format!("admission {} is not at version {}", a.id, v.version - 1),
        });
    }
    Ok(())
}

impl Store for SqliteStore {
    async fn record_get(
        &self,
        ns: &str,
        key: &str,
    ) -> Result<Option<(u64, serde_json::Value)>, StoreError> {
        let (ns, key) = (ns.to_string(), key.to_string());
        self.read(move |c| {
            let row: Option<(i64, String)> = query_row(
                c,
                "SELECT version, value FROM records WHERE ns = ?1 AND key = ?2",
                params![ns, key],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(be)?;
            row.map(|(v, text)| {
                Ok((
                    rows::u64_of(v)?,
                    serde_json::from_str(&text).map_err(StoreError::corrupt)?,
                ))
            })
            .transpose()
        })
        .await
    }

    async fn record_cas(
        &self,
        ns: &str,
        key: &str,
        expected: Option<u64>,
        value: &serde_json::Value,
    ) -> Result<u64, StoreError> {
        let (ns, key, text) = (ns.to_string(), key.to_string(), value.to_string());
        self.write(move |tx| {
            let current: Option<i64> = query_row(tx, "SELECT version FROM records WHERE ns = ?1 AND key = ?2", params![ns, key], |r| r.get(0))
                .optional()
                .map_err(be)?;
            let current = current.map(rows::u64_of).transpose()?;
            if current != expected {
                return Err(StoreError::Conflict { what: format!("record {key} is at version {current:?}, expected {expected:?}") });
            }
            let next = expected.map_or(1, |v| v + 1);
            exec(
                tx,
                "INSERT INTO records (ns, key, version, value) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (ns, key) DO UPDATE SET version = excluded.version, value = excluded.value",
                params![ns, key, rows::i64_of(next)?, text],
            )
            .map_err(be)?;
            Ok(next)
        })
        .await
    }

    fn info(&self) -> StoreInfo {
        StoreInfo {
            kind: "sqlite",
            durable: true,
        }
    }

    async fn lease_get(&self, ns: &str, lane: &LaneId) -> Result<Option<Lease>, StoreError> {
        let (ns, lane) = (ns.to_string(), lane.0.clone());
        self.read(move |c| get_lease(c, &ns, &lane)).await
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
        let (ns, lane, executor) = (ns.to_string(), lane.clone(), executor.clone());
        self.write(move |tx| {
            let cur = get_lease(tx, &ns, &lane.0)?;
            let next = lease::acquire(cur.as_ref(), &lane, &executor, now, ttl_ms, mode)
                .map_err(StoreError::Lease)?;
            let mode = match mode {
                AcquireMode::IfFree => "if_free",
                AcquireMode::Replace => "replace",
            };
            put_lease(tx, &ns, &next, Some(mode))?;
            Ok(next)
        })
        .await
    }

    async fn lease_refresh(
        &self,
        ns: &str,
        holder: &Holder,
        now: Millis,
        ttl_ms: u64,
    ) -> Result<Lease, StoreError> {
        let (ns, holder) = (ns.to_string(), holder.clone());
        self.write(move |tx| {
            let cur = get_lease(tx, &ns, &holder.lane.0)?;
            let next =
                lease::refresh(cur.as_ref(), &holder, now, ttl_ms).map_err(StoreError::Lease)?;
            put_lease(tx, &ns, &next, None)?;
            Ok(next)
        })
        .await
    }

    async fn lease_release(&self, ns: &str, holder: &Holder) -> Result<Lease, StoreError> {
        let (ns, holder) = (ns.to_string(), holder.clone());
        self.write(move |tx| {
            let cur = get_lease(tx, &ns, &holder.lane.0)?;
            let next = lease::release(cur.as_ref(), &holder).map_err(StoreError::Lease)?;
            put_lease(tx, &ns, &next, None)?;
            Ok(next)
        })
        .await
    }

    async fn create(
        &self,
        ns: &str,
        new: NewOccurrence,
        fence: Fence,
        limit: Option<LimitCheck>,
    ) -> Result<CreateResult, StoreError> {
        let ns = ns.to_string();
        self.write(move |tx| {
            let cb = new.creation_binding.to_string();
            let existing: Option<String> = query_row(tx,
                    "SELECT id FROM occurrences WHERE ns = ?1 AND creation_binding = ?2",
                    params![ns, cb],
                    |r| r.get(0),
                )
                .optional()
                .map_err(be)?;
            if let Some(id) = existing {
                return Ok(CreateResult::Existing(OccurrenceId::from_stored(id)));
            }
            fence_check(tx, &ns, &fence)?;
            let af = new.action_fence.as_ref().map(|d| d.to_string());
            if let Some(f) = &af {
                let fenced: Option<String> = query_row(tx,
                        "SELECT id FROM occurrences WHERE ns = ?1 AND action_fence = ?2",
                        params![ns, f],
                        |r| r.get(0),
                    )
                    .optional()
                    .map_err(be)?;
                if let Some(id) = fenced {
                    return Ok(CreateResult::ActionFenced(OccurrenceId::from_stored(id)));
                }
            }
            check_limit(limit, |w| count(tx, &ns, &new.lane.0, w, ""))?;
            exec(tx,
                "INSERT INTO occurrences (ns, id, lane, class, creation_binding, action_fence) VALUES (?1, ?2, ?3, 'pending', ?4, ?5)",
                params![ns, new.id.as_str(), new.lane.0, cb, af],
            )
            .map_err(be)?;
            insert_entries(tx, &ns, new.id.as_str(), std::slice::from_ref(&new.first))?;
            Ok(CreateResult::Created)
        })
        .await
    }

    async fn find_creation(
        &self,
        ns: &str,
        cb: &Digest,
    ) -> Result<Option<OccurrenceId>, StoreError> {
        let (ns, cb) = (ns.to_string(), cb.to_string());
        self.read(move |c| {
            let id: Option<String> = query_row(
                c,
                "SELECT id FROM occurrences WHERE ns = ?1 AND creation_binding = ?2",
                params![ns, cb],
                |r| r.get(0),
            )
            .optional()
            .map_err(be)?;
            Ok(id.map(OccurrenceId::from_stored))
        })
        .await
    }

    async fn load(
        &self,
        ns: &str,
        occ: &OccurrenceId,
    ) -> Result<Option<Vec<ChainedEntry>>, StoreError> {
        let (ns, occ) = (ns.to_string(), occ.to_string());
        self.read(move |c| {
            let mut stmt = c
                .prepare_cached("SELECT seq, prev, digest, body FROM entries WHERE ns = ?1 AND occurrence = ?2 ORDER BY seq")
                .map_err(be)?;
            let rows = stmt
                .query_map(params![ns, occ], |r| {
                    Ok(EntryCols {
                        seq: r.get(0)?,
                        prev: r.get(1)?,
                        digest: r.get(2)?,
                        body: r.get(3)?,
                    })
                })
                .map_err(be)?;
            let mut out = Vec::new();
            for r in rows {
                out.push(rows::decode_entry(r.map_err(be)?)?);
            }
            Ok(if out.is_empty() { None } else { Some(out) })
        })
        .await
    }

    async fn append(&self, ns: &str, a: Append) -> Result<(), StoreError> {
        let ns = ns.to_string();
        self.write(move |tx| {
            if let Some(f) = &a.fence {
                fence_check(tx, &ns, f)?;
            }
            let lane: Option<String> = query_row(
                tx,
                "SELECT lane FROM occurrences WHERE ns = ?1 AND id = ?2",
                params![ns, a.occurrence.as_str()],
                |r| r.get(0),
            )
            .optional()
            .map_err(be)?;
            let lane = lane.ok_or_else(|| StoreError::NotFound {
                what: format!("occurrence {}", a.occurrence),
            })?;
            // The history must be exactly `expected_len` long: the last entry exists …
            let last: Option<i64> = query_row(
                tx,
                "SELECT seq FROM entries WHERE ns = ?1 AND occurrence = ?2 AND seq = ?3",
                params![ns, a.occurrence.as_str(), rows::i64_of(a.expected_len)? - 1],
                |r| r.get(0),
            )
            .optional()
            .map_err(be)?;
            if last.is_none() {
                return Err(StoreError::Conflict {
                    what: format!(
                        "occurrence {} has fewer than {} entries",
                        a.occurrence, a.expected_len
                    ),
                });
            }
            check_limit(a.limit, |w| count(tx, &ns, &lane, w, a.occurrence.as_str()))?;
            // … and the next positions are free (their primary key refuses a racing append).
            insert_entries(tx, &ns, a.occurrence.as_str(), &a.entries)?;
            if let Some(class) = a.class_change {
                exec(
                    tx,
                    "UPDATE occurrences SET class = ?3 WHERE ns = ?1 AND id = ?2",
                    params![ns, a.occurrence.as_str(), class.label()],
                )
                .map_err(be)?;
            }
            Ok(())
        })
        .await
    }

    async fn list(
        &self,
        ns: &str,
        lane: Option<&LaneId>,
    ) -> Result<Vec<OccurrenceSummary>, StoreError> {
        let (ns, lane) = (ns.to_string(), lane.map(|l| l.0.clone()));
        self.read(move |c| {
            let mut stmt = c
                .prepare_cached(
                    "SELECT o.id, o.lane, o.class,
                        (SELECT COUNT(*) FROM entries e WHERE e.ns = o.ns AND e.occurrence = o.id)
                     FROM occurrences o WHERE o.ns = ?1 AND (?2 IS NULL OR o.lane = ?2) ORDER BY o.id",
                )
                .map_err(be)?;
            let rows = stmt
                .query_map(params![ns, lane], |r| {
                    Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?, r.get::<_, i64>(3)?))
                })
                .map_err(be)?;
            let mut out = Vec::new();
            for r in rows {
                let (id, lane, class, len) = r.map_err(be)?;
                out.push(OccurrenceSummary {
                    id: OccurrenceId::from_stored(id),
                    lane: LaneId(lane),
                    class: Class::from_label(&class)?,
                    len: rows::u64_of(len)?,
                });
            }
            Ok(out)
        })
        .await
    }

    async fn admit(
        &self,
        ns: &str,
        lane: &LaneId,
        key: &str,
        payload: &Digest,
        now: Millis,
    ) -> Result<Admission, StoreError> {
        let (ns, lane, key, payload) = (
            ns.to_string(),
            lane.clone(),
            key.to_string(),
            payload.clone(),
        );
        self.write(move |tx| {
            let existing: Option<String> = query_row(tx,
                    "SELECT id FROM admissions WHERE ns = ?1 AND submission_key = ?2",
                    params![ns, key],
                    |r| r.get(0),
                )
                .optional()
                .map_err(be)?;
            if let Some(id) = existing {
                return get_admission(tx, &ns, &id)?.ok_or_else(|| StoreError::corrupt("admission vanished"));
            }
            let seq: i64 = query_row(tx, "SELECT COALESCE(MAX(seq), 0) + 1 FROM admissions WHERE ns = ?1", params![ns], |r| r.get(0))
                .map_err(be)?;
            let a = Admission {
                id: AdmissionId::mint(),
                lane,
                seq: rows::u64_of(seq)?,
                submission_key: key,
                payload_digest: payload,
                state: AdmissionState::Queued,
                occurrence: None,
                version: 0,
                admitted_at: now,
            };
            let v = rows::encode_admission(&a)?;
            exec(tx,
                "INSERT INTO admissions (ns, id, lane, seq, submission_key, payload_digest, state, occurrence, version, admitted_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                params![ns, v.id, v.lane, v.seq, v.submission_key, v.payload_digest, v.state, v.occurrence, v.version, v.admitted_at],
            )
            .map_err(be)?;
            Ok(a)
        })
        .await
    }

    async fn admission_claim(
        &self,
        ns: &str,
        fence: Fence,
    ) -> Result<Option<Admission>, StoreError> {
        let ns = ns.to_string();
        self.write(move |tx| {
            fence_check(tx, &ns, &fence)?;
            let rows = lane_admissions(tx, &ns, &fence.holder.lane.0)?;
            let Some(head) = admission::choose_next(&rows).map_err(StoreError::Admission)? else {
                return Ok(None);
            };
            let next = admission::start(head, fence.holder.generation, &fence.holder.executor)
                .map_err(StoreError::Admission)?;
            put_admission(tx, &ns, &next)?;
            Ok(Some(next))
        })
        .await
    }

    async fn admission_put(
        &self,
        ns: &str,
        next: Admission,
        fence: Option<Fence>,
    ) -> Result<(), StoreError> {
        let ns = ns.to_string();
        self.write(move |tx| {
            if let Some(f) = &fence {
                fence_check(tx, &ns, f)?;
            }
            if get_admission(tx, &ns, next.id.as_str())?.is_none() {
                return Err(StoreError::NotFound {
                    what: format!("admission {}", next.id),
                });
            }
            put_admission(tx, &ns, &next)
        })
        .await
    }

    async fn admission_get(
        &self,
        ns: &str,
        id: &AdmissionId,
    ) -> Result<Option<Admission>, StoreError> {
        let (ns, id) = (ns.to_string(), id.to_string());
        self.read(move |c| get_admission(c, &ns, &id)).await
    }

    async fn admission_list(&self, ns: &str, lane: &LaneId) -> Result<Vec<Admission>, StoreError> {
        let (ns, lane) = (ns.to_string(), lane.0.clone());
        self.read(move |c| lane_admissions(c, &ns, &lane)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Group commit: many concurrent writes land in shared commits; half of them write a row and
    /// then fail. Each failed write leaves nothing and takes nothing of the others with it, and
    /// every write acknowledged is there on a new connection.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failed_write_in_a_batch_takes_nothing_else_with_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = SqliteStore::open(dir.path().join("s.db")).expect("open");
        // A first write holds the writer long enough for the others to queue behind it, so they
        // share commits for certain (the savepoint path runs; a lone write would not need it).
        let (held_tx, held_rx) = std::sync::mpsc::channel::<()>();
        let first = store.clone();
        let holder = tokio::spawn(async move {
            first
                .write(move |_| {
                    let _ = held_tx.send(());
                    std::thread::sleep(std::time::Duration::from_millis(300));
                    Ok(())
                })
                .await
        });
        tokio::task::spawn_blocking(move || held_rx.recv())
            .await
            .expect("join")
            .expect("the first write started");
        let mut tasks = Vec::new();
        for i in 0..64u64 {
            let s = store.clone();
            tasks.push(tokio::spawn(async move {
                let r = s
                    .write(move |c| {
                        exec(
                            c,
                            "INSERT INTO records (ns, key, version, value) VALUES ('ns', ?1, 1, '{}')",
                            params![format!("k{i}")],
                        )
                        .map_err(be)?;
                        // Odd writes fail after their statement ran.
                        if i % 2 == 1 {
                            return Err(StoreError::Conflict {
                                what: "refused after a statement".into(),
                            });
                        }
                        Ok(i)
                    })
                    .await;
                (i, r)
            }));
        }
        for t in tasks {
            let (i, r) = t.await.expect("task");
            if i % 2 == 0 {
                assert_eq!(r.expect("an even write is accepted"), i);
            } else {
                assert!(matches!(r, Err(StoreError::Conflict { .. })), "k{i}: {r:?}");
            }
        }
        holder.await.expect("task").expect("the holding write");
        let again = store.reopen().expect("reopen");
        for i in 0..64u64 {
            let got = again
                .record_get("ns", &format!("k{i}"))
                .await
                .expect("read");
            assert_eq!(got.is_some(), i % 2 == 0, "k{i}: {got:?}");
        }
    }

    /// A lone write that fails is rolled back whole (no savepoint covers it): a creation that is
    /// refused after its first statement ran leaves nothing.
    #[tokio::test]
    async fn a_lone_failed_write_leaves_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = SqliteStore::open(dir.path().join("s.db")).expect("open");
        let r = store
            .write(|c| {
                exec(
                    c,
                    "INSERT INTO records (ns, key, version, value) VALUES ('ns', 'half', 1, '{}')",
                    [],
                )
                .map_err(be)?;
                Err::<(), _>(StoreError::Conflict {
                    what: "refused after a statement".into(),
                })
            })
            .await;
        assert!(matches!(r, Err(StoreError::Conflict { .. })), "{r:?}");
        assert_eq!(store.record_get("ns", "half").await.expect("read"), None);
    }
}
