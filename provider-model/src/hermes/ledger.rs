//! fake-hermes's ground truth (`GET /_control/ledger`): every run that really started, every
//! approval and stop really applied, how each run ended, and what became of each reply.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What became of a reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reply {
    /// Written to the connection: the server handed the reply over; whether the client read it,
    /// a server cannot see.
    Written,
    ErrorAfterCommit,
    Dropped,
    WithoutRunId,
}

/// A run that really started.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunStarted {
    pub run_id: String,
    pub session_id: String,
    /// SHA-256 of the request body as received.
    pub body_digest: String,
    /// The model-facing prompt (the `input` as Hermes read it).
    pub prompt: String,
    pub idempotency_key: Option<String>,
    pub session_key: Option<String>,
    pub fault: Option<String>,
    pub reply: Reply,
    pub script: String,
    /// The label of the credential that started it (`api_key` for the configured key).
    pub credential: String,
}

impl RunStarted {
    /// A run known by its id and session alone, its reply written, by the configured key (for
    /// tests and examples of the judges; fake-hermes records every field itself).
    pub fn example(run_id: &str, session_id: &str) -> RunStarted {
        RunStarted {
            run_id: run_id.to_string(),
            session_id: session_id.to_string(),
            body_digest: String::new(),
            prompt: String::new(),
            idempotency_key: None,
            session_key: None,
            fault: None,
            reply: Reply::Written,
            script: "default".into(),
            credential: "api_key".into(),
        }
    }
}

/// An approval decision that was really applied to a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ApprovalApplied {
    pub run_id: String,
    pub session_id: String,
    pub choice: String,
    pub resolved: u32,
    pub request_id: Option<String>,
    pub fault: Option<String>,
    pub reply: Reply,
}

/// A stop that was really requested of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StopApplied {
    pub run_id: String,
    pub session_id: String,
    /// Whether this stop set the cancel intent (a repeated stop while stopping does not).
    pub effective: bool,
    pub fault: Option<String>,
    pub reply: Reply,
}

/// What one run produced when it ended.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    pub output: Option<String>,
    pub error: Option<String>,
}

/// Per-session counts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub starts: u32,
    pub approvals: u32,
    pub stops: u32,
}

/// The ground truth (`GET /_control/ledger`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Ledger {
    pub runs: Vec<RunStarted>,
    pub approvals: Vec<ApprovalApplied>,
    pub stops: Vec<StopApplied>,
    /// Final statuses of runs, as the engine ended them (survives `forget`).
    pub terminal: BTreeMap<String, String>,
    /// What each ended run produced, as the engine ended it: the output of a completed run,
    /// the error of a failed one (survives `forget`).
    pub results: BTreeMap<String, RunResult>,
    /// Requests made with a revoked credential (its label each): refused, nothing done.
    pub revoked_uses: Vec<String>,
    /// Durable-record writes that failed (newer mode with a state dir), each naming its file.
    pub persist_errors: Vec<String>,
}

impl Ledger {
    pub fn per_session(&self) -> BTreeMap<String, Counts> {
        let mut m: BTreeMap<String, Counts> = BTreeMap::new();
        for r in &self.runs {
            m.entry(r.session_id.clone()).or_default().starts += 1;
        }
        for a in &self.approvals {
            m.entry(a.session_id.clone()).or_default().approvals += 1;
        }
        for s in &self.stops {
            m.entry(s.session_id.clone()).or_default().stops += 1;
        }
        m
    }
}
