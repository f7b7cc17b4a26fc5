//! A Hermes Workflow case (seed 002; issue 41): one run of a design, driven by the runner under
//! test (the reference in process) over fake-hermes (agent steps are runs under the correlation
//! `workflow:<run_id>:<node_id>`) and the simulated channel (`providers::channel`), killed where
//! the case says (right after a save, in the middle of one, or while a provider holds its request,
//! which then goes on with nobody left to hear of it), resumed and answered. A reader beside the
//! runner reads the run file all the while, as seed 002's canvas polls it.
//!
//! After every step the checkers judge the saved state against both ledgers (`check::workflow`);
//! the final expectations read the last saved state and the ledgers. The report is a case report
//! like any other: failures by requirement, facts, faults and whether each fired, steps.

mod drive;
mod evidence;
mod process;
mod reader;

use super::RunOptions;
use super::events::RunEvent;
use super::verdict::push_finding;
use crate::case::{LoadedCase, OneOrMany, Step, WorkflowKill};
use crate::check::{Facts, Finding};
use crate::providers::channel::{ChannelFault, ChannelRule, FakeChannel};
use crate::report::model::{CaseReport, Failure, HarnessCause};
use crate::workflow::design::{PlanStep, build_run_plan};
use crate::workflow::run::RunState;
use crate::workflow::store::{Home, StoreError};
use process::{Call, Processes};
use std::time::{Duration, Instant};

/// The design's name in the runner's home.
const DESIGN: &str = "case";
/// The longest a drive may take before the step is a harness error.
const DRIVE_DEADLINE: Duration = Duration::from_secs(90);
/// Each wait of a hold's choreography.
const HOLD_WAIT: Duration = Duration::from_secs(30);

/// Which simulator holds requests under a hold name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Site {
    Hermes,
    Channel,
}

/// How one drive of the runner ended.
enum Drove {
    Ran(Box<RunState>),
    /// Stopped by the harness (a save point, or a hold it waited at).
    Killed(String),
    Refused(StoreError),
    /// An answer to a step the run does not wait for, refused.
    NotWaiting(String),
}

/// Who runs the workflow.
enum Runner {
    /// The reference in process (with a deliberate defect in test builds).
    Reference(Option<crate::workflow::WorkflowDefect>),
    /// The implementation, a process per drive.
    Processes(Processes),
}

/// A problem with a step: a requirement it shows violated, or why aocheck could not decide.
enum Problem {
    Failed(Finding),
    Harness(String),
    /// The implementation cannot be judged on this step (it does not list the operation).
    Unsupported(String),
}

struct Case<'a> {
    lc: &'a LoadedCase,
    hermes: crate::providers::Served<crate::providers::Hermes>,
    api_key: String,
    channel: FakeChannel,
    /// Where the channel is served, and its serving task.
    channel_url: String,
    channel_task: tokio::task::JoinHandle<()>,
    home: Home,
    _dir: Option<TempHome>,
    run_id: String,
    plan: Vec<PlanStep>,
    runner: Runner,
    /// The harness damaged the run file: a resume must refuse it, and no look judges it.
    damaged: bool,
    sites: std::collections::BTreeMap<String, Site>,
    facts: Facts,
    /// What the case exercised besides the simulators' fault rules (kills, damage, restarts),
    /// and whether each happened.
    exercised: Vec<(String, bool)>,
    /// What the last drive said it left (read against its saved state at the next look).
    returned: Option<RunState>,
    /// A schedule of the explorer (`RunOptions::explore`).
    explore: bool,
    /// What was found during the step being performed (reported at it, after its own answer).
    found: Vec<Finding>,
    /// The answers the harness gave, by node.
    given: std::collections::BTreeMap<String, serde_json::Value>,
    /// The final expectations as judged.
    finals: Option<crate::check::workflow::WorkflowFinals>,
    /// The whole states the reader read during the step being performed.
    between: Vec<RunState>,
    /// Every look the checkers took, for the evidence.
    looks: Vec<crate::check::workflow::WorkflowLook>,
    design: serde_json::Value,
}

