//! The verdict: how the findings of one case, and of a run, become verdicts.
//!
//! Policy. A case **fails** only when a checker or a step expectation found a violation of a
//! requirement (each names the requirement and the sentence it enforces). A case **passes** only
//! when every fault it declares fired, nothing was found, and every requirement it declares was
//! established (some check examined a fact about it, `crate::check::Facts`); a case where one was
//! not is **missing knowledge** (decisions D25). Anything
//! aocheck could not decide (the implementation hung, broke the protocol, crashed unasked, or a
//! provider or store was unreachable) is a **harness error**, never a pass or a fail; an operation
//! the implementation does not list makes the case **unsupported** and it is not run; a case that
//! no check examined at all is **not run**. A requirement fails in a run if any case failure names
//! it, passes only if every case that evaluates it established it and did not fail it, and is
//! otherwise as undecided as the worst case that evaluates it. The exit code follows from the case verdicts (`crate::exit`).

use super::assemble::admission_label;
use super::world::World;
use crate::aoc::requirement::Req;
use crate::case::{Case, Expected, Step};
use crate::check::Finding;
use crate::report::model::FaultReport;
use crate::report::model::RequirementReport;
use crate::report::model::{CaseReport, Failure, Verdict};
use crate::sut::SutError;

/// Aggregates requirement verdicts: fail if any case failure names the requirement; else a
/// harness error, not-run or other unknown if any case evaluating it had one; pass only if every
/// case evaluating it passed; not run if no case evaluates it.
pub fn aggregate(cases: &[CaseReport]) -> Vec<RequirementReport> {
    Req::ALL
        .iter()
        .map(|r| {
            let evaluating: Vec<&CaseReport> = cases
                .iter()
                .filter(|c| {
                    c.requirements.iter().any(|x| Req::parse(x) == Some(*r))
                        || c.failures.iter().any(|f| f.requirement == *r)
                })
                .collect();
            let verdict = if evaluating.is_empty() {
                Verdict::NotRun
            } else if evaluating
                .iter()
                .any(|c| c.failures.iter().any(|f| f.requirement == *r))
            {
                Verdict::Fail
            } else if let Some(worst) = evaluating
                .iter()
                .map(|c| verdict_for(c, *r))
                .filter(|v| *v != Verdict::Pass && *v != Verdict::Fail)
                .max()
            {
                worst
            } else {
                // Passed, or failed for another requirement only, in every case that evaluates
                // it: it was established and held there.
                Verdict::Pass
            };
            // A deployment is judged by the deploy checkers only (`aocheck deploy`), a suite run by
            // the others: each report names the checkers that could have judged it. The workflow
            // checkers judge a workflow runner (seed 002): named where a workflow case ran.
            let deployment = cases.iter().any(|c| c.id.starts_with("DEPLOY-"));
            let workflow = evaluating.iter().any(|c| c.id.starts_with("WORKFLOW-"));
            RequirementReport {
                id: *r,
                verdict,
                cases: evaluating.iter().map(|c| c.id.clone()).collect(),
                checkers: crate::check::CHECKERS
                    .iter()
                    .filter(|(n, rs)| {
                        rs.contains(r)
                            && n.starts_with("deploy_") == deployment
                            && (workflow || !n.starts_with("workflow_"))
                    })
                    .map(|(n, _)| n.to_string())
                    .collect(),
            }
        })
        .collect()
}

/// What one case says of one requirement it evaluates (and does not fail): a requirement the case
/// established holds even where the case as a whole lacks knowledge of another; one it did not
/// establish is missing knowledge in a case that otherwise held, and otherwise as undecided as
/// the case.
fn verdict_for(c: &CaseReport, r: Req) -> Verdict {
    let established = !c.not_established.iter().any(|x| Req::parse(x) == Some(r));
    match c.verdict {
        Verdict::Fail | Verdict::MissingKnowledge if established => Verdict::Pass,
        Verdict::Fail => Verdict::MissingKnowledge,
        v => v,
    }
}

