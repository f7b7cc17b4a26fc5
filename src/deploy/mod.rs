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

pub mod drive;
pub mod explore;
pub mod file;
pub mod service;

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

/// The faults that make sense at a deployment's boundary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    CrashAtHold,
    LostReply,
    ErrorAfterCommit,
    Resubmit,
    Takeover,
    /// A 5xx after commit, then the real event late and twice, and a forged failure first.
    Webhooks,
}

#[derive(Debug)]
pub struct DeployCase {
    pub id: &'static str,
    pub title: &'static str,
    pub kind: Kind,
    pub requirements: &'static [Req],
}

pub const CASES: [DeployCase; 6] = [
    DeployCase {
        id: "DEPLOY-001",
        title: "The instance is killed while the provider holds its entry; the provider then commits",
        kind: Kind::CrashAtHold,
        requirements: &[Req::R010, Req::R002, Req::R011],
    },
    DeployCase {
        id: "DEPLOY-002",
        title: "The provider commits and the reply is lost (connection closed)",
        kind: Kind::LostReply,
        requirements: &[Req::R010, Req::R011, Req::R009],
    },
    DeployCase {
        id: "DEPLOY-003",
        title: "The provider commits and answers 500",
        kind: Kind::ErrorAfterCommit,
        requirements: &[Req::R010, Req::R011, Req::R009],
    },
    DeployCase {
        id: "DEPLOY-004",
        title: "The same order is submitted again while its entry is held at the provider",
        kind: Kind::Resubmit,
        requirements: &[Req::R010, Req::R002, Req::R011],
    },
    DeployCase {
        id: "DEPLOY-005",
        title: "A second instance takes over from one killed while the provider holds its entry",
        kind: Kind::Takeover,
        requirements: &[Req::R010, Req::R011],
    },
    DeployCase {
        id: "DEPLOY-006",
        title: "A 5xx after commit; the real webhook comes late and twice, a forged failure first",
        kind: Kind::Webhooks,
        requirements: &[Req::R010, Req::R011, Req::R009],
    },
];

/// The requirements that need the occurrence's history, which a business API does not show.
pub const NEEDS_HISTORY: [Req; 9] = [
    Req::R001,
    Req::R003,
    Req::R004,
    Req::R005,
    Req::R006,
    Req::R007,
    Req::R008,
    Req::R012,
    Req::R013,
];

const ACCOUNT_KEY: &str = "sk_test_a";
/// How late the real events come in the webhook case.
const WEBHOOK_DELAY_MS: u64 = 1500;

/// The providers of one run, in process, on loopback.
#[derive(Debug)]
pub struct Providers {
    payments: crate::providers::Payments,
    payments_url: String,
    hermes_url: Option<String>,
    /// The webhook endpoint's signing secret in this run (fresh per run).
    webhook_secret: String,
}

