//! The message layer of `aocheck-sut/2` (docs/sut-protocol.md): requests and responses as JSON
//! lines, bounded line reading, request/response pairing, and typed protocol violations that
//! quote the offending line. The process runner builds on this.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

pub const PROTOCOL: &str = "aocheck-sut/2";
/// The largest line either side may send.
pub const MAX_LINE: usize = 1 << 20;
/// How much of an offending line a violation quotes.
const QUOTE: usize = 200;

/// A request line as the framing sees it: an id, an operation name and its fields (the typed
/// requests are `message.rs`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RawRequest {
    pub id: u64,
    pub op: String,
    #[serde(flatten)]
    pub fields: Map<String, Value>,
}

/// Whether an effect may have happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Definite,
    /// The default: an error that does not say is taken as indefinite (fail closed).
    #[default]
    Indefinite,
}

/// A typed error from the implementation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SutFailure {
    /// `refused`, `conflict`, `invalid`, `unsupported`, `internal`, or a connector code.
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requirement: Option<String>,
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub outcome: Outcome,
    /// Structured detail (for operator failures: the connector error as seed 000 shapes it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
}

/// A response from the implementation: exactly one of `ok` and `error`.
#[derive(Clone, Debug, PartialEq)]
pub struct Response {
    pub id: u64,
    pub result: Result<Value, SutFailure>,
}

/// What was wrong with what the implementation sent.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Violation {
    #[error("a line longer than {MAX_LINE} bytes: {quote}")]
    LineTooLong { quote: String },
    #[error("not UTF-8 JSON ({reason}): {quote}")]
    NotJson { reason: String, quote: String },
    #[error("{reason}: {quote}")]
    Malformed { reason: String, quote: String },
    #[error("a response to id {id}, which no request is waiting for: {quote}")]
    UnknownId { id: u64, quote: String },
}

fn quote(line: &[u8]) -> String {
    let s = String::from_utf8_lossy(&line[..line.len().min(QUOTE)]).into_owned();
    if line.len() > QUOTE {
        format!("{s}…")
    } else {
        s
    }
}

/// Reads one line of at most `max` bytes (without the newline). `Ok(None)` at end of stream.
/// A longer line is a violation and is not buffered beyond `max`.
pub async fn read_line<R: AsyncBufRead + Unpin>(
    r: &mut R,
    max: usize,
) -> std::io::Result<Result<Option<Vec<u8>>, Violation>> {
    let mut line = Vec::new();
    loop {
        let buf = r.fill_buf().await?;
        if buf.is_empty() {
            return Ok(Ok(if line.is_empty() { None } else { Some(line) }));
        }
        match buf.iter().position(|b| *b == b'\n') {
            Some(i) => {
                if line.len() + i > max {
                    let mut q = line;
                    q.extend_from_slice(&buf[..i.min(QUOTE)]);
                    return Ok(Err(Violation::LineTooLong { quote: quote(&q) }));
                }
                line.extend_from_slice(&buf[..i]);
                r.consume(i + 1);
                return Ok(Ok(Some(line)));
            }
            None => {
                let n = buf.len();
                if line.len() + n > max {
                    let mut q = line;
                    q.extend_from_slice(&buf[..n.min(QUOTE)]);
                    return Ok(Err(Violation::LineTooLong { quote: quote(&q) }));
                }
                line.extend_from_slice(buf);
                r.consume(n);
            }
        }
    }
}

