//! One drive of the runner under test, with the case's kill and the reader beside it: the
//! reference in process (a task of its own, stopped at its save points), or a fresh process of
//! the implementation (killed with SIGKILL while a provider holds its request).

use super::process::{self, Call, DriveErr, Processes};
use super::reader::{Stop, read_beside};
use super::{Case, DESIGN, DRIVE_DEADLINE, Drove, HOLD_WAIT, Problem, Runner, Site};
use crate::case::WorkflowKill;
use crate::providers::holds;
use crate::workflow::host::{self, AnswerError, Driven, Halt, HermesSeam, Options};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

impl Case<'_> {
    /// One drive, with the case's kill and the reader beside it: the reference in process, or a
    /// fresh process of the implementation.
    pub(super) async fn drive(
        &mut self,
        kill: &Option<WorkflowKill>,
        call: Call,
    ) -> Result<Drove, Problem> {
        let path = self
            .home
            .run_file(&self.run_id)
            .map_err(|e| Problem::Harness(e.to_string()))?;
        let (path_again, before) = (path.clone(), std::fs::read(&path).ok());
        let stop = Stop(Arc::new(AtomicBool::new(false)));
        let reader = tokio::task::spawn_blocking({
            let stop = stop.0.clone();
            move || read_beside(path, stop)
        });
        let out = match &self.runner {
            Runner::Reference(defect) => {
                let task = self.reference_task(kill, call, *defect)?;
                self.drive_ending(task, kill, None).await
            }
            Runner::Processes(p) => {
                let p = p.clone();
                let op = process::request(&call, &self.run_id, DESIGN, &self.design).op();
                match p.runner(op).await.map_err(Problem::Harness)? {
                    Err(why) => Err(Problem::Unsupported(why)),
                    Ok(r) => {
                        let req = process::request(&call, &self.run_id, DESIGN, &self.design);
                        let task =
                            tokio::spawn(process::drive(r.process.clone(), r.label.clone(), req));
                        let out = self.drive_ending(task, kill, Some((&p, &r))).await;
                        if !matches!(out, Ok(Drove::Killed(_))) {
                            p.kill(&r, "stopped after its drive").await;
                        }
                        out
                    }
                }
            }
        };
        drop(stop);
        let seen = reader
            .await
            .map_err(|e| Problem::Harness(format!("the reader beside the runner: {e}")))?;
        if !self.damaged {
            for st in seen.states {
                if self.between.last() != Some(&st) {
                    self.between.push(st);
                }
            }
        }
        if !self.damaged && seen.reads > 0 {
            let found = crate::check::workflow::reader_saw(
                &self.run_id,
                (seen.partial.as_deref(), seen.not_state.as_deref()),
                (seen.in_place, seen.vanished),
                &mut self.facts,
            );
            self.found.extend(found);
        }
        if seen.overflow && !self.damaged {
            return Err(Problem::Harness(format!(
                "the runner saved more distinct states in one drive than the reader beside it keeps ({}); those after were read and not judged, so the drive cannot be decided",
                super::reader::MAX_BETWEEN
            )));
        }
        // A refusal changes nothing: the run file is as it was before the drive (a runner that
        // refuses a damaged run, or an answer, and then writes over it acts on what it refused).
        if matches!(out, Ok(Drove::Refused(_) | Drove::NotWaiting(_)))
            && std::fs::read(&path_again).ok() != before
        {
            self.found
                .push(crate::check::workflow::changed_after_refusal(
                    &self.run_id,
                    &mut self.facts,
                ));
        }
        out
    }

    /// The reference's drive in a task of its own (an answer first, when that is the call).
    fn reference_task(
        &self,
        kill: &Option<WorkflowKill>,
        call: Call,
        defect: Option<crate::workflow::WorkflowDefect>,
    ) -> Result<tokio::task::JoinHandle<Result<Driven, DriveErr>>, Problem> {
        let halt = Halt {
            after_save: kill.as_ref().and_then(|k| k.save),
            mid_write: kill.as_ref().and_then(|k| k.mid_write),
        };
        let opts = Options {
            halt,
            resume: !matches!(call, Call::Start),
            defect,
        };
        let client = crate::operator::hermes::HermesClient::new(
            &self.hermes.url,
            &self.api_key,
            Duration::from_secs(10),
        )
        .map_err(Problem::Harness)?;
        let mut seam = HermesSeam {
            client,
            poll: Duration::from_millis(20),
            patience: Duration::from_secs(30),
        };
        let mut channel = host::HttpChannel {
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()
                .map_err(|e| Problem::Harness(format!("an HTTP client for the channel: {e}")))?,
            base: self.channel_url.clone(),
        };
        let (home, plan, run_id) = (self.home.clone(), self.plan.clone(), self.run_id.clone());
        Ok(tokio::spawn(async move {
            if let Call::Answer { node, answer } = call {
                match host::answer(&home, &plan, &run_id, &node, answer) {
                    Ok(_) => {}
                    Err(AnswerError::NotWaiting(m)) => return Err(DriveErr::NotWaiting(m)),
                    Err(AnswerError::Store(e)) => return Err(DriveErr::Store(e)),
                }
            }
            host::drive_with(
                &home,
                &plan,
                (&run_id, DESIGN),
                Some(&mut seam),
                &mut channel,
                &opts,
            )
            .await
            .map_err(DriveErr::Store)
        }))
    }

    async fn drive_ending(
        &mut self,
        mut task: tokio::task::JoinHandle<Result<Driven, DriveErr>>,
        kill: &Option<WorkflowKill>,
        process: Option<(&Processes, &process::Runner)>,
    ) -> Result<Drove, Problem> {
        let joined = |r: Result<Result<Driven, DriveErr>, tokio::task::JoinError>| match r {
            Ok(Ok(Driven::Ran(st))) => Ok(Drove::Ran(st)),
            Ok(Ok(Driven::Halted { save })) => Ok(Drove::Killed(format!("stopped at save {save}"))),
            Ok(Err(DriveErr::Store(e))) => Ok(Drove::Refused(e)),
            Ok(Err(DriveErr::NotWaiting(m))) => Ok(Drove::NotWaiting(m)),
            Ok(Err(DriveErr::Harness(m))) => Err(Problem::Harness(m)),
            Err(e) => Err(Problem::Harness(format!("the runner's task ended: {e}"))),
        };
        let sigkill = |why: String| async move {
            if let Some((p, r)) = process {
                p.kill(r, &why).await;
            }
        };
        let Some(hold) = kill.as_ref().and_then(|k| k.hold.clone()) else {
            return match tokio::time::timeout(DRIVE_DEADLINE, &mut task).await {
                Ok(r) => joined(r),
                Err(_) => {
                    task.abort();
                    Err(Problem::Harness(format!(
                        "the runner did not park or end within {} s",
                        DRIVE_DEADLINE.as_secs()
                    )))
                }
            };
        };
        let site = self.sites.get(&hold).copied();
        let runs_before = self.hermes.handle.ledger().runs.len();
        // The runner may park or end before it reaches the hold: then no kill happened.
        let why = format!("killed with SIGKILL while its request was held at {hold:?}");
        let killed = match site {
            Some(Site::Hermes) => {
                holds::kill_at(
                    &self.hermes.handle,
                    &hold,
                    HOLD_WAIT,
                    &mut task,
                    sigkill(why),
                )
                .await
            }
            Some(Site::Channel) => {
                holds::kill_at(&self.channel, &hold, HOLD_WAIT, &mut task, sigkill(why)).await
            }
            None => {
                task.abort();
                return Err(Problem::Harness(format!(
                    "no fault of the case holds requests as {hold:?}"
                )));
            }
        };
        match killed.map_err(|e| Problem::Harness(e.to_string()))? {
            holds::KillAt::Ended(r) => return joined(r),
            holds::KillAt::Killed => {}
        }
        // A held start commits in a task of its own: wait until the run is in the ledger.
        if site == Some(Site::Hermes) {
            let until = Instant::now() + HOLD_WAIT;
            while self.hermes.handle.ledger().runs.len() <= runs_before {
                if Instant::now() >= until {
                    return Err(Problem::Harness(format!(
                        "the start held at {hold:?} was let go, and no run was in fake-hermes's ledger within {} s",
                        HOLD_WAIT.as_secs()
                    )));
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        Ok(Drove::Killed(format!(
            "killed while {} held its request at {hold:?}; the request then went on",
            match site {
                Some(Site::Hermes) => "fake-hermes",
                _ => "the channel",
            }
        )))
    }
}
