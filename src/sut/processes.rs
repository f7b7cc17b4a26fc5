//! An implementation aocheck did not write, driven through `aocheck-sut/2`: one process per
//! executor generation plus one observer process that only reads (state, lane, admissions), so the
//! checkers always see what is durable in the implementation's store, whichever executor was just
//! killed. A crash is a SIGKILL; a successor is a new process on the same store.

use super::message::{
    DomainInit, ExecutorInit, Failure, Hello, HermesInit, Init, OperatorInit, PaymentsInit,
    Request, StoreInit,
};
use super::operator::{Conn, Connection};
use super::process::{CallError, SutProcess};
use super::{BoxFuture, Connect, Sut, SutError, To, failure_error};
use crate::clock::{Clock, ManualClock};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use crate::check::OBSERVER;
// (`Init::for_case` names the observer the same way.)

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
    /// `Some((uid, gid))`: the processes run as this user, and the case folders are theirs
    /// (`--sut-user`, when aocheck runs as root).
    pub user: Option<(u32, u32)>,
}

impl ProcessSpec {
    /// The command as reports show it: its credentials removed (`crate::secrets`).
    pub fn shown(&self) -> String {
        crate::secrets::redact_command(&self.command)
    }

    /// What the command runs, as an auditor can re-check it: its program (the first word after
    /// any `NAME=value` words and `env`/`exec`, found on `PATH` when it has no slash) and, when the
    /// next word that is not an option names a file (an interpreter's script), that file; each as
    /// written in the command and with the SHA-256 of its bytes (`null` where it cannot be read).
    pub fn programs(&self) -> Vec<Value> {
        // Hashed once per command in a run (a case asks for it every time).
        static SEEN: std::sync::Mutex<std::collections::BTreeMap<String, Vec<Value>>> =
            std::sync::Mutex::new(std::collections::BTreeMap::new());
        if let Some(known) = SEEN.lock().ok().and_then(|m| m.get(&self.command).cloned()) {
            return known;
        }
        let out = self.programs_now();
        if let Ok(mut m) = SEEN.lock() {
            m.insert(self.command.clone(), out.clone());
        }
        out
    }

    fn programs_now(&self) -> Vec<Value> {
        let shown = self.shown();
        let mut words = shown
            .split_whitespace()
            .map(|w| w.trim_matches(['\'', '"']))
            .skip_while(|w| w.contains('=') || *w == "env" || *w == "exec");
        let mut out = Vec::new();
        let Some(program) = words.next() else {
            return out;
        };
        let resolved = if program.contains('/') {
            Some(PathBuf::from(program))
        } else {
            std::env::var_os("PATH").and_then(|p| {
                std::env::split_paths(&p)
                    .map(|d| d.join(program))
                    .find(|f| f.is_file())
            })
        };
        let digest = |p: &std::path::Path| {
            std::fs::read(p)
                .ok()
                .map(|b| crate::digest::Digest::of_bytes(&b).hex())
        };
        out.push(json!({
            "role": "program",
            "path": program,
            "sha256": resolved.as_deref().and_then(digest),
        }));
        if let Some(script) = words
            .find(|w| !w.starts_with('-'))
            .filter(|w| std::path::Path::new(w).is_file())
        {
            out.push(json!({
                "role": "script",
                "path": script,
                "sha256": digest(std::path::Path::new(script)),
            }));
        }
        out
    }
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
    /// The case's `init`; each process gets its own `executor`, `now` and, for connector
    /// instances, `providers.hermes` and `operator`.
    init: Init,
    clock: ManualClock,
    spawned: AtomicU64,
    log: Mutex<Vec<String>>,
    /// Processes that outlived a kill of their implementation's process group.
    escaped: Mutex<Vec<String>>,
    /// The first process's `init` answer, and which process gave it: every later process must
    /// describe the same implementation.
    first_hello: Mutex<Option<(String, Hello)>>,
    /// Where each process's own provider credentials come from.
    credentials: Option<Arc<dyn Credentials>>,
}

