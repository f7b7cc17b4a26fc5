//! The reference Hermes connector (`operator::Connector`, seed 000) behind a small HTTP front:
//! `aocheck sut connector`, a running service `aocheck deploy` judges at the same boundary as
//! any connector (`examples/connector-reference/aocheck-deploy.yaml`), so the same truth is
//! judged at two boundaries (the process protocol's HERMES cases and the deployment's CONNECTOR
//! cases).
//!
//! - `POST /actions` `{action_id, objective}` or `{action_id, resume: {source_action_id,
//!   choice, resolve_all?}}` (seed 000's two input branches): the Action is recorded in the
//!   store (created once), then invoked on a task of its own; 202. The same action again: 200
//!   with its status, nothing invoked. Another input under the same id: 409, no run and no
//!   command (the connector's fingerprint).
//! - `POST /actions/{action_id}/cancel`: the connector's cancellation (its intent durable
//!   first, then the stop, reconciled from the provider) on a task of its own; 202.
//! - `GET /actions/{action_id}`: `{action_id, status, run_id, output, error}` from the binding
//!   (`status` in seed 000's words: `starting` … `outcome_unknown`).
//! - `GET /healthz`.
//!
//! At boot every recorded action whose binding is not terminal is invoked again: an Action's
//! replay, which the connector answers from its binding (an unbound start claim of a process
//! gone is `outcome_unknown`, never a second start).

use crate::operator::{Action, Connector, Policy};
use crate::store::{AnyStore, Store, StoreSpec};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};
use std::sync::Arc;

/// The front's own records: each Action as it was first submitted, and the list of their ids.
const NAMESPACE: &str = "aocheck.reference.connector_front.v1";
const INDEX: &str = "index";

#[derive(clap::Args, Debug)]
pub struct FrontArgs {
    /// The loopback port to listen on.
    #[arg(long, env = "PORT")]
    pub port: u16,
    /// fake-hermes' (or Hermes's) base URL.
    #[arg(long, env = "HERMES_URL")]
    pub hermes_url: String,
    /// The endpoint's API key (read from the environment; never printed).
    #[arg(long, env = "HERMES_API_KEY", hide_env_values = true)]
    pub hermes_key: String,
    /// The durable store: `sqlite:PATH` or `postgres://…` (every instance the same).
    #[arg(long, env = "CONNECTOR_STORE")]
    pub store: StoreSpec,
    /// This instance's name (start claims record it).
    #[arg(long, env = "INSTANCE", default_value = "reference")]
    pub instance: String,
    /// The endpoint id (the capability `cap:hermes_agent:<endpoint>:operator`).
    #[arg(long, default_value = "primary")]
    pub endpoint: String,
    /// How long an unbound start claim is held before a replay may call its start
    /// `outcome_unknown` (never started again); the policy's bounds apply.
    #[arg(long, env = "START_CLAIM_TTL_MS")]
    pub start_claim_ttl_ms: Option<u64>,
}

struct Front {
    connector: Connector<AnyStore>,
    store: Arc<AnyStore>,
    endpoint: String,
    /// The connector's own answer to an invocation that ended in an error while its binding
    /// stayed unresolved (a run Hermes forgot: missing knowledge), by action id.
    unresolved: std::sync::Mutex<std::collections::BTreeMap<String, Value>>,
}

type Shared = Arc<Front>;

fn say(status: StatusCode, body: Value) -> Response {
    (status, Json(body)).into_response()
}

impl Front {
    fn action(&self, id: &str, input: Value) -> Action {
        Action {
            id: id.to_string(),
            idempotency_key: format!("idem-{id}"),
            capability: format!("cap:hermes_agent:{}:operator", self.endpoint),
            input,
            deadline_ms: Some(60_000),
            identity: None,
            approval: None,
            delegation: None,
        }
    }

    async fn recorded(&self, id: &str) -> Result<Option<Action>, String> {
        match self
            .store
            .record_get(NAMESPACE, &format!("action:{id}"))
            .await
            .map_err(|e| e.to_string())?
        {
            None => Ok(None),
            Some((_, v)) => serde_json::from_value(v)
                .map(Some)
                .map_err(|e| e.to_string()),
        }
    }

