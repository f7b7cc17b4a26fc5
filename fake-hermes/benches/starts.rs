//! Run starts per second on loopback (`POST /v1/runs` with admission, the ledger and a spawned
//! run engine), beside a bare axum route returning the same 202 body, in the same run with the
//! same client and concurrency. Runs park on a long sleep step so their execution does not compete
//! with the starts being measured. Medians of alternating rounds.
//!
//! `cargo bench -p fake-hermes --bench starts`; `FAKE_BENCH_SECONDS` per round (default 2),
//! `FAKE_BENCH_CONCURRENCY` (default 8).

use axum::Router;
use axum::routing::post;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const ROUNDS: usize = 3;

async fn drive(
    url: String,
    bearer: Option<&'static str>,
    secs: f64,
    workers: usize,
) -> Result<f64, String> {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(workers)
        .build()
        .map_err(|e| e.to_string())?;
    let done = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let mut tasks = Vec::new();
    for _ in 0..workers {
        let (client, url, done) = (client.clone(), url.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            while Instant::now() < deadline {
                let mut rb = client
                    .post(&url)
                    .json(&json!({"input": "benchmark objective"}));
                if let Some(b) = bearer {
                    rb = rb.bearer_auth(b);
                }
                let r = rb.send().await.map_err(|e| e.to_string())?;
                if r.status().as_u16() != 202 {
                    return Err(format!("status {}", r.status()));
                }
                r.bytes().await.map_err(|e| e.to_string())?;
                done.fetch_add(1, Ordering::Relaxed);
            }
            Ok::<(), String>(())
        }));
    }
    for t in tasks {
        t.await.map_err(|e| e.to_string())??;
    }
    Ok(done.load(Ordering::Relaxed) as f64 / secs)
}

fn main() {
    let secs: f64 = std::env::var("FAKE_BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2.0);
    let workers: usize = std::env::var("FAKE_BENCH_CONCURRENCY")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(8);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let result = rt.block_on(async move {
        let (app, handle) =
            fake_hermes::router(fake_hermes::Config::default()).map_err(|d| d.join("; "))?;
        handle
            .set_scripts(
                Vec::new(),
                Some(json!({"steps": [{"id": "park", "kind": "sleep", "ms": 600000}]})),
            )
            .map_err(|d| d.join("; "))?;
        let fake = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| e.to_string())?;
        let fake_url = format!(
            "http://{}/v1/runs",
            fake.local_addr().map_err(|e| e.to_string())?
        );
        tokio::spawn(async move {
            let _ = fake_hermes::serve(fake, app).await;
        });
        let bare_app = Router::new().route(
            "/bare",
            post(|| async {
                (
                    axum::http::StatusCode::ACCEPTED,
                    axum::Json(json!({"run_id": "run_0", "status": "started"})),
                )
            }),
        );
        let bare = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| e.to_string())?;
        let bare_url = format!(
            "http://{}/bare",
            bare.local_addr().map_err(|e| e.to_string())?
        );
        tokio::spawn(async move {
            let _ = axum::serve(bare, bare_app).await;
        });
        let mut b = Vec::new();
        let mut f = Vec::new();
        for _ in 0..ROUNDS {
            b.push(drive(bare_url.clone(), None, secs, workers).await?);
            f.push(drive(fake_url.clone(), Some("hermes-test-key"), secs, workers).await?);
        }
        let median = |mut v: Vec<f64>| {
            v.sort_by(|x, y| x.total_cmp(y));
            v[v.len() / 2]
        };
        Ok::<_, String>((median(b), median(f), handle.ledger().runs.len()))
    });
    match result {
        Ok((bare, fake, runs)) => {
            println!(
                "{}",
                json!({"target": "bare_axum_route", "requests_per_sec": bare.round(), "concurrency": workers, "seconds": secs})
            );
            println!(
                "{}",
                json!({"target": "fake_hermes_run_start", "requests_per_sec": fake.round(), "concurrency": workers, "seconds": secs, "runs_started": runs})
            );
            println!(
                "{}",
                json!({"ratio_start_to_bare": (fake / bare * 1000.0).round() / 1000.0})
            );
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(4);
        }
    }
}
