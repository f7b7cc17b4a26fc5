//! Responses as the real server writes them: Python-style JSON, error envelopes, plain text.

use super::*;

// ---------- responses ----------

pub(super) fn security_headers(r: &mut Response) {
    let h = r.headers_mut();
    for (k, v) in [
        (
            "content-security-policy",
            "default-src 'none'; frame-ancestors 'none'",
        ),
        (
            "permissions-policy",
            "camera=(), microphone=(), geolocation=()",
        ),
        (
            "strict-transport-security",
            "max-age=31536000; includeSubDomains",
        ),
        ("x-content-type-options", "nosniff"),
        ("x-frame-options", "DENY"),
        ("x-xss-protection", "0"),
        ("referrer-policy", "no-referrer"),
    ] {
        h.insert(HeaderName::from_static(k), HeaderValue::from_static(v));
    }
}

/// A handler's JSON response (with the security headers real handlers add).
pub(super) fn handler_json(status: u16, body: &Py) -> Response {
    let mut r = Response::new(Body::from(body.dumps()));
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json; charset=utf-8"),
    );
    security_headers(&mut r);
    r
}

pub(super) fn error_py(message: &str, code: Option<&str>) -> Py {
    Py::obj(vec![(
        "error",
        Py::obj(vec![
            ("message", Py::str(message)),
            ("type", Py::str("invalid_request_error")),
            ("param", Py::Null),
            ("code", code.map_or(Py::Null, Py::str)),
        ]),
    )])
}

pub(super) fn error(status: u16, message: &str, code: Option<&str>) -> Response {
    handler_json(status, &error_py(message, code))
}

pub(super) fn plain(status: StatusCode, text: &str) -> Response {
    let mut r = (status, text.to_string()).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

pub(super) fn unauthorized(mode: Mode) -> Response {
    let code = match mode {
        Mode::Default => "invalid_api_key",
        Mode::Newer => "gateway_auth_failed",
    };
    handler_json(
        401,
        &Py::obj(vec![(
            "error",
            Py::obj(vec![
                ("message", Py::str("Invalid API key")),
                ("type", Py::str("invalid_request_error")),
                ("code", Py::str(code)),
            ]),
        )]),
    )
}

/// The label of the credential a request carries (`api_key` for the configured key, an issued
/// key's label otherwise) and whether it was revoked; `None` when it carries no valid one.
pub(super) fn credential(s: &Shared, headers: &HeaderMap) -> Option<(String, bool)> {
    let t = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))?
        .trim();
    if t == s.config.api_key {
        return Some(("api_key".into(), false));
    }
    lock(&s.issued).get(t).cloned()
}

/// Whether a request carries a live credential; a revoked one is recorded in the ledger.
pub(super) fn authorized(s: &Shared, headers: &HeaderMap) -> bool {
    match credential(s, headers) {
        Some((_, false)) => true,
        Some((label, true)) => {
            lock(&s.data).ledger.revoked_uses.push(label);
            false
        }
        None => false,
    }
}
