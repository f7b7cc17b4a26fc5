//! fake-mcp: a simulated MCP tool server that tells the truth. It serves a configurable set of
//! tools over MCP's Streamable HTTP transport (on `rmcp`, the official Rust SDK): consequential
//! tools that make an effect per call (send a message, create a payment, write a record) and read
//! tools that look up what was done. Every `tools/call` is recorded in a ground-truth ledger
//! (`provider_model::mcp::ledger`): the session, the tool, a digest of the arguments, the
//! idempotency key it carried, the effect it made and what became of the reply. Fault rules
//! (`provider_model::mcp::faults`) make an effect and then lose the reply (the connection closes
//! before the result, which never comes), answer an error after the effect, refuse or slow a
//! call; a restart forgets every session and keeps every effect.
//!
//! A `hold` rule parks a call before its effect until the harness lets it go; the caller's
//! connection is watched until its response ends, so a killed caller is seen gone.
//!
//! A session can expire after a call's effect (its id forgotten, the reply lost), and lookups
//! and listings can lag behind the effects (each read then says `complete: false`).
//!
//! Over HTTP (`router`, `start`) every session of the current generation is served; over stdio
//! (`serve_io`) one session, with no session id.
//!
//! The harness reads the ledger through [`Handle`]; the control plane is the fakes' own
//! (`fake_control`).

use axum::Router;
use fake_control::DropConn;
use fake_control::control::ControlLog;
use fake_control::holds::{ClientFlag, ClientWatch, Holds, Parked, ReleaseAction};
use provider_model::mcp::faults::{Fault, Rule};
use provider_model::mcp::ledger::{Call, Effect, Ledger, Reply, digest};
use provider_model::mcp::tools::{ToolKind, ToolSpec};
use provider_model::rules::RuleState;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock as Content, ErrorData,
    Implementation, InitializeResult, ListToolsResult, PaginatedRequestParams, ServerCapabilities,
    Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// The most calls the ledger keeps; a call beyond it is refused, and said so (bounded like the
/// other fakes).
pub const MAX_CALLS: usize = 100_000;

#[derive(Debug, Default)]
struct State {
    ledger: Ledger,
    rules: Vec<RuleState<Rule>>,
    /// The calls received so far (each call's number).
    seq: u64,
    /// When each effect was made (beside `ledger.effects`), for a lagging listing.
    made_at: Vec<std::time::Instant>,
    /// How long an effect stays out of lookups and listings (zero: they are complete).
    lag: Duration,
    /// Bumped by a reset: a call that arrived before it is never recorded after it.
    epoch: u64,
}

#[derive(Debug)]
struct Inner {
    tools: Vec<ToolSpec>,
    /// `Authorization: Bearer <it>` for `/_control/*` (empty: the control API refuses all).
    control_token: String,
    state: Mutex<State>,
    /// Bumped by a restart: the session manager of the generation before is dropped.
    generation: Mutex<Arc<LocalSessionManager>>,
    /// Calls parked by a `hold` rule.
    holds: Holds,
    /// Every request that reached a `/_control` route over HTTP.
    control_log: ControlLog,
    /// Sessions that made a request, those a restart or an expiry forgot, and how many
    /// requests came under a forgotten one since the last reset.
    sessions_seen: Mutex<Sessions>,
}

#[derive(Debug, Default)]
struct Sessions {
    seen: std::collections::BTreeSet<String>,
    forgotten: std::collections::BTreeSet<String>,
    stale_requests: u64,
}

/// The server's shared state: its tools, ledger and fault rules.
#[derive(Clone, Debug)]
pub struct Handle(Arc<Inner>);

impl State {
    /// The effects a lookup or listing shows now: all, or those older than the lag.
    fn shown(&self) -> impl Iterator<Item = &Effect> {
        let now = std::time::Instant::now();
        let lag = self.lag;
        self.ledger
            .effects
            .iter()
            .zip(&self.made_at)
            .filter(move |(_, at)| now.duration_since(**at) >= lag)
            .map(|(e, _)| e)
    }
}

impl Handle {
    /// A server of `tools` (checked first: every defect at once), with no control API over HTTP.
    pub fn new(tools: Vec<ToolSpec>) -> Result<Handle, Vec<String>> {
        Handle::with_control(tools, String::new())
    }

