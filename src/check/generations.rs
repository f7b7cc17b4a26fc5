//! Generations judged together (issue 37, AOC-REQ-005/-006): what the history names against
//! itself and against what the harness did. The harness replaced every executor itself, so it
//! knows which generations the lane really admitted (each `join` and `takeover` answer); the
//! history must name only those, never go backwards, and enter only under the generation that
//! holds the occurrence by its own record.
//!
//! - "The coordination domain MUST advance the executor generation and retire the predecessor
//!   before admitting new work for the successor" (§4.6): a takeover that does not advance the
//!   generation, or work under a generation that never took the occurrence over, breaks it.
//! - "Reservation and provider-entry transactions MUST compare the current generation with the
//!   generation captured for the pending attempt" (§4.6): an entry under a generation other than
//!   the one holding the occurrence is one that comparison should have refused.
//! - An adoption the history never records is judged only where it matters: when the successor
//!   then acts (enters) under its own generation, the entry names a generation other than the
//!   one captured for the pending attempt, which the entry transaction must compare (§4.6,
//!   AOC-REQ-006). Adopting and doing nothing may leave no entry (the draft lists what a
//!   history distinguishes, §4.4, and a takeover is not among them; D74).

use super::Facts;
use super::evidence::{Kind, StateAnswer};
use crate::aoc::requirement::Req;

/// Every way the history's generations depart from the draft and from what the lane admitted
/// (`admitted`: the generations the harness's joins and takeovers were answered; empty when not
/// known, e.g. evidence recorded before issue 37). One fact per generation-bearing entry.
pub fn judge(a: &StateAnswer, admitted: &[u64], facts: &mut Facts) -> Vec<(Req, String)> {
    let mut out = Vec::new();
    let mut owner: Option<u64> = None;
    for (i, e) in a.entries.iter().enumerate() {
        let Some(g) = e.generation else {
            continue;
        };
        if !matches!(e.kind, Kind::Prepared | Kind::Replaced | Kind::Entered) {
            continue;
        }
        facts.saw(Req::R005);
        if !admitted.is_empty() && !admitted.contains(&g) {
            out.push((
                Req::R005,
                format!(
                    "entries[{i}] ({:?}) names generation {g}, which no join or takeover of this case was answered (the lane admitted {})",
                    e.kind,
                    admitted
                        .iter()
                        .map(u64::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
        match (e.kind, owner) {
            (Kind::Replaced, Some(o)) if g <= o => out.push((
                Req::R005,
                format!(
                    "entries[{i}] records a takeover by generation {g}, which does not advance the generation holding the occurrence ({o})"
                ),
            )),
            (Kind::Entered, Some(o)) if g < o => out.push((
                Req::R006,
                format!(
                    "entries[{i}] enters the provider under generation {g} after generation {o} took the occurrence over"
                ),
            )),
            (Kind::Entered, Some(o)) if g > o => out.push((
                Req::R006,
                format!(
                    "entries[{i}] enters the provider under generation {g}, which never took the occurrence over (its history names generation {o} as holding it): entry must compare the current generation with the one captured for the attempt (§4.6)"
                ),
            )),
            _ => {}
        }
        if matches!(e.kind, Kind::Prepared | Kind::Replaced) {
            owner = Some(owner.map_or(g, |o| o.max(g)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(entries: serde_json::Value) -> StateAnswer {
        serde_json::from_value(serde_json::json!({
            "entries": entries,
            "report": {"occurrence": "o", "domain": "d", "executor_generation": 1,
                       "state": "pending", "provider_entry": "not_entered",
                       "authority": "held", "entry_attempts": 0}}))
        .expect("answer")
    }

    /// Both directions: an honest history (a takeover recorded before the successor enters, or
    /// none when the successor only adopts) passes; a takeover that goes backwards, an entry
    /// under a retired or never-admitted generation, and a generation no join answered fail.
    #[rstest::rstest]
    #[case::one_generation(&[("prepared", 1), ("entered", 1)], &[1], None)]
    #[case::takeover_then_entry(&[("prepared", 1), ("replaced", 2), ("entered", 2)], &[1, 2], None)]
    #[case::adopted_and_idle(&[("prepared", 1)], &[1, 2], None)]
    #[case::unknown_admissions(&[("prepared", 7), ("entered", 7)], &[], None)]
    #[case::takeover_backwards(&[("prepared", 2), ("replaced", 1)], &[1, 2], Some((Req::R005, "does not advance")))]
    #[case::takeover_standing_still(&[("prepared", 2), ("replaced", 2)], &[1, 2], Some((Req::R005, "does not advance")))]
    #[case::retired_entry(&[("prepared", 1), ("replaced", 2), ("entered", 1)], &[1, 2], Some((Req::R006, "after generation 2")))]
    #[case::adoption_never_recorded(&[("prepared", 1), ("entered", 2)], &[1, 2], Some((Req::R006, "never took")))]
    #[case::generation_never_admitted(&[("prepared", 1), ("replaced", 5)], &[1, 2], Some((Req::R005, "no join or takeover")))]
    fn generations_are_judged_against_the_history_and_the_lane(
        #[case] entries: &[(&str, u64)],
        #[case] admitted: &[u64],
        #[case] want: Option<(Req, &str)>,
    ) {
        let mut list = vec![serde_json::json!({"kind": "created", "entry": {}})];
        for (kind, g) in entries {
            list.push(
                serde_json::json!({"kind": kind, "generation": g, "binding_digest": "b",
                                         "attempt": "a1", "entry": {}}),
            );
        }
        let mut facts = Facts::default();
        let found = judge(
            &answer(serde_json::Value::Array(list)),
            admitted,
            &mut facts,
        );
        assert_eq!(facts.count(Req::R005), entries.len() as u32);
        match want {
            None => assert!(found.is_empty(), "{found:?}"),
            Some((req, needle)) => assert!(
                found.iter().any(|(r, m)| *r == req && m.contains(needle)),
                "{needle}: {found:?}"
            ),
        }
    }
}
