//! `aocheck explore`: seeded random fault schedules against any implementation, judged by the
//! invariants alone, each finding shrunk to a case a person reads and replays.
//!
//! | module | what |
//! |---|---|
//! | [`rng`] | SplitMix64: a seed gives the same schedules on every machine |
//! | [`schedule`] | a schedule (a case with `expect: any` steps) from a seed and an index, valid by construction |
//! | [`shrink`] | smaller schedules while the same (checker, requirement) finding reproduces |
//! | [`coverage`] | fault kinds × operations, crash points, held requests, profiles, verbs |
//! | [`yaml`] | a case as a readable file that reads back as itself |
//! | [`report`] | the explore report (JSON, Markdown, JUnit), one model every format renders |
//! | [`out_html`] | the explore report as one HTML page |
//! | [`merge`] | the reports of the shards of one exploration made one |
//! | [`out_progress`] | what a running exploration shows: a live bar, or plain lines |
//!
//! A schedule runs exactly as a case does (`runner::run_case`: a fresh provider, a fresh store
//! namespace, every checker after every step); its verdict is its first finding, or none. What
//! the checkers could not decide (a harness error, an unsupported operation) is counted as such,
//! never as a schedule without a finding.

pub mod cmd;
pub mod coverage;
pub mod hermes;
pub mod merge;
pub mod out_html;
pub mod out_progress;
pub mod report;
pub mod rng;
pub mod schedule;
pub mod shrink;
pub mod workflow;
pub mod yaml;

/// The longest schedule drawn (steps, a race or a block counting each of its steps).
pub const MAX_STEPS: usize = 24;

/// The id of schedule `index` of `seed`.
/// Appends `block` to the schedule `case` and keeps it if the whole stays within [`MAX_STEPS`]
/// and `ok` holds of it (valid, fair, within what the implementation declares); else `case`
/// is as it was.
pub(crate) fn keep_block(
    case: &mut Case,
    block: Vec<crate::case::Step>,
    ok: impl FnOnce(&Case) -> bool,
) -> bool {
    if block.is_empty() || case.steps.len() + block.len() > MAX_STEPS {
        return false;
    }
    let at = case.steps.len();
    case.steps.extend(block);
    let kept = ok(case);
    if !kept {
        case.steps.truncate(at);
    }
    kept
}

pub fn schedule_id(seed: u64, index: u64) -> String {
    format!("EXPLORE-{seed}-{index}")
}

/// The file name a schedule's case is validated (and written) under.
pub fn file_name(id: &str) -> String {
    format!("{id}-schedule.yaml")
}

use crate::aoc::Req;
use crate::case::{Case, Checked, LoadedCase};
use crate::report::model::{CaseReport, Verdict};
use crate::runner::RunOptions;
use crate::store::AnyStore;
use crate::sut::message::Op;
use coverage::Coverage;
use schedule::Workload;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a finding is, for reproduction: the checker that found it and the requirement.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Key {
    pub checker: String,
    pub requirement: Req,
}

impl std::fmt::Display for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[{}] {}", self.checker, self.requirement)
    }
}

/// One schedule's verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every checker ran after every step and found nothing.
    Clean,
    /// The first finding: its key, the step it was found at (`None`: before the steps, or at
    /// the end) and the report's line.
    Found {
        key: Key,
        step: Option<usize>,
        line: String,
    },
    /// The checkers could not decide (a harness error): why.
    Undecided(String),
    /// The implementation does not support what the schedule needs.
    Unsupported(String),
}

/// The checker a report line names (`[checker] …`); a step's own verdict names none.
fn checker_of(msg: &str) -> String {
    msg.strip_prefix('[')
        .and_then(|m| m.split_once(']'))
        .map(|(c, _)| c.to_string())
        .unwrap_or_else(|| "step".into())
}

