//! The runner: for each case, a fresh fake-payments on a loopback port, a fresh domain namespace on
//! the chosen store, and the implementation under test (the reference in process, or processes
//! speaking `aocheck-sut/2`); it performs the case's steps, runs every checker after every step,
//! and judges the case. It emits one [`RunEvent`] stream; reporters consume it.
//!
//! | file | job |
//! |---|---|
//! | `mod.rs` | options, the suite, one case: setup, step loop, teardown |
//! | `events.rs` | the [`RunEvent`] stream |
//! | `world.rs` | each step as a request to the implementation or a provider verb; checkers after every step |
//! | `connectors.rs` | the Hermes side: fake-hermes, connector instances, the binding reader |
//! | `verdict.rs` | the verdict policy, step expectations, final expectations, requirement aggregation |
//! | `assemble.rs` | the per-occurrence and per-binding parts of the report |
//!
//! The checkers themselves are in `crate::check` (AOC) and `crate::check::hermes` (seed 000).

mod assemble;
mod connectors;
mod credentials;
mod events;
mod operator_steps;
mod verdict;
mod workflow;
mod world;

use connectors::OperatorWorld;
pub use events::RunEvent;
pub use verdict::aggregate;
use verdict::{StepVerdict, primary, push_finding};
use world::World;
pub use world::required_ops;

use crate::aoc::Domain;
use crate::aoc::composition::composition_status;
use crate::aoc::domain::{DomainConfig, Limits};
use crate::case::LoadedCase;
use crate::check::Checker;
use crate::clock::{Clock, ManualClock};
use crate::reference::Knobs;
use crate::reference::in_process::InProcess;
use crate::report::model::{CaseReport, Failure, HarnessCause};
use crate::store::AnyStore;
use crate::sut::Sut;
use crate::sut::SutError;
use crate::sut::message::{DomainInit, Init, Op, PaymentsInit, StoreInit};
use crate::sut::processes::{ProcessSpec, ProcessSut};
use provider_model::payments::config::IdempotencyProfile;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How to run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    pub run_id: String,
    pub seed: u64,
    /// The in-process reference's test knobs (none outside test builds).
    pub knobs: Knobs,
    /// The `--store` argument a reproduction needs (`None`: the default SQLite store).
    pub repro_store: Option<String>,
    /// Judge an implementation through `aocheck-sut/2` processes instead of in process.
    pub sut: Option<ProcessSpec>,
    /// A schedule of `aocheck explore`: a declared fault that never fired is coverage, not a
    /// harness error (a random schedule declares faults the implementation may never reach);
    /// everything else is judged as in a case.
    pub explore: bool,
}

/// `w` as one shell word: as it is when it has nothing a shell reads, else single-quoted.
fn shell_word(w: &str) -> String {
    if !w.is_empty()
        && w.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:@%+=,".contains(c))
    {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', "'\\''"))
    }
}

fn sut_err(e: &SutError) -> String {
    e.to_string()
}

/// Setup: a fresh fake-payments on a loopback port, the implementation under test (the
/// reference in process, or its processes) and the World that drives them. An error is why the
/// case could not start (a harness error).
async fn setup(
    store: Arc<AnyStore>,
    lc: &LoadedCase,
    opts: &RunOptions,
    report: &mut CaseReport,
) -> Result<
    (
        World,
        tokio::task::JoinHandle<()>,
        crate::providers::Payments,
    ),
    (HarnessCause, String),
