//! Invariant checkers, each tagged with the requirement ids it evaluates. They run after every
//! step of a case over what the implementation reports, its raw stored history, and the provider's
//! ground-truth ledger. A checker that finds nothing wrong says so by returning no violation; every
//! checker here has a broken implementation in `tests/it/broken.rs` that makes it fire.

pub mod accounting;
pub(crate) mod hermes;

use crate::aoc::domain::Limits;
use crate::aoc::history::{ChainedEntry, EntryBody, Outcome, is_prefix_preserving, verify_chain};
use crate::aoc::ids::Generation;
use crate::aoc::occurrence::{OccurrenceState, Phase};
use crate::aoc::requirement::Req;
use crate::digest::Digest;
use accounting::{Accounting, KeyRule, key_words};
use fake_payments::ledger::Ledger;
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
pub const CHECKERS: [(&str, &[Req]); 19] = [
    ("history_append_only", &[Req::R004]),
    ("binding_constant", &[Req::R003]),
    ("one_effect_per_occurrence", &[Req::R010, Req::R002]),
    ("provider_accounting", &[Req::R010]),
    ("one_domain", &[Req::R001]),
    ("responses_bound", &[Req::R007]),
    (
        "state_matches_history",
        &[Req::R004, Req::R005, Req::R009, Req::R012],
    ),
    ("no_retired_entry", &[Req::R006]),
    ("authority_never_restored", &[Req::R012]),
    ("no_invented_outcome", &[Req::R009, Req::R011]),
    ("release_only_before_entry", &[Req::R008]),
    ("limits_respected", &[Req::R006]),
    // What the implementation says about itself (its `init` answer's claims), in every case.
    ("no_prohibited_claim", &[Req::R013]),
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
    /// The implementation's declared key rule (`init`'s `key_rule`).
    pub key_rule: Option<KeyRule>,
}

/// How many relevant facts some check examined, per requirement: a requirement passes in a case
/// only when this is above zero for it (GUIDE §4, "a pass must be earned"). A fact is one thing a
/// check looked at that could have broken the requirement: one history verified, one entry checked
/// against the lane's generation, one occurrence's provider requests accounted for, one refusal a
/// step expected, one final expectation compared.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Facts(BTreeMap<Req, u32>);

impl Facts {
    /// One fact about `req` was examined.
    pub fn saw(&mut self, req: Req) {
        *self.0.entry(req).or_default() += 1;
    }
    pub fn count(&self, req: Req) -> u32 {
        self.0.get(&req).copied().unwrap_or(0)
    }
    pub fn total(&self) -> u32 {
        self.0.values().sum()
    }
    /// Requirement id → facts examined, for the report.
    pub fn by_id(&self) -> BTreeMap<String, u32> {
        self.0
            .iter()
            .map(|(r, n)| (r.id().to_string(), *n))
            .collect()
    }
}

/// Memory across steps for the monotonic invariants.
#[derive(Debug, Default)]
pub struct Checker {
    histories: BTreeMap<String, Vec<ChainedEntry>>,
    bindings: BTreeMap<String, Digest>,
    consumed: BTreeMap<String, u64>,
    domains: BTreeMap<String, String>,
    /// Facts examined so far in the case, by every check (checkers, steps, final expectations).
    pub facts: Facts,
}

