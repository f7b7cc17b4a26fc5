//! What the explored schedules exercised: fault kinds × operations (declared and fired), crash
//! points, held-request endings, idempotency profiles and verbs, each with how often. What the
//! vocabulary offers and no schedule fired is named, so a run that missed a kind says so.

use crate::case::{Case, Step};
use crate::report::model::FaultReport;
use fake_payments::faults::{Fault, Op as POp};
use serde::Serialize;
use std::collections::BTreeMap;

/// Every provider fault kind, as the fault vocabulary names it.
pub const FAULT_KINDS: [&str; 11] = [
    "reject",
    "commit_then",
    "commit_then_drop",
    "delay",
    "garble",
    "omit",
    "forge",
    "forget",
    "incomplete_listing",
    "expire_retention",
    "hold",
];

/// The operations each fault kind applies to (the provider's own rule: effect faults on effects,
/// listing faults on listings).
pub fn applies(kind: &str) -> &'static [POp] {
    match kind {
        "commit_then" | "commit_then_drop" => &[POp::Create, POp::Refund],
        "incomplete_listing" => &[POp::List],
        "hold" => &[POp::Create],
        _ => &[POp::Create, POp::Get, POp::List, POp::Refund],
    }
}

pub fn fault_kind(f: &Fault) -> &'static str {
    match f {
        Fault::Reject { .. } => "reject",
        Fault::CommitThen { .. } => "commit_then",
        Fault::CommitThenDrop => "commit_then_drop",
        Fault::Delay { .. } => "delay",
        Fault::Garble => "garble",
        Fault::Omit { .. } => "omit",
        Fault::Forge { .. } => "forge",
        Fault::Forget => "forget",
        Fault::IncompleteListing => "incomplete_listing",
        Fault::ExpireRetention => "expire_retention",
        Fault::Hold { .. } => "hold",
    }
}

/// Declared and fired counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Count {
    pub declared: u64,
    pub fired: u64,
}

/// The coverage of a run of schedules.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
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

impl Coverage {
    /// Adds one schedule: its case and the faults its report says fired (provider rules first,
    /// in declaration order, as the runner reports them).
    pub fn add(&mut self, case: &Case, faults: &[FaultReport]) {
        *self
            .idempotency
            .entry(
                case.config
                    .idempotency
                    .clone()
                    .unwrap_or_else(|| "stripe-v1".into()),
            )
            .or_default() += 1;
        let mut rules = faults.iter().filter(|f| f.what.starts_with("provider "));
        // The runner reports each crash (in step order) and whether it landed: a crash at a
        // hold landed only if the provider committed with nobody left to answer.
        let mut crashes = faults.iter().filter(|f| f.what.starts_with("crash "));
        let mut before = "start".to_string();
        for (i, s) in case.steps.iter().enumerate() {
            *self.verbs.entry(s.verb()).or_default() += 1;
            match s {
                Step::ProviderFault { op, fault, .. } => {
                    let fired = rules.next().is_some_and(|f| f.fired);
                    let c = self
                        .faults
                        .entry(format!("{} × {}", fault_kind(fault), op.label()))
                        .or_default();
                    c.declared += 1;
                    c.fired += u64::from(fired);
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
                    c.fired += u64::from(crashes.next().is_some_and(|f| f.fired));
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
            if !matches!(s, Step::ProviderFault { .. } | Step::Crash { .. }) {
                before = s.verb();
            }
        }
    }

    /// Every `kind × op` the vocabulary offers that no schedule fired.
    pub fn never_fired(&self) -> Vec<String> {
        FAULT_KINDS
            .iter()
            .flat_map(|k| {
                applies(k)
                    .iter()
                    .map(move |op| format!("{k} × {}", op.label()))
            })
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

    fn case(text: &str) -> Case {
        serde_saphyr::from_str(text).unwrap_or_else(|e| panic!("{e}"))
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
        cov.add(&c, &[fr(true), fr(false)]);
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
        let missing = cov.never_fired();
        assert!(missing.contains(&"incomplete_listing × list".to_string()));
        assert!(!missing.contains(&"garble × create".to_string()));
        assert!(missing.contains(&"hold × create".to_string()));
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
        cov.add(&c, &[landed]);
        assert_eq!(
            cov.crash_points["while the provider holds the request, then rejects"],
            Count {
                declared: 1,
                fired: 1
            }
        );
        assert_eq!(cov.held["rejected"], 1);
    }
}
