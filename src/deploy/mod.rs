//! `aocheck deploy`: judging the implementer's own running service, not an adapter. aocheck
//! starts the service (its command, its environment with the providers' addresses), drives it
//! through its own business API, lands each fault at the provider exactly as the suite does (a
//! hold at the provider, a kill of the instance whose request is parked there, a lost reply, a
//! 5xx after commit), and judges by the providers' ground-truth ledgers attributed by the rule
//! the deploy file declares (`check::deploy`). The service speaks to fake-payments' Stripe
//! dialect through whatever client it uses (the official SDKs included).
//!
//! Requirements judged at this boundary: AOC-REQ-010 and -002 (one entry per occurrence,
//! whatever the fault), AOC-REQ-011 and -009 (a reported outcome is what the ledger shows; a
//! terminal failure never inferred from a 5xx or a lost reply). The requirements that need an
//! occurrence's history (001, 003 to 008, 012, 013) are `unsupported` here: the service's
//! history is not observable through a business API.

pub mod actions;
pub mod cases;
pub mod connector;
pub mod drive;
pub mod explore;
pub mod explorer;
pub mod file;
pub mod mcp;
pub mod record;
pub mod schedule;
pub mod service;
mod shape;

pub use cases::{CASES, DeployCase, Kind, NEEDS_HISTORY, cannot_take};
pub use schedule::{Ran, Schedule, Step, run_schedule};

use crate::aoc::requirement::Req;
use crate::check::Facts;
use crate::check::deploy::{Ambiguity, Reported};
use crate::providers::holds;
use crate::report::model::{
    CaseReport, Failure, FaultReport, HarnessCause, OccurrenceReport, Report, Summary, Verdict,
};
use drive::{Observed, Vars};
use file::{Loaded, Outcome};
use provider_model::payments::faults::{Fault, Op, Rule};
use serde_json::json;
use service::{Env, Instance};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug)]
pub struct DeployArgs {
    #[command(subcommand)]
    pub what: DeployCmd,
}

#[derive(clap::Subcommand, Debug)]
pub enum DeployCmd {
    /// Start the service a deploy file describes, run the deployment cases against it, and write
    /// the reports (report.json, junit.xml, report.sarif, summary.md, report.html).
    Run(RunArgs),
    /// Check a deploy file: every defect at once, with the field and the fix.
    Check { file: PathBuf },
    /// Try seeded random fault schedules against the service; shrink the first that fails to
    /// a schedule file `run --schedule` replays.
    Explore(explore::ExploreArgs),
}

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// The deploy file (`aocheck-deploy.yaml`).
    pub file: PathBuf,
    /// Where the reports and the service's logs go (default `reports/runs/deploy-<name>`).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Run only the cases with these ids (repeatable), e.g. `--case DEPLOY-001`.
    #[arg(long = "case", conflicts_with = "schedule")]
    pub cases: Vec<String>,
    /// Run this schedule (a file `deploy explore` wrote) instead of the cases.
    #[arg(long)]
    pub schedule: Option<PathBuf>,
}

const ACCOUNT_KEY: &str = "sk_test_a";
/// The provider account `ACCOUNT_KEY` opens.
const ACCOUNT: &str = "acct_a";
/// How late the real events come in the webhook case.
const WEBHOOK_DELAY_MS: u64 = 1500;

/// The providers of one run, in process, on loopback.
#[derive(Debug)]
pub struct Providers {
    payments: crate::providers::Payments,
    payments_url: String,
    hermes_url: Option<String>,
    /// fake-hermes (a connector, or a service whose environment names it) and its API key.
    hermes: Option<(crate::providers::Hermes, String)>,
    /// fake-mcp (a service whose effects are tool calls) and its MCP endpoint.
    mcp: Option<crate::providers::Mcp>,
    mcp_url: Option<String>,
    /// The webhook endpoint's signing secret in this run (fresh per run).
    webhook_secret: String,
}

