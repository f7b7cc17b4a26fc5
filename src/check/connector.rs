//! Judging a Hermes connector's deployment (`aocheck deploy` with `provider: hermes`): what
//! fake-hermes' ground-truth ledger recorded, attributed to actions by the declared rule (seed
//! 000's session id `aip-operator-<action_id>`, or the start's Idempotency-Key), against what
//! the connector said of each action through its own API. The connector is never believed
//! about a run: its label is checked against the ledger.
//!
//! - `deploy_one_run` (AOC-REQ-010, -002): at most one run per action, whatever the crash, lost
//!   reply, 5xx or replay ("outcome_unknown instead of a second start", seed 000); and no run
//!   the declared attribution cannot place.
//! - `deploy_result_from_provider` (AOC-REQ-011, -009): a final label is what the provider said
//!   of the action's run when the label was shown (`completed` for success, `failed` or
//!   `cancelled` for a failure); a failure is never inferred from a 5xx or a lost reply; an
//!   `unknown` label claims nothing and is honest caution.

use super::deploy::{Ambiguity, Reported};
use super::{Facts, Finding};
use crate::aoc::requirement::Req;
use provider_model::hermes::ledger::{ApprovalApplied, Ledger, RunStarted};

/// Attributes a run to an action by the declared rule.
pub type RunOwner<'a> = &'a dyn Fn(&RunStarted) -> Option<String>;

/// What the provider had said of an action's runs when a final label was first shown: each
/// run's terminal status then (`None` while it had not ended).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunsThen(pub Vec<(String, Option<String>)>);