    /// A server of `tools` whose control API (`GET /_control/ledger`, `POST /_control/restart`)
    /// takes `Authorization: Bearer <control_token>`.
    pub fn with_control(
        tools: Vec<ToolSpec>,
        control_token: String,
    ) -> Result<Handle, Vec<String>> {
        let defects = provider_model::mcp::tools::validate(&tools);
        if !defects.is_empty() {
            return Err(defects);
        }
        Ok(Handle(Arc::new(Inner {
            tools,
            control_token,
            state: Mutex::new(State::default()),
            generation: Mutex::new(Arc::new(LocalSessionManager::default())),
            holds: Holds::default(),
            control_log: ControlLog::default(),
            sessions_seen: Mutex::new(Sessions::default()),
        })))
    }

    /// A fresh ground truth: no calls, effects, rules or sessions; every parked call refused,
    /// and recorded nowhere (it belongs to the ledger that was cleared).
    pub fn reset(&self) {
        {
            let mut st = self.state();
            let epoch = st.epoch + 1;
            *st = State {
                epoch,
                ..State::default()
            };
        }
        self.0.holds.reject_all();
        self.restart();
        *self.seen_sessions() = Sessions::default();
    }

    /// Lookups and listings lag: an effect shows in them only `lag` after it was made, and
    /// every read says `complete: false` (zero: complete again).
    pub fn set_lag(&self, lag: Duration) {
        self.state().lag = lag;
    }

    /// Waits until at least `n` calls are parked under `hold` (or `within` passes).
    pub async fn wait_parked(&self, hold: &str, n: usize, within: Duration) -> bool {
        self.0.holds.wait_parked(hold, n, within).await
    }

    /// Waits until every call parked under `hold` (at least one) has lost its client.
    pub async fn wait_client_gone(&self, hold: &str, within: Duration) -> bool {
        self.0.holds.wait_client_gone(hold, within).await
    }

    /// Lets every call parked under `hold` go with `action`; how many.
    pub fn release(&self, hold: &str, action: ReleaseAction) -> usize {
        self.0.holds.release(hold, action)
    }

    /// What is parked, by hold name.
    pub fn holds(&self) -> Value {
        self.0.holds.list()
    }

    /// Disarms every hold rule named `hold` that has not fired; how many.
    pub fn disarm_hold(&self, hold: &str) -> usize {
        let mut st = self.state();
        let mut n = 0;
        for r in st.rules.iter_mut() {
            if r.fired == 0 && matches!(&r.rule.fault, Fault::Hold { name } if name == hold) {
                r.rule.times = 0;
                n += 1;
            }
        }
        n
    }

    /// Whether each of the calls `seqs` is in the ledger (decided: made, refused or read).
    pub fn decided(&self, seqs: &[u64]) -> bool {
        let st = self.state();
        seqs.iter()
            .all(|q| st.ledger.calls.iter().any(|c| c.seq == *q))
    }

