//! The Hermes workload: schedules over the operator connector's vocabulary (seed 000), drawn
//! from a seed and an index alone, as the AOC workload's are (`schedule`): several source
//! Actions invoked and replayed by several connector instances (concurrently, in the
//! background), instances killed (also while fake-hermes holds their start) and restarted (a
//! step on a killed instance starts it again), start faults (held, lost reply, 5xx after
//! commit, 4xx/5xx before it, a 2xx without a run id), event-stream and status faults, approval
//! prompts resumed once, for the session, always or denied (and exact resume replays), approval
//! faults, stops and cancels (a stop stuck in `stopping`, a completion racing the stop),
//! delegation under a policy that allows it, the manifest, and a Hermes restart.
//!
//! Every operator step expects `any` (D65): it is judged by the invariants alone (`check::hermes`
//! after every step, against fake-hermes's ledger). There is no clock step: the case's Hermes
//! clock is driven by the harness and moves whenever everyone waits on it, so a claim expiry,
//! a stop's grace or an approval's timeout pass without one.
//!
//! A Hermes schedule is fair ([`fair`], kept by generation and by shrinking alike): fake-hermes
//! takes a request by the first fault rule that is due, so a start fault is declared only for the
//! first start of a new Action that comes at once; a hold is armed only for the background
//! start that follows it, waited for, and released (with only background replays and kills in
//! between); and a wait for a binding comes only right after the background invocation of a new
//! Action. Anything else could leave a step waiting for what never comes (a harness error, not a
//! finding).

use super::rng::Rng;
use super::{MAX_STEPS, file_name};
use crate::case::{Case, Expect, Step};
use crate::sut::message::Op;
use provider_model::hermes::faults::{Fault, Route};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};

/// The connector instances a schedule uses (`p1` is the case's default instance).
const INSTANCES: [&str; 3] = ["p1", "p2", "p3"];
/// Source Actions per schedule, at most.
const ACTIONS: usize = 4;
const CHOICES: [&str; 4] = ["once", "session", "always", "deny"];

/// The scripts fake-hermes runs (`None`: its default, a short text reply).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Script {
    Default,
    Tool,
    Approval,
    TwoApprovals,
    Long,
    Fails,
}

impl Script {
    fn json(self) -> Value {
        let message = json!({"id": "m", "kind": "message", "text": "done", "after": ["t"]});
        let steps = match self {
            Script::Default => return provider_model::hermes::script::default_script(),
            Script::Tool => json!([
                {"id": "t", "kind": "tool", "tool": "search", "duration_ms": 300},
                message,
            ]),
            Script::Approval => json!([
                {"id": "t", "kind": "approval", "tool": "terminal", "command": "rm -rf build/"},
                message,
            ]),
            Script::TwoApprovals => json!([
                {"id": "ap", "kind": "approval", "tool": "terminal", "command": "rm -rf build/"},
                {"id": "t", "kind": "approval", "tool": "terminal", "command": "rm -rf dist/", "after": ["ap"]},
                message,
            ]),
            Script::Long => json!([
                {"id": "t", "kind": "tool", "tool": "search", "duration_ms": 5000},
                message,
            ]),
            Script::Fails => json!([
                {"id": "t", "kind": "tool", "tool": "search", "duration_ms": 100},
                {"id": "f", "kind": "fail", "error": "the tool broke", "after": ["t"]},
            ]),
        };
        json!({ "steps": steps })
    }

    fn prompts(self) -> bool {
        matches!(self, Script::Approval | Script::TwoApprovals)
    }
}

/// A delegated child as first delegated: a replay sends exactly the same request.
#[derive(Clone, Debug)]
struct Child {
    label: String,
    capability: Option<String>,
    chain: Option<u32>,
    approval: Option<String>,
    child: Option<String>,
}

/// What the steps so far made, as far as the generator needs to know.
#[derive(Clone, Debug, Default)]
struct Model {
    /// Source Actions invoked: label → objective.
    actions: BTreeMap<String, String>,
    /// Source Actions started under a script that prompts for approval.
    prompting: BTreeSet<String>,
    /// Resume Actions: (label, source, choice).
    resumes: Vec<(String, String, String)>,
    children: Vec<Child>,
    /// Instances that have run a step (a kill of another kills nothing).
    used: BTreeSet<&'static str>,
    killed: BTreeSet<&'static str>,
    script: Option<Script>,
    delegation: bool,
    next_hold: u32,
}

