//! One implementation process speaking `aocheck-sut/2`: spawned from a command line, its stderr
//! written to a file in the run folder, every request answered within a deadline or the process
//! is killed, and SIGKILL on demand for crash faults. A hung, crashing or garbling implementation
//! becomes a typed [`CallError`] quoting what it did, never a hung harness.

use super::message::{self, Hello, Init};
use super::protocol::{self, MAX_LINE, RawRequest, SutFailure, Violation};
use rustix::process::{Pid, Signal};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::oneshot;

#[derive(Debug, Clone, thiserror::Error)]
pub enum CallError {
    #[error("the implementation broke the protocol on `{op}`: {violation}")]
    Violation { op: String, violation: Violation },
    #[error("no response to `{op}` within {millis} ms; the process was killed")]
    NoResponse { op: String, millis: u128 },
    #[error("the implementation exited ({status}) during `{op}`; last stderr lines: {tail}")]
    Exited {
        op: String,
        status: String,
        tail: String,
    },
    #[error("cannot start `{command}`: {reason}")]
    Spawn { command: String, reason: String },
    #[error("talking to the implementation: {0}")]
    Io(String),
    #[error("it speaks {got:?}, aocheck speaks {}", protocol::PROTOCOL)]
    Version { got: String },
}

type Reply = Result<Result<Value, SutFailure>, CallError>;

/// Why the process stopped answering.
#[derive(Clone, Debug)]
enum Death {
    Exited { status: String, tail: String },
    Violation(Violation),
}

#[derive(Debug)]
struct Inner {
    child: tokio::sync::Mutex<Child>,
    pid: AtomicU32,
    /// The process group the implementation was started in (its own; the kill takes it whole).
    pgid: u32,
    /// `AOCHECK_SUT_MARK` in its environment and every descendant's that keeps it.
    marker: String,
    /// The pipes it talks over (`pipe:[inode]`): whoever holds one is part of it.
    pipes: Vec<String>,
    /// Set when its stdout reached end of file (every writer is gone).
    stdout_closed: AtomicBool,
    stdin: tokio::sync::Mutex<ChildStdin>,
    waiting: Mutex<HashMap<u64, (String, oneshot::Sender<Reply>)>>,
    next: AtomicU64,
    death: Mutex<Option<Death>>,
    killed: AtomicBool,
    timeout: Duration,
    stderr_path: PathBuf,
    /// Set when its stderr reached end of file and the capped log is complete.
    stderr_done: Arc<tokio::sync::Notify>,
    stderr_finished: Arc<AtomicBool>,
}

/// How much of a process's stderr is kept: its first bytes and its last (the log's head says
/// how it started, the tail how it ended); what lies between is counted and dropped.
pub const STDERR_HEAD: usize = 1 << 20;
pub const STDERR_TAIL: usize = 256 << 10;

/// Copies a process's stderr into its log file, capped: the first [`STDERR_HEAD`] bytes as they
/// come, the last [`STDERR_TAIL`] at the end, and between them one line saying how many bytes were
/// dropped. Memory is bounded by the tail.
async fn capture_stderr(
    mut from: tokio::process::ChildStderr,
    mut to: std::fs::File,
    done: Arc<tokio::sync::Notify>,
    finished: Arc<AtomicBool>,
) {
    use std::io::Write as _;
    use tokio::io::AsyncReadExt as _;
    let mut written = 0usize;
    let mut tail: std::collections::VecDeque<u8> = std::collections::VecDeque::new();
    let mut dropped = 0u64;
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let mut chunk = &buf[..n];
        if written < STDERR_HEAD {
            let k = chunk.len().min(STDERR_HEAD - written);
            let _ = to.write_all(&chunk[..k]);
            written += k;
            chunk = &chunk[k..];
        }
        tail.extend(chunk);
        if tail.len() > STDERR_TAIL {
            let excess = tail.len() - STDERR_TAIL;
            tail.drain(..excess);
            dropped += excess as u64;
        }
    }
    if dropped > 0 {
        let _ = writeln!(
            to,
            "\n[aocheck: {dropped} bytes of stderr dropped here; the first {STDERR_HEAD} and the last {STDERR_TAIL} are kept]"
        );
    }
    let (a, b) = tail.as_slices();
    let _ = to.write_all(a);
    let _ = to.write_all(b);
    let _ = to.flush();
    scrub_log(&mut to);
    finished.store(true, Ordering::SeqCst);
    done.notify_waiters();
}

