//! fake-mcp's fault vocabulary: rules target "the nth call of tool T" (any tool when `tool` is
//! absent), on the same counting as every other fake ([`crate::rules`]).

use serde::{Deserialize, Serialize};
use std::fmt;

/// What fake-mcp does to a tool call a rule takes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Fault {
    /// The effect is made, then the connection closes with no reply (the stream ends before the
    /// result).
    CommitThenDrop,
    /// The effect is made, then the call answers a tool error (`isError: true`).
    ErrorAfterCommit,
    /// The effect is made, then the call answers a JSON-RPC error (`-32603`).
    RpcErrorAfterCommit,
    /// Nothing is made: the call answers a tool error, in the same words as an error after
    /// the effect (the caller cannot tell them apart).
    Refuse,
    /// The reply comes `ms` milliseconds after the effect.
    Slow { ms: u64 },
    /// The effect is made, then the call's session expires: its id is forgotten (the client's
    /// next request under it is answered 404) and the connection closes with no result.
    ExpireAfterCommit,
    /// The call is parked before any effect until the harness releases it (`proceed`: the
    /// effect is made and answered, to nobody if the caller went; `reject`: refused, nothing
    /// made).
    Hold { name: String },
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::CommitThenDrop => f.write_str("commit_then_drop"),
            Fault::ErrorAfterCommit => f.write_str("error_after_commit"),
            Fault::RpcErrorAfterCommit => f.write_str("rpc_error_after_commit"),
            Fault::Refuse => f.write_str("refuse"),
            Fault::Slow { ms } => write!(f, "slow({ms} ms)"),
            Fault::Hold { name } => write!(f, "hold({name})"),
            Fault::ExpireAfterCommit => f.write_str("expire_after_commit"),
        }
    }
}

/// A fault for the `nth` call of `tool` (any tool without one) and the `times - 1` after it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    pub fault: Fault,
    #[serde(default = "crate::rules::one")]
    pub nth: u32,
    #[serde(default = "crate::rules::one")]
    pub times: u32,
}

crate::targeted!(Rule);

impl crate::rules::Check for Rule {
    fn check(&self, at: &str, out: &mut crate::rules::Defects) {
        if let Some(t) = &self.tool
            && t.trim().is_empty()
        {
            out.push(format!(
                "{at}.tool: name a tool, or leave `tool` out for any"
            ));
        }
        if let Fault::Hold { name } = &self.fault
            && name.trim().is_empty()
        {
            out.push(format!("{at}.fault.name: name the hold"));
        }
    }
}

impl Rule {
    /// Whether this rule matches a call of `tool`.
    pub fn matches(&self, tool: &str) -> bool {
        self.tool.as_deref().is_none_or(|t| t == tool)
    }
}
