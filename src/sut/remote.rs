//! An implementation aocheck did not write, driven through `aocheck-sut/1`: one process per
//! executor generation plus one observer process that only reads (state, lane, admissions), so the
//! checkers always see what is durable in the implementation's store, whichever executor was just
//! killed. A crash is a SIGKILL; a successor is a new process on the same store.

use super::process::{CallError, Hello, SutProcess};
use super::protocol::SutFailure;
use super::reference::SutError;
use crate::aoc::admission::{Admission, AdmissionEnd};
use crate::aoc::history::{ChainedEntry, ReleaseReason};
use crate::aoc::ids::{AdmissionId, OccurrenceId};
use crate::aoc::occurrence::OccurrenceState;
use crate::aoc::{Refusal, RefusalKind, Req};
use crate::clock::{Clock, ManualClock};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The name the observer process is initialised with. It never joins the lane.
pub const OBSERVER: &str = "aocheck-observer";

/// How to start the implementation, and where its logs go.
#[derive(Clone, Debug)]
pub struct ProcessSpec {
    /// The command line (run through `sh -c exec …`).
    pub command: String,
    /// Per-request deadline.
    pub timeout: Duration,
    /// The run folder; logs go to `sut/<case>/`, SQLite stores to `sut/<case>/store.db`.
    pub dir: PathBuf,
    /// `None`: a fresh SQLite file per case; `Some(url)`: this PostgreSQL database.
    pub postgres: Option<String>,
}

/// One executor process.
#[derive(Debug)]
struct Exec {
    process: SutProcess,
    label: String,
}

/// Starts the case's implementation processes and keeps their log. Shared by the AOC executors
/// and the operator connector instances of one case.
#[derive(Clone, Debug)]
pub struct Spawner {
    inner: Arc<SpawnerInner>,
}

#[derive(Debug)]
struct SpawnerInner {
    spec: ProcessSpec,
    case_dir: PathBuf,
    init: Map<String, Value>,
    clock: ManualClock,
    spawned: AtomicU64,
    log: Mutex<Vec<String>>,
}

impl Spawner {
    /// Starts `name` (the n-th process of the case) and sends `init` with `extra` fields.
    pub async fn spawn(
        &self,
        name: &str,
        extra: Map<String, Value>,
    ) -> Result<(SutProcess, Hello, String), SutError> {
        let i = &self.inner;
        let n = i.spawned.fetch_add(1, Ordering::SeqCst);
        let label = if n == 0 {
            name.to_string()
        } else {
            format!("{name}-{n}")
        };
        let log = i.case_dir.join(format!("{name}-{n}.stderr"));
        let p = SutProcess::spawn(&i.spec.command, &log, i.spec.timeout)
            .map_err(|e| call_error(&label, e))?;
        let mut fields = i.init.clone();
        // One level deep: `providers.hermes` joins `providers.payments`.
        for (k, v) in extra {
            match (fields.get_mut(&k), v) {
                (Some(Value::Object(have)), Value::Object(add)) => have.extend(add),
                (_, v) => {
                    fields.insert(k, v);
                }
            }
        }
        // A secret unique to this process: an implementation may use it to authenticate its
        // lease holder; aocheck never reuses it.
        let credential = format!("cred_{}", uuid::Uuid::new_v4().simple());
        fields.insert(
            "executor".into(),
            json!({"name": name, "generation": n, "credential": credential}),
        );
        fields.insert("now".into(), i.clock.now().0.into());
        let hello = p.init(fields).await.map_err(|e| match e {
            CallError::Version { .. } => SutError::Harness(format!("version: {e}")),
            e => call_error(&label, e),
        })?;
        if let Ok(mut l) = i.log.lock() {
            l.push(format!(
                "{label}: pid {}{}",
                p.pid().map_or_else(|| "?".to_string(), |x| x.to_string()),
                if n == 0 { ", reads only" } else { "" }
            ));
        }
        Ok((p, hello, label))
    }

    /// Adds to a process's line in the log (how it ended).
    pub fn note(&self, label: &str, what: &str) {
        if let Ok(mut l) = self.inner.log.lock()
            && let Some(line) = l.iter_mut().find(|x| x.starts_with(&format!("{label}:")))
        {
            line.push_str(&format!(", {what}"));
        }
    }

