//! One connector action driven through its fault: the service's instances, the client's
//! requests through the deploy file's templates, the fault landed at fake-hermes, the action's
//! status watched, and every beat told on the case's timeline (runs, decisions and stops as
//! fake-hermes recorded them).

use super::super::drive::{self, Sent, Vars, answered};
use super::super::file::Loaded;
use super::super::service::{self, Env, Instance};
use super::{HermesKind, owner_of};
use crate::check::connector::RunsThen;
use crate::providers::holds;
use crate::report::model::HarnessCause;
use crate::report::story::{Telling, Tone};
use provider_model::hermes::ledger::Ledger;
use std::time::{Duration, Instant};

/// One action's run.
pub(super) struct Ctx<'a> {
    pub(super) d: &'a Loaded,
    pub(super) hermes: &'a crate::providers::Hermes,
    /// The client's requests (submit, resume, cancel: up to 75 s, a replay may wait out a
    /// claim) and the watch's status reads (10 s).
    pub(super) client: reqwest::Client,
    pub(super) reads: reqwest::Client,
    pub(super) env: Env,
    pub(super) logs: std::path::PathBuf,
    /// The case as it happens (its steps and the timeline's beats).
    pub(super) t: Telling,
    /// The runs already told on the timeline.
    pub(super) runs_told: usize,
    /// The HTTP status the connector answered a changed objective under the same id with.
    pub(super) changed_answer: Option<u16>,
    /// The HTTP status the connector answered the replay of a held action with.
    pub(super) replay_answer: Option<u16>,
    /// The decisions and stops already told on the timeline.
    pub(super) decisions_told: usize,
    pub(super) stops_told: usize,
    /// The HTTP status the restarted connector answered the exact replay of a resume command
    /// with (its words; `None` where it never reached the instance), and the cancellation
    /// with.
    pub(super) resume_replay: Option<String>,
    pub(super) cancel_answer: Option<u16>,
}

pub(super) static RUN_SCRIPT: std::sync::LazyLock<serde_json::Value> = std::sync::LazyLock::new(
    || {
        serde_json::json!({"name": "aocheck-deploy", "steps": [
            {"id": "think", "kind": "sleep", "ms": 1500},
            {"id": "reply", "kind": "message", "text": "Done. I completed the objective.", "after": ["think"]}
        ]})
    },
);

/// Two approvals in a row: a decision applied twice for one command resolves the second with
/// a choice nobody gave for it.
pub(super) static APPROVAL_SCRIPT: std::sync::LazyLock<serde_json::Value> =
    std::sync::LazyLock::new(|| {
        serde_json::json!({"name": "aocheck-deploy-approvals", "steps": [
            {"id": "think", "kind": "sleep", "ms": 300},
            {"id": "ask1", "kind": "approval", "tool": "terminal", "command": "deploy --stage 1",
             "description": "first stage", "timeout_ms": 120000, "after": ["think"]},
            {"id": "ask2", "kind": "approval", "tool": "terminal", "command": "deploy --stage 2",
             "description": "second stage", "timeout_ms": 120000, "after": ["ask1"]},
            {"id": "reply", "kind": "message", "text": "Done. Both stages deployed.", "after": ["ask2"]}
        ]})
    });

/// A run that says a few things on its event stream before it ends, completed or failed as
/// drawn for the run: a connector that guesses the end of a run whose stream broke is caught
/// whichever it guesses (half the time in one case, at once over a few).
pub(super) fn stream_script(fails: bool) -> serde_json::Value {
    let end = if fails {
        serde_json::json!({"id": "end", "kind": "fail", "error": "the deployment is unreachable", "after": ["think"]})
    } else {
        serde_json::json!({"id": "end", "kind": "message", "text": "Done. I completed the objective.", "after": ["think"]})
    };
    serde_json::json!({"name": "aocheck-deploy-stream", "steps": [
        {"id": "plan", "kind": "reasoning", "text": "Reading the deployment."},
        {"id": "look", "kind": "tool", "tool": "terminal", "preview": "kubectl get pods", "duration_ms": 300, "after": ["plan"]},
        {"id": "think", "kind": "sleep", "ms": 1200, "after": ["look"]},
        end
    ]})
}

