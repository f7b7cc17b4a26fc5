//! The run actions: `POST /v1/runs/{id}/approval`, `/stop` and (newer mode) `/steer`.

use super::*;

// ---------- POST /v1/runs/{id}/approval ----------

pub(super) fn truthy(v: Option<&Value>) -> bool {
    match v {
        Some(Value::Bool(b)) => *b,
        Some(Value::Number(n)) => n.as_i64() == Some(1),
        Some(Value::String(s)) => {
            matches!(s.to_ascii_lowercase().as_str(), "true" | "1" | "yes" | "on")
        }
        _ => false,
    }
}

pub(super) async fn approval(
    State(s): State<Arc<Shared>>,
    Path(id): Path<String>,
    req: Request,
) -> Response {
    if !authorized(&s, req.headers()) {
        return unauthorized(s.config.mode);
    }
    let (_, bytes, drop) = match read_body(&s, req).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    // A held decision is still applied when released, as a held start still starts its run.
    committed_whatever_the_client(&s.clone(), "approval", move |client| {
        approval_after_read(s, id, bytes, drop, client)
    })
    .await
}

async fn approval_after_read(
    s: Arc<Shared>,
    id: String,
    bytes: Bytes,
    drop: Option<DropConn>,
    client: fake_control::holds::ClientFlag,
) -> Response {
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
                "Invalid approval choice; expected one of: once, session, always, deny",
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
        return not_found(&id);
    };
    let session = lock(&cell.info).session_id.clone();
    let fault = match prelude(&s, Route::Approval, Some(&session), Some(client)).await {
        Pre::Go(f) => f,
        Pre::Respond(r) => return r,
    };
    if cell.is_terminal() {
        return error(
            409,
            &format!("Run has no active approval session: {id}"),
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
            &format!("Run has no pending approval: {id}"),
            Some("approval_not_pending"),
        );
    };
    let resolved = 1u32;
    // As observed: `approval.responded` is emitted inside the handler, before the reply, and a
    // status read right after the reply says `running` with that last event.
    let mut f = vec![
        ("choice", Py::str(&choice)),
        ("resolved", Py::Int(resolved as i64)),
    ];
    if s.config.mode == Mode::Newer {
        f.push(("request_id", Py::str(&p.request_id)));
    }
    Emitter { s: &s, cell: &cell }
        .emit("approval.responded", f)
        .await;
    {
        let mut i = lock(&cell.info);
        if i.status == "waiting_for_approval" {
            i.status = "running".into();
        }
    }
    let _ = p.tx.send(Decision {
        choice: choice.clone(),
        resolved,
        _wake: s.clock.busy(),
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

pub(super) async fn stop(
    State(s): State<Arc<Shared>>,
    Path(id): Path<String>,
    req: Request,
) -> Response {
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
            Mode::Default => not_found(&id),
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
            Mode::Default => not_found(&id),
        };
    }
    let effective = {
        let mut i = lock(&cell.info);
        let first = !i.stop_requested;
        if first {
            // Only the stop that sets the intent wakes the engine (a repeated one has nothing
            // to wake: a stuck executor waits on nothing and would hold the unit for ever). The
            // unit is handed before the engine can see the intent, so whatever wait it takes
            // next gives it back.
            cell.hand_wake(s.clock.busy());
            i.stop_requested = true;
            i.stop_fault = fault
                .clone()
                .filter(|f| matches!(f, Fault::StopStuck | Fault::CompleteRacesStop));
        }
        if i.status != "stopping" && !TERMINAL.contains(&i.status.as_str()) {
            i.status = "stopping".into();
            i.last_event = Some("run.stopping".into());
            i.updated_at = s.clock.now_secs();
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

pub(super) async fn steer(
    State(s): State<Arc<Shared>>,
    Path(id): Path<String>,
    req: Request,
) -> Response {
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
        return not_found(&id);
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