struct Gen<'a> {
    rng: Rng,
    m: Model,
    case: Case,
    ops: Option<&'a BTreeSet<Op>>,
}

fn any() -> Expect {
    Expect(Some("any".into()))
}

/// An instance as a step names it (`p1` is the default, left out).
fn named(p: &str) -> Option<String> {
    (p != "p1").then(|| p.to_string())
}

fn invoke(action: &str, objective: &str, instance: &str, background: bool) -> Step {
    Step::OperatorInvoke {
        action: action.into(),
        objective: Some(objective.into()),
        resume: None,
        choice: None,
        instance: named(instance),
        background,
        result: None,
        error: None,
        expect: any(),
    }
}

fn fault(route: Route, fault: Fault) -> Step {
    Step::HermesFault {
        route,
        fault,
        nth: None,
        times: None,
    }
}

/// Schedule `index` of `seed` of the Hermes workload: the same pair gives the same case, byte
/// for byte. `ops`, when given, is what the implementation declares.
pub fn generate(seed: u64, index: u64, ops: Option<&BTreeSet<Op>>) -> Case {
    let mut rng = Rng::schedule(seed, index);
    // Its own stream: the same seed and index never give the AOC schedule's draws.
    rng.next_u64();
    let case = super::empty_schedule(
        (seed, index),
        "Hermes",
        crate::aoc::requirement::Req::ALL
            .iter()
            .map(|r| r.id().to_string())
            .collect(),
        "every checker after every step, against fake-hermes's ledger",
    );
    let mut g = Gen {
        rng,
        m: Model::default(),
        case,
        ops,
    };
    g.run();
    g.case
}