pub(super) use crate::check::expect::primary;

/// A finding, placed at its step (`None`: the end of the case) in the report: one line per
/// distinct finding.
pub(super) fn push_finding(failures: &mut Vec<Failure>, f: Finding, step: Option<usize>) {
    crate::check::replay::push_failure(
        failures,
        Failure {
            requirement: f.requirement(),
            step,
            msg: f.line(),
        },
    );
}

impl World {
    /// The case's final expectations: the World reads (each occurrence's `state`, the ledgers,
    /// the bindings, the admissions, the description) and `check::expect` judges.
    pub(super) async fn final_expectations(
        &mut self,
        case: &crate::case::Case,
        checked: &crate::case::Checked,
    ) -> Vec<Finding> {
        use crate::check::expect;
        let mut out = Vec::new();
        let pick = expect::Pick(&case.requirements);
        // Only what the last judged look said is judged here (GUIDE §4: every answer the
        // harness reads goes through the checkers): its answers and its ledger.
        // With no look (the implementation could not be observed: a harness error stands),
        // nothing is judged on the occurrences.
        let (ledger, answers) = match &self.last_look {
            Some((snap, _)) => (snap.provider.clone(), snap.occurrences.clone()),
            None => (self.provider.ledger(), Vec::new()),
        };
        let looked = self.last_look.is_some();
        for (label, e) in checked.occurrences.iter().filter(|_| looked) {
            let Some(id) = self.occurrences.get(label).cloned() else {
                out.push(expect::never_created(label, pick));
                continue;
            };
            let st = match answers
                .iter()
                .find(|o| &o.label == label)
                .map(|o| &o.answer)
            {
                Some(Ok(s)) => s.clone(),
                Some(Err(err)) => {
                    out.push(expect::unreadable(label, err));
                    continue;
                }
                None => {
                    out.push(expect::unreadable(label, "no judged look read it"));
                    continue;
                }
            };
            let effects = self.effects_of(&ledger, &id).len() as u32;
            let before = self.record.then(|| self.checker.facts.clone());
            let (found, undecided) =
                expect::occurrence(label, e, &st, effects, pick, &mut self.checker.facts);
            if let Some(before) = before {
                self.finals.push(crate::check::replay::FinalLook {
                    label: label.clone(),
                    id: id.to_string(),
                    expect: e.clone(),
                    answer: st.clone(),
                    found: found.iter().map(Finding::line).collect(),
                    facts: crate::check::replay::facts_between(&before, &self.checker.facts),
                    undecided: undecided
                        .as_ref()
                        .map(|(r, m)| (r.id().to_string(), m.clone())),
                });
            }
            out.extend(found);
            self.undecided.extend(undecided);
        }
        if !case.expect.operators.is_empty() {
            // Without Hermes's ledger or the connector's bindings these expectations cannot be
            // judged: that is a harness error, never a silent skip.
            let h = match self.operator.hermes().await {
                Ok((_, h)) => h,
                Err(e) => {
                    self.observe_error = Some(format!("cannot read fake-hermes's ledger: {e}"));
                    return out;
                }
            };
            let Some(c) = self.bindings_reader().await else {
                return out;
            };
            for (label, e) in &case.expect.operators {
                let id = self.operator.action_id(label);
                let ledger = h.ledger();
                let b = self.judged_binding(&c, &id).await;
                out.extend(expect::operator(
                    label,
                    e,
                    &id,
                    b.as_ref(),
                    &ledger,
                    pick,
                    &mut self.checker.facts,
                ));
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
            out.extend(expect::admission(
                sub,
                &got,
                want,
                pick,
                &mut self.checker.facts,
            ));
        }
        let described =
            if case.expect.composition.is_some() || !case.expect.bypass_disclosed.is_empty() {
                match self.sut.describe().await {
                    Ok(d) => Some(d),
                    Err(e) => {
                        out.push(expect::undescribed(&e.to_string(), pick));
                        None
                    }
                }
            } else {
                None
            };
        if let Some(want) = &case.expect.composition
            && let Some((composition, _)) = &described
        {
            out.extend(expect::composition(
                composition,
                want,
                pick,
                &mut self.checker.facts,
            ));
        }
        for kind in &case.expect.bypass_disclosed {
            let paths = described.as_ref().map(|d| d.1.as_slice()).unwrap_or(&[]);
            out.extend(expect::bypass(kind, paths, pick, &mut self.checker.facts));
        }
        out
    }
}

/// Why a case is neither pass nor fail, in one line: what a person reading the console or the
/// summary needs before opening `report.json`. `None` for pass and fail.
pub fn why_not_decided(c: &crate::report::model::CaseReport) -> Option<String> {
    let mut parts = Vec::new();
    match c.verdict {
        Verdict::Pass | Verdict::Fail => return None,
        Verdict::HarnessError => parts.extend(c.harness.clone()),
        Verdict::Unsupported => parts.extend(c.unsupported.clone()),
        Verdict::MissingKnowledge | Verdict::NotRun => {
            if !c.not_established.is_empty() {
                parts.push(format!("not established: {}", c.not_established.join(", ")));
            }
            parts.extend(c.undecided.iter().cloned());
            if c.verdict == Verdict::NotRun && parts.is_empty() {
                parts.push("no check examined any fact".into());
            }
        }
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// How one step met its expectation.
#[derive(Debug)]
pub(super) enum StepVerdict {
    Met,
    /// A requirement was violated at this step.
    Failed(Failure),
    /// aocheck could not decide (the case stops here as a harness error).
    Undecided(String),
}

/// Judges one step's result against its expectation (`ok`, `refused`, `refused REQ`, `any`).
/// The result is only what the implementation answered: the step's oracles' findings are values
/// the runner reports beside it, so a refusal is always the implementation's own. A corrupt
/// history is a failure whatever was expected; a harness error is never judged. The draft requires refusals, not their labels (AOC §4: "MUST NOT create
/// a new reservation, enter the provider…", "MUST be rejected as a conflicting operation"): a step
/// expected to be `refused REQ` is met by any refusal, labelled or not; `REQ` names the
/// requirement a step that was *accepted* violates (D22).
pub(super) fn judge_step(
    step: &Step,
    i: usize,
    result: &Result<(), SutError>,
    expected: Expected,
    requirements: &[String],
) -> StepVerdict {
    let verb = step.verb();
    let failed = |requirement: Req, msg: String| {
        StepVerdict::Failed(Failure {
            requirement,
            step: Some(i),
            msg,
        })
    };
    match (result, expected) {
        (Err(SutError::Harness(m) | SutError::Version(m)), _) => {
            StepVerdict::Undecided(format!("steps[{i}] ({verb}): {m}"))
        }
        (Err(SutError::Corrupt(m)), _) => {
            let (requirement, msg) = crate::check::steps::corrupt_history(&verb, m);
            failed(requirement, msg)
        }
        (_, Expected::Any) | (Ok(()), Expected::Ok) => StepVerdict::Met,
        (Err(SutError::RefusedUnnamed(_)), Expected::Refused(_)) => StepVerdict::Met,
        (Err(SutError::RefusedUnnamed(m)), Expected::Ok) => {
            failed(primary(requirements), format!("{verb}: {m}"))
        }
        (Err(SutError::Refused(_)), Expected::Refused(_)) => StepVerdict::Met,
        (Ok(()), Expected::Refused(want)) => {
            let req = want.unwrap_or_else(|| primary(requirements));
            failed(
                req,
                format!("{verb} was accepted; it must be refused ({req})"),
            )
        }
        (Err(SutError::Refused(r)), Expected::Ok) => {
            failed(r.requirement, format!("{verb} was refused: {r}"))
        }
    }
}

/// Each fake-hermes fault rule as a report says it; a rule that never fired adds its reason to
/// `unfired`.
pub(super) fn hermes_faults(
    rules: Vec<provider_model::hermes::faults::RuleState>,
    faults: &mut Vec<FaultReport>,
    unfired: &mut Vec<String>,
) {
    for r in rules {
        declared(
            (faults, unfired),
            format!("hermes {} {}", r.rule.route.label(), r.rule.fault),
            r.fired > 0,
            || {
                format!(
                    "declared fault {} on Hermes {} never fired",
                    r.rule.fault,
                    r.rule.route.label()
                )
            },
        );
    }
}

/// One declared fault as a report says it (`what`); one that never fired adds its reason
/// (`why`, and that the case did not exercise what it claims) to `unfired`.
pub(super) fn declared(
    (faults, unfired): (&mut Vec<FaultReport>, &mut Vec<String>),
    what: String,
    fired: bool,
    why: impl FnOnce() -> String,
) {
    faults.push(FaultReport { what, fired });
    if !fired {
        unfired.push(format!(
            "{}: the case did not exercise what it claims",
            why()
        ));
    }
}

/// The end of a case: its verdict from what was found (`facts`: how many facts its checks
/// examined), its failures and time, and the event that says so.
pub(super) fn close(
    mut report: CaseReport,
    failures: Vec<Failure>,
    facts: u32,
    started: std::time::Instant,
    emit: &mut (dyn FnMut(super::events::RunEvent) + Send),
) -> CaseReport {
    report.verdict = case_verdict(
        !failures.is_empty(),
        report.harness.is_some(),
        report.unsupported.is_some(),
        facts,
        !report.not_established.is_empty(),
    );
    report.failures = failures;
    report.millis = started.elapsed().as_millis() as u64;
    emit(super::events::RunEvent::CaseFinished {
        case: report.id.clone(),
        verdict: report.verdict,
        millis: report.millis,
        why: why_not_decided(&report),
    });
    report
}

/// The faults a case declared, and which of them never fired (each a reason the case cannot
/// pass): provider rules and Hermes rules by their counters, crashes at a hold by the provider's
/// ledger (an effect committed with nobody left to answer), kills and replacements as performed.
pub(super) fn fired_faults(
    case: &Case,
    provider: &crate::providers::Payments,
    hermes_rules: Option<Vec<provider_model::hermes::faults::RuleState>>,
    skipped: bool,

    races_judged: usize,
) -> (Vec<FaultReport>, Vec<String>) {
    let mut faults = Vec::new();
    let mut unfired = Vec::new();
    for r in provider.rules() {
        declared(
            (&mut faults, &mut unfired),
            format!("provider {} {}", r.rule.op.label(), r.rule.fault),
            r.fired > 0,
            || {
                format!(
                    "declared fault {} on {} never fired",
                    r.rule.fault,
                    r.rule.op.label()
                )
            },
        );
    }
    hermes_faults(hermes_rules.unwrap_or_default(), &mut faults, &mut unfired);
    let mut races = 0;
    for s in case.steps.iter().take_while(|_| !skipped) {
        match s {
            Step::OperatorKill { instance } => faults.push(FaultReport {
                what: format!("kill connector {instance}"),
                fired: true,
            }),
            Step::Crash {
                executor,
                at_hold: None,
                ..
            } => faults.push(FaultReport {
                what: format!("crash {executor}"),
                fired: true,
            }),
            Step::Crash {
                executor,
                at_hold: Some(hold),
                ..
            } => {
                // The kill landed during the request only if the provider committed *the request
                // this hold parked* with nobody left to answer (another request's lost client
                // is not this crash).
                let ledger = provider.ledger();
                let parked_here = format!("hold({hold})");
                let landed = ledger.effects.iter().any(|e| {
                    e.reply == provider_model::payments::ledger::Reply::ClientGone
                        && ledger.requests.iter().any(|r| {
                            r.seq == e.request_seq && r.fault.as_deref() == Some(&parked_here)
                        })
                });
                faults.push(FaultReport {
                    what: format!("crash {executor} while hold {hold} parks its request"),
                    fired: landed,
                });
                if !landed {
                    unfired.push(format!(
                        "crash of {executor} at hold {hold}: no effect was committed after its sender died (the provider's ledger has no client_gone reply to the request this hold parked)"
                    ));
                }
            }
            Step::Replace { executor, .. } => faults.push(FaultReport {
                what: format!("replace by {executor}"),
                fired: true,
            }),
            // A race fired only if its serialisation check examined an occurrence its requests
            // raced to admit (the races are judged in order).
            Step::Race { steps } => {
                races += 1;
                let fired = races <= races_judged;
                faults.push(FaultReport {
                    what: format!("race of {} requests", steps.len()),
                    fired,
                });
                if !fired {
                    unfired.push(format!(
                        "race of {} requests: no occurrence two of them raced to admit was judged",
                        steps.len()
                    ));
                }
            }
            Step::ProviderRelease {
                hold, forged: true, ..
            } => {
                // A forged late reply was exercised only if the provider really sent one.
                let sent = provider
                    .ledger()
                    .requests
                    .iter()
                    .any(|r| r.reply == provider_model::payments::ledger::Reply::Forged);
                faults.push(FaultReport {
                    what: format!("release hold {hold} with a forged reply"),
                    fired: sent,
                });
                if !sent {
                    unfired.push(format!(
                        "release of hold {hold} with a forged reply: the provider's ledger records no forged reply"
                    ));
                }
            }
            Step::ProviderRelease {
                hold,
                mismatched: true,
                ..
            } => {
                // A mismatched late reply was exercised only if the provider really sent one.
                let sent = provider
                    .ledger()
                    .requests
                    .iter()
                    .any(|r| r.reply == provider_model::payments::ledger::Reply::Misdirected);
                faults.push(FaultReport {
                    what: format!("release hold {hold} with a reply signed for another account"),
                    fired: sent,
                });
                if !sent {
                    unfired.push(format!(
                        "release of hold {hold} with a mismatched reply: the provider's ledger records no misdirected reply"
                    ));
                }
            }
            _ => {}
        }
    }
    (faults, unfired)
}

/// A case's verdict from what was found (in `check/`: `aocheck analyze` derives it too).
pub(super) use crate::check::replay::case_verdict;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aoc::{Refusal, RefusalKind};
    use rstest::rstest;

    fn refused(req: Req) -> Result<(), SutError> {
        Err(SutError::Refused(Refusal::new(
            None,
            req,
            RefusalKind::Reported { msg: "no".into() },
        )))
    }

    fn step() -> Step {
        serde_json::from_value(serde_json::json!({"do": "settle"})).expect("a step")
    }

    #[rstest]
    #[case::ok_as_expected(Ok(()), Expected::Ok, "met")]
    #[case::any_takes_a_refusal(refused(Req::R006), Expected::Any, "met")]
    #[case::refused_as_expected(refused(Req::R010), Expected::Refused(Some(Req::R010)), "met")]
    #[case::refused_unlabelled_expected(refused(Req::R010), Expected::Refused(None), "met")]
    #[case::refused_under_another_label(
        refused(Req::R010),
        Expected::Refused(Some(Req::R006)),
        "met"
    )]
    #[case::refused_without_a_label(Err(SutError::RefusedUnnamed("no".into())), Expected::Refused(Some(Req::R005)), "met")]
    #[case::unlabelled_refusal_of_an_allowed_step(Err(SutError::RefusedUnnamed("no".into())), Expected::Ok, "failed AOC-REQ-001")]
    #[case::accepted_but_must_be_refused(Ok(()), Expected::Refused(Some(Req::R006)), "failed AOC-REQ-006")]
    #[case::refused_but_must_pass(refused(Req::R005), Expected::Ok, "failed AOC-REQ-005")]
    #[case::corrupt_is_req_004(Err(SutError::Corrupt("x".into())), Expected::Any, "failed AOC-REQ-004")]
    #[case::harness_is_never_judged(Err(SutError::Harness("hung".into())), Expected::Ok, "undecided")]
    fn a_step_is_judged_by_its_expectation(
        #[case] result: Result<(), SutError>,
        #[case] expected: Expected,
        #[case] want: &str,
    ) {
        let got = match judge_step(&step(), 3, &result, expected, &["AOC-REQ-001".into()]) {
            StepVerdict::Met => "met".to_string(),
            StepVerdict::Failed(f) => {
                assert_eq!(f.step, Some(3));
                format!("failed {}", f.requirement)
            }
            StepVerdict::Undecided(m) => {
                assert!(m.contains("steps[3]"), "{m}");
                "undecided".into()
            }
        };
        assert_eq!(got, want);
    }

