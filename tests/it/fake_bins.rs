//! The providers' standalone binaries, which the aocheck package builds (`src/bin/`) so that
//! `cargo install --path .` installs them beside aocheck.

mod hermes;
mod mcp;
mod payments;
