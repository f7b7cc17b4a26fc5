//! The implementer's service, started by aocheck: each instance in a process group of its own
//! (and, with `kill: cgroup`, a cgroup v2 of its own under aocheck's delegated cgroup), its
//! environment's placeholders filled, its output to a log file, ready when its HTTP check
//! answers 2xx; killed with SIGKILL to the group (or `cgroup.kill`), and the death confirmed.

use super::file::{KillMode, Loaded};
use rustix::process::{Pid, Signal};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

/// What the placeholders of a service's environment stand for in one case.
#[derive(Clone, Debug)]
pub struct Env {
    pub payments_url: String,
    pub payments_key: String,
    pub webhook_secret: String,
    pub hermes_url: Option<String>,
    /// fake-hermes' API key (the connector's endpoint credential).
    pub hermes_key: Option<String>,
    /// fake-mcp's MCP endpoint.
    pub mcp_url: Option<String>,
    pub store_dir: PathBuf,
}

/// One running instance.
#[derive(Debug)]
pub struct Instance {
    pub label: String,
    pub port: u16,
    pub base: String,
    child: Child,
    pid: u32,
    cgroup: Option<PathBuf>,
    /// The mark in its environment (`AOCHECK_SUT_MARK`): a process that left the group and
    /// kept its environment is still found.
    mark: String,
    pub log: PathBuf,
}

/// How a kill was confirmed (for the report).
#[derive(Clone, Debug)]
pub struct Killed {
    pub how: String,
}

fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")
        .map_err(|e| format!("no free loopback port: {e}"))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("no free loopback port: {e}"))
}

/// The environment's values with their placeholders filled.
pub fn fill_env(
    env: &BTreeMap<String, String>,
    e: &Env,
    port: u16,
    instance: &str,
) -> Result<Vec<(String, String)>, String> {
    let dir = e.store_dir.display().to_string();
    env.iter()
        .map(|(k, v)| {
            let mut out = v.clone();
            for (name, val) in [
                ("payments.url", Some(e.payments_url.clone())),
                ("payments.key", Some(e.payments_key.clone())),
                ("payments.webhook_secret", Some(e.webhook_secret.clone())),
                ("hermes.url", e.hermes_url.clone()),
                ("hermes.key", e.hermes_key.clone()),
                ("mcp.url", e.mcp_url.clone()),
                ("store.url", Some(format!("sqlite:{dir}/service.db"))),
                ("store.dir", Some(dir.clone())),
                ("port", Some(port.to_string())),
                ("instance", Some(instance.to_string())),
            ] {
                let p = format!("{{{name}}}");
                if out.contains(&p) {
                    match val {
                        Some(val) => out = out.replace(&p, &val),
                        None => {
                            return Err(format!(
                                "service.env.{k}: {p} has no value in this run (no such provider started)"
                            ));
                        }
                    }
                }
            }
            Ok((k.clone(), out))
        })
        .collect()
}

/// The variables of aocheck's environment a service inherits (and `LC_*`, `PYENV_*`).
pub const INHERITED: [&str; 9] = [
    "PATH",
    "HOME",
    "USER",
    "LANG",
    "TZ",
    "TMPDIR",
    "VIRTUAL_ENV",
    "NODE_PATH",
    "SYSTEMROOT",
];

/// Where the cgroup v2 (unified) hierarchy is mounted: `/sys/fs/cgroup` on a unified host,
/// `/sys/fs/cgroup/unified` on a hybrid one (read from /proc/self/mountinfo).
fn unified_mount() -> Result<PathBuf, String> {
    let text = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("/proc/self/mountinfo: {e}"))?;
    text.lines()
        .find_map(|l| {
            // `… mount-point options - fstype source super-options`
            let (left, right) = l.split_once(" - ")?;
            (right.split_whitespace().next()? == "cgroup2")
                .then(|| left.split_whitespace().nth(4).map(PathBuf::from))?
        })
        .ok_or_else(|| "no cgroup2 (unified) hierarchy is mounted".to_string())
}

/// This process's own cgroup v2 folder.
fn own_cgroup() -> Result<PathBuf, String> {
    let text = std::fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| format!("/proc/self/cgroup: {e}"))?;
    let rel = text
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .ok_or("no cgroup v2 (unified) entry in /proc/self/cgroup")?;
    Ok(unified_mount()?.join(rel.trim_start_matches('/')))
}