    #[test]
    fn the_verdict_order_is_fail_then_harness_error_then_unsupported_then_not_run() {
        assert_eq!(case_verdict(true, true, true, 0, true), Verdict::Fail);
        assert_eq!(
            case_verdict(false, true, true, 5, true),
            Verdict::HarnessError
        );
        assert_eq!(
            case_verdict(false, false, true, 5, true),
            Verdict::Unsupported
        );
        assert_eq!(case_verdict(false, false, false, 0, true), Verdict::NotRun);
        assert_eq!(
            case_verdict(false, false, false, 3, true),
            Verdict::MissingKnowledge
        );
        assert_eq!(case_verdict(false, false, false, 1, false), Verdict::Pass);
    }

    fn case(verdict: Verdict, reqs: &[&str], failed: &[Req], unestablished: &[&str]) -> CaseReport {
        let mut c = CaseReport::new(
            "C",
            "t",
            std::path::Path::new("c.yaml"),
            reqs.iter().map(|r| r.to_string()).collect(),
        );
        c.verdict = verdict;
        c.not_established = unestablished.iter().map(|r| r.to_string()).collect();
        c.failures = failed
            .iter()
            .map(|r| Failure {
                requirement: *r,
                step: None,
                msg: "x".into(),
            })
            .collect();
        c
    }

