//! The case's final expectations, judged after its steps (and the end-of-case settle) over what
//! the World read: each occurrence's `state` answer and the provider's ground-truth effects, each
//! operator binding against fake-hermes's ledger, each admission, the implementation's
//! description of itself. Every departure is a [`Finding`] under the requirement the expectation
//! concerns when the case declares it (else the case's primary one, [`Pick`]); every expectation
//! compared counts as a fact examined.

use super::{Facts, Finding};
use crate::aoc::requirement::Req;
use crate::case::{CheckedOccurrence, OperatorExpect};
use crate::check::evidence::StateAnswer;

/// The case's first declared requirement, or AOC-REQ-001.
pub fn primary(reqs: &[String]) -> Req {
    reqs.first()
        .and_then(|r| Req::parse(r))
        .unwrap_or(Req::R001)
}

/// Which requirement a departure is reported under: the one the expectation concerns when the
/// case declares it, else the case's primary requirement.
#[derive(Clone, Copy, Debug)]
pub struct Pick<'a>(pub &'a [String]);

impl Pick<'_> {
    pub fn req(&self, r: Req) -> Req {
        if self.0.iter().any(|x| Req::parse(x) == Some(r)) {
            r
        } else {
            primary(self.0)
        }
    }
    pub fn primary(&self) -> Req {
        primary(self.0)
    }
}

/// occurrence_expected: an occurrence the case expects that was never created.
pub fn never_created(label: &str, pick: Pick) -> Finding {
    Finding::new("occurrence_expected", pick.primary(), "never created").about(Some(label))
}

/// occurrence_expected: an occurrence whose `state` cannot be read has no judgeable history
/// (AOC-REQ-004).
pub fn unreadable(label: &str, why: &str) -> Finding {
    Finding::new(
        "occurrence_expected",
        Req::R004,
        format!("state unreadable: {why}"),
    )
    .about(Some(label))
}

/// occurrence_expected: the occurrence's final `state` answer against its expectation (its
/// alternatives too), with `effects` the provider's ground-truth count for it. Also returns why
/// an expected flag cannot be decided, if it cannot (missing knowledge, never a pass).
pub fn occurrence(
    label: &str,
    e: &CheckedOccurrence,
    answer: &StateAnswer,
    effects: u32,
    pick: Pick,
    facts: &mut Facts,
) -> (Vec<Finding>, Option<(Req, String)>) {
    count_occurrence_facts(e, &mut |r| facts.saw(pick.req(r)));
    let undecided =
        undecided_flags(e, answer).map(|why| (pick.req(Req::R009), format!("{label}: {why}")));
    let judge = |x: &CheckedOccurrence| judge_occurrence(x, answer, effects);
    let found = judge_with_alternatives(e, &judge)
        .into_iter()
        .map(|(req, msg)| {
            Finding::new("occurrence_expected", pick.req(req), msg).about(Some(label))
        })
        .collect();
    (found, undecided)
}

/// operator_expected: one Action's binding (as the connector's reader returned it) and what
/// fake-hermes really did for it (runs started in its session, approvals applied to and stops
/// effective on its bound run) against the case's expectation.
pub fn operator(
    label: &str,
    e: &OperatorExpect,
    action_id: &str,
    binding: Option<&crate::operator::Binding>,
    ledger: &provider_model::hermes::ledger::Ledger,
    pick: Pick,
    facts: &mut Facts,
) -> Vec<Finding> {
    if e.status.is_some() || e.stops.is_some() {
        facts.saw(pick.req(Req::R011));
    }
    if e.runs.is_some() || e.approvals.is_some() {
        facts.saw(pick.req(Req::R010));
    }
    let mut out = Vec::new();
    let mut fail = |req: Req, msg: String| {
        out.push(Finding::new("operator_expected", pick.req(req), msg).about(Some(label)))
    };
    if let Some(want) = &e.status {
        let got = binding
            .and_then(|b| serde_json::to_value(b.status).ok())
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_else(|| "no binding".into());
        if &got != want {
            fail(Req::R011, format!("binding is {got}, expected {want}"));
        }
    }
    let run = binding.and_then(|b| b.run_id.clone());
    if let Some(want) = e.runs {
        let got = super::hermes::runs_of(ledger, action_id).len() as u32;
        if got != want {
            fail(
                Req::R010,
                format!("{got} Hermes runs started (ground truth), expected {want}"),
            );
        }
    }
    // What Hermes really applied to the bound run (a stop only where it was effective).
    let on_run = |run_id: &str| Some(run_id) == run.as_deref();
    let applied = [
        (
            e.approvals,
            ledger
                .approvals
                .iter()
                .filter(|a| on_run(&a.run_id))
                .count(),
            Req::R010,
            "approval decisions",
        ),
        (
            e.stops,
            ledger
                .stops
                .iter()
                .filter(|a| on_run(&a.run_id) && a.effective)
                .count(),
            Req::R011,
            "stops",
        ),
    ];
    for (want, got, req, what) in applied {
        if let Some(want) = want
            && got as u32 != want
        {
            fail(
                req,
                format!("{got} {what} applied (ground truth), expected {want}"),
            );
        }
    }
    out
}