/// A schedule's verdict from its case report.
pub fn outcome(r: &CaseReport) -> Outcome {
    if let Some(f) = r.failures.first() {
        return Outcome::Found {
            key: Key {
                checker: checker_of(&f.msg),
                requirement: f.requirement,
            },
            step: f.step,
            line: f.msg.clone(),
        };
    }
    if let Some(u) = &r.unsupported {
        return Outcome::Unsupported(u.clone());
    }
    if let Some(h) = &r.harness {
        return Outcome::Undecided(h.clone());
    }
    // Without a finding, a schedule is clean only if a checker examined something beyond the
    // implementation's claims about itself (an implementation that refuses everything explores
    // nothing).
    if !r
        .facts
        .iter()
        .any(|(req, n)| *n > 0 && req != "AOC-REQ-013")
    {
        return Outcome::Undecided(
            "no checker examined anything but the implementation's claims".into(),
        );
    }
    Outcome::Clean
}

/// How to explore.
#[derive(Clone, Debug)]
pub struct ExploreOptions {
    pub workload: Workload,
    pub seed: u64,
    /// Stop after this many schedules of this shard …
    pub schedules: Option<u64>,
    /// … or after this long (whichever comes first; neither: 100 schedules). The time bounds
    /// the whole exploration: no schedule is drawn, no shrinking candidate tried and no replay
    /// past the first started once it has passed (a case run already started finishes).
    pub time: Option<Duration>,
    /// This shard, `(k, n)` with 1 ≤ k ≤ n: schedule `i` belongs to it when `i % n == k - 1`.
    pub shard: (u64, u64),
    /// Candidates tried per finding while shrinking.
    pub shrink_budget: u32,
    /// Runs per candidate before it is taken not to reproduce (an implementation may be
    /// nondeterministic), and replays of the shrunk schedule to report how often it reproduces.
    pub tries: u32,
    pub replays: u32,
    /// The implementation (and everything else a case run needs); its `run_id` is the stem of
    /// every schedule run's.
    pub run: RunOptions,
    /// Also run each shrunk schedule against the conforming reference in process.
    pub check_reference: bool,
    /// Stop at the first finding (after shrinking it).
    pub stop_on_finding: bool,
    /// Schedules run at once, each its own task (on its own provider, store namespace and
    /// processes); the results are taken in schedule order, so the report is the same for any
    /// number. A finding is shrunk while the schedules already started go on beside it.
    pub jobs: usize,
}

impl ExploreOptions {
    /// The command line's defaults: 100 schedules of the whole seed (shard 1/1), 400 shrinking
    /// candidates per finding, each run twice before it is taken not to reproduce, 5 replays,
    /// in process against the conforming reference, every finding shrunk.
    pub fn new(workload: Workload, seed: u64, run_id: String) -> Self {
        ExploreOptions {
            workload,
            seed,
            schedules: None,
            time: None,
            shard: (1, 1),
            shrink_budget: 400,
            tries: 2,
            replays: 5,
            run: RunOptions {
                run_id,
                seed,
                knobs: crate::reference::Knobs::default(),
                repro_store: None,
                sut: None,
                explore: true,
            },
            check_reference: false,
            stop_on_finding: false,
            jobs: 1,
        }
    }
}

/// One finding of the exploration, shrunk.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Found {
    pub key: Key,
    /// The schedule that first found it, and at which step.
    pub schedule: u64,
    /// How long the exploration had run, and how many schedules, when the schedule that first
    /// found it ended (before shrinking).
    #[serde(default)]
    pub found_after_millis: u64,
    #[serde(default)]
    pub found_after_schedules: u64,
    pub step: Option<usize>,
    pub line: String,
    /// Schedules (of this run) whose first finding had this key.
    pub schedules: u64,
    /// The shrunk schedule: its steps, the file it is written to, and its first finding's line.
    pub steps_before: usize,
    pub steps_after: usize,
    pub shrink_tried: u32,
    /// The time budget ran out before shrinking (or the replays after it) finished: the case
    /// file is the smallest schedule found until then, and `replays` says how many ran.
    pub shrink_cut_short: bool,
    pub case_file: String,
    pub shrunk_line: String,
    /// How often the shrunk schedule reproduced the finding, of `replays` (those that ran).
    pub reproduced: u32,
    pub replays: u32,
    /// The verdict of the shrunk schedule on aocheck's conforming reference (in process), when
    /// asked for.
    pub reference: Option<String>,
    /// The shrunk schedule itself (`None` in a report read back from `explore.json`, which
    /// names its file under `found/`).
    #[serde(skip)]
    pub case: Option<Case>,
}

