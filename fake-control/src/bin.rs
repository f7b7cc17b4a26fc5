//! What both fake binaries do at start: read JSON files with errors that name file, line and
//! column; bind; print `listening http://ADDR` (and any other banner lines) as the first lines on
//! stdout; serve until killed. Exit codes: 3 invalid input, 4 cannot bind or serve.

use axum::Router;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The options both binaries take.
#[derive(clap::Args, Debug)]
pub struct Common {
    /// Address to listen on (port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: String,
    /// Configuration (JSON). Default: the fake's built-in test configuration.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// A fault plan (JSON `{"rules": [...]}`) active from the start.
    #[arg(long)]
    pub faults: Option<PathBuf>,
}

/// Invalid configuration, fault plan or script.
pub const INVALID_INPUT: u8 = 3;
/// Cannot bind or serve.
pub const UNREACHABLE: u8 = 4;

/// Reads a JSON file; the error names the file, line and column.
pub fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text)
        .map_err(|e| format!("{}:{}:{}: {e}", path.display(), e.line(), e.column()))
}

/// Prints every defect on stderr and returns the invalid-input exit code.
pub fn fail(lines: impl IntoIterator<Item = String>) -> ExitCode {
    for l in lines {
        eprintln!("error: {l}");
    }
    ExitCode::from(INVALID_INPUT)
}

/// Binds `listen`, prints `listening http://ADDR` and `banner`, and serves `app`.
pub fn run(listen: &str, app: Router, banner: &[String]) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: runtime: {e}");
            return ExitCode::from(UNREACHABLE);
        }
    };
    rt.block_on(async move {
        let listener = match tokio::net::TcpListener::bind(listen).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("error: cannot listen on {listen}: {e}");
                return ExitCode::from(UNREACHABLE);
            }
        };
        let addr = listener
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        let mut out = std::io::stdout();
        let _ = writeln!(out, "listening http://{addr}");
        for line in banner {
            let _ = writeln!(out, "{line}");
        }
        let _ = out.flush();
        match crate::serve(listener, app).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(UNREACHABLE)
            }
        }
    })
}
