//! What both fakes' tests need (feature `testing`): a fake served on a loopback port for one
//! test, a binary started and its address read, and a file-based invalid-input check.

use axum::Router;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A fake served on loopback for the life of a test.
#[derive(Debug)]
pub struct Served<H> {
    pub base: String,
    pub handle: H,
    pub client: reqwest::Client,
    task: tokio::task::JoinHandle<()>,
}

impl<H> Drop for Served<H> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl<H> Served<H> {
    /// Serves `app` (with [`crate::serve`]); the client gives up after `timeout`.
    pub async fn start(app: Router, handle: H, timeout: Duration) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback port");
        let base = format!("http://{}", listener.local_addr().expect("local address"));
        let task = tokio::spawn(async move {
            let _ = crate::serve(listener, app).await;
        });
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .expect("client");
        Served {
            base,
            handle,
            client,
            task,
        }
    }
}

/// A fake binary started with `args`: the child and the address from its first line
/// (`listening http://ADDR`). Kill it when done.
pub fn spawn_binary(exe: &str, args: &[&str]) -> (Child, String) {
    let mut child = Command::new(exe)
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("read the first line");
    let addr = line
        .trim()
        .strip_prefix("listening http://")
        .expect("the address line")
        .to_string();
    (child, addr)
}

/// A GET against a started binary, on a runtime of its own: status and JSON body.
pub fn get_json(url: &str) -> (u16, serde_json::Value) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let r = reqwest::get(url).await.expect("request");
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(serde_json::Value::Null))
    })
}

/// Runs `exe` with `flag FILE`, where FILE holds `contents`; returns the exit code and stderr.
pub fn run_with_file(exe: &str, flag: &str, name: &str, contents: &str) -> (Option<i32>, String) {
    // One folder per call: tests of one binary run at once.
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let dir = std::env::temp_dir().join(format!("fake-control-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(name);
    std::fs::write(&path, contents).expect("write");
    let out = Command::new(exe)
        .arg(flag)
        .arg(&path)
        .output()
        .expect("run");
    let _ = std::fs::remove_dir_all(&dir);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