    pub fn log(&self) -> Vec<String> {
        self.inner.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    pub fn clock(&self) -> &ManualClock {
        &self.inner.clock
    }
}

/// The implementation under test, as processes.
#[derive(Debug)]
pub struct ProcessSut {
    spawner: Spawner,
    observer: SutProcess,
    executors: BTreeMap<String, Exec>,
    /// Executors killed by the harness (name → process label), so a later call says so.
    killed: BTreeMap<String, String>,
    pub hello: Hello,
}

fn call_error(who: &str, e: CallError) -> SutError {
    SutError::Harness(format!("implementation process {who}: {e}"))
}

/// A protocol error as the runner's error. A refusal keeps its requirement; anything else the
/// implementation reports is quoted.
pub fn failure_error(op: &str, f: SutFailure) -> SutError {
    match f.kind.as_str() {
        "refused" => match f.requirement.as_deref().and_then(Req::parse) {
            Some(req) => SutError::Refused(Refusal::new(
                None,
                req,
                RefusalKind::Reported {
                    msg: f.message.clone(),
                },
            )),
            None => SutError::RefusedUnnamed(format!(
                "{op} was refused without naming a requirement ({:?}): {}",
                f.requirement.unwrap_or_default(),
                f.message
            )),
        },
        "corrupt" => SutError::Corrupt(f.message),
        kind => SutError::Harness(format!(
            "{op} failed ({kind}, outcome {}): {}",
            match f.outcome {
                super::protocol::Outcome::Definite => "definite",
                super::protocol::Outcome::Indefinite => "indefinite",
            },
            f.message
        )),
    }
}

impl ProcessSut {
    /// Starts the observer and learns what the implementation supports.
    pub async fn start(
        spec: ProcessSpec,
        case: &str,
        mut init: Map<String, Value>,
        clock: ManualClock,
    ) -> Result<Self, SutError> {
        let case_dir = spec.dir.join("sut").join(case);
        std::fs::create_dir_all(&case_dir)
            .map_err(|e| SutError::Harness(format!("{}: {e}", case_dir.display())))?;
        let store = match &spec.postgres {
            Some(url) => json!({"kind": "postgres", "url": url}),
            None => {
                let path = case_dir.join("store.db");
                for suffix in ["", "-wal", "-shm"] {
                    let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
                }
                let abs = std::path::absolute(&path)
                    .map_err(|e| SutError::Harness(format!("{}: {e}", path.display())))?;
                json!({"kind": "sqlite", "path": abs.display().to_string()})
            }
        };
        init.insert("store".into(), store);
        init.insert("case".into(), case.into());
        let spawner = Spawner {
            inner: Arc::new(SpawnerInner {
                spec,
                case_dir,
                init,
                clock,
                spawned: AtomicU64::new(0),
                log: Mutex::new(Vec::new()),
            }),
        };
        let (observer, hello, _) = spawner.spawn(OBSERVER, Map::new()).await?;
        Ok(ProcessSut {
            spawner,
            observer,
            executors: BTreeMap::new(),
            killed: BTreeMap::new(),
            hello,
        })
    }

    /// The case's process starter (for the operator connector's instances).
    pub fn spawner(&self) -> Spawner {
        self.spawner.clone()
    }

    /// Every process started, with how it ended, for the report.
    pub fn processes(&self) -> Vec<String> {
        self.spawner.log()
    }

    fn exec(&mut self, name: &str) -> Result<&mut Exec, SutError> {
        if let Some(label) = self.killed.get(name)
            && !self.executors.contains_key(name)
        {
            return Err(SutError::Harness(format!(
                "executor {name:?} ({label}) was killed; it cannot act"
            )));
        }
        self.executors
            .get_mut(name)
            .ok_or_else(|| SutError::Harness(format!("no executor {name:?}")))
    }

    async fn call_on(
        p: &SutProcess,
        who: &str,
        now: u64,
        op: &str,
        fields: Value,
    ) -> Result<Value, SutError> {
        let mut f = match fields {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        f.insert("now".into(), now.into());
        match p.call(op, f).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(fail)) => Err(failure_error(op, fail)),
            Err(e) => Err(call_error(who, e)),
        }
    }

    async fn call(&mut self, who: &str, op: &str, fields: Value) -> Result<Value, SutError> {
        let now = self.spawner.clock().now().0;
        let e = self.exec(who)?;
        let label = e.label.clone();
        Self::call_on(&e.process, &label, now, op, fields).await
    }

