//! Responses: the error body, plain JSON, and signed replies with their authentication tag.

use super::*;

// ---------- responses ----------

pub(super) fn error_body(code: &str, message: impl Into<String>) -> Value {
    json!({"error": {"code": code, "message": message.into()}})
}

pub(super) fn plain_json(status: StatusCode, body: &Value) -> Response {
    let mut r = (status, body.to_string()).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// A signed API response.
pub(super) fn signed(
    shared: &Shared,
    status: u16,
    account: &str,
    request_digest: &str,
    body: &Value,
) -> Response {
    let bytes = contract::canonical(body);
    let tag = contract::sign_canonical(
        &shared.key,
        &shared.key_id,
        status,
        account,
        request_digest,
        &bytes,
    );
    respond_bytes(status, bytes, Some(tag.to_header()))
}

pub(super) fn respond_bytes(status: u16, body: Vec<u8>, tag: Option<String>) -> Response {
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if let Some(t) = tag
        && let Ok(v) = HeaderValue::from_str(&t)
    {
        r.headers_mut().insert(SIGNATURE_HEADER, v);
    }
    r
}

pub(super) async fn not_found(State(s): State<Arc<Shared>>, method: Method, uri: Uri) -> Response {
    let d = contract::request_digest(method.as_str(), &path_q(&uri), None);
    signed(
        &s,
        404,
        "-",
        &d,
        &error_body("not_found", format!("no route {} {}", method, uri.path())),
    )
}

pub(super) async fn method_not_allowed(
    State(s): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
) -> Response {
    let d = contract::request_digest(method.as_str(), &path_q(&uri), None);
    signed(
        &s,
        405,
        "-",
        &d,
        &error_body(
            "method_not_allowed",
            format!("{} is not allowed on {}", method, uri.path()),
        ),
    )
}

pub(super) fn path_q(uri: &Uri) -> String {
    uri.path_and_query()
        .map_or_else(|| uri.path().to_string(), |p| p.as_str().to_string())
}
