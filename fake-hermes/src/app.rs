//! The HTTP application: the run routes as observed on a real Hermes API server (or as newer
//! builds behave, in `newer` mode), the run engine that executes scripts under the session's turn
//! lease, the SSE queues, faults, holds, the ledger and the control API.

use crate::config::{Config, Mode};
use crate::faults::{self, Fault, Plan, Route, RuleState};
use crate::lease::Session;
use crate::pyjson::{Py, py_float};
use crate::script::{self, RunState, Step, StepKind};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::{Notify, mpsc, oneshot};

// ---------- ledger ----------

/// What became of a reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reply {
    Sent,
    ErrorAfterCommit,
    Dropped,
    WithoutRunId,
}

/// A run that really started.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunStarted {
    pub run_id: String,
    pub session_id: String,
    /// SHA-256 of the request body as received.
    pub body_digest: String,
    /// The model-facing prompt (the `input` as Hermes read it).
    pub prompt: String,
    pub idempotency_key: Option<String>,
    pub session_key: Option<String>,
    pub fault: Option<String>,
    pub reply: Reply,
    pub script: String,
}

/// An approval decision that was really applied to a run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ApprovalApplied {
    pub run_id: String,
    pub session_id: String,
    pub choice: String,
    pub resolved: u32,
    pub request_id: Option<String>,
    pub fault: Option<String>,
    pub reply: Reply,
}

/// A stop that was really requested of a run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StopApplied {
    pub run_id: String,
    pub session_id: String,
    /// Whether this stop set the cancel intent (a repeated stop while stopping does not).
    pub effective: bool,
    pub fault: Option<String>,
    pub reply: Reply,
}

/// Per-session counts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub starts: u32,
    pub approvals: u32,
    pub stops: u32,
}

/// The ground truth (`GET /_control/ledger`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Ledger {
    pub runs: Vec<RunStarted>,
    pub approvals: Vec<ApprovalApplied>,
    pub stops: Vec<StopApplied>,
    /// Final statuses of runs, as the engine ended them (survives `forget`).
    pub terminal: BTreeMap<String, String>,
}

impl Ledger {
    pub fn per_session(&self) -> BTreeMap<String, Counts> {
        let mut m: BTreeMap<String, Counts> = BTreeMap::new();
        for r in &self.runs {
            m.entry(r.session_id.clone()).or_default().starts += 1;
        }
        for a in &self.approvals {
            m.entry(a.session_id.clone()).or_default().approvals += 1;
        }
        for s in &self.stops {
            m.entry(s.session_id.clone()).or_default().stops += 1;
        }
        m
    }
}

// ---------- runs ----------

enum Frame {
    Data(String),
    End,
}

#[derive(Debug)]
struct Decision {
    choice: String,
    resolved: u32,
}

struct PendingApproval {
    request_id: String,
    tx: oneshot::Sender<Decision>,
}

#[derive(Clone, Debug, Default)]
struct RunInfo {
    run_id: String,
    session_id: String,
    status: String,
    created_at: f64,
    updated_at: f64,
    last_event: Option<String>,
    output: Option<String>,
    usage: Option<(i64, i64, i64)>,
    error: Option<String>,
    stop_requested: bool,
    stop_fault: Option<Fault>,
    events: u32,
    approval_doc: Option<Py>,
    pending_steer: Option<String>,
    idempotency_key: Option<String>,
}

struct RunCell {
    info: Mutex<RunInfo>,
    tx: Mutex<Option<mpsc::UnboundedSender<Frame>>>,
    rx: Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<Frame>>>,
    registered: AtomicBool,
    stop: Notify,
    approval: Mutex<Option<PendingApproval>>,
    task: Mutex<Option<tokio::task::AbortHandle>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

const TERMINAL: [&str; 4] = ["completed", "failed", "cancelled", "interrupted"];

impl RunCell {
    fn new(info: RunInfo) -> Arc<RunCell> {
        let (tx, rx) = mpsc::unbounded_channel();
        Arc::new(RunCell {
            info: Mutex::new(info),
            tx: Mutex::new(Some(tx)),
            rx: Arc::new(tokio::sync::Mutex::new(rx)),
            registered: AtomicBool::new(true),
            stop: Notify::new(),
            approval: Mutex::new(None),
            task: Mutex::new(None),
        })
    }
    fn status(&self) -> String {
        lock(&self.info).status.clone()
    }
    fn is_terminal(&self) -> bool {
        TERMINAL.contains(&self.status().as_str())
    }
    fn set_status(&self, status: &str, last_event: Option<&str>) {
        let mut i = lock(&self.info);
        i.status = status.to_string();
        if let Some(e) = last_event {
            i.last_event = Some(e.to_string());
        }
        i.updated_at = now();
    }
    fn close_stream(&self) {
        if let Some(tx) = lock(&self.tx).take() {
            let _ = tx.send(Frame::End);
        }
    }
}

// ---------- shared state ----------

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptRule {
    #[serde(default)]
    pub session_id: Option<String>,
    #[serde(default)]
    pub objective_contains: Option<String>,
    pub script: Value,
}

#[derive(Default)]
struct Data {
    runs: HashMap<String, Arc<RunCell>>,
    sessions: HashMap<String, Session>,
    rules: Vec<RuleState>,
    /// Script rules with their plans, built once when the scripts are set.
    scripts: Vec<(ScriptRule, Arc<Vec<Step>>)>,
    default_script: Option<(String, Arc<Vec<Step>>)>,
    ledger: Ledger,
    idem: HashMap<String, (String, String)>,
}

pub use fake_control::ReleaseAction;

struct Shared {
    config: Config,
    data: Mutex<Data>,
    holds: fake_control::Holds,
    turns: Notify,
}

/// A handle on a running fake (ledger, faults, scripts, holds).
#[derive(Clone)]
pub struct Handle(Arc<Shared>);

impl std::fmt::Debug for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle")
            .field("mode", &self.0.config.mode)
            .finish()
    }
}