impl HermesKind {
    /// The script fake-hermes runs for the action (`draw`: the coin for a broken stream's end).
    pub(super) fn script(self, draw: bool) -> serde_json::Value {
        match self {
            HermesKind::ResumeAfterRestart => APPROVAL_SCRIPT.clone(),
            HermesKind::BrokenStream => stream_script(draw),
            _ => RUN_SCRIPT.clone(),
        }
    }
}

/// How long the approval case watches after its replay: its run then waits for a decision
/// nobody gives, which no deadline ends.
pub(super) const WAIT_FOR_NOBODY: Duration = Duration::from_secs(15);

const CLIENT: &str = "aocheck (the client)";
const HERMES: &str = "fake-hermes";
const LABELS: &str = "the connector's status route";

impl Ctx<'_> {
    fn told(&mut self, actor: &str, tone: Tone, s: impl Into<String>) {
        self.t.told(actor, tone, s);
    }
    async fn start(&mut self, label: &str) -> Result<Instance, (HarnessCause, String)> {
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
    /// Every run fake-hermes started since the last look, on the timeline.
    pub(super) fn tell_runs(&mut self) -> Ledger {
        let l = self.hermes.ledger();
        // A run is the defect (red) when an earlier run has its session: a second run for one
        // action.
        let new: Vec<(bool, String)> = l
            .runs
            .iter()
            .enumerate()
            .skip(self.runs_told)
            .map(|(i, r)| {
                let again = l.runs[..i].iter().any(|x| x.session_id == r.session_id);
                let s = format!(
                    "{}run {} started for session {} (key {}{}); its reply {:?}",
                    if again { "SECOND " } else { "" },
                    r.run_id,
                    r.session_id,
                    r.idempotency_key.as_deref().unwrap_or("none"),
                    r.fault
                        .as_deref()
                        .map_or(String::new(), |f| format!(", fault {f}")),
                    r.reply
                );
                (again, s)
            })
            .collect();
        self.runs_told = l.runs.len();
        for (again, s) in new {
            let tone = if again { Tone::Defect } else { Tone::Settled };
            self.told(HERMES, tone, s);
        }
        for (i, a) in l.approvals.iter().enumerate().skip(self.decisions_told) {
            // Past the first decision on one run, each is one no command of the case asked for
            // (the case sends one command).
            let again = l.approvals[..i].iter().any(|x| x.run_id == a.run_id);
            self.told(
                HERMES,
                if again { Tone::Defect } else { Tone::Settled },
                format!(
                    "{}decision {:?} applied to run {} ({} approval(s) resolved{}); its reply {:?}",
                    if again { "SECOND " } else { "" },
                    a.choice,
                    a.run_id,
                    a.resolved,
                    a.fault
                        .as_deref()
                        .map_or(String::new(), |f| format!(", fault {f}")),
                    a.reply
                ),
            );
        }
        self.decisions_told = l.approvals.len();
        for st in l.stops.iter().skip(self.stops_told) {
            self.told(
                HERMES,
                Tone::Plain,
                format!(
                    "stop of run {} received ({}{}); its reply {:?}",
                    st.run_id,
                    if st.effective {
                        "the run's first"
                    } else {
                        "a repeated stop"
                    },
                    st.fault
                        .as_deref()
                        .map_or(String::new(), |f| format!(", fault {f}")),
                    st.reply
                ),
            );
        }
        self.stops_told = l.stops.len();
        l
    }
    /// The action's runs in fake-hermes' ledger.
    fn runs_of(&self, l: &Ledger, occurrence: &str) -> Vec<String> {
        l.runs
            .iter()
            .filter(|r| owner_of(self.d, r).as_deref() == Some(occurrence))
            .map(|r| r.run_id.clone())
            .collect()
    }
    /// Waits until one of the action's runs is as `want` says (its status at fake-hermes and
    /// whether an approval waits for a decision); its run id.
    async fn run_where(
        &mut self,
        occurrence: &str,
        what: &str,
        want: impl Fn(&str, bool) -> bool,
        within: Duration,
    ) -> Result<String, (HarnessCause, String)> {
        let until = Instant::now() + within;
        loop {
            let l = self.tell_runs();
            for id in self.runs_of(&l, occurrence) {
                if let Some((status, pending)) = self.hermes.run_state(&id)
                    && want(&status, pending)
                {
                    return Ok(id);
                }
            }
            if Instant::now() > until {
                return Err((
                    HarnessCause::Undecided,
                    format!(
                        "no run of action {occurrence} was {what} at fake-hermes within {} s; the connector's log says why",
                        within.as_secs()
                    ),
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

fn send(cx: &Ctx<'_>, base: &str, vars: &Vars) -> Sent {
    send_as(cx, base, "submit", &cx.d.file.drive.submit, vars)
}

/// Sends the deploy file's `drive.<name>` template on a task of its own.
fn send_as(
    cx: &Ctx<'_>,
    base: &str,
    name: &'static str,
    t: &super::super::file::Request,
    vars: &Vars,
) -> Sent {
    drive::send(&cx.client, base, name, t, vars)
}

async fn answer(s: Sent, wait: Duration) -> String {
    answered(s, wait).await.1
}

/// The action submitted, its fault landed, its status watched: every label seen, and for each
/// final one what fake-hermes had said of the action's runs then.
pub(super) async fn drive(
    cx: &mut Ctx<'_>,
    kind: Option<HermesKind>,
    vars: &Vars,
    live: &mut Vec<Instance>,
) -> Result<(Vec<drive::Observed>, Vec<RunsThen>), (HarnessCause, String)> {
    let hold = kind.map(|k| k.hold(&vars.occurrence)).unwrap_or_default();
    if let Some(rule) = kind.and_then(|k| k.rule(&hold)) {
        cx.hermes
            .add_rule(rule)
            // A plan fake-hermes refuses is aocheck's own defect: undecided, never "the
            // service could not be reached".
            .map_err(|e| {
                (
                    HarnessCause::Undecided,
                    format!("fault plan: {}", e.join("; ")),
                )
            })?;
    }
    live.push(cx.start("a").await?);
    let base = live[0].base.clone();
    let first = send(cx, &base, vars);
    cx.told(
        CLIENT,
        Tone::Plain,
        format!("action {} submitted to instance a", vars.occurrence),
    );
    match kind {
        Some(HermesKind::CrashAtHeldStart) => {
            parked(cx, &hold, "POST /v1/runs").await?;
            kill_while_held(cx, live, &hold, "start").await?;
            let said = answer(first, Duration::from_secs(5)).await;
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
        Some(HermesKind::ReplayWhileHeld) => {
            parked(cx, &hold, "POST /v1/runs").await?;
            let again = send(cx, &base, vars);
            tokio::time::sleep(Duration::from_millis(300)).await;
            cx.told(
                CLIENT,
                Tone::Fault,
                "the same action submitted again while its start is held",
            );
            release(cx, &hold, "start").await?;
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
        Some(HermesKind::ChangedInput) => {
            let said = answer(first, Duration::from_secs(60)).await;
            cx.told(
                CLIENT,
                Tone::Plain,
                format!("the submission answered: {said}"),
            );
            // Settled first, then the same id with another objective.
            let (seen, then) = watch(cx, live, vars, None).await?;
            let other = Vars {
                objective: format!("{} (changed)", vars.objective),
                ..vars.clone()
            };
            let base = live.last().map(|i| i.base.clone()).unwrap_or(base);
            let again = send(cx, &base, &other);
            let (code, said) = answered(again, Duration::from_secs(60)).await;
            cx.changed_answer = code;
            cx.told(
                CLIENT,
                Tone::Fault,
                format!(
                    "the same action submitted again with another objective ({:?}): {said}",
                    other.objective
                ),
            );
            // The second watch's labels follow the first's; each final one keeps what
            // fake-hermes had said then (a label unchanged since the first watch is not new).
            let (more, more_then) = watch(cx, live, vars, None).await?;
            let (mut seen, mut then) = (seen, then);
            let mut t = more_then.into_iter();
            for o in more {
                let said_then = if o.outcome.is_final() { t.next() } else { None };
                if seen.last() != Some(&o) {
                    then.extend(said_then);
                    seen.push(o);
                }
            }
            return Ok((seen, then));
        }
        Some(HermesKind::ResumeAfterRestart) => {
            let said = answer(first, Duration::from_secs(60)).await;
            cx.told(
                CLIENT,
                Tone::Plain,
                format!("the submission answered: {said}"),
            );
            let Some(t) = cx.d.file.drive.resume.clone() else {
                return Err((HarnessCause::Undecided, "no drive.resume".into()));
            };
            let run = cx
                .run_where(
                    &vars.occurrence,
                    "waiting for an approval",
                    |st, pending| pending && st == "waiting_for_approval",
                    Duration::from_secs(30),
                )
                .await?;
            cx.told(
                HERMES,
                Tone::Plain,
                format!("run {run} asks for an approval (the first of two)"),
            );
            // A connector learns of the approval at its own pace (its next poll, its stream):
            // a resume it refuses as premature, with nothing sent to Hermes, is tried again
            // under a new command id. Only a command it accepted can make a decision.
            let until = Instant::now() + Duration::from_secs(30);
            let mut k = 0;
            let (cmd, r1) = loop {
                k += 1;
                let cmd = Vars {
                    command: format!("{}-resume-{k}", vars.occurrence),
                    choice: "once".into(),
                    ..vars.clone()
                };
                let r = send_as(cx, &base, "resume", &t, &cmd);
                cx.told(
                    CLIENT,
                    Tone::Plain,
                    format!(
                        "resume command {} (choice \"once\") submitted to instance a",
                        cmd.command
                    ),
                );
                let step = Duration::from_millis(500);
                let mut r = Some(r);
                while Instant::now() < until {
                    if cx.hermes.wait_parked(&hold, 1, step).await {
                        break;
                    }
                    if r.as_ref().is_some_and(|r| r.is_finished()) {
                        let (code, said) = answered(r.take().expect("finished"), step).await;
                        if !code.is_some_and(|c| t.accept.contains(&c)) {
                            cx.told(
                                CLIENT,
                                Tone::Plain,
                                format!(
                                    "the connector refused it ({said}); nothing reached Hermes"
                                ),
                            );
                            break;
                        }
                    }
                }
                match r {
                    Some(r) if cx.hermes.wait_parked(&hold, 1, Duration::ZERO).await => {
                        break (cmd, r);
                    }
                    _ if Instant::now() < until => {
                        tokio::time::sleep(Duration::from_millis(300)).await;
                    }
                    _ => {
                        return Err((
                            HarnessCause::Undecided,
                            format!(
                                "fake-hermes held no POST /v1/runs/{{id}}/approval within 30 s of the approval: the connector refused or never sent {k} resume command(s); its log says why"
                            ),
                        ));
                    }
                }
            };
            parked(cx, &hold, "POST /v1/runs/{id}/approval").await?;
            kill_while_held(cx, live, &hold, "decision").await?;
            let said = answer(r1, Duration::from_secs(5)).await;
            cx.told(
                CLIENT,
                Tone::Plain,
                format!("the resume command's own answer: {said}"),
            );
            // The released decision is applied before the restart: the run goes on to its
            // second approval, which a replayed decision would resolve.
            let until = Instant::now() + Duration::from_secs(10);
            while !cx.tell_runs().approvals.iter().any(|a| a.run_id == run) {
                if Instant::now() > until {
                    return Err((
                        HarnessCause::Undecided,
                        "fake-hermes did not apply the released decision within 10 s".into(),
                    ));
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            // And its second approval waits: a decision resent at boot lands on it.
            cx.run_where(
                &vars.occurrence,
                "waiting for its second approval",
                |st, pending| pending && st == "waiting_for_approval",
                Duration::from_secs(10),
            )
            .await?;
            live.push(cx.start("a").await?);
            cx.told(
                "instance a",
                Tone::Plain,
                "instance a restarted on the same store",
            );
            let base = live.last().map(|i| i.base.clone()).unwrap_or(base);
            let again = send_as(cx, &base, "resume", &t, &cmd);
            let (code, said) = answered(again, Duration::from_secs(60)).await;
            // Delivered to the live restarted instance: answered, or still waiting (a replay
            // may wait out another owner's claim).
            cx.resume_replay =
                (code.is_some() || said.starts_with("no answer within")).then(|| said.clone());
            cx.told(
                CLIENT,
                Tone::Fault,
                format!(
                    "the same resume command {} replayed exactly to the restarted instance: {said}",
                    cmd.command
                ),
            );
            // The run now waits for a second decision nobody gives: the watch (and the
            // connector) go on WAIT_FOR_NOBODY after the replay whatever the labels say, so a
            // decision resent late is still seen.
            return watch(cx, live, vars, Some(Instant::now() + WAIT_FOR_NOBODY)).await;
        }
        Some(HermesKind::CancelRacesCompletion) => {
            let said = answer(first, Duration::from_secs(60)).await;
            cx.told(
                CLIENT,
                Tone::Plain,
                format!("the submission answered: {said}"),
            );
            let Some(t) = cx.d.file.drive.cancel.clone() else {
                return Err((HarnessCause::Undecided, "no drive.cancel".into()));
            };
            let run = cx
                .run_where(
                    &vars.occurrence,
                    "running",
                    |st, _| st == "running",
                    Duration::from_secs(30),
                )
                .await?;
            let (code, said) = answered(
                send_as(cx, &base, "cancel", &t, vars),
                Duration::from_secs(30),
            )
            .await;
            cx.cancel_answer = code;
            cx.told(
                CLIENT,
                Tone::Fault,
                format!("the action cancelled while run {run} is running: {said}"),
            );
        }
        None
        | Some(
            HermesKind::ForgetWhilePolling
            | HermesKind::LostStart
            | HermesKind::StartErrorAfterCommit
            | HermesKind::BrokenStream,
        ) => {
            let said = answer(first, Duration::from_secs(60)).await;
            cx.told(
                CLIENT,
                Tone::Plain,
                format!("the submission answered: {said}"),
            );
        }
    }
    watch(cx, live, vars, None).await
}

async fn parked(cx: &mut Ctx<'_>, hold: &str, what: &str) -> Result<(), (HarnessCause, String)> {
    match holds::hold(cx.hermes, hold, Duration::from_secs(30))
        .parked()
        .await
    {
        Ok(()) => {
            cx.told(
                HERMES,
                Tone::Fault,
                format!("the connector's {what} is held at fake-hermes"),
            );
            Ok(())
        }
        Err(_) => Err((
            HarnessCause::Undecided,
            format!(
                "fake-hermes held no {what} within 30 s: none arrived, or it was refused before the fault plan (a wrong {{hermes.key}}, a bad body); the connector's log says which"
            ),
        )),
    }
}

/// Kills the instance started last while fake-hermes holds its request, confirms there that
/// the held connection closed, and lets fake-hermes go on with the request (the `what` is
/// committed).
async fn kill_while_held(
    cx: &mut Ctx<'_>,
    live: &mut Vec<Instance>,
    hold: &str,
    what: &str,
) -> Result<(), (HarnessCause, String)> {
    let Some(mut a) = live.pop() else {
        return Err((HarnessCause::Unreachable, "no instance is running".into()));
    };
    let k = a.kill().await.map_err(|e| (HarnessCause::Unreachable, e))?;
    let gone = holds::hold(cx.hermes, hold, Duration::from_secs(10))
        .landed()
        .await
        .is_ok();
    cx.told(
        &format!("instance {}", a.label),
        Tone::Fault,
        format!(
            "instance {} killed: {}; {}",
            a.label,
            k.how,
            if gone {
                format!("fake-hermes saw the held {what}'s connection close")
            } else {
                format!("the held {what}'s connection did not close within 10 s")
            }
        ),
    );
    if !gone {
        return Err((
            HarnessCause::Undecided,
            "the kill was not confirmed at fake-hermes".into(),
        ));
    }
    release(cx, hold, what).await
}

async fn release(cx: &mut Ctx<'_>, hold: &str, what: &str) -> Result<(), (HarnessCause, String)> {
    let n = holds::hold(cx.hermes, hold, Duration::from_secs(10))
        .release(provider_model::holds::ReleaseAction::Proceed)
        .await
        .map_err(|e| (HarnessCause::Undecided, e.to_string()))?;
    cx.told(
        HERMES,
        Tone::Fault,
        format!("fake-hermes goes on with the held {what} ({n} released)"),
    );
    Ok(())
}

/// Watches the action's status on the instance started last until it is final (or the
/// deadline), then through the settle time.
pub(super) async fn watch(
    cx: &mut Ctx<'_>,
    live: &mut [Instance],
    vars: &Vars,
    until: Option<Instant>,
) -> Result<(Vec<drive::Observed>, Vec<RunsThen>), (HarnessCause, String)> {
    let status = cx.d.file.drive.status.clone();
    let deadline = Instant::now() + Duration::from_millis(cx.d.file.drive.deadline_ms);
    let deadline = until.map_or(deadline, |u| u.min(deadline));
    let settle = Duration::from_millis(cx.d.file.drive.settle_ms);
    let mut seen: Vec<drive::Observed> = Vec::new();
    let mut then: Vec<RunsThen> = Vec::new();
    let mut final_at: Option<Instant> = None;
    loop {
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
        let o = drive::status(&cx.reads, &i.base, &status, vars)
            .await
            .map_err(|e| (HarnessCause::Unreachable, e.to_string()))?;
        // What fake-hermes says of the action's runs, read right after the label.
        let ledger = cx.tell_runs();
        if seen.last() != Some(&o) {
            let is_final = o.outcome.is_final();
            cx.told(
                LABELS,
                if is_final { Tone::Settled } else { Tone::Plain },
                format!(
                    "the connector reports {:?} ({}) for action {}",
                    o.label,
                    o.outcome.label(),
                    vars.occurrence
                ),
            );
            if is_final {
                then.push(RunsThen(
                    ledger
                        .runs
                        .iter()
                        .filter(|r| owner_of(cx.d, r).as_deref() == Some(&vars.occurrence))
                        .map(|r| (r.run_id.clone(), ledger.terminal.get(&r.run_id).cloned()))
                        .collect(),
                ));
            }
            seen.push(o.clone());
        }
        if o.outcome.is_final() && final_at.is_none() {
            final_at = Some(Instant::now());
        }
        let over = match until {
            // A watch with its own end goes on to it, whatever the labels say.
            Some(u) => Instant::now() > u,
            None => {
                final_at.is_some_and(|t| t.elapsed() >= settle)
                    || (final_at.is_none() && Instant::now() > deadline)
            }
        };
        if over {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok((seen, then))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A broken stream's run ends either way (the coin), each a script fake-hermes accepts, and
    /// so does every other case's script.
    #[test]
    fn every_case_script_is_valid_and_the_broken_stream_ends_either_way() {
        for fails in [true, false] {
            let s = stream_script(fails);
            assert!(
                provider_model::hermes::script::validate(&s).is_empty(),
                "{s}"
            );
            let last = s["steps"].as_array().and_then(|a| a.last()).cloned();
            let kind = last.as_ref().and_then(|l| l["kind"].as_str());
            assert_eq!(kind, Some(if fails { "fail" } else { "message" }));
        }
        for k in HermesKind::ALL {
            let s = k.script(false);
            assert!(
                provider_model::hermes::script::validate(&s).is_empty(),
                "{k}: {s}"
            );
        }
    }
}
