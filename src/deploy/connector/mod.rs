//! Judging a running Hermes connector (`provider: hermes`): seed 000's "verify an integration"
//! list as deployment cases. aocheck starts the connector as for a payment service, points it at
//! fake-hermes (`{hermes.url}`, `{hermes.key}`; every run lasts 1.5 s), submits an action
//! through the connector's own API and lands a fault ([`HermesKind`]): its `POST /v1/runs` held
//! and its instance killed, the start's reply lost, a 5xx after the run started, the same action
//! again while the start is held, Hermes restarting and forgetting the run, the same action id
//! with another objective, a resume command's decision held while its instance is killed and
//! the command replayed after the restart, a cancellation the run's completion overtakes, a
//! broken event stream. It watches the action's status and judges by fake-hermes' ledger
//! (`check::connector`): at most one run per action, one decision per resume command, a
//! changed input refused, and a final status only from the provider's own record of the run.
//! `steps` drives one action through its fault; `explore` draws schedules of such actions.

pub mod explore;
mod steps;

use super::actions::ActionRan;
use super::drive::Vars;
use super::file::Loaded;
use super::schedule::Ran;
use super::service::Instance;
use super::{LOGS, Providers, WORK};
use crate::aoc::requirement::Req;
use crate::check::deploy::Ambiguity;
use crate::report::model::{CaseReport, FaultReport, HarnessCause};
use provider_model::hermes::faults::{Fault, Route, Rule};
use provider_model::hermes::ledger::RunStarted;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::{Duration, Instant};
use steps::{Ctx, WAIT_FOR_NOBODY, drive};

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
        /// The run asks for an approval; a resume command's `POST /v1/runs/{id}/approval` is
        /// held, the instance killed, the decision then applied (the run asks a second
        /// approval), the instance restarted and the same command replayed exactly.
        ResumeAfterRestart = "resume_after_restart",
        /// The action is cancelled while its run is live; Hermes answers the stop `stopping`
        /// and the run completes first (`completed` stays authoritative).
        CancelRacesCompletion = "cancel_races_completion",
        /// The run's event stream closes after its first frame, with no terminal event.
        BrokenStream = "broken_stream",
    }
);

/// A deployment case of a connector.
#[derive(Debug)]
pub struct ConnectorCase {
    pub id: &'static str,
    pub title: &'static str,
    pub kind: HermesKind,
    pub requirements: &'static [Req],
    /// Seed 000's "verify an integration" item this case checks at the deployment, and the
    /// HERMES-VERIFY case that checks it through the process protocol (empty: none has it).
    pub verify: &'static str,
}

