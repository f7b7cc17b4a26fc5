//! This fake's side of the shared control plane (`fake_control::control::Plane`); its own
//! control routes (`scripts`, `forget`).

use super::*;

// ---------- control ----------

pub(super) fn control_ok(s: &Arc<Shared>, headers: &HeaderMap) -> Result<Handle, Response> {
    fake_control::control::authorize(headers, &s.config.control_token)?;
    Ok(Handle(s.clone()))
}

pub(super) async fn control_body<T: serde::de::DeserializeOwned>(
    req: Request,
) -> Result<T, Response> {
    fake_control::control::body(req.into_body()).await
}

/// A control answer, in the control plane's one dialect.
pub(super) fn json_response(status: u16, v: &Value) -> Response {
    fake_control::control::json_response(
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        v,
    )
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ScriptsBody {
    #[serde(default)]
    pub(super) rules: Vec<ScriptRule>,
    #[serde(default)]
    pub(super) default: Option<Value>,
}

pub(super) async fn control_scripts(State(s): State<Arc<Shared>>, req: Request) -> Response {
    let h = match control_ok(&s, req.headers()) {
        Ok(h) => h,
        Err(r) => return r,
    };
    let b: ScriptsBody = match control_body(req).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    match h.set_scripts(b.rules, b.default) {
        Ok(()) => json_response(200, &json!({"ok": true})),
        Err(d) => json_response(
            400,
            &json!({"error": {"code": "invalid_script", "message": d.join("; "), "defects": d}}),
        ),
    }
}

pub(super) async fn control_forget(State(s): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    match control_ok(&s, &headers) {
        Ok(h) => {
            h.forget();
            json_response(200, &json!({"forgotten": true}))
        }
        Err(r) => r,
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
        let l = Handle::ledger(self);
        json!({"runs": l.runs, "approvals": l.approvals, "stops": l.stops, "terminal": l.terminal, "results": l.results, "per_session": l.per_session()})
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