impl Handle {
    pub fn ledger(&self) -> Ledger {
        lock(&self.0.data).ledger.clone()
    }
    pub fn set_plan(&self, plan: Plan) -> Result<(), Vec<String>> {
        let d = plan.validate();
        if !d.is_empty() {
            return Err(d);
        }
        lock(&self.0.data).rules = plan.rules.into_iter().map(RuleState::new).collect();
        Ok(())
    }
    pub fn rules(&self) -> Vec<RuleState> {
        lock(&self.0.data).rules.clone()
    }
    /// Appends one rule; the counters of the rules already set are kept.
    pub fn add_rule(&self, rule: faults::Rule) -> Result<(), Vec<String>> {
        let d = Plan {
            rules: vec![rule.clone()],
        }
        .validate();
        if !d.is_empty() {
            return Err(d);
        }
        lock(&self.0.data).rules.push(RuleState::new(rule));
        Ok(())
    }
    /// Sets the script rules (first match wins) and optionally the default script.
    pub fn set_scripts(
        &self,
        rules: Vec<ScriptRule>,
        default: Option<Value>,
    ) -> Result<(), Vec<String>> {
        let mut out = Vec::new();
        for (i, r) in rules.iter().enumerate() {
            for d in script::validate(&r.script) {
                out.push(format!(
                    "rules[{i}].script: step {:?} field {:?}: {}",
                    d.step, d.field, d.msg
                ));
            }
        }
        if let Some(s) = &default {
            for d in script::validate(s) {
                out.push(format!(
                    "default: step {:?} field {:?}: {}",
                    d.step, d.field, d.msg
                ));
            }
        }
        if !out.is_empty() {
            return Err(out);
        }
        let mut compiled = Vec::new();
        for r in rules {
            let plan = script::build_plan(&r.script)
                .map_err(|d| d.iter().map(|x| x.msg.clone()).collect::<Vec<_>>())?;
            compiled.push((r, Arc::new(plan)));
        }
        let default = match default {
            Some(v) => {
                let plan = script::build_plan(&v)
                    .map_err(|d| d.iter().map(|x| x.msg.clone()).collect::<Vec<_>>())?;
                Some((script_name(&v, "default"), Arc::new(plan)))
            }
            None => None,
        };
        let mut d = lock(&self.0.data);
        d.scripts = compiled;
        if default.is_some() {
            d.default_script = default;
        }
        Ok(())
    }
    /// Clears runs, sessions, faults, scripts and the ledger.
    pub fn reset(&self) {
        let old = std::mem::take(&mut *lock(&self.0.data));
        for r in old.runs.values() {
            if let Some(t) = lock(&r.task).take() {
                t.abort();
            }
        }
        self.0.holds.reject_all();
    }
    /// Releases every request parked under `name`; returns how many.
    pub fn release(&self, name: &str, action: ReleaseAction) -> usize {
        self.0.holds.release(name, action)
    }
    /// Requests parked per hold name (`{name: [{request_seq, op, …}]}`).
    pub fn holds(&self) -> Value {
        self.0.holds.list()
    }
    /// Waits until at least `n` requests are parked under `name` (or the timeout passes).
    pub async fn wait_parked(&self, name: &str, n: usize, timeout: Duration) -> bool {
        self.0.holds.wait_parked(name, n, timeout).await
    }
    /// Waits until every request parked under `name` (at least one) has lost its client.
    pub async fn wait_client_gone(&self, name: &str, timeout: Duration) -> bool {
        self.0.holds.wait_client_gone(name, timeout).await
    }
    /// A server restart: in-memory runs are lost; newer mode keeps runs created with an
    /// Idempotency-Key as `interrupted`.
    pub fn forget(&self) {
        forget(&self.0);
    }
    pub fn config(&self) -> &Config {
        &self.0.config
    }
}

fn forget(s: &Shared) {
    let mut d = lock(&s.data);
    let runs = std::mem::take(&mut d.runs);
    d.sessions.clear();
    d.idem.retain(|_, _| s.config.mode == Mode::Newer);
    for (id, r) in runs {
        if let Some(t) = lock(&r.task).take() {
            t.abort();
        }
        r.close_stream();
        let keep = s.config.mode == Mode::Newer && lock(&r.info).idempotency_key.is_some();
        if keep {
            {
                let mut i = lock(&r.info);
                if !TERMINAL.contains(&i.status.as_str()) {
                    i.status = "interrupted".into();
                    i.last_event = Some("run.interrupted".into());
                    i.updated_at = now();
                }
            }
            d.runs.insert(id, r);
        }
    }
}

// ---------- responses ----------

fn security_headers(r: &mut Response) {
    let h = r.headers_mut();
    for (k, v) in [
        (
            "content-security-policy",
            "default-src 'none'; frame-ancestors 'none'",
        ),
        (
            "permissions-policy",
            "camera=(), microphone=(), geolocation=()",
        ),
        (
            "strict-transport-security",
            "max-age=31536000; includeSubDomains",
        ),
        ("x-content-type-options", "nosniff"),
        ("x-frame-options", "DENY"),
        ("x-xss-protection", "0"),
        ("referrer-policy", "no-referrer"),
    ] {
        h.insert(HeaderName::from_static(k), HeaderValue::from_static(v));
    }
}

/// A handler's JSON response (with the security headers real handlers add).
fn handler_json(status: u16, body: &Py) -> Response {
    let mut r = Response::new(Body::from(body.dumps()));
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json; charset=utf-8"),
    );
    security_headers(&mut r);
    r
}

fn error_py(message: &str, code: Option<&str>) -> Py {
    Py::obj(vec![(
        "error",
        Py::obj(vec![
            ("message", Py::str(message)),
            ("type", Py::str("invalid_request_error")),
            ("param", Py::Null),
            ("code", code.map_or(Py::Null, Py::str)),
        ]),
    )])
}

fn error(status: u16, message: &str, code: Option<&str>) -> Response {
    handler_json(status, &error_py(message, code))
}

fn plain(status: StatusCode, text: &str) -> Response {
    let mut r = (status, text.to_string()).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

fn unauthorized(mode: Mode) -> Response {
    let code = match mode {
        Mode::Default => "invalid_api_key",
        Mode::Newer => "gateway_auth_failed",
    };
    handler_json(
        401,
        &Py::obj(vec![(
            "error",
            Py::obj(vec![
                ("message", Py::str("Invalid API key")),
                ("type", Py::str("invalid_request_error")),
                ("code", Py::str(code)),
            ]),
        )]),
    )
}

fn authorized(s: &Shared, headers: &HeaderMap) -> bool {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|t| t.trim() == s.config.api_key)
}

// ---------- the router ----------

pub use fake_control::DropConn;

