//! Offline re-judgement (`aocheck analyze`, issue 24): a case's evidence as the run recorded it
//! (a [`Tape`]), and the verdict derived again from it with no implementation and no provider.
//!
//! What is derived again, not read back: every invariant checker over every look the run took
//! (the implementation's histories and reports as received, the provider's ledger as read,
//! [`Checker::check`] and the lane check), the claims check, the facts per requirement, the
//! requirements not established, and the case verdict. What is taken from the record (said in
//! `analyze`'s output): the failures found outside those looks (a step's own expectation, the
//! oracles of one step's answer, the Hermes checkers, the final expectations), the facts they
//! examined, and whether the case stopped on a harness error or was unsupported.

use super::verdict::{Failure, FaultReport, Verdict};
use super::{Checker, Facts, Snapshot};
use crate::aoc::requirement::Req;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// The schema of one case's evidence file (`evidence/<case>.json`).
pub const SCHEMA: &str = "aocheck.evidence/1";

/// One case's evidence.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tape {
    pub schema: String,
    pub case: String,
    /// The requirements the case declares.
    pub declared: Vec<String>,
    /// The step lines as the report shows them (each step's verb and what it answered).
    pub steps: Vec<String>,
    /// How many steps the case has (the end of the case is reported at this index).
    #[serde(default)]
    pub end_step: usize,
    /// What the implementation claims about itself (its `init` answer): free text, and
    /// statements of the closed vocabulary.
    pub claims: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub statements: Vec<super::statements::Statement>,
    /// Every look the checkers took, in order.
    pub looks: Vec<Look>,
    /// The look whose answers the report publishes (`None`: none, the case's last look could
    /// not be completed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub published: Option<usize>,
    /// The final expectations on each occurrence, as judged at the end of the case.
    #[serde(default)]
    pub finals: Vec<FinalLook>,
    /// The provider's ledger as the final expectations read it, when it differs from the last
    /// look's (background work that ended after it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_ledger: Option<provider_model::payments::ledger::Ledger>,
    /// Failures found outside the looks, the claims and the final expectations on occurrences
    /// (taken from the record).
    pub other_failures: Vec<Failure>,
    /// Facts examined outside the looks and the claims, per requirement id.
    pub other_facts: BTreeMap<String, u32>,
    /// Requirements with an expectation aocheck could not decide (missing knowledge).
    pub undecided: Vec<String>,
    /// Why the case stopped undecided, if it did (a harness error).
    pub harness: Option<String>,
    /// Why the case was unsupported, if it was.
    pub unsupported: Option<String>,
    /// The faults the case declared and whether each fired (read from the ledgers by the run).
    pub faults: Vec<FaultReport>,
    /// The implementation's processes and how each ended.
    pub processes: Vec<String>,
    /// A workflow case (seed 002): its design, run id and looks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<super::workflow::WorkflowTape>,
}

/// One look: what the checkers were given after a step (or at the end of the case), and what
/// they found.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Look {
    /// The step it followed (`None`: the end of the case).
    pub after_step: Option<usize>,
    pub snapshot: Snapshot,
    /// The generation the latest `join` or `takeover` answered, and the lane's holder as the
    /// implementation reported it.
    pub holder: Option<u64>,
    pub lane: Option<u64>,
    /// What the checkers found at this look, as report lines.
    pub found: Vec<String>,
    /// The facts this look examined, per requirement id.
    pub facts: BTreeMap<String, u32>,
}

/// One occurrence's final expectation: what the case expects, the implementation's `state`
/// answer at the end, and what was found (the provider effects are counted again from the
/// ledger by the declared key rule).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FinalLook {
    pub label: String,
    /// The occurrence's id (the provider's ledger is attributed to it).
    pub id: String,
    pub expect: crate::case::CheckedOccurrence,
    pub answer: super::evidence::StateAnswer,
    pub found: Vec<String>,
    pub facts: BTreeMap<String, u32>,
    /// What it could not decide (requirement id, why).
    pub undecided: Option<(String, String)>,
}

/// A verdict derived again.
#[derive(Clone, Debug, PartialEq)]
pub struct Rejudged {
    pub verdict: Verdict,
    pub failures: Vec<Failure>,
    pub not_established: Vec<String>,
    pub facts: BTreeMap<String, u32>,
    /// Where a look's findings derived again differ from what the run recorded at it.
    pub looks_differ: Vec<String>,
    /// How many checker runs were derived again (looks), and failures taken from the record.
    pub looks: usize,
    pub finals: usize,
    pub taken: usize,
}