> {
    let case = &lc.case;
    // A fresh provider per case.
    let mut pconfig = provider_model::payments::config::Config::example();
    // The provider's signing key follows the seed, so a run's profile digest is reproducible.
    pconfig.signing_seed_hex = Some(
        crate::digest::Digest::of_bytes(format!("aocheck-fake-payments-{}", opts.seed).as_bytes())
            .hex(),
    );
    // The ground truth is the harness's alone: the control API answers only a token drawn for
    // this case and never given to the implementation (the harness itself uses the handle).
    pconfig.control_token = control_token().map_err(|e| (HarnessCause::Unreachable, e))?;
    // The in-process credentials are fixed test values; they are scrubbed from outputs all the
    // same (a credential is never written, whoever could guess it).
    crate::secrets::register("sk_test_a");
    crate::secrets::register("hermes-test-key");
    pconfig.accounts[0].idempotency = match case.config.idempotency.as_deref() {
        Some("ietf-draft") => IdempotencyProfile::IetfDraft,
        Some("none") => IdempotencyProfile::None,
        _ => IdempotencyProfile::StripeV1,
    };
    let crate::providers::Served {
        url: base,
        handle: provider,
        task: server,
    } = crate::providers::start_payments(pconfig)
        .await
        .map_err(|e| (HarnessCause::Unreachable, e))?;
    let client =
        match crate::reference::payments::PaymentsClient::connect(&base, "acct_a", "sk_test_a")
            .await
        {
            Ok(c) => c,
            Err(e) => {
                server.abort();
                return Err((HarnessCause::Unreachable, e.to_string()));
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
            return Err((HarnessCause::Unreachable, format!("domain config: {d:?}")));
        }
    };
    report.bypass_paths = domain.bypass_paths().to_vec();
    report.composition = composition_status(domain.config().aadp);
    report.limits = Some(limits);
    let payments = PaymentsInit {
        base_url: base.clone(),
        account: "acct_a".into(),
        api_key: "sk_test_a".into(),
    };
    let dinit = DomainInit {
        id: Some(domain.config().domain_id.clone()),
        bypass_paths: domain.config().bypass_paths.clone(),
        aadp: domain.config().aadp,
        action_fence: domain.config().action_fence,
    };
    // Through the protocol, every process has its own provider credentials (issue 21).
    let credentials = opts.sut.as_ref().map(|_| {
        Arc::new(credentials::CaseCredentials {
            payments: provider.clone(),
            account: "acct_a".into(),
            hermes: std::sync::Mutex::new(None),
            gate: std::sync::Mutex::new(None),
        })
    });
    let sut: Result<Box<dyn Sut>, SutError> = match &opts.sut {
        None => {
            let init = Init::for_case(
                StoreInit::InProcess,
                &case.id,
                payments,
                limits,
                dinit,
                opts.seed,
            );
            InProcess::start(
                store_for_operator,
                client.clone(),
                init,
                opts.knobs,
                clock.clone(),
            )
            .map(|s| Box::new(s) as Box<dyn Sut>)
        }
        Some(spec) => ProcessSut::start(
            spec.clone(),
            &case.id,
            payments,
            limits,
            dinit,
            opts.seed,
            clock.clone(),
            credentials
                .clone()
                .map(|c| c as Arc<dyn crate::sut::processes::Credentials>),
        )
        .await
        .map(|s| Box::new(s) as Box<dyn Sut>),
    };
    let sut = match sut {
        Ok(s) => s,
        Err(e) => {
            server.abort();
            // Another protocol version: nothing could be judged, but nothing was unreachable.
            let cause = match e {
                SutError::Version(_) => HarnessCause::Undecided,
                _ => HarnessCause::Unreachable,
            };
            return Err((cause, e.to_string()));
        }
    };
    report.implementation = sut.implementation();
    report.key_rule = Some(sut.hello().key_rule.clone());
    let key_rule = crate::check::accounting::KeyRule::parse(&sut.hello().key_rule)
        .map_err(|e| (HarnessCause::Undecided, format!("the implementation's {e}")))?;
    let connect = sut.connectors();
    let world = World {
        sut,
        provider: provider.clone(),
        clock,
        occurrences: BTreeMap::new(),
        created_by_key: BTreeMap::new(),
        created_by_action: BTreeMap::new(),
        action_fence: case.config.action_fence,
        undecided: Vec::new(),
        submissions: BTreeMap::new(),
        current: None,
        checker: Checker::default(),
        race_answers: None,
        races_judged: 0,
        explore: opts.explore,
        background_sends: 0,
        holds_armed: BTreeMap::new(),
        submitted: Vec::new(),
        reserved: Default::default(),
        grants: BTreeMap::new(),
        handed_out: Default::default(),
        asked: BTreeMap::new(),
        remedies: BTreeMap::new(),
        account: "acct_a".into(),
        holder: None,
        key_rule,
        limits,
        observe_error: None,
        processes: credentials.is_some(),
        findings: Vec::new(),
        tape: Vec::new(),
        finals: Vec::new(),
        final_ledger: None,
        record: !opts.explore,
        last_look: None,
        last_bindings: None,
        step: None,
        admitted: Vec::new(),
        statuses: BTreeMap::new(),
        published: None,
        operator: OperatorWorld {
            credentials,
            hermes: None,
            connectors: BTreeMap::new(),
            connect,
            reader: None,
            actions: BTreeMap::new(),
            background: Vec::new(),
            case_key: format!("{}-{}", opts.run_id, case.id),
            policy_overlay: serde_json::Map::new(),
            tenant: "t1".into(),
            resolver: true,
            delegations: Vec::new(),
            unsupported: None,
            resumes: Default::default(),
            delegation_errors: BTreeMap::new(),
            seen: BTreeMap::new(),
            clock: None,
        },
    };
    Ok((world, server, provider))
}

