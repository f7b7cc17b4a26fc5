//! One action of a service of MCP tool calls driven through its fault: the service's
//! instances, the client's requests through the deploy file's templates, the fault landed at
//! fake-mcp, the action's status watched, and every beat told on the case's timeline (each
//! call as fake-mcp recorded it).

use super::super::Providers;
use super::super::drive::{self, Sent, Vars, answered};
use super::super::file::Loaded;
use super::super::service::{self, Env, Instance};
use super::{McpKind, owner_of};
use crate::providers::{Mcp, holds};
use crate::report::model::HarnessCause;
use crate::report::story::{Telling, Tone};
use provider_model::mcp::ledger::Ledger;
use std::path::Path;
use std::time::{Duration, Instant};

const CLIENT: &str = "aocheck (the client)";
const MCP: &str = "fake-mcp";
const LABELS: &str = "the service's status route";

/// One action's run.
pub(super) struct Ctx<'a> {
    d: &'a Loaded,
    mcp: &'a Mcp,
    occurrence: String,
    /// The client's requests (up to 75 s) and the watch's status reads (10 s).
    client: reqwest::Client,
    reads: reqwest::Client,
    env: Env,
    logs: std::path::PathBuf,
    pub(super) t: Telling,
    calls_told: usize,
    /// Whether fake-mcp was restarted after the call's effect.
    pub(super) restarted: bool,
    /// What the service answered the same action submitted again while its call was held.
    pub(super) replay_answer: Option<u16>,
    /// Every label the status route showed so far.
    seen: Seen,
    /// The tools that make effects.
    writes: Vec<String>,
}

/// Every label the status route showed, each with the effects fake-mcp had made for the
/// action when it was read.
pub(super) type Seen = Vec<(drive::Observed, usize)>;

type Step<T> = Result<T, (HarnessCause, String)>;

