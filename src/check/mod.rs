//! Invariant checkers, each tagged with the requirement ids it evaluates. They run after every
//! step of a case over what the implementation reports, its raw stored history, and the provider's
//! ground-truth ledger. A checker that finds nothing wrong says so by returning no violation; every
//! checker here has a broken implementation in `tests/it/broken.rs` that makes it fire.

pub mod accounting;
pub mod connector;
pub mod credentials;
pub mod deploy;
pub mod evidence;
pub mod expect;
mod finding;
pub mod generations;
pub(crate) mod hermes;
pub mod ledger;
pub mod mcp;
pub mod replay;
pub mod statements;
pub mod steps;
pub mod verdict;
pub mod workflow;

use crate::aoc::domain::Limits;
use crate::aoc::ids::Generation;
use crate::aoc::requirement::Req;
use crate::vocab::{Authority, Flag, Outcome, State};
use accounting::{Accounting, KeyRule, key_words};
use evidence::{Kind, SourceKind, StateAnswer, View};
use provider_model::payments::ledger::Ledger;
use std::collections::BTreeMap;

pub use finding::Finding;

/// The name the observer process is initialised with. It never joins the lane, and only reads:
/// a mutation made with its credential is judged by `observer_reads_only`.
pub const OBSERVER: &str = "aocheck-observer";

