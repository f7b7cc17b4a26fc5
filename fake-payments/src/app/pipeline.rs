//! The request pipeline: faults, holds, idempotency and the reply, with its signature; the
//! client watch that records a reply nobody received.

use super::*;

/// Runs the pipeline and answers with its outcome. When the plan can make a request wait (hold,
/// delay), the pipeline runs in a task of its own so that a client that goes away while waiting
/// does not cancel the effect; otherwise it has no await point between deciding and committing
/// and runs inline.
pub(super) async fn run(s: Arc<Shared>, mut r: ApiReq) -> Response {
    let drop = r.drop.clone();
    let stripe = r.stripe.is_some();
    // Set with the plan, under the same lock as the rules (see `Shared::waits`).
    let may_wait = s.waits.load(std::sync::atomic::Ordering::SeqCst);
    let outcome = if may_wait {
        let (tx, rx) = oneshot::channel();
        let shared = s.clone();
        let (flag, mut watch) = s.holds.watch();
        r.client_gone = flag;
        tokio::spawn(async move {
            let (seq, outcome) = pipeline(&shared, r).await;
            if let Err((_, Outcome::Respond(_))) = tx.send((seq, outcome)) {
                mark_reply(&shared, seq, Reply::ClientGone);
            }
        });
        let got = rx.await;
        watch.answered();
        got
    } else {
        Ok(pipeline(&s, r).await)
    };
    match outcome {
        Ok((seq, Outcome::Respond(mut resp))) => {
            if stripe {
                // The Stripe dialect names every request (`req_` and its ledger seq).
                if let Ok(v) = HeaderValue::from_str(&super::stripe::request_id(seq)) {
                    resp.headers_mut().insert("request-id", v);
                }
            }
            resp
        }
        Ok((_, Outcome::Drop)) => match drop {
            Some(d) => {
                d.0.notify_one();
                std::future::pending::<Response>().await
            }
            // No connection to close (in-process router): signal the drop unmistakably.
            None => {
                let mut r = Response::new(Body::empty());
                *r.status_mut() = StatusCode::from_u16(599).unwrap_or(StatusCode::BAD_GATEWAY);
                r.headers_mut()
                    .insert("x-fake-connection", HeaderValue::from_static("dropped"));
                r
            }
        },
        Err(_) => plain_json(
            StatusCode::INTERNAL_SERVER_ERROR,
            &error_body("internal", "pipeline task failed"),
        ),
    }
}

pub(super) fn mark_reply(s: &Shared, seq: u64, reply: Reply) {
    s.data
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .set_reply(seq, reply);
}

/// What the effect step decided.
pub(super) struct Decided {
    pub(super) status: u16,
    pub(super) body: Value,
    pub(super) effect: bool,
    pub(super) replayed: bool,
    /// The payment this request created, if it created one.
    pub(super) created: Option<Id16>,
}