    /// Every request that reached a `/_control` route over HTTP, refused or not.
    pub fn control_attempts(&self) -> Vec<fake_control::control::ControlAttempt> {
        self.0.control_log.attempts()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.0.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The ground truth so far.
    pub fn ledger(&self) -> Ledger {
        self.state().ledger.clone()
    }

    /// Adds a fault rule (checked first).
    pub fn add_rule(&self, rule: Rule) -> Result<(), Vec<String>> {
        let d = provider_model::rules::Plan {
            rules: vec![rule.clone()],
        }
        .validate();
        if !d.is_empty() {
            return Err(d);
        }
        self.state().rules.push(RuleState::new(rule));
        Ok(())
    }

    /// The fault rules with their counters.
    pub fn rules(&self) -> Vec<RuleState<Rule>> {
        self.state().rules.clone()
    }

    /// The server restarts: every session is forgotten (a call under an old session id is
    /// answered 404, as a restarted server would); every effect is kept.
    pub fn restart(&self) {
        {
            let mut ss = self.seen_sessions();
            let seen = std::mem::take(&mut ss.seen);
            ss.forgotten.extend(seen);
        }
        let mut g = self.0.generation.lock().unwrap_or_else(|p| p.into_inner());
        *g = Arc::new(LocalSessionManager::default());
    }

    fn seen_sessions(&self) -> MutexGuard<'_, Sessions> {
        self.0
            .sessions_seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// How many requests came under a session a restart or an expiry had forgotten (each
    /// answered 404) since the last reset: whether the fault reached the client's session.
    pub fn stale_requests(&self) -> u64 {
        self.seen_sessions().stale_requests
    }

    /// A request's session: counted stale if it was forgotten, remembered otherwise.
    fn saw_session(&self, id: &str) {
        let mut ss = self.seen_sessions();
        if ss.forgotten.contains(id) {
            ss.stale_requests += 1;
        } else if !ss.seen.contains(id) {
            ss.seen.insert(id.to_string());
        }
    }

    fn sessions(&self) -> Arc<LocalSessionManager> {
        self.0
            .generation
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The fault for the next call of `tool`, counted on every rule that matches it.
    fn fault_for(&self, st: &mut State, tool: &str) -> Option<Fault> {
        let mut chosen = None;
        for r in st.rules.iter_mut().filter(|r| r.rule.matches(tool)) {
            r.seen += 1;
            let n = r.seen;
            if chosen.is_none() && n >= r.rule.nth && n < r.rule.nth.saturating_add(r.rule.times) {
                r.fired += 1;
                chosen = Some(r.rule.fault.clone());
            }
        }
        chosen
    }
}

/// One MCP server session over the shared [`Handle`].
#[derive(Clone, Debug)]
pub struct Server(Handle);

fn tool_of(t: &ToolSpec) -> Tool {
    let schema = match t.input_schema() {
        Value::Object(m) => m,
        _ => serde_json::Map::new(),
    };
    Tool::new(t.name.clone(), t.description.clone(), Arc::new(schema))
}

fn text(v: &Value) -> Vec<Content> {
    vec![Content::text(v.to_string())]
}

impl Server {
    /// A call: its fault chosen, parked first where the fault is a hold, then the effect made
    /// (a write) or the ledger read (a lookup, a listing), the call recorded, and the reply
    /// sent as the fault says.
    async fn call(
        &self,
        spec: &ToolSpec,
        args: Value,
        meta: Value,
        parts: Option<&http::request::Parts>,
        cancelled: &tokio_util::sync::CancellationToken,
    ) -> Result<CallToolResult, ErrorData> {
        let h = &self.0;
        let session = parts
            .and_then(|p| p.headers.get("mcp-session-id"))
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let drop = parts.and_then(|p| p.extensions.get::<DropConn>()).cloned();
        let client = parts
            .and_then(|p| p.extensions.get::<ClientFlag>())
            .cloned()
            .unwrap_or_default();
        let key = spec.key_of(&args, &meta);
        let (seq, fault, epoch) = {
            let mut st = h.state();
            if st.ledger.calls.len() >= MAX_CALLS {
                return Err(ErrorData::internal_error(
                    format!("fake-mcp keeps at most {MAX_CALLS} calls; restart it"),
                    None,
                ));
            }
            st.seq += 1;
            let seq = st.seq;
            (seq, h.fault_for(&mut st, &spec.name), st.epoch)
        };
        // A held call waits here, before anything is made: the harness kills its caller, or
        // lets it go.
        let mut refused = matches!(fault, Some(Fault::Refuse));
        if let Some(Fault::Hold { name }) = &fault {
            let shown = Parked {
                request_seq: Some(seq),
                op: spec.name.clone(),
                account: None,
                idempotency_key: key.clone(),
            };
            let release = h.0.holds.park(name, shown, client.clone());
            // A reset between the choice of the fault and the parking rejected nothing of
            // this call: it lets itself go (a later reset rejects it itself).
            if h.state().epoch != epoch {
                h.0.holds
                    .release(name, ReleaseAction::Reject { status: 503 });
            }
            // A caller that cancels its call while it is held has given it up: it is gone,
            // whether or not its connection stays open (rmcp ends the call's stream then).
            let released = release.released();
            tokio::pin!(released);
            let action = tokio::select! {
                a = &mut released => a,
                _ = cancelled.cancelled() => {
                    h.0.holds.caller_left(&client);
                    released.await
                }
            };
            if let ReleaseAction::Reject { .. } = action {
                refused = true;
            }
        }
        let result = {
            let mut st = h.state();
            if st.epoch != epoch {
                // Reset while it was held: the ledger it belonged to is gone.
                return Err(ErrorData::internal_error(
                    "fake-mcp was reset while this call was held",
                    None,
                ));
            }
            let args_digest = digest(&args);
            let (effect, result) = match &spec.kind {
                _ if refused => (None, json!({"refused": true})),
                ToolKind::Write { effect } => {
                    let id = format!("eff_{}", st.ledger.effects.len() + 1);
                    st.ledger.effects.push(Effect {
                        id: id.clone(),
                        seq,
                        tool: spec.name.clone(),
                        kind: effect.clone(),
                        key: key.clone(),
                        args_digest: args_digest.clone(),
                        args: args.clone(),
                    });
                    st.made_at.push(std::time::Instant::now());
                    (Some(id.clone()), json!({"effect": id, "kind": effect}))
                }
                ToolKind::Lookup => {
                    let k = args.get("key").and_then(Value::as_str).unwrap_or_default();
                    let found: Vec<Value> = st
                        .shown()
                        .filter(|e| e.key.as_deref() == Some(k))
                        .map(|e| json!({"effect": e.id, "tool": e.tool, "args": e.args}))
                        .collect();
                    (
                        None,
                        json!({"key": k, "found": found, "complete": st.lag.is_zero()}),
                    )
                }
                ToolKind::List => {
                    let of = args.get("tool").and_then(Value::as_str);
                    let all: Vec<Value> = st
                        .shown()
                        .filter(|e| of.is_none_or(|t| t == e.tool))
                        .map(|e| json!({"effect": e.id, "tool": e.tool, "key": e.key}))
                        .collect();
                    (None, json!({"effects": all, "complete": st.lag.is_zero()}))
                }
            };
            let reply = match &fault {
                _ if client.gone() => Reply::CallerGone,
                Some(Fault::CommitThenDrop | Fault::ExpireAfterCommit) => Reply::Dropped,
                Some(Fault::ErrorAfterCommit | Fault::Refuse) => Reply::ToolError,
                Some(Fault::Hold { .. }) if refused => Reply::ToolError,
                Some(Fault::RpcErrorAfterCommit) => Reply::RpcError,
                _ => Reply::Answered,
            };
            st.ledger.calls.push(Call {
                seq,
                session,
                tool: spec.name.clone(),
                args_digest,
                key,
                effect,
                reply,
                fault: fault.as_ref().map(|f| f.to_string()),
            });
            result
        };
        if refused {
            // The same words as an error after the effect: MCP has no word for "nothing was
            // done", and a client must not be told more than a real server would tell it.
            return Ok(CallToolResult::error(vec![Content::text(format!(
                "call {seq} failed"
            ))]));
        }
        match fault {
            Some(Fault::ExpireAfterCommit) => {
                // The session is closed on a task of its own (closing waits for the session's
                // worker, which this call is part of), then the connection drops.
                if let Some(id) = parts
                    .and_then(|p| p.headers.get("mcp-session-id"))
                    .and_then(|v| v.to_str().ok())
                {
                    {
                        let mut ss = h.seen_sessions();
                        ss.seen.remove(id);
                        ss.forgotten.insert(id.to_string());
                    }
                    let sessions = h.sessions();
                    let id: rmcp::transport::common::server_side_http::SessionId = id.into();
                    tokio::spawn(async move {
                        use rmcp::transport::streamable_http_server::SessionManager as _;
                        let _ = sessions.close_session(&id).await;
                    });
                }
                if let Some(d) = drop {
                    d.0.notify_one();
                }
                cancelled.cancelled().await;
                Err(ErrorData::internal_error("session expired", None))
            }
            Some(Fault::CommitThenDrop) => {
                // The connection closes (over HTTP), and the result never comes: not on this
                // stream, nor on one the client resumes, nor over stdio (a server that died
                // mid-call). The call ends when the client cancels it or its session goes.
                if let Some(d) = drop {
                    d.0.notify_one();
                }
                cancelled.cancelled().await;
                Err(ErrorData::internal_error("cancelled", None))
            }
            Some(Fault::ErrorAfterCommit) => Ok(CallToolResult::error(vec![Content::text(
                format!("call {seq} failed"),
            )])),
            Some(Fault::RpcErrorAfterCommit) => Err(ErrorData::internal_error(
                format!("call {seq} failed"),
                None,
            )),
            Some(Fault::Slow { ms }) => {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                // The reply's fate is as it stands when the reply is written: a caller gone
                // while the call was slow is answered to nobody.
                if client.gone() {
                    let mut st = h.state();
                    if let Some(c) = st.ledger.calls.iter_mut().rfind(|c| c.seq == seq) {
                        c.reply = Reply::CallerGone;
                    }
                }
                Ok(CallToolResult::success(text(&result)))
            }
            Some(Fault::Refuse | Fault::Hold { .. }) | None => {
                Ok(CallToolResult::success(text(&result)))
            }
        }
    }
}

impl rmcp::ServerHandler for Server {
    fn get_info(&self) -> InitializeResult {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("fake-mcp", env!("CARGO_PKG_VERSION")))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(
            self.0.0.tools.iter().map(tool_of).collect(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(spec) = self.0.0.tools.iter().find(|t| t.name == request.name) else {
            return Err(ErrorData::invalid_params(
                format!("no tool {:?}", request.name),
                None,
            ));
        };
        let args = Value::Object(request.arguments.clone().unwrap_or_default());
        // rmcp moves a request's `_meta` into the context; take either.
        let meta = request
            .meta
            .as_ref()
            .and_then(|m| serde_json::to_value(m).ok())
            .filter(|m| m.as_object().is_some_and(|o| !o.is_empty()))
            .or_else(|| serde_json::to_value(&context.meta).ok())
            .unwrap_or(Value::Null);
        let parts = context.extensions.get::<http::request::Parts>();
        self.call(spec, args, meta, parts, &context.ct)
            .await
            .map(Into::into)
    }
}

/// The MCP endpoint (`/mcp`) over `h`: Streamable HTTP, one session per `initialize`, every
/// session of the current generation (a restart starts a new one).
pub fn router(h: &Handle) -> Router {
    let handle = h.clone();
    let mcp = axum::routing::any(move |req: axum::extract::Request| {
        let h = handle.clone();
        async move {
            // The request's client is watched until its response body ends: a caller that
            // goes (killed, or its connection closed) before that is seen gone by a hold.
            if let Some(id) = req
                .headers()
                .get("mcp-session-id")
                .and_then(|v| v.to_str().ok())
            {
                h.saw_session(id);
            }
            let (flag, watch) = h.0.holds.watch();
            let mut req = req;
            req.extensions_mut().insert(flag);
            let server = Server(h.clone());
            let config = StreamableHttpServerConfig::default().with_sse_keep_alive(None);
            let svc = StreamableHttpService::new(move || Ok(server.clone()), h.sessions(), config);
            let r = tower::ServiceExt::oneshot(svc, req).await;
            match r {
                Ok(resp) => {
                    let resp = axum::response::IntoResponse::into_response(resp);
                    let (parts, body) = resp.into_parts();
                    axum::response::Response::from_parts(
                        parts,
                        axum::body::Body::new(Watched {
                            body,
                            watch: Some(watch),
                        }),
                    )
                }
                Err(e) => fake_control::control::error(
                    http::StatusCode::INTERNAL_SERVER_ERROR,
                    "internal",
                    e.to_string(),
                ),
            }
        }
    });
    let (a, b) = (h.clone(), h.clone());
    let routes = Router::new()
        .route("/mcp", mcp)
        .route(
            "/_control/ledger",
            axum::routing::get(move |headers: http::HeaderMap| {
                let h = a.clone();
                async move {
                    if let Err(r) = fake_control::control::authorize(&headers, &h.0.control_token) {
                        return r;
                    }
                    fake_control::control::json_response(
                        http::StatusCode::OK,
                        &serde_json::to_value(h.ledger()).unwrap_or(Value::Null),
                    )
                }
            }),
        )
        .route(
            "/_control/restart",
            axum::routing::post(move |headers: http::HeaderMap| {
                let h = b.clone();
                async move {
                    if let Err(r) = fake_control::control::authorize(&headers, &h.0.control_token) {
                        return r;
                    }
                    h.restart();
                    fake_control::control::json_response(
                        http::StatusCode::OK,
                        &json!({"restarted": true, "effects_kept": h.ledger().effects.len()}),
                    )
                }
            }),
        );
    h.0.control_log.record(routes, h.0.control_token.clone())
}

/// A response body that marks its request's client gone when it is dropped before its end
/// (the connection closed under it), and answered once it ends.
struct Watched {
    body: axum::body::Body,
    watch: Option<ClientWatch>,
}

impl http_body::Body for Watched {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let p = std::pin::Pin::new(&mut self.body).poll_frame(cx);
        if let std::task::Poll::Ready(None) = p
            && let Some(mut w) = self.watch.take()
        {
            w.answered();
        }
        p
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// Serves one MCP session over `reader` and `writer` (the stdio transport: newline-delimited
/// JSON-RPC) until the client closes it; its calls go to `h`'s ledger, with no session id.
pub async fn serve_io<R, W>(h: &Handle, reader: R, writer: W) -> std::io::Result<()>
where
    R: tokio::io::AsyncRead + Send + Unpin + 'static,
    W: tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    use rmcp::ServiceExt as _;
    let running = Server(h.clone())
        .serve((reader, writer))
        .await
        .map_err(std::io::Error::other)?;
    running.waiting().await.map_err(std::io::Error::other)?;
    Ok(())
}

/// Serves `h` on a loopback port; the URL of its MCP endpoint and the serving task.
pub async fn start(h: &Handle) -> std::io::Result<(String, tokio::task::JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/mcp", listener.local_addr()?);
    let app = router(h);
    let task = tokio::spawn(async move {
        let _ = fake_control::serve(listener, app).await;
    });
    Ok((url, task))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both ways: the default tools and a well-formed rule are taken; an empty tool set, a rule
    /// whose ordinal is 0 and one that names an empty tool are refused, each defect named.
    #[test]
    fn tools_and_rules_are_checked_before_they_are_served() {
        assert!(Handle::new(Vec::new()).is_err());
        let h = Handle::new(provider_model::mcp::tools::default_tools()).expect("valid");
        let ok = Rule {
            tool: Some("send_message".into()),
            fault: Fault::Refuse,
            nth: 1,
            times: 1,
        };
        assert!(h.add_rule(ok.clone()).is_ok());
        let d = h
            .add_rule(Rule {
                nth: 0,
                ..ok.clone()
            })
            .expect_err("ordinals start at 1");
        assert!(d[0].contains("nth"), "{d:?}");
        let d = h
            .add_rule(Rule {
                tool: Some(" ".into()),
                ..ok
            })
            .expect_err("an empty tool name");
        assert!(d[0].contains("tool"), "{d:?}");
        assert_eq!(h.rules().len(), 1);
    }

    /// A rule counts only the calls of its tool, and fires on its ordinal range alone.
    #[test]
    fn a_rule_fires_on_the_nth_call_of_its_tool() {
        let h = Handle::new(provider_model::mcp::tools::default_tools()).expect("valid");
        h.add_rule(Rule {
            tool: Some("create_payment".into()),
            fault: Fault::Refuse,
            nth: 2,
            times: 2,
        })
        .expect("valid");
        let mut st = State {
            rules: h.rules(),
            ..State::default()
        };
        let fired: Vec<bool> = [
            "create_payment",
            "send_message",
            "create_payment",
            "create_payment",
            "create_payment",
        ]
        .iter()
        .map(|t| h.fault_for(&mut st, t).is_some())
        .collect();
        assert_eq!(fired, [false, false, true, true, false]);
    }
}

#[cfg(test)]
mod over_http {
    use super::*;

    async fn post(
        c: &reqwest::Client,
        url: &str,
        session: Option<&str>,
        body: Value,
    ) -> reqwest::Response {
        let mut r = c
            .post(url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("mcp-protocol-version", "2025-06-18")
            .json(&body);
        if let Some(s) = session {
            r = r.header("mcp-session-id", s);
        }
        r.send().await.expect("the fake answers")
    }

    /// A session: the URL, a client, the session id and the serving task.
    async fn session(h: &Handle) -> (String, reqwest::Client, String, tokio::task::JoinHandle<()>) {
        let (url, server) = start(h).await.expect("serves");
        let c = reqwest::Client::new();
        let init = post(
            &c,
            &url,
            None,
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"}}}),
        )
        .await;
        let session = init.headers()["mcp-session-id"]
            .to_str()
            .expect("ascii")
            .to_string();
        let _ = init.text().await;
        let _ = post(
            &c,
            &url,
            Some(&session),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        )
        .await
        .text()
        .await;
        (url, c, session, server)
    }

    /// A call of `tool` sent on a task of its own: its status and body.
    fn call(
        c: &reqwest::Client,
        url: &str,
        session: &str,
        id: u64,
        tool: &str,
        arguments: Value,
    ) -> tokio::task::JoinHandle<(u16, String)> {
        let (c, url, session, tool) = (
            c.clone(),
            url.to_string(),
            session.to_string(),
            tool.to_string(),
        );
        tokio::spawn(async move {
            let r = post(
                &c,
                &url,
                Some(&session),
                json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
                    "name": tool, "arguments": arguments}}),
            )
            .await;
            let status = r.status().as_u16();
            (status, r.text().await.unwrap_or_default())
        })
    }

    /// A session, and a `send_message` call sent on a task of its own.
    async fn held_call(
        h: &Handle,
    ) -> (
        tokio::task::JoinHandle<(u16, String)>,
        tokio::task::JoinHandle<()>,
    ) {
        let (url, c, session, server) = session(h).await;
        let args = json!({"to": "a", "text": "b", "idempotency_key": "k1"});
        (call(&c, &url, &session, 2, "send_message", args), server)
    }

    /// Both ways: a caller that cancels its held call is gone (as one whose connection closed),
    /// and the call let go after is recorded so; a held call nobody cancelled keeps its caller.
    #[tokio::test]
    async fn a_caller_that_cancels_its_held_call_is_gone() {
        let h = Handle::new(provider_model::mcp::tools::default_tools()).expect("valid");
        h.add_rule(Rule {
            tool: Some("send_message".into()),
            fault: Fault::Hold { name: "h".into() },
            nth: 1,
            times: 1,
        })
        .expect("valid");
        let (url, c, s, _server) = session(&h).await;
        let args = json!({"to": "a", "text": "b", "idempotency_key": "k1"});
        let _held = call(&c, &url, &s, 2, "send_message", args);
        assert!(h.wait_parked("h", 1, Duration::from_secs(10)).await);
        assert!(!h.wait_client_gone("h", Duration::from_millis(200)).await);
        let _ = post(
            &c,
            &url,
            Some(&s),
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                   "params": {"requestId": 2, "reason": "timed out"}}),
        )
        .await
        .text()
        .await;
        assert!(h.wait_client_gone("h", Duration::from_secs(10)).await);
        assert_eq!(h.release("h", ReleaseAction::Proceed), 1);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !h.decided(&[1]) {
            assert!(std::time::Instant::now() < deadline, "never decided");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(h.ledger().calls[0].reply, Reply::CallerGone);
    }