impl Providers {
    /// What the placeholders of a service's environment stand for in a case whose store is
    /// the folder `work` (absolute, so that it stays right in the deploy file's folder).
    pub fn env(&self, work: &Path) -> Env {
        Env {
            payments_url: self.payments_url.clone(),
            payments_key: ACCOUNT_KEY.into(),
            webhook_secret: self.webhook_secret.clone(),
            hermes_url: self.hermes_url.clone(),
            hermes_key: self.hermes.as_ref().map(|(_, k)| k.clone()),
            mcp_url: self.mcp_url.clone(),
            store_dir: std::fs::canonicalize(work).unwrap_or_else(|_| work.to_path_buf()),
        }
    }
}

/// fake-payments, and fake-hermes when the service's environment names it.
async fn start_providers(d: &Loaded) -> Result<Providers, String> {
    // A control token nobody can know: the service must not reach the ground truth's control
    // plane (every attempt is logged and makes the case undecided).
    let mut config = provider_model::payments::config::Config::example();
    config.control_token = format!("ctl_{}", uuid::Uuid::new_v4().simple());
    let payments = crate::providers::start_payments(config).await?;
    let (hermes_url, hermes) = if d.needs_hermes() {
        // Credentials nobody else knows: the API key is the connector's (given in its
        // environment), the control token is aocheck's alone.
        let config = provider_model::hermes::config::Config {
            api_key: format!("hk_{}", uuid::Uuid::new_v4().simple()),
            control_token: format!("ctl_{}", uuid::Uuid::new_v4().simple()),
            ..provider_model::hermes::config::Config::default()
        };
        crate::secrets::register(&config.api_key);
        let key = config.api_key.clone();
        let h = crate::providers::start_hermes(config, None).await?;
        (Some(h.url), Some((h.handle, key)))
    } else {
        (None, None)
    };
    let (mcp_url, mcp) = if d.needs_mcp() {
        // Its control token is aocheck's alone, as fake-payments'.
        let m = crate::providers::start_mcp(
            provider_model::mcp::tools::default_tools(),
            format!("ctl_{}", uuid::Uuid::new_v4().simple()),
        )
        .await?;
        (Some(m.url), Some(m.handle))
    } else {
        (None, None)
    };
    let (payments, payments_url) = (payments.handle, payments.url);
    Ok(Providers {
        payments,
        payments_url,
        hermes_url,
        hermes,
        mcp,
        mcp_url,
        webhook_secret: {
            let w = format!("whsec_{}", uuid::Uuid::new_v4().simple());
            crate::secrets::register(&w);
            w
        },
    })
}

/// `aocheck deploy …`; returns the exit code.
pub async fn deploy_cmd(a: DeployArgs) -> u8 {
    match a.what {
        DeployCmd::Check { file } => match file::load(&file) {
            Ok(l) => {
                println!("{}: ok ({})", file.display(), l.file.name);
                crate::exit::OK
            }
            Err(d) => {
                for x in d {
                    eprintln!("{x}");
                }
                crate::exit::INVALID_INPUT
            }
        },
        DeployCmd::Run(r) => run_cmd(r).await,
        DeployCmd::Explore(e) => explore::explore_cmd(e).await,
    }
}

async fn run_cmd(a: RunArgs) -> u8 {
    let started = Instant::now();
    let loaded = match file::load(&a.file) {
        Ok(l) => l,
        Err(d) => {
            for x in d {
                eprintln!("{x}");
            }
            return crate::exit::INVALID_INPUT;
        }
    };
    let ids: Vec<&str> = cases_of(loaded.file.provider).iter().map(|c| c.0).collect();
    for c in &a.cases {
        if !ids.contains(&c.as_str()) {
            eprintln!(
                "--case {c}: no such case for this deploy file's provider; one of {}",
                ids.join(", ")
            );
            return crate::exit::INVALID_INPUT;
        }
    }
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| default_out(&loaded.file.name, a.schedule.as_deref()));
    if let Err(e) = prepare_out(&out) {
        eprintln!("{e}");
        return crate::exit::INVALID_INPUT;
    }
    // Interrupted, the run's future is dropped, and with it every instance it started (each is
    // killed with its group and whatever carries its mark).
    let report = tokio::select! {
        r = run_report(&loaded, &out, &a) => r,
        _ = tokio::signal::ctrl_c() => {
            eprintln!("interrupted: every instance stopped; no report written");
            return crate::exit::INCOMPLETE;
        }
    };
    let report = match report {
        Ok(r) => r,
        Err(code) => return code,
    };
    if let Err(e) = crate::ci::write_reports(&report, &out, None) {
        eprintln!("cannot write the reports in {}: {e}", out.display());
        return crate::exit::UNREACHABLE;
    }
    for c in &report.cases {
        println!(
            "{:<11} {:<17} {}",
            c.id,
            c.verdict.label(),
            crate::report::model::one_line(&c.reasons(), usize::MAX)
        );
    }
    println!(
        "deploy {}: {} pass, {} fail, {} other in {:.1} s; reports in {}",
        loaded.file.name,
        report.summary.pass,
        report.summary.fail,
        report.summary.other,
        started.elapsed().as_secs_f64(),
        out.display()
    );
    exit_code(&report)
}

