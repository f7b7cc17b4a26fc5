//! fake-mcp's ground truth: every tool call it received (the session, the tool, a digest of the
//! arguments, the idempotency key it carried, the effect it made and what became of the reply),
//! and every effect made, in order.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What became of a call's reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reply {
    /// The result was sent toward the caller (recorded as the reply is made).
    Answered,
    /// The connection closed with no result (a fault): the caller cannot know what happened.
    Dropped,
    /// A tool error (`isError: true`) was written.
    ToolError,
    /// A JSON-RPC error was written.
    RpcError,
    /// Let go from a hold when its caller no longer waited.
    CallerGone,
}

/// One `tools/call` fake-mcp received.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Call {
    pub seq: u64,
    /// The `Mcp-Session-Id` it came under (none: stateless, or stdio).
    pub session: Option<String>,
    pub tool: String,
    /// SHA-256 of the arguments' canonical JSON (RFC 8785).
    pub args_digest: String,
    /// The idempotency key the call carried, where its tool declares one.
    pub key: Option<String>,
    /// The effect it made (none: a read or a refusal; fake-mcp never deduplicates by key).
    pub effect: Option<String>,
    pub reply: Reply,
    /// The fault that took it, as the rule says it.
    pub fault: Option<String>,
}

/// One effect made.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Effect {
    /// `eff_<n>`.
    pub id: String,
    /// The call that made it.
    pub seq: u64,
    pub tool: String,
    /// Its kind (the tool's `effect`).
    pub kind: String,
    pub key: Option<String>,
    pub args_digest: String,
    /// The arguments as given (a lookup answers them).
    pub args: Value,
}

/// The ground truth (`GET /_control/ledger`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ledger {
    pub calls: Vec<Call>,
    pub effects: Vec<Effect>,
}

impl Ledger {
    /// The effects made under an idempotency key.
    pub fn by_key(&self, key: &str) -> Vec<&Effect> {
        self.effects
            .iter()
            .filter(|e| e.key.as_deref() == Some(key))
            .collect()
    }
}

/// SHA-256 (hex) of a value's canonical JSON (RFC 8785).
pub fn digest(v: &Value) -> String {
    use sha2::Digest as _;
    // Arguments RFC 8785 cannot canonicalise (an integer beyond its range) are digested as
    // received, marked so: never the digest of nothing.
    match serde_json_canonicalizer::to_vec(v) {
        Ok(bytes) => hex::encode(sha2::Sha256::digest(&bytes)),
        Err(_) => format!(
            "raw:{}",
            hex::encode(sha2::Sha256::digest(v.to_string().as_bytes()))
        ),
    }
}