/// Provider credentials of one process each (issue 21): every process gets its own, so the
/// providers' ledgers say which process made each request, and a request made with a killed
/// process's credential after the kill proves that the crash did not happen.
pub trait Credentials: Send + Sync + std::fmt::Debug {
    /// A fresh payments credential for the process `label`, for the case's account.
    fn payments(&self, label: &str) -> Option<String>;
    /// A fresh Hermes credential for the process `label`, once the case has a Hermes endpoint.
    fn hermes(&self, label: &str) -> Option<String>;
    /// The process `label` was killed: its credentials stop working (a later use is recorded).
    fn revoke(&self, label: &str);
    /// A clock token of the process `label`'s own, once the case has a Hermes clock.
    fn clock(&self, label: &str) -> Option<String>;
    /// Whether the process `label` declared that it moves its timers by the case's clock.
    fn declare_clock(&self, label: &str, driven: bool);
    /// The harness has a call in flight on the process `label` while the guard lives.
    fn call(&self, label: &str) -> Option<Box<dyn std::any::Any + Send>>;
}

/// The case's folder in the run folder (`sut/<case>/`, and `sub` under it when not empty),
/// created and, under `--sut-user`, given to that user.
pub fn case_folder(spec: &ProcessSpec, case: &str, sub: &str) -> Result<PathBuf, SutError> {
    let mut dir = spec.dir.join("sut").join(case);
    if !sub.is_empty() {
        dir = dir.join(sub);
    }
    let dir = std::path::absolute(&dir)
        .map_err(|e| SutError::Harness(format!("{}: {e}", dir.display())))?;
    std::fs::create_dir_all(&dir)
        .map_err(|e| SutError::Harness(format!("{}: {e}", dir.display())))?;
    if let Some((uid, gid)) = spec.user {
        std::os::unix::fs::chown(&dir, Some(uid), Some(gid)).map_err(|e| {
            SutError::Harness(format!(
                "{}: cannot give the case folder to uid {uid}: {e}",
                dir.display()
            ))
        })?;
    }
    Ok(dir)
}

impl Spawner {
    /// Starts the processes of one case in `case_dir`, each given `init` with its own
    /// `executor`, `now` and credentials.
    pub fn new(
        spec: ProcessSpec,
        case_dir: PathBuf,
        init: Init,
        clock: ManualClock,
        credentials: Option<Arc<dyn Credentials>>,
    ) -> Spawner {
        Spawner {
            inner: Arc::new(SpawnerInner {
                spec,
                case_dir,
                init,
                clock,
                spawned: AtomicU64::new(0),
                log: Mutex::new(Vec::new()),
                escaped: Mutex::new(Vec::new()),
                first_hello: Mutex::new(None),
                credentials,
            }),
        }
    }

    /// The implementation's self-description for reports, from the first process's `init`
    /// answer (`None` before any process answered).
    pub fn implementation(&self) -> Option<Value> {
        let hello = self.inner.first_hello.lock().ok()?.as_ref()?.1.clone();
        Some(describe(&hello, &self.inner.spec))
    }