/// Parses one response line.
pub fn parse_response(line: &[u8]) -> Result<Response, Violation> {
    let v: Value = serde_json::from_slice(line).map_err(|e| Violation::NotJson {
        reason: e.to_string(),
        quote: quote(line),
    })?;
    let bad = |reason: &str| Violation::Malformed {
        reason: reason.into(),
        quote: quote(line),
    };
    let obj = v
        .as_object()
        .ok_or_else(|| bad("a response must be an object"))?;
    let id = obj
        .get("id")
        .and_then(Value::as_u64)
        .filter(|i| *i > 0)
        .ok_or_else(|| bad("`id` must be a positive integer"))?;
    if let Some(k) = obj
        .keys()
        .find(|k| !["id", "ok", "error"].contains(&k.as_str()))
    {
        return Err(bad(&format!("unknown field `{k}`")));
    }
    match (obj.get("ok"), obj.get("error")) {
        (Some(ok), None) => Ok(Response {
            id,
            result: Ok(ok.clone()),
        }),
        (None, Some(e)) => {
            let f: SutFailure = serde_json::from_value(e.clone()).map_err(|err| {
                bad(&format!(
                    "`error` is not {{kind, requirement?, message?, outcome?}}: {err}"
                ))
            })?;
            if f.kind.is_empty() {
                return Err(bad("`error.kind` must not be empty"));
            }
            Ok(Response { id, result: Err(f) })
        }
        _ => Err(bad("a response carries exactly one of `ok` and `error`")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rstest::rstest;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        /// Whatever bytes an implementation writes, a line is either a response or a typed
        /// violation quoting at most 200 bytes of it; nothing panics.
        #[test]
        fn any_line_is_a_response_or_a_violation(line in proptest::collection::vec(any::<u8>(), 0..600)) {
            match parse_response(&line) {
                Ok(r) => prop_assert!(r.id > 0),
                Err(v) => prop_assert!(v.to_string().len() < 600),
            }
        }

        /// Lines shaped like responses, with any id and fields, are read the same way.
        #[test]
        fn response_shaped_lines_never_panic(id in any::<i64>(), key in "[a-z]{1,8}", val in ".{0,40}") {
            let line = format!("{{\"id\":{id},\"{key}\":{}}}", serde_json::Value::String(val));
            let _ = parse_response(line.as_bytes());
        }
    }

    #[test]
    fn requests_are_one_flat_object_per_line() {
        let mut fields = Map::new();
        fields.insert("occurrence".into(), "occ_1".into());
        let r = RawRequest {
            id: 3,
            op: "reserve".into(),
            fields,
        };
        let line = serde_json::to_string(&r).expect("json");
        assert_eq!(line, r#"{"id":3,"op":"reserve","occurrence":"occ_1"}"#);
        assert!(!line.contains('\n'));
    }

    #[test]
    fn an_error_without_an_outcome_is_indefinite() {
        let r = parse_response(br#"{"id":2,"error":{"kind":"internal","message":"db down"}}"#)
            .expect("valid");
        let e = r.result.expect_err("error");
        assert_eq!(e.outcome, Outcome::Indefinite);
        let r = parse_response(
            br#"{"id":2,"error":{"kind":"refused","requirement":"AOC-REQ-010","outcome":"definite"}}"#,
        )
        .expect("valid");
        assert_eq!(r.result.expect_err("error").outcome, Outcome::Definite);
    }

    #[rstest]
    #[case::not_json(b"hello".as_slice(), "not UTF-8 JSON")]
    #[case::array(b"[1]".as_slice(), "must be an object")]
    #[case::no_id(br#"{"ok":{}}"#.as_slice(), "positive integer")]
    #[case::zero_id(br#"{"id":0,"ok":{}}"#.as_slice(), "positive integer")]
    #[case::both(br#"{"id":1,"ok":{},"error":{"kind":"x"}}"#.as_slice(), "exactly one")]
    #[case::neither(br#"{"id":1}"#.as_slice(), "exactly one")]
    #[case::extra(br#"{"id":1,"ok":{},"log":"hi"}"#.as_slice(), "unknown field `log`")]
    #[case::bad_error(br#"{"id":1,"error":"boom"}"#.as_slice(), "`error` is not")]
    #[case::bad_outcome(br#"{"id":1,"error":{"kind":"x","outcome":"maybe"}}"#.as_slice(), "`error` is not")]
    #[case::empty_kind(br#"{"id":1,"error":{"kind":""}}"#.as_slice(), "must not be empty")]
    fn malformed_responses_are_violations_that_quote_the_line(
        #[case] line: &[u8],
        #[case] needle: &str,
    ) {
        let v = parse_response(line).expect_err("violation");
        let text = v.to_string();
        assert!(text.contains(needle), "{text}");
        assert!(text.contains(&quote(line)), "{text}");
    }
}