/// Where `deploy run` writes without `--out`: `reports/runs/deploy-<name>`, and for the replay
/// of a schedule file a folder of its own named for it, so a replay never overwrites the full
/// run's reports.
fn default_out(name: &str, schedule: Option<&Path>) -> PathBuf {
    let base = format!("deploy-{name}");
    PathBuf::from("reports/runs").join(match schedule.and_then(|f| f.file_stem()) {
        Some(stem) => format!("{base}-replay-{}", stem.to_string_lossy()),
        None => base,
    })
}

/// `deploy run`'s exit code: `exit::of_report` over the deployment's own cases. DEPLOY-HISTORY
/// is `unsupported` at this boundary by construction and stays so in every report; it does not
/// make every run of a deployment undecided (D71).
pub fn exit_code(report: &Report) -> u8 {
    let mut judged = report.clone();
    judged.cases.retain(|c| c.id != "DEPLOY-HISTORY");
    crate::exit::of_report(&judged)
}

/// The run `deploy run` asked for: its cases, or a schedule file (`Err`: the exit code).
async fn run_report(loaded: &Loaded, out: &Path, a: &RunArgs) -> Result<Report, u8> {
    let Some(f) = &a.schedule else {
        return Ok(run(loaded, out, &a.cases, &mut |line| eprintln!("{line}")).await);
    };
    use explorer::Explorer;
    let refused = |e: String| {
        eprintln!("{e}");
        crate::exit::INVALID_INPUT
    };
    // The schedule is read (and refused) before any provider starts.
    match loaded.file.provider {
        file::ProviderKind::Payments => {
            let s = explore::Orders::read(loaded, f).map_err(refused)?;
            let p = providers_for_replay(loaded).await?;
            replay(&explore::Orders { d: loaded, p: &p }, s, out, f).await
        }
        file::ProviderKind::Hermes => {
            let s = connector::explore::Actions::read(loaded, f).map_err(refused)?;
            let p = providers_for_replay(loaded).await?;
            replay(&connector::explore::Actions::new(loaded, &p), s, out, f).await
        }
        file::ProviderKind::Mcp => {
            let s = mcp::Calls::read(loaded, f).map_err(refused)?;
            let p = providers_for_replay(loaded).await?;
            replay(&mcp::Calls::new(loaded, &p), s, out, f).await
        }
    }
}

/// A provider's deployment cases: id, title, requirements.
pub fn cases_of(kind: file::ProviderKind) -> Vec<(&'static str, &'static str, &'static [Req])> {
    match kind {
        file::ProviderKind::Payments => CASES
            .iter()
            .map(|c| (c.id, c.title, c.requirements))
            .collect(),
        file::ProviderKind::Hermes => connector::CASES
            .iter()
            .map(|c| (c.id, c.title, c.requirements))
            .collect(),
        file::ProviderKind::Mcp => mcp::CASES
            .iter()
            .map(|c| (c.id, c.title, c.requirements))
            .collect(),
    }
}

async fn providers_for_replay(loaded: &Loaded) -> Result<Providers, u8> {
    start_providers(loaded).await.map_err(|e| {
        eprintln!("providers: {e}");
        crate::exit::UNREACHABLE
    })
}

