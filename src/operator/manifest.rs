//! The operator capability's published manifest (seed 000, "Contract"): what an AIP server
//! admits the capability under. Seed 000 item 1 checks it against the contract and that it
//! requires AIP approval.

use serde_json::{Value, json};

/// The capability id for an endpoint.
pub fn capability_id(endpoint_id: &str) -> String {
    format!("cap:hermes_agent:{endpoint_id}:operator")
}

/// The manifest of `cap:hermes_agent:<endpoint_id>:operator`.
pub fn manifest(endpoint_id: &str) -> Value {
    json!({
        "id": capability_id(endpoint_id),
        "kind": "agent",
        "stability": "stable",
        "provider": {"operation": "POST /v1/runs", "auth": "endpoint_bearer"},
        "risk": "high",
        "approval": {
            "required": true,
            "policy": "tenant",
            "validity_seconds": 900,
            "evidence": ["reason", "input_snapshot", "policy_decision"],
        },
        "idempotency": {
            "required": true,
            "scope": "capability",
            "ttl_seconds": 86400,
            "on_replay": "return_original_result",
        },
        "effects": ["read", "write", "send_message", "external_network", "code_execution"],
        "data": {"classification": "confidential", "pii": true, "redaction": true},
        "modes": ["sync", "async", "streaming", "cancel"],
        "async_expected": true,
        "latency_ms": 30000,
        "timeout_ms": 900000,
        "transaction": {"supported": false, "rollback": false},
        "queue_delay_ms": 10000,
        "availability": "99.9%",
        "input_schema": {
            "oneOf": [
                {"required": ["objective"]},
                {"required": ["resume"]},
            ],
            "additionalProperties": false,
            "properties": {
                "objective": {"type": "string", "minLength": 1},
                "context": {},
                "candidate_capabilities": {"type": "array", "maxItems": 256, "items": {"type": "string", "minLength": 1}},
                "constraints": {"type": "object"},
                "resume": {
                    "type": "object",
                    "additionalProperties": false,
                    "required": ["source_action_id", "choice"],
                    "properties": {
                        "source_action_id": {"type": "string", "pattern": "^act_"},
                        "choice": {"enum": ["once", "session", "always", "deny"]},
                        "resolve_all": {"type": "boolean"},
                    },
                },
            },
        },
        "output_schema": {
            "required": ["endpoint_id", "session_id", "source_action_id", "status"],
            "additionalProperties": false,
        },
    })
}
