//! Run starts per second on loopback (`POST /v1/runs` with admission, the ledger and a spawned
//! run engine), beside a bare axum route returning the same 202 body, in the same run with the
//! raw load generator (`fake_control::bench::drive_raw`, a keep-alive connection per worker and
//! requests written as bytes, far cheaper per request than what it drives) and concurrency. Runs
//! park on a long sleep step so their execution does not compete with the starts being measured.
//! Medians of alternating rounds.
//!
//! `cargo bench -p fake-hermes --bench starts`; `FAKE_BENCH_SECONDS` per round (default 2),
//! `FAKE_BENCH_CONCURRENCY` (default 8).

use axum::http::StatusCode;
use fake_control::bench::{self, RawRequest, Settings};
use serde_json::json;
use std::sync::Arc;

fn main() {
    let s = Settings::from_env();
    let (bare, fake, runs) = bench::main_with(async move {
        let (app, handle) =
            // Throughput is measured on a fake with room for every run the comparison starts.
            fake_hermes::router(fake_hermes::Config {
                max_runs: usize::MAX,
                ..fake_hermes::Config::default()
            })
            .map_err(|d| d.join("; "))?;
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
        let body = br#"{"input":"benchmark objective"}"#.to_vec();
        let plain: RawRequest = {
            let body = body.clone();
            Arc::new(move |_, _| (String::new(), body.clone()))
        };
        let with_key: RawRequest = Arc::new(move |_, _| {
            (
                "authorization: Bearer hermes-test-key\r\n".into(),
                body.clone(),
            )
        });
        let got = bench::compare_raw(
            &[
                (&bare_url, plain, StatusCode::ACCEPTED),
                (&fake_url, with_key, StatusCode::ACCEPTED),
            ],
            s,
        )
        .await?;
        Ok((got[0], got[1], handle.ledger().runs.len()))
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