/// `deploy run --schedule F`: the schedule's orders or actions, as one case.
async fn replay<E: explorer::Explorer>(
    e: &E,
    schedule: E::S,
    out: &Path,
    f: &Path,
) -> Result<Report, u8> {
    eprintln!("schedule {} …", e.describe(&schedule));
    let ran = e
        .run(
            &schedule,
            &out.join(WORK).join("schedule"),
            &out.join(LOGS).join("schedule"),
        )
        .await;
    let mut report = e.report(&schedule, ran, f);
    for c in report.cases.iter_mut().filter(|c| c.id != "DEPLOY-HISTORY") {
        c.logs = logs_under(out, &Path::new(LOGS).join("schedule"));
    }
    Ok(report)
}

/// The log files under `out/rel`, as paths relative to `out` (for the page's links).
fn logs_under(out: &Path, rel: &Path) -> Vec<String> {
    let mut found: Vec<String> = std::fs::read_dir(out.join(rel))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().is_file())
        .map(|e| rel.join(e.file_name()).to_string_lossy().replace('\\', "/"))
        .collect();
    found.sort();
    found
}

/// The folders a deploy run keeps the service's logs and stores in, under `--out`.
pub const LOGS: &str = "deploy-logs";
pub const WORK: &str = "deploy-work";

fn prepare_out(out: &Path) -> Result<(), String> {
    std::fs::create_dir_all(out).map_err(|e| format!("--out {}: {e}", out.display()))?;
    crate::ci::clear_outputs(out)?;
    for d in [LOGS, WORK, "explore.json", "shrunk.yaml"] {
        crate::ci::remove_output(&out.join(d))?;
    }
    Ok(())
}

/// Runs the deployment cases (all, or those named) and builds the report.
pub async fn run(
    d: &Loaded,
    out: &Path,
    only: &[String],
    progress: &mut dyn FnMut(String),
) -> Report {
    let mut cases = Vec::new();
    let mut seen_agents = BTreeSet::new();
    let mut seen_versions = BTreeSet::new();
    match start_providers(d).await {
        Err(e) => {
            for (id, title, reqs) in cases_of(d.file.provider)
                .into_iter()
                .filter(|(id, _, _)| only.is_empty() || only.iter().any(|o| o == id))
            {
                let c = case_shell(d, id, title, reqs);
                cases.push(c.harness_error(format!("providers: {e}"), Instant::now()));
            }
        }
        Ok(p) if d.file.provider == file::ProviderKind::Hermes => {
            for c in connector::CASES
                .iter()
                .filter(|c| only.is_empty() || only.iter().any(|o| o == c.id))
            {
                progress(format!("{} {} …", c.id, c.title));
                let mut report = case_shell(d, c.id, c.title, c.requirements);
                if !c.verify.is_empty() {
                    report.title = format!("{} ({})", c.title, c.verify);
                }
                let r = connector::run_case(d, c, &p, out, report).await;
                progress(ended(&r));
                cases.push(r);
            }
        }
        Ok(p) if d.file.provider == file::ProviderKind::Mcp => {
            for c in mcp::CASES
                .iter()
                .filter(|c| only.is_empty() || only.iter().any(|o| o == c.id))
            {
                progress(format!("{} {} …", c.id, c.title));
                let report = case_shell(d, c.id, c.title, c.requirements);
                let r = mcp::run_case(d, c, &p, out, report).await;
                progress(ended(&r));
                cases.push(r);
            }
        }
        Ok(p) => {
            for c in CASES
                .iter()
                .filter(|c| only.is_empty() || only.iter().any(|o| o == c.id))
            {
                progress(format!("{} {} …", c.id, c.title));
                let (r, agents, versions) = run_case(d, c, &p, out).await;
                seen_agents.extend(agents);
                seen_versions.extend(versions);
                progress(ended(&r));
                cases.push(r);
            }
        }
    }
    cases.extend(history_case(d, &cases));
    assemble(d, cases, seen_agents, seen_versions)
}

