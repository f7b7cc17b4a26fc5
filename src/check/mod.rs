//! Invariant checkers, each tagged with the requirement ids it evaluates. They run after every
//! step of a case over what the implementation reports, its raw stored history, and the provider's
//! ground-truth ledger. A checker that finds nothing wrong says so by returning no violation; every
//! checker here has a broken implementation in `tests/it/broken.rs` that makes it fire.

pub mod accounting;
pub mod credentials;
pub mod deploy;
pub mod evidence;
pub mod expect;
mod finding;
pub(crate) mod hermes;
pub mod ledger;
pub mod replay;
pub mod steps;

use crate::aoc::domain::Limits;
use crate::aoc::ids::Generation;
use crate::aoc::requirement::Req;
use crate::vocab::{Authority, Outcome, State};
use accounting::{Accounting, KeyRule, key_words};
use evidence::{Kind, SourceKind, StateAnswer, View};
use fake_payments::ledger::Ledger;
use std::collections::BTreeMap;

pub use finding::Finding;

/// The checkers and the requirement ids each evaluates (for reports).
pub const CHECKERS: [(&str, &[Req]); 46] = [
    ("deploy_one_entry", &[Req::R010, Req::R002]),
    ("deploy_entry_matches_order", &[Req::R003]),
    ("deploy_outcome_from_ledger", &[Req::R011, Req::R009]),
    ("history_append_only", &[Req::R004]),
    ("binding_constant", &[Req::R003]),
    ("one_effect_per_occurrence", &[Req::R010, Req::R002]),
    ("provider_accounting", &[Req::R010, Req::R012]),
    ("one_domain", &[Req::R001]),
    ("responses_bound", &[Req::R007]),
    ("authentic_as_claimed", &[Req::R009, Req::R007]),
    (
        "state_matches_history",
        &[Req::R002, Req::R004, Req::R005, Req::R009, Req::R012],
    ),
    ("no_retired_entry", &[Req::R006]),
    ("authority_never_restored", &[Req::R012]),
    ("no_invented_outcome", &[Req::R009, Req::R011]),
    ("release_only_before_entry", &[Req::R008]),
    ("limits_respected", &[Req::R006]),
    ("lane_matches_fence", &[Req::R006]),
    // The provider's ledger read field by field (check/ledger.rs).
    ("effect_as_asked", &[Req::R003]),
    ("mutation_accounted", &[Req::R012]),
    ("evidence_served", &[Req::R009, Req::R007, Req::R003]),
    // What the implementation says about itself (its `init` answer's claims), in every case.
    ("no_prohibited_claim", &[Req::R013]),
    // Hermes operator checkers (check/hermes.rs: against fake-hermes's ledger).
    ("one_run_per_action", &[Req::R010]),
    ("one_command_per_resume", &[Req::R010]),
    ("terminal_only_from_provider", &[Req::R011]),
    ("no_failure_without_evidence", &[Req::R009]),
    ("delegation_payload_exact", &[Req::R003]),
    ("unresolved_kept", &[Req::R005]),
    // The oracles of one step's answer (check/steps.rs, check/hermes.rs).
    ("creation_returns_original", &[Req::R002]),
    ("action_fence", &[Req::R002]),
    ("race_serialised", &[Req::R001]),
    ("claim_in_order", &[Req::R005]),
    ("rebind_refused", &[Req::R003]),
    ("remedy_authorized_separately", &[Req::R012]),
    (
        "aadp_expiry_inert",
        &[Req::R008, Req::R009, Req::R010, Req::R012],
    ),
    ("durable_binding", &[Req::R005]),
    ("delegated_result_from_lifecycle", &[Req::R011, Req::R007]),
    ("result_from_provider", &[Req::R011]),
    (
        "operator_result_expected",
        &[Req::R009, Req::R010, Req::R011],
    ),
    ("manifest_pinned", &[Req::R009]),
    ("policy_validated", &[Req::R001]),
    ("cancel_binding", &[Req::R011]),
    // The case's final expectations (check/expect.rs), under the requirement the case picks.
    (
        "occurrence_expected",
        &[Req::R004, Req::R009, Req::R010, Req::R011, Req::R012],
    ),
    ("operator_expected", &[Req::R010, Req::R011]),
    ("admission_expected", &[Req::R005]),
    ("composition_expected", &[Req::R013]),
    ("bypass_disclosed", &[Req::R001]),
];

