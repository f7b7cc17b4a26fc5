//! The `/_control` dialect both fakes answer: a bearer control token (never the API's own
//! credentials), JSON bodies, and errors as `{"error": {"code", "message"}}` with a status.

use crate::holds::{Holds, ReleaseAction};
use axum::Router;
use axum::body::Body;
use axum::extract::{FromRef, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::{Value, json};

pub use provider_model::control::ControlAttempt;

/// Every request to a `/_control` route, in order (the fakes' handles read it).
#[derive(Clone, Debug, Default)]
pub struct ControlLog(std::sync::Arc<std::sync::Mutex<Vec<ControlAttempt>>>);

impl ControlLog {
    /// What reached the control routes so far.
    pub fn attempts(&self) -> Vec<ControlAttempt> {
        self.0.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// Wraps a fake's router so that every request to a `/_control` path is recorded before it
    /// is answered (as it would be without the log).
    pub fn record<S: Clone + Send + Sync + 'static>(
        &self,
        router: Router<S>,
        token: String,
    ) -> Router<S> {
        let log = self.clone();
        router.layer(axum::middleware::from_fn(
            move |req: Request, next: axum::middleware::Next| {
                let (log, token) = (log.clone(), token.clone());
                async move {
                    if req.uri().path().starts_with("/_control") {
                        let path: String = req
                            .uri()
                            .path()
                            .chars()
                            .filter(|c| c.is_ascii_graphic())
                            .take(200)
                            .collect();
                        let attempt = ControlAttempt {
                            method: req.method().as_str().chars().take(16).collect(),
                            path,
                            authorized: authorize(req.headers(), &token).is_ok(),
                        };
                        if let Ok(mut l) = log.0.lock() {
                            l.push(attempt);
                        }
                    }
                    next.run(req).await
                }
            },
        ))
    }
}

/// The largest control body either fake reads.
pub const MAX_BODY: usize = 1 << 20;

/// A JSON response.
pub fn json_response(status: StatusCode, body: &Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// A control-plane error.
pub fn error(status: StatusCode, code: &str, message: impl Into<String>) -> Response {
    json_response(
        status,
        &json!({"error": {"code": code, "message": message.into()}}),
    )
}

/// A fault plan the fake refuses: every defect at once.
pub fn invalid_plan(defects: &[String]) -> Response {
    json_response(
        StatusCode::BAD_REQUEST,
        &json!({"error": {"code": "invalid_plan", "message": defects.join("; "), "defects": defects}}),
    )
}

/// `Authorization: Bearer <control token>`, or 401.
pub fn authorize(headers: &HeaderMap, token: &str) -> Result<(), Response> {
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    match given {
        Some(t) if !token.is_empty() && t == token => Ok(()),
        _ => Err(error(
            StatusCode::UNAUTHORIZED,
            "unauthenticated",
            "the control API needs `Authorization: Bearer <control token>`",
        )),
    }
}

/// A control request's JSON body (at most [`MAX_BODY`] bytes).
pub async fn body<T: serde::de::DeserializeOwned>(body: Body) -> Result<T, Response> {
    let bytes = axum::body::to_bytes(body, MAX_BODY).await.map_err(|_| {
        error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            format!("a control body is at most {MAX_BODY} bytes"),
        )
    })?;
    serde_json::from_slice(&bytes).map_err(|e| {
        error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            format!("line {} column {}: {e}", e.line(), e.column()),
        )
    })
}

/// `{"hold", "action": "proceed" | "reject", "status"?}`. (Not `flatten` over
/// [`ReleaseAction`]: serde cannot refuse unknown fields through a flattened enum.)
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReleaseBody {
    hold: String,
    action: String,
    #[serde(default)]
    status: Option<u16>,
}

impl ReleaseBody {
    fn action(&self) -> Result<ReleaseAction, String> {
        match (self.action.as_str(), self.status) {
            ("proceed", None) => Ok(ReleaseAction::Proceed),
            ("proceed_forged", None) => Ok(ReleaseAction::ProceedForged),
            ("proceed_mismatched", None) => Ok(ReleaseAction::ProceedMismatched),
            ("proceed" | "proceed_forged" | "proceed_mismatched", Some(_)) => {
                Err("`status` goes only with `action: reject`".into())
            }
            ("reject", Some(status)) if (400..=599).contains(&status) => {
                Ok(ReleaseAction::Reject { status })
            }
            ("reject", Some(status)) => Err(format!(
                "`status`: reject needs a 4xx or 5xx status, got {status}"
            )),
            ("reject", None) => Err("`status` is required with `action: reject`".into()),
            (other, _) => Err(format!(
                "`action`: {other:?} is not one of \"proceed\", \"proceed_forged\", \"proceed_mismatched\", \"reject\""
            )),
        }
    }
}

