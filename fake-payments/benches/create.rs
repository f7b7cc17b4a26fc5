//! Payment creation on loopback with the ledger, idempotency (stripe-v1) and response signing on,
//! beside a bare axum route that returns a constant JSON body, in the same run, with the same
//! client and concurrency. Prints one JSON object per target and one with the ratio.
//!
//! `cargo bench -p fake-payments --bench create`; `FAKE_BENCH_SECONDS` per round (default 2; three alternating rounds, medians reported) and
//! `FAKE_BENCH_CONCURRENCY` (default 8) tune it.

use axum::http::StatusCode;
use fake_control::bench::{self, MakeRequest, Settings};
use serde_json::json;
use std::sync::Arc;
use std::time::Instant;

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
    let s = Settings::from_env();
    let (bare, fake, effects, fill) = bench::main_with(async move {
        let (app, handle) =
            fake_payments::router(fake_payments::Config::example()).map_err(|d| d.join("; "))?;
        let fill_url = format!("{}/v1/payments", bench::spawn_fake(app).await?);
        // First fill a fresh ledger from empty to its cap: the fake must refuse with its documented
        // error (`503 ledger_full`), and the peak resident set below is measured at the cap.
        let started = Instant::now();
        let client = reqwest::Client::new();
        let mut tasks = Vec::new();
        for w in 0..8u32 {
            let (c, url) = (client.clone(), fill_url.clone());
            tasks.push(tokio::spawn(async move {
                let mut n = 0u64;
                loop {
                    let r = c
                        .post(&url)
                        .bearer_auth("sk_test_a")
                        .header("Idempotency-Key", format!("fill-{w}-{n}"))
                        .json(&json!({"amount": 1250, "currency": "eur", "description": "bench"}))
                        .send()
                        .await
                        .map_err(|e| e.to_string())?;
                    n += 1;
                    if r.status() == StatusCode::SERVICE_UNAVAILABLE {
                        let body: serde_json::Value = r.json().await.map_err(|e| e.to_string())?;
                        return Ok::<_, String>(body["error"]["code"] == "ledger_full");
                    }
                }
            }));
        }
        let mut refused = true;
        for t in tasks {
            refused &= t.await.map_err(|e| e.to_string())??;
        }
        let fill = json!({"target": "fill_to_cap", "ledger_requests": handle.ledger().requests.len(),
            "seconds": (started.elapsed().as_secs_f64() * 10.0).round() / 10.0, "refused_with_ledger_full": refused, "peak_rss_kib_at_cap": peak_rss_kib()});
        drop(handle);
        // Throughput is measured on a fake whose ledger has room for the whole comparison.
        let (app, handle) = fake_payments::router(fake_payments::Config {
            max_ledger_requests: usize::MAX,
            ..fake_payments::Config::example()
        })
        .map_err(|d| d.join("; "))?;
        let fake_url = format!("{}/v1/payments", bench::spawn_fake(app).await?);
        let bare_url = bench::spawn_bare(
            StatusCode::CREATED,
            json!({"object": "payment", "id": "pay_bare"}),
        )
        .await?;
        let make: MakeRequest = Arc::new(|c: &reqwest::Client, url: &str, w, n| {
            c.post(url)
                .header("Idempotency-Key", format!("w{w}-{n}"))
                .json(&json!({"amount": 1250, "currency": "eur", "description": "bench"}))
        });
        let (bare, fake) = bench::compare(
            &bare_url,
            &fake_url,
            make,
            "sk_test_a",
            StatusCode::CREATED,
            s,
        )
        .await?;
        let effects = handle.ledger().effects.len();
        Ok((bare, fake, effects, fill))
    });
    println!(
        "{}",
        json!({"target": "bare_axum_route", "requests_per_sec": bare.round(), "concurrency": s.workers, "seconds": s.secs})
    );
    println!(
        "{}",
        json!({"target": "fake_payments_create", "requests_per_sec": fake.round(), "concurrency": s.workers, "seconds": s.secs, "ledger_effects": effects})
    );
    println!(
        "{}",
        json!({"ratio_create_to_bare": (fake / bare * 1000.0).round() / 1000.0})
    );
    println!("{}", json!({"component_costs": component_costs()}));
    println!("{fill}");
    println!(
        "{}",
        json!({"peak_rss_kib_overall": peak_rss_kib(), "max_ledger_requests": fake_payments::Config::example().max_ledger_requests})
    );
}

/// The whole process's peak resident set so far (the fake, its ledger, the load client), in KiB;
/// Linux only.
fn peak_rss_kib() -> Option<u64> {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
}
