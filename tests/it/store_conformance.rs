//! One store conformance suite, run unchanged on every arm: leases and their holder fence,
//! creation uniqueness, appends that check length, fence and limit atomically, racing writers
//! (exactly one wins, on independent connections), and a reopen that finds every committed
//! transition.

use crate::support;

use aocheck::aoc::error::LimitKind;
use aocheck::aoc::history::{
    ChainedEntry, EntryBody, ReleaseReason, Verified, verify_chain, verify_chain_with,
};
use aocheck::aoc::ids::{Generation, Millis, OccurrenceId};
use aocheck::aoc::lease::{AcquireMode, LeaseError};
use aocheck::aoc::{DomainError, Phase, RefusalKind, Req};
use aocheck::digest::Digest;
use aocheck::store::{
    Append, Class, CreateResult, Fence, LimitCheck, NewOccurrence, Store, StoreError,
};
use aocheck::{Clock, ManualClock};
use rstest::rstest;
use std::sync::Arc;
use support::*;

const TTL: u64 = 1_000;

fn created(id: &OccurrenceId, l: &str, cb: &Digest) -> ChainedEntry {
    ChainedEntry::seal(
        0,
        None,
        EntryBody::Created {
            occurrence: id.clone(),
            domain: "d".into(),
            lane: lane(l),
            generation: Generation(1),
            creation_binding: cb.clone(),
            request_digest: request_digest("1"),
            labels: Default::default(),
            remedy_of: None,
            at: Millis(T0),
        },
    )
    .expect("seal")
}

fn next_entry(prev: &ChainedEntry, tag: u64) -> ChainedEntry {
    ChainedEntry::seal(
        prev.seq + 1,
        Some(prev.digest.clone()),
        EntryBody::Released {
            generation: Generation(tag),
            reason: ReleaseReason::OwnerAbandoned,
            at: Millis(T0 + tag),
        },
    )
    .expect("seal")
}

fn new_occ(l: &str, key: &str) -> NewOccurrence {
    let id = OccurrenceId::mint();
    let cb = Digest::of_bytes(key.as_bytes());
    NewOccurrence {
        first: created(&id, l, &cb),
        id,
        lane: lane(l),
        creation_binding: cb,
        action_fence: None,
    }
}

#[rstest]
#[tokio::test]
async fn lease_lifecycle_and_holder_fence(
    #[values(Arm::Memory, Arm::Sqlite, Arm::Postgres)] arm: Arm,
) {
    let Some(o) = open(arm).await else { return };
    let (s, ns, l) = (&o.store, o.ns.as_str(), lane("l"));
    assert_eq!(s.lease_get(ns, &l).await.expect("get"), None);
    let a = s
        .lease_acquire(ns, &l, &ex("a"), Millis(0), TTL, AcquireMode::IfFree)
        .await
        .expect("a");
    assert_eq!(a.holder.generation, Generation(1));
    let busy = s
        .lease_acquire(ns, &l, &ex("b"), Millis(10), TTL, AcquireMode::IfFree)
        .await;
    assert!(
        matches!(busy, Err(StoreError::Lease(LeaseError::Busy { .. }))),
        "{busy:?}"
    );
    let a2 = s
        .lease_refresh(ns, &a.holder, Millis(500), TTL)
        .await
        .expect("refresh");
    assert_eq!(a2.expires_at, Millis(1_500));
    // Experiment C: after expiry B takes over; A's late refresh and release cannot touch B's lease.
    let b = s
        .lease_acquire(ns, &l, &ex("b"), Millis(1_500), TTL, AcquireMode::IfFree)
        .await
        .expect("b");
    assert_eq!(b.holder.generation, Generation(2));
    for r in [
        s.lease_refresh(ns, &a.holder, Millis(1_501), TTL).await,
        s.lease_release(ns, &a.holder).await,
    ] {
        assert!(
            matches!(r, Err(StoreError::Lease(LeaseError::HolderMismatch { .. }))),
            "{r:?}"
        );
    }
    assert_eq!(s.lease_get(ns, &l).await.expect("get"), Some(b.clone()));
    // Replacement retires a live holder; release keeps the generation, which is never reused.
    let c = s
        .lease_acquire(ns, &l, &ex("c"), Millis(1_600), TTL, AcquireMode::Replace)
        .await
        .expect("c");
    assert_eq!(c.holder.generation, Generation(3));
    s.lease_release(ns, &c.holder).await.expect("release");
    let d = s
        .lease_acquire(ns, &l, &ex("c"), Millis(1_601), TTL, AcquireMode::IfFree)
        .await
        .expect("d");
    assert_eq!(d.holder.generation, Generation(4));
}

