//! The runner: for each case, a fresh fake-payments on a loopback port, a fresh domain namespace on
//! the chosen store, and the reference implementation; it performs the case's steps (the World's
//! verbs), runs every checker after every step, and judges the case. It emits one [`RunEvent`]
//! stream; reporters consume it.

mod verdict;
pub use verdict::aggregate;

use crate::aoc::Domain;
use crate::aoc::composition::{CompositionStatus, composition_status};
use crate::aoc::domain::{DomainConfig, Limits};
use crate::aoc::history::ReleaseReason;
use crate::aoc::ids::{AdmissionId, OccurrenceId};
use crate::aoc::occurrence::Phase;
use crate::aoc::requirement::Req;
use crate::case::{Expected, LoadedCase, Step};
use crate::check::{Checker, Observed, Snapshot, Violation, effects_for};
use crate::clock::{Clock, ManualClock};
use crate::operator::connector::ConnectorDefect;
use crate::operator::{Action, Connector, ConnectorError, OperatorResult};
use crate::report::model::{CaseReport, Failure, FaultReport, OccurrenceReport, Verdict};
use crate::store::AnyStore;
use crate::sut::Sut;
use crate::sut::message::{HermesInit, Op, OperatorInit};
use crate::sut::operator::{AipRecord, Answer, Conn};
use crate::sut::reference::{ReferenceSut, SutError, Variant};
use crate::sut::remote::Spawner;
use crate::sut::remote::{ProcessSpec, ProcessSut};
use fake_payments::config::IdempotencyProfile;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Events between the runner and its reporters.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum RunEvent {
    RunStarted {
        run_id: String,
        seed: u64,
        cases: Vec<String>,
    },
    CaseStarted {
        case: String,
    },
    StepFinished {
        case: String,
        index: usize,
        verb: String,
        result: String,
    },
    CaseFinished {
        case: String,
        verdict: Verdict,
        millis: u64,
    },
    RunFinished {
        passed: usize,
        failed: usize,
        other: usize,
    },
}

/// How to run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    pub run_id: String,
    pub seed: u64,
    pub variant: Variant,
    /// Test-only: a deliberately broken operator connector.
    pub connector_defect: Option<ConnectorDefect>,
    /// The `--store` argument a reproduction needs (`None`: the default SQLite store).
    pub repro_store: Option<String>,
    /// Judge an implementation through `aocheck-sut/1` processes instead of in process.
    pub sut: Option<ProcessSpec>,
}

fn sut_err(e: &SutError) -> String {
    e.to_string()
}

/// Runs one case against a store. Never panics on SUT behaviour: findings become the verdict.
pub async fn run_case(
    store: Arc<AnyStore>,
    lc: &LoadedCase,
    opts: &RunOptions,
    emit: &mut (dyn FnMut(RunEvent) + Send),
) -> CaseReport {
    let started = Instant::now();
    let case = &lc.case;
    emit(RunEvent::CaseStarted {
        case: case.id.clone(),
    });
    let mut report = CaseReport::new(&case.id, &case.title, &lc.path, case.requirements.clone());
    report.repro = format!("aocheck run --case {} --seed {}", case.id, opts.seed);
    if let Some(st) = &opts.repro_store {
        report.repro.push_str(&format!(" --store {st}"));
    }
    if let Some(spec) = &opts.sut {
        report
            .repro
            .push_str(&format!(" --sut '{}'", spec.command.replace('\'', "'\\''")));
    }
    // A fresh provider per case.
    let mut pconfig = fake_payments::Config::example();
    // The provider's signing key follows the seed, so a run's profile digest is reproducible.
    pconfig.signing_seed_hex = Some(
        crate::digest::Digest::of_bytes(format!("aocheck-fake-payments-{}", opts.seed).as_bytes())
            .hex(),
    );
    pconfig.accounts[0].idempotency = match case.config.idempotency.as_deref() {
        Some("ietf-draft") => IdempotencyProfile::IetfDraft,
        Some("none") => IdempotencyProfile::None,
        _ => IdempotencyProfile::StripeV1,
    };
    let (app, provider) = match fake_payments::router(pconfig) {
        Ok(x) => x,
        Err(d) => return report.harness_error(format!("fake-payments config: {d:?}"), started),
    };
    let listener = match tokio::net::TcpListener::bind("127.0.0.1:0").await {
        Ok(l) => l,
        Err(e) => {
            return report.harness_error(
                format!("cannot bind a loopback port for fake-payments: {e}"),
                started,
            );
        }
    };
    let base = match listener.local_addr() {
        Ok(a) => format!("http://{a}"),
        Err(e) => return report.harness_error(e.to_string(), started),
    };
    let server = tokio::spawn(async move {
        let _ = fake_payments::serve(listener, app).await;
    });
    let client =
        match crate::sut::payments::PaymentsClient::connect(&base, "acct_a", "sk_test_a").await {
            Ok(c) => c,
            Err(e) => {
                server.abort();
                return report.harness_error(e.to_string(), started);
            }
        };
    report.provider_profile = Some(serde_json::json!({
        "id": client.profile().id, "version": client.profile().version,
        "digest": client.profile().digest().map(|d| d.to_string()).unwrap_or_default(),
    }));
    let limits = case.config.limits.unwrap_or(Limits {
        max_pending: 16,
        max_in_flight: 16,
    });
    let mut dconfig = DomainConfig::new(
        format!("{}-{}", opts.run_id, case.id),
        client.profile().clone(),
    );
    dconfig.limits = limits;
    dconfig.bypass_paths = case.config.bypass_paths.clone();
    dconfig.aadp = case.config.aadp.unwrap_or_default();
    dconfig.action_fence = case.config.action_fence;
    let clock = ManualClock::at(crate::clock::SystemClock.now().0);
    let store_for_operator = store.clone();
    let domain = match Domain::new(store, dconfig, Arc::new(clock.clone())) {
        Ok(d) => d,
        Err(d) => {
            server.abort();
            return report.harness_error(format!("domain config: {d:?}"), started);
        }
    };
    report.bypass_paths = domain.bypass_paths().to_vec();
    report.composition = composition_status(domain.config().aadp);
    report.limits = Some(limits);
    let sut = match &opts.sut {
        None => Sut::Local(Box::new(ReferenceSut::new(domain, client, opts.variant))),
        Some(spec) => {
            let payments = crate::sut::message::PaymentsInit {
                base_url: base.clone(),
                account: "acct_a".into(),
                api_key: "sk_test_a".into(),
            };
            let dinit = crate::sut::message::DomainInit {
                id: Some(domain.config().domain_id.clone()),
                bypass_paths: domain.config().bypass_paths.clone(),
                aadp: domain.config().aadp,
                action_fence: domain.config().action_fence,
            };
            let started_sut = ProcessSut::start(
                spec.clone(),
                &case.id,
                payments,
                limits,
                dinit,
                opts.seed,
                clock.clone(),
            )
            .await;
            match started_sut {
                Ok(p) => {
                    report.implementation = Some(p.implementation(&spec.command));
                    Sut::Process(Box::new(p))
                }
                Err(e) => {
                    server.abort();
                    return report.harness_error(e.to_string(), started);
                }
            }
        }
    };
    let mut world = World {
        sut,
        provider: provider.clone(),
        clock,
        occurrences: BTreeMap::new(),
        submissions: BTreeMap::new(),
        current: None,
        checker: Checker::default(),
        limits,
        observe_error: None,
        operator: OperatorWorld {
            store: store_for_operator,
            hermes: None,
            connectors: BTreeMap::new(),
            remote: None,
            remote_reader: None,
            actions: BTreeMap::new(),
            background: Vec::new(),
            defect: opts.connector_defect,
            case_key: format!("{}-{}", opts.run_id, case.id),
            policy_overlay: serde_json::Map::new(),
            tenant: "t1".into(),
            resolver: true,
            delegations: Vec::new(),
            unsupported: None,
            resumes: Default::default(),
            delegation_errors: BTreeMap::new(),
            seen: BTreeMap::new(),
        },
    };
    if let Sut::Process(p) = &world.sut {
        world.operator.remote = Some(p.spawner());
    }
    let mut failures: Vec<Failure> = Vec::new();
    let mut harness: Option<String> = None;
    // A case that needs an operation the implementation does not list is never run partly.
    if let Sut::Process(p) = &mut world.sut {
        let mut missing: Vec<&str> = required_ops(case)
            .into_iter()
            .filter(|op| !p.supports(*op))
            .map(Op::name)
            .collect();
        missing.sort_unstable();
        if !missing.is_empty() {
            world.operator.unsupported = Some(format!(
                "the implementation does not support {}: the case was not run",
                missing.join(", ")
            ));
        } else if world.operator.unsupported.is_none() {
            match p.describe_if_supported().await {
                Ok(Some((c, b))) => {
                    report.composition = c;
                    report.bypass_paths = b;
                }
                Ok(None) => {}
                Err(e) => harness = Some(format!("describe: {e}")),
            }
        }
    }
    let skip = world.operator.unsupported.is_some() || harness.is_some();
    for (i, step) in case.steps.iter().enumerate().take_while(|_| !skip) {
        let result = world.perform(step).await;
        let expected = step
            .expect()
            .map(|e| e.parse().unwrap_or(Expected::Ok))
            .unwrap_or(Expected::Ok);
        let label = match &result {
            Ok(()) => "ok".to_string(),
            Err(SutError::Refused(r)) => format!("refused {}", r.requirement),
            Err(SutError::RefusedUnnamed(_)) => "refused (no requirement named)".to_string(),
            Err(e) => format!("error: {}", sut_err(e)),
        };
        emit(RunEvent::StepFinished {
            case: case.id.clone(),
            index: i,
            verb: step.verb(),
            result: label.clone(),
        });
        report.steps.push(format!("{}: {label}", step.verb()));
        match (&result, expected) {
            (Err(SutError::Mismatch(req, m)), _) => failures.push(Failure {
                requirement: *req,
                step: Some(i),
                msg: format!("{}: {m}", step.verb()),
            }),
            (Err(SutError::Harness(m)), _) => {
                harness = Some(format!("steps[{i}] ({}): {m}", step.verb()));
                break;
            }
            (Err(SutError::Corrupt(m)), _) => failures.push(Failure {
                requirement: Req::R004,
                step: Some(i),
                msg: format!("{}: {m}", step.verb()),
            }),
            (_, Expected::Any) | (Ok(()), Expected::Ok) => {}
            (Err(SutError::RefusedUnnamed(_)), Expected::Refused(None)) => {}
            (Err(SutError::RefusedUnnamed(m)), Expected::Refused(Some(w))) => {
                failures.push(Failure {
                    requirement: w,
                    step: Some(i),
                    msg: format!("{}: expected a refusal under {w}; {m}", step.verb()),
                })
            }
            (Err(SutError::RefusedUnnamed(m)), Expected::Ok) => failures.push(Failure {
                requirement: primary(&case.requirements),
                step: Some(i),
                msg: format!("{}: {m}", step.verb()),
            }),
            (Err(SutError::Refused(r)), Expected::Refused(want)) => {
                if let Some(w) = want
                    && w != r.requirement
                {
                    failures.push(Failure {
                        requirement: w,
                        step: Some(i),
                        msg: format!(
                            "{} was refused for {}, expected a refusal under {w}: {r}",
                            step.verb(),
                            r.requirement
                        ),
                    });
                }
            }
            (Ok(()), Expected::Refused(want)) => {
                let req = want.unwrap_or_else(|| primary(&case.requirements));
                failures.push(Failure {
                    requirement: req,
                    step: Some(i),
                    msg: format!("{} was accepted; it must be refused ({req})", step.verb()),
                });
            }
            (Err(SutError::Refused(r)), Expected::Ok) => failures.push(Failure {
                requirement: r.requirement,
                step: Some(i),
                msg: format!("{} was refused: {r}", step.verb()),
            }),
        }
        // Every checker after every step.
        for v in world.check().await {
            push_violation(&mut failures, v, i);
        }
        if let Some(h) = world.observe_error.take() {
            harness = Some(format!("steps[{i}] ({}): {h}", step.verb()));
            break;
        }
    }
    if harness.is_none()
        && !skip
        && let Err(e) = world.sut.settle().await
    {
        match e {
            SutError::Harness(m) => harness = Some(m),
            other => failures.push(Failure {
                requirement: primary(&case.requirements),
                step: None,
                msg: other.to_string(),
            }),
        }
    }
    if harness.is_none() && !skip {
        for v in world.check().await {
            push_violation(&mut failures, v, case.steps.len());
        }
        if let Some(h) = world.observe_error.take() {
            harness = Some(h);
        }
        failures.extend(world.final_expectations(case).await);
    }
    // Declared faults must have fired: a case that ran no fault is not a pass.
    let mut unfired: Vec<String> = Vec::new();
    for r in provider.rules() {
        let fired = r.fired > 0;
        report.faults.push(FaultReport {
            what: format!("provider {} {}", r.rule.op.label(), r.rule.fault),
            fired,
        });
        if !fired {
            unfired.push(format!(
                "declared fault {} on {} never fired: the case did not exercise what it claims",
                r.rule.fault,
                r.rule.op.label()
            ));
        }
    }
    // The same for fake-hermes's rules: a Hermes case whose fault never fired is not a pass.
    if let Some((_, h, _)) = &world.operator.hermes {
        for r in h.rules() {
            let fired = r.fired > 0;
            report.faults.push(FaultReport {
                what: format!("hermes {} {}", r.rule.route.label(), r.rule.fault),
                fired,
            });
            if !fired {
                unfired.push(format!(
                    "declared fault {} on Hermes {} never fired: the case did not exercise what it claims",
                    r.rule.fault,
                    r.rule.route.label()
                ));
            }
        }
    }
    for s in case.steps.iter().take_while(|_| !skip) {
        if let Step::OperatorKill { instance } = s {
            report.faults.push(FaultReport {
                what: format!("kill connector {instance}"),
                fired: true,
            });
        }
        if let Step::Crash {
            executor, at_hold, ..
        } = s
        {
            match at_hold {
                None => report.faults.push(FaultReport {
                    what: format!("crash {executor}"),
                    fired: true,
                }),
                Some(hold) => {
                    // The kill landed during the request only if the provider committed with
                    // nobody left to answer.
                    let landed = provider
                        .ledger()
                        .effects
                        .iter()
                        .any(|e| e.reply == fake_payments::ledger::Reply::ClientGone);
                    report.faults.push(FaultReport {
                        what: format!("crash {executor} while hold {hold} parks its request"),
                        fired: landed,
                    });
                    if !landed {
                        unfired.push(format!(
                            "crash of {executor} at hold {hold}: no effect was committed after its sender died (no client_gone reply in the provider's ledger)"
                        ));
                    }
                }
            }
        }
        if let Step::Replace { executor, .. } = s {
            report.faults.push(FaultReport {
                what: format!("replace by {executor}"),
                fired: true,
            });
        }
    }
    report.occurrences = world.occurrence_reports().await;
    report.operators = world.operator_reports().await;
    report.checker_runs = world.checker.runs;
    if let Sut::Process(p) = &mut world.sut {
        p.shutdown().await;
        report.sut_processes = p.processes();
    }
    server.abort();
    // A violated requirement decides the case even if the harness could not finish it (the
    // harness problem is then a consequence, kept in the report); otherwise an undecided case is
    // a harness error, and a case whose declared faults never fired is never a pass.
    if harness.is_none() && !unfired.is_empty() {
        harness = Some(unfired.join("; "));
    }
    report.harness = harness.clone();
    report.unsupported = world.operator.unsupported.clone();
    report.verdict = if !failures.is_empty() {
        Verdict::Fail
    } else if harness.is_some() {
        Verdict::HarnessError
    } else if report.unsupported.is_some() {
        Verdict::Unsupported
    } else if report.checker_runs == 0 {
        Verdict::NotRun
    } else {
        Verdict::Pass
    };
    report.failures = failures;
    report.millis = started.elapsed().as_millis() as u64;
    emit(RunEvent::CaseFinished {
        case: case.id.clone(),
        verdict: report.verdict,
        millis: report.millis,
    });
    report
}

