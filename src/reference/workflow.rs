//! The reference's Hermes Workflow runner behind `aocheck-sut/2` (seed 002; issue 41): a
//! process whose `init` names a `workflow` home answers `workflow_validate`, `workflow_start`,
//! `workflow_resume` and `workflow_answer` with the same runner the in-process cases drive
//! (`crate::workflow::host`): agent steps as Hermes runs on `providers.hermes`, deliveries to
//! `providers.channel` over HTTP, the state saved under the home after every step.
//!
//! One process is one runner: a resume in a new process knows only what the home holds.

use super::Knobs;
use super::dispatch::failure;
use crate::sut::message::{Failure, Init, PROTOCOL, Request, reply};
use crate::workflow::design::{self, Defect};
use crate::workflow::host::{self, AnswerError, Driven, HermesSeam, HttpChannel, Options};
use crate::workflow::run::RunState;
use crate::workflow::store::{Home, StoreError};
use serde_json::{Value, json};
use std::time::Duration;

/// One runner process.
#[derive(Debug)]
pub struct WorkflowServe {
    home: Home,
    hermes: Option<(String, String)>,
    /// Where outputs are delivered (`None`: a runner asked only to validate).
    channel: Option<String>,
    knobs: Knobs,
}

/// A store error as the protocol's failure: `missing`, `corrupt` (naming the run), `invalid`.
fn store_failure(e: &StoreError) -> Failure {
    let kind = match e {
        StoreError::Missing(_) => "missing",
        StoreError::Corrupt(_) => "corrupt",
        StoreError::BadName(_) | StoreError::Invalid(_) => "invalid",
        StoreError::Io(_) => "internal",
    };
    let mut f = failure(kind, None, e.to_string(), true);
    if let StoreError::Invalid(d) = e {
        f.details = Some(json!({ "defects": d }));
    }
    f
}

fn state(st: &RunState) -> Result<Value, Failure> {
    serde_json::to_value(reply::WorkflowState {
        state: serde_json::to_value(st)
            .map_err(|e| failure("internal", None, e.to_string(), true))?,
    })
    .map_err(|e| failure("internal", None, e.to_string(), true))
}

impl WorkflowServe {
    /// The runner `init` describes, or why not.
    pub fn open(init: &Init, knobs: Knobs) -> Result<WorkflowServe, String> {
        if init.protocol != PROTOCOL {
            return Err(format!(
                "protocol {:?} requested; this implementation speaks {PROTOCOL}",
                init.protocol
            ));
        }
        let w = init
            .workflow
            .as_ref()
            .ok_or("init.workflow is missing: a workflow runner needs its home")?;
        Ok(WorkflowServe {
            home: Home(w.home.clone().into()),
            hermes: init
                .providers
                .hermes
                .as_ref()
                .map(|h| (h.base_url.clone(), h.api_key.clone())),
            channel: init.providers.channel.as_ref().map(|c| c.base_url.clone()),
            knobs,
        })
    }

    fn validate(&self, graph: &Value) -> Vec<Defect> {
        match self.knobs.workflow() {
            #[cfg(feature = "test-knobs")]
            Some(d) => design::validate_broken(graph, d),
            _ => design::validate(graph),
        }
    }

    /// Answers one workflow request.
    pub async fn handle(&self, req: Request) -> Result<Value, Failure> {
        match req {
            Request::WorkflowValidate { graph } => serde_json::to_value(reply::Defects {
                defects: self.validate(&graph),
            })
            .map_err(|e| failure("internal", None, e.to_string(), true)),
            Request::WorkflowStart {
                name,
                design,
                run_id,
            } => {
                let defects = self.validate(&design);
                if !defects.is_empty() {
                    return Err(store_failure(&StoreError::Invalid(defects)));
                }
                self.home
                    .save_design(&name, &design)
                    .map_err(|e| store_failure(&e))?;
                if self.home.load_run(&run_id).is_ok() {
                    return Err(failure(
                        "invalid",
                        None,
                        format!("run {run_id} exists already: resume it"),
                        true,
                    ));
                }
                self.drive(&name, &run_id, false).await
            }
            Request::WorkflowResume { run_id } => {
                let st = self.home.load_run(&run_id).map_err(|e| store_failure(&e))?;
                self.drive(&st.name, &run_id, true).await
            }
            Request::WorkflowAnswer {
                run_id,
                node,
                answer,
            } => {
                let st = self.home.load_run(&run_id).map_err(|e| store_failure(&e))?;
                let plan = self.plan(&st.name)?;
                match host::answer(&self.home, &plan, &run_id, &node, answer) {
                    Ok(_) => {}
                    Err(AnswerError::Store(e)) => return Err(store_failure(&e)),
                    Err(AnswerError::NotWaiting(m)) => {
                        return Err(failure("not_waiting", None, m, true));
                    }
                }
                self.drive(&st.name, &run_id, true).await
            }
            other => Err(failure(
                "unsupported",
                None,
                format!(
                    "`{}`: this process is a workflow runner (its init named a workflow home)",
                    other.op()
                ),
                true,
            )),
        }
    }

    fn plan(&self, name: &str) -> Result<Vec<design::PlanStep>, Failure> {
        let graph = self.home.load_design(name).map_err(|e| store_failure(&e))?;
        design::build_run_plan(&graph).map_err(|d| store_failure(&StoreError::Invalid(d)))
    }

    async fn drive(&self, name: &str, run_id: &str, resume: bool) -> Result<Value, Failure> {
        let plan = self.plan(name)?;
        let internal = |m: String| failure("internal", None, m, false);
        let mut seam = match &self.hermes {
            Some((url, key)) => Some(HermesSeam {
                client: crate::operator::hermes::HermesClient::new(
                    url,
                    key,
                    Duration::from_secs(10),
                )
                .map_err(internal)?,
                poll: Duration::from_millis(20),
                patience: Duration::from_secs(30),
            }),
            None => None,
        };
        let mut channel = HttpChannel {
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()
                .map_err(|e| internal(format!("an HTTP client for the channel: {e}")))?,
            base: self.channel.clone().ok_or_else(|| {
                failure(
                    "invalid",
                    None,
                    "init.providers.channel is missing: a runner delivers its outputs there".into(),
                    true,
                )
            })?,
        };
        let opts = Options {
            resume,
            defect: self.knobs.workflow(),
            ..Options::default()
        };
        match host::drive_with(
            &self.home,
            &plan,
            (run_id, name),
            seam.as_mut(),
            &mut channel,
            &opts,
        )
        .await
        {
            Ok(Driven::Ran(st)) => state(&st),
            Ok(Driven::Halted { save }) => Err(internal(format!("halted at save {save}"))),
            Err(e) => Err(store_failure(&e)),
        }
    }
}
