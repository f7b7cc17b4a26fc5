//! The `aocheck-sut/2` evidence envelope: what an implementation answers to `state`, in its own
//! vocabulary. Each history entry is the implementation's own JSON object (`entry`), wrapped in
//! a small envelope that maps it onto the distinctions AOC §4.4 requires a history to keep
//! (`kind` and a few fields per kind). The state report carries AOC §7's report fields. Nothing
//! here is aocheck's internal model: the harness judges the mapped distinctions, the canonical
//! bytes of the entries (append-only), an optional hash chain, and the report against both.
//!
//! `docs/sut-protocol.md` ("`state` and the evidence envelope") is the specification and
//! `docs/schemas/state.schema.json` its schema.

use crate::digest::{Digest, canonical_bytes};
use crate::vocab::{Authority, Flag, Outcome, State};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// The §4.4 distinctions an entry can stand for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// The occurrence was created (its identity and creation binding).
    Created,
    /// Prepared (reserved, bound) without provider entry.
    Prepared,
    /// Serialized provider entry, without acknowledgement.
    Entered,
    /// The provider acknowledged, or a native reference is known.
    Acknowledged,
    /// A status observation, with its source, time and profile interpretation.
    Observed,
    /// A terminal decision, with the evidence it rests on.
    Decided,
    /// Released before entry (a tombstone).
    Released,
    /// A successor generation took the occurrence over.
    Replaced,
    /// A remedy occurrence was linked.
    RemedyLinked,
    /// Anything else the implementation records.
    Other,
}

/// Where an observation came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceKind {
    /// The provider's reply to an entered attempt's request.
    Response,
    /// An authoritative lookup of the exact binding.
    Lookup,
    /// A listing (complete only as the profile says).
    Listing,
}

/// What the provider's answer means under the pinned profile (absent: missing knowledge).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Interpretation {
    Accepted,
    NotAccepted,
    FinalFailure,
    Success,
}

/// One history entry in the envelope.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    pub kind: Kind,
    /// When it was recorded (milliseconds on the case clock), where the implementation keeps it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<u64>,
    /// `prepared`, `entered`, `replaced`: the executor generation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<u64>,
    /// `entered`: the attempt entered; `observed` (a response): the attempt it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<String>,
    /// `prepared`: the provider-binding digest; `observed`: the binding the evidence is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binding_digest: Option<String>,
    /// `acknowledged`: the provider's reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_ref: Option<String>,
    /// `observed`: the status source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_kind: Option<SourceKind>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authenticated: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interpretation: Option<Interpretation>,
    /// `observed`: missing-knowledge flags raised, in the implementation's words.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
    /// `decided`: the outcome.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
    /// `decided`: the indexes (in `entries`) of the observations it rests on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<usize>,
    /// `remedy_linked`: the remedy occurrence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remedy: Option<String>,
    /// The implementation's own entry, as it stores it.
    pub entry: Value,
}

impl Entry {
    /// An entry of `kind` around the implementation's own object, no mapped field set yet.
    pub fn bare(kind: Kind, entry: Value) -> Entry {
        Entry {
            kind,
            at: None,
            generation: None,
            attempt: None,
            binding_digest: None,
            provider_ref: None,
            source: None,
            source_kind: None,
            authenticated: None,
            interpretation: None,
            flags: Vec::new(),
            outcome: None,
            evidence: Vec::new(),
            remedy: None,
            entry,
        }
    }
}

/// Provider entry, as AOC §7 reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderEntry {
    NotEntered,
    Entered,
    Acknowledged,
}

/// The state report: AOC §7's fields for one occurrence.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Report {
    pub occurrence: String,
    /// The coordination domain that owns it (AOC-REQ-001).
    pub domain: String,
    pub executor_generation: u64,
    #[serde(default)]
    pub binding_digest: Option<String>,
    pub state: State,
    #[serde(default)]
    pub outcome: Option<Outcome>,
    pub provider_entry: ProviderEntry,
    pub authority: Authority,
    pub entry_attempts: u32,
    #[serde(default)]
    pub evidence_sources: Vec<String>,
    /// In the implementation's words.
    #[serde(default)]
    pub missing_knowledge: Vec<String>,
    #[serde(default)]
    pub remedies: Vec<String>,
}

/// The chain rule an implementation may declare.
pub const CHAIN_JCS_SHA256: &str = "jcs-sha256";