/// Builds the application and its handle; refuses an invalid config with every defect.
pub fn router(config: Config) -> Result<(Router, Handle), Vec<String>> {
    let d = config.validate();
    if !d.is_empty() {
        return Err(d);
    }
    let shared = Arc::new(Shared {
        config,
        data: Mutex::new(Data::default()),
        holds: fake_control::Holds::default(),
        turns: Notify::new(),
    });
    let handle = Handle(shared.clone());
    let mut app = Router::new()
        .route(
            "/health",
            get(|| async { handler_json(200, &Py::obj(vec![("status", Py::str("ok"))])) }),
        )
        .route("/v1/runs", post(start).get(runs_405).fallback(runs_405))
        .route("/v1/runs/{id}", get(status))
        .route("/v1/runs/{id}/events", get(events))
        .route("/v1/runs/{id}/approval", post(approval))
        .route("/v1/runs/{id}/stop", post(stop))
        .merge(fake_control::control::routes::<Arc<Shared>, Handle>())
        .route("/_control/scripts", post(control_scripts))
        .route("/_control/forget", post(control_forget));
    if shared.config.mode == Mode::Newer {
        app = app.route("/v1/runs/{id}/steer", post(steer));
    }
    let app = app
        .fallback(|| async { plain(StatusCode::NOT_FOUND, "404: Not Found") })
        .layer(axum::extract::DefaultBodyLimit::disable())
        .with_state(shared);
    Ok((app, handle))
}

async fn runs_405() -> Response {
    let mut r = plain(StatusCode::METHOD_NOT_ALLOWED, "405: Method Not Allowed");
    r.headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static("POST"));
    r
}

// ---------- the request prelude: faults, holds, delays ----------

enum Pre {
    Go(Option<Fault>),
    Respond(Response),
}

/// `client` is the flag of a watch the caller keeps in the handler that answers the client
/// (start runs detached from its handler); without one the prelude watches its own future.
async fn prelude(
    s: &Arc<Shared>,
    route: Route,
    session: Option<&str>,
    client: Option<fake_control::holds::ClientFlag>,
) -> Pre {
    let fault = faults::select(&mut lock(&s.data).rules, route, session);
    match &fault {
        Some(Fault::Forget) => forget(s),
        Some(Fault::Delay { ms }) => tokio::time::sleep(Duration::from_millis(*ms)).await,
        Some(Fault::Hold { name }) => {
            let (own, mut watch) = s.holds.watch();
            let flag = client.unwrap_or(own);
            let shown = fake_control::holds::Parked {
                request_seq: None,
                op: route.label().to_string(),
                account: None,
                idempotency_key: None,
            };
            let released = s.holds.park(name, shown, flag).released().await;
            watch.answered();
            if let ReleaseAction::Reject { status } = released {
                return Pre::Respond(error(status, "Service unavailable", None));
            }
        }
        Some(Fault::Reject { status }) => {
            return Pre::Respond(error(
                *status,
                &format!("rejected before processing ({status})"),
                None,
            ));
        }
        _ => {}
    }
    Pre::Go(fault)
}

/// Applies a post-commit fault to a response: an error status, or a dropped connection.
async fn after_commit(
    fault: &Option<Fault>,
    resp: Response,
    drop: Option<DropConn>,
) -> (Response, Reply) {
    match fault {
        Some(Fault::CommitThen { status }) => (
            error(*status, "Internal server error after processing", None),
            Reply::ErrorAfterCommit,
        ),
        Some(Fault::CommitThenDrop) => match drop {
            Some(d) => {
                d.0.notify_one();
                std::future::pending::<()>().await;
                (resp, Reply::Dropped)
            }
            None => {
                let mut r = Response::new(Body::empty());
                *r.status_mut() = StatusCode::from_u16(599).unwrap_or(StatusCode::BAD_GATEWAY);
                r.headers_mut()
                    .insert("x-fake-connection", HeaderValue::from_static("dropped"));
                (r, Reply::Dropped)
            }
        },
        _ => (resp, Reply::Sent),
    }
}

fn post_reply(fault: &Option<Fault>) -> Reply {
    match fault {
        Some(Fault::CommitThen { .. }) => Reply::ErrorAfterCommit,
        Some(Fault::CommitThenDrop) => Reply::Dropped,
        _ => Reply::Sent,
    }
}

async fn read_body(
    s: &Shared,
    req: Request,
) -> Result<(HeaderMap, Bytes, Option<DropConn>), Response> {
    let (parts, body) = req.into_parts();
    let limit = s.config.max_body_bytes;
    let too_large = || {
        let mut r = Response::new(Body::from(
            error_py("Request body too large", Some("body_too_large")).dumps(),
        ));
        *r.status_mut() = StatusCode::PAYLOAD_TOO_LARGE;
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json; charset=utf-8"),
        );
        r
    };
    let bytes = fake_control::serve::read_limited(&parts.headers, body, limit, too_large).await?;
    let drop = parts.extensions.get::<DropConn>().cloned();
    Ok((parts.headers, bytes, drop))
}

// ---------- POST /v1/runs ----------