/// The case file as a repro names it: relative to the working folder when it lies under it.
pub fn repro_case_path(path: &std::path::Path) -> std::path::PathBuf {
    let cwd = std::env::current_dir().ok();
    match cwd.as_deref().map(|c| path.strip_prefix(c)) {
        Some(Ok(rel)) if path.is_absolute() => rel.to_path_buf(),
        _ => path.to_path_buf(),
    }
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
    let Some(checked) = &lc.checked else {
        return CaseReport::new(&case.id, &case.title, &lc.path, case.requirements.clone())
            .harness_error_because(
                HarnessCause::Undecided,
                "the case has defects (`aocheck cases check` names them); it was not run".into(),
                Instant::now(),
            );
    };
    emit(RunEvent::CaseStarted {
        case: case.id.clone(),
    });
    let mut report = CaseReport::new(&case.id, &case.title, &lc.path, case.requirements.clone());
    report.file_sha256 = crate::digest::Digest::of_bytes(&lc.bytes).hex();
    // A case outside the shipped folder is named by its file too (`--cases FILE`), relative
    // to the working folder where it lies under it (no machine path in a report).
    let shown = repro_case_path(&lc.path);
    let from = if shown.starts_with("cases") {
        String::new()
    } else {
        format!("--cases {} ", shell_word(&shown.display().to_string()))
    };
    report.repro = format!("aocheck run {from}--case {} --seed {}", case.id, opts.seed);
    if let Some(st) = &opts.repro_store {
        report.repro.push_str(&format!(" --store {st}"));
    }
    if let Some(spec) = &opts.sut {
        report
            .repro
            .push_str(&format!(" --sut '{}'", spec.shown().replace('\'', "'\\''")));
    }
    // A Hermes Workflow case (seed 002) has a world of its own.
    if case.is_workflow() {
        return workflow::run_case(lc, opts, report, emit).await;
    }
    let (mut world, server, provider) = match setup(store, lc, opts, &mut report).await {
        Ok(x) => x,
        Err((cause, m)) => return report.harness_error_because(cause, m, started),
    };
    let mut failures: Vec<Failure> = Vec::new();
    let mut harness: Option<String> = None;
    // Set when the steps stopped on a harness problem after a requirement already failed: what
    // happened up to there is still judged (invariants, final expectations).
    let mut judge_after_stop = false;
    let mut cause = HarnessCause::Unreachable;
    // A case that needs an operation the implementation does not list is never run partly.
    {
        let p = &mut world.sut;
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
    // In every case: what the implementation states about itself is judged (statements, as
    // data); free text is shown for review and leaves AOC-REQ-013 undecided, never passed.
    let claims = world.sut.hello().claims.clone();
    let statements = world.sut.hello().statements.clone();
    let mut replayed_lines = std::collections::BTreeSet::new();
    let before_claims = world.checker.facts.clone();
    for f in world.checker.claims(&claims, &statements) {
        replayed_lines.insert(f.line());
        push_finding(&mut failures, f, None);
    }
    if !claims.is_empty() {
        world.undecided.push((
            crate::aoc::Req::R013,
            format!(
                "the implementation describes itself in free text ({} claim(s), shown for review): prose cannot be judged against AOC-REQ-013; state it as `statements` (docs/sut-protocol.md)",
                claims.len()
            ),
        ));
    }
    let claims_facts = crate::check::replay::facts_between(&before_claims, &world.checker.facts);
    let skip = world.operator.unsupported.is_some() || harness.is_some();
    let step_deadline = opts.sut.as_ref().map_or(IN_PROCESS_STEP_DEADLINE, |s| {
        (s.timeout * 6).max(IN_PROCESS_STEP_DEADLINE)
    });
    for (i, step) in case.steps.iter().enumerate().take_while(|_| !skip) {
        // Parsed once at load; a case the loader did not check never gets here.
        let Some(expected) = checked.expected.get(i).copied() else {
            harness = Some(format!(
                "steps[{i}]: no checked expectation (an aocheck bug)"
            ));
            break;
        };
        // A schedule of the explorer acts on what its implementation made: a step on an
        // occurrence or submission whose creation was refused is skipped (a case would be a
        // harness error there; a random schedule cannot know what will be refused).
        if opts.explore
            && let Some(missing) = world.never_made(step)
        {
            report.steps.push(format!(
                "{}: skipped ({missing} was never made)",
                step.verb()
            ));
            continue;
        }
        // Every step has a deadline, in process as through the protocol (where each request also
        // has its own): a step that never ends is a harness error naming it, never a hung run.
        world.step = Some(i);
        let result = match tokio::time::timeout(step_deadline, world.perform(step)).await {
            Ok(r) => r,
            Err(_) => Err(SutError::Harness(format!(
                "the step did not finish within {} s",
                step_deadline.as_secs()
            ))),
        };
        let label = match &result {
            Ok(()) => "ok".to_string(),
            Err(SutError::Refused(r)) => format!("refused {}", r.requirement),
            Err(SutError::RefusedUnnamed(_)) => "refused (no requirement named)".to_string(),
            Err(e) => format!("error: {}", sut_err(e)),
        };
        // A race's line says what each of its requests answered.
        let label = match world.race_answers.take() {
            Some(each) => format!("{each} → {label}"),
            None => label,
        };
        emit(RunEvent::StepFinished {
            case: case.id.clone(),
            index: i,
            verb: step.verb(),
            result: label.clone(),
        });
        report.steps.push(format!("{}: {label}", step.verb()));
        match verdict::judge_step(step, i, &result, expected, &case.requirements) {
            StepVerdict::Met => {
                // A refusal the case expected is a fact about the requirement it protects.
                if let (crate::case::Expected::Refused(want), Err(_)) = (expected, &result) {
                    crate::check::steps::refusal_met(
                        &mut world.checker.facts,
                        want.unwrap_or_else(|| primary(&case.requirements)),
                    );
                }
            }
            StepVerdict::Failed(f) => {
                crate::check::steps::step_failed(&mut world.checker.facts, f.requirement);
                failures.push(f)
            }
            StepVerdict::Undecided(m) => {
                if matches!(result, Err(SutError::Version(_))) {
                    cause = HarnessCause::Undecided;
                }
                // A step the case cannot perform after an earlier step already failed (a
                // refused creation leaves later steps nothing to act on): the steps stop, and
                // what happened is still judged below.
                judge_after_stop = !failures.is_empty()
                    && matches!(result, Err(SutError::Harness(_)))
                    && world.sut.escaped().is_empty();
                // What a look taken during the step found is reported (it is on the evidence).
                for f in std::mem::take(&mut world.findings) {
                    push_finding(&mut failures, f, Some(i));
                }
                harness = Some(m);
                break;
            }
        }
        // Every checker after every step.
        for f in std::mem::take(&mut world.findings) {
            push_finding(&mut failures, f, Some(i));
        }
        for v in world.check().await {
            push_finding(&mut failures, v, Some(i));
        }
        if let Some(h) = world.observe_error.take() {
            harness = Some(format!("steps[{i}] ({}): {h}", step.verb()));
            break;
        }
        if let Some(e) = escaped(&*world.sut) {
            harness = Some(format!("steps[{i}] ({}): {e}", step.verb()));
            break;
        }
    }
    world.step = None;
    // The end of the case waits for background work. It has no expectation: a refusal there (a
    // late reply the implementation declined) is its choice and is reported; what it left
    // behind is judged by the checkers and the final expectations below.
    if (harness.is_none() || judge_after_stop)
        && !skip
        && let Err(e) = world.sut.settle().await
    {
        match e {
            SutError::Harness(m) | SutError::Version(m) => {
                judge_after_stop = false;
                harness = Some(harness.map_or(m.clone(), |h| format!("{h}; settle: {m}")));
            }
            SutError::Refused(r) => report
                .steps
                .push(format!("settle (end of case): refused {}", r.requirement)),
            SutError::RefusedUnnamed(_) => report
                .steps
                .push("settle (end of case): refused (no requirement named)".into()),
            SutError::Corrupt(m) => {
                let (requirement, msg) = crate::check::steps::corrupt_history("settle", &m);
                failures.push(Failure {
                    requirement,
                    step: None,
                    msg,
                })
            }
        }
    }
    if (harness.is_none() || judge_after_stop) && !skip {
        for v in world.check().await {
            push_finding(&mut failures, v, Some(case.steps.len()));
        }
        if let Some(h) = world.observe_error.take() {
            harness = Some(harness.map_or(h.clone(), |x| format!("{x}; {h}")));
        }
        for f in world.final_expectations(case, checked).await {
            push_finding(&mut failures, f, None);
        }
        if let Some(h) = world.observe_error.take() {
            harness = Some(harness.map_or(h.clone(), |x| format!("{x}; {h}")));
        }
    }
    // Declared faults must have fired: a case that ran no fault is not a pass.
    let hermes_rules = world.operator.hermes.as_ref().map(|(_, h, _)| h.rules());
    let (faults, unfired) =
        verdict::fired_faults(case, &provider, hermes_rules, skip, world.races_judged);
    report.faults = faults;
    report.operators = world.operator_reports().await;
    world.sut.shutdown().await;
    // With the implementation gone, the ledgers are read again and judged (an effect made after
    // the last look is found), and the report publishes what the last judged look said.
    if (harness.is_none() || judge_after_stop) && !skip {
        for v in world.closing_look().await {
            push_finding(&mut failures, v, Some(case.steps.len()));
        }
    }
    report.occurrences = world.occurrence_reports();
    report.facts = world.checker.facts.by_id();
    // Not established: declared requirements no check examined, and those with an expectation
    // aocheck could not decide (missing knowledge, never a pass).
    report.not_established = case
        .requirements
        .iter()
        .filter(|r| {
            crate::aoc::requirement::Req::parse(r).is_some_and(|r| {
                world.checker.facts.count(r) == 0 || world.undecided.iter().any(|(u, _)| *u == r)
            })
        })
        .cloned()
        .collect();
    report.undecided = world.undecided.iter().map(|(_, m)| m.clone()).collect();
    report.sut_processes = world.sut.processes();
    if harness.is_none()
        && let Some(e) = escaped(&*world.sut)
    {
        harness = Some(e);
    }
    // Any request to a fake's control routes came from the judged party (the harness drives
    // the fakes in process): refused or not, the case cannot pass.
    if harness.is_none() {
        let hermes = world
            .operator
            .hermes
            .as_ref()
            .map(|(_, h, _)| h.control_attempts())
            .unwrap_or_default();
        let payments = provider.control_attempts();
        if let Some(why) = crate::check::credentials::control_reached(&[
            ("fake-payments", &payments),
            ("fake-hermes", &hermes),
        ]) {
            harness = Some(why);
            cause = HarnessCause::Undecided;
        }
    }
    // A misused clock is said even where a harness error already stands (its waits for Hermes
    // then timed out: this is why).
    if let Some(k) = &world.operator.clock
        && let Some(why) = crate::check::credentials::clock_misused(
            &k.gate.participants(),
            !k.sim.is_driven(),
            opts.sut
                .as_ref()
                .map_or(u64::MAX, |s| s.timeout.as_millis() as u64),
        )
    {
        harness = Some(match harness.take() {
            Some(h) => format!("{h}; {why}"),
            None => why,
        });
        cause = HarnessCause::Undecided;
    }
    server.abort();
    // A violated requirement decides the case even if the harness could not finish it (the
    // harness problem is then a consequence, kept in the report); otherwise an undecided case is
    // a harness error, and a case whose declared faults never fired is never a pass.
    if harness.is_none() && !unfired.is_empty() && !opts.explore {
        harness = Some(unfired.join("; "));
        cause = HarnessCause::Undecided;
    }
    report.harness = harness.clone();
    report.harness_cause = harness.as_ref().map(|_| cause);
    report.unsupported = world.operator.unsupported.clone();
    let world_facts = world.checker.facts.total();
    if world.record {
        report.evidence = evidence_of(
            &world,
            case.steps.len(),
            &report,
            &failures,
            &claims_facts,
            replayed_lines,
        );
    }
    verdict::close(report, failures, world_facts, started, emit)
}

/// The case's evidence (`check::replay::Tape`): what its checkers were given at every look, and
/// what was found and examined outside those looks. `None` if it cannot be written as JSON (it
/// always can; the report then simply has no evidence for the case, which `analyze` names).
fn evidence_of(
    world: &World,
    end_step: usize,
    report: &CaseReport,
    failures: &[Failure],
    claims_facts: &std::collections::BTreeMap<String, u32>,
    mut replayed: std::collections::BTreeSet<String>,
) -> Option<Arc<serde_json::Value>> {
    use crate::check::replay::{SCHEMA, Tape};
    for l in &world.tape {
        replayed.extend(l.found.iter().cloned());
    }
    for f in &world.finals {
        replayed.extend(f.found.iter().cloned());
    }
    let other_facts = crate::check::replay::facts_outside(
        &world.checker.facts,
        std::iter::once(claims_facts)
            .chain(world.tape.iter().map(|l| &l.facts))
            .chain(world.finals.iter().map(|f| &f.facts)),
    );
    let tape = Tape {
        schema: SCHEMA.into(),
        case: report.id.clone(),
        declared: report.requirements.clone(),
        steps: report.steps.clone(),
        end_step,
        published: world.published,
        claims: world.sut.hello().claims.clone(),
        statements: world.sut.hello().statements.clone(),
        looks: world.tape.clone(),
        finals: world.finals.clone(),
        final_ledger: world.final_ledger.clone(),
        other_failures: failures
            .iter()
            .filter(|f| !replayed.contains(&f.msg))
            .cloned()
            .collect(),
        other_facts,
        // What the final expectations on occurrences could not decide is derived again.
        undecided: world
            .undecided
            .iter()
            .filter(|(r, m)| {
                !world
                    .finals
                    .iter()
                    .any(|f| f.undecided.as_ref() == Some(&(r.id().to_string(), m.clone())))
            })
            .map(|(r, _)| r.id().to_string())
            .collect(),
        harness: report.harness.clone(),
        unsupported: report.unsupported.clone(),
        faults: report.faults.clone(),
        processes: report.sut_processes.clone(),
        workflow: None,
    };
    serde_json::to_value(&tape).ok().map(Arc::new)
}

/// Runs every case in order on one store and builds the report.
/// How long one step may take in process (through the protocol: six request deadlines, if that
/// is longer). Generous: the slowest shipped step takes about a second.
const IN_PROCESS_STEP_DEADLINE: Duration = Duration::from_secs(60);

/// A kill that left processes of the implementation alive: the crash did not happen as declared.
fn escaped(sut: &dyn crate::sut::Sut) -> Option<String> {
    let e = sut.escaped();
    (!e.is_empty()).then(|| {
        format!(
            "the implementation's processes outlived their kill, so no crash happened as declared: {}",
            e.join("; ")
        )
    })
}

/// A control-API token drawn from the OS's entropy for one fake: never sent to the
/// implementation, never written to a report. No entropy, no run (a guessable token would hand
/// the ground truth to the judged party).
pub(crate) fn control_token() -> Result<String, String> {
    let mut b = [0u8; 24];
    getrandom::fill(&mut b).map_err(|e| format!("no entropy for a control token: {e}"))?;
    let token = format!("ctl_{}", hex::encode(b));
    crate::secrets::register(&token);
    Ok(token)
}

/// The digest of the case files a run judges: each case's id and the SHA-256 of its file's bytes,
/// in order.
pub fn test_input_digest(cases: &[LoadedCase]) -> String {
    let inputs: Vec<serde_json::Value> = cases
        .iter()
        .map(|c| serde_json::json!({"id": c.case.id, "sha256": crate::digest::Digest::of_bytes(&c.bytes).hex()}))
        .collect();
    crate::digest::digest_of(&inputs)
        .map(|d| d.to_string())
        .unwrap_or_default()
}

/// Runs the cases in order and returns the run's report.
pub async fn run_suite(
    cases: &[LoadedCase],
    store: Arc<AnyStore>,
    opts: &RunOptions,
    emit: &mut (dyn FnMut(RunEvent) + Send),
) -> crate::report::model::Report {
    let mut done = Vec::new();
    run_suite_into(cases, store.clone(), opts, emit, &mut |_| {}, &mut done).await;
    assemble(cases, done, store.as_ref(), opts)
}

/// Runs the cases in order, putting each case's report in `done` as it ends: a run stopped by
/// `--timeout` (this future dropped) still has what ended. `ended` sees each case's report
/// first (the command writes its evidence to disk there, so memory does not grow with it).
pub async fn run_suite_into(
    cases: &[LoadedCase],
    store: Arc<AnyStore>,
    opts: &RunOptions,
    emit: &mut (dyn FnMut(RunEvent) + Send),
    ended: &mut (dyn FnMut(&mut CaseReport) + Send),
    done: &mut Vec<CaseReport>,
) {
    emit(RunEvent::RunStarted {
        run_id: opts.run_id.clone(),
        seed: opts.seed,
        cases: cases.iter().map(|c| c.case.id.clone()).collect(),
    });
    for lc in cases {
        let mut r = run_case(store.clone(), lc, opts, emit).await;
        ended(&mut r);
        done.push(r);
    }
    let s = crate::report::model::Summary::of(done);
    emit(RunEvent::RunFinished {
        passed: s.pass,
        failed: s.fail,
        other: s.other,
    });
}

/// The run's report from its cases' reports (in the cases' order; a case with no report, one a
/// stopped run never ended, is `not_run`).
pub fn assemble(
    cases: &[LoadedCase],
    mut reports: Vec<CaseReport>,
    store: &AnyStore,
    opts: &RunOptions,
) -> crate::report::model::Report {
    use crate::report::model::{DISCLAIMER, Report, SCHEMA, Summary};
    use crate::store::Store;
    // `not_run`, with no reproduce line.
    for lc in cases.iter().skip(reports.len()) {
        let mut r = CaseReport::new(
            &lc.case.id,
            &lc.case.title,
            &lc.path,
            lc.case.requirements.clone(),
        );
        r.file_sha256 = crate::digest::Digest::of_bytes(&lc.bytes).hex();
        reports.push(r);
    }
    let test_input_digest = test_input_digest(cases);
    let mut implementation = match &opts.sut {
        Some(spec) => reports
            .iter()
            .find_map(|c| c.implementation.clone())
            .unwrap_or_else(|| {
                // No case reached the implementation: what aocheck knows of it is its command.
                serde_json::json!({
                    "name": "(unknown: no case reached the implementation)",
                    "version": "",
                    "same_team": false,
                    "command": spec.shown(),
                    "programs": spec.programs(),
                })
            }),
        None => crate::reference::implementation(opts.knobs),
    };
    if opts.knobs.variant() != crate::reference::Variant::Conforming && opts.sut.is_none() {
        implementation["variant"] = serde_json::to_value(opts.knobs.variant()).unwrap_or_default();
    }
    // AOC §7's same-team label belongs to aocheck's own reference only.
    let disclaimer =
        if opts.sut.is_some() && implementation["same_team"] != serde_json::Value::Bool(true) {
            crate::report::model::DISCLAIMER_THIRD_PARTY.into()
        } else {
            DISCLAIMER.into()
        };
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
        summary: Summary::of(&reports),
        cases: reports,
        disclaimer,
        incomplete: None,
        shard: None,
        expectations: None,
    }
}