/// admission_expected (AOC-REQ-005): a submission's admission state, in the case's words
/// (`got`: as the implementation answered, `never admitted` or `unreadable (…)`).
pub fn admission(
    sub: &str,
    got: &str,
    want: &str,
    pick: Pick,
    facts: &mut Facts,
) -> Option<Finding> {
    facts.saw(pick.req(Req::R005));
    (got != want).then(|| {
        Finding::new(
            "admission_expected",
            pick.req(Req::R005),
            format!("admission {sub} is {got}, expected {want}"),
        )
    })
}

/// composition_expected (AOC-REQ-013): an implementation that did not describe itself cannot
/// be shown to report its composition.
pub fn undescribed(why: &str, pick: Pick) -> Finding {
    Finding::new(
        "composition_expected",
        pick.req(Req::R013),
        format!("the implementation did not describe itself: {why}"),
    )
}

/// composition_expected (AOC-REQ-013): the composition status it reported (`supported` or
/// `unsupported`) against the case's.
pub fn composition(
    got: &crate::aoc::composition::CompositionStatus,
    want: &str,
    pick: Pick,
    facts: &mut Facts,
) -> Option<Finding> {
    use crate::aoc::composition::CompositionStatus;
    facts.saw(pick.req(Req::R013));
    let got = match got {
        CompositionStatus::Supported => "supported",
        CompositionStatus::Unsupported { .. } => "unsupported",
    };
    (got != want).then(|| {
        Finding::new(
            "composition_expected",
            pick.req(Req::R013),
            format!("composition reported {got}, expected {want}"),
        )
    })
}

/// bypass_disclosed (AOC-REQ-001): a bypass path of the kind the case names is among the paths
/// the implementation discloses.
pub fn bypass(
    kind: &str,
    paths: &[crate::aoc::composition::BypassPath],
    pick: Pick,
    facts: &mut Facts,
) -> Option<Finding> {
    facts.saw(pick.req(Req::R001));
    let disclosed = paths.iter().any(|b| {
        serde_json::to_value(b.kind)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .as_deref()
            == Some(kind)
    });
    (!disclosed).then(|| {
        Finding::new(
            "bypass_disclosed",
            pick.req(Req::R001),
            format!("bypass path {kind} is not disclosed"),
        )
    })
}

