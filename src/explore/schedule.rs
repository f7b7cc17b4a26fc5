//! Generation: a schedule is a case (the same step vocabulary, the same validator) drawn from a
//! seed and an index alone. Every step is drawn against a model of what the earlier steps made
//! (executors joined, alive or killed, occurrences created, holds declared), then kept only if
//! the case validator accepts the schedule with it and the implementation lists every operation
//! it needs: valid by construction, and within what the implementation declares.
//!
//! Steps carry `expect: any`: a schedule has no per-step or final expectation; it is judged by
//! the invariants alone (every checker after every step, against the providers' ledgers).

use super::rng::Rng;
use crate::case::{Case, CaseConfig, Expect, FinalExpect, Step};
use crate::sut::message::{CreateLabels, Op, RemedyKind};
use provider_model::payments::faults::{Fault, ForgeMode, Op as POp};
use std::collections::BTreeSet;

/// What the explorer explores.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Workload {
    /// The AOC coordination domain and the payment provider.
    Aoc,
    /// The Hermes operator connector and fake-hermes (`explore::hermes`).
    Hermes,
    /// Both, alternating by schedule index (even: AOC, odd: Hermes).
    All,
}

impl Workload {
    pub fn parse(s: &str) -> Option<Workload> {
        match s {
            "aoc" => Some(Workload::Aoc),
            "hermes" => Some(Workload::Hermes),
            "all" => Some(Workload::All),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Workload::Aoc => "aoc",
            Workload::Hermes => "hermes",
            Workload::All => "all",
        }
    }
}

pub use super::{MAX_STEPS, file_name, schedule_id};

fn any() -> Expect {
    Expect(Some("any".into()))
}

/// The steps that act on one occurrence and differ in nothing but their verb.
#[derive(Clone, Copy, Debug)]
enum Act {
    Reserve,
    Enter,
    Send,
    Execute,
    Adopt,
    Reconcile,
}

/// One of them (a `send` in the foreground).
fn act(a: Act, occurrence: String, executor: Option<String>, expect: Expect) -> Step {
    match a {
        Act::Reserve => Step::Reserve {
            occurrence,
            executor,
            expect,
        },
        Act::Enter => Step::Enter {
            occurrence,
            executor,
            expect,
        },
        Act::Send => Step::Send {
            occurrence,
            executor,
            background: false,
            expect,
        },
        Act::Execute => Step::Execute {
            occurrence,
            executor,
            expect,
        },
        Act::Adopt => Step::Adopt {
            occurrence,
            executor,
            expect,
        },
        Act::Reconcile => Step::Reconcile {
            occurrence,
            executor,
            expect,
        },
    }
}

#[derive(Clone, Debug)]
struct Exec {
    name: String,
    alive: bool,
}

/// The model of what the steps so far made.
#[derive(Clone, Debug, Default)]
struct Model {
    execs: Vec<Exec>,
    /// Index into `execs` of the lane's current executor (none after it was killed).
    current: Option<usize>,
    occs: Vec<String>,
    /// Occurrences that are originals (not remedies), for remedies.
    originals: Vec<String>,
    next_exec: u32,
    next_occ: u32,
    next_remedy: u32,
    next_hold: u32,
    /// Submissions made (seed 003's admission queue).
    subs: Vec<String>,
    /// How far each occurrence has come, as far as the steps asked (0 created, 1 reserved, 2
    /// executed): a guess, since the implementation may refuse any step; it steers the
    /// schedule towards provider requests, where the faults are.
    phase: std::collections::BTreeMap<String, u8>,
    /// Claims asked for (each names the submission the lane must hand out next).
    claims: usize,
    /// The clock advanced so far (the provider may forget only past its retention).
    advanced: u64,
}

impl Model {
    fn new_exec(&mut self) -> String {
        self.next_exec += 1;
        format!("e{}", self.next_exec)
    }
    fn alive_others(&self) -> Vec<String> {
        self.execs
            .iter()
            .enumerate()
            .filter(|(i, e)| e.alive && Some(*i) != self.current)
            .map(|(_, e)| e.name.clone())
            .collect()
    }
    fn alive(&self) -> Vec<String> {
        self.execs
            .iter()
            .filter(|e| e.alive)
            .map(|e| e.name.clone())
            .collect()
    }
    fn current_name(&self) -> Option<String> {
        self.current.map(|i| self.execs[i].name.clone())
    }
}

/// The generator of one schedule.
struct Gen<'a> {
    rng: Rng,
    m: Model,
    steps: Vec<Step>,
    case: Case,
    ops: Option<&'a BTreeSet<Op>>,
    admissions: bool,
    /// Swarm testing: each schedule leaves out some step kinds and fault kinds and draws others
    /// three times as often (a multiplier per kind: 0, 1 or 3), so that some schedules
    /// concentrate on a few kinds and reach the long chains a uniform mix rarely builds.
    swarm: [u32; 19],
    fault_swarm: [u32; 10],
    /// A story some schedules follow: one occurrence's way through a long chain (see
    /// `Gen::story`), and how far it has come.
    story: Option<Story>,
}

