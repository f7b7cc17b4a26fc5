//! `fake-hermes`: a simulated Hermes structured-run API (`/v1/runs` with SSE, approvals and stop)
//! that injects faults and keeps a ground-truth ledger of every run it really started.
//!
//! Status: placeholder crate. Its implementation arrives with its own issue; until then this crate
//! exports nothing, and nothing in the workspace depends on it.