/// The `aocheck-sut/1` operations a case needs: every case needs `state`, `lane` and `settle`;
/// each step needs the operation the World sends for it; every operator step also reads the
/// connector's durable binding.
pub fn required_ops(case: &crate::case::Case) -> std::collections::BTreeSet<Op> {
    let mut out: std::collections::BTreeSet<Op> = [Op::State, Op::Lane].into();
    for s in &case.steps {
        let op = match s.verb().as_str() {
            "join" => Op::Join,
            "replace" => Op::Takeover,
            "create" => Op::Create,
            "reserve" => Op::Reserve,
            "enter" => Op::Enter,
            "send" => Op::Send,
            "execute" => Op::Execute,
            "settle" => Op::Settle,
            "adopt" => Op::Adopt,
            "reconcile" => Op::Reconcile,
            "release" => Op::Release,
            "rebind" => Op::Rebind,
            "remedy" => Op::Remedy,
            "submit" => Op::Submit,
            "claim" => Op::Claim,
            "link" => Op::Link,
            "recover" => Op::Recover,
            "resolve_unknown" => Op::ResolveUnknown,
            "finish" => Op::Finish,
            "lease_refresh" => Op::LeaseRefresh,
            "lease_release" => Op::LeaseRelease,
            "import" => Op::Import,
            "operator_invoke" => Op::Invoke,
            "operator_cancel" => Op::Cancel,
            "operator_delegate" => Op::Delegate,
            "operator_manifest" => Op::Manifest,
            "operator_configure" => Op::Policy,
            // The connector's own durable binding is read for every operator step.
            v if v.starts_with("operator_") || v.starts_with("hermes_") => Op::Binding,
            _ => continue,
        };
        out.insert(op);
        if s.verb().starts_with("operator_") {
            out.insert(Op::Binding);
        }
    }
    if !case.expect.admissions.is_empty() {
        out.insert(Op::Admission);
    }
    if case.expect.composition.is_some() || !case.expect.bypass_disclosed.is_empty() {
        out.insert(Op::Describe);
    }
    // Any delayed background work is finished by `settle` at the end of every case.
    out.insert(Op::Settle);
    out
}

/// Seed 000 item 10: each binding read again through a fresh handle (`fresh`) must be the one
/// read before. With no binding written nothing is proven: never a vacuous pass.
fn judge_durability<T: PartialEq>(
    seen: Vec<(String, Option<T>, Option<T>)>,
    fresh: &str,
) -> Result<(), SutError> {
    for (label, before, after) in &seen {
        if before != after {
            return Err(SutError::Mismatch(
                Req::R005,
                format!("{label}: the binding {fresh} reads differs from the one written before"),
            ));
        }
    }
    if seen.iter().all(|(_, before, _)| before.is_none()) {
        return Err(SutError::Harness(
            "operator_durability found no binding to compare; invoke an Action first".into(),
        ));
    }
    Ok(())
}

fn primary(reqs: &[String]) -> Req {
    reqs.first()
        .and_then(|r| Req::parse(r))
        .unwrap_or(Req::R001)
}

fn push_violation(failures: &mut Vec<Failure>, v: Violation, step: usize) {
    let msg = format!(
        "[{}] {}{}",
        v.checker,
        v.occurrence.map(|o| format!("{o}: ")).unwrap_or_default(),
        v.msg
    );
    if !failures.iter().any(|f| f.msg == msg) {
        failures.push(Failure {
            requirement: v.requirement,
            step: Some(step),
            msg,
        });
    }
}

struct World {
    sut: Sut,
    /// Set when the implementation could not be observed after a step (a harness error).
    observe_error: Option<String>,
    provider: fake_payments::Handle,
    clock: ManualClock,
    occurrences: BTreeMap<String, OccurrenceId>,
    submissions: BTreeMap<String, AdmissionId>,
    current: Option<String>,
    checker: Checker,
    limits: Limits,
    operator: OperatorWorld,
}