/// The finished log with every registered credential removed (it is bounded by the cap, so it
/// is read whole; a secret split across two reads of the pipe is still found).
fn scrub_log(f: &mut std::fs::File) {
    use std::io::{Read as _, Seek as _, Write as _};
    let mut all = Vec::new();
    if f.seek(std::io::SeekFrom::Start(0)).is_err() || f.read_to_end(&mut all).is_err() {
        return;
    }
    let clean = crate::secrets::scrub_bytes(&all);
    if clean != all {
        let _ = f.set_len(0);
        let _ = f.seek(std::io::SeekFrom::Start(0));
        let _ = f.write_all(&clean);
        let _ = f.flush();
    }
}

/// Kills the process when the last handle goes (the reader task alone keeps nothing alive).
#[derive(Debug)]
struct KillOnDrop(Arc<Inner>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        kill_group(self.0.pgid);
        if let Ok(mut c) = self.0.child.try_lock() {
            let _ = c.start_kill();
        }
    }
}

/// Whether this process reaps the orphans below it (see [`become_subreaper`]).
static SUBREAPER: AtomicBool = AtomicBool::new(false);
/// The implementation processes this process started (the leaders of their groups).
static LEADERS: Mutex<std::collections::BTreeSet<u32>> =
    Mutex::new(std::collections::BTreeSet::new());

/// Makes this process the reaper of every orphan below it (Linux, `PR_SET_CHILD_SUBREAPER`):
/// an implementation process that leaves its group, clears its environment and closes its
/// pipes still becomes this process's child when its parent dies, and is then found by the
/// survivor check like any other (and reaped). Only for a process whose children are all
/// implementations run one case at a time (the `aocheck run` binary): in a test binary,
/// concurrent tests would blame each other's children. `false` where it is not available.
pub fn become_subreaper() -> bool {
    let ok = rustix::process::set_child_subreaper(Some(rustix::process::getpid())).is_ok();
    SUBREAPER.store(ok, Ordering::SeqCst);
    ok
}

fn is_leader(pid: u32) -> bool {
    LEADERS.lock().map_or(true, |l| l.contains(&pid))
}

/// Reaps an orphan that died as this process's child (never one of the leaders: their
/// handles reap them).
fn reap(pid: u32) {
    if let Some(p) = i32::try_from(pid).ok().and_then(Pid::from_raw) {
        let _ = rustix::process::waitpid(Some(p), rustix::process::WaitOptions::NOHANG);
    }
}

/// SIGKILL to a whole process group (nothing when it is gone already).
fn kill_group(pgid: u32) {
    if let Some(g) = i32::try_from(pgid)
        .ok()
        .filter(|g| *g > 1)
        .and_then(Pid::from_raw)
    {
        // A group that is gone already answers ESRCH: nothing to do.
        let _ = rustix::process::kill_process_group(g, Signal::KILL);
    }
}

/// SIGKILL to one process.
pub(crate) fn kill_pid(pid: u32) {
    if let Some(p) = i32::try_from(pid)
        .ok()
        .filter(|p| *p > 1)
        .and_then(Pid::from_raw)
    {
        let _ = rustix::process::kill_process(p, Signal::KILL);
    }
}

/// What `/proc/self/fd/N` names (`pipe:[inode]`), when it can be read.
fn fd_target(fd: i32) -> Option<String> {
    std::fs::read_link(format!("/proc/self/fd/{fd}"))
        .ok()
        .map(|p| p.display().to_string())
}