    /// Starts `name` (the n-th process of the case) and sends `init`; a connector instance also
    /// gets the Hermes endpoint and the operator configuration.
    pub async fn spawn(
        &self,
        name: &str,
        operator: Option<(HermesInit, OperatorInit)>,
    ) -> Result<(SutProcess, Hello, String), SutError> {
        let i = &self.inner;
        let n = i.spawned.fetch_add(1, Ordering::SeqCst);
        let label = if n == 0 {
            name.to_string()
        } else {
            format!("{name}-{n}")
        };
        let log = i.case_dir.join(format!("{name}-{n}.stderr"));
        let p = SutProcess::spawn(&i.spec.command, &log, i.spec.timeout, i.spec.user)
            .map_err(|e| call_error(&label, e))?;
        let mut init = i.init.clone();
        if let Some((mut hermes, op)) = operator {
            if let Some(key) = i.credentials.as_ref().and_then(|c| c.hermes(&label)) {
                hermes.api_key = key;
            }
            if let (Some(clock), Some(token)) = (
                hermes.clock.as_mut(),
                i.credentials.as_ref().and_then(|c| c.clock(&label)),
            ) {
                clock.token = token;
            }
            init.providers.hermes = Some(hermes);
            init.operator = Some(op);
        }
        if let (Some(key), Some(p)) = (
            i.credentials.as_ref().and_then(|c| c.payments(&label)),
            init.providers.payments.as_mut(),
        ) {
            p.api_key = key;
        }
        // A secret unique to this process: an implementation may use it to authenticate its
        // lease holder; aocheck never reuses it.
        init.executor = ExecutorInit {
            name: name.into(),
            generation: Some(n),
            credential: Some(format!("cred_{}", uuid::Uuid::new_v4().simple())),
        };
        init.now = Some(i.clock.now().0);
        let hello = p.init(&init).await.map_err(|e| match e {
            CallError::Version { .. } => SutError::Version(format!("version: {e}")),
            e => call_error(&label, e),
        })?;
        // One implementation, one self-description: a process that describes itself otherwise
        // than the first (other claims, key rule, operations or clock) is a protocol violation.
        if let Ok(mut first) = i.first_hello.lock() {
            match &*first {
                Some((who, h)) => {
                    if let Some(diff) = hello_difference(h, &hello) {
                        return Err(SutError::Harness(format!(
                            "protocol violation: implementation process {label} answered init with {diff}, but {who} answered otherwise; every process of one implementation must describe itself alike"
                        )));
                    }
                }
                None => *first = Some((label.clone(), hello.clone())),
            }
        }
        if let Ok(mut l) = i.log.lock() {
            l.push(format!(
                "{label}: pid {}{}",
                p.pid().map_or_else(|| "?".to_string(), |x| x.to_string()),
                if name == OBSERVER { ", reads only" } else { "" }
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

    /// Kills one process's tree; what survived the group kill is kept for the case's verdict.
    pub async fn kill(&self, p: &SutProcess, label: &str, why: &str) -> Result<(), String> {
        let r = p.kill().await;
        if let Some(c) = &self.inner.credentials {
            c.revoke(label);
        }
        match &r {
            Ok(()) => self.note(label, why),
            Err(e) => {
                self.note(label, &format!("{why}; {e}"));
                if let Ok(mut l) = self.inner.escaped.lock() {
                    l.push(format!("{label}: {e}"));
                }
            }
        }
        r
    }

    /// What outlived a kill, by process.
    pub fn escaped(&self) -> Vec<String> {
        self.inner
            .escaped
            .lock()
            .map(|l| l.clone())
            .unwrap_or_default()
    }

    pub fn log(&self) -> Vec<String> {
        self.inner.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    pub fn clock(&self) -> &ManualClock {
        &self.inner.clock
    }
}

/// An implementation's self-description for reports.
fn describe(hello: &Hello, spec: &ProcessSpec) -> Value {
    json!({
        "name": hello.name,
        "version": hello.version,
        // Self-described: aocheck's own reference speaking the protocol is the same team.
        "same_team": hello.same_team,
        "protocol": hello.protocol,
        "operations": hello.operations,
        "key_rule": hello.key_rule,
        "claims": hello.claims,
        "statements": hello.statements,
        "command": spec.shown(),
        "programs": spec.programs(),
    })
}

/// Where two `init` answers describe different implementations: the first field that differs,
/// with the later answer's value (operations compared as sets).
pub fn hello_difference(a: &Hello, b: &Hello) -> Option<String> {
    let ops = |h: &Hello| {
        h.operations
            .iter()
            .cloned()
            .collect::<std::collections::BTreeSet<_>>()
    };
    let fields = [
        ("name", json!(a.name), json!(b.name)),
        ("version", json!(a.version), json!(b.version)),
        ("protocol", json!(a.protocol), json!(b.protocol)),
        ("operations", json!(ops(a)), json!(ops(b))),
        ("key_rule", json!(a.key_rule), json!(b.key_rule)),
        ("claims", json!(a.claims), json!(b.claims)),
        ("statements", json!(a.statements), json!(b.statements)),
        ("clock", json!(a.driven_clock()), json!(b.driven_clock())),
        ("same_team", json!(a.same_team), json!(b.same_team)),
    ];
    fields
        .into_iter()
        .find(|(_, x, y)| x != y)
        .map(|(f, x, y)| format!("{f} {y} (the first said {x})"))
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

impl ProcessSut {
    /// Starts the observer and learns what the implementation supports.
    // The case's parts are what `init` carries, each its own type; bundling them would only
    // rename the list.
    #[allow(clippy::too_many_arguments)]
    pub async fn start(
        spec: ProcessSpec,
        case: &str,
        payments: PaymentsInit,
        limits: crate::aoc::domain::Limits,
        domain: DomainInit,
        seed: u64,
        clock: ManualClock,
        credentials: Option<Arc<dyn Credentials>>,
    ) -> Result<Self, SutError> {
        let case_dir = case_folder(&spec, case, "")?;
        let store = match &spec.postgres {
            Some(url) => StoreInit::Postgres { url: url.clone() },
            None => {
                let path = case_dir.join("store.db");
                for suffix in ["", "-wal", "-shm"] {
                    let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
                }
                let abs = std::path::absolute(&path)
                    .map_err(|e| SutError::Harness(format!("{}: {e}", path.display())))?;
                StoreInit::Sqlite {
                    path: abs.display().to_string(),
                }
            }
        };
        let init = Init::for_case(store, case, payments, limits, domain, seed);
        let spawner = Spawner::new(spec, case_dir, init, clock, credentials);
        let (observer, hello, _) = spawner.spawn(OBSERVER, None).await?;
        Ok(ProcessSut {
            spawner,
            observer,
            executors: BTreeMap::new(),
            killed: BTreeMap::new(),
            hello,
        })
    }

    fn exec(&mut self, name: &str) -> Result<&mut Exec, SutError> {
        self.exec_ref(name)?;
        self.executors
            .get_mut(name)
            .ok_or_else(|| SutError::Harness(format!("no executor {name:?}")))
    }

    fn exec_ref(&self, name: &str) -> Result<&Exec, SutError> {
        if let Some(label) = self.killed.get(name)
            && !self.executors.contains_key(name)
        {
            return Err(SutError::Harness(format!(
                "executor {name:?} ({label}) was killed; it cannot act"
            )));
        }
        self.executors
            .get(name)
            .ok_or_else(|| SutError::Harness(format!("no executor {name:?}")))
    }

    async fn call_on(
        p: &SutProcess,
        who: &str,
        now: u64,
        req: &Request,
    ) -> Result<Value, SutError> {
        match p.request(now, req).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(fail)) => Err(failure_error(req.op().name(), fail)),
            Err(e) => Err(call_error(who, e)),
        }
    }

    async fn call_exec(&mut self, who: &str, req: Request) -> Result<Value, SutError> {
        let now = self.spawner.clock().now().0;
        let e = self.exec(who)?;
        let label = e.label.clone();
        Self::call_on(&e.process, &label, now, &req).await
    }

    async fn observe(&mut self, req: Request) -> Result<Value, SutError> {
        let now = self.spawner.clock().now().0;
        Self::call_on(&self.observer, OBSERVER, now, &req).await
    }

    async fn start_executor(&mut self, name: &str, req: Request) -> Result<Value, SutError> {
        let (p, _, label) = self.spawner.spawn(name, None).await?;
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
        self.call_exec(name, req).await
    }

    /// SIGKILL: the process and everything in its memory die now.
    async fn kill_executor(&mut self, name: &str) -> Result<(), SutError> {
        let e = self
            .executors
            .remove(name)
            .ok_or_else(|| SutError::Harness(format!("no executor {name:?} to kill")))?;
        self.killed.insert(name.into(), e.label.clone());
        self.spawner
            .kill(&e.process, &e.label, "killed with SIGKILL")
            .await
            .map_err(|err| SutError::Harness(format!("SIGKILL {}: {err}", e.label)))?;
        Ok(())
    }

    /// The implementation's self-description, for reports.
    fn describe_self(&self) -> Value {
        describe(&self.hello, &self.spawner.inner.spec)
    }

    /// Kills every process (the end of a case).
    async fn kill_all(&mut self) {
        for (_, e) in std::mem::take(&mut self.executors) {
            let _ = self.spawner.kill(&e.process, &e.label, "stopped").await;
        }
        let _ = self.spawner.kill(&self.observer, OBSERVER, "stopped").await;
    }
}

impl Sut for ProcessSut {
    fn hello(&self) -> &Hello {
        &self.hello
    }
    fn start<'a>(
        &'a mut self,
        name: &'a str,
        req: Request,
    ) -> BoxFuture<'a, Result<Value, SutError>> {
        Box::pin(self.start_executor(name, req))
    }
    fn call<'a>(&'a mut self, to: To<'a>, req: Request) -> BoxFuture<'a, Result<Value, SutError>> {
        Box::pin(async move {
            match to {
                To::Executor(who) => self.call_exec(who, req).await,
                To::Observer => self.observe(req).await,
            }
        })
    }
    fn crash<'a>(&'a mut self, name: &'a str) -> BoxFuture<'a, Result<(), SutError>> {
        Box::pin(self.kill_executor(name))
    }
    fn race<'a>(
        &'a mut self,
        calls: Vec<(String, Request)>,
    ) -> BoxFuture<'a, Vec<Result<Value, SutError>>> {
        Box::pin(async move {
            let now = self.spawner.clock().now().0;
            let this = &*self;
            // Every request is written before any answer is awaited: each future writes its
            // line at its first poll, and `join_all` polls them all before any can finish.
            futures_util::future::join_all(calls.iter().map(|(who, req)| async move {
                let e = this.exec_ref(who)?;
                Self::call_on(&e.process, &e.label, now, req).await
            }))
            .await
        })
    }
    fn executors(&self) -> Vec<String> {
        self.executors.keys().cloned().collect()
    }
    fn connectors(&self) -> Arc<dyn Connect> {
        Arc::new(self.spawner.clone())
    }
    fn implementation(&self) -> Option<Value> {
        Some(self.describe_self())
    }
    fn processes(&self) -> Vec<String> {
        self.spawner.log()
    }
    fn escaped(&self) -> Vec<String> {
        self.spawner.escaped()
    }
    fn shutdown(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(self.kill_all())
    }
}

