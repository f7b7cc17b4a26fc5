//! Payment creation on loopback with the ledger, idempotency (stripe-v1) and response signing on,
//! beside a bare axum route that returns a constant JSON body, in the same run, with the same
//! client and concurrency. Prints one JSON object per target and one with the ratio.
//!
//! `cargo bench -p fake-payments --bench create`; `FAKE_BENCH_SECONDS` per round (default 2; three alternating rounds, medians reported) and
//! `FAKE_BENCH_CONCURRENCY` (default 8) tune it.

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
    for w in 0..workers {
        let (client, url, done) = (client.clone(), url.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            while Instant::now() < deadline {
                let mut rb = client
                    .post(&url)
                    .header("Idempotency-Key", format!("w{w}-{n}"))
                    .json(&json!({"amount": 1250, "currency": "eur", "description": "bench"}));
                if let Some(b) = bearer {
                    rb = rb.bearer_auth(b);
                }
                let r = rb.send().await.map_err(|e| e.to_string())?;
                if r.status().as_u16() != 201 {
                    return Err(format!("status {}", r.status()));
                }
                r.bytes().await.map_err(|e| e.to_string())?;
                n += 1;
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

/// Mean cost of the per-request pieces that the bare route does not pay, in nanoseconds.
fn component_costs() -> serde_json::Value {
    use fake_payments::contract;
    let key = ed25519_dalek::SigningKey::from_bytes(&[7u8; 32]);
    let body = json!({"object": "payment", "id": "pay_0192", "account": "acct_a", "environment": "test",
        "amount": 1250, "amount_captured": 1250, "amount_refunded": 0, "currency": "eur",
        "description": "invoice 7", "metadata": {"order": "7"}, "status": "succeeded", "created": 1800000000u64,
        "request_digest": format!("sha256:{}", "0".repeat(64)), "idempotency_key": "w1-1"});
    let n = 5_000u32;
    let time = |f: &dyn Fn()| {
        let t = Instant::now();
        for _ in 0..n {
            f();
        }
        (t.elapsed() / n).as_nanos() as u64
    };
    let canon = contract::canonical(&body);
    json!({
        "ed25519_sign_ns": time(&|| { std::hint::black_box(contract::sign_canonical(&key, "k", 201, "acct_a", "sha256:00", &canon)); }),
        "canonical_body_ns": time(&|| { std::hint::black_box(contract::canonical(&body)); }),
        "request_digest_ns": time(&|| { std::hint::black_box(contract::request_digest("POST", "/v1/payments", Some(&body))); }),
    })
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
            fake_payments::router(fake_payments::Config::example()).map_err(|d| d.join("; "))?;
        let fake = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| e.to_string())?;
        let fake_url = format!(
            "http://{}/v1/payments",
            fake.local_addr().map_err(|e| e.to_string())?
        );
        tokio::spawn(async move {
            let _ = fake_payments::serve(fake, app).await;
        });
        let bare_app = Router::new().route(
            "/bare",
            post(|| async {
                (
                    axum::http::StatusCode::CREATED,
                    axum::Json(json!({"object": "payment", "id": "pay_bare"})),
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
        // Alternate the two targets over several rounds and keep the medians, so that a noisy
        // neighbour on the machine does not decide the ratio.
        let mut bare_runs = Vec::new();
        let mut fake_runs = Vec::new();
        for _ in 0..ROUNDS {
            bare_runs.push(drive(bare_url.clone(), None, secs, workers).await?);
            fake_runs.push(drive(fake_url.clone(), Some("sk_test_a"), secs, workers).await?);
        }
        let median = |mut v: Vec<f64>| {
            v.sort_by(|a, b| a.total_cmp(b));
            v[v.len() / 2]
        };
        let effects = handle.ledger().effects.len();
        Ok::<_, String>((median(bare_runs), median(fake_runs), effects))
    });
    match result {
        Ok((bare, fake, effects)) => {
            println!(
                "{}",
                json!({"target": "bare_axum_route", "requests_per_sec": bare.round(), "concurrency": workers, "seconds": secs})
            );
            println!(
                "{}",
                json!({"target": "fake_payments_create", "requests_per_sec": fake.round(), "concurrency": workers, "seconds": secs, "ledger_effects": effects})
            );
            println!(
                "{}",
                json!({"ratio_create_to_bare": (fake / bare * 1000.0).round() / 1000.0})
            );
            println!("{}", json!({"component_costs": component_costs()}));
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(4);
        }
    }
}