/// Adds a failure unless one with the same words is already there (a finding seen at several
/// looks is reported once, at the first): the rule the run and `analyze` both follow.
pub fn push_failure(failures: &mut Vec<Failure>, f: Failure) {
    if !failures.iter().any(|x| x.msg == f.msg) {
        failures.push(f);
    }
}

/// A case's verdict from what was found, in the order of the policy (GUIDE §4): a violated
/// requirement fails the case; otherwise a harness error, then unsupported; no fact examined at
/// all is not run; a declared requirement not established is missing knowledge.
pub fn case_verdict(
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

/// What `total` counted outside `parts` (the looks, finals and claims an evidence tape derives
/// again), per requirement id: the facts the tape takes as recorded.
pub fn facts_outside<'a>(
    total: &Facts,
    parts: impl Iterator<Item = &'a BTreeMap<String, u32>>,
) -> BTreeMap<String, u32> {
    let mut out = total.by_id();
    for part in parts {
        for (id, n) in part {
            if let Some(t) = out.get_mut(id) {
                *t = t.saturating_sub(*n);
            }
        }
    }
    out.retain(|_, n| *n > 0);
    out
}

/// The difference of two fact tallies, per requirement id (for what one look examined).
pub fn facts_between(before: &Facts, after: &Facts) -> BTreeMap<String, u32> {
    let before = before.by_id();
    after
        .by_id()
        .into_iter()
        .filter_map(|(id, n)| {
            let was = before.get(&id).copied().unwrap_or(0);
            (n > was).then(|| (id, n - was))
        })
        .collect()
}

