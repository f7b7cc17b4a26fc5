//! The HTTP application: routes, the request pipeline (authenticate → read and validate →
//! select a fault → idempotency → pre-effect faults → effect → post-effect faults → sign), the
//! control API, and a server loop that can drop a connection without replying.
//!
//! Effects run in a task of their own, so a client that disappears (or is killed by the harness
//! while its request is held) does not cancel an effect once the provider has decided to commit it;
//! the ledger then records the reply as `client_gone`.

use crate::config::{AccountConfig, CURRENCIES, Config, IdempotencyProfile, MAX_AMOUNT};
use crate::contract::{self, SIGNATURE_HEADER};
use crate::faults::{self, Fault, ForgeMode, Op, Plan, RuleState};
use crate::ledger::{Effect, EffectKind, Ledger, Reply, RequestRecord};
use crate::profile;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine as _;
use ed25519_dalek::SigningKey;
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::oneshot;

/// A payment.
#[derive(Clone, Debug)]
struct Payment {
    id: String,
    account: String,
    amount: i64,
    amount_captured: i64,
    amount_refunded: i64,
    currency: String,
    description: Option<String>,
    metadata: BTreeMap<String, String>,
    status: String,
    created_ms: u64,
    request_digest: String,
    idempotency_key: Option<String>,
}

impl Payment {
    fn json(&self) -> Value {
        json!({
            "object": "payment",
            "id": self.id,
            "account": self.account,
            "environment": profile::ENVIRONMENT,
            "amount": self.amount,
            "amount_captured": self.amount_captured,
            "amount_refunded": self.amount_refunded,
            "currency": self.currency,
            "description": self.description,
            "metadata": self.metadata,
            "status": self.status,
            "created": self.created_ms / 1000,
            "request_digest": self.request_digest,
            "idempotency_key": self.idempotency_key,
        })
    }
}

#[derive(Clone, Debug)]
enum Idem {
    InFlight {
        request_digest: String,
        at_ms: u64,
    },
    Done {
        request_digest: String,
        at_ms: u64,
        status: u16,
        body: Value,
    },
}

impl Idem {
    fn digest(&self) -> &str {
        match self {
            Idem::InFlight { request_digest, .. } | Idem::Done { request_digest, .. } => {
                request_digest
            }
        }
    }
    fn at_ms(&self) -> u64 {
        match self {
            Idem::InFlight { at_ms, .. } | Idem::Done { at_ms, .. } => *at_ms,
        }
    }
}

#[derive(Default)]
struct Data {
    payments: BTreeMap<String, Payment>,
    idem: HashMap<(String, String), Idem>,
    expired: HashSet<String>,
    rules: Vec<RuleState>,
    ledger: Ledger,
    seq: u64,
    effect_seq: u64,
    /// Request seq → index of its effect in `ledger.effects`.
    effect_of: HashMap<u64, usize>,
}

impl Data {
    /// Sets the reply of a request and of its effect, if any (O(1)).
    fn set_reply(&mut self, seq: u64, reply: Reply) {
        if let Some(r) = seq
            .checked_sub(1)
            .and_then(|i| self.ledger.requests.get_mut(i as usize))
            .filter(|r| r.seq == seq)
        {
            r.reply = reply;
        }
        if let Some(e) = self
            .effect_of
            .get(&seq)
            .and_then(|i| self.ledger.effects.get_mut(*i))
        {
            e.reply = reply;
        }
    }
}

pub use fake_control::ReleaseAction;

struct Shared {
    config: Config,
    accounts: HashMap<String, AccountConfig>,
    key: SigningKey,
    key_id: String,
    forge_key: SigningKey,
    data: Mutex<Data>,
    holds: fake_control::Holds,
}

/// A handle on a running fake: ledger, faults and holds, for in-process tests and the binary.
#[derive(Clone)]
pub struct Handle(Arc<Shared>);

impl std::fmt::Debug for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle")
            .field("key_id", &self.0.key_id)
            .finish()
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn random_key() -> SigningKey {
    let mut seed = [0u8; 32];
    if getrandom::fill(&mut seed).is_err() {
        // No entropy source: derive from time and address so the fake still starts; the key is
        // for tests, never for real money.
        let t = now_ms().to_le_bytes();
        seed[..8].copy_from_slice(&t);
    }
    SigningKey::from_bytes(&seed)
}