/// `POST /_control/release` `{"hold", "action": "proceed" | "reject", "status"?}` →
/// `{"released": n}`.
pub async fn release(holds: &Holds, req: Body) -> Response {
    let b = match body::<ReleaseBody>(req).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    match b.action() {
        Ok(action) => json_response(
            StatusCode::OK,
            &json!({"released": holds.release(&b.hold, action)}),
        ),
        Err(m) => error(StatusCode::BAD_REQUEST, "invalid_request", m),
    }
}

/// `GET /_control/holds` → `{name: [{request_seq, op, account, idempotency_key}]}`.
pub fn holds(holds: &Holds) -> Response {
    json_response(StatusCode::OK, &holds.list())
}

/// What a fake gives the shared control routes.
pub trait Plane: Clone + Send + Sync + 'static {
    /// The fake's fault plan (`{"rules": [...]}`).
    type Plan: serde::de::DeserializeOwned + Send;
    /// The control token (never the API's own credentials).
    fn control_token(&self) -> &str;
    fn holds(&self) -> &Holds;
    /// The rules with their counters.
    fn rules(&self) -> Value;
    /// Replaces the plan, or says every defect.
    fn set_plan(&self, plan: Self::Plan) -> Result<(), Vec<String>>;
    /// The ground truth.
    fn ledger(&self) -> Value;
    /// Clears everything; parked requests are rejected with 503.
    fn reset(&self);
}

/// The control routes both fakes answer, the same way: `GET|POST /_control/faults`,
/// `GET /_control/ledger`, `POST /_control/reset`, `POST /_control/release`,
/// `GET /_control/holds`. Another method is a 405 in the control dialect.
pub fn routes<S, P>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    P: Plane + FromRef<S>,
{
    let wrong = || async {
        error(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            "this control route does not take that method",
        )
    };
    Router::new()
        .route(
            "/_control/faults",
            get(faults_get::<P>).post(faults_set::<P>).fallback(wrong),
        )
        .route("/_control/ledger", get(ledger::<P>).fallback(wrong))
        .route("/_control/reset", post(reset::<P>).fallback(wrong))
        .route(
            "/_control/release",
            post(release_route::<P>).fallback(wrong),
        )
        .route("/_control/holds", get(holds_route::<P>).fallback(wrong))
}

async fn faults_get<P: Plane>(State(p): State<P>, headers: HeaderMap) -> Response {
    if let Err(r) = authorize(&headers, p.control_token()) {
        return r;
    }
    json_response(StatusCode::OK, &json!({"rules": p.rules()}))
}

async fn faults_set<P: Plane>(State(p): State<P>, req: Request) -> Response {
    if let Err(r) = authorize(req.headers(), p.control_token()) {
        return r;
    }
    let plan: P::Plan = match body(req.into_body()).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    match p.set_plan(plan) {
        Ok(()) => json_response(StatusCode::OK, &json!({"rules": p.rules()})),
        Err(defects) => invalid_plan(&defects),
    }
}

async fn ledger<P: Plane>(State(p): State<P>, headers: HeaderMap) -> Response {
    match authorize(&headers, p.control_token()) {
        Ok(()) => json_response(StatusCode::OK, &p.ledger()),
        Err(r) => r,
    }
}

async fn reset<P: Plane>(State(p): State<P>, headers: HeaderMap) -> Response {
    match authorize(&headers, p.control_token()) {
        Ok(()) => {
            p.reset();
            json_response(StatusCode::OK, &json!({"reset": true}))
        }
        Err(r) => r,
    }
}

async fn release_route<P: Plane>(State(p): State<P>, req: Request) -> Response {
    match authorize(req.headers(), p.control_token()) {
        Ok(()) => release(p.holds(), req.into_body()).await,
        Err(r) => r,
    }
}