/// The live processes (zombies are dead) that belong to an implementation: in its process group,
/// carrying its mark in their environment, holding one of its pipes, or (when this process is a
/// subreaper) an orphan reparented to this process that is none of the implementation processes
/// it started. Each as `pid (command)`.
/// Where `/proc` cannot be read (not Linux), nothing is found beyond what the group kill reached.
pub(crate) fn members(pgid: u32, marker: &str, pipes: &[String]) -> Vec<(u32, String)> {
    let me = std::process::id();
    let mark = format!("AOCHECK_SUT_MARK={marker}");
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // `pid (comm) state ppid pgrp …`; comm may hold spaces and parentheses.
        let Some((head, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let comm = head.split_once('(').map_or("", |(_, c)| c).to_string();
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let orphan = SUBREAPER.load(Ordering::SeqCst)
            && fields.get(1).and_then(|p| p.parse::<u32>().ok()) == Some(me)
            && !is_leader(pid);
        if fields.first() == Some(&"Z") {
            if orphan {
                reap(pid);
            }
            continue;
        }
        let in_group = fields.get(2).and_then(|g| g.parse::<u32>().ok()) == Some(pgid);
        let marked = || {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|var| var == mark.as_bytes()))
        };
        let holds_pipe = || {
            !pipes.is_empty()
                && std::fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|fds| {
                    fds.flatten().any(|fd| {
                        std::fs::read_link(fd.path())
                            .is_ok_and(|t| pipes.iter().any(|p| *p == t.display().to_string()))
                    })
                })
        };
        if in_group || orphan || marked() || holds_pipe() {
            out.push((pid, comm));
        }
    }
    out
}

/// A running implementation process. Cheap to clone; requests may be in flight concurrently
/// (each waits for its own `id`), which a background operation needs.
#[derive(Debug, Clone)]
pub struct SutProcess {
    inner: Arc<Inner>,
    _guard: Arc<KillOnDrop>,
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join(" | ")
}

impl Inner {
    fn error_for(&self, op: &str, d: &Death) -> CallError {
        match d {
            Death::Exited { status, tail } => CallError::Exited {
                op: op.into(),
                status: status.clone(),
                tail: tail.clone(),
            },
            Death::Violation(v) => CallError::Violation {
                op: op.into(),
                violation: v.clone(),
            },
        }
    }

    /// Records why the process is gone and fails every request still waiting.
    fn die(&self, d: Death) {
        if let Ok(mut g) = self.death.lock()
            && g.is_none()
        {
            *g = Some(d.clone());
        }
        let waiting: Vec<(String, oneshot::Sender<Reply>)> = match self.waiting.lock() {
            Ok(mut w) => w.drain().map(|(_, x)| x).collect(),
            Err(_) => Vec::new(),
        };
        for (op, tx) in waiting {
            let _ = tx.send(Err(self.error_for(&op, &d)));
        }
    }

    async fn exit_status(&self) -> String {
        let mut c = self.child.lock().await;
        let status = match tokio::time::timeout(Duration::from_secs(2), c.wait()).await {
            Ok(Ok(s)) => s.to_string(),
            Ok(Err(e)) => e.to_string(),
            Err(_) => {
                let _ = c.start_kill();
                "closed its stdout but kept running; killed".into()
            }
        };
        self.pid.store(0, Ordering::SeqCst);
        if self.killed.load(Ordering::SeqCst) {
            format!("killed by aocheck with SIGKILL, {status}")
        } else {
            status
        }
    }