/// A deployment case's report before it runs: its file's digest, the key rule, how to replay
/// it (a case of any provider).
fn case_shell(d: &Loaded, id: &str, title: &str, reqs: &[Req]) -> CaseReport {
    let mut r = CaseReport::new(
        id,
        title,
        &d.path,
        reqs.iter().map(|r| r.to_string()).collect(),
    );
    r.file_sha256 = d.sha256.clone();
    r.key_rule = d.file.attribution.as_ref().map(file::Attribution::describe);
    r.repro = format!("aocheck deploy run {} --case {id}", d.path.display());
    r
}

/// A case's closing progress line.
fn ended(r: &CaseReport) -> String {
    format!(
        "{} {} ({:.1} s)",
        r.id,
        r.verdict.label(),
        r.millis as f64 / 1000.0
    )
}

/// The report of a run's cases (the history case included).
fn assemble(
    d: &Loaded,
    mut cases: Vec<CaseReport>,
    agents: BTreeSet<String>,
    versions: BTreeSet<String>,
) -> Report {
    let implementation = json!({
        "kind": "deployment",
        "name": d.file.name,
        "deploy_file": d.path.display().to_string(),
        "deploy_file_sha256": d.sha256,
        "command": crate::secrets::redact_command(&d.file.service.command.join(" ")),
        "instances": d.file.service.instances,
        "kill": match d.file.service.kill {
            file::KillMode::Cgroup => "cgroup",
            file::KillMode::ProcessGroup => "process_group",
        },
        "attribution": d.file.attribution.as_ref().map(file::Attribution::describe),
        "user_agents_seen": agents,
        "stripe_versions_seen": versions,
    });
    for c in cases.iter_mut() {
        c.implementation = Some(implementation.clone());
    }
    Report {
        schema: crate::report::model::SCHEMA.into(),
        run_id: uuid::Uuid::new_v4().to_string(),
        seed: 0,
        started_at: {
            use crate::clock::Clock as _;
            crate::clock::SystemClock.now().0.to_string()
        },
        aocheck_version: crate::VERSION.into(),
        implementation,
        provider_profile: None,
        store: json!({"kind": "the service's own"}),
        test_input_digest: format!("sha256:{}", d.sha256),
        requirements: crate::runner::aggregate(&cases),
        summary: Summary::of(&cases),
        cases,
        disclaimer: crate::report::model::DISCLAIMER_THIRD_PARTY.into(),
        incomplete: None,
        shard: None,
        expectations: None,
    }
}

/// Reads a schedule file (`deploy explore` writes one).
pub fn read_schedule(f: &Path) -> Result<Schedule, String> {
    let text = std::fs::read_to_string(f).map_err(|e| format!("{}: {e}", f.display()))?;
    let s: Schedule = serde_saphyr::from_str(&text).map_err(|e| {
        format!(
            "{}: {e} (a schedule is `steps: [{{occurrence: ID, fault: crash_at_hold | lost_reply | error_after_commit | resubmit | takeover | webhooks | null}}]`)",
            f.display()
        )
    })?;
    let mut seen = BTreeSet::new();
    for (i, st) in s.steps.iter().enumerate() {
        if st.occurrence.is_empty() || !seen.insert(st.occurrence.clone()) {
            return Err(format!(
                "{}: steps[{i}].occurrence: give each order its own non-empty id",
                f.display()
            ));
        }
    }
    if s.steps.is_empty() {
        return Err(format!("{}: steps: give at least one order", f.display()));
    }
    Ok(s)
}

/// The report of one schedule run as a case (`DEPLOY-SCHEDULE`).
pub fn schedule_report(d: &Loaded, s: &Schedule, ran: Ran, file: &Path) -> Report {
    let mut reqs = vec![Req::R010, Req::R002, Req::R011];
    if s.steps.iter().any(|st| {
        matches!(
            st.fault,
            Some(Kind::LostReply | Kind::ErrorAfterCommit | Kind::Webhooks)
        )
    }) {
        reqs.push(Req::R009);
    }
    let mut c = CaseReport::new(
        "DEPLOY-SCHEDULE",
        &format!("Schedule {}", explore::describe(s)),
        &d.path,
        reqs.iter().map(|r| r.to_string()).collect(),
    );
    c.file_sha256 = d.sha256.clone();
    c.key_rule = d.file.attribution.as_ref().map(file::Attribution::describe);
    c.repro = format!(
        "aocheck deploy run {} --schedule {}",
        d.path.display(),
        file.display()
    );
    let (agents, versions) = (ran.agents.clone(), ran.versions.clone());
    let c = case_report(d, c, &reqs, ran);
    let mut cases = vec![c];
    cases.extend(history_case(d, &cases));
    assemble(d, cases, agents, versions)
}

