//! `deploy explore` over a provider whose cases drive one action at a time (a Hermes
//! connector, a service of MCP tool calls): schedules of actions one after another, each
//! meeting one fault of the provider's vocabulary ([`ActionKind`]) or none, each run and judged
//! as a case runs its action (fresh instances on a store of the schedule's own, a fresh ledger
//! at the simulator). A schedule file of actions is what `deploy run --schedule` replays for
//! such a provider. What one action does to the next (a restarted instance driving an older
//! action) is not drawn: every action starts on a ledger of its own (D80).

use super::explorer::Explorer;
use super::file::Loaded;
use super::{Providers, Ran};
use crate::aoc::requirement::Req;
use crate::explore::rng::Rng;
use crate::report::model::HarnessCause;
use std::collections::BTreeSet;
use std::path::Path;

/// What one action's run gave, and, when its fault could not reach the service by the
/// service's own honest choice, why (a broken stream a polling connector never asked for).
#[derive(Debug)]
pub struct ActionRan {
    pub ran: Ran,
    pub beyond_reach: Option<String>,
}

/// A provider's fault vocabulary for actions, and how one action is run.
pub trait ActionKind:
    Copy + Eq + std::fmt::Debug + serde::Serialize + serde::de::DeserializeOwned + 'static
{
    /// Every fault, in the vocabulary's order.
    fn all() -> &'static [Self];
    fn name(self) -> &'static str;
    /// Why deploy file `d` cannot take this fault (`None`: it can).
    fn cannot_take(self, d: &Loaded) -> Option<String>;
    /// Whether the fault leaves the answer ambiguous (a lost reply, an error after commit):
    /// a schedule with one also answers for AOC-REQ-009.
    fn ambiguous(self) -> bool;
    /// The id of action `k` of run `index` of `seed`.
    fn occurrence(seed: u64, index: u64, k: u64) -> String;
    /// The schedule's case id (`CONNECTOR-SCHEDULE` …) and what its steps are, for the file's
    /// heading and messages.
    const CASE: &'static str;
    const WHAT: &'static str;
    /// One action with this fault (or none), on a fresh ledger, judged.
    fn run_action(
        d: &Loaded,
        kind: Option<Self>,
        occurrence: &str,
        p: &Providers,
        work: &Path,
        logs: &Path,
    ) -> impl Future<Output = ActionRan>;
}

/// Actions submitted one after another.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, bound = "K: ActionKind")]
pub struct ActionSchedule<K> {
    pub steps: Vec<ActionStep<K>>,
}

/// One action and the fault it meets (`None`: none).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, bound = "K: ActionKind")]
pub struct ActionStep<K> {
    pub occurrence: String,
    pub fault: Option<K>,
}

/// The faults a deploy file can take, in the vocabulary's order.
pub fn available<K: ActionKind>(d: &Loaded) -> Vec<K> {
    K::all()
        .iter()
        .copied()
        .filter(|k| k.cannot_take(d).is_none())
        .collect()
}

/// The schedule of run `index` of `seed`: 1 to `actions` actions, each with a fault of `kinds`
/// or none.
pub fn generate<K: ActionKind>(
    seed: u64,
    index: u64,
    actions: u64,
    kinds: &[K],
) -> ActionSchedule<K> {
    let mut rng = Rng::schedule(seed, index);
    let n = 1 + rng.below(actions.max(1));
    let choices: Vec<Option<K>> = std::iter::once(None)
        .chain(kinds.iter().map(|k| Some(*k)))
        .collect();
    ActionSchedule {
        steps: (0..n)
            .map(|k| ActionStep {
                occurrence: K::occurrence(seed, index, k),
                fault: *rng.pick(&choices),
            })
            .collect(),
    }
}

