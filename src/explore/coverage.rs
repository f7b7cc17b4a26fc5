//! What the explored schedules exercised: fault kinds × operations (declared and fired), crash
//! points, held-request endings, idempotency profiles and verbs, each with how often. What the
//! vocabulary offers and no schedule fired is named, so a run that missed a kind says so.
//!
//! Only steps that ran count: a schedule's steps are read against the step log of the case
//! report the runner returned, so a step the World skipped (it acts on an occurrence or
//! submission the implementation never made) or never reached (the case stopped) exercised
//! nothing, whatever the schedule drew.

use crate::case::{Case, Step};
use crate::report::model::CaseReport;
use provider_model::hermes::faults::{Kind as HKind, Route};
use provider_model::payments::faults::{Kind as PKind, Op as POp};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The Hermes faults the Hermes workload draws, by route (`hermes <kind> × <route>` in the
/// table): what its coverage must show fired. The kinds and routes are the fault vocabulary's
/// (`provider_model::hermes::faults`); which pairs the workload draws is the workload's choice.
pub const HERMES_FAULTS: [(HKind, Route); 19] = [
    (HKind::Hold, Route::Start),
    (HKind::CommitThen, Route::Start),
    (HKind::CommitThenDrop, Route::Start),
    (HKind::Reject, Route::Start),
    (HKind::StartWithoutRunId, Route::Start),
    (HKind::Events404, Route::Events),
    (HKind::GarbleFrame, Route::Events),
    (HKind::DropStream, Route::Events),
    (HKind::Forget, Route::Status),
    (HKind::Reject, Route::Status),
    (HKind::Delay, Route::Status),
    (HKind::Reject, Route::Approval),
    (HKind::CommitThen, Route::Approval),
    (HKind::CommitThenDrop, Route::Approval),
    (HKind::Delay, Route::Approval),
    (HKind::StopStuck, Route::Stop),
    (HKind::CompleteRacesStop, Route::Stop),
    (HKind::Reject, Route::Stop),
    (HKind::CommitThen, Route::Stop),
];

/// The operations the AOC workload sends, in the coverage table's order.
const WORKLOAD_OPS: [POp; 4] = [POp::Create, POp::Get, POp::List, POp::Refund];

/// The operations a payments fault kind is drawn on: where the provider lets it fire
/// (`Kind::applies`) among the workload's operations; a hold only where the workload parks a
/// request, its creation.
pub fn applies(kind: PKind) -> Vec<POp> {
    WORKLOAD_OPS
        .into_iter()
        .filter(|op| kind.applies(*op) && (kind != PKind::Hold || *op == POp::Create))
        .collect()
}

/// Declared and fired counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Count {
    pub declared: u64,
    pub fired: u64,
}

/// The coverage of a run of schedules.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Coverage {
    /// `kind × op` → counts.
    pub faults: BTreeMap<String, Count>,
    /// Where executors were killed, by the step before (and at a hold, how the hold ended):
    /// declared, and landed as declared.
    pub crash_points: BTreeMap<String, Count>,
    /// How held requests ended.
    pub held: BTreeMap<String, u64>,
    pub idempotency: BTreeMap<String, u64>,
    pub verbs: BTreeMap<String, u64>,
}

/// Which of the case's steps ran, read from the runner's step log: it has one line per step
/// the runner came to, in order, `verb: what happened`, and a skipped step's says `skipped (…)`;
/// the steps past the last line were never reached, and the lines past the steps (the end of
/// the case waiting for background work) are no step's.
pub fn ran(case: &Case, log: &[String]) -> Vec<bool> {
    case.steps
        .iter()
        .zip(log.iter().map(Some).chain(std::iter::repeat(None)))
        .map(|(s, line)| {
            line.and_then(|l| l.strip_prefix(s.verb().as_str()))
                .and_then(|l| l.strip_prefix(": "))
                .is_some_and(|what| !what.starts_with("skipped ("))
        })
        .collect()
}

