//! Run starts per second on loopback (`POST /v1/runs` with admission, the ledger and a spawned
//! run engine), beside a bare axum route returning the same 202 body, in the same run with the
//! same client and concurrency. Runs park on a long sleep step so their execution does not compete
//! with the starts being measured. Medians of alternating rounds.
//!
//! `cargo bench -p fake-hermes --bench starts`; `FAKE_BENCH_SECONDS` per round (default 2),
//! `FAKE_BENCH_CONCURRENCY` (default 8).

use axum::http::StatusCode;
use fake_control::bench::{self, MakeRequest, Settings};
use serde_json::json;
use std::sync::Arc;

fn main() {
    let s = Settings::from_env();
    let (bare, fake, runs) = bench::main_with(async move {
        let (app, handle) =
            fake_hermes::router(fake_hermes::Config::default()).map_err(|d| d.join("; "))?;
        handle
            .set_scripts(
                Vec::new(),
                Some(json!({"steps": [{"id": "park", "kind": "sleep", "ms": 600000}]})),
            )
            .map_err(|d| d.join("; "))?;
        let fake_url = format!("{}/v1/runs", bench::spawn_fake(app).await?);
        let bare_url = bench::spawn_bare(
            StatusCode::ACCEPTED,
            json!({"run_id": "run_0", "status": "started"}),
        )
        .await?;
        let make: MakeRequest = Arc::new(|c: &reqwest::Client, url: &str, _, _| {
            c.post(url).json(&json!({"input": "benchmark objective"}))
        });
        let (bare, fake) = bench::compare(
            &bare_url,
            &fake_url,
            make,
            "hermes-test-key",
            StatusCode::ACCEPTED,
            s,
        )
        .await?;
        Ok((bare, fake, handle.ledger().runs.len()))
    });
    println!(
        "{}",
        json!({"target": "bare_axum_route", "requests_per_sec": bare.round(), "concurrency": s.workers, "seconds": s.secs})
    );
    println!(
        "{}",
        json!({"target": "fake_hermes_run_start", "requests_per_sec": fake.round(), "concurrency": s.workers, "seconds": s.secs, "runs_started": runs})
    );
    println!(
        "{}",
        json!({"ratio_start_to_bare": (fake / bare * 1000.0).round() / 1000.0})
    );
}
