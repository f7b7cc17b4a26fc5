//! Judging a deployment (`aocheck deploy`): what the provider's ground-truth ledger recorded,
//! attributed to occurrences by the rule the deploy file declares, against what the service said
//! through its own business API. The service is never believed about an effect: its label is
//! checked against the ledger, never used in place of it.
//!
//! - `deploy_one_entry` (AOC-REQ-010, -002): at most one provider entry (a creation, declined
//!   or not) per occurrence, whatever the crash, lost reply, 5xx, resubmission or takeover; at
//!   most one create request for it (§4.10: "a provider idempotency key is not permission for a
//!   second attempt": a retry under the same key is a second attempt, even where the provider
//!   replays the first answer; the protocol's `provider_accounting` reads it so too); and no
//!   entry the declared attribution cannot place.
//! - `deploy_outcome_from_ledger` (AOC-REQ-011, -009): a final label the service reports must
//!   be what the ledger shows: `success` only with a payment of the occurrence whose latest state
//!   is succeeded (or authorised, not cancelled), already recorded when the label was shown; `not_accepted` / `final_failure` never while the ledger shows its money moved.
//!   A label still pending at the deadline is no verdict (the requirement is not established).

use super::{Facts, Finding};
use crate::aoc::requirement::Req;
use provider_model::payments::ledger::{EffectKind, Ledger};

/// What the service said of one occurrence while it was watched, and what was asked of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reported {
    pub occurrence: String,
    /// The last label's meaning when it is final (`success`, `not_accepted`, `final_failure`);
    /// `None` while pending at the end.
    pub outcome: Option<&'static str>,
    /// The service's own last label, as it wrote it.
    pub label: String,
    /// Every final label the service reported while it was watched, in order: its text, its
    /// meaning, and how many effects the provider's ledger held when it was first shown (a
    /// terminal outcome reported for a moment and then withdrawn was still reported).
    pub finals: Vec<Shown>,
    /// The fault its entry met, when that made the reply ambiguous.
    pub ambiguity: Ambiguity,
    /// What the order asked the provider for.
    pub amount: i64,
    pub currency: String,
}

/// A final label as shown.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shown {
    pub label: String,
    pub outcome: &'static str,
    /// The ledger's effect count when the label was first read.
    pub effects_then: usize,
}

/// Whether the case's fault was an ambiguous reply (a 5xx after commit, a dropped connection):
/// a terminal failure reported then was inferred from the HTTP class or the transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ambiguity {
    None,
    ErrorAfterCommit,
    Dropped,
    /// A 5xx after commit, and a forged failure event (signed with another secret) delivered
    /// before the real one.
    ForgedEvent,
}

/// Attributes a creation (its payment id and Idempotency-Key) to an occurrence, by the rule a
/// deploy file declares.
pub type Owner<'a> = &'a dyn Fn(&str, Option<&str>) -> Option<String>;

/// A payment's status after the first `upto` effects of the ledger (its last effect's).
fn status_at<'a>(ledger: &'a Ledger, payment: &str, upto: usize) -> Option<&'a str> {
    ledger
        .effects
        .iter()
        .take(upto)
        .rfind(|e| e.payment_id == payment)
        .map(|e| e.status.as_str())
}

