//! The AOC provider profile fake-payments publishes (`GET /v1/profile`), with its digest.
//!
//! Native statuses and what they mean:
//!
//! | status | interpretation | notes |
//! |---|---|---|
//! | `requires_capture` | accepted | authorised, not captured |
//! | `processing` | accepted | asynchronous; settles later |
//! | `succeeded` | success | captured |
//! | `failed` | final_failure | the effect may have happened (a failure does not prove no effect) |
//! | `canceled` | final_failure, proves no effect | authorisation voided before capture: no money moved |
//! | `declined` | not_accepted | the issuer refused the card |
//! | `disputed` | **unmapped on purpose** | a client must treat it as missing knowledge |

use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

pub const PROFILE_ID: &str = "fake-payments";
pub const PROFILE_VERSION: &str = "1";
pub const ENVIRONMENT: &str = "test";
/// Status source ids a binding can name.
pub const SOURCE_GET: &str = "payments.get";
pub const SOURCE_LIST: &str = "payments.list";
pub const SOURCE_RESPONSE: &str = "payments.response";
pub const KEY_RULE: &str = "Idempotency-Key header carries the caller's operation-occurrence id";

/// Every native status the provider can report.
pub const STATUSES: [&str; 7] = [
    "requires_capture",
    "processing",
    "succeeded",
    "failed",
    "canceled",
    "declined",
    "disputed",
];

/// The profile document (field names follow aocheck's provider-profile schema).
pub fn profile(key_id: &str, retention_secs: u64) -> Value {
    let m = |class: &str, no_effect: bool| json!({"class": class, "proves_no_effect": no_effect});
    json!({
        "id": PROFILE_ID,
        "version": PROFILE_VERSION,
        "provider": "fake-payments (synthetic card payments, aocheck)",
        "account_authority": "the provider's account registry: one Bearer credential per account; an account sees only its own objects",
        "environments": [ENVIRONMENT],
        "status_sources": [
            {"id": SOURCE_GET, "pin": key_id, "kind": "lookup"},
            {"id": SOURCE_LIST, "pin": key_id, "kind": "listing"},
            {"id": SOURCE_RESPONSE, "pin": key_id, "kind": "response"},
        ],
        "lookup_key": "payment id (GET /v1/payments/{id}) or Idempotency-Key (GET /v1/payments?idempotency_key=KEY)",
        "key_rule": KEY_RULE,
        "retention_ms": retention_secs.saturating_mul(1000),
        "freshness_ms": 60_000,
        "complete_listing_proves_absence": true,
        "mapping": {
            "requires_capture": m("accepted", false),
            "processing": m("accepted", false),
            "succeeded": m("success", false),
            "failed": m("final_failure", false),
            "canceled": m("final_failure", true),
            "declined": m("not_accepted", false),
        },
        "final_failure_proves_no_effect": false,
    })
}

/// `sha256:` + hex of SHA-256 over the profile's RFC 8785 bytes.
pub fn digest(profile: &Value) -> String {
    let bytes = crate::payments::contract::canonical(profile);
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_but_disputed_is_mapped_and_one_proves_no_effect() {
        let p = profile("ed25519:x", 60);
        let mapping = p["mapping"].as_object().expect("mapping");
        for s in STATUSES {
            assert_eq!(mapping.contains_key(s), s != "disputed", "{s}");
        }
        assert_eq!(p["mapping"]["canceled"]["proves_no_effect"], true);
        assert_eq!(p["retention_ms"], 60_000);
        assert_eq!(digest(&p), digest(&profile("ed25519:x", 60)));
        assert_ne!(digest(&p), digest(&profile("ed25519:y", 60)));
    }
}