/// A whole `state` answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateAnswer {
    pub entries: Vec<Entry>,
    pub report: Report,
    /// `jcs-sha256` when every `entry` carries `prev` and `digest` chained by that rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain: Option<String>,
    /// The implementation's flag words mapped onto aocheck's, where they differ; a word mapped
    /// to `null` has no aocheck equivalent (it is neither a flag aocheck knows nor an unmapped
    /// word that leaves an expectation undecided).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub flag_map: BTreeMap<String, Option<Flag>>,
    /// Which generation `report.executor_generation` names (AOC §7 leaves the reading open).
    #[serde(default, skip_serializing_if = "GenerationReading::is_owner")]
    pub report_generation: GenerationReading,
}

/// The reading of a report's `executor_generation`: the generation that owns the occurrence now
/// (the latest `prepared` or `replaced`), or the one that captured it (the latest `prepared`;
/// replacement recorded separately).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GenerationReading {
    #[default]
    Owner,
    Capturing,
}

impl GenerationReading {
    fn is_owner(&self) -> bool {
        *self == GenerationReading::Owner
    }
}

impl StateAnswer {
    /// Reads an answer, naming the field of every defect (`entries[3].generation`).
    pub fn decode(v: Value) -> Result<StateAnswer, String> {
        let a: StateAnswer = serde_json::from_value(v).map_err(|e| e.to_string())?;
        let defects = a.defects();
        if defects.is_empty() {
            Ok(a)
        } else {
            Err(defects.join("; "))
        }
    }

    /// Every field a kind needs and lacks, every `evidence` index that names no observation, and
    /// an unknown chain rule.
    pub fn defects(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (i, e) in self.entries.iter().enumerate() {
            let mut need = |ok: bool, field: &str| {
                if !ok {
                    out.push(format!("entries[{i}].{field}: required for {:?}", e.kind));
                }
            };
            match e.kind {
                Kind::Prepared => {
                    need(e.generation.is_some(), "generation");
                    need(e.binding_digest.is_some(), "binding_digest");
                }
                Kind::Entered => {
                    need(e.generation.is_some(), "generation");
                    need(e.attempt.is_some(), "attempt");
                }
                Kind::Observed => {
                    need(e.source.is_some(), "source");
                    need(e.source_kind.is_some(), "source_kind");
                    need(e.authenticated.is_some(), "authenticated");
                }
                // A decision citing no evidence is readable, and judged (`no_invented_outcome`).
                Kind::Decided => need(e.outcome.is_some(), "outcome"),
                Kind::Replaced => need(e.generation.is_some(), "generation"),
                Kind::RemedyLinked => need(e.remedy.is_some(), "remedy"),
                _ => {}
            }
            for &j in &e.evidence {
                if j >= i || self.entries[j].kind != Kind::Observed {
                    out.push(format!(
                        "entries[{i}].evidence: {j} is not an earlier observed entry"
                    ));
                }
            }
        }
        if let Some(c) = &self.chain
            && c != CHAIN_JCS_SHA256
        {
            out.push(format!(
                "chain: {c:?} is not a known chain rule (use {CHAIN_JCS_SHA256}, or leave it out)"
            ));
        }
        out
    }

    /// The report's flags in aocheck's words, where they have one.
    pub fn report_flags(&self) -> (BTreeSet<Flag>, Vec<String>) {
        let (f, u, _) = mapped(&self.report.missing_knowledge, &self.flag_map);
        (f, u)
    }

    /// The report's words that `flag_map` maps to `null` (no aocheck equivalent): still the
    /// implementation's statement of missing knowledge, compared as words.
    pub fn report_null_words(&self) -> Vec<String> {
        mapped(&self.report.missing_knowledge, &self.flag_map).2
    }
}

/// Flag words in aocheck's vocabulary: the mapped ones, and the ones with no mapping.
/// Words mapped to `null` come third: no flag of aocheck's, yet still a statement of missing
/// knowledge, which a report may not drop.
fn mapped(
    words: &[String],
    map: &BTreeMap<String, Option<Flag>>,
) -> (BTreeSet<Flag>, Vec<String>, Vec<String>) {
    let mut flags = BTreeSet::new();
    let mut unmapped = Vec::new();
    let mut nulls = Vec::new();
    for w in words {
        match map.get(w) {
            Some(Some(f)) => {
                flags.insert(*f);
            }
            // Declared to have no equivalent.
            Some(None) => nulls.push(w.clone()),
            None => match Flag::parse(w) {
                Some(f) => {
                    flags.insert(f);
                }
                None => unmapped.push(w.clone()),
            },
        }
    }
    (flags, unmapped, nulls)
}

