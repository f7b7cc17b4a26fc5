//! `deploy explore` over a Hermes connector: schedules of actions one after another, each
//! meeting one connector fault ([`HermesKind`]) or none, each run and judged as a case runs
//! its action ([`super::run_action`]: fresh instances on a store of the schedule's own, a fresh
//! fake-hermes ledger). A schedule file of actions is what `deploy run --schedule` replays for
//! a connector. What one action does to the next (a restarted instance driving an older
//! action) is not drawn: every action starts on a ledger of its own (D80).

use super::super::explorer::Explorer;
use super::super::file::Loaded;
use super::super::{Providers, Ran};
use super::{HermesKind, cannot_take, run_action};
use crate::aoc::requirement::Req;
use crate::explore::rng::Rng;
use crate::report::model::HarnessCause;
use std::collections::BTreeSet;
use std::path::Path;

/// Actions submitted one after another.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActionSchedule {
    pub steps: Vec<ActionStep>,
}

/// One action and the fault it meets (`None`: none).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActionStep {
    pub occurrence: String,
    pub fault: Option<HermesKind>,
}

/// The faults a deploy file can take, in the vocabulary's order.
pub fn available(d: &Loaded) -> Vec<HermesKind> {
    HermesKind::ALL
        .iter()
        .copied()
        .filter(|k| cannot_take(d, *k).is_none())
        .collect()
}

/// The schedule of run `index` of `seed`: 1 to `actions` actions, each with a fault of `kinds`
/// or none.
pub fn generate(seed: u64, index: u64, actions: u64, kinds: &[HermesKind]) -> ActionSchedule {
    let mut rng = Rng::schedule(seed, index);
    let n = 1 + rng.below(actions.max(1));
    let choices: Vec<Option<HermesKind>> = std::iter::once(None)
        .chain(kinds.iter().map(|k| Some(*k)))
        .collect();
    ActionSchedule {
        steps: (0..n)
            .map(|k| ActionStep {
                // An AIP Action id, as the cases' (seed 000's resume names its source so).
                occurrence: format!("act_x{seed}r{index}a{k}"),
                fault: *rng.pick(&choices),
            })
            .collect(),
    }
}

impl crate::explore::shrink::Shrinkable for ActionSchedule {
    /// An action dropped, then a fault removed.
    fn smaller(&self) -> Vec<ActionSchedule> {
        let mut out = Vec::new();
        if self.steps.len() > 1 {
            for i in 0..self.steps.len() {
                let mut c = self.clone();
                c.steps.remove(i);
                out.push(c);
            }
        }
        for i in 0..self.steps.len() {
            if self.steps[i].fault.is_some() {
                let mut c = self.clone();
                c.steps[i].fault = None;
                out.push(c);
            }
        }
        out
    }
}

/// A schedule in one line: `action(fault) → …`.
pub fn describe(s: &ActionSchedule) -> String {
    super::super::explorer::describe_steps(
        s.steps
            .iter()
            .map(|st| (st.occurrence.as_str(), st.fault.map(HermesKind::name))),
    )
}

/// A schedule file (YAML), as `--schedule` reads it.
pub fn schedule_yaml(s: &ActionSchedule) -> String {
    super::super::explorer::steps_yaml(
        "a Hermes connector's actions one after another, each with the fault it meets.",
        s.steps
            .iter()
            .map(|st| (st.occurrence.as_str(), st.fault.map(HermesKind::name))),
    )
}

/// Reads a connector's schedule file, every defect named with its step.
pub fn read_schedule(d: &Loaded, f: &Path) -> Result<ActionSchedule, String> {
    let text = std::fs::read_to_string(f).map_err(|e| format!("{}: {e}", f.display()))?;
    let s: ActionSchedule = serde_saphyr::from_str(&text).map_err(|e| {
        format!(
            "{}: {e} (a connector's schedule is `steps: [{{occurrence: ID, fault: {} | null}}]`)",
            f.display(),
            HermesKind::ALL
                .iter()
                .map(|k| k.name())
                .collect::<Vec<_>>()
                .join(" | ")
        )
    })?;
    if s.steps.is_empty() {
        return Err(format!("{}: steps: give at least one action", f.display()));
    }
    let mut seen = BTreeSet::new();
    for (i, st) in s.steps.iter().enumerate() {
        if st.occurrence.is_empty() || !seen.insert(st.occurrence.clone()) {
            return Err(format!(
                "{}: steps[{i}].occurrence: give each action its own non-empty id",
                f.display()
            ));
        }
        if let Some(why) = st.fault.and_then(|k| cannot_take(d, k)) {
            return Err(format!("{}: steps[{i}].fault: {why}", f.display()));
        }
    }
    Ok(s)
}