#[rstest]
#[tokio::test]
async fn create_is_unique_on_creation_binding_and_action_fence(
    #[values(Arm::Memory, Arm::Sqlite, Arm::Postgres)] arm: Arm,
) {
    let Some(o) = open(arm).await else { return };
    let (s, ns) = (&o.store, o.ns.as_str());
    let h = s
        .lease_acquire(
            ns,
            &lane("l"),
            &ex("a"),
            Millis(0),
            TTL,
            AcquireMode::IfFree,
        )
        .await
        .expect("lease")
        .holder;
    let fence = Fence {
        holder: h.clone(),
        now: Millis(1),
    };
    let mut first = new_occ("l", "k1");
    first.action_fence = Some(Digest::of_bytes(b"action"));
    let id = first.id.clone();
    assert_eq!(
        s.create(ns, first, fence.clone(), None)
            .await
            .expect("create"),
        CreateResult::Created
    );
    let again = new_occ("l", "k1");
    assert_eq!(
        s.create(ns, again, fence.clone(), None)
            .await
            .expect("again"),
        CreateResult::Existing(id.clone())
    );
    let mut fenced = new_occ("l", "k2");
    fenced.action_fence = Some(Digest::of_bytes(b"action"));
    assert_eq!(
        s.create(ns, fenced, fence.clone(), None)
            .await
            .expect("fenced"),
        CreateResult::ActionFenced(id.clone())
    );
    assert_eq!(s.list(ns, None).await.expect("list").len(), 1);
    assert_eq!(
        s.find_creation(ns, &Digest::of_bytes(b"k1"))
            .await
            .expect("find"),
        Some(id)
    );
    // Namespaces are separate domains.
    assert!(
        s.list("another-domain", None)
            .await
            .expect("list")
            .is_empty()
    );
}

#[rstest]
#[tokio::test]
async fn append_checks_length_fence_and_limit_atomically(
    #[values(Arm::Memory, Arm::Sqlite, Arm::Postgres)] arm: Arm,
) {
    let Some(o) = open(arm).await else { return };
    let (s, ns) = (&o.store, o.ns.as_str());
    let h = s
        .lease_acquire(
            ns,
            &lane("l"),
            &ex("a"),
            Millis(0),
            TTL,
            AcquireMode::IfFree,
        )
        .await
        .expect("lease")
        .holder;
    let fence = Fence {
        holder: h.clone(),
        now: Millis(1),
    };
    let n1 = new_occ("l", "k1");
    let (id1, e0) = (n1.id.clone(), n1.first.clone());
    s.create(ns, n1, fence.clone(), None).await.expect("create");
    let n2 = new_occ("l", "k2");
    let id2 = n2.id.clone();
    let e0b = n2.first.clone();
    s.create(ns, n2, fence.clone(), None).await.expect("create");
    s.append(
        ns,
        Append {
            occurrence: id2.clone(),
            expected_len: 1,
            entries: vec![next_entry(&e0b, 1)],
            class_change: Some(Class::InFlight),
            fence: Some(fence.clone()),
            limit: None,
        },
    )
    .await
    .expect("append");
    let before = snapshot(s, ns, &["l"]).await;
    let mk = |len, fence: Option<Fence>, limit| Append {
        occurrence: id1.clone(),
        expected_len: len,
        entries: vec![next_entry(&e0, 9)],
        class_change: Some(Class::InFlight),
        fence,
        limit,
    };
    let r = s.append(ns, mk(2, Some(fence.clone()), None)).await;
    assert!(matches!(r, Err(StoreError::Conflict { .. })), "{r:?}");
    let expired = Fence {
        holder: h.clone(),
        now: Millis(TTL),
    };
    let r = s.append(ns, mk(1, Some(expired), None)).await;
    assert!(matches!(r, Err(StoreError::Fenced { .. })), "{r:?}");
    let r = s
        .append(
            ns,
            mk(
                1,
                Some(fence.clone()),
                Some(LimitCheck {
                    which: LimitKind::InFlight,
                    limit: 1,
                }),
            ),
        )
        .await;
    assert!(
        matches!(
            r,
            Err(StoreError::Limit {
                which: LimitKind::InFlight,
                limit: 1,
                current: 1
            })
        ),
        "{r:?}"
    );
    let r = s
        .append(
            ns,
            Append {
                occurrence: OccurrenceId::mint(),
                ..mk(1, None, None)
            },
        )
        .await;
    assert!(matches!(r, Err(StoreError::NotFound { .. })), "{r:?}");
    assert_eq!(
        snapshot(s, ns, &["l"]).await,
        before,
        "refused appends wrote nothing"
    );
    s.append(
        ns,
        mk(
            1,
            Some(fence),
            Some(LimitCheck {
                which: LimitKind::InFlight,
                limit: 2,
            }),
        ),
    )
    .await
    .expect("within limit");
    let h1 = s.load(ns, &id1).await.expect("load").expect("some");
    assert_eq!(h1.len(), 2);
    verify_chain(&h1).expect("chain");
}