pub(super) async fn pipeline(s: &Arc<Shared>, r: ApiReq) -> (u64, Outcome) {
    let acct = r.account.id.clone();
    let uses_idem =
        r.op.is_effectful() && r.key.is_some() && r.account.idempotency != IdempotencyProfile::None;
    let idem_key = Small::new(r.key.as_deref().unwrap_or_default());
    // 1. Count the request and select its fault (the lock is kept through the idempotency step:
    // nothing waits in between).
    let (seq, fault, guard) = {
        let mut d = s.data.lock().unwrap_or_else(|p| p.into_inner());
        // A full ledger processes nothing: an effect it could not record would make it lie.
        if d.book.requests.len() >= s.config.max_ledger_requests {
            let body = error_body(
                "ledger_full",
                format!(
                    "the ground-truth ledger holds its maximum of {} requests; POST /_control/reset to continue",
                    s.config.max_ledger_requests
                ),
            );
            // Seq 0: no record of it exists to mark.
            return (0, Outcome::Respond(tag_response(s, &r, 503, &body, None)));
        }
        // A request's seq is its position in the ledger plus one.
        let seq = d.book.requests.len() as u64 + 1;
        // A revoked credential's request is never a fault's target: it is refused below.
        let fault = if r.revoked {
            None
        } else {
            faults::select(&mut d.rules, r.op, Some(&acct), r.key.as_deref()).map(|(_, f)| f)
        };
        let b = &mut d.book;
        let index = b.requests.len() as u32;
        let rec = Rec {
            op: r.op,
            reply: Reply::Pending,
            status: 0,
            replayed: false,
            effect: false,
            revoked: r.revoked,
            account: b.names.get(&acct),
            credential: b.names.get(&r.credential),
            fault: b
                .names
                .opt(fault.as_ref().map(|f| f.to_string()).as_deref()),
            digest: b.digest_for(index, &r.request_digest),
            key: r.key.as_deref().map(Small::new),
            payment: r.payment_id.as_deref().map(Into::into),
            lookup_key: r.query.get("idempotency_key").map(|k| k.as_str().into()),
            refs: Refs::None,
            agent: b.names.opt(r.agent.as_deref()),
            version: b.names.opt(r.version.as_deref()),
            stripe: r.stripe.is_some(),
            received_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
        };
        b.requests.push(rec);
        // A revoked credential: recorded, refused, nothing else.
        if r.revoked {
            let body = error_body(
                "credential_revoked",
                "this credential was revoked; its holder was stopped",
            );
            if let Some(rec) = d.book.requests.last_mut() {
                rec.status = 401;
                rec.reply = Reply::Written;
            }
            return (seq, Outcome::Respond(tag_response(s, &r, 401, &body, None)));
        }
        // 2. Faults that act on provider state before anything else.
        match &fault {
            Some(Fault::Forget) => d.book.idem.clear(),
            Some(Fault::ExpireRetention) => {
                let target = match r.payment_id.as_deref() {
                    // A named payment that is not one of ours expires nothing.
                    Some(id) => Some(id16(PAY, id)),
                    None => r
                        .key
                        .as_deref()
                        .or(r.query.get("idempotency_key").map(String::as_str))
                        .and_then(|key| {
                            d.book
                                .payments
                                .iter()
                                .find(|(_, p)| {
                                    d.book.names.str(p.account) == acct
                                        && d.book.key_of(p.req) == Some(key)
                                })
                                .map(|(id, _)| Some(*id))
                        }),
                };
                match target {
                    Some(Some(id)) => expire_payment(&mut d, &id),
                    Some(None) => {}
                    None => {
                        let ids: Vec<Id16> = d
                            .book
                            .payments
                            .iter()
                            .filter(|(_, p)| d.book.names.str(p.account) == acct)
                            .map(|(id, _)| *id)
                            .collect();
                        for id in ids {
                            expire_payment(&mut d, &id);
                        }
                    }
                }
            }
            _ => {}
        }
        (seq, fault, d)
    };
    let finish = |status: u16, body: &Value, reply: Reply, replayed: bool, effect: bool| {
        let mut d = s.data.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(rec) = d.book.rec_mut(seq) {
            rec.status = status;
            rec.replayed = replayed;
            rec.effect = effect;
            rec.refs = Refs::of(payment_refs(body));
        }
        d.set_reply(seq, reply);
    };
    // 3. Idempotency.
    if uses_idem {
        let retention = s.config.retention_secs.saturating_mul(1000);
        let mut d = guard;
        let now = d.clock.now_ms();
        let slot_key = (d.book.names.get(&acct), idem_key.clone());
        if let Some(e) = d.book.idem.get(&slot_key).cloned() {
            if now.saturating_sub(e.at_ms) > retention {
                d.book.idem.remove(&slot_key);
            } else {
                let profile = r.account.idempotency;
                let same = d.book.same_digest(e.req, &r.request_digest);
                let (status, body, replayed) = if !same {
                    match profile {
                        IdempotencyProfile::IetfDraft => (
                            422,
                            error_body(
                                "idempotency_key_mismatch",
                                "this Idempotency-Key was used with another payload",
                            ),
                            false,
                        ),
                        _ => (
                            400,
                            error_body(
                                "idempotency_key_reuse",
                                "keys for idempotent requests can only be used with the same parameters",
                            ),
                            false,
                        ),
                    }
                } else {
                    match &e.done {
                        None => (
                            409,
                            error_body(
                                "idempotency_key_in_flight",
                                "a request with this Idempotency-Key is still in progress",
                            ),
                            false,
                        ),
                        Some((status, saved)) => (*status, replay_body(&d.book, saved), true),
                    }
                };
                drop(d);
                finish(status, &body, Reply::Written, replayed, false);
                let mut resp = tag_response(s, &r, status, &body, None);
                if replayed && r.stripe.is_some() {
                    resp.headers_mut()
                        .insert("idempotent-replayed", HeaderValue::from_static("true"));
                }
                return (seq, Outcome::Respond(resp));
            }
        }
        d.book.idem.insert(
            slot_key,
            Slot {
                req: (seq - 1) as u32,
                at_ms: now,
                done: None,
            },
        );
    } else {
        drop(guard);
    }
    // 4. Pre-effect faults that wait.
    let mut fault = fault;
    match &fault {
        Some(Fault::Delay { ms }) => {
            let clock = s
                .data
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clock
                .clone();
            clock.sleep(*ms).await
        }
        Some(Fault::Hold { name }) => {
            let shown = fake_control::holds::Parked {
                request_seq: Some(seq),
                op: r.op.label().to_string(),
                account: Some(acct.clone()),
                idempotency_key: r.key.clone(),
            };
            let release = s.holds.park(name, shown, r.client_gone.clone());
            match release.released().await {
                ReleaseAction::Reject { status } => fault = Some(Fault::Reject { status }),
                ReleaseAction::ProceedForged => {
                    fault = Some(Fault::Forge {
                        mode: crate::faults::ForgeMode::BadKey,
                    })
                }
                ReleaseAction::ProceedMismatched => {
                    fault = Some(Fault::Forge {
                        mode: crate::faults::ForgeMode::OtherAccount,
                    })
                }
                ReleaseAction::Proceed => {}
            }
        }
        _ => {}
    }
    // 5. Rejection before any effect.
    if let Some(Fault::Reject { status }) = fault {
        if uses_idem {
            let mut d = s.data.lock().unwrap_or_else(|p| p.into_inner());
            let slot_key = (d.book.names.get(&acct), idem_key.clone());
            d.book.idem.remove(&slot_key);
        }
        let body = error_body(
            if status >= 500 {
                "provider_unavailable"
            } else {
                "rejected"
            },
            format!("rejected before processing with {status}"),
        );
        finish(status, &body, Reply::Written, false, false);
        return (
            seq,
            Outcome::Respond(tag_response(s, &r, status, &body, None)),
        );
    }
    // 6. The effect (or the read), under the lock.
    let fault_label = fault.as_ref().map(|f| f.to_string());
    let decided = {
        let mut d = s.data.lock().unwrap_or_else(|p| p.into_inner());
        let decided = effect(s, &mut d, &r, seq, fault_label.clone(), &fault);
        // 7. Save the response for idempotent replays: the first response, 5xx included.
        if uses_idem {
            let (status, saved) = match &fault {
                Some(Fault::CommitThen { status }) if decided.effect => (
                    *status,
                    Saved::Bytes(
                        contract::canonical(&error_body(
                            "provider_error",
                            format!("internal error after processing ({status})"),
                        ))
                        .into_boxed_slice(),
                    ),
                ),
                _ => (decided.status, save_body(&d.book, &decided)),
            };
            let at_ms = d.clock.now_ms();
            let slot_key = (d.book.names.get(&acct), idem_key.clone());
            d.book.idem.insert(
                slot_key,
                Slot {
                    req: (seq - 1) as u32,
                    at_ms,
                    done: Some((status, saved)),
                },
            );
        }
        // No post-effect fault: the record is finished here, under the same lock.
        if !post_fault(&fault, &decided)
            && let Some(rec) = d.book.rec_mut(seq)
        {
            rec.status = decided.status;
            rec.replayed = decided.replayed;
            rec.effect = decided.effect;
            rec.refs = Refs::of(payment_refs(&decided.body));
            rec.reply = Reply::Written;
        }
        decided
    };
    // 8. Post-effect faults.
    match &fault {
        Some(Fault::CommitThen { status }) if decided.effect => {
            let body = error_body(
                "provider_error",
                format!("internal error after processing ({status})"),
            );
            finish(decided.status, &body, Reply::ErrorAfterCommit, false, true);
            (
                seq,
                Outcome::Respond(tag_response(s, &r, *status, &body, None)),
            )
        }
        Some(Fault::CommitThenDrop) if decided.effect => {
            finish(decided.status, &decided.body, Reply::Dropped, false, true);
            (seq, Outcome::Drop)
        }
        Some(Fault::Garble) => {
            finish(
                decided.status,
                &decided.body,
                Reply::Garbled,
                decided.replayed,
                decided.effect,
            );
            let tag = contract::sign(
                &s.key,
                &s.key_id,
                decided.status,
                &acct,
                &r.request_digest,
                &decided.body,
            );
            let text = decided.body.to_string();
            let cut = text.len() / 2;
            let mut garbled = text.as_bytes()[..cut].to_vec();
            garbled.extend_from_slice(b"\x00\xff\xfe");
            (
                seq,
                Outcome::Respond(respond_bytes(
                    decided.status,
                    garbled,
                    Some(tag.to_header()),
                )),
            )
        }
        Some(Fault::Omit { field }) => {
            let mut body = decided.body.clone();
            if let Some(o) = body.as_object_mut() {
                o.remove(field);
            }
            finish(
                decided.status,
                &body,
                Reply::Written,
                decided.replayed,
                decided.effect,
            );
            (
                seq,
                Outcome::Respond(tag_response(s, &r, decided.status, &body, None)),
            )
        }
        Some(Fault::Forge { mode }) => {
            finish(
                decided.status,
                &decided.body,
                match mode {
                    ForgeMode::BadKey => Reply::Forged,
                    ForgeMode::OtherAccount => Reply::Misdirected,
                },
                decided.replayed,
                decided.effect,
            );
            (
                seq,
                Outcome::Respond(tag_response(
                    s,
                    &r,
                    decided.status,
                    &decided.body,
                    Some(*mode),
                )),
            )
        }
        // Finished with the effect, under its lock.
        _ => (
            seq,
            Outcome::Respond(tag_response(s, &r, decided.status, &decided.body, None)),
        ),
    }
}