fn new_case(d: &Loaded, c: &DeployCase) -> CaseReport {
    case_shell(d, c.id, c.title, c.requirements)
}

/// The requirements this boundary did not judge, as one `unsupported` case that says why:
/// without a report route every requirement about the history; with one, those no case's
/// record gave a fact about (a release, a remedy, a claim), or none at all.
fn history_case(d: &Loaded, cases: &[CaseReport]) -> Option<CaseReport> {
    let judged = |r: &Req| {
        cases
            .iter()
            .any(|c| c.requirements.iter().any(|x| x == r.id()))
    };
    let left: Vec<Req> = if d.file.drive.report.is_some() {
        NEEDS_HISTORY.into_iter().filter(|r| !judged(r)).collect()
    } else {
        NEEDS_HISTORY.to_vec()
    };
    if left.is_empty() {
        return None;
    }
    let mut r = CaseReport::new(
        "DEPLOY-HISTORY",
        "Requirements that need the occurrence's history",
        &d.path,
        left.iter().map(|r| r.to_string()).collect(),
    );
    r.verdict = Verdict::Unsupported;
    r.unsupported = Some(if d.file.provider == file::ProviderKind::Mcp {
        "a service whose effects are MCP tool calls is observed through its own API and fake-mcp's ledger; these requirements are about each action's history (its durable binding, generations, evidence), which aocheck does not read from it".into()
    } else if d.file.provider == file::ProviderKind::Hermes {
        "a connector is observed through its own API and fake-hermes' ledger; these requirements are about each action's history (its durable binding, start claim, generations), which aocheck does not read from a running connector yet".into()
    } else if d.file.drive.report.is_some() {
        "the service's record (drive.report) was judged at every look, but no case's record held a fact about these requirements (no release, no remedy or adjustment, no statement about the implementation: a deployment case exercises none of them)".into()
    } else {
        "a deployment is observed through its business API and the providers' ledgers; these requirements are about the occurrence's history (binding before entry, append-only evidence, fencing, release, adjustments), which this deploy file exposes through no report route (`drive.report`)".into()
    });
    Some(r)
}

/// The occurrence a creation belongs to, by the declared attribution.
fn owner_of(
    d: &Loaded,
    payments: &crate::providers::Payments,
    payment: &str,
    key: Option<&str>,
) -> Option<String> {
    let a = d.file.attribution.as_ref()?;
    if let Some(t) = &a.idempotency_key {
        let (pre, post) = t.split_once("{occurrence}")?;
        let k = key?;
        let o = k.strip_prefix(pre)?.strip_suffix(post)?;
        return (!o.is_empty()).then(|| o.to_string());
    }
    let field = a.metadata.as_ref()?;
    payments.payment(payment)?["metadata"][field]
        .as_str()
        .map(str::to_string)
}

/// A case: its schedule run and judged (with the clients and API versions seen on the wire).
async fn run_case(
    d: &Loaded,
    c: &DeployCase,
    p: &Providers,
    out: &Path,
) -> (CaseReport, BTreeSet<String>, BTreeSet<String>) {
    let schedule = Schedule {
        steps: vec![Step {
            occurrence: format!("{}-o1", c.id.to_lowercase()),
            fault: Some(c.kind),
        }],
    };
    let mut report = new_case(d, c);
    if let Some(why) = cannot_take(d, c.kind) {
        report.verdict = Verdict::Unsupported;
        report.unsupported = Some(why);
        return (report, BTreeSet::new(), BTreeSet::new());
    }
    let ran = run_schedule(
        d,
        p,
        &out.join(WORK).join(c.id),
        &out.join(LOGS).join(c.id),
        &schedule,
    )
    .await;
    let (agents, versions) = (ran.agents.clone(), ran.versions.clone());
    let mut report = case_report(d, report, c.requirements, ran);
    report.logs = logs_under(out, &Path::new(LOGS).join(c.id));
    (report, agents, versions)
}