/// `n` independent handles on the arm's store (separate connections / pools).
async fn handles(o: &Opened, n: usize) -> Vec<Arc<aocheck::AnyStore>> {
    let mut v = vec![o.store.clone()];
    while v.len() < n {
        v.push(o.reopen().await.expect("handle"));
    }
    v
}

#[rstest]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_appends_exactly_one_wins(
    #[values(Arm::Memory, Arm::Sqlite, Arm::Postgres)] arm: Arm,
) {
    let Some(o) = open(arm).await else { return };
    let ns = o.ns.clone();
    let h = o
        .store
        .lease_acquire(
            &ns,
            &lane("l"),
            &ex("a"),
            Millis(0),
            TTL,
            AcquireMode::IfFree,
        )
        .await
        .expect("lease")
        .holder;
    let fence = Fence {
        holder: h,
        now: Millis(1),
    };
    for round in 0..5 {
        let n = new_occ("l", &format!("race-{round}"));
        let (id, e0) = (n.id.clone(), n.first.clone());
        o.store
            .create(&ns, n, fence.clone(), None)
            .await
            .expect("create");
        let mut tasks = Vec::new();
        for (i, st) in handles(&o, 6).await.into_iter().enumerate() {
            let (ns, id, e0, fence) = (ns.clone(), id.clone(), e0.clone(), fence.clone());
            tasks.push(tokio::spawn(async move {
                st.append(
                    &ns,
                    Append {
                        occurrence: id,
                        expected_len: 1,
                        entries: vec![next_entry(&e0, i as u64)],
                        class_change: Some(Class::InFlight),
                        fence: Some(fence),
                        limit: None,
                    },
                )
                .await
            }));
        }
        let mut wins = 0;
        for t in tasks {
            match t.await.expect("join") {
                Ok(()) => wins += 1,
                Err(StoreError::Conflict { .. }) => {}
                Err(e) => panic!("unexpected {e:?}"),
            }
        }
        assert_eq!(wins, 1, "round {round}: exactly one racing append commits");
        let hist = o.store.load(&ns, &id).await.expect("load").expect("some");
        assert_eq!(hist.len(), 2);
        verify_chain(&hist).expect("chain");
    }
}

#[rstest]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_lease_acquisitions_grant_one_generation(
    #[values(Arm::Memory, Arm::Sqlite, Arm::Postgres)] arm: Arm,
) {
    let Some(o) = open(arm).await else { return };
    let mut tasks = Vec::new();
    for (i, st) in handles(&o, 6).await.into_iter().enumerate() {
        let ns = o.ns.clone();
        tasks.push(tokio::spawn(async move {
            st.lease_acquire(
                &ns,
                &lane("contended"),
                &ex(&format!("e{i}")),
                Millis(5),
                TTL,
                AcquireMode::IfFree,
            )
            .await
        }));
    }
    let mut granted = Vec::new();
    for t in tasks {
        match t.await.expect("join") {
            Ok(l) => granted.push(l),
            Err(StoreError::Lease(LeaseError::Busy { .. })) | Err(StoreError::Conflict { .. }) => {}
            Err(e) => panic!("unexpected {e:?}"),
        }
    }
    assert_eq!(granted.len(), 1, "{granted:?}");
    assert_eq!(granted[0].holder.generation, Generation(1));
}