/// The canonical bytes of each entry (envelope and own object), for append-only comparison.
pub fn canonical_entries(entries: &[Entry]) -> Result<Vec<Vec<u8>>, String> {
    entries
        .iter()
        .enumerate()
        .map(|(i, e)| canonical_bytes(e).map_err(|err| format!("entries[{i}]: {err}")))
        .collect()
}

/// Verifies a declared `jcs-sha256` chain: each `entry` has `prev` (null first, then the previous
/// entry's `digest`) and `digest`, the SHA-256 of the RFC 8785 bytes of the entry without its
/// `digest` member, written `sha256:<hex>`.
pub fn verify_chain(entries: &[Entry]) -> Result<(), String> {
    verify_chain_known(entries, |_| false)
}

/// [`verify_chain`], where `known(i)` says entry `i` is byte for byte (RFC 8785) an entry whose
/// digest was recomputed and matched before: its digest is not recomputed (its link to the
/// previous entry still is checked).
pub fn verify_chain_known(entries: &[Entry], known: impl Fn(usize) -> bool) -> Result<(), String> {
    let mut prev = Value::Null;
    for (i, e) in entries.iter().enumerate() {
        let Value::Object(obj) = &e.entry else {
            return Err(format!("entries[{i}].entry is not an object"));
        };
        let got_prev = obj.get("prev").cloned().unwrap_or(Value::Null);
        if got_prev != prev {
            return Err(format!(
                "entries[{i}].entry.prev is {got_prev}, the previous digest is {prev}"
            ));
        }
        let digest = obj
            .get("digest")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("entries[{i}].entry has no `digest`"))?;
        if known(i) {
            prev = Value::String(digest.to_string());
            continue;
        }
        let mut unsealed = obj.clone();
        unsealed.remove("digest");
        let bytes =
            canonical_bytes(&Value::Object(unsealed)).map_err(|e| format!("entries[{i}]: {e}"))?;
        let want = Digest::of_bytes(&bytes).to_string();
        if digest != want {
            return Err(format!(
                "entries[{i}].entry.digest is {digest}, its content hashes to {want}"
            ));
        }
        prev = Value::String(digest.to_string());
    }
    Ok(())
}

/// What a history says, folded from its mapped distinctions alone.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct View {
    pub created: bool,
    pub binding_digest: Option<String>,
    /// The latest generation named by a `prepared` or `replaced` entry.
    pub generation: Option<u64>,
    /// The latest generation named by a `prepared` entry (the capturing generation).
    pub captured_generation: Option<u64>,
    pub attempts: Vec<String>,
    pub acknowledged: bool,
    pub released: bool,
    pub outcome: Option<Outcome>,
    /// Flags raised by observations (aocheck's words where mapped), and the words with no
    /// mapping.
    pub flags: BTreeSet<Flag>,
    pub unmapped: Vec<String>,
    /// Words raised that `flag_map` maps to `null`.
    pub null_words: Vec<String>,
    pub remedies: Vec<String>,
    /// Order the distinctions do not allow (an entry before its occurrence exists, a decision
    /// before entry …).
    pub illegal: Vec<String>,
}

impl View {
    /// Whether `r` is the cautious reading of this history (GUIDE §4, "honest caution passes";
    /// D74): unresolved with no outcome claimed, where the history decided (or decided and then
    /// met conflicting evidence, which keeps its old outcome on record). The report then says
    /// less than the history allows, never something else.
    pub fn says_less(&self, r: &Report) -> bool {
        matches!(self.state(), State::Resolved | State::Unresolved)
            && r.state == State::Unresolved
            && r.outcome.is_none()
    }