/// What an exploration found and exercised.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Exploration {
    /// The implementation could not be started (its probe schedule, one join, was unreachable):
    /// why. Nothing was explored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_started: Option<String>,
    pub schedules: u64,
    pub clean: u64,
    pub findings: Vec<Found>,
    /// Undecided schedules, by why (the first 120 characters of the harness's words).
    pub undecided: BTreeMap<String, u64>,
    pub unsupported: u64,
    pub coverage: Coverage,
    /// Steps per schedule, sorted (for the median).
    #[serde(skip)]
    pub lengths: Vec<usize>,
    /// The index of every schedule run, in order.
    #[serde(skip)]
    pub indices: Vec<u64>,
    pub median_steps: usize,
    pub millis: u64,
    /// With `stop_on_finding`: how many schedules ran until the first finding.
    pub schedules_to_first: Option<u64>,
    /// The operations the implementation declared (`None`: in process, every one).
    pub operations: Option<Vec<String>>,
    pub implementation: Option<serde_json::Value>,
}

/// A progress event of an exploration.
#[derive(Clone, Debug)]
pub enum Progress {
    Schedule {
        done: u64,
        findings: usize,
        elapsed: Duration,
    },
    Finding {
        schedule: u64,
        key: Key,
    },
    Shrunk {
        key: Key,
        before: usize,
        after: usize,
        /// The time budget cut the shrinking short.
        cut_short: bool,
    },
}

/// Runs one schedule as a case, on a run id of its own (a fresh store namespace).
pub async fn run_schedule(
    store: &Arc<AnyStore>,
    case: &Case,
    opts: &RunOptions,
    attempt: u64,
) -> CaseReport {
    run_as(store, case, opts, attempt, true).await
}

/// Runs a case as a schedule (`explore`: a declared fault that never fired is coverage), or as
/// `aocheck run` runs its file (a declared fault must fire).
async fn run_as(
    store: &Arc<AnyStore>,
    case: &Case,
    opts: &RunOptions,
    attempt: u64,
    explore: bool,
) -> CaseReport {
    let lc = LoadedCase {
        path: schedule::file_name(&case.id).into(),
        case: case.clone(),
        // A schedule has no file: the bytes are only the suite's test-input digest, which a case
        // run does not compute (`report::write` writes the file of a finding).
        bytes: Vec::new(),
        checked: Checked::of(case).ok(),
    };
    let mut o = opts.clone();
    o.run_id = format!("{}-{attempt}", opts.run_id);
    o.explore = explore;
    crate::runner::run_case(store.clone(), &lc, &o, &mut |_| {}).await
}

/// The operations the implementation declares, learned from one probe schedule (a join);
/// `None` in process, where the reference supports every one.
async fn probe(store: &Arc<AnyStore>, opts: &RunOptions, attempt: u64) -> Probe {
    if opts.sut.is_none() {
        return Probe::default();
    }
    let case: Case = Case {
        id: "EXPLORE-PROBE".into(),
        title: "probe".into(),
        requirements: vec!["AOC-REQ-001".into()],
        description: None,
        config: Default::default(),
        steps: vec![crate::case::Step::Join {
            executor: "e1".into(),
            expect: crate::case::Expect(Some("any".into())),
        }],
        expect: Default::default(),
    };
    let r = run_schedule(store, &case, opts, attempt).await;
    let ops = r
        .implementation
        .as_ref()
        .and_then(|i| i["operations"].as_array())
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str())
                .filter_map(|s| {
                    serde_json::from_value::<Op>(serde_json::Value::String(s.into())).ok()
                })
                .collect::<BTreeSet<Op>>()
        });
    // A process that cannot even start explores nothing: every schedule would be undecided.
    let not_started = (r.harness_cause == Some(crate::report::model::HarnessCause::Unreachable))
        .then(|| r.harness.clone())
        .flatten();
    Probe {
        ops,
        implementation: r.implementation.clone(),
        not_started,
    }
}

