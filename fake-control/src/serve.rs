//! HTTP/1 serving for the fakes. Every connection carries a [`DropConn`] signal: a
//! `commit_then_drop` fault fires it and the connection closes without a reply.

use axum::Router;
use std::sync::Arc;
use tokio::sync::Notify;

/// Closes the request's connection without a reply when notified.
#[derive(Clone, Debug)]
pub struct DropConn(pub Arc<Notify>);

/// What one server tolerates: a client has `header_read` to send a request's head (a half-open
/// or idle connection is closed after it), and at most `max_connections` are served at once; a
/// connection beyond them is answered `503` with the `connection_limit` error and closed.
#[derive(Clone, Copy, Debug)]
pub struct ServeLimits {
    pub header_read: std::time::Duration,
    pub max_connections: usize,
}

impl Default for ServeLimits {
    fn default() -> Self {
        ServeLimits {
            header_read: std::time::Duration::from_secs(10),
            max_connections: 4096,
        }
    }
}

/// Raises this process's soft limit on open files to its hard limit, once: a fake serving in
/// the harness's own process must keep accepting under a thousand idle connections from the
/// judged implementation (issue 37), which a default soft limit of 1024 would not allow. Where
/// it cannot be raised the server still serves, and says why once.
pub fn raise_fd_limit() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
        let now = getrlimit(Resource::Nofile);
        if now.current == now.maximum {
            return;
        }
        let raised = Rlimit {
            current: now.maximum,
            maximum: now.maximum,
        };
        if let Err(e) = setrlimit(Resource::Nofile, raised) {
            eprintln!(
                "cannot raise the open-file limit from {:?} ({e})",
                now.current
            );
        }
    });
}

/// Serves `app` on `listener` until the task is dropped, with [`ServeLimits::default`].
pub async fn serve(listener: tokio::net::TcpListener, app: Router) -> std::io::Result<()> {
    serve_with(listener, app, ServeLimits::default()).await
}

/// The refusal of a connection beyond the limit: one complete HTTP/1.1 response, then close.
const OVER_LIMIT: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: 88\r\n\r\n{\"error\":{\"code\":\"connection_limit\",\"message\":\"too many open connections; retry later\"}}";

/// Serves `app` on `listener` until the task is dropped. An accept error (no file descriptor
/// left, say) never stops the server: it is logged and retried with backoff, from 10 ms up to 1 s.
pub async fn serve_with(
    listener: tokio::net::TcpListener,
    app: Router,
    limits: ServeLimits,
) -> std::io::Result<()> {
    raise_fd_limit();
    let permits = Arc::new(tokio::sync::Semaphore::new(limits.max_connections.max(1)));
    let mut backoff = std::time::Duration::from_millis(10);
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => {
                backoff = std::time::Duration::from_millis(10);
                // A reply written in pieces (an event stream's priming event, then its data)
                // goes out at once, not after the client's delayed acknowledgement.
                let _ = stream.set_nodelay(true);
                stream
            }
            Err(e) => {
                eprintln!(
                    "accept failed ({e}); retrying in {} ms",
                    backoff.as_millis()
                );
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(std::time::Duration::from_secs(1));
                continue;
            }
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            tokio::spawn(async move {
                use tokio::io::AsyncWriteExt;
                let mut stream = stream;
                let _ = stream.write_all(OVER_LIMIT).await;
                let _ = stream.shutdown().await;
            });
            continue;
        };
        let app = app.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let signal = Arc::new(Notify::new());
            let svc = app.layer(axum::Extension(DropConn(signal.clone())));
            let io = hyper_util::rt::TokioIo::new(stream);
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(limits.header_read)
                .keep_alive(true)
                .serve_connection(io, hyper_util::service::TowerToHyperService::new(svc));
            tokio::select! {
                _ = conn => {}
                _ = signal.notified() => {} // dropping `conn` closes the socket with no reply
            }
        });
    }
}

/// Reads a request body of at most `limit` bytes. A declared `Content-Length` above the limit is
/// refused before any byte is read; a body that grows past it while read is refused too. The
/// refusal is the fake's own (`too_large`).
pub async fn read_limited(
    headers: &axum::http::HeaderMap,
    body: axum::body::Body,
    limit: usize,
    too_large: impl Fn() -> axum::response::Response,
) -> Result<axum::body::Bytes, axum::response::Response> {
    let declared = headers
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(too_large());
    }
    axum::body::to_bytes(body, limit)
        .await
        .map_err(|_| too_large())
}

#[cfg(test)]
mod limit_tests {
    use super::*;
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    async fn start(limits: ServeLimits) -> std::net::SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let app = Router::new().route("/", axum::routing::get(|| async { "ok" }));
        tokio::spawn(serve_with(listener, app, limits));
        addr
    }

    /// Reads until the peer closes (or `within` passes); returns what was read and whether it
    /// closed.
    async fn read_to_close(s: &mut TcpStream, within: Duration) -> (String, bool) {
        let mut out = Vec::new();
        let mut buf = [0u8; 1024];
        let deadline = tokio::time::Instant::now() + within;
        loop {
            match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) => return (String::from_utf8_lossy(&out).into(), true),
                Ok(Ok(n)) => out.extend(&buf[..n]),
                Err(_) => return (String::from_utf8_lossy(&out).into(), false),
            }
        }
    }

    /// A client that starts a request and never finishes its head is cut off; one that is
    /// quick is served.
    #[tokio::test]
    async fn a_half_sent_request_head_is_cut_off() {
        let addr = start(ServeLimits {
            header_read: Duration::from_millis(150),
            max_connections: 8,
        })
        .await;
        let mut slow = TcpStream::connect(addr).await.expect("connect");
        slow.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n")
            .await
            .expect("write");
        let (_, closed) = read_to_close(&mut slow, Duration::from_secs(3)).await;
        assert!(
            closed,
            "a half-open request was held past the header-read timeout"
        );
        let mut quick = TcpStream::connect(addr).await.expect("connect");
        quick
            .write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .expect("write");
        let (got, _) = read_to_close(&mut quick, Duration::from_secs(3)).await;
        assert!(got.starts_with("HTTP/1.1 200"), "{got}");
    }

    /// Beyond the connection limit a client gets a clear refusal, and once connections close the
    /// server serves again.
    #[tokio::test]
    async fn the_connection_limit_refuses_clearly_and_recovers() {
        let addr = start(ServeLimits {
            header_read: Duration::from_secs(30),
            max_connections: 2,
        })
        .await;
        let a = TcpStream::connect(addr).await.expect("a");
        let b = TcpStream::connect(addr).await.expect("b");
        tokio::time::sleep(Duration::from_millis(50)).await;
        let mut c = TcpStream::connect(addr).await.expect("c");
        let (got, closed) = read_to_close(&mut c, Duration::from_secs(3)).await;
        assert!(closed && got.starts_with("HTTP/1.1 503"), "{got}");
        assert!(got.contains("\"connection_limit\""), "{got}");
        drop((a, b));
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut d = TcpStream::connect(addr).await.expect("d");
        d.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .expect("write");
        let (got, _) = read_to_close(&mut d, Duration::from_secs(3)).await;
        assert!(got.starts_with("HTTP/1.1 200"), "{got}");
    }
}