#[rstest]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_executors_racing_the_same_entry_enter_once(
    #[values(Arm::Memory, Arm::Sqlite, Arm::Postgres)] arm: Arm,
) {
    let Some(o) = open(arm).await else { return };
    let clock = ManualClock::at(T0);
    let hs = handles(&o, 2).await;
    let d1 = domain(hs[0].clone(), config(&o.ns), &clock);
    let d2 = domain(hs[1].clone(), config(&o.ns), &clock);
    let h = d1.join(&lane("l"), &ex("a")).await.expect("join");
    for round in 0..5 {
        let tag = format!("r{round}");
        let occ = d1.create(&h, create_req(&tag)).await.expect("create");
        let tok = d1
            .reserve(&h, &occ, &binding(&tag), 1)
            .await
            .expect("reserve");
        let bnd = binding(&tag);
        let (a, b) = tokio::join!(
            d1.enter(&h, &occ, &tok, &bnd),
            d2.enter(&h, &occ, &tok, &bnd)
        );
        let oks = [a.is_ok(), b.is_ok()].iter().filter(|x| **x).count();
        assert_eq!(oks, 1, "round {round}: {a:?} / {b:?}");
        for r in [a, b] {
            if let Err(e) = r {
                let f = e
                    .refusal()
                    .unwrap_or_else(|| panic!("not a refusal: {e:?}"));
                assert_eq!(f.requirement, Req::R010);
                assert!(matches!(
                    f.kind,
                    RefusalKind::AlreadyEntered { attempts: 1 }
                ));
            }
        }
        assert_eq!(d1.state(&occ).await.expect("state").entry_attempts, 1);
    }
}

#[rstest]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_generation_change_and_an_entry_serialize(
    #[values(Arm::Memory, Arm::Sqlite, Arm::Postgres)] arm: Arm,
) {
    let Some(o) = open(arm).await else { return };
    let clock = ManualClock::at(T0);
    let hs = handles(&o, 2).await;
    let d1 = domain(hs[0].clone(), config(&o.ns), &clock);
    let d2 = domain(hs[1].clone(), config(&o.ns), &clock);
    for round in 0..6 {
        let l = lane(&format!("l{round}"));
        let h = d1.join(&l, &ex("old")).await.expect("join");
        let occ = d1
            .create(&h, create_req(&format!("g{round}")))
            .await
            .expect("create");
        let b = binding(&format!("g{round}"));
        let tok = d1.reserve(&h, &occ, &b, 1).await.expect("reserve");
        let newcomer = ex("new");
        let (entered, replaced) =
            tokio::join!(d1.enter(&h, &occ, &tok, &b), d2.replace(&l, &newcomer));
        let successor = replaced.expect("replace");
        let st = d1.state(&occ).await.expect("state");
        match entered {
            // The entry committed before the change: it stays consumed and belongs to the old
            // generation.
            Ok(_) => {
                assert_eq!(st.entered_generation, Some(h.generation));
                assert_eq!(st.authority.consumed, 1);
            }
            // Or it was refused as retired, and nothing was entered.
            Err(DomainError::Refused(f)) => {
                assert_eq!(f.requirement, Req::R006, "{f}");
                assert_eq!(st.entry_attempts, 0);
            }
            Err(e) => panic!("{e:?}"),
        }
        assert!(successor.generation > h.generation);
        let _ = clock.now();
    }
}

#[rstest]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_admission_claims_start_one_admission(
    #[values(Arm::Memory, Arm::Sqlite, Arm::Postgres)] arm: Arm,
) {
    let Some(o) = open(arm).await else { return };
    let clock = ManualClock::at(T0);
    let hs = handles(&o, 4).await;
    let doms: Vec<_> = hs
        .iter()
        .map(|s| domain(s.clone(), config(&o.ns), &clock))
        .collect();
    let h = doms[0].join(&lane("q"), &ex("a")).await.expect("join");
    for i in 0..3 {
        doms[0]
            .submit(&lane("q"), &format!("job-{i}"), &Digest::of_bytes(b"x"))
            .await
            .expect("submit");
    }
    let mut tasks = Vec::new();
    for d in doms.clone() {
        let h = h.clone();
        tasks.push(tokio::spawn(async move { d.claim_next(&h).await }));
    }
    let mut started = Vec::new();
    for t in tasks {
        match t.await.expect("join") {
            Ok(Some(a)) => started.push(a),
            Ok(None) => panic!("the queue was not empty"),
            Err(DomainError::Refused(f)) => {
                assert!(matches!(f.kind, RefusalKind::Admission { .. }), "{f}")
            }
            Err(DomainError::Store(StoreError::Conflict { .. })) => {}
            Err(e) => panic!("{e:?}"),
        }
    }
    assert_eq!(started.len(), 1, "{started:?}");
    assert_eq!(started[0].submission_key, "job-0", "FIFO head");
}