/// What the probe schedule learned of the implementation.
#[derive(Default)]
struct Probe {
    ops: Option<BTreeSet<Op>>,
    implementation: Option<serde_json::Value>,
    /// Why its processes could not be started and answer a join (nothing is explored then).
    not_started: Option<String>,
}

/// Explores: draws this shard's schedules from the seed, runs each, shrinks each new finding.
pub async fn explore(
    store: Arc<AnyStore>,
    opts: &ExploreOptions,
    progress: &mut (dyn FnMut(Progress) + Send),
) -> Exploration {
    let started = Instant::now();
    let deadline = opts.time.map(|t| started + t);
    let mut attempt = 0u64;
    let mut next_attempt = || {
        attempt += 1;
        attempt
    };
    let Probe {
        ops,
        implementation,
        not_started,
    } = probe(&store, &opts.run, next_attempt()).await;
    let mut x = Exploration {
        operations: ops
            .as_ref()
            .map(|o| o.iter().map(|op| op.name().to_string()).collect()),
        implementation,
        ..Exploration::default()
    };
    if not_started.is_some() {
        x.not_started = not_started;
        x.millis = started.elapsed().as_millis() as u64;
        return x;
    }
    let limit = match (opts.schedules, opts.time) {
        (None, None) => Some(100),
        (s, _) => s,
    };
    let (k, n) = opts.shard;
    let mut index = k.saturating_sub(1);
    let mut more = true;
    let mut started_count = 0u64;
    let mut found: BTreeMap<Key, usize> = BTreeMap::new();
    // Schedules in flight, oldest first, each its own task (the cores share them); results are
    // taken in schedule order.
    let mut flight: std::collections::VecDeque<(u64, Case, tokio::task::JoinHandle<CaseReport>)> =
        Default::default();
    loop {
        while more && flight.len() < opts.jobs.max(1) {
            if limit.is_some_and(|l| started_count >= l)
                || opts.time.is_some_and(|t| started.elapsed() >= t)
            {
                more = false;
                break;
            }
            let case = schedule::generate(opts.workload, opts.seed, index, ops.as_ref());
            let (st, c, o, a) = (
                store.clone(),
                case.clone(),
                opts.run.clone(),
                next_attempt(),
            );
            let task = tokio::spawn(async move { run_schedule(&st, &c, &o, a).await });
            flight.push_back((index, case, task));
            started_count += 1;
            match index.checked_add(n.max(1)) {
                Some(i) => index = i,
                None => more = false,
            }
        }
        let Some((index, case, task)) = flight.pop_front() else {
            break;
        };
        let r = match task.await {
            Ok(r) => r,
            Err(e) => task_ended(&case, &e),
        };
        x.schedules += 1;
        x.indices.push(index);
        x.lengths.push(case.steps.len());
        x.coverage.add(&case, &r);
        match outcome(&r) {
            Outcome::Clean => x.clean += 1,
            Outcome::Unsupported(_) => x.unsupported += 1,
            Outcome::Undecided(why) => {
                *x.undecided
                    .entry(why.chars().take(120).collect())
                    .or_default() += 1
            }
            Outcome::Found { key, step, line } => {
                if let Some(&at) = found.get(&key) {
                    x.findings[at].schedules += 1;
                } else {
                    progress(Progress::Finding {
                        schedule: index,
                        key: key.clone(),
                    });
                    let found_after_millis = started.elapsed().as_millis() as u64;
                    // When the exploration stops at this finding, the schedules started after
                    // it are stopped unjudged (otherwise they go on beside the shrinking).
                    if opts.stop_on_finding {
                        for (_, _, t) in flight.drain(..) {
                            t.abort();
                        }
                    }
                    let mut f = shrink_finding(
                        &store,
                        opts,
                        &case,
                        index,
                        key.clone(),
                        step,
                        line,
                        deadline,
                        &mut next_attempt,
                    )
                    .await;
                    f.found_after_millis = found_after_millis;
                    f.found_after_schedules = x.schedules;
                    progress(Progress::Shrunk {
                        key: key.clone(),
                        before: f.steps_before,
                        after: f.steps_after,
                        cut_short: f.shrink_cut_short,
                    });
                    found.insert(key, x.findings.len());
                    x.findings.push(f);
                    if opts.stop_on_finding {
                        x.schedules_to_first = Some(x.schedules);
                        break;
                    }
                }
            }
        }
        progress(Progress::Schedule {
            done: x.schedules,
            findings: x.findings.len(),
            elapsed: started.elapsed(),
        });
    }
    x.lengths.sort_unstable();
    x.median_steps = x.lengths.get(x.lengths.len() / 2).copied().unwrap_or(0);
    x.millis = started.elapsed().as_millis() as u64;
    x
}

