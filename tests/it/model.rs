//! Random operation sequences against the domain (proptest-state-machine), on the memory model and
//! on SQLite: create / reserve / enter / evidence / crash-and-replace / adopt / stale retry /
//! release / remedy / time passing, across executor generations.
//!
//! Invariants checked after every step: at most one provider entry per occurrence; consumed
//! authority never decreases; every history stays prefix-preserving with a valid digest chain; the
//! binding digest never changes once bound; a retired generation is never admitted (its writes are
//! refused with AOC-REQ-006 and no entry it appends carries a retired generation); a terminal
//! outcome only ever follows authoritative evidence; every failure is a typed refusal.

use crate::support;

use aocheck::aoc::domain::RemedyRequest;
use aocheck::aoc::history::{
    ChainedEntry, EntryBody, ReleaseReason, is_prefix_preserving, verify_chain,
};
use aocheck::aoc::ids::{AttemptId, Generation, Holder, OccurrenceId, OwnerToken};
use aocheck::aoc::profile::{EvidenceKind, NativeResult};
use aocheck::aoc::{Domain, DomainError, Req};
use aocheck::digest::Digest;
use aocheck::store::AnyStore;
use aocheck::{Clock, ManualClock};
use proptest::prelude::*;
use proptest_state_machine::{ReferenceStateMachine, StateMachineTest, prop_state_machine};
use std::collections::{BTreeMap, HashMap};
use support::*;

const SLOTS: u8 = 3;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Who {
    Current,
    Retired,
}

#[derive(Clone, Copy, Debug)]
enum Ev {
    Success,
    Failed,
    NoEffect,
    Accepted,
    Http5xx,
    Transport,
    Unmapped,
    NotFound,
    Unauthenticated,
    ForeignAttempt,
}

#[derive(Clone, Debug)]
enum Op {
    Create(u8),
    Reserve(u8, Who),
    Enter(u8, Who),
    Evidence(u8, Ev),
    CrashAndReplace,
    Adopt(u8),
    Release(u8, Who),
    Remedy(u8),
    Advance(u32),
}

#[derive(Clone, Debug, Default)]
struct Model {
    generations: u32,
}

struct Machine;

impl ReferenceStateMachine for Machine {
    type State = Model;
    type Transition = Op;

    fn init_state() -> BoxedStrategy<Model> {
        Just(Model { generations: 1 }).boxed()
    }

    fn transitions(_: &Model) -> BoxedStrategy<Op> {
        let slot = 0..SLOTS;
        let who = prop_oneof![3 => Just(Who::Current), 1 => Just(Who::Retired)];
        let ev = prop_oneof![
            Just(Ev::Success),
            Just(Ev::Failed),
            Just(Ev::NoEffect),
            Just(Ev::Accepted),
            Just(Ev::Http5xx),
            Just(Ev::Transport),
            Just(Ev::Unmapped),
            Just(Ev::NotFound),
            Just(Ev::Unauthenticated),
            Just(Ev::ForeignAttempt),
        ];
        prop_oneof![
            3 => slot.clone().prop_map(Op::Create),
            3 => (slot.clone(), who.clone()).prop_map(|(s, w)| Op::Reserve(s, w)),
            3 => (slot.clone(), who.clone()).prop_map(|(s, w)| Op::Enter(s, w)),
            3 => (slot.clone(), ev).prop_map(|(s, e)| Op::Evidence(s, e)),
            1 => Just(Op::CrashAndReplace),
            2 => slot.clone().prop_map(Op::Adopt),
            2 => (slot.clone(), who).prop_map(|(s, w)| Op::Release(s, w)),
            1 => slot.prop_map(Op::Remedy),
            1 => (0u32..120_000).prop_map(Op::Advance),
        ]
        .boxed()
    }

    fn apply(mut state: Model, t: &Op) -> Model {
        if matches!(t, Op::CrashAndReplace) {
            state.generations += 1;
        }
        state
    }
}