/// Judges one case of a connector deployment. `then[i]` is, for `reported[i].finals[j]`, what
/// the provider had said of the action's runs when that label was first read.
pub fn judge(
    ledger: &Ledger,
    owner: Option<RunOwner<'_>>,
    reported: &[Reported],
    then: &[Vec<RunsThen>],
    facts: &mut Facts,
) -> Vec<Finding> {
    let mut out = Vec::new();
    let Some(owner) = owner else {
        // No attribution: the runs cannot be read against actions; nothing is established.
        return out;
    };
    let runs: Vec<(&RunStarted, Option<String>)> = ledger
        .runs
        .iter()
        .map(|r| {
            let o = owner(r).filter(|o| reported.iter().any(|x| x.occurrence == *o));
            (r, o)
        })
        .collect();
    for r in runs.iter().filter(|(_, o)| o.is_none()).map(|(r, _)| r) {
        out.push(Finding::new(
            "deploy_one_run",
            Req::R010,
            format!(
                "fake-hermes started run {} (session {}, key {}) that the declared attribution places under no action of the case (ground truth)",
                r.run_id,
                r.session_id,
                r.idempotency_key.as_deref().unwrap_or("none")
            ),
        ));
    }
    for (i, r) in reported.iter().enumerate() {
        let mine: Vec<&RunStarted> = runs
            .iter()
            .filter(|(_, o)| o.as_deref() == Some(r.occurrence.as_str()))
            .map(|(x, _)| *x)
            .collect();
        facts.saw(Req::R010);
        facts.saw(Req::R002);
        if mine.len() > 1 {
            out.push(
                Finding::new(
                    "deploy_one_run",
                    Req::R010,
                    format!(
                        "fake-hermes started {} runs for one action: {} (ground truth): an action is started once; a start whose answer was lost, refused or never read is outcome_unknown, and a changed input under the same action id is a collision, never a second run (seed 000)",
                        mine.len(),
                        mine.iter()
                            .map(|x| format!(
                                "{} (session {}, key {}, reply {:?}{})",
                                x.run_id,
                                x.session_id,
                                x.idempotency_key.as_deref().unwrap_or("none"),
                                x.reply,
                                x.fault
                                    .as_deref()
                                    .map_or(String::new(), |f| format!(", fault {f}"))
                            ))
                            .collect::<Vec<_>>()
                            .join("; ")
                    ),
                )
                .about(Some(&r.occurrence)),
            );
        }
        let said_then = then.get(i).map(Vec::as_slice).unwrap_or(&[]);
        let mut distinct: Vec<&'static str> = Vec::new();
        for (j, shown) in r.finals.iter().enumerate() {
            let said = shown.outcome;
            if said != "unknown" && !distinct.contains(&said) {
                distinct.push(said);
            }
            let runs_then = said_then.get(j).map(|t| t.0.as_slice()).unwrap_or(&[]);
            let describe = || {
                if runs_then.is_empty() {
                    "fake-hermes had started no run for it".to_string()
                } else {
                    format!(
                        "fake-hermes had said {}",
                        runs_then
                            .iter()
                            .map(|(id, st)| format!(
                                "{id} {}",
                                st.as_deref().unwrap_or("not ended")
                            ))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                }
            };
            let ended = |want: &[&str]| {
                runs_then
                    .iter()
                    .any(|(_, st)| st.as_deref().is_some_and(|s| want.contains(&s)))
            };
            // `not_accepted`: Hermes never took the start, so no run of the action exists;
            // `final_failure`: a run of it ended failed or cancelled.
            let wrong = match said {
                "success" => !ended(&["completed"]),
                "final_failure" => !ended(&["failed", "cancelled"]),
                "not_accepted" => !runs_then.is_empty(),
                _ => false,
            };
            if wrong {
                out.push(
                    Finding::new(
                        "deploy_result_from_provider",
                        Req::R011,
                        format!(
                            "the connector reported {:?} ({said}), but when it was shown {} (ground truth): a terminal status comes from the provider's own record of the run",
                            shown.label,
                            describe()
                        ),
                    )
                    .about(Some(&r.occurrence)),
                );
                if said != "success" && r.ambiguity != Ambiguity::None {
                    facts.saw(Req::R009);
                    out.push(
                        Finding::new(
                            "deploy_result_from_provider",
                            Req::R009,
                            format!(
                                "a terminal failure was reported after {}, which proves nothing about the run",
                                match r.ambiguity {
                                    Ambiguity::ErrorAfterCommit => "a 5xx answer to the start",
                                    _ => "a start whose answer was lost",
                                }
                            ),
                        )
                        .about(Some(&r.occurrence)),
                    );
                }
            } else if r.ambiguity != Ambiguity::None {
                facts.saw(Req::R009);
            }
        }
        out.extend(super::deploy::relabelled(
            "deploy_result_from_provider",
            "connector",
            &distinct,
            r,
        ));
        if r.outcome.is_some() {
            facts.saw(Req::R011);
        }
    }
    out
}

/// `deploy_one_run` (AOC-REQ-010): the connector's answer to the same action id submitted with
/// another objective. "Requests that change … the exact request … are refused as conflicting"
/// (AOC-REQ-010), "changed input is rejected" (seed 000): a 2xx accepted it, whatever the
/// connector then did with it. One fact.
pub fn changed_input(occurrence: &str, code: u16, facts: &mut Facts) -> Option<Finding> {
    facts.saw(Req::R010);
    (200..300).contains(&code).then(|| {
        Finding::new(
            "deploy_one_run",
            Req::R010,
            format!(
                "the connector answered {code} to the same action id with another objective: a changed input under one action is a collision, refused, never accepted (seed 000)"
            ),
        )
        .about(Some(occurrence))
    })
}

/// `deploy_one_decision` (AOC-REQ-010): the decisions fake-hermes applied to an action's runs
/// against the resume commands the case sent. A resume command is a consequential effect of
/// its own: "exact resume replay sends one provider command" (seed 000), and a decision applied
/// again resolves a later approval with a choice nobody gave for it. One fact.
pub fn one_decision_per_command(
    occurrence: &str,
    applied: &[&ApprovalApplied],
    commands: usize,
    facts: &mut Facts,
) -> Option<Finding> {
    facts.saw(Req::R010);
    (applied.len() > commands).then(|| {
        Finding::new(
            "deploy_one_decision",
            Req::R010,
            format!(
                "fake-hermes applied {} approval decisions to the action's run for {commands} resume command(s) (ground truth: {}): a resume command reaches the provider once; its exact replay returns the stored progress, and one whose answer was lost is approval_outcome_unknown, never sent again (seed 000)",
                applied.len(),
                applied
                    .iter()
                    .map(|a| format!(
                        "{:?} on {} (reply {:?}{})",
                        a.choice,
                        a.run_id,
                        a.reply,
                        a.fault.as_deref().map_or(String::new(), |f| format!(", fault {f}"))
                    ))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        )
        .about(Some(occurrence))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::deploy::Shown;
    use provider_model::hermes::ledger::Reply;
    use rstest::rstest;

    fn run(id: &str, action: &str) -> RunStarted {
        RunStarted::example(id, &format!("aip-operator-{action}"))
    }

    fn by_session(r: &RunStarted) -> Option<String> {
        r.session_id
            .strip_prefix("aip-operator-")
            .map(str::to_string)
    }

    fn said(label: &str, outcome: &'static str, amb: Ambiguity) -> Vec<Reported> {
        vec![Reported {
            occurrence: "a1".into(),
            outcome: Some(outcome),
            label: label.into(),
            finals: vec![Shown {
                label: label.into(),
                outcome,
                effects_then: 0,
            }],
            ambiguity: amb,
            amount: 0,
            currency: String::new(),
        }]
    }

    fn then(runs: &[(&str, Option<&str>)]) -> Vec<Vec<RunsThen>> {
        vec![vec![RunsThen(
            runs.iter()
                .map(|(r, s)| (r.to_string(), s.map(str::to_string)))
                .collect(),
        )]]
    }

    /// Both ways, for each rule: an honest answer passes, a lie fails for its requirement.
    #[rstest]
    #[case::completed_and_said_so(vec![run("r1", "a1")], "completed", "success", Ambiguity::None, &[("r1", Some("completed"))], &[])]
    #[case::unknown_after_a_lost_start(vec![run("r1", "a1")], "outcome_unknown", "unknown", Ambiguity::Dropped, &[("r1", Some("completed"))], &[])]
    #[case::two_runs_for_one_action(vec![run("r1", "a1"), run("r2", "a1")], "completed", "success", Ambiguity::None, &[("r2", Some("completed"))], &[Req::R010])]
    #[case::a_run_nobody_owns(vec![run("r1", "a1"), run("r2", "zz")], "completed", "success", Ambiguity::None, &[("r1", Some("completed"))], &[Req::R010])]
    #[case::completed_before_the_run_ended(vec![run("r1", "a1")], "completed", "success", Ambiguity::None, &[("r1", None)], &[Req::R011])]
    #[case::completed_with_no_run(vec![], "completed", "success", Ambiguity::None, &[], &[Req::R011])]
    #[case::failed_after_a_5xx_while_it_ran(vec![run("r1", "a1")], "failed", "final_failure", Ambiguity::ErrorAfterCommit, &[("r1", None)], &[Req::R011, Req::R009])]
    #[case::failed_and_so_it_was(vec![run("r1", "a1")], "failed", "final_failure", Ambiguity::ErrorAfterCommit, &[("r1", Some("failed"))], &[])]
    #[case::refused_with_no_run(vec![], "rejected", "not_accepted", Ambiguity::None, &[], &[])]
    #[case::refused_although_a_run_failed(vec![run("r1", "a1")], "rejected", "not_accepted", Ambiguity::None, &[("r1", Some("failed"))], &[Req::R011])]
    fn the_ledger_decides(
        #[case] runs: Vec<RunStarted>,
        #[case] label: &str,
        #[case] outcome: &'static str,
        #[case] amb: Ambiguity,
        #[case] runs_then: &[(&str, Option<&str>)],
        #[case] want: &[Req],
    ) {
        let ledger = Ledger {
            runs,
            ..Ledger::default()
        };
        let mut facts = Facts::default();
        let found = judge(
            &ledger,
            Some(&by_session),
            &said(label, outcome, amb),
            &then(runs_then),
            &mut facts,
        );
        let mut got: Vec<Req> = found.iter().map(Finding::requirement).collect();
        got.dedup();
        assert_eq!(got, want, "{found:?}");
        assert!(facts.count(Req::R010) > 0 && facts.count(Req::R011) > 0);
    }

    /// Each checker of this file fires under its own name.
    #[rstest]
    #[case::two_runs(vec![run("r1", "a1"), run("r2", "a1")], &[("r2", Some("completed"))], "deploy_one_run")]
    #[case::completed_too_soon(vec![run("r1", "a1")], &[("r1", None)], "deploy_result_from_provider")]
    fn each_connector_checker_fires_by_name(
        #[case] runs: Vec<RunStarted>,
        #[case] runs_then: &[(&str, Option<&str>)],
        #[case] checker: &str,
    ) {
        let ledger = Ledger {
            runs,
            ..Ledger::default()
        };
        let found = judge(
            &ledger,
            Some(&by_session),
            &said("completed", "success", Ambiguity::None),
            &then(runs_then),
            &mut Facts::default(),
        );
        assert!(found.iter().any(|f| f.checker() == checker), "{found:?}");
    }

    fn decision(run: &str) -> ApprovalApplied {
        ApprovalApplied {
            run_id: run.into(),
            session_id: "aip-operator-a1".into(),
            choice: "once".into(),
            resolved: 1,
            request_id: None,
            fault: None,
            reply: Reply::Written,
        }
    }

    /// Both ways: one decision for one command passes (none too: a command refused or never
    /// sent); a second decision for it fails AOC-REQ-010 under `deploy_one_decision`.
    #[rstest]
    #[case::none(0, false)]
    #[case::one(1, false)]
    #[case::the_replay_applied_again(2, true)]
    fn one_decision_per_resume_command(#[case] n: usize, #[case] fails: bool) {
        let d: Vec<ApprovalApplied> = (0..n).map(|_| decision("r1")).collect();
        let refs: Vec<&ApprovalApplied> = d.iter().collect();
        let mut facts = Facts::default();
        let f = one_decision_per_command("a1", &refs, 1, &mut facts);
        assert_eq!(f.is_some(), fails, "{f:?}");
        assert!(
            f.iter()
                .all(|x| x.requirement() == Req::R010 && x.checker() == "deploy_one_decision")
        );
        assert_eq!(facts.count(Req::R010), 1);
    }

    /// Both ways: a refusal of a changed input passes, a 2xx fails AOC-REQ-010.
    #[rstest]
    #[case::refused(409, false)]
    #[case::unprocessable(422, false)]
    #[case::accepted(202, true)]
    #[case::answered_with_the_old_action(200, true)]
    fn a_changed_input_is_refused(#[case] code: u16, #[case] fails: bool) {
        let mut facts = Facts::default();
        let f = changed_input("a1", code, &mut facts);
        assert_eq!(f.is_some(), fails);
        assert!(f.iter().all(|x| x.requirement() == Req::R010));
        assert_eq!(facts.count(Req::R010), 1);
    }
}