/// Derives the case's verdict again from its evidence alone.
pub fn rejudge(t: &Tape) -> Rejudged {
    let mut checker = Checker::default();
    let mut failures: Vec<Failure> = Vec::new();
    let push = |failures: &mut Vec<Failure>, requirement: Req, step, msg: String| {
        push_failure(
            failures,
            Failure {
                requirement,
                step,
                msg,
            },
        )
    };
    for f in checker.claims(&t.claims, &t.statements) {
        push(&mut failures, f.requirement(), None, f.line());
    }
    let mut looks_differ = Vec::new();
    for (i, look) in t.looks.iter().enumerate() {
        let before = checker.facts.clone();
        let mut found = checker.check(&look.snapshot);
        found.extend(checker.lane(look.holder, look.lane));
        let examined = facts_between(&before, &checker.facts);
        if examined != look.facts {
            looks_differ.push(format!(
                "look {i}: facts examined now {examined:?}, recorded {:?}",
                look.facts
            ));
        }
        let lines: BTreeSet<String> = found.iter().map(|f| f.line()).collect();
        let recorded: BTreeSet<String> = look.found.iter().cloned().collect();
        let at = look
            .after_step
            .map_or("the end of the case".to_string(), |s| format!("step {s}"));
        for l in lines.difference(&recorded) {
            looks_differ.push(format!(
                "look {i} (after {at}): found now, not in the record: {l}"
            ));
        }
        for l in recorded.difference(&lines) {
            looks_differ.push(format!(
                "look {i} (after {at}): in the record, not found now: {l}"
            ));
        }
        let step = Some(look.after_step.unwrap_or(t.end_step));
        for f in found {
            push(&mut failures, f.requirement(), step, f.line());
        }
    }
    if let Some(w) = &t.workflow {
        let plan = crate::workflow::design::build_run_plan(&w.design).unwrap_or_default();
        for (i, look) in w.looks.iter().enumerate() {
            let before = checker.facts.clone();
            let found = super::workflow::judge_look(&plan, &w.run_id, look, &mut checker.facts);
            let examined = facts_between(&before, &checker.facts);
            if examined != look.facts {
                looks_differ.push(format!(
                    "workflow look {i}: facts examined now {examined:?}, recorded {:?}",
                    look.facts
                ));
            }
            let lines: BTreeSet<String> = found.iter().map(|f| f.line()).collect();
            let recorded: BTreeSet<String> = look.found.iter().cloned().collect();
            for l in lines.difference(&recorded) {
                looks_differ.push(format!(
                    "workflow look {i}: found now, not in the record: {l}"
                ));
            }
            for l in recorded.difference(&lines) {
                looks_differ.push(format!(
                    "workflow look {i}: in the record, not found now: {l}"
                ));
            }
            let step = Some(look.after_step.unwrap_or(t.end_step));
            for f in found {
                push(&mut failures, f.requirement(), step, f.line());
            }
        }
        if let (Some(f), Some(last)) = (&w.finals, w.looks.last()) {
            let req = Req::parse(&f.requirement).unwrap_or(Req::R005);
            let before = checker.facts.clone();
            let found = super::workflow::final_expectations(
                &f.expect,
                last,
                (&w.run_id, req),
                &mut checker.facts,
            );
            let examined = facts_between(&before, &checker.facts);
            if examined != f.facts {
                looks_differ.push(format!(
                    "workflow final expectations: facts examined now {examined:?}, recorded {:?}",
                    f.facts
                ));
            }
            let lines: BTreeSet<String> = found.iter().map(|x| x.line()).collect();
            let recorded: BTreeSet<String> = f.found.iter().cloned().collect();
            for l in lines.symmetric_difference(&recorded) {
                looks_differ.push(format!(
                    "workflow final expectations: {} now, {} in the record: {l}",
                    if lines.contains(l) {
                        "found"
                    } else {
                        "not found"
                    },
                    if recorded.contains(l) { "as" } else { "not" }
                ));
            }
            for x in found {
                push(&mut failures, x.requirement(), None, x.line());
            }
        }
    }
    let mut undecided: Vec<String> = t.undecided.clone();
    let ledger = t
        .final_ledger
        .as_ref()
        .or(t.looks.last().map(|l| &l.snapshot.provider));
    let key_rule = t.looks.last().and_then(|l| l.snapshot.key_rule.clone());
    for (i, f) in t.finals.iter().enumerate() {
        let before = checker.facts.clone();
        let effects = ledger.map_or(0, |l| {
            super::accounting::Accounting::of(l, key_rule.as_ref(), &[f.id.as_str()])
                .effects_of(&f.id)
                .len() as u32
        });
        let (found, und) = super::expect::occurrence(
            &f.label,
            &f.expect,
            &f.answer,
            effects,
            super::expect::Pick(&t.declared),
            &mut checker.facts,
        );
        let examined = facts_between(&before, &checker.facts);
        if examined != f.facts {
            looks_differ.push(format!(
                "final expectation {i} ({}): facts examined now {examined:?}, recorded {:?}",
                f.label, f.facts
            ));
        }
        let lines: BTreeSet<String> = found.iter().map(|x| x.line()).collect();
        let recorded: BTreeSet<String> = f.found.iter().cloned().collect();
        for l in lines.difference(&recorded) {
            looks_differ.push(format!(
                "final expectation {i} ({}): found now, not in the record: {l}",
                f.label
            ));
        }
        for l in recorded.difference(&lines) {
            looks_differ.push(format!(
                "final expectation {i} ({}): in the record, not found now: {l}",
                f.label
            ));
        }
        for x in found {
            push(&mut failures, x.requirement(), None, x.line());
        }
        if let Some((r, _)) = und {
            undecided.push(r.id().to_string());
        }
    }
    // Taken as recorded, each one (a step's own failure is reported at every step it happens).
    failures.extend(t.other_failures.iter().cloned());
    let mut facts = checker.facts.by_id();
    for (id, n) in &t.other_facts {
        *facts.entry(id.clone()).or_default() += n;
    }
    let not_established: Vec<String> = t
        .declared
        .iter()
        .filter(|r| {
            Req::parse(r).is_some()
                && (facts.get(*r).copied().unwrap_or(0) == 0 || undecided.contains(r))
        })
        .cloned()
        .collect();
    // A declared fault that never fired leaves the case undecided (GUIDE §4: a case that ran no
    // fault is not a pass), whatever the record says of the harness.
    let unfired = t.unsupported.is_none() && t.faults.iter().any(|f| !f.fired);
    let verdict = case_verdict(
        !failures.is_empty(),
        t.harness.is_some() || unfired,
        t.unsupported.is_some(),
        facts.values().sum(),
        !not_established.is_empty(),
    );
    Rejudged {
        verdict,
        failures,
        not_established,
        facts,
        looks_differ,
        looks: t.looks.len() + t.workflow.as_ref().map_or(0, |w| w.looks.len()),
        finals: t.finals.len(),
        taken: t.other_failures.len(),
    }
}