/// Whether a post-effect fault acts on this reply: the guards of step 8's arms before its last,
/// restated so that the common case finishes its record under the effect's lock. A new
/// post-effect fault goes in both places (`every_fault_on_every_operation_against_the_ledger`
/// runs every fault on every operation).
fn post_fault(fault: &Option<Fault>, decided: &Decided) -> bool {
    match fault {
        Some(Fault::CommitThen { .. } | Fault::CommitThenDrop) => decided.effect,
        Some(Fault::Garble | Fault::Omit { .. } | Fault::Forge { .. }) => true,
        _ => false,
    }
}

/// What to keep of a reply for replays: a creation's reply as the payment it created (see
/// [`Saved::Created`]); anything else as canonical bytes.
pub(super) fn save_body(b: &Book, decided: &Decided) -> Saved {
    match decided.created {
        // Rendered again from the payment's creation fields, it is the same body (a test in
        // `book` checks it for creations of every kind).
        Some(id) if b.payments.get(&id).is_some() => Saved::Created(id),
        _ => Saved::Bytes(contract::canonical(&decided.body).into_boxed_slice()),
    }
}

/// A saved reply's body, as first sent.
pub(super) fn replay_body(b: &Book, saved: &Saved) -> Value {
    match saved {
        Saved::Created(id) => {
            let Some(p) = b.payments.get(id) else {
                return Value::Null;
            };
            let body = b.created_json(id, p);
            if b.names.str(p.first_status) == "declined" {
                let mut e = error_body("card_declined", "the card was declined");
                e["error"]["payment"] = body;
                e
            } else {
                body
            }
        }
        Saved::Bytes(bytes) => serde_json::from_slice(bytes).unwrap_or(Value::Null),
    }
}