impl Coverage {
    /// Adds one schedule: its case and the report of its run, whose step log says which steps
    /// ran and whose faults say which fired (provider rules first, one per rule armed, in
    /// declaration order, as the runner reports them). A fault counts as declared when its
    /// step ran (the rule was armed; a crash was performed) and as fired as the report says.
    pub fn add(&mut self, case: &Case, report: &CaseReport) {
        let ran = ran(case, &report.steps);
        if !ran.contains(&true) {
            return;
        }
        *self
            .idempotency
            .entry(
                case.config
                    .idempotency
                    .clone()
                    .unwrap_or_else(|| "stripe-v1".into()),
            )
            .or_default() += 1;
        let faults = &report.faults;
        let mut rules = faults.iter().filter(|f| f.what.starts_with("provider "));
        let mut hermes_rules = faults.iter().filter(|f| f.what.starts_with("hermes "));
        // The runner reports each crash of the case (in step order, reached or not) and whether
        // it landed: a crash at a hold landed only if the provider committed with nobody left
        // to answer.
        let mut crashes = faults.iter().filter(|f| f.what.starts_with("crash "));
        let mut before = "start".to_string();
        for (i, s) in case.steps.iter().enumerate() {
            let crash = matches!(s, Step::Crash { .. }).then(|| crashes.next());
            if !ran[i] {
                continue;
            }
            *self.verbs.entry(s.verb()).or_default() += 1;
            match s {
                Step::ProviderFault { op, fault, .. } => {
                    let fired = rules.next().is_some_and(|f| f.fired);
                    let c = self
                        .faults
                        .entry(format!("{} × {}", fault.kind().label(), op.label()))
                        .or_default();
                    c.declared += 1;
                    c.fired += u64::from(fired);
                }
                Step::HermesFault { route, fault, .. } => {
                    let fired = hermes_rules.next().is_some_and(|f| f.fired);
                    let c = self
                        .faults
                        .entry(format!(
                            "hermes {} × {}",
                            fault.kind().label(),
                            route.label()
                        ))
                        .or_default();
                    c.declared += 1;
                    c.fired += u64::from(fired);
                }
                Step::OperatorKill { .. } => {
                    let c = self
                        .crash_points
                        .entry(format!("connector instance killed after {before}"))
                        .or_default();
                    c.declared += 1;
                    c.fired += 1;
                }
                Step::Crash { at_hold, .. } => {
                    let point = match at_hold {
                        Some(h) => {
                            let end = case.steps[i + 1..]
                                .iter()
                                .find_map(|s| match s {
                                    Step::ProviderRelease { hold, reject, .. } if hold == h => {
                                        Some(if reject.is_some() {
                                            "then rejects"
                                        } else {
                                            "then commits"
                                        })
                                    }
                                    _ => None,
                                })
                                .unwrap_or("never released");
                            format!("while the provider holds the request, {end}")
                        }
                        None => format!("after {before}"),
                    };
                    let c = self.crash_points.entry(point).or_default();
                    c.declared += 1;
                    c.fired += u64::from(crash.flatten().is_some_and(|f| f.fired));
                }
                Step::ProviderRelease {
                    reject,
                    forged,
                    mismatched,
                    ..
                } => {
                    let how = if reject.is_some() {
                        "rejected"
                    } else if *forged {
                        "forged reply"
                    } else if *mismatched {
                        "mismatched reply"
                    } else {
                        "committed"
                    };
                    *self.held.entry(how.into()).or_default() += 1;
                }
                _ => {}
            }
            if !matches!(
                s,
                Step::ProviderFault { .. }
                    | Step::Crash { .. }
                    | Step::HermesFault { .. }
                    | Step::OperatorKill { .. }
            ) {
                before = s.verb();
            }
        }
    }

    /// Every `kind × op` the vocabulary of `workload` (`aoc`, `hermes` or `all`) offers that no
    /// schedule fired: the payment provider's for the AOC workload, Hermes's for the Hermes one.
    pub fn never_fired(&self, workload: &str) -> Vec<String> {
        let payments = PKind::ALL.into_iter().flat_map(|k| {
            applies(k)
                .into_iter()
                .map(move |op| format!("{} × {}", k.label(), op.label()))
        });
        let hermes = HERMES_FAULTS
            .iter()
            .map(|(k, r)| format!("hermes {} × {}", k.label(), r.label()));
        payments
            .filter(|_| workload != "hermes")
            .chain(hermes.filter(|_| workload != "aoc"))
            .filter(|key| self.faults.get(key).is_none_or(|c| c.fired == 0))
            .collect()
    }