    /// A requirement passes only where it was established; one no check examined is missing
    /// knowledge even when the case failed for another requirement.
    #[rstest]
    #[case::established_in_a_passing_case(Verdict::Pass, &[], &[], Verdict::Pass)]
    #[case::established_beside_an_unestablished_one(Verdict::MissingKnowledge, &[], &["AOC-REQ-002"], Verdict::Pass)]
    #[case::not_established(Verdict::MissingKnowledge, &[], &["AOC-REQ-001"], Verdict::MissingKnowledge)]
    #[case::failed_for_it(Verdict::Fail, &[Req::R001], &[], Verdict::Fail)]
    #[case::failed_for_another_but_held(Verdict::Fail, &[Req::R002], &[], Verdict::Pass)]
    #[case::failed_for_another_and_unexamined(Verdict::Fail, &[Req::R002], &["AOC-REQ-001"], Verdict::MissingKnowledge)]
    #[case::harness_error(Verdict::HarnessError, &[], &[], Verdict::HarnessError)]
    fn a_requirement_is_judged_by_what_examined_it(
        #[case] verdict: Verdict,
        #[case] failed: &[Req],
        #[case] unestablished: &[&str],
        #[case] want: Verdict,
    ) {
        let c = case(
            verdict,
            &["AOC-REQ-001", "AOC-REQ-002"],
            failed,
            unestablished,
        );
        let got = aggregate(&[c])
            .into_iter()
            .find(|q| q.id == Req::R001)
            .map(|q| q.verdict);
        assert_eq!(got, Some(want));
    }
}