/// The checkers and the requirement ids each evaluates (for reports).
pub const CHECKERS: [(&str, &[Req]); 64] = [
    ("deploy_one_entry", &[Req::R010, Req::R002]),
    // A service whose effects are MCP tool calls (check/mcp.rs: against fake-mcp).
    ("deploy_one_call", &[Req::R010, Req::R002]),
    ("deploy_effect_from_ledger", &[Req::R011, Req::R009]),
    // Seed 002's workflow runner (check/workflow.rs: against fake-hermes and the channel).
    ("workflow_one_run_per_step", &[Req::R010]),
    ("workflow_one_delivery_per_output", &[Req::R010]),
    ("workflow_cursor_recorded", &[Req::R005]),
    ("workflow_outcome_from_ledgers", &[Req::R011]),
    ("workflow_state_whole", &[Req::R005]),
    ("workflow_effect_as_designed", &[Req::R003]),
    // A workflow case's expectations (runner::workflow), under the requirement the case picks.
    ("workflow_expected", &[Req::R005, Req::R010, Req::R011]),
    ("deploy_one_run", &[Req::R010, Req::R002]),
    ("deploy_one_decision", &[Req::R010]),
    ("deploy_result_from_provider", &[Req::R011, Req::R009]),
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
        &[
            Req::R002,
            Req::R003,
            Req::R004,
            Req::R005,
            Req::R009,
            Req::R012,
        ],
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
    ("statement_permitted", &[Req::R001, Req::R002, Req::R006]),
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
    // Facts put together (issue 37): the history against the harness's own actions and the
    // provider's ledger, and the report's remedies and sources against the history.
    ("generations_together", &[Req::R005, Req::R006]),
    ("entry_before_request", &[Req::R004]),
    ("remedy_own_binding", &[Req::R012]),
    ("observer_reads_only", &[Req::R006]),
    ("report_backed", &[Req::R009, Req::R012]),
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
#[serde(deny_unknown_fields)]
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
#[serde(deny_unknown_fields)]
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
    /// The generations the lane answered the harness's joins and takeovers so far (the
    /// harness's own replacements; empty in evidence recorded before issue 37).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub admitted: Vec<u64>,
    /// The payment status the harness itself set for an occurrence's payment (a
    /// `provider_status` step), by occurrence id: the provider's status now, where the ledger's
    /// effects hold only the status right after each effect.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub statuses: BTreeMap<String, String>,
    /// The last request sequence number the provider's ledger held before the implementation's
    /// answers were read: a request after it may have left after the history was read, so the
    /// history is not held to record its entry (`None` in evidence recorded before issue 37).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_before: Option<u64>,
    /// The last request sequence number the ledger held once the answers had been read, where
    /// the implementation kept running while they were read (a deployment): an observation an
    /// answer records is backed by any request up to it. `None`: `requests_before` bounds both.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_by_answer: Option<u64>,
    /// Generations the harness retired by killing the instance that held them, by occurrence
    /// label (a deployment: the generation its record named for the order parked at the
    /// provider when its instance was killed). A provider entry of that occurrence first seen
    /// after that under one of them is by a retired generation. Per occurrence: a service may
    /// number generations per order (a lease per job), so another order's generation 1 is not
    /// the killed holder's (D79).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub retired: BTreeMap<String, Vec<u64>>,
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
    /// Adds every fact of `other`.
    pub fn absorb(&mut self, other: &Facts) {
        for (r, n) in &other.0 {
            *self.0.entry(*r).or_default() += n;
        }
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
    /// What the implementation states about itself (its `init` answer), in every case.
    ///
    /// `statements` are data (`check::statements`): each is one fact about its requirement, and
    /// one that says what the draft forbids is a violation (`no_prohibited_claim` under
    /// AOC-REQ-013, `statement_permitted` under AOC-REQ-001/-002/-006). Free-text `claims` cannot
    /// be judged by a word list (GUIDE §4): they establish nothing (the runner shows them for
    /// review and leaves AOC-REQ-013 undecided), and the word list stays only as a net: a claim
    /// that plainly says one of the four prohibited claims still fails AOC-REQ-013.
    pub fn claims(
        &mut self,
        claims: &[String],
        statements: &[statements::Statement],
    ) -> Vec<Finding> {
        // Only AOC-REQ-013 (what may be claimed) is established by a statement: the others are
        // about behaviour, which a description cannot establish ("nothing on trust that can be
        // measured"); a forbidden statement still fails them.
        let mut out: Vec<Finding> = statements
            .iter()
            .filter_map(|s| {
                let (req, why) = s.judge();
                let checker = if req == Req::R013 {
                    self.facts.saw(req);
                    "no_prohibited_claim"
                } else {
                    "statement_permitted"
                };
                why.map(|w| {
                    Finding::new(
                        checker,
                        req,
                        format!(
                            "the implementation states {}: it {w}",
                            serde_json::to_string(s).unwrap_or_default()
                        ),
                    )
                })
            })
            .collect();
        out.extend(claims.iter().filter_map(|claim| {
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
        }));
        out
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
        let ids: Vec<&str> = snap.occurrences.iter().map(|o| o.id.as_str()).collect();
        let acct = Accounting::of(&snap.provider, snap.key_rule.as_ref(), &ids);
        ledger_whole(snap, &acct, &mut self.facts, &mut out);
        let (mut pending, mut in_flight) = (0u32, 0u32);
        let mut looked = std::collections::BTreeSet::new();
        for o in &snap.occurrences {
            // An occurrence two case labels name (a creation retry) is one occurrence.
            if !looked.insert(o.id.as_str()) {
                continue;
            }
            let label = o.label.as_str();
            let a = match &o.answer {
                Ok(a) => a,
                Err(why) => {
                    self.facts.saw(Req::R004);
                    out.push(
                        Finding::new(
                            "history_append_only",
                            Req::R004,
                            format!("the state answer is not usable evidence: {why}"),
                        )
                        .about(Some(label)),
                    );
                    continue;
                }
            };
            let view = View::of(&a.entries, &a.flag_map);
            let bytes = self.history(snap, label, a, &view, &mut out);
            self.against_the_ledger(snap, &acct, o, a, &view, &mut out);
            self.identity_and_effects(&acct, o, a, &mut out);
            self.report_constant(label, a, &view, &acct, &o.id, &mut out);
            self.authority_and_outcome(snap, &acct, o, a, &mut out);
            // Counted by the history: a decided occurrence cautiously reported unresolved is
            // not in flight.
            match view.state() {
                State::Pending => pending += 1,
                State::Unresolved => in_flight += 1,
                _ => {}
            }
            self.histories.insert(label.to_string(), bytes);
        }
        // limits_respected (AOC-REQ-006); an undeclared limit is no fact.
        if pending + in_flight > 0 && snap.limits != Limits::UNDECLARED {
            self.facts.saw(Req::R006);
        }
        if pending > snap.limits.max_pending || in_flight > snap.limits.max_in_flight {
            out.push(Finding::new(
                "limits_respected",
                Req::R006,
                format!(
                    "{pending} pending / {in_flight} in flight exceed the declared limits {} / {}",
                    snap.limits.max_pending, snap.limits.max_in_flight
                ),
            ));
        }
        out
    }

    /// history_append_only (AOC-REQ-004), no_retired_entry (AOC-REQ-006) and
    /// release_only_before_entry (AOC-REQ-008) on the history itself; returns its entries'
    /// canonical bytes.
    fn history(
        &mut self,
        snap: &Snapshot,
        label: &str,
        a: &StateAnswer,
        view: &View,
        out: &mut Vec<Finding>,
    ) -> Vec<Vec<u8>> {
        let facts = &mut self.facts;
        let mut v = say(out);
        let at = Some(label);
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
                } else if e.generation.is_some()
                    && snap.retired.get(label).is_some_and(|r| r.contains(&g))
                {
                    v(
                        "no_retired_entry",
                        Req::R006,
                        at,
                        format!(
                            "provider entry by generation {g}, first seen after the instance holding it was killed: a successor enters under its own, advanced generation (§4.6)"
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
        bytes
    }

    /// The history against the provider's ledger: responses bound, the effect as asked,
    /// mutations accounted, evidence served, generations together, entry before request, the
    /// report's remedies and sources backed, a remedy's own binding.
    fn against_the_ledger(
        &mut self,
        snap: &Snapshot,
        acct: &Accounting<'_>,
        o: &Observed,
        a: &StateAnswer,
        view: &View,
        out: &mut Vec<Finding>,
    ) {
        let facts = &mut self.facts;
        let mut v = say(out);
        let (at, st) = (Some(o.label.as_str()), &a.report);
        // responses_bound (AOC-REQ-007): a response is evidence, not authority; a terminal
        // decision may rest on one only if it is authenticated and matches the immutable
        // binding and the exact attempt it answers.
        for (req, what) in unbound_responses(a, facts) {
            v("responses_bound", req, at, what);
        }
        // The ledger read field by field (check/ledger.rs).
        for (req, what) in ledger::effect_as_asked(acct, &o.id, snap.asked.get(&o.id), facts) {
            v("effect_as_asked", req, at, what);
        }
        for (req, what) in ledger::mutations_accounted(acct, &o.id, &snap.remedies, facts) {
            v("mutation_accounted", req, at, what);
        }
        for (req, what) in ledger::evidence_served(
            acct,
            &o.id,
            a,
            &snap.provider,
            snap.requests_by_answer.or(snap.requests_before),
            facts,
        ) {
            v("evidence_served", req, at, what);
        }
        // Generations against the history itself and the lane's admissions (AOC-REQ-005/-006).
        for (req, what) in generations::judge(a, &snap.admitted, facts) {
            v("generations_together", req, at, what);
        }
        // entry_before_request (AOC-REQ-004): "before provider entry … durably bind", and the
        // history distinguishes serialized entry: once the provider has received a request
        // under this occurrence's key, the history the implementation gives at that look
        // records its entry. Judged at every look, so an entry recorded only after the
        // request went out is found at the look in between.
        let before = |r: &&&provider_model::payments::ledger::RequestRecord| {
            snap.requests_before.is_none_or(|m| r.seq <= m)
        };
        let mutated = acct.mutation_requests_of(&o.id);
        if let Some(r) = acct
            .creates_of(&o.id)
            .iter()
            .find(before)
            .or(mutated.iter().find(before))
        {
            facts.saw(Req::R004);
            if view.attempts.is_empty() {
                v(
                    "entry_before_request",
                    Req::R004,
                    at,
                    format!(
                        "the provider received a {} request {} (ground truth), but this occurrence's history records no provider entry",
                        r.op.label(),
                        key_words(&r.idempotency_key)
                    ),
                );
            }
        }
        // report_backed (AOC-REQ-012, -009): a remedy the report lists is one its history
        // links (§4.12: "linked to the original occurrence"), and an evidence source it names
        // is one its history observed.
        for x in &st.remedies {
            facts.saw(Req::R012);
            if !view.remedies.contains(x) {
                v(
                    "report_backed",
                    Req::R012,
                    at,
                    format!("the report lists remedy {x:?}, which its history never links"),
                );
            }
        }
        for src in &st.evidence_sources {
            facts.saw(Req::R009);
            if !a
                .entries
                .iter()
                .any(|e| e.kind == Kind::Observed && e.source.as_deref() == Some(src))
            {
                v(
                    "report_backed",
                    Req::R009,
                    at,
                    format!(
                        "the report names evidence source {src:?}, which its history never observed"
                    ),
                );
            }
        }
        // remedy_own_binding (AOC-REQ-012): a remedy is "assigned its own replay-protected
        // operation identity"; one bound under its original's binding would hold authority
        // under the original's request and key.
        if let Some(rem) = snap.remedies.get(&o.id)
            && let Some(d) = &view.binding_digest
        {
            facts.saw(Req::R012);
            let original = snap
                .occurrences
                .iter()
                .find(|x| x.id == rem.original)
                .and_then(|x| x.answer.as_ref().ok())
                .and_then(|x| View::of(&x.entries, &x.flag_map).binding_digest);
            if original.as_ref() == Some(d) {
                v(
                    "remedy_own_binding",
                    Req::R012,
                    at,
                    format!(
                        "remedy {} is bound under its original {}'s provider binding {d}: a remedy needs its own",
                        o.id, rem.original
                    ),
                );
            }
        }
    }

    /// One stable identity (AOC-REQ-002), one effect per occurrence (AOC-REQ-010) and no more
    /// authenticated replies than the provider sent (AOC-REQ-009, -007).
    fn identity_and_effects(
        &mut self,
        acct: &Accounting<'_>,
        o: &Observed,
        a: &StateAnswer,
        out: &mut Vec<Finding>,
    ) {
        let facts = &mut self.facts;
        let mut v = say(out);
        let (at, st) = (Some(o.label.as_str()), &a.report);
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
        // The history's own word (AOC-REQ-010): an occurrence enters the provider once, so a
        // history that records two provider entries for it admits a second attempt, whatever
        // reached the provider.
        let entered: Vec<&str> = a
            .entries
            .iter()
            .filter(|e| e.kind == Kind::Entered)
            .map(|e| e.attempt.as_deref().unwrap_or("(unnamed)"))
            .collect();
        if entered.len() > 1 {
            v(
                "one_effect_per_occurrence",
                Req::R010,
                at,
                format!(
                    "the history records {} provider entries for one occurrence (attempts {}): an occurrence enters the provider once (§4.10)",
                    entered.len(),
                    entered.join(", ")
                ),
            );
        }
        // A response read as an outcome (AOC-REQ-009): its interpretation needs a reply the
        // provider delivered whole to one of this occurrence's creates; a 5xx after commit, a
        // closed connection or a garbled reply carries no payment status to read.
        let whole = creates
            .iter()
            .any(|r| r.reply == provider_model::payments::ledger::Reply::Written);
        for (i, e) in a.entries.iter().enumerate() {
            if e.kind == Kind::Observed
                && e.source_kind == Some(SourceKind::Response)
                && e.interpretation.is_some()
                && !creates.is_empty()
            {
                facts.saw(Req::R009);
                if !whole {
                    v(
                        "authentic_as_claimed",
                        Req::R009,
                        at,
                        format!(
                            "entries[{i}] reads the create's response as {:?}, but the provider delivered no reply whole to this occurrence's creates (replies: {}) (ground truth): a status class or a lost reply carries no payment status",
                            e.interpretation,
                            creates
                                .iter()
                                .map(|r| format!("request {} {:?}", r.seq, r.reply))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    );
                }
            }
        }
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
            use provider_model::payments::ledger::Reply;
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
    }

    /// What the report keeps from look to look and with its history: one domain, one generation
    /// reading, the state the history shows, a release never entered, one binding.
    fn report_constant(
        &mut self,
        label: &str,
        a: &StateAnswer,
        view: &View,
        acct: &Accounting<'_>,
        id: &str,
        out: &mut Vec<Finding>,
    ) {
        let facts = &mut self.facts;
        let mut v = say(out);
        let (at, st) = (Some(label), &a.report);
        let (effects, creates) = (acct.effects_of(id), acct.creates_of(id));
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
        for (req, what) in contradictions(a, view) {
            v(
                "state_matches_history",
                req,
                at,
                format!("the reported state contradicts the stored history: {what}"),
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
    }

    /// Authority never restored (AOC-REQ-012) and no invented outcome (AOC-REQ-009, -011).
    fn authority_and_outcome(
        &mut self,
        snap: &Snapshot,
        acct: &Accounting<'_>,
        o: &Observed,
        a: &StateAnswer,
        out: &mut Vec<Finding>,
    ) {
        let facts = &mut self.facts;
        let mut v = say(out);
        let (label, st) = (o.label.as_str(), &a.report);
        let at = Some(label);
        let effects = acct.effects_of(&o.id);
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
            } else if e.kind == Kind::Decided
                && let Some(outcome) = e.outcome
            {
                // The decision rests on what it cites: at least one cited, authenticated
                // observation reads the outcome decided (AOC-REQ-009, -011: `accepted` is not
                // success, and a reading of another outcome is not this one).
                let reads = |x: evidence::Interpretation| match outcome {
                    Outcome::Success => x == evidence::Interpretation::Success,
                    Outcome::NotAccepted => x == evidence::Interpretation::NotAccepted,
                    _ => x == evidence::Interpretation::FinalFailure,
                };
                let backed = e.evidence.iter().any(|j| {
                    a.entries.get(*j).is_some_and(|x| {
                        x.kind == Kind::Observed
                            && x.authenticated == Some(true)
                            && x.interpretation.is_some_and(reads)
                    })
                });
                if !backed {
                    v(
                        "no_invented_outcome",
                        Req::R009,
                        at,
                        format!(
                            "the terminal decision at entry {i} ({outcome}) cites entries {:?}, none an authenticated observation that reads {outcome}",
                            e.evidence
                        ),
                    );
                }
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
            // Where the harness changed the payment's status itself, what the provider showed
            // when the decision was made is not known here: no verdict on it (fails closed
            // for the judge, never for the implementation).
            let succeeded_now = succeeded && !snap.statuses.contains_key(&o.id);
            let moved = effects
                .iter()
                .any(|e| !matches!(e.status.as_str(), "declined" | "canceled"));
            match outcome {
                Outcome::FinalFailure | Outcome::NotAccepted | Outcome::FinalFailureNoEffect
                    if succeeded_now =>
                {
                    v(
                        "no_invented_outcome",
                        Req::R011,
                        at,
                        format!(
                            "{outcome} decided, but the provider shows the payment succeeded (ground truth)"
                        ),
                    )
                }
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
    }
}

/// The requirements `contradictions` compares a reported state under (one fact each per look).
const STATE_FIELDS: [Req; 5] = [Req::R003, Req::R004, Req::R005, Req::R009, Req::R012];

/// Where a §7 report says something its own history does not allow, and the requirement each
/// contradiction breaks: a terminal claim the history does not hold or a dropped missing-knowledge
/// flag (AOC-REQ-009), an entry count, provider-entry state or standing that hides an entry
/// (AOC-REQ-004), authority accounting (AOC-REQ-012), a binding (AOC-REQ-003) or a generation
/// (AOC-REQ-005).
///
/// A report is judged as one of the reports the draft permits for that history (GUIDE §4,
/// "honest caution passes"; D74): saying less than the history allows is never a contradiction.
/// A resolved history may be reported unresolved with no outcome, and a report may raise
/// missing-knowledge flags no observation raised (§7 asks the report to *identify* what the
/// sources cannot establish; it never asks that each flag be an entry). What it may not do is
/// claim more: an outcome the history did not decide, a flag the history raised dropped, or a
/// terminal outcome beside a conflict (§4.11: conflicting evidence is never terminal).
pub fn contradictions(a: &StateAnswer, history: &View) -> Vec<(Req, String)> {
    let r = &a.report;
    let word = |o: Option<Outcome>| o.map_or("none".to_string(), |o| o.to_string());
    let held = history.state();
    let cautious = history.says_less(r);
    let mut compared = vec![
        (
            if r.state == State::Resolved {
                Req::R009
            } else {
                Req::R004
            },
            "the state",
            r.state.to_string(),
            if cautious {
                State::Unresolved.to_string()
            } else {
                held.to_string()
            },
        ),
        (
            Req::R009,
            "the outcome",
            word(r.outcome),
            if cautious {
                word(None)
            } else {
                word(history.outcome)
            },
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
    // The flags (AOC-REQ-009: missing knowledge is an explicit statement about the sources):
    // none the history raises is dropped. Words without a mapping are compared as words.
    // A word `flag_map` maps to `null` is still a statement of missing knowledge: compared as
    // a word, never erased.
    let (reported, reported_words) = a.report_flags();
    let reported_nulls = a.report_null_words();
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
        .chain(
            history
                .null_words
                .iter()
                .filter(|w| !reported_nulls.contains(w))
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
    // A flag beyond the history's is caution, except a conflict beside a terminal outcome: the
    // report would then rest a final answer on evidence it says disagrees (§4.11).
    if r.state == State::Resolved && reported.contains(&Flag::Conflicting) {
        out.push((
            Req::R009,
            format!(
                "the report says resolved ({}) and raises {}: a terminal outcome over conflicting evidence",
                word(r.outcome),
                Flag::Conflicting
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
            // A lookup or a listing is evidence only about the binding it asked for
            // (AOC-REQ-003: every later status query matches the binding).
            Kind::Observed
                if e.source_kind != Some(SourceKind::Response)
                    && binding.is_some()
                    && e.binding_digest.is_some()
                    && e.binding_digest.as_deref() != binding =>
            {
                facts.saw(Req::R007);
                unbindable.insert(
                    i,
                    "is about another binding (account, request or key)".into(),
                );
            }
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

/// How a checker says what it found: a finding under its name, about an occurrence (or none),
/// pushed to `out`.
fn say(out: &mut Vec<Finding>) -> impl FnMut(&'static str, Req, Option<&str>, String) + use<'_> {
    |checker, requirement, occ, msg| out.push(Finding::new(checker, requirement, msg).about(occ))
}

/// provider_accounting (AOC-REQ-010, -012) and observer_reads_only (AOC-REQ-006): the ledger,
/// whole, before any occurrence.
fn ledger_whole(snap: &Snapshot, acct: &Accounting<'_>, facts: &mut Facts, out: &mut Vec<Finding>) {
    let mut v = say(out);
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
            provider_model::payments::ledger::EffectKind::PaymentCreated => (
                Req::R010,
                format!("provider payment {} was created", e.payment_id),
            ),
            provider_model::payments::ledger::EffectKind::PaymentCaptured => (
                Req::R012,
                format!("provider payment {} was captured", e.payment_id),
            ),
            provider_model::payments::ledger::EffectKind::PaymentCanceled => (
                Req::R012,
                format!("provider payment {} was canceled", e.payment_id),
            ),
            provider_model::payments::ledger::EffectKind::PaymentRefunded => (
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
                if r.op == provider_model::payments::faults::Op::Create {
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
    // observer_reads_only (AOC-REQ-006): the observer process answers `state`, `lane` and
    // `describe` and holds no executor generation; a provider mutation made with its
    // credential is an entry no admitted generation made ("the coordination domain MUST
    // advance the executor generation … before admitting new work", §4.6).
    for r in snap
        .provider
        .requests
        .iter()
        .filter(|r| r.credential == OBSERVER && r.op.is_effectful())
    {
        facts.saw(Req::R006);
        v(
            "observer_reads_only",
            Req::R006,
            None,
            format!(
                "a {} request (#{}) {} was made with the observer's credential: the observer holds no executor generation and may only read (ground truth)",
                r.op.label(),
                r.seq,
                key_words(&r.idempotency_key)
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every statement is a fact and a forbidden one a violation; free text establishes
    /// nothing, and plainly prohibited free text still fails AOC-REQ-013.
    #[test]
    fn statements_are_facts_and_free_text_establishes_nothing() {
        let mut c = Checker::default();
        let found = c.claims(
            &["Fencing applies inside this domain only.".to_string()],
            &statements::reference_statements(),
        );
        assert!(found.is_empty(), "{found:?}");
        assert_eq!(c.facts.count(Req::R013), 4);
        assert_eq!(
            c.facts.count(Req::R006),
            0,
            "a description establishes no behaviour"
        );
        let mut c = Checker::default();
        let found = c.claims(
            &["A Succession Receipt fences a provider path.".to_string()],
            &[statements::Statement::Admission {
                exclusive_over: statements::AdmissionScope::AllPaths,
            }],
        );
        assert_eq!(c.facts.count(Req::R013), 0, "free text is no fact");
        let got: Vec<(Req, &str)> = found.iter().map(|f| (f.requirement(), f.checker)).collect();
        assert_eq!(
            got,
            vec![
                (Req::R001, "statement_permitted"),
                (Req::R013, "no_prohibited_claim")
            ]
        );
        assert!(c.claims(&[], &[]).is_empty());
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

    /// Honest caution passes, and claiming more than the history holds fails (GUIDE §4, D74):
    /// the report is judged as one of the reports the draft permits for its history.
    #[rstest::rstest]
    #[case::exact("resolved", Some("success"), &[], true, None)]
    #[case::decided_reported_unknown("unresolved", None, &[], true, None)]
    #[case::unknown_with_caution_flags("unresolved", None, &["stale", "no usable status"], true, None)]
    #[case::resolved_with_an_extra_gap("resolved", Some("success"), &["http_status_only"], true, None)]
    #[case::unresolved_yet_an_outcome("unresolved", Some("success"), &[], true, Some("the state"))]
    #[case::another_outcome("resolved", Some("final_failure_no_effect"), &[], true, Some("the outcome"))]
    #[case::terminal_over_a_conflict("resolved", Some("success"), &["conflicting"], true, Some("conflicting evidence"))]
    #[case::undecided_reported_resolved("resolved", Some("success"), &["transport"], false, Some("the state"))]
    #[case::undecided_flag_dropped("unresolved", None, &[], false, Some("drops: transport"))]
    #[case::undecided_flag_kept_and_more("unresolved", None, &["transport", "effect unknown"], false, None)]
    fn a_report_may_say_less_than_its_history_never_more(
        #[case] state: &str,
        #[case] outcome: Option<&str>,
        #[case] flags: &[&str],
        #[case] decided: bool,
        #[case] contradiction: Option<&str>,
    ) {
        let mut entries = serde_json::json!([
            {"kind": "created", "entry": {}},
            {"kind": "prepared", "generation": 1, "binding_digest": "b", "entry": {}},
            {"kind": "entered", "generation": 1, "attempt": "a1", "entry": {}}]);
        let list = entries.as_array_mut().expect("entries");
        if decided {
            list.push(
                serde_json::json!({"kind": "observed", "source": "get", "source_kind": "lookup",
                "authenticated": true, "interpretation": "success", "entry": {}}),
            );
            list.push(serde_json::json!({"kind": "decided", "outcome": "success", "evidence": [3], "entry": {}}));
        } else {
            list.push(
                serde_json::json!({"kind": "observed", "source": "reply", "source_kind": "response",
                "authenticated": false, "flags": ["transport"], "entry": {}}),
            );
        }
        let v = serde_json::json!({
            "entries": entries,
            "report": {"occurrence": "o", "domain": "d", "executor_generation": 1,
                       "binding_digest": "b", "state": state, "outcome": outcome,
                       "provider_entry": "entered", "authority": "consumed", "entry_attempts": 1,
                       "evidence_sources": [], "missing_knowledge": flags, "remedies": []}});
        let a: StateAnswer = serde_json::from_value(v).expect("answer");
        let found = contradictions(&a, &View::of(&a.entries, &a.flag_map));
        match contradiction {
            None => assert!(found.is_empty(), "{found:?}"),
            Some(needle) => assert!(
                found.iter().any(|(_, m)| m.contains(needle)),
                "{needle}: {found:?}"
            ),
        }
    }

    /// remedy_own_binding, both directions: a remedy bound under a binding of its own passes,
    /// one bound under its original's binding digest fails AOC-REQ-012 by name.
    #[rstest::rstest]
    #[case::own_binding("b-remedy", false)]
    #[case::original_s_binding("b-original", true)]
    fn a_remedy_needs_a_binding_of_its_own(#[case] remedy_binding: &str, #[case] fails: bool) {
        let answer = |id: &str, b: &str| {
            let v = serde_json::json!({
                "entries": [{"kind": "created", "entry": {}},
                            {"kind": "prepared", "generation": 1, "binding_digest": b, "entry": {}}],
                "report": {"occurrence": id, "domain": "d", "executor_generation": 1,
                           "binding_digest": b, "state": "pending", "provider_entry": "not_entered",
                           "authority": "held", "entry_attempts": 0}});
            Observed {
                label: id.to_string(),
                id: id.to_string(),
                answer: Ok(serde_json::from_value(v).expect("answer")),
            }
        };
        let snap = Snapshot {
            remedies: BTreeMap::from([(
                "r1".to_string(),
                ledger::Remedy {
                    original: "o1".into(),
                    kind: crate::vocab::RemedyKind::Refund,
                },
            )]),
            ..snapshot(
                vec![answer("o1", "b-original"), answer("r1", remedy_binding)],
                Ledger::default(),
            )
        };
        let found = Checker::default().check(&snap);
        let named: Vec<(&str, Req)> = found
            .iter()
            .map(|f| (f.checker(), f.requirement()))
            .collect();
        assert_eq!(
            named.contains(&("remedy_own_binding", Req::R012)),
            fails,
            "{named:?}"
        );
        assert_eq!(found.len(), usize::from(fails), "{named:?}");
    }

    /// A look at nothing establishes nothing: facts count what was examined, never the looks.
    #[test]
    fn an_empty_look_establishes_no_requirement() {
        let mut c = Checker::default();
        let snap = Snapshot {
            limits: Limits {
                max_pending: 1,
                max_in_flight: 1,
            },
            admitted: Vec::new(),
            ..snapshot(Vec::new(), Ledger::default())
        };
        for _ in 0..3 {
            assert!(c.check(&snap).is_empty());
        }
        assert_eq!(c.facts.total(), 0, "{:?}", c.facts);
    }

    /// A look at `occurrences` against `provider`, with the lane's defaults (generation 1
    /// admitted, limits 4 and 4, the key rule `{occurrence}`, nothing else known).
    fn snapshot(occurrences: Vec<Observed>, provider: Ledger) -> Snapshot {
        Snapshot {
            occurrences,
            provider,
            generation: Generation(1),
            limits: Limits {
                max_pending: 4,
                max_in_flight: 4,
            },
            key_rule: KeyRule::parse("{occurrence}").ok(),
            asked: BTreeMap::new(),
            remedies: BTreeMap::new(),
            admitted: vec![1],
            statuses: BTreeMap::new(),
            requests_before: None,
            requests_by_answer: None,
            retired: BTreeMap::new(),
        }
    }

    /// One look at `answers` (each a `state` answer as JSON) against `provider`.
    fn look_at(answers: Vec<serde_json::Value>, provider: Ledger) -> Snapshot {
        let occurrences = answers
            .into_iter()
            .map(|v| {
                let a: StateAnswer = serde_json::from_value(v).expect("answer");
                let id = a.report.occurrence.clone();
                Observed {
                    label: id.clone(),
                    id,
                    answer: Ok(a),
                }
            })
            .collect();
        snapshot(occurrences, provider)
    }

    fn answer_of(
        entries: serde_json::Value,
        state: &str,
        outcome: Option<&str>,
        provider_entry: &str,
        attempts: u32,
    ) -> serde_json::Value {
        serde_json::json!({
            "entries": entries,
            "report": {"occurrence": "o1", "domain": "d", "executor_generation": 1,
                       "binding_digest": "b", "state": state, "outcome": outcome,
                       "provider_entry": provider_entry, "authority": "consumed",
                       "entry_attempts": attempts}})
    }

    fn prepared() -> Vec<serde_json::Value> {
        vec![
            serde_json::json!({"kind": "created", "entry": {}}),
            serde_json::json!({"kind": "prepared", "generation": 1, "binding_digest": "b", "entry": {}}),
        ]
    }

    /// A history only grows: a later look whose history lost an entry fails AOC-REQ-004
    /// (`history_append_only`); one that grew passes it.
    #[rstest::rstest]
    #[case::grew(3, false)]
    #[case::kept(2, false)]
    #[case::shrank(1, true)]
    fn a_history_that_shrinks_between_looks_fails(#[case] later: usize, #[case] fails: bool) {
        let mut all = prepared();
        all.push(
            serde_json::json!({"kind": "entered", "generation": 1, "attempt": "a1", "entry": {}}),
        );
        let mut c = Checker::default();
        let first = answer_of(
            serde_json::Value::Array(all[..2].to_vec()),
            "pending",
            None,
            "not_entered",
            0,
        );
        assert!(
            c.check(&look_at(vec![first], Ledger::default()))
                .iter()
                .all(|f| f.checker() != "history_append_only")
        );
        let (state, entry, attempts) = if later == 3 {
            ("unresolved", "entered", 1)
        } else {
            ("pending", "not_entered", 0)
        };
        let second = answer_of(
            serde_json::Value::Array(all[..later].to_vec()),
            state,
            None,
            entry,
            attempts,
        );
        let found = c.check(&look_at(vec![second], Ledger::default()));
        let named: Vec<(&str, Req)> = found
            .iter()
            .map(|f| (f.checker(), f.requirement()))
            .collect();
        assert_eq!(
            named.contains(&("history_append_only", Req::R004)),
            fails,
            "{named:?}"
        );
    }

    /// Release only before entry (AOC-REQ-008): an occurrence reported released while the
    /// provider received a creation under its key fails, even when that creation made no
    /// effect (the request itself crossed the entry boundary); with no request it passes.
    #[rstest::rstest]
    #[case::nothing_sent(false, false)]
    #[case::a_creation_without_effect(true, true)]
    fn released_after_a_creation_was_sent_fails(#[case] sent: bool, #[case] fails: bool) {
        let mut provider = Ledger::default();
        if sent {
            provider.requests.push(
                serde_json::from_value(serde_json::json!({
                    "seq": 1, "op": "create", "account": "acct_a", "idempotency_key": "o1",
                    "request_digest": "d", "payment_id": null, "lookup_key": null, "fault": null,
                    "refs": [], "status": 402, "replayed": false, "effect": false,
                    "reply": "written", "credential": "p1", "revoked": false}))
                .expect("request"),
            );
        }
        let mut entries = prepared();
        entries.push(serde_json::json!({"kind": "released", "entry": {}}));
        let a = answer_of(
            serde_json::Value::Array(entries),
            "released",
            None,
            "not_entered",
            0,
        );
        let found = Checker::default().check(&look_at(vec![a], provider));
        let named: Vec<(&str, Req)> = found
            .iter()
            .map(|f| (f.checker(), f.requirement()))
            .collect();
        assert_eq!(
            named.contains(&("release_only_before_entry", Req::R008)),
            fails,
            "{named:?}"
        );
    }

    /// no_invented_outcome (AOC-REQ-009): an outcome rests on an observation that is both
    /// authenticated and interpreted; an unauthenticated one, or an authenticated one without
    /// an interpretation, backs no outcome.
    #[rstest::rstest]
    #[case::authenticated_and_interpreted(true, true, false)]
    #[case::not_authenticated(false, true, true)]
    #[case::not_interpreted(true, false, true)]
    fn an_outcome_needs_an_authenticated_interpreted_observation(
        #[case] authenticated: bool,
        #[case] interpreted: bool,
        #[case] fails: bool,
    ) {
        let mut entries = prepared();
        entries.push(
            serde_json::json!({"kind": "entered", "generation": 1, "attempt": "a1", "entry": {}}),
        );
        let mut observed = serde_json::json!({"kind": "observed", "source": "get", "source_kind": "lookup",
                                              "authenticated": authenticated, "entry": {}});
        if interpreted {
            observed["interpretation"] = "success".into();
        }
        entries.push(observed);
        entries.push(serde_json::json!({"kind": "decided", "outcome": "success", "evidence": [3], "entry": {}}));
        let a = answer_of(
            serde_json::Value::Array(entries),
            "resolved",
            Some("success"),
            "entered",
            1,
        );
        let found = Checker::default().check(&look_at(vec![a], Ledger::default()));
        let invented = found
            .iter()
            .any(|f| f.checker() == "no_invented_outcome" && f.requirement() == Req::R009);
        assert_eq!(invented, fails, "{found:?}");
    }

    /// limits_respected counts a fact for AOC-REQ-006 whenever some occurrence is pending or in
    /// flight, each alone: a look with one pending occurrence and none in flight examined the
    /// limits (the in-flight one also counts its entry's generation, judged for §4.6).
    #[rstest::rstest]
    #[case::one_pending("pending", "not_entered", 0, 1)]
    #[case::one_in_flight("unresolved", "entered", 1, 2)]
    #[case::one_released("released", "not_entered", 0, 0)]
    fn the_limits_are_examined_by_any_open_occurrence(
        #[case] state: &str,
        #[case] entry: &str,
        #[case] attempts: u32,
        #[case] r006: u32,
    ) {
        let mut entries = prepared();
        if attempts > 0 {
            entries.push(serde_json::json!({"kind": "entered", "generation": 1, "attempt": "a1", "entry": {}}));
        }
        if state == "released" {
            entries.push(serde_json::json!({"kind": "released", "entry": {}}));
        }
        let a = answer_of(
            serde_json::Value::Array(entries),
            state,
            None,
            entry,
            attempts,
        );
        let mut c = Checker::default();
        c.check(&look_at(vec![a], Ledger::default()));
        assert_eq!(c.facts.count(Req::R006), r006, "{:?}", c.facts);
    }
}
