//! The API requests of the fake: bearer authentication, reading and validation into an
//! `ApiReq`, and the route handlers that hand it to the pipeline.

use super::*;

/// A request after authentication, reading and validation.
pub(super) struct ApiReq {
    pub(super) op: Op,
    pub(super) account: Arc<AccountConfig>,
    pub(super) key: Option<String>,
    pub(super) request_digest: String,
    pub(super) body: Option<Value>,
    pub(super) payment_id: Option<String>,
    pub(super) query: HashMap<String, String>,
    pub(super) drop: Option<DropConn>,
    /// The validated create fields (create only).
    pub(super) create: Option<CreateFields>,
    /// Set when the client went away while the request waited.
    pub(super) client_gone: fake_control::holds::ClientFlag,
    /// The label of the credential it was made with (`account` for the account's own key).
    pub(super) credential: String,
    /// Made with a credential revoked before it arrived: recorded, answered 401, no effect.
    pub(super) revoked: bool,
    /// The client's `User-Agent` and `Stripe-Version` headers, as sent.
    pub(super) agent: Option<String>,
    pub(super) version: Option<String>,
    /// What a Stripe-dialect request asks for (`None`: the native API).
    pub(super) stripe: Option<super::stripe::StripeAct>,
}

/// A validated create body.
pub(super) struct CreateFields {
    pub(super) amount: i64,
    pub(super) currency: String,
    pub(super) description: Option<String>,
    pub(super) metadata: BTreeMap<String, String>,
    pub(super) status: String,
}

pub use fake_control::DropConn;

pub(super) enum Outcome {
    Respond(Response),
    Drop,
}

pub(super) fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
        .map(str::trim)
}

/// Authenticate, read (bounded) and parse; on failure, the signed error response.
pub(super) async fn admit(
    s: &Arc<Shared>,
    op: Op,
    req: Request,
    payment_id: Option<String>,
) -> Result<ApiReq, Response> {
    admit_as(s, op, req, payment_id, false).await
}