/// Runs a schedule's actions one after another (each on a store and a ledger of its own) and
/// puts their runs together: every finding, fact, label and beat (the beats in one time line).
pub async fn run_schedule(
    d: &Loaded,
    p: &Providers,
    work: &Path,
    logs: &Path,
    s: &ActionSchedule,
) -> Ran {
    let mut all = Ran::default();
    let mut undecided: Vec<String> = Vec::new();
    for st in &s.steps {
        let a = run_action(
            d,
            st.fault,
            &st.occurrence,
            p,
            &work.join(&st.occurrence),
            &logs.join(&st.occurrence),
        )
        .await;
        let mut r = a.ran;
        let offset = all.millis;
        all.steps
            .extend(r.steps.iter().map(|x| format!("{}: {x}", st.occurrence)));
        for mut b in r.beats.drain(..) {
            b.ms += offset;
            all.beats.push(b);
        }
        match &a.beyond_reach {
            // A fault the connector's own choice keeps away from it (a broken stream it never
            // asks for) is no fault of this schedule: said in the steps, neither a pass for it
            // nor an undecided schedule (the choice is a conforming one).
            Some(why) => all.steps.push(format!(
                "{}: its {} fault was not drawn against this connector: {why}",
                st.occurrence,
                st.fault.map_or("", HermesKind::name)
            )),
            None => all.faults.append(&mut r.faults),
        }
        all.findings.append(&mut r.findings);
        all.facts.absorb(&r.facts);
        all.reported.append(&mut r.reported);
        all.observed.append(&mut r.observed);
        all.entries.append(&mut r.entries);
        all.millis += r.millis;
        all.watched_ms = all.watched_ms.or(r.watched_ms);
        if let Some((_, why)) = r.undecided {
            undecided.push(format!("{}: {why}", st.occurrence));
        }
    }
    // A fault that did not act exercised nothing: with no failure anywhere, the schedule is
    // undecided, never "holds".
    for f in all.faults.iter().filter(|f| !f.fired) {
        undecided.push(format!("a declared fault did not act ({})", f.what));
    }
    // One action's trouble never hides another's failure: with a failure, what could not be
    // decided is said in the steps.
    if !undecided.is_empty() {
        let why = undecided.join("; ");
        if all.findings.is_empty() {
            all.undecided = Some((HarnessCause::Undecided, why));
        } else {
            all.steps
                .push(format!("also (it could not have passed): {why}"));
        }
    }
    all
}

/// The requirements a schedule of actions answers for.
fn requirements(s: &ActionSchedule) -> Vec<Req> {
    let mut reqs = vec![Req::R010, Req::R002, Req::R011];
    if s.steps.iter().any(|st| {
        matches!(
            st.fault,
            Some(HermesKind::LostStart | HermesKind::StartErrorAfterCommit)
        )
    }) {
        reqs.push(Req::R009);
    }
    reqs
}

/// The report of one schedule of actions as a case (`CONNECTOR-SCHEDULE`).
pub fn schedule_report(
    d: &Loaded,
    s: &ActionSchedule,
    ran: Ran,
    file: &Path,
) -> crate::report::model::Report {
    let reqs = requirements(s);
    let mut c = super::super::connector_case(
        d,
        "CONNECTOR-SCHEDULE",
        &format!("Schedule {}", describe(s)),
        &reqs,
    );
    c.repro = format!(
        "aocheck deploy run {} --schedule {}",
        d.path.display(),
        file.display()
    );
    // Faults were drawn and none could reach the connector (its own choice): no pass.
    let beyond_reach = s.steps.iter().any(|st| st.fault.is_some()) && ran.faults.is_empty();
    let why = ran
        .steps
        .iter()
        .find(|x| x.contains("was not drawn against"))
        .cloned();
    let mut c = super::super::case_report(d, c, &reqs, ran);
    if beyond_reach && c.verdict == crate::report::model::Verdict::Pass {
        c.verdict = crate::report::model::Verdict::Unsupported;
        c.unsupported = why;
    }
    let mut cases = vec![c];
    cases.extend(super::super::history_case(d, &cases));
    super::super::assemble(d, cases, BTreeSet::new(), BTreeSet::new())
}

/// A connector's schedules, for `deploy explore`.
#[derive(Debug)]
pub struct Actions<'a> {
    pub d: &'a Loaded,
    pub p: &'a Providers,
}

impl Explorer for Actions<'_> {
    type S = ActionSchedule;
    fn generate(&self, seed: u64, index: u64, size: u64) -> ActionSchedule {
        generate(seed, index, size, &available(self.d))
    }
    async fn run(&self, s: &ActionSchedule, work: &Path, logs: &Path) -> Ran {
        run_schedule(self.d, self.p, work, logs, s).await
    }
    fn describe(&self, s: &ActionSchedule) -> String {
        describe(s)
    }
    fn yaml(&self, s: &ActionSchedule) -> String {
        schedule_yaml(s)
    }
    fn report(&self, s: &ActionSchedule, ran: Ran, file: &Path) -> crate::report::model::Report {
        schedule_report(self.d, s, ran, file)
    }
    fn read(d: &Loaded, f: &Path) -> Result<ActionSchedule, String> {
        read_schedule(d, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explore::shrink::Shrinkable;
    use proptest::prelude::*;

    proptest! {
        /// A schedule is its seed's, draws only the faults given, and every candidate the
        /// shrinker tries is smaller.
        #[test]
        fn a_schedule_is_its_seeds_and_every_candidate_is_smaller(seed in 0u64..1000, i in 0u64..50, n in 1u64..4, k in 0usize..9) {
            let kinds = &HermesKind::ALL[..k];
            let s = generate(seed, i, n, kinds);
            prop_assert_eq!(&s, &generate(seed, i, n, kinds));
            prop_assert!(!s.steps.is_empty() && s.steps.len() as u64 <= n);
            prop_assert!(s.steps.iter().all(|x| x.fault.is_none_or(|f| kinds.contains(&f))));
            let weight = |s: &ActionSchedule| s.steps.len() * 10 + s.steps.iter().filter(|x| x.fault.is_some()).count();
            for c in s.smaller() {
                prop_assert!(weight(&c) < weight(&s));
            }
            let back: ActionSchedule = serde_saphyr::from_str(&schedule_yaml(&s)).expect("reads");
            prop_assert_eq!(back, s);
        }
    }
}
