//! Invariant checkers, each tagged with the requirement ids it evaluates. They run after every
//! step of a case over what the implementation reports, its raw stored history, and the provider's
//! ground-truth ledger. A checker that finds nothing wrong says so by returning no violation; every
//! checker here has a broken implementation in `tests/it/broken.rs` that makes it fire.

pub(crate) mod hermes;

use crate::aoc::domain::Limits;
use crate::aoc::history::{ChainedEntry, EntryBody, Outcome, is_prefix_preserving, verify_chain};
use crate::aoc::ids::Generation;
use crate::aoc::occurrence::{OccurrenceState, Phase};
use crate::aoc::requirement::Req;
use crate::digest::Digest;
use fake_payments::ledger::{EffectKind, Ledger};
use serde::Serialize;
use std::collections::BTreeMap;

/// One broken invariant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Violation {
    pub checker: &'static str,
    pub requirement: Req,
    pub occurrence: Option<String>,
    pub msg: String,
}

/// The checkers and the requirement ids each evaluates (for reports).
pub const CHECKERS: [(&str, &[Req]); 14] = [
    ("history_append_only", &[Req::R004]),
    ("binding_constant", &[Req::R003]),
    ("one_effect_per_occurrence", &[Req::R010, Req::R002]),
    ("no_retired_entry", &[Req::R006]),
    ("authority_never_restored", &[Req::R012]),
    ("no_invented_outcome", &[Req::R009, Req::R011]),
    ("release_only_before_entry", &[Req::R008]),
    ("limits_respected", &[Req::R006]),
    // Hermes operator checkers (src/runner: against fake-hermes's ledger).
    ("one_run_per_action", &[Req::R010]),
    ("one_command_per_resume", &[Req::R010]),
    ("terminal_only_from_provider", &[Req::R011]),
    ("no_failure_without_evidence", &[Req::R009]),
    ("delegation_payload_exact", &[Req::R003]),
    ("unresolved_kept", &[Req::R005]),
];

/// What the runner observed about one occurrence after a step.
#[derive(Clone, Debug)]
pub struct Observed {
    pub label: String,
    pub id: String,
    /// The state the implementation reports (or why it could not).
    pub state: Result<OccurrenceState, String>,
    /// The raw stored history.
    pub history: Vec<ChainedEntry>,
}

/// Everything checked after one step.
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub occurrences: Vec<Observed>,
    pub provider: Ledger,
    /// The lane's current generation.
    pub generation: Generation,
    pub limits: Limits,
}

/// Memory across steps for the monotonic invariants.
#[derive(Debug, Default)]
pub struct Checker {
    histories: BTreeMap<String, Vec<ChainedEntry>>,
    bindings: BTreeMap<String, Digest>,
    consumed: BTreeMap<String, u64>,
    pub runs: u32,
}

/// Provider effects (money movements and objects created) attributable to an occurrence: the
/// executor's key rule puts the occurrence id in the Idempotency-Key.
pub fn effects_for<'a>(
    ledger: &'a Ledger,
    occurrence_id: &str,
) -> Vec<&'a fake_payments::ledger::Effect> {
    ledger
        .effects
        .iter()
        .filter(|e| {
            e.kind == EffectKind::PaymentCreated
                && e.idempotency_key
                    .as_deref()
                    .is_some_and(|k| k.starts_with(occurrence_id))
        })
        .collect()
}