/// The Hermes side of a case: fake-hermes (started on first use), connector processes and the
/// Actions invoked.
struct OperatorWorld {
    store: Arc<AnyStore>,
    hermes: Option<(String, fake_hermes::Handle, tokio::task::JoinHandle<()>)>,
    connectors: BTreeMap<String, Conn>,
    actions: BTreeMap<String, String>,
    background: Vec<(String, tokio::task::JoinHandle<Answer<OperatorResult>>)>,
    /// Set when the connector runs as implementation processes (`--sut`).
    remote: Option<Spawner>,
    /// The reading process of a remote connector (never invoked, never killed by a case).
    remote_reader: Option<Conn>,
    defect: Option<ConnectorDefect>,
    case_key: String,
    /// Case-set policy fields, overlaid on the harness's fast defaults.
    policy_overlay: serde_json::Map<String, serde_json::Value>,
    tenant: String,
    resolver: bool,
    /// Delegated children (label, the child Action as AIP holds it).
    delegations: Vec<(String, serde_json::Value)>,
    /// Set when a step cannot be exercised on this configuration.
    unsupported: Option<String>,
    /// Resume Actions (their effect is counted on the source binding).
    resumes: std::collections::BTreeSet<String>,
    /// The last failure code of each delegation (absent when its result was established).
    delegation_errors: BTreeMap<String, String>,
    /// Each binding as last seen, for the monotonic checks.
    seen: BTreeMap<String, crate::operator::Binding>,
}

impl Drop for OperatorWorld {
    fn drop(&mut self) {
        if let Some((_, _, t)) = &self.hermes {
            t.abort();
        }
        for (_, t) in &self.background {
            t.abort();
        }
    }
}

impl OperatorWorld {
    async fn hermes(&mut self) -> Result<(String, fake_hermes::Handle), SutError> {
        if self.hermes.is_none() {
            let config = fake_hermes::Config {
                stream_wait_ms: 200,
                ..fake_hermes::Config::default()
            };
            let (app, handle) =
                fake_hermes::router(config).map_err(|d| SutError::Harness(d.join("; ")))?;
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .map_err(|e| SutError::Harness(format!("bind fake-hermes: {e}")))?;
            let base = format!(
                "http://{}",
                listener
                    .local_addr()
                    .map_err(|e| SutError::Harness(e.to_string()))?
            );
            let task = tokio::spawn(async move {
                let _ = fake_hermes::serve(listener, app).await;
            });
            self.hermes = Some((base, handle, task));
        }
        let (b, h, _) = self
            .hermes
            .as_ref()
            .ok_or_else(|| SutError::Harness("fake-hermes did not start".into()))?;
        Ok((b.clone(), h.clone()))
    }

    /// What a remote connector process is told at `init` beyond the case's common fields.
    /// The reader gets the harness's defaults, not the case's policy: it only reads, and a case
    /// may configure a policy it expects to be refused.
    async fn remote_init(&mut self, reader: bool) -> Result<(HermesInit, OperatorInit), SutError> {
        let (base, _) = self.hermes().await?;
        let policy = if reader {
            self.base_policy()
        } else {
            self.policy()
                .map_err(|e| SutError::Harness(format!("operator policy: {e}")))?
        };
        let policy = serde_json::to_value(policy)
            .map_err(|e| SutError::Harness(format!("operator policy: {e}")))?;
        Ok((
            HermesInit {
                base_url: base,
                api_key: "hermes-test-key".into(),
                endpoint_id: "primary".into(),
            },
            OperatorInit {
                policy: Some(policy),
                tenant: Some(self.tenant.clone()),
                resolver: self.resolver,
            },
        ))
    }

    /// Stops a connector instance (SIGKILL for a process; its requests in flight fail with it)
    /// and records why in the case's process log.
    async fn stop(&self, c: &Conn, why: &str) {
        c.kill().await;
        if let (Conn::Remote(_, label), Some(sp)) = (c, &self.remote) {
            sp.note(label, why);
        }
    }

    /// Where bindings are read: a local connector, or the remote reading process.
    async fn reader(&mut self) -> Result<Conn, SutError> {
        let Some(spawner) = self.remote.clone() else {
            return self.connector("p1").await;
        };
        if let Some(r) = &self.remote_reader {
            return Ok(r.clone());
        }
        let extra = self.remote_init(true).await?;
        let (p, _, label) = spawner
            .spawn("aocheck-operator-reader", Some(extra))
            .await?;
        let c = Conn::Remote(p, label);
        self.remote_reader = Some(c.clone());
        Ok(c)
    }

    async fn connector(&mut self, instance: &str) -> Result<Conn, SutError> {
        if let Some(c) = self.connectors.get(instance) {
            return Ok(c.clone());
        }
        if let Some(spawner) = self.remote.clone() {
            let extra = self.remote_init(false).await?;
            let (p, _, label) = spawner.spawn(instance, Some(extra)).await?;
            let c = Conn::Remote(p, label);
            self.connectors.insert(instance.into(), c.clone());
            return Ok(c);
        }
        let (base, _) = self.hermes().await?;
        let policy = self
            .policy()
            .map_err(|e| SutError::Harness(format!("operator policy: {e}")))?;
        let mut c = Connector::new(
            self.store.clone(),
            "primary",
            &base,
            "hermes-test-key",
            policy,
            instance,
            Arc::new(crate::clock::SystemClock),
        )
        .map_err(|e| SutError::Harness(e.to_string()))?;
        if let Some(d) = self.defect {
            c = c.with_defect_for_tests(d);
        }
        if self.resolver {
            c = c.with_resolver(crate::operator::delegation::Resolver {
                tenant: self.tenant.clone(),
            });
        }
        let c = Conn::Local(Arc::new(c));
        self.connectors.insert(instance.into(), c.clone());
        Ok(c)
    }

    /// The harness's fast defaults with the case's overlay.
    fn base_policy(&self) -> crate::operator::Policy {
        crate::operator::Policy {
            poll_interval_ms: 20,
            start_claim_ttl_ms: 1_000,
            cancel_grace_ms: 1_000,
            ..Default::default()
        }
    }

    fn policy(&self) -> Result<crate::operator::Policy, serde_json::Error> {
        let mut v = serde_json::to_value(self.base_policy())?;
        if let Some(m) = v.as_object_mut() {
            m.extend(self.policy_overlay.clone());
        }
        serde_json::from_value(v)
    }

    /// Writes what the durable approval store and AIP's queue and lifecycle hold for a delegated
    /// child, and returns the child Action and the request.
    async fn stage_delegation(
        &mut self,
        label: &str,
        capability: &str,
        scope: Vec<String>,
        chain: u32,
        approval: &str,
        child: &str,
    ) -> Result<
        (
            crate::operator::delegation::DelegationRequest,
            Vec<AipRecord>,
        ),
        SutError,
    > {
        let mut records: Vec<AipRecord> = Vec::new();
        use crate::operator::delegation::*;
        use crate::store::Store;
        use serde_json::json;
        let id = self.action_id(label);
        let principal = "agent:hermes_operator:primary";
        let identity = json!({"sub": "hermes@primary", "tenant": self.tenant});
        let approval_id = format!("apr_{id}");
        let mut action = json!({
            "id": id, "capability": capability, "input": {"case": label},
            "mode": "async", "idempotency": {"key": format!("idem-{label}")},
            "identity": identity,
            "memory": {"notes": label, "_aip": {"trace": "harness"}},
        });
        if approval != "none" {
            action["approval"] = json!({"id": approval_id, "decision": "approved"});
        }
        // Staging is idempotent: a replayed delegation finds the records already written.
        let store_err = |e: crate::store::StoreError| match e {
            crate::store::StoreError::Conflict { .. } => Ok(0),
            e => Err(SutError::Harness(format!("staging: {e}"))),
        };
        if approval != "none" && approval != "unstored" {
            let rec = ApprovalRecord {
                approval_id: approval_id.clone(),
                decision: "approved".into(),
                action_id: if approval == "other_action" {
                    "act_other".into()
                } else {
                    id.clone()
                },
                capability_id: capability.into(),
                expires_at: if approval == "expired" { 1 } else { u64::MAX },
            };
            records.push(AipRecord {
                namespace: APPROVALS.into(),
                key: approval_id.clone(),
                value: json!(rec),
            });
        }
        if child != "never" {
            let result = json!({"updated": label});
            let mut queued = action.clone();
            if child == "altered_contract" {
                queued["input"] = json!({"case": label, "amount": 1_000_000});
            }
            let q = QueueEntry {
                action: queued,
                owner: if child == "forged_owner" {
                    "agent:mallory".into()
                } else {
                    principal.into()
                },
                status: "completed".into(),
                result: Some(result.clone()),
                authenticated: AuthenticatedPrincipal {
                    principal: principal.into(),
                    scopes: vec!["action:write".into()],
                    expires_at: u64::MAX,
                    identity: if child == "identity_drift" {
                        json!({"sub": "someone-else"})
                    } else {
                        identity.clone()
                    },
                },
                actor: principal.into(),
                tenant: if child == "tenant_drift" {
                    "t-other".into()
                } else {
                    self.tenant.clone()
                },
                tenant_expires_at: None,
            };
            let l = LifecycleEntry {
                action_id: id.clone(),
                status: "completed".into(),
                result: Some(if child == "stores_disagree" {
                    json!({"updated": "forged"})
                } else {
                    result
                }),
            };
            records.push(AipRecord {
                namespace: QUEUE.into(),
                key: id.clone(),
                value: json!(q),
            });
            records.push(AipRecord {
                namespace: LIFECYCLE.into(),
                key: id.clone(),
                value: json!(l),
            });
        }
        if !self.delegations.iter().any(|(l, _)| l == label) {
            self.delegations.push((label.to_string(), action.clone()));
        }
        // AIP's records: written to the shared store for a local connector, handed to a
        // process with its request.
        if self.remote.is_none() {
            for r in &records {
                self.store
                    .record_cas(&r.namespace, &r.key, None, &r.value)
                    .await
                    .or_else(store_err)?;
            }
        }
        let req = DelegationRequest {
            delegation_id: format!("del_{label}"),
            parent_action_id: self.action_id("parent"),
            requested_by: "agent:planner".into(),
            delegate: principal.into(),
            scope,
            delegation_chain: (0..chain).map(|i| format!("agent:hop{i}")).collect(),
            child: action,
        };
        Ok((req, records))
    }

