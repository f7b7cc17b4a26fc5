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
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::{Notify, mpsc, oneshot};

pub use fake_control::clock::{Busy, Clock, SimClock};
pub use fake_control::serve;

/// `py_float` re-exported for tests that format timestamps.
pub fn format_timestamp(t: f64) -> String {
    py_float(t)
}

mod actions;
mod control;
pub mod durable;
mod engine;
mod prelude;
mod reads;
mod responses;
mod start;

use actions::*;
use control::*;
use engine::*;
use prelude::*;
use reads::*;
use responses::*;
use start::*;

// ---------- ledger ----------

pub use provider_model::hermes::ledger::*;

// ---------- runs ----------

enum Frame {
    Data(String),
    End,
}

#[derive(Debug)]
struct Decision {
    choice: String,
    resolved: u32,
    /// The engine's busy unit from the moment the decision is sent until it has woken.
    _wake: Option<Busy>,
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
    clock: Clock,
    /// A busy unit a stop hands the engine until it is awake (see `fake_control::clock`).
    wake: Mutex<Option<Busy>>,
    /// Set when the engine has ended (or was aborted): nobody is left to take `wake`.
    engine_ended: AtomicBool,
    /// The start's body digest, for a run with a durable record.
    durable_digest: Mutex<Option<String>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

const TERMINAL: [&str; 4] = ["completed", "failed", "cancelled", "interrupted"];

impl RunCell {
    fn new(info: RunInfo, clock: Clock) -> Arc<RunCell> {
        let (tx, rx) = mpsc::unbounded_channel();
        Arc::new(RunCell {
            info: Mutex::new(info),
            tx: Mutex::new(Some(tx)),
            rx: Arc::new(tokio::sync::Mutex::new(rx)),
            registered: AtomicBool::new(true),
            stop: Notify::new(),
            approval: Mutex::new(None),
            task: Mutex::new(None),
            clock,
            wake: Mutex::new(None),
            engine_ended: AtomicBool::new(false),
            durable_digest: Mutex::new(None),
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
        i.updated_at = self.clock.now_secs();
    }
    /// Hands the engine a busy unit until it is awake, so that the clock cannot jump between
    /// a stop and the engine's reaction to it (nothing to hand an engine that has ended).
    fn hand_wake(&self, unit: Option<Busy>) {
        *lock(&self.wake) = unit;
        if self.engine_ended.load(Ordering::SeqCst) {
            self.awake();
        }
    }
    /// The engine is awake: the unit handed to it is no longer needed.
    fn awake(&self) {
        lock(&self.wake).take();
    }
    /// A wait of the engine on the clock that a stop does not cut short (an event gap, the stop
    /// grace): the engine reacts to a stop only once the wait is over, so a unit a stop hands it
    /// meanwhile is given back at once. Kept, that unit would hold the clock still, and with it
    /// the very wait the engine must finish before it can react: a freeze.
    async fn sleep(&self, ms: u64) {
        let sleep = self.clock.sleep(ms);
        tokio::pin!(sleep);
        loop {
            // Registered before the handed unit is looked for: a stop that hands one after the
            // look also notifies after it, and is seen.
            let stop = self.stop.notified();
            tokio::pin!(stop);
            stop.as_mut().enable();
            self.awake();
            tokio::select! {
                _ = &mut sleep => return,
                _ = stop => {}
            }
        }
    }
    /// A wait of the engine on the clock that the caller races against the stop itself
    /// (`engine::sleep_or_stop`, the approval wait): the unit a stop hands is kept until the
    /// engine, woken by the stop, takes its next wait.
    async fn sleep_until_stopped(&self, ms: u64) {
        self.awake();
        self.clock.sleep(ms).await
    }
    /// A wait of the engine on something other than time (another run, nothing at all).
    async fn idle_while<F: std::future::Future>(&self, fut: F) -> F::Output {
        self.awake();
        self.clock.idle_while(fut).await
    }
    fn close_stream(&self) {
        if let Some(tx) = lock(&self.tx).take() {
            let _ = tx.send(Frame::End);
        }
    }
}

// ---------- shared state ----------

pub use provider_model::hermes::script::ScriptRule;

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
    clock: Clock,
    /// Credentials issued at run time (one per connector process): key → (label, revoked).
    issued: Mutex<HashMap<String, (String, bool)>>,
    data: Mutex<Data>,
    holds: fake_control::Holds,
    turns: Notify,
    /// Every request that reached a `/_control` route over HTTP.
    control_log: fake_control::control::ControlLog,
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
    /// Issues a fresh API key, recorded in the ledger as `label` on every run it starts (the
    /// label, never the key).
    pub fn issue_key(&self, label: &str) -> String {
        let key = format!("hermes-issued-{}", uuid::Uuid::new_v4().simple());
        lock(&self.0.issued).insert(key.clone(), (label.to_string(), false));
        key
    }

    /// Revokes every key issued under `label`: a later use is answered 401 and recorded in
    /// `revoked_uses`. Returns how many.
    pub fn revoke(&self, label: &str) -> usize {
        let mut n = 0;
        for (l, revoked) in lock(&self.0.issued).values_mut() {
            if l == label {
                *revoked = true;
                n += 1;
            }
        }
        n
    }

    /// Every request that reached a `/_control` route over HTTP, refused or not.
    pub fn control_attempts(&self) -> Vec<fake_control::control::ControlAttempt> {
        self.0.control_log.attempts()
    }

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
    /// Disarms every hold rule named `name` that has not fired, so that it parks nothing more
    /// (the harness's own undo, for a hold no request reached); it stays in the plan, unfired.
    /// Returns how many were disarmed.
    pub fn disarm_hold(&self, name: &str) -> usize {
        let mut d = lock(&self.0.data);
        let mut n = 0;
        for r in d.rules.iter_mut() {
            if r.fired == 0 && matches!(&r.rule.fault, faults::Fault::Hold { name: h } if h == name)
            {
                r.rule.times = 0;
                n += 1;
            }
        }
        n
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
    /// A run as this process holds it: its status and whether an approval waits for a
    /// decision (`None`: no such run in memory, never started or forgotten).
    pub fn run_state(&self, run_id: &str) -> Option<(String, bool)> {
        let cell = lock(&self.0.data).runs.get(run_id).cloned()?;
        let pending = lock(&cell.approval).is_some();
        Some((cell.status(), pending))
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
            // After a restart the run's old event stream is gone (404), not replayed.
            r.registered.store(false, Ordering::SeqCst);
            {
                let mut i = lock(&r.info);
                if !TERMINAL.contains(&i.status.as_str()) {
                    i.status = "interrupted".into();
                    i.last_event = Some("run.interrupted".into());
                    i.updated_at = s.clock.now_secs();
                }
            }
            d.runs.insert(id, r);
        }
    }
}

// ---------- the router ----------

pub use fake_control::DropConn;

/// Builds the application and its handle on the system clock; refuses an invalid config with
/// every defect.
pub fn router(config: Config) -> Result<(Router, Handle), Vec<String>> {
    router_with_clock(config, Clock::System)
}

/// [`router`] on a given clock: a [`SimClock`] the harness drives moves every timer of the
/// fake (model latency, tool durations, the approval timeout, the stop grace, the stream
/// wait, delays) by its deadline instead of by real time.
pub fn router_with_clock(config: Config, clock: Clock) -> Result<(Router, Handle), Vec<String>> {
    let d = config.validate();
    if !d.is_empty() {
        return Err(d);
    }
    let shared = Arc::new(Shared {
        config,
        clock,
        issued: Mutex::new(HashMap::new()),
        data: Mutex::new(Data::default()),
        holds: fake_control::Holds::default(),
        turns: Notify::new(),
        control_log: Default::default(),
    });
    durable::restore(&shared)?;
    let handle = Handle(shared.clone());
    let mut app = Router::new()
        .route(
            "/health",
            get(|| async {
                handler_json(
                    200,
                    &Py::obj(vec![
                        ("status", Py::str("ok")),
                        ("platform", Py::str("hermes-agent")),
                        ("version", Py::str(HERMES_VERSION)),
                    ]),
                )
            }),
        )
        .route("/v1/capabilities", get(capabilities))
        .route(
            "/v1/runs",
            post(start)
                .get(runs_405)
                .options(preflight)
                .fallback(runs_405),
        )
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
        .layer(axum::extract::DefaultBodyLimit::disable());
    let app = shared
        .control_log
        .record(app, shared.config.control_token.clone())
        .with_state(shared);
    Ok((app, handle))
}

/// The version the default mode reproduces (`GET /health`).
pub const HERMES_VERSION: &str = "0.19.0";

/// A CORS preflight with no allowed origin configured (the default): 403, no body, no content
/// type, as observed without an `Origin` header.
async fn preflight() -> Response {
    let mut r = Response::new(Body::empty());
    *r.status_mut() = StatusCode::FORBIDDEN;
    r
}

/// `GET /v1/capabilities` (Bearer key): the API surface this server offers. The document's
/// shape follows the Hermes API server's capabilities handler; its features and endpoints are
/// exactly the routes this fake serves in its mode (see the README for what was not confirmed).
async fn capabilities(State(s): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    if !authorized(&s, &headers) {
        return unauthorized(s.config.mode);
    }
    let newer = s.config.mode == Mode::Newer;
    let route = |m: &str, p: &str| Py::obj(vec![("method", Py::str(m)), ("path", Py::str(p))]);
    let mut endpoints = vec![
        ("health", route("GET", "/health")),
        ("capabilities", route("GET", "/v1/capabilities")),
        ("runs", route("POST", "/v1/runs")),
        ("run_status", route("GET", "/v1/runs/{run_id}")),
        ("run_events", route("GET", "/v1/runs/{run_id}/events")),
        ("run_approval", route("POST", "/v1/runs/{run_id}/approval")),
        ("run_stop", route("POST", "/v1/runs/{run_id}/stop")),
    ];
    if newer {
        endpoints.push(("run_steer", route("POST", "/v1/runs/{run_id}/steer")));
    }
    let doc = Py::obj(vec![
        ("object", Py::str("hermes.api_server.capabilities")),
        ("platform", Py::str("hermes-agent")),
        ("model", Py::str("hermes-agent")),
        (
            "auth",
            Py::obj(vec![
                ("type", Py::str("bearer")),
                ("required", Py::Bool(true)),
            ]),
        ),
        (
            "features",
            Py::obj(vec![
                ("run_submission", Py::Bool(true)),
                ("run_status", Py::Bool(true)),
                ("run_events_sse", Py::Bool(true)),
                ("run_stop", Py::Bool(true)),
                ("run_approval_response", Py::Bool(true)),
                ("run_steer", Py::Bool(newer)),
                ("run_idempotency_key", Py::Bool(newer)),
                ("tool_progress_events", Py::Bool(true)),
                ("approval_events", Py::Bool(true)),
                ("session_key_header", Py::str("X-Hermes-Session-Key")),
                ("cors", Py::Bool(false)),
            ]),
        ),
        ("endpoints", Py::obj(endpoints)),
    ]);
    handler_json(200, &doc)
}

async fn runs_405() -> Response {
    let mut r = plain(StatusCode::METHOD_NOT_ALLOWED, "405: Method Not Allowed");
    r.headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static("POST"));
    r
}