impl Handle {
    fn lock(&self) -> MutexGuard<'_, Data> {
        self.0.data.lock().unwrap_or_else(|p| p.into_inner())
    }
    /// The ground-truth ledger.
    pub fn ledger(&self) -> Ledger {
        self.lock().ledger.clone()
    }
    /// Replaces the fault plan (counters restart).
    pub fn set_plan(&self, plan: Plan) -> Result<(), Vec<String>> {
        let defects = plan.validate();
        if !defects.is_empty() {
            return Err(defects);
        }
        self.lock().rules = plan.rules.into_iter().map(RuleState::new).collect();
        Ok(())
    }
    /// Appends one rule to the plan; the counters of the rules already set are kept.
    pub fn add_rule(&self, rule: faults::Rule) -> Result<(), Vec<String>> {
        let defects = Plan {
            rules: vec![rule.clone()],
        }
        .validate();
        if !defects.is_empty() {
            return Err(defects);
        }
        self.lock().rules.push(RuleState::new(rule));
        Ok(())
    }
    /// Rules with their counters.
    pub fn rules(&self) -> Vec<RuleState> {
        self.lock().rules.clone()
    }
    /// Clears payments, idempotency keys, faults, holds and the ledger.
    pub fn reset(&self) {
        *self.lock() = Data::default();
        self.0.holds.reject_all();
    }
    /// Releases every request parked under `name`; returns how many.
    pub fn release(&self, name: &str, action: ReleaseAction) -> usize {
        self.0.holds.release(name, action)
    }
    /// Requests parked per hold name.
    pub fn holds(&self) -> Value {
        self.0.holds.list()
    }
    /// Waits until every request parked under `name` (at least one) has lost its client: the
    /// connection closed, or the client process died. A commit released after this is certain
    /// to find nobody to answer (`client_gone`).
    pub async fn wait_client_gone(&self, name: &str, timeout: std::time::Duration) -> bool {
        self.0.holds.wait_client_gone(name, timeout).await
    }
    /// Waits until at least `n` requests are parked under `name` (or the timeout passes).
    pub async fn wait_parked(&self, name: &str, n: usize, timeout: std::time::Duration) -> bool {
        self.0.holds.wait_parked(name, n, timeout).await
    }
    /// Moves one payment (or, with `None`, every payment) beyond retention.
    pub fn expire(&self, payment_id: Option<&str>) -> usize {
        let mut d = self.lock();
        let ids: Vec<String> = match payment_id {
            Some(id) => d
                .payments
                .contains_key(id)
                .then(|| id.to_string())
                .into_iter()
                .collect(),
            None => d.payments.keys().cloned().collect(),
        };
        for id in &ids {
            expire_payment(&mut d, id);
        }
        ids.len()
    }
    /// Sets a payment's native status (settlement, dispute …) as the provider's own doing.
    pub fn set_status(&self, payment_id: &str, status: &str) -> Result<(), String> {
        if !profile::STATUSES.contains(&status) {
            return Err(format!(
                "unknown status {status:?}; one of {:?}",
                profile::STATUSES
            ));
        }
        let mut d = self.lock();
        let p = d
            .payments
            .get_mut(payment_id)
            .ok_or_else(|| format!("no payment {payment_id}"))?;
        p.status = status.to_string();
        if status == "succeeded" {
            p.amount_captured = p.amount;
        }
        Ok(())
    }
    /// The published verifying key.
    pub fn public_key(&self) -> ed25519_dalek::VerifyingKey {
        self.0.key.verifying_key()
    }
    pub fn key_id(&self) -> &str {
        &self.0.key_id
    }
    pub fn config(&self) -> &Config {
        &self.0.config
    }
    /// The published profile and its digest.
    pub fn profile(&self) -> (Value, String) {
        let p = profile::profile(&self.0.key_id, self.0.config.retention_secs);
        let d = profile::digest(&p);
        (p, d)
    }
}

fn expire_payment(d: &mut Data, id: &str) {
    d.expired.insert(id.to_string());
    if let Some(p) = d.payments.get(id)
        && let Some(k) = &p.idempotency_key
    {
        d.idem.remove(&(p.account.clone(), k.clone()));
    }
}

