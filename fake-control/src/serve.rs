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