/// fake-payments, and fake-hermes when the service's environment names it.
async fn start_providers(d: &Loaded) -> Result<Providers, String> {
    // A control token nobody can know: the service must not reach the ground truth's control
    // plane (every attempt is logged and makes the case undecided).
    let mut config = provider_model::payments::config::Config::example();
    config.control_token = format!("ctl_{}", uuid::Uuid::new_v4().simple());
    let payments = crate::providers::start_payments(config).await?;
    let hermes_url = if d.needs_hermes() {
        let h =
            crate::providers::start_hermes(provider_model::hermes::config::Config::default(), None)
                .await?;
        Some(h.url)
    } else {
        None
    };
    let (payments, payments_url) = (payments.handle, payments.url);
    Ok(Providers {
        payments,
        payments_url,
        hermes_url,
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
    for c in &a.cases {
        if !CASES.iter().any(|k| k.id == c) {
            eprintln!(
                "--case {c}: no such deployment case; one of {}",
                CASES.map(|k| k.id).join(", ")
            );
            return crate::exit::INVALID_INPUT;
        }
    }
    let out = a.out.clone().unwrap_or_else(|| {
        PathBuf::from("reports/runs").join(format!("deploy-{}", loaded.file.name))
    });
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
            crate::report::model::one_line(&c.reasons(), 300)
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
    let schedule = read_schedule(f).map_err(|e| {
        eprintln!("{e}");
        crate::exit::INVALID_INPUT
    })?;
    for (i, st) in schedule.steps.iter().enumerate() {
        if let Some(why) = st.fault.and_then(|k| cannot_take(loaded, k)) {
            eprintln!("{}: steps[{i}].fault: {why}", f.display());
            return Err(crate::exit::INVALID_INPUT);
        }
    }
    let p = start_providers(loaded).await.map_err(|e| {
        eprintln!("providers: {e}");
        crate::exit::UNREACHABLE
    })?;
    eprintln!("schedule {} …", explore::describe(&schedule));
    let ran = run_schedule(
        loaded,
        &p,
        &out.join(WORK).join("schedule"),
        &out.join(LOGS).join("schedule"),
        &schedule,
    )
    .await;
    Ok(schedule_report(loaded, &schedule, ran, f))
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
            for c in CASES
                .iter()
                .filter(|c| only.is_empty() || only.iter().any(|o| o == c.id))
            {
                cases.push(new_case(d, c).harness_error(format!("providers: {e}"), Instant::now()));
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
                progress(format!(
                    "{} {} ({:.1} s)",
                    c.id,
                    r.verdict.label(),
                    r.millis as f64 / 1000.0
                ));
                cases.push(r);
            }
        }
    }
    cases.push(history_case(d));
    assemble(d, cases, seen_agents, seen_versions)
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
    if s.steps
        .iter()
        .any(|st| matches!(st.fault, Some(Kind::LostReply | Kind::ErrorAfterCommit)))
    {
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
    assemble(d, vec![c, history_case(d)], agents, versions)
}

fn new_case(d: &Loaded, c: &DeployCase) -> CaseReport {
    let mut r = CaseReport::new(
        c.id,
        c.title,
        &d.path,
        c.requirements.iter().map(|r| r.to_string()).collect(),
    );
    r.file_sha256 = d.sha256.clone();
    r.key_rule = d.file.attribution.as_ref().map(file::Attribution::describe);
    r.repro = format!("aocheck deploy run {} --case {}", d.path.display(), c.id);
    r
}

/// The requirements this boundary cannot judge, as one `unsupported` case that says why.
fn history_case(d: &Loaded) -> CaseReport {
    let mut r = CaseReport::new(
        "DEPLOY-HISTORY",
        "Requirements that need the occurrence's history",
        &d.path,
        NEEDS_HISTORY.iter().map(|r| r.to_string()).collect(),
    );
    r.verdict = Verdict::Unsupported;
    r.unsupported = Some(
        "a deployment is observed through its business API and the providers' ledgers; these requirements are about the occurrence's history (binding before entry, append-only evidence, fencing, release, adjustments), which this deploy file exposes through no report route".into(),
    );
    r
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

fn rule(fault: Fault) -> Rule {
    Rule {
        op: Op::Create,
        nth: 1,
        times: 1,
        account: None,
        key: None,
        fault,
    }
}

/// The provider's hold that parks step `k`'s entry.
fn hold_name(k: usize) -> String {
    format!("deploy-{k}")
}

/// One order of a schedule, and the fault its first payment creation meets.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    pub occurrence: String,
    #[serde(default)]
    pub fault: Option<Kind>,
}

/// Orders submitted one after another, each watched until its outcome is final and settled.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Schedule {
    pub steps: Vec<Step>,
}

impl Kind {
    fn fault(self, hold: &str) -> Fault {
        match self {
            Kind::CrashAtHold | Kind::Resubmit | Kind::Takeover => {
                Fault::Hold { name: hold.into() }
            }
            Kind::LostReply => Fault::CommitThenDrop,
            Kind::ErrorAfterCommit | Kind::Webhooks => Fault::CommitThen { status: 500 },
        }
    }
    fn ambiguity(self) -> Ambiguity {
        match self {
            Kind::LostReply => Ambiguity::Dropped,
            Kind::ErrorAfterCommit | Kind::Webhooks => Ambiguity::ErrorAfterCommit,
            _ => Ambiguity::None,
        }
    }
    pub fn label(self) -> &'static str {
        match self {
            Kind::CrashAtHold => "crash_at_hold",
            Kind::LostReply => "lost_reply",
            Kind::ErrorAfterCommit => "error_after_commit",
            Kind::Resubmit => "resubmit",
            Kind::Takeover => "takeover",
            Kind::Webhooks => "webhooks",
        }
    }
}