/// The report of a schedule whose task panicked or was cancelled: a harness defect, never a
/// pass.
fn task_ended(case: &Case, e: &tokio::task::JoinError) -> CaseReport {
    let mut r = CaseReport::new(
        &case.id,
        &case.title,
        std::path::Path::new(&schedule::file_name(&case.id)),
        case.requirements.clone(),
    );
    r.verdict = Verdict::HarnessError;
    r.harness = Some(format!("the schedule's task ended: {e}"));
    r
}

/// Whether a run of `case` shows the finding `key` (at any step).
fn shows(r: &CaseReport, key: &Key) -> bool {
    r.failures
        .iter()
        .any(|f| f.requirement == key.requirement && checker_of(&f.msg) == key.checker)
}

#[allow(clippy::too_many_arguments)]
async fn shrink_finding(
    store: &Arc<AnyStore>,
    opts: &ExploreOptions,
    case: &Case,
    index: u64,
    key: Key,
    step: Option<usize>,
    line: String,
    deadline: Option<Instant>,
    next_attempt: &mut impl FnMut() -> u64,
) -> Found {
    let tries = opts.tries.max(1);
    let past = || deadline.is_some_and(|d| Instant::now() >= d);
    // Set when the time ran out between the runs of one candidate (shrinking stops there).
    let mut interrupted = false;
    // A candidate is kept when it shows the finding and would replay as a case file: every
    // fault it declares fired and the harness decided it (a hold some other fault took, or a
    // fault no request reached, is leniency a schedule has and a case file has not). Only when
    // neither the schedule nor any smaller candidate is such is the finding shrunk under the
    // schedule's leniency (its replays then say how often the file reproduces).
    let mut reproduces = async |c: &Case, strict: bool| {
        for i in 0..tries {
            if i > 0 && past() {
                interrupted = true;
                return false;
            }
            let r = run_schedule(store, c, &opts.run, next_attempt()).await;
            if shows(&r, &key)
                && (!strict || (r.harness.is_none() && r.faults.iter().all(|f| f.fired)))
            {
                return true;
            }
        }
        false
    };
    let mut shrunk = shrink::shrink(
        case.clone(),
        opts.shrink_budget,
        deadline,
        async |c: &Case| reproduces(c, true).await,
    )
    .await;
    if shrunk.kept == 0 && !past() && !reproduces(case, true).await {
        let (tried, cut) = (shrunk.tried, shrunk.cut_short);
        shrunk = shrink::shrink(
            case.clone(),
            opts.shrink_budget,
            deadline,
            async |c: &Case| reproduces(c, false).await,
        )
        .await;
        shrunk.tried += tried;
        shrunk.cut_short |= cut;
    }
    let mut minimal = shrunk.case;
    // The file a person replays: named for what it found, judged by that requirement.
    minimal.id = format!("EXPLORE-{}-{index}", opts.seed);
    minimal.title = format!("Found by aocheck explore: {key}");
    minimal.requirements = vec![key.requirement.id().to_string()];
    minimal.description = Some(format!(
        "Schedule {index} of seed {} ({} workload), shrunk from {} to {} steps. Its first finding was: {line}",
        opts.seed,
        opts.workload.name(),
        case.steps.len(),
        minimal.steps.len(),
    ));
    let mut cut_short = shrunk.cut_short || interrupted;
    let mut reproduced = 0;
    let mut replays = 0;
    let mut shrunk_line = String::new();
    // Replayed as `aocheck run --cases FILE` runs the file written (its declared faults must
    // fire, nothing is skipped): what the person who reads it will see. Past the time budget,
    // one replay still runs, so the file written is known to reproduce or not.
    for i in 0..opts.replays {
        if i > 0 && past() {
            cut_short = true;
            break;
        }
        replays += 1;
        let r = run_as(store, &minimal, &opts.run, next_attempt(), false).await;
        if let Some(f) = r
            .failures
            .iter()
            .find(|f| f.requirement == key.requirement && checker_of(&f.msg) == key.checker)
        {
            reproduced += 1;
            if shrunk_line.is_empty() {
                shrunk_line = f.msg.clone();
            }
        }
    }
    let reference = if opts.check_reference {
        let mut o = opts.run.clone();
        o.sut = None;
        o.knobs = crate::reference::Knobs::default();
        // As `aocheck run --cases FILE` judges it: its declared faults must fire.
        let r = run_as(store, &minimal, &o, next_attempt(), false).await;
        Some(match outcome(&r) {
            Outcome::Found { key, .. } => format!("finding {key}"),
            _ if r.verdict == Verdict::Pass => "pass".into(),
            _ => r.verdict.label().to_string(),
        })
    } else {
        None
    };
    Found {
        case_file: format!("{}-found.yaml", minimal.id),
        key,
        schedule: index,
        found_after_millis: 0,
        found_after_schedules: 0,
        step,
        line,
        schedules: 1,
        steps_before: case.steps.len(),
        steps_after: minimal.steps.len(),
        shrink_tried: shrunk.tried,
        shrink_cut_short: cut_short,
        shrunk_line,
        reproduced,
        replays,
        reference,
        case: Some(minimal),
    }
}

