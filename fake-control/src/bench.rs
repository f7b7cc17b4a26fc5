//! The benchmark driver both fakes' benches use (feature `testing`): the fake and bare axum
//! routes are served side by side on loopback and driven by the same raw load generator with the
//! same concurrency, in alternating rounds; medians are reported, so that a noisy neighbour on the
//! machine does not decide the ratio. `FAKE_BENCH_SECONDS` (per round, default
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
    Ok(format!("{}/bare", spawn_app(app).await?))
}

/// A bare axum `app` served with axum's own server on loopback; returns its base URL.
pub async fn spawn_app(app: Router) -> Result<String, String> {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let base = format!("http://{}", l.local_addr().map_err(|e| e.to_string())?);
    tokio::spawn(async move {
        let _ = axum::serve(l, app).await;
    });
    Ok(base)
}

/// One raw request of worker `w`, its `n`-th: (extra header lines, each ending in `\r\n`; body).
pub type RawRequest = Arc<dyn Fn(usize, u64) -> (String, Vec<u8>) + Send + Sync>;

/// Requests per second against `url` (`http://host:port/path`) for `secs`, with a load
/// generator that costs next to nothing: one keep-alive TCP connection per worker, the request
/// written as bytes, the reply read by its `Content-Length`, every status required to be
/// `expect`. (A general HTTP client in the same process spends more CPU per request than a bare
/// route does, and would measure itself.)
pub async fn drive_raw(
    url: &str,
    make: RawRequest,
    expect: StatusCode,
    s: Settings,
) -> Result<f64, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("{url}: only http:// URLs"))?;
    let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let path = if path.is_empty() { "/" } else { path };
    let done = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs_f64(s.secs);
    let mut tasks = Vec::new();
    for w in 0..s.workers {
        let (host, path, done, make) = (
            host.to_string(),
            path.to_string(),
            done.clone(),
            make.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut conn = tokio::net::TcpStream::connect(&host)
                .await
                .map_err(|e| format!("connect {host}: {e}"))?;
            conn.set_nodelay(true).map_err(|e| e.to_string())?;
            let mut out = Vec::with_capacity(1024);
            let mut buf = vec![0u8; 64 * 1024];
            let mut n = 0u64;
            while Instant::now() < deadline {
                let (headers, body) = make(w, n);
                out.clear();
                out.extend_from_slice(
                    format!(
                        "POST {path} HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{headers}\r\n",
                        body.len()
                    )
                    .as_bytes(),
                );
                out.extend_from_slice(&body);
                conn.write_all(&out).await.map_err(|e| e.to_string())?;
                let mut have = 0usize;
                let (head_end, status, length) = loop {
                    let k = conn
                        .read(&mut buf[have..])
                        .await
                        .map_err(|e| e.to_string())?;
                    if k == 0 {
                        return Err("the server closed the connection".to_string());
                    }
                    have += k;
                    if let Some(end) = find(&buf[..have], b"\r\n\r\n") {
                        let head = std::str::from_utf8(&buf[..end]).map_err(|e| e.to_string())?;
                        let status = head
                            .get(9..12)
                            .and_then(|c| c.parse::<u16>().ok())
                            .ok_or_else(|| format!("no status line in {head:?}"))?;
                        let length = head
                            .lines()
                            .find_map(|l| {
                                let (k, v) = l.split_once(':')?;
                                k.eq_ignore_ascii_case("content-length")
                                    .then(|| v.trim().parse::<usize>().ok())?
                            })
                            .ok_or_else(|| format!("no content-length in {head:?}"))?;
                        break (end + 4, status, length);
                    }
                    if have == buf.len() {
                        return Err("reply head larger than 64 KiB".to_string());
                    }
                };
                if head_end + length > buf.len() {
                    return Err(format!("reply body of {length} bytes is too large"));
                }
                while have < head_end + length {
                    let k = conn
                        .read(&mut buf[have..])
                        .await
                        .map_err(|e| e.to_string())?;
                    if k == 0 {
                        return Err("the server closed the connection mid-body".to_string());
                    }
                    have += k;
                }
                if status != expect.as_u16() {
                    return Err(format!("status {status}, expected {expect}"));
                }
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

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The medians of [`ROUNDS`] rounds over `targets` in turn (each round drives every target once,
/// so a noisy neighbour touches them alike), with [`drive_raw`]: requests per second per target.
pub async fn compare_raw(
    targets: &[(&str, RawRequest, StatusCode)],
    s: Settings,
) -> Result<Vec<f64>, String> {
    let mut got: Vec<Vec<f64>> = vec![Vec::new(); targets.len()];
    for _ in 0..ROUNDS {
        for (i, (url, make, expect)) in targets.iter().enumerate() {
            got[i].push(drive_raw(url, make.clone(), *expect, s).await?);
        }
    }
    Ok(got
        .into_iter()
        .map(|mut v| {
            v.sort_by(|a, b| a.total_cmp(b));
            v[v.len() / 2]
        })
        .collect())
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