struct Sut {
    rt: tokio::runtime::Runtime,
    _opened: Opened,
    clock: ManualClock,
    d: Domain<AnyStore>,
    holders: Vec<Holder>,
    occ: BTreeMap<u8, OccurrenceId>,
    tokens: HashMap<(u8, Generation), OwnerToken>,
    attempts: HashMap<u8, AttemptId>,
    // What was observed before, for monotonic invariants.
    histories: BTreeMap<OccurrenceId, Vec<ChainedEntry>>,
    consumed: BTreeMap<OccurrenceId, u64>,
    binding_digests: BTreeMap<OccurrenceId, Digest>,
}

impl Sut {
    fn current(&self) -> &Holder {
        self.holders.last().expect("a holder")
    }
    fn who(&self, w: Who) -> Option<&Holder> {
        match w {
            Who::Current => Some(self.current()),
            Who::Retired => self.holders.len().checked_sub(2).map(|i| &self.holders[i]),
        }
    }
}

fn arm_test(arm: Arm) -> Sut {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("rt");
    let opened = rt
        .block_on(open(arm))
        .expect("memory and sqlite arms always open");
    let clock = ManualClock::at(T0);
    let d = domain(opened.store.clone(), config(&opened.ns), &clock);
    let h = rt
        .block_on(d.join(&lane("lane-a"), &ex("e1")))
        .expect("join");
    Sut {
        rt,
        _opened: opened,
        clock,
        d,
        holders: vec![h],
        occ: BTreeMap::new(),
        tokens: HashMap::new(),
        attempts: HashMap::new(),
        histories: BTreeMap::new(),
        consumed: BTreeMap::new(),
        binding_digests: BTreeMap::new(),
    }
}