/// What the runner observed about one occurrence after a step.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Observed {
    pub label: String,
    pub id: String,
    /// The implementation's `state` answer: its history in the evidence envelope and its §7
    /// report (or why it could not be read).
    pub answer: Result<StateAnswer, String>,
}

/// Everything checked after one step (recorded in the evidence folder as it was checked, and
/// checked again from there by `aocheck analyze`).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Snapshot {
    pub occurrences: Vec<Observed>,
    pub provider: Ledger,
    /// The lane's current generation.
    pub generation: Generation,
    pub limits: Limits,
    /// The implementation's declared key rule (`init`'s `key_rule`).
    #[serde(with = "accounting::key_rule_text")]
    pub key_rule: Option<KeyRule>,
    /// What the case asked of each occurrence (by id): its payment.
    pub asked: BTreeMap<String, ledger::Asked>,
    /// The remedy occurrences the case created (by id), each linked to its original.
    pub remedies: BTreeMap<String, ledger::Remedy>,
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
    /// The canonical bytes of each occurrence's entries at the last look.
    histories: BTreeMap<String, Vec<Vec<u8>>>,
    bindings: BTreeMap<String, String>,
    /// Occurrences whose authority was seen consumed.
    consumed: std::collections::BTreeSet<String>,
    domains: BTreeMap<String, String>,
    /// The generation reading each occurrence's answers declared (it may not change).
    readings: BTreeMap<String, evidence::GenerationReading>,
    /// The canonical bytes of every history entry whose declared chain digest was recomputed
    /// and matched: an identical entry at a later look is not hashed again.
    chained: std::collections::HashSet<Vec<u8>>,
    /// Facts examined so far in the case, by every check (checkers, steps, final expectations).
    pub facts: Facts,
}

impl Checker {
    /// no_prohibited_claim (AOC-REQ-013): what the implementation states about itself, one fact
    /// per claim; a claim that makes one of the four prohibited claims is a violation.
    pub fn claims(&mut self, claims: &[String]) -> Vec<Finding> {
        claims
            .iter()
            .filter_map(|claim| {
                self.facts.saw(Req::R013);
                crate::aoc::composition::prohibited_in(claim).map(|p| {
                    Finding::new(
                        "no_prohibited_claim",
                        Req::R013,
                        match crate::aoc::composition::unreadable_word(claim) {
                        Some(w) => format!(
                            "the implementation claims {claim:?}, whose word {w:?} mixes scripts: a claim that can be read as several texts cannot be shown free of AOC-REQ-013's prohibited claims (write each word in one script)"
                        ),
                        None => format!(
                            "the implementation claims {claim:?}: AOC-REQ-013 forbids claiming that {p}"
                        ),
                    },
                    )
                })
            })
            .collect()
    }

    /// lane_matches_fence (AOC-REQ-006): the lane's holder, as the implementation reports it,
    /// is the generation its latest `join` or `takeover` answered ("advance generation and retire
    /// predecessor before admitting successor work"). A lane that names an older holder would
    /// let a retired generation's entry pass for the current one's; one that names none while a
    /// holder was admitted and never let go hides the fence. One fact per look with a holder.
    pub fn lane(&mut self, holder: Option<u64>, lane: Option<u64>) -> Vec<Finding> {
        let Some(h) = holder else {
            return Vec::new();
        };
        self.facts.saw(Req::R006);
        if lane == Some(h) {
            return Vec::new();
        }
        vec![Finding::new(
            "lane_matches_fence",
            Req::R006,
            format!(
                "the lane reports holder generation {}, but the latest join or takeover answered {h}",
                lane.map_or("null".to_string(), |g| g.to_string())
            ),
        )]
    }

