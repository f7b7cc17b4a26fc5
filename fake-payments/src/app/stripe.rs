//! The Stripe-shaped dialect: `/v1/payment_intents` and `/v1/refunds` as Stripe's v1 API
//! speaks them (form-encoded bodies with bracketed keys, its objects, its error envelope and
//! types, `Request-Id`, `Idempotent-Replayed`, `Stripe-Should-Retry`), over the same ledger,
//! idempotency table, faults and holds as the native API: one truth, two dialects.
//!
//! A request is read in this dialect, run through the one pipeline (it is recorded, counted by
//! the fault plan, may be held, replayed or refused there, exactly as a native request), and its
//! native reply is rendered in this dialect on the way out. The ledger stays in the native
//! vocabulary (`pay_` ids, native statuses) and records the dialect, `User-Agent` and
//! `Stripe-Version` of each request.
//!
//! A payment intent created with `confirm=true` is a native creation (the charge happens there).
//! One created unconfirmed is kept here as a draft: no payment, no effect, until `/confirm`
//! makes the charge, recorded as a `PaymentCreated` effect of the confirming request.

use super::*;

/// Stripe's id prefix for a payment intent (the native id's hex after it).
pub(super) const INTENT: &str = provider_model::payments::contract::STRIPE_INTENT;
/// The API version this dialect answers with when the client pins none.
pub const DEFAULT_VERSION: &str = "2025-09-30.clover";

/// What the dialect knows of an intent beyond the native payment.
#[derive(Clone, Debug)]
pub struct Intent {
    pub(super) payment_method: Option<Box<str>>,
    pub(super) manual: bool,
    /// Created unconfirmed and not confirmed since: no payment exists for it.
    pub(super) draft: Option<Draft>,
}

/// An intent created without `confirm=true`.
#[derive(Clone, Debug)]
pub struct Draft {
    account: Box<str>,
    amount: i64,
    currency: Box<str>,
    description: Option<Box<str>>,
    metadata: BTreeMap<String, String>,
    created_ms: u64,
    canceled: bool,
    key: Option<Box<str>>,
}

/// Dialect settings the control plane sets (`POST /_control/stripe`); a reset restores them.
#[derive(Clone, Debug, Default, serde::Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// `Stripe-Should-Retry` on every 409 and 5xx reply of this dialect: `true`, `false`, or
    /// absent (the header is not sent). It decides whether an official SDK retries.
    #[serde(default)]
    pub should_retry: Option<bool>,
    /// How long a new payment stays invisible to `/v1/payment_intents/search` (Stripe's
    /// search is eventually consistent). Retrieval and listing see it at once.
    #[serde(default)]
    pub search_lag_ms: u64,
    /// Where events are delivered, signed with `Stripe-Signature` (absent: no deliveries).
    #[serde(default)]
    pub webhook: Option<super::webhooks::Endpoint>,
}

/// What a request of this dialect asks for.
#[derive(Clone, Debug)]
pub(super) enum StripeAct {
    Create {
        confirm: bool,
        payment_method: Option<String>,
        manual: bool,
    },
    Confirm {
        payment_method: Option<String>,
    },
    Cancel,
    Retrieve,
    /// Newest first, as Stripe lists: `starting_after` pages toward older intents,
    /// `ending_before` toward newer; `created` bounds in seconds.
    List {
        limit: usize,
        before: Option<String>,
        created: Vec<(&'static str, u64)>,
    },
    Search {
        clauses: Vec<(String, String)>,
        limit: usize,
        page: Option<String>,
    },
    Refund,
    RefundGet(String),
    RefundList {
        intent: Option<String>,
        limit: usize,
    },
}

/// The `Request-Id` of the request recorded at `seq`.
pub(super) fn request_id(seq: u64) -> String {
    format!("req_{seq:014}")
}

// ---------- the form encoding ----------

/// Percent-decodes a form component (`+` is a space); a malformed escape is kept literally.
pub(super) fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                let hex = |c: u8| (c as char).to_digit(16);
                match (hex(b[i + 1]), hex(b[i + 2])) {
                    (Some(h), Some(l)) => {
                        out.push((h * 16 + l) as u8);
                        i += 2;
                    }
                    _ => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A form body (`a=1&metadata[k]=v&expand[]=x`) as the JSON object it encodes: every value a
/// string, bracketed keys nested, `[]` appending to an array.
pub(super) fn form_json(bytes: &[u8]) -> Result<Value, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "the body is not UTF-8".to_string())?;
    let mut root = serde_json::Map::new();
    for pair in text.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let (k, v) = (decode(k), decode(v));
        let (head, rest) = match k.find('[') {
            Some(i) => (&k[..i], &k[i..]),
            None => (k.as_str(), ""),
        };
        if head.is_empty() {
            return Err(format!("parameter {k:?} has no name"));
        }
        let mut path = vec![head.to_string()];
        let mut r = rest;
        while !r.is_empty() {
            let Some(inner) = r.strip_prefix('[').and_then(|x| x.split_once(']')) else {
                return Err(format!("parameter {k:?}: brackets do not close"));
            };
            path.push(inner.0.to_string());
            r = inner.1;
        }
        insert(&mut root, &path, v, &k)?;
    }
    Ok(Value::Object(root))
}

