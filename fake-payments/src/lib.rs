//! `fake-payments`: a synthetic card-payments provider that injects faults (lost replies, 5xx after
//! commit, forged tags, incomplete listings) and keeps a ground-truth ledger of every effect.
//!
//! Status: placeholder crate. Its implementation arrives with its own issue; until then this crate
//! exports nothing, and nothing in the workspace depends on it.