    async fn observe(&mut self, op: &str, fields: Value) -> Result<Value, SutError> {
        let now = self.spawner.clock().now().0;
        Self::call_on(&self.observer, OBSERVER, now, op, fields).await
    }

    /// Whether the implementation lists an operation.
    pub fn supports(&self, op: &str) -> bool {
        self.hello.operations.iter().any(|o| o == op)
    }

    async fn start_executor(&mut self, name: &str, op: &str) -> Result<(), SutError> {
        let (p, _, label) = self.spawner.spawn(name, Map::new()).await?;
        if let Some(old) = self.executors.insert(
            name.into(),
            Exec {
                process: p,
                label: label.clone(),
            },
        ) {
            // The same name again: the earlier process is retired, not killed.
            self.executors.insert(format!("{name}#{}", old.label), old);
        }
        self.killed.remove(name);
        self.call(name, op, json!({})).await.map(|_| ())
    }

    pub async fn join(&mut self, name: &str) -> Result<(), SutError> {
        self.start_executor(name, "join").await
    }

    pub async fn replace(&mut self, name: &str) -> Result<(), SutError> {
        self.start_executor(name, "takeover").await
    }

    /// SIGKILL: the process and everything in its memory die now.
    pub async fn crash(&mut self, name: &str) -> Result<(), SutError> {
        let e = self
            .executors
            .remove(name)
            .ok_or_else(|| SutError::Harness(format!("no executor {name:?} to kill")))?;
        e.process
            .kill()
            .await
            .map_err(|err| SutError::Harness(format!("SIGKILL {}: {err}", e.label)))?;
        self.spawner.note(&e.label, "killed with SIGKILL");
        self.killed.insert(name.into(), e.label);
        Ok(())
    }

    pub async fn create(
        &mut self,
        who: &str,
        key: &str,
        amount: i64,
        simulate: Option<&str>,
    ) -> Result<OccurrenceId, SutError> {
        let mut f = json!({"key": key, "amount": amount});
        if let Some(s) = simulate {
            f["simulate"] = s.into();
        }
        let v = self.call(who, "create", f).await?;
        v["occurrence"]
            .as_str()
            .map(OccurrenceId::from_stored)
            .ok_or_else(|| SutError::Harness(format!("create answered without `occurrence`: {v}")))
    }

    pub async fn occ_op(
        &mut self,
        who: &str,
        op: &str,
        occ: &OccurrenceId,
        extra: Value,
    ) -> Result<Value, SutError> {
        let mut f = json!({"occurrence": occ});
        if let (Value::Object(m), Value::Object(x)) = (&mut f, extra) {
            m.extend(x);
        }
        self.call(who, op, f).await
    }

    pub async fn release(
        &mut self,
        who: &str,
        occ: &OccurrenceId,
        reason: ReleaseReason,
    ) -> Result<(), SutError> {
        self.occ_op(who, "release", occ, json!({"reason": reason}))
            .await
            .map(|_| ())
    }

    pub async fn remedy(
        &mut self,
        who: &str,
        occ: &OccurrenceId,
        authorization: &str,
    ) -> Result<OccurrenceId, SutError> {
        let v = self
            .occ_op(who, "remedy", occ, json!({"authorization": authorization}))
            .await?;
        v["occurrence"]
            .as_str()
            .map(OccurrenceId::from_stored)
            .ok_or_else(|| SutError::Harness(format!("remedy answered without `occurrence`: {v}")))
    }

    /// Every live executor finishes its background work.
    pub async fn settle(&mut self) -> Result<(), SutError> {
        let names: Vec<String> = self.executors.keys().cloned().collect();
        for n in names {
            self.call(&n, "settle", json!({})).await?;
        }
        Ok(())
    }

    /// What the implementation reports about an occurrence and its raw history, read by the
    /// observer. The state is folded from the history when the implementation gives none.
    pub async fn observe_occurrence(
        &mut self,
        occ: &OccurrenceId,
    ) -> Result<(Result<OccurrenceState, String>, Vec<ChainedEntry>), SutError> {
        let v = self.observe("state", json!({"occurrence": occ})).await?;
        let history: Vec<ChainedEntry> =
            serde_json::from_value(v["history"].clone()).map_err(|e| {
                SutError::Corrupt(format!(
                    "the history of {occ} is not aocheck evidence (docs/sut-protocol.md): {e}"
                ))
            })?;
        let state = match v.get("state") {
            Some(s) if !s.is_null() => serde_json::from_value::<OccurrenceState>(s.clone())
                .map_err(|e| format!("the state of {occ} does not parse: {e}")),
            _ => OccurrenceState::fold(&history).map_err(|e| e.to_string()),
        };
        Ok((state, history))
    }