/// Which requirements an occurrence expectation examines (its alternatives' too), one fact each.
fn count_occurrence_facts(e: &CheckedOccurrence, saw: &mut dyn FnMut(Req)) {
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
pub fn judge_with_alternatives(
    e: &CheckedOccurrence,
    judge: &dyn Fn(&CheckedOccurrence) -> Vec<(Req, String)>,
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
pub fn judge_occurrence(
    e: &CheckedOccurrence,
    answer: &StateAnswer,
    effects: u32,
) -> Vec<(Req, String)> {
    let st = &answer.report;
    // Honest caution (D74): a decided occurrence reported unresolved with no outcome is judged
    // by the decision its history holds; the report said less, never something else.
    let view = super::evidence::View::of(&answer.entries, &answer.flag_map);
    let (state, outcome) = if view.says_less(st) && view.state() == crate::vocab::State::Resolved {
        (view.state(), view.outcome)
    } else {
        (st.state, st.outcome)
    };
    let mut out = judge_state(e, state, outcome);
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
pub fn undecided_flags(e: &CheckedOccurrence, answer: &StateAnswer) -> Option<String> {
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

/// An occurrence's final state and outcome against the case: the state must be one the case
/// accepts (AOC-REQ-009); the outcome is what a resolved occurrence must have (AOC-REQ-011). Where
/// the case accepts another state too (the draft lets a generic failure stay unresolved, say), an
/// occurrence in that state has no outcome to check.
pub fn judge_state(
    e: &CheckedOccurrence,
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
    use rstest::rstest;

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

    /// Honest caution is judged by the history's decision, a contradicting report by its own
    /// words (D74): a decided success reported `unresolved` with no outcome meets an expected
    /// success, and so does one reported as decided; the same history reported resolved with
    /// another outcome does not.
    #[rstest]
    #[case::says_less("unresolved", None, 0)]
    #[case::says_the_same("resolved", Some("success"), 0)]
    #[case::says_otherwise("resolved", Some("final_failure"), 1)]
    fn a_final_expectation_reads_caution_by_the_history(
        #[case] state: &str,
        #[case] outcome: Option<&str>,
        #[case] findings: usize,
    ) {
        use crate::vocab::{Outcome, State};
        let e = crate::case::CheckedOccurrence {
            state: vec![State::Resolved],
            outcome: Some(Outcome::Success),
            ..Default::default()
        };
        let answer: crate::check::evidence::StateAnswer =
            serde_json::from_value(serde_json::json!({
                "entries": [
                    {"kind": "created", "entry": {}},
                    {"kind": "prepared", "generation": 1, "binding_digest": "b", "entry": {}},
                    {"kind": "entered", "generation": 1, "attempt": "a1", "entry": {}},
                    {"kind": "observed", "source": "get", "source_kind": "lookup",
                     "authenticated": true, "interpretation": "success", "entry": {}},
                    {"kind": "decided", "outcome": "success", "evidence": [3], "entry": {}}],
                "report": {"occurrence": "o", "domain": "d", "executor_generation": 1,
                           "state": state, "outcome": outcome, "provider_entry": "entered",
                           "authority": "consumed", "entry_attempts": 1}}))
            .expect("answer");
        let got = judge_occurrence(&e, &answer, 1);
        assert_eq!(got.len(), findings, "{got:?}");
    }

    /// An occurrence expectation counts a fact for each requirement it examines: a state or
    /// flags alone examine AOC-REQ-009, an outcome AOC-REQ-011; nothing expected examines
    /// nothing.
    #[rstest]
    #[case::state_alone(true, false, false, 1, 0)]
    #[case::flags_alone(false, true, false, 1, 0)]
    #[case::state_and_flags(true, true, false, 1, 0)]
    #[case::outcome_alone(false, false, true, 0, 1)]
    #[case::nothing(false, false, false, 0, 0)]
    fn an_occurrence_expectation_counts_the_facts_it_examines(
        #[case] state: bool,
        #[case] flags: bool,
        #[case] outcome: bool,
        #[case] r009: u32,
        #[case] r011: u32,
    ) {
        use crate::vocab::{Flag, Outcome, State};
        let e = crate::case::CheckedOccurrence {
            state: if state {
                vec![State::Resolved]
            } else {
                Vec::new()
            },
            missing_knowledge: if flags {
                vec![Flag::Transport]
            } else {
                Vec::new()
            },
            outcome: outcome.then_some(Outcome::Success),
            ..Default::default()
        };
        let mut seen: Vec<Req> = Vec::new();
        count_occurrence_facts(&e, &mut |r| seen.push(r));
        let count = |r: Req| seen.iter().filter(|x| **x == r).count() as u32;
        assert_eq!(
            (count(Req::R009), count(Req::R011)),
            (r009, r011),
            "{seen:?}"
        );
    }
}