    fn action_id(&mut self, label: &str) -> String {
        let key = format!("{}-{label}", self.case_key);
        self.actions
            .entry(label.to_string())
            .or_insert_with(|| {
                format!(
                    "act_{}",
                    &crate::digest::Digest::of_bytes(key.as_bytes()).hex()[..32]
                )
            })
            .clone()
    }

    fn action(&mut self, label: &str, input: serde_json::Value) -> Action {
        Action {
            id: self.action_id(label),
            idempotency_key: format!("idem-{label}"),
            capability: "cap:hermes_agent:primary:operator".into(),
            input,
            deadline_ms: Some(20_000),
            identity: None,
            approval: None,
            delegation: None,
        }
    }
}

/// The Hermes runs fake-hermes really started for a source Action (ground truth).
fn runs_of<'a>(
    ledger: &'a fake_hermes::app::Ledger,
    action_id: &str,
) -> Vec<&'a fake_hermes::app::RunStarted> {
    let session = crate::operator::session_id(action_id);
    ledger
        .runs
        .iter()
        .filter(|r| r.session_id == session)
        .collect()
}

/// The AOC invariants re-expressed for an operator binding between two looks: the binding is
/// constant (AOC-REQ-003), its approval command ledger and event sequence only grow
/// (AOC-REQ-004), and a terminal or unresolved status is never cleared (AOC-REQ-005).
fn binding_monotonic(
    label: &str,
    prev: &crate::operator::Binding,
    now: &crate::operator::Binding,
) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut v = |checker: &'static str, requirement: Req, msg: String| {
        out.push(Violation {
            checker,
            requirement,
            occurrence: Some(label.to_string()),
            msg,
        })
    };
    if prev.request_fingerprint != now.request_fingerprint
        || prev.endpoint_id != now.endpoint_id
        || prev.session_id != now.session_id
        || prev.action_id != now.action_id
    {
        v(
            "binding_constant",
            Req::R003,
            "the binding's fingerprint, endpoint, session or Action id changed".into(),
        );
    }
    if prev.run_id.is_some() && prev.run_id != now.run_id {
        v(
            "binding_constant",
            Req::R003,
            format!(
                "the bound run changed from {:?} to {:?}",
                prev.run_id, now.run_id
            ),
        );
    }
    let kept = prev.approval_commands.len() <= now.approval_commands.len()
        && prev
            .approval_commands
            .iter()
            .zip(&now.approval_commands)
            .all(|(a, b)| {
                a.action_id == b.action_id
                    && a.request_fingerprint == b.request_fingerprint
                    && a.claim_id == b.claim_id
                    && a.choice == b.choice
            });
    if !kept {
        v(
            "history_append_only",
            Req::R004,
            "an approval command was removed or rewritten".into(),
        );
    }
    if now.next_sequence < prev.next_sequence {
        v(
            "history_append_only",
            Req::R004,
            format!(
                "the event sequence went back from {} to {}",
                prev.next_sequence, now.next_sequence
            ),
        );
    }
    // Unknown may still be resolved by provider evidence (judged by terminal_only_from_provider);
    // it may never go back to an attemptable state, and a resolved binding never changes.
    let resolved_by_evidence = prev.status == crate::operator::BindingStatus::OutcomeUnknown
        && now.status.is_terminal()
        && !(prev.run_id.is_none() && now.run_id.is_some());
    if prev.status.is_terminal() && now.status != prev.status && !resolved_by_evidence {
        v(
            "unresolved_kept",
            Req::R005,
            if prev.run_id.is_none() && now.run_id.is_some() {
                format!(
                    "an unknown unbound start was followed by run {:?}: the start was attempted again",
                    now.run_id
                )
            } else {
                format!("the binding left {:?} for {:?}", prev.status, now.status)
            },
        );
    }
    out
}

/// Seed 000's contract for `cap:hermes_agent:<endpoint>:operator`, as JSON pointers into the
/// manifest: the harness's oracle for item 1 (the connector's manifest is judged against it).
fn pinned_manifest(endpoint: &str) -> Vec<(&'static str, serde_json::Value)> {
    use serde_json::json;
    vec![
        (
            "/id",
            json!(format!("cap:hermes_agent:{endpoint}:operator")),
        ),
        ("/kind", json!("agent")),
        ("/stability", json!("stable")),
        ("/risk", json!("high")),
        ("/approval/required", json!(true)),
        ("/approval/policy", json!("tenant")),
        ("/approval/validity_seconds", json!(900)),
        ("/idempotency/required", json!(true)),
        ("/idempotency/scope", json!("capability")),
        ("/idempotency/ttl_seconds", json!(86400)),
        ("/idempotency/on_replay", json!("return_original_result")),
        (
            "/effects",
            json!([
                "read",
                "write",
                "send_message",
                "external_network",
                "code_execution"
            ]),
        ),
        ("/modes", json!(["sync", "async", "streaming", "cancel"])),
        ("/async_expected", json!(true)),
        ("/timeout_ms", json!(900000)),
        ("/transaction/supported", json!(false)),
        ("/input_schema/additionalProperties", json!(false)),
        (
            "/input_schema/properties/resume/properties/choice/enum",
            json!(["once", "session", "always", "deny"]),
        ),
        (
            "/output_schema/required",
            json!(["endpoint_id", "session_id", "source_action_id", "status"]),
        ),
    ]
}

/// The harness's own truth about a delegated child against what the connector returned: a
/// result is accepted only from a consistent queue and lifecycle, and only as the lifecycle says.
fn judge_delegated_result(
    r: &Result<OperatorResult, ConnectorError>,
    child: &str,
    label: &str,
) -> Result<(), SutError> {
    let Ok(o) = r else { return Ok(()) };
    let d = &o.output["provider"]["delegated"];
    if d.is_null() {
        // No delegated result claimed (e.g. waiting for approval, unknown start).
        return Ok(());
    }
    if d["authority"] != "aip_native_lifecycle" {
        return Err(SutError::Mismatch(
            Req::R011,
            format!(
                "{label}: the delegated result came from {} instead of the AIP lifecycle",
                d["authority"]
            ),
        ));
    }
    match child {
        "ran" if d["result"] == serde_json::json!({"updated": label}) => Ok(()),
        "ran" => Err(SutError::Mismatch(
            Req::R011,
            format!(
                "{label}: delegated result {} is not the lifecycle's",
                d["result"]
            ),
        )),
        "never" => Err(SutError::Mismatch(
            Req::R011,
            format!("{label}: a result was reported for a child that never ran"),
        )),
        other => Err(SutError::Mismatch(
            Req::R007,
            format!("{label}: a result was accepted from a child with {other}"),
        )),
    }
}

fn check_operator_result(
    r: &Result<OperatorResult, ConnectorError>,
    result: &Option<String>,
    error: &Option<String>,
) -> Result<(), SutError> {
    let got_status = match r {
        Ok(o) => serde_json::to_value(o.status)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
        Err(_) => "error".into(),
    };
    let got_error = match r {
        Ok(o) => o.error.as_ref().map(|e| e.code.as_str().to_string()),
        Err(e) => Some(e.code.as_str().to_string()),
    };
    let detail = match r {
        Ok(o) => o.error.as_ref().map(|e| e.message.clone()),
        Err(e) => Some(e.message.clone()),
    }
    .map_or(String::new(), |m| format!(": {m}"));
    if let Some(want) = error
        && !got_error
            .as_deref()
            .is_some_and(|g| g.ends_with(want.as_str()))
    {
        let req = if want.contains("outcome_unknown") {
            Req::R009
        } else {
            Req::R010
        };
        return Err(SutError::Mismatch(
            req,
            format!(
                "expected failure {want}, got {} ({got_status}){detail}",
                got_error.unwrap_or_else(|| "none".into())
            ),
        ));
    }
    if let Some(want) = result
        && &got_status != want
    {
        return Err(SutError::Mismatch(
            Req::R011,
            format!(
                "expected result {want}, got {got_status} {}{detail}",
                got_error.unwrap_or_default()
            ),
        ));
    }
    if error.is_none() && result.is_none() && r.is_err() {
        return Err(SutError::Mismatch(
            Req::R010,
            format!("invocation failed: {}", got_error.unwrap_or_default()),
        ));
    }
    Ok(())
}

impl World {
    fn who(&self, e: &Option<String>) -> Result<String, SutError> {
        e.clone()
            .or_else(|| self.current.clone())
            .ok_or_else(|| SutError::Harness("no executor has joined".into()))
    }
    fn occ(&self, label: &str) -> Result<OccurrenceId, SutError> {
        self.occurrences.get(label).cloned().ok_or_else(|| {
            SutError::Harness(format!(
                "occurrence {label:?} does not exist (its creation failed?)"
            ))
        })
    }
    fn adm(&self, label: &str) -> Result<AdmissionId, SutError> {
        self.submissions
            .get(label)
            .cloned()
            .ok_or_else(|| SutError::Harness(format!("submission {label:?} was not admitted")))
    }