/// Builds the application for `config` (refusing an invalid one with every defect) and a handle.
pub fn router(config: Config) -> Result<(Router, Handle), Vec<String>> {
    let defects = config.validate();
    if !defects.is_empty() {
        return Err(defects);
    }
    let key = match &config.signing_seed_hex {
        Some(h) => {
            let bytes = hex::decode(h).map_err(|e| vec![format!("signing_seed_hex: {e}")])?;
            let seed: [u8; 32] = bytes
                .try_into()
                .map_err(|_| vec!["signing_seed_hex: must be 32 bytes".to_string()])?;
            SigningKey::from_bytes(&seed)
        }
        None => random_key(),
    };
    let key_id = contract::key_id(&key.verifying_key());
    let shared = Arc::new(Shared {
        accounts: config
            .accounts
            .iter()
            .map(|a| (a.key.clone(), a.clone()))
            .collect(),
        config,
        key,
        key_id,
        forge_key: random_key(),
        data: Mutex::new(Data::default()),
        holds: fake_control::Holds::default(),
    });
    let handle = Handle(shared.clone());
    let api = Router::new()
        .route(
            "/v1/payments",
            post(create).get(list).fallback(method_not_allowed),
        )
        .route(
            "/v1/payments/{id}",
            get(get_payment).fallback(method_not_allowed),
        )
        .route(
            "/v1/payments/{id}/capture",
            post(capture).fallback(method_not_allowed),
        )
        .route(
            "/v1/payments/{id}/refund",
            post(refund).fallback(method_not_allowed),
        )
        .route(
            "/v1/provider-key",
            get(provider_key).fallback(method_not_allowed),
        )
        .route(
            "/v1/profile",
            get(published_profile).fallback(method_not_allowed),
        )
        .route(
            "/_control/expire",
            post(control_expire).fallback(method_not_allowed),
        )
        .route(
            "/_control/payments/{id}/status",
            post(control_status).fallback(method_not_allowed),
        )
        .merge(fake_control::control::routes::<Arc<Shared>, Handle>())
        .fallback(not_found)
        .layer(axum::extract::DefaultBodyLimit::disable())
        .with_state(shared);
    Ok((api, handle))
}

// ---------- responses ----------

fn error_body(code: &str, message: impl Into<String>) -> Value {
    json!({"error": {"code": code, "message": message.into()}})
}