fn insert(
    map: &mut serde_json::Map<String, Value>,
    path: &[String],
    v: String,
    whole: &str,
) -> Result<(), String> {
    let clash = || format!("parameter {whole:?} is given both as a value and as a hash");
    match path {
        [] => Ok(()),
        [last] => {
            if map.contains_key(last) {
                return Err(format!("parameter {whole:?} is given twice"));
            }
            map.insert(last.clone(), Value::String(v));
            Ok(())
        }
        [head, next, ..] if next.is_empty() => {
            let e = map
                .entry(head.clone())
                .or_insert_with(|| Value::Array(Vec::new()));
            match e {
                Value::Array(a) if path.len() == 2 => {
                    a.push(Value::String(v));
                    Ok(())
                }
                _ => Err(clash()),
            }
        }
        [head, ..] => {
            let e = map
                .entry(head.clone())
                .or_insert_with(|| Value::Object(serde_json::Map::new()));
            match e {
                Value::Object(m) => insert(m, &path[1..], v, whole),
                _ => Err(clash()),
            }
        }
    }
}

// ---------- reading a request ----------

/// A refusal before the pipeline: Stripe's `invalid_request_error` naming the parameter.
struct Invalid {
    status: u16,
    code: &'static str,
    param: Option<String>,
    message: String,
}

fn invalid(param: &str, message: impl Into<String>) -> Invalid {
    Invalid {
        status: 400,
        code: "parameter_invalid",
        param: Some(param.to_string()),
        message: message.into(),
    }
}

/// Test payment methods: what confirming with each does.
enum Card {
    Approves,
    Declines(&'static str),
}

fn card(pm: &str) -> Option<Card> {
    Some(match pm {
        "pm_card_visa" | "pm_card_mastercard" | "pm_card_amex" | "pm_card_visa_debit" => {
            Card::Approves
        }
        "pm_card_chargeDeclined" | "pm_card_visa_chargeDeclined" => {
            Card::Declines("generic_decline")
        }
        "pm_card_chargeDeclinedInsufficientFunds"
        | "pm_card_visa_chargeDeclinedInsufficientFunds" => Card::Declines("insufficient_funds"),
        "pm_card_chargeDeclinedExpiredCard" => Card::Declines("expired_card"),
        _ => return None,
    })
}

fn string<'a>(
    form: &'a serde_json::Map<String, Value>,
    k: &str,
) -> Result<Option<&'a str>, Invalid> {
    match form.get(k) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(invalid(k, format!("Invalid string: {k} must be a string"))),
    }
}

fn boolean(form: &serde_json::Map<String, Value>, k: &str) -> Result<Option<bool>, Invalid> {
    match string(form, k)? {
        None => Ok(None),
        Some("true") => Ok(Some(true)),
        Some("false") => Ok(Some(false)),
        Some(other) => Err(invalid(k, format!("Invalid boolean: {other}"))),
    }
}

fn unknown(form: &serde_json::Map<String, Value>, allowed: &[&str]) -> Result<(), Invalid> {
    match form.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(Invalid {
            status: 400,
            code: "parameter_unknown",
            param: Some(k.clone()),
            message: format!("Received unknown parameter: {k}"),
        }),
        None => Ok(()),
    }
}

fn payment_method(form: &serde_json::Map<String, Value>) -> Result<Option<String>, Invalid> {
    match string(form, "payment_method")? {
        None => Ok(None),
        Some(pm) if card(pm).is_some() => Ok(Some(pm.to_string())),
        Some(pm) => Err(Invalid {
            status: 400,
            code: "resource_missing",
            param: Some("payment_method".into()),
            message: format!("No such PaymentMethod: '{pm}'"),
        }),
    }
}

/// The native status a confirmation with `pm` gives (`metadata[simulate]` still wins).
fn confirmed_status(pm: &str, manual: bool) -> &'static str {
    match card(pm) {
        Some(Card::Declines(_)) => "declined",
        _ if manual => "requires_capture",
        _ => "succeeded",
    }
}

fn form(body: &Option<Value>) -> serde_json::Map<String, Value> {
    match body {
        Some(Value::Object(m)) => m.clone(),
        _ => serde_json::Map::new(),
    }
}

fn read_create(r: &mut ApiReq) -> Result<StripeAct, Invalid> {
    let f = form(&r.body);
    unknown(
        &f,
        &[
            "amount",
            "currency",
            "payment_method",
            "confirm",
            "capture_method",
            "metadata",
            "description",
            "payment_method_types",
            "automatic_payment_methods",
            "expand",
            "return_url",
        ],
    )?;
    let amount = match string(&f, "amount")? {
        None => {
            return Err(Invalid {
                status: 400,
                code: "parameter_missing",
                param: Some("amount".into()),
                message: "Missing required param: amount.".into(),
            });
        }
        Some(a) => a
            .parse::<i64>()
            .map_err(|_| invalid("amount", format!("Invalid integer: {a}")))?,
    };
    let currency = string(&f, "currency")?.unwrap_or_default().to_string();
    let confirm = boolean(&f, "confirm")?.unwrap_or(false);
    let manual = match string(&f, "capture_method")? {
        None | Some("automatic") | Some("automatic_async") => false,
        Some("manual") => true,
        Some(other) => {
            return Err(invalid(
                "capture_method",
                format!(
                    "Invalid capture_method: must be one of automatic, automatic_async, or manual (got {other})"
                ),
            ));
        }
    };
    let pm = payment_method(&f)?;
    if confirm && pm.is_none() {
        return Err(Invalid {
            status: 400,
            code: "payment_intent_unexpected_state",
            param: Some("payment_method".into()),
            message: "You cannot confirm this PaymentIntent because it's missing a payment method."
                .into(),
        });
    }
    let metadata = match f.get("metadata") {
        None => Value::Null,
        Some(Value::Object(m)) => Value::Object(m.clone()),
        // `metadata=` (empty) clears metadata at Stripe; on a creation it is none.
        Some(Value::String(s)) if s.is_empty() => Value::Null,
        Some(_) => return Err(invalid("metadata", "Invalid hash: metadata must be a hash")),
    };
    let native = json!({
        "amount": amount,
        "currency": currency,
        "description": string(&f, "description")?,
        "metadata": metadata,
        "capture": !manual,
    });
    let mut fields = validate_create(&Some(native)).map_err(|m| {
        let param = ["amount", "currency", "metadata", "description"]
            .into_iter()
            .find(|p| m.contains(&format!("`{p}")))
            .unwrap_or("amount");
        invalid(param, m)
    })?;
    if let Some(pm) = &pm
        && !fields.metadata.contains_key("simulate")
    {
        fields.status = confirmed_status(pm, manual).to_string();
    }
    r.create = Some(fields);
    Ok(StripeAct::Create {
        confirm,
        payment_method: pm,
        manual,
    })
}

