//! Effects: what a request really does to the ledger (create, capture, refund, get, list).

use super::*;

pub(super) fn visible<'a>(
    d: &'a Data,
    retention_ms: u64,
    acct: &str,
    id: &str,
) -> Option<&'a Payment> {
    d.payments.get(id).filter(|p| {
        p.account == acct
            && !d.expired.contains(&p.id)
            && d.clock.now_ms().saturating_sub(p.created_ms) <= retention_ms
    })
}

pub(super) fn push_effect(
    d: &mut Data,
    seq: u64,
    kind: EffectKind,
    p: &Payment,
    refund: Option<(String, i64)>,
    r: &ApiReq,
    fault: Option<String>,
) {
    d.effect_seq += 1;
    let (refund_id, amount) = match refund {
        Some((id, a)) => (Some(id), a),
        None => (None, p.amount),
    };
    d.effect_of.insert(seq, d.ledger.effects.len());
    d.ledger.effects.push(Effect {
        seq: d.effect_seq,
        kind,
        account: p.account.clone(),
        payment_id: p.id.clone(),
        refund_id,
        amount,
        currency: p.currency.clone(),
        status: p.status.clone(),
        request_digest: r.request_digest.clone(),
        idempotency_key: r.key.clone(),
        fault,
        request_seq: seq,
        reply: Reply::Pending,
    });
}

pub(super) fn effect(
    s: &Shared,
    d: &mut Data,
    r: &ApiReq,
    seq: u64,
    fault: Option<String>,
    f: &Option<Fault>,
) -> Decided {
    let acct = r.account.id.as_str();
    let retention_ms = s.config.retention_secs.saturating_mul(1000);
    let not_found = |id: &str| Decided {
        status: 404,
        body: error_body(
            "payment_not_found",
            format!("no payment {id} for this account"),
        ),
        effect: false,
        replayed: false,
    };
    match r.op {
        Op::Create => {
            let Some(CreateFields {
                amount,
                currency,
                description,
                metadata,
                status,
            }) = r.create.as_ref().map(|c| CreateFields {
                amount: c.amount,
                currency: c.currency.clone(),
                description: c.description.clone(),
                metadata: c.metadata.clone(),
                status: c.status.clone(),
            })
            else {
                return Decided {
                    status: 400,
                    body: error_body("invalid_request", "invalid create body"),
                    effect: false,
                    replayed: false,
                };
            };
            let p = Payment {
                id: format!("pay_{}", uuid::Uuid::now_v7().simple()),
                account: acct.to_string(),
                amount,
                amount_captured: if status == "succeeded" { amount } else { 0 },
                amount_refunded: 0,
                currency,
                description,
                metadata,
                status,
                created_ms: d.clock.now_ms(),
                request_digest: r.request_digest.clone(),
                idempotency_key: r.key.clone(),
            };
            push_effect(d, seq, EffectKind::PaymentCreated, &p, None, r, fault);
            let body = p.json();
            let declined = p.status == "declined";
            d.payments.insert(p.id.clone(), p);
            if declined {
                let mut e = error_body("card_declined", "the card was declined");
                e["error"]["payment"] = body;
                Decided {
                    status: 402,
                    body: e,
                    effect: true,
                    replayed: false,
                }
            } else {
                Decided {
                    status: 201,
                    body,
                    effect: true,
                    replayed: false,
                }
            }
        }
        Op::Capture => {
            let id = r.payment_id.clone().unwrap_or_default();
            if visible(d, retention_ms, acct, &id).is_none() {
                return not_found(&id);
            }
            let Some(p) = d.payments.get_mut(&id) else {
                return not_found(&id);
            };
            if p.status != "requires_capture" {
                return Decided {
                    status: 409,
                    body: error_body(
                        "payment_not_capturable",
                        format!("payment {id} is {}", p.status),
                    ),
                    effect: false,
                    replayed: false,
                };
            }
            p.status = "succeeded".into();
            p.amount_captured = p.amount;
            let p = p.clone();
            push_effect(d, seq, EffectKind::PaymentCaptured, &p, None, r, fault);
            Decided {
                status: 200,
                body: p.json(),
                effect: true,
                replayed: false,
            }
        }
        Op::Refund => {
            let id = r.payment_id.clone().unwrap_or_default();
            if visible(d, retention_ms, acct, &id).is_none() {
                return not_found(&id);
            }
            let Some(p) = d.payments.get_mut(&id) else {
                return not_found(&id);
            };
            let remaining = p.amount_captured - p.amount_refunded;
            let want = r
                .body
                .as_ref()
                .and_then(|b| b.get("amount"))
                .and_then(Value::as_i64)
                .unwrap_or(remaining);
            if p.status != "succeeded" || remaining <= 0 {
                return Decided {
                    status: 409,
                    body: error_body(
                        "payment_not_refundable",
                        format!("payment {id} is {} with {remaining} refundable", p.status),
                    ),
                    effect: false,
                    replayed: false,
                };
            }
            if want > remaining {
                return Decided {
                    status: 400,
                    body: error_body(
                        "amount_invalid",
                        format!("at most {remaining} can be refunded"),
                    ),
                    effect: false,
                    replayed: false,
                };
            }
            p.amount_refunded += want;
            let p = p.clone();
            let refund_id = format!("re_{}", uuid::Uuid::now_v7().simple());
            push_effect(
                d,
                seq,
                EffectKind::PaymentRefunded,
                &p,
                Some((refund_id.clone(), want)),
                r,
                fault,
            );
            Decided {
                status: 201,
                body: json!({
                    "object": "refund",
                    "id": refund_id,
                    "payment": p.id,
                    "account": p.account,
                    "amount": want,
                    "currency": p.currency,
                    "status": "succeeded",
                    "request_digest": r.request_digest,
                    "idempotency_key": r.key,
                }),
                effect: true,
                replayed: false,
            }
        }
        Op::Get => {
            let id = r.payment_id.clone().unwrap_or_default();
            match visible(d, retention_ms, acct, &id) {
                Some(p) => Decided {
                    status: 200,
                    body: p.json(),
                    effect: false,
                    replayed: false,
                },
                None => not_found(&id),
            }
        }
        Op::List | Op::Any => {
            let limit: usize = r
                .query
                .get("limit")
                .and_then(|l| l.parse().ok())
                .unwrap_or(10);
            let key = r.query.get("idempotency_key");
            let after = r.query.get("starting_after");
            let mut matching: Vec<&Payment> = d
                .payments
                .values()
                .filter(|p| {
                    p.account == acct
                        && !d.expired.contains(&p.id)
                        && d.clock.now_ms().saturating_sub(p.created_ms) <= retention_ms
                        && key.is_none_or(|k| p.idempotency_key.as_ref() == Some(k))
                        && after.is_none_or(|a| p.id.as_str() > a.as_str())
                })
                .collect();
            let incomplete = matches!(f, Some(Fault::IncompleteListing));
            if incomplete && !matching.is_empty() {
                // Leave out the newest matching item (the one a caller most likely looks for).
                matching.pop();
            }
            let has_more = matching.len() > limit;
            matching.truncate(limit);
            let next = if has_more {
                matching.last().map(|p| p.id.clone())
            } else {
                None
            };
            Decided {
                status: 200,
                body: json!({
                    "object": "list",
                    "data": matching.iter().map(|p| p.json()).collect::<Vec<_>>(),
                    "has_more": has_more || incomplete,
                    "complete": !has_more && !incomplete,
                    "next_cursor": next,
                }),
                effect: false,
                replayed: false,
            }
        }
    }
}