/// The payment ids a reply body names: a payment (`id`), a refund's `payment`, a declined
/// creation's `error.payment.id`, a listing's `data[].id`.
pub(super) fn payment_refs(body: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let mut push = |v: &Value| {
        if let Some(id) = v.as_str().filter(|id| id.starts_with("pay_")) {
            out.push(id.to_string());
        }
    };
    push(&body["id"]);
    push(&body["payment"]);
    push(&body["error"]["payment"]["id"]);
    if let Some(items) = body["data"].as_array() {
        for p in items {
            push(&p["id"]);
        }
    }
    out
}

/// Signs for the request's account; a forged tag when asked.
pub(super) fn tag_response(
    s: &Shared,
    r: &ApiReq,
    status: u16,
    body: &Value,
    forge: Option<ForgeMode>,
) -> Response {
    let bytes = contract::canonical(body);
    let tag = match forge {
        None => contract::sign_canonical(
            &s.key,
            &s.key_id,
            status,
            &r.account.id,
            &r.request_digest,
            &bytes,
        ),
        Some(ForgeMode::BadKey) => contract::sign_canonical(
            &s.forge_key,
            &s.key_id,
            status,
            &r.account.id,
            &r.request_digest,
            &bytes,
        ),
        Some(ForgeMode::OtherAccount) => {
            let other = s
                .config
                .accounts
                .iter()
                .map(|a| a.id.as_str())
                .find(|a| *a != r.account.id)
                .unwrap_or("acct_forged");
            contract::sign_canonical(&s.key, &s.key_id, status, other, &r.request_digest, &bytes)
        }
    };
    respond_bytes(status, bytes, Some(tag.to_header()))
}