fn limit(q: &HashMap<String, String>) -> Result<usize, Invalid> {
    match q.get("limit") {
        None => Ok(10),
        Some(l) => match l.parse::<usize>() {
            Ok(n) if (1..=100).contains(&n) => Ok(n),
            _ => Err(invalid(
                "limit",
                format!("Invalid limit: must be between 1 and 100 (got {l})"),
            )),
        },
    }
}

/// A search query: `field:'value'` clauses joined by ` AND ` (`metadata['key']:'value'`,
/// `status:'succeeded'`, `currency:'usd'`). Anything else is refused, naming the clause.
fn read_query(q: &str) -> Result<Vec<(String, String)>, Invalid> {
    let mut out = Vec::new();
    for clause in q.split(" AND ").map(str::trim) {
        let parsed = clause.split_once(':').and_then(|(field, value)| {
            let value = value.trim().strip_prefix('\'')?.strip_suffix('\'')?;
            let field = field.trim();
            let field = match field.strip_prefix("metadata[") {
                Some(rest) => {
                    let key = rest
                        .strip_suffix(']')?
                        .trim_matches(|c| c == '\'' || c == '"');
                    format!("metadata.{key}")
                }
                None if ["status", "currency"].contains(&field) => field.to_string(),
                None => return None,
            };
            Some((field, value.to_string()))
        });
        match parsed {
            Some(c) => out.push(c),
            None => {
                return Err(invalid(
                    "query",
                    format!(
                        "this search supports `metadata['key']:'value'`, `status:'…'` and `currency:'…'` joined by AND; cannot read {clause:?}"
                    ),
                ));
            }
        }
    }
    Ok(out)
}

/// The native payment id a Stripe intent id names (anything else is passed on, to be not found).
pub(super) fn native_id(id: &str) -> String {
    provider_model::payments::contract::native_payment_id(id)
}

fn stripe_id(native: &str) -> String {
    match native.strip_prefix(PAY) {
        Some(hex) => format!("{INTENT}{hex}"),
        None => native.to_string(),
    }
}

// ---------- routes ----------

async fn call(
    s: Arc<Shared>,
    op: Op,
    req: Request,
    id: Option<String>,
    read: impl FnOnce(&mut ApiReq) -> Result<StripeAct, Invalid>,
) -> Response {
    let path = req.uri().path().to_string();
    let version = req
        .headers()
        .get("stripe-version")
        .and_then(|v| v.to_str().ok())
        .unwrap_or(DEFAULT_VERSION)
        .to_string();
    // Stripe names the key a reply answers (the SDKs read it into `last_response`).
    let key = req
        .headers()
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(|k| k.chars().take(255).collect::<String>());
    let echo = |mut h: HeaderMap| {
        if let Some(v) = key.as_deref().and_then(|k| HeaderValue::from_str(k).ok()) {
            h.insert("idempotency-key", v);
        }
        h
    };
    let resp = match admit_as(&s, op, req, id.as_deref().map(native_id), true).await {
        Ok(mut r) => {
            if let Some(a) = r.query.get_mut("starting_after") {
                *a = native_id(a);
            }
            match read(&mut r) {
                Ok(act) => {
                    r.stripe = Some(act);
                    run(s.clone(), r).await
                }
                // Refused before the pipeline, like a native validation error: not recorded.
                Err(e) => {
                    let body = json!({"error": {
                        "type": "invalid_request_error",
                        "code": e.code,
                        "param": e.param,
                        "message": e.message,
                    }});
                    return finish(&s, e.status, &body, echo(HeaderMap::new()), &version);
                }
            }
        }
        Err(resp) => resp,
    };
    let (mut parts, body) = resp.into_parts();
    parts.headers = echo(parts.headers);
    render(&s, Response::from_parts(parts, body), &path, &version).await
}

pub(super) async fn pi_create(State(s): State<Arc<Shared>>, req: Request) -> Response {
    call(s, Op::Create, req, None, read_create).await
}

pub(super) async fn pi_list(State(s): State<Arc<Shared>>, req: Request) -> Response {
    call(s, Op::List, req, None, |r| {
        let limit = limit(&r.query)?;
        let mut created = Vec::new();
        for (k, v) in &r.query {
            let op = match k.as_str() {
                "limit" | "starting_after" | "ending_before" => continue,
                k if k.starts_with("expand[") => continue,
                "created" => "eq",
                "created[gt]" => "gt",
                "created[gte]" => "gte",
                "created[lt]" => "lt",
                "created[lte]" => "lte",
                other => {
                    return Err(Invalid {
                        status: 400,
                        code: "parameter_unknown",
                        param: Some(other.to_string()),
                        message: format!("Received unknown parameter: {other}"),
                    });
                }
            };
            let t = v
                .parse::<u64>()
                .map_err(|_| invalid(k, format!("Invalid integer: {v}")))?;
            created.push((op, t));
        }
        Ok(StripeAct::List {
            limit,
            before: r.query.get("ending_before").cloned(),
            created,
        })
    })
    .await
}