/// One occurrence's way through the chain a uniform mix of steps rarely builds: its request
/// left unknown (a lost reply, a committed 5xx, a 5xx), a day passes and the provider forgets
/// its idempotency index, a successor takes the lane over, asks the provider, and acts on the
/// occurrence (executes, releases, enters or sends it again). Each link is a step the mix draws
/// anyway; the story only draws them in order, about one occurrence.
#[derive(Clone, Debug)]
struct Story {
    /// The occurrence, once the story has chosen one.
    occurrence: Option<String>,
    /// The next link: 0 the unknown request, 1 the day and the forgetting, 2 the question to
    /// the provider, 3 the act.
    link: u8,
}

/// A swarm multiplier: left out, as drawn, or three times as often.
fn swarm_multiplier(rng: &mut Rng) -> u32 {
    [0, 1, 3][rng.weighted(&[1, 3, 1])]
}

/// The statuses a fault rejects with, by weight: 5xx more often than 4xx.
const REJECT: [u16; 6] = [500, 502, 503, 400, 409, 429];
/// How long a lease lives, as the generator steers by it (the reference's default; another
/// implementation's may differ, and every step expects `any`).
const LEASE_MS: u64 = 300_000;
// A day past the provider's retention, most often: what makes the provider forget.
const ADVANCE_MS: [u64; 7] = [
    1_000, 30_001, 60_001, 3_600_000, 86_400_001, 86_400_001, 86_400_001,
];
const REASONS: [&str; 3] = [
    "owner_abandoned",
    "predecessor_never_entered",
    "deadline_expired",
];
const REMEDIES: [RemedyKind; 6] = [
    RemedyKind::Refund,
    RemedyKind::Reversal,
    RemedyKind::Compensation,
    RemedyKind::Adjustment,
    RemedyKind::ReplacementAttempt,
    RemedyKind::NewAllocation,
];
const AMOUNTS: [i64; 4] = [1250, 1, 99_999, 4200];

/// Schedule `index` of `seed`: the same pair gives the same case, byte for byte. `ops`, when
/// given, is what the implementation declares: no step needs another operation.
pub fn generate(workload: Workload, seed: u64, index: u64, ops: Option<&BTreeSet<Op>>) -> Case {
    match workload {
        Workload::Aoc => {}
        Workload::All if index.is_multiple_of(2) => {}
        Workload::Hermes | Workload::All => return super::hermes::generate(seed, index, ops),
    }
    let mut rng = Rng::schedule(seed, index);
    let idempotency = match rng.weighted(&[6, 3, 1]) {
        0 => None,
        1 => Some("ietf-draft".to_string()),
        _ => Some("none".to_string()),
    };
    let action_fence = rng.chance(1, 6);
    let aadp = rng
        .chance(1, 6)
        .then_some(crate::aoc::composition::AadpAccounting::Distinct);
    // A third of the schedules also drive seed 003's admission queue.
    let admissions = rng.chance(1, 3);
    let id = schedule_id(seed, index);
    let case = Case {
        id: id.clone(),
        title: format!("Schedule {index} of seed {seed}"),
        requirements: crate::aoc::requirement::Req::ALL
            .iter()
            .map(|r| r.id().to_string())
            .collect(),
        description: Some(
            "Generated by aocheck explore: judged by the invariants alone (every checker after every step)."
                .into(),
        ),
        config: CaseConfig {
            idempotency,
            action_fence,
            aadp,
            ..CaseConfig::default()
        },
        steps: Vec::new(),
        expect: FinalExpect::default(),
    };
    let mut swarm = [0; 19];
    swarm
        .iter_mut()
        .for_each(|m| *m = swarm_multiplier(&mut rng));
    // Creations and executions are never left out: without them nothing reaches the provider.
    swarm[0] = swarm[0].max(1);
    swarm[5] = swarm[5].max(1);
    let mut fault_swarm = [0; 10];
    fault_swarm
        .iter_mut()
        .for_each(|m| *m = swarm_multiplier(&mut rng));
    let mut g = Gen {
        rng,
        m: Model::default(),
        steps: Vec::new(),
        case,
        ops,
        admissions,
        swarm,
        fault_swarm,
        story: None,
    };
    // A quarter of the schedules follow a story.
    if g.rng.chance(1, 4) {
        g.story = Some(Story {
            occurrence: None,
            link: 0,
        });
    }
    g.run();
    g.case.steps = g.steps;
    g.case
}

