//! fake-hermes over a real loopback socket: the observed HTTP surface, the SSE stream byte for
//! byte, approvals, stop, admission, newer-mode additions, and every fault against the ledger.

use fake_hermes::Handle;
use fake_hermes::app::{ReleaseAction, ScriptRule};
use fake_hermes::config::{Config, Mode};
use fake_hermes::faults::{Fault, Plan, Route, Rule};
use rstest::rstest;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

pub(crate) const KEY: &str = "hermes-test-key";

pub(crate) type Server = fake_control::testing::Served<Handle>;

pub(crate) fn fast() -> Config {
    Config {
        stream_wait_ms: 200,
        approval_timeout_ms: 5_000,
        ..Config::default()
    }
}

pub(crate) async fn start_with(config: Config) -> Server {
    let (app, handle) = fake_hermes::router(config).expect("config");
    Server::start(app, handle, Duration::from_secs(20)).await
}

pub(crate) struct R {
    pub(crate) status: u16,
    pub(crate) text: String,
    pub(crate) headers: reqwest::header::HeaderMap,
}

impl R {
    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or(Value::Null)
    }
}

pub(crate) async fn req(
    s: &Server,
    method: &str,
    path: &str,
    key: Option<&str>,
    body: Option<&str>,
    extra: &[(&str, &str)],
) -> Result<R, reqwest::Error> {
    let mut rb = s.client.request(
        reqwest::Method::from_bytes(method.as_bytes()).expect("method"),
        format!("{}{path}", s.base),
    );
    if let Some(k) = key {
        rb = rb.header("Authorization", format!("Bearer {k}"));
    }
    for (k, v) in extra {
        rb = rb.header(*k, *v);
    }
    if let Some(b) = body {
        rb = rb
            .header("content-type", "application/json")
            .body(b.to_string());
    }
    let r = rb.send().await?;
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    Ok(R {
        status,
        text: r.text().await?,
        headers,
    })
}

pub(crate) async fn start_run(s: &Server, body: Value) -> String {
    let r = req(
        s,
        "POST",
        "/v1/runs",
        Some(KEY),
        Some(&body.to_string()),
        &[],
    )
    .await
    .expect("start");
    assert_eq!(r.status, 202, "{}", r.text);
    r.json()["run_id"].as_str().expect("run_id").to_string()
}

pub(crate) async fn run_status(s: &Server, id: &str) -> Value {
    req(s, "GET", &format!("/v1/runs/{id}"), Some(KEY), None, &[])
        .await
        .expect("status")
        .json()
}

pub(crate) async fn wait_status(s: &Server, id: &str, want: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let st = run_status(s, id).await;
        if st["status"] == want {
            return st;
        }
        assert!(
            Instant::now() < deadline,
            "status never became {want}: {st}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The whole SSE stream of a run, as text, until the server closes it.
pub(crate) async fn stream(s: &Server, id: &str) -> (u16, String) {
    let r = req(
        s,
        "GET",
        &format!("/v1/runs/{id}/events"),
        Some(KEY),
        None,
        &[],
    )
    .await
    .expect("events");
    (r.status, r.text)
}

pub(crate) fn data_events(text: &str) -> Vec<Value> {
    text.split("\n\n")
        .filter_map(|f| f.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).expect("frame JSON"))
        .collect()
}

pub(crate) fn names(text: &str) -> Vec<String> {
    data_events(text)
        .iter()
        .map(|e| e["event"].as_str().unwrap_or("?").to_string())
        .collect()
}

/// Replaces run ids and float timestamps so a stream can be snapshot byte for byte.
fn redact(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("run_") {
        out.push_str(&rest[..i]);
        let tail = &rest[i + 4..];
        let n = tail.chars().take_while(|c| c.is_ascii_hexdigit()).count();
        if n == 32 {
            out.push_str("run_[id]");
            rest = &tail[32..];
        } else {
            out.push_str("run_");
            rest = tail;
        }
    }
    out.push_str(rest);
    for key in ["\"timestamp\": ", "\"duration\": "] {
        let mut res = String::new();
        let mut rest = out.as_str();
        while let Some(i) = rest.find(key) {
            res.push_str(&rest[..i + key.len()]);
            let tail = &rest[i + key.len()..];
            let n = tail
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == 'e' || *c == '-')
                .count();
            res.push_str("[n]");
            rest = &tail[n..];
        }
        res.push_str(rest);
        out = res;
    }
    out
}

pub(crate) fn approval_script() -> Value {
    json!({"name": "tool-with-approval", "steps": [
        {"id": "ap", "kind": "approval", "tool": "terminal", "command": "rm -rf build/", "description": "delete build output", "pattern_key": "rm"},
        {"id": "reply", "kind": "message", "text": "Removed the build directory.", "chunks": 2, "after": ["ap"]}
    ]})
}

pub(crate) fn sleepy_script(ms: u64) -> Value {
    json!({"name": "slow", "steps": [
        {"id": "think", "kind": "tool", "tool": "search", "preview": "searching", "duration_ms": ms},
        {"id": "reply", "kind": "message", "text": "found it", "after": ["think"]}
    ]})
}

pub(crate) async fn with_script(s: &Server, script: Value) {
    s.handle
        .set_scripts(
            vec![ScriptRule {
                session_id: None,
                objective_contains: Some("".into()),
                script,
            }],
            None,
        )
        .expect("scripts");
}

// ---------- the observed surface ----------