impl Gen<'_> {
    /// Keeps `block` if the schedule with it is valid, fair and within the declared operations.
    fn push(&mut self, block: Vec<Step>) -> bool {
        let ops = self.ops;
        super::keep_block(&mut self.case, block, |c| {
            crate::case::validate(&file_name(&c.id), c).is_empty()
                && fair(&c.steps)
                && ops.is_none_or(|ops| crate::runner::required_ops(c).is_subset(ops))
        })
    }

    fn run(&mut self) {
        let target = 4 + self.rng.below((MAX_STEPS - 4) as u64) as usize;
        let mut stalls = 0;
        while self.case.steps.len() < target && stalls < 40 {
            if self.step() {
                stalls = 0;
            } else {
                stalls += 1;
            }
        }
    }

    fn instance(&mut self) -> &'static str {
        INSTANCES[self.rng.below(INSTANCES.len() as u64) as usize]
    }

    /// The instance a replay runs on: at times one that was killed (it starts again, with
    /// nothing in memory of what it did before), otherwise any.
    fn replayer(&mut self) -> &'static str {
        let killed: Vec<&'static str> = self.m.killed.iter().copied().collect();
        if !killed.is_empty() && self.rng.chance(1, 2) {
            killed[self.rng.below(killed.len() as u64) as usize]
        } else {
            self.instance()
        }
    }

    fn action(&mut self) -> Option<(String, String)> {
        let all: Vec<(String, String)> = self
            .m
            .actions
            .iter()
            .map(|(a, o)| (a.clone(), o.clone()))
            .collect();
        (!all.is_empty()).then(|| self.rng.pick(&all).clone())
    }

    /// A new source Action (label, objective), if the schedule may have another.
    fn new_action(&mut self) -> Option<(String, String)> {
        let n = self.m.actions.len();
        (n < ACTIONS).then(|| (format!("a{}", n + 1), format!("objective {}", n + 1)))
    }

    /// Records what a kept block did to the model.
    fn made(&mut self, block: &[Step]) {
        for s in block {
            match s {
                Step::OperatorInvoke {
                    action,
                    objective: Some(o),
                    instance,
                    ..
                } => {
                    // The first input is the Action's (a changed one is a collision).
                    if !self.m.actions.contains_key(action) {
                        self.m.actions.insert(action.clone(), o.clone());
                        if self.m.script.is_some_and(Script::prompts) {
                            self.m.prompting.insert(action.clone());
                        }
                    }
                    self.restart(instance);
                }
                Step::OperatorInvoke {
                    action,
                    resume: Some(source),
                    choice: Some(choice),
                    instance,
                    ..
                } => {
                    if !self.m.resumes.iter().any(|(r, _, _)| r == action) {
                        self.m
                            .resumes
                            .push((action.clone(), source.clone(), choice.clone()));
                    }
                    self.restart(instance);
                }
                Step::OperatorCancel { instance, .. } | Step::OperatorDelegate { instance, .. } => {
                    self.restart(instance)
                }
                Step::OperatorKill { instance } => {
                    if let Some(p) = INSTANCES.iter().find(|p| *p == instance) {
                        self.m.killed.insert(p);
                    }
                }
                Step::HermesScript { script } => {
                    self.m.script = [
                        Script::Default,
                        Script::Tool,
                        Script::Approval,
                        Script::TwoApprovals,
                        Script::Long,
                        Script::Fails,
                    ]
                    .into_iter()
                    .find(|k| k.json() == *script);
                }
                Step::OperatorConfigure { policy, .. } => {
                    self.m.delegation = policy.contains_key("delegation_enabled");
                    // Every connector is stopped; each starts again at its next step.
                    self.m.killed.clear();
                    self.m.used.clear();
                }
                _ => {}
            }
        }
    }

    /// A step on an instance starts it (again, after a kill).
    fn restart(&mut self, instance: &Option<String>) {
        let p = instance.as_deref().unwrap_or("p1");
        if let Some(p) = INSTANCES.iter().find(|x| **x == p) {
            self.m.killed.remove(p);
            self.m.used.insert(p);
        }
    }

    fn keep(&mut self, block: Vec<Step>) -> bool {
        let b = block.clone();
        let ok = self.push(block);
        if ok {
            self.made(&b);
        }
        ok
    }

    /// Draws one block and keeps it if it is valid; false if nothing was kept.
    fn step(&mut self) -> bool {
        if self.m.actions.is_empty() && self.m.children.is_empty() {
            // Something to act on first (a script alone would leave nothing to judge).
            return match self.rng.weighted(&[8, 2, 1, 1, 2]) {
                0 => self.start(),
                1 => self.held(),
                2 => self.delegate(),
                3 => self.concurrent(),
                _ => self.prompt(),
            };
        }
        let resumable = if self.m.prompting.is_empty() { 2 } else { 14 };
        // A killed instance makes replays (restarts) likelier.
        let replays = if self.m.killed.is_empty() { 8 } else { 14 };
        let w: [u32; 13] = [
            10,        // 0 a new Action, at times after a fault for its start or stream
            replays,   // 1 a replay of an Action, on any instance (a killed one restarts)
            6,         // 2 concurrent replays in the background
            6,         // 3 a start Hermes holds (a kill, a replay, then a release)
            5,         // 4 a kill
            4,         // 5 another script
            resumable, // 6 a resume, or its exact replay
            6,         // 7 a stop of a running Action (and its faults)
            3,         // 8 a cancel of any Action
            4,         // 9 a delegation (the policy first, when it does not allow one)
            1,         // 10 the manifest
            1,         // 11 a Hermes restart
            5,         // 12 a new Action that prompts, resumed (and the resume replayed)
        ];
        match self.rng.weighted(&w) {
            0 => self.start(),
            1 => self.replay(),
            2 => self.concurrent(),
            3 => self.held(),
            4 => self.kill(),
            5 => self.script(),
            6 => self.resume(),
            7 => self.stop(),
            8 => self.cancel(),
            9 => self.delegate(),
            10 => self.keep(vec![Step::OperatorManifest {}]),
            11 => self.keep(vec![Step::HermesForget {}]),
            _ => self.prompt(),
        }
    }

    fn script(&mut self) -> bool {
        match self.script_step() {
            Some(s) => self.keep(vec![s]),
            None => false,
        }
    }

    /// Another script than the one in force.
    fn script_step(&mut self) -> Option<Step> {
        let k = *self.rng.pick(&[
            Script::Default,
            Script::Tool,
            Script::Approval,
            Script::TwoApprovals,
            Script::TwoApprovals,
            Script::Long,
            Script::Fails,
        ]);
        (self.m.script != Some(k)).then(|| Step::HermesScript { script: k.json() })
    }

    /// The fault, if any, that the start of a new Action meets: on the start itself, on its
    /// event stream, or on the status it polls.
    fn start_fault(&mut self) -> Option<Step> {
        let f = match self.rng.below(16) {
            0 | 1 => fault(
                Route::Start,
                Fault::CommitThen {
                    status: *self.rng.pick(&[500, 502, 503]),
                },
            ),
            2 | 3 => fault(Route::Start, Fault::CommitThenDrop),
            4 => fault(
                Route::Start,
                Fault::Reject {
                    status: *self.rng.pick(&[500, 503, 400, 409, 429]),
                },
            ),
            5 => fault(Route::Start, Fault::StartWithoutRunId),
            6 => fault(Route::Events, Fault::Events404),
            7 => fault(
                Route::Events,
                Fault::GarbleFrame {
                    frame: 1 + self.rng.below(2) as u32,
                },
            ),
            8 => fault(
                Route::Events,
                Fault::DropStream {
                    after: self.rng.below(2) as u32,
                },
            ),
            9 => fault(Route::Status, Fault::Forget),
            10 => fault(
                Route::Status,
                Fault::Reject {
                    status: *self.rng.pick(&[500, 503, 404]),
                },
            ),
            11 => fault(Route::Status, Fault::Delay { ms: 50 }),
            _ => return None,
        };
        Some(f)
    }

    /// A new Action, in the foreground (or in the background, then settled), at times after a
    /// fault its start meets.
    fn start(&mut self) -> bool {
        let Some((a, o)) = self.new_action() else {
            return self.replay();
        };
        let p = self.instance();
        let mut block = Vec::new();
        if self.rng.chance(1, 4) {
            block.extend(self.script_step());
        }
        block.extend(self.start_fault());
        if self.rng.chance(1, 4) {
            block.push(invoke(&a, &o, p, true));
            block.push(Step::OperatorSettle {});
        } else {
            block.push(invoke(&a, &o, p, false));
        }
        self.keep(block)
    }

    /// A replay of an Action, at times with another input under the same Action id (seed 000
    /// item 3: an idempotency collision; nothing new may start).
    fn replay(&mut self) -> bool {
        let Some((a, mut o)) = self.action() else {
            return false;
        };
        if self.rng.chance(1, 8) {
            o.push_str(", changed");
        }
        let p = self.replayer();
        self.keep(vec![invoke(&a, &o, p, false)])
    }

    /// Two or three instances replay one Action at once (a new one, mostly after a fault for
    /// its start), then every background invocation is waited for.
    fn concurrent(&mut self) -> bool {
        let mut block = Vec::new();
        let (a, o) = match self.new_action() {
            Some(x) if self.rng.chance(2, 3) => {
                block.extend(self.start_fault());
                x
            }
            _ => match self.action() {
                Some(x) => x,
                None => return false,
            },
        };
        let n = 2 + self.rng.below(2) as usize;
        let mut who = INSTANCES.to_vec();
        for _ in 0..n {
            let p = who.remove(self.rng.below(who.len() as u64) as usize);
            block.push(invoke(&a, &o, p, true));
        }
        block.push(Step::OperatorSettle {});
        self.keep(block)
    }

    /// A start fake-hermes holds: the invoking instance is killed while it is parked (mostly),
    /// another instance may replay meanwhile, then fake-hermes starts the run (or refuses it).
    fn held(&mut self) -> bool {
        let Some((a, o)) = self.new_action() else {
            return false;
        };
        let hold = format!("h{}", self.m.next_hold + 1);
        let p = self.instance();
        let mut block = vec![
            fault(Route::Start, Fault::Hold { name: hold.clone() }),
            invoke(&a, &o, p, true),
            Step::HermesWaitParked { hold: hold.clone() },
        ];
        if self.rng.chance(1, 3) {
            let others: Vec<&str> = INSTANCES.iter().copied().filter(|x| *x != p).collect();
            let q = *self.rng.pick(&others);
            block.push(invoke(&a, &o, q, true));
        }
        if self.rng.chance(3, 4) {
            block.push(Step::OperatorKill {
                instance: p.to_string(),
            });
        }
        let reject = self
            .rng
            .chance(1, 4)
            .then(|| *self.rng.pick(&[503, 500, 409]));
        block.push(Step::HermesRelease { hold, reject });
        block.push(Step::OperatorSettle {});
        let ok = self.keep(block);
        if ok {
            self.m.next_hold += 1;
        }
        ok
    }

    fn kill(&mut self) -> bool {
        let alive: Vec<&'static str> = self
            .m
            .used
            .iter()
            .copied()
            .filter(|p| !self.m.killed.contains(p))
            .collect();
        if alive.is_empty() {
            return false;
        }
        let p = *self.rng.pick(&alive);
        self.keep(vec![Step::OperatorKill {
            instance: p.to_string(),
        }])
    }

    /// A resume of an Action that prompted (mostly), new or the exact replay of an earlier one,
    /// at times after an approval fault.
    fn resume(&mut self) -> bool {
        let p = self.instance();
        if !self.m.resumes.is_empty() && self.rng.chance(2, 5) {
            let (r, source, choice) = self.rng.pick(&self.m.resumes).clone();
            return self.keep(vec![resume(&r, &source, &choice, p)]);
        }
        let prompting: Vec<String> = self.m.prompting.iter().cloned().collect();
        let source = if !prompting.is_empty() && self.rng.chance(5, 6) {
            self.rng.pick(&prompting).clone()
        } else {
            match self.action() {
                Some((a, _)) => a,
                None => return false,
            }
        };
        let r = format!("r{}", self.m.resumes.len() + 1);
        let choice = *self.rng.pick(&CHOICES);
        let mut block: Vec<Step> = self.approval_fault().into_iter().collect();
        block.push(resume(&r, &source, choice, p));
        self.keep(block)
    }

    /// At times, a fault the next approval command meets.
    fn approval_fault(&mut self) -> Option<Step> {
        if !self.rng.chance(1, 3) {
            return None;
        }
        let f = match self.rng.below(4) {
            0 => Fault::Reject {
                status: *self.rng.pick(&[409, 500]),
            },
            1 => Fault::CommitThen { status: 500 },
            2 => Fault::CommitThenDrop,
            _ => Fault::Delay { ms: 50 },
        };
        Some(fault(Route::Approval, f))
    }

    /// A new Action under a script that prompts for approval, resumed at once (mostly once),
    /// and at times the exact replay of that resume, by the same instance or another.
    fn prompt(&mut self) -> bool {
        let Some((a, o)) = self.new_action() else {
            return self.resume();
        };
        let mut block = Vec::new();
        if !self.m.script.is_some_and(Script::prompts) {
            let k = if self.rng.chance(3, 4) {
                Script::TwoApprovals
            } else {
                Script::Approval
            };
            block.push(Step::HermesScript { script: k.json() });
        }
        let p = self.instance();
        block.push(invoke(&a, &o, p, false));
        let r = format!("r{}", self.m.resumes.len() + 1);
        let choice = CHOICES[self.rng.weighted(&[4, 1, 1, 1])];
        let q = self.instance();
        block.extend(self.approval_fault());
        block.push(resume(&r, &a, choice, q));
        if self.rng.chance(1, 2) {
            let q = self.instance();
            block.push(resume(&r, &a, choice, q));
        }
        self.keep(block)
    }

    /// A stop of a running Action: a new one under a long script, started in the background,
    /// bound, then cancelled (at times after a stop fault: stuck in `stopping`, a completion
    /// racing the stop, a refusal, a 5xx after the stop), then every invocation waited for.
    fn stop(&mut self) -> bool {
        let Some((a, o)) = self.new_action() else {
            return self.cancel();
        };
        let mut block = Vec::new();
        if self.m.script != Some(Script::Long) && self.rng.chance(4, 5) {
            block.push(Step::HermesScript {
                script: Script::Long.json(),
            });
        }
        let p = self.instance();
        block.push(invoke(&a, &o, p, true));
        block.push(Step::OperatorWaitBound { action: a.clone() });
        if self.rng.chance(2, 3) {
            let f = match self.rng.below(4) {
                0 => Fault::StopStuck,
                1 => Fault::CompleteRacesStop,
                2 => Fault::Reject { status: 503 },
                _ => Fault::CommitThen { status: 502 },
            };
            block.push(fault(Route::Stop, f));
        }
        let q = self.instance();
        block.push(Step::OperatorCancel {
            action: a,
            instance: named(q),
            status: None,
            expect: any(),
        });
        block.push(Step::OperatorSettle {});
        self.keep(block)
    }

    fn cancel(&mut self) -> bool {
        let Some((a, _)) = self.action() else {
            return false;
        };
        let p = self.instance();
        self.keep(vec![Step::OperatorCancel {
            action: a,
            instance: named(p),
            status: None,
            expect: any(),
        }])
    }

    /// A delegated child (the policy that allows delegation first, when it is not in force):
    /// mostly one AIP approved and ran; at times one the admission rules or the resolver must
    /// refuse; or the exact replay of an earlier one.
    fn delegate(&mut self) -> bool {
        let mut block = Vec::new();
        if !self.m.delegation {
            let mut policy = serde_json::Map::new();
            policy.insert("delegation_enabled".into(), json!(true));
            policy.insert("delegation_capability_prefixes".into(), json!(["cap:crm:"]));
            policy.insert("delegation_scope_prefixes".into(), json!(["crm:"]));
            if self.rng.chance(1, 2) {
                policy.insert("max_delegation_depth".into(), json!(3));
            }
            block.push(Step::OperatorConfigure {
                policy,
                tenant: None,
                resolver: true,
                error: None,
            });
        }
        let p = self.instance();
        let child = if !self.m.children.is_empty() && self.rng.chance(1, 3) {
            self.rng.pick(&self.m.children).clone()
        } else {
            let label = format!("c{}", self.m.children.len() + 1);
            let mut c = Child {
                label,
                capability: None,
                chain: None,
                approval: None,
                child: None,
            };
            match self.rng.below(10) {
                0 => {
                    c.child = Some(
                        self.rng
                            .pick(&crate::case::model::DELEGATED_CHILD[1..])
                            .to_string(),
                    )
                }
                1 => {
                    c.approval = Some(
                        self.rng
                            .pick(&["none", "unstored", "expired", "other_action"])
                            .to_string(),
                    )
                }
                2 => c.capability = Some("cap:payments:send".into()),
                3 => c.chain = Some(2),
                _ => {}
            }
            c
        };
        block.push(Step::OperatorDelegate {
            action: child.label.clone(),
            capability: child.capability.clone(),
            scope: None,
            chain: child.chain,
            approval: child.approval.clone(),
            child: child.child.clone(),
            instance: named(p),
            result: None,
            error: None,
            expect: any(),
        });
        let ok = self.keep(block);
        if ok && !self.m.children.iter().any(|c| c.label == child.label) {
            self.m.children.push(child);
        }
        ok
    }
}