pub(super) async fn pi_search(State(s): State<Arc<Shared>>, req: Request) -> Response {
    call(s, Op::List, req, None, |r| {
        let Some(q) = r.query.get("query") else {
            return Err(Invalid {
                status: 400,
                code: "parameter_missing",
                param: Some("query".into()),
                message: "Missing required param: query.".into(),
            });
        };
        Ok(StripeAct::Search {
            clauses: read_query(q)?,
            limit: limit(&r.query)?,
            page: r.query.get("page").map(|p| native_id(p)),
        })
    })
    .await
}

pub(super) async fn pi_get(
    State(s): State<Arc<Shared>>,
    Path(id): Path<String>,
    req: Request,
) -> Response {
    call(s, Op::Get, req, Some(id), |_| Ok(StripeAct::Retrieve)).await
}

pub(super) async fn pi_confirm(
    State(s): State<Arc<Shared>>,
    Path(id): Path<String>,
    req: Request,
) -> Response {
    call(s, Op::Confirm, req, Some(id), |r| {
        let f = form(&r.body);
        unknown(&f, &["payment_method", "expand", "return_url"])?;
        Ok(StripeAct::Confirm {
            payment_method: payment_method(&f)?,
        })
    })
    .await
}

pub(super) async fn pi_capture(
    State(s): State<Arc<Shared>>,
    Path(id): Path<String>,
    req: Request,
) -> Response {
    call(s, Op::Capture, req, Some(id), |r| {
        let f = form(&r.body);
        unknown(&f, &["expand"])?;
        Ok(StripeAct::Retrieve)
    })
    .await
}

pub(super) async fn pi_cancel(
    State(s): State<Arc<Shared>>,
    Path(id): Path<String>,
    req: Request,
) -> Response {
    call(s, Op::Cancel, req, Some(id), |r| {
        let f = form(&r.body);
        unknown(&f, &["cancellation_reason", "expand"])?;
        Ok(StripeAct::Cancel)
    })
    .await
}

pub(super) async fn re_create(State(s): State<Arc<Shared>>, req: Request) -> Response {
    call(s, Op::Refund, req, None, |r| {
        let f = form(&r.body);
        unknown(
            &f,
            &["payment_intent", "amount", "reason", "metadata", "expand"],
        )?;
        let Some(pi) = string(&f, "payment_intent")? else {
            return Err(Invalid {
                status: 400,
                code: "parameter_missing",
                param: Some("payment_intent".into()),
                message: "Missing required param: payment_intent (charges are not offered here)."
                    .into(),
            });
        };
        let amount = match string(&f, "amount")? {
            None => None,
            Some(a) => match a.parse::<i64>() {
                Ok(n) if n > 0 && n <= MAX_AMOUNT => Some(n),
                _ => return Err(invalid("amount", format!("Invalid positive integer: {a}"))),
            },
        };
        r.payment_id = Some(native_id(pi));
        // The native refund reads its amount from a JSON body; the digest stays the form's.
        r.body = amount.map(|a| json!({"amount": a}));
        Ok(StripeAct::Refund)
    })
    .await
}

pub(super) async fn re_get(
    State(s): State<Arc<Shared>>,
    Path(id): Path<String>,
    req: Request,
) -> Response {
    call(s, Op::Get, req, None, move |_| Ok(StripeAct::RefundGet(id))).await
}

pub(super) async fn re_list(State(s): State<Arc<Shared>>, req: Request) -> Response {
    call(s, Op::List, req, None, |r| {
        Ok(StripeAct::RefundList {
            intent: r.query.get("payment_intent").map(|p| native_id(p)),
            limit: limit(&r.query)?,
        })
    })
    .await
}

// ---------- effects ----------

fn decided(status: u16, body: Value, effect: bool) -> Decided {
    Decided {
        status,
        body,
        effect,
        replayed: false,
        created: None,
    }
}

fn not_found(id: &str) -> Decided {
    decided(
        404,
        error_body(
            "payment_not_found",
            format!("no payment {id} for this account"),
        ),
        false,
    )
}

fn draft_json(id: &Id16, dr: &Draft, pm: Option<&str>) -> Value {
    let status = if dr.canceled {
        "canceled"
    } else if pm.is_some() {
        "requires_confirmation"
    } else {
        "requires_payment_method"
    };
    json!({
        "object": "payment",
        "id": id_text(PAY, id),
        "account": &*dr.account,
        "environment": crate::profile::ENVIRONMENT,
        "amount": dr.amount,
        "amount_captured": 0,
        "amount_refunded": 0,
        "currency": &*dr.currency,
        "description": dr.description.as_deref(),
        "metadata": dr.metadata,
        "status": status,
        "created": dr.created_ms / 1000,
        "idempotency_key": dr.key.as_deref(),
    })
}

fn refund_json(b: &Book, e: &Eff) -> Value {
    let pay = b.payments.get(&e.payment);
    json!({
        "object": "refund",
        "id": e.refund.as_ref().map(|r| id_text(REFUND, r)),
        "payment": id_text(PAY, &e.payment),
        "account": pay.map(|p| b.names.str(p.account)),
        "amount": e.amount,
        "currency": pay.map(|p| b.names.str(p.currency)),
        "status": "succeeded",
        "idempotency_key": b.key_of(e.req),
    })
}

