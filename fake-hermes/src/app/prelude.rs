//! The request prelude every route passes: the fault plan, holds (with the client watch) and
//! delays.

use super::*;

// ---------- the request prelude: faults, holds, delays ----------

pub(super) enum Pre {
    Go(Option<Fault>),
    Respond(Response),
}

/// `client` is the flag of a watch the caller keeps in the handler that answers the client
/// (start runs detached from its handler); without one the prelude watches its own future.
pub(super) async fn prelude(
    s: &Arc<Shared>,
    route: Route,
    session: Option<&str>,
    client: Option<fake_control::holds::ClientFlag>,
) -> Pre {
    let fault = faults::select(&mut lock(&s.data).rules, route, session);
    match &fault {
        Some(Fault::Forget) => forget(s),
        Some(Fault::Delay { ms }) => s.clock.sleep(*ms).await,
        Some(Fault::Hold { name }) => {
            // Without the caller's flag, this future answers the client: watch it here.
            let (flag, mut watch) = match client {
                Some(flag) => (flag, None),
                None => {
                    let (flag, watch) = s.holds.watch();
                    (flag, Some(watch))
                }
            };
            let shown = fake_control::holds::Parked {
                request_seq: None,
                op: route.label().to_string(),
                account: None,
                idempotency_key: None,
            };
            let released = s.holds.park(name, shown, flag).released().await;
            if let Some(w) = watch.as_mut() {
                w.answered();
            }
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
pub(super) async fn after_commit(
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
        _ => (resp, Reply::Written),
    }
}

pub(super) fn post_reply(fault: &Option<Fault>) -> Reply {
    match fault {
        Some(Fault::CommitThen { .. }) => Reply::ErrorAfterCommit,
        Some(Fault::CommitThenDrop) => Reply::Dropped,
        _ => Reply::Written,
    }
}

pub(super) async fn read_body(
    s: &Shared,
    req: Request,
) -> Result<(HeaderMap, Bytes, Option<DropConn>), Response> {
    let (parts, body) = req.into_parts();
    let limit = s.config.max_body_bytes;
    let too_large = || {
        let mut r = Response::new(Body::from(
            error_py("Request body too large.", Some("body_too_large")).dumps(),
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

/// Finishes a mutation in a task of its own once its body is read: a held request still
/// commits when released, even if the client that sent it has died meanwhile (the harness
/// kills senders on purpose). `what` names it in the 500 a failed task is answered with.
pub(super) async fn committed_whatever_the_client<F>(
    s: &Arc<Shared>,
    what: &str,
    rest: impl FnOnce(fake_control::holds::ClientFlag) -> F,
) -> Response
where
    F: std::future::Future<Output = Response> + Send + 'static,
{
    let (client, mut watch) = s.holds.watch();
    match tokio::spawn(rest(client)).await {
        Ok(r) => {
            watch.answered();
            r
        }
        Err(e) => error(500, &format!("{what} task failed: {e}"), None),
    }
}
