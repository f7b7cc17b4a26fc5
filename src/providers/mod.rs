//! The providers' room: the only part of the harness that names a simulator crate
//! (`fake-payments`, `fake-hermes`, `fake-mcp`, `fake-control`). Everything else speaks of what the
//! providers record and how they are faulted through `provider_model`, and drives them through
//! what is here:
//!
//! - [`start_payments`], [`start_hermes`] and [`start_mcp`]: a simulator served on a loopback port, its
//!   handle and its serving task (fake-hermes on the system clock or on the case's simulated
//!   clock with its gated clock routes);
//! - the handles ([`Payments`], [`Hermes`], [`Mcp`]) with their verbs (rules, scripts, credentials,
//!   ledgers, holds), and the simulated clock's parts;
//! - [`holds`]: the one hold choreography (arm, parked, kill → landed, release, bypassed) the
//!   cases, the operator steps and `aocheck deploy` all use.

pub mod channel;
pub mod holds;

pub use fake_control::clock::{Busy, ClockGate, SimClock};
pub use fake_hermes::Handle as Hermes;
pub use fake_mcp::Handle as Mcp;
pub use fake_payments::Handle as Payments;
pub use fake_payments::{StripeSettings, WebhookDelivery, WebhookEndpoint};

use tokio::task::JoinHandle;

/// A simulator served on loopback: where it is, its handle, and the task serving it (abort it
/// to stop the server).
#[derive(Debug)]
pub struct Served<H> {
    pub url: String,
    pub handle: H,
    pub task: JoinHandle<()>,
}

async fn bind(who: &str) -> Result<(tokio::net::TcpListener, String), String> {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| format!("{who} cannot bind a loopback port: {e}"))?;
    let url = format!(
        "http://{}",
        l.local_addr().map_err(|e| format!("{who}: {e}"))?
    );
    Ok((l, url))
}

/// fake-payments with `config`, served on a loopback port.
pub async fn start_payments(
    config: provider_model::payments::config::Config,
) -> Result<Served<Payments>, String> {
    let (app, handle) = fake_payments::router(config)
        .map_err(|d| format!("fake-payments config: {}", d.join("; ")))?;
    let (l, url) = bind("fake-payments").await?;
    let task = tokio::spawn(async move {
        let _ = fake_payments::serve(l, app).await;
    });
    Ok(Served { url, handle, task })
}

/// The simulated clock fake-hermes runs on in a case, and how participants reach it: the
/// routes under `/_aocheck/clock`, with `token` for the harness's own (ungated) use and
/// per-participant tokens through `gate`.
#[derive(Clone, Debug)]
pub struct HermesClock {
    pub sim: SimClock,
    pub token: String,
    pub gate: ClockGate,
}

impl HermesClock {
    /// A clock starting at `now_ms`, whose gate accepts no participant sleep yet.
    pub fn at(now_ms: u64, token: String) -> Self {
        HermesClock {
            sim: SimClock::at(now_ms),
            token,
            gate: ClockGate::new(0),
        }
    }
}

/// Where the clock routes are served, under the simulator's URL.
pub const CLOCK_PATH: &str = "/_aocheck/clock";

/// fake-hermes with `config`, served on a loopback port: on the system clock, or on `clock`
/// with its routes under [`CLOCK_PATH`].
pub async fn start_hermes(
    config: provider_model::hermes::config::Config,
    clock: Option<&HermesClock>,
) -> Result<Served<Hermes>, String> {
    let (app, handle) = match clock {
        Some(c) => {
            let (app, h) =
                fake_hermes::router_with_clock(config, fake_hermes::Clock::Sim(c.sim.clone()))
                    .map_err(|d| format!("fake-hermes config: {}", d.join("; ")))?;
            let routes =
                fake_control::clock::gated_routes(c.sim.clone(), c.token.clone(), c.gate.clone());
            (app.nest(CLOCK_PATH, routes), h)
        }
        None => fake_hermes::router(config)
            .map_err(|d| format!("fake-hermes config: {}", d.join("; ")))?,
    };
    let (l, url) = bind("fake-hermes").await?;
    let task = tokio::spawn(async move {
        let _ = fake_hermes::serve(l, app).await;
    });
    Ok(Served { url, handle, task })
}

/// fake-mcp serving `tools` on a loopback port, its control API (over HTTP) behind
/// `control_token`; the URL is its MCP endpoint (`…/mcp`).
pub async fn start_mcp(
    tools: Vec<provider_model::mcp::tools::ToolSpec>,
    control_token: String,
) -> Result<Served<Mcp>, String> {
    let handle = Mcp::with_control(tools, control_token)
        .map_err(|d| format!("fake-mcp tools: {}", d.join("; ")))?;
    let (url, task) = fake_mcp::start(&handle)
        .await
        .map_err(|e| format!("fake-mcp cannot bind a loopback port: {e}"))?;
    Ok(Served { url, handle, task })
}