/// The effect of a request of this dialect, under the data lock (see `effects::effect`).
pub(super) fn effect(
    s: &Shared,
    d: &mut Data,
    r: &ApiReq,
    seq: u64,
    fault: Option<String>,
    f: &Option<Fault>,
    act: &StripeAct,
) -> Decided {
    let acct = r.account.id.as_str();
    let retention_ms = s.config.retention_secs.saturating_mul(1000);
    let own_draft = |d: &Data, id: &str| {
        id16(PAY, id).filter(|b| {
            d.book
                .intents
                .get(b)
                .and_then(|i| i.draft.as_ref())
                .is_some_and(|dr| &*dr.account == acct)
        })
    };
    match act {
        StripeAct::Create {
            confirm: true,
            payment_method,
            manual,
        } => {
            let Some(c) = r.create.as_ref() else {
                return decided(400, error_body("invalid_request", "invalid create"), false);
            };
            let id = *uuid::Uuid::now_v7().as_bytes();
            let out = create_payment(d, acct, c, seq, fault, id);
            d.book.intents.insert(
                id,
                Intent {
                    payment_method: payment_method.as_deref().map(Into::into),
                    manual: *manual,
                    draft: None,
                },
            );
            super::webhooks::emit(s, d, &id);
            out
        }
        StripeAct::Create {
            confirm: false,
            payment_method,
            manual,
        } => {
            let Some(c) = r.create.as_ref() else {
                return decided(400, error_body("invalid_request", "invalid create"), false);
            };
            let id = *uuid::Uuid::now_v7().as_bytes();
            let dr = Draft {
                account: acct.into(),
                amount: c.amount,
                currency: c.currency.as_str().into(),
                description: c.description.as_deref().map(Into::into),
                metadata: c.metadata.clone(),
                created_ms: d.clock.now_ms(),
                canceled: false,
                key: r.key.as_deref().map(Into::into),
            };
            let body = draft_json(&id, &dr, payment_method.as_deref());
            d.book.intents.insert(
                id,
                Intent {
                    payment_method: payment_method.as_deref().map(Into::into),
                    manual: *manual,
                    draft: Some(dr),
                },
            );
            decided(200, body, false)
        }
        StripeAct::Confirm { payment_method } => {
            let id = r.payment_id.clone().unwrap_or_default();
            if let Some(b) = own_draft(d, &id) {
                let Some(intent) = d.book.intents.get_mut(&b) else {
                    return not_found(&id);
                };
                if let Some(pm) = payment_method {
                    intent.payment_method = Some(pm.as_str().into());
                }
                let Some(pm) = intent.payment_method.clone() else {
                    return decided(
                        409,
                        error_body(
                            "payment_not_confirmable",
                            "You cannot confirm this PaymentIntent because it's missing a payment method.",
                        ),
                        false,
                    );
                };
                let manual = intent.manual;
                let Some(dr) = intent.draft.clone() else {
                    return not_found(&id);
                };
                if dr.canceled {
                    return decided(
                        409,
                        error_body(
                            "payment_not_confirmable",
                            format!("payment {id} is canceled"),
                        ),
                        false,
                    );
                }
                intent.draft = None;
                let status = match dr.metadata.get("simulate") {
                    Some(sim) => sim.clone(),
                    None => confirmed_status(&pm, manual).to_string(),
                };
                let c = CreateFields {
                    amount: dr.amount,
                    currency: dr.currency.to_string(),
                    description: dr.description.as_deref().map(str::to_string),
                    metadata: dr.metadata.clone(),
                    status,
                };
                let mut out = create_payment(d, acct, &c, seq, fault, b);
                if out.status == 201 {
                    out.status = 200;
                }
                super::webhooks::emit(s, d, &b);
                return out;
            }
            match visible(d, retention_ms, acct, &id) {
                Some((_, p)) => decided(
                    409,
                    error_body(
                        "payment_not_confirmable",
                        format!(
                            "You cannot confirm this PaymentIntent because it has a status of {}.",
                            d.book.names.str(p.status)
                        ),
                    ),
                    false,
                ),
                None => not_found(&id),
            }
        }
        StripeAct::Cancel => {
            let id = r.payment_id.clone().unwrap_or_default();
            if let Some(b) = own_draft(d, &id) {
                let pm = d
                    .book
                    .intents
                    .get(&b)
                    .and_then(|i| i.payment_method.clone());
                let Some(dr) = d.book.intents.get_mut(&b).and_then(|i| i.draft.as_mut()) else {
                    return not_found(&id);
                };
                if dr.canceled {
                    return decided(
                        409,
                        error_body(
                            "payment_not_cancelable",
                            format!("payment {id} is canceled"),
                        ),
                        false,
                    );
                }
                // No payment exists and no money moved: a state change of the draft only.
                dr.canceled = true;
                let body = draft_json(&b, dr, pm.as_deref());
                return decided(200, body, false);
            }
            let Some((b, _)) = visible(d, retention_ms, acct, &id) else {
                return not_found(&id);
            };
            let (requires, canceled) = (
                d.book.names.get("requires_capture"),
                d.book.names.get("canceled"),
            );
            let Some(p) = d.book.payments.get_mut(&b) else {
                return not_found(&id);
            };
            if p.status != requires {
                return decided(
                    409,
                    error_body(
                        "payment_not_cancelable",
                        format!(
                            "You cannot cancel this PaymentIntent because it has a status of {}.",
                            d.book.names.str(p.status)
                        ),
                    ),
                    false,
                );
            }
            p.status = canceled;
            push_effect(d, seq, EffectKind::PaymentCanceled, b, None, fault);
            super::webhooks::emit(s, d, &b);
            let body = d
                .book
                .payments
                .get(&b)
                .map_or(Value::Null, |p| d.book.payment_json(&b, p));
            decided(200, body, true)
        }
        StripeAct::Retrieve if r.op == Op::Get => {
            let id = r.payment_id.clone().unwrap_or_default();
            if let Some(b) = own_draft(d, &id) {
                let i = d.book.intents.get(&b);
                if let Some((dr, i)) = i.and_then(|i| i.draft.as_ref().map(|dr| (dr, i))) {
                    return decided(200, draft_json(&b, dr, i.payment_method.as_deref()), false);
                }
            }
            native_effect(s, d, r, seq, fault, f)
        }
        // Capture (read as `Retrieve` with the capture op) and refund: the native effect.
        StripeAct::Retrieve | StripeAct::Refund => {
            let out = native_effect(s, d, r, seq, fault, f);
            if out.effect
                && r.op == Op::Capture
                && let Some(b) = r.payment_id.as_deref().and_then(|p| id16(PAY, p))
            {
                super::webhooks::emit(s, d, &b);
            }
            out
        }
        StripeAct::List {
            limit,
            before,
            created,
        } => {
            let now = d.clock.now_ms();
            let book = &d.book;
            let after = r.query.get("starting_after").map(|a| id16(PAY, a));
            let before = before.as_deref().map(|b| id16(PAY, &native_id(b)));
            let mut hits: Vec<(&Id16, &Payment)> = book
                .payments
                .iter()
                .rev()
                .filter(|(id, p)| {
                    let secs = p.created_ms / 1000;
                    book.names.str(p.account) == acct
                        && !book.expired.contains(*id)
                        && now.saturating_sub(p.created_ms) <= retention_ms
                        // A cursor that is no intent of ours pages nothing.
                        && after.is_none_or(|a| a.is_some_and(|a| **id < a))
                        && before.is_none_or(|b| b.is_some_and(|b| **id > b))
                        && created.iter().all(|(op, t)| match *op {
                            "gt" => secs > *t,
                            "gte" => secs >= *t,
                            "lt" => secs < *t,
                            "lte" => secs <= *t,
                            _ => secs == *t,
                        })
                })
                .collect();
            if matches!(f, Some(Fault::IncompleteListing)) && !hits.is_empty() {
                // The newest matching intent is left out (the one a caller most likely seeks).
                hits.remove(0);
            }
            let has_more = hits.len() > *limit;
            hits.truncate(*limit);
            decided(
                200,
                json!({
                    "object": "list",
                    "data": hits.iter().map(|(id, p)| book.payment_json(id, p)).collect::<Vec<_>>(),
                    "has_more": has_more,
                }),
                false,
            )
        }
        StripeAct::Search {
            clauses,
            limit,
            page,
        } => {
            let lag = s
                .stripe
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .search_lag_ms;
            let now = d.clock.now_ms();
            let book = &d.book;
            let after = page.as_deref().and_then(|p| id16(PAY, p));
            let mut hits: Vec<(&Id16, &Payment)> = book
                .payments
                .iter()
                .rev()
                .filter(|(id, p)| {
                    book.names.str(p.account) == acct
                        && !book.expired.contains(*id)
                        && now.saturating_sub(p.created_ms) <= retention_ms
                        // Not yet indexed: Stripe's search is eventually consistent.
                        && now.saturating_sub(p.created_ms) >= lag
                        && after.is_none_or(|a| **id < a)
                        && clauses.iter().all(|(field, want)| match field.as_str() {
                            "status" => stripe_status(book.names.str(p.status)) == want,
                            "currency" => book.names.str(p.currency) == want,
                            m => m.strip_prefix("metadata.").is_some_and(|k| {
                                p.metadata.iter().any(|(mk, mv)| &**mk == k && &**mv == want)
                            }),
                        })
                })
                .collect();
            if matches!(f, Some(Fault::IncompleteListing)) && !hits.is_empty() {
                hits.remove(0);
            }
            let has_more = hits.len() > *limit;
            hits.truncate(*limit);
            let next = if has_more {
                hits.last().map(|(id, _)| id_text(PAY, id))
            } else {
                None
            };
            decided(
                200,
                json!({
                    "object": "search_result",
                    "data": hits.iter().map(|(id, p)| book.payment_json(id, p)).collect::<Vec<_>>(),
                    "has_more": has_more,
                    "next_page": next,
                }),
                false,
            )
        }
        StripeAct::RefundGet(id) => {
            let want = id16(REFUND, id);
            let found = d.book.effects.iter().find(|e| {
                e.kind == EffectKind::PaymentRefunded
                    && want.is_some()
                    && e.refund == want
                    && d.book
                        .payments
                        .get(&e.payment)
                        .is_some_and(|p| d.book.names.str(p.account) == acct)
            });
            match found {
                Some(e) => decided(200, refund_json(&d.book, e), false),
                None => decided(
                    404,
                    error_body(
                        "refund_not_found",
                        format!("no refund {id} for this account"),
                    ),
                    false,
                ),
            }
        }
        StripeAct::RefundList { intent, limit } => {
            let want = intent.as_deref().map(|i| id16(PAY, i));
            let book = &d.book;
            let mut all: Vec<Value> = book
                .effects
                .iter()
                .rev()
                .filter(|e| {
                    e.kind == EffectKind::PaymentRefunded
                        && book
                            .payments
                            .get(&e.payment)
                            .is_some_and(|p| book.names.str(p.account) == acct)
                        && want.is_none_or(|w| w == Some(e.payment))
                })
                .map(|e| refund_json(book, e))
                .collect();
            let has_more = all.len() > *limit;
            all.truncate(*limit);
            decided(
                200,
                json!({"object": "list", "data": all, "has_more": has_more, "complete": !has_more}),
                false,
            )
        }
    }
}