    /// Both ways: an expired session's call made its effect and never answers, and the next
    /// request under it is refused 404; another session goes on.
    #[tokio::test]
    async fn a_session_that_expires_after_the_effect_is_refused_after() {
        let h = Handle::new(provider_model::mcp::tools::default_tools()).expect("valid");
        h.add_rule(Rule {
            tool: Some("send_message".into()),
            fault: Fault::ExpireAfterCommit,
            nth: 1,
            times: 1,
        })
        .expect("valid");
        let (url, c, s1, _server) = session(&h).await;
        let args = json!({"to": "a", "text": "b", "idempotency_key": "k1"});
        let lost = call(&c, &url, &s1, 2, "send_message", args.clone());
        let (_, said) = tokio::time::timeout(Duration::from_secs(10), lost)
            .await
            .expect("the connection closes")
            .expect("joined");
        assert!(!said.contains("eff_1"), "{said}");
        assert_eq!(h.ledger().effects.len(), 1);
        assert_eq!(h.ledger().calls[0].reply, Reply::Dropped);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let (status, _) = call(&c, &url, &s1, 3, "lookup", json!({"key": "k1"}))
                .await
                .expect("joined");
            if status == 404 {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "still served: {status}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Each request under the expired session is counted; a new session's are not.
        let stale = h.stale_requests();
        assert!(stale >= 1, "{stale}");
        let (_, c2, s2, _server2) = session(&h).await;
        let (status, found) = call(&c2, &url, &s2, 2, "lookup", json!({"key": "k1"}))
            .await
            .expect("joined");
        assert_eq!(status, 200);
        assert!(found.contains("eff_1"), "{found}");
        assert_eq!(h.stale_requests(), stale);
    }

    /// Both ways: a lagging lookup misses a fresh effect and says it is not complete; once the
    /// lag passed (or with none) it finds it and says it is.
    #[tokio::test]
    async fn a_lagging_lookup_says_it_is_not_complete() {
        let h = Handle::new(provider_model::mcp::tools::default_tools()).expect("valid");
        let (url, c, s, _server) = session(&h).await;
        h.set_lag(Duration::from_millis(400));
        let args = json!({"to": "a", "text": "b", "idempotency_key": "k1"});
        let made = call(&c, &url, &s, 2, "send_message", args)
            .await
            .expect("joined");
        assert!(made.1.contains("eff_1"), "{made:?}");
        let (_, early) = call(&c, &url, &s, 3, "lookup", json!({"key": "k1"}))
            .await
            .expect("joined");
        assert!(
            !early.contains("eff_1") && early.contains(r#"\"complete\":false"#),
            "{early}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
        let (_, late) = call(&c, &url, &s, 4, "lookup", json!({"key": "k1"}))
            .await
            .expect("joined");
        assert!(late.contains("eff_1"), "{late}");
        h.set_lag(Duration::ZERO);
        let (_, now) = call(&c, &url, &s, 5, "list_effects", json!({}))
            .await
            .expect("joined");
        assert!(
            now.contains("eff_1") && now.contains(r#"\"complete\":true"#),
            "{now}"
        );
    }

    /// Both ways: a held call makes nothing until it is let go; a caller that goes while it is
    /// held is seen gone, and the call let go then is made and recorded as answered to nobody;
    /// a caller that waits gets its result, recorded as answered.
    #[tokio::test]
    async fn a_held_call_waits_and_its_callers_going_is_seen() {
        let h = Handle::new(provider_model::mcp::tools::default_tools()).expect("valid");
        let hold = |name: &str| Rule {
            tool: Some("send_message".into()),
            fault: Fault::Hold { name: name.into() },
            nth: 1,
            times: 1,
        };
        h.add_rule(hold("h1")).expect("valid");
        let (call, _server) = held_call(&h).await;
        assert!(h.wait_parked("h1", 1, Duration::from_secs(10)).await);
        assert!(h.ledger().effects.is_empty(), "nothing is made while held");
        assert_eq!(h.holds()["h1"][0]["idempotency_key"], "k1");
        assert!(!h.wait_client_gone("h1", Duration::from_millis(100)).await);
        call.abort();
        assert!(h.wait_client_gone("h1", Duration::from_secs(10)).await);
        assert_eq!(h.release("h1", ReleaseAction::Proceed), 1);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !h.decided(&[1]) {
            assert!(std::time::Instant::now() < deadline, "never decided");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let l = h.ledger();
        assert_eq!(l.effects.len(), 1);
        assert_eq!(l.calls[0].reply, Reply::CallerGone);
        assert_eq!(l.calls[0].fault.as_deref(), Some("hold(h1)"));

        h.reset();
        h.add_rule(hold("h2")).expect("valid");
        let (call, _server2) = held_call(&h).await;
        assert!(h.wait_parked("h2", 1, Duration::from_secs(10)).await);
        assert_eq!(h.release("h2", ReleaseAction::Proceed), 1);
        let (_, said) = call.await.expect("the caller waited");
        assert!(said.contains("eff_1"), "{said}");
        let l = h.ledger();
        assert_eq!(l.calls[0].reply, Reply::Answered);
        assert_eq!(h.disarm_hold("h2"), 0, "a fired hold is not disarmed");
    }
}