    async fn perform(&mut self, step: &Step) -> Result<(), SutError> {
        match step {
            Step::Join { executor, .. } => {
                self.sut.join(executor).await?;
                self.current = Some(executor.clone());
            }
            Step::Replace { executor, .. } => {
                self.sut.replace(executor).await?;
                self.current = Some(executor.clone());
            }
            Step::Crash {
                executor, at_hold, ..
            } => {
                // Synchronised with the provider: the request is parked, then the sender dies.
                if let Some(hold) = at_hold
                    && !self
                        .provider
                        .wait_parked(hold, 1, Duration::from_secs(10))
                        .await
                {
                    return Err(SutError::Harness(format!(
                        "no request was parked at hold {hold:?} to crash during"
                    )));
                }
                self.sut.crash(executor).await?;
                // The provider must have seen the sender go before the case releases the hold:
                // a dead process's socket (or an aborted in-process send) closes asynchronously.
                if let Some(hold) = at_hold
                    && !self
                        .provider
                        .wait_client_gone(hold, Duration::from_secs(10))
                        .await
                {
                    return Err(SutError::Harness(format!(
                        "{executor} was killed, but the provider still holds a live client at hold {hold:?}"
                    )));
                }
            }
            Step::Create {
                occurrence,
                executor,
                key,
                amount,
                simulate,
                ..
            } => {
                let who = self.who(executor)?;
                let key = key.clone().unwrap_or_else(|| format!("key-{occurrence}"));
                let id = self
                    .sut
                    .create(&who, &key, amount.unwrap_or(1250), simulate.as_deref())
                    .await?;
                self.occurrences.insert(occurrence.clone(), id);
            }
            Step::Reserve {
                occurrence,
                executor,
                ..
            } => {
                let (who, o) = (self.who(executor)?, self.occ(occurrence)?);
                self.sut.reserve(&who, &o, 1250).await?
            }
            Step::Enter {
                occurrence,
                executor,
                ..
            } => {
                let (who, o) = (self.who(executor)?, self.occ(occurrence)?);
                self.sut.enter(&who, &o).await?
            }
            Step::Send {
                occurrence,
                executor,
                background,
                ..
            } => {
                let (who, o) = (self.who(executor)?, self.occ(occurrence)?);
                self.sut.send(&who, &o, *background).await?
            }
            Step::Execute {
                occurrence,
                executor,
                ..
            } => {
                let (who, o) = (self.who(executor)?, self.occ(occurrence)?);
                self.sut.execute(&who, &o).await?
            }
            Step::Settle { .. } => self.sut.settle().await?,
            Step::Adopt {
                occurrence,
                executor,
                ..
            } => {
                let (who, o) = (self.who(executor)?, self.occ(occurrence)?);
                self.sut.adopt(&who, &o).await?;
            }
            Step::Reconcile {
                occurrence,
                executor,
                ..
            } => {
                let (who, o) = (self.who(executor)?, self.occ(occurrence)?);
                self.sut.reconcile(&who, &o).await?
            }
            Step::Release {
                occurrence,
                executor,
                reason,
                ..
            } => {
                let (who, o) = (self.who(executor)?, self.occ(occurrence)?);
                let reason = match reason.as_deref() {
                    None => ReleaseReason::PredecessorNeverEntered,
                    Some(r) => ReleaseReason::parse(r).ok_or_else(|| {
                        SutError::Harness(format!("release reason {r:?} is unknown"))
                    })?,
                };
                self.sut.release(&who, &o, reason).await?
            }
            Step::Rebind {
                occurrence,
                field,
                value,
                executor,
                ..
            } => {
                let (who, o) = (self.who(executor)?, self.occ(occurrence)?);
                self.sut.rebind(&who, &o, field, value).await?
            }
            Step::Remedy {
                occurrence,
                remedy,
                authorization,
                executor,
                ..
            } => {
                let (who, o) = (self.who(executor)?, self.occ(occurrence)?);
                let r = self.sut.remedy(&who, &o, authorization).await?;
                self.occurrences.insert(remedy.clone(), r);
            }
            Step::ProviderFault { .. } => {
                let rule = step
                    .payments_rule()
                    .ok_or_else(|| SutError::Harness("not a provider fault".into()))?;
                self.provider
                    .add_rule(rule)
                    .map_err(|d| SutError::Harness(d.join("; ")))?;
            }
            Step::ProviderRelease { hold, reject } => {
                if !self
                    .provider
                    .wait_parked(hold, 1, Duration::from_secs(10))
                    .await
                {
                    return Err(SutError::Harness(format!(
                        "no request was parked at hold {hold:?}"
                    )));
                }
                let action = match reject {
                    Some(status) => fake_payments::app::ReleaseAction::Reject { status: *status },
                    None => fake_payments::app::ReleaseAction::Proceed,
                };
                self.provider.release(hold, action);
            }
            Step::ProviderStatus { occurrence, status } => {
                let o = self.occ(occurrence)?;
                let effect = self
                    .provider
                    .ledger()
                    .effects
                    .iter()
                    .find(|e| e.idempotency_key.as_deref() == Some(o.as_str()))
                    .map(|e| e.payment_id.clone());
                let id = effect.ok_or_else(|| {
                    SutError::Harness(format!("the provider has no payment for {occurrence:?}"))
                })?;
                self.provider
                    .set_status(&id, status)
                    .map_err(SutError::Harness)?;
            }
            Step::ProviderExpire { occurrence } => match occurrence {
                Some(label) => {
                    let o = self.occ(label)?;
                    let ids: Vec<String> = effects_for(&self.provider.ledger(), o.as_str())
                        .iter()
                        .map(|e| e.payment_id.clone())
                        .collect();
                    for id in ids {
                        self.provider.expire(Some(&id));
                    }
                }
                None => {
                    self.provider.expire(None);
                }
            },
            Step::Advance { ms } => self.clock.advance(*ms),
            Step::Submit { submission, .. } => {
                let a = self.sut.submit(submission).await?;
                self.submissions.insert(submission.clone(), a);
            }
            Step::Claim {
                submission,
                executor,
                ..
            } => {
                let who = self.who(executor)?;
                let want = self.adm(submission)?;
                let wrong = |msg: String| {
                    SutError::Refused(crate::aoc::Refusal::new(
                        None,
                        Req::R005,
                        crate::aoc::RefusalKind::Admission { msg },
                    ))
                };
                match self.sut.claim(&who).await? {
                    Some(a) if a == want => {}
                    Some(a) => {
                        let label = self
                            .submissions
                            .iter()
                            .find(|(_, id)| **id == a)
                            .map(|(l, _)| l.clone())
                            .unwrap_or_else(|| a.to_string());
                        return Err(wrong(format!(
                            "claimed {label:?} instead of {submission:?}"
                        )));
                    }
                    None => return Err(wrong("nothing to claim".into())),
                }
            }
            Step::Link {
                submission,
                occurrence,
                executor,
                ..
            } => {
                let (who, a, o) = (
                    self.who(executor)?,
                    self.adm(submission)?,
                    self.occ(occurrence)?,
                );
                self.sut.link(&who, &a, &o).await?
            }
            Step::Recover { executor, .. } => {
                let who = self.who(executor)?;
                self.sut.recover(&who).await?;
            }
            Step::ResolveUnknown {
                submission,
                executor,
                ..
            } => {
                let (who, a) = (self.who(executor)?, self.adm(submission)?);
                self.sut.resolve_unknown(&who, &a).await?;
            }
            Step::Finish {
                submission,
                end,
                executor,
                ..
            } => {
                let (who, a) = (self.who(executor)?, self.adm(submission)?);
                let end = crate::aoc::admission::AdmissionEnd::parse(end).ok_or_else(|| {
                    SutError::Harness(format!("admission end {end:?} is unknown"))
                })?;
                self.sut.finish(&who, &a, end).await?
            }
            Step::LeaseRefresh { executor, .. } => self.sut.lease_call(executor, false).await?,
            Step::LeaseRelease { executor, .. } => self.sut.lease_call(executor, true).await?,
            Step::Import { .. } => self.sut.import().await?,
            Step::OperatorInvoke {
                action,
                objective,
                resume,
                choice,
                instance,
                background,
                result,
                error,
            } => {
                let instance = instance.clone().unwrap_or_else(|| "p1".into());
                let input = match (objective, resume) {
                    (Some(o), _) => {
                        serde_json::json!({"objective": o, "context": {"case": action}})
                    }
                    (None, Some(src)) => {
                        self.operator.resumes.insert(action.clone());
                        let sid = self.operator.action_id(src);
                        serde_json::json!({"resume": {"source_action_id": sid, "choice": choice.clone().unwrap_or_default()}})
                    }
                    _ => return Err(SutError::Harness("objective or resume".into())),
                };
                let a = self.operator.action(action, input);
                let c = self.operator.connector(&instance).await?;
                if *background {
                    self.operator
                        .background
                        .push((instance, tokio::spawn(async move { c.invoke(&a).await })));
                } else {
                    let r = c.invoke(&a).await?;
                    check_operator_result(&r, result, error)?;
                }
            }
            Step::OperatorManifest {} => {
                let c = self.operator.connector("p1").await?;
                let m = c.manifest().await?;
                let wrong: Vec<String> = pinned_manifest("primary")
                    .into_iter()
                    .filter_map(|(ptr, want)| {
                        let got = m.pointer(ptr).cloned().unwrap_or(serde_json::Value::Null);
                        (got != want).then(|| format!("{ptr} is {got}, the contract pins {want}"))
                    })
                    .collect();
                if !wrong.is_empty() {
                    return Err(SutError::Mismatch(
                        Req::R009,
                        format!(
                            "the manifest departs from seed 000's contract: {}",
                            wrong.join("; ")
                        ),
                    ));
                }
            }
            Step::OperatorDurability {} if self.operator.remote.is_some() => {
                self.remote_durability().await?
            }
            Step::OperatorDurability {} => {
                for (_, t) in self.operator.background.drain(..) {
                    t.abort();
                }
                self.operator.connectors.clear();
                let Some(reopened) = self.operator.store.reopen().await else {
                    self.operator.unsupported = Some(
                        "the memory store claims no durability: run with --store sqlite:PATH or postgres:URL to exercise seed 000 item 10".into(),
                    );
                    return Ok(());
                };
                let reopened = Arc::new(
                    reopened.map_err(|e| SutError::Harness(format!("reopen the store: {e}")))?,
                );
                use crate::store::Store;
                let ids: Vec<(String, String)> = self
                    .operator
                    .actions
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                let mut seen = Vec::new();
                for (label, id) in ids {
                    let harness = |e: crate::store::StoreError| SutError::Harness(e.to_string());
                    let ns = crate::operator::NAMESPACE;
                    let before = self
                        .operator
                        .store
                        .record_get(ns, &id)
                        .await
                        .map_err(harness)?;
                    let after = reopened.record_get(ns, &id).await.map_err(harness)?;
                    seen.push((label, before, after));
                }
                judge_durability(seen, "a fresh store handle")?;
                self.operator.store = reopened;
            }
            Step::OperatorConfigure {
                policy,
                tenant,
                resolver,
                error,
            } => {
                self.operator.policy_overlay = policy.clone();
                self.operator.resolver = *resolver;
                if let Some(t) = tenant {
                    self.operator.tenant = t.clone();
                }
                // New policy, new connector processes.
                let mut stopped: Vec<Conn> = std::mem::take(&mut self.operator.connectors)
                    .into_values()
                    .collect();
                stopped.extend(self.operator.remote_reader.take());
                for c in stopped {
                    self.operator
                        .stop(&c, "stopped: the case changed the connector's policy")
                        .await;
                }
                let policy = self
                    .operator
                    .policy()
                    .map_err(|e| SutError::Harness(format!("operator policy: {e}")))?;
                let got = if self.operator.remote.is_some() {
                    // The implementation decides whether it accepts the policy.
                    self.operator
                        .reader()
                        .await?
                        .validate_policy(&policy)
                        .await?
                } else {
                    policy.validate().err()
                };
                match (error, got) {
                    (None, None) => {}
                    (Some(want), Some(e)) if e.code.as_str().ends_with(want.as_str()) => {}
                    (want, got) => {
                        return Err(SutError::Mismatch(
                            Req::R001,
                            format!(
                                "policy validation: expected {}, got {}",
                                want.as_deref().unwrap_or("acceptance"),
                                got.map_or("acceptance".into(), |e| e.to_string())
                            ),
                        ));
                    }
                }
            }
            Step::OperatorDelegate {
                action,
                capability,
                scope,
                chain,
                approval,
                child,
                instance,
                result,
                error,
            } => {
                let child = child.as_deref().unwrap_or("ran");
                let (req, records) = self
                    .operator
                    .stage_delegation(
                        action,
                        capability.as_deref().unwrap_or("cap:crm:update"),
                        scope.clone().unwrap_or_else(|| vec!["crm:write".into()]),
                        chain.unwrap_or(1),
                        approval.as_deref().unwrap_or("approved"),
                        child,
                    )
                    .await?;
                let c = self
                    .operator
                    .connector(instance.as_deref().unwrap_or("p1"))
                    .await?;
                let r = c.delegate(&req, &records).await?;
                match &r {
                    Err(e) => {
                        self.operator
                            .delegation_errors
                            .insert(action.clone(), e.code.as_str().to_string());
                    }
                    Ok(_) => {
                        self.operator.delegation_errors.remove(action);
                    }
                }
                judge_delegated_result(&r, child, action)?;
                check_operator_result(&r, result, error)?;
            }
            Step::OperatorCancel {
                action,
                instance,
                status,
            } => {
                let id = self.operator.action_id(action);
                let c = self
                    .operator
                    .connector(instance.as_deref().unwrap_or("p1"))
                    .await?;
                let b = c
                    .cancel(&id)
                    .await?
                    .map_err(|e| SutError::Mismatch(Req::R011, format!("cancel failed: {e}")))?;
                if let Some(want) = status {
                    let got = serde_json::to_value(b.status)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default();
                    if &got != want {
                        return Err(SutError::Mismatch(
                            Req::R011,
                            format!("binding is {got} after the cancel, expected {want}"),
                        ));
                    }
                }
            }
            Step::OperatorWaitBound { action } => {
                let id = self.operator.action_id(action);
                let c = self.operator.reader().await?;
                let mut bound = false;
                for _ in 0..500 {
                    if let Some(b) = c.binding_of(&id).await
                        && (b.run_id.is_some() || b.status.is_terminal())
                    {
                        bound = true;
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                if !bound {
                    return Err(SutError::Harness(format!(
                        "{action}: no run was bound within 5 s"
                    )));
                }
            }
            Step::OperatorSettle {} => {
                for (_, t) in std::mem::take(&mut self.operator.background) {
                    let _ = t.await;
                }
            }
            Step::OperatorKill { instance } => {
                let (kill, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.operator.background)
                    .into_iter()
                    .partition(|(i, _)| i == instance);
                if let Some(c) = self.operator.connectors.remove(instance) {
                    // A process dies by SIGKILL; its requests in flight fail with it.
                    self.operator.stop(&c, "killed with SIGKILL").await;
                }
                for (_, t) in kill {
                    t.abort();
                    let _ = t.await;
                }
                self.operator.background = keep;
            }
            Step::HermesFault { .. } => {
                let (_, h) = self.operator.hermes().await?;
                let rule = step
                    .hermes_rule()
                    .ok_or_else(|| SutError::Harness("not a Hermes fault".into()))?;
                h.add_rule(rule)
                    .map_err(|d| SutError::Harness(d.join("; ")))?;
            }
            Step::HermesScript { script } => {
                let (_, h) = self.operator.hermes().await?;
                h.set_scripts(Vec::new(), Some(script.clone()))
                    .map_err(|d| SutError::Harness(d.join("; ")))?;
            }
            Step::HermesWaitParked { hold } => {
                let (_, h) = self.operator.hermes().await?;
                if !h.wait_parked(hold, 1, Duration::from_secs(10)).await {
                    return Err(SutError::Harness(format!(
                        "nothing parked at hold {hold:?}"
                    )));
                }
            }
            Step::HermesRelease { hold, reject } => {
                let (_, h) = self.operator.hermes().await?;
                let action = match reject {
                    Some(status) => fake_hermes::app::ReleaseAction::Reject { status: *status },
                    None => fake_hermes::app::ReleaseAction::Proceed,
                };
                if h.release(hold, action) == 0 {
                    return Err(SutError::Harness(format!(
                        "nothing parked at hold {hold:?}"
                    )));
                }
            }
            Step::HermesForget {} => {
                let (_, h) = self.operator.hermes().await?;
                h.forget();
            }
        }
        Ok(())
    }

    /// Seed 000 item 10 through the protocol: every connector process is killed, then a fresh
    /// process must read each binding exactly as the killed ones left it.
    async fn remote_durability(&mut self) -> Result<(), SutError> {
        let before_reader = self.operator.reader().await?;
        for (_, c) in std::mem::take(&mut self.operator.connectors) {
            self.operator.stop(&c, "killed with SIGKILL").await;
        }
        for (_, t) in self.operator.background.drain(..) {
            t.abort();
        }
        let ids: Vec<(String, String)> = self
            .operator
            .actions
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut before = Vec::new();
        for (label, id) in &ids {
            before.push((
                label.clone(),
                before_reader.binding(id).await?.ok().flatten(),
            ));
        }
        self.operator
            .stop(&before_reader, "stopped for the durability check")
            .await;
        self.operator.remote_reader = None;
        let fresh = self.operator.reader().await?;
        let mut seen = Vec::new();
        for ((label, id), (_, b)) in ids.iter().zip(before) {
            let after = fresh.binding(id).await?.ok().flatten();
            seen.push((label.clone(), b, after));
        }
        judge_durability(seen, "a fresh process")
    }

    async fn check(&mut self) -> Vec<Violation> {
        let mut occs = Vec::new();
        for (label, id) in &self.occurrences {
            let (state, history) = match self.sut.observe(id).await {
                Ok(x) => x,
                Err(SutError::Corrupt(m)) => (Err(m.clone()), Vec::new()),
                Err(e) => {
                    // Without the implementation's view nothing can be judged honestly.
                    self.observe_error = Some(format!("cannot observe {label}: {e}"));
                    return Vec::new();
                }
            };
            occs.push(Observed {
                label: label.clone(),
                id: id.to_string(),
                state,
                history,
            });
        }
        let generation = match self.sut.lane_generation().await {
            Ok(g) => crate::aoc::ids::Generation(g),
            Err(e) => {
                self.observe_error = Some(format!("cannot read the lane: {e}"));
                return Vec::new();
            }
        };
        let snap = Snapshot {
            occurrences: occs,
            provider: self.provider.ledger(),
            generation,
            limits: self.limits,
        };
        let mut out = self.checker.check(&snap);
        out.extend(self.operator_checks().await);
        out
    }

    /// Checks over every operator binding against fake-hermes's ledger (ground truth).
    async fn operator_checks(&mut self) -> Vec<Violation> {
        let mut out = Vec::new();
        let Some((_, h, _)) = &self.operator.hermes else {
            return out;
        };
        let h = h.clone();
        // What Hermes really received for each delegation is the exact `aip_call` arguments.
        // One copy of the ledger per look; refreshed only while waiting for a terminal status.
        let mut ledger = h.ledger();
        for (label, child) in &self.operator.delegations {
            let id = child["id"].as_str().unwrap_or_default();
            let Ok(want) = crate::operator::delegation::aip_call_arguments(child) else {
                continue;
            };
            for run in runs_of(&ledger, id) {
                let sent: Option<serde_json::Value> = serde_json::from_str(&run.prompt).ok();
                let exact = sent.as_ref().is_some_and(|p| {
                    p["aip_call_arguments"] == want
                        && p["execution_contract"]["arguments"] == want
                        && p["execution_contract"]["tool"] == "aip_call"
                        && p["execution_contract"]["invocations"] == 1
                });
                if !exact {
                    out.push(Violation {
                        checker: "delegation_payload_exact",
                        requirement: Req::R003,
                        occurrence: Some(label.clone()),
                        msg: format!(
                            "run {} did not carry the exact aip_call arguments (child id as action_id, identity removed, one invocation)",
                            run.run_id
                        ),
                    });
                }
            }
        }
        let c = if self.operator.remote.is_some() {
            if self.operator.connectors.is_empty() && self.operator.remote_reader.is_none() {
                return out;
            }
            match self.operator.reader().await {
                Ok(c) => c,
                Err(e) => {
                    self.observe_error = Some(format!("cannot read the bindings: {e}"));
                    return out;
                }
            }
        } else {
            match self.operator.connectors.values().next().cloned() {
                Some(c) => c,
                None => return out,
            }
        };
        let actions: Vec<(String, String)> = self
            .operator
            .actions
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (label, id) in actions {
            // No binding yet is normal; a binding that cannot be read would leave every check
            // below vacuous, so it is a harness error.
            let read = match c.binding(&id).await {
                Ok(Ok(b)) => Ok(b),
                Ok(Err(e)) => Err(e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            let b = match read {
                Ok(Some((_, b))) => b,
                Ok(None) => continue,
                Err(e) => {
                    self.observe_error = Some(format!("cannot read the binding of {label}: {e}"));
                    return out;
                }
            };
            if let Some(prev) = self.operator.seen.get(&label) {
                out.extend(binding_monotonic(&label, prev, &b));
            }
            self.operator.seen.insert(label.clone(), b.clone());
            let runs = runs_of(&ledger, &id).len();
            if runs > 1 {
                out.push(Violation {
                    checker: "one_run_per_action",
                    requirement: Req::R010,
                    occurrence: Some(label.clone()),
                    msg: format!("{runs} Hermes runs started for one source Action (ground truth)"),
                });
            }
            if b.run_id.is_none() && b.status == crate::operator::BindingStatus::Failed && runs > 0
            {
                out.push(Violation { checker: "no_failure_without_evidence", requirement: Req::R009, occurrence: Some(label.clone()), msg: format!("binding says the start failed, but Hermes started {runs} run(s) for it (ground truth)") });
            }
            if let Some(run) = &b.run_id {
                let applied = ledger.approvals.iter().filter(|a| &a.run_id == run).count();
                if applied > b.approval_commands.len() {
                    out.push(Violation {
                        checker: "one_command_per_resume",
                        requirement: Req::R010,
                        occurrence: Some(label.clone()),
                        msg: format!(
                            "{applied} approval decisions applied for {} resume command(s)",
                            b.approval_commands.len()
                        ),
                    });
                }
                let want = match b.status {
                    crate::operator::BindingStatus::Cancelled => Some("cancelled"),
                    crate::operator::BindingStatus::Completed => Some("completed"),
                    _ => None,
                };
                if let Some(want) = want {
                    if !ledger.terminal.contains_key(run) {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        ledger = h.ledger();
                    }
                    let got = ledger
                        .terminal
                        .get(run)
                        .cloned()
                        .unwrap_or_else(|| "not terminal".into());
                    if got != want {
                        out.push(Violation {
                            checker: "terminal_only_from_provider",
                            requirement: Req::R011,
                            occurrence: Some(label.clone()),
                            msg: format!("binding says {want}, but Hermes's run is {got}"),
                        });
                    }
                }
            }
        }
        out
    }

    async fn final_expectations(&mut self, case: &crate::case::Case) -> Vec<Failure> {
        let mut out = Vec::new();
        let has = |r: Req| case.requirements.iter().any(|x| Req::parse(x) == Some(r));
        let pick = |r: Req| {
            if has(r) {
                r
            } else {
                primary(&case.requirements)
            }
        };
        let ledger = self.provider.ledger();
        for (label, e) in &case.expect.occurrences {
            let Some(id) = self.occurrences.get(label).cloned() else {
                out.push(Failure {
                    requirement: primary(&case.requirements),
                    step: None,
                    msg: format!("{label}: never created"),
                });
                continue;
            };
            let st = match self.sut.state(&id).await {
                Ok(s) => s,
                Err(err) => {
                    out.push(Failure {
                        requirement: Req::R004,
                        step: None,
                        msg: format!("{label}: state unreadable: {err}"),
                    });
                    continue;
                }
            };
            let mut fail = |req: Req, msg: String| {
                out.push(Failure {
                    requirement: req,
                    step: None,
                    msg: format!("{label}: {msg}"),
                })
            };
            let state = state_label(&st);
            if let Some(want) = &e.state
                && want != state
            {
                fail(
                    pick(Req::R009),
                    format!("state is {state}, expected {want}"),
                );
            }
            if let Some(want) = &e.outcome {
                let got = outcome_label(&st);
                if got.as_deref() != Some(want.as_str()) {
                    fail(
                        pick(Req::R011),
                        format!(
                            "outcome is {}, expected {want}",
                            got.unwrap_or_else(|| "none".into())
                        ),
                    );
                }
            }
            if let Some(want) = e.entry_attempts
                && st.entry_attempts != want
            {
                fail(
                    pick(Req::R010),
                    format!(
                        "{} provider entry attempts, expected {want}",
                        st.entry_attempts
                    ),
                );
            }
            if let Some(want) = e.provider_effects {
                let got = effects_for(&ledger, id.as_str()).len() as u32;
                if got != want {
                    fail(
                        pick(Req::R010),
                        format!("{got} provider effects (ground truth), expected {want}"),
                    );
                }
            }
            for flag in &e.missing_knowledge {
                let present = st.missing.iter().any(|m| {
                    serde_json::to_value(m)
                        .ok()
                        .and_then(|v| v["flag"].as_str().map(str::to_string))
                        .as_deref()
                        == Some(flag.as_str())
                });
                if !present {
                    fail(
                        pick(Req::R009),
                        format!("missing-knowledge flag {flag} not raised"),
                    );
                }
            }
            if let Some(want) = &e.authority
                && st.authority.state_label() != want
            {
                fail(
                    pick(Req::R012),
                    format!(
                        "authority is {}, expected {want}",
                        st.authority.state_label()
                    ),
                );
            }
            if let Some(want) = e.remedies
                && st.remedies.len() as u32 != want
            {
                fail(
                    pick(Req::R012),
                    format!("{} remedies linked, expected {want}", st.remedies.len()),
                );
            }
        }
        if !case.expect.operators.is_empty() {
            let h = self.operator.hermes().await.ok().map(|(_, h)| h);
            let c = self.operator.reader().await.ok();
            for (label, e) in &case.expect.operators {
                let id = self.operator.action_id(label);
                let (Some(h), Some(c)) = (&h, &c) else { break };
                let ledger = h.ledger();
                let b = c.binding_of(&id).await;
                let mut fail = |req: Req, msg: String| {
                    out.push(Failure {
                        requirement: req,
                        step: None,
                        msg: format!("{label}: {msg}"),
                    })
                };
                if let Some(want) = &e.status {
                    let got = b
                        .as_ref()
                        .and_then(|b| serde_json::to_value(b.status).ok())
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_else(|| "no binding".into());
                    if &got != want {
                        fail(
                            pick(Req::R011),
                            format!("binding is {got}, expected {want}"),
                        );
                    }
                }
                let run = b.as_ref().and_then(|b| b.run_id.clone());
                if let Some(want) = e.runs {
                    let got = runs_of(&ledger, &id).len() as u32;
                    if got != want {
                        fail(
                            pick(Req::R010),
                            format!("{got} Hermes runs started (ground truth), expected {want}"),
                        );
                    }
                }
                if let Some(want) = e.approvals {
                    let got = ledger
                        .approvals
                        .iter()
                        .filter(|a| Some(&a.run_id) == run.as_ref())
                        .count() as u32;
                    if got != want {
                        fail(
                            pick(Req::R010),
                            format!(
                                "{got} approval decisions applied (ground truth), expected {want}"
                            ),
                        );
                    }
                }
                if let Some(want) = e.stops {
                    let got = ledger
                        .stops
                        .iter()
                        .filter(|a| Some(&a.run_id) == run.as_ref() && a.effective)
                        .count() as u32;
                    if got != want {
                        fail(
                            pick(Req::R011),
                            format!("{got} stops applied (ground truth), expected {want}"),
                        );
                    }
                }
            }
        }
        for (sub, want) in &case.expect.admissions {
            let got = match self.submissions.get(sub) {
                Some(id) => match self.sut.admission(&id.clone()).await {
                    Ok(a) => admission_label(&a.state),
                    Err(e) => format!("unreadable ({e})"),
                },
                None => "never admitted".into(),
            };
            if &got != want {
                out.push(Failure {
                    requirement: pick(Req::R005),
                    step: None,
                    msg: format!("admission {sub} is {got}, expected {want}"),
                });
            }
        }
        let described =
            if case.expect.composition.is_some() || !case.expect.bypass_disclosed.is_empty() {
                match self.sut.describe().await {
                    Ok(d) => Some(d),
                    Err(e) => {
                        out.push(Failure {
                            requirement: pick(Req::R013),
                            step: None,
                            msg: format!("the implementation did not describe itself: {e}"),
                        });
                        None
                    }
                }
            } else {
                None
            };
        if let Some(want) = &case.expect.composition
            && let Some((composition, _)) = &described
        {
            let got = match composition {
                CompositionStatus::Supported => "supported",
                CompositionStatus::Unsupported { .. } => "unsupported",
            };
            if got != want {
                out.push(Failure {
                    requirement: pick(Req::R013),
                    step: None,
                    msg: format!("composition reported {got}, expected {want}"),
                });
            }
        }
        for kind in &case.expect.bypass_disclosed {
            let paths = described.as_ref().map(|d| d.1.as_slice()).unwrap_or(&[]);
            let disclosed = paths.iter().any(|b| {
                serde_json::to_value(b.kind)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .as_deref()
                    == Some(kind.as_str())
            });
            if !disclosed {
                out.push(Failure {
                    requirement: pick(Req::R001),
                    step: None,
                    msg: format!("bypass path {kind} is not disclosed"),
                });
            }
        }
        out
    }

    /// Every operator binding of the case against fake-hermes's ledger, with what the pinned
    /// Hermes cannot tell flagged as missing knowledge.
    async fn operator_reports(&mut self) -> Vec<crate::report::model::OperatorReport> {
        use crate::operator::BindingStatus as B;
        let mut out = Vec::new();
        let Some((_, h, _)) = &self.operator.hermes else {
            return out;
        };
        let ledger = h.ledger();
        let Ok(c) = self.operator.reader().await else {
            return out;
        };
        let delegated: Vec<String> = self
            .operator
            .delegations
            .iter()
            .map(|(l, _)| l.clone())
            .collect();
        let actions: Vec<(String, String)> = self
            .operator
            .actions
            .iter()
            .filter(|(l, _)| l.as_str() != "parent" && !self.operator.resumes.contains(*l))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (label, id) in actions {
            let b = c.binding_of(&id).await;
            let runs = runs_of(&ledger, &id);
            let in_runs = |run: &str| runs.iter().any(|r| r.run_id == run);
            let approvals = ledger
                .approvals
                .iter()
                .filter(|a| in_runs(&a.run_id))
                .count() as u32;
            let stops = ledger.stops.iter().filter(|a| in_runs(&a.run_id)).count() as u32;
            let status = b.as_ref().map_or("no_binding".to_string(), |b| {
                serde_json::to_value(b.status)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default()
            });
            let delegation_error = self.operator.delegation_errors.get(&label);
            let aoc_state = match b.as_ref().map(|b| b.status) {
                None => "not_entered",
                Some(B::Completed) if delegation_error.is_some() => "unresolved",
                Some(B::OutcomeUnknown) => "unresolved",
                Some(s) if s.is_terminal() => "resolved",
                Some(B::Starting) if b.as_ref().is_some_and(|b| b.run_id.is_none()) => "pending",
                Some(_) => "unresolved",
            };
            let mut mk = Vec::new();
            if b.as_ref()
                .is_some_and(|b| b.status == B::OutcomeUnknown && b.run_id.is_none())
            {
                // No provider idempotency key or lookup by session: whether the start happened
                // cannot be asked of the pinned Hermes.
                mk.push("start_unverifiable_no_provider_idempotency".to_string());
            }
            if b.as_ref()
                .is_some_and(|b| b.status == B::OutcomeUnknown && b.run_id.is_some())
            {
                mk.push("provider_effect_unresolved".to_string());
            }
            if approvals > 0
                && ledger
                    .approvals
                    .iter()
                    .any(|a| in_runs(&a.run_id) && a.request_id.is_none())
            {
                // The pinned Hermes resolves the oldest pending prompt: which prompt a decision
                // answered is not in its reply.
                mk.push("approval_target_fifo".to_string());
            }
            if let Some(code) = delegation_error
                && b.is_some()
            {
                // Hermes finished, but the child's result was not established.
                mk.push(format!(
                    "delegated_result_unverified:{}",
                    code.trim_start_matches("connector.hermes_agent.")
                ));
            }
            if b.as_ref()
                .is_some_and(|b| b.run_id.is_some() && !b.status.is_terminal())
            {
                // Still running at the end: a status 404 after a restart would prove nothing.
                mk.push("run_status_not_terminal".to_string());
            }
            out.push(crate::report::model::OperatorReport {
                label: label.clone(),
                status,
                aoc_state: aoc_state.into(),
                runs: runs.len() as u32,
                approvals,
                stops,
                delegated: delegated.contains(&label),
                missing_knowledge: mk,
            });
        }
        out
    }

    async fn occurrence_reports(&mut self) -> Vec<OccurrenceReport> {
        let ledger = self.provider.ledger();
        let mut out = Vec::new();
        for (label, id) in &self.occurrences.clone() {
            let Ok(st) = self.sut.state(id).await else {
                continue;
            };
            out.push(OccurrenceReport {
                label: label.clone(),
                occurrence_id: id.to_string(),
                executor_generation: st.owner_generation.0,
                provider_binding_digest: st.binding_digest.as_ref().map(|d| d.to_string()),
                state: state_label(&st).into(),
                phase: st.phase.label().into(),
                outcome: outcome_label(&st),
                provider_entry_state: if st.entry_attempts > 0 {
                    "entered".into()
                } else {
                    "not_entered".into()
                },
                authority_state: st.authority.state_label().into(),
                entry_attempts: st.entry_attempts,
                evidence_sources: st.evidence_sources.iter().cloned().collect(),
                missing_knowledge: st.missing.iter().map(|m| m.to_string()).collect(),
                provider_effects: effects_for(&ledger, id.as_str()).len() as u32,
                history_len: st.len,
            });
        }
        out
    }
}

pub fn state_label(st: &crate::aoc::OccurrenceState) -> &'static str {
    if st.is_unresolved() {
        "unresolved"
    } else {
        match st.phase {
            Phase::Created | Phase::Reserved => "pending",
            Phase::Released => "released",
            _ => "resolved",
        }
    }
}

pub fn outcome_label(st: &crate::aoc::OccurrenceState) -> Option<String> {
    use crate::aoc::history::Outcome;
    st.outcome.map(|o| match o {
        Outcome::Success => "success".into(),
        Outcome::NotAccepted => "not_accepted".into(),
        Outcome::FinalFailure { no_effect: false } => "final_failure".into(),
        Outcome::FinalFailure { no_effect: true } => "final_failure_no_effect".into(),
    })
}

fn admission_label(s: &crate::aoc::admission::AdmissionState) -> String {
    use crate::aoc::admission::{AdmissionEnd, AdmissionState};
    match s {
        AdmissionState::Queued => "queued".into(),
        AdmissionState::Started { .. } => "started".into(),
        AdmissionState::Unknown { .. } => "unknown".into(),
        AdmissionState::Ended { end } => format!(
            "ended:{}",
            match end {
                AdmissionEnd::Completed => "completed",
                AdmissionEnd::Failed => "failed",
                AdmissionEnd::Cancelled => "cancelled",
                AdmissionEnd::NotExecuted => "not_executed",
            }
        ),
    }
}

/// Runs every case in order on one store and builds the report.
pub async fn run_suite(
    cases: &[LoadedCase],
    store: Arc<AnyStore>,
    opts: &RunOptions,
    emit: &mut (dyn FnMut(RunEvent) + Send),
) -> crate::report::model::Report {
    use crate::report::model::{DISCLAIMER, Report, SCHEMA, Summary};
    use crate::store::Store;
    emit(RunEvent::RunStarted {
        run_id: opts.run_id.clone(),
        seed: opts.seed,
        cases: cases.iter().map(|c| c.case.id.clone()).collect(),
    });
    let mut reports = Vec::new();
    for lc in cases {
        reports.push(run_case(store.clone(), lc, opts, emit).await);
    }
    let pass = reports
        .iter()
        .filter(|c| c.verdict == Verdict::Pass)
        .count();
    let fail = reports
        .iter()
        .filter(|c| c.verdict == Verdict::Fail)
        .count();
    emit(RunEvent::RunFinished {
        passed: pass,
        failed: fail,
        other: reports.len() - pass - fail,
    });
    let inputs: Vec<serde_json::Value> = cases
        .iter()
        .map(|c| serde_json::json!({"id": c.case.id, "sha256": crate::digest::Digest::of_bytes(&c.bytes).hex()}))
        .collect();
    let test_input_digest = crate::digest::digest_of(&inputs)
        .map(|d| d.to_string())
        .unwrap_or_default();
    let mut implementation = match &opts.sut {
        Some(spec) => reports
            .iter()
            .find_map(|c| c.implementation.clone())
            .unwrap_or_else(|| serde_json::json!({"command": spec.command, "name": null})),
        None => crate::sut::reference::implementation(),
    };
    if opts.variant != Variant::Conforming && opts.sut.is_none() {
        implementation["variant"] = serde_json::to_value(opts.variant).unwrap_or_default();
    }
    Report {
        schema: SCHEMA.into(),
        run_id: opts.run_id.clone(),
        seed: opts.seed,
        started_at: crate::clock::SystemClock.now().0.to_string(),
        aocheck_version: env!("CARGO_PKG_VERSION").into(),
        implementation,
        provider_profile: reports.iter().find_map(|c| c.provider_profile.clone()),
        store: serde_json::to_value(store.info()).unwrap_or_default(),
        test_input_digest,
        requirements: verdict::aggregate(&reports),
        summary: Summary {
            cases: reports.len(),
            pass,
            fail,
            other: reports.len() - pass - fail,
        },
        cases: reports,
        disclaimer: DISCLAIMER.into(),
    }
}

#[cfg(test)]
mod binding_tests {
    use super::binding_monotonic;
    use crate::operator::{Binding, BindingStatus as B};

    fn b(status: B, run: Option<&str>) -> Binding {
        Binding {
            action_id: "act_1".into(),
            request_fingerprint: "fp".into(),
            endpoint_id: "primary".into(),
            run_id: run.map(str::to_string),
            session_id: "aip-operator-act_1".into(),
            start_claim: None,
            delegation_id: None,
            parent_action_id: None,
            status,
            cancel_requested: false,
            last_event: None,
            next_sequence: 3,
            approval_generation: 0,
            approval_commands: Vec::new(),
            pending_approval: None,
            output: None,
            error: None,
            created_at: 0,
            updated_at: 0,
        }
    }

    #[rstest::rstest]
    #[case::running_to_completed(b(B::Running, Some("r1")), b(B::Completed, Some("r1")), None)]
    #[case::unknown_resolved_same_run(
        b(B::OutcomeUnknown, Some("r1")),
        b(B::Completed, Some("r1")),
        None
    )]
    #[case::completed_reopened(
        b(B::Completed, Some("r1")),
        b(B::Running, Some("r1")),
        Some("unresolved_kept")
    )]
    #[case::unknown_reset(
        b(B::OutcomeUnknown, None),
        b(B::Starting, None),
        Some("unresolved_kept")
    )]
    #[case::unknown_started_again(
        b(B::OutcomeUnknown, None),
        b(B::Completed, Some("r2")),
        Some("unresolved_kept")
    )]
    #[case::run_swapped(
        b(B::Running, Some("r1")),
        b(B::Running, Some("r2")),
        Some("binding_constant")
    )]
    #[case::fingerprint_changed(b(B::Running, Some("r1")), Binding { request_fingerprint: "other".into(), ..b(B::Running, Some("r1")) }, Some("binding_constant"))]
    #[case::sequence_back(b(B::Running, Some("r1")), Binding { next_sequence: 1, ..b(B::Running, Some("r1")) }, Some("history_append_only"))]
    fn binding_transitions_are_judged(
        #[case] prev: Binding,
        #[case] now: Binding,
        #[case] want: Option<&str>,
    ) {
        let v = binding_monotonic("a1", &prev, &now);
        match want {
            None => assert!(v.is_empty(), "{v:?}"),
            Some(c) => assert!(v.iter().any(|x| x.checker == c), "{v:?}"),
        }
    }
}