impl<K: ActionKind> crate::explore::shrink::Shrinkable for ActionSchedule<K> {
    /// An action dropped, then a fault removed.
    fn smaller(&self) -> Vec<ActionSchedule<K>> {
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
pub fn describe<K: ActionKind>(s: &ActionSchedule<K>) -> String {
    super::explorer::describe_steps(
        s.steps
            .iter()
            .map(|st| (st.occurrence.as_str(), st.fault.map(K::name))),
    )
}

/// A schedule file (YAML), as `--schedule` reads it.
pub fn schedule_yaml<K: ActionKind>(s: &ActionSchedule<K>) -> String {
    super::explorer::steps_yaml(
        &format!(
            "{} one after another, each with the fault it meets.",
            K::WHAT
        ),
        s.steps
            .iter()
            .map(|st| (st.occurrence.as_str(), st.fault.map(K::name))),
    )
}

/// Reads a schedule file of actions, every defect named with its step.
pub fn read_schedule<K: ActionKind>(d: &Loaded, f: &Path) -> Result<ActionSchedule<K>, String> {
    let text = std::fs::read_to_string(f).map_err(|e| format!("{}: {e}", f.display()))?;
    let s: ActionSchedule<K> = serde_saphyr::from_str(&text).map_err(|e| {
        format!(
            "{}: {e} (a schedule of {} is `steps: [{{occurrence: ID, fault: {} | null}}]`)",
            f.display(),
            K::WHAT,
            K::all()
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
        if let Some(why) = st.fault.and_then(|k| k.cannot_take(d)) {
            return Err(format!("{}: steps[{i}].fault: {why}", f.display()));
        }
    }
    Ok(s)
}

/// Runs a schedule's actions one after another (each on a store and a ledger of its own) and
/// puts their runs together: every finding, fact, label and beat (the beats in one time line).
pub async fn run_schedule<K: ActionKind>(
    d: &Loaded,
    p: &Providers,
    work: &Path,
    logs: &Path,
    s: &ActionSchedule<K>,
) -> Ran {
    let mut all = Ran::default();
    let mut undecided: Vec<String> = Vec::new();
    for st in &s.steps {
        let a = K::run_action(
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
            // A fault the service's own choice keeps away from it (a broken stream it never
            // asks for) is no fault of this schedule: said in the steps, neither a pass for it
            // nor an undecided schedule (the choice is a conforming one).
            Some(why) => all.steps.push(format!(
                "{}: its {} fault was not drawn against this service: {why}",
                st.occurrence,
                st.fault.map_or("", K::name)
            )),
            None => all.faults.append(&mut r.faults),
        }
        all.findings.append(&mut r.findings);
        all.facts.absorb(&r.facts);
        all.reported.append(&mut r.reported);
        all.observed.append(&mut r.observed);
        // Effects beside entries only where every action gave them (a provider whose entries
        // are its effects gives none).
        if r.effects.len() == r.entries.len() && all.effects.len() == all.entries.len() {
            all.effects.append(&mut r.effects);
        } else {
            all.effects.clear();
        }
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
fn requirements<K: ActionKind>(s: &ActionSchedule<K>) -> Vec<Req> {
    let mut reqs = vec![Req::R010, Req::R002, Req::R011];
    if s.steps.iter().any(|st| st.fault.is_some_and(K::ambiguous)) {
        reqs.push(Req::R009);
    }
    reqs
}

/// The report of one schedule of actions as a case (`K::CASE`).
pub fn schedule_report<K: ActionKind>(
    d: &Loaded,
    s: &ActionSchedule<K>,
    ran: Ran,
    file: &Path,
) -> crate::report::model::Report {
    let reqs = requirements(s);
    let mut c = super::case_shell(d, K::CASE, &format!("Schedule {}", describe(s)), &reqs);
    c.repro = format!(
        "aocheck deploy run {} --schedule {}",
        d.path.display(),
        file.display()
    );
    // Faults were drawn and none could reach the service (its own choice): no pass.
    let beyond_reach = s.steps.iter().any(|st| st.fault.is_some()) && ran.faults.is_empty();
    let why = ran
        .steps
        .iter()
        .find(|x| x.contains("was not drawn against"))
        .cloned();
    let mut c = super::case_report(d, c, &reqs, ran);
    if beyond_reach && c.verdict == crate::report::model::Verdict::Pass {
        c.verdict = crate::report::model::Verdict::Unsupported;
        c.unsupported = why;
    }
    let mut cases = vec![c];
    cases.extend(super::history_case(d, &cases));
    super::assemble(d, cases, BTreeSet::new(), BTreeSet::new())
}

/// A provider's schedules of actions, for `deploy explore`.
#[derive(Debug)]
pub struct Actions<'a, K> {
    pub d: &'a Loaded,
    pub p: &'a Providers,
    pub kind: std::marker::PhantomData<K>,
}

impl<'a, K> Actions<'a, K> {
    pub fn new(d: &'a Loaded, p: &'a Providers) -> Self {
        Actions {
            d,
            p,
            kind: std::marker::PhantomData,
        }
    }
}

impl<K: ActionKind> Explorer for Actions<'_, K> {
    type S = ActionSchedule<K>;
    fn generate(&self, seed: u64, index: u64, size: u64) -> ActionSchedule<K> {
        generate(seed, index, size, &available::<K>(self.d))
    }
    async fn run(&self, s: &ActionSchedule<K>, work: &Path, logs: &Path) -> Ran {
        run_schedule(self.d, self.p, work, logs, s).await
    }
    fn describe(&self, s: &ActionSchedule<K>) -> String {
        describe(s)
    }
    fn yaml(&self, s: &ActionSchedule<K>) -> String {
        schedule_yaml(s)
    }
    fn report(&self, s: &ActionSchedule<K>, ran: Ran, file: &Path) -> crate::report::model::Report {
        schedule_report(self.d, s, ran, file)
    }
    fn read(d: &Loaded, f: &Path) -> Result<ActionSchedule<K>, String> {
        read_schedule(d, f)
    }
}