pub const CASES: [ConnectorCase; 9] = [
    ConnectorCase {
        id: "CONNECTOR-001",
        title: "The instance is killed while Hermes holds its run start; Hermes then starts the run",
        kind: HermesKind::CrashAtHeldStart,
        requirements: &[Req::R010, Req::R002, Req::R011, Req::R009],
        verify: "seed 000 verify item 4; HERMES-VERIFY-04",
    },
    ConnectorCase {
        id: "CONNECTOR-002",
        title: "Hermes starts the run and the start's reply is lost (connection closed)",
        kind: HermesKind::LostStart,
        requirements: &[Req::R010, Req::R011, Req::R009],
        verify: "seed 000 verify item 4; HERMES-VERIFY-04",
    },
    ConnectorCase {
        id: "CONNECTOR-003",
        title: "Hermes starts the run and answers the start 500",
        kind: HermesKind::StartErrorAfterCommit,
        requirements: &[Req::R010, Req::R011, Req::R009],
        verify: "seed 000 verify item 4; HERMES-VERIFY-04",
    },
    ConnectorCase {
        id: "CONNECTOR-004",
        title: "The same action is submitted again while its start is held at Hermes",
        kind: HermesKind::ReplayWhileHeld,
        requirements: &[Req::R010, Req::R002, Req::R011],
        verify: "seed 000 verify item 2; HERMES-VERIFY-02",
    },
    ConnectorCase {
        id: "CONNECTOR-005",
        title: "Hermes restarts and forgets the run while the connector follows it",
        kind: HermesKind::ForgetWhilePolling,
        requirements: &[Req::R010, Req::R011],
        verify: "",
    },
    ConnectorCase {
        id: "CONNECTOR-006",
        title: "The same action id is submitted again with another objective",
        kind: HermesKind::ChangedInput,
        requirements: &[Req::R010, Req::R002, Req::R011],
        verify: "seed 000 verify item 3; HERMES-VERIFY-03",
    },
    ConnectorCase {
        id: "CONNECTOR-007",
        title: "An approval is resumed, the instance killed while Hermes holds the decision, and the same resume replayed after the restart",
        kind: HermesKind::ResumeAfterRestart,
        requirements: &[Req::R010],
        verify: "seed 000 verify item 5; HERMES-VERIFY-05",
    },
    ConnectorCase {
        id: "CONNECTOR-008",
        title: "The action is cancelled and its run completes before the stop takes effect",
        kind: HermesKind::CancelRacesCompletion,
        requirements: &[Req::R011, Req::R010],
        verify: "seed 000 verify item 6; HERMES-VERIFY-06",
    },
    ConnectorCase {
        id: "CONNECTOR-009",
        title: "The run's event stream breaks after its first frame",
        kind: HermesKind::BrokenStream,
        requirements: &[Req::R010, Req::R011],
        verify: "seed 000's event stream with polling fallback; HERMES-VERIFY-SSE-fallback",
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
            HermesKind::ResumeAfterRestart => (
                Route::Approval,
                Fault::Hold {
                    name: hold.to_string(),
                },
            ),
            HermesKind::CancelRacesCompletion => (Route::Stop, Fault::CompleteRacesStop),
            HermesKind::BrokenStream => (Route::Events, Fault::DropStream { after: 1 }),
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
            | HermesKind::ChangedInput
            | HermesKind::ResumeAfterRestart
            | HermesKind::CancelRacesCompletion
            | HermesKind::BrokenStream => Ambiguity::None,
        }
    }
    /// The hold's name at fake-hermes, for an action.
    fn hold(self, occurrence: &str) -> String {
        let what = if self == HermesKind::ResumeAfterRestart {
            "approval"
        } else {
            "start"
        };
        format!("{occurrence}-{what}")
    }
    /// What the rule's route is to the connector, for the fault's description.
    fn meets(self) -> &'static str {
        match self {
            HermesKind::ResumeAfterRestart => "resume's decision",
            HermesKind::CancelRacesCompletion => "stop",
            HermesKind::BrokenStream => "event stream",
            HermesKind::ForgetWhilePolling => "first request after the start",
            _ => "run start",
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

/// Runs one connector case and builds its report.
pub async fn run_case(
    d: &Loaded,
    c: &ConnectorCase,
    p: &Providers,
    out: &Path,
    mut report: CaseReport,
) -> CaseReport {
    if let Some(why) = cannot_take(d, c.kind) {
        report.verdict = crate::report::model::Verdict::Unsupported;
        report.unsupported = Some(why);
        return report;
    }
    // An AIP Action id (`act_…`, as seed 000's resume names its source): a connector may
    // refuse anything else.
    let occurrence = format!("act_{}a1", c.id.to_lowercase().replace('-', ""));
    let a = run_action(
        d,
        Some(c.kind),
        &occurrence,
        p,
        &out.join(WORK).join(c.id),
        &out.join(LOGS).join(c.id),
    )
    .await;
    let mut report = super::case_report(d, report, c.requirements, a.ran);
    if let Some(why) = a.beyond_reach {
        report.verdict = crate::report::model::Verdict::Unsupported;
        report.harness = None;
        report.harness_cause = None;
        report.unsupported = Some(why);
    }
    report.logs = super::logs_under(out, &Path::new(LOGS).join(c.id));
    report
}

/// One action submitted through the connector's API with `kind`'s fault (or none) on a fresh
/// fake-hermes ledger, its store under `work` and its instances' logs under `logs`, judged.
pub async fn run_action(
    d: &Loaded,
    kind: Option<HermesKind>,
    occurrence: &str,
    p: &Providers,
    work: &Path,
    logs: &Path,
) -> ActionRan {
    let started = Instant::now();
    let undecided = |cause: HarnessCause, why: String| ActionRan {
        ran: Ran {
            undecided: Some((cause, why)),
            millis: started.elapsed().as_millis() as u64,
            ..Ran::default()
        },
        beyond_reach: None,
    };
    let Some((hermes, _)) = p.hermes.as_ref() else {
        return undecided(
            HarnessCause::Unreachable,
            "fake-hermes is not running".into(),
        );
    };
    for dir in [work, logs] {
        if let Err(e) = std::fs::create_dir_all(dir) {
            return undecided(HarnessCause::Unreachable, format!("{}: {e}", dir.display()));
        }
    }
    let clients = [75, 10].map(|s| {
        reqwest::Client::builder()
            .timeout(Duration::from_secs(s))
            .build()
    });
    let [Ok(client), Ok(reads)] = clients else {
        return undecided(HarnessCause::Unreachable, "http client".into());
    };
    hermes.reset();
    // Only this action's requests to the control routes count (the log spans the run).
    let control_before = hermes.control_attempts().len();
    // Each run takes 1.5 s, several status reads of the watch: a status the connector shows
    // before Hermes ended the run is seen as such, never confirmed by luck.
    // A coin per action (the process's own random hasher keys): nothing a connector could know.
    let draw = {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write(occurrence.as_bytes());
        h.finish() % 2 == 1
    };
    let script = kind.map_or(steps::RUN_SCRIPT.clone(), |k| k.script(draw));
    if let Err(e) = hermes.set_scripts(Vec::new(), Some(script)) {
        return undecided(
            HarnessCause::Undecided,
            format!("fake-hermes script: {}", e.join("; ")),
        );
    }
    let mut cx = Ctx {
        d,
        hermes,
        client,
        reads,
        env: p.env(work),
        logs: logs.to_path_buf(),
        t: crate::report::story::Telling::at(started),
        runs_told: 0,
        changed_answer: None,
        replay_answer: None,
        decisions_told: 0,
        stops_told: 0,
        resume_replay: None,
        cancel_answer: None,
    };
    let vars = Vars {
        occurrence: occurrence.to_string(),
        objective: format!("Summarise the state of deployment {occurrence}"),
        ..Vars::default()
    };
    let mut live: Vec<Instance> = Vec::new();
    let result = drive(&mut cx, kind, &vars, &mut live).await;
    for i in live.drain(..) {
        i.stop().await;
    }
    let ledger = cx.tell_runs();
    let mine: Vec<&RunStarted> = ledger
        .runs
        .iter()
        .filter(|r| owner_of(d, r).as_deref() == Some(occurrence))
        .collect();
    let rule_fired = hermes.rules().iter().any(|r| r.fired > 0);
    // The fault acted where its rule fired and the action has a run it made; a changed input
    // acted once the second submission went out.
    let fault = kind.map(|k| match k.rule(&k.hold(occurrence)) {
        Some(rule) => FaultReport {
            what: format!(
                "action {occurrence}: its {} meets {} ({})",
                k.meets(),
                k.name(),
                rule.fault
            ),
            fired: rule_fired
                && !mine.is_empty()
                && match k {
                    // A forgotten run is one that had not ended: one the restart found already
                    // ended exercised nothing.
                    HermesKind::ForgetWhilePolling => mine
                        .iter()
                        .any(|r| !ledger.terminal.contains_key(&r.run_id)),
                    // A replay that never reached the connector replayed nothing.
                    HermesKind::ReplayWhileHeld => cx.replay_answer.is_some(),
                    // The held decision was applied, and its exact replay reached the
                    // restarted connector.
                    HermesKind::ResumeAfterRestart => {
                        cx.resume_replay.is_some()
                            && ledger
                                .approvals
                                .iter()
                                .any(|a| mine.iter().any(|r| r.run_id == a.run_id))
                    }
                    // The stop reached a run that had not ended, and the run completed over
                    // it: a stop that came after the run ended raced nothing.
                    HermesKind::CancelRacesCompletion => {
                        cx.cancel_answer.is_some()
                            && ledger.stops.iter().any(|st| {
                                mine.iter().any(|r| r.run_id == st.run_id)
                                    && st.fault.as_deref() == Some("complete_races_stop")
                            })
                    }
                    _ => true,
                },
        },
        None => FaultReport {
            what: format!("action {occurrence}: submitted again, settled, with another objective"),
            fired: cx.changed_answer.is_some(),
        },
    });
    let mut ran = Ran {
        watched_ms: (kind == Some(HermesKind::ResumeAfterRestart))
            .then_some(WAIT_FOR_NOBODY.as_millis() as u64),
        steps: std::mem::take(&mut cx.t.steps),
        faults: fault.into_iter().collect(),
        millis: cx.t.ms(),
        beats: std::mem::take(&mut cx.t.beats),
        ..Ran::default()
    };
    let reached = hermes.control_attempts();
    if let Some(why) = crate::check::credentials::control_reached(&[(
        "fake-hermes",
        reached.get(control_before..).unwrap_or(&[]),
    )]) {
        ran.undecided = Some((HarnessCause::Undecided, why));
    }
    // The ledger is judged even where the watch could not finish (an instance that exited
    // unasked, a status route gone): a second run or decision is a failure whatever else
    // happened; only a case with nothing failed is undecided.
    let (result, failed_watch) = match result {
        Ok(r) => (r, None),
        Err(e) => ((Vec::new(), Vec::new()), Some(e)),
    };
    let (seen, then) = result;
    let o = seen.last().cloned();
    let reported = super::drive::reported(
        occurrence,
        seen.iter().map(|o| (o, 0)),
        kind.map_or(Ambiguity::None, HermesKind::ambiguity),
        0,
        "",
    );
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
            occurrence,
            code,
            &mut ran.facts,
        ));
    }
    // One decision per resume command (seed 000: "exact resume replay sends one
    // provider command"): the case sends one command, twice.
    if kind == Some(HermesKind::ResumeAfterRestart) {
        let applied: Vec<&provider_model::hermes::ledger::ApprovalApplied> = ledger
            .approvals
            .iter()
            .filter(|a| mine.iter().any(|r| r.run_id == a.run_id))
            .collect();
        ran.findings
            .extend(crate::check::connector::one_decision_per_command(
                occurrence,
                &applied,
                1,
                &mut ran.facts,
            ));
    }
    ran.entries = vec![mine.len() as u32];
    ran.reported = vec![reported];
    ran.observed = vec![o];
    if let Some((cause, why)) = failed_watch {
        if ran.findings.is_empty() {
            ran.undecided = Some((cause, why));
        } else {
            ran.steps
                .push(format!("also (it could not have passed): {why}"));
        }
    }
    // A connector that never asked for the event stream follows by polling: a broken stream
    // cannot reach it, which is no defect and no pass.
    let beyond_reach = (kind == Some(HermesKind::BrokenStream)
        && ran.findings.is_empty()
        && ran.undecided.is_none()
        && !mine.is_empty()
        && !rule_fired)
        .then(|| "the connector never asked fake-hermes for the run's event stream (GET /v1/runs/{id}/events): it follows the run by polling, so a broken stream cannot reach it".to_string());
    ActionRan { ran, beyond_reach }
}

/// Why this deploy file cannot take a connector case (`None`: it can): a changed input needs
/// the submit template to carry `{objective}`.
pub fn cannot_take(d: &Loaded, kind: HermesKind) -> Option<String> {
    let carries = d.file.drive.submit.holds("objective");
    match kind {
        HermesKind::ChangedInput if !carries => Some(
            "drive.submit holds no {objective}: the same action cannot be submitted with another objective".into(),
        ),
        HermesKind::ResumeAfterRestart if d.file.drive.resume.is_none() => Some(
            "no drive.resume: the deploy file declares no way to resume an action waiting for an approval".into(),
        ),
        HermesKind::CancelRacesCompletion if d.file.drive.cancel.is_none() => Some(
            "no drive.cancel: the deploy file declares no way to cancel an action".into(),
        ),
        _ => None,
    }
}
