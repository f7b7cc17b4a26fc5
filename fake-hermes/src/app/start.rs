//! `POST /v1/runs`: admission, input validation, the start claim and the run's creation.

use super::*;

// ---------- POST /v1/runs ----------

pub(super) fn prompt_of(input: &Value) -> Result<String, &'static str> {
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

pub(super) async fn start(State(s): State<Arc<Shared>>, req: Request) -> Response {
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
    let run_id = format!("run_{}", fresh_hex32());
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

/// A random-looking, unique 32-hex id: a random per-process key mixed with a counter (cheaper than
/// asking the OS for randomness on every run).
pub(super) fn fresh_hex32() -> String {
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
