//! fake-mcp's benchmark (issue 42): `tools/call`s per second against fake-mcp and against a bare
//! rmcp server with the same tools (same transport and serving, no ledger, no faults), and the
//! bytes fake-mcp's ledger keeps per recorded call. Prints figures; asserts nothing.
//!
//!     cargo bench -p fake-mcp --bench calls [-- SECONDS CLIENTS]   (default 3 s, 4 clients)

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
    InitializeResult, ListToolsResult, PaginatedRequestParams, ServerCapabilities, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The same tools, answered with a constant and recorded nowhere.
#[derive(Clone, Debug)]
struct Bare;

impl rmcp::ServerHandler for Bare {
    fn get_info(&self) -> InitializeResult {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
    }
    async fn list_tools(
        &self,
        _r: Option<PaginatedRequestParams>,
        _c: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = provider_model::mcp::tools::default_tools()
            .iter()
            .map(|t| {
                let schema = match t.input_schema() {
                    Value::Object(m) => m,
                    _ => serde_json::Map::new(),
                };
                Tool::new(t.name.clone(), t.description.clone(), Arc::new(schema))
            })
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }
    async fn call_tool(
        &self,
        _r: CallToolRequestParams,
        _c: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        Ok(CallToolResult::success(vec![ContentBlock::text(
            json!({"effect": "eff_1", "kind": "record"}).to_string(),
        )])
        .into())
    }
}

async fn serve_bare() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let url = format!("http://{}/mcp", listener.local_addr().expect("an address"));
    let svc = StreamableHttpService::new(
        || Ok(Bare),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default().with_sse_keep_alive(None),
    );
    let app = axum::Router::new().route_service("/mcp", svc);
    tokio::spawn(async move {
        let _ = fake_control::serve(listener, app).await;
    });
    url
}

/// One client session: `initialize`, `notifications/initialized`; its session id.
async fn session(http: &reqwest::Client, url: &str) -> String {
    let r = http
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}))
        .send()
        .await
        .expect("initialize");
    let sid = r
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .expect("a session id")
        .to_string();
    let _ = r.text().await;
    http.post(url)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", &sid)
        .header("mcp-protocol-version", "2025-11-25")
        .json(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .send()
        .await
        .expect("initialized");
    sid
}

/// Calls `write_record` from `clients` sessions for `secs`; calls per second.
async fn rate(url: &str, secs: u64, clients: usize) -> f64 {
    let done = Arc::new(AtomicU64::new(0));
    let until = Instant::now() + Duration::from_secs(secs);
    let mut tasks = Vec::new();
    for c in 0..clients {
        let (url, done) = (url.to_string(), done.clone());
        tasks.push(tokio::spawn(async move {
            let http = reqwest::Client::new();
            let sid = session(&http, &url).await;
            let mut id = 1u64;
            while Instant::now() < until {
                id += 1;
                let body = http
                    .post(&url)
                    .header("accept", "application/json, text/event-stream")
                    .header("mcp-session-id", &sid)
                    .header("mcp-protocol-version", "2025-11-25")
                    .json(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
                        "name": "write_record", "arguments": {"key": format!("k{c}-{id}"), "value": "v"}}}))
                    .send()
                    .await
                    .expect("a call")
                    .text()
                    .await
                    .expect("its reply");
                assert!(body.contains("\"result\""), "{body}");
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    let started = Instant::now();
    for t in tasks {
        t.await.expect("a client");
    }
    done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64()
}

#[tokio::main]
async fn main() {
    let args: Vec<u64> = std::env::args().filter_map(|a| a.parse().ok()).collect();
    // The ledger is bounded at MAX_CALLS: at over 25,000 calls a second a longer run fills it.
    let secs = args.first().copied().unwrap_or(3);
    let clients = args.get(1).copied().unwrap_or(4) as usize;
    let h = fake_mcp::Handle::new(provider_model::mcp::tools::default_tools())
        .expect("the default tools");
    let (fake, _task) = fake_mcp::start(&h).await.expect("fake-mcp serves");
    let bare = serve_bare().await;
    // Warm both up, then measure each in turn.
    rate(&bare, 1, clients).await;
    rate(&fake, 1, clients).await;
    // The warm-up's calls are not measured (and the ledger is bounded at MAX_CALLS).
    h.reset();
    let b = rate(&bare, secs, clients).await;
    let f = rate(&fake, secs, clients).await;
    let l = h.ledger();
    let bytes = serde_json::to_vec(&l).map(|v| v.len()).unwrap_or(0);
    let calls = l.calls.len().max(1);
    println!("clients: {clients}, {secs} s each");
    println!("bare rmcp server: {b:.0} tools/call per second");
    println!(
        "fake-mcp:         {f:.0} tools/call per second ({:.2} of bare; target >= 0.8)",
        f / b
    );
    println!(
        "ledger: {} calls, {} effects, {bytes} bytes as JSON: {} bytes per recorded call (call and effect; target <= 512)",
        l.calls.len(),
        l.effects.len(),
        bytes / calls
    );
}
