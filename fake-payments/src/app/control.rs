//! This fake's side of the shared control plane (`fake_control::control::Plane`); its own
//! control routes (`expire`, payment status).

use super::*;

// ---------- control ----------

pub(super) fn control(s: &Arc<Shared>, headers: &HeaderMap) -> Result<Handle, Response> {
    fake_control::control::authorize(headers, &s.config.control_token)?;
    Ok(Handle(s.clone()))
}

pub(super) async fn control_json<T: serde::de::DeserializeOwned>(
    req: Request,
) -> Result<T, Response> {
    fake_control::control::body(req.into_body()).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ExpireBody {
    #[serde(default)]
    pub(super) payment_id: Option<String>,
}

pub(super) async fn control_expire(State(s): State<Arc<Shared>>, req: Request) -> Response {
    let h = match control(&s, req.headers()) {
        Ok(h) => h,
        Err(r) => return r,
    };
    let b: ExpireBody = match control_json(req).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    plain_json(
        StatusCode::OK,
        &json!({"expired": h.expire(b.payment_id.as_deref())}),
    )
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct StatusBody {
    pub(super) status: String,
}

pub(super) async fn control_status(
    State(s): State<Arc<Shared>>,
    Path(id): Path<String>,
    req: Request,
) -> Response {
    let h = match control(&s, req.headers()) {
        Ok(h) => h,
        Err(r) => return r,
    };
    let b: StatusBody = match control_json(req).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    match h.set_status(&id, &b.status) {
        Ok(()) => plain_json(StatusCode::OK, &json!({"payment": id, "status": b.status})),
        Err(e) => plain_json(StatusCode::BAD_REQUEST, &error_body("invalid_request", e)),
    }
}

/// The shared control routes (`fake_control::control::routes`) read and drive this fake.
impl fake_control::control::Plane for Handle {
    type Plan = Plan;
    fn control_token(&self) -> &str {
        &self.0.config.control_token
    }
    fn holds(&self) -> &fake_control::Holds {
        &self.0.holds
    }
    fn rules(&self) -> Value {
        serde_json::to_value(Handle::rules(self)).unwrap_or(Value::Null)
    }
    fn set_plan(&self, plan: Plan) -> Result<(), Vec<String>> {
        Handle::set_plan(self, plan)
    }
    fn ledger(&self) -> Value {
        serde_json::to_value(Handle::ledger(self)).unwrap_or(Value::Null)
    }
    fn reset(&self) {
        Handle::reset(self)
    }
}

impl axum::extract::FromRef<Arc<Shared>> for Handle {
    fn from_ref(s: &Arc<Shared>) -> Self {
        Handle(s.clone())
    }
}

// ---------- serving ----------
