//! The `fake-payments` binary: serve the synthetic provider on a loopback port.
//!
//! Prints `listening http://ADDR` as its first line on stdout, then serves until killed.
//! Exit codes: 3 invalid configuration or fault plan, 4 cannot bind.

use clap::Parser;
use fake_control::bin::{Common, fail, read_json, run};
use provider_model::payments::config::Config;
use provider_model::payments::faults::Plan;
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    name = "fake-payments",
    version,
    about = "A synthetic card-payments provider with faults and a ground-truth ledger"
)]
struct Args {
    #[command(flatten)]
    common: Common,
    /// Overrides the configuration's control token.
    #[arg(long, env = "FAKE_PAYMENTS_CONTROL_TOKEN")]
    control_token: Option<String>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let mut config = match &args.common.config {
        Some(p) => match read_json::<Config>(p) {
            Ok(c) => c,
            Err(e) => return fail([e]),
        },
        None => Config::example(),
    };
    if let Some(t) = args.control_token {
        config.control_token = t;
    }
    let plan = match &args.common.faults {
        Some(p) => match read_json::<Plan>(p) {
            Ok(plan) => Some(plan),
            Err(e) => return fail([e]),
        },
        None => None,
    };
    let (app, handle) = match fake_payments::router(config) {
        Ok(x) => x,
        Err(defects) => return fail(defects.into_iter().map(|d| format!("config: {d}"))),
    };
    if let Some(plan) = plan
        && let Err(defects) = handle.set_plan(plan)
    {
        return fail(defects.into_iter().map(|d| format!("faults: {d}")));
    }
    run(
        &args.common.listen,
        app,
        &[format!("provider key {}", handle.key_id())],
    )
}
