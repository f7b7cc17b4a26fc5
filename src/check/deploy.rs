//! Judging a deployment (`aocheck deploy`): what the provider's ground-truth ledger recorded,
//! attributed to occurrences by the rule the deploy file declares, against what the service said
//! through its own business API. The service is never believed about an effect: its label is
//! checked against the ledger, never used in place of it.
//!
//! - `deploy_one_entry` (AOC-REQ-010, -002): at most one provider entry (a creation, declined
//!   or not) per occurrence, whatever the crash, lost reply, 5xx, resubmission or takeover; and
//!   no entry the declared attribution cannot place.
//! - `deploy_outcome_from_ledger` (AOC-REQ-011, -009): a final label the service reports must
//!   be what the ledger shows: `success` only with a succeeded (or authorised) payment for the
//!   occurrence; `not_accepted` / `final_failure` never while the ledger shows its money moved.
//!   A label still pending at the deadline is no verdict (the requirement is not established).

use super::{Facts, Finding};
use crate::aoc::requirement::Req;
use fake_payments::ledger::{EffectKind, Ledger};

/// The final label the service gave for an occurrence (`None`: still pending at the deadline).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reported {
    pub occurrence: String,
    /// `success`, `not_accepted`, `final_failure`; `None` while pending.
    pub outcome: Option<&'static str>,
    /// The service's own label, as it wrote it.
    pub label: String,
    /// Every final label the service reported while it was watched, in order, each with its
    /// meaning (a terminal outcome reported for a moment and then withdrawn was still reported).
    pub finals: Vec<(String, &'static str)>,
    /// The fault its entry met, when that made the reply ambiguous.
    pub ambiguity: Ambiguity,
}

/// Whether the case's fault was an ambiguous reply (a 5xx after commit, a dropped connection):
/// a terminal failure reported then was inferred from the HTTP class or the transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ambiguity {
    None,
    ErrorAfterCommit,
    Dropped,
}

/// Attributes a creation (its payment id and Idempotency-Key) to an occurrence, by the rule a
/// deploy file declares.
pub type Owner<'a> = &'a dyn Fn(&str, Option<&str>) -> Option<String>;

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
    let creations: Vec<_> = ledger
        .effects
        .iter()
        .filter(|e| e.kind == EffectKind::PaymentCreated)
        .map(|e| (e, owner(&e.payment_id, e.idempotency_key.as_deref())))
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
                "the provider recorded payment {} ({} {}, key {}, request {}) that the declared attribution places under no occurrence of the case (ground truth)",
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
        if r.finals.is_empty() {
            continue;
        }
        facts.saw(Req::R011);
        let moved = mine.iter().any(|e| {
            matches!(
                e.status.as_str(),
                "succeeded" | "requires_capture" | "processing"
            )
        });
        let succeeded = mine
            .iter()
            .any(|e| matches!(e.status.as_str(), "succeeded" | "requires_capture"));
        let mut distinct: Vec<&'static str> = Vec::new();
        for (label, said) in &r.finals {
            if !distinct.contains(said) {
                distinct.push(said);
            }
            let wrong = match *said {
                "success" if !succeeded => Some(if mine.is_empty() {
                    "the provider recorded no entry for it".to_string()
                } else {
                    format!(
                        "the provider recorded only {}",
                        mine.iter()
                            .map(|e| format!("{} ({})", e.payment_id, e.status))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                }),
                "not_accepted" | "final_failure" if moved => Some(format!(
                    "the provider recorded {} for it",
                    mine.iter()
                        .filter(|e| e.status != "declined")
                        .map(|e| format!(
                            "{} ({} {}, {})",
                            e.payment_id, e.amount, e.currency, e.status
                        ))
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
                _ => None,
            };
            if let Some(why) = wrong {
                out.push(
                    Finding::new(
                        "deploy_outcome_from_ledger",
                        Req::R011,
                        format!(
                            "the service reported {label:?} ({said}), but {why} (ground truth)"
                        ),
                    )
                    .about(Some(&r.occurrence)),
                );
                if *said != "success" && ambiguity != Ambiguity::None {
                    facts.saw(Req::R009);
                    out.push(
                        Finding::new(
                            "deploy_outcome_from_ledger",
                            Req::R009,
                            format!(
                                "a terminal failure was reported after {}, which proves nothing about the effect",
                                match ambiguity {
                                    Ambiguity::ErrorAfterCommit => "a 5xx reply",
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
        if distinct.len() > 1 {
            out.push(
                Finding::new(
                    "deploy_outcome_from_ledger",
                    Req::R011,
                    format!(
                        "the service reported one terminal outcome and then another ({}): a terminal interpretation was relabelled",
                        distinct.join(" then ")
                    ),
                )
                .about(Some(&r.occurrence)),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use fake_payments::ledger::{Effect, Reply};
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
            finals: outcome.map(|o| (o.to_string(), o)).into_iter().collect(),
            ambiguity,
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

    #[rstest]
    // A terminal failure reported for a moment, then success: the lie was still told.
    #[case::declined_then_paid(&[("declined", "not_accepted"), ("paid", "success")], vec![Req::R011, Req::R009, Req::R011])]
    // Success, then a failure label: relabelled, and the failure contradicts the ledger.
    #[case::paid_then_failed(&[("paid", "success"), ("failed", "final_failure")], vec![Req::R011, Req::R009, Req::R011])]
    // The same outcome under two labels of the service is no relabelling.
    #[case::two_labels_one_outcome(&[("paid", "success"), ("settled", "success")], vec![])]
    fn every_final_label_reported_is_judged(
        #[case] finals: &[(&str, &'static str)],
        #[case] want: Vec<Req>,
    ) {
        let last = finals.last().map(|(_, o)| *o);
        let reported = vec![Reported {
            occurrence: "o1".into(),
            outcome: last,
            label: finals.last().map_or("", |(l, _)| l).to_string(),
            finals: finals.iter().map(|(l, o)| (l.to_string(), *o)).collect(),
            ambiguity: Ambiguity::ErrorAfterCommit,
        }];
        let (got, _) = run(vec![effect(1, "pay_a", "order-o1", "succeeded")], &reported);
        assert_eq!(got, want);
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
}