/// A case's report from what running its schedule gave.
pub fn case_report(
    d: &Loaded,
    mut report: CaseReport,
    requirements: &[Req],
    ran: Ran,
) -> CaseReport {
    report.steps = ran.steps;
    report.timeline = crate::report::story::svg(&report.id, &ran.beats);
    report.faults = ran.faults;
    report.millis = ran.millis;
    if let Some((cause, msg)) = ran.undecided {
        report.verdict = Verdict::HarnessError;
        report.harness = Some(msg);
        report.harness_cause = Some(cause);
        return report;
    }
    for f in &ran.findings {
        crate::check::replay::push_failure(
            &mut report.failures,
            Failure {
                requirement: f.requirement(),
                step: None,
                msg: f.line(),
            },
        );
    }
    for (i, ((r, o), entries)) in ran
        .reported
        .iter()
        .zip(&ran.observed)
        .zip(&ran.entries)
        .enumerate()
    {
        let mut missing = Vec::new();
        if d.file.attribution.is_none() {
            missing.push(
                "no attribution declared: the provider's entries cannot be placed under occurrences"
                    .to_string(),
            );
        }
        if r.outcome.is_none() {
            missing.push(match ran.watched_ms {
                Some(ms) => format!(
                    "the service still reported {:?} when the case's watch ended ({ms} ms, before the file's deadline)",
                    r.label
                ),
                None => format!(
                    "the service still reported {:?} at the deadline ({} ms)",
                    r.label, d.file.drive.deadline_ms
                ),
            });
        }
        if r.outcome == Some("unknown") {
            missing.push(format!(
                "the service reports {:?}: it cannot know the outcome from the evidence it has (honest caution, no outcome claimed)",
                r.label
            ));
        }
        let rec = ran.record.as_ref().and_then(|s| s.last.get(&r.occurrence));
        match (&ran.record, rec) {
            // Without a route nothing is missing from the service's knowledge: the history
            // was not asked for, which DEPLOY-HISTORY says once for the run.
            (None, _) => {}
            (Some(_), None) => missing
                .push("the report route served no usable record of this order at any look".into()),
            (Some(_), Some(a)) => missing.extend(
                a.report
                    .missing_knowledge
                    .iter()
                    .map(|m| format!("the service's record: {m}")),
            ),
        }
        let mut sources = vec![
            "the service's status route (drive.status)".to_string(),
            format!("{} ground-truth ledger", d.file.provider.simulator()),
        ];
        if rec.is_some() {
            sources.push("the service's record (drive.report)".into());
        }
        report.occurrences.push(OccurrenceReport {
            label: r.occurrence.clone(),
            occurrence_id: r.occurrence.clone(),
            executor_generation: rec.map_or(0, |a| a.report.executor_generation),
            provider_binding_digest: rec.and_then(|a| a.report.binding_digest.clone()),
            state: if let Some(a) = rec {
                a.report.state
            } else if r.outcome.is_some_and(|o| o != "unknown") {
                crate::vocab::State::Resolved
            } else {
                crate::vocab::State::Unresolved
            },
            outcome: match o.as_ref().map(|o| o.outcome) {
                Some(Outcome::Success) => Some(crate::vocab::Outcome::Success),
                Some(Outcome::NotAccepted) => Some(crate::vocab::Outcome::NotAccepted),
                Some(Outcome::FinalFailure) => Some(crate::vocab::Outcome::FinalFailure),
                _ => None,
            },
            provider_entry_state: if *entries > 0 {
                "entered".into()
            } else {
                "not_entered".into()
            },
            authority_state: rec.map_or(crate::vocab::Authority::Consumed, |a| a.report.authority),
            entry_attempts: *entries,
            evidence_sources: sources,
            missing_knowledge: missing,
            provider_effects: ran.effects.get(i).copied().unwrap_or(*entries),
            history_len: rec.map_or(0, |a| a.entries.len() as u64),
        });
    }
    // With the service's record, a case also answers for every history requirement its looks
    // examined (a fact each); the others stay with DEPLOY-HISTORY.
    let mut requirements = requirements.to_vec();
    if ran.record.is_some() {
        for r in Req::ALL {
            if ran.facts.count(r) > 0 && !requirements.contains(&r) {
                requirements.push(r);
            }
        }
        requirements.sort();
        report.requirements = requirements.iter().map(|r| r.to_string()).collect();
    }
    report.facts = ran.facts.by_id();
    report.not_established = requirements
        .iter()
        .filter(|r| ran.facts.count(**r) == 0)
        .map(|r| r.to_string())
        .collect();
    // What the record could not show for want of being served is not established, whatever
    // else was examined (the order's row says why).
    for (occ, req, why) in ran.record.iter().flat_map(|s| s.blind.iter()) {
        if requirements.contains(req) && !report.not_established.contains(&req.to_string()) {
            report.not_established.push(req.to_string());
        }
        if let Some(o) = report
            .occurrences
            .iter_mut()
            .find(|o| o.occurrence_id == *occ)
        {
            o.missing_knowledge
                .push(format!("the service's record ({req}): {why}"));
        }
    }
    if report.failures.is_empty()
        && let Some(f) = report.faults.iter().find(|f| !f.fired)
    {
        // A case whose fault did not act is never a pass, whatever else held.
        report.verdict = Verdict::HarnessError;
        report.harness = Some(format!(
            "a declared fault did not act ({}): the case exercised nothing",
            f.what
        ));
        report.harness_cause = Some(HarnessCause::Undecided);
        return report;
    }
    report.verdict = if !report.failures.is_empty() {
        Verdict::Fail
    } else if !report.not_established.is_empty() {
        Verdict::MissingKnowledge
    } else {
        Verdict::Pass
    };
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deploy's faults are the provider model's: each choreography's fault is one the provider
    /// applies to a payment creation (where every deploy rule is armed), and every kind has its
    /// case.
    #[test]
    fn every_kind_is_a_provider_fault_at_creation_and_has_a_case() {
        for k in Kind::ALL {
            let f = k.fault("deploy-0");
            assert!(
                f.kind().applies(Op::Create),
                "{k}: {f:?} does not apply to a creation"
            );
            assert_eq!(schedule::rule(f).op, Op::Create);
            assert!(CASES.iter().any(|c| c.kind == *k), "{k} has no case");
            assert_eq!(Kind::parse(k.name()), Some(*k));
        }
    }

    /// The case report's own guard (D78): a fault that did not act and nothing failed is never
    /// a pass, even when the run itself left nothing in `undecided` (a failure found anyway
    /// stands: `deploy_hostile::an_attribution_that_misses_shows_both_charges_and_the_rule`).
    #[test]
    fn a_case_whose_fault_did_not_act_is_never_a_pass() {
        let d = file::load(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/shop-keyed/aocheck-deploy.yaml"),
        )
        .unwrap_or_else(|e| panic!("{e:?}"));
        let ran = |findings: Vec<crate::check::Finding>| Ran {
            faults: vec![FaultReport {
                what: "order o1: its first payment creation meets lost_reply".into(),
                fired: false,
            }],
            findings,
            ..Ran::default()
        };
        let c = case_report(
            &d,
            new_case(&d, &CASES[1]),
            CASES[1].requirements,
            ran(vec![]),
        );
        assert_eq!(c.verdict, Verdict::HarnessError);
        assert!(
            c.harness
                .as_deref()
                .is_some_and(|h| h.contains("did not act"))
        );
    }

    #[test]
    fn a_replay_never_writes_over_the_full_runs_folder() {
        let full = default_out("shop", None);
        let replay = default_out("shop", Some(Path::new("reports/x/shrunk.yaml")));
        assert_eq!(full, Path::new("reports/runs/deploy-shop"));
        assert_eq!(replay, Path::new("reports/runs/deploy-shop-replay-shrunk"));
        assert!(!replay.starts_with(&full));
    }

    #[test]
    fn every_case_names_requirements_this_boundary_can_establish() {
        for c in CASES {
            for r in c.requirements {
                assert!(
                    [Req::R002, Req::R009, Req::R010, Req::R011].contains(r),
                    "{}: {r}",
                    c.id
                );
            }
        }
    }
}
