//! `fake-hermes`: a simulated Hermes structured-run API for conformance testing.
//!
//! It reproduces what a real Hermes API server was observed to do on loopback (the default mode)
//! and what newer builds add (`newer` mode): `POST /v1/runs`, `GET /v1/runs/{id}`, the SSE event
//! stream, approvals and stop. Runs execute scripts ([`script`]); runs of one session are admitted
//! in FIFO order and execute one at a time under a holder-fenced turn lease ([`lease`]). Faults are
//! injected on request ([`faults`]) and a ground-truth ledger records every run really started,
//! every approval applied and every stop.

pub mod app;
pub use provider_model::hermes::{config, faults, script};
pub mod lease;
pub mod pyjson;

pub use app::{Clock, Handle, SimClock, router, router_with_clock, serve};
pub use config::{Config, Mode};
pub use fake_control::clock;
