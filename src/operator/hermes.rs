//! A minimal client for the Hermes `/v1/runs` surface the connector uses: start, status, the SSE
//! event stream (parsed incrementally; a decode failure ends it), approval and stop.

use serde_json::Value;
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct HermesClient {
    base: String,
    api_key: String,
    http: reqwest::Client,
}

/// What a start attempt established.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StartOutcome {
    Started {
        run_id: String,
    },
    /// 2xx without a run id: the run may exist.
    NoRunId,
    /// A definitive 4xx: no run was created.
    Rejected {
        status: u16,
    },
    /// 5xx, transport failure or undecodable reply: the run may exist.
    Unknown {
        reason: String,
    },
}

/// Why a status poll gave no status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PollError {
    /// 404: in-memory status lost (a restart) or expired. Missing knowledge, not terminal.
    NotFound,
    Http(u16),
    Transport(String),
    Decode,
}

/// What an approval call established.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApprovalOutcome {
    Applied,
    Rejected { status: u16, code: Option<String> },
    Unknown { reason: String },
}

impl HermesClient {
    pub fn new(base: &str, api_key: &str, timeout: Duration) -> Result<Self, String> {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .map_err(|e| e.to_string())?;
        Ok(HermesClient {
            base: base.trim_end_matches('/').to_string(),
            api_key: api_key.to_string(),
            http,
        })
    }

    pub async fn start(&self, body: &Value) -> StartOutcome {
        let r = match self
            .http
            .post(format!("{}/v1/runs", self.base))
            .bearer_auth(&self.api_key)
            .json(body)
            .send()
            .await
        {
            Ok(r) => r,
            Err(e) => {
                return StartOutcome::Unknown {
                    reason: format!("transport: {e}"),
                };
            }
        };
        let status = r.status().as_u16();
        let text = match r.text().await {
            Ok(t) => t,
            Err(e) => {
                return StartOutcome::Unknown {
                    reason: format!("reply body: {e}"),
                };
            }
        };
        match status {
            200..=299 => match serde_json::from_str::<Value>(&text)
                .ok()
                .and_then(|v| v["run_id"].as_str().map(str::to_string))
            {
                Some(id) if !id.is_empty() => StartOutcome::Started { run_id: id },
                _ => StartOutcome::NoRunId,
            },
            400..=499 => StartOutcome::Rejected { status },
            _ => StartOutcome::Unknown {
                reason: format!("HTTP {status}"),
            },
        }
    }

    pub async fn status(&self, run_id: &str) -> Result<Value, PollError> {
        let r = self
            .http
            .get(format!("{}/v1/runs/{run_id}", self.base))
            .bearer_auth(&self.api_key)
            .send()
            .await
            .map_err(|e| PollError::Transport(e.to_string()))?;
        match r.status().as_u16() {
            200 => r.json().await.map_err(|_| PollError::Decode),
            404 => Err(PollError::NotFound),
            s => Err(PollError::Http(s)),
        }
    }

    /// Opens the event stream; `Err` on 404 or any HTTP or transport failure.
    pub async fn events(&self, run_id: &str) -> Result<reqwest::Response, PollError> {
        let r = self
            .http
            .get(format!("{}/v1/runs/{run_id}/events", self.base))
            .bearer_auth(&self.api_key)
            .send()
            .await
            .map_err(|e| PollError::Transport(e.to_string()))?;
        match r.status().as_u16() {
            200 => Ok(r),
            404 => Err(PollError::NotFound),
            s => Err(PollError::Http(s)),
        }
    }

    pub async fn approval(&self, run_id: &str, choice: &str, resolve_all: bool) -> ApprovalOutcome {
        let body = serde_json::json!({"choice": choice, "resolve_all": resolve_all});
        let r = match self
            .http
            .post(format!("{}/v1/runs/{run_id}/approval", self.base))
            .bearer_auth(&self.api_key)
            .json(&body)
            .send()
            .await
        {
            Ok(r) => r,
            Err(e) => {
                return ApprovalOutcome::Unknown {
                    reason: format!("transport: {e}"),
                };
            }
        };
        let status = r.status().as_u16();
        let v: Value = r.json().await.unwrap_or(Value::Null);
        match status {
            200..=299 => ApprovalOutcome::Applied,
            400..=499 => ApprovalOutcome::Rejected {
                status,
                code: v["error"]["code"].as_str().map(str::to_string),
            },
            _ => ApprovalOutcome::Unknown {
                reason: format!("HTTP {status}"),
            },
        }
    }

    /// `POST …/stop`: the HTTP status, or the transport error.
    pub async fn stop(&self, run_id: &str) -> Result<u16, String> {
        self.http
            .post(format!("{}/v1/runs/{run_id}/stop", self.base))
            .bearer_auth(&self.api_key)
            .send()
            .await
            .map(|r| r.status().as_u16())
            .map_err(|e| e.to_string())
    }
}

/// The largest SSE frame the connector reads (1 MiB): a stream that sends more without ending a
/// frame is abandoned (the connector falls back to polling), so a server cannot grow its memory.
pub const MAX_SSE_FRAME: usize = 1 << 20;

/// A frame grew past [`MAX_SSE_FRAME`] without ending.
#[derive(Debug, PartialEq, Eq)]
pub struct FrameTooLarge;

/// Incremental SSE frame parser: feed bytes, take complete `data:` payloads.
#[derive(Debug, Default)]
pub struct SseParser {
    buf: String,
}

impl SseParser {
    /// Appends bytes; returns the data payloads of every complete frame (comments skipped), or
    /// [`FrameTooLarge`] once an unfinished frame passes [`MAX_SSE_FRAME`].
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Vec<String>, FrameTooLarge> {
        self.buf.push_str(&String::from_utf8_lossy(bytes));
        let mut out = Vec::new();
        while let Some(i) = self.buf.find("\n\n") {
            let frame: String = self.buf.drain(..i + 2).collect();
            let data: Vec<&str> = frame
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(|d| d.strip_prefix(' ').unwrap_or(d))
                .collect();
            if !data.is_empty() {
                out.push(data.join("\n"));
            }
        }
        if self.buf.len() > MAX_SSE_FRAME {
            self.buf = String::new();
            return Err(FrameTooLarge);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_split_across_chunks_and_comments_are_skipped() {
        let mut p = SseParser::default();
        assert_eq!(p.feed(b"data: {\"a\""), Ok(vec![]));
        assert_eq!(
            p.feed(b": 1}\n\n: keepalive\n\ndata: {}\n\n"),
            Ok(vec!["{\"a\": 1}".to_string(), "{}".to_string()])
        );
    }

    /// A frame that never ends is cut off at the cap, not buffered without bound; a large frame
    /// that does end in time is read.
    #[test]
    fn an_endless_frame_is_refused_at_the_cap() {
        let mut p = SseParser::default();
        let chunk = vec![b'x'; 64 << 10];
        assert_eq!(p.feed(b"data: "), Ok(vec![]));
        let mut refused = false;
        for _ in 0..(MAX_SSE_FRAME / chunk.len() + 2) {
            if p.feed(&chunk) == Err(FrameTooLarge) {
                refused = true;
                break;
            }
        }
        assert!(refused);
        let big = format!("data: {}\n\n", "y".repeat(MAX_SSE_FRAME / 2));
        assert_eq!(p.feed(big.as_bytes()).map(|v| v.len()), Ok(1));
    }
}