async fn holds_route<P: Plane>(State(p): State<P>, headers: HeaderMap) -> Response {
    match authorize(&headers, p.control_token()) {
        Ok(()) => holds(p.holds()),
        Err(r) => r,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_control_token_opens_the_control_api() {
        let mut h = HeaderMap::new();
        assert!(authorize(&h, "ctl").is_err());
        h.insert(
            header::AUTHORIZATION,
            "Bearer sk_test_a".parse().expect("header"),
        );
        assert!(authorize(&h, "ctl").is_err());
        h.insert(header::AUTHORIZATION, "Bearer ctl".parse().expect("header"));
        assert!(authorize(&h, "ctl").is_ok());
        // An empty configured token opens nothing.
        h.insert(header::AUTHORIZATION, "Bearer ".parse().expect("header"));
        assert!(authorize(&h, "").is_err());
    }

    /// Every release action by its wire word, and each misuse refused with the field to fix.
    #[test]
    fn release_bodies_name_their_action() {
        let parse = |action: &str, status: Option<u16>| {
            ReleaseBody {
                hold: "h".into(),
                action: action.into(),
                status,
            }
            .action()
        };
        assert_eq!(parse("proceed", None), Ok(ReleaseAction::Proceed));
        assert_eq!(
            parse("proceed_forged", None),
            Ok(ReleaseAction::ProceedForged)
        );
        assert_eq!(
            parse("proceed_mismatched", None),
            Ok(ReleaseAction::ProceedMismatched)
        );
        assert_eq!(
            parse("reject", Some(503)),
            Ok(ReleaseAction::Reject { status: 503 })
        );
        for (action, status, needle) in [
            ("proceed_mismatched", Some(500), "`status` goes only"),
            ("reject", Some(200), "4xx or 5xx"),
            ("reject", None, "required"),
            ("proceed_later", None, "proceed_mismatched"),
        ] {
            let e = parse(action, status).expect_err(action);
            assert!(e.contains(needle), "{action}: {e}");
        }
    }

    #[tokio::test]
    async fn bad_bodies_say_where() {
        let r = body::<Value>(Body::from("{\"a\":")).await.expect_err("bad");
        assert_eq!(r.status(), StatusCode::BAD_REQUEST);
        let r = body::<Value>(Body::from(vec![b' '; MAX_BODY + 1]))
            .await
            .expect_err("big");
        assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
    }

    #[derive(Clone, Default)]
    struct Toy(std::sync::Arc<(Holds, std::sync::Mutex<Vec<u32>>)>);

    #[derive(Deserialize)]
    struct ToyPlan {
        rules: Vec<u32>,
    }

    impl Plane for Toy {
        type Plan = ToyPlan;
        fn control_token(&self) -> &str {
            "ctl_secret"
        }
        fn holds(&self) -> &Holds {
            &self.0.0
        }
        fn rules(&self) -> Value {
            json!(*self.0.1.lock().expect("lock"))
        }
        fn set_plan(&self, plan: ToyPlan) -> Result<(), Vec<String>> {
            if plan.rules.contains(&0) {
                return Err(vec!["rules[0]: zero".into()]);
            }
            *self.0.1.lock().expect("lock") = plan.rules;
            Ok(())
        }
        fn ledger(&self) -> Value {
            json!({"effects": []})
        }
        fn reset(&self) {
            self.0.1.lock().expect("lock").clear();
            self.0.0.reject_all();
        }
    }

    async fn call(app: &Router, method: &str, path: &str, token: &str, body: &str) -> (u16, Value) {
        use tower::ServiceExt;
        let req = axum::http::Request::builder()
            .method(method)
            .uri(path)
            .header(header::AUTHORIZATION, format!("Bearer {token}"))
            .body(Body::from(body.to_string()))
            .expect("request");
        let r = app.clone().oneshot(req).await.expect("answer");
        let status = r.status().as_u16();
        let bytes = axum::body::to_bytes(r.into_body(), MAX_BODY)
            .await
            .expect("body");
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    /// Every request to a control path is logged, refused or not, with whether it carried the
    /// token; the answer is what it would be without the log; other paths are not logged.
    #[tokio::test]
    async fn the_control_log_records_every_control_request_and_nothing_else() {
        let toy = Toy::default();
        let log = ControlLog::default();
        let app: Router = log
            .record(
                routes::<Toy, Toy>().route("/v1/x", get(|| async { "ok" })),
                "ctl_secret".into(),
            )
            .with_state(toy);
        assert_eq!(
            call(&app, "GET", "/_control/ledger", "sk_test_a", "")
                .await
                .0,
            401
        );
        assert_eq!(
            call(&app, "GET", "/_control/ledger", "ctl_secret", "")
                .await
                .0,
            200
        );
        assert_eq!(
            call(&app, "POST", "/_control/nope%07", "x", "").await.0,
            404
        );
        call(&app, "GET", "/v1/x", "sk_test_a", "").await;
        let got: Vec<(String, String, bool)> = log
            .attempts()
            .into_iter()
            .map(|a| (a.method, a.path, a.authorized))
            .collect();
        let want = [
            ("GET", "/_control/ledger", false),
            ("GET", "/_control/ledger", true),
            ("POST", "/_control/nope%07", false),
        ]
        .map(|(m, p, a)| (m.to_string(), p.to_string(), a));
        assert_eq!(got, want);
    }

    #[tokio::test]
    async fn the_shared_routes_answer_in_one_dialect_and_only_to_the_control_token() {
        let toy = Toy::default();
        let app: Router = routes::<Toy, Toy>().with_state(toy.clone());
        for (m, p) in [
            ("GET", "/_control/faults"),
            ("POST", "/_control/faults"),
            ("GET", "/_control/ledger"),
            ("POST", "/_control/reset"),
            ("POST", "/_control/release"),
            ("GET", "/_control/holds"),
        ] {
            let (st, b) = call(&app, m, p, "sk_test_a", "{}").await;
            assert_eq!(
                (st, b["error"]["code"].as_str()),
                (401, Some("unauthenticated")),
                "{m} {p}"
            );
        }
        let (st, b) = call(&app, "DELETE", "/_control/holds", "ctl_secret", "").await;
        assert_eq!(
            (st, b["error"]["code"].as_str()),
            (405, Some("method_not_allowed"))
        );
        let (st, b) = call(
            &app,
            "POST",
            "/_control/faults",
            "ctl_secret",
            r#"{"rules":[0]}"#,
        )
        .await;
        assert_eq!(
            (st, b["error"]["code"].as_str()),
            (400, Some("invalid_plan"))
        );
        assert_eq!(b["error"]["defects"][0], "rules[0]: zero");
        let (st, b) = call(
            &app,
            "POST",
            "/_control/faults",
            "ctl_secret",
            r#"{"rules":[2]}"#,
        )
        .await;
        assert_eq!((st, b), (200, json!({"rules": [2]})));
        let (st, b) = call(&app, "POST", "/_control/faults", "ctl_secret", "{").await;
        assert_eq!(
            (st, b["error"]["code"].as_str()),
            (400, Some("invalid_request"))
        );
        let release = toy
            .holds()
            .park("h", crate::holds::Parked::default(), Default::default());
        let (_, b) = call(&app, "GET", "/_control/holds", "ctl_secret", "").await;
        assert_eq!(b["h"].as_array().map(Vec::len), Some(1));
        let (st, b) = call(
            &app,
            "POST",
            "/_control/release",
            "ctl_secret",
            r#"{"hold":"h","action":"proceed"}"#,
        )
        .await;
        assert_eq!((st, b), (200, json!({"released": 1})));
        assert_eq!(release.released().await, ReleaseAction::Proceed);
        for bad in [
            r#"{"hold":"h","action":"proceed","colour":1}"#,
            r#"{"hold":"h","action":"reject"}"#,
            r#"{"hold":"h","action":"reject","status":200}"#,
            r#"{"hold":"h","action":"maybe"}"#,
            r#"{"hold":"h","action":"proceed","status":503}"#,
        ] {
            let (st, b) = call(&app, "POST", "/_control/release", "ctl_secret", bad).await;
            assert_eq!(
                (st, b["error"]["code"].as_str()),
                (400, Some("invalid_request")),
                "{bad}"
            );
        }
        let (st, b) = call(&app, "POST", "/_control/reset", "ctl_secret", "").await;
        assert_eq!((st, b), (200, json!({"reset": true})));
        let (_, b) = call(&app, "GET", "/_control/faults", "ctl_secret", "").await;
        assert_eq!(b, json!({"rules": []}));
    }
}