fn resume(r: &str, source: &str, choice: &str, instance: &str) -> Step {
    Step::OperatorInvoke {
        action: r.into(),
        objective: None,
        resume: Some(source.into()),
        choice: Some(choice.into()),
        instance: named(instance),
        background: false,
        result: None,
        error: None,
        expect: any(),
    }
}

/// The step index of the release that ends the held start declared at `i` (a start hold, the
/// background invocation it parks, the wait until it is parked, only background invocations and
/// kills, then its release), or `None` when `i` declares no hold or its block is not whole.
pub fn held_span(steps: &[Step], i: usize) -> Option<usize> {
    let Some(Step::HermesFault {
        route: Route::Start,
        fault: Fault::Hold { name },
        ..
    }) = steps.get(i)
    else {
        return None;
    };
    let parked = matches!(
        steps.get(i + 1),
        Some(Step::OperatorInvoke {
            objective: Some(_),
            background: true,
            ..
        })
    ) && matches!(steps.get(i + 2), Some(Step::HermesWaitParked { hold }) if hold == name);
    if !parked {
        return None;
    }
    let end = steps
        .iter()
        .enumerate()
        .skip(i + 3)
        .find(|(_, s)| {
            !matches!(
                s,
                Step::OperatorKill { .. }
                    | Step::OperatorInvoke {
                        background: true,
                        ..
                    }
            )
        })
        .map(|(k, _)| k)?;
    matches!(&steps[end], Step::HermesRelease { hold, .. } if hold == name).then_some(end)
}

