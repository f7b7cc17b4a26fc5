//! The benchmark driver both fakes' benches use (feature `testing`): the fake and a bare axum
//! route answering a constant body are served side by side on loopback and driven by the same
//! client with the same concurrency, in alternating rounds; medians are reported, so that a noisy
//! neighbour on the machine does not decide the ratio. `FAKE_BENCH_SECONDS` (per round, default
//! 2) and `FAKE_BENCH_CONCURRENCY` (default 8) tune it.

use axum::Router;
use axum::http::StatusCode;
use axum::routing::post;
use serde_json::Value;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Rounds per target.
pub const ROUNDS: usize = 3;

/// One request of worker `w`, its `n`-th: built on the client for the target URL.
pub type MakeRequest =
    Arc<dyn Fn(&reqwest::Client, &str, usize, u64) -> reqwest::RequestBuilder + Send + Sync>;

/// Time per round and concurrency, from the environment.
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    pub secs: f64,
    pub workers: usize,
}

impl Settings {
    pub fn from_env() -> Self {
        let var = |k: &str| std::env::var(k).ok();
        Settings {
            secs: var("FAKE_BENCH_SECONDS")
                .and_then(|s| s.parse().ok())
                .unwrap_or(2.0),
            workers: var("FAKE_BENCH_CONCURRENCY")
                .and_then(|s| s.parse().ok())
                .unwrap_or(8),
        }
    }
}

/// Serves `app` (through the fakes' own [`crate::serve`]) on a loopback port; returns its base URL.
pub async fn spawn_fake(app: Router) -> Result<String, String> {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let base = format!("http://{}", l.local_addr().map_err(|e| e.to_string())?);
    tokio::spawn(async move {
        let _ = crate::serve(l, app).await;
    });
    Ok(base)
}

/// A bare axum route `POST /bare` answering `status` and `body`; returns its URL.
pub async fn spawn_bare(status: StatusCode, body: Value) -> Result<String, String> {
    let app = Router::new().route(
        "/bare",
        post(move || {
            let body = body.clone();
            async move { (status, axum::Json(body)) }
        }),
    );
    let l = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let url = format!("http://{}/bare", l.local_addr().map_err(|e| e.to_string())?);
    tokio::spawn(async move {
        let _ = axum::serve(l, app).await;
    });
    Ok(url)
}

/// Requests per second against `url` for `secs`, every answer required to have `expect`.
pub async fn drive(
    url: &str,
    make: MakeRequest,
    expect: StatusCode,
    s: Settings,
) -> Result<f64, String> {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(s.workers)
        .build()
        .map_err(|e| e.to_string())?;
    let done = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs_f64(s.secs);
    let mut tasks = Vec::new();
    for w in 0..s.workers {
        let (client, url, done, make) =
            (client.clone(), url.to_string(), done.clone(), make.clone());
        tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            while Instant::now() < deadline {
                let r = make(&client, &url, w, n)
                    .send()
                    .await
                    .map_err(|e| e.to_string())?;
                if r.status().as_u16() != expect.as_u16() {
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
    Ok(done.load(Ordering::Relaxed) as f64 / s.secs)
}

/// The medians of [`ROUNDS`] alternating rounds: (bare, fake) requests per second. The bare
/// route gets the same requests without credentials.
pub async fn compare(
    bare_url: &str,
    fake_url: &str,
    make: MakeRequest,
    bearer: &'static str,
    expect: StatusCode,
    s: Settings,
) -> Result<(f64, f64), String> {
    let with_key: MakeRequest = {
        let make = make.clone();
        Arc::new(move |c: &reqwest::Client, u: &str, w, n| make(c, u, w, n).bearer_auth(bearer))
    };
    let (mut bare, mut fake) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        bare.push(drive(bare_url, make.clone(), expect, s).await?);
        fake.push(drive(fake_url, with_key.clone(), expect, s).await?);
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    Ok((median(bare), median(fake)))
}

/// Runs a benchmark's body on a multi-threaded runtime; an error exits 4.
pub fn main_with<F, T>(body: F) -> T
where
    F: std::future::Future<Output = Result<T, String>>,
{
    let result = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())
        .and_then(|rt| rt.block_on(body));
    match result {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(4);
        }
    }
}
