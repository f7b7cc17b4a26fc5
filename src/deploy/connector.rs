//! Judging a running Hermes connector (`provider: hermes`): seed 000's "verify an integration"
//! list as deployment cases. aocheck starts the connector as for a payment service, points it at
//! fake-hermes (`{hermes.url}`, `{hermes.key}`; every run lasts 1.5 s), submits an action
//! through the connector's own API and lands a fault ([`HermesKind`]): its `POST /v1/runs` held
//! and its instance killed, the start's reply lost, a 5xx after the run started, the same action
//! again while the start is held, Hermes restarting and forgetting the run, the same action id
//! with another objective. It watches the action's status and judges by fake-hermes' ledger
//! (`check::connector`): at most one run per action, a changed input refused, and a final status
//! only from the provider's own record of the run.
//!
//! Not yet here (D80): an approval resumed after a restart, a cancellation racing a completion,
//! a broken event stream, and `deploy explore` over these faults.

use super::drive::{self, Vars};
use super::file::Loaded;
use super::schedule::Ran;
use super::service::{self, Env, Instance};
use super::{LOGS, Providers, WORK};
use crate::aoc::requirement::Req;
use crate::check::connector::RunsThen;
use crate::check::deploy::{Ambiguity, Reported, Shown};
use crate::providers::holds;
use crate::report::model::{CaseReport, FaultReport, HarnessCause};
use crate::report::story::{Beat, Tone};
use provider_model::hermes::faults::{Fault, Route, Rule};
use provider_model::hermes::ledger::{Ledger, RunStarted};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::{Duration, Instant};

crate::vocab::words!(
    /// The faults a connector's start meets at fake-hermes.
    HermesKind {
        /// The instance is killed while fake-hermes holds its `POST /v1/runs`; the run then
        /// starts, and the instance is started again on the same store.
        CrashAtHeldStart = "crash_at_held_start",
        /// The run starts and the connection is closed with no reply.
        LostStart = "lost_start",
        /// The run starts and the start is answered 500.
        StartErrorAfterCommit = "start_error_after_commit",
        /// The same action submitted again while its start is held.
        ReplayWhileHeld = "replay_while_held",
        /// Hermes restarts right after the run starts: the connector's next request (its event
        /// stream or its status read) finds the run forgotten (404); the ledger keeps it.
        ForgetWhilePolling = "forget_while_polling",
        /// The same action id submitted again, settled, with another objective (a collision).
        ChangedInput = "changed_input",
    }
);

/// A deployment case of a connector.
#[derive(Debug)]
pub struct ConnectorCase {
    pub id: &'static str,
    pub title: &'static str,
    pub kind: HermesKind,
    pub requirements: &'static [Req],
}

pub const CASES: [ConnectorCase; 6] = [
    ConnectorCase {
        id: "CONNECTOR-001",
        title: "The instance is killed while Hermes holds its run start; Hermes then starts the run",
        kind: HermesKind::CrashAtHeldStart,
        requirements: &[Req::R010, Req::R002, Req::R011, Req::R009],
    },
    ConnectorCase {
        id: "CONNECTOR-002",
        title: "Hermes starts the run and the start's reply is lost (connection closed)",
        kind: HermesKind::LostStart,
        requirements: &[Req::R010, Req::R011, Req::R009],
    },
    ConnectorCase {
        id: "CONNECTOR-003",
        title: "Hermes starts the run and answers the start 500",
        kind: HermesKind::StartErrorAfterCommit,
        requirements: &[Req::R010, Req::R011, Req::R009],
    },
    ConnectorCase {
        id: "CONNECTOR-004",
        title: "The same action is submitted again while its start is held at Hermes",
        kind: HermesKind::ReplayWhileHeld,
        requirements: &[Req::R010, Req::R002, Req::R011],
    },
    ConnectorCase {
        id: "CONNECTOR-005",
        title: "Hermes restarts and forgets the run while the connector follows it",
        kind: HermesKind::ForgetWhilePolling,
        requirements: &[Req::R010, Req::R011],
    },
    ConnectorCase {
        id: "CONNECTOR-006",
        title: "The same action id is submitted again with another objective",
        kind: HermesKind::ChangedInput,
        requirements: &[Req::R010, Req::R002, Req::R011],
    },
];

