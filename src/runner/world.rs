//! The World: what each case step means, as a typed `aocheck-sut` request to the implementation
//! or a verb on a provider simulator, and the checkers run after every step.

use super::connectors::OperatorWorld;
use crate::aoc::domain::Limits;
use crate::aoc::history::ReleaseReason;
use crate::aoc::ids::{AdmissionId, OccurrenceId};
use crate::case::Step;
use crate::check::accounting::{Accounting, KeyRule};
use crate::check::{Checker, Finding, Observed, Snapshot};
use crate::clock::ManualClock;
use crate::providers::holds;
use crate::sut::Sut;
use crate::sut::SutError;
use crate::sut::message::{Op, Request, reply};
use crate::sut::operator::Conn;
use crate::sut::{To, decode};
use std::collections::BTreeMap;
use std::time::Duration;

use crate::check::hermes::judge_durability;

pub(super) struct World {
    pub(super) sut: Box<dyn Sut>,
    /// Set when the implementation could not be observed after a step (a harness error).
    pub(super) observe_error: Option<String>,
    pub(super) provider: crate::providers::Payments,
    pub(super) clock: ManualClock,
    pub(super) occurrences: BTreeMap<String, OccurrenceId>,
    /// The first occurrence each creation key returned (AOC-REQ-002).
    pub(super) created_by_key: BTreeMap<String, OccurrenceId>,
    /// Under the case's action fence, the occurrence each action was created as.
    pub(super) created_by_action: BTreeMap<String, OccurrenceId>,
    pub(super) action_fence: bool,
    /// Final expectations that could not be decided, with the requirement each concerns.
    pub(super) undecided: Vec<(crate::aoc::Req, String)>,
    pub(super) submissions: BTreeMap<String, AdmissionId>,
    pub(super) current: Option<String>,
    pub(super) checker: Checker,
    pub(super) limits: Limits,
    /// The implementation's declared key rule: how the provider's ledger is attributed.
    pub(super) key_rule: KeyRule,
    pub(super) operator: OperatorWorld,
    /// What each request of the last race answered, for the step's line in the report.
    pub(super) race_answers: Option<String>,
    /// Races whose serialisation check examined an occurrence two of its requests tried to
    /// admit: a race counts as a fired fault only then.
    pub(super) races_judged: usize,
    /// A schedule of the explorer (`RunOptions::explore`).
    pub(super) explore: bool,
    /// Background sends the implementation accepted, and the count when each hold was armed:
    /// a request can be parked at a hold only if one was accepted since.
    pub(super) background_sends: u32,
    pub(super) holds_armed: BTreeMap<String, u32>,
    /// Occurrences whose reservation the implementation accepted (bound), and each original's
    /// grant as its creation named it.
    pub(super) reserved: std::collections::BTreeSet<OccurrenceId>,
    pub(super) grants: BTreeMap<String, String>,
    /// Submissions in the order the implementation admitted them, and those it handed out.
    pub(super) submitted: Vec<String>,
    pub(super) handed_out: std::collections::BTreeSet<String>,
    /// What the case asked of each occurrence (by id): the payment its creation asked for.
    pub(super) asked: BTreeMap<String, crate::check::ledger::Asked>,
    /// The remedy occurrences created (by id), each with its original and kind.
    pub(super) remedies: BTreeMap<String, crate::check::ledger::Remedy>,
    /// The provider account the case's implementation acts for.
    pub(super) account: String,
    /// The generation the latest `join` or `takeover` answered: what the lane must say.
    pub(super) holder: Option<u64>,
    /// The implementation runs as processes, each with its own provider credentials.
    pub(super) processes: bool,
    /// What the oracles of the step being performed found (check/steps.rs, check/hermes.rs):
    /// the runner takes them after the step and reports them at it.
    pub(super) findings: Vec<Finding>,
    /// Every look the checkers took (`check/replay.rs`), for the evidence folder; kept only
    /// when `record` (a run's cases, not the explorer's schedules).
    pub(super) tape: Vec<crate::check::replay::Look>,
    /// The final expectations on occurrences, as judged (recorded like `tape`), and the ledger
    /// they read.
    pub(super) finals: Vec<crate::check::replay::FinalLook>,
    pub(super) final_ledger: Option<provider_model::payments::ledger::Ledger>,
    pub(super) record: bool,
    /// The last look the checkers took (every occurrence's answer, the ledger, the lane): the
    /// final expectations and the published report read only what a judged look said.
    pub(super) last_look: Option<(Snapshot, Option<u64>)>,
    /// The operator bindings the last look judged (`None`: it read none), for the closing look
    /// and the published operator reports.
    pub(super) last_bindings: Option<Vec<(String, String, crate::operator::Binding)>>,
    /// The step being performed (`None`: the end of the case): where a look taken now is
    /// recorded and its findings reported.
    pub(super) step: Option<usize>,
    /// What the harness itself did that the checkers judge against: the generations the lane
    /// answered its joins and takeovers, and the payment statuses it set.
    pub(super) admitted: Vec<u64>,
    pub(super) statuses: BTreeMap<String, String>,
    /// The index in `tape` of the look the report publishes (`last_look`), if any.
    pub(super) published: Option<usize>,
}