impl Gen<'_> {
    /// Keeps `block` if the schedule with it is valid and within the declared operations.
    fn try_push(&mut self, block: Vec<Step>) -> bool {
        if block.is_empty() || self.steps.len() + block.len() > MAX_STEPS {
            return false;
        }
        let mut c = self.case.clone();
        c.steps = self.steps.clone();
        c.steps.extend(block.iter().cloned());
        if !crate::case::validate(&file_name(&c.id), &c).is_empty()
            || !super::shrink::fair(&c.steps)
        {
            return false;
        }
        if let Some(ops) = self.ops
            && !crate::runner::required_ops(&c).is_subset(ops)
        {
            return false;
        }
        self.steps.extend(block);
        true
    }

    fn run(&mut self) {
        let target = 6 + self.rng.below((MAX_STEPS - 6) as u64) as usize;
        let e1 = self.m.new_exec();
        if self.try_push(vec![Step::Join {
            executor: e1.clone(),
            expect: any(),
        }]) {
            self.m.execs.push(Exec {
                name: e1,
                alive: true,
            });
            self.m.current = Some(0);
        } else {
            return;
        }
        // A lane with an admission queue often starts with work submitted and claimed.
        if self.admissions && self.rng.chance(1, 2) {
            let block = vec![
                Step::Submit {
                    submission: "s1".into(),
                    expect: any(),
                },
                Step::Claim {
                    submission: "s1".into(),
                    executor: None,
                    expect: any(),
                },
            ];
            if self.try_push(block) {
                self.m.subs.push("s1".into());
                self.m.claims = 1;
            }
        }
        let mut stalls = 0;
        while self.steps.len() < target && stalls < 40 {
            if self.step() {
                stalls = 0;
            } else {
                stalls += 1;
            }
        }
    }

    /// The executor a step on an occurrence names: mostly the current one (left implicit), at
    /// times a retired one that is still alive (a stale retry).
    fn who(&mut self) -> Option<Option<String>> {
        let others = self.m.alive_others();
        if self.m.current.is_some() && (others.is_empty() || self.rng.chance(4, 5)) {
            Some(None)
        } else if !others.is_empty() {
            Some(Some(self.rng.pick(&others).clone()))
        } else {
            None
        }
    }

    fn occ(&mut self) -> Option<String> {
        (!self.m.occs.is_empty()).then(|| self.rng.pick(&self.m.occs).clone())
    }

    /// Draws one step (or block) and keeps it if it is valid; false if nothing was kept.
    fn step(&mut self) -> bool {
        // A killed current executor is replaced before anything acts on the lane.
        if self.m.current.is_none() {
            return self.replace();
        }
        if self.m.occs.is_empty() {
            return self.create_new();
        }
        // A story's next link, mostly (other steps come between its links).
        if self.story.is_some() && self.rng.chance(2, 3) {
            return self.story();
        }
        // Mostly, an occurrence moves on (so requests reach the provider, where the faults
        // are); otherwise anything in the vocabulary.
        if self.rng.chance(1, 2) {
            return self.progress();
        }
        let adm = if self.admissions { 20 } else { 0 };
        let aadp = if self.case.config.aadp.is_some() {
            3
        } else {
            0
        };
        let w: [u32; 19] = [
            6,    // 0 create a new occurrence
            3,    // 1 create again (a retry, or another label with a used key)
            7,    // 2 reserve
            4,    // 3 enter
            3,    // 4 send
            12,   // 5 execute
            5,    // 6 adopt
            7,    // 7 reconcile
            4,    // 8 release
            2,    // 9 rebind
            3,    // 10 remedy
            12,   // 11 provider fault
            4,    // 12 crash
            3,    // 13 replace
            8,    // 14 advance / provider expiry
            3,    // 15 race
            3,    // 16 a held request
            adm,  // 17 an admission step
            aadp, // 18 AADP's permit expiry
        ];
        let mut w = w;
        w.iter_mut().zip(self.swarm).for_each(|(w, m)| *w *= m);
        if w.iter().all(|w| *w == 0) {
            return self.progress();
        }
        match self.rng.weighted(&w) {
            0 => self.create_new(),
            1 => self.create_again(),
            2..=7 => self.on_occurrence(),
            8 => self.release(),
            9 => self.rebind(),
            10 => self.remedy(),
            11 => self.fault(),
            12 => self.crash(),
            13 => self.replace(),
            14 => self.clock(),
            15 => self.race(),
            16 => self.held(),
            17 => self.admission(),
            _ => self.aadp_expire(),
        }
    }

    /// The story's next link (the story ends after its act, or when a link cannot be kept).
    fn story(&mut self) -> bool {
        let Some(Story { occurrence, link }) = self.story.clone() else {
            return false;
        };
        let kept = match (link, occurrence) {
            (0, _) => {
                // An occurrence not yet executed, or a new one.
                let fresh: Vec<String> = self
                    .m
                    .originals
                    .iter()
                    .filter(|o| self.m.phase.get(*o).copied().unwrap_or(0) < 2)
                    .cloned()
                    .collect();
                if fresh.is_empty() {
                    let ok = self.create_new();
                    if !ok {
                        self.story = None;
                    }
                    return ok;
                }
                let occurrence = self.rng.pick(&fresh).clone();
                let fault = match self.rng.weighted(&[3, 2, 1]) {
                    0 => Fault::CommitThenDrop,
                    1 => Fault::CommitThen {
                        status: *self.rng.pick(&[500, 502, 503]),
                    },
                    _ => Fault::Reject {
                        status: *self.rng.pick(&[500, 502, 503]),
                    },
                };
                let block = vec![
                    Step::ProviderFault {
                        op: POp::Create,
                        fault,
                        nth: None,
                        times: None,
                    },
                    act(Act::Execute, occurrence.clone(), None, any()),
                ];
                let ok = self.try_push(block);
                if ok {
                    self.m.phase.insert(occurrence.clone(), 2);
                    self.story = Some(Story {
                        occurrence: Some(occurrence),
                        link: 1,
                    });
                }
                ok
            }
            (1, Some(o)) => {
                let ms = 86_400_001;
                let forgets = if self.rng.chance(2, 3) { Some(o) } else { None };
                let ok = self.try_push(vec![
                    Step::Advance { ms },
                    Step::ProviderExpire {
                        occurrence: forgets,
                    },
                ]);
                if ok {
                    self.m.advanced = self.m.advanced.saturating_add(ms);
                    // The lease has lapsed: a successor takes the lane over first.
                    self.m.current = None;
                    if let Some(s) = self.story.as_mut() {
                        s.link = 2;
                    }
                }
                ok
            }
            (2, Some(o)) => {
                let mut block = Vec::new();
                if self.rng.chance(1, 4) {
                    let op = *self.rng.pick(&[POp::Get, POp::List]);
                    block.push(self.fault_step(op));
                }
                block.push(act(Act::Reconcile, o, None, any()));
                let ok = self.try_push(block);
                if ok && let Some(s) = self.story.as_mut() {
                    s.link = 3;
                }
                ok
            }
            (_, Some(o)) => {
                let step = match self.rng.weighted(&[3, 3, 1, 1]) {
                    0 => act(Act::Execute, o, None, any()),
                    1 => Step::Release {
                        occurrence: o,
                        executor: None,
                        reason: Some(self.rng.pick(&REASONS).to_string()),
                        expect: any(),
                    },
                    2 => act(Act::Enter, o, None, any()),
                    _ => act(Act::Send, o, None, any()),
                };
                self.story = None;
                self.try_push(vec![step])
            }
            (_, None) => false,
        };
        if !kept {
            self.story = None;
        }
        kept
    }

    /// Seed 003's admission queue: submit, claim, link a claimed submission to an occurrence
    /// created under its key, recover, read back an unknown admission, finish.
    fn admission(&mut self) -> bool {
        let Some(executor) = self.who() else {
            return false;
        };
        let expect = any();
        let sub = (!self.m.subs.is_empty()).then(|| self.rng.pick(&self.m.subs).clone());
        // submit, claim, create and link, recover, read back, finish.
        match (self.rng.weighted(&[2, 3, 2, 1, 1, 1]), sub) {
            (0, _) | (_, None) => {
                if self.m.subs.len() >= 3 {
                    return false;
                }
                let submission = format!("s{}", self.m.subs.len() + 1);
                if self.try_push(vec![Step::Submit {
                    submission: submission.clone(),
                    expect,
                }]) {
                    self.m.subs.push(submission);
                    true
                } else {
                    false
                }
            }
            (1, Some(last)) => {
                let Some((submission, fresh)) = self.next_claim(last) else {
                    return false;
                };
                let ok = self.try_push(vec![Step::Claim {
                    submission,
                    executor,
                    expect,
                }]);
                if ok && fresh {
                    self.m.claims += 1;
                }
                ok
            }
            (2, Some(submission)) => {
                // The occurrence created under the last claimed submission's key (mostly), then
                // linked.
                let submission = match self.m.claims.checked_sub(1) {
                    Some(last) if self.rng.chance(3, 4) => self.m.subs[last].clone(),
                    _ => submission,
                };
                let occurrence = format!("o{}", self.m.next_occ + 1);
                if self.m.originals.len() >= 3 {
                    return false;
                }
                let block = vec![
                    Step::Create {
                        occurrence: occurrence.clone(),
                        executor: executor.clone(),
                        key: Some(submission.clone()),
                        amount: None,
                        simulate: None,
                        labels: CreateLabels::default(),
                        expect: expect.clone(),
                    },
                    Step::Link {
                        submission,
                        occurrence: occurrence.clone(),
                        executor,
                        expect,
                    },
                ];
                if self.try_push(block) {
                    self.m.next_occ += 1;
                    self.m.occs.push(occurrence.clone());
                    self.m.originals.push(occurrence);
                    true
                } else {
                    false
                }
            }
            (3, _) => self.try_push(vec![Step::Recover { executor, expect }]),
            (4, Some(submission)) => self.try_push(vec![Step::ResolveUnknown {
                submission,
                executor,
                expect,
            }]),
            (_, Some(submission)) => {
                let end = self
                    .rng
                    .pick(&["completed", "failed", "cancelled", "not_executed"])
                    .to_string();
                self.try_push(vec![Step::Finish {
                    submission,
                    end,
                    executor,
                    expect,
                }])
            }
        }
    }

    /// The submission a claim names, and whether it is one not claimed before: the oldest
    /// submission not yet claimed (what the lane must hand out next), or, with every submission
    /// claimed, at times `last` all the same (the lane must then hand out nothing: an admission
    /// a replaced holder left unknown is never queued again, seed 003). In a schedule the World
    /// judges a claim against what the implementation admitted, whatever submission it names.
    fn next_claim(&mut self, last: String) -> Option<(String, bool)> {
        match self.m.subs.get(self.m.claims) {
            Some(s) => Some((s.clone(), true)),
            None if self.rng.chance(1, 2) => Some((last, false)),
            None => None,
        }
    }

    fn aadp_expire(&mut self) -> bool {
        let (Some(occurrence), Some(executor)) = (self.occ(), self.who()) else {
            return false;
        };
        self.try_push(vec![Step::AadpExpire {
            occurrence,
            executor,
            expect: any(),
        }])
    }

    /// The next step of one occurrence's path, at times after a fault on the request it makes.
    fn progress(&mut self) -> bool {
        let Some(occurrence) = self.occ() else {
            return false;
        };
        let phase = self.m.phase.get(&occurrence).copied().unwrap_or(0);
        let expect = any();
        let fault_first = self.rng.chance(1, 2);
        let (block, next) = match phase {
            0 => (vec![act(Act::Reserve, occurrence.clone(), None, expect)], 1),
            1 if self.rng.chance(1, 4) => return self.held_on(Some(occurrence)),
            1 => {
                let mut b = Vec::new();
                if fault_first {
                    let op = *self.rng.pick(&[POp::Create, POp::Create, POp::Any]);
                    b.push(self.fault_step(op));
                }
                b.push(act(Act::Execute, occurrence.clone(), None, expect));
                (b, 2)
            }
            _ => {
                let mut b = Vec::new();
                if fault_first {
                    let op = *self.rng.pick(&[POp::Get, POp::List, POp::Get]);
                    b.push(self.fault_step(op));
                }
                // Reconcile, adopt, execute again (must be refused), or release (must be
                // refused after entry).
                match self.rng.weighted(&[3, 1, 2, 1]) {
                    3 => b.push(Step::Release {
                        occurrence: occurrence.clone(),
                        executor: None,
                        reason: Some(self.rng.pick(&REASONS).to_string()),
                        expect,
                    }),
                    i => {
                        let a = [Act::Reconcile, Act::Adopt, Act::Execute][i];
                        b.push(act(a, occurrence.clone(), None, expect));
                    }
                }
                (b, 2)
            }
        };
        if self.try_push(block) {
            self.m.phase.insert(occurrence, next);
            true
        } else {
            false
        }
    }

    fn create_new(&mut self) -> bool {
        if self.m.originals.len() >= 3 {
            return false;
        }
        let label = format!("o{}", self.m.next_occ + 1);
        let Some(executor) = self.who() else {
            return false;
        };
        let amount = (!self.rng.chance(2, 3)).then(|| *self.rng.pick(&AMOUNTS));
        let mut labels = CreateLabels::default();
        if self.rng.chance(1, 2) {
            labels.grant_id = Some(format!("grant-{label}"));
        }
        if self.rng.chance(1, 6) {
            labels.retry_id = Some(format!("retry-{label}"));
        }
        if self.case.config.action_fence && self.rng.chance(1, 2) {
            labels.action = Some("pay-invoice".into());
        }
        let step = Step::Create {
            occurrence: label.clone(),
            executor,
            key: None,
            amount,
            simulate: None,
            labels,
            expect: any(),
        };
        if self.try_push(vec![step]) {
            self.m.next_occ += 1;
            self.m.occs.push(label.clone());
            self.m.originals.push(label);
            true
        } else {
            false
        }
    }

    /// A creation retried: the same label (the World keeps the first), or a new label under a
    /// key already used, or new caller labels on the same key.
    fn create_again(&mut self) -> bool {
        if self.m.originals.is_empty() {
            return false;
        }
        let first = self.rng.pick(&self.m.originals).clone();
        let Some(executor) = self.who() else {
            return false;
        };
        // The key its first creation used (the World's default is `key-<label>`).
        let used = self
            .steps
            .iter()
            .find_map(|s| match s {
                Step::Create {
                    occurrence, key, ..
                } if *occurrence == first => Some(key.clone()),
                _ => None,
            })
            .flatten();
        let (occurrence, key) = if self.rng.chance(1, 2) {
            (first.clone(), used)
        } else {
            let key = used.unwrap_or_else(|| format!("key-{first}"));
            (format!("{first}-again"), Some(key))
        };
        let mut labels = CreateLabels::default();
        if self.rng.chance(1, 2) {
            labels.retry_id = Some(format!("retry-{}", self.rng.below(1000)));
        }
        let step = Step::Create {
            occurrence: occurrence.clone(),
            executor,
            key,
            amount: None,
            simulate: None,
            labels,
            expect: any(),
        };
        if self.try_push(vec![step]) {
            if !self.m.occs.contains(&occurrence) {
                self.m.occs.push(occurrence);
            }
            true
        } else {
            false
        }
    }

    fn on_occurrence(&mut self) -> bool {
        let (Some(occurrence), Some(executor)) = (self.occ(), self.who()) else {
            return false;
        };
        let expect = any();
        const ACTS: [Act; 6] = [
            Act::Reserve,
            Act::Enter,
            Act::Send,
            Act::Execute,
            Act::Adopt,
            Act::Reconcile,
        ];
        let a = ACTS[self.rng.weighted(&[7, 4, 3, 12, 5, 7])];
        let step = act(a, occurrence, executor, expect);
        self.try_push(vec![step])
    }

    fn release(&mut self) -> bool {
        let (Some(occurrence), Some(executor)) = (self.occ(), self.who()) else {
            return false;
        };
        let reason = Some(self.rng.pick(&REASONS).to_string());
        self.try_push(vec![Step::Release {
            occurrence,
            executor,
            reason,
            expect: any(),
        }])
    }

    fn rebind(&mut self) -> bool {
        let (Some(occurrence), Some(executor)) = (self.occ(), self.who()) else {
            return false;
        };
        let field = self.rng.pick(&crate::case::validate::FIELDS).to_string();
        self.try_push(vec![Step::Rebind {
            occurrence,
            field,
            value: "rebound".into(),
            executor,
            expect: any(),
        }])
    }

    fn remedy(&mut self) -> bool {
        if self.m.originals.is_empty() {
            return false;
        }
        let occurrence = self.rng.pick(&self.m.originals).clone();
        let Some(executor) = self.who() else {
            return false;
        };
        let n = self.m.next_remedy + 1;
        let remedy = format!("r{n}");
        let kind = *self.rng.pick(&REMEDIES);
        // Mostly its own authorization; at times the original's grant, or one used before.
        let authorization = match self.rng.weighted(&[5, 2, 1]) {
            0 => format!("remedy-authorization-{n}"),
            1 => format!("grant-{occurrence}"),
            _ => format!("remedy-authorization-{}", n.saturating_sub(1).max(1)),
        };
        let mut block = vec![Step::Remedy {
            occurrence,
            remedy: remedy.clone(),
            kind,
            authorization,
            executor,
            expect: any(),
        }];
        // A remedy is an occurrence: at times it is carried out at once.
        if self.rng.chance(1, 2) {
            block.push(Step::Execute {
                occurrence: remedy.clone(),
                executor: None,
                expect: any(),
            });
        }
        if self.try_push(block) {
            self.m.next_remedy = n;
            self.m.occs.push(remedy);
            true
        } else {
            false
        }
    }

    /// A provider fault rule on one operation, drawn from what applies to it.
    fn fault(&mut self) -> bool {
        let op = *self.rng.pick(&[
            POp::Create,
            POp::Create,
            POp::Create,
            POp::Get,
            POp::Get,
            POp::List,
            POp::List,
            POp::Refund,
            POp::Any,
        ]);
        let step = self.fault_step(op);
        self.try_push(vec![step])
    }

    fn fault_step(&mut self, op: POp) -> Step {
        let fault = self.draw_fault(op);
        let nth = (self.rng.chance(1, 4)).then_some(2);
        let times = (self.rng.chance(1, 4)).then_some(2);
        Step::ProviderFault {
            op,
            fault,
            nth,
            times,
        }
    }

    fn draw_fault(&mut self, op: POp) -> Fault {
        let effectful = op.is_effectful() || op == POp::Any;
        // reject, commit_then, commit_then_drop, delay, garble, omit, forge, forget,
        // incomplete_listing, expire_retention: the kinds that apply to `op`, by weight.
        let applies = [
            2,
            2 * u32::from(effectful),
            2 * u32::from(effectful),
            1,
            1,
            1,
            1,
            1,
            u32::from(matches!(op, POp::List | POp::Any)),
            u32::from(self.m.advanced > super::shrink::RETENTION_MS),
        ];
        let mut w = applies;
        w.iter_mut()
            .zip(self.fault_swarm)
            .for_each(|(w, m)| *w *= m);
        if w.iter().all(|w| *w == 0) {
            w = applies;
        }
        match self.rng.weighted(&w) {
            0 => Fault::Reject {
                status: *self.rng.pick(&REJECT),
            },
            1 => Fault::CommitThen {
                status: *self.rng.pick(&[500, 502, 503]),
            },
            2 => Fault::CommitThenDrop,
            3 => Fault::Delay {
                ms: *self.rng.pick(&[5, 50]),
            },
            4 => Fault::Garble,
            5 => Fault::Omit {
                field: self.rng.pick(&["status", "id"]).to_string(),
            },
            6 => Fault::Forge {
                mode: *self.rng.pick(&[ForgeMode::BadKey, ForgeMode::OtherAccount]),
            },
            7 => Fault::Forget,
            8 => Fault::IncompleteListing,
            _ => Fault::ExpireRetention,
        }
    }

    fn crash(&mut self) -> bool {
        let alive = self.m.alive();
        if alive.is_empty() {
            return false;
        }
        let executor = self.rng.pick(&alive).clone();
        if self.try_push(vec![Step::Crash {
            executor: executor.clone(),
            at_hold: None,
            expect: any(),
        }]) {
            self.kill(&executor);
            true
        } else {
            false
        }
    }

    fn kill(&mut self, name: &str) {
        if let Some(i) = self.m.execs.iter().position(|e| e.name == name) {
            self.m.execs[i].alive = false;
            if self.m.current == Some(i) {
                self.m.current = None;
            }
        }
    }

    fn replace(&mut self) -> bool {
        if self.m.execs.len() >= 5 {
            return false;
        }
        let name = format!("e{}", self.m.next_exec + 1);
        let mut block = vec![Step::Replace {
            executor: name.clone(),
            expect: any(),
        }];
        // The retired holder, still alive, races its successor at times (AOC-CASE-005): it
        // tries to enter an occurrence at once.
        let retired = self.m.current_name();
        if let (Some(retired), false) = (retired, self.m.occs.is_empty())
            && self.rng.chance(1, 3)
        {
            let occurrence = self.rng.pick(&self.m.occs).clone();
            let a = *self.rng.pick(&[Act::Enter, Act::Execute]);
            block.push(act(a, occurrence, Some(retired), any()));
        }
        // A successor of a lane with admissions recovers them (often at once), and then, at
        // times, claims the next work at once.
        let mut fresh_claim = false;
        if self.admissions && !self.m.subs.is_empty() && self.rng.chance(2, 3) {
            block.push(Step::Recover {
                executor: None,
                expect: any(),
            });
            let last = self.m.subs[self.m.subs.len() - 1].clone();
            if self.rng.chance(1, 2)
                && let Some((submission, fresh)) = self.next_claim(last)
            {
                block.push(Step::Claim {
                    submission,
                    executor: None,
                    expect: any(),
                });
                fresh_claim = fresh;
            }
        }
        // A successor reads what its predecessor left before it acts (AOC-REQ-005): at times
        // it adopts an occurrence at once.
        if !self.m.occs.is_empty() && self.rng.chance(1, 3) {
            let occurrence = self.rng.pick(&self.m.occs).clone();
            block.push(act(Act::Adopt, occurrence, None, any()));
        }
        // … and asks the provider what became of one.
        if !self.m.occs.is_empty() && self.rng.chance(1, 3) {
            let occurrence = self.rng.pick(&self.m.occs).clone();
            block.push(act(Act::Reconcile, occurrence, None, any()));
        }
        if self.try_push(block) {
            if fresh_claim {
                self.m.claims += 1;
            }
            self.m.next_exec += 1;
            self.m.execs.push(Exec { name, alive: true });
            self.m.current = Some(self.m.execs.len() - 1);
            true
        } else {
            false
        }
    }

    fn clock(&mut self) -> bool {
        let forget = if self.m.advanced > super::shrink::RETENTION_MS {
            self.rng.chance(2, 3)
        } else {
            false
        };
        if forget {
            let occurrence = if self.rng.chance(2, 3) {
                self.occ()
            } else {
                None
            };
            self.try_push(vec![Step::ProviderExpire { occurrence }])
        } else {
            let ms = *self.rng.pick(&ADVANCE_MS);
            let mut block = vec![Step::Advance { ms }];
            // A day passes and the provider forgets at once (what a provider's retention
            // allows), often about one occurrence.
            if ms > super::shrink::RETENTION_MS && self.rng.chance(1, 2) {
                let occurrence = if self.rng.chance(2, 3) {
                    self.occ()
                } else {
                    None
                };
                block.push(Step::ProviderExpire { occurrence });
            }
            let ok = self.try_push(block);
            if ok {
                self.m.advanced = self.m.advanced.saturating_add(ms);
                // Past a lease's life the holder's lease has lapsed: a successor takes the lane
                // over before anything else acts on it (the lapsed holder may still try: a
                // stale retry).
                if ms > LEASE_MS {
                    self.m.current = None;
                }
            }
            ok
        }
    }

    /// Two or three admitting requests on one occurrence at once, by the current executor and
    /// retired ones still alive.
    fn race(&mut self) -> bool {
        let Some(occurrence) = self.occ() else {
            return false;
        };
        let mut who: Vec<Option<String>> = vec![None];
        who.extend(self.m.alive_others().into_iter().map(Some));
        let n = 2 + self.rng.below(2) as usize;
        let steps = (0..n)
            .map(|_| {
                let executor = self.rng.pick(&who).clone();
                let occurrence = occurrence.clone();
                // A race's requests carry no expectation.
                let a = *self.rng.pick(&[Act::Enter, Act::Send, Act::Execute]);
                act(a, occurrence, executor, Expect::default())
            })
            .collect();
        self.try_push(vec![Step::Race { steps }])
    }

    /// A request the provider holds: the executor is killed while it is parked (then the
    /// provider commits), or the provider lets it go and commits, rejects, or answers with a
    /// forged or mismatched reply.
    fn held(&mut self) -> bool {
        self.held_on(None)
    }

    fn held_on(&mut self, occurrence: Option<String>) -> bool {
        let occurrence = occurrence.or_else(|| self.occ());
        let (Some(occurrence), Some(current)) = (occurrence, self.m.current_name()) else {
            return false;
        };
        let hold = format!("h{}", self.m.next_hold + 1);
        let mut block = vec![
            Step::ProviderFault {
                op: POp::Create,
                fault: Fault::Hold { name: hold.clone() },
                nth: None,
                times: None,
            },
            Step::Enter {
                occurrence: occurrence.clone(),
                executor: None,
                expect: any(),
            },
            Step::Send {
                occurrence: occurrence.clone(),
                executor: None,
                background: true,
                expect: any(),
            },
        ];
        let killed = self.rng.chance(1, 2);
        let mut successor = None;
        if killed {
            block.push(Step::Crash {
                executor: current.clone(),
                at_hold: Some(hold.clone()),
                expect: any(),
            });
            // Then the provider commits (mostly) or rejects what it held.
            let reject = self.rng.chance(1, 4).then_some(503);
            block.push(Step::ProviderRelease {
                hold,
                reject,
                forged: false,
                mismatched: false,
            });
        } else {
            // At times a successor takes over while the provider holds the request: its reply
            // reaches a retired executor (AOC-REQ-007).
            if self.m.execs.len() < 5 && self.rng.chance(1, 3) {
                successor = Some(format!("e{}", self.m.next_exec + 1));
                block.push(Step::Replace {
                    executor: successor.clone().unwrap_or_default(),
                    expect: any(),
                });
            }
            let (reject, forged, mismatched) = match self.rng.below(4) {
                0 => (None, false, false),
                1 => (Some(*self.rng.pick(&[500, 503, 409])), false, false),
                2 => (None, true, false),
                _ => (None, false, true),
            };
            block.push(Step::ProviderRelease {
                hold,
                reject,
                forged,
                mismatched,
            });
            block.push(Step::Settle { expect: any() });
        }
        if self.try_push(block) {
            self.m.phase.insert(occurrence, 2);
            self.m.next_hold += 1;
            if killed {
                self.kill(&current);
            }
            if let Some(name) = successor {
                self.m.next_exec += 1;
                self.m.execs.push(Exec { name, alive: true });
                self.m.current = Some(self.m.execs.len() - 1);
            }
            true
        } else {
            false
        }
    }
}