    /// SIGKILL to the implementation's whole process group; then its stdout must close and no
    /// process of it may remain (in the group, marked, or holding its pipes). A survivor is
    /// killed too, so nothing outlives the run, and named in the error: the crash did not
    /// happen as declared.
    async fn kill(&self) -> Result<(), String> {
        self.killed.store(true, Ordering::SeqCst);
        kill_group(self.pgid);
        {
            let mut c = self.child.lock().await;
            let _ = c.start_kill();
            c.wait()
                .await
                .map_err(|e| format!("waiting for the killed process: {e}"))?;
        }
        self.pid.store(0, Ordering::SeqCst);
        let deadline = std::time::Instant::now() + Duration::from_millis(1500);
        loop {
            let left = members(self.pgid, &self.marker, &self.pipes);
            let closed = self.stdout_closed.load(Ordering::SeqCst);
            if left.is_empty() && closed {
                return Ok(());
            }
            if std::time::Instant::now() >= deadline {
                for (pid, _) in &left {
                    kill_pid(*pid);
                }
                kill_group(self.pgid);
                let who: Vec<String> = left.iter().map(|(p, c)| format!("{p} ({c})")).collect();
                return Err(if who.is_empty() {
                    "its stdout stayed open after the kill: a process outside its group holds it"
                        .into()
                } else {
                    format!(
                        "process(es) {} survived the SIGKILL of its process group (killed now)",
                        who.join(", ")
                    )
                });
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// Reads responses and hands each to the request waiting for its id.
async fn read_responses(inner: Arc<Inner>, mut stdout: BufReader<ChildStdout>) {
    loop {
        match protocol::read_line(&mut stdout, MAX_LINE).await {
            Ok(Ok(Some(line))) => {
                let parsed = protocol::parse_response(&line);
                let r = match parsed {
                    Ok(r) => r,
                    Err(v) => {
                        // Nothing more is read from it: whoever still holds the pipe is found
                        // by the kill.
                        inner.stdout_closed.store(true, Ordering::SeqCst);
                        let _ = inner.kill().await;
                        inner.die(Death::Violation(v));
                        return;
                    }
                };
                let waiter = inner.waiting.lock().ok().and_then(|mut w| w.remove(&r.id));
                match waiter {
                    Some((_, tx)) => {
                        let _ = tx.send(Ok(r.result));
                    }
                    None => {
                        // Nothing more is read from it: whoever still holds the pipe is found
                        // by the kill.
                        inner.stdout_closed.store(true, Ordering::SeqCst);
                        let _ = inner.kill().await;
                        inner.die(Death::Violation(Violation::UnknownId {
                            id: r.id,
                            quote: String::from_utf8_lossy(&line[..line.len().min(200)])
                                .into_owned(),
                        }));
                        return;
                    }
                }
            }
            Ok(Err(v)) => {
                inner.stdout_closed.store(true, Ordering::SeqCst);
                let _ = inner.kill().await;
                inner.die(Death::Violation(v));
                return;
            }
            Ok(Ok(None)) | Err(_) => {
                inner.stdout_closed.store(true, Ordering::SeqCst);
                let status = inner.exit_status().await;
                // The last lines are quoted from the log: let its capture finish first.
                let notified = inner.stderr_done.notified();
                if !inner.stderr_finished.load(Ordering::SeqCst) {
                    let _ = tokio::time::timeout(Duration::from_secs(1), notified).await;
                }
                inner.die(Death::Exited {
                    status,
                    tail: tail(&inner.stderr_path, 20),
                });
                return;
            }
        }
    }
}

impl SutProcess {
    /// Starts `command` (run by `sh -c exec …`, so the kill reaches the implementation itself).
    /// Needs a Tokio runtime (a reader task is spawned).
    /// `user`: the uid and gid it runs as (`None`: aocheck's own).
    pub fn spawn(
        command: &str,
        stderr_path: &Path,
        timeout: Duration,
        user: Option<(u32, u32)>,
    ) -> Result<Self, CallError> {
        let spawn_err = |reason: String| CallError::Spawn {
            command: command.into(),
            reason,
        };
        if let Some(dir) = stderr_path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| spawn_err(format!("{}: {e}", dir.display())))?;
        }
        let log = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(stderr_path)
            .map_err(|e| spawn_err(format!("{}: {e}", stderr_path.display())))?;
        let mut mark = [0u8; 16];
        getrandom::fill(&mut mark).map_err(|e| spawn_err(format!("no entropy: {e}")))?;
        let marker = hex::encode(mark);
        // Its own process group, so that a crash kills whatever it started too.
        let mut command_line = Command::new("sh");
        if let Some((uid, gid)) = user {
            // The standard library drops the supplementary groups when root sets a uid.
            command_line.uid(uid).gid(gid);
        }
        let mut child = command_line
            .arg("-c")
            .arg(format!("exec {command}"))
            .env("AOCHECK_SUT_MARK", &marker)
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| spawn_err(e.to_string()))?;
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| spawn_err("no stdin pipe".into()))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| spawn_err("no stdout pipe".into()))?;
        let stderr = child
            .stderr
            .take()
            .ok_or_else(|| spawn_err("no stderr pipe".into()))?;
        let stderr_done = Arc::new(tokio::sync::Notify::new());
        let stderr_finished = Arc::new(AtomicBool::new(false));
        tokio::spawn(capture_stderr(
            stderr,
            log,
            stderr_done.clone(),
            stderr_finished.clone(),
        ));
        use std::os::fd::AsRawFd;
        let pipes = [stdin.as_raw_fd(), stdout.as_raw_fd()]
            .into_iter()
            .filter_map(fd_target)
            .filter(|t| t.starts_with("pipe:"))
            .collect();
        let pid = child.id().unwrap_or(0);
        if let Ok(mut l) = LEADERS.lock() {
            l.insert(pid);
        }
        let inner = Arc::new(Inner {
            pid: AtomicU32::new(pid),
            pgid: pid,
            marker,
            pipes,
            stdout_closed: AtomicBool::new(false),
            child: tokio::sync::Mutex::new(child),
            stdin: tokio::sync::Mutex::new(stdin),
            waiting: Mutex::new(HashMap::new()),
            next: AtomicU64::new(0),
            death: Mutex::new(None),
            killed: AtomicBool::new(false),
            timeout,
            stderr_path: stderr_path.into(),
            stderr_done,
            stderr_finished,
        });
        tokio::spawn(read_responses(inner.clone(), BufReader::new(stdout)));
        Ok(SutProcess {
            _guard: Arc::new(KillOnDrop(inner.clone())),
            inner,
        })
    }

    fn dead(&self, op: &str) -> Option<CallError> {
        let d = self.inner.death.lock().ok().and_then(|g| g.clone())?;
        Some(self.inner.error_for(op, &d))
    }

    /// Sends one request and waits for its response (or the deadline).
    pub async fn call(&self, op: &str, fields: Map<String, Value>) -> Reply {
        if let Some(e) = self.dead(op) {
            return Err(e);
        }
        let id = self.inner.next.fetch_add(1, Ordering::SeqCst) + 1;
        let req = RawRequest {
            id,
            op: op.into(),
            fields,
        };
        let mut line = serde_json::to_vec(&req).map_err(|e| CallError::Io(e.to_string()))?;
        line.push(b'\n');
        let (tx, rx) = oneshot::channel();
        if let Ok(mut w) = self.inner.waiting.lock() {
            w.insert(id, (op.to_string(), tx));
        }
        let started = std::time::Instant::now();
        let written = {
            let mut stdin = self.inner.stdin.lock().await;
            stdin.write_all(&line).await.is_ok() && stdin.flush().await.is_ok()
        };
        if !written {
            // The reader sees the exit and fails this request with the status and stderr.
            return match tokio::time::timeout(Duration::from_secs(3), rx).await {
                Ok(Ok(r)) => r,
                _ => Err(CallError::Io(format!(
                    "cannot write `{op}`: stdin is closed"
                ))),
            };
        }
        match tokio::time::timeout(self.inner.timeout, rx).await {
            Ok(Ok(r)) => r,
            Ok(Err(_)) => Err(self
                .dead(op)
                .unwrap_or_else(|| CallError::Io(format!("`{op}` was abandoned")))),
            Err(_) => {
                if let Ok(mut w) = self.inner.waiting.lock() {
                    w.remove(&id);
                }
                let _ = self.kill().await;
                Err(CallError::NoResponse {
                    op: op.into(),
                    millis: started.elapsed().as_millis(),
                })
            }
        }
    }

    /// Sends one typed request, stamped with the case clock.
    pub async fn request(&self, now: u64, req: &message::Request) -> Reply {
        let mut fields = req.fields();
        fields.insert("now".into(), now.into());
        self.call(req.op().name(), fields).await
    }

    /// The handshake: `init`; checks the protocol version and the shape of the answer.
    pub async fn init(&self, init: &Init) -> Result<Hello, CallError> {
        let bad = |reason: String| CallError::Violation {
            op: "init".into(),
            violation: Violation::Malformed {
                reason,
                quote: String::new(),
            },
        };
        let fields = match serde_json::to_value(init) {
            Ok(Value::Object(m)) => m,
            Ok(_) => Map::new(),
            Err(e) => return Err(CallError::Io(format!("cannot encode init: {e}"))),
        };
        let ok = match self.call("init", fields).await? {
            Ok(v) => v,
            Err(f) => return Err(bad(format!("init was refused: {} {}", f.kind, f.message))),
        };
        let s = |k: &str| ok[k].as_str().map(str::to_string);
        let protocol = s("protocol").ok_or_else(|| bad("init answer lacks `protocol`".into()))?;
        if protocol != protocol::PROTOCOL {
            let _ = self.kill().await;
            return Err(CallError::Version { got: protocol });
        }
        Ok(Hello {
            protocol,
            name: s("name").ok_or_else(|| bad("init answer lacks `name`".into()))?,
            version: s("version").ok_or_else(|| bad("init answer lacks `version`".into()))?,
            operations: ok["operations"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|x| x.as_str().map(str::to_string))
                        .collect()
                })
                .ok_or_else(|| bad("init answer lacks `operations`".into()))?,
            key_rule: {
                let r = s("key_rule").ok_or_else(|| {
                    bad("init answer lacks `key_rule` (how the Idempotency-Key is derived from an occurrence id, e.g. \"{occurrence}\")".into())
                })?;
                crate::check::accounting::KeyRule::parse(&r)
                    .map_err(|e| bad(format!("init answer: {e}")))?;
                r
            },
            claims: match &ok["claims"] {
                Value::Null => Vec::new(),
                Value::Array(a) => a
                    .iter()
                    .enumerate()
                    .map(|(i, c)| {
                        c.as_str().map(str::to_string).ok_or_else(|| {
                            bad(format!("init answer: `claims[{i}]` is not a string"))
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?,
                _ => {
                    return Err(bad("init answer: `claims` must be a list of strings".into()));
                }
            },
            statements: crate::check::statements::decode(&ok["statements"])
                .map_err(|e| bad(format!("init answer: {e}")))?,
            clock: match &ok["clock"] {
                Value::Null => None,
                Value::String(c) if c == "driven" || c == "own" => Some(c.clone()),
                other => {
                    return Err(bad(format!(
                        "init answer: `clock` is {other}; say \"driven\" (timers move by the harness's clock) or \"own\", or leave it out"
                    )));
                }
            },
            same_team: match &ok["same_team"] {
                Value::Null => false,
                Value::Bool(b) => *b,
                other => {
                    return Err(bad(format!(
                        "init answer: `same_team` is {other}; say true when the implementation's authors also wrote its tests (AOC §7), false or leave it out otherwise"
                    )));
                }
            },
        })
    }

    /// SIGKILL, then reap. Requests still waiting fail as `Exited`.
    /// Kills the implementation's process tree; `Err` names what survived the group kill (it
    /// is killed as well).
    pub async fn kill(&self) -> Result<(), String> {
        self.inner.kill().await
    }

    /// The OS process id (None once reaped).
    pub fn pid(&self) -> Option<u32> {
        match self.inner.pid.load(Ordering::SeqCst) {
            0 => None,
            p => Some(p),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The smallest `init` the scripted implementations below accept (they ignore it).
    fn test_init() -> Init {
        Init {
            protocol: protocol::PROTOCOL.into(),
            executor: message::ExecutorInit {
                name: "e1".into(),
                generation: Some(1),
                credential: None,
            },
            store: message::StoreInit::Sqlite {
                path: "unused.db".into(),
            },
            providers: message::Providers {
                payments: Some(message::PaymentsInit {
                    base_url: "http://127.0.0.1:9".into(),
                    account: "acct_a".into(),
                    api_key: "sk_test_a".into(),
                }),
                hermes: None,
                channel: None,
            },
            limits: crate::aoc::domain::Limits {
                max_pending: 1,
                max_in_flight: 1,
            },
            domain: message::DomainInit::default(),
            operator: None,
            workflow: None,
            case: None,
            seed: None,
            now: None,
        }
    }

    /// A scripted implementation in Python: answers per the `mode` argument.
    const SCRIPT: &str = r#"
import json, sys, time
mode = sys.argv[1]
for line in sys.stdin:
    req = json.loads(line)
    print("got", req["op"], file=sys.stderr, flush=True)
    if req["op"] == "init":
        proto = "aocheck-sut/1" if mode == "old" else "aocheck-sut/2"
        out = {"id": req["id"], "ok": {"protocol": proto, "name": "scripted", "version": "0.0.1", "operations": ["state"], "key_rule": "{occurrence}"}}
    elif mode == "hang":
        time.sleep(60); continue
    elif mode == "garble":
        sys.stdout.write("this is not json\n"); sys.stdout.flush(); continue
    elif mode == "die":
        print("fatal: giving up", file=sys.stderr, flush=True); sys.exit(7)
    elif mode == "twice":
        out = {"id": req["id"], "ok": {}}
        sys.stdout.write(json.dumps(out) + "\n"); sys.stdout.write(json.dumps(out) + "\n"); sys.stdout.flush(); continue
    elif mode == "refuse":
        out = {"id": req["id"], "error": {"kind": "refused", "requirement": "AOC-REQ-010", "message": "no", "outcome": "definite"}}
    else:
        out = {"id": req["id"], "ok": {"echo": req}}
    sys.stdout.write(json.dumps(out) + "\n"); sys.stdout.flush()
"#;

    fn start(dir: &Path, mode: &str, timeout_ms: u64) -> SutProcess {
        let script = dir.join("sut.py");
        std::fs::write(&script, SCRIPT).expect("script");
        SutProcess::spawn(
            &format!("python3 -u {} {mode}", script.display()),
            &dir.join("logs").join(format!("{mode}.stderr")),
            Duration::from_millis(timeout_ms),
            None,
        )
        .expect("spawn")
    }

    fn fields(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[tokio::test]
    async fn a_handshake_and_a_call_round_trip_and_stderr_is_captured() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = start(dir.path(), "echo", 10_000);
        let hello = p.init(&test_init()).await.expect("init");
        assert_eq!(hello.name, "scripted");
        assert_eq!(hello.operations, vec!["state".to_string()]);
        let r = p
            .call("state", fields(serde_json::json!({"occurrence": "o1"})))
            .await
            .expect("call")
            .expect("ok");
        assert_eq!(r["echo"]["occurrence"], "o1");
        assert_eq!(r["echo"]["op"], "state");
        p.kill().await.expect("kill");
        let log = std::fs::read_to_string(dir.path().join("logs/echo.stderr")).expect("log");
        assert!(
            log.contains("got init") && log.contains("got state"),
            "{log}"
        );
    }

    #[tokio::test]
    async fn a_second_answer_to_one_request_is_a_violation() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = start(dir.path(), "twice", 10_000);
        p.init(&test_init()).await.expect("init");
        // The second answer to the first request kills the process: the next call says why.
        let _ = p.call("state", Map::new()).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        let e = p.call("state", Map::new()).await.expect_err("violation");
        assert!(
            matches!(
                e,
                CallError::Violation {
                    violation: Violation::UnknownId { .. },
                    ..
                }
            ),
            "{e}"
        );
    }

    #[tokio::test]
    async fn concurrent_requests_each_get_their_own_answer() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = start(dir.path(), "echo", 10_000);
        p.init(&test_init()).await.expect("init");
        let (a, b) = tokio::join!(
            p.call("state", fields(serde_json::json!({"n": 1}))),
            p.call("lane", fields(serde_json::json!({"n": 2})))
        );
        assert_eq!(a.expect("a").expect("ok")["echo"]["n"], 1);
        assert_eq!(b.expect("b").expect("ok")["echo"]["n"], 2);
    }

    #[tokio::test]
    async fn a_kill_fails_the_requests_in_flight() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = start(dir.path(), "hang", 10_000);
        p.init(&test_init()).await.expect("init");
        let q = p.clone();
        let waiting = tokio::spawn(async move { q.call("invoke", Map::new()).await });
        tokio::time::sleep(Duration::from_millis(200)).await;
        p.kill().await.expect("kill");
        let e = waiting.await.expect("join").expect_err("killed");
        assert!(e.to_string().contains("killed by aocheck"), "{e}");
    }

    #[tokio::test]
    async fn a_typed_refusal_is_returned_as_such() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = start(dir.path(), "refuse", 10_000);
        p.init(&test_init()).await.expect("init");
        let f = p
            .call("execute", Map::new())
            .await
            .expect("call")
            .expect_err("refused");
        assert_eq!(f.kind, "refused");
        assert_eq!(f.requirement.as_deref(), Some("AOC-REQ-010"));
        assert_eq!(f.outcome, protocol::Outcome::Definite);
    }

    #[tokio::test]
    async fn a_hung_implementation_is_killed_at_the_deadline() {
        let dir = tempfile::tempdir().expect("tempdir");
        // The deadline holds for `init` too: 3 s, not less, so that a loaded 2-core machine
        // answers `init` in time (500 ms failed in CI once); `execute` hangs for good.
        let p = start(dir.path(), "hang", 3_000);
        p.init(&test_init()).await.expect("init");
        let started = std::time::Instant::now();
        let e = p
            .call("execute", Map::new())
            .await
            .expect_err("no response");
        assert!(matches!(e, CallError::NoResponse { .. }), "{e}");
        assert!(started.elapsed() < Duration::from_secs(20));
        assert_eq!(p.pid(), None, "the hung process was reaped");
    }

    #[tokio::test]
    async fn garbage_on_stdout_is_a_violation_quoting_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = start(dir.path(), "garble", 10_000);
        p.init(&test_init()).await.expect("init");
        let e = p.call("execute", Map::new()).await.expect_err("violation");
        assert!(e.to_string().contains("this is not json"), "{e}");
    }

    #[tokio::test]
    async fn an_exit_is_reported_with_status_and_stderr_tail() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = start(dir.path(), "die", 10_000);
        p.init(&test_init()).await.expect("init");
        let e = p.call("execute", Map::new()).await.expect_err("exited");
        let text = e.to_string();
        assert!(matches!(e, CallError::Exited { .. }), "{text}");
        assert!(
            text.contains('7') && text.contains("fatal: giving up"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn another_protocol_version_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = start(dir.path(), "old", 10_000);
        let e = p.init(&test_init()).await.expect_err("version");
        assert!(matches!(e, CallError::Version { .. }), "{e}");
        assert!(e.to_string().contains("aocheck-sut/1"));
    }

    #[tokio::test]
    async fn sigkill_ends_the_implementation_itself() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = start(dir.path(), "echo", 10_000);
        p.init(&test_init()).await.expect("init");
        let pid = p.pid().expect("pid");
        p.kill().await.expect("kill");
        // `exec` replaced the shell, so the killed pid was the implementation's.
        assert!(!Path::new(&format!("/proc/{pid}")).exists());
        let e = p.call("state", Map::new()).await.expect_err("gone");
        assert!(matches!(e, CallError::Exited { .. }), "{e}");
    }
}
