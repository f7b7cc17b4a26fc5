//! Total ground truth (GUIDE §4): every effect and every create request in the provider's ledger
//! is attributed to an occurrence through the implementation's *declared* key rule, or reported
//! as unattributed. Nothing here assumes how an implementation derives its keys: the rule is what
//! the implementation said in its `init` answer (`key_rule`), and it is reported.
//!
//! AOC-REQ-010: "An unresolved or terminal occurrence MUST NOT enter the provider again […] a
//! provider idempotency key is not permission for a second attempt." So a second create request
//! for one occurrence is a finding even when the provider answered it from its idempotency store
//! (the request log says `replayed`), and an effect no occurrence accounts for is a finding too:
//! it is a provider entry the coordination domain did not serialise (AOC-REQ-001, -010).

use provider_model::payments::faults::Op;
use provider_model::payments::ledger::{Effect, EffectKind, Ledger, RequestRecord};
use std::collections::BTreeMap;
use std::fmt;

/// The placeholder a key rule puts where the occurrence id goes.
pub const PLACEHOLDER: &str = "{occurrence}";

/// A declared key rule written as its text (`"aoc-{occurrence}"`) and parsed back.
pub mod key_rule_text {
    use super::KeyRule;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(r: &Option<KeyRule>, s: S) -> Result<S::Ok, S::Error> {
        match r {
            Some(r) => s.serialize_some(&r.to_string()),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<KeyRule>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|t| KeyRule::parse(&t).map_err(serde::de::Error::custom))
            .transpose()
    }
}

/// How an implementation derives the provider's Idempotency-Key from an occurrence id: a template
/// with exactly one `{occurrence}` (`{occurrence}`, `aoc-{occurrence}`, `{occurrence}/v1`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyRule {
    prefix: String,
    suffix: String,
}

impl KeyRule {
    /// Parses a declared rule; the error names what is wrong and how to write one.
    pub fn parse(rule: &str) -> Result<KeyRule, String> {
        let n = rule.matches(PLACEHOLDER).count();
        if n != 1 {
            return Err(format!(
                "key_rule {rule:?} must contain {PLACEHOLDER} exactly once (found {n}); for example \"{PLACEHOLDER}\" or \"aoc-{PLACEHOLDER}\""
            ));
        }
        let (prefix, suffix) = rule.split_once(PLACEHOLDER).unwrap_or((rule, ""));
        Ok(KeyRule {
            prefix: prefix.to_string(),
            suffix: suffix.to_string(),
        })
    }

    /// The key the rule gives an occurrence.
    pub fn key_for(&self, occurrence: &str) -> String {
        format!("{}{occurrence}{}", self.prefix, self.suffix)
    }
}

impl fmt::Display for KeyRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{PLACEHOLDER}{}", self.prefix, self.suffix)
    }
}

/// The provider's ledger, attributed.
#[derive(Debug, Default)]
pub struct Accounting<'a> {
    /// Payment creations by occurrence id.
    pub effects: BTreeMap<String, Vec<&'a Effect>>,
    /// Create requests by occurrence id (replayed ones included).
    pub creates: BTreeMap<String, Vec<&'a RequestRecord>>,
    /// Every other effect (captures, refunds) by the occurrence whose key it was made under.
    pub mutations: BTreeMap<String, Vec<&'a Effect>>,
    /// Every other effectful request (capture, refund) by the occurrence whose key it carries.
    pub mutation_requests: BTreeMap<String, Vec<&'a RequestRecord>>,
    /// Effects of any kind under a key that no occurrence's key is, or under no key.
    pub unattributed_effects: Vec<&'a Effect>,
    /// Effectful requests of any kind (create, capture, refund) under a key that no
    /// occurrence's key is, or under no key.
    pub unattributed_creates: Vec<&'a RequestRecord>,
    /// Which occurrence created each payment (by the key its creation carried).
    pub payment_owner: BTreeMap<String, String>,
    /// Lookups and listings about each occurrence: a `GET /v1/payments/{id}` of a payment it
    /// created, a listing filtered by its key, and every unfiltered listing of its account.
    pub lookups: BTreeMap<String, Vec<&'a RequestRecord>>,
}

impl<'a> Accounting<'a> {
    /// Attributes every effect and every request of `ledger` to one of `occurrences` (ids) by
    /// `rule`. Without a rule nothing can be attributed, so everything is unattributed.
    pub fn of(ledger: &'a Ledger, rule: Option<&KeyRule>, occurrences: &[&str]) -> Self {
        let keys: BTreeMap<String, String> = match rule {
            Some(r) => occurrences
                .iter()
                .map(|o| (r.key_for(o), o.to_string()))
                .collect(),
            None => BTreeMap::new(),
        };
        let owner = |k: &Option<String>| k.as_ref().and_then(|k| keys.get(k)).cloned();
        let mut out = Accounting::default();
        for e in &ledger.effects {
            let by_key = owner(&e.idempotency_key);
            match (e.kind, by_key) {
                (EffectKind::PaymentCreated, Some(o)) => {
                    out.payment_owner.insert(e.payment_id.clone(), o.clone());
                    out.effects.entry(o).or_default().push(e)
                }
                (_, Some(o)) => out.mutations.entry(o).or_default().push(e),
                (_, None) => out.unattributed_effects.push(e),
            }
        }
        for r in &ledger.requests {
            if r.op.is_effectful() {
                match (r.op, owner(&r.idempotency_key)) {
                    (Op::Create, Some(o)) => out.creates.entry(o).or_default().push(r),
                    (_, Some(o)) => out.mutation_requests.entry(o).or_default().push(r),
                    (_, None) => out.unattributed_creates.push(r),
                }
                continue;
            }
            // A read: which occurrences it is about.
            let about: Vec<String> = match (&r.payment_id, &r.lookup_key) {
                (Some(id), _) => out.payment_owner.get(id).cloned().into_iter().collect(),
                (None, Some(k)) => keys.get(k).cloned().into_iter().collect(),
                (None, None) if r.op == Op::List => {
                    // An unfiltered listing covers every payment of its account.
                    occurrences.iter().map(|o| o.to_string()).collect()
                }
                (None, None) => Vec::new(),
            };
            for o in about {
                out.lookups.entry(o).or_default().push(r);
            }
        }
        out
    }