/// Judges one case of a deployment. `owner` attributes a creation effect (by its payment id and
/// key) to an occurrence, by the declared rule; `None` for a deployment that declares none.
pub fn judge(
    ledger: &Ledger,
    owner: Option<Owner<'_>>,
    reported: &[Reported],
    facts: &mut Facts,
) -> Vec<Finding> {
    let mut out = Vec::new();
    let Some(owner) = owner else {
        // No attribution: the ledger cannot be read against occurrences; nothing is established.
        return out;
    };
    // Each creation under the order of the case it belongs to; one the rule places under no
    // order of the case (no owner, or an order nobody submitted) is accounted for by nothing.
    let creations: Vec<_> = ledger
        .effects
        .iter()
        .filter(|e| e.kind == EffectKind::PaymentCreated)
        .map(|e| {
            let o = owner(&e.payment_id, e.idempotency_key.as_deref())
                .filter(|o| reported.iter().any(|r| r.occurrence == *o));
            (e, o)
        })
        .collect();
    for e in creations
        .iter()
        .filter(|(_, o)| o.is_none())
        .map(|(e, _)| e)
    {
        out.push(Finding::new(
            "deploy_one_entry",
            Req::R010,
            format!(
                "the provider recorded payment {} ({} {}, key {}, request {}) that the declared attribution places under no order of the case (ground truth)",
                e.payment_id,
                e.amount,
                e.currency,
                e.idempotency_key.as_deref().unwrap_or("none"),
                e.request_seq
            ),
        ));
    }
    for r in reported {
        let ambiguity = r.ambiguity;
        let mine: Vec<_> = creations
            .iter()
            .filter(|(_, o)| o.as_deref() == Some(r.occurrence.as_str()))
            .map(|(e, _)| *e)
            .collect();
        // One occurrence's entries counted: its identity held (002) and it entered once (010).
        facts.saw(Req::R010);
        facts.saw(Req::R002);
        out.extend(second_attempt(ledger, owner, &mine, &r.occurrence));
        if mine.len() > 1 {
            let each = mine
                .iter()
                .map(|e| {
                    format!(
                        "{} ({} {}, {}, key {}, request {}, reply {:?})",
                        e.payment_id,
                        e.amount,
                        e.currency,
                        e.status,
                        e.idempotency_key.as_deref().unwrap_or("none"),
                        e.request_seq,
                        e.reply
                    )
                })
                .collect::<Vec<_>>()
                .join("; ");
            out.push(
                Finding::new(
                    "deploy_one_entry",
                    Req::R010,
                    format!(
                        "the provider recorded {} entries for one occurrence: {each} (ground truth): an entered occurrence entered the provider again",
                        mine.len()
                    ),
                )
                .about(Some(&r.occurrence)),
            );
        }
        // The entry is the order's: its amount and currency as submitted.
        for e in &mine {
            facts.saw(Req::R003);
            if e.amount != r.amount || e.currency != r.currency {
                out.push(
                    Finding::new(
                        "deploy_entry_matches_order",
                        Req::R003,
                        format!(
                            "the provider recorded {} for an amount of {} {}, but the order asked for {} {} (ground truth)",
                            e.payment_id, e.amount, e.currency, r.amount, r.currency
                        ),
                    )
                    .about(Some(&r.occurrence)),
                );
            }
        }
        // Every final label shown is judged: a success against the ledger as it stood when the
        // label was shown (and, for the last label, as it stands at the end); a failure
        // against everything the provider recorded for the order.
        let end = ledger.effects.len();
        let status_of = |upto: usize| -> Vec<(&str, Option<&str>)> {
            mine.iter()
                .filter(|e| (e.seq as usize) <= upto)
                .map(|e| {
                    (
                        e.payment_id.as_str(),
                        status_at(ledger, &e.payment_id, upto),
                    )
                })
                .collect()
        };
        let succeeded = |upto: usize| {
            status_of(upto)
                .iter()
                .any(|(_, s)| matches!(s, Some("succeeded" | "requires_capture")))
        };
        let moved: Vec<String> = status_of(end)
            .iter()
            .filter(|(_, s)| matches!(s, Some("succeeded" | "requires_capture" | "processing")))
            .map(|(p, s)| format!("{p} ({})", s.unwrap_or("?")))
            .collect();
        let describe = |upto: usize| {
            let all = status_of(upto);
            if all.is_empty() {
                "the provider had recorded no entry for it".to_string()
            } else {
                format!(
                    "the provider had recorded only {}",
                    all.iter()
                        .map(|(p, s)| format!("{p} ({})", s.unwrap_or("?")))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        };
        let mut distinct: Vec<&'static str> = Vec::new();
        let last = r.finals.len().saturating_sub(1);
        for (i, shown) in r.finals.iter().enumerate() {
            let said = shown.outcome;
            // `unknown` claims no outcome: an unknown then the real one is no relabelling.
            if said != "unknown" && !distinct.contains(&said) {
                distinct.push(said);
            }
            let at_end = i == last && r.outcome.is_some();
            let wrong = match said {
                "success" if !succeeded(shown.effects_then) => Some(format!(
                    "when it was shown {}",
                    describe(shown.effects_then)
                )),
                "success" if at_end && !succeeded(end) => {
                    Some(format!("at the end {}", describe(end)))
                }
                "not_accepted" | "final_failure" if !moved.is_empty() => {
                    Some(format!("the provider recorded {} for it", moved.join(", ")))
                }
                _ => None,
            };
            if let Some(why) = wrong {
                out.push(
                    Finding::new(
                        "deploy_outcome_from_ledger",
                        Req::R011,
                        format!(
                            "the service reported {:?} ({said}), but {why} (ground truth)",
                            shown.label
                        ),
                    )
                    .about(Some(&r.occurrence)),
                );
                if said != "success" && ambiguity != Ambiguity::None {
                    facts.saw(Req::R009);
                    out.push(
                        Finding::new(
                            "deploy_outcome_from_ledger",
                            Req::R009,
                            format!(
                                "a terminal failure was reported after {}, which proves nothing about the effect",
                                match ambiguity {
                                    Ambiguity::ErrorAfterCommit => "a 5xx reply",
                                    Ambiguity::ForgedEvent =>
                                        "a 5xx reply and a forged failure event (signed with another secret, so unauthenticated)",
                                    _ => "a lost reply",
                                }
                            ),
                        )
                        .about(Some(&r.occurrence)),
                    );
                }
            } else if ambiguity != Ambiguity::None {
                facts.saw(Req::R009);
            }
        }
        out.extend(relabelled(
            "deploy_outcome_from_ledger",
            "service",
            &distinct,
            r,
        ));
        // The outcome is established only by a final label that stands at the end: one shown
        // and then withdrawn to pending establishes nothing (a lie it told is still judged).
        if r.outcome.is_some() {
            facts.saw(Req::R011);
        }
    }
    out
}

/// `deploy_one_entry` (AOC-REQ-010, §4.10): an order with at most one entry still entered
/// twice when two create requests reached the provider for it: the one that made its entry, any
/// other under the same key (a retry the provider answered from its idempotency store, or
/// refused while the first was in flight), any whose reply named its payment, and (by a key
/// rule) any under its key. `mine`: the order's creation effects.
fn second_attempt(
    ledger: &Ledger,
    owner: Owner<'_>,
    mine: &[&provider_model::payments::ledger::Effect],
    occurrence: &str,
) -> Option<Finding> {
    let keys: Vec<&str> = mine
        .iter()
        .filter_map(|e| e.idempotency_key.as_deref())
        .collect();
    let creates: Vec<_> = ledger
        .requests
        .iter()
        .filter(|q| q.op == provider_model::payments::faults::Op::Create)
        .filter(|q| {
            mine.iter().any(|e| e.request_seq == q.seq)
                || q.idempotency_key
                    .as_deref()
                    .is_some_and(|k| keys.contains(&k))
                || q.refs
                    .iter()
                    .any(|x| mine.iter().any(|e| e.payment_id == *x))
                || q.idempotency_key
                    .as_deref()
                    .is_some_and(|k| owner("", Some(k)).as_deref() == Some(occurrence))
        })
        .collect();
    (mine.len() <= 1 && creates.len() > 1).then(|| {
        let replayed = creates.iter().filter(|q| q.replayed).count();
        Finding::new(
            "deploy_one_entry",
            Req::R010,
            format!(
                "{} create requests reached the provider for one occurrence ({}; {replayed} answered from the provider's idempotency store) (ground truth): an occurrence enters the provider once, and a provider idempotency key is not permission for a second attempt (§4.10); after an ambiguous answer, look the payment up",
                creates.len(),
                creates
                    .iter()
                    .map(|q| format!(
                        "request {} key {} answered {}",
                        q.seq,
                        q.idempotency_key.as_deref().unwrap_or("none"),
                        q.status
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
        .about(Some(occurrence))
    })
}

/// AOC-REQ-011: the distinct terminal outcomes a service (or connector) reported for one
/// occurrence, in order; more than one is a terminal interpretation relabelled.
pub(super) fn relabelled(
    checker: &'static str,
    who: &str,
    distinct: &[&str],
    r: &Reported,
) -> Option<Finding> {
    (distinct.len() > 1).then(|| {
        Finding::new(
            checker,
            Req::R011,
            format!(
                "the {who} reported one terminal outcome and then another ({}): a terminal interpretation was relabelled",
                distinct.join(" then ")
            ),
        )
        .about(Some(&r.occurrence))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use provider_model::payments::ledger::{Effect, Reply};
    use rstest::rstest;

    fn effect(seq: u64, payment: &str, key: &str, status: &str) -> Effect {
        Effect {
            seq,
            kind: EffectKind::PaymentCreated,
            account: "acct_a".into(),
            payment_id: payment.into(),
            refund_id: None,
            amount: 2000,
            currency: "usd".into(),
            status: status.into(),
            request_digest: "sha256:00".into(),
            idempotency_key: Some(key.into()),
            fault: None,
            request_seq: seq,
            reply: Reply::Written,
            at_ms: None,
        }
    }

    fn canceled(seq: u64, payment: &str) -> Effect {
        Effect {
            kind: EffectKind::PaymentCanceled,
            ..effect(seq, payment, "cancel-key", "canceled")
        }
    }

    fn by_key(_: &str, key: Option<&str>) -> Option<String> {
        key.and_then(|k| k.strip_prefix("order-"))
            .map(str::to_string)
    }

    fn said(outcome: Option<&'static str>, ambiguity: Ambiguity) -> Vec<Reported> {
        vec![Reported {
            occurrence: "o1".into(),
            outcome,
            label: outcome.unwrap_or("charging").into(),
            finals: outcome
                .map(|o| Shown {
                    label: o.to_string(),
                    outcome: o,
                    effects_then: usize::MAX,
                })
                .into_iter()
                .collect(),
            ambiguity,
            amount: 2000,
            currency: "usd".into(),
        }]
    }

    fn run(effects: Vec<Effect>, reported: &[Reported]) -> (Vec<Req>, Facts) {
        let ledger = Ledger {
            effects,
            requests: Vec::new(),
        };
        let mut facts = Facts::default();
        let f = judge(&ledger, Some(&by_key), reported, &mut facts);
        (f.iter().map(Finding::requirement).collect(), facts)
    }

    #[rstest]
    // Honest alternatives that must pass.
    #[case::one_charge_success(vec![effect(1, "pay_a", "order-o1", "succeeded")], Some("success"), Ambiguity::None, vec![])]
    #[case::a_decline_is_not_accepted(vec![effect(1, "pay_a", "order-o1", "declined")], Some("not_accepted"), Ambiguity::None, vec![])]
    #[case::pending_after_a_5xx(vec![effect(1, "pay_a", "order-o1", "succeeded")], None, Ambiguity::ErrorAfterCommit, vec![])]
    #[case::an_authorisation_is_success(vec![effect(1, "pay_a", "order-o1", "requires_capture")], Some("success"), Ambiguity::None, vec![])]
    // Liars that must fail.
    #[case::two_charges(vec![effect(1, "pay_a", "order-o1", "succeeded"), effect(2, "pay_b", "order-o1", "succeeded")], Some("success"), Ambiguity::None, vec![Req::R010])]
    #[case::a_decline_then_a_charge(vec![effect(1, "pay_a", "order-o1", "declined"), effect(2, "pay_b", "order-o1", "succeeded")], Some("success"), Ambiguity::None, vec![Req::R010])]
    #[case::success_never_recorded(vec![], Some("success"), Ambiguity::None, vec![Req::R011])]
    #[case::success_on_a_decline(vec![effect(1, "pay_a", "order-o1", "declined")], Some("success"), Ambiguity::None, vec![Req::R011])]
    #[case::failed_after_a_5xx_that_charged(vec![effect(1, "pay_a", "order-o1", "succeeded")], Some("final_failure"), Ambiguity::ErrorAfterCommit, vec![Req::R011, Req::R009])]
    #[case::not_accepted_while_charged(vec![effect(1, "pay_a", "order-o1", "succeeded")], Some("not_accepted"), Ambiguity::None, vec![Req::R011])]
    #[case::an_entry_nobody_owns(vec![effect(1, "pay_a", "order-o1", "succeeded"), effect(2, "pay_b", "random-uuid", "succeeded")], Some("success"), Ambiguity::None, vec![Req::R010])]
    #[case::an_entry_under_an_order_nobody_submitted(vec![effect(1, "pay_a", "order-o1", "succeeded"), effect(2, "pay_b", "order-o1-retry1", "succeeded")], Some("success"), Ambiguity::None, vec![Req::R010])]
    #[case::a_cancelled_authorisation_is_no_success(vec![effect(1, "pay_a", "order-o1", "requires_capture"), canceled(2, "pay_a")], Some("success"), Ambiguity::None, vec![Req::R011])]
    #[case::a_cancelled_authorisation_failed(vec![effect(1, "pay_a", "order-o1", "requires_capture"), canceled(2, "pay_a")], Some("final_failure"), Ambiguity::ErrorAfterCommit, vec![])]
    #[case::the_wrong_amount(vec![Effect { amount: 200000, ..effect(1, "pay_a", "order-o1", "succeeded") }], Some("success"), Ambiguity::None, vec![Req::R003])]
    fn the_ledger_decides(
        #[case] effects: Vec<Effect>,
        #[case] outcome: Option<&'static str>,
        #[case] amb: Ambiguity,
        #[case] want: Vec<Req>,
    ) {
        let (got, facts) = run(effects, &said(outcome, amb));
        assert_eq!(got, want);
        assert!(facts.count(Req::R010) > 0, "the entry count was examined");
        assert_eq!(facts.count(Req::R011) > 0, outcome.is_some());
    }

    /// Each deploy checker fires under its own name (the table above asserts requirements).
    #[rstest]
    #[case::two_charges(vec![effect(1, "pay_a", "order-o1", "succeeded"), effect(2, "pay_b", "order-o1", "succeeded")], Some("success"), "deploy_one_entry")]
    #[case::the_wrong_amount(vec![Effect { amount: 200000, ..effect(1, "pay_a", "order-o1", "succeeded") }], Some("success"), "deploy_entry_matches_order")]
    #[case::success_never_recorded(vec![], Some("success"), "deploy_outcome_from_ledger")]
    fn each_deploy_checker_fires_by_name(
        #[case] effects: Vec<Effect>,
        #[case] outcome: Option<&'static str>,
        #[case] checker: &str,
    ) {
        let ledger = Ledger {
            effects,
            requests: Vec::new(),
        };
        let mut facts = Facts::default();
        let f = judge(
            &ledger,
            Some(&by_key),
            &said(outcome, Ambiguity::None),
            &mut facts,
        );
        assert!(f.iter().any(|f| f.checker() == checker), "{f:?}");
    }

    /// The AOC-REQ-009 words name what the service acted on: a 5xx, a lost reply, or a 5xx and
    /// a forged event (DEPLOY-006), never a 5xx where the wrong label came from the event.
    #[rstest]
    #[case::a_5xx(Ambiguity::ErrorAfterCommit, "after a 5xx reply,")]
    #[case::a_lost_reply(Ambiguity::Dropped, "after a lost reply,")]
    #[case::a_forged_event(Ambiguity::ForgedEvent, "a forged failure event")]
    fn the_failure_names_the_ambiguity_it_followed(#[case] amb: Ambiguity, #[case] words: &str) {
        let ledger = Ledger {
            effects: vec![effect(1, "pay_a", "order-o1", "succeeded")],
            requests: Vec::new(),
        };
        let mut facts = Facts::default();
        let f = judge(
            &ledger,
            Some(&by_key),
            &said(Some("not_accepted"), amb),
            &mut facts,
        );
        let r009: Vec<String> = f
            .iter()
            .filter(|f| f.requirement() == Req::R009)
            .map(|f| f.line())
            .collect();
        assert_eq!(r009.len(), 1, "{f:?}");
        assert!(r009[0].contains(words), "{words:?} not in {r009:?}");
    }

    #[rstest]
    // A terminal failure reported for a moment, then success: the lie was still told.
    #[case::declined_then_paid(&[("declined", "not_accepted"), ("paid", "success")], vec![Req::R011, Req::R009, Req::R011])]
    // Success, then a failure label: relabelled, and the failure contradicts the ledger.
    #[case::paid_then_failed(&[("paid", "success"), ("failed", "final_failure")], vec![Req::R011, Req::R009, Req::R011])]
    // The same outcome under two labels of the service is no relabelling.
    #[case::two_labels_one_outcome(&[("paid", "success"), ("settled", "success")], vec![])]
    // Unknown (honest caution, no outcome claimed), then the outcome: no relabelling.
    #[case::unknown_then_paid(&[("unknown", "unknown"), ("paid", "success")], vec![])]
    fn every_final_label_reported_is_judged(
        #[case] finals: &[(&str, &'static str)],
        #[case] want: Vec<Req>,
    ) {
        let last = finals.last().map(|(_, o)| *o);
        let reported = vec![Reported {
            occurrence: "o1".into(),
            outcome: last,
            label: finals.last().map_or("", |(l, _)| l).to_string(),
            finals: finals
                .iter()
                .map(|(l, o)| Shown {
                    label: l.to_string(),
                    outcome: o,
                    effects_then: usize::MAX,
                })
                .collect(),
            ambiguity: Ambiguity::ErrorAfterCommit,
            amount: 2000,
            currency: "usd".into(),
        }];
        let (got, _) = run(vec![effect(1, "pay_a", "order-o1", "succeeded")], &reported);
        assert_eq!(got, want);
    }

    #[test]
    fn success_shown_before_the_charge_existed_was_invented() {
        let shown = |effects_then| Reported {
            occurrence: "o1".into(),
            outcome: Some("success"),
            label: "paid".into(),
            finals: vec![Shown {
                label: "paid".into(),
                outcome: "success",
                effects_then,
            }],
            ambiguity: Ambiguity::None,
            amount: 2000,
            currency: "usd".into(),
        };
        let effects = || vec![effect(1, "pay_a", "order-o1", "succeeded")];
        assert_eq!(run(effects(), &[shown(0)]).0, vec![Req::R011]);
        assert_eq!(run(effects(), &[shown(1)]).0, Vec::<Req>::new());
    }

    #[test]
    fn a_final_label_withdrawn_to_pending_establishes_nothing() {
        let r = Reported {
            occurrence: "o1".into(),
            outcome: None,
            label: "queued".into(),
            finals: vec![Shown {
                label: "paid".into(),
                outcome: "success",
                effects_then: 1,
            }],
            ambiguity: Ambiguity::None,
            amount: 2000,
            currency: "usd".into(),
        };
        let (got, facts) = run(vec![effect(1, "pay_a", "order-o1", "succeeded")], &[r]);
        assert!(got.is_empty());
        assert_eq!(facts.count(Req::R011), 0);
    }

    #[test]
    fn without_an_attribution_nothing_is_established() {
        let ledger = Ledger {
            effects: vec![effect(1, "pay_a", "x", "succeeded")],
            requests: Vec::new(),
        };
        let mut facts = Facts::default();
        let f = judge(
            &ledger,
            None,
            &said(Some("success"), Ambiguity::None),
            &mut facts,
        );
        assert!(f.is_empty());
        assert_eq!(facts.total(), 0);
    }

    fn create_request(
        seq: u64,
        key: Option<&str>,
        replayed: bool,
    ) -> provider_model::payments::ledger::RequestRecord {
        serde_json::from_value(serde_json::json!({
            "seq": seq, "op": "create", "account": "acct_a", "idempotency_key": key,
            "request_digest": "d", "payment_id": null, "lookup_key": null, "fault": null,
            "refs": [], "status": 200, "replayed": replayed, "effect": !replayed,
            "reply": "written", "credential": "account", "revoked": false}))
        .expect("request record")
    }

    /// §4.10 both ways: one create request per order passes; a second one for the same order
    /// fails AOC-REQ-010 whether the provider replayed it under the same key, or it carried
    /// no key and its reply named the order's payment; a lookup is no attempt.
    #[rstest]
    #[case::one_create(vec![create_request(1, Some("order-o1"), false)], false)]
    #[case::a_retry_under_the_same_key(vec![create_request(1, Some("order-o1"), false), create_request(2, Some("order-o1"), true)], true)]
    #[case::a_retry_the_reply_ties_to_the_payment(vec![create_request(1, Some("order-o1"), false), provider_model::payments::ledger::RequestRecord { refs: vec!["pay_a".into()], ..create_request(2, None, true) }], true)]
    #[case::another_order_s_create(vec![create_request(1, Some("order-o1"), false), create_request(2, Some("order-o2"), false)], false)]
    fn a_second_attempt_is_a_second_entry_even_under_the_same_key(
        #[case] requests: Vec<provider_model::payments::ledger::RequestRecord>,
        #[case] fails: bool,
    ) {
        let ledger = Ledger {
            effects: vec![effect(1, "pay_a", "order-o1", "succeeded")],
            requests,
        };
        let mut facts = Facts::default();
        let found = judge(
            &ledger,
            Some(&by_key),
            &said(Some("success"), Ambiguity::None),
            &mut facts,
        );
        let attempts: Vec<_> = found
            .iter()
            .filter(|f| f.line().contains("create requests reached the provider"))
            .collect();
        assert_eq!(!attempts.is_empty(), fails, "{found:?}");
        assert!(attempts.iter().all(|f| f.requirement() == Req::R010));
    }
}
