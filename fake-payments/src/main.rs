//! The `fake-payments` binary: serve the synthetic provider on a loopback port.
//!
//! Prints `listening http://ADDR` as its first line on stdout, then serves until killed.
//! Exit codes: 3 invalid configuration or fault plan, 4 cannot bind.

use clap::Parser;
use fake_payments::config::Config;
use fake_payments::faults::Plan;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    name = "fake-payments",
    version,
    about = "A synthetic card-payments provider with faults and a ground-truth ledger"
)]
struct Args {
    /// Address to listen on (port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: String,
    /// Configuration (JSON): accounts, control token, retention, bounds. Default: three test accounts.
    #[arg(long)]
    config: Option<PathBuf>,
    /// A fault plan (JSON `{"rules": [...]}`) active from the start.
    #[arg(long)]
    faults: Option<PathBuf>,
    /// Overrides the configuration's control token.
    #[arg(long, env = "FAKE_PAYMENTS_CONTROL_TOKEN")]
    control_token: Option<String>,
}

fn read_json<T: serde::de::DeserializeOwned>(path: &PathBuf) -> Result<T, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text)
        .map_err(|e| format!("{}:{}:{}: {e}", path.display(), e.line(), e.column()))
}

fn main() -> ExitCode {
    let args = Args::parse();
    let mut config = match &args.config {
        Some(p) => match read_json::<Config>(p) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(3);
            }
        },
        None => Config::example(),
    };
    if let Some(t) = args.control_token {
        config.control_token = t;
    }
    let plan = match &args.faults {
        Some(p) => match read_json::<Plan>(p) {
            Ok(plan) => Some(plan),
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(3);
            }
        },
        None => None,
    };
    let (app, handle) = match fake_payments::router(config) {
        Ok(x) => x,
        Err(defects) => {
            for d in defects {
                eprintln!("error: config: {d}");
            }
            return ExitCode::from(3);
        }
    };
    if let Some(plan) = plan
        && let Err(defects) = handle.set_plan(plan)
    {
        for d in defects {
            eprintln!("error: faults: {d}");
        }
        return ExitCode::from(3);
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: runtime: {e}");
            return ExitCode::from(4);
        }
    };
    rt.block_on(async move {
        let listener = match tokio::net::TcpListener::bind(&args.listen).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("error: cannot listen on {}: {e}", args.listen);
                return ExitCode::from(4);
            }
        };
        let addr = listener
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        let mut out = std::io::stdout();
        let _ = writeln!(out, "listening http://{addr}");
        let _ = writeln!(out, "provider key {}", handle.key_id());
        let _ = out.flush();
        match fake_payments::serve(listener, app).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(4)
            }
        }
    })
}