/// A connector instance is a process of its own.
impl Connect for Spawner {
    fn connect<'a>(
        &'a self,
        instance: &'a str,
        hermes: HermesInit,
        operator: OperatorInit,
    ) -> BoxFuture<'a, Result<Conn, SutError>> {
        Box::pin(async move {
            let (process, hello, label) = self.spawn(instance, Some((hermes, operator))).await?;
            if let Some(c) = &self.inner.credentials {
                c.declare_clock(&label, hello.driven_clock());
            }
            Ok(Conn::new(Arc::new(ProcessConn {
                process,
                label,
                spawner: self.clone(),
            }))
            .with_driven(hello.driven_clock()))
        })
    }
    fn reopen(&self) -> BoxFuture<'_, Result<bool, SutError>> {
        // Every process opens the store anew.
        Box::pin(async { Ok(true) })
    }
}

/// A connector instance's process.
#[derive(Debug)]
struct ProcessConn {
    process: SutProcess,
    label: String,
    spawner: Spawner,
}

impl Connection for ProcessConn {
    fn call(&self, req: Request) -> BoxFuture<'_, Result<Result<Value, Failure>, SutError>> {
        Box::pin(async move {
            // Operator requests carry no case clock (the connector keeps its own).
            let _in_flight = self
                .spawner
                .inner
                .credentials
                .as_ref()
                .and_then(|c| c.call(&self.label));
            self.process
                .call(req.op().name(), req.fields())
                .await
                .map_err(|e| call_error(&self.label, e))
        })
    }
    fn stop<'a>(&'a self, why: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let _ = self.spawner.kill(&self.process, &self.label, why).await;
        })
    }
}