/// [`admit`] in either dialect: the Stripe dialect's body is form-encoded (bracketed keys,
/// read into the JSON object the request digest is taken over) and its query is percent-decoded.
pub(super) async fn admit_as(
    s: &Arc<Shared>,
    op: Op,
    req: Request,
    payment_id: Option<String>,
    stripe: bool,
) -> Result<ApiReq, Response> {
    let (parts, body) = req.into_parts();
    let pq = path_q(&parts.uri);
    let method = parts.method.as_str().to_string();
    // The digest a refusal before the body is read is bound to (computed only for a refusal).
    let unauth_digest = || contract::request_digest(&method, &pq, None);
    let found = bearer(&parts.headers).and_then(|k| match s.accounts.get(k) {
        Some(a) => Some((a.clone(), "account".to_string(), false)),
        None => {
            let issued = s.issued.lock().unwrap_or_else(|p| p.into_inner());
            let i = issued.get(k)?;
            let a = s.accounts.values().find(|a| a.id == i.account)?;
            Some((a.clone(), i.label.clone(), i.revoked))
        }
    });
    let Some((account, credential, revoked)) = found else {
        return Err(signed(
            s,
            401,
            "-",
            &unauth_digest(),
            &error_body(
                "unauthenticated",
                "send `Authorization: Bearer <account key>`",
            ),
        ));
    };
    let limit = s.config.max_body_bytes;
    let too_large = || {
        signed(
            s,
            413,
            &account.id,
            &unauth_digest(),
            &error_body(
                "body_too_large",
                format!("request bodies are limited to {limit} bytes"),
            ),
        )
    };
    let bytes: Bytes =
        fake_control::serve::read_limited(&parts.headers, body, limit, too_large).await?;
    let body = if bytes.is_empty() {
        None
    } else if stripe {
        match super::stripe::form_json(&bytes) {
            Ok(v) => Some(v),
            Err(e) => {
                return Err(signed(
                    s,
                    400,
                    &account.id,
                    &unauth_digest(),
                    &error_body(
                        "invalid_request",
                        format!("the form body is malformed: {e}"),
                    ),
                ));
            }
        }
    } else {
        match serde_json::from_slice::<Value>(&bytes) {
            Ok(v) => Some(v),
            Err(e) => {
                return Err(signed(
                    s,
                    400,
                    &account.id,
                    &unauth_digest(),
                    &error_body("invalid_json", format!("the body is not JSON: {e}")),
                ));
            }
        }
    };
    let request_digest = contract::request_digest(&method, &pq, body.as_ref());
    let key = parts
        .headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    if let Some(k) = &key
        && (k.is_empty() || k.len() > 255 || !k.bytes().all(|b| (0x21..=0x7e).contains(&b)))
    {
        return Err(signed(
            s,
            400,
            &account.id,
            &request_digest,
            &error_body(
                "idempotency_key_invalid",
                "Idempotency-Key must be 1 to 255 visible ASCII characters",
            ),
        ));
    }
    let query = parts
        .uri
        .query()
        .map(|q| {
            q.split('&')
                .filter_map(|kv| {
                    kv.split_once('=').map(|(k, v)| {
                        if stripe {
                            (super::stripe::decode(k), super::stripe::decode(v))
                        } else {
                            (k.to_string(), v.to_string())
                        }
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    let drop = parts.extensions.get::<DropConn>().cloned();
    let header = |name: &str| {
        parts
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.chars().take(200).collect::<String>())
    };
    Ok(ApiReq {
        agent: header("user-agent"),
        version: header("stripe-version"),
        stripe: None,
        op,
        account,
        key,
        request_digest,
        body,
        payment_id,
        query,
        drop,
        create: None,
        client_gone: Default::default(),
        credential,
        revoked,
    })
}

/// Validates a create body; returns every problem in one message.
pub(super) fn validate_create(body: &Option<Value>) -> Result<CreateFields, String> {
    let Some(Value::Object(b)) = body else {
        return Err("the body must be a JSON object with `amount` and `currency`".into());
    };
    let mut problems = Vec::new();
    for k in b.keys() {
        if !["amount", "currency", "description", "metadata", "capture"].contains(&k.as_str()) {
            problems.push(format!("unknown field `{k}`"));
        }
    }
    let amount = match b.get("amount") {
        Some(Value::Number(n)) if n.is_i64() => {
            let a = n.as_i64().unwrap_or(0);
            if a <= 0 {
                problems.push(format!(
                    "`amount` must be a positive integer in minor units, got {a}"
                ));
            } else if a > MAX_AMOUNT {
                problems.push(format!("`amount` {a} exceeds the maximum {MAX_AMOUNT}"));
            }
            a
        }
        Some(other) => {
            problems.push(format!(
                "`amount` must be an integer in minor units, got {other}"
            ));
            0
        }
        None => {
            problems.push("`amount` is required".into());
            0
        }
    };
    let currency = match b.get("currency") {
        Some(Value::String(c)) if CURRENCIES.contains(&c.as_str()) => c.clone(),
        Some(Value::String(c)) => {
            problems.push(format!(
                "`currency` {c:?} is unknown; one of {CURRENCIES:?}"
            ));
            String::new()
        }
        Some(other) => {
            problems.push(format!("`currency` must be a string, got {other}"));
            String::new()
        }
        None => {
            problems.push("`currency` is required".into());
            String::new()
        }
    };
    let description = match b.get("description") {
        None | Some(Value::Null) => None,
        Some(Value::String(d)) if d.len() <= 1000 => Some(d.clone()),
        Some(Value::String(_)) => {
            problems.push("`description` is limited to 1000 bytes".into());
            None
        }
        Some(other) => {
            problems.push(format!("`description` must be a string, got {other}"));
            None
        }
    };
    let mut metadata = BTreeMap::new();
    match b.get("metadata") {
        None | Some(Value::Null) => {}
        Some(Value::Object(m)) => {
            if m.len() > 20 {
                problems.push("`metadata` holds at most 20 keys".into());
            }
            for (k, v) in m {
                match v {
                    Value::String(s) if k.len() <= 40 && s.len() <= 500 => {
                        metadata.insert(k.clone(), s.clone());
                    }
                    Value::String(_) => {
                        problems.push(format!("`metadata.{k}`: keys ≤ 40 and values ≤ 500 bytes"))
                    }
                    other => problems.push(format!("`metadata.{k}` must be a string, got {other}")),
                }
            }
        }
        Some(other) => problems.push(format!(
            "`metadata` must be an object of strings, got {other}"
        )),
    }
    let capture = match b.get("capture") {
        None | Some(Value::Null) => true,
        Some(Value::Bool(c)) => *c,
        Some(other) => {
            problems.push(format!("`capture` must be a boolean, got {other}"));
            true
        }
    };
    let status = match metadata.get("simulate") {
        Some(sim) if profile::STATUSES.contains(&sim.as_str()) => sim.clone(),
        Some(sim) => {
            problems.push(format!(
                "`metadata.simulate` {sim:?} is not a status; one of {:?}",
                profile::STATUSES
            ));
            String::new()
        }
        None if capture => "succeeded".into(),
        None => "requires_capture".into(),
    };
    if problems.is_empty() {
        Ok(CreateFields {
            amount,
            currency,
            description,
            metadata,
            status,
        })
    } else {
        Err(problems.join("; "))
    }
}

pub(super) async fn create(State(s): State<Arc<Shared>>, req: Request) -> Response {
    match admit(&s, Op::Create, req, None).await {
        Ok(mut r) => {
            match validate_create(&r.body) {
                Ok(fields) => r.create = Some(fields),
                Err(msg) => {
                    return signed(
                        &s,
                        400,
                        &r.account.id,
                        &r.request_digest,
                        &error_body("invalid_request", msg),
                    );
                }
            }
            if r.key.is_none() && r.account.idempotency == IdempotencyProfile::IetfDraft {
                return signed(
                    &s,
                    400,
                    &r.account.id,
                    &r.request_digest,
                    &error_body(
                        "idempotency_key_missing",
                        "this account requires an Idempotency-Key on create",
                    ),
                );
            }
            run(s, r).await
        }
        Err(resp) => resp,
    }
}

pub(super) async fn capture(
    State(s): State<Arc<Shared>>,
    Path(id): Path<String>,
    req: Request,
) -> Response {
    match admit(&s, Op::Capture, req, Some(id)).await {
        Ok(r) => run(s, r).await,
        Err(resp) => resp,
    }
}

pub(super) async fn refund(
    State(s): State<Arc<Shared>>,
    Path(id): Path<String>,
    req: Request,
) -> Response {
    match admit(&s, Op::Refund, req, Some(id)).await {
        Ok(r) => {
            match &r.body {
                None => {}
                Some(Value::Object(b)) if b.keys().all(|k| k == "amount") => {
                    match b.get("amount") {
                        None => {}
                        Some(Value::Number(n))
                            if n.as_i64().is_some_and(|a| a > 0 && a <= MAX_AMOUNT) => {}
                        Some(other) => {
                            return signed(
                                &s,
                                400,
                                &r.account.id,
                                &r.request_digest,
                                &error_body(
                                    "invalid_request",
                                    format!(
                                        "`amount` must be a positive integer ≤ {MAX_AMOUNT}, got {other}"
                                    ),
                                ),
                            );
                        }
                    }
                }
                Some(_) => {
                    return signed(
                        &s,
                        400,
                        &r.account.id,
                        &r.request_digest,
                        &error_body(
                            "invalid_request",
                            "the refund body is `{}` or `{\"amount\": N}`",
                        ),
                    );
                }
            }
            run(s, r).await
        }
        Err(resp) => resp,
    }
}

pub(super) async fn get_payment(
    State(s): State<Arc<Shared>>,
    Path(id): Path<String>,
    req: Request,
) -> Response {
    match admit(&s, Op::Get, req, Some(id)).await {
        Ok(r) => run(s, r).await,
        Err(resp) => resp,
    }
}

pub(super) async fn list(State(s): State<Arc<Shared>>, req: Request) -> Response {
    match admit(&s, Op::List, req, None).await {
        Ok(r) => {
            if let Some(l) = r.query.get("limit")
                && l.parse::<usize>().map_or(true, |n| n == 0 || n > 100)
            {
                return signed(
                    &s,
                    400,
                    &r.account.id,
                    &r.request_digest,
                    &error_body(
                        "invalid_request",
                        format!("`limit` must be 1 to 100, got {l:?}"),
                    ),
                );
            }
            run(s, r).await
        }
        Err(resp) => resp,
    }
}