    pub fn of(entries: &[Entry], map: &BTreeMap<String, Option<Flag>>) -> View {
        let mut v = View::default();
        let mut terminal: Vec<Interpretation> = Vec::new();
        for (i, e) in entries.iter().enumerate() {
            let mut illegal = |why: &str| v_illegal(&mut v.illegal, i, e.kind, why);
            if i == 0 && e.kind != Kind::Created {
                illegal("the first entry must record the occurrence's creation");
            }
            match e.kind {
                Kind::Created if i > 0 => illegal("the occurrence is created once"),
                Kind::Created => {
                    v.created = true;
                    // AOC §4.3 allows fixing the binding when the occurrence is created.
                    if e.binding_digest.is_some() {
                        v.binding_digest = e.binding_digest.clone();
                    }
                }
                Kind::Prepared => {
                    if v.released || !v.attempts.is_empty() {
                        illegal("prepared after entry or release");
                    }
                    v.binding_digest = e.binding_digest.clone();
                    v.generation = e.generation;
                    v.captured_generation = e.generation;
                }
                Kind::Entered => {
                    if v.binding_digest.is_none() {
                        illegal("entered without being prepared");
                    }
                    if v.released {
                        illegal("entered after release");
                    }
                    if let Some(a) = &e.attempt {
                        v.attempts.push(a.clone());
                    }
                }
                Kind::Acknowledged => {
                    if v.attempts.is_empty() {
                        illegal("acknowledged without entry");
                    }
                    v.acknowledged = true;
                }
                Kind::Observed => {
                    let (f, u, n) = mapped(&e.flags, map);
                    v.flags.extend(f);
                    v.unmapped.extend(u);
                    v.null_words.extend(n);
                    // Two authoritative terminal answers that disagree are a conflict (§4.11).
                    if let Some(c) = e.interpretation
                        && c != Interpretation::Accepted
                    {
                        if terminal.iter().any(|t| *t != c) {
                            v.flags.insert(Flag::Conflicting);
                        }
                        terminal.push(c);
                    }
                }
                Kind::Decided => {
                    if v.attempts.is_empty() {
                        illegal("a terminal decision without provider entry");
                    }
                    if v.flags.contains(&Flag::Conflicting) {
                        illegal("a terminal decision over conflicting evidence");
                    }
                    v.outcome = e.outcome;
                    // Decided: earlier gaps are history; a conflict never is.
                    v.flags.retain(|f| *f == Flag::Conflicting);
                    v.unmapped.clear();
                    v.null_words.clear();
                }
                Kind::Released => v.released = true,
                Kind::Replaced => v.generation = e.generation.or(v.generation),
                Kind::RemedyLinked => v.remedies.extend(e.remedy.clone()),
                Kind::Other => {}
            }
        }
        v
    }

    /// Where the occurrence stands by its history.
    pub fn state(&self) -> State {
        if self.released {
            State::Released
        } else if self.outcome.is_some() && !self.flags.contains(&Flag::Conflicting) {
            State::Resolved
        } else if !self.attempts.is_empty() {
            State::Unresolved
        } else {
            State::Pending
        }
    }

    pub fn provider_entry(&self) -> ProviderEntry {
        if self.acknowledged {
            ProviderEntry::Acknowledged
        } else if self.attempts.is_empty() {
            ProviderEntry::NotEntered
        } else {
            ProviderEntry::Entered
        }
    }

    /// Authority by the history: held once prepared, consumed at entry (and for good), released
    /// with a pre-entry release.
    pub fn authority(&self) -> Authority {
        if !self.attempts.is_empty() {
            Authority::Consumed
        } else if self.released && self.binding_digest.is_some() {
            Authority::Released
        } else if self.binding_digest.is_some() {
            Authority::Held
        } else {
            Authority::None
        }
    }
}

/// §5: "AADP expiry MAY release only the AADP-native permit reservation; it MUST NOT erase the AOC
/// occurrence tombstone, relabel serialized provider entry as non-entry, restore BCR allowance
/// already consumed at provider entry, or authorize another attempt for that occurrence." Once
/// an occurrence is entered or released, AADP expiry may change nothing of its report; before
/// entry the domain's own serial read may still release it (AOC-REQ-008). The first change
/// found, with the requirement it breaks.
pub fn aadp_expiry_change(before: &Report, after: &Report) -> Option<(crate::aoc::Req, String)> {
    use crate::aoc::Req;
    if before.entry_attempts == 0 && before.state != State::Released {
        return None;
    }
    if after.state != before.state
        || after.entry_attempts != before.entry_attempts
        || after.provider_entry != before.provider_entry
    {
        let req = if before.state == State::Released {
            Req::R008
        } else {
            Req::R010
        };
        return Some((
            req,
            format!(
                "{} with {} entry attempt(s) became {} with {}",
                before.state, before.entry_attempts, after.state, after.entry_attempts
            ),
        ));
    }
    if after.authority != before.authority {
        return Some((
            Req::R012,
            format!("authority {} became {}", before.authority, after.authority),
        ));
    }
    if after.outcome != before.outcome {
        let word = |o: Option<Outcome>| o.map_or("none".to_string(), |o| o.to_string());
        return Some((
            Req::R009,
            format!(
                "outcome {} became {}",
                word(before.outcome),
                word(after.outcome)
            ),
        ));
    }
    None
}

