//! The reference implementation behind `aocheck-sut/2` (`aocheck sut reference`): one process is
//! one executor generation. It reads requests from stdin, answers on stdout, logs on stderr, and
//! keeps everything durable in the store named by `init`, so a successor process on the same store
//! continues where a killed predecessor stopped.
//!
//! Requests are answered in order. A background `send` runs inside the process and dies with it,
//! which is what a SIGKILL during a held provider request needs.

use super::Knobs;
use super::dispatch::{self, Dispatch, failure};
use super::workflow::WorkflowServe;
use crate::sut::message::{self, DecodeError, Incoming};
use crate::sut::protocol::{self, MAX_LINE};
use serde_json::{Value, json};
use tokio::io::{AsyncWriteExt, BufReader};

/// What one process is: an executor generation (with its connector), or a workflow runner.
enum Served {
    Executor(Box<Dispatch>),
    Workflow(std::sync::Arc<WorkflowServe>),
}

/// Serves one process's lifetime on stdin/stdout. Returns the exit code.
pub async fn serve(knobs: Knobs) -> u8 {
    let mut input = BufReader::new(tokio::io::stdin());
    // One writer owns stdout; answers arrive from the main loop and from operator tasks.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Vec<u8>>();
    let writer = tokio::spawn(async move {
        let mut out = tokio::io::stdout();
        while let Some(bytes) = rx.recv().await {
            if out.write_all(&bytes).await.is_err() || out.flush().await.is_err() {
                return;
            }
        }
    });
    let send = move |id: u64, answer: Result<Value, message::Failure>| {
        let msg = match answer {
            Ok(v) => json!({"id": id, "ok": v}),
            Err(e) => json!({"id": id, "error": e}),
        };
        match serde_json::to_vec(&msg) {
            Ok(mut bytes) => {
                bytes.push(b'\n');
                let _ = tx.send(bytes);
            }
            Err(e) => eprintln!("aocheck-reference: cannot encode a response: {e}"),
        }
    };
    let mut served: Option<Served> = None;
    loop {
        let line = match protocol::read_line(&mut input, MAX_LINE).await {
            Ok(Ok(Some(l))) => l,
            Ok(Ok(None)) => {
                // The harness closed stdin: write what is already answered, then go (requests
                // still in flight are abandoned with the process).
                drop(send);
                let _ = tokio::time::timeout(std::time::Duration::from_secs(1), writer).await;
                return crate::exit::OK;
            }
            Ok(Err(v)) => {
                eprintln!("aocheck-reference: {v}");
                return crate::exit::INVALID_INPUT;
            }
            Err(e) => {
                eprintln!("aocheck-reference: reading stdin: {e}");
                return crate::exit::INVALID_INPUT;
            }
        };
        let (id, answer) = match (message::decode(&line), served.as_mut()) {
            (Err(DecodeError::NoId(e)), _) => {
                // Without an id there is nothing to answer: say why on stderr and stop.
                eprintln!(
                    "aocheck-reference: not a request ({e}): {}",
                    String::from_utf8_lossy(&line[..line.len().min(200)])
                );
                return crate::exit::INVALID_INPUT;
            }
            (Err(DecodeError::Unsupported { id, op }), _) => (
                id,
                Err(failure(
                    "unsupported",
                    None,
                    format!("operation {op:?} is not implemented"),
                    true,
                )),
            ),
            (Err(DecodeError::Invalid { id, op, reason }), _) => {
                let m = if op == "init" {
                    format!("init: {reason}")
                } else {
                    format!("`{op}`: {reason}")
                };
                (id, Err(failure("invalid", None, m, true)))
            }
            // A workflow home makes the process a workflow runner (seed 002).
            (Ok(Incoming::Init { id, init }), None) if init.workflow.is_some() => {
                match WorkflowServe::open(&init, knobs) {
                    Ok(w) => {
                        eprintln!("aocheck-reference: workflow runner ready");
                        served = Some(Served::Workflow(std::sync::Arc::new(w)));
                        (id, Ok(json!(dispatch::hello(knobs))))
                    }
                    Err(m) => (id, Err(failure("invalid", None, m, true))),
                }
            }
            (Ok(Incoming::Init { id, init }), None) => match Dispatch::open(*init, knobs).await {
                Ok(s) => {
                    eprintln!("aocheck-reference: executor {} ready", s.name());
                    served = Some(Served::Executor(Box::new(s)));
                    (id, Ok(json!(dispatch::hello(knobs))))
                }
                Err(m) => (id, Err(failure("invalid", None, m, true))),
            },
            (Ok(Incoming::Init { id, .. }), Some(_)) => (
                id,
                Err(failure(
                    "invalid",
                    None,
                    "init was already answered".into(),
                    true,
                )),
            ),
            (Ok(Incoming::Request(env)), None) => (
                env.id,
                Err(failure(
                    "invalid",
                    None,
                    format!("`{}` before init", env.request.op()),
                    true,
                )),
            ),
            (Ok(Incoming::Request(env)), Some(Served::Workflow(w))) => {
                let (w, send) = (w.clone(), send.clone());
                tokio::spawn(async move { send(env.id, w.handle(env.request).await) });
                continue;
            }
            (Ok(Incoming::Request(env)), Some(Served::Executor(s)))
                if env.request.op().is_operator() =>
            {
                let side = s.operator_side();
                let send = send.clone();
                tokio::spawn(async move { send(env.id, side.operator(env.request).await) });
                continue;
            }
            (Ok(Incoming::Request(env)), Some(Served::Executor(s))) => {
                (env.id, s.handle(env.now, env.request).await)
            }
        };
        send(id, answer);
    }
}