/// [`start`], told: the instance's start a step and a beat of `t` (its row the instance's).
pub async fn start_told(
    d: &Loaded,
    e: &Env,
    label: &str,
    logs: &Path,
    client: &reqwest::Client,
    t: &mut crate::report::story::Telling,
) -> Result<Instance, (crate::report::model::HarnessCause, String)> {
    let i = start(d, e, label, logs, client)
        .await
        .map_err(|e| (crate::report::model::HarnessCause::Unreachable, e))?;
    t.told(
        &format!("instance {label}"),
        crate::report::story::Tone::Plain,
        format!("instance {label} started on port {} and ready", i.port),
    );
    Ok(i)
}

/// Starts instance `label` and waits until its ready check answers 2xx.
pub async fn start(
    d: &Loaded,
    e: &Env,
    label: &str,
    logs: &Path,
    client: &reqwest::Client,
) -> Result<Instance, String> {
    let s = &d.file.service;
    let port = free_port()?;
    let env = fill_env(&s.env, e, port, label)?;
    let log = logs.join(format!("service-{label}-{port}.log"));
    let out = std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
    let err = out
        .try_clone()
        .map_err(|e| format!("{}: {e}", log.display()))?;
    let mut raw = [0u8; 16];
    getrandom::fill(&mut raw).map_err(|e| format!("no entropy: {e}"))?;
    let mark = hex::encode(raw);
    let mut cmd = Command::new(&s.command[0]);
    // Nothing of aocheck's own environment (a real provider key, a CI token) reaches the
    // service: what a program needs to start, and what the deploy file gives.
    cmd.env_clear();
    for (k, v) in std::env::vars_os() {
        let keep = k.to_str().is_some_and(|k| {
            INHERITED.contains(&k) || k.starts_with("LC_") || k.starts_with("PYENV_")
        });
        if keep {
            cmd.env(k, v);
        }
    }
    cmd.args(&s.command[1..])
        .current_dir(&d.dir)
        .envs(env)
        .env("AOCHECK_SUT_MARK", &mark)
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .kill_on_drop(true);
    let child = cmd.spawn().map_err(|e| {
        format!(
            "service.command: cannot start {:?} in {}: {e}",
            s.command[0],
            d.dir.display()
        )
    })?;
    let pid = child.id().ok_or("the service exited at once")?;
    let mut inst = Instance {
        label: label.to_string(),
        port,
        base: format!("http://127.0.0.1:{port}"),
        child,
        pid,
        cgroup: None,
        mark,
        log,
    };
    if s.kill == KillMode::Cgroup {
        let cg = own_cgroup()?.join(format!("aocheck-{label}-{}", &inst.mark[..12]));
        let placed = std::fs::create_dir(&cg)
            .and_then(|_| std::fs::write(cg.join("cgroup.procs"), pid.to_string()));
        if let Err(why) = placed {
            inst.kill_group();
            let _ = std::fs::remove_dir(&cg);
            return Err(format!(
                "service.kill: cgroup: cannot place the service in {} ({why}); this machine does not delegate a cgroup v2 to aocheck; use `kill: process_group`",
                cg.display()
            ));
        }
        inst.cgroup = Some(cg);
    }
    let deadline = Instant::now() + Duration::from_millis(s.ready.timeout_ms);
    let url = format!("{}{}", inst.base, s.ready.path);
    loop {
        if let Ok(Some(st)) = inst.child.try_wait() {
            return Err(format!(
                "instance {label} exited ({st}) before it was ready; its output: {}",
                tail(&inst.log)
            ));
        }
        if let Ok(r) = client
            .get(&url)
            .timeout(Duration::from_secs(2))
            .send()
            .await
            && r.status().is_success()
        {
            return Ok(inst);
        }
        if Instant::now() > deadline {
            inst.kill_group();
            return Err(format!(
                "service.ready: {url} did not answer 2xx within {} ms; the service's output: {}",
                s.ready.timeout_ms,
                tail(&inst.log)
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The last lines of a log, on one line and whole (the last line of a stack is the error), and
/// where the whole log is.
pub fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().rev().take(8).collect();
    format!(
        "{} (the whole log: {})",
        crate::report::model::one_line(
            &lines.into_iter().rev().collect::<Vec<_>>().join(" | "),
            usize::MAX,
        ),
        log.display()
    )
}

impl Instance {
    /// Kills what is left of the instance outside its group: processes that carry its mark
    /// (a daemon that called setsid keeps its environment). Each as `pid (command)`.
    fn sweep(&self) -> Vec<String> {
        let found = crate::sut::process::members(self.pid, &self.mark, &[]);
        for (pid, _) in &found {
            crate::sut::process::kill_pid(*pid);
        }
        found
            .into_iter()
            .map(|(pid, comm)| format!("{pid} ({comm})"))
            .collect()
    }

    fn kill_group(&self) {
        if let Some(g) = i32::try_from(self.pid)
            .ok()
            .filter(|g| *g > 1)
            .and_then(Pid::from_raw)
        {
            let _ = rustix::process::kill_process_group(g, Signal::KILL);
        }
    }

    /// Kills the instance as a crash would (no chance to clean up) and confirms it: the
    /// process's own exit by SIGKILL observed, and (cgroup) the cgroup empty.
    pub async fn kill(&mut self) -> Result<Killed, String> {
        let how = match &self.cgroup {
            Some(cg) => {
                std::fs::write(cg.join("cgroup.kill"), "1")
                    .map_err(|e| format!("{}: {e}", cg.join("cgroup.kill").display()))?;
                // A child forked before the instance was placed in its cgroup is in its group.
                self.kill_group();
                format!(
                    "cgroup.kill of {} (and SIGKILL to its process group)",
                    cg.display()
                )
            }
            None => {
                self.kill_group();
                format!("SIGKILL to process group {}", self.pid)
            }
        };
        let st = tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .map_err(|_| format!("instance {} did not die within 10 s of {how}", self.label))?
            .map_err(|e| format!("instance {}: {e}", self.label))?;
        use std::os::unix::process::ExitStatusExt as _;
        let confirmed = match st.signal() {
            Some(9) => "its exit by signal 9 (SIGKILL) observed".to_string(),
            other => {
                return Err(format!(
                    "instance {} ended with {st} (signal {other:?}), not by the kill",
                    self.label
                ));
            }
        };
        let mut how = format!("{how}; {confirmed}");
        let escaped = self.sweep();
        if !escaped.is_empty() {
            how.push_str(&format!(
                "; processes that had left its group, found by its mark and killed too: {}",
                escaped.join(", ")
            ));
        }
        if let Some(cg) = &self.cgroup {
            // Killed processes leave the cgroup as they die: wait for `populated 0`.
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            let empty = loop {
                let events = std::fs::read_to_string(cg.join("cgroup.events")).unwrap_or_default();
                if events.lines().any(|l| l.trim() == "populated 0") {
                    break true;
                }
                if std::time::Instant::now() > deadline {
                    break false;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            };
            if !empty {
                return Err(format!(
                    "{} still holds processes 5 s after cgroup.kill",
                    cg.display()
                ));
            }
            how.push_str("; the cgroup is empty");
            let _ = std::fs::remove_dir(cg);
        }
        Ok(Killed { how })
    }

    /// Stops the instance at the end of a case (SIGTERM, then SIGKILL after 3 s).
    pub async fn stop(mut self) {
        if let Some(g) = i32::try_from(self.pid)
            .ok()
            .filter(|g| *g > 1)
            .and_then(Pid::from_raw)
        {
            let _ = rustix::process::kill_process_group(g, Signal::TERM);
        }
        if tokio::time::timeout(Duration::from_secs(3), self.child.wait())
            .await
            .is_err()
        {
            self.kill_group();
            let _ = self.child.wait().await;
        }
        // Whatever the service left in its group, or outside it with its mark.
        self.kill_group();
        self.sweep();
        if let Some(cg) = &self.cgroup {
            let _ = std::fs::write(cg.join("cgroup.kill"), "1");
            let _ = std::fs::remove_dir(cg);
        }
    }

    /// Whether the process has exited (unasked).
    pub fn exited(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(st)) => Some(st.to_string()),
            _ => None,
        }
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        self.kill_group();
        self.sweep();
    }
}
