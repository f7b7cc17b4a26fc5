//! The workflow workload (seed 002; issue 41): schedules over a Hermes Workflow runner, drawn
//! from a seed and an index alone. A schedule starts one run of a design drawn from a few shapes
//! (one agent step or two, an approval, a false condition's branch, two outputs), then resumes
//! and answers it several times; before a drive it may arm faults (fake-hermes answers a start
//! with nothing after starting the run, or holds it; the channel refuses a delivery, loses its
//! answer, or holds it), and each drive may be killed: right after its nth save, in the middle
//! of its nth save, or while a provider holds its request (which then goes on). A schedule ends
//! with a resume that is not killed.
//!
//! Nothing a schedule does is judged by its form (no step says what status a drive leaves, and
//! an answer to a step the run no longer waits for is the runner's to refuse): every drive is
//! judged by the invariants alone (`check::workflow`, after every step, against fake-hermes's
//! ledger, the channel's and the state file a reader beside the runner reads).
//!
//! A schedule is fair ([`fair`], kept by generation and by shrinking alike): a hold is armed only
//! for the drive right after it, which is killed there (a hold the drive never reaches is
//! disarmed when it parks or ends: `runner::workflow`).

use super::file_name;
use super::rng::Rng;
use crate::case::{Case, Step, WorkflowKill};
use crate::providers::channel::ChannelFault;
use provider_model::hermes::faults::{Fault, Route};
use serde_json::{Value, json};

/// The design shapes a schedule draws from.
fn design(shape: u64) -> Value {
    let start = json!({"id": "start", "type": "trigger"});
    let draft = json!({"id": "draft", "type": "agent", "prompt": "Draft the release note", "after": ["start"]});
    let send = |after: &str| json!({"id": "send", "type": "output", "deliver": "channel", "target": "chat:releases", "after": [after]});
    let nodes = match shape {
        0 => json!([start, draft, send("draft")]),
        1 => json!([
            start,
            draft,
            {"id": "review", "type": "agent", "prompt": "Review the draft", "after": ["draft"]},
            send("review"),
        ]),
        2 => json!([
            start,
            draft,
            {"id": "approve", "type": "approval", "question": "Send this note?", "after": ["draft"]},
            send("approve"),
        ]),
        3 => json!([
            start,
            draft,
            {"id": "gate", "type": "condition", "expression": "out.draft.ready == true", "after": ["draft"]},
            {"id": "polish", "type": "agent", "prompt": "Polish the note", "after": ["gate"]},
            send("polish"),
            {"id": "log", "type": "output", "deliver": "notification", "after": ["draft"]},
        ]),
        _ => json!([
            start,
            draft,
            send("draft"),
            {"id": "notify", "type": "output", "deliver": "notification", "after": ["draft"]},
        ]),
    };
    json!({ "nodes": nodes })
}

/// The steps a run may wait for in a design: (node, the answer a person or a cron session
/// gives).
fn answers(d: &Value) -> Vec<(String, Value)> {
    d["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| {
            let id = n["id"].as_str()?.to_string();
            match n["type"].as_str()? {
                "approval" => Some((id, json!({"choice": "approve"}))),
                "agent" => Some((id, json!({"output": "Release 1.2: faster resumes."}))),
                _ => None,
            }
        })
        .collect()
}

/// Saves per drive worth killing at (a drive of these designs saves at most about ten times).
const SAVES: u64 = 8;
/// Drives after the start, at most.
const DRIVES: u64 = 4;

struct Gen {
    rng: Rng,
    case: Case,
    holds: u32,
    answers: Vec<(String, Value)>,
    /// Kills only at a held request (a runner in another process).
    holds_only: bool,
}

impl Gen {
    /// Keeps `block` if the schedule with it is valid and fair.
    fn push(&mut self, block: Vec<Step>) -> bool {
        super::keep_block(&mut self.case, block, |c| {
            crate::case::validate(&file_name(&c.id), c).is_empty() && fair(&c.steps)
        })
    }