impl HermesKind {
    /// The rule at fake-hermes (none where the harness itself is the fault).
    fn rule(self, hold: &str) -> Option<Rule> {
        let (route, fault) = match self {
            HermesKind::CrashAtHeldStart | HermesKind::ReplayWhileHeld => (
                Route::Start,
                Fault::Hold {
                    name: hold.to_string(),
                },
            ),
            HermesKind::LostStart => (Route::Start, Fault::CommitThenDrop),
            HermesKind::StartErrorAfterCommit => (Route::Start, Fault::CommitThen { status: 500 }),
            // The connector's next request after the start, its event stream or its status
            // read, finds Hermes restarted.
            HermesKind::ForgetWhilePolling => (Route::Any, Fault::Forget),
            HermesKind::ChangedInput => return None,
        };
        Some(Rule {
            route,
            nth: if route == Route::Any { 2 } else { 1 },
            times: 1,
            session_id: None,
            fault,
        })
    }
    /// What the start's answer left the connector knowing: a killed instance never read its
    /// reply.
    fn ambiguity(self) -> Ambiguity {
        match self {
            HermesKind::CrashAtHeldStart | HermesKind::LostStart => Ambiguity::Dropped,
            HermesKind::StartErrorAfterCommit => Ambiguity::ErrorAfterCommit,
            HermesKind::ReplayWhileHeld
            | HermesKind::ForgetWhilePolling
            | HermesKind::ChangedInput => Ambiguity::None,
        }
    }
}

/// The action a run belongs to, by the declared rule (a template around `{occurrence}`).
pub fn owner_of(d: &Loaded, r: &RunStarted) -> Option<String> {
    let a = d.file.attribution.as_ref()?;
    let template = a.session_id.as_ref()?;
    let value = Some(r.session_id.as_str());
    let (pre, post) = template.split_once("{occurrence}")?;
    let o = value?.strip_prefix(pre)?.strip_suffix(post)?;
    (!o.is_empty()).then(|| o.to_string())
}

/// One case's run.
struct Ctx<'a> {
    d: &'a Loaded,
    hermes: &'a crate::providers::Hermes,
    client: reqwest::Client,
    env: Env,
    logs: std::path::PathBuf,
    started: Instant,
    steps: Vec<String>,
    beats: Vec<Beat>,
    /// The runs already told on the timeline.
    runs_told: usize,
    /// The HTTP status the connector answered a changed objective under the same id with.
    changed_answer: Option<u16>,
    /// The HTTP status the connector answered the replay of a held action with.
    replay_answer: Option<u16>,
}

static RUN_SCRIPT: std::sync::LazyLock<serde_json::Value> = std::sync::LazyLock::new(|| {
    serde_json::json!({"name": "aocheck-deploy", "steps": [
        {"id": "think", "kind": "sleep", "ms": 1500},
        {"id": "reply", "kind": "message", "text": "Done. I completed the objective.", "after": ["think"]}
    ]})
});

const CLIENT: &str = "aocheck (the client)";
const HERMES: &str = "fake-hermes";
const LABELS: &str = "the connector's status route";

impl Ctx<'_> {
    fn told(&mut self, actor: &str, tone: Tone, s: impl Into<String>) {
        let s = s.into();
        let ms = self.started.elapsed().as_millis() as u64;
        self.beats.push(Beat {
            ms,
            actor: actor.to_string(),
            tone,
            text: s.clone(),
        });
        self.steps.push(format!("{ms:>6} ms  {s}"));
    }
    async fn start(&mut self, label: &str) -> Result<Instance, (HarnessCause, String)> {
        let i = service::start(self.d, &self.env, label, &self.logs, &self.client)
            .await
            .map_err(|e| (HarnessCause::Unreachable, e))?;
        self.told(
            &format!("instance {label}"),
            Tone::Plain,
            format!("instance {label} started on port {} and ready", i.port),
        );
        Ok(i)
    }
    /// Every run fake-hermes started since the last look, on the timeline.
    fn tell_runs(&mut self) -> Ledger {
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
        l
    }
}

