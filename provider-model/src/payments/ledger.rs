//! The ground truth: every effect that really happened, and every request with the fault applied
//! and what became of its reply.

use serde::{Deserialize, Serialize};

/// What became of a reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reply {
    /// Not sent yet (held, or being processed).
    Pending,
    /// Written to the connection as processed. That is all a server can see: it handed the
    /// reply over, not that the client read it (a client gone by then is `client_gone`).
    Written,
    /// The effect happened and an error status was sent instead of the result.
    ErrorAfterCommit,
    /// The connection was closed without any reply.
    Dropped,
    /// An undecodable body was sent.
    Garbled,
    /// The client had gone before the reply could be sent.
    ClientGone,
    /// Written with a tag that does not authenticate it (a forged reply).
    Forged,
    /// Written with the provider's own tag, but signed for another account: authentic, and about
    /// another binding (a mismatched reply).
    Misdirected,
}

/// An effect on money or on a payment's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EffectKind {
    PaymentCreated,
    PaymentCaptured,
    PaymentRefunded,
    /// An authorisation voided before capture (the Stripe dialect's cancel): no money moved.
    PaymentCanceled,
}

/// One effect that really happened.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Effect {
    pub seq: u64,
    pub kind: EffectKind,
    pub account: String,
    pub payment_id: String,
    pub refund_id: Option<String>,
    pub amount: i64,
    pub currency: String,
    /// The payment's status right after the effect (a declined creation moved no money).
    pub status: String,
    pub request_digest: String,
    pub idempotency_key: Option<String>,
    /// The fault applied to the request that caused it, if any.
    pub fault: Option<String>,
    /// The request that caused it (see [`RequestRecord::seq`]).
    pub request_seq: u64,
    pub reply: Reply,
    /// When it happened (wall clock, ms since the Unix epoch; a held request commits at its
    /// release, after it was received), read in process for a story told in time; never
    /// serialised, like [`RequestRecord::received_ms`].
    #[serde(skip)]
    pub at_ms: Option<u64>,
}

/// One request that reached an API route (authenticated or not).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestRecord {
    pub seq: u64,
    pub op: crate::payments::faults::Op,
    pub account: Option<String>,
    pub idempotency_key: Option<String>,
    pub request_digest: String,
    /// The payment the path names (`/v1/payments/{id}`, its capture and refund), if any.
    pub payment_id: Option<String>,
    /// The `idempotency_key` a listing filtered by, if any.
    pub lookup_key: Option<String>,
    pub fault: Option<String>,
    /// The payment ids the reply's body named, as the provider wrote it (a created, read or
    /// listed payment; a refund's payment). What a client can have learned from this reply,
    /// if it was delivered (see `reply`).
    pub refs: Vec<String>,
    /// The HTTP status decided (before any post-commit fault replaced it).
    pub status: u16,
    /// Whether the saved response of an earlier request was replayed.
    pub replayed: bool,
    /// Whether this request caused an effect.
    pub effect: bool,
    pub reply: Reply,
    /// The label of the credential the request was made with (`account` for the account's own
    /// key; an issued credential's label otherwise).
    pub credential: String,
    /// Made with a revoked credential: answered 401, nothing processed.
    pub revoked: bool,
    /// The client's `User-Agent`, as sent (an SDK names itself and its version there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_agent: Option<String>,
    /// The `Stripe-Version` the client pinned, as sent (the Stripe dialect's API version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stripe_version: Option<String>,
    /// The dialect the request spoke: absent for the native API, `stripe` for `/v1/payment_intents`
    /// and `/v1/refunds`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dialect: Option<String>,
    /// When the provider received it (wall clock, ms since the Unix epoch), read in process
    /// for a story told in time (the deploy page); never serialised, so no evidence, digest
    /// or comparison of ledgers depends on it.
    #[serde(skip)]
    pub received_ms: Option<u64>,
}

/// The ledger returned by `GET /_control/ledger`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ledger {
    pub effects: Vec<Effect>,
    pub requests: Vec<RequestRecord>,
}
