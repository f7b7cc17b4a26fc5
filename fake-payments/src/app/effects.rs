//! Effects: what a request really does to the ledger (create, capture, refund, get, list).

use super::*;

pub(super) fn visible<'a>(
    d: &'a Data,
    retention_ms: u64,
    acct: &str,
    id: &str,
) -> Option<(Id16, &'a Payment)> {
    let b = id16(PAY, id)?;
    let p = d.book.payments.get(&b)?;
    (d.book.names.str(p.account) == acct
        && !d.book.expired.contains(&b)
        && d.clock.now_ms().saturating_sub(p.created_ms) <= retention_ms)
        .then_some((b, p))
}

pub(super) fn push_effect(
    d: &mut Data,
    seq: u64,
    kind: EffectKind,
    id: Id16,
    refund: Option<(Id16, i64)>,
    fault: Option<String>,
) {
    let b = &mut d.book;
    let Some(p) = b.payments.get(&id) else {
        return;
    };
    let (refund, amount) = match refund {
        Some((id, a)) => (Some(id), a),
        None => (None, p.amount),
    };
    let status = p.status;
    let fault = b.names.opt(fault.as_deref());
    let req = (seq - 1) as u32;
    b.effects.push(Eff {
        kind,
        req,
        payment: id,
        refund,
        amount,
        status,
        fault,
        at_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64),
    });
}

fn decided(status: u16, body: Value, effect: bool) -> Decided {
    Decided {
        status,
        body,
        effect,
        replayed: false,
        created: None,
    }
}

/// The effect of a request in either dialect (the Stripe dialect's own acts in `stripe`).
pub(super) fn effect(
    s: &Shared,
    d: &mut Data,
    r: &ApiReq,
    seq: u64,
    fault: Option<String>,
    f: &Option<Fault>,
) -> Decided {
    match &r.stripe {
        Some(act) => super::stripe::effect(s, d, r, seq, fault, f, act),
        None => native_effect(s, d, r, seq, fault, f),
    }
}

