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
use crate::aoc::composition::CompositionStatus;
use crate::aoc::requirement::Req;
use crate::case::{Case, Expected, Step};
use crate::check::Violation;
use crate::check::hermes::runs_of;
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
            RequirementReport {
                id: *r,
                verdict,
                cases: evaluating.iter().map(|c| c.id.clone()).collect(),
                checkers: crate::check::CHECKERS
                    .iter()
                    .filter(|(_, rs)| rs.contains(r))
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

pub(super) fn primary(reqs: &[String]) -> Req {
    reqs.first()
        .and_then(|r| Req::parse(r))
        .unwrap_or(Req::R001)
}

pub(super) fn push_violation(failures: &mut Vec<Failure>, v: Violation, step: usize) {
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

impl World {
    pub(super) async fn final_expectations(
        &mut self,
        case: &crate::case::Case,
        checked: &crate::case::Checked,
    ) -> Vec<Failure> {
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
        for (label, e) in &checked.occurrences {
            let Some(id) = self.occurrences.get(label).cloned() else {
                out.push(Failure {
                    requirement: primary(&case.requirements),
                    step: None,
                    msg: format!("{label}: never created"),
                });
                continue;
            };
            let st = match self.sut.observe(&id).await {
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
            let effects = self.effects_of(&ledger, &id).len() as u32;
            let facts = &mut self.checker.facts;
            count_occurrence_facts(e, &mut |r| facts.saw(pick(r)));
            if let Some(why) = undecided_flags(e, &st) {
                self.undecided
                    .push((pick(Req::R009), format!("{label}: {why}")));
            }
            let judge = |x: &crate::case::CheckedOccurrence| judge_occurrence(x, &st, effects);
            for (req, msg) in judge_with_alternatives(e, &judge) {
                out.push(Failure {
                    requirement: pick(req),
                    step: None,
                    msg: format!("{label}: {msg}"),
                });
            }
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
                let facts = &mut self.checker.facts;
                if e.status.is_some() || e.stops.is_some() {
                    facts.saw(pick(Req::R011));
                }
                if e.runs.is_some() || e.approvals.is_some() {
                    facts.saw(pick(Req::R010));
                }
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
            self.checker.facts.saw(pick(Req::R005));
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
            self.checker.facts.saw(pick(Req::R013));
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
            self.checker.facts.saw(pick(Req::R001));
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
/// A mismatch the World found or a corrupt history is a failure whatever was expected; a harness
/// error is never judged. The draft requires refusals, not their labels (AOC §4: "MUST NOT create
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
        (Err(SutError::Mismatch(req, m)), _) => failed(*req, format!("{verb}: {m}")),
        (Err(SutError::Harness(m) | SutError::Version(m)), _) => {
            StepVerdict::Undecided(format!("steps[{i}] ({verb}): {m}"))
        }
        (Err(SutError::Corrupt(m)), _) => failed(Req::R004, format!("{verb}: {m}")),
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

/// The faults a case declared, and which of them never fired (each a reason the case cannot
/// pass): provider rules and Hermes rules by their counters, crashes at a hold by the provider's
/// ledger (an effect committed with nobody left to answer), kills and replacements as performed.
pub(super) fn fired_faults(
    case: &Case,
    provider: &fake_payments::Handle,
    hermes_rules: Option<Vec<fake_hermes::faults::RuleState>>,
    skipped: bool,

    races_judged: usize,
) -> (Vec<FaultReport>, Vec<String>) {
    let mut faults = Vec::new();
    let mut unfired = Vec::new();
    for r in provider.rules() {
        let fired = r.fired > 0;
        faults.push(FaultReport {
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
    for r in hermes_rules.unwrap_or_default() {
        let fired = r.fired > 0;
        faults.push(FaultReport {
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
                // The kill landed during the request only if the provider committed with nobody
                // left to answer.
                let landed = provider
                    .ledger()
                    .effects
                    .iter()
                    .any(|e| e.reply == fake_payments::ledger::Reply::ClientGone);
                faults.push(FaultReport {
                    what: format!("crash {executor} while hold {hold} parks its request"),
                    fired: landed,
                });
                if !landed {
                    unfired.push(format!(
                        "crash of {executor} at hold {hold}: no effect was committed after its sender died (no client_gone reply in the provider's ledger)"
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
                    .any(|r| r.reply == fake_payments::ledger::Reply::Forged);
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
                    .any(|r| r.reply == fake_payments::ledger::Reply::Misdirected);
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

/// A case's verdict from what was found, in the order of the policy above.
pub(super) fn case_verdict(
    failed: bool,
    undecided: bool,
    unsupported: bool,
    facts: u32,
    not_established: bool,
) -> Verdict {
    if failed {
        Verdict::Fail
    } else if undecided {
        Verdict::HarnessError
    } else if unsupported {
        Verdict::Unsupported
    } else if facts == 0 {
        Verdict::NotRun
    } else if not_established {
        Verdict::MissingKnowledge
    } else {
        Verdict::Pass
    }
}

/// An occurrence's final state and outcome against the case: the state must be one the case
/// accepts (AOC-REQ-009); the outcome is what a resolved occurrence must have (AOC-REQ-011). Where
/// the case accepts another state too (the draft lets a generic failure stay unresolved, say), an
/// occurrence in that state has no outcome to check.
/// Which requirements an occurrence expectation examines (its alternatives' too), one fact each.
fn count_occurrence_facts(e: &crate::case::CheckedOccurrence, saw: &mut dyn FnMut(Req)) {
    if !e.state.is_empty() || !e.missing_knowledge.is_empty() {
        saw(Req::R009);
    }
    if e.outcome.is_some() {
        saw(Req::R011);
    }
    if e.entry_attempts.is_some() || e.provider_effects.is_some() {
        saw(Req::R010);
    }
    if e.authority.is_some() || e.remedies.is_some() {
        saw(Req::R012);
    }
    for alt in &e.any_of {
        count_occurrence_facts(alt, saw);
    }
}

/// How the occurrence departs from an expectation: its own fields, and, when it lists
/// alternatives, every alternative's departures when none holds entirely.
/// `judge` judges one expectation's own fields ([`judge_occurrence`] over the observed state).
pub(super) fn judge_with_alternatives(
    e: &crate::case::CheckedOccurrence,
    judge: &dyn Fn(&crate::case::CheckedOccurrence) -> Vec<(Req, String)>,
) -> Vec<(Req, String)> {
    let mut found = judge(e);
    let paths: Vec<_> = e.any_of.iter().map(judge).collect();
    if !paths.is_empty() && !paths.iter().any(Vec::is_empty) {
        // No conforming path holds: say how each one failed.
        for (i, fs) in paths.into_iter().enumerate() {
            found.extend(
                fs.into_iter()
                    .map(|(r, m)| (r, format!("no alternative holds: any_of[{i}]: {m}"))),
            );
        }
    }
    found
}

/// How the occurrence departs from one expectation's own fields (its `any_of` is judged by the
/// caller): `(requirement, message)` per departure, empty when it holds. `effects` is the
/// ground-truth count from the provider's ledger.
pub(super) fn judge_occurrence(
    e: &crate::case::CheckedOccurrence,
    answer: &crate::check::evidence::StateAnswer,
    effects: u32,
) -> Vec<(Req, String)> {
    let st = &answer.report;
    let mut out = judge_state(e, st.state, st.outcome);
    if let Some(want) = e.entry_attempts
        && st.entry_attempts != want
    {
        out.push((
            Req::R010,
            format!(
                "{} provider entry attempts, expected {want}",
                st.entry_attempts
            ),
        ));
    }
    if let Some(want) = e.provider_effects
        && effects != want
    {
        out.push((
            Req::R010,
            format!("{effects} provider effects (ground truth), expected {want}"),
        ));
    }
    // Flags in the implementation's words count through its mapping; an expected flag not
    // raised while some words have no mapping cannot be decided: not failed here, but
    // `undecided_flags` makes it missing knowledge (D34).
    // An expected flag is met by the history, not by the report alone (GUIDE §4, "verify,
    // don't trust").
    let (raised, unmapped) = answer.report_flags();
    let history = crate::check::evidence::View::of(&answer.entries, &answer.flag_map);
    for flag in &e.missing_knowledge {
        if !raised.contains(flag) && unmapped.is_empty() {
            out.push((
                Req::R009,
                format!("missing-knowledge flag {flag} not raised"),
            ));
        } else if raised.contains(flag)
            && !history.flags.contains(flag)
            && history.unmapped.is_empty()
        {
            out.push((
                Req::R009,
                format!(
                    "missing-knowledge flag {flag} is raised by the report alone: no observation in its history raises it"
                ),
            ));
        }
    }
    if let Some(want) = e.authority
        && st.authority != want
    {
        out.push((
            Req::R012,
            format!("authority is {}, expected {want}", st.authority),
        ));
    }
    if let Some(want) = e.remedies
        && st.remedies.len() as u32 != want
    {
        out.push((
            Req::R012,
            format!("{} remedies linked, expected {want}", st.remedies.len()),
        ));
    }
    out
}

/// Why an occurrence's expected missing-knowledge flags cannot be decided, if they cannot: some
/// expected flag (on any path) is not raised in aocheck's words while the report carries words
/// the implementation did not map. The requirement is then not established, never passed.
pub(super) fn undecided_flags(
    e: &crate::case::CheckedOccurrence,
    answer: &crate::check::evidence::StateAnswer,
) -> Option<String> {
    let (raised, unmapped) = answer.report_flags();
    if unmapped.is_empty() {
        return None;
    }
    let missing: Vec<String> = std::iter::once(e)
        .chain(&e.any_of)
        .flat_map(|x| &x.missing_knowledge)
        .filter(|f| !raised.contains(f))
        .map(|f| f.to_string())
        .collect();
    (!missing.is_empty()).then(|| {
        format!(
            "expected missing knowledge {} cannot be judged: the report's words {} have no flag_map entry",
            missing.join(", "),
            unmapped.join(", ")
        )
    })
}

pub(super) fn judge_state(
    e: &crate::case::CheckedOccurrence,
    state: crate::vocab::State,
    outcome: Option<crate::vocab::Outcome>,
) -> Vec<(Req, String)> {
    use crate::vocab::State;
    let mut out = Vec::new();
    if !e.state.is_empty() && !e.state.contains(&state) {
        let want: Vec<&str> = e.state.iter().map(|s| s.name()).collect();
        out.push((
            Req::R009,
            format!("state is {state}, expected {}", want.join(" or ")),
        ));
    }
    let outcome_applies =
        e.state.is_empty() || state == State::Resolved || !e.state.contains(&state);
    if let Some(want) = e.outcome
        && outcome_applies
        && outcome != Some(want)
    {
        out.push((
            Req::R011,
            format!(
                "outcome is {}, expected {want}",
                outcome.map_or("none", |o| o.name())
            ),
        ));
    }
    out
}

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
    #[case::mismatch_fails_even_under_any(Err(SutError::Mismatch(Req::R009, "x".into())), Expected::Any, "failed AOC-REQ-009")]
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

    #[rstest]
    #[case::resolved_as_the_reference_does(&["resolved", "unresolved"], "resolved", Some("final_failure"), 0)]
    #[case::unresolved_as_the_draft_allows(&["resolved", "unresolved"], "unresolved", None, 0)]
    #[case::resolved_with_another_outcome(&["resolved", "unresolved"], "resolved", Some("success"), 1)]
    #[case::unresolved_where_only_resolved_is_accepted(&["resolved"], "unresolved", None, 2)]
    #[case::released_is_neither(&["resolved", "unresolved"], "released", None, 2)]
    #[case::no_state_expectation_still_checks_the_outcome(&[], "unresolved", None, 1)]
    fn final_state_and_outcome(
        #[case] accepted: &[&str],
        #[case] state: &str,
        #[case] outcome: Option<&str>,
        #[case] findings: usize,
    ) {
        use crate::vocab::{Outcome, State};
        let e = crate::case::CheckedOccurrence {
            state: accepted.iter().filter_map(|s| State::parse(s)).collect(),
            outcome: Some(Outcome::FinalFailure),
            ..Default::default()
        };
        let got = judge_state(
            &e,
            State::parse(state).expect("state"),
            outcome.and_then(Outcome::parse),
        );
        assert_eq!(got.len(), findings, "{got:?}");
    }

    /// An expected flag the report does not raise in aocheck's words is undecided (missing
    /// knowledge) only while some of its words have no mapping; otherwise it is judged.
    #[rstest]
    #[case::raised(&["transport"], &[], false, None)]
    #[case::own_word_unmapped(&["wire-gone"], &[], false, Some("wire-gone"))]
    #[case::own_word_mapped(&["wire-gone"], &[("wire-gone", "transport")], false, None)]
    #[case::raised_beside_an_unmapped_word(&["transport", "hmm"], &[], false, None)]
    #[case::nothing_expected(&["hmm"], &[], true, None)]
    fn unmapped_flag_words_leave_an_expectation_undecided(
        #[case] words: &[&str],
        #[case] map: &[(&str, &str)],
        #[case] expect_nothing: bool,
        #[case] undecided: Option<&str>,
    ) {
        use crate::vocab::Flag;
        let answer: crate::check::evidence::StateAnswer =
            serde_json::from_value(serde_json::json!({
                "entries": [],
                "report": {"occurrence": "o", "domain": "d", "executor_generation": 1,
                           "state": "unresolved", "provider_entry": "entered",
                           "authority": "consumed", "entry_attempts": 1,
                           "missing_knowledge": words},
                "flag_map": map.iter().map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect::<std::collections::BTreeMap<_, _>>(),
            }))
            .expect("answer");
        let flags = if expect_nothing {
            Vec::new()
        } else {
            vec![Flag::Transport]
        };
        let e = crate::case::CheckedOccurrence {
            missing_knowledge: flags.clone(),
            ..Default::default()
        };
        let got = undecided_flags(&e, &answer);
        assert_eq!(got.is_some(), undecided.is_some(), "{got:?}");
        if let (Some(msg), Some(word)) = (&got, undecided) {
            assert!(msg.contains(word) && msg.contains("transport"), "{msg}");
        }
        // The same expectation on an alternative path counts the same.
        let alt = crate::case::CheckedOccurrence {
            any_of: vec![
                crate::case::CheckedOccurrence {
                    missing_knowledge: flags,
                    ..Default::default()
                },
                crate::case::CheckedOccurrence::default(),
            ],
            ..Default::default()
        };
        assert_eq!(
            undecided_flags(&alt, &answer).is_some(),
            undecided.is_some()
        );
    }

    /// Alternatives: the common fields always hold; one alternative must hold entirely; when none
    /// does, each one's departures are reported. (Judged here over entry attempts alone.)
    #[rstest]
    #[case::first_path(Some(1), 1, 0)]
    #[case::second_path(Some(1), 0, 0)]
    #[case::neither_path(Some(1), 2, 2)]
    #[case::common_field_broken_on_a_held_path(Some(5), 1, 1)]
    #[case::no_common_field(None, 0, 0)]
    fn one_alternative_must_hold_entirely(
        #[case] common_remedies: Option<u32>,
        #[case] observed_entries: u32,
        #[case] findings: usize,
    ) {
        use crate::case::CheckedOccurrence;
        let path = |n: u32| CheckedOccurrence {
            entry_attempts: Some(n),
            ..Default::default()
        };
        let e = CheckedOccurrence {
            remedies: common_remedies,
            any_of: vec![path(1), path(0)],
            ..Default::default()
        };
        let judge = |x: &CheckedOccurrence| {
            let mut out = Vec::new();
            if x.entry_attempts.is_some_and(|w| w != observed_entries) {
                out.push((Req::R010, "entries".to_string()));
            }
            if x.remedies.is_some_and(|w| w != 1) {
                out.push((Req::R012, "remedies".to_string()));
            }
            out
        };
        let got = judge_with_alternatives(&e, &judge);
        assert_eq!(got.len(), findings, "{got:?}");
        if observed_entries == 2 {
            assert!(
                got.iter()
                    .all(|(_, m)| m.starts_with("no alternative holds: any_of["))
            );
        }
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