#[tokio::test]
async fn a_text_run_streams_exactly_as_observed() {
    let s = start_with(Config {
        first_event_delay_ms: 300,
        ..fast()
    })
    .await;
    let r = req(
        &s,
        "POST",
        "/v1/runs",
        Some(KEY),
        Some(r#"{"input": "Say hello", "session_id": "sess-1"}"#),
        &[("X-Hermes-Session-Key", "sk-1")],
    )
    .await
    .expect("start");
    assert_eq!(r.status, 202);
    assert_eq!(
        redact(&r.text),
        r#"{"run_id": "run_[id]", "status": "started"}"#
    );
    assert_eq!(
        r.headers
            .get("x-hermes-session-key")
            .and_then(|v| v.to_str().ok()),
        Some("sk-1")
    );
    assert_eq!(
        r.headers
            .get("x-frame-options")
            .and_then(|v| v.to_str().ok()),
        Some("DENY")
    );
    let id = r.json()["run_id"].as_str().expect("id").to_string();
    // Straight after start: running, no last_event; observed key order.
    let st = req(&s, "GET", &format!("/v1/runs/{id}"), Some(KEY), None, &[])
        .await
        .expect("status");
    assert!(
        st.text.starts_with(&format!(
            r#"{{"object": "hermes.run", "run_id": "{id}", "status": "running", "updated_at": "#
        )),
        "{}",
        st.text
    );
    assert!(!st.text.contains("last_event"));
    let (code, text) = stream(&s, &id).await;
    assert_eq!(code, 200);
    insta::assert_snapshot!("text_run_stream", redact(&text));
    let done = wait_status(&s, &id, "completed").await;
    assert_eq!(done["last_event"], "run.completed");
    assert_eq!(done["output"], "Done. I completed the objective.");
    assert!(done["usage"]["total_tokens"].as_i64().is_some());
    assert_eq!(s.handle.ledger().runs.len(), 1);
}

#[tokio::test]
async fn a_tool_run_with_approval_streams_as_observed_and_the_ledger_counts_one_decision() {
    let s = start_with(fast()).await;
    with_script(&s, approval_script()).await;
    let id = start_run(
        &s,
        json!({"input": "clean the build", "session_id": "sess-2"}),
    )
    .await;
    let st = wait_status(&s, &id, "waiting_for_approval").await;
    assert_eq!(st["last_event"], "approval.request");
    // Invalid choices are refused before the run state is looked at.
    let bad = req(
        &s,
        "POST",
        &format!("/v1/runs/{id}/approval"),
        Some(KEY),
        Some(r#"{"choice": "maybe"}"#),
        &[],
    )
    .await
    .expect("bad");
    assert_eq!(
        (bad.status, bad.json()["error"]["code"].clone()),
        (400, json!("invalid_approval_choice"))
    );
    let ok = req(
        &s,
        "POST",
        &format!("/v1/runs/{id}/approval"),
        Some(KEY),
        Some(r#"{"choice": "approve", "all": "true"}"#),
        &[],
    )
    .await
    .expect("approve");
    assert_eq!(ok.status, 200);
    assert_eq!(
        redact(&ok.text),
        r#"{"object": "hermes.run.approval_response", "run_id": "run_[id]", "choice": "once", "resolved": 1}"#
    );
    let again = req(
        &s,
        "POST",
        &format!("/v1/runs/{id}/approval"),
        Some(KEY),
        Some(r#"{"choice": "once"}"#),
        &[],
    )
    .await
    .expect("again");
    assert!(again.status == 409, "{}", again.text);
    let (_, text) = stream(&s, &id).await;
    insta::assert_snapshot!("approval_run_stream", redact(&text));
    wait_status(&s, &id, "completed").await;
    let after = req(
        &s,
        "POST",
        &format!("/v1/runs/{id}/approval"),
        Some(KEY),
        Some(r#"{"choice": "once"}"#),
        &[],
    )
    .await
    .expect("after");
    assert_eq!(
        (after.status, after.json()["error"]["code"].clone()),
        (409, json!("approval_not_active"))
    );
    let l = s.handle.ledger();
    assert_eq!(l.approvals.len(), 1);
    assert_eq!(l.per_session()["sess-2"].approvals, 1);
}

#[tokio::test]
async fn deny_and_timeout_fail_the_tool_but_not_the_run() {
    let s = start_with(Config {
        approval_timeout_ms: 150,
        ..fast()
    })
    .await;
    with_script(&s, approval_script()).await;
    let id = start_run(&s, json!({"input": "x"})).await;
    wait_status(&s, &id, "waiting_for_approval").await;
    let r = req(
        &s,
        "POST",
        &format!("/v1/runs/{id}/approval"),
        Some(KEY),
        Some(r#"{"choice": "DENY"}"#),
        &[],
    )
    .await
    .expect("deny");
    assert_eq!(r.json()["choice"], "deny");
    let (_, text) = stream(&s, &id).await;
    let ev = data_events(&text);
    let completed = ev
        .iter()
        .find(|e| e["event"] == "tool.completed")
        .expect("tool.completed");
    assert_eq!(completed["error"], true);
    wait_status(&s, &id, "completed").await;
    // Nobody answers: the wait times out, the tool fails, the run still completes.
    let id2 = start_run(&s, json!({"input": "y"})).await;
    let (_, text) = stream(&s, &id2).await;
    assert_eq!(
        names(&text),
        [
            "tool.started",
            "approval.request",
            "tool.completed",
            "message.delta",
            "message.delta",
            "reasoning.available",
            "run.completed"
        ]
    );
    assert_eq!(data_events(&text)[2]["error"], true);
    assert_eq!(s.handle.ledger().approvals.len(), 1);
}

#[tokio::test]
async fn stop_cancels_after_provider_evidence_and_is_refused_after_terminal() {
    let s = start_with(fast()).await;
    with_script(&s, sleepy_script(5_000)).await;
    let id = start_run(&s, json!({"input": "x"})).await;
    wait_status(&s, &id, "running").await;
    let r = req(
        &s,
        "POST",
        &format!("/v1/runs/{id}/stop"),
        Some(KEY),
        None,
        &[],
    )
    .await
    .expect("stop");
    assert_eq!(
        redact(&r.text),
        r#"{"run_id": "run_[id]", "status": "stopping"}"#
    );
    let st = run_status(&s, &id).await;
    assert!(
        st["status"] == "stopping" || st["status"] == "cancelled",
        "{st}"
    );
    let again = req(
        &s,
        "POST",
        &format!("/v1/runs/{id}/stop"),
        Some(KEY),
        None,
        &[],
    )
    .await
    .expect("again");
    assert!(again.status == 200 || again.status == 404);
    let (_, text) = stream(&s, &id).await;
    assert!(
        text.ends_with(
            "data: {\"event\": \"run.cancelled\", \"run_id\": \""
                .to_string()
                .as_str()
        ) || text.contains("\"event\": \"run.cancelled\""),
        "{text}"
    );
    assert!(text.ends_with(": stream closed\n\n"));
    let done = wait_status(&s, &id, "cancelled").await;
    assert_eq!(done["last_event"], "run.cancelled");
    let late = req(
        &s,
        "POST",
        &format!("/v1/runs/{id}/stop"),
        Some(KEY),
        None,
        &[],
    )
    .await
    .expect("late");
    assert_eq!(
        (late.status, late.json()["error"]["code"].clone()),
        (404, json!("run_not_found"))
    );
    let unknown = req(
        &s,
        "POST",
        "/v1/runs/run_00000000000000000000000000000000/stop",
        Some(KEY),
        None,
        &[],
    )
    .await
    .expect("unknown");
    assert_eq!(unknown.status, 404);
    let stops = s.handle.ledger().stops;
    assert_eq!(
        stops.iter().filter(|x| x.effective).count(),
        1,
        "one stop took effect; {} were asked",
        stops.len()
    );
}

#[tokio::test]
async fn stop_during_a_pending_approval_resolves_it_as_deny_without_a_responded_event() {
    let s = start_with(fast()).await;
    with_script(&s, approval_script()).await;
    let id = start_run(&s, json!({"input": "x"})).await;
    wait_status(&s, &id, "waiting_for_approval").await;
    req(
        &s,
        "POST",
        &format!("/v1/runs/{id}/stop"),
        Some(KEY),
        None,
        &[],
    )
    .await
    .expect("stop");
    let (_, text) = stream(&s, &id).await;
    assert_eq!(
        names(&text),
        [
            "tool.started",
            "approval.request",
            "tool.completed",
            "run.cancelled"
        ]
    );
    assert_eq!(data_events(&text)[2]["error"], true);
    wait_status(&s, &id, "cancelled").await;
    assert!(s.handle.ledger().approvals.is_empty());
}

#[rstest]
#[case::no_key(None, 401)]
#[case::wrong_key(Some("Bearer nope-nope"), 401)]
#[case::wrong_scheme(Some("Token hermes-test-key"), 401)]
#[case::padded_token(Some("Bearer   hermes-test-key  "), 404)]
#[tokio::test]
async fn auth_is_checked_before_the_run_lookup(#[case] auth: Option<&str>, #[case] status: u16) {
    let s = start_with(fast()).await;
    let mut rb = s.client.get(format!(
        "{}/v1/runs/run_ffffffffffffffffffffffffffffffff",
        s.base
    ));
    if let Some(a) = auth {
        rb = rb.header("Authorization", a);
    }
    let r = rb.send().await.expect("send");
    assert_eq!(r.status().as_u16(), status);
    let text = r.text().await.expect("text");
    if status == 401 {
        assert_eq!(
            text,
            r#"{"error": {"message": "Invalid API key", "type": "invalid_request_error", "code": "invalid_api_key"}}"#
        );
    }
    let health = s
        .client
        .get(format!("{}/health", s.base))
        .send()
        .await
        .expect("health");
    assert_eq!(health.status().as_u16(), 200);
}

#[rstest]
#[case::invalid_json("not json", 400, "Invalid JSON")]
#[case::empty_body("", 400, "Invalid JSON")]
#[case::no_input("{}", 400, "Missing 'input' field")]
#[case::empty_input(r#"{"input": ""}"#, 400, "Missing 'input' field")]
#[case::no_user_message(
    r#"{"input": [{"role": "system", "content": "x"}]}"#,
    400,
    "No user message found in input"
)]
#[case::empty_list_input(r#"{"input": []}"#, 400, "Missing 'input' field")]
#[case::number_input(r#"{"input": 42}"#, 400, "No user message found in input")]
#[case::history_not_a_list(
    r#"{"input": "x", "conversation_history": {"role": "user"}}"#,
    400,
    "'conversation_history' must be an array of message objects"
)]
#[case::history_entry_without_content(
    r#"{"input": "x", "conversation_history": [{"role": "user"}]}"#,
    400,
    "conversation_history[0] must have 'role' and 'content' fields"
)]
#[case::second_history_entry(
    r#"{"input": "x", "conversation_history": [{"role": "user", "content": "a"}, 1]}"#,
    400,
    "conversation_history[1] must have 'role' and 'content' fields"
)]
#[tokio::test]
async fn invalid_starts_are_refused_with_the_observed_messages_and_start_nothing(
    #[case] body: &str,
    #[case] status: u16,
    #[case] message: &str,
) {
    let s = start_with(fast()).await;
    let r = req(&s, "POST", "/v1/runs", Some(KEY), Some(body), &[])
        .await
        .expect("start");
    assert_eq!(r.status, status);
    assert_eq!(
        r.text,
        format!(
            r#"{{"error": {{"message": "{message}", "type": "invalid_request_error", "param": null, "code": null}}}}"#
        )
    );
    assert!(s.handle.ledger().runs.is_empty());
}

