//! The provider's ledger read field by field (GUIDE §4, "ground truth is total, and it is read,
//! not counted"): for one occurrence, every attributed effect is compared with what the case
//! asked for; every capture and refund belongs to a remedy linked to the payment's occurrence;
//! every lookup or listing the history claims was really served by the provider for that
//! occurrence; and an acknowledged provider reference is the occurrence's own effect, learned
//! from a reply the provider wrote.
//!
//! Each finding here is a value (requirement, what the ledger says); the caller files it under
//! its checker.

use super::accounting::Accounting;
use super::evidence::{Kind, SourceKind, StateAnswer};
use crate::aoc::requirement::Req;
use crate::vocab::RemedyKind;
use provider_model::payments::faults::Op;
use provider_model::payments::ledger::{EffectKind, Reply};
use std::collections::BTreeMap;

/// What the case asked of one occurrence: its payment.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Asked {
    pub amount: i64,
    pub currency: String,
    pub account: String,
}

/// A remedy occurrence, as the case created it: the original it is linked to and its kind.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Remedy {
    pub original: String,
    pub kind: RemedyKind,
}

impl Remedy {
    /// Whether this kind of remedy may move money back on the original's payment (a refund,
    /// reversal, compensation or adjustment does; a replacement attempt or a new allocation makes
    /// a payment of its own).
    fn may_refund(&self) -> bool {
        matches!(
            self.kind,
            RemedyKind::Refund
                | RemedyKind::Reversal
                | RemedyKind::Compensation
                | RemedyKind::Adjustment
        )
    }
}

/// effect_as_asked (AOC-REQ-003): "the exact request bytes or a deterministic digest of its full
/// representation" are bound before entry, and "all later admissions … MUST match". The payment
/// the provider made for the occurrence is for the amount, currency and account the case asked;
/// every create request of the occurrence carries one request (one digest). One fact per effect
/// and per create request compared.
pub fn effect_as_asked(
    acct: &Accounting<'_>,
    occurrence: &str,
    asked: Option<&Asked>,
    facts: &mut super::Facts,
) -> Vec<(Req, String)> {
    let mut out = Vec::new();
    let Some(asked) = asked else {
        return out;
    };
    for e in acct.effects_of(occurrence) {
        facts.saw(Req::R003);
        let mut wrong = Vec::new();
        if e.amount != asked.amount {
            wrong.push(format!("amount {} (asked {})", e.amount, asked.amount));
        }
        if !e.currency.eq_ignore_ascii_case(&asked.currency) {
            wrong.push(format!(
                "currency {} (asked {})",
                e.currency, asked.currency
            ));
        }
        if e.account != asked.account {
            wrong.push(format!("account {} (asked {})", e.account, asked.account));
        }
        if !wrong.is_empty() {
            out.push((
                Req::R003,
                format!(
                    "provider payment {} was made for {}: not the request the case asked for (ground truth)",
                    e.payment_id,
                    wrong.join(", ")
                ),
            ));
        }
    }
    let creates = acct.creates_of(occurrence);
    if let Some(first) = creates.first() {
        for r in creates.iter().skip(1) {
            facts.saw(Req::R003);
            if r.request_digest != first.request_digest {
                out.push((
                    Req::R003,
                    format!(
                        "create request {} carried request digest {}, the occurrence's first create request carried {}: the bound request changed (ground truth)",
                        r.seq, r.request_digest, first.request_digest
                    ),
                ));
            }
        }
    }
    out
}