fn prompt_of(input: &Value) -> Result<String, &'static str> {
    match input {
        Value::String(s) if !s.is_empty() => Ok(s.clone()),
        Value::Array(msgs) => msgs
            .iter()
            .rev()
            .find(|m| m.get("role").and_then(Value::as_str) == Some("user"))
            .and_then(|m| m.get("content"))
            .map(|c| match c {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .ok_or("No user message found in input"),
        _ => Err("Missing 'input' field"),
    }
}

async fn start(State(s): State<Arc<Shared>>, req: Request) -> Response {
    if !authorized(&s, req.headers()) {
        return unauthorized(s.config.mode);
    }
    let (headers, bytes, drop) = match read_body(&s, req).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    // The rest runs in its own task: a held start still starts the run when released, even if
    // the client that sent it has died meanwhile (the harness kills senders on purpose).
    let (client, mut watch) = s.holds.watch();
    match tokio::spawn(start_after_read(s, headers, bytes, drop, client)).await {
        Ok(r) => {
            watch.answered();
            r
        }
        Err(e) => plain(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("start task failed: {e}"),
        ),
    }
}

async fn start_after_read(
    s: Arc<Shared>,
    headers: HeaderMap,
    bytes: Bytes,
    drop: Option<DropConn>,
    client: fake_control::holds::ClientFlag,
) -> Response {
    let session_key = headers
        .get("x-hermes-session-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    if session_key.as_ref().is_some_and(|k| k.len() > 256) {
        return error(
            400,
            "X-Hermes-Session-Key must be at most 256 characters",
            None,
        );
    }
    let body: Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(_) => return error(400, "Invalid JSON", None),
    };
    if body.is_array() {
        // The observed server crashes on an array body: a plain-text 500.
        return plain(
            StatusCode::INTERNAL_SERVER_ERROR,
            "500 Internal Server Error\n\nServer got itself in trouble",
        );
    }
    let Some(input) = body.get("input") else {
        return error(400, "Missing 'input' field", None);
    };
    let prompt = match prompt_of(input) {
        Ok(p) => p,
        Err(m) => return error(400, m, None),
    };
    if let Some(h) = body.get("conversation_history")
        && !h.as_array().is_some_and(|a| {
            a.iter()
                .all(|m| m.get("role").is_some_and(Value::is_string) && m.get("content").is_some())
        })
    {
        return error(
            400,
            "Invalid conversation_history: a list of {role, content}",
            None,
        );
    }
    let session_id = body
        .get("session_id")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| {
            let h = fresh_hex32();
            format!(
                "{}-{}-{}-{}-{}",
                &h[..8],
                &h[8..12],
                &h[12..16],
                &h[16..20],
                &h[20..]
            )
        });
    let body_digest = format!("sha256:{}", hex::encode(Sha256::digest(&bytes)));
    let idem_key = match s.config.mode {
        Mode::Newer => match headers
            .get("idempotency-key")
            .map(|v| v.to_str().map(str::to_string))
        {
            None => None,
            Some(Ok(k))
                if !k.is_empty()
                    && k.len() <= 255
                    && k.bytes().all(|b| (0x21..=0x7e).contains(&b)) =>
            {
                Some(k)
            }
            Some(_) => {
                return error(
                    400,
                    "Idempotency-Key must be 1 to 255 visible ASCII characters",
                    None,
                );
            }
        },
        Mode::Default => None,
    };
    let fault = match prelude(&s, Route::Start, Some(&session_id), Some(client)).await {
        Pre::Go(f) => f,
        Pre::Respond(r) => return r,
    };
    // Newer builds: replay or conflict on the Idempotency-Key, and the concurrency cap.
    if let Some(k) = &idem_key {
        let existing = lock(&s.data).idem.get(k).cloned();
        if let Some((digest, run_id)) = existing {
            if digest != body_digest {
                return error(
                    409,
                    "Idempotency-Key reused with a different payload",
                    Some("idempotency_key_conflict"),
                );
            }
            let mut r = handler_json(
                202,
                &Py::obj(vec![
                    ("run_id", Py::str(&run_id)),
                    ("status", Py::str("started")),
                    ("replayed", Py::Bool(true)),
                ]),
            );
            r.headers_mut()
                .insert("idempotency-replayed", HeaderValue::from_static("true"));
            return r;
        }
    }
    if s.config.mode == Mode::Newer {
        let active = lock(&s.data)
            .runs
            .values()
            .filter(|r| !r.is_terminal())
            .count();
        if active >= s.config.max_concurrent_runs {
            let mut r = error(429, "Too many concurrent runs", Some("rate_limit_exceeded"));
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            return r;
        }
    }
    // The run really starts.
    let run_id = format!("run_{}", fresh_hex32());
    let Some((plan, script_name)) = choose_script(&s, &session_id, &prompt) else {
        return error(500, "the built-in script is invalid", None);
    };
    let t = now();
    let cell = RunCell::new(RunInfo {
        run_id: run_id.clone(),
        session_id: session_id.clone(),
        status: "running".into(),
        created_at: t,
        updated_at: t,
        idempotency_key: idem_key.clone(),
        ..RunInfo::default()
    });
    let reply = match fault {
        Some(Fault::StartWithoutRunId) => Reply::WithoutRunId,
        ref f => post_reply(f),
    };
    {
        let mut d = lock(&s.data);
        let sess = d.sessions.entry(session_id.clone()).or_default();
        sess.admit(&run_id);
        if sess.is_queued(&run_id) {
            lock(&cell.info).status = "queued".into();
        }
        d.runs.insert(run_id.clone(), cell.clone());
        if let Some(k) = &idem_key {
            d.idem
                .insert(k.clone(), (body_digest.clone(), run_id.clone()));
        }
        d.ledger.runs.push(RunStarted {
            run_id: run_id.clone(),
            session_id: session_id.clone(),
            body_digest,
            prompt: prompt.clone(),
            idempotency_key: idem_key,
            session_key: session_key.clone(),
            fault: fault.as_ref().map(|f| f.to_string()),
            reply,
            script: script_name,
        });
    }
    let task = tokio::spawn(run_engine(s.clone(), cell.clone(), plan, prompt));
    *lock(&cell.task) = Some(task.abort_handle());
    let mut body = Py::obj(vec![
        ("run_id", Py::str(&run_id)),
        ("status", Py::str("started")),
    ]);
    if let Some(Fault::StartWithoutRunId) = fault {
        body = Py::obj(vec![("status", Py::str("started"))]);
    }
    let mut resp = handler_json(202, &body);
    if let Some(k) = session_key
        && let Ok(v) = HeaderValue::from_str(&k)
    {
        resp.headers_mut().insert("x-hermes-session-key", v);
    }
    after_commit(&fault, resp, drop).await.0
}

fn script_name(v: &Value, fallback: &str) -> String {
    v.get("name")
        .and_then(Value::as_str)
        .unwrap_or(fallback)
        .to_string()
}

static BUILTIN: std::sync::OnceLock<Option<Arc<Vec<Step>>>> = std::sync::OnceLock::new();

fn choose_script(s: &Shared, session: &str, prompt: &str) -> Option<(Arc<Vec<Step>>, String)> {
    let d = lock(&s.data);
    for (i, (r, plan)) in d.scripts.iter().enumerate() {
        let by_session = r.session_id.as_deref().is_none_or(|x| x == session);
        let by_text = r
            .objective_contains
            .as_deref()
            .is_none_or(|t| prompt.contains(t));
        if by_session && by_text && (r.session_id.is_some() || r.objective_contains.is_some()) {
            return Some((plan.clone(), script_name(&r.script, &format!("rule {i}"))));
        }
    }
    if let Some((name, plan)) = &d.default_script {
        return Some((plan.clone(), name.clone()));
    }
    let builtin = BUILTIN
        .get_or_init(|| {
            script::build_plan(&script::default_script())
                .ok()
                .map(Arc::new)
        })
        .clone()?;
    Some((builtin, script_name(&script::default_script(), "default")))
}

/// A random-looking, unique 32-hex id: a random per-process key mixed with a counter (cheaper than
/// asking the OS for randomness on every run).
fn fresh_hex32() -> String {
    use std::sync::atomic::AtomicU64;
    static KEY: std::sync::OnceLock<(u64, u64)> = std::sync::OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let (a, b) = *KEY.get_or_init(|| {
        let u = uuid::Uuid::new_v4().as_u128();
        ((u >> 64) as u64, u as u64)
    });
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    // SplitMix64 steps keyed by the process key: distinct counters give distinct outputs.
    let mix = |mut z: u64| {
        z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    format!("{:016x}{:016x}", mix(n ^ a), n.wrapping_add(b))
}

// ---------- the engine ----------

struct Emitter<'a> {
    s: &'a Shared,
    cell: &'a RunCell,
}

