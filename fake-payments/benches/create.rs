//! Payment creation on loopback with the ledger, idempotency (stripe-v1) and response signing on,
//! beside two baselines in the same run, driven by the same raw load generator
//! (`fake_control::bench::drive_raw`, which costs far less per request than the routes it drives)
//! at the same concurrency:
//! - a bare axum route that returns a constant JSON body (the wire's limit);
//! - a bare axum route that, like the fake, parses the JSON request, renders a payment's body
//!   canonically and signs it with Ed25519 (the signing limit: the tag stays, it is what lets an
//!   auditor check an observation later).
//!
//! Prints one JSON object per target, the two ratios, the cost of the pieces, and the ledger's
//! memory per record at its cap. `cargo bench -p fake-payments --bench create`;
//! `FAKE_BENCH_SECONDS` per round (default 2; three rounds, each driving every target in turn,
//! medians reported) and `FAKE_BENCH_CONCURRENCY` (default 8) tune it.

use axum::http::StatusCode;
use fake_control::bench::{self, RawRequest, Settings};
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
    let (bare, signed, fake, effects, fill) = bench::main_with(async move {
        // `FAKE_BENCH_CAP` fills a ledger of another cap (default: the configuration's default).
        let cap = std::env::var("FAKE_BENCH_CAP")
            .ok()
            .and_then(|c| c.parse().ok())
            .unwrap_or(fake_payments::Config::example().max_ledger_requests);
        let (app, handle) = fake_payments::router(fake_payments::Config {
            max_ledger_requests: cap,
            ..fake_payments::Config::example()
        })
        .map_err(|d| d.join("; "))?;
        let fill_url = format!("{}/v1/payments", bench::spawn_fake(app).await?);
        // First fill a fresh ledger from empty to its cap: the fake must refuse with its documented
        // error (`503 ledger_full`), and the peak resident set below is measured at the cap.
        let rss_before_fill = rss_kib("VmRSS:");
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
        // Read the resident set before anything renders the ledger (a rendered copy is the
        // reader's memory, not the ledger's).
        let peak_at_cap = peak_rss_kib();
        let records = handle.recorded_requests();
        let fill = json!({"target": "fill_to_cap", "ledger_requests": records,
            "seconds": (started.elapsed().as_secs_f64() * 10.0).round() / 10.0, "refused_with_ledger_full": refused,
            "peak_rss_kib_at_cap": peak_at_cap,
            "rss_kib_before_fill": rss_before_fill,
            "bytes_per_record_at_cap": peak_at_cap.zip(rss_before_fill).map(|(p, b)| ((p.saturating_sub(b) * 1024) as f64 / records.max(1) as f64).round()),
            "peak_rss_bytes_per_record": peak_at_cap.map(|p| ((p * 1024) as f64 / records.max(1) as f64).round())});
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
        let signed_url = format!("{}/signed", bench::spawn_app(signing_route()).await?);
        let body = br#"{"amount":1250,"currency":"eur","description":"bench"}"#.to_vec();
        let plain: RawRequest = {
            let body = body.clone();
            Arc::new(move |w, n| (format!("idempotency-key: w{w}-{n}\r\n"), body.clone()))
        };
        let with_key: RawRequest = Arc::new(move |w, n| {
            (
                format!("authorization: Bearer sk_test_a\r\nidempotency-key: w{w}-{n}\r\n"),
                body.clone(),
            )
        });
        let got = bench::compare_raw(
            &[
                (&bare_url, plain.clone(), StatusCode::CREATED),
                (&signed_url, plain, StatusCode::CREATED),
                (&fake_url, with_key, StatusCode::CREATED),
            ],
            s,
        )
        .await?;
        let effects = handle.ledger().effects.len();
        Ok((got[0], got[1], got[2], effects, fill))
    });
    println!(
        "{}",
        json!({"target": "bare_axum_route", "requests_per_sec": bare.round(), "concurrency": s.workers, "seconds": s.secs})
    );
    println!(
        "{}",
        json!({"target": "bare_route_that_signs", "requests_per_sec": signed.round(), "concurrency": s.workers, "seconds": s.secs})
    );
    println!(
        "{}",
        json!({"target": "fake_payments_create", "requests_per_sec": fake.round(), "concurrency": s.workers, "seconds": s.secs, "ledger_effects": effects})
    );
    println!(
        "{}",
        json!({"ratio_create_to_signing_route": (fake / signed * 1000.0).round() / 1000.0,
               "ratio_create_to_bare": (fake / bare * 1000.0).round() / 1000.0,
               "ratio_signing_route_to_bare": (signed / bare * 1000.0).round() / 1000.0})
    );
    println!("{}", json!({"component_costs": component_costs()}));
    println!("{fill}");
    println!(
        "{}",
        json!({"peak_rss_kib_overall": peak_rss_kib(), "max_ledger_requests": fake_payments::Config::example().max_ledger_requests})
    );
}

/// The signing baseline: `POST /signed` parses the JSON request, renders a payment's body (the
/// fields the fake returns) canonically and signs status, account, request digest and body with
/// Ed25519, as the fake signs every reply; no ledger, no idempotency, no faults.
fn signing_route() -> axum::Router {
    use axum::routing::post;
    let key = Arc::new(ed25519_dalek::SigningKey::from_bytes(&[7u8; 32]));
    let key_id = fake_payments::contract::key_id(&key.verifying_key());
    axum::Router::new().route(
        "/signed",
        post(move |req: axum::Json<serde_json::Value>| {
            let (key, key_id) = (key.clone(), key_id.clone());
            async move {
                use fake_payments::contract;
                let digest = contract::request_digest("POST", "/v1/payments", Some(&req.0));
                let body = json!({"object": "payment", "id": "pay_0192", "account": "acct_a",
                    "environment": "test", "amount": req.0["amount"], "amount_captured": 0,
                    "amount_refunded": 0, "currency": req.0["currency"], "description": req.0["description"],
                    "metadata": {}, "status": "succeeded", "created": 1800000000u64,
                    "request_digest": digest, "idempotency_key": "w1-1"});
                let bytes = contract::canonical(&body);
                let tag = contract::sign_canonical(&key, &key_id, 201, "acct_a", &digest, &bytes);
                let mut r = axum::response::Response::new(axum::body::Body::from(bytes));
                *r.status_mut() = StatusCode::CREATED;
                r.headers_mut().insert(
                    axum::http::header::CONTENT_TYPE,
                    axum::http::HeaderValue::from_static("application/json"),
                );
                if let Ok(v) = axum::http::HeaderValue::from_str(&tag.to_header()) {
                    r.headers_mut().insert(contract::SIGNATURE_HEADER, v);
                }
                r
            }
        }),
    )
}

/// The whole process's peak resident set so far (the fake, its ledger, the load client), in KiB;
/// Linux only.
fn peak_rss_kib() -> Option<u64> {
    rss_kib("VmHWM:")
}

/// One `Vm…:` line of `/proc/self/status`, in KiB; Linux only.
fn rss_kib(which: &str) -> Option<u64> {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(which))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
}