impl Ctx<'_> {
    fn told(&mut self, actor: &str, tone: Tone, s: impl Into<String>) {
        self.t.told(actor, tone, s);
    }
    async fn start(&mut self, label: &str) -> Step<Instance> {
        service::start_told(
            self.d,
            &self.env,
            label,
            &self.logs,
            &self.client,
            &mut self.t,
        )
        .await
    }
    /// Every call fake-mcp received since the last look, on the timeline: a write call of the
    /// action after one already made is the defect (red).
    pub(super) fn tell_calls(&mut self) -> Ledger {
        let l = self.mcp.ledger();
        let writes = &self.writes;
        let mut lines = Vec::new();
        for (i, c) in l.calls.iter().enumerate().skip(self.calls_told) {
            let write = writes.contains(&c.tool);
            let again = write
                && l.calls[..i]
                    .iter()
                    .any(|x| writes.contains(&x.tool) && x.key.is_some() && x.key == c.key);
            let s = if write {
                format!(
                    "{}call {} {} (key {}) → {}; its reply {:?}{}",
                    if again { "SECOND " } else { "" },
                    c.seq,
                    c.tool,
                    c.key.as_deref().unwrap_or("none"),
                    c.effect
                        .as_deref()
                        .map_or("no effect".to_string(), |e| format!("effect {e}")),
                    c.reply,
                    c.fault
                        .as_deref()
                        .map_or(String::new(), |f| format!(", fault {f}"))
                )
            } else {
                format!(
                    "call {} {} (a read); its reply {:?}",
                    c.seq, c.tool, c.reply
                )
            };
            let tone = match (again, write, c.fault.is_some()) {
                (true, _, _) => Tone::Defect,
                (_, _, true) => Tone::Fault,
                (_, true, _) => Tone::Settled,
                _ => Tone::Plain,
            };
            lines.push((tone, s));
        }
        self.calls_told = l.calls.len();
        for (tone, s) in lines {
            self.told(MCP, tone, s);
        }
        l
    }
    /// The effects fake-mcp made for the action so far.
    fn effects(&self, l: &Ledger) -> usize {
        l.effects
            .iter()
            .filter(|e| owner_of(self.d, e.key.as_deref()).as_deref() == Some(&self.occurrence))
            .count()
    }
    /// The write calls fake-mcp received for the action so far.
    fn calls(&self, l: &Ledger) -> usize {
        l.calls
            .iter()
            .filter(|c| super::of_action(self.d, &self.writes, &self.occurrence, c))
            .count()
    }
    /// One read of the action's status on the instance started last, told when it changed;
    /// with it, what fake-mcp has received so far.
    async fn look(
        &mut self,
        live: &mut [Instance],
        vars: &Vars,
    ) -> Step<(drive::Observed, Ledger)> {
        let Some(i) = live.last_mut() else {
            return Err((HarnessCause::Unreachable, "no instance is running".into()));
        };
        if let Some(st) = i.exited() {
            return Err((
                HarnessCause::Unreachable,
                format!(
                    "instance {} exited unasked ({st}); its output: {}",
                    i.label,
                    service::tail(&i.log)
                ),
            ));
        }
        // The effects made before the label is read: a label is judged against what had been
        // made when it was shown, never against an effect made just after.
        let before = self.effects(&self.mcp.ledger());
        // A read that fails is tried twice more (a service busy for a moment, a SQLite lock):
        // only a route that fails three times running ends the case.
        let mut tries = 0;
        let o = loop {
            match drive::status(&self.reads, &i.base, &self.d.file.drive.status, vars).await {
                Ok(o) => break o,
                Err(e) if tries >= 2 => return Err((HarnessCause::Unreachable, e.to_string())),
                Err(_) => {
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        };
        // What fake-mcp made for the action, read right after the label.
        let ledger = self.tell_calls();
        if self.seen.last().map(|(x, _)| x) != Some(&o) {
            let is_final = o.outcome.is_final();
            self.told(
                LABELS,
                if is_final { Tone::Settled } else { Tone::Plain },
                format!(
                    "the service reports {:?} ({}) for action {}",
                    o.label,
                    o.outcome.label(),
                    vars.occurrence
                ),
            );
            self.seen.push((o.clone(), before));
        }
        Ok((o, ledger))
    }
}

fn send(cx: &Ctx<'_>, base: &str, vars: &Vars) -> Sent {
    drive::send(&cx.client, base, "submit", &cx.d.file.drive.submit, vars)
}

/// The action submitted, its fault landed, its status watched. `Err`: the run could not be
/// set up; otherwise the context (its timeline) and what the watch saw.
#[allow(clippy::too_many_arguments)]
pub(super) async fn drive<'a>(
    d: &'a Loaded,
    p: &Providers,
    mcp: &'a Mcp,
    kind: Option<McpKind>,
    occurrence: &str,
    hold: &str,
    work: &Path,
    logs: &Path,
    started: Instant,
) -> Step<(Ctx<'a>, Step<Seen>)> {
    for dir in [work, logs] {
        std::fs::create_dir_all(dir)
            .map_err(|e| (HarnessCause::Unreachable, format!("{}: {e}", dir.display())))?;
    }
    let clients = [75, 10].map(|s| {
        reqwest::Client::builder()
            .timeout(Duration::from_secs(s))
            .build()
    });
    let [Ok(client), Ok(reads)] = clients else {
        return Err((HarnessCause::Unreachable, "http client".into()));
    };
    let mut cx = Ctx {
        d,
        mcp,
        occurrence: occurrence.to_string(),
        client,
        reads,
        env: p.env(work),
        logs: logs.to_path_buf(),
        t: Telling::at(started),
        calls_told: 0,
        restarted: false,
        replay_answer: None,
        seen: Vec::new(),
        writes: super::write_tools(),
    };
    let vars = Vars {
        occurrence: occurrence.to_string(),
        ..Vars::default()
    };
    let mut live: Vec<Instance> = Vec::new();
    let result = fault_and_watch(&mut cx, kind, &vars, hold, &mut live).await;
    for i in live.drain(..) {
        i.stop().await;
    }
    Ok((cx, result))
}

