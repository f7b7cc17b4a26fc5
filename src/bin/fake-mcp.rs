//! The `fake-mcp` binary: serve the simulated MCP tool server on a loopback port.
//!
//! Prints `listening http://ADDR` (its Streamable HTTP endpoint is `http://ADDR/mcp`), then
//! serves until killed. Exit codes: 3 invalid tools or fault plan; 4 cannot
//! bind.

use clap::Parser;
use fake_control::bin::{Common, fail, read_json};
use provider_model::mcp::faults::Rule;
use provider_model::mcp::tools::ToolSpec;
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    name = "fake-mcp",
    version,
    about = "A simulated MCP tool server (Streamable HTTP) with faults and a ground-truth ledger"
)]
struct Args {
    /// `--config`: the tools (a JSON list of tool specs; default: three writes and two reads);
    /// `--faults`: a plan `{"rules": [{"tool"?, "fault", "nth"?, "times"?}]}`.
    #[command(flatten)]
    common: Common,
    /// Opens the control API (`GET /_control/ledger`, `POST /_control/restart`) to
    /// `Authorization: Bearer <it>`; without it the control API refuses everything.
    #[arg(long, env = "FAKE_MCP_CONTROL_TOKEN")]
    control_token: Option<String>,
    /// Serve MCP over stdin and stdout (the stdio transport: one session, until stdin closes);
    /// the control API is still served over HTTP at `--listen`, announced on stderr.
    #[arg(long)]
    stdio: bool,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Plan {
    rules: Vec<Rule>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let tools = match &args.common.config {
        Some(p) => match read_json::<Vec<ToolSpec>>(p) {
            Ok(t) => t,
            Err(e) => return fail([e]),
        },
        None => provider_model::mcp::tools::default_tools(),
    };
    let h = match fake_mcp::Handle::with_control(tools, args.control_token.unwrap_or_default()) {
        Ok(h) => h,
        Err(d) => return fail(d.into_iter().map(|x| format!("tools: {x}"))),
    };
    if let Some(p) = &args.common.faults {
        let plan = match read_json::<Plan>(p) {
            Ok(plan) => plan,
            Err(e) => return fail([format!("faults: {e}")]),
        };
        for (i, r) in plan.rules.into_iter().enumerate() {
            if let provider_model::mcp::faults::Fault::Hold { .. } = r.fault {
                return fail([format!(
                    "faults: rules[{i}].fault: `hold` needs a harness to let the call go, and this binary has no release route; use `slow` to keep a call waiting"
                )]);
            }
            if let Err(d) = h.add_rule(r) {
                return fail(d.into_iter().map(|x| format!("faults: {x}")));
            }
        }
    }
    let app = fake_mcp::router(&h);
    if args.stdio {
        return stdio(&args.common.listen, app, &h);
    }
    fake_control::bin::run(
        &args.common.listen,
        app,
        &["mcp endpoint: /mcp at that address".to_string()],
    )
}

/// MCP over stdin and stdout; the control API over HTTP at `listen` (`listening http://ADDR`
/// on stderr, since stdout is the protocol's).
fn stdio(listen: &str, app: axum::Router, h: &fake_mcp::Handle) -> ExitCode {
    let Ok(rt) = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    else {
        eprintln!("error: runtime");
        return ExitCode::from(fake_control::bin::UNREACHABLE);
    };
    rt.block_on(async move {
        let listener = match tokio::net::TcpListener::bind(listen).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("error: cannot listen on {listen}: {e}");
                return ExitCode::from(fake_control::bin::UNREACHABLE);
            }
        };
        if let Ok(a) = listener.local_addr() {
            eprintln!("listening http://{a}");
        }
        tokio::spawn(async move {
            let _ = fake_control::serve(listener, app).await;
        });
        match fake_mcp::serve_io(h, tokio::io::stdin(), tokio::io::stdout()).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(fake_control::bin::UNREACHABLE)
            }
        }
    })
}
