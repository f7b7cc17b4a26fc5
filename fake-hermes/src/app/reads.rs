//! The reads: `GET /v1/runs/{id}` (status) and `GET /v1/runs/{id}/events` (SSE, with the
//! late-subscriber backlog).

use super::*;

// ---------- GET /v1/runs/{id} ----------

pub(super) fn status_doc(s: &Shared, i: &RunInfo) -> Py {
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

pub(super) fn run_of(s: &Shared, id: &str) -> Option<Arc<RunCell>> {
    lock(&s.data).runs.get(id).cloned()
}

pub(super) fn not_found(id: &str) -> Response {
    error(404, &format!("Run not found: {id}"), Some("run_not_found"))
}

pub(super) async fn status(
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
        None => not_found(&id),
    }
}

// ---------- GET /v1/runs/{id}/events ----------

pub(super) struct Subscription {
    pub(super) cell: Arc<RunCell>,
    pub(super) rx: Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<Frame>>>,
    pub(super) keepalive: Duration,
    pub(super) frames: u32,
    pub(super) garble: Option<u32>,
    pub(super) drop_after: Option<u32>,
    pub(super) done: bool,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        // The queue is dropped with its consumer: a new subscription then gets 404.
        self.cell.registered.store(false, Ordering::SeqCst);
    }
}

pub(super) async fn events(
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
    let deadline = s.clock.now_ms() + s.config.stream_wait_ms;
    let cell = loop {
        match run_of(&s, &id) {
            Some(c) if c.registered.load(Ordering::SeqCst) && fault != Some(Fault::Events404) => {
                break c;
            }
            _ if s.clock.now_ms() >= deadline => return not_found(&id),
            _ => s.clock.sleep(50).await,
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