impl Emitter<'_> {
    /// Emits one event: `{"event", "run_id", "timestamp", …fields}`.
    async fn emit(&self, name: &str, fields: Vec<(&str, Py)>) {
        let run_id = lock(&self.cell.info).run_id.clone();
        let mut pairs: Vec<(String, Py)> = vec![
            ("event".into(), Py::str(name)),
            ("run_id".into(), Py::str(&run_id)),
            ("timestamp".into(), Py::Float(now())),
        ];
        pairs.extend(fields.into_iter().map(|(k, v)| (k.to_string(), v)));
        self.send(name, Py::Obj(pairs)).await;
    }

    async fn send(&self, name: &str, event: Py) {
        if self.s.config.event_gap_ms > 0 {
            tokio::time::sleep(Duration::from_millis(self.s.config.event_gap_ms)).await;
        }
        let text = event.dumps();
        {
            let mut i = lock(&self.cell.info);
            if i.events >= self.s.config.max_events_per_run
                || text.len() > self.s.config.max_frame_bytes
            {
                return;
            }
            i.events += 1;
            if name != "message.delta" {
                i.last_event = Some(name.to_string());
            }
            i.updated_at = now();
        }
        if let Some(tx) = lock(&self.cell.tx).as_ref() {
            let _ = tx.send(Frame::Data(format!("data: {text}\n\n")));
        }
    }
}

enum Wake {
    Done,
    Stopped,
}

async fn sleep_or_stop(cell: &RunCell, ms: u64) -> Wake {
    if lock(&cell.info).stop_requested {
        return Wake::Stopped;
    }
    tokio::select! {
        _ = tokio::time::sleep(Duration::from_millis(ms)) => {
            if lock(&cell.info).stop_requested { Wake::Stopped } else { Wake::Done }
        }
        _ = cell.stop.notified() => Wake::Stopped,
    }
}

async fn run_engine(s: Arc<Shared>, cell: Arc<RunCell>, plan: Arc<Vec<Step>>, prompt: String) {
    let (run_id, session_id) = {
        let i = lock(&cell.info);
        (i.run_id.clone(), i.session_id.clone())
    };
    // Admission: wait for the session's turn lease (FIFO, one at a time).
    let holder = loop {
        let notified = s.turns.notified();
        let got = lock(&s.data)
            .sessions
            .get_mut(&session_id)
            .map(|sess| sess.acquire(&run_id));
        match got {
            Some(Ok(h)) => break h,
            Some(Err(_)) => {
                tokio::select! {
                    _ = notified => {}
                    _ = cell.stop.notified() => {}
                }
                if lock(&cell.info).stop_requested {
                    // Stopped while queued: it never executed; it leaves the queue.
                    if let Some(sess) = lock(&s.data).sessions.get_mut(&session_id) {
                        sess.forget(&run_id);
                    }
                    finish_cancelled(&s, &cell, &Emitter { s: &s, cell: &cell }).await;
                    s.turns.notify_waiters();
                    return;
                }
            }
            None => return, // forgotten
        }
    };
    cell.set_status("running", None);
    let em = Emitter { s: &s, cell: &cell };
    let mut st = RunState {
        run_id: run_id.clone(),
        session_id: session_id.clone(),
        status: "running".into(),
        ..RunState::default()
    };
    let persist = |st: &RunState| {
        if let Some(dir) = &s.config.state_dir {
            let _ = script::persist(&dir.join("runs"), st);
        }
    };
    persist(&st);
    let mut stopped = matches!(
        sleep_or_stop(&cell, s.config.first_event_delay_ms).await,
        Wake::Stopped
    );
    let mut after_tool = false;
    let mut failed: Option<String> = None;
    let mut explicit_output: Option<String> = None;
    while !stopped && failed.is_none() && st.cursor < plan.len() {
        let step = &plan[st.cursor];
        st.cursor += 1;
        if st.parent_skipped(step) {
            st.skipped.push(step.id.clone());
            persist(&st);
            continue;
        }
        match &step.kind {
            StepKind::Message { text, chunks } => {
                let n = (*chunks as usize).max(1);
                let chars: Vec<char> = text.chars().collect();
                let size = chars.len().div_ceil(n).max(1);
                for (i, piece) in chars.chunks(size).enumerate() {
                    let mut delta: String = piece.iter().collect();
                    if i == 0 && after_tool {
                        delta = format!("\n\n{delta}");
                    }
                    st.text.push_str(&delta);
                    em.emit("message.delta", vec![("delta", Py::Str(delta))])
                        .await;
                }
                after_tool = false;
            }
            StepKind::Reasoning { text } => {
                em.emit("reasoning.available", vec![("text", Py::str(text))])
                    .await
            }
            StepKind::Tool {
                tool,
                preview,
                duration_ms,
                error,
                ..
            } => {
                em.emit(
                    "tool.started",
                    vec![("tool", Py::str(tool)), ("preview", Py::str(preview))],
                )
                .await;
                if let Wake::Stopped = sleep_or_stop(&cell, *duration_ms).await {
                    stopped = true;
                }
                em.emit(
                    "tool.completed",
                    vec![
                        ("tool", Py::str(tool)),
                        ("duration", Py::Float(*duration_ms as f64 / 1000.0)),
                        ("error", Py::Bool(*error || stopped)),
                    ],
                )
                .await;
                st.outputs
                    .insert(step.id.clone(), json!({"error": *error || stopped}));
                after_tool = true;
            }
            StepKind::Approval {
                tool,
                command,
                description,
                pattern_key,
                allow_permanent,
                timeout_ms,
            } => {
                let started = std::time::Instant::now();
                em.emit(
                    "tool.started",
                    vec![("tool", Py::str(tool)), ("preview", Py::str(command))],
                )
                .await;
                let request_id = uuid::Uuid::new_v4().simple().to_string();
                let mut choices = vec![Py::str("once"), Py::str("session")];
                if *allow_permanent {
                    choices.push(Py::str("always"));
                }
                choices.push(Py::str("deny"));
                // Observed key order: the approval's own fields, then event, run_id, timestamp, choices.
                let mut pairs: Vec<(String, Py)> = vec![
                    ("command".into(), Py::str(command)),
                    ("pattern_key".into(), Py::str(pattern_key)),
                    ("pattern_keys".into(), Py::List(vec![Py::str(pattern_key)])),
                    ("description".into(), Py::str(description)),
                    ("allow_permanent".into(), Py::Bool(*allow_permanent)),
                ];
                if s.config.mode == Mode::Newer {
                    pairs.push(("allow_session".into(), Py::Bool(true)));
                    pairs.push(("request_id".into(), Py::str(&request_id)));
                }
                pairs.push(("event".into(), Py::str("approval.request")));
                pairs.push(("run_id".into(), Py::str(&run_id)));
                pairs.push(("timestamp".into(), Py::Float(now())));
                pairs.push(("choices".into(), Py::List(choices)));
                let (tx, rx) = oneshot::channel();
                *lock(&cell.approval) = Some(PendingApproval {
                    request_id: request_id.clone(),
                    tx,
                });
                em.send("approval.request", Py::Obj(pairs.clone())).await;
                {
                    let mut i = lock(&cell.info);
                    if !i.stop_requested {
                        i.status = "waiting_for_approval".into();
                    }
                    i.approval_doc = Some(Py::Obj(pairs));
                }
                st.pending =
                    Some(json!({"step": step.id, "kind": "approval", "request_id": request_id}));
                persist(&st);
                let timeout =
                    Duration::from_millis(timeout_ms.unwrap_or(s.config.approval_timeout_ms));
                let outcome = if lock(&cell.info).stop_requested {
                    None
                } else {
                    tokio::select! {
                        d = rx => d.ok().map(Ok),
                        _ = tokio::time::sleep(timeout) => Some(Err("timeout")),
                        _ = cell.stop.notified() => None,
                    }
                };
                lock(&cell.approval).take();
                {
                    let mut i = lock(&cell.info);
                    i.approval_doc = None;
                    if i.status == "waiting_for_approval" {
                        i.status = "running".into();
                    }
                }
                st.pending = None;
                let secs = started.elapsed().as_secs_f64();
                // Every ending emits one tool.completed and records the choice; only a granted
                // decision is responded to, and only a stop ends the run.
                let (choice, error) = match outcome {
                    Some(Ok(decision)) => {
                        let mut f = vec![
                            ("choice", Py::str(&decision.choice)),
                            ("resolved", Py::Int(decision.resolved as i64)),
                        ];
                        if s.config.mode == Mode::Newer {
                            f.push(("request_id", Py::str(&request_id)));
                        }
                        em.emit("approval.responded", f).await;
                        let denied = decision.choice == "deny";
                        (decision.choice, denied)
                    }
                    Some(Err(_)) => ("timeout".to_string(), true),
                    None => {
                        stopped = true;
                        ("cancelled".to_string(), true)
                    }
                };
                em.emit(
                    "tool.completed",
                    vec![
                        ("tool", Py::str(tool)),
                        ("duration", Py::Float(secs)),
                        ("error", Py::Bool(error)),
                    ],
                )
                .await;
                st.outputs
                    .insert(step.id.clone(), json!({"choice": choice, "error": error}));
                after_tool = true;
            }
            StepKind::Condition(c) => {
                if !st.eval(c) {
                    st.skipped.push(step.id.clone());
                }
            }
            StepKind::Sleep { ms } => {
                if let Wake::Stopped = sleep_or_stop(&cell, *ms).await {
                    stopped = true;
                }
            }
            StepKind::Fail { error } => failed = Some(error.clone()),
            StepKind::Complete { output } => {
                explicit_output = output.clone();
                st.cursor = plan.len();
            }
        }
        persist(&st);
        if lock(&cell.info).stop_requested {
            stopped = true;
        }
    }
    if stopped {
        let fault = lock(&cell.info).stop_fault.clone();
        match fault {
            Some(Fault::StopStuck) => {
                // The executor never exits: no event, the status stays `stopping`, the lease is
                // held until the process is wiped.
                st.status = "stopping".into();
                persist(&st);
                std::future::pending::<()>().await;
            }
            Some(Fault::CompleteRacesStop) => {
                complete(&s, &cell, &em, &mut st, explicit_output, &prompt).await;
            }
            _ => {
                tokio::time::sleep(Duration::from_millis(s.config.stop_grace_ms)).await;
                st.status = "cancelled".into();
                finish_cancelled(&s, &cell, &em).await;
            }
        }
    } else if let Some(err) = failed {
        em.emit("run.failed", vec![("error", Py::str(&err))]).await;
        {
            let mut i = lock(&cell.info);
            i.error = Some(err);
            i.status = "failed".into();
        }
        st.status = "failed".into();
        ended(&s, &cell, "failed");
    } else {
        complete(&s, &cell, &em, &mut st, explicit_output, &prompt).await;
    }
    persist(&st);
    {
        let mut d = lock(&s.data);
        if let Some(sess) = d.sessions.get_mut(&session_id) {
            let _ = sess.release(&holder);
        }
    }
    s.turns.notify_waiters();
}