    /// The payment creations attributed to one occurrence.
    pub fn effects_of(&self, occurrence: &str) -> &[&'a Effect] {
        self.effects.get(occurrence).map_or(&[], Vec::as_slice)
    }

    /// The create requests attributed to one occurrence.
    pub fn creates_of(&self, occurrence: &str) -> &[&'a RequestRecord] {
        self.creates.get(occurrence).map_or(&[], Vec::as_slice)
    }

    /// The captures and refunds made under one occurrence's key.
    pub fn mutations_of(&self, occurrence: &str) -> &[&'a Effect] {
        self.mutations.get(occurrence).map_or(&[], Vec::as_slice)
    }

    /// The capture and refund requests sent under one occurrence's key.
    pub fn mutation_requests_of(&self, occurrence: &str) -> &[&'a RequestRecord] {
        self.mutation_requests
            .get(occurrence)
            .map_or(&[], Vec::as_slice)
    }

    /// The lookups and listings the provider received about one occurrence.
    pub fn lookups_of(&self, occurrence: &str) -> &[&'a RequestRecord] {
        self.lookups.get(occurrence).map_or(&[], Vec::as_slice)
    }
}

/// How one unattributed effect or request reads in a finding.
pub fn key_words(k: &Option<String>) -> String {
    match k {
        Some(k) => format!("under key {k:?}"),
        None => "with no Idempotency-Key".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case("{occurrence}", "occ_1", "occ_1")]
    #[case("aoc-{occurrence}", "occ_1", "aoc-occ_1")]
    #[case("{occurrence}/v2", "occ_1", "occ_1/v2")]
    fn a_rule_gives_each_occurrence_its_key(
        #[case] rule: &str,
        #[case] occ: &str,
        #[case] key: &str,
    ) {
        let r = KeyRule::parse(rule).expect("valid rule");
        assert_eq!(r.key_for(occ), key);
        assert_eq!(r.to_string(), rule);
    }

    fn request(seq: u64, key: Option<&str>, replayed: bool) -> RequestRecord {
        RequestRecord {
            seq,
            op: Op::Create,
            account: Some("acct".into()),
            idempotency_key: key.map(str::to_string),
            request_digest: "d".into(),
            payment_id: None,
            lookup_key: None,
            fault: None,
            refs: Vec::new(),
            status: 201,
            replayed,
            effect: !replayed,
            reply: provider_model::payments::ledger::Reply::Written,
            credential: "account".into(),
            revoked: false,
            user_agent: None,
            stripe_version: None,
            dialect: None,
            received_ms: None,
        }
    }

    fn effect(seq: u64, key: Option<&str>) -> Effect {
        Effect {
            seq,
            kind: EffectKind::PaymentCreated,
            account: "acct".into(),
            payment_id: format!("pay_{seq}"),
            refund_id: None,
            amount: 1250,
            currency: "EUR".into(),
            status: "succeeded".into(),
            request_digest: "d".into(),
            idempotency_key: key.map(str::to_string),
            fault: None,
            request_seq: seq,
            reply: provider_model::payments::ledger::Reply::Written,
            at_ms: None,
        }
    }

    /// Both directions: an implementation's own key rule attributes its payment (honest); a
    /// fresh key, no key or a replayed resend are all visible (liars).
    #[test]
    fn the_ledger_is_attributed_by_the_declared_rule_only() {
        let ledger = Ledger {
            effects: vec![
                effect(1, Some("aoc-o1")),
                effect(3, Some("o1-retry")),
                effect(4, None),
            ],
            requests: vec![
                request(1, Some("aoc-o1"), false),
                request(2, Some("aoc-o1"), true),
                request(3, Some("o1-retry"), false),
                request(4, None, false),
            ],
        };
        let rule = KeyRule::parse("aoc-{occurrence}").expect("rule");
        let a = Accounting::of(&ledger, Some(&rule), &["o1"]);
        assert_eq!(a.effects_of("o1").len(), 1);
        assert_eq!(
            a.creates_of("o1").len(),
            2,
            "the replayed resend is counted"
        );
        assert_eq!(a.unattributed_effects.len(), 2);
        assert_eq!(a.unattributed_creates.len(), 2);
        // Another rule than the one used: nothing is credited, everything is reported.
        let wrong = KeyRule::parse("{occurrence}").expect("rule");
        let b = Accounting::of(&ledger, Some(&wrong), &["o1"]);
        assert!(b.effects_of("o1").is_empty());
        assert_eq!(b.unattributed_effects.len(), 3);
        let none = Accounting::of(&ledger, None, &["o1"]);
        assert_eq!(none.unattributed_creates.len(), 4);
    }

    #[rstest]
    #[case("occurrence")]
    #[case("")]
    #[case("{occurrence}-{occurrence}")]
    fn a_rule_without_exactly_one_placeholder_is_refused(#[case] rule: &str) {
        let e = KeyRule::parse(rule).expect_err("invalid rule");
        assert!(e.contains("exactly once"), "{e}");
    }
}