    /// Faults armed before a drive, and the kill of that drive (`None`: not killed).
    fn faults_and_kill(&mut self) -> (Vec<Step>, Option<WorkflowKill>) {
        let mut faults = Vec::new();
        let mut hold = None;
        if self.rng.chance(1, 4) {
            let fault = if self.rng.chance(1, 2) {
                self.holds += 1;
                let name = format!("h{}", self.holds);
                hold = Some(name.clone());
                Fault::Hold { name }
            } else {
                Fault::CommitThenDrop
            };
            faults.push(Step::HermesFault {
                route: Route::Start,
                fault,
                nth: None,
                times: None,
            });
        }
        if self.rng.chance(1, 4) {
            let fault = match self.rng.below(4) {
                0 if hold.is_none() => {
                    self.holds += 1;
                    let name = format!("h{}", self.holds);
                    hold = Some(name.clone());
                    ChannelFault::Hold { name }
                }
                1 => ChannelFault::Refuse { status: 503 },
                2 => ChannelFault::Drop,
                _ => ChannelFault::LoseReply,
            };
            faults.push(Step::ChannelFault {
                fault,
                nth: None,
                times: None,
            });
        }
        let kill = match (hold, self.rng.below(3)) {
            (Some(h), _) => Some(WorkflowKill {
                save: None,
                mid_write: None,
                hold: Some(h),
            }),
            // A runner in another process is killed only at a hold: a save-point kill is drawn
            // as a held start instead (kept only where the drive reaches it: the schedule's
            // fairness).
            (None, 0 | 1) if self.holds_only => {
                self.holds += 1;
                let name = format!("h{}", self.holds);
                faults.push(Step::HermesFault {
                    route: Route::Start,
                    fault: Fault::Hold { name: name.clone() },
                    nth: None,
                    times: None,
                });
                Some(WorkflowKill {
                    save: None,
                    mid_write: None,
                    hold: Some(name),
                })
            }
            (None, 0) => Some(WorkflowKill {
                save: Some(1 + self.rng.below(SAVES) as u32),
                mid_write: None,
                hold: None,
            }),
            (None, 1) => Some(WorkflowKill {
                save: None,
                mid_write: Some(1 + self.rng.below(SAVES) as u32),
                hold: None,
            }),
            _ => None,
        };
        (faults, kill)
    }

    fn run(&mut self) {
        let d = design(self.rng.below(5));
        self.answers = answers(&d);
        let (mut block, kill) = self.faults_and_kill();
        block.push(Step::WorkflowStart {
            design: d,
            kill,
            status: None,
        });
        if !self.push(block) {
            // A start with nothing before it is always valid and fair.
            let d = design(0);
            self.answers = answers(&d);
            self.push(vec![Step::WorkflowStart {
                design: d,
                kill: None,
                status: None,
            }]);
        }
        for _ in 0..1 + self.rng.below(DRIVES) {
            let (mut block, kill) = self.faults_and_kill();
            let answer = (!self.answers.is_empty() && self.rng.chance(1, 3))
                .then(|| self.rng.pick(&self.answers).clone());
            block.push(match answer {
                Some((node, answer)) => Step::WorkflowAnswer {
                    node,
                    answer,
                    kill,
                    status: None,
                },
                None => Step::WorkflowResume {
                    kill,
                    status: None,
                    error: None,
                },
            });
            self.push(block);
        }
        self.push(vec![Step::WorkflowResume {
            kill: None,
            status: None,
            error: None,
        }]);
    }
}

/// Schedule `index` of `seed` of the workflow workload: the same pair gives the same case, byte
/// for byte.
///
/// `holds_only`: the runner is a process of the implementation, which the harness can kill only
/// while a provider holds its request; no kill at a save point is drawn (such a drive is drawn
/// with a hold instead).
pub fn generate(seed: u64, index: u64, holds_only: bool) -> Case {
    let mut rng = Rng::schedule(seed, index);
    // Its own stream: the same seed and index never give another workload's draws.
    rng.next_u64();
    rng.next_u64();
    let case = super::empty_schedule(
        (seed, index),
        "workflow",
        vec![
            "AOC-REQ-005".into(),
            "AOC-REQ-010".into(),
            "AOC-REQ-011".into(),
        ],
        "every workflow checker after every step, against fake-hermes's and the channel's ledgers and the saved state",
    );
    let mut g = Gen {
        rng,
        case,
        holds: 0,
        answers: Vec::new(),
        holds_only,
    };
    g.run();
    g.case
}