// ---------- rendering a reply in this dialect ----------

/// A native status as a payment intent's status.
fn stripe_status(native: &str) -> &str {
    match native {
        "declined" | "failed" => "requires_payment_method",
        // A dispute is on the charge; the intent stays succeeded.
        "disputed" => "succeeded",
        other => other,
    }
}

fn intent_json(s: &Shared, p: &Value) -> Value {
    let d = s.data.lock().unwrap_or_else(|e| e.into_inner());
    intent_of(&d.book, p)
}

/// A native payment's body as a payment intent, with what the dialect knows of it.
pub(super) fn intent_of(book: &Book, p: &Value) -> Value {
    let native = p["id"].as_str().unwrap_or_default();
    let id = stripe_id(native);
    let (pm, manual) = id16(PAY, native)
        .and_then(|b| book.intents.get(&b))
        .map_or((None, false), |i| {
            (i.payment_method.as_deref().map(str::to_string), i.manual)
        });
    let native_status = p["status"].as_str().unwrap_or_default();
    let status = stripe_status(native_status);
    let amount = p["amount"].as_i64().unwrap_or(0);
    let charged = matches!(native_status, "succeeded" | "requires_capture" | "disputed");
    let hex = native.strip_prefix(PAY).unwrap_or(native);
    let decline = pm.as_deref().and_then(|pm| match card(pm) {
        Some(Card::Declines(code)) => Some(code),
        _ => None,
    });
    json!({
        "id": id,
        "object": "payment_intent",
        "amount": amount,
        "amount_capturable": if native_status == "requires_capture" { amount } else { 0 },
        "amount_received": p["amount_captured"],
        "capture_method": if manual { "manual" } else { "automatic" },
        "client_secret": format!("{id}_secret_{}", &hex[..hex.len().min(8)]),
        "confirmation_method": "automatic",
        "created": p["created"],
        "currency": p["currency"],
        "description": p["description"],
        "latest_charge": charged.then(|| format!("ch_{hex}")),
        "last_payment_error": (native_status == "declined").then(|| json!({
            "type": "card_error",
            "code": "card_declined",
            "decline_code": decline.unwrap_or("generic_decline"),
            "message": "Your card was declined.",
        })),
        "livemode": false,
        "metadata": p["metadata"],
        "payment_method": pm,
        "payment_method_types": ["card"],
        "status": status,
    })
}