/// Test support for every workload: 100 schedules drawn by `draw` against `ops` each need no
/// other operation and draw something.
#[cfg(test)]
pub(crate) fn stay_within(ops: &BTreeSet<Op>, draw: impl Fn(u64, &BTreeSet<Op>) -> Case) {
    for index in 0..100 {
        let c = draw(index, ops);
        let need = crate::runner::required_ops(&c);
        assert!(need.is_subset(ops), "schedule {index} needs {need:?}");
        assert!(c.steps.len() >= 2, "schedule {index} drew nothing");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_schedules_byte_for_byte() {
        for index in 0..50 {
            let a = super::super::yaml::case(&generate(Workload::Aoc, 42, index, None));
            let b = super::super::yaml::case(&generate(Workload::Aoc, 42, index, None));
            assert_eq!(a, b, "schedule {index}");
        }
        let a = super::super::yaml::case(&generate(Workload::Aoc, 42, 0, None));
        let b = super::super::yaml::case(&generate(Workload::Aoc, 43, 0, None));
        assert_ne!(a, b, "another seed gives another schedule");
    }

    #[test]
    fn every_schedule_is_valid_and_reads_back_as_itself() {
        for index in 0..300 {
            let c = generate(Workload::Aoc, 7, index, None);
            let file = file_name(&c.id);
            let defects = crate::case::validate(&file, &c);
            assert!(defects.is_empty(), "schedule {index}: {defects:?}");
            assert!(super::super::shrink::fair(&c.steps), "{index}");
            assert!(c.steps.len() >= 2 && c.steps.len() <= MAX_STEPS, "{index}");
            let text = super::super::yaml::case(&c);
            let back: Case = serde_saphyr::from_str(&text)
                .unwrap_or_else(|e| panic!("schedule {index} does not read back: {e}\n{text}"));
            assert_eq!(back, c, "schedule {index}\n{text}");
        }
    }

    #[test]
    fn schedules_stay_within_the_declared_operations() {
        let ops: BTreeSet<Op> = [
            Op::State,
            Op::Lane,
            Op::Settle,
            Op::Join,
            Op::Takeover,
            Op::Create,
            Op::Reserve,
            Op::Execute,
        ]
        .into();
        stay_within(&ops, |index, ops| {
            generate(Workload::Aoc, 9, index, Some(ops))
        });
    }

    /// Whether `steps` hold the story's chain about one occurrence, in order: an execute after
    /// a fault on its request, a day and the provider forgetting, a reconciliation, an act.
    fn tells_the_forget_story(steps: &[Step]) -> bool {
        let mut link = 0;
        let mut occ = String::new();
        for (i, s) in steps.iter().enumerate() {
            let next = steps.get(i + 1);
            match (link, s, next) {
                (0, Step::ProviderFault { .. }, Some(Step::Execute { occurrence, .. })) => {
                    occ = occurrence.clone();
                    link = 1;
                }
                (1, Step::Advance { ms }, Some(Step::ProviderExpire { .. })) if *ms > RETENTION => {
                    link = 2
                }
                (2, Step::Reconcile { occurrence, .. }, _) if *occurrence == occ => link = 3,
                (3, s, _) if s.occurrence() == Some(&occ) => {
                    return matches!(
                        s,
                        Step::Execute { .. }
                            | Step::Release { .. }
                            | Step::Enter { .. }
                            | Step::Send { .. }
                    );
                }
                _ => {}
            }
        }
        false
    }
    const RETENTION: u64 = super::super::shrink::RETENTION_MS;

    #[test]
    fn some_schedules_follow_an_occurrence_through_the_forget_chain() {
        let told = (0..400)
            .filter(|i| tells_the_forget_story(&generate(Workload::Aoc, 13, *i, None).steps))
            .count();
        // A quarter of the schedules follow the story; most reach its end.
        assert!(told >= 40, "{told} of 400");
        // Without the story, the chain is rare.
        assert!(told <= 200, "{told} of 400");
    }

    #[test]
    fn the_vocabulary_is_drawn() {
        let mut verbs = BTreeSet::new();
        let mut faults = BTreeSet::new();
        for index in 0..600 {
            for s in generate(Workload::Aoc, 11, index, None).steps {
                verbs.insert(s.verb());
                if let Step::ProviderFault { fault, .. } = &s {
                    faults.insert(fault.kind());
                }
            }
        }
        for v in [
            "join",
            "replace",
            "crash",
            "create",
            "reserve",
            "enter",
            "send",
            "execute",
            "adopt",
            "reconcile",
            "release",
            "rebind",
            "remedy",
            "provider_fault",
            "provider_release",
            "provider_expire",
            "advance",
            "race",
            "settle",
            "submit",
            "claim",
            "link",
            "recover",
            "resolve_unknown",
            "finish",
            "aadp_expire",
        ] {
            assert!(verbs.contains(v), "{v} never drawn");
        }
        for k in provider_model::payments::faults::Kind::ALL {
            assert!(faults.contains(&k), "{k:?} never drawn");
        }
    }
}