async fn complete(
    s: &Shared,
    cell: &RunCell,
    em: &Emitter<'_>,
    st: &mut RunState,
    explicit: Option<String>,
    prompt: &str,
) {
    if !st.text.is_empty() {
        let text: String = st.text.trim_start().chars().take(500).collect();
        em.emit("reasoning.available", vec![("text", Py::Str(text))])
            .await;
    }
    let output = explicit.unwrap_or_else(|| st.text.trim_start().to_string());
    let input_tokens = (prompt.len() / 4 + 1) as i64;
    let output_tokens = (output.len() / 4 + 1) as i64;
    let usage = Py::obj(vec![
        ("input_tokens", Py::Int(input_tokens)),
        ("output_tokens", Py::Int(output_tokens)),
        ("total_tokens", Py::Int(input_tokens + output_tokens)),
    ]);
    em.emit(
        "run.completed",
        vec![("output", Py::str(&output)), ("usage", usage)],
    )
    .await;
    {
        let mut i = lock(&cell.info);
        i.output = Some(output);
        i.usage = Some((input_tokens, output_tokens, input_tokens + output_tokens));
        i.status = "completed".into();
        i.updated_at = now();
    }
    st.status = "completed".into();
    ended(s, cell, "completed");
}

async fn finish_cancelled(s: &Shared, cell: &RunCell, em: &Emitter<'_>) {
    em.emit("run.cancelled", vec![]).await;
    cell.set_status("cancelled", Some("run.cancelled"));
    ended(s, cell, "cancelled");
}

fn ended(s: &Shared, cell: &RunCell, status: &str) {
    let run_id = lock(&cell.info).run_id.clone();
    lock(&s.data)
        .ledger
        .terminal
        .insert(run_id, status.to_string());
    cell.close_stream();
}

// ---------- GET /v1/runs/{id} ----------