pub(super) fn native_effect(
    s: &Shared,
    d: &mut Data,
    r: &ApiReq,
    seq: u64,
    fault: Option<String>,
    f: &Option<Fault>,
) -> Decided {
    let acct = r.account.id.as_str();
    let retention_ms = s.config.retention_secs.saturating_mul(1000);
    let not_found = |id: &str| {
        decided(
            404,
            error_body(
                "payment_not_found",
                format!("no payment {id} for this account"),
            ),
            false,
        )
    };
    match r.op {
        Op::Create => {
            let Some(c) = r.create.as_ref() else {
                return decided(
                    400,
                    error_body("invalid_request", "invalid create body"),
                    false,
                );
            };
            create_payment(d, acct, c, seq, fault, *uuid::Uuid::now_v7().as_bytes())
        }
        Op::Capture => {
            let id = r.payment_id.clone().unwrap_or_default();
            let Some((b, _)) = visible(d, retention_ms, acct, &id) else {
                return not_found(&id);
            };
            let succeeded_requires = (
                d.book.names.get("succeeded"),
                d.book.names.get("requires_capture"),
            );
            let succeeded = succeeded_requires.0;
            let Some(p) = d.book.payments.get_mut(&b) else {
                return not_found(&id);
            };
            if p.status != succeeded_requires.1 {
                return decided(
                    409,
                    error_body(
                        "payment_not_capturable",
                        format!("payment {id} is {}", d.book.names.str(p.status)),
                    ),
                    false,
                );
            }
            p.status = succeeded;
            p.amount_captured = p.amount;
            push_effect(d, seq, EffectKind::PaymentCaptured, b, None, fault);
            let body = d
                .book
                .payments
                .get(&b)
                .map_or(Value::Null, |p| d.book.payment_json(&b, p));
            decided(200, body, true)
        }
        Op::Refund => {
            let id = r.payment_id.clone().unwrap_or_default();
            let Some((b, _)) = visible(d, retention_ms, acct, &id) else {
                return not_found(&id);
            };
            let succeeded = d.book.names.get("succeeded");
            let Some(p) = d.book.payments.get_mut(&b) else {
                return not_found(&id);
            };
            let remaining = p.amount_captured - p.amount_refunded;
            let want = r
                .body
                .as_ref()
                .and_then(|b| b.get("amount"))
                .and_then(Value::as_i64)
                .unwrap_or(remaining);
            if p.status != succeeded || remaining <= 0 {
                let status = d.book.names.str(p.status).to_string();
                return decided(
                    409,
                    error_body(
                        "payment_not_refundable",
                        format!("payment {id} is {status} with {remaining} refundable"),
                    ),
                    false,
                );
            }
            if want > remaining {
                return decided(
                    400,
                    error_body(
                        "amount_invalid",
                        format!("at most {remaining} can be refunded"),
                    ),
                    false,
                );
            }
            p.amount_refunded += want;
            let (account, currency) = (p.account, p.currency);
            let refund = *uuid::Uuid::now_v7().as_bytes();
            push_effect(
                d,
                seq,
                EffectKind::PaymentRefunded,
                b,
                Some((refund, want)),
                fault,
            );
            decided(
                201,
                json!({
                    "object": "refund",
                    "id": id_text(REFUND, &refund),
                    "payment": id_text(PAY, &b),
                    "account": d.book.names.str(account),
                    "amount": want,
                    "currency": d.book.names.str(currency),
                    "status": "succeeded",
                    "request_digest": r.request_digest,
                    "idempotency_key": r.key,
                }),
                true,
            )
        }
        Op::Get => {
            let id = r.payment_id.clone().unwrap_or_default();
            match visible(d, retention_ms, acct, &id) {
                Some((b, p)) => decided(200, d.book.payment_json(&b, p), false),
                None => not_found(&id),
            }
        }
        // Confirming and canceling are the Stripe dialect's (see `stripe`).
        Op::Confirm | Op::Cancel => decided(
            404,
            error_body(
                "not_found",
                "confirm and cancel exist in the Stripe dialect only",
            ),
            false,
        ),
        Op::List | Op::Any => {
            let limit: usize = r
                .query
                .get("limit")
                .and_then(|l| l.parse().ok())
                .unwrap_or(10);
            let key = r.query.get("idempotency_key");
            let after = r.query.get("starting_after");
            // Ids compare as their bytes (text order); a cursor that is not one of ours as text.
            let after16 = after.and_then(|a| id16(PAY, a));
            let now = d.clock.now_ms();
            let book = &d.book;
            let mut matching: Vec<(&Id16, &Payment)> = book
                .payments
                .iter()
                .filter(|(id, p)| {
                    book.names.str(p.account) == acct
                        && !book.expired.contains(*id)
                        && now.saturating_sub(p.created_ms) <= retention_ms
                        && key.is_none_or(|k| book.key_of(p.req) == Some(k.as_str()))
                        && after.is_none_or(|a| match &after16 {
                            Some(a16) => *id > a16,
                            None => id_text(PAY, id).as_str() > a.as_str(),
                        })
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
                matching.last().map(|(id, _)| id_text(PAY, id))
            } else {
                None
            };
            decided(
                200,
                json!({
                    "object": "list",
                    "data": matching.iter().map(|(id, p)| book.payment_json(id, p)).collect::<Vec<_>>(),
                    "has_more": has_more || incomplete,
                    "complete": !has_more && !incomplete,
                    "next_cursor": next,
                }),
                false,
            )
        }
    }
}

/// Creates payment `id` from validated fields, with its `PaymentCreated` effect: 201, or a
/// decline (402, the payment embedded) that moved no money.
pub(super) fn create_payment(
    d: &mut Data,
    acct: &str,
    c: &CreateFields,
    seq: u64,
    fault: Option<String>,
    id: Id16,
) -> Decided {
    let b = &mut d.book;
    let status = b.names.get(&c.status);
    let p = Payment {
        account: b.names.get(acct),
        currency: b.names.get(&c.currency),
        status,
        first_status: status,
        req: (seq - 1) as u32,
        amount: c.amount,
        amount_captured: if c.status == "succeeded" { c.amount } else { 0 },
        amount_refunded: 0,
        created_ms: d.clock.now_ms(),
        description: c.description.as_deref().map(Small::new),
        metadata: c
            .metadata
            .iter()
            .map(|(k, v)| (k.as_str().into(), v.as_str().into()))
            .collect(),
    };
    let body = d.book.payment_json(&id, &p);
    let declined = c.status == "declined";
    d.book.payments.insert(id, p);
    push_effect(d, seq, EffectKind::PaymentCreated, id, None, fault);
    let mut out = if declined {
        let mut e = error_body("card_declined", "the card was declined");
        e["error"]["payment"] = body;
        decided(402, e, true)
    } else {
        decided(201, body, true)
    };
    out.created = Some(id);
    out
}