fn refund_out(r: &Value) -> Value {
    json!({
        "id": r["id"],
        "object": "refund",
        "amount": r["amount"],
        "currency": r["currency"],
        "payment_intent": r["payment"].as_str().map(stripe_id),
        "charge": r["payment"].as_str().and_then(|p| p.strip_prefix(PAY)).map(|h| format!("ch_{h}")),
        "status": r["status"],
        "metadata": {},
    })
}

fn object_out(s: &Shared, v: &Value, path: &str) -> Value {
    match v["object"].as_str() {
        Some("payment") => intent_json(s, v),
        Some("refund") => refund_out(v),
        Some(kind @ ("list" | "search_result")) => {
            let data: Vec<Value> = v["data"]
                .as_array()
                .map(|a| a.iter().map(|x| object_out(s, x, path)).collect())
                .unwrap_or_default();
            let mut out = json!({
                "object": kind,
                "url": path,
                "has_more": v["has_more"],
                "data": data,
            });
            if kind == "search_result" {
                out["next_page"] = v["next_page"]
                    .as_str()
                    .map_or(Value::Null, |p| Value::String(stripe_id(p)));
            }
            out
        }
        _ => v.clone(),
    }
}

/// A native error as Stripe's envelope: `(status, body)`.
fn error_out(s: &Shared, status: u16, e: &Value, path: &str) -> (u16, Value) {
    let code = e["code"].as_str().unwrap_or_default();
    let message = e["message"].as_str().unwrap_or_default().to_string();
    let err = |ty: &str, code: Option<&str>, message: String| json!({"error": {"type": ty, "code": code, "message": message}});
    match (status, code) {
        (402, "card_declined") => {
            let intent = object_out(s, &e["payment"], path);
            let decline = intent["last_payment_error"]["decline_code"].clone();
            (
                402,
                json!({"error": {
                    "type": "card_error",
                    "code": "card_declined",
                    "decline_code": decline,
                    "message": "Your card was declined.",
                    "payment_intent": intent,
                }}),
            )
        }
        (_, "idempotency_key_reuse" | "idempotency_key_mismatch") => (
            400,
            err(
                "idempotency_error",
                None,
                "Keys for idempotent requests can only be used with the same parameters they were first used with.".into(),
            ),
        ),
        (_, "idempotency_key_in_flight") => (
            409,
            err(
                "idempotency_error",
                None,
                "There is currently another in-progress request using this Stripe API key and idempotency key.".into(),
            ),
        ),
        (401, _) => (
            401,
            err(
                "invalid_request_error",
                None,
                "Invalid API Key provided.".into(),
            ),
        ),
        (404, _) => (
            404,
            json!({"error": {"type": "invalid_request_error", "code": "resource_missing",
                "param": "id", "message": message}}),
        ),
        (_, "payment_not_capturable" | "payment_not_confirmable" | "payment_not_cancelable") => (
            400,
            err(
                "invalid_request_error",
                Some("payment_intent_unexpected_state"),
                message,
            ),
        ),
        (_, "payment_not_refundable") => (
            400,
            err("invalid_request_error", Some("charge_already_refunded"), message),
        ),
        (_, "amount_invalid") => (
            400,
            json!({"error": {"type": "invalid_request_error", "code": "amount_too_large",
                "param": "amount", "message": message}}),
        ),
        (429, _) => (429, err("invalid_request_error", Some("rate_limit"), message)),
        (st, _) if st >= 500 => (st, err("api_error", None, message)),
        (st, c) => (st, err("invalid_request_error", Some(c), message)),
    }
}