    /// Records the Action once; `Ok(true)` when this call created it. Its id goes into the
    /// index first (the replay at boot skips an id with no Action), so a kill between the two
    /// writes never leaves a recorded Action nobody replays.
    async fn record(&self, a: &Action) -> Result<bool, String> {
        if self.recorded(&a.id).await?.is_some() {
            return Ok(false);
        }
        self.index(&a.id).await?;
        let v = serde_json::to_value(a).map_err(|e| e.to_string())?;
        match self
            .store
            .record_cas(NAMESPACE, &format!("action:{}", a.id), None, &v)
            .await
        {
            Ok(_) => Ok(true),
            Err(crate::store::StoreError::Conflict { .. }) => Ok(false),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Adds an id to the index of Actions (compare-and-set, retried; once).
    async fn index(&self, id: &str) -> Result<(), String> {
        for _ in 0..64 {
            let (ver, mut ids) = match self
                .store
                .record_get(NAMESPACE, INDEX)
                .await
                .map_err(|e| e.to_string())?
            {
                Some((v, Value::Array(ids))) => (Some(v), ids),
                Some((v, _)) => (Some(v), Vec::new()),
                None => (None, Vec::new()),
            };
            if ids.iter().any(|x| x.as_str() == Some(id)) {
                return Ok(());
            }
            ids.push(json!(id));
            match self
                .store
                .record_cas(NAMESPACE, INDEX, ver, &Value::Array(ids))
                .await
            {
                Ok(_) => return Ok(()),
                Err(crate::store::StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(e.to_string()),
            }
        }
        Err("the action index stays contended".into())
    }

    async fn view(&self, id: &str) -> Result<Option<Value>, String> {
        match self.connector.binding(id).await.map_err(|e| e.to_string())? {
            Some((_, b)) => {
                // An invocation the connector answered with an error while the binding stayed
                // unresolved: its answer is that the outcome is unknown (seed 000's word).
                let answered = self
                    .unresolved
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get(id)
                    .cloned();
                Ok(Some(match answered {
                    Some(e) if !b.status.is_terminal() => json!({
                        "action_id": id,
                        "status": "outcome_unknown",
                        "run_id": b.run_id,
                        "output": b.output,
                        "error": e,
                    }),
                    _ => json!({
                        "action_id": id,
                        "status": b.status,
                        "run_id": b.run_id,
                        "output": b.output,
                        "error": b.error,
                    }),
                }))
            }
            None => Ok(self
                .recorded(id)
                .await?
                .map(|_| json!({"action_id": id, "status": "starting", "run_id": null, "output": null, "error": null}))),
        }
    }
}

/// Invokes an Action on a task of its own (its result is in the binding).
fn invoke(f: &Shared, a: Action) {
    let f = f.clone();
    tokio::spawn(async move {
        if let Err(e) = f.connector.invoke(&a).await {
            eprintln!("aocheck sut connector: action {}: {e}", a.id);
            f.unresolved
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(a.id.clone(), json!(e.to_string()));
        }
    });
}

async fn submit(State(f): State<Shared>, Json(body): Json<Value>) -> Response {
    let input = match (body.get("objective"), body.get("resume")) {
        (Some(o), None) => json!({"objective": o}),
        (None, Some(r)) => json!({"resume": r}),
        _ => Value::Null,
    };
    let Some(id) = body["action_id"].as_str().filter(|_| !input.is_null()) else {
        return say(
            StatusCode::BAD_REQUEST,
            json!({"error": "give {action_id: string, objective: string} or {action_id: string, resume: {source_action_id, choice, resolve_all?}}"}),
        );
    };
    if id.is_empty() || id.len() > 200 {
        return say(
            StatusCode::BAD_REQUEST,
            json!({"error": "action_id: 1 to 200 characters"}),
        );
    }
    // The connector's own input schema, before anything is recorded.
    if let Err(e) = crate::operator::input::OperatorInput::parse(&input) {
        return say(StatusCode::BAD_REQUEST, json!({"error": e.to_string()}));
    }
    let a = f.action(id, input);
    match f.record(&a).await {
        Err(e) => say(StatusCode::SERVICE_UNAVAILABLE, json!({"error": e})),
        Ok(true) => {
            invoke(&f, a);
            say(
                StatusCode::ACCEPTED,
                json!({"action_id": id, "status": "starting"}),
            )
        }
        Ok(false) => {
            // The same id again: the same Action (200 with its status) or a collision.
            let same = match f.recorded(id).await {
                Ok(first) => first.is_some_and(|first| first == a),
                Err(e) => return say(StatusCode::SERVICE_UNAVAILABLE, json!({"error": e})),
            };
            let now = f.view(id).await.ok().flatten();
            if same {
                say(StatusCode::OK, now.unwrap_or(json!({"action_id": id})))
            } else {
                say(
                    StatusCode::CONFLICT,
                    json!({"error": "this action_id was submitted with another objective", "action": now}),
                )
            }
        }
    }
}

async fn cancel(State(f): State<Shared>, Path(id): Path<String>) -> Response {
    match f.connector.binding(&id).await {
        Err(e) => say(
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"error": e.to_string()}),
        ),
        Ok(None) => say(StatusCode::NOT_FOUND, json!({"error": "no such action"})),
        Ok(Some(_)) => {
            let g = f.clone();
            let action = id.clone();
            tokio::spawn(async move {
                if let Err(e) = g.connector.cancel(&action).await {
                    eprintln!("aocheck sut connector: cancel {action}: {e}");
                }
            });
            say(
                StatusCode::ACCEPTED,
                json!({"action_id": id, "cancel_requested": true}),
            )
        }
    }
}

async fn status(State(f): State<Shared>, Path(id): Path<String>) -> Response {
    match f.view(&id).await {
        Ok(Some(v)) => say(StatusCode::OK, v),
        Ok(None) => say(StatusCode::NOT_FOUND, json!({"error": "no such action"})),
        Err(e) => say(StatusCode::SERVICE_UNAVAILABLE, json!({"error": e})),
    }
}

/// `aocheck sut connector`: serves until killed; returns an exit code on a start failure.
pub async fn serve(a: FrontArgs) -> u8 {
    crate::secrets::register(&a.hermes_key);
    let store = match a.store.open().await {
        Ok(s) => Arc::new(s),
        Err(e) => {
            eprintln!("aocheck sut connector: --store: {e}");
            return crate::exit::UNREACHABLE;
        }
    };
    let connector = match Connector::new(
        store.clone(),
        &a.endpoint,
        &a.hermes_url,
        &a.hermes_key,
        Policy {
            start_claim_ttl_ms: a
                .start_claim_ttl_ms
                .unwrap_or(Policy::default().start_claim_ttl_ms),
            ..Policy::default()
        },
        &a.instance,
        Arc::new(crate::clock::SystemClock),
    ) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("aocheck sut connector: {e}");
            return crate::exit::INVALID_INPUT;
        }
    };
    let front: Shared = Arc::new(Front {
        connector,
        store,
        endpoint: a.endpoint.clone(),
        unresolved: Default::default(),
    });
    // Resume: every recorded action whose binding is not terminal is replayed.
    if let Ok(Some((_, Value::Array(ids)))) = front.store.record_get(NAMESPACE, INDEX).await {
        for id in ids.iter().filter_map(Value::as_str) {
            let terminal = matches!(front.connector.binding(id).await, Ok(Some((_, b))) if b.status.is_terminal());
            if let (false, Ok(Some(action))) = (terminal, front.recorded(id).await) {
                invoke(&front, action);
            }
        }
    }
    let app = Router::new()
        .route("/healthz", get(|| async { Json(json!({"ok": true})) }))
        .route("/actions", post(submit))
        .route("/actions/{id}", get(status))
        .route("/actions/{id}/cancel", post(cancel))
        .with_state(front);
    let listener = match tokio::net::TcpListener::bind(("127.0.0.1", a.port)).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("aocheck sut connector: port {}: {e}", a.port);
            return crate::exit::UNREACHABLE;
        }
    };
    eprintln!(
        "aocheck sut connector: instance {} listening on http://127.0.0.1:{}",
        a.instance, a.port
    );
    match axum::serve(listener, app).await {
        Ok(()) => crate::exit::OK,
        Err(e) => {
            eprintln!("aocheck sut connector: {e}");
            crate::exit::UNREACHABLE
        }
    }
}