/// mutation_accounted (AOC-REQ-012, -010): "any adjustment, replacement attempt, compensation or
/// new allocation needs separate native authorisation, links to the original occurrence, and has
/// its own replay-protected identity". A capture or refund made under an occurrence's key is
/// accounted for only when it acts on that occurrence's own payment (a capture) or on the payment
/// of the original a remedy of a money-returning kind is linked to. Everything else is a finding.
/// One fact per capture or refund (effect or request) examined.
pub fn mutations_accounted(
    acct: &Accounting<'_>,
    occurrence: &str,
    remedies: &BTreeMap<String, Remedy>,
    facts: &mut super::Facts,
) -> Vec<(Req, String)> {
    let mut out = Vec::new();
    let remedy = remedies.get(occurrence);
    let allowed = |kind: Op, payment: Option<&String>| -> Result<(), String> {
        let owner = payment.and_then(|p| acct.payment_owner.get(p));
        match (kind, owner) {
            (_, None) => Err(format!(
                "on payment {}, which no occurrence of the case created",
                payment.map_or("(none named)", String::as_str)
            )),
            (Op::Capture | Op::Cancel, Some(o)) if o == occurrence => Ok(()),
            (_, Some(o)) => match remedy {
                Some(r)
                    if r.original == *o
                        && (matches!(kind, Op::Capture | Op::Cancel) || r.may_refund()) =>
                {
                    Ok(())
                }
                Some(r) if r.original == *o => Err(format!(
                    "by a {} remedy, which moves no money back on the original's payment",
                    r.kind.name()
                )),
                Some(r) => Err(format!(
                    "on the payment of {o}, while this remedy is linked to {}",
                    r.original
                )),
                None => Err(format!(
                    "on the payment of {o} under the key of {occurrence}, which is no remedy linked to it"
                )),
            },
        }
    };
    for e in acct.mutations_of(occurrence) {
        facts.saw(Req::R012);
        let kind = match e.kind {
            EffectKind::PaymentCaptured => Op::Capture,
            EffectKind::PaymentRefunded => Op::Refund,
            EffectKind::PaymentCanceled => Op::Cancel,
            EffectKind::PaymentCreated => continue,
        };
        if let Err(why) = allowed(kind, Some(&e.payment_id)) {
            out.push((
                Req::R012,
                format!(
                    "the provider recorded a {} of {} {why} (ground truth)",
                    kind.label(),
                    e.amount
                ),
            ));
        }
    }
    // A request that moved nothing (refused by the provider) is still an attempt.
    for r in acct.mutation_requests_of(occurrence) {
        if r.effect {
            continue;
        }
        facts.saw(Req::R012);
        if let Err(why) = allowed(r.op, r.payment_id.as_ref()) {
            out.push((
                Req::R012,
                format!(
                    "a {} request reached the provider {why}, answered {} (ground truth)",
                    r.op.label(),
                    r.status
                ),
            ));
        }
    }
    out
}

/// A reply the provider wrote with its own tag for the request's account.
fn genuine(reply: Reply) -> bool {
    matches!(reply, Reply::Written)
}

/// A reply that reached the client in some form it could read (authentic or not).
fn delivered(reply: Reply) -> bool {
    matches!(
        reply,
        Reply::Written | Reply::Forged | Reply::Misdirected | Reply::ErrorAfterCommit
    )
}

