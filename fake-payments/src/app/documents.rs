//! The public documents: the provider key and the profile.

use super::*;

// ---------- public documents ----------

pub(super) async fn provider_key(State(s): State<Arc<Shared>>) -> Response {
    plain_json(
        StatusCode::OK,
        &json!({
            "alg": "Ed25519",
            "key_id": s.key_id,
            "public_key": base64::engine::general_purpose::STANDARD.encode(s.key.verifying_key().as_bytes()),
        }),
    )
}

pub(super) async fn published_profile(State(s): State<Arc<Shared>>) -> Response {
    let p = profile::profile(&s.key_id, s.config.retention_secs);
    let d = profile::digest(&p);
    plain_json(StatusCode::OK, &json!({"profile": p, "digest": d}))
}
