//! Generation: a schedule is a case (the same step vocabulary, the same validator) drawn from a
//! seed and an index alone. Every step is drawn against a model of what the earlier steps made
//! (executors joined, alive or killed, occurrences created, holds declared), then kept only if
//! the case validator accepts the schedule with it and the implementation lists every operation
//! it needs: valid by construction, and within what the implementation declares.
//!
//! Steps carry `expect: any`: a schedule has no per-step or final expectation; it is judged by
//! the invariants alone (every checker after every step, against the providers' ledgers).

mod faults;
mod stories;

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
    /// Seed 002's Hermes Workflow runner over fake-hermes and the channel
    /// (`explore::workflow`).
    Workflow,
}

impl Workload {
    pub fn parse(s: &str) -> Option<Workload> {
        match s {
            "aoc" => Some(Workload::Aoc),
            "hermes" => Some(Workload::Hermes),
            "all" => Some(Workload::All),
            "workflow" => Some(Workload::Workflow),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Workload::Aoc => "aoc",
            Workload::Hermes => "hermes",
            Workload::All => "all",
            Workload::Workflow => "workflow",
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
        // The implementation's operations are known only when it runs as processes.
        Workload::Workflow => return super::workflow::generate(seed, index, ops.is_some()),
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