/// The runner's home: a folder of its own, removed at the end of the case.
struct TempHome(std::path::PathBuf);

impl TempHome {
    fn new() -> Result<TempHome, String> {
        let p = std::env::temp_dir().join(format!(
            "aocheck-workflow-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&p).map_err(|e| format!("a home for the runner: {e}"))?;
        Ok(TempHome(p))
    }
}

impl Drop for TempHome {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Case<'_> {
    fn primary(&self) -> crate::aoc::Req {
        super::verdict::primary(&self.lc.case.requirements)
    }

    fn expected(&mut self, msg: String) -> Problem {
        let r = self.primary();
        Problem::Failed(crate::check::workflow::expected(r, msg, &mut self.facts))
    }

    /// What a drive came to, as the step's line, or a problem.
    fn drove(
        &mut self,
        d: Drove,
        status: &Option<OneOrMany>,
        kill: &Option<WorkflowKill>,
    ) -> Result<String, Problem> {
        match d {
            Drove::Ran(st) => {
                if let Some(k) = kill {
                    self.exercised.push((kill_words(k), false));
                }
                let line = crate::check::workflow::status_word(&st);
                let differs = crate::check::workflow::status_differs(status, &st);
                // What the runner says it left is read against what it saved at the next look.
                self.returned = Some(*st);
                if let Some(m) = differs {
                    return Err(self.expected(m));
                }
                Ok(line)
            }
            Drove::Killed(line) => {
                let Some(k) = kill else {
                    return Err(Problem::Harness(format!("{line}, with no kill asked for")));
                };
                self.exercised.push((kill_words(k), true));
                Ok(match k.hold {
                    Some(_) => line,
                    None => format!("{} (killed)", kill_words(k)),
                })
            }
            Drove::Refused(StoreError::Corrupt(m)) if !self.damaged => Err(Problem::Failed(
                crate::check::workflow::state_unreadable(&m, &mut self.facts),
            )),
            // A run that never saved a whole state does not exist: refusing to resume it as
            // missing is the truth.
            Drove::Refused(StoreError::Missing(m))
                if self.last().is_none() && !self.damaged && !self.effects_exist() =>
            {
                Ok(format!("refused: {m} (the run never saved a whole state)"))
            }
            Drove::Refused(e) => Err(self.expected(format!("the runner refused to go on: {e}"))),
            Drove::NotWaiting(m) => Err(Problem::Harness(format!(
                "the runner answered `not_waiting` to a drive that answered nothing: {m}"
            ))),
        }
    }

    async fn step(&mut self, s: &Step) -> Result<String, Problem> {
        match s {
            Step::WorkflowStart { kill, status, .. } => {
                let d = self.drive(kill, Call::Start).await?;
                self.drove(d, status, kill)
            }
            Step::WorkflowResume {
                kill,
                status,
                error,
            } => {
                let runs = self.hermes.handle.ledger().runs.len();
                self.restarted();
                let d = self.drive(kill, Call::Resume).await?;
                match (error.as_deref(), d) {
                    (None, d) => self.drove(d, status, kill),
                    (Some(want), Drove::Refused(e)) => {
                        let (ok, kind) = match &e {
                            StoreError::Missing(m) => (want == "missing", m),
                            StoreError::Corrupt(m) => (want == "corrupt", m),
                            other => {
                                return Err(self.expected(format!(
                                    "the resume was refused otherwise than {want}: {other}"
                                )));
                            }
                        };
                        // Seed 002: a corrupt file is a ValueError naming the run; a missing
                        // one is FileNotFoundError.
                        if !ok || (want == "corrupt" && !kind.contains(&self.run_id)) {
                            return Err(self.expected(format!(
                                "the resume was refused otherwise than {want}, naming run {}: {e}",
                                self.run_id
                            )));
                        }
                        Ok(format!("refused: {e}"))
                    }
                    (Some(want), _) => {
                        let more = self.hermes.handle.ledger().runs.len().saturating_sub(runs);
                        Err(Problem::Failed(crate::check::workflow::started_over(
                            &self.run_id,
                            want,
                            more,
                            &mut self.facts,
                        )))
                    }
                }
            }
            Step::WorkflowAnswer {
                node,
                answer,
                kill,
                status,
            } => {
                let before = self.given.insert(node.clone(), answer.clone());
                self.restarted();
                let call = Call::Answer {
                    node: node.clone(),
                    answer: answer.clone(),
                };
                let d = self.drive(kill, call).await?;
                // An answer the runner refused was not given: nothing may rest on it.
                if matches!(d, Drove::NotWaiting(_) | Drove::Refused(_)) {
                    match before {
                        Some(b) => self.given.insert(node.clone(), b),
                        None => self.given.remove(node),
                    };
                }
                match d {
                    // In an explored schedule an answer may come when the run waits for
                    // something else: the refusal is the runner's to give.
                    Drove::NotWaiting(m) if self.explore => Ok(format!("refused: {m}")),
                    Drove::NotWaiting(m) => {
                        // A step whose result is already recorded (an honest runner adopted
                        // it) is no longer waited for: the refusal is the answer.
                        if self.last().is_some_and(|st| st.outputs.contains_key(node)) {
                            return Ok(format!("refused: {m} (its result is recorded)"));
                        }
                        Err(self.expected(format!("the run does not wait for {node}: {m}")))
                    }
                    Drove::Refused(StoreError::Missing(m))
                        if self.last().is_none() && !self.damaged && !self.effects_exist() =>
                    {
                        Ok(format!("refused: {m} (the run never saved a whole state)"))
                    }
                    Drove::Refused(e) if self.damaged || !matches!(e, StoreError::Corrupt(_)) => {
                        Err(self.expected(format!("the answer was refused: {e}")))
                    }
                    d => self.drove(d, status, kill),
                }
            }
            Step::WorkflowDamage { how } => {
                let path = self
                    .home
                    .run_file(&self.run_id)
                    .map_err(|e| Problem::Harness(e.to_string()))?;
                let r = match how.as_str() {
                    "remove" => std::fs::remove_file(&path),
                    _ => std::fs::write(&path, b"{\"run_id\": \"trunc"),
                };
                r.map_err(|e| Problem::Harness(format!("{}: {e}", path.display())))?;
                self.damaged = true;
                let what = format!(
                    "the harness {} the run file",
                    if how == "remove" {
                        "removed"
                    } else {
                        "corrupted"
                    }
                );
                self.exercised.push((what.clone(), true));
                Ok(what)
            }
            Step::ChannelFault { fault, nth, times } => {
                if let ChannelFault::Hold { name } = fault {
                    self.sites.insert(name.clone(), Site::Channel);
                }
                self.channel.add_rule(ChannelRule {
                    fault: fault.clone(),
                    nth: nth.unwrap_or(1),
                    times: times.unwrap_or(1),
                });
                Ok("ok".into())
            }
            Step::HermesFault { fault, .. } => {
                if let provider_model::hermes::faults::Fault::Hold { name } = fault {
                    self.sites.insert(name.clone(), Site::Hermes);
                }
                let rule = s
                    .hermes_rule()
                    .ok_or_else(|| Problem::Harness("not a Hermes fault".into()))?;
                self.hermes
                    .handle
                    .add_rule(rule)
                    .map_err(|d| Problem::Harness(d.join("; ")))?;
                Ok("ok".into())
            }
            Step::HermesScript { script } => {
                self.hermes
                    .handle
                    .set_scripts(Vec::new(), Some(script.clone()))
                    .map_err(|d| Problem::Harness(d.join("; ")))?;
                Ok("ok".into())
            }
            other => Err(Problem::Harness(format!(
                "{} is not a step of a workflow case",
                other.verb()
            ))),
        }
    }

    /// The checkers over the saved state and both ledgers, after step `after` (`None`: the end
    /// of the case); the look is kept for the evidence.
    async fn look(&mut self, after: Option<usize>) -> Vec<Finding> {
        let state = if self.damaged {
            Ok(None)
        } else {
            match self.home.load_run(&self.run_id) {
                Ok(st) => Ok(Some(st)),
                Err(StoreError::Missing(_)) => Ok(None),
                Err(e) => Err(e
                    .to_string()
                    .replace(&self.home.0.display().to_string(), "$HERMES_HOME")),
            }
        };
        // fake-hermes records a run's end just after the status a runner reads it from: for
        // every step a state claims an output of, its runs' ends are waited for, briefly.
        let claimed: Vec<String> = state
            .iter()
            .flatten()
            .chain(&self.between)
            .flat_map(|st| st.outputs.keys())
            .map(|node| format!("workflow:{}:{node}", self.run_id))
            .collect();
        for _ in 0..20 {
            let l = self.hermes.handle.ledger();
            if l.runs
                .iter()
                .filter(|r| claimed.contains(&r.session_id))
                .all(|r| l.terminal.contains_key(&r.run_id))
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        // What the last drive said it left, against what it saved.
        let mut out = Vec::new();
        if let Some(returned) = self.returned.take().filter(|_| !self.damaged) {
            let saved = match &state {
                Ok(Some(st)) => Ok(st),
                Ok(None) => Err("no run file"),
                Err(e) => Err(e.as_str()),
            };
            out.extend(crate::check::workflow::returned_as_saved(
                &returned,
                saved,
                &mut self.facts,
            ));
        }
        let mut look = crate::check::workflow::WorkflowLook {
            after_step: after,
            state,
            damaged: self.damaged,
            hermes: self.hermes.handle.ledger(),
            channel: self.channel.ledger(),
            given: self.given.clone(),
            between: std::mem::take(&mut self.between),
            found: Vec::new(),
            facts: Default::default(),
        };
        let before = self.facts.clone();
        let found =
            crate::check::workflow::judge_look(&self.plan, &self.run_id, &look, &mut self.facts);
        look.facts = crate::check::replay::facts_between(&before, &self.facts);
        look.found = found.iter().map(Finding::line).collect();
        out.extend(found);
        self.looks.push(look);
        out
    }

    /// A drive that resumes the run is a new runner: nothing of the one before is kept but
    /// the saved state (the reference's host loads it at every drive). Reported as exercised.
    fn restarted(&mut self) {
        self.exercised
            .push(("restart the runner from its saved state".into(), true));
    }

    /// Whether either provider holds an effect of this run (a run under one of its step
    /// correlations, or a delivery under one of its receipt ids): a run with effects exists,
    /// whatever its runner says of its file.
    fn effects_exist(&self) -> bool {
        let prefix = format!("workflow:{}:", self.run_id);
        let c = self.channel.ledger();
        self.hermes
            .handle
            .ledger()
            .runs
            .iter()
            .any(|r| r.session_id.starts_with(&prefix))
            || c.taken.iter().any(|t| t.id.starts_with(&prefix))
            || c.untaken.iter().any(|u| u.id.starts_with(&prefix))
    }

    /// The last state a look read whole (`None`: the run never saved one, or the harness damaged
    /// it since).
    fn last(&self) -> Option<&RunState> {
        self.looks
            .iter()
            .rev()
            .find_map(|l| l.state.as_ref().ok().and_then(Option::as_ref))
    }
}

fn kill_words(k: &WorkflowKill) -> String {
    match (k.save, k.mid_write, &k.hold) {
        (Some(n), _, _) => format!("kill the runner after save {n}"),
        (_, Some(n), _) => format!("kill the runner in the middle of save {n}"),
        (_, _, Some(h)) => format!("kill the runner while {h:?} holds its request"),
        _ => "kill".into(),
    }
}

/// A run id for the case: a hex digest of its id (seed 002's `^[a-f0-9]{6,32}$`).
fn run_id_of(case_id: &str) -> String {
    crate::digest::Digest::of_bytes(case_id.as_bytes()).hex()[..12].to_string()
}

async fn setup<'a>(lc: &'a LoadedCase, opts: &RunOptions) -> Result<Case<'a>, String> {
    let design = lc.case.steps.iter().find_map(|s| match s {
        Step::WorkflowStart { design, .. } => Some(design.clone()),
        _ => None,
    });
    let design = design.ok_or("the case starts no run (an aocheck bug: it was checked)")?;
    let plan = build_run_plan(&design).map_err(|d| {
        format!(
            "the design does not plan: {}",
            d.iter()
                .map(|d| d.msg.clone())
                .collect::<Vec<_>>()
                .join("; ")
        )
    })?;
    let api_key = format!("hk_{}", uuid::Uuid::new_v4().simple());
    crate::secrets::register(&api_key);
    let config = provider_model::hermes::config::Config {
        api_key: api_key.clone(),
        control_token: super::control_token()?,
        ..provider_model::hermes::config::Config::default()
    };
    let hermes = crate::providers::start_hermes(config, None).await?;
    // Each run answers with an output of its own (its run id in it): a runner records a run's
    // output only by reading it, never by guessing (a case's `hermes_script` may set another).
    hermes
        .handle
        .set_scripts(
            Vec::new(),
            Some(serde_json::json!({"name": "workflow-reply", "steps": [
                {"id": "reply", "kind": "message", "text": "Done ({run_id}): I completed the step.", "chunks": 2}
            ]})),
        )
        .map_err(|d| d.join("; "))?;
    let channel = crate::providers::channel::start_channel().await?;
    let (runner, home, dir) = match &opts.sut {
        None => {
            let dir = TempHome::new()?;
            let home = Home(dir.0.clone());
            (Runner::Reference(opts.knobs.workflow()), home, Some(dir))
        }
        Some(spec) => {
            let init = crate::sut::message::HermesInit {
                base_url: hermes.url.clone(),
                api_key: api_key.clone(),
                endpoint_id: "primary".into(),
                clock: None,
            };
            let (p, home) = Processes::new(spec, &lc.case.id, opts.seed, init, &channel.url)?;
            (Runner::Processes(p), Home(home), None)
        }
    };
    Ok(Case {
        lc,
        hermes,
        api_key,
        channel: channel.handle,
        channel_url: channel.url,
        channel_task: channel.task,
        home,
        _dir: dir,
        run_id: run_id_of(&lc.case.id),
        plan,
        runner,
        damaged: false,
        sites: Default::default(),
        facts: Facts::default(),
        exercised: Vec::new(),
        returned: None,
        looks: Vec::new(),
        design,
        explore: opts.explore,
        found: Vec::new(),
        given: Default::default(),
        finals: None,
        between: Vec::new(),
    })
}

/// Runs one workflow case.
pub(super) async fn run_case(
    lc: &LoadedCase,
    opts: &RunOptions,
    mut report: CaseReport,
    emit: &mut (dyn FnMut(RunEvent) + Send),
) -> CaseReport {
    let started = Instant::now();
    let case = &lc.case;
    if opts.sut.is_some()
        && let Some(k) = case.steps.iter().find_map(|s| match s {
            Step::WorkflowStart { kill: Some(k), .. }
            | Step::WorkflowResume { kill: Some(k), .. }
            | Step::WorkflowAnswer { kill: Some(k), .. }
                if k.hold.is_none() =>
            {
                Some(k)
            }
            _ => None,
        })
    {
        report.unsupported = Some(format!(
            "{}: a runner in another process can be killed only while a provider holds its request (a kill at a save point is the reference's own: docs/sut-protocol.md, Hermes Workflow runner)",
            kill_words(k)
        ));
        return super::verdict::close(report, Vec::new(), 0, started, emit);
    }
    let mut c = match setup(lc, opts).await {
        Ok(c) => c,
        Err(m) => return report.harness_error_because(HarnessCause::Unreachable, m, started),
    };
    let mut failures: Vec<Failure> = Vec::new();
    let mut harness: Option<String> = None;
    let mut unsupported: Option<String> = None;
    for (i, s) in case.steps.iter().enumerate() {
        let r = c.step(s).await;
        let line = match &r {
            Ok(l) => l.clone(),
            Err(Problem::Failed(f)) => format!("failed: {}", f.line()),
            Err(Problem::Harness(m)) => format!("error: {m}"),
            Err(Problem::Unsupported(m)) => format!("unsupported: {m}"),
        };
        // The runner's home is a temp folder of this machine: a report says $HERMES_HOME.
        let line = line.replace(&c.home.0.display().to_string(), "$HERMES_HOME");
        emit(RunEvent::StepFinished {
            case: case.id.clone(),
            index: i,
            verb: s.verb(),
            result: line.clone(),
        });
        report.steps.push(format!("{}: {line}", s.verb()));
        for f in std::mem::take(&mut c.found) {
            push_finding(&mut failures, f, Some(i));
        }
        match r {
            Ok(_) => {}
            Err(Problem::Failed(f)) => push_finding(&mut failures, f, Some(i)),
            Err(Problem::Harness(m)) => {
                harness = Some(format!("steps[{i}] ({}): {m}", s.verb()));
                break;
            }
            Err(Problem::Unsupported(m)) => {
                unsupported = Some(m);
                break;
            }
        }
        for f in c.look(Some(i)).await {
            push_finding(&mut failures, f, Some(i));
        }
    }
    if let Runner::Processes(p) = &c.runner {
        report.implementation = p.implementation();
        report.sut_processes = p.log();
        let escaped = p.escaped();
        if harness.is_none() && !escaped.is_empty() {
            harness = Some(format!(
                "processes outlived the kill of their group (the crash did not happen as declared): {}",
                escaped.join("; ")
            ));
        }
    }
    if let Some(m) = unsupported {
        c.hermes.task.abort();
        c.channel_task.abort();
        report.unsupported = Some(m);
        return super::verdict::close(report, Vec::new(), 0, started, emit);
    }
    // The closing look: the ledgers and the state read again after the last step, even after
    // a harness error (a runner that crashed after a second launch has still launched twice:
    // what the ledgers prove is a failure, whatever stopped the case).
    for f in c.look(None).await {
        push_finding(&mut failures, f, Some(case.steps.len()));
    }
    if harness.is_none() {
        for f in c.finals() {
            push_finding(&mut failures, f, None);
        }
    }
    // Declared faults must have fired: a case that ran no fault is not a pass.
    let mut unfired = Vec::new();
    super::verdict::hermes_faults(c.hermes.handle.rules(), &mut report.faults, &mut unfired);
    for r in c.channel.rules() {
        let what = format!(
            "channel {}",
            serde_json::to_string(&r.rule.fault).unwrap_or_default()
        );
        super::verdict::declared(
            (&mut report.faults, &mut unfired),
            what.clone(),
            r.fired > 0,
            || format!("declared fault {what} never fired"),
        );
    }
    for (what, fired) in &c.exercised {
        super::verdict::declared(
            (&mut report.faults, &mut unfired),
            what.clone(),
            *fired,
            || format!("{what}: the run parked or ended before it got there"),
        );
    }
    c.hermes.task.abort();
    c.channel_task.abort();
    if harness.is_none() && !unfired.is_empty() && !opts.explore {
        harness = Some(unfired.join("; "));
    }
    let home = c.home.0.display().to_string();
    for f in &mut failures {
        f.msg = f.msg.replace(&home, "$HERMES_HOME");
    }
    let harness = harness.map(|h| h.replace(&home, "$HERMES_HOME"));
    report.facts = c.facts.by_id();
    report.not_established = case
        .requirements
        .iter()
        .filter(|r| crate::aoc::requirement::Req::parse(r).is_some_and(|r| c.facts.count(r) == 0))
        .cloned()
        .collect();
    report.harness_cause = harness.as_ref().map(|_| HarnessCause::Undecided);
    report.harness = harness;
    if !opts.explore {
        report.evidence = c.evidence(&report, &failures);
    }
    // The runner's home holds what it wrote, credentials included: its states are in the
    // evidence, and the folder does not stay in the run's output.
    if let Runner::Processes(_) = &c.runner {
        let _ = std::fs::remove_dir_all(&c.home.0);
    }
    super::verdict::close(report, failures, c.facts.total(), started, emit)
}
