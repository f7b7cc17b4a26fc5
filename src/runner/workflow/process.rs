//! A workflow runner in processes of its own (`aocheck-sut/2`'s workflow operations; issue 41):
//! every drive is a fresh process (a resume is a new runner that knows only what its home
//! holds), given the case's fake-hermes, the channel and the home in its `init`, sent one
//! `workflow_start`, `workflow_resume` or `workflow_answer`, and stopped once it answered. A
//! kill is a SIGKILL of the process while a provider holds its request: the only place the
//! harness can stop another process exactly (the kills at a save point are the reference's
//! own, and a case that asks for one is unsupported here).

use crate::sut::message::{self, ChannelInit, HermesInit, Init, Op, Request};
use crate::sut::process::SutProcess;
use crate::sut::processes::{ProcessSpec, Spawner, case_folder};
use crate::workflow::host::Driven;
use crate::workflow::run::RunState;
use crate::workflow::store::StoreError;
use serde_json::Value;
use std::sync::Arc;

/// What one drive asks of the runner.
#[derive(Clone, Debug)]
pub(super) enum Call {
    Start,
    Resume,
    /// Answer the step the run waits for, then drive on.
    Answer {
        node: String,
        answer: Value,
    },
}

/// Why a drive did not park or end.
#[derive(Debug)]
pub(super) enum DriveErr {
    /// The runner refused (a missing or corrupt run, or another refusal).
    Store(StoreError),
    /// An answer to a step the run does not wait for.
    NotWaiting(String),
    /// aocheck could not talk to the runner, or its answer is not the protocol's.
    Harness(String),
}

/// The implementation's runner processes for one case.
#[derive(Clone, Debug)]
pub(super) struct Processes {
    spawner: Spawner,
}

/// A runner process started for one drive, and its label in the case's process log.
pub(super) struct Runner {
    pub(super) process: Arc<SutProcess>,
    pub(super) label: String,
}

impl Processes {
    /// The case's folder, its runner home (`sut/<case>/home/`) and the `init` every runner
    /// process gets.
    pub(super) fn new(
        spec: &ProcessSpec,
        case: &str,
        seed: u64,
        hermes: HermesInit,
        channel: &str,
    ) -> Result<(Processes, std::path::PathBuf), String> {
        let dir = case_folder(spec, case, "").map_err(|e| e.to_string())?;
        // A fresh home: a case run again (a replay, a shrinking candidate) starts from nothing.
        let old = dir.join("home");
        if old.exists() {
            std::fs::remove_dir_all(&old).map_err(|e| format!("{}: {e}", old.display()))?;
        }
        let home = case_folder(spec, case, "home").map_err(|e| e.to_string())?;
        // A workflow runner talks to fake-hermes and the channel, not to a payment provider.
        let mut init = Init::for_workflow(&dir, &home, case, seed);
        init.providers.hermes = Some(hermes);
        init.providers.channel = Some(ChannelInit {
            base_url: channel.to_string(),
        });
        let spawner = Spawner::new(
            spec.clone(),
            dir,
            init,
            crate::clock::ManualClock::at(crate::clock::Clock::now(&crate::clock::SystemClock).0),
            None,
        );
        Ok((Processes { spawner }, home))
    }

    /// A fresh runner process that lists `op`; `Ok(Err(why))` when it does not (the case is
    /// then unsupported).
    pub(super) async fn runner(&self, op: Op) -> Result<Result<Runner, String>, String> {
        let (process, hello, label) = self
            .spawner
            .spawn("runner", None)
            .await
            .map_err(|e| e.to_string())?;
        if !hello.supports(op) {
            let _ = self.spawner.kill(&process, &label, "stopped").await;
            return Ok(Err(format!(
                "the implementation does not list `{op}` (docs/sut-protocol.md, Hermes Workflow runner)"
            )));
        }
        Ok(Ok(Runner {
            process: Arc::new(process),
            label,
        }))
    }

    /// SIGKILL of a runner process.
    pub(super) async fn kill(&self, r: &Runner, why: &str) {
        let _ = self.spawner.kill(&r.process, &r.label, why).await;
    }

    /// Processes that outlived a kill of their group, and the process log.
    pub(super) fn escaped(&self) -> Vec<String> {
        self.spawner.escaped()
    }

    /// Every process started, with how it ended.
    pub(super) fn log(&self) -> Vec<String> {
        self.spawner.log()
    }

    pub(super) fn implementation(&self) -> Option<Value> {
        self.spawner.implementation()
    }
}

/// The request a drive sends.
pub(super) fn request(call: &Call, run_id: &str, name: &str, design: &Value) -> Request {
    match call {
        Call::Start => Request::WorkflowStart {
            name: name.to_string(),
            design: design.clone(),
            run_id: run_id.to_string(),
        },
        Call::Resume => Request::WorkflowResume {
            run_id: run_id.to_string(),
        },
        Call::Answer { node, answer } => Request::WorkflowAnswer {
            run_id: run_id.to_string(),
            node: node.clone(),
            answer: answer.clone(),
        },
    }
}

/// Sends `req` to the runner and reads its answer as a drive's end.
pub(super) async fn drive(
    r: Arc<SutProcess>,
    label: String,
    req: Request,
) -> Result<Driven, DriveErr> {
    let op = req.op();
    match r.call(op.name(), req.fields()).await {
        Ok(Ok(v)) => {
            let st = serde_json::from_value::<message::reply::WorkflowState>(v.clone())
                .and_then(|s| serde_json::from_value::<RunState>(s.state));
            match st {
                Ok(st) => Ok(Driven::Ran(Box::new(st))),
                Err(e) => Err(DriveErr::Harness(format!(
                    "protocol violation: {op} answered something other than {{\"state\": <a run state>}} ({e}): {}",
                    v.to_string().chars().take(300).collect::<String>()
                ))),
            }
        }
        Ok(Err(f)) => Err(match f.kind.as_str() {
            "missing" => DriveErr::Store(StoreError::Missing(f.message)),
            "corrupt" => DriveErr::Store(StoreError::Corrupt(f.message)),
            "not_waiting" => DriveErr::NotWaiting(f.message),
            kind => DriveErr::Store(StoreError::Io(format!("{kind}: {}", f.message))),
        }),
        Err(e) => Err(DriveErr::Harness(format!(
            "implementation process {label}: {e}"
        ))),
    }
}