#[tokio::test]
async fn observed_server_defects_and_plain_text_errors() {
    let s = start_with(Config {
        max_body_bytes: 2048,
        ..fast()
    })
    .await;
    let arr = req(&s, "POST", "/v1/runs", Some(KEY), Some("[]"), &[])
        .await
        .expect("array");
    assert_eq!(arr.status, 500);
    assert!(
        arr.headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|c| c.starts_with("text/plain"))
    );
    let list = req(&s, "GET", "/v1/runs", Some(KEY), None, &[])
        .await
        .expect("list");
    assert_eq!(list.status, 405);
    assert_eq!(
        list.headers.get("allow").and_then(|v| v.to_str().ok()),
        Some("POST")
    );
    let steer = req(
        &s,
        "POST",
        "/v1/runs/run_x/steer",
        Some(KEY),
        Some("{}"),
        &[],
    )
    .await
    .expect("steer");
    assert_eq!((steer.status, steer.text.as_str()), (404, "404: Not Found"));
    let long_key = "k".repeat(257);
    let sk = req(
        &s,
        "POST",
        "/v1/runs",
        Some(KEY),
        Some(r#"{"input": "x"}"#),
        &[("X-Hermes-Session-Key", &long_key)],
    )
    .await
    .expect("sk");
    assert_eq!(sk.status, 400);
    let big = format!(r#"{{"input": "{}"}}"#, "x".repeat(4096));
    let too_big = req(&s, "POST", "/v1/runs", Some(KEY), Some(&big), &[])
        .await
        .expect("big");
    assert_eq!(
        (too_big.status, too_big.json()["error"]["code"].clone()),
        (413, json!("body_too_large"))
    );
    assert!(
        too_big.headers.get("x-frame-options").is_none(),
        "413 carries no security headers"
    );
    assert!(s.handle.ledger().runs.is_empty());
}

// ---------- SSE semantics ----------

#[tokio::test]
async fn a_late_subscriber_gets_the_backlog_and_a_closed_stream_is_gone() {
    let s = start_with(fast()).await;
    let id = start_run(&s, json!({"input": "x"})).await;
    wait_status(&s, &id, "completed").await;
    let (code, text) = stream(&s, &id).await;
    assert_eq!(code, 200);
    assert_eq!(
        names(&text).last().map(String::as_str),
        Some("run.completed")
    );
    assert!(text.ends_with(": stream closed\n\n"));
    let t = Instant::now();
    let (code, _) = stream(&s, &id).await;
    assert_eq!(code, 404);
    assert!(
        t.elapsed() >= Duration::from_millis(150),
        "the server polls before answering 404"
    );
    let (code, _) = stream(&s, "run_0123456789abcdef0123456789abcdef").await;
    assert_eq!(code, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_subscribers_split_one_queue() {
    let s = start_with(Config {
        first_event_delay_ms: 200,
        event_gap_ms: 20,
        ..fast()
    })
    .await;
    with_script(
        &s,
        json!({"steps": [{"id": "m", "kind": "message", "text": "abcdefghij", "chunks": 10}]}),
    )
    .await;
    let id = start_run(&s, json!({"input": "x"})).await;
    let url = format!("{}/v1/runs/{id}/events", s.base);
    let open = |c: reqwest::Client, u: String| async move {
        c.get(u).bearer_auth(KEY).send().await.expect("sub")
    };
    let (a, b) = tokio::join!(
        open(s.client.clone(), url.clone()),
        open(s.client.clone(), url)
    );
    let read = |r: reqwest::Response| async move {
        let mut body = String::new();
        let mut r = r;
        while let Ok(Ok(Some(chunk))) =
            tokio::time::timeout(Duration::from_millis(1500), r.chunk()).await
        {
            body.push_str(&String::from_utf8_lossy(&chunk));
        }
        body
    };
    let (ta, tb) = tokio::join!(read(a), read(b));
    let (na, nb) = (names(&ta), names(&tb));
    assert!(
        !na.is_empty() && !nb.is_empty(),
        "both got events: {na:?} / {nb:?}"
    );
    assert_eq!(
        na.len() + nb.len(),
        12,
        "together they saw every event once"
    );
    let closed = [
        ta.contains(": stream closed"),
        tb.contains(": stream closed"),
    ];
    assert_eq!(
        closed.iter().filter(|c| **c).count(),
        1,
        "exactly one is closed"
    );
}

#[tokio::test]
async fn keepalive_after_silence() {
    let s = start_with(Config {
        keepalive_ms: 100,
        ..fast()
    })
    .await;
    with_script(&s, sleepy_script(450)).await;
    let id = start_run(&s, json!({"input": "x"})).await;
    let (_, text) = stream(&s, &id).await;
    assert!(text.matches(": keepalive\n\n").count() >= 2, "{text}");
    assert!(text.ends_with(": stream closed\n\n"));
}

#[tokio::test]
async fn the_event_bound_caps_a_run() {
    let s = start_with(Config {
        max_events_per_run: 3,
        ..fast()
    })
    .await;
    with_script(
        &s,
        json!({"steps": [{"id": "m", "kind": "message", "text": "abcdefghij", "chunks": 10}]}),
    )
    .await;
    let id = start_run(&s, json!({"input": "x"})).await;
    let (_, text) = stream(&s, &id).await;
    assert_eq!(names(&text).len(), 3);
}

// ---------- admission and persistence ----------

#[tokio::test]
async fn runs_of_one_session_queue_in_fifo_order_and_queued_is_not_executed() {
    let s = start_with(fast()).await;
    with_script(&s, sleepy_script(300)).await;
    let a = start_run(&s, json!({"input": "first", "session_id": "same"})).await;
    let b = start_run(&s, json!({"input": "second", "session_id": "same"})).await;
    assert_eq!(run_status(&s, &b).await["status"], "queued");
    let st_a = wait_status(&s, &a, "completed").await;
    let st_b = wait_status(&s, &b, "completed").await;
    assert!(st_b["created_at"].as_f64() >= st_a["created_at"].as_f64());
    // b's events all come after a finished.
    let (_, tb) = stream(&s, &b).await;
    let first_b = data_events(&tb)[0]["timestamp"].as_f64().expect("ts");
    assert!(first_b >= st_a["updated_at"].as_f64().expect("ts") - 0.001);
    // Another session is not queued behind them.
    let c = start_run(&s, json!({"input": "other", "session_id": "other"})).await;
    assert_ne!(run_status(&s, &c).await["status"], "queued");
}

#[tokio::test]
async fn scripts_are_validated_and_routed() {
    let s = start_with(fast()).await;
    let bad = s.handle.set_scripts(
        vec![ScriptRule {
            session_id: None,
            objective_contains: Some("x".into()),
            script: json!({"steps": [{"id": "a", "kind": "tool", "tool": "t", "retries": 2.5}]}),
        }],
        None,
    );
    assert!(bad.expect_err("invalid").join(" ").contains("retries"));
    s.handle
        .set_scripts(
            vec![ScriptRule { session_id: None, objective_contains: Some("fail please".into()), script: json!({"name": "failing", "steps": [{"id": "f", "kind": "fail", "error": "tool crashed"}]}) }],
            None,
        )
        .expect("scripts");
    let id = start_run(&s, json!({"input": "please fail please"})).await;
    let st = wait_status(&s, &id, "failed").await;
    assert_eq!(st["error"], "tool crashed");
    assert_eq!(s.handle.ledger().runs[0].script, "failing");
    let ok = start_run(&s, json!({"input": "something else"})).await;
    wait_status(&s, &ok, "completed").await;
}

// ---------- faults against the ledger ----------

fn plan(route: Route, fault: Fault) -> Plan {
    Plan {
        rules: vec![Rule {
            route,
            nth: 1,
            times: 1,
            session_id: None,
            fault,
        }],
    }
}

#[rstest]
#[case::reject(Fault::Reject { status: 503 }, Some(503), 0)]
#[case::commit_then(Fault::CommitThen { status: 502 }, Some(502), 1)]
#[case::commit_then_drop(Fault::CommitThenDrop, None, 1)]
#[case::without_run_id(Fault::StartWithoutRunId, Some(202), 1)]
#[case::delay(Fault::Delay { ms: 100 }, Some(202), 1)]
#[case::forget(Fault::Forget, Some(202), 1)]
#[tokio::test]
async fn start_faults(#[case] fault: Fault, #[case] status: Option<u16>, #[case] runs: usize) {
    let s = start_with(fast()).await;
    s.handle
        .set_plan(plan(Route::Start, fault.clone()))
        .expect("plan");
    let t = Instant::now();
    let r = req(
        &s,
        "POST",
        "/v1/runs",
        Some(KEY),
        Some(r#"{"input": "x", "session_id": "f"}"#),
        &[],
    )
    .await;
    match status {
        None => assert!(r.is_err(), "connection dropped without a reply"),
        Some(code) => {
            let r = r.expect("reply");
            assert_eq!(r.status, code, "{}", r.text);
            if fault == Fault::StartWithoutRunId {
                assert_eq!(r.text, r#"{"status": "started"}"#);
            }
        }
    }
    if let Fault::Delay { ms } = fault {
        assert!(t.elapsed() >= Duration::from_millis(ms));
    }
    let l = s.handle.ledger();
    assert_eq!(l.runs.len(), runs, "{l:?}");
    if runs == 1 {
        assert_eq!(l.runs[0].fault.as_deref(), Some(fault.to_string().as_str()));
        assert_eq!(l.per_session()["f"].starts, 1);
        // The run really executes, whatever the client saw.
        let id = l.runs[0].run_id.clone();
        let deadline = Instant::now() + Duration::from_secs(5);
        while !s.handle.ledger().terminal.contains_key(&id) {
            assert!(Instant::now() < deadline, "run never ended");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

#[tokio::test]
async fn a_held_start_starts_only_when_released_to_proceed() {
    let s = start_with(fast()).await;
    s.handle
        .set_plan(Plan {
            rules: vec![Rule {
                route: Route::Start,
                nth: 1,
                times: 2,
                session_id: None,
                fault: Fault::Hold { name: "h".into() },
            }],
        })
        .expect("plan");
    let s2 = &s;
    let (r, _) = tokio::join!(
        req(
            s2,
            "POST",
            "/v1/runs",
            Some(KEY),
            Some(r#"{"input": "x"}"#),
            &[]
        ),
        async {
            assert!(s.handle.wait_parked("h", 1, Duration::from_secs(5)).await);
            assert!(
                s.handle.ledger().runs.is_empty(),
                "nothing starts while held"
            );
            s.handle.release("h", ReleaseAction::Proceed)
        }
    );
    assert_eq!(r.expect("reply").status, 202);
    let (r, _) = tokio::join!(
        req(
            s2,
            "POST",
            "/v1/runs",
            Some(KEY),
            Some(r#"{"input": "x"}"#),
            &[]
        ),
        async {
            assert!(s.handle.wait_parked("h", 1, Duration::from_secs(5)).await);
            s.handle.release("h", ReleaseAction::Reject { status: 503 })
        }
    );
    assert_eq!(r.expect("reply").status, 503);
    assert_eq!(s.handle.ledger().runs.len(), 1);
}

#[tokio::test]
async fn event_faults() {
    let s = start_with(fast()).await;
    let id = start_run(&s, json!({"input": "x"})).await;
    s.handle
        .set_plan(plan(Route::Events, Fault::Events404))
        .expect("plan");
    assert_eq!(
        stream(&s, &id).await.0,
        404,
        "404 although the stream exists"
    );
    s.handle
        .set_plan(plan(Route::Events, Fault::GarbleFrame { frame: 1 }))
        .expect("plan");
    let (_, text) = stream(&s, &id).await;
    let first = text.split("\n\n").next().expect("frame");
    assert!(
        serde_json::from_str::<Value>(first.trim_start_matches("data: ")).is_err(),
        "{first}"
    );
    let id2 = start_run(&s, json!({"input": "y"})).await;
    s.handle
        .set_plan(plan(Route::Events, Fault::DropStream { after: 2 }))
        .expect("plan");
    let (_, text) = stream(&s, &id2).await;
    assert_eq!(names(&text).len(), 2);
    assert!(!text.contains(": stream closed"));
    assert_eq!(s.handle.ledger().runs.len(), 2);
}

#[rstest]
#[case::commit_then(Fault::CommitThen { status: 500 }, Some(500))]
#[case::commit_then_drop(Fault::CommitThenDrop, None)]
#[case::reject(Fault::Reject { status: 503 }, Some(503))]
#[tokio::test]
async fn approval_faults(#[case] fault: Fault, #[case] status: Option<u16>) {
    let s = start_with(fast()).await;
    with_script(&s, approval_script()).await;
    let id = start_run(&s, json!({"input": "x", "session_id": "ap"})).await;
    wait_status(&s, &id, "waiting_for_approval").await;
    s.handle
        .set_plan(plan(Route::Approval, fault.clone()))
        .expect("plan");
    let r = req(
        &s,
        "POST",
        &format!("/v1/runs/{id}/approval"),
        Some(KEY),
        Some(r#"{"choice": "once"}"#),
        &[],
    )
    .await;
    match status {
        None => assert!(r.is_err()),
        Some(code) => assert_eq!(r.expect("reply").status, code),
    }
    let applied = !matches!(fault, Fault::Reject { .. });
    assert_eq!(s.handle.ledger().approvals.len(), usize::from(applied));
    if applied {
        // Applied despite the error: the run resumes and completes.
        wait_status(&s, &id, "completed").await;
    } else {
        assert_eq!(run_status(&s, &id).await["status"], "waiting_for_approval");
    }
}

#[tokio::test]
async fn stop_stuck_stays_stopping_and_completion_can_win_the_race() {
    let s = start_with(fast()).await;
    with_script(&s, sleepy_script(5_000)).await;
    let id = start_run(&s, json!({"input": "x"})).await;
    s.handle
        .set_plan(plan(Route::Stop, Fault::StopStuck))
        .expect("plan");
    req(
        &s,
        "POST",
        &format!("/v1/runs/{id}/stop"),
        Some(KEY),
        None,
        &[],
    )
    .await
    .expect("stop");
    tokio::time::sleep(Duration::from_millis(400)).await;
    let st = run_status(&s, &id).await;
    assert_eq!(
        (st["status"].clone(), st["last_event"].clone()),
        (json!("stopping"), json!("run.stopping"))
    );
    let id2 = start_run(&s, json!({"input": "y"})).await;
    s.handle
        .set_plan(plan(Route::Stop, Fault::CompleteRacesStop))
        .expect("plan");
    req(
        &s,
        "POST",
        &format!("/v1/runs/{id2}/stop"),
        Some(KEY),
        None,
        &[],
    )
    .await
    .expect("stop");
    wait_status(&s, &id2, "completed").await;
    assert_eq!(
        s.handle
            .ledger()
            .stops
            .iter()
            .filter(|x| x.effective)
            .count(),
        2
    );
}

#[tokio::test]
async fn forget_wipes_runs_but_not_the_ledger() {
    let s = start_with(fast()).await;
    let id = start_run(&s, json!({"input": "x"})).await;
    s.handle
        .set_plan(plan(Route::Status, Fault::Forget))
        .expect("plan");
    let r = req(&s, "GET", &format!("/v1/runs/{id}"), Some(KEY), None, &[])
        .await
        .expect("status");
    assert_eq!(
        (r.status, r.json()["error"]["code"].clone()),
        (404, json!("run_not_found"))
    );
    assert_eq!(s.handle.ledger().runs.len(), 1);
}

#[tokio::test]
async fn an_invalid_plan_names_rule_and_field() {
    let s = start_with(fast()).await;
    let d = s
        .handle
        .set_plan(plan(Route::Status, Fault::StopStuck))
        .expect_err("refused");
    assert!(d.iter().any(|x| x.starts_with("rules[0].route")), "{d:?}");
    let r = s
        .client
        .post(format!("{}/_control/faults", s.base))
        .bearer_auth(KEY)
        .json(&json!({"rules": []}))
        .send()
        .await
        .expect("send");
    assert_eq!(
        r.status().as_u16(),
        401,
        "the API key never reaches /_control"
    );
}

// ---------- newer mode ----------

pub(crate) fn newer() -> Config {
    Config {
        mode: Mode::Newer,
        ..fast()
    }
}

#[tokio::test]
async fn newer_replays_an_idempotency_key_and_refuses_a_changed_payload() {
    let s = start_with(newer()).await;
    let body = r#"{"input": "x", "session_id": "n"}"#;
    let a = req(
        &s,
        "POST",
        "/v1/runs",
        Some(KEY),
        Some(body),
        &[("Idempotency-Key", "k1")],
    )
    .await
    .expect("a");
    let b = req(
        &s,
        "POST",
        "/v1/runs",
        Some(KEY),
        Some(body),
        &[("Idempotency-Key", "k1")],
    )
    .await
    .expect("b");
    assert_eq!(a.json()["run_id"], b.json()["run_id"]);
    assert_eq!(b.json()["replayed"], true);
    assert_eq!(
        b.headers
            .get("idempotency-replayed")
            .and_then(|v| v.to_str().ok()),
        Some("true")
    );
    let c = req(
        &s,
        "POST",
        "/v1/runs",
        Some(KEY),
        Some(r#"{"input": "changed"}"#),
        &[("Idempotency-Key", "k1")],
    )
    .await
    .expect("c");
    assert_eq!(
        (c.status, c.json()["error"]["code"].clone()),
        (409, json!("idempotency_key_conflict"))
    );
    assert_eq!(s.handle.ledger().runs.len(), 1);
    // The default mode ignores the key: two runs.
    let d = start_with(fast()).await;
    for _ in 0..2 {
        req(
            &d,
            "POST",
            "/v1/runs",
            Some(KEY),
            Some(body),
            &[("Idempotency-Key", "k1")],
        )
        .await
        .expect("start");
    }
    assert_eq!(d.handle.ledger().runs.len(), 2);
}

#[tokio::test]
async fn newer_approvals_carry_request_ids_and_steer_and_interrupted_exist() {
    let s = start_with(newer()).await;
    with_script(&s, approval_script()).await;
    let id = start_run(&s, json!({"input": "x"})).await;
    let st = wait_status(&s, &id, "waiting_for_approval").await;
    let rid = st["approval"]["request_id"]
        .as_str()
        .expect("request_id")
        .to_string();
    let wrong = req(
        &s,
        "POST",
        &format!("/v1/runs/{id}/approval"),
        Some(KEY),
        Some(r#"{"choice": "once", "request_id": "nope"}"#),
        &[],
    )
    .await
    .expect("wrong");
    assert_eq!(wrong.status, 409);
    let ok = req(
        &s,
        "POST",
        &format!("/v1/runs/{id}/approval"),
        Some(KEY),
        Some(&json!({"choice": "once", "request_id": rid}).to_string()),
        &[],
    )
    .await
    .expect("ok");
    assert_eq!(ok.json()["request_id"], rid);
    wait_status(&s, &id, "completed").await;
    let steer = req(
        &s,
        "POST",
        &format!("/v1/runs/{id}/steer"),
        Some(KEY),
        Some(r#"{"input": "faster"}"#),
        &[],
    )
    .await
    .expect("steer");
    assert_eq!(
        (steer.status, steer.json()["error"]["code"].clone()),
        (409, json!("run_not_accepting_steer"))
    );
    let unknown = req(
        &s,
        "POST",
        "/v1/runs/run_00000000000000000000000000000000/stop",
        Some(KEY),
        None,
        &[],
    )
    .await
    .expect("stop");
    assert_eq!(
        (unknown.status, unknown.json()["error"]["code"].clone()),
        (409, json!("run_not_active"))
    );
    // A durable (keyed) run whose owner process died is `interrupted`.
    with_script(&s, sleepy_script(5_000)).await;
    let r = req(
        &s,
        "POST",
        "/v1/runs",
        Some(KEY),
        Some(r#"{"input": "long"}"#),
        &[("Idempotency-Key", "dur")],
    )
    .await
    .expect("start");
    let keyed = r.json()["run_id"].as_str().expect("id").to_string();
    s.handle.forget();
    let st = run_status(&s, &keyed).await;
    assert_eq!(
        (st["status"].clone(), st["last_event"].clone()),
        (json!("interrupted"), json!("run.interrupted"))
    );
}

#[tokio::test]
async fn newer_caps_concurrent_runs_with_429() {
    let s = start_with(Config {
        max_concurrent_runs: 1,
        ..newer()
    })
    .await;
    with_script(&s, sleepy_script(5_000)).await;
    start_run(&s, json!({"input": "x"})).await;
    let r = req(
        &s,
        "POST",
        "/v1/runs",
        Some(KEY),
        Some(r#"{"input": "y"}"#),
        &[],
    )
    .await
    .expect("second");
    assert_eq!(
        (r.status, r.json()["error"]["code"].clone()),
        (429, json!("rate_limit_exceeded"))
    );
    assert_eq!(
        r.headers.get("retry-after").and_then(|v| v.to_str().ok()),
        Some("1")
    );
    assert_eq!(s.handle.ledger().runs.len(), 1);
}

/// The control plane is fake-control's: a held start whose client goes is seen to go (as
/// fake-payments sees it), the holds list has the shared shape, and control errors are
/// `{"error": {"code", "message"}}`.
#[tokio::test]
async fn a_held_start_tells_when_its_client_has_gone_and_control_speaks_one_dialect() {
    let s = start_with(fast()).await;
    s.handle
        .set_plan(Plan {
            rules: vec![Rule {
                route: Route::Start,
                nth: 1,
                times: 1,
                session_id: None,
                fault: Fault::Hold { name: "g".into() },
            }],
        })
        .expect("plan");
    let client = s.client.clone();
    let url = format!("{}/v1/runs", s.base);
    let sender = tokio::spawn(async move {
        client
            .post(url)
            .bearer_auth(KEY)
            .body(r#"{"input": "x"}"#)
            .send()
            .await
    });
    assert!(s.handle.wait_parked("g", 1, Duration::from_secs(5)).await);
    let holds = s
        .client
        .get(format!("{}/_control/holds", s.base))
        .bearer_auth("hermes-control")
        .send()
        .await
        .expect("holds");
    let holds: Value = holds.json().await.expect("json");
    assert_eq!(holds["g"][0]["op"], "start", "{holds}");
    assert!(
        !s.handle
            .wait_client_gone("g", Duration::from_millis(100))
            .await,
        "the client is still there"
    );
    sender.abort();
    assert!(
        s.handle.wait_client_gone("g", Duration::from_secs(5)).await,
        "the fake must see the client go"
    );
    assert_eq!(s.handle.release("g", ReleaseAction::Proceed), 1);
    let denied = s
        .client
        .get(format!("{}/_control/holds", s.base))
        .bearer_auth(KEY)
        .send()
        .await
        .expect("send");
    assert_eq!(denied.status().as_u16(), 401);
    let body: Value = denied.json().await.expect("json");
    assert_eq!(body["error"]["code"], "unauthenticated", "{body}");
}

/// The run store is bounded for long soaks: once it holds `max_runs`, a start is refused with
/// 503 `ledger_full` before anything happens (no run, no ledger record), until a reset.
#[tokio::test]
async fn the_run_store_is_bounded_and_a_reset_continues() {
    let s = start_with(Config {
        max_runs: 2,
        ..fast()
    })
    .await;
    start_run(&s, json!({"input": "a"})).await;
    start_run(&s, json!({"input": "b"})).await;
    let r = req(
        &s,
        "POST",
        "/v1/runs",
        Some(KEY),
        Some(r#"{"input": "c"}"#),
        &[],
    )
    .await
    .expect("third");
    assert_eq!(
        (r.status, r.json()["error"]["code"].clone()),
        (503, json!("ledger_full")),
        "{}",
        r.text
    );
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("/_control/reset"))
    );
    assert_eq!(s.handle.ledger().runs.len(), 2);
    s.handle.reset();
    start_run(&s, json!({"input": "d"})).await;
    assert_eq!(s.handle.ledger().runs.len(), 1);
}

/// A key issued at run time starts runs recorded under its label; once revoked, it is refused
/// with 401, the use is recorded, and no run starts. What a run produced is in the ledger.
#[tokio::test]
async fn issued_keys_are_labelled_revocation_is_recorded_and_results_kept() {
    let s = start_with(fast()).await;
    let key = s.handle.issue_key("p1-1");
    let body = r#"{"input": "Say hello", "session_id": "sess-1"}"#;
    let r = req(&s, "POST", "/v1/runs", Some(&key), Some(body), &[])
        .await
        .expect("start");
    assert_eq!(r.status, 202);
    let run = r.json()["run_id"].as_str().expect("run id").to_string();
    assert_eq!(s.handle.revoke("p1-1"), 1);
    let late = req(&s, "POST", "/v1/runs", Some(&key), Some(body), &[])
        .await
        .expect("late");
    assert_eq!(late.status, 401);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !s.handle.ledger().terminal.contains_key(&run) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let l = s.handle.ledger();
    assert_eq!(l.runs.len(), 1);
    assert_eq!(l.runs[0].credential, "p1-1");
    assert_eq!(l.revoked_uses, ["p1-1"]);
    assert_eq!(l.terminal.get(&run).map(String::as_str), Some("completed"));
    let produced = l.results.get(&run).and_then(|r| r.output.clone());
    assert!(produced.is_some_and(|o| !o.is_empty()), "{:?}", l.results);
}
