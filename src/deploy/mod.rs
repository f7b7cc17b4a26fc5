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
pub mod file;
pub mod service;

use crate::aoc::requirement::Req;
use crate::check::Facts;
use crate::check::deploy::{Ambiguity, Reported};
use crate::report::model::{
    CaseReport, Failure, FaultReport, HarnessCause, OccurrenceReport, Report, Summary, Verdict,
};
use drive::{Observed, Vars};
use fake_payments::faults::{Fault, Op, Plan, Rule};
use file::{Loaded, Outcome};
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
}

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// The deploy file (`aocheck-deploy.yaml`).
    pub file: PathBuf,
    /// Where the reports and the service's logs go (default `reports/runs/deploy-<name>`).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Run only the cases with these ids (repeatable), e.g. `--case DEPLOY-001`.
    #[arg(long = "case")]
    pub cases: Vec<String>,
}

/// The cases that make sense at a deployment's boundary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    CrashAtHold,
    LostReply,
    ErrorAfterCommit,
    Resubmit,
    Takeover,
}

#[derive(Debug)]
pub struct DeployCase {
    pub id: &'static str,
    pub title: &'static str,
    pub kind: Kind,
    pub requirements: &'static [Req],
}

pub const CASES: [DeployCase; 5] = [
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

const HOLD: &str = "deploy-entry";
const ACCOUNT_KEY: &str = "sk_test_a";

/// The providers of one run, in process, on loopback.
struct Providers {
    payments: fake_payments::Handle,
    payments_url: String,
    hermes_url: Option<String>,
}

async fn start_providers(needs_hermes: bool) -> Result<Providers, String> {
    let (app, payments) = fake_payments::router(fake_payments::Config::example())
        .map_err(|d| format!("fake-payments: {}", d.join("; ")))?;
    let l = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| format!("fake-payments cannot bind loopback: {e}"))?;
    let payments_url = format!(
        "http://{}",
        l.local_addr().map_err(|e| format!("fake-payments: {e}"))?
    );
    tokio::spawn(fake_payments::serve(l, app));
    let hermes_url = if needs_hermes {
        let (app, _h) = fake_hermes::router(fake_hermes::Config::default())
            .map_err(|d| format!("fake-hermes: {}", d.join("; ")))?;
        let l = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| format!("fake-hermes cannot bind loopback: {e}"))?;
        let url = format!(
            "http://{}",
            l.local_addr().map_err(|e| format!("fake-hermes: {e}"))?
        );
        tokio::spawn(fake_hermes::serve(l, app));
        Some(url)
    } else {
        None
    };
    Ok(Providers {
        payments,
        payments_url,
        hermes_url,
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
    let report = run(&loaded, &out, &a.cases, &mut |line| eprintln!("{line}")).await;
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
    crate::exit::of_report(&report)
}

fn prepare_out(out: &Path) -> Result<(), String> {
    std::fs::create_dir_all(out).map_err(|e| format!("--out {}: {e}", out.display()))?;
    for f in crate::ci::RUN_OUTPUTS.iter().chain(["logs", "work"].iter()) {
        let p = out.join(f);
        if p.is_dir() {
            std::fs::remove_dir_all(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        } else if p.exists() {
            std::fs::remove_file(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        }
    }
    for d in ["logs", "work"] {
        std::fs::create_dir_all(out.join(d)).map_err(|e| format!("{}: {e}", out.display()))?;
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
    let needs_hermes = d
        .file
        .service
        .env
        .values()
        .any(|v| v.contains("{hermes.url}"));
    let mut cases = Vec::new();
    let mut seen_agents = BTreeSet::new();
    let mut seen_versions = BTreeSet::new();
    match start_providers(needs_hermes).await {
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
                let r = run_case(d, c, &p, out).await;
                for q in p.payments.ledger().requests {
                    if q.dialect.is_some() {
                        seen_agents.extend(q.user_agent);
                        seen_versions.extend(q.stripe_version);
                    }
                }
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
    let implementation = json!({
        "kind": "deployment",
        "name": d.file.name,
        "deploy_file": d.path.display().to_string(),
        "deploy_file_sha256": d.sha256,
        "command": d.file.service.command,
        "instances": d.file.service.instances,
        "kill": match d.file.service.kill { file::KillMode::Cgroup => "cgroup", file::KillMode::ProcessGroup => "process_group" },
        "attribution": d.file.attribution.as_ref().map(file::Attribution::describe),
        "user_agents_seen": seen_agents,
        "stripe_versions_seen": seen_versions,
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
    payments: &fake_payments::Handle,
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

struct Ctx<'a> {
    d: &'a Loaded,
    p: &'a Providers,
    client: reqwest::Client,
    env: Env,
    logs: PathBuf,
    steps: Vec<String>,
    started: Instant,
}

impl Ctx<'_> {
    fn step(&mut self, s: impl Into<String>) {
        let s = s.into();
        self.steps
            .push(format!("{:>6} ms  {s}", self.started.elapsed().as_millis()));
    }
    async fn start(&mut self, label: &str) -> Result<Instance, String> {
        let i = service::start(self.d, &self.env, label, &self.logs, &self.client).await?;
        self.step(format!(
            "instance {label} started on port {} and ready",
            i.port
        ));
        Ok(i)
    }
    async fn parked(&mut self) -> Result<(), (HarnessCause, String)> {
        if self
            .p
            .payments
            .wait_parked(HOLD, 1, Duration::from_secs(30))
            .await
        {
            self.step("the service's payment request is parked at the provider's hold");
            Ok(())
        } else {
            Err((
                HarnessCause::Undecided,
                "the service sent no payment creation to the provider within 30 s of the order (the hold never fired)".into(),
            ))
        }
    }
    async fn kill(&mut self, i: &mut Instance) -> Result<String, (HarnessCause, String)> {
        let k = i.kill().await.map_err(|e| (HarnessCause::Unreachable, e))?;
        let gone = self
            .p
            .payments
            .wait_client_gone(HOLD, Duration::from_secs(10))
            .await;
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
    fn release(&mut self) {
        let n = self
            .p
            .payments
            .release(HOLD, fake_payments::app::ReleaseAction::Proceed);
        self.step(format!(
            "the provider commits the held request ({n} released; its client is gone)"
        ));
    }
}

async fn run_case(d: &Loaded, c: &DeployCase, p: &Providers, out: &Path) -> CaseReport {
    let started = Instant::now();
    let mut report = new_case(d, c);
    if c.kind == Kind::Takeover && d.file.service.instances < 2 {
        report.verdict = Verdict::Unsupported;
        report.unsupported = Some(format!(
            "service.instances is {}: a takeover needs 2",
            d.file.service.instances
        ));
        return report;
    }
    p.payments.reset();
    let work = out.join("work").join(c.id);
    let logs = out.join("logs").join(c.id);
    for dir in [&work, &logs] {
        if let Err(e) = std::fs::create_dir_all(dir) {
            return report.harness_error(format!("{}: {e}", dir.display()), started);
        }
    }
    // The service's store lives in a fresh folder per case; an absolute path, since the service
    // runs in the deploy file's folder.
    let store_dir = std::fs::canonicalize(&work).unwrap_or(work);
    let client = match reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
    {
        Ok(c) => c,
        Err(e) => return report.harness_error(format!("http client: {e}"), started),
    };
    let mut cx = Ctx {
        d,
        p,
        client,
        env: Env {
            payments_url: p.payments_url.clone(),
            payments_key: ACCOUNT_KEY.into(),
            hermes_url: p.hermes_url.clone(),
            store_dir,
        },
        logs,
        steps: Vec::new(),
        started,
    };
    let fault = match c.kind {
        Kind::CrashAtHold | Kind::Resubmit | Kind::Takeover => Fault::Hold { name: HOLD.into() },
        Kind::LostReply => Fault::CommitThenDrop,
        Kind::ErrorAfterCommit => Fault::CommitThen { status: 500 },
    };
    let what = format!("the first payment creation: {fault}");
    if let Err(e) = p.payments.set_plan(Plan {
        rules: vec![rule(fault)],
    }) {
        return report.harness_error(format!("fault plan: {}", e.join("; ")), started);
    }
    let occurrence = format!("{}-o1", c.id.to_lowercase());
    let vars = Vars {
        occurrence: occurrence.clone(),
        amount: 2000,
        currency: "usd".into(),
    };
    let mut live: Vec<Instance> = Vec::new();
    let result = drive_case(&mut cx, c.kind, &vars, &mut live).await;
    let fired = p.payments.rules().iter().any(|r| r.fired > 0);
    report.faults.push(FaultReport { what, fired });
    for i in live.drain(..) {
        i.stop().await;
    }
    report.steps = std::mem::take(&mut cx.steps);
    let observed = match result {
        Err((cause, msg)) => {
            return report.harness_error_because(cause, msg, started);
        }
        Ok(o) => o,
    };
    if !fired {
        return report.harness_error_because(
            HarnessCause::Undecided,
            "the declared fault never fired: the service made no payment creation".into(),
            started,
        );
    }
    // Judge by the ledger.
    let ledger = p.payments.ledger();
    let owner = |pay: &str, key: Option<&str>| owner_of(d, &p.payments, pay, key);
    let owner_ref: Option<crate::check::deploy::Owner<'_>> =
        d.file.attribution.as_ref().map(|_| &owner as _);
    let reported = vec![Reported {
        occurrence: occurrence.clone(),
        outcome: observed
            .as_ref()
            .filter(|o| o.outcome.is_final())
            .map(|o| o.outcome.label()),
        label: observed
            .as_ref()
            .map_or("(none)".into(), |o| o.label.clone()),
    }];
    let ambiguity = match c.kind {
        Kind::LostReply => Ambiguity::Dropped,
        Kind::ErrorAfterCommit => Ambiguity::ErrorAfterCommit,
        _ => Ambiguity::None,
    };
    let mut facts = Facts::default();
    let findings =
        crate::check::deploy::judge(&ledger, owner_ref, &reported, ambiguity, &mut facts);
    for f in &findings {
        crate::check::replay::push_failure(
            &mut report.failures,
            Failure {
                requirement: f.requirement(),
                step: None,
                msg: f.line(),
            },
        );
    }
    let effects = ledger
        .effects
        .iter()
        .filter(|e| {
            e.kind == fake_payments::ledger::EffectKind::PaymentCreated
                && owner(&e.payment_id, e.idempotency_key.as_deref()).as_deref()
                    == Some(occurrence.as_str())
        })
        .count() as u32;
    let mut missing = Vec::new();
    if d.file.attribution.is_none() {
        missing.push(
            "no attribution declared: the provider's entries cannot be placed under occurrences"
                .to_string(),
        );
    }
    if observed.as_ref().is_none_or(|o| !o.outcome.is_final()) {
        missing.push(format!(
            "the service still reported {:?} at the deadline ({} ms)",
            observed.as_ref().map_or("nothing", |o| o.label.as_str()),
            d.file.drive.deadline_ms
        ));
    }
    missing.push("no report route: the occurrence's history is not observable".into());
    report.occurrences.push(OccurrenceReport {
        label: occurrence.clone(),
        occurrence_id: occurrence.clone(),
        executor_generation: 0,
        provider_binding_digest: None,
        state: match observed.as_ref().map(|o| o.outcome) {
            Some(o) if o.is_final() => crate::vocab::State::Resolved,
            _ => crate::vocab::State::Unresolved,
        },
        outcome: match observed.as_ref().map(|o| o.outcome) {
            Some(Outcome::Success) => Some(crate::vocab::Outcome::Success),
            Some(Outcome::NotAccepted) => Some(crate::vocab::Outcome::NotAccepted),
            Some(Outcome::FinalFailure) => Some(crate::vocab::Outcome::FinalFailure),
            _ => None,
        },
        provider_entry_state: if effects > 0 {
            "entered".into()
        } else {
            "not_entered".into()
        },
        authority_state: crate::vocab::Authority::Consumed,
        entry_attempts: effects,
        evidence_sources: vec![
            "the service's status route (drive.status)".into(),
            "fake-payments ground-truth ledger".into(),
        ],
        missing_knowledge: missing,
        provider_effects: effects,
        history_len: 0,
    });
    report.facts = facts.by_id();
    report.not_established = c
        .requirements
        .iter()
        .filter(|r| facts.count(**r) == 0)
        .map(|r| r.to_string())
        .collect();
    report.verdict = if !report.failures.is_empty() {
        Verdict::Fail
    } else if !report.not_established.is_empty() {
        Verdict::MissingKnowledge
    } else {
        Verdict::Pass
    };
    report.millis = started.elapsed().as_millis() as u64;
    report
}

/// Drives one case: the service started, the order submitted, the fault landed, the outcome
/// watched until final and then through the settle time. Returns the last observation.
async fn drive_case(
    cx: &mut Ctx<'_>,
    kind: Kind,
    vars: &Vars,
    live: &mut Vec<Instance>,
) -> Result<Option<Observed>, (HarnessCause, String)> {
    let unreachable = |e: String| (HarnessCause::Unreachable, e);
    live.push(cx.start("a").await.map_err(unreachable)?);
    let submit = cx.d.file.drive.submit.clone();
    let st = drive::submit(&cx.client, &live[0].base, &submit, vars)
        .await
        .map_err(|e| unreachable(e.to_string()))?;
    cx.step(format!(
        "order {} submitted to instance a ({st})",
        vars.occurrence
    ));
    match kind {
        Kind::CrashAtHold => {
            cx.parked().await?;
            let mut a = live.remove(0);
            cx.kill(&mut a).await?;
            cx.release();
            drop(a);
            live.push(cx.start("a").await.map_err(unreachable)?);
            cx.step("instance a restarted on the same store");
        }
        Kind::Takeover => {
            cx.parked().await?;
            live.push(cx.start("b").await.map_err(unreachable)?);
            let mut a = live.remove(0);
            cx.kill(&mut a).await?;
            cx.release();
            drop(a);
        }
        Kind::Resubmit => {
            cx.parked().await?;
            let st = drive::submit(&cx.client, &live[0].base, &submit, vars)
                .await
                .map_err(|e| unreachable(e.to_string()))?;
            cx.step(format!("the same order submitted again ({st})"));
            cx.release();
        }
        Kind::LostReply | Kind::ErrorAfterCommit => {}
    }
    // Watch the outcome until it is final (or the deadline), then through the settle time.
    let status = cx.d.file.drive.status.clone();
    let deadline = Instant::now() + Duration::from_millis(cx.d.file.drive.deadline_ms);
    let mut last: Option<Observed> = None;
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
        if last.as_ref() != Some(&o) {
            cx.step(format!(
                "the service reports {:?} ({})",
                o.label,
                o.outcome.label()
            ));
        }
        let is_final = o.outcome.is_final();
        last = Some(o);
        if is_final && final_at.is_none() {
            final_at = Some(Instant::now());
        }
        let settled = final_at
            .is_some_and(|t| t.elapsed() >= Duration::from_millis(cx.d.file.drive.settle_ms));
        if settled || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(last)
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