type Sent = tokio::task::JoinHandle<Result<u16, drive::DriveError>>;

fn send(cx: &Ctx<'_>, base: &str, vars: &Vars) -> Sent {
    let (client, base, t, vars) = (
        cx.client.clone(),
        base.to_string(),
        cx.d.file.drive.submit.clone(),
        vars.clone(),
    );
    tokio::spawn(async move { drive::submit(&client, &base, &t, &vars).await })
}

async fn answer(s: Sent, wait: Duration) -> String {
    answered(s, wait).await.1
}

/// The submission's HTTP status, if it got one (inside `accept` or not), and its words.
async fn answered(s: Sent, wait: Duration) -> (Option<u16>, String) {
    match tokio::time::timeout(wait, s).await {
        Err(_) => (None, format!("no answer within {} s", wait.as_secs())),
        Ok(Err(e)) => (None, format!("lost ({e})")),
        Ok(Ok(Ok(code))) => (Some(code), code.to_string()),
        Ok(Ok(Err(drive::DriveError::Status { status, .. }))) => (Some(status), status.to_string()),
        Ok(Ok(Err(e))) => (None, e.to_string()),
    }
}

/// Runs one connector case and builds its report (with the clients seen: none at this
/// boundary, Hermes names no SDK).
pub async fn run_case(
    d: &Loaded,
    c: &ConnectorCase,
    p: &Providers,
    out: &Path,
    mut report: CaseReport,
) -> CaseReport {
    let Some((hermes, key)) = p.hermes.as_ref() else {
        return report.harness_error("fake-hermes is not running".into(), Instant::now());
    };
    if let Some(why) = cannot_take(d, c) {
        report.verdict = crate::report::model::Verdict::Unsupported;
        report.unsupported = Some(why);
        return report;
    }
    let work = out.join(WORK).join(c.id);
    let logs = out.join(LOGS).join(c.id);
    for dir in [&work, &logs] {
        if let Err(e) = std::fs::create_dir_all(dir) {
            return report.harness_error(format!("{}: {e}", dir.display()), Instant::now());
        }
    }
    let client = match reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
    {
        Ok(c) => c,
        Err(e) => return report.harness_error(format!("http client: {e}"), Instant::now()),
    };
    hermes.reset();
    // Each run takes 1.5 s, several status reads of the watch: a status the connector shows
    // before Hermes ended the run is seen as such, never confirmed by luck.
    if let Err(e) = hermes.set_scripts(Vec::new(), Some(RUN_SCRIPT.clone())) {
        return report.harness_error(
            format!("fake-hermes script: {}", e.join("; ")),
            Instant::now(),
        );
    }
    let mut cx = Ctx {
        d,
        hermes,
        client,
        env: Env {
            payments_url: p.payments_url.clone(),
            payments_key: super::ACCOUNT_KEY.into(),
            webhook_secret: p.webhook_secret.clone(),
            hermes_url: p.hermes_url.clone(),
            hermes_key: Some(key.clone()),
            store_dir: std::fs::canonicalize(&work).unwrap_or(work),
        },
        logs: logs.clone(),
        started: Instant::now(),
        steps: Vec::new(),
        beats: Vec::new(),
        runs_told: 0,
        changed_answer: None,
        replay_answer: None,
    };
    let occurrence = format!("{}-a1", c.id.to_lowercase());
    let vars = Vars {
        occurrence: occurrence.clone(),
        amount: 0,
        currency: String::new(),
        objective: format!("Summarise the state of deployment {occurrence}"),
    };
    let mut live: Vec<Instance> = Vec::new();
    let result = drive(&mut cx, c, &vars, &mut live).await;
    for i in live.drain(..) {
        i.stop().await;
    }
    let ledger = cx.tell_runs();
    let hold = format!("{}-start", c.id.to_lowercase());
    let mine: Vec<&RunStarted> = ledger
        .runs
        .iter()
        .filter(|r| owner_of(d, r).as_deref() == Some(occurrence.as_str()))
        .collect();
    // The fault acted where its rule fired and the action has a run it made; a changed input
    // acted once the second submission went out.
    let (what, fired) = match c.kind.rule(&hold) {
        Some(rule) => (
            format!(
                "action {occurrence}: its {} meets {} ({})",
                if rule.route == Route::Start {
                    "run start"
                } else {
                    "first request after the start"
                },
                c.kind.name(),
                rule.fault
            ),
            hermes.rules().iter().any(|r| r.fired > 0)
                && !mine.is_empty()
                // A forgotten run is one that had not ended: one the restart found already
                // ended exercised nothing.
                && (c.kind != HermesKind::ForgetWhilePolling
                    || mine.iter().any(|r| !ledger.terminal.contains_key(&r.run_id)))
                // A replay that never reached the connector replayed nothing.
                && (c.kind != HermesKind::ReplayWhileHeld || cx.replay_answer.is_some()),
        ),
        None => (
            format!("action {occurrence}: submitted again, settled, with another objective"),
            cx.changed_answer.is_some(),
        ),
    };
    let mut ran = Ran {
        steps: std::mem::take(&mut cx.steps),
        faults: vec![FaultReport { what, fired }],
        millis: cx.started.elapsed().as_millis() as u64,
        beats: std::mem::take(&mut cx.beats),
        ..Ran::default()
    };
    if let Some(why) = crate::check::credentials::control_reached(&hermes.control_attempts(), None)
    {
        ran.undecided = Some((HarnessCause::Undecided, why));
    }
    match result {
        Err(e) => ran.undecided = Some(e),
        Ok((seen, then)) => {
            let o = seen.last().cloned();
            let reported = Reported {
                occurrence: occurrence.clone(),
                outcome: o
                    .as_ref()
                    .filter(|o| o.outcome.is_final())
                    .map(|o| o.outcome.label()),
                label: o.as_ref().map_or("(none)".into(), |o| o.label.clone()),
                finals: seen
                    .iter()
                    .filter(|o| o.outcome.is_final())
                    .map(|o| Shown {
                        label: o.label.clone(),
                        outcome: o.outcome.label(),
                        effects_then: 0,
                    })
                    .collect(),
                ambiguity: c.kind.ambiguity(),
                amount: 0,
                currency: String::new(),
            };
            let owner = |r: &RunStarted| owner_of(d, r);
            let owner_ref: Option<crate::check::connector::RunOwner<'_>> =
                d.file.attribution.as_ref().map(|_| &owner as _);
            ran.findings = crate::check::connector::judge(
                &ledger,
                owner_ref,
                std::slice::from_ref(&reported),
                &[then],
                &mut ran.facts,
            );
            // A changed input under the same id is refused (AOC-REQ-010: "requests that change
            // … exact request … are refused as conflicting"; seed 000: rejected): an answer
            // of 2xx accepted it, whatever the connector then did with it.
            if let Some(code) = cx.changed_answer {
                ran.findings.extend(crate::check::connector::changed_input(
                    &occurrence,
                    code,
                    &mut ran.facts,
                ));
            }
            ran.entries = vec![mine.len() as u32];
            ran.reported = vec![reported];
            ran.observed = vec![o];
        }
    }
    let mut report = super::case_report(d, report, c.requirements, ran);
    report.logs = super::logs_under(out, &Path::new(LOGS).join(c.id));
    report
}