/// Renders a reply of the pipeline (or a refusal before it) in this dialect. An undecodable
/// body (a garbled reply, a dropped connection's marker) is passed on untouched.
async fn render(s: &Shared, resp: Response, path: &str, version: &str) -> Response {
    let (parts, body) = resp.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return Response::from_parts(parts, Body::empty());
    };
    let Ok(native) = serde_json::from_slice::<Value>(&bytes) else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    let status = parts.status.as_u16();
    let (status, out) = if native.get("error").is_some() {
        error_out(s, status, &native["error"], path)
    } else {
        (
            if status == 201 { 200 } else { status },
            object_out(s, &native, path),
        )
    };
    finish(s, status, &out, parts.headers, version)
}

fn finish(
    s: &Shared,
    status: u16,
    body: &Value,
    mut headers: HeaderMap,
    version: &str,
) -> Response {
    // The native tag signs the native body: it does not belong on this one.
    headers.remove(SIGNATURE_HEADER);
    headers.remove(header::CONTENT_LENGTH);
    if let Ok(v) = HeaderValue::from_str(version) {
        headers.insert("stripe-version", v);
    }
    if status == 409 || status >= 500 {
        let advice = s
            .stripe
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .should_retry;
        if let Some(b) = advice {
            headers.insert(
                "stripe-should-retry",
                HeaderValue::from_static(if b { "true" } else { "false" }),
            );
        }
    }
    let mut r = Response::new(Body::from(body.to_string()));
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    *r.headers_mut() = headers;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

// ---------- control ----------

pub(super) async fn control_stripe(
    State(s): State<Arc<Shared>>,
    method: Method,
    req: Request,
) -> Response {
    if let Err(r) = control(&s, req.headers()) {
        return r;
    }
    if method == Method::POST {
        let b: Settings = match control_json(req).await {
            Ok(b) => b,
            Err(r) => return r,
        };
        *s.stripe.lock().unwrap_or_else(|p| p.into_inner()) = b;
    }
    let now = s.stripe.lock().unwrap_or_else(|p| p.into_inner()).clone();
    plain_json(StatusCode::OK, &json!(now))
}

pub(super) async fn control_webhooks(State(s): State<Arc<Shared>>, req: Request) -> Response {
    if let Err(r) = control(&s, req.headers()) {
        return r;
    }
    plain_json(StatusCode::OK, &json!({"deliveries": s.hooks.deliveries()}))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ForgeBody {
    payment_id: String,
    #[serde(default = "failed")]
    status: String,
}

fn failed() -> String {
    "declined".into()
}

pub(super) async fn control_forge(State(s): State<Arc<Shared>>, req: Request) -> Response {
    let h = match control(&s, req.headers()) {
        Ok(h) => h,
        Err(r) => return r,
    };
    let b: ForgeBody = match control_json(req).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    match h.forge_webhook(&b.payment_id, &b.status).await {
        Ok(id) => plain_json(StatusCode::OK, &json!({"forged": id})),
        Err(e) => plain_json(StatusCode::BAD_REQUEST, &error_body("invalid_request", e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::flat("amount=2000&currency=usd", json!({"amount": "2000", "currency": "usd"}))]
    #[case::nested("metadata[order_id]=o%2F1&metadata[n]=a+b", json!({"metadata": {"order_id": "o/1", "n": "a b"}}))]
    #[case::array("expand[]=latest_charge&expand[]=customer", json!({"expand": ["latest_charge", "customer"]}))]
    #[case::encoded_brackets("metadata%5Bk%5D=v", json!({"metadata": {"k": "v"}}))]
    #[case::empty_value("description=", json!({"description": ""}))]
    fn a_form_reads_as_the_object_it_encodes(#[case] body: &str, #[case] want: Value) {
        assert_eq!(form_json(body.as_bytes()), Ok(want));
    }

    #[rstest]
    #[case::twice("a=1&a=2", "given twice")]
    #[case::clash("metadata=x&metadata[k]=v", "both as a value and as a hash")]
    #[case::open("metadata[k=v", "do not close")]
    #[case::nameless("[k]=v", "no name")]
    fn a_malformed_form_is_refused_saying_why(#[case] body: &str, #[case] why: &str) {
        let e = form_json(body.as_bytes()).err().unwrap_or_default();
        assert!(e.contains(why), "{e}");
    }

    #[rstest]
    #[case("100%25", "100%")]
    #[case("%zz", "%zz")]
    #[case("a%2", "a%2")]
    #[case("%C3%A9", "é")]
    fn decoding_keeps_a_malformed_escape(#[case] s: &str, #[case] want: &str) {
        assert_eq!(decode(s), want);
    }

    #[rstest]
    #[case("metadata['order_id']:'o1'", vec![("metadata.order_id", "o1")])]
    #[case("metadata[\"k\"]:'v' AND status:'succeeded'", vec![("metadata.k", "v"), ("status", "succeeded")])]
    fn a_search_query_reads_into_clauses(#[case] q: &str, #[case] want: Vec<(&str, &str)>) {
        let got = read_query(q).ok().unwrap_or_default();
        let want: Vec<(String, String)> = want
            .into_iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        assert_eq!(got, want);
    }

    #[rstest]
    #[case("amount>100")]
    #[case("metadata['k']:v")]
    #[case("customer:'cus_1'")]
    fn an_unsupported_search_is_refused_naming_the_clause(#[case] q: &str) {
        let e = read_query(q).err().map(|e| e.message).unwrap_or_default();
        assert!(e.contains("cannot read"), "{e}");
    }
}