fn status_doc(s: &Shared, i: &RunInfo) -> Py {
    let mut doc = Py::obj(vec![
        ("object", Py::str("hermes.run")),
        ("run_id", Py::str(&i.run_id)),
        ("status", Py::str(&i.status)),
        ("updated_at", Py::Float(i.updated_at)),
        ("created_at", Py::Float(i.created_at)),
        ("session_id", Py::str(&i.session_id)),
        ("model", Py::str("hermes-agent")),
    ]);
    if let Some(e) = &i.last_event {
        doc.set("last_event", Py::str(e));
    }
    if let Some(o) = &i.output {
        doc.set("output", Py::str(o));
    }
    if let Some((a, b, c)) = i.usage {
        doc.set(
            "usage",
            Py::obj(vec![
                ("input_tokens", Py::Int(a)),
                ("output_tokens", Py::Int(b)),
                ("total_tokens", Py::Int(c)),
            ]),
        );
    }
    if let Some(e) = &i.error {
        doc.set("error", Py::str(e));
    }
    if s.config.mode == Mode::Newer {
        if let Some(a) = &i.approval_doc {
            doc.set("approval", a.clone());
        }
        if let Some(p) = &i.pending_steer {
            doc.set("pending_steer", Py::str(p));
        }
    }
    doc
}

fn run_of(s: &Shared, id: &str) -> Option<Arc<RunCell>> {
    lock(&s.data).runs.get(id).cloned()
}

fn not_found() -> Response {
    error(404, "Run not found", Some("run_not_found"))
}

async fn status(
    State(s): State<Arc<Shared>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    if !authorized(&s, &headers) {
        return unauthorized(s.config.mode);
    }
    let session = run_of(&s, &id).map(|r| lock(&r.info).session_id.clone());
    if let Pre::Respond(r) = prelude(&s, Route::Status, session.as_deref(), None).await {
        return r;
    }
    match run_of(&s, &id) {
        Some(r) => {
            let doc = status_doc(&s, &lock(&r.info));
            handler_json(200, &doc)
        }
        None => not_found(),
    }
}

// ---------- GET /v1/runs/{id}/events ----------

struct Subscription {
    cell: Arc<RunCell>,
    rx: Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<Frame>>>,
    keepalive: Duration,
    frames: u32,
    garble: Option<u32>,
    drop_after: Option<u32>,
    done: bool,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        // The queue is dropped with its consumer: a new subscription then gets 404.
        self.cell.registered.store(false, Ordering::SeqCst);
    }
}

async fn events(
    State(s): State<Arc<Shared>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    if !authorized(&s, &headers) {
        return unauthorized(s.config.mode);
    }
    let session = run_of(&s, &id).map(|r| lock(&r.info).session_id.clone());
    let fault = match prelude(&s, Route::Events, session.as_deref(), None).await {
        Pre::Go(f) => f,
        Pre::Respond(r) => return r,
    };
    // The server polls for a registered stream for about a second before answering 404.
    let deadline = tokio::time::Instant::now() + Duration::from_millis(s.config.stream_wait_ms);
    let cell = loop {
        match run_of(&s, &id) {
            Some(c) if c.registered.load(Ordering::SeqCst) && fault != Some(Fault::Events404) => {
                break c;
            }
            _ if tokio::time::Instant::now() >= deadline => return not_found(),
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    };
    let sub = Subscription {
        rx: cell.rx.clone(),
        cell,
        keepalive: Duration::from_millis(s.config.keepalive_ms),
        frames: 0,
        garble: match fault {
            Some(Fault::GarbleFrame { frame }) => Some(frame),
            _ => None,
        },
        drop_after: match fault {
            Some(Fault::DropStream { after }) => Some(after),
            _ => None,
        },
        done: false,
    };
    let stream = futures_util::stream::unfold(sub, |mut sub| async move {
        if sub.done {
            return None;
        }
        if sub.drop_after.is_some_and(|n| sub.frames >= n) {
            return None; // the connection ends without `: stream closed`
        }
        let next = {
            let mut rx = sub.rx.lock().await;
            tokio::time::timeout(sub.keepalive, rx.recv()).await
        };
        let chunk = match next {
            Err(_) => ": keepalive\n\n".to_string(),
            Ok(Some(Frame::Data(d))) => {
                sub.frames += 1;
                if sub.garble == Some(sub.frames) {
                    let cut = d.len() / 2;
                    format!("{}\u{1}}}garbled\n\n", &d[..d.floor_char_boundary(cut)])
                } else {
                    d
                }
            }
            Ok(Some(Frame::End)) => {
                sub.done = true;
                ": stream closed\n\n".to_string()
            }
            Ok(None) => {
                // Another subscriber took the end marker from the shared queue: as observed,
                // this one never closes; it only keeps the connection alive.
                tokio::time::sleep(sub.keepalive).await;
                ": keepalive\n\n".to_string()
            }
        };
        Some((
            Ok::<Bytes, std::convert::Infallible>(Bytes::from(chunk)),
            sub,
        ))
    });
    let mut r = Response::new(Body::from_stream(stream));
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    r
}

// ---------- POST /v1/runs/{id}/approval ----------

fn truthy(v: Option<&Value>) -> bool {
    match v {
        Some(Value::Bool(b)) => *b,
        Some(Value::Number(n)) => n.as_i64() == Some(1),
        Some(Value::String(s)) => {
            matches!(s.to_ascii_lowercase().as_str(), "true" | "1" | "yes" | "on")
        }
        _ => false,
    }
}

async fn approval(State(s): State<Arc<Shared>>, Path(id): Path<String>, req: Request) -> Response {
    if !authorized(&s, req.headers()) {
        return unauthorized(s.config.mode);
    }
    let (_, bytes, drop) = match read_body(&s, req).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    let body: Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(_) => return error(400, "Invalid JSON", None),
    };
    let choice = match body
        .get("choice")
        .and_then(Value::as_str)
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some(c @ ("once" | "session" | "always" | "deny")) => c.to_string(),
        Some("approve" | "approved" | "allow") => "once".to_string(),
        _ => {
            return error(
                400,
                "choice must be one of once, session, always, deny",
                Some("invalid_approval_choice"),
            );
        }
    };
    let request_id = match (s.config.mode, body.get("request_id")) {
        (Mode::Newer, Some(Value::String(r))) if r.len() <= 256 => Some(r.clone()),
        (Mode::Newer, Some(_)) => {
            return error(
                400,
                "request_id must be a string of at most 256 characters",
                Some("invalid_approval_request"),
            );
        }
        _ => None,
    };
    let _resolve_all = truthy(body.get("all")) || truthy(body.get("resolve_all"));
    let Some(cell) = run_of(&s, &id) else {
        return not_found();
    };
    let session = lock(&cell.info).session_id.clone();
    let fault = match prelude(&s, Route::Approval, Some(&session), None).await {
        Pre::Go(f) => f,
        Pre::Respond(r) => return r,
    };
    if cell.is_terminal() {
        return error(
            409,
            "No active approval session for this run",
            Some("approval_not_active"),
        );
    }
    let pending = {
        let mut slot = lock(&cell.approval);
        match (&request_id, slot.as_ref()) {
            (Some(want), Some(p)) if &p.request_id != want => None,
            _ => slot.take(),
        }
    };
    let Some(p) = pending else {
        return error(
            409,
            "No approval is pending for this run",
            Some("approval_not_pending"),
        );
    };
    let resolved = 1u32;
    let _ = p.tx.send(Decision {
        choice: choice.clone(),
        resolved,
    });
    lock(&s.data).ledger.approvals.push(ApprovalApplied {
        run_id: id.clone(),
        session_id: session,
        choice: choice.clone(),
        resolved,
        request_id: request_id.clone(),
        fault: fault.as_ref().map(|f| f.to_string()),
        reply: post_reply(&fault),
    });
    let mut doc = Py::obj(vec![
        ("object", Py::str("hermes.run.approval_response")),
        ("run_id", Py::str(&id)),
        ("choice", Py::str(&choice)),
        ("resolved", Py::Int(resolved as i64)),
    ]);
    if let Some(r) = request_id {
        doc.set("request_id", Py::str(&r));
    }
    after_commit(&fault, handler_json(200, &doc), drop).await.0
}