/// Whether a schedule is fair to the implementation and to the harness on the Hermes side
/// (the module's doc says why):
/// - a start fault other than a hold is followed at once by the first invocation of an Action;
/// - a hold is the first start of an Action, in a whole block ([`held_span`]);
/// - a wait for a binding follows at once the first invocation of its Action, in the background;
/// - every background invocation is waited for (a later `operator_settle`) or its instance is
///   killed, so a schedule's end never cuts one short (a finding would then come and go).
///
/// A schedule without Hermes steps is fair here.
pub fn fair(steps: &[Step]) -> bool {
    let mut invoked: BTreeSet<&str> = BTreeSet::new();
    // The first invocation of an Action, at `i`.
    let first = |i: usize, invoked: &BTreeSet<&str>| {
        matches!(steps.get(i), Some(Step::OperatorInvoke { action, objective: Some(_), .. })
            if !invoked.contains(action.as_str()))
    };
    let mut held_until = None;
    for (i, s) in steps.iter().enumerate() {
        if held_until.is_some_and(|end| i <= end) {
            // Inside a held block (checked whole when it began).
        } else {
            match s {
                Step::HermesFault {
                    route: Route::Start,
                    fault: Fault::Hold { .. },
                    ..
                } => match held_span(steps, i) {
                    Some(end) if first(i + 1, &invoked) => held_until = Some(end),
                    _ => return false,
                },
                Step::HermesFault {
                    route: Route::Start,
                    ..
                } if !first(i + 1, &invoked) => return false,
                Step::HermesWaitParked { .. } | Step::HermesRelease { .. } => return false,
                Step::OperatorWaitBound { action } => {
                    let after_first = i > 0
                        && first(i - 1, &invoked)
                        && matches!(&steps[i - 1], Step::OperatorInvoke { action: a, background: true, .. } if a == action);
                    if !after_first {
                        return false;
                    }
                }
                _ => {}
            }
        }
        if let Step::OperatorInvoke {
            action,
            instance,
            background,
            ..
        } = s
        {
            if *background {
                let me = instance.as_deref().unwrap_or("p1");
                let waited = steps[i + 1..].iter().any(|t| match t {
                    Step::OperatorSettle {} => true,
                    Step::OperatorKill { instance } => instance == me,
                    _ => false,
                });
                if !waited {
                    return false;
                }
            }
            // The wait above looked before this invocation counted.
            if !matches!(steps.get(i + 1), Some(Step::OperatorWaitBound { .. })) {
                invoked.insert(action);
            }
        }
        if let Step::OperatorDelegate { action, .. } | Step::OperatorWaitBound { action } = s {
            invoked.insert(action);
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explore::schedule::{Workload, generate as any_workload};

    /// Valid, fair, bounded, and written as a file that reads back as the same case (the
    /// determinism, byte for byte, is `tests/it/explore_hermes.rs`'s).
    #[test]
    fn schedules_are_cases_the_validator_accepts() {
        let written = |c: &Case| super::super::yaml::case(c);
        let broken: Vec<String> = (0..300)
            .map(|index| generate(7, index, None))
            .filter_map(|c| {
                let defects = crate::case::validate(&file_name(&c.id), &c);
                let back = serde_saphyr::from_str::<Case>(&written(&c)).ok();
                let sound = defects.is_empty()
                    && fair(&c.steps)
                    && (2..=MAX_STEPS).contains(&c.steps.len())
                    && back.as_ref() == Some(&c);
                (!sound).then(|| format!("{}: {defects:?}\n{}", c.id, written(&c)))
            })
            .collect();
        assert!(broken.is_empty(), "{broken:#?}");
    }

    #[test]
    fn unfair_schedules_are_named() {
        let hold = |n: &str| fault(Route::Start, Fault::Hold { name: n.into() });
        let wait = |n: &str| Step::HermesWaitParked { hold: n.into() };
        let release = |n: &str| Step::HermesRelease {
            hold: n.into(),
            reject: None,
        };
        let kill = Step::OperatorKill {
            instance: "p1".into(),
        };
        let settle = Step::OperatorSettle {};
        let fair_held = vec![
            hold("h"),
            invoke("a1", "x", "p1", true),
            wait("h"),
            invoke("a1", "x", "p2", true),
            kill.clone(),
            release("h"),
            invoke("a1", "x", "p1", false),
            settle.clone(),
        ];
        assert!(fair(&fair_held));
        assert_eq!(held_span(&fair_held, 0), Some(5));
        // Not released; a background invocation never waited for; a foreground invocation
        // while parked; a replay is no start to hold.
        assert!(!fair(&fair_held[..5]));
        assert!(!fair(&fair_held[..7]));
        let mut fg = fair_held.clone();
        fg[3] = invoke("a1", "x", "p2", false);
        assert!(!fair(&fg));
        let mut replayed = vec![invoke("a1", "x", "p1", false)];
        replayed.extend(fair_held.clone());
        assert!(!fair(&replayed));
        // A start fault that a replay would leave armed; a wait for a binding of a replay.
        let lost = fault(Route::Start, Fault::CommitThenDrop);
        assert!(fair(&[lost.clone(), invoke("a1", "x", "p1", false)]));
        assert!(!fair(&[
            invoke("a1", "x", "p1", false),
            lost,
            invoke("a1", "x", "p1", false)
        ]));
        let bound = Step::OperatorWaitBound {
            action: "a1".into(),
        };
        assert!(fair(&[
            invoke("a1", "x", "p1", true),
            bound.clone(),
            settle.clone()
        ]));
        assert!(!fair(&[
            invoke("a1", "x", "p1", false),
            invoke("a1", "x", "p1", true),
            bound,
            settle
        ]));
        assert!(!fair(&[wait("h")]));
    }

    #[test]
    fn schedules_stay_within_the_declared_operations() {
        // Without delegation or the manifest.
        let ops: BTreeSet<Op> = [
            Op::State,
            Op::Lane,
            Op::Settle,
            Op::Invoke,
            Op::Cancel,
            Op::Binding,
        ]
        .into();
        super::super::schedule::stay_within(&ops, |index, ops| generate(9, index, Some(ops)));
    }

    #[test]
    fn the_vocabulary_is_drawn() {
        let mut verbs = BTreeSet::new();
        let mut faults = BTreeSet::new();
        let mut choices = BTreeSet::new();
        let mut restarts = 0;
        let mut kills_at_hold = 0;
        let mut changed = 0;
        for index in 0..600 {
            let c = generate(11, index, None);
            let mut killed: BTreeSet<String> = BTreeSet::new();
            for (i, s) in c.steps.iter().enumerate() {
                verbs.insert(s.verb());
                match s {
                    Step::HermesFault { route, fault, .. } => {
                        faults.insert(format!("{} {}", route.label(), fault.kind().label()));
                    }
                    Step::OperatorInvoke {
                        choice: Some(ch), ..
                    } => {
                        choices.insert(ch.clone());
                    }
                    Step::OperatorInvoke {
                        objective: Some(o), ..
                    } if o.ends_with(", changed") => changed += 1,
                    Step::OperatorKill { instance } => {
                        killed.insert(instance.clone());
                        if c.steps[..i]
                            .iter()
                            .rev()
                            .take_while(|s| !matches!(s, Step::HermesRelease { .. }))
                            .any(|s| matches!(s, Step::HermesWaitParked { .. }))
                        {
                            kills_at_hold += 1;
                        }
                    }
                    _ => {}
                }
                if let Step::OperatorInvoke { instance, .. } = s
                    && killed.remove(instance.as_deref().unwrap_or("p1"))
                {
                    restarts += 1;
                }
            }
        }
        for v in [
            "operator_invoke",
            "operator_cancel",
            "operator_configure",
            "operator_delegate",
            "operator_manifest",
            "operator_wait_bound",
            "operator_settle",
            "operator_kill",
            "hermes_fault",
            "hermes_script",
            "hermes_wait_parked",
            "hermes_release",
            "hermes_forget",
        ] {
            assert!(verbs.contains(v), "{v} never drawn");
        }
        // What is drawn is what the coverage table lists, both ways.
        let listed: BTreeSet<String> = super::super::coverage::HERMES_FAULTS
            .iter()
            .map(|(k, r)| format!("{} {}", r.label(), k.label()))
            .collect();
        assert_eq!(faults, listed);
        assert_eq!(choices.len(), 4, "{choices:?}");
        assert!(
            restarts > 20 && kills_at_hold > 20,
            "{restarts} {kills_at_hold}"
        );
        assert!(changed > 0, "no replay with another input");
    }

    #[test]
    fn all_alternates_the_workloads_by_index() {
        for index in 0..20 {
            let c = any_workload(Workload::All, 3, index, None);
            let hermes = c.steps.iter().any(|s| {
                let v = s.verb();
                v.starts_with("operator_") || v.starts_with("hermes_")
            });
            assert_eq!(hermes, index % 2 == 1, "schedule {index}");
        }
    }
}