/// The action submitted, its fault landed, its status watched: every label seen, and for each
/// final one what fake-hermes had said of the action's runs then.
async fn drive(
    cx: &mut Ctx<'_>,
    c: &ConnectorCase,
    vars: &Vars,
    live: &mut Vec<Instance>,
) -> Result<(Vec<drive::Observed>, Vec<RunsThen>), (HarnessCause, String)> {
    let unreachable = |e: String| (HarnessCause::Unreachable, e);
    let hold = format!("{}-start", c.id.to_lowercase());
    if let Some(rule) = c.kind.rule(&hold) {
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
    match c.kind {
        HermesKind::CrashAtHeldStart => {
            parked(cx, &hold).await?;
            let Some(mut a) = live.pop() else {
                return Err(unreachable("no instance is running".into()));
            };
            let k = a.kill().await.map_err(unreachable)?;
            let gone = holds::hold(cx.hermes, &hold, Duration::from_secs(10))
                .landed()
                .await
                .is_ok();
            cx.told(
                "instance a",
                Tone::Fault,
                format!(
                    "instance a killed: {}; {}",
                    k.how,
                    if gone {
                        "fake-hermes saw the held start's connection close"
                    } else {
                        "the held start's connection did not close within 10 s"
                    }
                ),
            );
            if !gone {
                return Err((
                    HarnessCause::Undecided,
                    "the kill was not confirmed at fake-hermes".into(),
                ));
            }
            release(cx, &hold).await?;
            drop(a);
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
        HermesKind::ReplayWhileHeld => {
            parked(cx, &hold).await?;
            let again = send(cx, &base, vars);
            tokio::time::sleep(Duration::from_millis(300)).await;
            cx.told(
                CLIENT,
                Tone::Fault,
                "the same action submitted again while its start is held",
            );
            release(cx, &hold).await?;
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
        HermesKind::ChangedInput => {
            let said = answer(first, Duration::from_secs(60)).await;
            cx.told(
                CLIENT,
                Tone::Plain,
                format!("the submission answered: {said}"),
            );
            // Settled first, then the same id with another objective.
            let (seen, then) = watch(cx, live, vars).await?;
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
            let (more, more_then) = watch(cx, live, vars).await?;
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
        HermesKind::ForgetWhilePolling
        | HermesKind::LostStart
        | HermesKind::StartErrorAfterCommit => {
            let said = answer(first, Duration::from_secs(60)).await;
            cx.told(
                CLIENT,
                Tone::Plain,
                format!("the submission answered: {said}"),
            );
        }
    }
    watch(cx, live, vars).await
}

async fn parked(cx: &mut Ctx<'_>, hold: &str) -> Result<(), (HarnessCause, String)> {
    match holds::hold(cx.hermes, hold, Duration::from_secs(30))
        .parked()
        .await
    {
        Ok(()) => {
            cx.told(
                HERMES,
                Tone::Fault,
                "the connector's POST /v1/runs is held at fake-hermes",
            );
            Ok(())
        }
        Err(_) => Err((
            HarnessCause::Undecided,
            "fake-hermes held no POST /v1/runs within 30 s of the action: none arrived, or it was refused before the fault plan (a wrong {hermes.key}, a bad body); the connector's log says which"
                .into(),
        )),
    }
}

async fn release(cx: &mut Ctx<'_>, hold: &str) -> Result<(), (HarnessCause, String)> {
    let n = holds::hold(cx.hermes, hold, Duration::from_secs(10))
        .release(provider_model::holds::ReleaseAction::Proceed)
        .await
        .map_err(|e| (HarnessCause::Undecided, e.to_string()))?;
    cx.told(
        HERMES,
        Tone::Fault,
        format!("fake-hermes goes on with the held start ({n} released)"),
    );
    Ok(())
}

/// Watches the action's status on the instance started last until it is final (or the
/// deadline), then through the settle time.
async fn watch(
    cx: &mut Ctx<'_>,
    live: &mut [Instance],
    vars: &Vars,
) -> Result<(Vec<drive::Observed>, Vec<RunsThen>), (HarnessCause, String)> {
    let status = cx.d.file.drive.status.clone();
    let deadline = Instant::now() + Duration::from_millis(cx.d.file.drive.deadline_ms);
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
        let o = drive::status(&cx.client, &i.base, &status, vars)
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
        if final_at.is_some_and(|t| t.elapsed() >= settle)
            || (final_at.is_none() && Instant::now() > deadline)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok((seen, then))
}

/// Why this deploy file cannot take a connector case (`None`: it can): a changed input needs
/// the submit template to carry `{objective}`.
pub fn cannot_take(d: &Loaded, c: &ConnectorCase) -> Option<String> {
    let t = &d.file.drive.submit;
    let carries = t.path.contains("{objective}")
        || t.body
            .as_ref()
            .is_some_and(|b| b.to_string().contains("{objective}"));
    (c.kind == HermesKind::ChangedInput && !carries).then(|| {
        "drive.submit holds no {objective}: the same action cannot be submitted with another objective".into()
    })
}