    /// Runs every checker over one snapshot, counting the facts each examined.
    pub fn check(&mut self, snap: &Snapshot) -> Vec<Finding> {
        let mut out = Vec::new();
        let facts = &mut self.facts;
        let mut v = |checker: &'static str, requirement: Req, occ: Option<&str>, msg: String| {
            out.push(Finding::new(checker, requirement, msg).about(occ))
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
        // A creation no occurrence accounts for is an entry the domain did not serialise
        // (AOC-REQ-010); a capture or refund no occurrence accounts for is an adjustment without
        // its own authorisation and link (AOC-REQ-012).
        let effects = acct.unattributed_effects.iter().map(|e| {
            let (req, what) = match e.kind {
                fake_payments::ledger::EffectKind::PaymentCreated => (
                    Req::R010,
                    format!("provider payment {} was created", e.payment_id),
                ),
                fake_payments::ledger::EffectKind::PaymentCaptured => (
                    Req::R012,
                    format!("provider payment {} was captured", e.payment_id),
                ),
                fake_payments::ledger::EffectKind::PaymentCanceled => (
                    Req::R012,
                    format!("provider payment {} was canceled", e.payment_id),
                ),
                fake_payments::ledger::EffectKind::PaymentRefunded => (
                    Req::R012,
                    format!(
                        "{} of provider payment {} was refunded",
                        e.amount, e.payment_id
                    ),
                ),
            };
            (req, format!("{what} {}", key_words(&e.idempotency_key)))
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
                (
                    if r.op == fake_payments::faults::Op::Create {
                        Req::R010
                    } else {
                        Req::R012
                    },
                    format!(
                        "a {} request reached the provider {}, answered {}{}",
                        r.op.label(),
                        key_words(&r.idempotency_key),
                        r.status,
                        if r.replayed { " (replayed)" } else { "" }
                    ),
                )
            });
        for (req, what) in effects.chain(requests) {
            facts.saw(req);
            v(
                "provider_accounting",
                req,
                None,
                format!(
                    "{what} that no occurrence's key is ({rule}): a provider mutation the coordination domain does not account for (ground truth)"
                ),
            );
        }
        let (mut pending, mut in_flight) = (0u32, 0u32);
        let mut looked = std::collections::BTreeSet::new();
        for o in &snap.occurrences {
            // An occurrence two case labels name (a creation retry) is one occurrence.
            if !looked.insert(o.id.as_str()) {
                continue;
            }
            let label = o.label.as_str();
            let at = Some(label);
            let a = match &o.answer {
                Ok(a) => a,
                Err(why) => {
                    facts.saw(Req::R004);
                    v(
                        "history_append_only",
                        Req::R004,
                        at,
                        format!("the state answer is not usable evidence: {why}"),
                    );
                    continue;
                }
            };
            let view = View::of(&a.entries, &a.flag_map);
            let st = &a.report;
            // history_append_only (AOC-REQ-004): judged on the canonical bytes of the entries;
            // a declared chain is verified too.
            if !a.entries.is_empty() {
                facts.saw(Req::R004);
            }
            let bytes = match evidence::canonical_entries(&a.entries) {
                Ok(b) => b,
                Err(e) => {
                    v(
                        "history_append_only",
                        Req::R004,
                        at,
                        format!("the history has no canonical form: {e}"),
                    );
                    Vec::new()
                }
            };
            if a.chain.is_some() {
                let known = |i: usize| bytes.get(i).is_some_and(|b| self.chained.contains(b));
                match evidence::verify_chain_known(&a.entries, known) {
                    Ok(()) => self.chained.extend(bytes.iter().cloned()),
                    Err(b) => v(
                        "history_append_only",
                        Req::R004,
                        at,
                        format!("the declared hash chain is broken: {b}"),
                    ),
                }
            }
            let seen = match self.histories.get(label) {
                Some(prev) => {
                    if prev.len() > bytes.len() || prev[..] != bytes[..prev.len()] {
                        v(
                            "history_append_only",
                            Req::R004,
                            at,
                            "an earlier history entry was rewritten or removed".into(),
                        );
                    }
                    prev.len()
                }
                None => 0,
            };
            for why in &view.illegal {
                v(
                    "history_append_only",
                    Req::R004,
                    at,
                    format!("the history is impossible: {why}"),
                );
            }
            // no_retired_entry (AOC-REQ-006): entries written since the last look.
            for e in a.entries.iter().skip(seen) {
                if e.kind == Kind::Entered {
                    facts.saw(Req::R006);
                    let g = e.generation.unwrap_or(0);
                    if Generation(g) < snap.generation {
                        v(
                            "no_retired_entry",
                            Req::R006,
                            at,
                            format!(
                                "provider entry by retired generation {g} while {} holds the lane",
                                snap.generation
                            ),
                        );
                    }
                }
            }
            // release_only_before_entry (AOC-REQ-008), on the history.
            let mut entered = false;
            for e in &a.entries {
                match e.kind {
                    Kind::Entered => entered = true,
                    Kind::Released => {
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
            for (req, what) in unbound_responses(a, facts) {
                v("responses_bound", req, at, what);
            }
            // The ledger read field by field (check/ledger.rs).
            for (req, what) in ledger::effect_as_asked(&acct, &o.id, snap.asked.get(&o.id), facts) {
                v("effect_as_asked", req, at, what);
            }
            for (req, what) in ledger::mutations_accounted(&acct, &o.id, &snap.remedies, facts) {
                v("mutation_accounted", req, at, what);
            }
            for (req, what) in ledger::evidence_served(&acct, &o.id, a, &snap.provider, facts) {
                v("evidence_served", req, at, what);
            }
            // The report is about the occurrence asked for (AOC-REQ-002: one stable identity).
            facts.saw(Req::R002);
            if st.occurrence != o.id {
                v(
                    "state_matches_history",
                    Req::R002,
                    at,
                    format!(
                        "the state of {} was asked for, and the report is about {:?}",
                        o.id, st.occurrence
                    ),
                );
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
            // authentic_as_claimed (AOC-REQ-009): the history may not call more provider replies
            // authenticated than the provider really sent with a genuine tag (ground truth).
            let claimed = a
                .entries
                .iter()
                .filter(|e| {
                    e.kind == Kind::Observed
                        && e.source_kind == Some(SourceKind::Response)
                        && e.authenticated == Some(true)
                })
                .count();
            if claimed > 0 {
                facts.saw(Req::R009);
                // A reply sent as processed, or its error status after commit, is signed over what
                // was sent; a forged, garbled, dropped or undelivered one authenticates nothing.
                use fake_payments::ledger::Reply;
                let genuine = creates
                    .iter()
                    .filter(|r| matches!(r.reply, Reply::Written | Reply::ErrorAfterCommit))
                    .count();
                // A reply the provider signed for another account is about another binding.
                let misdirected = creates
                    .iter()
                    .filter(|r| r.reply == Reply::Misdirected)
                    .count();
                if misdirected > 0 {
                    facts.saw(Req::R007);
                }
                if claimed > genuine {
                    v(
                        "authentic_as_claimed",
                        Req::R009,
                        at,
                        format!(
                            "the history records {claimed} authenticated provider response(s), but the provider sent {genuine} reply with a genuine tag (ground truth)"
                        ),
                    );
                    if misdirected > 0 {
                        v(
                            "authentic_as_claimed",
                            Req::R007,
                            at,
                            format!(
                                "{misdirected} reply was signed for another account: a response about another binding is not evidence about this one (ground truth)"
                            ),
                        );
                    }
                }
            }
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
            // The report's generation reading is declared once: an answer may not pick the
            // reading that suits it at each look (AOC-REQ-005).
            if let Some(prev) = self.readings.insert(label.to_string(), a.report_generation)
                && prev != a.report_generation
            {
                v(
                    "state_matches_history",
                    Req::R005,
                    at,
                    format!(
                        "the report's generation reading changed from {prev:?} to {:?}",
                        a.report_generation
                    ),
                );
            }
            // state_matches_history: the report is checked, never trusted (GUIDE §4).
            for r in STATE_FIELDS {
                facts.saw(r);
            }
            for (req, what) in contradictions(a, &view) {
                v(
                    "state_matches_history",
                    req,
                    at,
                    format!("the reported state contradicts the stored history: {what}"),
                );
            }
            if !creates.is_empty() && st.entry_attempts == 0 {
                v(
                    "state_matches_history",
                    Req::R004,
                    at,
                    "the provider received a create request for this occurrence, but its state records no entry (ground truth)".into(),
                );
            }
            if st.state == State::Released {
                facts.saw(Req::R008);
                if !effects.is_empty() || !creates.is_empty() {
                    v(
                        "release_only_before_entry",
                        Req::R008,
                        at,
                        "released as never entered, but the provider received its request".into(),
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
            let was_consumed = self.consumed.contains(label);
            if st.entry_attempts > 0 || was_consumed {
                facts.saw(Req::R012);
            }
            if was_consumed && st.authority != Authority::Consumed {
                v(
                    "authority_never_restored",
                    Req::R012,
                    at,
                    format!("consumed authority is now reported {}", st.authority),
                );
            }
            if st.entry_attempts > 0 && st.authority == Authority::Released {
                v(
                    "authority_never_restored",
                    Req::R012,
                    at,
                    "authority released after provider entry".into(),
                );
            }
            if st.authority == Authority::Consumed {
                self.consumed.insert(label.to_string());
            }
            // no_invented_outcome (AOC-REQ-009, -011): an entered occurrence either stays
            // unresolved or rests its outcome on authenticated, interpreted evidence.
            if st.entry_attempts > 0 || st.outcome.is_some() {
                facts.saw(Req::R009);
                facts.saw(Req::R011);
            }
            for (i, e) in a.entries.iter().enumerate() {
                if e.kind == Kind::Decided && e.evidence.is_empty() {
                    v(
                        "no_invented_outcome",
                        Req::R009,
                        at,
                        format!("the terminal decision at entry {i} cites no evidence"),
                    );
                }
            }
            if let Some(outcome) = st.outcome {
                let authoritative = a.entries.iter().any(|e| {
                    e.kind == Kind::Observed
                        && e.authenticated == Some(true)
                        && e.interpretation.is_some()
                });
                if !authoritative {
                    v(
                        "no_invented_outcome",
                        Req::R009,
                        at,
                        format!(
                            "terminal {outcome} without any authenticated, interpreted observation"
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
                    Outcome::NotAccepted | Outcome::FinalFailureNoEffect if moved => v(
                        "no_invented_outcome",
                        Req::R011,
                        at,
                        format!(
                            "{outcome} claimed, but the provider recorded an effect ({})",
                            effects
                                .iter()
                                .map(|e| e.status.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    ),
                    _ => {}
                }
            }
            match st.state {
                State::Pending => pending += 1,
                State::Unresolved => in_flight += 1,
                _ => {}
            }
            self.histories.insert(label.to_string(), bytes);
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

/// Where a §7 report says something its own history does not, and the requirement each
/// contradiction breaks: a terminal claim or a dropped missing-knowledge flag (AOC-REQ-009), an
/// entry count, provider-entry state or standing that hides an entry (AOC-REQ-004), authority
/// accounting (AOC-REQ-012), a binding (AOC-REQ-003) or a generation (AOC-REQ-005).
pub fn contradictions(a: &StateAnswer, history: &View) -> Vec<(Req, String)> {
    let r = &a.report;
    let word = |o: Option<Outcome>| o.map_or("none".to_string(), |o| o.to_string());
    let mut compared = vec![
        (
            if r.state == State::Resolved {
                Req::R009
            } else {
                Req::R004
            },
            "the state",
            r.state.to_string(),
            history.state().to_string(),
        ),
        (
            Req::R009,
            "the outcome",
            word(r.outcome),
            word(history.outcome),
        ),
        (
            Req::R004,
            "the entry count",
            r.entry_attempts.to_string(),
            history.attempts.len().to_string(),
        ),
        (
            Req::R004,
            "provider entry",
            format!("{:?}", r.provider_entry),
            format!("{:?}", history.provider_entry()),
        ),
        (
            Req::R012,
            "the authority",
            r.authority.to_string(),
            history.authority().to_string(),
        ),
        (
            Req::R003,
            "the binding digest",
            format!("{:?}", r.binding_digest),
            format!("{:?}", history.binding_digest),
        ),
    ];
    let (what, generation) = match a.report_generation {
        evidence::GenerationReading::Owner => ("the owner generation", history.generation),
        evidence::GenerationReading::Capturing => {
            ("the capturing generation", history.captured_generation)
        }
    };
    if let Some(g) = generation {
        compared.push((
            Req::R005,
            what,
            r.executor_generation.to_string(),
            g.to_string(),
        ));
    }
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
    // The flags, both ways (AOC-REQ-009: missing knowledge is an explicit statement about the
    // sources): none the history raises is dropped, none it never raised is invented. Words
    // without a mapping are compared as words.
    let (reported, reported_words) = a.report_flags();
    let dropped: Vec<String> = history
        .flags
        .difference(&reported)
        .map(|f| f.to_string())
        .chain(
            history
                .unmapped
                .iter()
                .filter(|w| !reported_words.contains(w))
                .cloned(),
        )
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
    let invented: Vec<String> = reported
        .difference(&history.flags)
        .map(|f| f.to_string())
        .chain(
            reported_words
                .iter()
                .filter(|w| !history.unmapped.contains(w))
                .cloned(),
        )
        .collect();
    if !invented.is_empty() {
        out.push((
            Req::R009,
            format!(
                "the report raises missing knowledge its history never raised: {}",
                invented.join(", ")
            ),
        ));
    }
    out
}

/// AOC-REQ-007 over a history: every provider response recorded (one fact each), and every
/// terminal decision that cites one which is unauthenticated, answers no attempt this occurrence
/// entered, or is about another binding ("MAY accept … only if it matches the immutable binding
/// and the exact predecessor attempt"; an unbindable response leaves the occurrence unresolved).
pub fn unbound_responses(a: &StateAnswer, facts: &mut Facts) -> Vec<(Req, String)> {
    let mut out = Vec::new();
    let mut binding: Option<&str> = None;
    let mut attempts: Vec<&str> = Vec::new();
    // index → why the response there cannot bind.
    let mut unbindable: BTreeMap<usize, String> = BTreeMap::new();
    for (i, e) in a.entries.iter().enumerate() {
        match e.kind {
            Kind::Prepared => binding = e.binding_digest.as_deref(),
            Kind::Entered => attempts.extend(e.attempt.as_deref()),
            Kind::Observed if e.source_kind == Some(SourceKind::Response) => {
                facts.saw(Req::R007);
                let why = if e.authenticated != Some(true) {
                    Some("is not authenticated".to_string())
                } else if !e.attempt.as_deref().is_some_and(|x| attempts.contains(&x)) {
                    Some(format!(
                        "answers attempt {}, which this occurrence never entered",
                        e.attempt.as_deref().unwrap_or("(none named)")
                    ))
                } else if binding.is_none() {
                    Some("arrived with no binding on record".to_string())
                } else if e.binding_digest.is_some() && e.binding_digest.as_deref() != binding {
                    Some("is about another binding (account, request or key)".to_string())
                } else {
                    None
                };
                if let Some(why) = why {
                    unbindable.insert(i, why);
                }
            }
            Kind::Decided => {
                for j in &e.evidence {
                    if let Some(why) = unbindable.get(j) {
                        out.push((
                            Req::R007,
                            format!(
                                "the terminal decision rests on the response recorded at entry {j}, which {why}"
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

    /// Every claim is a fact; only a prohibited one is a violation, under AOC-REQ-013.
    #[test]
    fn each_claim_is_examined_and_a_prohibited_one_found() {
        let mut c = Checker::default();
        let found = c.claims(&[
            "Fencing applies inside this domain only.".to_string(),
            "A Succession Receipt fences a provider path.".to_string(),
        ]);
        assert_eq!(c.facts.count(Req::R013), 2);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].requirement, Req::R013);
        assert!(c.claims(&[]).is_empty());
        assert_eq!(c.facts.count(Req::R013), 2, "no claim, no fact");
    }

    /// The report's generation is judged by the reading declared: after a replacement, the
    /// owner reading names the successor and the capturing reading the generation that
    /// prepared it; either reading, honestly kept, passes, and a report that keeps neither fails.
    #[rstest::rstest]
    #[case::owner_names_the_successor(None, 2, false)]
    #[case::owner_naming_the_predecessor(None, 1, true)]
    #[case::capturing_names_the_preparer(Some("capturing"), 1, false)]
    #[case::capturing_naming_the_successor(Some("capturing"), 2, true)]
    fn the_report_generation_is_judged_by_the_declared_reading(
        #[case] reading: Option<&str>,
        #[case] reported: u64,
        #[case] contradicts: bool,
    ) {
        let mut v = serde_json::json!({
            "entries": [
                {"kind": "created", "entry": {}},
                {"kind": "prepared", "generation": 1, "binding_digest": "b", "entry": {}},
                {"kind": "entered", "generation": 1, "attempt": "a1", "entry": {}},
                {"kind": "replaced", "generation": 2, "entry": {}}],
            "report": {"occurrence": "o", "domain": "d", "executor_generation": reported,
                       "binding_digest": "b", "state": "unresolved", "provider_entry": "entered",
                       "authority": "consumed", "entry_attempts": 1, "evidence_sources": [],
                       "missing_knowledge": [], "remedies": []}});
        if let Some(r) = reading {
            v["report_generation"] = r.into();
        }
        let a: StateAnswer = serde_json::from_value(v).expect("answer");
        let found = contradictions(&a, &View::of(&a.entries, &a.flag_map));
        assert_eq!(
            found
                .iter()
                .any(|(r, m)| *r == Req::R005 && m.contains("generation")),
            contradicts,
            "{found:?}"
        );
        assert_eq!(found.len(), usize::from(contradicts), "{found:?}");
    }

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
            asked: BTreeMap::new(),
            remedies: BTreeMap::new(),
        };
        for _ in 0..3 {
            assert!(c.check(&snap).is_empty());
        }
        assert_eq!(c.facts.total(), 0, "{:?}", c.facts);
    }
}