impl Checker {
    /// Runs every checker over one snapshot, counting the facts each examined.
    pub fn check(&mut self, snap: &Snapshot) -> Vec<Violation> {
        let mut out = Vec::new();
        let facts = &mut self.facts;
        let mut v = |checker: &'static str, requirement: Req, occ: Option<&str>, msg: String| {
            out.push(Violation {
                checker,
                requirement,
                occurrence: occ.map(str::to_string),
                msg,
            })
        };
        let ids: Vec<&str> = snap.occurrences.iter().map(|o| o.id.as_str()).collect();
        let acct = Accounting::of(&snap.provider, snap.key_rule.as_ref(), &ids);
        // provider_accounting (AOC-REQ-010): the ledger, whole. "A provider idempotency key is
        // not permission for a second attempt" (§4.10); an effect nobody accounts for is an
        // entry the domain did not serialise. A fact per occurrence accounted for (below), never
        // per look: an empty ledger with no occurrence establishes nothing.
        let rule = snap
            .key_rule
            .as_ref()
            .map_or("no key rule declared".to_string(), |r| {
                format!("key rule {r}")
            });
        let effects = acct.unattributed_effects.iter().map(|e| {
            format!(
                "provider payment {} was created {}",
                e.payment_id,
                key_words(&e.idempotency_key)
            )
        });
        // A request whose effect is already reported above is not reported twice.
        let requests = acct
            .unattributed_creates
            .iter()
            .filter(|r| {
                !acct
                    .unattributed_effects
                    .iter()
                    .any(|e| e.request_seq == r.seq)
            })
            .map(|r| {
                format!(
                    "a create request reached the provider {}, answered {}{}",
                    key_words(&r.idempotency_key),
                    r.status,
                    if r.replayed { " (replayed)" } else { "" }
                )
            });
        for what in effects.chain(requests) {
            facts.saw(Req::R010);
            v(
                "provider_accounting",
                Req::R010,
                None,
                format!(
                    "{what} that no occurrence's key is ({rule}): an entry the coordination domain does not account for (ground truth)"
                ),
            );
        }
        let (mut pending, mut in_flight) = (0u32, 0u32);
        for o in &snap.occurrences {
            let label = o.label.as_str();
            let at = Some(label);
            // history_append_only (AOC-REQ-004)
            if !o.history.is_empty() {
                facts.saw(Req::R004);
            }
            if let Err(b) = verify_chain(&o.history) {
                v(
                    "history_append_only",
                    Req::R004,
                    at,
                    format!("history chain broken: {b}"),
                );
            }
            if let Some(prev) = self.histories.get(label)
                && !is_prefix_preserving(prev, &o.history)
            {
                v(
                    "history_append_only",
                    Req::R004,
                    at,
                    "an earlier history entry was rewritten or removed".into(),
                );
            }
            let folded = OccurrenceState::fold(&o.history);
            if let Err(e) = &folded {
                v(
                    "history_append_only",
                    Req::R004,
                    at,
                    format!("the stored history is impossible: {e}"),
                );
            }
            // no_retired_entry (AOC-REQ-006): entries written since the last look.
            let seen = self.histories.get(label).map_or(0, Vec::len);
            for e in o.history.iter().skip(seen) {
                if let EntryBody::Entered { generation, .. } = &e.body {
                    facts.saw(Req::R006);
                    if *generation < snap.generation {
                        v(
                            "no_retired_entry",
                            Req::R006,
                            at,
                            format!(
                                "provider entry by retired generation {generation} while {} holds the lane",
                                snap.generation
                            ),
                        );
                    }
                }
            }
            // release_only_before_entry (AOC-REQ-008), on the raw history.
            let mut entered = false;
            for e in &o.history {
                match &e.body {
                    EntryBody::Entered { .. } => entered = true,
                    EntryBody::Released { .. } => {
                        facts.saw(Req::R008);
                        if entered {
                            v(
                                "release_only_before_entry",
                                Req::R008,
                                at,
                                "released after provider entry".into(),
                            )
                        }
                    }
                    _ => {}
                }
            }
            // responses_bound (AOC-REQ-007): a response is evidence, not authority; a terminal
            // decision may rest on one only if it is authenticated and matches the immutable
            // binding and the exact attempt it answers.
            for (req, what) in unbound_responses(&o.history, facts) {
                v("responses_bound", req, at, what);
            }
            let effects = acct.effects_of(&o.id);
            let creates = acct.creates_of(&o.id);
            facts.saw(Req::R010);
            // one_effect_per_occurrence (AOC-REQ-010, -002)
            if effects.len() > 1 {
                v(
                    "one_effect_per_occurrence",
                    Req::R010,
                    at,
                    format!(
                        "{} provider effects for one occurrence (ground truth)",
                        effects.len()
                    ),
                );
            }
            if creates.len() > 1 {
                let replayed = creates.iter().filter(|r| r.replayed).count();
                v(
                    "provider_accounting",
                    Req::R010,
                    at,
                    format!(
                        "{} create requests reached the provider for one occurrence ({replayed} answered from the provider's idempotency store): an occurrence enters the provider once (ground truth)",
                        creates.len()
                    ),
                );
            }
            if let Ok(st) = &o.state {
                // one_domain (AOC-REQ-001): one authoritative coordination domain per occurrence.
                facts.saw(Req::R001);
                if st.domain.is_empty() {
                    v(
                        "one_domain",
                        Req::R001,
                        at,
                        "the state names no coordination domain".into(),
                    );
                } else if let Some(prev) = self.domains.get(label)
                    && *prev != st.domain
                {
                    v(
                        "one_domain",
                        Req::R001,
                        at,
                        format!(
                            "coordination domain changed from {prev:?} to {:?}",
                            st.domain
                        ),
                    );
                }
                self.domains.insert(label.to_string(), st.domain.clone());
                // state_matches_history: the report is checked, never trusted (GUIDE §4).
                if let Ok(h) = &folded {
                    for r in STATE_FIELDS {
                        facts.saw(r);
                    }
                    for (req, what) in contradictions(st, h) {
                        v(
                            "state_matches_history",
                            req,
                            at,
                            format!("the reported state contradicts the stored history: {what}"),
                        );
                    }
                }
                if !creates.is_empty() && st.entry_attempts == 0 {
                    v(
                        "state_matches_history",
                        Req::R004,
                        at,
                        "the provider received a create request for this occurrence, but its state records no entry (ground truth)".into(),
                    );
                }
                if st.phase == Phase::Released {
                    facts.saw(Req::R008);
                    if !effects.is_empty() || !creates.is_empty() {
                        v(
                            "release_only_before_entry",
                            Req::R008,
                            at,
                            "released as never entered, but the provider received its request"
                                .into(),
                        );
                    }
                }
                // binding_constant (AOC-REQ-003)
                if let Some(d) = &st.binding_digest {
                    facts.saw(Req::R003);
                    match self.bindings.get(label) {
                        Some(prev) if prev != d => v(
                            "binding_constant",
                            Req::R003,
                            at,
                            format!("binding digest changed from {prev} to {d}"),
                        ),
                        _ => {}
                    }
                    self.bindings.insert(label.to_string(), d.clone());
                }
                // authority_never_restored (AOC-REQ-012)
                let prev = self.consumed.get(label).copied().unwrap_or(0);
                if st.entry_attempts > 0 || prev > 0 {
                    facts.saw(Req::R012);
                }
                if st.authority.consumed < prev {
                    v(
                        "authority_never_restored",
                        Req::R012,
                        at,
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
                        at,
                        "authority released after provider entry".into(),
                    );
                }
                self.consumed
                    .insert(label.to_string(), st.authority.consumed.max(prev));
                // no_invented_outcome (AOC-REQ-009, -011): an entered occurrence either stays
                // unresolved or rests its outcome on authenticated, interpreted evidence.
                if st.entry_attempts > 0 || st.outcome.is_some() {
                    facts.saw(Req::R009);
                    facts.saw(Req::R011);
                }
                if let Some(outcome) = st.outcome {
                    let authoritative = o.history.iter().any(|e| {
                        matches!(&e.body, EntryBody::Observed { evidence, interpretation, .. } if evidence.authenticated && interpretation.class.is_some())
                    });
                    if !authoritative {
                        v(
                            "no_invented_outcome",
                            Req::R009,
                            at,
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
                            at,
                            "success claimed, but the provider recorded no succeeded effect".into(),
                        ),
                        Outcome::NotAccepted | Outcome::FinalFailure { no_effect: true }
                            if moved =>
                        {
                            v(
                                "no_invented_outcome",
                                Req::R011,
                                at,
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
        if pending + in_flight > 0 {
            facts.saw(Req::R006);
        }
        if pending > snap.limits.max_pending || in_flight > snap.limits.max_in_flight {
            v(
                "limits_respected",
                Req::R006,
                None,
                format!(
                    "{pending} pending / {in_flight} in flight exceed the declared limits {} / {}",
                    snap.limits.max_pending, snap.limits.max_in_flight
                ),
            );
        }
        out
    }
}

/// The requirements `contradictions` compares a reported state under (one fact each per look).
const STATE_FIELDS: [Req; 5] = [Req::R003, Req::R004, Req::R005, Req::R009, Req::R012];

/// Where a reported state says something its own history does not, and the requirement each
/// contradiction breaks: a terminal claim or a dropped missing-knowledge flag (AOC-REQ-009), an
/// entry count or phase that hides an entry (AOC-REQ-004), authority accounting (AOC-REQ-012), a
/// binding (AOC-REQ-003) or a generation (AOC-REQ-005).
pub fn contradictions(reported: &OccurrenceState, history: &OccurrenceState) -> Vec<(Req, String)> {
    let compared = [
        (
            Req::R009,
            "the outcome",
            format!("{:?}", reported.outcome),
            format!("{:?}", history.outcome),
        ),
        (
            Req::R004,
            "the phase",
            format!("{:?}", reported.phase),
            format!("{:?}", history.phase),
        ),
        (
            Req::R004,
            "the entry count",
            reported.entry_attempts.to_string(),
            history.entry_attempts.to_string(),
        ),
        (
            Req::R012,
            "the authority",
            format!("{:?}", reported.authority),
            format!("{:?}", history.authority),
        ),
        (
            Req::R003,
            "the binding digest",
            format!("{:?}", reported.binding_digest),
            format!("{:?}", history.binding_digest),
        ),
        (
            Req::R005,
            "the owner generation",
            reported.owner_generation.to_string(),
            history.owner_generation.to_string(),
        ),
    ];
    let mut out: Vec<(Req, String)> = compared
        .into_iter()
        .filter(|(_, _, got, want)| got != want)
        .map(|(req, what, got, want)| {
            (
                req,
                format!("{what} is reported as {got}, the history says {want}"),
            )
        })
        .collect();
    let dropped: Vec<String> = history
        .missing
        .difference(&reported.missing)
        .map(|m| format!("{m:?}"))
        .collect();
    if !dropped.is_empty() {
        out.push((
            Req::R009,
            format!(
                "the history raises missing knowledge the report drops: {}",
                dropped.join(", ")
            ),
        ));
    }
    out
}

/// AOC-REQ-007 over a raw history: every provider response recorded (one fact each), and every
/// terminal decision that cites one which is unauthenticated, answers no attempt this occurrence
/// entered, or is about another binding ("MAY accept … only if it matches the immutable binding
/// and the exact predecessor attempt"; an unbindable response leaves the occurrence unresolved).
pub fn unbound_responses(history: &[ChainedEntry], facts: &mut Facts) -> Vec<(Req, String)> {
    use crate::aoc::binding::EvidenceBinding;
    use crate::aoc::profile::EvidenceKind;
    let mut out = Vec::new();
    let mut binding = None;
    let mut attempts = Vec::new();
    // seq → why the response there cannot bind.
    let mut unbindable: BTreeMap<u64, String> = BTreeMap::new();
    for e in history {
        match &e.body {
            EntryBody::Reserved { binding: b, .. } => binding = Some(b.clone()),
            EntryBody::Entered { attempt, .. } => attempts.push(attempt.clone()),
            EntryBody::Observed { evidence, .. } => {
                let EvidenceKind::Response { attempt } = &evidence.kind else {
                    continue;
                };
                facts.saw(Req::R007);
                let why = if !evidence.authenticated {
                    Some("is not authenticated".to_string())
                } else if !attempts.contains(attempt) {
                    Some(format!(
                        "answers attempt {attempt}, which this occurrence never entered"
                    ))
                } else if let Some(b) = &binding {
                    let want =
                        EvidenceBinding::matching(b, evidence.bound_to.provider_ref.as_deref());
                    (want != evidence.bound_to)
                        .then(|| "is about another binding (account, request or key)".to_string())
                } else {
                    Some("arrived with no binding on record".to_string())
                };
                if let Some(why) = why {
                    unbindable.insert(e.seq, why);
                }
            }
            EntryBody::Resolved { evidence, .. } => {
                for r in evidence {
                    if let Some(why) = unbindable.get(&r.seq) {
                        out.push((
                            Req::R007,
                            format!(
                                "the terminal decision rests on the response recorded at entry {}, which {why}",
                                r.seq
                            ),
                        ));
                    }
                }
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A look at nothing establishes nothing: facts count what was examined, never the looks.
    #[test]
    fn an_empty_look_establishes_no_requirement() {
        let mut c = Checker::default();
        let snap = Snapshot {
            occurrences: Vec::new(),
            provider: Ledger::default(),
            generation: Generation(1),
            limits: Limits {
                max_pending: 1,
                max_in_flight: 1,
            },
            key_rule: KeyRule::parse("{occurrence}").ok(),
        };
        for _ in 0..3 {
            assert!(c.check(&snap).is_empty());
        }
        assert_eq!(c.facts.total(), 0, "{:?}", c.facts);
    }
}