impl Checker {
    /// Runs every checker over one snapshot.
    pub fn check(&mut self, snap: &Snapshot) -> Vec<Violation> {
        self.runs += 1;
        let mut out = Vec::new();
        let mut v = |checker: &'static str, requirement: Req, occ: &str, msg: String| {
            out.push(Violation {
                checker,
                requirement,
                occurrence: Some(occ.to_string()),
                msg,
            })
        };
        let (mut pending, mut in_flight) = (0u32, 0u32);
        for o in &snap.occurrences {
            let label = o.label.as_str();
            // history_append_only (AOC-REQ-004)
            if let Err(b) = verify_chain(&o.history) {
                v(
                    "history_append_only",
                    Req::R004,
                    label,
                    format!("history chain broken: {b}"),
                );
            }
            if let Some(prev) = self.histories.get(label)
                && !is_prefix_preserving(prev, &o.history)
            {
                v(
                    "history_append_only",
                    Req::R004,
                    label,
                    "an earlier history entry was rewritten or removed".into(),
                );
            }
            if let Err(e) = OccurrenceState::fold(&o.history) {
                v(
                    "history_append_only",
                    Req::R004,
                    label,
                    format!("the stored history is impossible: {e}"),
                );
            }
            // no_retired_entry (AOC-REQ-006): entries written since the last look.
            let seen = self.histories.get(label).map_or(0, Vec::len);
            for e in o.history.iter().skip(seen) {
                if let EntryBody::Entered { generation, .. } = &e.body
                    && *generation < snap.generation
                {
                    v(
                        "no_retired_entry",
                        Req::R006,
                        label,
                        format!(
                            "provider entry by retired generation {generation} while {} holds the lane",
                            snap.generation
                        ),
                    );
                }
            }
            // release_only_before_entry (AOC-REQ-008), on the raw history.
            let mut entered = false;
            for e in &o.history {
                match &e.body {
                    EntryBody::Entered { .. } => entered = true,
                    EntryBody::Released { .. } if entered => v(
                        "release_only_before_entry",
                        Req::R008,
                        label,
                        "released after provider entry".into(),
                    ),
                    _ => {}
                }
            }
            let effects = effects_for(&snap.provider, &o.id);
            // one_effect_per_occurrence (AOC-REQ-010, -002)
            if effects.len() > 1 {
                v(
                    "one_effect_per_occurrence",
                    Req::R010,
                    label,
                    format!(
                        "{} provider effects for one occurrence (ground truth)",
                        effects.len()
                    ),
                );
            }
            if let Ok(st) = &o.state {
                if st.phase == Phase::Released && !effects.is_empty() {
                    v(
                        "release_only_before_entry",
                        Req::R008,
                        label,
                        "released as never entered, but the provider has the effect".into(),
                    );
                }
                // binding_constant (AOC-REQ-003)
                if let Some(d) = &st.binding_digest {
                    match self.bindings.get(label) {
                        Some(prev) if prev != d => v(
                            "binding_constant",
                            Req::R003,
                            label,
                            format!("binding digest changed from {prev} to {d}"),
                        ),
                        _ => {}
                    }
                    self.bindings.insert(label.to_string(), d.clone());
                }
                // authority_never_restored (AOC-REQ-012)
                let prev = self.consumed.get(label).copied().unwrap_or(0);
                if st.authority.consumed < prev {
                    v(
                        "authority_never_restored",
                        Req::R012,
                        label,
                        format!(
                            "consumed authority went from {prev} to {}",
                            st.authority.consumed
                        ),
                    );
                }
                if st.entry_attempts > 0 && st.authority.released > 0 {
                    v(
                        "authority_never_restored",
                        Req::R012,
                        label,
                        "authority released after provider entry".into(),
                    );
                }
                self.consumed
                    .insert(label.to_string(), st.authority.consumed.max(prev));
                // no_invented_outcome (AOC-REQ-009, -011)
                if let Some(outcome) = st.outcome {
                    let authoritative = o.history.iter().any(|e| {
                        matches!(&e.body, EntryBody::Observed { evidence, interpretation, .. } if evidence.authenticated && interpretation.class.is_some())
                    });
                    if !authoritative {
                        v(
                            "no_invented_outcome",
                            Req::R009,
                            label,
                            format!(
                                "terminal {outcome:?} without any authenticated, interpreted observation"
                            ),
                        );
                    }
                    let succeeded = effects.iter().any(|e| e.status == "succeeded");
                    let moved = effects
                        .iter()
                        .any(|e| !matches!(e.status.as_str(), "declined" | "canceled"));
                    match outcome {
                        Outcome::Success if !succeeded => v(
                            "no_invented_outcome",
                            Req::R011,
                            label,
                            "success claimed, but the provider recorded no succeeded effect".into(),
                        ),
                        Outcome::NotAccepted | Outcome::FinalFailure { no_effect: true }
                            if moved =>
                        {
                            v(
                                "no_invented_outcome",
                                Req::R011,
                                label,
                                format!(
                                    "{outcome:?} claimed, but the provider recorded an effect ({})",
                                    effects
                                        .iter()
                                        .map(|e| e.status.as_str())
                                        .collect::<Vec<_>>()
                                        .join(", ")
                                ),
                            )
                        }
                        _ => {}
                    }
                }
                if st.phase.is_pending() {
                    pending += 1;
                }
                if st.phase.is_in_flight() {
                    in_flight += 1;
                }
            }
            self.histories.insert(label.to_string(), o.history.clone());
        }
        // limits_respected (AOC-REQ-006)
        if pending > snap.limits.max_pending || in_flight > snap.limits.max_in_flight {
            out.push(Violation {
                checker: "limits_respected",
                requirement: Req::R006,
                occurrence: None,
                msg: format!(
                    "{pending} pending / {in_flight} in flight exceed the declared limits {} / {}",
                    snap.limits.max_pending, snap.limits.max_in_flight
                ),
            });
        }
        out
    }
}