fn step(mut s: Sut, op: Op) -> Sut {
    let tag = |slot: u8| format!("s{slot}");
    let rt = &s.rt;
    let d = s.d.clone();
    // Every failure is a typed refusal; a retired executor's writes are refused as retired.
    let check = |r: Result<(), DomainError>, who: Option<Who>| match (&r, who) {
        (Ok(()), Some(Who::Retired)) => panic!("{op:?}: a retired generation was admitted"),
        (Err(DomainError::Refused(f)), Some(Who::Retired)) => {
            assert_eq!(f.requirement, Req::R006, "{op:?}: {f}")
        }
        (Err(DomainError::Refused(_)), _) | (Ok(()), _) => {}
        (Err(e), _) => panic!("{op:?}: not a refusal: {e:?}"),
    };
    match op.clone() {
        Op::Create(slot) => {
            let h = s.current().clone();
            match rt.block_on(d.create(&h, create_req(&tag(slot)))) {
                Ok(id) => {
                    if let Some(prev) = s.occ.get(&slot) {
                        assert_eq!(prev, &id, "a creation retry minted a new occurrence");
                    }
                    s.occ.insert(slot, id);
                }
                Err(e) => check(Err(e), None),
            }
        }
        Op::Reserve(slot, who) => {
            let (Some(h), Some(id)) = (s.who(who).cloned(), s.occ.get(&slot).cloned()) else {
                return s;
            };
            let r = rt.block_on(d.reserve(&h, &id, &binding(&tag(slot)), 10));
            match r {
                Ok(tok) => {
                    check(Ok(()), Some(who));
                    s.tokens.insert((slot, h.generation), tok);
                }
                Err(e) => check(Err(e), Some(who)),
            }
        }
        Op::Enter(slot, who) => {
            let (Some(h), Some(id)) = (s.who(who).cloned(), s.occ.get(&slot).cloned()) else {
                return s;
            };
            let tok = s
                .tokens
                .get(&(slot, h.generation))
                .cloned()
                .unwrap_or_else(OwnerToken::mint);
            match rt.block_on(d.enter(&h, &id, &tok, &binding(&tag(slot)))) {
                Ok(p) => {
                    check(Ok(()), Some(who));
                    s.attempts.insert(slot, p.attempt);
                }
                Err(e) => check(Err(e), Some(who)),
            }
        }
        Op::Evidence(slot, ev) => {
            let Some(id) = s.occ.get(&slot).cloned() else {
                return s;
            };
            let attempt = match ev {
                Ev::ForeignAttempt => AttemptId::mint(),
                _ => s
                    .attempts
                    .get(&slot)
                    .cloned()
                    .unwrap_or_else(AttemptId::mint),
            };
            let native = match ev {
                Ev::Success | Ev::Unauthenticated | Ev::ForeignAttempt => status("succeeded"),
                Ev::Failed => status("failed"),
                Ev::NoEffect => status("no_effect_confirmed"),
                Ev::Accepted => status("processing"),
                Ev::Http5xx => NativeResult::HttpError { status: 502 },
                Ev::Transport => NativeResult::Transport {
                    detail: "eof".into(),
                },
                Ev::Unmapped => status("disputed"),
                Ev::NotFound => NativeResult::NotFound,
            };
            let mut e = evidence(
                &binding(&tag(slot)),
                EvidenceKind::Response { attempt },
                native,
                Some(&format!("pay_{slot}")),
                s.clock.now(),
            );
            e.authenticated = !matches!(ev, Ev::Unauthenticated);
            let before = rt.block_on(d.state(&id)).expect("state");
            match rt.block_on(d.record_evidence(&id, &e, None)) {
                Ok(after) => {
                    let weak = !matches!(ev, Ev::Success | Ev::Failed | Ev::NoEffect);
                    if weak || before.entry_attempts == 0 {
                        assert_eq!(after.outcome, before.outcome, "{ev:?} changed the outcome");
                    }
                    assert_eq!(after.entry_attempts, before.entry_attempts);
                    assert_eq!(after.owner_generation, before.owner_generation);
                }
                Err(e) => check(Err(e), None),
            }
        }
        Op::CrashAndReplace => {
            let n = s.holders.len() + 1;
            let h = rt
                .block_on(d.replace(&lane("lane-a"), &ex(&format!("e{n}"))))
                .expect("replace");
            assert!(h.generation > s.current().generation);
            s.holders.push(h);
        }
        Op::Adopt(slot) => {
            let Some(id) = s.occ.get(&slot).cloned() else {
                return s;
            };
            let h = s.current().clone();
            match rt.block_on(d.adopt(&h, &id)) {
                Ok((_, Some(tok))) => {
                    s.tokens.insert((slot, h.generation), tok);
                }
                Ok((_, None)) => {}
                Err(e) => check(Err(e), None),
            }
        }
        Op::Release(slot, who) => {
            let (Some(h), Some(id)) = (s.who(who).cloned(), s.occ.get(&slot).cloned()) else {
                return s;
            };
            let tok = s
                .tokens
                .get(&(slot, h.generation))
                .cloned()
                .unwrap_or_else(OwnerToken::mint);
            let before = rt.block_on(d.state(&id)).expect("state");
            let r = rt.block_on(d.release(
                &h,
                &id,
                &tok,
                &request_digest(&tag(slot)),
                ReleaseReason::DeadlineExpired,
            ));
            if r.is_ok() {
                assert_eq!(before.entry_attempts, 0, "released an entered occurrence");
            }
            check(r.map(|_| ()), Some(who));
        }
        Op::Remedy(slot) => {
            let Some(id) = s.occ.get(&slot).cloned() else {
                return s;
            };
            let h = s.current().clone();
            let r = rt.block_on(d.remedy(
                &h,
                &id,
                RemedyRequest {
                    authorization: format!("refund-{slot}"),
                    request_digest: request_digest("refund"),
                },
            ));
            if let Ok(remedy) = &r {
                assert_ne!(remedy, &id);
            }
            check(r.map(|_| ()), None);
        }
        Op::Advance(ms) => {
            s.clock.advance(u64::from(ms));
            // Keep the current holder alive, as a healthy executor refreshing its lease would.
            let h = s.current().clone();
            if rt.block_on(d.refresh(&h)).is_err() {
                let n = s.holders.len() + 1;
                let h = rt
                    .block_on(d.join(&lane("lane-a"), &ex(&format!("e{n}"))))
                    .expect("rejoin after expiry");
                s.holders.push(h);
            }
        }
    }
    s
}