fn v_illegal(out: &mut Vec<String>, i: usize, kind: Kind, why: &str) {
    out.push(format!("entries[{i}] ({kind:?}): {why}"));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(kind: Kind) -> Entry {
        Entry::bare(kind, json!({"mine": kind}))
    }

    fn path() -> Vec<Entry> {
        let mut p = entry(Kind::Prepared);
        p.generation = Some(1);
        p.binding_digest = Some("b".into());
        let mut n = entry(Kind::Entered);
        n.generation = Some(1);
        n.attempt = Some("a1".into());
        let mut o = entry(Kind::Observed);
        o.source = Some("get".into());
        o.source_kind = Some(SourceKind::Lookup);
        o.authenticated = Some(true);
        o.interpretation = Some(Interpretation::Success);
        let mut d = entry(Kind::Decided);
        d.outcome = Some(Outcome::Success);
        d.evidence = vec![3];
        vec![entry(Kind::Created), p, n, o, d]
    }

    #[test]
    fn a_whole_path_folds_to_resolved_with_authority_consumed() {
        let v = View::of(&path(), &BTreeMap::new());
        assert!(v.illegal.is_empty(), "{:?}", v.illegal);
        assert_eq!(v.state(), State::Resolved);
        assert_eq!(v.authority(), Authority::Consumed);
        assert_eq!(v.provider_entry(), ProviderEntry::Entered);
        assert_eq!(v.outcome, Some(Outcome::Success));
    }

    /// AOC §4.3 allows fixing the binding at creation: a binding digest on `created` is the
    /// history's binding from then on (a report that names it before reservation is true).
    #[test]
    fn a_binding_fixed_at_creation_is_the_history_s_binding() {
        let mut created = entry(Kind::Created);
        created.binding_digest = Some("b".into());
        let v = View::of(std::slice::from_ref(&created), &BTreeMap::new());
        assert_eq!(v.binding_digest.as_deref(), Some("b"));
        assert!(v.illegal.is_empty(), "{:?}", v.illegal);
        let mut whole = path();
        whole[0] = created;
        assert_eq!(
            View::of(&whole, &BTreeMap::new()).binding_digest.as_deref(),
            Some("b")
        );
    }

    #[test]
    fn order_the_distinctions_forbid_is_found() {
        let mut p = path();
        p.swap(1, 2); // entered before prepared
        assert!(!View::of(&p, &BTreeMap::new()).illegal.is_empty());
        let mut q = path();
        q.remove(2); // decided without entry
        q[3].evidence = vec![2];
        let v = View::of(&q, &BTreeMap::new());
        assert!(
            v.illegal
                .iter()
                .any(|w| w.contains("without provider entry"))
        );
    }

    #[test]
    fn every_kind_names_the_fields_it_lacks() {
        let a = StateAnswer {
            entries: vec![
                entry(Kind::Created),
                entry(Kind::Entered),
                entry(Kind::Decided),
                entry(Kind::Observed),
                entry(Kind::Prepared),
            ],
            report: serde_json::from_value(json!({
                "occurrence": "o", "domain": "d", "executor_generation": 1, "state": "pending",
                "provider_entry": "not_entered", "authority": "none", "entry_attempts": 0
            }))
            .expect("report"),
            chain: Some("md5".into()),
            flag_map: BTreeMap::new(),
            report_generation: Default::default(),
        };
        let d = a.defects().join("\n");
        for needle in [
            "entries[1].generation",
            "entries[1].attempt",
            "entries[2].outcome",
            "entries[3].source",
            "entries[3].source_kind",
            "entries[3].authenticated",
            "entries[4].generation",
            "entries[4].binding_digest",
            "chain",
        ] {
            assert!(d.contains(needle), "{needle} missing from {d}");
        }
    }

    #[test]
    fn own_flag_words_count_through_the_map_and_unmapped_ones_are_kept() {
        let mut p = path();
        p.truncate(4); // no decision yet: the gaps stand
        p[3].flags = vec!["wire-lost".into(), "hmm".into(), "cosmic-rays".into()];
        // `cosmic-rays` is declared to have no aocheck equivalent: neither a flag nor unmapped.
        let map = BTreeMap::from([
            ("wire-lost".to_string(), Some(Flag::Transport)),
            ("cosmic-rays".to_string(), None),
        ]);
        let v = View::of(&p, &map);
        assert_eq!(v.flags, BTreeSet::from([Flag::Transport]));
        assert_eq!(v.unmapped, vec!["hmm".to_string()]);
    }

    fn report(state: State, entries: u32, authority: Authority) -> Report {
        Report {
            occurrence: "o".into(),
            domain: "d".into(),
            executor_generation: 1,
            binding_digest: None,
            state,
            outcome: None,
            provider_entry: if entries > 0 {
                ProviderEntry::Entered
            } else {
                ProviderEntry::NotEntered
            },
            authority,
            entry_attempts: entries,
            evidence_sources: Vec::new(),
            missing_knowledge: Vec::new(),
            remedies: Vec::new(),
        }
    }

    #[test]
    fn aadp_expiry_may_change_nothing_once_entered_or_released() {
        use crate::aoc::Req;
        let entered = report(State::Unresolved, 1, Authority::Consumed);
        assert_eq!(aadp_expiry_change(&entered, &entered), None);
        let tomb = report(State::Released, 0, Authority::Released);
        let reserved = report(State::Pending, 0, Authority::Held);
        // Entry relabelled as non-entry.
        let relabelled = report(State::Released, 0, Authority::Released);
        assert_eq!(
            aadp_expiry_change(&entered, &relabelled).map(|x| x.0),
            Some(Req::R010)
        );
        // A tombstone erased.
        assert_eq!(
            aadp_expiry_change(&tomb, &reserved).map(|x| x.0),
            Some(Req::R008)
        );
        // Consumed authority restored, the standing kept.
        let restored = report(State::Unresolved, 1, Authority::Released);
        assert_eq!(
            aadp_expiry_change(&entered, &restored).map(|x| x.0),
            Some(Req::R012)
        );
        // An outcome made up.
        let mut invented = entered.clone();
        invented.outcome = Some(Outcome::Success);
        assert_eq!(
            aadp_expiry_change(&entered, &invented).map(|x| x.0),
            Some(Req::R009)
        );
        // Before entry the domain may still release by its own serial read (AOC-REQ-008).
        assert_eq!(aadp_expiry_change(&reserved, &tomb), None);
    }

    fn sealed(bodies: &[Value]) -> Vec<Entry> {
        let mut prev = Value::Null;
        bodies
            .iter()
            .map(|b| {
                let mut obj = serde_json::Map::new();
                obj.insert("body".into(), b.clone());
                obj.insert("prev".into(), prev.clone());
                let d = Digest::of_bytes(
                    &canonical_bytes(&Value::Object(obj.clone())).expect("canonical"),
                )
                .to_string();
                obj.insert("digest".into(), Value::String(d.clone()));
                prev = Value::String(d);
                let mut e = entry(Kind::Other);
                e.entry = Value::Object(obj);
                e
            })
            .collect()
    }

    #[test]
    fn a_declared_chain_verifies_and_any_change_breaks_it() {
        let good = sealed(&[json!({"a": 1}), json!({"b": 2}), json!({"c": 3})]);
        assert_eq!(verify_chain(&good), Ok(()));
        let mut rewritten = good.clone();
        rewritten[1].entry["body"] = json!({"b": 3});
        assert!(verify_chain(&rewritten).is_err());
        let mut dropped = good.clone();
        dropped.remove(1);
        assert!(verify_chain(&dropped).is_err());
    }

    #[test]
    fn an_entry_known_verified_skips_only_its_hash() {
        let good = sealed(&[json!({"a": 1}), json!({"b": 2}), json!({"c": 3})]);
        assert_eq!(verify_chain_known(&good, |_| true), Ok(()));
        // Not known: a rewritten entry is hashed and caught.
        let mut rewritten = good.clone();
        rewritten[1].entry["body"] = json!({"b": 3});
        assert!(verify_chain_known(&rewritten, |i| i != 1).is_err());
        // Known or not, an entry taken out breaks the links.
        let mut dropped = good.clone();
        dropped.remove(1);
        assert!(verify_chain_known(&dropped, |_| true).is_err());
    }
}