    pub fn merge(&mut self, other: &Coverage) {
        for (k, c) in &other.faults {
            let e = self.faults.entry(k.clone()).or_default();
            e.declared += c.declared;
            e.fired += c.fired;
        }
        for (k, c) in &other.crash_points {
            let e = self.crash_points.entry(k.clone()).or_default();
            e.declared += c.declared;
            e.fired += c.fired;
        }
        for (mine, theirs) in [
            (&mut self.held, &other.held),
            (&mut self.idempotency, &other.idempotency),
            (&mut self.verbs, &other.verbs),
        ] {
            for (k, n) in theirs {
                *mine.entry(k.clone()).or_default() += n;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One fault vocabulary: the workload draws each Hermes kind only on a route the
    /// vocabulary lets it fire on, and each payments kind on the operations the provider lets
    /// it fire on (a hold only at creation), as the coverage table always listed them.
    #[test]
    fn the_drawn_faults_are_the_vocabulary_s() {
        for (k, r) in HERMES_FAULTS {
            assert!(k.applies(r), "{k:?} on {r:?}");
        }
        let table: Vec<String> = PKind::ALL
            .into_iter()
            .map(|k| {
                let ops: Vec<&str> = applies(k).into_iter().map(POp::label).collect();
                format!("{} {}", k.label(), ops.join(","))
            })
            .collect();
        assert_eq!(
            table,
            [
                "reject create,get,list,refund",
                "commit_then create,refund",
                "commit_then_drop create,refund",
                "delay create,get,list,refund",
                "garble create,get,list,refund",
                "omit create,get,list,refund",
                "forge create,get,list,refund",
                "forget create,get,list,refund",
                "incomplete_listing list",
                "expire_retention create,get,list,refund",
                "hold create",
            ]
        );
    }
    use crate::report::model::FaultReport;

    fn case(text: &str) -> Case {
        serde_saphyr::from_str(text).unwrap_or_else(|e| panic!("{e}"))
    }

    /// The report of a run of `c` whose step log is `steps` and whose faults are `faults`.
    fn report(c: &Case, steps: &[&str], faults: &[FaultReport]) -> CaseReport {
        let mut r = CaseReport::new(&c.id, &c.title, "x.yaml".as_ref(), vec![]);
        r.steps = steps.iter().map(|s| s.to_string()).collect();
        r.faults = faults.to_vec();
        r
    }

    /// Every step of `c` ran, each `ok`.
    fn all_ok(c: &Case, faults: &[FaultReport]) -> CaseReport {
        let lines: Vec<String> = c
            .steps
            .iter()
            .map(|s| format!("{}: ok", s.verb()))
            .collect();
        report(
            c,
            &lines.iter().map(String::as_str).collect::<Vec<_>>(),
            faults,
        )
    }

    #[test]
    fn faults_are_counted_declared_and_fired_in_order() {
        let c = case(
            "id: X\ntitle: t\nrequirements: [AOC-REQ-001]\nsteps:\n  - {do: join, executor: e1}\n  - {do: provider_fault, op: create, fault: {type: garble}}\n  - {do: provider_fault, op: list, fault: {type: incomplete_listing}}\n  - {do: crash, executor: e1}\n",
        );
        let fr = |fired| FaultReport {
            what: "provider x".into(),
            fired,
        };
        let mut cov = Coverage::default();
        cov.add(&c, &all_ok(&c, &[fr(true), fr(false)]));
        assert_eq!(
            cov.faults["garble × create"],
            Count {
                declared: 1,
                fired: 1
            }
        );
        assert_eq!(
            cov.faults["incomplete_listing × list"],
            Count {
                declared: 1,
                fired: 0
            }
        );
        // Declared, and not landed: the runner reported no crash for it.
        assert_eq!(
            cov.crash_points["after join"],
            Count {
                declared: 1,
                fired: 0
            }
        );
        let missing = cov.never_fired("aoc");
        assert!(missing.contains(&"incomplete_listing × list".to_string()));
        assert!(!missing.contains(&"garble × create".to_string()));
        assert!(missing.contains(&"hold × create".to_string()));
    }

    #[test]
    fn hermes_faults_and_connector_kills_are_counted_and_missed_ones_named() {
        let c = case(
            "id: X\ntitle: t\nrequirements: [AOC-REQ-010]\nsteps:\n  - {do: hermes_fault, route: start, fault: {type: commit_then_drop}}\n  - {do: hermes_fault, route: stop, fault: {type: stop_stuck}}\n  - {do: operator_kill, instance: p1}\n",
        );
        let f = |what: &str, fired| FaultReport {
            what: what.into(),
            fired,
        };
        let mut cov = Coverage::default();
        cov.add(
            &c,
            &all_ok(
                &c,
                &[
                    f("hermes start commit_then_drop", true),
                    f("hermes stop stop_stuck", false),
                    f("kill connector p1", true),
                ],
            ),
        );
        assert_eq!(
            cov.faults["hermes commit_then_drop × start"],
            Count {
                declared: 1,
                fired: 1
            }
        );
        assert_eq!(cov.faults["hermes stop_stuck × stop"].fired, 0);
        assert_eq!(
            cov.crash_points["connector instance killed after start"].fired,
            1
        );
        let missing = cov.never_fired("hermes");
        assert!(missing.contains(&"hermes stop_stuck × stop".to_string()));
        assert!(!missing.contains(&"hermes commit_then_drop × start".to_string()));
        // The Hermes workload alone: none of the payment provider's pairs is named.
        assert!(
            missing.iter().all(|m| m.starts_with("hermes ")),
            "{missing:?}"
        );
        let both = cov.never_fired("all");
        assert!(both.contains(&"hold × create".to_string()));
        assert!(both.contains(&"hermes stop_stuck × stop".to_string()));
    }

    #[test]
    fn a_crash_at_a_hold_says_how_the_hold_ended() {
        let c = case(
            "id: X\ntitle: t\nrequirements: [AOC-REQ-001]\nsteps:\n  - {do: join, executor: e1}\n  - {do: create, occurrence: o1}\n  - {do: provider_fault, op: create, fault: {type: hold, name: h}}\n  - {do: send, occurrence: o1, background: true}\n  - {do: crash, executor: e1, at_hold: h}\n  - {do: provider_release, hold: h, reject: 503}\n",
        );
        let mut cov = Coverage::default();
        let landed = FaultReport {
            what: "crash e1 while hold h parks its request".into(),
            fired: true,
        };
        cov.add(&c, &all_ok(&c, &[landed]));
        assert_eq!(
            cov.crash_points["while the provider holds the request, then rejects"],
            Count {
                declared: 1,
                fired: 1
            }
        );
        assert_eq!(cov.held["rejected"], 1);
    }

    #[test]
    fn a_skipped_step_and_a_step_never_reached_count_for_nothing() {
        let c = case(
            "id: X\ntitle: t\nrequirements: [AOC-REQ-001]\nsteps:\n  - {do: join, executor: e1}\n  - {do: create, occurrence: o1, expect: any}\n  - {do: execute, occurrence: o1, expect: any}\n  - {do: provider_fault, op: get, fault: {type: garble}}\n  - {do: crash, executor: e1}\n  - {do: settle}\n",
        );
        // The creation was refused, so the execute was skipped; the case stopped at the fault
        // (an error of the harness's): the crash and the settle were never reached, and a line
        // of the end of the case follows.
        let r = report(
            &c,
            &[
                "join: ok",
                "create: refused AOC-REQ-006",
                "execute: skipped (occurrence \"o1\" was never made)",
                "provider_fault: error: the provider cannot be reached",
                "settle (end of case): refused (no requirement named)",
            ],
            &[FaultReport {
                what: "crash e1".into(),
                fired: true,
            }],
        );
        assert_eq!(ran(&c, &r.steps), [true, true, false, true, false, false]);
        let mut cov = Coverage::default();
        cov.add(&c, &r);
        assert_eq!(cov.verbs.get("join"), Some(&1));
        assert_eq!(cov.verbs.get("create"), Some(&1));
        assert_eq!(cov.verbs.get("execute"), None);
        assert_eq!(cov.verbs.get("crash"), None);
        assert_eq!(cov.verbs.get("settle"), None);
        assert!(cov.crash_points.is_empty(), "{:?}", cov.crash_points);
        // The fault's step ran, and no rule was armed by it: declared, never fired.
        assert_eq!(
            cov.faults["garble × get"],
            Count {
                declared: 1,
                fired: 0
            }
        );
        // The same schedule with every step run counts every step.
        let mut all = Coverage::default();
        all.add(&c, &all_ok(&c, &r.faults));
        for verb in [
            "join",
            "create",
            "execute",
            "provider_fault",
            "crash",
            "settle",
        ] {
            assert_eq!(all.verbs.get(verb), Some(&1), "{verb}");
        }
        assert_eq!(
            all.crash_points["after execute"],
            Count {
                declared: 1,
                fired: 1
            }
        );
        // A case that never came to its steps (unsupported) exercised nothing at all.
        let mut none = Coverage::default();
        none.add(&c, &report(&c, &[], &[]));
        assert_eq!(none, Coverage::default());
    }
}