fn invariants(s: &mut Sut) {
    let retired: Vec<Generation> = s
        .holders
        .iter()
        .rev()
        .skip(1)
        .map(|h| h.generation)
        .collect();
    let rows = s.rt.block_on(s.d.list(None)).expect("list");
    for row in rows {
        let hist =
            s.rt.block_on(s.d.history(&row.id))
                .expect("history verifies");
        verify_chain(&hist).expect("chain");
        let st = s.rt.block_on(s.d.state(&row.id)).expect("state");
        let entries = hist
            .iter()
            .filter(|e| matches!(e.body, EntryBody::Entered { .. }))
            .count();
        assert!(entries <= 1, "{}: {entries} provider entries", row.id);
        assert_eq!(st.entry_attempts as usize, entries);
        if let Some(prev) = s.histories.get(&row.id) {
            assert!(
                is_prefix_preserving(prev, &hist),
                "{}: history rewritten",
                row.id
            );
            // Entries appended since the last look were written by the generation current now.
            for e in &hist[prev.len()..] {
                let g = match &e.body {
                    EntryBody::Reserved { generation, .. }
                    | EntryBody::Entered { generation, .. }
                    | EntryBody::Released { generation, .. } => Some(*generation),
                    EntryBody::Adopted { to_generation, .. } => Some(*to_generation),
                    _ => None,
                };
                if let Some(g) = g {
                    assert!(
                        !retired.contains(&g),
                        "{}: retired generation {g} admitted: {:?}",
                        row.id,
                        e.body
                    );
                }
            }
        }
        let consumed = s.consumed.get(&row.id).copied().unwrap_or(0);
        assert!(
            st.authority.consumed >= consumed,
            "{}: consumed authority decreased",
            row.id
        );
        if let Some(bd) = s.binding_digests.get(&row.id) {
            assert_eq!(
                st.binding_digest.as_ref(),
                Some(bd),
                "{}: binding digest changed",
                row.id
            );
        }
        if let Some(bd) = st.binding_digest.clone() {
            s.binding_digests.insert(row.id.clone(), bd);
        }
        if st.outcome.is_some() {
            assert!(
                hist.iter().any(|e| matches!(&e.body, EntryBody::Observed { interpretation, .. } if interpretation.class.is_some())),
                "{}: terminal without authoritative evidence",
                row.id
            );
        }
        s.consumed.insert(row.id.clone(), st.authority.consumed);
        s.histories.insert(row.id.clone(), hist);
    }
}

struct MemoryArm;
struct SqliteArm;

macro_rules! arm_impl {
    ($t:ident, $arm:expr) => {
        impl StateMachineTest for $t {
            type SystemUnderTest = Sut;
            type Reference = Machine;
            fn init_test(_: &Model) -> Sut {
                arm_test($arm)
            }
            /// One step, then every invariant (they need to update their monotonic bookkeeping,
            /// so they run here rather than in `check_invariants`, which sees a shared reference).
            fn apply(s: Sut, _: &Model, op: Op) -> Sut {
                let mut s = step(s, op);
                invariants(&mut s);
                s
            }
        }
    };
}

arm_impl!(MemoryArm, Arm::Memory);
arm_impl!(SqliteArm, Arm::Sqlite);

prop_state_machine! {
    #![proptest_config(ProptestConfig { cases: 96, failure_persistence: None, ..ProptestConfig::default() })]
    #[test]
    fn random_fault_schedules_keep_the_invariants_on_memory(sequential 1..40 => MemoryArm);
}

prop_state_machine! {
    #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, ..ProptestConfig::default() })]
    #[test]
    fn random_fault_schedules_keep_the_invariants_on_sqlite(sequential 1..30 => SqliteArm);
}