    pub async fn lane_generation(&mut self) -> Result<Option<u64>, SutError> {
        let v = self.observe("lane", json!({})).await?;
        Ok(v["generation"].as_u64())
    }

    pub async fn submit(&mut self, key: &str) -> Result<AdmissionId, SutError> {
        let v = self.observe("submit", json!({"key": key})).await?;
        v["admission"]
            .as_str()
            .map(AdmissionId::from_stored)
            .ok_or_else(|| SutError::Harness(format!("submit answered without `admission`: {v}")))
    }

    pub async fn claim(&mut self, who: &str) -> Result<Option<AdmissionId>, SutError> {
        let v = self.call(who, "claim", json!({})).await?;
        Ok(v["admission"].as_str().map(AdmissionId::from_stored))
    }

    pub async fn adm_op(
        &mut self,
        who: &str,
        op: &str,
        adm: &AdmissionId,
        extra: Value,
    ) -> Result<(), SutError> {
        let mut f = json!({"admission": adm});
        if let (Value::Object(m), Value::Object(x)) = (&mut f, extra) {
            m.extend(x);
        }
        self.call(who, op, f).await.map(|_| ())
    }

    pub async fn finish(
        &mut self,
        who: &str,
        adm: &AdmissionId,
        end: AdmissionEnd,
    ) -> Result<(), SutError> {
        self.adm_op(who, "finish", adm, json!({"end": end})).await
    }

    pub async fn admission(&mut self, adm: &AdmissionId) -> Result<Admission, SutError> {
        let v = self.observe("admission", json!({"admission": adm})).await?;
        serde_json::from_value(v.clone())
            .map_err(|e| SutError::Harness(format!("admission answer does not parse ({e}): {v}")))
    }

    pub async fn lease_call(&mut self, who: &str, release: bool) -> Result<(), SutError> {
        let op = if release {
            "lease_release"
        } else {
            "lease_refresh"
        };
        self.call(who, op, json!({})).await.map(|_| ())
    }

    pub async fn import(&mut self) -> Result<(), SutError> {
        self.observe("import", json!({})).await.map(|_| ())
    }

    /// `{composition, bypass_paths}` as the implementation discloses them.
    pub async fn describe(&mut self) -> Result<Value, SutError> {
        self.observe("describe", json!({})).await
    }

    /// `describe`, when the implementation lists it.
    pub async fn describe_if_supported(
        &mut self,
    ) -> Result<
        Option<(
            crate::aoc::composition::CompositionStatus,
            Vec<crate::aoc::composition::BypassPath>,
        )>,
        SutError,
    > {
        if !self.supports("describe") {
            return Ok(None);
        }
        let v = self.describe().await?;
        let c = serde_json::from_value(v["composition"].clone()).map_err(|e| {
            SutError::Harness(format!("describe: `composition` does not parse: {e}"))
        })?;
        let b = serde_json::from_value(v["bypass_paths"].clone()).map_err(|e| {
            SutError::Harness(format!("describe: `bypass_paths` does not parse: {e}"))
        })?;
        Ok(Some((c, b)))
    }

    /// The implementation's self-description, for reports.
    pub fn implementation(&self, command: &str) -> Value {
        json!({
            "name": self.hello.name,
            "version": self.hello.version,
            // Self-described: aocheck's own reference speaking the protocol is the same team.
            "same_team": self.hello.name == "aocheck-reference",
            "protocol": self.hello.protocol,
            "operations": self.hello.operations,
            "command": command,
        })
    }

    /// Kills every process (the end of a case).
    pub async fn shutdown(&mut self) {
        for (_, e) in std::mem::take(&mut self.executors) {
            let _ = e.process.kill().await;
        }
        let _ = self.observer.kill().await;
    }
}

impl ProcessSut {
    pub async fn recover(&mut self, who: &str) -> Result<(), SutError> {
        self.call(who, "recover", json!({})).await.map(|_| ())
    }
}