/// The `aocheck-sut/2` operations a case needs: every case needs `state`, `lane` and `settle`;
/// each step needs the operation the World sends for it; every operator step also reads the
/// connector's durable binding.
pub fn required_ops(case: &crate::case::Case) -> std::collections::BTreeSet<Op> {
    let mut out: std::collections::BTreeSet<Op> = [Op::State, Op::Lane].into();
    // A race needs what each of its steps needs.
    let steps = case.steps.iter().flat_map(Step::requests);
    for s in steps {
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
            "aadp_expire" => Op::AadpExpire,
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

/// A release step's reason (the validator has checked the word).
fn release_reason(reason: &Option<String>) -> Result<ReleaseReason, SutError> {
    match reason.as_deref() {
        None => Ok(ReleaseReason::PredecessorNeverEntered),
        Some(r) => ReleaseReason::parse(r)
            .ok_or_else(|| SutError::Harness(format!("release reason {r:?} is unknown"))),
    }
}

/// A request to be built once the occurrence's id is known.
type ForId = Box<dyn FnOnce(OccurrenceId) -> Request + Send>;

/// The occurrence request a plain occurrence step stands for (reserve, enter, send, execute,
/// adopt, reconcile, release): who sends it, on which occurrence, and the request for its id.
/// One mapping for single steps and races alike; `None` for every other step.
fn occurrence_request(step: &Step) -> Option<(&Option<String>, &String, Result<ForId, SutError>)> {
    let boxed = |f: ForId| Ok(f);
    Some(match step {
        Step::Reserve {
            executor,
            occurrence,
            ..
        } => (
            executor,
            occurrence,
            boxed(Box::new(|o| Request::Reserve {
                occurrence: o,
                amount: 1250,
            })),
        ),
        Step::Enter {
            executor,
            occurrence,
            ..
        } => (
            executor,
            occurrence,
            boxed(Box::new(|o| Request::Enter { occurrence: o })),
        ),
        Step::Send {
            executor,
            occurrence,
            background,
            ..
        } => {
            let background = *background;
            (
                executor,
                occurrence,
                boxed(Box::new(move |o| Request::Send {
                    occurrence: o,
                    background,
                })),
            )
        }
        Step::Execute {
            executor,
            occurrence,
            ..
        } => (
            executor,
            occurrence,
            boxed(Box::new(|o| Request::Execute { occurrence: o })),
        ),
        Step::Adopt {
            executor,
            occurrence,
            ..
        } => (
            executor,
            occurrence,
            boxed(Box::new(|o| Request::Adopt { occurrence: o })),
        ),
        Step::Reconcile {
            executor,
            occurrence,
            ..
        } => (
            executor,
            occurrence,
            boxed(Box::new(|o| Request::Reconcile { occurrence: o })),
        ),
        Step::Release {
            executor,
            occurrence,
            reason,
            ..
        } => (
            executor,
            occurrence,
            release_reason(reason).map(|reason| -> ForId {
                Box::new(move |o| Request::Release {
                    occurrence: o,
                    reason,
                })
            }),
        ),
        _ => return None,
    })
}

/// What one racing request answered, in the report's words.
fn answer_words(a: &Result<serde_json::Value, SutError>) -> String {
    match a {
        Ok(_) => "ok".into(),
        Err(SutError::Refused(r)) => format!("refused {}", r.requirement),
        Err(SutError::RefusedUnnamed(_)) => "refused (no requirement named)".into(),
        Err(e) => format!("error: {e}"),
    }
}

impl World {
    /// The first occurrence or submission `step` acts on that no step made (its creation, remedy
    /// or submission was refused, or never answered); `None` if all were made.
    pub(super) fn never_made(&self, step: &Step) -> Option<String> {
        step.requests().into_iter().find_map(|s| {
            if let Some(o) = s.occurrence()
                && !self.occurrences.contains_key(o)
            {
                return Some(format!("occurrence {o:?}"));
            }
            s.submission()
                .filter(|x| !self.submissions.contains_key(*x))
                .map(|x| format!("submission {x:?}"))
        })
    }

    /// In a schedule of the explorer: whether the request sent for `hold` went past it (an
    /// earlier fault rule took it, so the hold saw it and did not fire) or never came within the
    /// wait; false as soon as it is parked.
    async fn hold_bypassed(&self, hold: &str) -> bool {
        holds::hold(&self.provider, hold, Duration::from_secs(10))
            .bypassed()
            .await
    }

    pub(super) fn who(&self, e: &Option<String>) -> Result<String, SutError> {
        e.clone()
            .or_else(|| self.current.clone())
            .ok_or_else(|| SutError::Harness("no executor has joined".into()))
    }
    pub(super) fn occ(&self, label: &str) -> Result<OccurrenceId, SutError> {
        self.occurrences.get(label).cloned().ok_or_else(|| {
            SutError::Harness(format!(
                "occurrence {label:?} does not exist (its creation failed?)"
            ))
        })
    }
    /// The payment creations the provider attributes to one occurrence by the declared key rule.
    pub(super) fn effects_of(
        &self,
        ledger: &provider_model::payments::ledger::Ledger,
        o: &OccurrenceId,
    ) -> Vec<provider_model::payments::ledger::Effect> {
        Accounting::of(ledger, Some(&self.key_rule), &[o.as_str()])
            .effects_of(o.as_str())
            .iter()
            .map(|e| (*e).clone())
            .collect()
    }
    pub(super) fn adm(&self, label: &str) -> Result<AdmissionId, SutError> {
        self.submissions
            .get(label)
            .cloned()
            .ok_or_else(|| SutError::Harness(format!("submission {label:?} was not admitted")))
    }

    /// A step on one occurrence: the step's executor sends the request built for its id.
    async fn on_occurrence(
        &mut self,
        executor: &Option<String>,
        occurrence: &str,
        request: impl FnOnce(OccurrenceId) -> Request,
    ) -> Result<(), SutError> {
        let (who, o) = (self.who(executor)?, self.occ(occurrence)?);
        self.sut.exec(&who, request(o)).await
    }

    /// A race: its requests go out together. Then AOC-REQ-001 is judged on every occurrence two
    /// or more of them tried to admit (enter, send, execute): "exactly one authoritative
    /// coordination domain … serializes … provider-entry admission" (AOC §4.1), so whatever the
    /// order, the history records at most one provider entry and the provider received at most
    /// one request for it (a replayed one counts: the provider saw it).
    async fn race(&mut self, steps: &[Step]) -> Result<(), SutError> {
        let mut calls = Vec::new();
        let mut labels = Vec::new();
        let mut admitting: BTreeMap<String, u32> = BTreeMap::new();
        for s in steps {
            let Some((executor, occurrence, request)) = occurrence_request(s) else {
                return Err(SutError::Harness(format!(
                    "{} cannot race (the case validator refuses it)",
                    s.verb()
                )));
            };
            let request = request?(self.occ(occurrence)?);
            if matches!(
                s,
                Step::Enter { .. } | Step::Send { .. } | Step::Execute { .. }
            ) {
                *admitting.entry(occurrence.clone()).or_default() += 1;
            }
            let who = self.who(executor)?;
            labels.push(format!("{} {occurrence} by {who}", s.verb()));
            calls.push((who, request));
        }
        let answers = self.sut.race(calls).await;
        self.race_answers = Some(
            labels
                .iter()
                .zip(&answers)
                .map(|(l, a)| format!("{l}: {}", answer_words(a)))
                .collect::<Vec<_>>()
                .join("; "),
        );
        for a in answers {
            match a {
                Ok(_) | Err(SutError::Refused(_) | SutError::RefusedUnnamed(_)) => {}
                Err(e) => return Err(e),
            }
        }
        let ledger = self.provider.ledger();
        let mut judged = false;
        for (label, n) in admitting.into_iter().filter(|(_, n)| *n > 1) {
            if !judged {
                judged = true;
                self.races_judged += 1;
            }
            let id = self.occ(&label)?;
            let answer = self.judged_answer(&label).await?;
            let entered = answer
                .entries
                .iter()
                .filter(|e| e.kind == crate::check::evidence::Kind::Entered)
                .count();
            let requests = Accounting::of(&ledger, Some(&self.key_rule), &[id.as_str()])
                .creates_of(id.as_str())
                .len();
            self.findings.extend(crate::check::steps::race_serialised(
                &label,
                n,
                entered,
                requests,
                &mut self.checker.facts,
            ));
        }
        Ok(())
    }

    pub(super) async fn perform(&mut self, step: &Step) -> Result<(), SutError> {
        if let Some((executor, occurrence, request)) = occurrence_request(step) {
            self.on_occurrence(executor, occurrence, request?).await?;
            if matches!(step, Step::Reserve { .. })
                && let Some(o) = self.occurrences.get(occurrence)
            {
                self.reserved.insert(o.clone());
            }
            if matches!(
                step,
                Step::Send {
                    background: true,
                    ..
                }
            ) {
                self.background_sends += 1;
            }
            return Ok(());
        }
        // In a schedule of the explorer, a hold no accepted background send can have reached is
        // disarmed (it would catch a later request in the foreground and stall the step), and the
        // steps that wait for it go on without it: a crash is a crash at no hold, a release
        // releases nothing.
        if self.explore
            && let Step::Crash {
                at_hold: Some(hold),
                ..
            }
            | Step::ProviderRelease { hold, .. } = step
            && (self.holds_armed.get(hold) == Some(&self.background_sends)
                || self.hold_bypassed(hold).await)
        {
            self.provider.disarm_hold(hold);
            if let Step::Crash { executor, .. } = step {
                self.sut.crash(executor).await?;
            }
            return Ok(());
        }
        match step {
            Step::Race { steps } => self.race(steps).await?,
            Step::Join { .. }
            | Step::Replace { .. }
            | Step::Crash { .. }
            | Step::Recover { .. }
            | Step::LeaseRefresh { .. }
            | Step::LeaseRelease { .. } => self.lane_step(step).await?,
            Step::AadpExpire { .. }
            | Step::ProviderFault { .. }
            | Step::ProviderRelease { .. }
            | Step::ProviderStatus { .. }
            | Step::ProviderExpire { .. } => self.provider_step(step).await?,
            Step::Submit { .. }
            | Step::Claim { .. }
            | Step::Link { .. }
            | Step::ResolveUnknown { .. }
            | Step::Finish { .. } => self.admission_step(step).await?,
            Step::Create { .. } | Step::Rebind { .. } | Step::Remedy { .. } => {
                self.occurrence_step(step).await?
            }
            Step::Settle { .. } => self.sut.settle().await?,
            // Sent above, through `occurrence_request`.
            Step::Reserve { .. }
            | Step::Enter { .. }
            | Step::Send { .. }
            | Step::Execute { .. }
            | Step::Adopt { .. }
            | Step::Reconcile { .. }
            | Step::Release { .. } => {}
            Step::Advance { ms } => self.clock.advance(*ms),
            Step::Import { .. } => {
                self.sut.call(To::Observer, Request::Import).await?;
            }
            Step::OperatorInvoke { .. }
            | Step::OperatorManifest {}
            | Step::OperatorDurability {}
            | Step::OperatorConfigure { .. }
            | Step::OperatorDelegate { .. }
            | Step::OperatorCancel { .. }
            | Step::OperatorWaitBound { .. }
            | Step::OperatorSettle {}
            | Step::OperatorKill { .. }
            | Step::HermesFault { .. }
            | Step::HermesScript { .. }
            | Step::HermesWaitParked { .. }
            | Step::HermesRelease { .. }
            | Step::HermesForget {} => self.perform_operator(step).await?,
            // A workflow case is run by `runner::workflow`, never here.
            Step::WorkflowStart { .. }
            | Step::WorkflowResume { .. }
            | Step::WorkflowAnswer { .. }
            | Step::WorkflowDamage { .. }
            | Step::ChannelFault { .. } => {
                return Err(SutError::Harness(format!(
                    "{}: a workflow step outside a workflow case (an aocheck bug)",
                    step.verb()
                )));
            }
        }
        Ok(())
    }

    /// The steps on the lane: an executor joins, is replaced, crashes (at a hold, through the one
    /// choreography), recovers, refreshes or releases its lease.
    async fn lane_step(&mut self, step: &Step) -> Result<(), SutError> {
        match step {
            Step::Join { executor, .. } => {
                let v = self.sut.start(executor, Request::Join).await?;
                self.holder = decode::<reply::Generation>(Op::Join, v)?.generation;
                self.admitted.extend(self.holder);
                self.current = Some(executor.clone());
            }
            Step::Replace { executor, .. } => {
                let v = self.sut.start(executor, Request::Takeover).await?;
                self.holder = decode::<reply::Generation>(Op::Takeover, v)?.generation;
                self.admitted.extend(self.holder);
                self.current = Some(executor.clone());
            }
            Step::Crash {
                executor, at_hold, ..
            } => {
                // Synchronised with the provider (providers::holds): the request is parked,
                // the sender dies, and the provider sees it go before the hold is released.
                let at = at_hold
                    .as_deref()
                    .map(|h| holds::hold(&self.provider, h, Duration::from_secs(10)));
                if let Some(h) = &at {
                    h.parked()
                        .await
                        .map_err(|e| SutError::Harness(format!("crash of {executor}: {e}")))?;
                }
                self.sut.crash(executor).await?;
                if let Some(h) = &at {
                    h.landed()
                        .await
                        .map_err(|e| SutError::Harness(format!("crash of {executor}: {e}")))?;
                }
            }
            Step::Recover { executor, .. } => {
                let who = self.who(executor)?;
                self.sut
                    .ask::<reply::Recovered>(To::Executor(&who), Request::Recover)
                    .await?;
            }
            Step::LeaseRefresh { executor, .. } => {
                self.sut.exec(executor, Request::LeaseRefresh).await?
            }
            Step::LeaseRelease { executor, .. } => {
                self.sut.exec(executor, Request::LeaseRelease).await?;
                // The holder let its lease go: the lane may have none now.
                if self.current.as_ref() == Some(executor) {
                    self.holder = None;
                }
            }
            other => {
                return Err(SutError::Harness(format!(
                    "lane_step: not a step of this kind: {other:?}"
                )));
            }
        }
        Ok(())
    }

    /// The steps on the provider: a fault rule armed, a held request let go (through the one
    /// hold choreography), a payment's status set or expired, an AADP expiry.
    async fn provider_step(&mut self, step: &Step) -> Result<(), SutError> {
        match step {
            Step::AadpExpire {
                occurrence,
                executor,
                ..
            } => {
                let before = self.judged_answer(occurrence).await?.report;
                let answer = self
                    .on_occurrence(executor, occurrence, |o| Request::AadpExpire {
                        occurrence: o,
                    })
                    .await;
                let after = self.judged_answer(occurrence).await?.report;
                self.findings.extend(crate::check::steps::aadp_expiry(
                    occurrence, &before, &after,
                ));
                answer?
            }
            Step::ProviderFault { .. } => {
                let rule = step
                    .payments_rule()
                    .ok_or_else(|| SutError::Harness("not a provider fault".into()))?;
                if let provider_model::payments::faults::Fault::Hold { name } = &rule.fault {
                    self.holds_armed.insert(name.clone(), self.background_sends);
                }
                self.provider
                    .add_rule(rule)
                    .map_err(|d| SutError::Harness(d.join("; ")))?;
            }
            Step::ProviderRelease {
                hold,
                reject,
                forged,
                mismatched,
            } => {
                self.holds_armed.remove(hold);
                let action = match (reject, forged, mismatched) {
                    (Some(status), _, _) => {
                        provider_model::holds::ReleaseAction::Reject { status: *status }
                    }
                    (None, true, _) => provider_model::holds::ReleaseAction::ProceedForged,
                    (None, false, true) => provider_model::holds::ReleaseAction::ProceedMismatched,
                    (None, false, false) => provider_model::holds::ReleaseAction::Proceed,
                };
                // The requests let go are decided (committed or rejected, in the ledger) before
                // the next step: a lookup after the release must not race ahead of the commit
                // of a request whose sender is gone (no reply tells the harness it happened).
                holds::hold(&self.provider, hold, Duration::from_secs(10))
                    .release(action)
                    .await
                    .map_err(|e| SutError::Harness(e.to_string()))?;
            }
            Step::ProviderStatus { occurrence, status } => {
                let o = self.occ(occurrence)?;
                let effect = self
                    .effects_of(&self.provider.ledger(), &o)
                    .first()
                    .map(|e| e.payment_id.clone());
                let id = effect.ok_or_else(|| {
                    SutError::Harness(format!("the provider has no payment for {occurrence:?}"))
                })?;
                self.provider
                    .set_status(&id, status)
                    .map_err(SutError::Harness)?;
                self.statuses.insert(o.to_string(), status.clone());
            }
            Step::ProviderExpire { occurrence } => match occurrence {
                Some(label) => {
                    let o = self.occ(label)?;
                    let ids: Vec<String> = self
                        .effects_of(&self.provider.ledger(), &o)
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
            other => {
                return Err(SutError::Harness(format!(
                    "provider_step: not a step of this kind: {other:?}"
                )));
            }
        }
        Ok(())
    }

    /// The steps of seed 003's admission: a submission, its claims, a link, a resolution, an end.
    async fn admission_step(&mut self, step: &Step) -> Result<(), SutError> {
        match step {
            Step::Submit { submission, .. } => {
                // A client submits: through the observer, never an executor.
                let req = Request::Submit {
                    key: submission.clone(),
                };
                let r: reply::Admitted = self.sut.ask(To::Observer, req).await?;
                let a = r.admission.ok_or_else(|| {
                    SutError::Harness("submit answered without `admission`".into())
                })?;
                self.submissions.insert(submission.clone(), a);
                self.submitted.push(submission.clone());
            }
            Step::Claim {
                submission,
                executor,
                ..
            } => {
                let who = self.who(executor)?;
                // The lane hands out the oldest admission still queued: the case names it; a
                // schedule of the explorer cannot know which its implementation admitted, so
                // the World says, from what the implementation answered. A case that names a
                // submission already handed out cannot mean it again (an admission is handed out
                // once, seed 003): it is judged as a schedule's claim is (D63).
                let fifo = self.explore || self.handed_out.contains(submission);
                let submission = if fifo {
                    self.submitted
                        .iter()
                        .find(|s| !self.handed_out.contains(*s))
                        .cloned()
                        .unwrap_or_else(|| "nothing (every admission was handed out)".into())
                } else {
                    submission.clone()
                };
                let submission = &submission;
                let want = self.submissions.get(submission).cloned();
                let want = match want {
                    Some(w) => Some(w),
                    None if fifo => None,
                    None => Some(self.adm(submission)?),
                };
                let claimed: reply::Admitted =
                    self.sut.ask(To::Executor(&who), Request::Claim).await?;
                crate::check::steps::claim_answered(&mut self.checker.facts);
                if let Some(a) = &claimed.admission
                    && let Some((label, _)) = self.submissions.iter().find(|(_, id)| *id == a)
                {
                    self.handed_out.insert(label.clone());
                }
                match claimed.admission {
                    Some(a) if Some(&a) == want.as_ref() => {}
                    // Claiming another admission than the one the lane must hand out next is a
                    // finding whatever the step expected (never a refusal the harness made up).
                    Some(a) => {
                        let label = self
                            .submissions
                            .iter()
                            .find(|(_, id)| **id == a)
                            .map(|(l, _)| l.clone())
                            .unwrap_or_else(|| a.to_string());
                        self.findings
                            .extend(crate::check::steps::claim_in_order(submission, &label));
                    }
                    // The implementation's own answer that there is nothing to claim: its
                    // refusal to hand out work (what a step expecting `refused` asks for).
                    None => {
                        return Err(SutError::RefusedUnnamed(format!(
                            "the implementation claimed nothing (expected {submission:?})"
                        )));
                    }
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
                self.sut
                    .exec(
                        &who,
                        Request::Link {
                            admission: a,
                            occurrence: o,
                        },
                    )
                    .await?
            }
            Step::ResolveUnknown {
                submission,
                executor,
                ..
            } => {
                let (who, a) = (self.who(executor)?, self.adm(submission)?);
                self.sut
                    .exec(&who, Request::ResolveUnknown { admission: a })
                    .await?;
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
                self.sut
                    .exec(&who, Request::Finish { admission: a, end })
                    .await?;
                // Finished without a claim, it has left the queue.
                self.handed_out.insert(submission.clone());
            }
            other => {
                return Err(SutError::Harness(format!(
                    "admission_step: not a step of this kind: {other:?}"
                )));
            }
        }
        Ok(())
    }

    /// The steps that make or change an occurrence: its creation (judged for identity and the
    /// action fence), a rebind, a remedy.
    async fn occurrence_step(&mut self, step: &Step) -> Result<(), SutError> {
        match step {
            Step::Create {
                occurrence,
                executor,
                key,
                amount,
                simulate,
                labels,
                ..
            } => {
                let who = self.who(executor)?;
                let key = key.clone().unwrap_or_else(|| format!("key-{occurrence}"));
                let req = Request::Create {
                    key: key.clone(),
                    amount: amount.unwrap_or(1250),
                    simulate: simulate.clone(),
                    labels: labels.clone(),
                };
                let r: reply::Occurrence = self.sut.ask(To::Executor(&who), req).await?;
                // AOC-REQ-002: "creation retries … MUST return the original occurrence", and
                // caller labels alone (retry, task, grant, AADP, BCR ids) never create one.
                let first = self
                    .occurrences
                    .get(occurrence)
                    .or_else(|| self.created_by_key.get(&key))
                    .cloned();
                // A creation that minted anew is reported, and the case goes on with the
                // occurrence it knew (its steps act on the original).
                if let Some(f) = crate::check::steps::creation_identity(
                    &key,
                    first.as_ref(),
                    &r.occurrence,
                    &mut self.checker.facts,
                ) {
                    self.findings.push(f);
                    return Ok(());
                }
                // "At-most-one policies need a durable action fence": under the fence, one
                // occurrence per action (refusing the second creation is as good). A second
                // occurrence is reported and judged like any other from here on.
                if self.action_fence
                    && let Some(action) = &labels.action
                {
                    let first = self.created_by_action.get(action);
                    let fenced = crate::check::steps::action_fence(
                        action,
                        first,
                        &r.occurrence,
                        &mut self.checker.facts,
                    );
                    if first.is_none() {
                        self.created_by_action
                            .insert(action.clone(), r.occurrence.clone());
                    }
                    self.findings.extend(fenced);
                }
                self.created_by_key
                    .entry(key)
                    .or_insert(r.occurrence.clone());
                // The first creation's amount is what the occurrence asks of the provider.
                self.asked
                    .entry(r.occurrence.to_string())
                    .or_insert_with(|| crate::check::ledger::Asked {
                        amount: amount.unwrap_or(1250),
                        currency: crate::sut::message::CURRENCY.into(),
                        account: self.account.clone(),
                    });
                if let Some(g) = &labels.grant_id {
                    self.grants
                        .entry(r.occurrence.to_string())
                        .or_insert_with(|| g.clone());
                }
                self.occurrences.insert(occurrence.clone(), r.occurrence);
            }
            Step::Rebind {
                occurrence,
                field,
                value,
                executor,
                ..
            } => {
                // Bound at reservation, except the provider reference, which only the provider's
                // acknowledgement binds (a claimed reference before it may be taken as nothing;
                // `binding_constant` judges what the history then says).
                let bound = field != "provider_ref"
                    && self
                        .occurrences
                        .get(occurrence)
                        .is_some_and(|o| self.reserved.contains(o));
                self.on_occurrence(executor, occurrence, |o| Request::Rebind {
                    occurrence: o,
                    field: field.clone(),
                    value: value.clone(),
                })
                .await?;
                self.findings.extend(crate::check::steps::rebind_refused(
                    occurrence,
                    field,
                    bound,
                    true,
                    &mut self.checker.facts,
                ));
            }
            Step::Remedy {
                occurrence,
                remedy,
                kind,
                authorization,
                executor,
                ..
            } => {
                let (who, o) = (self.who(executor)?, self.occ(occurrence)?);
                let original = o.to_string();
                let req = Request::Remedy {
                    occurrence: o,
                    kind: *kind,
                    authorization: authorization.clone(),
                };
                let r: reply::Occurrence = self.sut.ask(To::Executor(&who), req).await?;
                self.findings
                    .extend(crate::check::steps::remedy_authorization(
                        occurrence,
                        self.grants.get(&original).map(String::as_str),
                        authorization,
                        &mut self.checker.facts,
                    ));
                // The first creation of a remedy says what it is: one authorization presented
                // again for another kind returns the same remedy, which stays what it was.
                self.remedies.entry(r.occurrence.to_string()).or_insert(
                    crate::check::ledger::Remedy {
                        original,
                        kind: *kind,
                    },
                );
                self.occurrences.insert(remedy.clone(), r.occurrence);
            }
            other => {
                return Err(SutError::Harness(format!(
                    "occurrence_step: not a step of this kind: {other:?}"
                )));
            }
        }
        Ok(())
    }

    /// Seed 000 item 10: every connector instance is killed, then a fresh instance (on a fresh
    /// store handle) must read each binding exactly as the killed ones left it.
    pub(super) async fn durability(&mut self) -> Result<(), SutError> {
        let before_reader = self.operator.reader().await?;
        for (_, c) in std::mem::take(&mut self.operator.connectors) {
            c.stop("killed with SIGKILL").await;
        }
        for (_, t) in self.operator.background.drain(..) {
            t.abort();
        }
        let ids = self.operator.action_ids();
        let mut before = Vec::new();
        for (label, id) in &ids {
            before.push((
                label.clone(),
                before_reader.binding(id).await?.ok().flatten(),
            ));
        }
        before_reader.stop("stopped for the durability check").await;
        self.operator.reader = None;
        if !self.operator.connect.reopen().await? {
            self.operator.unsupported = Some(
                "the memory store claims no durability: run with --store sqlite:PATH or postgres:URL to exercise seed 000 item 10".into(),
            );
            return Ok(());
        }
        let fresh = self.operator.reader().await?;
        let mut seen = Vec::new();
        for ((label, id), (_, b)) in ids.iter().zip(before) {
            let after = fresh.binding(id).await?.ok().flatten();
            seen.push((label.clone(), b, after));
        }
        self.findings.extend(
            judge_durability(seen, "a fresh instance", &mut self.checker.facts)
                .map_err(SutError::Harness)?,
        );
        Ok(())
    }

    /// The connector's binding reader, or `None` with the reason noted as a harness error: a
    /// binding nobody can read leaves every check of it vacuous.
    pub(super) async fn bindings_reader(&mut self) -> Option<Conn> {
        match self.operator.reader().await {
            Ok(c) => Some(c),
            Err(e) => {
                self.observe_error = Some(format!("cannot read the bindings: {e}"));
                None
            }
        }
    }

    pub(super) async fn check(&mut self) -> Vec<Finding> {
        // A look that cannot be completed leaves nothing judged to publish or expect on.
        self.last_look = None;
        self.published = None;
        self.last_bindings = None;
        // Requests are numbered from 1 in the order recorded: the count is the last number.
        let requests_before = self.provider.recorded_requests() as u64;
        let mut occs = Vec::new();
        for (label, id) in &self.occurrences {
            let answer = match self.sut.observe(id).await {
                Ok(x) => Ok(x),
                Err(SutError::Corrupt(m)) => Err(m.clone()),
                Err(e) => {
                    // Without the implementation's view nothing can be judged honestly.
                    self.observe_error = Some(format!("cannot observe {label}: {e}"));
                    return Vec::new();
                }
            };
            occs.push(Observed {
                label: label.clone(),
                id: id.to_string(),
                answer,
            });
        }
        let lane = match self.sut.lane_generation().await {
            Ok(g) => g,
            Err(e) => {
                self.observe_error = Some(format!("cannot read the lane: {e}"));
                return Vec::new();
            }
        };
        let generation = crate::aoc::ids::Generation(lane.or(self.holder).unwrap_or(0));
        let snap = Snapshot {
            occurrences: occs,
            provider: self.provider.ledger(),
            generation,
            limits: self.limits,
            key_rule: Some(self.key_rule.clone()),
            asked: self.asked.clone(),
            remedies: self.remedies.clone(),
            admitted: self.admitted.clone(),
            statuses: self.statuses.clone(),
            requests_before: Some(requests_before),
            requests_by_answer: None,
            retired: std::collections::BTreeMap::new(),
        };
        let before = self.record.then(|| self.checker.facts.clone());
        let mut out = self.checker.check(&snap);
        out.extend(self.checker.lane(self.holder, lane));
        let look = before.map(|before| crate::check::replay::Look {
            after_step: self.step,
            found: out.iter().map(Finding::line).collect(),
            facts: crate::check::replay::facts_between(&before, &self.checker.facts),
            snapshot: snap.clone(),
            holder: self.holder,
            lane,
        });
        let (operator, hermes) = self.operator_checks().await;
        out.extend(operator);
        // Both ledgers as just read: a killed process's credential in use (or a key nobody was
        // given) disproves the case, and no finding of it stands.
        if self.processes
            && let Some(why) =
                crate::check::credentials::crash_disproved(&snap.provider, hermes.as_ref())
        {
            self.observe_error = Some(why);
            return Vec::new();
        }
        if look.is_some() {
            self.published = Some(self.tape.len());
        }
        self.tape.extend(look);
        self.last_look = Some((snap, lane));
        out
    }

    /// One occurrence's `state` answer for a step's own oracle, read through a whole judged look
    /// (GUIDE §4: every answer the harness reads, for any purpose, goes through the checkers):
    /// what the look found is reported at the step.
    async fn judged_answer(
        &mut self,
        label: &str,
    ) -> Result<crate::check::evidence::StateAnswer, SutError> {
        self.occ(label)?;
        let found = self.check().await;
        self.findings.extend(found);
        if let Some(why) = &self.observe_error {
            return Err(SutError::Harness(why.clone()));
        }
        let answer = self
            .last_look
            .as_ref()
            .and_then(|(snap, _)| snap.occurrences.iter().find(|o| o.label == label))
            .map(|o| o.answer.clone());
        match answer {
            Some(Ok(a)) => Ok(a),
            Some(Err(m)) => Err(SutError::Corrupt(m)),
            None => Err(SutError::Harness(format!(
                "{label} was not read at the look"
            ))),
        }
    }

    /// The closing look (GUIDE §4, "the ledgers are read again after the last look"): once the
    /// implementation's processes are gone, the providers' ledgers are read again and judged
    /// with the answers of the last look, so an effect, a refund or a run made after the last
    /// judged look is found. Nothing is read from the implementation; a look is recorded only
    /// where a ledger moved.
    pub(super) async fn closing_look(&mut self) -> Vec<Finding> {
        let Some((last, lane)) = self.last_look.clone() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let ledger = self.provider.ledger();
        if ledger != last.provider {
            let snap = Snapshot {
                provider: ledger,
                ..last.clone()
            };
            let before = self.record.then(|| self.checker.facts.clone());
            out = self.checker.check(&snap);
            out.extend(self.checker.lane(self.holder, lane));
            if let Some(before) = before {
                // The final expectations judged the last look's ledger; `analyze` reads them so.
                if !self.finals.is_empty() && self.final_ledger.is_none() {
                    self.final_ledger = Some(last.provider.clone());
                }
                self.published = Some(self.tape.len());
                self.tape.push(crate::check::replay::Look {
                    after_step: None,
                    found: out.iter().map(Finding::line).collect(),
                    facts: crate::check::replay::facts_between(&before, &self.checker.facts),
                    snapshot: snap.clone(),
                    holder: self.holder,
                    lane,
                });
            }
            self.last_look = Some((snap, lane));
        }
        if let Some((_, h, _)) = &self.operator.hermes {
            let ledger = h.ledger();
            out.extend(crate::check::hermes::judge_operator(
                &crate::check::hermes::OperatorLook {
                    ledger: &ledger,
                    actions: self.operator.actions.values().map(String::as_str).collect(),
                    delegations: &self.operator.delegations,
                    bindings: self.last_bindings.as_deref().unwrap_or_default(),
                },
                &mut self.operator.seen,
                &mut self.checker.facts,
            ));
        }
        out
    }

    /// An operator result against what Hermes's run really produced (check/hermes.rs). The
    /// ledger records a run's end just after the event the connector answered from, so it is
    /// read again, briefly, while the named run has not ended there.
    pub(super) async fn result_from_provider(&mut self, o: &crate::operator::OperatorResult) {
        let Some((_, h, _)) = &self.operator.hermes else {
            return;
        };
        let h = h.clone();
        use crate::operator::connector::ResultStatus;
        // Only a result that says its run ended is judged against the run's end.
        let run = match o.status {
            ResultStatus::Completed | ResultStatus::Cancelled => {
                o.output["run_id"].as_str().map(str::to_string)
            }
            _ => None,
        };
        let ledger = ledger_with_ended(&h, run.iter().map(String::as_str)).await;
        // The first departure says it; the others follow from it.
        self.findings.extend(
            crate::check::hermes::result_from_provider(o, &ledger, &mut self.checker.facts)
                .into_iter()
                .next(),
        );
    }

    /// Checks over every operator binding against fake-hermes's ledger (ground truth). The
    /// World only reads here (the ledger, each Action's binding through the reader); every
    /// judgement is `check::hermes::judge_operator`'s.
    /// Also returns the ledger it judged by, for the other judgements of the same look.
    pub(super) async fn operator_checks(
        &mut self,
    ) -> (Vec<Finding>, Option<provider_model::hermes::ledger::Ledger>) {
        let Some((_, h, _)) = &self.operator.hermes else {
            return (Vec::new(), None);
        };
        let h = h.clone();
        let mut bindings = Vec::new();
        if !self.operator.connectors.is_empty() || self.operator.reader.is_some() {
            let Some(c) = self.bindings_reader().await else {
                return (Vec::new(), None);
            };
            for (label, id) in self.operator.action_ids() {
                // No binding yet is normal; a binding that cannot be read would leave every
                // check of it vacuous, so it is a harness error.
                let read = match c.binding(&id).await {
                    Ok(answer) => answer.map_err(|e| e.to_string()),
                    Err(e) => Err(e.to_string()),
                };
                match read {
                    Ok(Some((_, b))) => bindings.push((label, id, b)),
                    Ok(None) => {}
                    Err(e) => {
                        self.observe_error =
                            Some(format!("cannot read the binding of {label}: {e}"));
                        return (Vec::new(), None);
                    }
                }
            }
        }
        // Runs the bindings say ended must have ended in the ledger read.
        let ended = bindings.iter().filter_map(|(_, _, b)| {
            matches!(
                b.status,
                crate::operator::BindingStatus::Cancelled
                    | crate::operator::BindingStatus::Completed
            )
            .then_some(b.run_id.as_deref())
            .flatten()
        });
        let ledger = ledger_with_ended(&h, ended).await;
        if !self.operator.connectors.is_empty() || self.operator.reader.is_some() {
            self.last_bindings = Some(bindings.clone());
        }
        let found = crate::check::hermes::judge_operator(
            &crate::check::hermes::OperatorLook {
                ledger: &ledger,
                actions: self.operator.actions.values().map(String::as_str).collect(),
                delegations: &self.operator.delegations,
                bindings: &bindings,
            },
            &mut self.operator.seen,
            &mut self.checker.facts,
        );
        (found, Some(ledger))
    }
}

/// fake-hermes's ledger, read until it records the end of every run in `runs` (or about half a
/// second has passed): the engine records a run's end just after the event a connector answers
/// from, so a ledger read at once may not show it yet.
async fn ledger_with_ended<'a>(
    h: &crate::providers::Hermes,
    runs: impl Iterator<Item = &'a str> + Clone,
) -> provider_model::hermes::ledger::Ledger {
    let mut ledger = h.ledger();
    for _ in 0..20 {
        if runs.clone().all(|r| ledger.terminal.contains_key(r)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
        ledger = h.ledger();
    }
    ledger
}
