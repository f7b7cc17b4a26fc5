//! The `fake-hermes` binary: serve the simulated Hermes run API on a loopback port.
//!
//! Prints `listening http://ADDR` as its first line, then serves until killed.
//! Exit codes: 3 invalid configuration, fault plan or scripts; 4 cannot bind.

use clap::Parser;
use fake_control::bin::{Common, fail, read_json, run};
use provider_model::hermes::config::{Config, Mode};
use provider_model::hermes::faults::Plan;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    name = "fake-hermes",
    version,
    about = "A simulated Hermes /v1/runs API with faults and a ground-truth ledger"
)]
struct Args {
    #[command(flatten)]
    common: Common,
    /// `default` (as observed on hermes-agent 0.19.0) or `newer`.
    #[arg(long, value_parser = ["default", "newer"])]
    mode: Option<String>,
    /// Script rules: `{"rules": [{"session_id"?, "objective_contains"?, "script"}], "default"?}`.
    #[arg(long)]
    scripts: Option<PathBuf>,
    /// Newer mode: durable records of keyed runs (read back at start; a run that had not ended
    /// is `interrupted`). The default mode keeps nothing and refuses it.
    #[arg(long)]
    state_dir: Option<PathBuf>,
    #[arg(long, env = "API_SERVER_KEY")]
    api_key: Option<String>,
    #[arg(long, env = "FAKE_HERMES_CONTROL_TOKEN")]
    control_token: Option<String>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Scripts {
    #[serde(default)]
    rules: Vec<provider_model::hermes::script::ScriptRule>,
    #[serde(default)]
    default: Option<serde_json::Value>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let mut config = match &args.common.config {
        Some(p) => match read_json::<Config>(p) {
            Ok(c) => c,
            Err(e) => return fail([e]),
        },
        None => Config::default(),
    };
    if let Some(m) = &args.mode {
        config.mode = if m == "newer" {
            Mode::Newer
        } else {
            Mode::Default
        };
    }
    if let Some(k) = args.api_key {
        config.api_key = k;
    }
    if let Some(t) = args.control_token {
        config.control_token = t;
    }
    if args.state_dir.is_some() {
        config.state_dir = args.state_dir.clone();
    }
    let (app, handle) = match fake_hermes::router(config) {
        Ok(x) => x,
        Err(d) => return fail(d.into_iter().map(|x| format!("config: {x}"))),
    };
    if let Some(p) = &args.common.faults {
        match read_json::<Plan>(p)
            .map_err(|e| vec![e])
            .and_then(|plan| handle.set_plan(plan))
        {
            Ok(()) => {}
            Err(d) => return fail(d.into_iter().map(|x| format!("faults: {x}"))),
        }
    }
    if let Some(p) = &args.scripts {
        match read_json::<Scripts>(p)
            .map_err(|e| vec![e])
            .and_then(|s| handle.set_scripts(s.rules, s.default))
        {
            Ok(()) => {}
            Err(d) => return fail(d.into_iter().map(|x| format!("scripts: {x}"))),
        }
    }
    run(&args.common.listen, app, &[])
}