/// evidence_served (AOC-REQ-009, -007): no evidence the provider never gave.
/// - Every `observed` entry from a lookup or a listing stands for a request the provider
///   received about this occurrence: more such observations than lookups (or listings) the
///   provider received for it is AOC-REQ-009 ("store native response and interpretation
///   separately"; an observation of nothing is an invented one).
/// - One presented as authenticated stands for a reply the provider wrote with its own tag for
///   this account: more is AOC-REQ-007 (a response is evidence only if authenticated).
/// - An `acknowledged` entry's `provider_ref` is the id of a payment this occurrence created
///   (AOC-REQ-003, field 5 of the binding), and some reply the provider delivered *before this
///   answer was read* named it (AOC-REQ-009: a reference nobody served is not evidence; one
///   served only later was not known when the history recorded it).
///
/// `requests_before`: the last request the provider had recorded before the answer was read
/// (`None`: every request counts). Requests after it cannot back what the answer says.
/// One fact per observation and acknowledgement compared.
pub fn evidence_served(
    acct: &Accounting<'_>,
    occurrence: &str,
    a: &StateAnswer,
    ledger: &provider_model::payments::ledger::Ledger,
    requests_before: Option<u64>,
    facts: &mut super::Facts,
) -> Vec<(Req, String)> {
    let mut out = Vec::new();
    let before = |seq: u64| requests_before.is_none_or(|m| seq <= m);
    let lookups: Vec<&&provider_model::payments::ledger::RequestRecord> = acct
        .lookups_of(occurrence)
        .iter()
        .filter(|r| before(r.seq))
        .collect();
    for (kind, op, word) in [
        (SourceKind::Lookup, Op::Get, "lookup"),
        (SourceKind::Listing, Op::List, "listing"),
    ] {
        let claimed: Vec<bool> = a
            .entries
            .iter()
            .filter(|e| e.kind == Kind::Observed && e.source_kind == Some(kind))
            .map(|e| e.authenticated == Some(true))
            .collect();
        if claimed.is_empty() {
            continue;
        }
        for _ in &claimed {
            facts.saw(Req::R009);
        }
        let received = lookups.iter().filter(|r| r.op == op).count();
        let served = lookups
            .iter()
            .filter(|r| r.op == op && genuine(r.reply))
            .count();
        let authenticated = claimed.iter().filter(|x| **x).count();
        if claimed.len() > received {
            out.push((
                Req::R009,
                format!(
                    "the history records {} {word} observation(s), but the provider received {received} {word} request(s) about this occurrence (ground truth)",
                    claimed.len()
                ),
            ));
        } else if authenticated > served {
            facts.saw(Req::R007);
            out.push((
                Req::R007,
                format!(
                    "the history records {authenticated} authenticated {word} observation(s), but the provider wrote {served} {word} reply with its own tag for this account (ground truth)"
                ),
            ));
        }
    }
    let own: Vec<&str> = acct
        .effects_of(occurrence)
        .iter()
        .map(|e| e.payment_id.as_str())
        .collect();
    for (i, e) in a.entries.iter().enumerate() {
        if e.kind != Kind::Acknowledged {
            continue;
        }
        let Some(said) = e.provider_ref.as_deref() else {
            // An acknowledgement naming no reference still says the provider acknowledged:
            // some reply it delivered before this answer must have named a payment of this
            // occurrence (AOC-REQ-009).
            facts.saw(Req::R009);
            let own: Vec<&str> = acct
                .effects_of(occurrence)
                .iter()
                .map(|x| x.payment_id.as_str())
                .collect();
            let named = ledger.requests.iter().any(|q| {
                before(q.seq)
                    && delivered(q.reply)
                    && q.refs.iter().any(|x| own.contains(&x.as_str()))
            });
            if !named {
                out.push((
                    Req::R009,
                    format!(
                        "entries[{i}] records an acknowledgement, but no reply the provider delivered before this answer named a payment of this occurrence (ground truth)"
                    ),
                ));
            }
            continue;
        };
        // A reference in the provider's Stripe dialect (a payment intent) names the same
        // payment as its native id.
        let native = provider_model::payments::contract::native_payment_id(said);
        let r = native.as_str();
        facts.saw(Req::R003);
        facts.saw(Req::R009);
        if !own.contains(&r) {
            out.push((
                Req::R003,
                format!(
                    "entries[{i}] acknowledges provider reference {said:?}, which is not a payment this occurrence created ({}) (ground truth)",
                    if own.is_empty() {
                        "it created none".to_string()
                    } else {
                        own.join(", ")
                    }
                ),
            ));
        } else if !ledger
            .requests
            .iter()
            .any(|q| before(q.seq) && delivered(q.reply) && q.refs.iter().any(|x| x == r))
        {
            out.push((
                Req::R009,
                format!(
                    "entries[{i}] acknowledges provider reference {said:?}, but no reply the provider delivered before this answer named it (ground truth{})",
                    match ledger
                        .requests
                        .iter()
                        .find(|q| delivered(q.reply) && q.refs.iter().any(|x| x == r))
                    {
                        Some(q) => format!(": request #{} named it only later", q.seq),
                        None => String::new(),
                    }
                ),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::accounting::KeyRule;
    use provider_model::payments::ledger::{Effect, Ledger, RequestRecord};

    fn effect(seq: u64, kind: EffectKind, key: &str, payment: &str) -> Effect {
        Effect {
            seq,
            kind,
            account: "acct_a".into(),
            payment_id: payment.into(),
            refund_id: None,
            amount: 1250,
            currency: "eur".into(),
            status: "succeeded".into(),
            request_digest: "d".into(),
            idempotency_key: Some(key.into()),
            fault: None,
            request_seq: seq,
            reply: Reply::Written,
            at_ms: None,
        }
    }

    fn request(seq: u64, op: Op, key: &str, refs: &[&str], reply: Reply) -> RequestRecord {
        serde_json::from_value(serde_json::json!({
            "seq": seq, "op": op, "account": "acct_a", "idempotency_key": key,
            "request_digest": "d", "payment_id": null, "lookup_key": null, "fault": null,
            "refs": refs, "status": 200, "replayed": false, "effect": op == Op::Create,
            "reply": reply, "credential": "p1", "revoked": false}))
        .expect("request record")
    }

    /// Both directions of the acknowledgement rule: a reference the provider delivered before
    /// the answer (in the create's reply, or a lookup's) backs an `acknowledged` entry; one the
    /// provider named only after the answer was read, or only in a reply it lost or garbled,
    /// does not (AOC-REQ-009).
    #[rstest::rstest]
    #[case::from_the_create_reply(Reply::Written, None, Some(4), true)]
    #[case::from_a_lookup(Reply::Dropped, Some((5, Reply::Written)), Some(5), true)]
    #[case::every_request_counts_without_a_bound(Reply::Dropped, Some((9, Reply::Written)), None, true)]
    #[case::named_only_after_the_answer(Reply::Dropped, Some((9, Reply::Written)), Some(5), false)]
    #[case::only_in_a_lost_reply(Reply::Dropped, None, Some(9), false)]
    #[case::only_in_a_garbled_reply(Reply::Garbled, None, Some(9), false)]
    fn an_acknowledgement_needs_a_reply_delivered_before_the_answer(
        #[case] create_reply: Reply,
        #[case] lookup: Option<(u64, Reply)>,
        #[case] requests_before: Option<u64>,
        #[case] backed: bool,
    ) {
        let mut requests = vec![request(2, Op::Create, "o1", &["pay_1"], create_reply)];
        if let Some((seq, reply)) = lookup {
            requests.push(request(seq, Op::Get, "", &["pay_1"], reply));
        }
        let mut created = effect(1, EffectKind::PaymentCreated, "o1", "pay_1");
        created.request_seq = 2;
        let ledger = Ledger {
            effects: vec![created],
            requests,
        };
        let rule = KeyRule::parse("{occurrence}").expect("rule");
        let acct = Accounting::of(&ledger, Some(&rule), &["o1"]);
        let a: StateAnswer = serde_json::from_value(serde_json::json!({
            "entries": [{"kind": "created", "entry": {}}, {"kind": "acknowledged", "provider_ref": "pay_1", "entry": {}}],
            "report": {"occurrence": "o1", "domain": "d", "executor_generation": 1,
                       "state": "pending", "provider_entry": "entered",
                       "authority": "consumed", "entry_attempts": 1}}))
        .expect("answer");
        let mut facts = crate::check::Facts::default();
        let found = evidence_served(&acct, "o1", &a, &ledger, requests_before, &mut facts);
        assert_eq!(found.is_empty(), backed, "{found:?}");
        assert!(found.iter().all(|(r, _)| *r == Req::R009), "{found:?}");
        assert!(facts.count(Req::R009) >= 1);
    }

    /// A reference in the Stripe dialect names the same payment as its native id: the
    /// occurrence's own intent is backed, another payment's intent is not (AOC-REQ-003).
    #[rstest::rstest]
    #[case::own_intent("pi_1", true)]
    #[case::own_native("pay_1", true)]
    #[case::another_intent("pi_2", false)]
    fn a_stripe_intent_id_names_its_native_payment(#[case] said: &str, #[case] backed: bool) {
        let mut created = effect(1, EffectKind::PaymentCreated, "o1", "pay_1");
        created.request_seq = 2;
        let ledger = Ledger {
            effects: vec![created],
            requests: vec![request(2, Op::Create, "o1", &["pay_1"], Reply::Written)],
        };
        let rule = KeyRule::parse("{occurrence}").expect("rule");
        let acct = Accounting::of(&ledger, Some(&rule), &["o1"]);
        let a: StateAnswer = serde_json::from_value(serde_json::json!({
            "entries": [{"kind": "created", "entry": {}}, {"kind": "acknowledged", "provider_ref": said, "entry": {}}],
            "report": {"occurrence": "o1", "domain": "d", "executor_generation": 1,
                       "state": "pending", "provider_entry": "acknowledged",
                       "authority": "consumed", "entry_attempts": 1}}))
        .expect("answer");
        let mut facts = crate::check::Facts::default();
        let found = evidence_served(&acct, "o1", &a, &ledger, None, &mut facts);
        assert_eq!(found.is_empty(), backed, "{found:?}");
        assert!(
            found
                .iter()
                .all(|(r, m)| *r == Req::R003 && m.contains(said)),
            "{found:?}"
        );
    }

    /// Both directions of mutation_accounted: a capture of its own payment and a refund by a
    /// money-returning remedy linked to the original are accounted for; a refund by a remedy of
    /// another kind, by a remedy linked to another original, or under a key that is no remedy
    /// is a finding.
    #[rstest::rstest]
    #[case::own_capture(EffectKind::PaymentCaptured, "o1", None, true)]
    #[case::refund_by_a_linked_refund(EffectKind::PaymentRefunded, "r1", Some(("o1", RemedyKind::Refund)), true)]
    #[case::refund_by_a_linked_reversal(EffectKind::PaymentRefunded, "r1", Some(("o1", RemedyKind::Reversal)), true)]
    #[case::refund_by_a_replacement(EffectKind::PaymentRefunded, "r1", Some(("o1", RemedyKind::ReplacementAttempt)), false)]
    #[case::refund_by_a_remedy_of_another(EffectKind::PaymentRefunded, "r1", Some(("o2", RemedyKind::Refund)), false)]
    #[case::refund_under_its_own_key(EffectKind::PaymentRefunded, "o1", None, false)]
    #[case::capture_under_another_occurrence(EffectKind::PaymentCaptured, "o2", None, false)]
    fn a_capture_or_refund_is_accounted_only_to_its_payment_s_remedy(
        #[case] kind: EffectKind,
        #[case] under: &str,
        #[case] remedy: Option<(&str, RemedyKind)>,
        #[case] accounted: bool,
    ) {
        let ledger = Ledger {
            effects: vec![
                effect(1, EffectKind::PaymentCreated, "o1", "pay_1"),
                effect(2, EffectKind::PaymentCreated, "o2", "pay_2"),
                effect(3, kind, under, "pay_1"),
            ],
            requests: Vec::new(),
        };
        let rule = KeyRule::parse("{occurrence}").expect("rule");
        let acct = Accounting::of(&ledger, Some(&rule), &["o1", "o2", "r1"]);
        let remedies: BTreeMap<String, Remedy> = remedy
            .map(|(original, kind)| {
                (
                    "r1".to_string(),
                    Remedy {
                        original: original.into(),
                        kind,
                    },
                )
            })
            .into_iter()
            .collect();
        let mut facts = crate::check::Facts::default();
        let found = mutations_accounted(&acct, under, &remedies, &mut facts);
        assert_eq!(found.is_empty(), accounted, "{found:?}");
        assert!(found.iter().all(|(r, _)| *r == Req::R012), "{found:?}");
        assert_eq!(facts.count(Req::R012), 1);
    }
}
