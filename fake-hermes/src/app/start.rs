//! `POST /v1/runs`: admission, input validation, the start claim and the run's creation.

use super::*;

// ---------- POST /v1/runs ----------

/// The prompt of a start's `input`, with the observed messages: an empty or missing input is
/// `Missing 'input' field`; anything that holds no user message (a number, a list without one)
/// is `No user message found in input`.
pub(super) fn prompt_of(input: &Value) -> Result<String, &'static str> {
    match input {
        Value::Null => Err("Missing 'input' field"),
        Value::String(s) if s.is_empty() => Err("Missing 'input' field"),
        Value::Array(a) if a.is_empty() => Err("Missing 'input' field"),
        Value::String(s) => Ok(s.clone()),
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
        _ => Err("No user message found in input"),
    }
}

pub(super) async fn start(State(s): State<Arc<Shared>>, req: Request) -> Response {
    if !authorized(&s, req.headers()) {
        return unauthorized(s.config.mode);
    }
    let (headers, bytes, drop) = match read_body(&s, req).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    committed_whatever_the_client(&s.clone(), "start", move |client| {
        start_after_read(s, headers, bytes, drop, client)
    })
    .await
}

pub(super) async fn start_after_read(
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
        // As observed: this envelope has no `param` and no `code`.
        return handler_json(
            400,
            &Py::obj(vec![(
                "error",
                Py::obj(vec![
                    ("message", Py::str("Session key too long")),
                    ("type", Py::str("invalid_request_error")),
                ]),
            )]),
        );
    }
    let body: Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(_) => return error(400, "Invalid JSON", None),
    };
    if body.is_array() {
        // The observed server crashes on an array body: a plain-text 500 that closes the
        // connection.
        let mut r = plain(
            StatusCode::INTERNAL_SERVER_ERROR,
            "500 Internal Server Error\n\nServer got itself in trouble",
        );
        r.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        return r;
    }
    let Some(input) = body.get("input") else {
        return error(400, "Missing 'input' field", None);
    };
    let prompt = match prompt_of(input) {
        Ok(p) => p,
        Err(m) => return error(400, m, None),
    };
    match body.get("conversation_history") {
        None | Some(Value::Null) => {}
        Some(Value::Array(a)) => {
            if let Some(i) = a
                .iter()
                .position(|m| m.get("role").is_none() || m.get("content").is_none())
            {
                return error(
                    400,
                    &format!("conversation_history[{i}] must have 'role' and 'content' fields"),
                    None,
                );
            }
        }
        Some(_) => {
            return error(
                400,
                "'conversation_history' must be an array of message objects",
                None,
            );
        }
    }
    // As observed: a run started without `session_id` is its own session (`session_id` =
    // `run_id`), and run ids are `run_` + 32 random hex digits.
    let run_id = format!("run_{}", uuid::Uuid::new_v4().simple());
    let session_id = body
        .get("session_id")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| run_id.clone());
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
    let held = lock(&s.data).ledger.runs.len();
    if held >= s.config.max_runs {
        return error(
            503,
            &format!("fake-hermes holds {held} runs (max_runs); POST /_control/reset to continue"),
            Some("ledger_full"),
        );
    }
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
    let Some((plan, script_name)) = choose_script(&s, &session_id, &prompt) else {
        return error(500, "the built-in script is invalid", None);
    };
    let t = s.clock.now_secs();
    let cell = RunCell::new(
        RunInfo {
            run_id: run_id.clone(),
            session_id: session_id.clone(),
            status: "running".into(),
            created_at: t,
            updated_at: t,
            idempotency_key: idem_key.clone(),
            ..RunInfo::default()
        },
        s.clock.clone(),
    );
    let reply = match fault {
        Some(Fault::StartWithoutRunId) => Reply::WithoutRunId,
        ref f => post_reply(f),
    };
    if idem_key.is_some() {
        // The durable record is written before the run exists; a failed write starts nothing.
        *lock(&cell.durable_digest) = Some(body_digest.clone());
        if let Err(e) = durable::write(&s, &cell, &body_digest) {
            eprintln!("fake-hermes: could not persist a run: {e}");
            return error(500, &format!("could not persist the run: {e}"), None);
        }
    }
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
            credential: credential(&s, &headers).map_or_else(String::new, |(l, _)| l),
        });
    }
    let busy = s.clock.busy();
    let task = tokio::spawn(run_engine(s.clone(), cell.clone(), plan, prompt, busy));
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

pub(super) fn script_name(v: &Value, fallback: &str) -> String {
    v.get("name")
        .and_then(Value::as_str)
        .unwrap_or(fallback)
        .to_string()
}

pub(super) static BUILTIN: std::sync::OnceLock<Option<Arc<Vec<Step>>>> = std::sync::OnceLock::new();

pub(super) fn choose_script(
    s: &Shared,
    session: &str,
    prompt: &str,
) -> Option<(Arc<Vec<Step>>, String)> {
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