#[rstest]
#[tokio::test]
async fn a_reopen_finds_every_committed_transition(#[values(Arm::Sqlite, Arm::Postgres)] arm: Arm) {
    let Some(o) = open(arm).await else { return };
    let clock = ManualClock::at(T0);
    let d = domain(o.store.clone(), config(&o.ns), &clock);
    let h = d.join(&lane("lane-a"), &ex("a")).await.expect("join");
    d.submit(&lane("lane-a"), "job", &Digest::of_bytes(b"x"))
        .await
        .expect("submit");
    d.claim_next(&h).await.expect("claim");
    let occ = d.create(&h, create_req("1")).await.expect("create");
    let tok = d
        .reserve(&h, &occ, &binding("1"), 7)
        .await
        .expect("reserve");
    d.enter(&h, &occ, &tok, &binding("1")).await.expect("enter");
    let other = d.create(&h, create_req("2")).await.expect("create");
    let before = snapshot(&o.store, &o.ns, &["lane-a"]).await;
    assert_eq!(before.histories.len(), 2);
    drop(d);
    let reopened = o.reopen().await.expect("reopen");
    assert!(reopened.info().durable);
    let after = snapshot(&reopened, &o.ns, &["lane-a"]).await;
    assert_eq!(
        after, before,
        "every committed transition survives a reopen"
    );
    let d2 = domain(reopened, config(&o.ns), &clock);
    assert_eq!(d2.state(&occ).await.expect("state").phase, Phase::Entered);
    assert_eq!(d2.state(&other).await.expect("state").phase, Phase::Created);
    // The lease survives too: the old holder is still the holder.
    assert_eq!(
        d2.lease(&lane("lane-a"))
            .await
            .expect("lease")
            .expect("some")
            .holder,
        h
    );
}

#[tokio::test]
async fn the_memory_store_says_it_is_not_durable() {
    let o = open(Arm::Memory).await.expect("memory");
    assert!(!o.store.info().durable);
}

#[rstest]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn records_compare_and_set_with_exactly_one_racing_winner(
    #[values(Arm::Memory, Arm::Sqlite, Arm::Postgres)] arm: Arm,
) {
    let Some(o) = open(arm).await else { return };
    let (s, ns) = (&o.store, o.ns.as_str());
    assert_eq!(s.record_get(ns, "k").await.expect("get"), None);
    assert_eq!(
        s.record_cas(ns, "k", None, &serde_json::json!({"v": 1}))
            .await
            .expect("create"),
        1
    );
    assert!(matches!(
        s.record_cas(ns, "k", None, &serde_json::json!({})).await,
        Err(StoreError::Conflict { .. })
    ));
    assert!(matches!(
        s.record_cas(ns, "k", Some(7), &serde_json::json!({})).await,
        Err(StoreError::Conflict { .. })
    ));
    assert_eq!(
        s.record_get(ns, "k").await.expect("get"),
        Some((1, serde_json::json!({"v": 1}))),
        "refused CAS wrote nothing"
    );
    let mut tasks = Vec::new();
    for (i, st) in handles(&o, 6).await.into_iter().enumerate() {
        let ns = ns.to_string();
        tasks.push(tokio::spawn(async move {
            st.record_cas(&ns, "k", Some(1), &serde_json::json!({"winner": i}))
                .await
        }));
    }
    let mut wins = 0;
    for t in tasks {
        match t.await.expect("join") {
            Ok(2) => wins += 1,
            Err(StoreError::Conflict { .. }) => {}
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(wins, 1);
    if arm != Arm::Memory {
        let again = o.reopen().await.expect("reopen");
        assert_eq!(
            again
                .record_get(ns, "k")
                .await
                .expect("get")
                .map(|(v, _)| v),
            Some(2)
        );
    }
}

/// The domain's cache of verified entries spares the hash of an entry equal in every field to
/// one it verified, never of one rewritten under its old digest.
#[test]
fn an_entry_rewritten_under_its_verified_digest_is_still_caught() {
    let id = OccurrenceId::mint();
    let first = created(&id, "l", &Digest::of_bytes(b"k"));
    let second = next_entry(&first, 2);
    let verified = Verified::default();
    verify_chain_with(&[first.clone(), second.clone()], &verified).expect("chain");
    let mut forged = second.clone();
    forged.body = EntryBody::Released {
        generation: Generation(3),
        reason: ReleaseReason::OwnerAbandoned,
        at: Millis(T0 + 2),
    };
    assert!(verify_chain_with(&[first.clone(), forged], &verified).is_err());
    verify_chain_with(&[first, second], &verified).expect("the honest chain still verifies");
}
