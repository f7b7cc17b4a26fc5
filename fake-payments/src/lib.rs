//! `fake-payments`: a synthetic card-payments provider for conformance testing.
//!
//! It behaves like a small card-payments API (create, capture, refund, get, list; per-account
//! Bearer credentials; idempotency keys under three selectable profiles), signs every response so a
//! client can tell a forged or misdirected reply, publishes an AOC provider profile, injects faults
//! on request (lost replies after commit, 5xx after commit, garbled bodies, forged tags, incomplete
//! listings, expired retention, held requests …), and keeps a ground-truth ledger of every effect
//! that really happened and whether its reply went out.
//!
//! It shares nothing with the harness but its HTTP contract ([`contract`]). Use [`app::router`] for
//! an in-process server (testable without a socket) and [`app::serve`] to serve it on a listener with
//! the ability to drop a connection without replying.

pub mod app;
pub use provider_model::payments::{config, contract, faults, ledger, profile};

pub use app::{
    Handle, STRIPE_DEFAULT_VERSION, StripeSettings, WebhookDelivery, WebhookEndpoint, router,
    router_with_clock, serve, webhook_signature,
};
pub use config::{AccountConfig, Config, IdempotencyProfile};
pub use fake_control::clock;
/// What the control log records of one request to a `/_control` route.
pub use fake_control::control::ControlAttempt;