/// Whether a workflow schedule is fair: every hold is armed only for the next drive, which is
/// killed at it (`case::workflow::unfair_hold`, which the case rulebook applies too).
pub fn fair(steps: &[Step]) -> bool {
    crate::case::workflow::unfair_hold(steps).is_none()
}

/// The kill of a drive step, if it is one.
#[cfg(test)]
fn drive_kill(s: &Step) -> Option<&Option<WorkflowKill>> {
    match s {
        Step::WorkflowStart { kill, .. }
        | Step::WorkflowResume { kill, .. }
        | Step::WorkflowAnswer { kill, .. } => Some(kill),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Schedules are valid, fair cases, the same for the same seed and index, and they draw the
    /// whole vocabulary: every kind of kill, every fault, resumes and answers.
    #[test]
    fn schedules_are_valid_fair_and_draw_the_vocabulary() {
        let mut seen = std::collections::BTreeSet::new();
        for index in 0..200 {
            let c = generate(5, index, false);
            assert_eq!(c, generate(5, index, false));
            assert!(
                crate::case::validate(&file_name(&c.id), &c).is_empty(),
                "{:?}",
                crate::case::validate(&file_name(&c.id), &c)
            );
            assert!(fair(&c.steps));
            assert!(c.is_workflow());
            for s in &c.steps {
                seen.insert(s.verb());
                if let Some(Some(k)) = drive_kill(s) {
                    seen.insert(
                        match (k.save, k.mid_write, &k.hold) {
                            (Some(_), _, _) => "kill save",
                            (_, Some(_), _) => "kill mid_write",
                            _ => "kill hold",
                        }
                        .into(),
                    );
                }
                match s {
                    Step::HermesFault { fault, .. } => {
                        seen.insert(format!("hermes {fault}"));
                    }
                    Step::ChannelFault { fault, .. } => {
                        seen.insert(format!("channel {fault:?}"));
                    }
                    _ => {}
                }
            }
        }
        for want in [
            "workflow_start",
            "workflow_resume",
            "workflow_answer",
            "kill save",
            "kill mid_write",
            "kill hold",
            "hermes commit_then_drop",
            "channel LoseReply",
            "channel Drop",
        ] {
            assert!(seen.contains(want), "{want} never drawn: {seen:?}");
        }
    }

    /// For a runner in another process, no kill at a save point is drawn, and kills are still
    /// drawn (at holds), about as often as for the reference.
    #[test]
    fn a_process_runner_is_killed_only_at_holds() {
        let (mut holds, mut reference_kills) = (0, 0);
        for index in 0..200 {
            let c = generate(5, index, true);
            assert!(crate::case::validate(&file_name(&c.id), &c).is_empty());
            assert!(fair(&c.steps));
            for k in c.steps.iter().filter_map(drive_kill).flatten() {
                assert!(k.save.is_none() && k.mid_write.is_none(), "{k:?}");
                holds += 1;
            }
            reference_kills += generate(5, index, false)
                .steps
                .iter()
                .filter_map(drive_kill)
                .flatten()
                .count();
        }
        assert!(holds * 2 >= reference_kills, "{holds} of {reference_kills}");
    }

    /// Both ways: a hold armed for the drive that is killed at it is fair; one armed for a drive
    /// killed elsewhere, or never driven, is not.
    #[test]
    fn a_hold_is_armed_only_for_the_drive_killed_at_it() {
        let hold = |name: &str| Step::ChannelFault {
            fault: ChannelFault::Hold { name: name.into() },
            nth: None,
            times: None,
        };
        let resume = |h: Option<&str>| Step::WorkflowResume {
            kill: h.map(|h| WorkflowKill {
                save: None,
                mid_write: None,
                hold: Some(h.into()),
            }),
            status: None,
            error: None,
        };
        assert!(fair(&[hold("a"), resume(Some("a"))]));
        assert!(!fair(&[hold("a"), resume(None)]));
        assert!(!fair(&[hold("a"), resume(Some("b"))]));
        assert!(!fair(&[hold("a")]));
    }
}