async fn fault_and_watch(
    cx: &mut Ctx<'_>,
    kind: Option<McpKind>,
    vars: &Vars,
    hold: &str,
    live: &mut Vec<Instance>,
) -> Step<Seen> {
    live.push(cx.start("a").await?);
    let base = live[0].base.clone();
    let first = send(cx, &base, vars);
    cx.told(
        CLIENT,
        Tone::Plain,
        format!("action {} submitted to instance a", vars.occurrence),
    );
    match kind {
        Some(k @ (McpKind::CrashAtHeldCall | McpKind::CrashAtHeldCallRefused)) => {
            parked(cx, hold).await?;
            // What the service says while its call is held, before anything is made.
            held_reads(cx, live, vars, HELD_READS).await?;
            let Some(mut a) = live.pop() else {
                return Err((HarnessCause::Unreachable, "no instance is running".into()));
            };
            let k_ = a.kill().await.map_err(|e| (HarnessCause::Unreachable, e))?;
            let gone = holds::hold(cx.mcp, hold, Duration::from_secs(10))
                .landed()
                .await
                .is_ok();
            cx.told(
                "instance a",
                Tone::Fault,
                format!(
                    "instance a killed: {}; {}",
                    k_.how,
                    if gone {
                        "fake-mcp saw the held call's caller go (its connection closed, or it cancelled the call)"
                    } else {
                        "the held call's caller was still there after 10 s"
                    }
                ),
            );
            if !gone {
                return Err((
                    HarnessCause::Undecided,
                    "the kill was not confirmed at fake-mcp".into(),
                ));
            }
            if k == McpKind::CrashAtHeldCallRefused {
                let action = provider_model::holds::ReleaseAction::Reject { status: 503 };
                cx.mcp.disarm_hold(hold);
                let n = holds::hold(cx.mcp, hold, Duration::from_secs(10))
                    .release(action)
                    .await
                    .map_err(|e| (HarnessCause::Undecided, e.to_string()))?;
                cx.told(
                    MCP,
                    Tone::Fault,
                    format!("fake-mcp refuses the held call ({n} let go): nothing is made"),
                );
            } else {
                release(cx, hold).await?;
            }
            let said = answered(first, Duration::from_secs(5)).await.1;
            cx.told(
                CLIENT,
                Tone::Plain,
                format!("the submission's own answer: {said}"),
            );
            live.push(cx.start("a").await?);
            cx.told(
                "instance a",
                Tone::Plain,
                "instance a restarted on the same store",
            );
        }
        Some(McpKind::ReplayWhileHeld) => {
            parked(cx, hold).await?;
            let again = send(cx, &base, vars);
            cx.told(
                CLIENT,
                Tone::Fault,
                "the same action submitted again while its call is held",
            );
            held_reads(cx, live, vars, HELD_READS).await?;
            release(cx, hold).await?;
            for (what, s) in [("first", first), ("second", again)] {
                let (code, said) = answered(s, Duration::from_secs(60)).await;
                if what == "second" {
                    cx.replay_answer = code;
                }
                cx.told(
                    CLIENT,
                    Tone::Plain,
                    format!("the {what} submission answered: {said}"),
                );
            }
        }
        Some(McpKind::RestartAfterCommit) => {
            let said = answered(first, Duration::from_secs(60)).await.1;
            cx.told(
                CLIENT,
                Tone::Plain,
                format!("the submission answered: {said}"),
            );
            // The server restarts once the call's effect is made (its reply already lost).
            let until = Instant::now() + Duration::from_secs(30);
            while !cx.mcp.rules().iter().any(|r| r.fired > 0) {
                if Instant::now() > until {
                    return Err((
                        HarnessCause::Undecided,
                        "no write call of the action reached fake-mcp within 30 s; the service's log says why".into(),
                    ));
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            cx.tell_calls();
            cx.mcp.restart();
            cx.restarted = true;
            cx.told(
                MCP,
                Tone::Fault,
                "fake-mcp restarts: every session is forgotten, every effect kept",
            );
        }
        None
        | Some(
            McpKind::LostReply
            | McpKind::ErrorAfterCommit
            | McpKind::RpcErrorAfterCommit
            | McpKind::ExpireAfterCommit
            | McpKind::LostReplyLaggingLookup
            | McpKind::RefusedNothingMade,
        ) => {
            let said = answered(first, Duration::from_secs(60)).await.1;
            cx.told(
                CLIENT,
                Tone::Plain,
                format!("the submission answered: {said}"),
            );
        }
    }
    let seen = watch(cx, live, vars).await;
    if matches!(
        kind,
        Some(McpKind::RestartAfterCommit | McpKind::ExpireAfterCommit)
    ) {
        let n = cx.mcp.stale_requests();
        cx.t.step(if n > 0 {
            format!("the service sent {n} request(s) under the session fake-mcp had forgotten (each answered 404), and went on")
        } else {
            "the service sent no request under the forgotten session (it opens a session per call): this case judged the lost reply and the server's restart, not its handling of a 404".to_string()
        });
    }
    seen
}

/// How long a held call stays held while its action's status is read (a caller that gives up on
/// the call meanwhile, by a cancellation, is gone at fake-mcp as a closed connection is).
const HELD_READS: Duration = Duration::from_secs(3);

/// Reads the action's status every 200 ms for `how_long` while its call is held: nothing is
/// made yet, so a success shown then is one nothing supports.
async fn held_reads(
    cx: &mut Ctx<'_>,
    live: &mut [Instance],
    vars: &Vars,
    how_long: Duration,
) -> Step<()> {
    let until = Instant::now() + how_long;
    while Instant::now() < until {
        cx.look(live, vars).await?;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

async fn parked(cx: &mut Ctx<'_>, hold: &str) -> Step<()> {
    match holds::hold(cx.mcp, hold, Duration::from_secs(30))
        .parked()
        .await
    {
        Ok(()) => {
            cx.told(
                MCP,
                Tone::Fault,
                "the service's write call is held at fake-mcp",
            );
            Ok(())
        }
        Err(_) => Err((
            HarnessCause::Undecided,
            "fake-mcp held no write call within 30 s: none arrived (a wrong {mcp.url}, a tool never called); the service's log says why".into(),
        )),
    }
}

async fn release(cx: &mut Ctx<'_>, hold: &str) -> Step<()> {
    // The hold parks one call: the same hold on the other write tools parks nothing more
    // (disarmed first, so that no call parks between the release and the disarm).
    cx.mcp.disarm_hold(hold);
    let n = holds::hold(cx.mcp, hold, Duration::from_secs(10))
        .release(provider_model::holds::ReleaseAction::Proceed)
        .await
        .map_err(|e| (HarnessCause::Undecided, e.to_string()))?;
    cx.told(
        MCP,
        Tone::Fault,
        format!("fake-mcp goes on with the held call ({n} released): the effect is made"),
    );
    Ok(())
}

/// How long the watch goes on after an `unknown` label: a service that says it cannot know may
/// still be acting (a retry after a backoff), and a call it makes then is an entry.
const AFTER_UNKNOWN: Duration = Duration::from_secs(10);

/// Watches the action's status on the instance started last until it is final (or the
/// deadline), then through the settle time from the last change (a new label, a new write call
/// of the action): longer after `unknown`.
async fn watch(cx: &mut Ctx<'_>, live: &mut [Instance], vars: &Vars) -> Step<Seen> {
    let deadline = Instant::now() + Duration::from_millis(cx.d.file.drive.deadline_ms);
    let settle = Duration::from_millis(cx.d.file.drive.settle_ms);
    let mut final_at: Option<Instant> = None;
    let mut calls = 0;
    let mut shown = cx.seen.len();
    loop {
        let (o, ledger) = cx.look(live, vars).await?;
        let now_calls = cx.calls(&ledger);
        // The settle time runs from the last change: a new label, or a new write call of the
        // action.
        let changed = now_calls > calls || cx.seen.len() > shown;
        calls = now_calls;
        shown = cx.seen.len();
        if o.outcome.is_final() && (final_at.is_none() || changed) {
            final_at = Some(Instant::now());
        } else if !o.outcome.is_final() {
            final_at = None;
        }
        let wait = if o.outcome == super::super::file::Outcome::Unknown {
            settle.max(AFTER_UNKNOWN)
        } else {
            settle
        };
        if final_at.is_some_and(|t| t.elapsed() >= wait)
            || (final_at.is_none() && Instant::now() > deadline)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(std::mem::take(&mut cx.seen))
}
