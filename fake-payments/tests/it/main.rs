//! fake-payments integration tests: one binary, one module per area.

mod api;
mod stripe;