fn plain_json(status: StatusCode, body: &Value) -> Response {
    let mut r = (status, body.to_string()).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// A signed API response.
fn signed(
    shared: &Shared,
    status: u16,
    account: &str,
    request_digest: &str,
    body: &Value,
) -> Response {
    let bytes = contract::canonical(body);
    let tag = contract::sign_canonical(
        &shared.key,
        &shared.key_id,
        status,
        account,
        request_digest,
        &bytes,
    );
    respond_bytes(status, bytes, Some(tag.to_header()))
}

fn respond_bytes(status: u16, body: Vec<u8>, tag: Option<String>) -> Response {
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if let Some(t) = tag
        && let Ok(v) = HeaderValue::from_str(&t)
    {
        r.headers_mut().insert(SIGNATURE_HEADER, v);
    }
    r
}

async fn not_found(State(s): State<Arc<Shared>>, method: Method, uri: Uri) -> Response {
    let d = contract::request_digest(method.as_str(), &path_q(&uri), None);
    signed(
        &s,
        404,
        "-",
        &d,
        &error_body("not_found", format!("no route {} {}", method, uri.path())),
    )
}

async fn method_not_allowed(State(s): State<Arc<Shared>>, method: Method, uri: Uri) -> Response {
    let d = contract::request_digest(method.as_str(), &path_q(&uri), None);
    signed(
        &s,
        405,
        "-",
        &d,
        &error_body(
            "method_not_allowed",
            format!("{} is not allowed on {}", method, uri.path()),
        ),
    )
}

fn path_q(uri: &Uri) -> String {
    uri.path_and_query()
        .map_or_else(|| uri.path().to_string(), |p| p.as_str().to_string())
}

// ---------- the API pipeline ----------

/// A request after authentication, reading and validation.
struct ApiReq {
    op: Op,
    account: AccountConfig,
    key: Option<String>,
    request_digest: String,
    body: Option<Value>,
    payment_id: Option<String>,
    query: HashMap<String, String>,
    drop: Option<DropConn>,
    /// The validated create fields (create only).
    create: Option<CreateFields>,
    /// Set when the client went away while the request waited.
    client_gone: fake_control::holds::ClientFlag,
}

/// A validated create body.
struct CreateFields {
    amount: i64,
    currency: String,
    description: Option<String>,
    metadata: BTreeMap<String, String>,
    status: String,
}

pub use fake_control::DropConn;

enum Outcome {
    Respond(Response),
    Drop,
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
        .map(str::trim)
}

/// Authenticate, read (bounded) and parse; on failure, the signed error response.
async fn admit(
    s: &Arc<Shared>,
    op: Op,
    req: Request,
    payment_id: Option<String>,
) -> Result<ApiReq, Response> {
    let (parts, body) = req.into_parts();
    let pq = path_q(&parts.uri);
    let method = parts.method.as_str().to_string();
    let unauth_digest = contract::request_digest(&method, &pq, None);
    let Some(account) = bearer(&parts.headers)
        .and_then(|k| s.accounts.get(k))
        .cloned()
    else {
        return Err(signed(
            s,
            401,
            "-",
            &unauth_digest,
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
            &unauth_digest,
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
    } else {
        match serde_json::from_slice::<Value>(&bytes) {
            Ok(v) => Some(v),
            Err(e) => {
                return Err(signed(
                    s,
                    400,
                    &account.id,
                    &unauth_digest,
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
                    kv.split_once('=')
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                })
                .collect()
        })
        .unwrap_or_default();
    let drop = parts.extensions.get::<DropConn>().cloned();
    Ok(ApiReq {
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
    })
}

/// Validates a create body; returns every problem in one message.
fn validate_create(body: &Option<Value>) -> Result<CreateFields, String> {
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

async fn create(State(s): State<Arc<Shared>>, req: Request) -> Response {
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

async fn capture(State(s): State<Arc<Shared>>, Path(id): Path<String>, req: Request) -> Response {
    match admit(&s, Op::Capture, req, Some(id)).await {
        Ok(r) => run(s, r).await,
        Err(resp) => resp,
    }
}

async fn refund(State(s): State<Arc<Shared>>, Path(id): Path<String>, req: Request) -> Response {
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

async fn get_payment(
    State(s): State<Arc<Shared>>,
    Path(id): Path<String>,
    req: Request,
) -> Response {
    match admit(&s, Op::Get, req, Some(id)).await {
        Ok(r) => run(s, r).await,
        Err(resp) => resp,
    }
}

async fn list(State(s): State<Arc<Shared>>, req: Request) -> Response {
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

/// Runs the pipeline and answers with its outcome. When the plan can make a request wait (hold,
/// delay), the pipeline runs in a task of its own so that a client that goes away while waiting
/// does not cancel the effect; otherwise it has no await point between deciding and committing
/// and runs inline.
async fn run(s: Arc<Shared>, mut r: ApiReq) -> Response {
    let drop = r.drop.clone();
    let may_wait = s
        .data
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .rules
        .iter()
        .any(|x| matches!(x.rule.fault, Fault::Hold { .. } | Fault::Delay { .. }));
    let outcome = if may_wait {
        let (tx, rx) = oneshot::channel();
        let shared = s.clone();
        let (flag, mut watch) = s.holds.watch();
        r.client_gone = flag;
        tokio::spawn(async move {
            let (seq, outcome) = pipeline(&shared, r).await;
            if let Err(Outcome::Respond(_)) = tx.send(outcome) {
                mark_reply(&shared, seq, Reply::ClientGone);
            }
        });
        let got = rx.await;
        watch.answered();
        got
    } else {
        Ok(pipeline(&s, r).await.1)
    };
    match outcome {
        Ok(Outcome::Respond(resp)) => resp,
        Ok(Outcome::Drop) => match drop {
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

fn mark_reply(s: &Shared, seq: u64, reply: Reply) {
    s.data
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .set_reply(seq, reply);
}

/// What the effect step decided.
struct Decided {
    status: u16,
    body: Value,
    effect: bool,
    replayed: bool,
}

async fn pipeline(s: &Arc<Shared>, r: ApiReq) -> (u64, Outcome) {
    let acct = r.account.id.clone();
    let uses_idem =
        r.op.is_effectful() && r.key.is_some() && r.account.idempotency != IdempotencyProfile::None;
    let idem_key = (acct.clone(), r.key.clone().unwrap_or_default());
    // 1. Count the request and select its fault.
    let (seq, fault) = {
        let mut d = s.data.lock().unwrap_or_else(|p| p.into_inner());
        d.seq += 1;
        let seq = d.seq;
        let fault =
            faults::select(&mut d.rules, r.op, Some(&acct), r.key.as_deref()).map(|(_, f)| f);
        d.ledger.requests.push(RequestRecord {
            seq,
            op: r.op.label().into(),
            account: Some(acct.clone()),
            idempotency_key: r.key.clone(),
            request_digest: r.request_digest.clone(),
            fault: fault.as_ref().map(|f| f.to_string()),
            status: 0,
            replayed: false,
            effect: false,
            reply: Reply::Pending,
        });
        // 2. Faults that act on provider state before anything else.
        match &fault {
            Some(Fault::Forget) => d.idem.clear(),
            Some(Fault::ExpireRetention) => {
                let target = r.payment_id.clone().or_else(|| {
                    let key = r
                        .key
                        .as_deref()
                        .or(r.query.get("idempotency_key").map(String::as_str))?;
                    d.payments
                        .values()
                        .find(|p| p.account == acct && p.idempotency_key.as_deref() == Some(key))
                        .map(|p| p.id.clone())
                });
                match target {
                    Some(id) => expire_payment(&mut d, &id),
                    None => {
                        let ids: Vec<String> = d
                            .payments
                            .values()
                            .filter(|p| p.account == acct)
                            .map(|p| p.id.clone())
                            .collect();
                        for id in ids {
                            expire_payment(&mut d, &id);
                        }
                    }
                }
            }
            _ => {}
        }
        (seq, fault)
    };
    let finish = |status: u16, body: &Value, reply: Reply, replayed: bool, effect: bool| {
        let mut d = s.data.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(rec) = seq
            .checked_sub(1)
            .and_then(|i| d.ledger.requests.get_mut(i as usize))
            .filter(|x| x.seq == seq)
        {
            rec.status = status;
            rec.replayed = replayed;
            rec.effect = effect;
        }
        d.set_reply(seq, reply);
        let _ = body;
    };
    // 3. Idempotency.
    if uses_idem {
        let now = now_ms();
        let retention = s.config.retention_secs.saturating_mul(1000);
        let mut d = s.data.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = d.idem.get(&idem_key).cloned() {
            if now.saturating_sub(e.at_ms()) > retention {
                d.idem.remove(&idem_key);
            } else {
                let profile = r.account.idempotency;
                let (status, body, replayed) = if e.digest() != r.request_digest {
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
                    match e {
                        Idem::InFlight { .. } => (
                            409,
                            error_body(
                                "idempotency_key_in_flight",
                                "a request with this Idempotency-Key is still in progress",
                            ),
                            false,
                        ),
                        Idem::Done { status, body, .. } => (status, body, true),
                    }
                };
                drop(d);
                finish(status, &body, Reply::Sent, replayed, false);
                return (
                    seq,
                    Outcome::Respond(tag_response(s, &r, status, &body, None)),
                );
            }
        }
        d.idem.insert(
            idem_key.clone(),
            Idem::InFlight {
                request_digest: r.request_digest.clone(),
                at_ms: now,
            },
        );
    }
    // 4. Pre-effect faults that wait.
    let mut fault = fault;
    match &fault {
        Some(Fault::Delay { ms }) => {
            tokio::time::sleep(std::time::Duration::from_millis(*ms)).await
        }
        Some(Fault::Hold { name }) => {
            let shown = fake_control::holds::Parked {
                request_seq: Some(seq),
                op: r.op.label().to_string(),
                account: Some(acct.clone()),
                idempotency_key: r.key.clone(),
            };
            let release = s.holds.park(name, shown, r.client_gone.clone());
            if let ReleaseAction::Reject { status } = release.released().await {
                fault = Some(Fault::Reject { status });
            }
        }
        _ => {}
    }
    // 5. Rejection before any effect.
    if let Some(Fault::Reject { status }) = fault {
        if uses_idem {
            s.data
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .idem
                .remove(&idem_key);
        }
        let body = error_body(
            if status >= 500 {
                "provider_unavailable"
            } else {
                "rejected"
            },
            format!("rejected before processing with {status}"),
        );
        finish(status, &body, Reply::Sent, false, false);
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
            let (status, body) = match &fault {
                Some(Fault::CommitThen { status }) if decided.effect => (
                    *status,
                    error_body(
                        "provider_error",
                        format!("internal error after processing ({status})"),
                    ),
                ),
                _ => (decided.status, decided.body.clone()),
            };
            d.idem.insert(
                idem_key.clone(),
                Idem::Done {
                    request_digest: r.request_digest.clone(),
                    at_ms: now_ms(),
                    status,
                    body,
                },
            );
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
                Reply::Sent,
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
                Reply::Sent,
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
        _ => {
            finish(
                decided.status,
                &decided.body,
                Reply::Sent,
                decided.replayed,
                decided.effect,
            );
            (
                seq,
                Outcome::Respond(tag_response(s, &r, decided.status, &decided.body, None)),
            )
        }
    }
}

/// Signs for the request's account; a forged tag when asked.
fn tag_response(
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

fn visible<'a>(d: &'a Data, retention_ms: u64, acct: &str, id: &str) -> Option<&'a Payment> {
    d.payments.get(id).filter(|p| {
        p.account == acct
            && !d.expired.contains(&p.id)
            && now_ms().saturating_sub(p.created_ms) <= retention_ms
    })
}

fn push_effect(
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

fn effect(
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
                created_ms: now_ms(),
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
                        && now_ms().saturating_sub(p.created_ms) <= retention_ms
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

// ---------- public documents ----------

async fn provider_key(State(s): State<Arc<Shared>>) -> Response {
    plain_json(
        StatusCode::OK,
        &json!({
            "alg": "Ed25519",
            "key_id": s.key_id,
            "public_key": base64::engine::general_purpose::STANDARD.encode(s.key.verifying_key().as_bytes()),
        }),
    )
}

async fn published_profile(State(s): State<Arc<Shared>>) -> Response {
    let p = profile::profile(&s.key_id, s.config.retention_secs);
    let d = profile::digest(&p);
    plain_json(StatusCode::OK, &json!({"profile": p, "digest": d}))
}

// ---------- control ----------

fn control(s: &Arc<Shared>, headers: &HeaderMap) -> Result<Handle, Response> {
    fake_control::control::authorize(headers, &s.config.control_token)?;
    Ok(Handle(s.clone()))
}

async fn control_json<T: serde::de::DeserializeOwned>(req: Request) -> Result<T, Response> {
    fake_control::control::body(req.into_body()).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExpireBody {
    #[serde(default)]
    payment_id: Option<String>,
}

async fn control_expire(State(s): State<Arc<Shared>>, req: Request) -> Response {
    let h = match control(&s, req.headers()) {
        Ok(h) => h,
        Err(r) => return r,
    };
    let b: ExpireBody = match control_json(req).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    plain_json(
        StatusCode::OK,
        &json!({"expired": h.expire(b.payment_id.as_deref())}),
    )
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StatusBody {
    status: String,
}

async fn control_status(
    State(s): State<Arc<Shared>>,
    Path(id): Path<String>,
    req: Request,
) -> Response {
    let h = match control(&s, req.headers()) {
        Ok(h) => h,
        Err(r) => return r,
    };
    let b: StatusBody = match control_json(req).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    match h.set_status(&id, &b.status) {
        Ok(()) => plain_json(StatusCode::OK, &json!({"payment": id, "status": b.status})),
        Err(e) => plain_json(StatusCode::BAD_REQUEST, &error_body("invalid_request", e)),
    }
}

/// The shared control routes (`fake_control::control::routes`) read and drive this fake.
impl fake_control::control::Plane for Handle {
    type Plan = Plan;
    fn control_token(&self) -> &str {
        &self.0.config.control_token
    }
    fn holds(&self) -> &fake_control::Holds {
        &self.0.holds
    }
    fn rules(&self) -> Value {
        serde_json::to_value(Handle::rules(self)).unwrap_or(Value::Null)
    }
    fn set_plan(&self, plan: Plan) -> Result<(), Vec<String>> {
        Handle::set_plan(self, plan)
    }
    fn ledger(&self) -> Value {
        serde_json::to_value(Handle::ledger(self)).unwrap_or(Value::Null)
    }
    fn reset(&self) {
        Handle::reset(self)
    }
}

impl axum::extract::FromRef<Arc<Shared>> for Handle {
    fn from_ref(s: &Arc<Shared>) -> Self {
        Handle(s.clone())
    }
}

// ---------- serving ----------

pub use fake_control::serve;