// ---------- POST /v1/runs/{id}/stop ----------

async fn stop(State(s): State<Arc<Shared>>, Path(id): Path<String>, req: Request) -> Response {
    if !authorized(&s, req.headers()) {
        return unauthorized(s.config.mode);
    }
    let drop = req.extensions().get::<DropConn>().cloned();
    let Some(cell) = run_of(&s, &id) else {
        return match s.config.mode {
            Mode::Newer => error(
                409,
                "Run is not active in this process",
                Some("run_not_active"),
            ),
            Mode::Default => not_found(),
        };
    };
    let session = lock(&cell.info).session_id.clone();
    let fault = match prelude(&s, Route::Stop, Some(&session), None).await {
        Pre::Go(f) => f,
        Pre::Respond(r) => return r,
    };
    if cell.is_terminal() {
        return match s.config.mode {
            Mode::Newer => {
                let doc = status_doc(&s, &lock(&cell.info));
                handler_json(200, &doc)
            }
            Mode::Default => not_found(),
        };
    }
    let effective = {
        let mut i = lock(&cell.info);
        let first = !i.stop_requested;
        if first {
            i.stop_requested = true;
            i.stop_fault = fault
                .clone()
                .filter(|f| matches!(f, Fault::StopStuck | Fault::CompleteRacesStop));
        }
        if i.status != "stopping" && !TERMINAL.contains(&i.status.as_str()) {
            i.status = "stopping".into();
            i.last_event = Some("run.stopping".into());
            i.updated_at = now();
        }
        first
    };
    cell.stop.notify_waiters();
    // A pending approval is resolved as deny by the stop (no approval.responded is emitted).
    lock(&cell.approval).take();
    lock(&s.data).ledger.stops.push(StopApplied {
        run_id: id.clone(),
        session_id: session,
        effective,
        fault: fault.as_ref().map(|f| f.to_string()),
        reply: post_reply(&fault),
    });
    let doc = Py::obj(vec![
        ("run_id", Py::str(&id)),
        ("status", Py::str("stopping")),
    ]);
    after_commit(&fault, handler_json(200, &doc), drop).await.0
}

// ---------- POST /v1/runs/{id}/steer (newer) ----------

async fn steer(State(s): State<Arc<Shared>>, Path(id): Path<String>, req: Request) -> Response {
    if !authorized(&s, req.headers()) {
        return unauthorized(s.config.mode);
    }
    let (_, bytes, _) = match read_body(&s, req).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    let body: Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(_) => return error(400, "Invalid JSON", None),
    };
    let text = ["input", "message", "text"]
        .iter()
        .find_map(|k| body.get(*k).and_then(Value::as_str))
        .map(str::to_string);
    let Some(text) = text else {
        return error(400, "Missing 'input' field", None);
    };
    let Some(cell) = run_of(&s, &id) else {
        return not_found();
    };
    if cell.status() != "running" {
        return error(
            409,
            "Run is not accepting steer input",
            Some("run_not_accepting_steer"),
        );
    }
    lock(&cell.info).pending_steer = Some(text);
    Emitter { s: &s, cell: &cell }
        .emit("run.steered", vec![("accepted", Py::Bool(true))])
        .await;
    handler_json(
        200,
        &Py::obj(vec![
            ("object", Py::str("hermes.run.steer")),
            ("run_id", Py::str(&id)),
            ("accepted", Py::Bool(true)),
        ]),
    )
}

// ---------- control ----------

fn control_ok(s: &Arc<Shared>, headers: &HeaderMap) -> Result<Handle, Response> {
    fake_control::control::authorize(headers, &s.config.control_token)?;
    Ok(Handle(s.clone()))
}

async fn control_body<T: serde::de::DeserializeOwned>(req: Request) -> Result<T, Response> {
    fake_control::control::body(req.into_body()).await
}

/// A control answer, in the control plane's one dialect.
fn json_response(status: u16, v: &Value) -> Response {
    fake_control::control::json_response(
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        v,
    )
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptsBody {
    #[serde(default)]
    rules: Vec<ScriptRule>,
    #[serde(default)]
    default: Option<Value>,
}

async fn control_scripts(State(s): State<Arc<Shared>>, req: Request) -> Response {
    let h = match control_ok(&s, req.headers()) {
        Ok(h) => h,
        Err(r) => return r,
    };
    let b: ScriptsBody = match control_body(req).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    match h.set_scripts(b.rules, b.default) {
        Ok(()) => json_response(200, &json!({"ok": true})),
        Err(d) => json_response(
            400,
            &json!({"error": {"code": "invalid_script", "message": d.join("; "), "defects": d}}),
        ),
    }
}

async fn control_forget(State(s): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    match control_ok(&s, &headers) {
        Ok(h) => {
            h.forget();
            json_response(200, &json!({"forgotten": true}))
        }
        Err(r) => r,
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
        let l = Handle::ledger(self);
        json!({"runs": l.runs, "approvals": l.approvals, "stops": l.stops, "terminal": l.terminal, "per_session": l.per_session()})
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

/// `py_float` re-exported for tests that format timestamps.
pub fn format_timestamp(t: f64) -> String {
    py_float(t)
}
