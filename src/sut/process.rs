//! One implementation process speaking `aocheck-sut/1`: spawned from a command line, its stderr
//! written to a file in the run folder, every request answered within a deadline or the process
//! is killed, and SIGKILL on demand for crash faults. A hung, crashing or garbling implementation
//! becomes a typed [`CallError`] quoting what it did, never a hung harness.

use super::protocol::{self, MAX_LINE, Pending, Request, SutFailure, Violation};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// What the implementation said about itself in answer to `init`.
#[derive(Clone, Debug, PartialEq)]
pub struct Hello {
    pub protocol: String,
    pub name: String,
    pub version: String,
    pub operations: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
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

/// A running implementation process.
#[derive(Debug)]
pub struct SutProcess {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    pending: Pending,
    timeout: Duration,
    stderr_path: PathBuf,
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join(" | ")
}

impl SutProcess {
    /// Starts `command` (run by `sh -c exec …`, so the kill reaches the implementation itself).
    pub fn spawn(command: &str, stderr_path: &Path, timeout: Duration) -> Result<Self, CallError> {
        let spawn_err = |reason: String| CallError::Spawn {
            command: command.into(),
            reason,
        };
        if let Some(dir) = stderr_path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| spawn_err(format!("{}: {e}", dir.display())))?;
        }
        let log = std::fs::File::create(stderr_path)
            .map_err(|e| spawn_err(format!("{}: {e}", stderr_path.display())))?;
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(format!("exec {command}"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
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
        Ok(SutProcess {
            child,
            stdin,
            stdout: BufReader::new(stdout),
            pending: Pending::default(),
            timeout,
            stderr_path: stderr_path.into(),
        })
    }

    async fn exited(&mut self, op: &str) -> CallError {
        let status = match tokio::time::timeout(Duration::from_secs(2), self.child.wait()).await {
            Ok(Ok(s)) => s.to_string(),
            Ok(Err(e)) => e.to_string(),
            Err(_) => {
                let _ = self.child.start_kill();
                "closed its stdout but kept running; killed".into()
            }
        };
        CallError::Exited {
            op: op.into(),
            status,
            tail: tail(&self.stderr_path, 20),
        }
    }

    /// Sends one request and waits for its response (or the deadline).
    pub async fn call(
        &mut self,
        op: &str,
        fields: Map<String, Value>,
    ) -> Result<Result<Value, SutFailure>, CallError> {
        let id = self.pending.issue();
        let req = Request {
            id,
            op: op.into(),
            fields,
        };
        let mut line = serde_json::to_vec(&req).map_err(|e| CallError::Io(e.to_string()))?;
        line.push(b'\n');
        if self.stdin.write_all(&line).await.is_err() || self.stdin.flush().await.is_err() {
            return Err(self.exited(op).await);
        }
        let started = std::time::Instant::now();
        let read = tokio::time::timeout(
            self.timeout,
            protocol::read_line(&mut self.stdout, MAX_LINE),
        )
        .await;
        match read {
            Err(_) => {
                self.pending.abandon(id);
                let _ = self.kill().await;
                Err(CallError::NoResponse {
                    op: op.into(),
                    millis: started.elapsed().as_millis(),
                })
            }
            Ok(Err(e)) => Err(CallError::Io(e.to_string())),
            Ok(Ok(Err(violation))) => {
                let _ = self.kill().await;
                Err(CallError::Violation {
                    op: op.into(),
                    violation,
                })
            }
            Ok(Ok(Ok(None))) => Err(self.exited(op).await),
            Ok(Ok(Ok(Some(line)))) => match self.pending.accept(&line) {
                Ok(r) if r.id == id => Ok(r.result),
                Ok(_) => Err(CallError::Violation {
                    op: op.into(),
                    violation: Violation::UnknownId {
                        id,
                        quote: String::from_utf8_lossy(&line).into_owned(),
                    },
                }),
                Err(violation) => {
                    let _ = self.kill().await;
                    Err(CallError::Violation {
                        op: op.into(),
                        violation,
                    })
                }
            },
        }
    }

    /// The handshake: `init` with the given fields; checks the protocol version.
    pub async fn init(&mut self, mut fields: Map<String, Value>) -> Result<Hello, CallError> {
        fields.insert("protocol".into(), protocol::PROTOCOL.into());
        let bad = |reason: String| CallError::Violation {
            op: "init".into(),
            violation: Violation::Malformed {
                reason,
                quote: String::new(),
            },
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
        })
    }

    /// SIGKILL, then reap.
    pub async fn kill(&mut self) -> std::io::Result<()> {
        self.child.start_kill()?;
        self.child.wait().await.map(|_| ())
    }

    /// The OS process id (None once reaped).
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scripted implementation in Python: answers per the `mode` argument.
    const SCRIPT: &str = r#"
import json, sys, time
mode = sys.argv[1]
for line in sys.stdin:
    req = json.loads(line)
    print("got", req["op"], file=sys.stderr, flush=True)
    if req["op"] == "init":
        proto = "aocheck-sut/0" if mode == "old" else "aocheck-sut/1"
        out = {"id": req["id"], "ok": {"protocol": proto, "name": "scripted", "version": "0.0.1", "operations": ["state"]}}
    elif mode == "hang":
        time.sleep(60); continue
    elif mode == "garble":
        sys.stdout.write("this is not json\n"); sys.stdout.flush(); continue
    elif mode == "die":
        print("fatal: giving up", file=sys.stderr, flush=True); sys.exit(7)
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
        )
        .expect("spawn")
    }

    fn fields(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[tokio::test]
    async fn a_handshake_and_a_call_round_trip_and_stderr_is_captured() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut p = start(dir.path(), "echo", 10_000);
        let hello = p.init(Map::new()).await.expect("init");
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
    async fn a_typed_refusal_is_returned_as_such() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut p = start(dir.path(), "refuse", 10_000);
        p.init(Map::new()).await.expect("init");
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
        let mut p = start(dir.path(), "hang", 500);
        p.init(Map::new()).await.expect("init");
        let started = std::time::Instant::now();
        let e = p
            .call("execute", Map::new())
            .await
            .expect_err("no response");
        assert!(matches!(e, CallError::NoResponse { .. }), "{e}");
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(p.pid(), None, "the hung process was reaped");
    }

    #[tokio::test]
    async fn garbage_on_stdout_is_a_violation_quoting_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut p = start(dir.path(), "garble", 10_000);
        p.init(Map::new()).await.expect("init");
        let e = p.call("execute", Map::new()).await.expect_err("violation");
        assert!(e.to_string().contains("this is not json"), "{e}");
    }

    #[tokio::test]
    async fn an_exit_is_reported_with_status_and_stderr_tail() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut p = start(dir.path(), "die", 10_000);
        p.init(Map::new()).await.expect("init");
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
        let mut p = start(dir.path(), "old", 10_000);
        let e = p.init(Map::new()).await.expect_err("version");
        assert!(matches!(e, CallError::Version { .. }), "{e}");
        assert!(e.to_string().contains("aocheck-sut/0"));
    }

    #[tokio::test]
    async fn sigkill_ends_the_implementation_itself() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut p = start(dir.path(), "echo", 10_000);
        p.init(Map::new()).await.expect("init");
        let pid = p.pid().expect("pid");
        p.kill().await.expect("kill");
        // `exec` replaced the shell, so the killed pid was the implementation's.
        assert!(!Path::new(&format!("/proc/{pid}")).exists());
        let e = p.call("state", Map::new()).await.expect_err("gone");
        assert!(matches!(e, CallError::Exited { .. }), "{e}");
    }
}
