//! Server configuration: mode, credentials, timings and bounds (real defaults, configurable).

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Which Hermes to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// What a real Hermes API server (hermes-agent 0.19.0) was observed to do: no idempotency,
    /// seven statuses, FIFO approvals without request ids, no steer route.
    #[default]
    Default,
    /// What newer builds add: `Idempotency-Key` replay and conflict, the terminal `interrupted`
    /// status, approval `request_id`, steer, 409 `run_not_active`, the 429 concurrency cap.
    Newer,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub mode: Mode,
    /// `API_SERVER_KEY`: the Bearer credential of every run route.
    pub api_key: String,
    /// The credential of `/_control`; never the API key.
    pub control_token: String,
    /// How long an approval waits before the tool step fails (observed: 60 s).
    pub approval_timeout_ms: u64,
    /// Silence before `: keepalive` (observed: 30 s).
    pub keepalive_ms: u64,
    /// How long an events request waits for a stream to be registered before 404 (observed ~1 s).
    pub stream_wait_ms: u64,
    /// Model latency before a run's first event.
    pub first_event_delay_ms: u64,
    /// Pause between events of a run.
    pub event_gap_ms: u64,
    /// Time from a stop to the executor's exit (observed: cancelled within about 0.3 s).
    pub stop_grace_ms: u64,
    pub max_events_per_run: u32,
    pub max_frame_bytes: usize,
    /// Request bodies above this are refused with 413 (real: 10 MB).
    pub max_body_bytes: usize,
    /// Concurrent active runs (newer mode answers 429 above it; real default 10).
    pub max_concurrent_runs: usize,
    /// Runs (with their ledger records) this fake keeps; a start beyond it is refused with 503
    /// `ledger_full` before anything happens, until `/_control/reset`. A bound for long soaks.
    pub max_runs: usize,
    /// Newer mode: durable records of keyed runs live here (`runs/<run_id>.json`, temp file +
    /// rename), read back at start. The default mode keeps nothing and refuses it.
    pub state_dir: Option<PathBuf>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            mode: Mode::Default,
            api_key: "hermes-test-key".into(),
            control_token: "hermes-control".into(),
            approval_timeout_ms: 60_000,
            keepalive_ms: 30_000,
            stream_wait_ms: 1_000,
            first_event_delay_ms: 20,
            event_gap_ms: 2,
            stop_grace_ms: 100,
            max_events_per_run: 4096,
            max_frame_bytes: 1 << 20,
            // 10 MB decimal, as observed (`Content-Length: 10000001` is refused unread).
            max_body_bytes: 10_000_000,
            max_concurrent_runs: 10,
            max_runs: 10_000,
            state_dir: None,
        }
    }
}

impl Config {
    /// Every defect at once, each naming its field.
    pub fn validate(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.api_key.trim().len() < 8 {
            out.push("api_key: use a key of at least 8 characters".into());
        }
        if self.control_token.trim().len() < 8 {
            out.push("control_token: use a token of at least 8 characters".into());
        }
        if self.api_key == self.control_token {
            out.push("control_token: must differ from api_key; the API credential never reaches /_control".into());
        }
        if self.max_events_per_run == 0 {
            out.push("max_events_per_run: must be at least 1".into());
        }
        if self.max_frame_bytes < 1024 {
            out.push("max_frame_bytes: must be at least 1024".into());
        }
        if self.max_concurrent_runs == 0 {
            out.push("max_concurrent_runs: must be at least 1".into());
        }
        if self.max_runs == 0 {
            out.push("max_runs: allow at least one run".into());
        }
        if self.state_dir.is_some() && self.mode == Mode::Default {
            out.push("state_dir: the default mode keeps nothing across a restart (as observed on hermes-agent 0.19.0); use mode newer for durable run records, or leave it out".into());
        }
        if self.keepalive_ms == 0 {
            out.push("keepalive_ms: must be above 0".into());
        }
        out
    }
}