/// Writes every format of a report into `out`: `explore.json`, `summary.md`, `junit.xml` and
/// `explore.html` (the shrunk cases are the caller's).
pub fn write_formats(out: &std::path::Path, r: &report::ExploreReport) -> std::io::Result<()> {
    std::fs::create_dir_all(out)?;
    let j = serde_json::to_string_pretty(r).map_err(std::io::Error::other)?;
    std::fs::write(out.join("explore.json"), j + "\n")?;
    std::fs::write(out.join("summary.md"), report::markdown(r))?;
    std::fs::write(out.join("junit.xml"), report::junit(r))?;
    std::fs::write(out.join("explore.html"), out_html::html(r))?;
    Ok(())
}

/// Writes an exploration's report: the shrunk cases under `found/`, then every format.
pub fn write(
    out: &std::path::Path,
    x: &Exploration,
    o: &ExploreOptions,
    store_kind: &str,
) -> std::io::Result<report::ExploreReport> {
    std::fs::create_dir_all(out.join("found"))?;
    for f in &x.findings {
        if let Some(case) = &f.case {
            std::fs::write(out.join("found").join(&f.case_file), yaml::case(case))?;
        }
    }
    let r = report::ExploreReport::of(x, o, store_kind);
    write_formats(out, &r)?;
    Ok(r)
}

#[cfg(test)]
mod tests {

    use super::*;

    #[test]
    fn the_checker_is_read_from_the_line() {
        assert_eq!(
            checker_of("[effect_as_asked] o1: 2 effects"),
            "effect_as_asked"
        );
        assert_eq!(checker_of("execute was refused"), "step");
    }
}