/// What running a schedule gave.
#[derive(Debug)]
pub struct Ran {
    pub steps: Vec<String>,
    pub faults: Vec<FaultReport>,
    /// Why aocheck could not decide, when it could not.
    pub undecided: Option<(HarnessCause, String)>,
    pub reported: Vec<Reported>,
    pub observed: Vec<Option<Observed>>,
    pub findings: Vec<crate::check::Finding>,
    pub facts: Facts,
    /// Provider entries per occurrence, by the declared attribution.
    pub entries: Vec<u32>,
    pub millis: u64,
    /// The clients (`User-Agent`) and API versions (`Stripe-Version`) seen on the wire.
    pub agents: BTreeSet<String>,
    pub versions: BTreeSet<String>,
}

struct Ctx<'a> {
    d: &'a Loaded,
    p: &'a Providers,
    client: reqwest::Client,
    env: Env,
    logs: PathBuf,
    steps: Vec<String>,
    started: Instant,
    next_label: u8,
}

impl Ctx<'_> {
    fn step(&mut self, s: impl Into<String>) {
        let s = s.into();
        self.steps
            .push(format!("{:>6} ms  {s}", self.started.elapsed().as_millis()));
    }
    async fn start(&mut self, label: &str) -> Result<Instance, (HarnessCause, String)> {
        let i = service::start(self.d, &self.env, label, &self.logs, &self.client)
            .await
            .map_err(|e| (HarnessCause::Unreachable, e))?;
        self.step(format!(
            "instance {label} started on port {} and ready",
            i.port
        ));
        self.point_webhook(&i.base, 0, false);
        Ok(i)
    }
    /// Points the provider's webhook endpoint at an instance (the one orders go to).
    fn point_webhook(&mut self, base: &str, delay_ms: u64, duplicate: bool) {
        if let Some(w) = &self.d.file.webhook {
            self.p
                .payments
                .set_stripe(crate::providers::StripeSettings {
                    webhook: Some(crate::providers::WebhookEndpoint {
                        url: format!("{base}{}", w.path),
                        secret: self.p.webhook_secret.clone(),
                        delay_ms,
                        duplicate,
                    }),
                    ..self.p.payments.stripe_settings()
                });
        }
    }
    fn fresh_label(&mut self) -> String {
        self.next_label += 1;
        ((b'a' + self.next_label.min(25)) as char).to_string()
    }
    async fn parked(&mut self, hold: &str) -> Result<(), (HarnessCause, String)> {
        match holds::hold(&self.p.payments, hold, Duration::from_secs(30))
            .parked()
            .await
        {
            Ok(()) => {
                self.step("the service's payment creation is parked at the provider's hold");
                Ok(())
            }
            Err(_) => Err((
                HarnessCause::Undecided,
                "the service sent no payment creation to the provider within 30 s of the order (the hold never fired)".into(),
            )),
        }
    }
    async fn kill(
        &mut self,
        i: &mut Instance,
        hold: &str,
    ) -> Result<String, (HarnessCause, String)> {
        let k = i.kill().await.map_err(|e| (HarnessCause::Unreachable, e))?;
        let gone = holds::hold(&self.p.payments, hold, Duration::from_secs(10))
            .landed()
            .await
            .is_ok();
        let how = format!(
            "{}; {}",
            k.how,
            if gone {
                "the provider saw the parked request's connection close"
            } else {
                "the parked request's connection did not close within 10 s"
            }
        );
        self.step(format!("instance {} killed: {how}", i.label));
        if !gone {
            return Err((
                HarnessCause::Undecided,
                format!("the kill was not confirmed at the provider: {how}"),
            ));
        }
        Ok(how)
    }
    /// Waits until the provider has recorded a creation beyond the first `before` effects;
    /// its payment id.
    async fn entered(&mut self, before: usize) -> Result<String, (HarnessCause, String)> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let l = self.p.payments.ledger();
            if let Some(e) =
                l.effects.iter().skip(before).find(|e| {
                    e.kind == provider_model::payments::ledger::EffectKind::PaymentCreated
                })
            {
                self.step(format!("the provider recorded the charge {}", e.payment_id));
                return Ok(e.payment_id.clone());
            }
            if Instant::now() > deadline {
                return Err((
                    HarnessCause::Undecided,
                    "the service made no payment creation within 30 s of the order".into(),
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    async fn release(&mut self, hold: &str) -> Result<(), (HarnessCause, String)> {
        let n = holds::hold(&self.p.payments, hold, Duration::from_secs(10))
            .release(provider_model::holds::ReleaseAction::Proceed)
            .await
            .map_err(|e| (HarnessCause::Undecided, e.to_string()))?;
        self.step(format!(
            "the provider commits the held request ({n} released; its client is gone)"
        ));
        Ok(())
    }
}

/// Runs a schedule against a fresh service (a fresh store folder `work`, providers reset) and
/// judges it by the ledger.
pub async fn run_schedule(
    d: &Loaded,
    p: &Providers,
    work: &Path,
    logs: &Path,
    schedule: &Schedule,
) -> Ran {
    let started = Instant::now();
    let mut ran = Ran {
        steps: Vec::new(),
        faults: Vec::new(),
        undecided: None,
        reported: Vec::new(),
        observed: Vec::new(),
        findings: Vec::new(),
        facts: Facts::default(),
        entries: Vec::new(),
        millis: 0,
        agents: BTreeSet::new(),
        versions: BTreeSet::new(),
    };
    p.payments.reset();
    for dir in [work, logs] {
        if let Err(e) = std::fs::create_dir_all(dir) {
            ran.undecided = Some((HarnessCause::Unreachable, format!("{}: {e}", dir.display())));
            return ran;
        }
    }
    // The service's store lives in a fresh folder; an absolute path, since the service runs
    // in the deploy file's folder.
    let store_dir = std::fs::canonicalize(work).unwrap_or_else(|_| work.to_path_buf());
    let client = match reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
    {
        Ok(c) => c,
        Err(e) => {
            ran.undecided = Some((HarnessCause::Unreachable, format!("http client: {e}")));
            return ran;
        }
    };
    let mut cx = Ctx {
        d,
        p,
        client,
        env: Env {
            payments_url: p.payments_url.clone(),
            payments_key: ACCOUNT_KEY.into(),
            webhook_secret: p.webhook_secret.clone(),
            hermes_url: p.hermes_url.clone(),
            store_dir,
        },
        logs: logs.to_path_buf(),
        steps: Vec::new(),
        started,
        next_label: 0,
    };
    let control_before = p.payments.control_attempts().len();
    let mut live: Vec<Instance> = Vec::new();
    let result = drive_schedule(&mut cx, schedule, &mut live, &mut ran).await;
    for i in live.drain(..) {
        i.stop().await;
    }
    ran.steps = std::mem::take(&mut cx.steps);
    ran.millis = started.elapsed().as_millis() as u64;
    // One reading of the ground truth, with every instance stopped: the faults, the clients
    // seen on the wire and the verdicts all come from it.
    let ledger = p.payments.ledger();
    for q in &ledger.requests {
        if q.dialect.is_some() {
            ran.agents.extend(q.user_agent.clone());
            ran.versions.extend(q.stripe_version.clone());
        }
    }
    // A fault counts only where it acted on a charge: the request it landed on made the
    // order's payment (a draft creation, a refused or unrelated request absorbs a rule and
    // exercises nothing the case is about).
    let rules = p.payments.rules();
    let mut taken: std::collections::BTreeMap<String, usize> = Default::default();
    for (i, st) in schedule.steps.iter().enumerate() {
        if let Some(k) = st.fault {
            let fault = k.fault(&hold_name(i));
            let label = fault.to_string();
            let rule_fired = rules.get(ran.faults.len()).is_some_and(|r| r.fired > 0);
            let nth = taken.entry(label.clone()).or_default();
            let landed = ledger
                .requests
                .iter()
                .filter(|q| q.fault.as_deref() == Some(label.as_str()))
                .nth(*nth);
            *nth += 1;
            // …and the charge it made is this order's, by the declared attribution (without
            // one, nothing can be judged anyway).
            let charged = landed.is_some_and(|q| {
                ledger.effects.iter().any(|e| {
                    e.request_seq == q.seq
                        && e.kind == provider_model::payments::ledger::EffectKind::PaymentCreated
                        && (d.file.attribution.is_none()
                            || owner_of(
                                d,
                                &p.payments,
                                &e.payment_id,
                                e.idempotency_key.as_deref(),
                            )
                            .as_deref()
                                == Some(st.occurrence.as_str()))
                })
            });
            let mut what = format!(
                "order {}: its first payment creation meets {} ({fault})",
                st.occurrence,
                k.label(),
            );
            if let Some(q) = landed.filter(|_| !charged) {
                what.push_str(&format!(
                    "; it landed on request {} ({}, status {}), which made no charge",
                    q.seq,
                    q.op.label(),
                    q.status
                ));
            }
            ran.faults.push(FaultReport {
                what,
                fired: rule_fired && charged,
            });
        }
    }
    let reached = p.payments.control_attempts();
    if let Some(why) = crate::check::credentials::control_reached(
        reached.get(control_before..).unwrap_or(&[]),
        None,
    ) {
        ran.undecided = Some((HarnessCause::Undecided, why));
    }
    if let Err(e) = result {
        ran.undecided = Some(e);
        return ran;
    }
    if ran.undecided.is_some() {
        return ran;
    }
    if let Some(f) = ran.faults.iter().find(|f| !f.fired) {
        ran.undecided = Some((
            HarnessCause::Undecided,
            format!(
                "a declared fault did not act on a charge ({}): the case exercised nothing",
                f.what
            ),
        ));
        return ran;
    }
    let owner = |pay: &str, key: Option<&str>| owner_of(d, &p.payments, pay, key);
    let owner_ref: Option<crate::check::deploy::Owner<'_>> =
        d.file.attribution.as_ref().map(|_| &owner as _);
    ran.findings = crate::check::deploy::judge(&ledger, owner_ref, &ran.reported, &mut ran.facts);
    ran.entries = ran
        .reported
        .iter()
        .map(|r| {
            ledger
                .effects
                .iter()
                .filter(|e| {
                    e.kind == provider_model::payments::ledger::EffectKind::PaymentCreated
                        && owner(&e.payment_id, e.idempotency_key.as_deref()).as_deref()
                            == Some(r.occurrence.as_str())
                })
                .count() as u32
        })
        .collect();
    ran
}

async fn drive_schedule(
    cx: &mut Ctx<'_>,
    schedule: &Schedule,
    live: &mut Vec<Instance>,
    ran: &mut Ran,
) -> Result<(), (HarnessCause, String)> {
    let unreachable = |e: String| (HarnessCause::Unreachable, e);
    live.push(cx.start("a").await?);
    let submit = cx.d.file.drive.submit.clone();
    for (k, st) in schedule.steps.iter().enumerate() {
        // Checked before anything is sent: a fault this deploy file cannot take.
        if let Some(why) = st.fault.and_then(|kind| cannot_take(cx.d, kind)) {
            return Err((HarnessCause::Undecided, why));
        }
        let hold = hold_name(k);
        if let Some(kind) = st.fault {
            cx.p.payments
                .add_rule(rule(kind.fault(&hold)))
                .map_err(|e| unreachable(format!("fault plan: {}", e.join("; "))))?;
        }
        let vars = Vars {
            occurrence: st.occurrence.clone(),
            amount: 2000,
            currency: "usd".into(),
        };
        let before = cx.p.payments.ledger().effects.len();
        let Some(target) = live.last() else {
            return Err(unreachable("no instance is running".into()));
        };
        if st.fault == Some(Kind::Webhooks) {
            let base = target.base.clone();
            cx.point_webhook(&base, WEBHOOK_DELAY_MS, true);
            cx.step(format!(
                "the provider's events come {WEBHOOK_DELAY_MS} ms late from now on, each twice"
            ));
        }
        let Some(target) = live.last() else {
            return Err(unreachable("no instance is running".into()));
        };
        // The order goes out on a task of its own: a service that charges inside its own
        // request handler answers only once the provider does, and a hold parks that.
        let label = target.label.clone();
        let mut sent = Some(send(cx, &target.base, &submit, &vars));
        let held = matches!(
            st.fault,
            Some(Kind::CrashAtHold | Kind::Takeover | Kind::Resubmit)
        );
        if held {
            cx.step(format!(
                "order {} submitted to instance {label}",
                vars.occurrence
            ));
        } else {
            if let Some(s) = sent.take() {
                let answer = answered(s, Duration::from_secs(60)).await;
                accepted(cx, &vars, &label, answer, st.fault.is_some())?;
            }
        }
        match st.fault {
            Some(Kind::CrashAtHold) => {
                cx.parked(&hold).await?;
                let Some(mut a) = live.pop() else {
                    return Err(unreachable("no instance is running".into()));
                };
                cx.kill(&mut a, &hold).await?;
                cx.release(&hold).await?;
                drop(a);
                if let Some(s) = sent.take() {
                    lost_with(cx, sent_done(s).await);
                }
                live.push(cx.start(&label).await?);
                cx.step(format!("instance {label} restarted on the same store"));
            }
            Some(Kind::Takeover) => {
                cx.parked(&hold).await?;
                let next = cx.fresh_label();
                let b = cx.start(&next).await?;
                let Some(mut a) = live.pop() else {
                    return Err(unreachable("no instance is running".into()));
                };
                live.push(b);
                cx.kill(&mut a, &hold).await?;
                cx.release(&hold).await?;
                drop(a);
                if let Some(s) = sent.take() {
                    lost_with(cx, sent_done(s).await);
                }
            }
            Some(Kind::Resubmit) => {
                cx.parked(&hold).await?;
                let again = send(cx, &live[live.len() - 1].base, &submit, &vars);
                // The second order may wait for the first's entry (a service that serialises
                // them): release the hold while it is out, then read both answers.
                tokio::time::sleep(Duration::from_millis(300)).await;
                cx.step("the same order submitted again while its entry is held");
                cx.release(&hold).await?;
                for (what, s) in [("first", sent.take()), ("second", Some(again))] {
                    let Some(s) = s else {
                        continue;
                    };
                    let a = answered(s, Duration::from_secs(60)).await;
                    cx.step(format!(
                        "the {what} submission answered: {}",
                        describe_answer(&a)
                    ));
                    if let Err(DriveErrorOr::Drive(e @ drive::DriveError::Unreachable { .. })) = a {
                        return Err(unreachable(e.to_string()));
                    }
                }
            }
            Some(Kind::Webhooks) => {
                let pay = cx.entered(before).await?;
                match cx.p.payments.forge_webhook(&pay, "declined").await {
                    Ok(ev) => cx.step(format!(
                        "a forged payment_intent.payment_failed ({ev}) for {pay} delivered, signed with another secret"
                    )),
                    Err(e) => return Err(unreachable(format!("forging a webhook: {e}"))),
                }
            }
            Some(Kind::LostReply | Kind::ErrorAfterCommit) | None => {}
        }
        // Late, duplicated webhooks must have come before the watch ends.
        let settle_floor = if st.fault == Some(Kind::Webhooks) {
            WEBHOOK_DELAY_MS + 3_000
        } else {
            0
        };
        let seen = watch(cx, live, &vars, settle_floor).await?;
        let o = seen.last().map(|(o, _)| o.clone());
        if st.fault == Some(Kind::Webhooks) {
            let log = cx.p.payments.webhook_deliveries();
            let forged_answered = log.iter().any(|w| w.forged && w.status.is_some());
            let real_ok = log
                .iter()
                .filter(|w| !w.forged && w.status.is_some_and(|s| (200..300).contains(&s)))
                .count();
            if !forged_answered || real_ok < 2 {
                return Err((
                    HarnessCause::Undecided,
                    format!(
                        "the webhook faults did not reach the service (the forged event {}; {real_ok} of the 2 real deliveries answered 2xx): check `webhook.path`",
                        if forged_answered {
                            "was answered"
                        } else {
                            "got no answer"
                        }
                    ),
                ));
            }
            for w in log {
                cx.step(format!(
                    "webhook {} {} for {} attempt {}{}: {}",
                    w.event_id,
                    w.kind,
                    w.payment_intent,
                    w.attempt,
                    if w.forged { " (forged)" } else { "" },
                    w.status
                        .map_or_else(|| w.error.clone().unwrap_or_default(), |s| s.to_string())
                ));
            }
            let base = live[live.len() - 1].base.clone();
            cx.point_webhook(&base, 0, false);
        }
        ran.reported.push(Reported {
            occurrence: st.occurrence.clone(),
            outcome: o
                .as_ref()
                .filter(|o| o.outcome.is_final())
                .map(|o| o.outcome.label()),
            label: o.as_ref().map_or("(none)".into(), |o| o.label.clone()),
            finals: seen
                .iter()
                .filter(|(o, _)| o.outcome.is_final())
                .map(|(o, effects)| crate::check::deploy::Shown {
                    label: o.label.clone(),
                    outcome: o.outcome.label(),
                    effects_then: *effects,
                })
                .collect(),
            ambiguity: st.fault.map_or(Ambiguity::None, Kind::ambiguity),
            amount: vars.amount,
            currency: vars.currency.clone(),
        });
        ran.observed.push(o);
    }
    Ok(())
}

/// Why an order's answer is not a status.
#[derive(Debug)]
enum DriveErrorOr {
    Drive(drive::DriveError),
    /// No answer within the wait.
    Late,
    /// The task that sent it failed.
    Lost(String),
}

type Sent = tokio::task::JoinHandle<Result<u16, drive::DriveError>>;

fn send(cx: &Ctx<'_>, base: &str, t: &file::Request, vars: &Vars) -> Sent {
    let (client, base, t, vars) = (cx.client.clone(), base.to_string(), t.clone(), vars.clone());
    tokio::spawn(async move { drive::submit(&client, &base, &t, &vars).await })
}

async fn answered(s: Sent, wait: Duration) -> Result<u16, DriveErrorOr> {
    match tokio::time::timeout(wait, s).await {
        Err(_) => Err(DriveErrorOr::Late),
        Ok(Err(e)) => Err(DriveErrorOr::Lost(e.to_string())),
        Ok(Ok(r)) => r.map_err(DriveErrorOr::Drive),
    }
}

/// The answer of an order whose instance was killed (its connection is gone with it).
async fn sent_done(s: Sent) -> Result<u16, DriveErrorOr> {
    answered(s, Duration::from_secs(5)).await
}

fn describe_answer(a: &Result<u16, DriveErrorOr>) -> String {
    match a {
        Ok(code) => code.to_string(),
        Err(DriveErrorOr::Drive(e)) => e.to_string(),
        Err(DriveErrorOr::Late) => "no answer within 60 s".into(),
        Err(DriveErrorOr::Lost(e)) => format!("lost ({e})"),
    }
}

fn lost_with(cx: &mut Ctx<'_>, a: Result<u16, DriveErrorOr>) {
    cx.step(format!(
        "the order's own answer: {} (a service that answers after charging lost it with the instance)",
        describe_answer(&a)
    ));
}

/// Judges the service's answer to an order: a status outside `accept` is the service's own
/// business when the step lands a fault (it may answer the provider's 5xx with its own), and a
/// harness error without one; no answer at all is always a harness error.
fn accepted(
    cx: &mut Ctx<'_>,
    vars: &Vars,
    label: &str,
    a: Result<u16, DriveErrorOr>,
    faulted: bool,
) -> Result<(), (HarnessCause, String)> {
    match a {
        Ok(code) => {
            cx.step(format!(
                "order {} submitted to instance {label} ({code})",
                vars.occurrence
            ));
            Ok(())
        }
        Err(DriveErrorOr::Drive(e @ drive::DriveError::Status { .. })) if faulted => {
            cx.step(format!(
                "order {} submitted to instance {label}, which answered outside `accept` ({e}); its outcome is read from the status route",
                vars.occurrence
            ));
            Ok(())
        }
        Err(e) => Err((HarnessCause::Unreachable, describe_answer(&Err(e)))),
    }
}

/// Watches an order's outcome until it is final (or the deadline), then through the settle
/// time, on the instance started last. Returns the last observation.
async fn watch(
    cx: &mut Ctx<'_>,
    live: &mut [Instance],
    vars: &Vars,
    extra_settle_ms: u64,
) -> Result<Vec<(Observed, usize)>, (HarnessCause, String)> {
    let unreachable = |e: String| (HarnessCause::Unreachable, e);
    let status = cx.d.file.drive.status.clone();
    let deadline = Instant::now() + Duration::from_millis(cx.d.file.drive.deadline_ms);
    // Each distinct observation with the provider's effect count just after it was read: a
    // label cannot be backed by a charge the provider recorded after the service showed it.
    let mut seen: Vec<(Observed, usize)> = Vec::new();
    let mut final_at: Option<Instant> = None;
    loop {
        let Some(i) = live.last_mut() else {
            return Err(unreachable("no instance is running".into()));
        };
        if let Some(st) = i.exited() {
            return Err(unreachable(format!(
                "instance {} exited unasked ({st}); its output: {}",
                i.label,
                service::tail(&i.log)
            )));
        }
        let o = drive::status(&cx.client, &i.base, &status, vars)
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        let is_final = o.outcome.is_final();
        if seen.last().map(|(x, _)| x) != Some(&o) {
            cx.step(format!(
                "the service reports {:?} ({}) for order {}",
                o.label,
                o.outcome.label(),
                vars.occurrence
            ));
            let effects = cx.p.payments.ledger().effects.len();
            seen.push((o, effects));
        }
        if is_final && final_at.is_none() {
            final_at = Some(Instant::now());
        }
        // Once a label is final the full settle time is always watched (a late duplicate);
        // the deadline bounds only the wait for a final label.
        let settle = Duration::from_millis(cx.d.file.drive.settle_ms.max(extra_settle_ms));
        let settled = final_at.is_some_and(|t| t.elapsed() >= settle);
        if settled || (final_at.is_none() && Instant::now() > deadline) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(seen)
}

/// Why this deploy file cannot take a fault (`None`: it can).
fn cannot_take(d: &Loaded, kind: Kind) -> Option<String> {
    match kind {
        Kind::Webhooks if d.file.webhook.is_none() => {
            Some("the deploy file declares no `webhook`: the service receives no events".into())
        }
        Kind::Takeover if d.file.service.instances < 2 => Some(format!(
            "service.instances is {}: a takeover needs 2",
            d.file.service.instances
        )),
        _ => None,
    }
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
    (
        case_report(d, report, c.requirements, ran),
        agents,
        versions,
    )
}

/// A case's report from what running its schedule gave.
pub fn case_report(
    d: &Loaded,
    mut report: CaseReport,
    requirements: &[Req],
    ran: Ran,
) -> CaseReport {
    report.steps = ran.steps;
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
    for ((r, o), entries) in ran.reported.iter().zip(&ran.observed).zip(&ran.entries) {
        let mut missing = Vec::new();
        if d.file.attribution.is_none() {
            missing.push(
                "no attribution declared: the provider's entries cannot be placed under occurrences"
                    .to_string(),
            );
        }
        if r.outcome.is_none() {
            missing.push(format!(
                "the service still reported {:?} at the deadline ({} ms)",
                r.label, d.file.drive.deadline_ms
            ));
        }
        missing.push("no report route: the occurrence's history is not observable".into());
        report.occurrences.push(OccurrenceReport {
            label: r.occurrence.clone(),
            occurrence_id: r.occurrence.clone(),
            executor_generation: 0,
            provider_binding_digest: None,
            state: if r.outcome.is_some() {
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
            authority_state: crate::vocab::Authority::Consumed,
            entry_attempts: *entries,
            evidence_sources: vec![
                "the service's status route (drive.status)".into(),
                "fake-payments ground-truth ledger".into(),
            ],
            missing_knowledge: missing,
            provider_effects: *entries,
            history_len: 0,
        });
    }
    report.facts = ran.facts.by_id();
    report.not_established = requirements
        .iter()
        .filter(|r| ran.facts.count(**r) == 0)
        .map(|r| r.to_string())
        .collect();
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
