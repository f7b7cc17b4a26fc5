//! HTTP/1 serving for the fakes. Every connection carries a [`DropConn`] signal: a
//! `commit_then_drop` fault fires it and the connection closes without a reply.

use axum::Router;
use std::sync::Arc;
use tokio::sync::Notify;

/// Closes the request's connection without a reply when notified.
#[derive(Clone, Debug)]
pub struct DropConn(pub Arc<Notify>);

/// Serves `app` on `listener` until the task is dropped.
pub async fn serve(listener: tokio::net::TcpListener, app: Router) -> std::io::Result<()> {
    loop {
        let (stream, _) = listener.accept().await?;
        let app = app.clone();
        tokio::spawn(async move {
            let signal = Arc::new(Notify::new());
            let svc = app.layer(axum::Extension(DropConn(signal.clone())));
            let io = hyper_util::rt::TokioIo::new(stream);
            let conn = hyper::server::conn::http1::Builder::new()
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
