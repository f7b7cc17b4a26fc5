//! What a held request is and how it is released: the hold vocabulary both fakes and the
//! harness share (the parking itself is `fake-control`'s).

use serde::{Deserialize, Serialize};

/// How a held request is released.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case", deny_unknown_fields)]
pub enum ReleaseAction {
    /// Go on processing (the effect happens).
    Proceed,
    /// Refuse before any effect with this status.
    Reject { status: u16 },
    /// Go on processing, then answer with a tag that does not authenticate the reply: a forged
    /// late response (`bad_key`: signed by another key). A fake without tags proceeds.
    ProceedForged,
    /// Go on processing, then answer with a reply the provider really signed, but for another
    /// account: authentic, and about another binding (a mismatched late response). A fake
    /// without tags proceeds.
    ProceedMismatched,
}

/// What the control API shows of a parked request (`GET /_control/holds`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Parked {
    /// The fake's own request number, where it keeps one.
    pub request_seq: Option<u64>,
    /// The kind of request (`create`, `start_run` …).
    pub op: String,
    pub account: Option<String>,
    pub idempotency_key: Option<String>,
}
