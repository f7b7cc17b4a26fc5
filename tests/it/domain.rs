//! The coordination domain, requirement by requirement, on every store arm. Every refusal is
//! checked to name its requirement (and occurrence) and to leave the store unchanged.

use crate::support;

use aocheck::aoc::admission::{AdmissionEnd, AdmissionState};
use aocheck::aoc::binding::BindingField;
use aocheck::aoc::composition::{AadpAccounting, BypassKind, BypassPath, CompositionStatus};
use aocheck::aoc::domain::RemedyRequest;
use aocheck::aoc::error::{LimitKind, RefusalKind};
use aocheck::aoc::history::{
    EntryBody, Outcome, ReleaseReason, is_prefix_preserving, verify_chain,
};
use aocheck::aoc::ids::{AttemptId, Holder, Millis, OccurrenceId, OwnerToken};
use aocheck::aoc::profile::{EvidenceKind, MissingKnowledge, NativeResult};
use aocheck::aoc::{Phase, ProviderBinding};
use aocheck::digest::Digest;
use aocheck::store::AnyStore;
use aocheck::{Domain, DomainError, ManualClock, Refusal, Req};
use rstest::rstest;
use support::*;

struct World {
    o: Opened,
    clock: ManualClock,
    d: Domain<AnyStore>,
}

async fn world(arm: Arm) -> Option<World> {
    world_with(arm, |_| {}).await
}

async fn world_with(arm: Arm, tweak: impl FnOnce(&mut aocheck::DomainConfig)) -> Option<World> {
    let o = open(arm).await?;
    let clock = ManualClock::at(T0);
    let mut cfg = config(&o.ns);
    tweak(&mut cfg);
    let d = domain(o.store.clone(), cfg, &clock);
    Some(World { o, clock, d })
}

impl World {
    async fn snap(&self) -> Snapshot {
        snapshot(&self.o.store, &self.o.ns, &["lane-a", "lane-b"]).await
    }
    async fn join(&self, who: &str) -> Holder {
        self.d.join(&lane("lane-a"), &ex(who)).await.expect("join")
    }
    /// One submission on lane-a, claimed by a fresh holder "a": (admission, holder).
    async fn claimed(&self, tag: &str) -> (aocheck::aoc::admission::Admission, Holder) {
        let a = self
            .d
            .submit(
                &lane("lane-a"),
                &format!("invoice-{tag}"),
                &request_digest(tag),
            )
            .await
            .expect("submit");
        let h = self.join("a").await;
        self.d
            .claim_next(&h)
            .await
            .expect("claim")
            .expect("claimed");
        (a, h)
    }
    /// created → reserved → entered; returns (occurrence, token, attempt).
    async fn entered(&self, h: &Holder, tag: &str) -> (OccurrenceId, OwnerToken, AttemptId) {
        let occ = self.d.create(h, create_req(tag)).await.expect("create");
        let tok = self
            .d
            .reserve(h, &occ, &binding(tag), 100)
            .await
            .expect("reserve");
        let permit = self
            .d
            .enter(h, &occ, &tok, &binding(tag))
            .await
            .expect("enter");
        (occ, tok, permit.attempt)
    }
}

/// Asserts a refusal for `req` that names `occ` (when given) and wrote nothing.
async fn refused<T: std::fmt::Debug>(
    w: &World,
    before: &Snapshot,
    r: Result<T, DomainError>,
    req: Req,
    occ: Option<&OccurrenceId>,
) -> Refusal {
    let refusal = match r {
        Err(DomainError::Refused(f)) => f,
        other => panic!("expected a {req} refusal, got {other:?}"),
    };
    assert_eq!(refusal.requirement, req, "{refusal}");
    if let Some(o) = occ {
        assert_eq!(refusal.occurrence.as_ref(), Some(o), "{refusal}");
    }
    assert_eq!(
        &w.snap().await,
        before,
        "refusal {refusal} changed the store"
    );
    refusal
}

// ---------- AOC-REQ-002 ----------

#[rstest]
#[tokio::test]
async fn req002_creation_retries_and_relabels_return_the_original(
    #[values(Arm::Memory, Arm::Sqlite, Arm::Postgres)] arm: Arm,
) {
    let Some(w) = world(arm).await else { return };
    let h = w.join("a").await;
    let occ = w.d.create(&h, create_req("1")).await.expect("create");
    assert!(occ.as_str().starts_with("occ_"));
    let before = w.snap().await;
    let mut relabeled = create_req("1");
    relabeled.labels.retry_id = Some("retry-2".into());
    relabeled.labels.task_id = Some("task-9".into());
    relabeled.labels.grant_id = Some("grant-other".into());
    relabeled.labels.action_digest = Some(Digest::of_bytes(b"another digest"));
    relabeled.labels.bcr_operation_id = Some("bcr-op-7".into());
    assert_eq!(w.d.create(&h, relabeled).await.expect("retry"), occ);
    assert_eq!(w.snap().await, before, "a creation retry writes nothing");
    // A successor generation's retry resolves to the same occurrence too.
    let h2 =
        w.d.replace(&lane("lane-a"), &ex("b"))
            .await
            .expect("replace");
    assert_eq!(w.d.create(&h2, create_req("1")).await.expect("retry"), occ);
    // The occurrence id is minted, never the action digest or a label.
    let st = w.d.state(&occ).await.expect("state");
    assert_eq!(st.labels.retry_id.as_deref(), Some("retry-1"));
    assert_ne!(
        occ.as_str(),
        Digest::of_bytes(b"another digest").to_string()
    );
}

#[rstest]
#[tokio::test]
async fn req010_same_creation_key_with_another_request_is_a_conflict(
    #[values(Arm::Memory, Arm::Sqlite, Arm::Postgres)] arm: Arm,
) {
    let Some(w) = world(arm).await else { return };
    let h = w.join("a").await;
    let occ = w.d.create(&h, create_req("1")).await.expect("create");
    let before = w.snap().await;
    let mut changed = create_req("1");
    changed.request_digest = request_digest("other");
    let r = refused(
        &w,
        &before,
        w.d.create(&h, changed).await,
        Req::R010,
        Some(&occ),
    )
    .await;
    assert!(
        matches!(r.kind, RefusalKind::BindingConflict { ref fields } if fields == &[BindingField::Request])
    );
}

#[rstest]
#[case::fence_on(true)]
#[case::fence_off(false)]
#[tokio::test]
async fn req002_action_fence_is_an_explicit_option(
    #[values(Arm::Memory, Arm::Sqlite, Arm::Postgres)] arm: Arm,
    #[case] fence: bool,
) {
    let Some(w) = world_with(arm, |c| c.action_fence = fence).await else {
        return;
    };
    let h = w.join("a").await;
    let action = Digest::of_bytes(b"pay invoice 7");
    let mut first = create_req("1");
    first.labels.action_digest = Some(action.clone());
    let occ = w.d.create(&h, first).await.expect("create");
    let mut second = create_req("2");
    second.labels.action_digest = Some(action);
    let before = w.snap().await;
    let r = w.d.create(&h, second).await;
    if fence {
        let f = refused(&w, &before, r, Req::R002, None).await;
        assert_eq!(f.kind, RefusalKind::ActionFenced { existing: occ });
    } else {
        let other = r.expect("equal action digests may be distinct occurrences");
        assert_ne!(other, occ);
    }
}

// ---------- AOC-REQ-003 / -010: binding substitution ----------

fn substitute(field: BindingField) -> ProviderBinding {
    let mut b = binding("1");
    match field {
        BindingField::Profile => b.profile_id = "other-provider".into(),
        BindingField::ProfileVersion => b.profile_version = "2".into(),
        BindingField::Account => b.account = "acct_b".into(),
        BindingField::Environment => b.environment = "live".into(),
        BindingField::Request => b.request_digest = request_digest("tampered"),
        BindingField::KeyRule => b.key_rule = "random key per retry".into(),
        BindingField::NativeKey => b.native_key = Some("fresh-key".into()),
        BindingField::StatusSource => b.status_source = "payments.list".into(),
        BindingField::ProviderRef => {}
    }
    b
}

#[rstest]
#[case::profile(BindingField::Profile)]
#[case::profile_version(BindingField::ProfileVersion)]
#[case::account(BindingField::Account)]
#[case::environment(BindingField::Environment)]
#[case::request(BindingField::Request)]
#[case::key_rule(BindingField::KeyRule)]
#[case::native_key(BindingField::NativeKey)]
#[case::status_source(BindingField::StatusSource)]
#[tokio::test]
async fn req003_entry_with_a_substituted_binding_field_is_refused(
    #[values(Arm::Memory, Arm::Sqlite, Arm::Postgres)] arm: Arm,
    #[case] field: BindingField,
) {
    let Some(w) = world(arm).await else { return };
    let h = w.join("a").await;
    let occ = w.d.create(&h, create_req("1")).await.expect("create");
    let tok =
        w.d.reserve(&h, &occ, &binding("1"), 100)
            .await
            .expect("reserve");
    let before = w.snap().await;
    let r = refused(
        &w,
        &before,
        w.d.enter(&h, &occ, &tok, &substitute(field)).await,
        Req::R003,
        Some(&occ),
    )
    .await;
    assert_eq!(
        r.kind,
        RefusalKind::BindingConflict {
            fields: vec![field]
        }
    );
    // …and as an explicit rebind request (AOC-REQ-010).
    let r = refused(
        &w,
        &before,
        w.d.rebind(&h, &occ, &substitute(field), None).await,
        Req::R010,
        Some(&occ),
    )
    .await;
    assert_eq!(
        r.kind,
        RefusalKind::BindingConflict {
            fields: vec![field]
        }
    );
    // The unchanged binding enters, with the digest bound at reservation.
    let permit =
        w.d.enter(&h, &occ, &tok, &binding("1"))
            .await
            .expect("enter");
    assert_eq!(
        permit.binding_digest,
        binding("1").digest().expect("digest")
    );
}

#[rstest]
#[case::account(BindingField::Account)]
#[case::request(BindingField::Request)]
#[case::native_key(BindingField::NativeKey)]
#[case::provider_ref(BindingField::ProviderRef)]
#[case::status_source(BindingField::StatusSource)]
#[case::profile_version(BindingField::ProfileVersion)]
#[tokio::test]
async fn req003_evidence_for_another_binding_is_refused_and_cannot_resolve(
    #[values(Arm::Memory, Arm::Sqlite, Arm::Postgres)] arm: Arm,
    #[case] field: BindingField,
) {
    let Some(w) = world(arm).await else { return };
    let h = w.join("a").await;
    let (occ, _tok, attempt) = w.entered(&h, "1").await;
    let b = binding("1");
    let now = w.clock.now_millis();
    // Acknowledge with a reference so that a different reference is a substitution.
    w.d.record_evidence(
        &occ,
        &evidence(
            &b,
            EvidenceKind::Response {
                attempt: attempt.clone(),
            },
            status("processing"),
            Some("pay_1"),
            now,
        ),
        None,
    )
    .await
    .expect("ack");
    let mut ev = evidence(
        &b,
        EvidenceKind::StatusQuery,
        status("succeeded"),
        Some("pay_1"),
        now,
    );
    match field {
        BindingField::Account => ev.bound_to.account = "acct_b".into(),
        BindingField::Request => ev.bound_to.request_digest = request_digest("x"),
        BindingField::NativeKey => ev.bound_to.native_key = Some("other".into()),
        BindingField::ProviderRef => ev.bound_to.provider_ref = Some("pay_2".into()),
        BindingField::StatusSource => ev.source = "payments.list".into(),
        BindingField::ProfileVersion => ev.bound_to.profile_version = "2".into(),
        _ => unreachable!(),
    }
    let before = w.snap().await;
    let r = refused(
        &w,
        &before,
        w.d.record_evidence(&occ, &ev, None).await,
        Req::R003,
        Some(&occ),
    )
    .await;
    assert!(
        matches!(r.kind, RefusalKind::BindingConflict { ref fields } if fields.contains(&field)),
        "{r}"
    );
    assert!(w.d.state(&occ).await.expect("state").is_unresolved());
}

trait NowMillis {
    fn now_millis(&self) -> Millis;
}
impl NowMillis for ManualClock {
    fn now_millis(&self) -> Millis {
        aocheck::Clock::now(self)
    }
}

// ---------- AOC-REQ-004 ----------

#[rstest]
#[tokio::test]
async fn req004_history_is_append_only_with_a_valid_chain(
    #[values(Arm::Memory, Arm::Sqlite, Arm::Postgres)] arm: Arm,
) {
    let Some(w) = world(arm).await else { return };
    let h = w.join("a").await;
    let occ = w.d.create(&h, create_req("1")).await.expect("create");
    let mut seen = w.d.history(&occ).await.expect("history");
    let b = binding("1");
    let tok = w.d.reserve(&h, &occ, &b, 100).await.expect("reserve");
    let step = |seen: &mut Vec<_>, now: Vec<_>| {
        assert!(is_prefix_preserving(seen, &now), "history rewritten");
        verify_chain(&now).expect("chain");
        *seen = now;
    };
    step(&mut seen, w.d.history(&occ).await.expect("h"));
    let permit = w.d.enter(&h, &occ, &tok, &b).await.expect("enter");
    step(&mut seen, w.d.history(&occ).await.expect("h"));
    let t = w.clock.now_millis();
    for native in [
        NativeResult::HttpError { status: 503 },
        NativeResult::Transport {
            detail: "reset".into(),
        },
        status("processing"),
        status("succeeded"),
    ] {
        w.d.record_evidence(
            &occ,
            &evidence(
                &b,
                EvidenceKind::Response {
                    attempt: permit.attempt.clone(),
                },
                native,
                Some("pay_1"),
                t,
            ),
            None,
        )
        .await
        .expect("evidence");
        step(&mut seen, w.d.history(&occ).await.expect("h"));
    }
    let kinds: Vec<&str> = seen.iter().map(|e| e.body.kind()).collect();
    assert_eq!(
        kinds,
        [
            "created",
            "reserved",
            "entered",
            "observed",
            "observed",
            "acknowledged",
            "observed",
            "observed",
            "resolved"
        ]
    );
    // Each observation keeps source, time, native digest and interpretation separately.
    for e in &seen {
        if let EntryBody::Observed {
            evidence,
            interpretation,
            ..
        } = &e.body
        {
            assert_eq!(evidence.source, "payments.get");
            assert_eq!(evidence.observed_at, t);
            let _ = (&evidence.native_digest, &interpretation.missing);
        }
    }
}

#[rstest]
#[tokio::test]
async fn req004_a_rewritten_entry_is_detected(
    #[values(Arm::Memory, Arm::Sqlite, Arm::Postgres)] arm: Arm,
) {
    let Some(w) = world(arm).await else { return };
    let h = w.join("a").await;
    let (occ, _, _) = w.entered(&h, "1").await;
    let hist = w.d.history(&occ).await.expect("history");
    // Rewrite "entered" to look like a still-reserved occurrence's release, keeping seq and links.
    let mut forged = hist[2].clone();
    forged.body = EntryBody::Released {
        generation: h.generation,
        reason: ReleaseReason::OwnerAbandoned,
        at: Millis(0),
    };
    match &*w.o.store {
        AnyStore::Memory(m) => assert!(m.tamper_entry(&w.o.ns, &occ, 2, forged)),
        AnyStore::Sqlite(s) => {
            let c = rusqlite::Connection::open(s.path()).expect("open");
            let body = serde_json::to_string(&forged.body).expect("json");
            let n = c
                .execute(
                    "UPDATE entries SET body = ?1 WHERE ns = ?2 AND occurrence = ?3 AND seq = 2",
                    rusqlite::params![body, w.o.ns, occ.as_str()],
                )
                .expect("update");
            assert_eq!(n, 1);
        }
        AnyStore::Postgres(p) => {
            let body = serde_json::to_string(&forged.body).expect("json");
            assert!(
                p.tamper_entry_for_tests(&w.o.ns, &occ, 2, body)
                    .await
                    .expect("update")
            );
        }
    }
    match w.d.state(&occ).await {
        Err(DomainError::Corrupt { occurrence, detail }) => {
            assert_eq!(occurrence, occ);
            assert!(detail.contains("entry 2"), "{detail}");
        }
        other => panic!("tampering not detected: {other:?}"),
    }
}

// ---------- AOC-REQ-005 / -006 ----------

#[rstest]
#[tokio::test]
async fn req005_replacement_preserves_the_unresolved_occurrence(
    #[values(Arm::Memory, Arm::Sqlite, Arm::Postgres)] arm: Arm,
) {
    let Some(w) = world(arm).await else { return };
    let h1 = w.join("a").await;
    let (occ, tok1, _) = w.entered(&h1, "1").await;
    let pre = w.d.create(&h1, create_req("2")).await.expect("create");
    let pre_tok =
        w.d.reserve(&h1, &pre, &binding("2"), 5)
            .await
            .expect("reserve");
    let before = w.d.state(&occ).await.expect("state");
    // The predecessor "crashes"; the domain replaces it.
    let h2 =
        w.d.replace(&lane("lane-a"), &ex("b"))
            .await
            .expect("replace");
    assert!(h2.generation > h1.generation);
    let snap = w.snap().await;
    // An entered occurrence never enters again, whoever asks (AOC-REQ-010) …
    let r = refused(
        &w,
        &snap,
        w.d.enter(&h2, &occ, &tok1, &binding("1")).await,
        Req::R010,
        Some(&occ),
    )
    .await;
    assert!(matches!(r.kind, RefusalKind::AlreadyEntered { .. }));
    // … and the successor may not act on a pre-entry occurrence before it has read (adopted) it.
    let r = refused(
        &w,
        &snap,
        w.d.enter(&h2, &pre, &pre_tok, &binding("2")).await,
        Req::R005,
        Some(&pre),
    )
    .await;
    assert!(matches!(r.kind, RefusalKind::NotOwner { .. }));
    let (st, tok2) = w.d.adopt(&h2, &occ).await.expect("adopt");
    assert!(tok2.is_some());
    assert_eq!(st.id, before.id);
    assert_eq!(st.binding_digest, before.binding_digest);
    assert!(st.is_unresolved());
    assert_eq!(st.authority, before.authority);
    assert_eq!(st.entry_attempts, 1);
    assert!(
        st.generations.contains(&h1.generation),
        "the retired executor stays visible"
    );
    // Neither generation enters again.
    let snap = w.snap().await;
    let tok2 = tok2.expect("token");
    refused(
        &w,
        &snap,
        w.d.enter(&h2, &occ, &tok2, &binding("1")).await,
        Req::R010,
        Some(&occ),
    )
    .await;
    refused(
        &w,
        &snap,
        w.d.enter(&h1, &occ, &tok1, &binding("1")).await,
        Req::R006,
        Some(&occ),
    )
    .await;
}

#[rstest]
#[tokio::test]
async fn req006_a_retired_generation_cannot_reserve_enter_rekey_claim_or_create(
    #[values(Arm::Memory, Arm::Sqlite, Arm::Postgres)] arm: Arm,
) {
    let Some(w) = world(arm).await else { return };
    let h1 = w.join("a").await;
    let occ = w.d.create(&h1, create_req("1")).await.expect("create");
    let occ2 = w.d.create(&h1, create_req("2")).await.expect("create");
    let tok2 =
        w.d.reserve(&h1, &occ2, &binding("2"), 5)
            .await
            .expect("reserve");
    w.d.submit(&lane("lane-a"), "sub-1", &Digest::of_bytes(b"p"))
        .await
        .expect("submit");
    let _h2 =
        w.d.replace(&lane("lane-a"), &ex("b"))
            .await
            .expect("replace");
    let before = w.snap().await;
    let r = refused(
        &w,
        &before,
        w.d.reserve(&h1, &occ, &binding("1"), 5).await,
        Req::R006,
        Some(&occ),
    )
    .await;
    assert!(
        matches!(r.kind, RefusalKind::StaleGeneration { ref current, .. } if current.is_some())
    );
    refused(
        &w,
        &before,
        w.d.enter(&h1, &occ2, &tok2, &binding("2")).await,
        Req::R006,
        Some(&occ2),
    )
    .await;
    refused(
        &w,
        &before,
        w.d.rebind(&h1, &occ2, &substitute(BindingField::NativeKey), None)
            .await,
        Req::R006,
        Some(&occ2),
    )
    .await;
    refused(&w, &before, w.d.claim_next(&h1).await, Req::R006, None).await;
    refused(
        &w,
        &before,
        w.d.create(&h1, create_req("3")).await,
        Req::R006,
        None,
    )
    .await;
    refused(&w, &before, w.d.refresh(&h1).await, Req::R006, None).await;
    refused(&w, &before, w.d.leave(&h1).await, Req::R006, None).await;
}

#[rstest]
#[tokio::test]
async fn req006_an_expired_lease_admits_nothing_until_a_successor_joins(
    #[values(Arm::Memory, Arm::Sqlite, Arm::Postgres)] arm: Arm,
) {
    let Some(w) = world(arm).await else { return };
    let h1 = w.join("a").await;
    let occ = w.d.create(&h1, create_req("1")).await.expect("create");
    w.clock.advance(w.d.config().lease.ttl_ms);
    let before = w.snap().await;
    refused(
        &w,
        &before,
        w.d.reserve(&h1, &occ, &binding("1"), 5).await,
        Req::R006,
        Some(&occ),
    )
    .await;
    refused(&w, &before, w.d.refresh(&h1).await, Req::R006, None).await;
    let h2 = w.join("b").await;
    assert_eq!(h2.generation.0, h1.generation.0 + 1);
}

#[rstest]
#[tokio::test]
async fn req006_declared_limits_refuse_work_without_entry(
    #[values(Arm::Memory, Arm::Sqlite, Arm::Postgres)] arm: Arm,
) {
    let Some(w) = world_with(arm, |c| {
        c.limits.max_pending = 2;
        c.limits.max_in_flight = 1;
    })
    .await
    else {
        return;
    };
    let h = w.join("a").await;
    let (inflight, _, _) = w.entered(&h, "1").await;
    let a = w.d.create(&h, create_req("2")).await.expect("create 2");
    let tok_a =
        w.d.reserve(&h, &a, &binding("2"), 5)
            .await
            .expect("reserve");
    let _b = w.d.create(&h, create_req("3")).await.expect("create 3");
    let before = w.snap().await;
    let r = refused(
        &w,
        &before,
        w.d.create(&h, create_req("4")).await,
        Req::R006,
        None,
    )
    .await;
    assert!(matches!(
        r.kind,
        RefusalKind::LimitReached {
            which: LimitKind::Pending,
            limit: 2,
            current: 2
        }
    ));
    let r = refused(
        &w,
        &before,
        w.d.enter(&h, &a, &tok_a, &binding("2")).await,
        Req::R006,
        Some(&a),
    )
    .await;
    assert!(matches!(
        r.kind,
        RefusalKind::LimitReached {
            which: LimitKind::InFlight,
            limit: 1,
            current: 1
        }
    ));
    // Existing unresolved records stay queryable and unchanged.
    assert!(w.d.state(&inflight).await.expect("state").is_unresolved());
}

// ---------- AOC-REQ-007 ----------

#[rstest]
#[tokio::test]
async fn req007_a_late_matching_response_reconciles_without_reactivating(
    #[values(Arm::Memory, Arm::Sqlite, Arm::Postgres)] arm: Arm,
) {
    let Some(w) = world(arm).await else { return };
    let h1 = w.join("a").await;
    let (occ, _, attempt) = w.entered(&h1, "1").await;
    let h2 =
        w.d.replace(&lane("lane-a"), &ex("b"))
            .await
            .expect("replace");
    let (before, _) = w.d.adopt(&h2, &occ).await.expect("adopt");
    let b = binding("1");
    let t = w.clock.now_millis();
    // A response bound to some other attempt cannot close this one.
    let other = AttemptId::mint();
    let st =
        w.d.record_evidence(
            &occ,
            &evidence(
                &b,
                EvidenceKind::Response { attempt: other },
                status("succeeded"),
                Some("pay_1"),
                t,
            ),
            Some(&h1.executor),
        )
        .await
        .expect("recorded");
    assert!(st.is_unresolved());
    assert!(st.missing.contains(&MissingKnowledge::UnboundAttempt));
    // An unauthenticated copy of the real one cannot either.
    let mut unauth = evidence(
        &b,
        EvidenceKind::Response {
            attempt: attempt.clone(),
        },
        status("succeeded"),
        Some("pay_1"),
        t,
    );
    unauth.authenticated = false;
    let st =
        w.d.record_evidence(&occ, &unauth, Some(&h1.executor))
            .await
            .expect("recorded");
    assert!(st.is_unresolved());
    assert!(st.missing.contains(&MissingKnowledge::Unauthenticated));
    // The authenticated, exactly bound late response does.
    let st =
        w.d.record_evidence(
            &occ,
            &evidence(
                &b,
                EvidenceKind::Response { attempt },
                status("succeeded"),
                Some("pay_1"),
                t,
            ),
            Some(&h1.executor),
        )
        .await
        .expect("reconciled");
    assert_eq!(st.phase, Phase::Resolved);
    assert_eq!(st.outcome, Some(Outcome::Success));
    assert_eq!(
        st.owner_generation, before.owner_generation,
        "no reactivation"
    );
    assert_eq!(st.authority, before.authority, "no authority change");
    assert_eq!(st.entry_attempts, 1, "no new admission");
    assert_eq!(
        w.d.lease(&lane("lane-a"))
            .await
            .expect("lease")
            .expect("lease")
            .holder,
        h2
    );
}

// ---------- AOC-REQ-008 ----------

#[rstest]
#[tokio::test]
async fn req008_release_needs_serialized_non_entry_and_leaves_a_tombstone(
    #[values(Arm::Memory, Arm::Sqlite, Arm::Postgres)] arm: Arm,
) {
    let Some(w) = world(arm).await else { return };
    let h1 = w.join("a").await;
    let occ = w.d.create(&h1, create_req("1")).await.expect("create");
    let tok1 =
        w.d.reserve(&h1, &occ, &binding("1"), 40)
            .await
            .expect("reserve");
    // Predecessor dies before entry; successor adopts and proves non-entry serially.
    let h2 =
        w.d.replace(&lane("lane-a"), &ex("b"))
            .await
            .expect("replace");
    let before = w.snap().await;
    // The retired owner's token no longer authenticates, and its generation is fenced.
    refused(
        &w,
        &before,
        w.d.release(
            &h1,
            &occ,
            &tok1,
            &request_digest("1"),
            ReleaseReason::DeadlineExpired,
        )
        .await,
        Req::R006,
        Some(&occ),
    )
    .await;
    let (_, tok2) = w.d.adopt(&h2, &occ).await.expect("adopt");
    let tok2 = tok2.expect("token");
    let before = w.snap().await;
    let r = refused(
        &w,
        &before,
        w.d.release(
            &h2,
            &occ,
            &tok1,
            &request_digest("1"),
            ReleaseReason::PredecessorNeverEntered,
        )
        .await,
        Req::R008,
        Some(&occ),
    )
    .await;
    assert_eq!(r.kind, RefusalKind::OwnerTokenMismatch);
    refused(
        &w,
        &before,
        w.d.release(
            &h2,
            &occ,
            &tok2,
            &request_digest("other"),
            ReleaseReason::PredecessorNeverEntered,
        )
        .await,
        Req::R008,
        Some(&occ),
    )
    .await;
    let st =
        w.d.release(
            &h2,
            &occ,
            &tok2,
            &request_digest("1"),
            ReleaseReason::PredecessorNeverEntered,
        )
        .await
        .expect("release");
    assert_eq!(st.phase, Phase::Released);
    assert_eq!(
        (
            st.authority.held,
            st.authority.released,
            st.authority.consumed
        ),
        (0, 40, 0)
    );
    // Re-presentation never re-reserves, re-enters or re-creates.
    let before = w.snap().await;
    let r = refused(
        &w,
        &before,
        w.d.reserve(&h2, &occ, &binding("1"), 40).await,
        Req::R008,
        Some(&occ),
    )
    .await;
    assert_eq!(r.kind, RefusalKind::Tombstoned);
    refused(
        &w,
        &before,
        w.d.enter(&h2, &occ, &tok2, &binding("1")).await,
        Req::R008,
        Some(&occ),
    )
    .await;
    assert_eq!(w.d.create(&h2, create_req("1")).await.expect("same"), occ);
    assert_eq!(w.snap().await, before);
}

#[rstest]
#[tokio::test]
async fn req008_release_after_entry_is_refused_whatever_the_reason(
    #[values(Arm::Memory, Arm::Sqlite, Arm::Postgres)] arm: Arm,
    #[values(
        ReleaseReason::DeadlineExpired,
        ReleaseReason::OwnerAbandoned,
        ReleaseReason::PredecessorNeverEntered
    )]
    reason: ReleaseReason,
) {
    let Some(w) = world(arm).await else { return };
    let h = w.join("a").await;
    let (occ, tok, _) = w.entered(&h, "1").await;
    w.clock.advance(3_600_000);
    w.d.refresh(&h).await.expect_err("expired");
    let h2 = w.join("b").await;
    let (_, tok2) = w.d.adopt(&h2, &occ).await.expect("adopt");
    let before = w.snap().await;
    for t in [&tok, &tok2.expect("token")] {
        let r = refused(
            &w,
            &before,
            w.d.release(&h2, &occ, t, &request_digest("1"), reason)
                .await,
            Req::R008,
            Some(&occ),
        )
        .await;
        assert!(matches!(r.kind, RefusalKind::NotPreEntry { .. }));
    }
}

// ---------- AOC-REQ-009 / -011 ----------

#[rstest]
#[case::http_5xx(NativeResult::HttpError { status: 503 }, 0, MissingKnowledge::HttpStatusOnly { status: 503 })]
#[case::http_404(NativeResult::HttpError { status: 404 }, 0, MissingKnowledge::HttpStatusOnly { status: 404 })]
#[case::transport(NativeResult::Transport { detail: "connection reset".into() }, 0, MissingKnowledge::Transport)]
#[case::garbled(NativeResult::Undecodable, 0, MissingKnowledge::Undecodable)]
#[case::unmapped(status("disputed"), 0, MissingKnowledge::Unmapped { label: "disputed".into() })]
#[case::not_found(NativeResult::NotFound, 0, MissingKnowledge::NotFound)]
#[case::beyond_retention(NativeResult::NotFound, 86_400_001, MissingKnowledge::BeyondRetention)]
#[case::not_found_at_the_retention_horizon(
    NativeResult::NotFound,
    86_400_000,
    MissingKnowledge::NotFound
)]
#[case::incomplete_listing(NativeResult::Listing { complete: false, found: None }, 0, MissingKnowledge::IncompleteListing)]
#[case::complete_listing_beyond_retention(NativeResult::Listing { complete: true, found: None }, 86_400_001, MissingKnowledge::BeyondRetention)]
#[tokio::test]
async fn req009_weak_evidence_is_missing_knowledge_never_terminal(
    #[values(Arm::Memory, Arm::Sqlite, Arm::Postgres)] arm: Arm,
    #[case] native: NativeResult,
    #[case] age_ms: u64,
    #[case] flag: MissingKnowledge,
) {
    let Some(w) = world(arm).await else { return };
    let h = w.join("a").await;
    let (occ, _, _) = w.entered(&h, "1").await;
    w.clock.advance(age_ms);
    let before = w.d.state(&occ).await.expect("state");
    let st =
        w.d.record_evidence(
            &occ,
            &evidence(
                &binding("1"),
                EvidenceKind::StatusQuery,
                native.clone(),
                None,
                w.clock.now_millis(),
            ),
            None,
        )
        .await
        .expect("recorded");
    assert!(st.is_unresolved(), "{native:?} resolved the occurrence");
    assert_eq!(st.outcome, None);
    assert!(st.missing.contains(&flag), "{:?}", st.missing);
    // The profile's retention horizon is 86 400 000 ms after entry: beyond it, and only beyond.
    assert_eq!(
        st.missing.contains(&MissingKnowledge::BeyondRetention),
        age_ms > 86_400_000,
        "{:?}",
        st.missing
    );
    assert_eq!(st.authority, before.authority);
    // The native response is stored beside its interpretation.
    let last = w.d.history(&occ).await.expect("h").pop().expect("entry");
    match last.body {
        EntryBody::Observed {
            evidence,
            interpretation,
            ..
        } => {
            assert_eq!(evidence.native, native);
            assert_eq!(interpretation.class, None);
        }
        other => panic!("{other:?}"),
    }
}

/// The profile's freshness horizon is 60 000 ms: evidence exactly that old is fresh and may
/// resolve; one millisecond older is stale and may not.
#[rstest]
#[case::one_ms_past_the_horizon(60_001, true)]
#[case::at_the_horizon(60_000, false)]
#[tokio::test]
async fn req009_stale_evidence_does_not_resolve(
    #[values(Arm::Memory, Arm::Sqlite, Arm::Postgres)] arm: Arm,
    #[case] age: u64,
    #[case] stale: bool,
) {
    let Some(w) = world(arm).await else { return };
    let h = w.join("a").await;
    let (occ, _, _) = w.entered(&h, "1").await;
    let seen_at = w.clock.now_millis();
    w.clock.advance(age);
    let st =
        w.d.record_evidence(
            &occ,
            &evidence(
                &binding("1"),
                EvidenceKind::StatusQuery,
                status("succeeded"),
                Some("pay_1"),
                seen_at,
            ),
            None,
        )
        .await
        .expect("recorded");
    if !stale {
        assert!(
            !st.is_unresolved(),
            "fresh evidence resolves: {:?}",
            st.missing
        );
        return;
    }
    assert!(st.is_unresolved());
    assert!(st.missing.contains(&MissingKnowledge::Stale));
    assert_eq!(st.provider_ref, None, "stale evidence binds no reference");
}

#[rstest]
#[tokio::test]
async fn req011_conflicting_authoritative_evidence_stays_unresolved(
    #[values(Arm::Memory, Arm::Sqlite, Arm::Postgres)] arm: Arm,
) {
    let Some(w) = world(arm).await else { return };
    let h = w.join("a").await;
    let (occ, _, _) = w.entered(&h, "1").await;
    let b = binding("1");
    let t = w.clock.now_millis();
    // A listing says "declined" (not_accepted) …
    let mut listed = evidence(
        &b,
        EvidenceKind::StatusQuery,
        NativeResult::Listing {
            complete: true,
            found: Some("declined".into()),
        },
        None,
        t,
    );
    listed.source = "payments.get".into();
    let st =
        w.d.record_evidence(&occ, &listed, None)
            .await
            .expect("first");
    assert_eq!(st.outcome, Some(Outcome::NotAccepted));
    // … and the lookup says "succeeded": both kept, conflict flagged, no favourable selection.
    let st =
        w.d.record_evidence(
            &occ,
            &evidence(&b, EvidenceKind::StatusQuery, status("succeeded"), None, t),
            None,
        )
        .await
        .expect("second");
    assert_eq!(
        st.outcome,
        Some(Outcome::NotAccepted),
        "the first decision is not overwritten"
    );
    assert!(st.missing.contains(&MissingKnowledge::Conflicting));
    assert_eq!(st.observations, 2);

    // Before any terminal decision, conflicting evidence blocks resolution altogether.
    let (occ2, _, _) = w.entered(&h, "2").await;
    let b2 = binding("2");
    let mut conflicting = evidence(&b2, EvidenceKind::StatusQuery, status("failed"), None, t);
    conflicting.authenticated = true;
    // Record an authoritative "accepted", then two terminal classes in one go is impossible, so
    // simulate the race: "failed" resolves, "succeeded" then conflicts.
    let st =
        w.d.record_evidence(&occ2, &conflicting, None)
            .await
            .expect("failed");
    assert_eq!(st.outcome, Some(Outcome::FinalFailure { no_effect: false }));
    let st =
        w.d.record_evidence(
            &occ2,
            &evidence(&b2, EvidenceKind::StatusQuery, status("succeeded"), None, t),
            None,
        )
        .await
        .expect("s");
    assert!(st.missing.contains(&MissingKnowledge::Conflicting));
}

#[rstest]
#[tokio::test]
async fn req011_final_failure_keeps_effect_unresolved_until_no_effect_is_proven(
    #[values(Arm::Memory, Arm::Sqlite, Arm::Postgres)] arm: Arm,
) {
    let Some(w) = world(arm).await else { return };
    let h = w.join("a").await;
    let (occ, _, _) = w.entered(&h, "1").await;
    let b = binding("1");
    let t = w.clock.now_millis();
    let st =
        w.d.record_evidence(
            &occ,
            &evidence(
                &b,
                EvidenceKind::StatusQuery,
                status("failed"),
                Some("pay_1"),
                t,
            ),
            None,
        )
        .await
        .expect("failed");
    assert_eq!(st.outcome, Some(Outcome::FinalFailure { no_effect: false }));
    assert_eq!(st.authority.consumed, 100);
    let st =
        w.d.record_evidence(
            &occ,
            &evidence(
                &b,
                EvidenceKind::StatusQuery,
                status("no_effect_confirmed"),
                Some("pay_1"),
                t,
            ),
            None,
        )
        .await
        .expect("no effect");
    assert_eq!(st.outcome, Some(Outcome::FinalFailure { no_effect: true }));
    assert_eq!(
        st.authority.consumed, 100,
        "no-effect is not a refund (AOC-REQ-012)"
    );
    assert_eq!(st.authority.released, 0);
    // "accepted" is not success.
    let (occ2, _, _) = w.entered(&h, "2").await;
    let st =
        w.d.record_evidence(
            &occ2,
            &evidence(
                &binding("2"),
                EvidenceKind::StatusQuery,
                status("processing"),
                Some("pay_2"),
                t,
            ),
            None,
        )
        .await
        .expect("accepted");
    assert_eq!(st.phase, Phase::Acknowledged);
    assert!(st.is_unresolved());
}

// ---------- AOC-REQ-010 ----------

#[rstest]
#[tokio::test]
async fn req010_an_entered_occurrence_never_enters_again_under_any_relabel(
    #[values(Arm::Memory, Arm::Sqlite, Arm::Postgres)] arm: Arm,
) {
    let Some(w) = world(arm).await else { return };
    let h1 = w.join("a").await;
    let (occ, tok, _) = w.entered(&h1, "1").await;
    // New caller retry id, task, grant, action digest: same occurrence.
    let mut relabel = create_req("1");
    relabel.labels.retry_id = Some("retry-99".into());
    relabel.labels.grant_id = Some("grant-99".into());
    relabel.labels.task_id = Some("task-99".into());
    assert_eq!(w.d.create(&h1, relabel).await.expect("same"), occ);
    let before = w.snap().await;
    refused(
        &w,
        &before,
        w.d.enter(&h1, &occ, &tok, &binding("1")).await,
        Req::R010,
        Some(&occ),
    )
    .await;
    refused(
        &w,
        &before,
        w.d.reserve(&h1, &occ, &binding("1"), 100).await,
        Req::R010,
        Some(&occ),
    )
    .await;
    // A new executor generation does not bypass it either.
    let h2 =
        w.d.replace(&lane("lane-a"), &ex("b"))
            .await
            .expect("replace");
    let (_, tok2) = w.d.adopt(&h2, &occ).await.expect("adopt");
    let before = w.snap().await;
    refused(
        &w,
        &before,
        w.d.enter(&h2, &occ, &tok2.expect("t"), &binding("1")).await,
        Req::R010,
        Some(&occ),
    )
    .await;
    assert_eq!(w.d.state(&occ).await.expect("s").entry_attempts, 1);
}

// ---------- AOC-REQ-012 ----------

#[rstest]
#[tokio::test]
async fn req012_a_remedy_is_a_new_linked_occurrence_and_restores_nothing(
    #[values(Arm::Memory, Arm::Sqlite, Arm::Postgres)] arm: Arm,
) {
    let Some(w) = world(arm).await else { return };
    let h = w.join("a").await;
    let (occ, _, _) = w.entered(&h, "1").await;
    let t = w.clock.now_millis();
    w.d.record_evidence(
        &occ,
        &evidence(
            &binding("1"),
            EvidenceKind::StatusQuery,
            status("succeeded"),
            Some("pay_1"),
            t,
        ),
        None,
    )
    .await
    .expect("success");
    let original = w.d.history(&occ).await.expect("h");
    let before = w.snap().await;
    // The original grant is not a separate authorization.
    let r = refused(
        &w,
        &before,
        w.d.remedy(
            &h,
            &occ,
            RemedyRequest {
                authorization: "grant-1".into(),
                request_digest: request_digest("refund"),
            },
        )
        .await,
        Req::R012,
        Some(&occ),
    )
    .await;
    assert!(matches!(r.kind, RefusalKind::RemedyAuthorization { .. }));
    let req = RemedyRequest {
        authorization: "refund-auth-7".into(),
        request_digest: request_digest("refund"),
    };
    let remedy = w.d.remedy(&h, &occ, req.clone()).await.expect("remedy");
    assert_ne!(remedy, occ);
    // Replay-protected: the same authorization names the same remedy.
    assert_eq!(w.d.remedy(&h, &occ, req).await.expect("again"), remedy);
    let after = w.d.history(&occ).await.expect("h");
    assert!(
        is_prefix_preserving(&original, &after),
        "original history rewritten"
    );
    let st = w.d.state(&occ).await.expect("s");
    assert_eq!(st.remedies, vec![remedy.clone()]);
    assert_eq!(
        st.authority.consumed, 100,
        "consumed authority never restored"
    );
    assert_eq!(st.outcome, Some(Outcome::Success));
    let rst = w.d.state(&remedy).await.expect("remedy state");
    assert_eq!(rst.remedy_of.as_ref().map(|r| &r.original), Some(&occ));
    assert_eq!(
        rst.phase,
        Phase::Created,
        "the remedy has its own lifecycle and authority"
    );
    // Nothing entered, nothing to remedy.
    let pending = w.d.create(&h, create_req("2")).await.expect("create");
    let before = w.snap().await;
    refused(
        &w,
        &before,
        w.d.remedy(
            &h,
            &pending,
            RemedyRequest {
                authorization: "x".into(),
                request_digest: request_digest("y"),
            },
        )
        .await,
        Req::R012,
        Some(&pending),
    )
    .await;
}

// ---------- AOC-REQ-001 / -013 / §5 ----------

#[rstest]
#[tokio::test]
async fn req001_013_bypass_paths_are_disclosed_and_unsupported_compositions_reported(
    #[values(Arm::Memory, Arm::Sqlite, Arm::Postgres)] arm: Arm,
) {
    let Some(w) = world_with(arm, |c| {
        c.bypass_paths = vec![BypassPath {
            kind: BypassKind::Administrator,
            description: "provider dashboard refunds".into(),
        }];
        c.aadp = AadpAccounting::AliasedToOccurrenceExposure;
    })
    .await
    else {
        return;
    };
    assert_eq!(w.d.bypass_paths()[0].kind, BypassKind::Administrator);
    assert!(matches!(
        w.d.composition(),
        CompositionStatus::Unsupported { .. }
    ));
    let before = w.snap().await;
    refused(
        &w,
        &before,
        w.d.import_from_other_domain(&[]),
        Req::R013,
        None,
    )
    .await;
    let Some(w2) = world_with(arm, |c| c.aadp = AadpAccounting::Distinct).await else {
        return;
    };
    assert_eq!(w2.d.composition(), CompositionStatus::Supported);
}

#[tokio::test]
async fn an_invalid_config_lists_every_defect() {
    let mut cfg = config("x");
    cfg.domain_id = " ".into();
    cfg.limits.max_in_flight = 0;
    cfg.profiles[0].status_sources.clear();
    cfg.profiles[0].mapping.clear();
    let clock = ManualClock::at(T0);
    let err = Domain::new(
        std::sync::Arc::new(AnyStore::Memory(aocheck::MemoryStore::new())),
        cfg,
        std::sync::Arc::new(clock),
    )
    .expect_err("invalid");
    let text = err.join("\n");
    for needle in ["domain_id", "limits", "status_sources", "mapping"] {
        assert!(text.contains(needle), "{needle} missing from:\n{text}");
    }
}

// ---------- seed 003: admission ----------

#[rstest]
#[tokio::test]
async fn seed003_experiment_a_queued_is_not_executed(
    #[values(Arm::Memory, Arm::Sqlite, Arm::Postgres)] arm: Arm,
) {
    let Some(w) = world(arm).await else { return };
    let a =
        w.d.submit(&lane("lane-a"), "invoice-1", &Digest::of_bytes(b"p1"))
            .await
            .expect("submit");
    assert_eq!(a.state, AdmissionState::Queued);
    assert!(
        w.d.list(None).await.expect("list").is_empty(),
        "queued work created no occurrence"
    );
    // Same key, same payload: the same admission. Another payload: refused, nothing written.
    assert_eq!(
        w.d.submit(&lane("lane-a"), "invoice-1", &Digest::of_bytes(b"p1"))
            .await
            .expect("again")
            .id,
        a.id
    );
    let before = w.snap().await;
    refused(
        &w,
        &before,
        w.d.submit(&lane("lane-a"), "invoice-1", &Digest::of_bytes(b"p2"))
            .await,
        Req::R010,
        None,
    )
    .await;
    // FIFO: the first submitted is claimed first.
    let b =
        w.d.submit(&lane("lane-a"), "invoice-2", &Digest::of_bytes(b"p2"))
            .await
            .expect("submit");
    let h = w.join("a").await;
    let claimed = w.d.claim_next(&h).await.expect("claim").expect("head");
    assert_eq!(claimed.id, a.id);
    assert!(
        matches!(claimed.state, AdmissionState::Started { generation, .. } if generation == h.generation)
    );
    // One at a time: the next waits until the started one ends.
    let before = w.snap().await;
    refused(&w, &before, w.d.claim_next(&h).await, Req::R005, None).await;
    w.d.finish_admission(&h, &a.id, AdmissionEnd::Completed)
        .await
        .expect("finish");
    assert_eq!(
        w.d.claim_next(&h).await.expect("claim").expect("next").id,
        b.id
    );
}

#[rstest]
#[tokio::test]
async fn seed003_experiment_b_unknown_is_resolved_by_readback_never_requeued(
    #[values(Arm::Memory, Arm::Sqlite, Arm::Postgres)] arm: Arm,
) {
    let Some(w) = world(arm).await else { return };
    let l = lane("lane-a");
    let a1 =
        w.d.submit(&l, "invoice-1", &request_digest("1"))
            .await
            .expect("submit");
    let a2 =
        w.d.submit(&l, "invoice-2", &request_digest("2"))
            .await
            .expect("submit");
    let h1 = w.join("a").await;
    // a1: started, occurrence entered, then the executor dies.
    w.d.claim_next(&h1).await.expect("claim").expect("a1");
    let (occ1, _, _) = w.entered(&h1, "1").await;
    w.d.link_admission(&h1, &a1.id, &occ1).await.expect("link");
    let h2 = w.d.replace(&l, &ex("b")).await.expect("replace");
    assert_eq!(
        w.d.recover(&h2).await.expect("recover"),
        vec![a1.id.clone()]
    );
    assert!(matches!(
        w.d.admission(&a1.id).await.expect("a").state,
        AdmissionState::Unknown { .. }
    ));
    // The lane does not move on while unknown stands.
    let before = w.snap().await;
    refused(&w, &before, w.d.claim_next(&h2).await, Req::R005, None).await;
    // Readback: entered but unresolved → still unknown.
    let still = w.d.resolve_unknown(&h2, &a1.id).await.expect("readback");
    assert!(matches!(still.state, AdmissionState::Unknown { .. }));
    // Provider evidence arrives; now readback resolves it.
    let t = w.clock.now_millis();
    w.d.record_evidence(
        &occ1,
        &evidence(
            &binding("1"),
            EvidenceKind::StatusQuery,
            status("succeeded"),
            Some("pay_1"),
            t,
        ),
        None,
    )
    .await
    .expect("ev");
    let done = w.d.resolve_unknown(&h2, &a1.id).await.expect("readback");
    assert_eq!(
        done.state,
        AdmissionState::Ended {
            end: AdmissionEnd::Completed
        }
    );
    // a2: started by h2, which dies before creating anything; readback proves non-execution.
    w.d.claim_next(&h2).await.expect("claim").expect("a2");
    let h3 = w.d.replace(&l, &ex("c")).await.expect("replace");
    assert_eq!(
        w.d.recover(&h3).await.expect("recover"),
        vec![a2.id.clone()]
    );
    let done = w.d.resolve_unknown(&h3, &a2.id).await.expect("readback");
    assert_eq!(
        done.state,
        AdmissionState::Ended {
            end: AdmissionEnd::NotExecuted
        }
    );
    for a in w.d.admissions(&l).await.expect("list") {
        assert_ne!(
            a.state,
            AdmissionState::Queued,
            "nothing went back to queued"
        );
    }
}

/// The reference's `state` answer over a real history (created, reserved, entered, a bound
/// response, resolved) is the evidence envelope its schema describes: it validates against
/// `docs/schemas/state.schema.json` (by Python's jsonschema, an independent validator), decodes
/// with no defect, declares a chain that verifies, and its report agrees with its history.
#[tokio::test]
async fn the_reference_state_answer_is_the_documented_envelope() {
    let Some(w) = world(Arm::Memory).await else {
        return;
    };
    let h = w.join("a").await;
    let (occ, _, attempt) = w.entered(&h, "1").await;
    let ev = evidence(
        &binding("1"),
        EvidenceKind::Response { attempt },
        status("succeeded"),
        Some("pay_1"),
        w.clock.now_millis(),
    );
    w.d.record_evidence(&occ, &ev, None)
        .await
        .expect("evidence");
    let hist = w.d.history(&occ).await.expect("history");
    let st = w.d.state(&occ).await.expect("state");
    let answer = aocheck::reference::envelope::answer(&hist, &st);
    let json = serde_json::to_value(&answer).expect("json");
    let back = aocheck::check::evidence::StateAnswer::decode(json.clone()).expect("decodes");
    assert_eq!(back, answer);
    assert_eq!(
        aocheck::check::evidence::verify_chain(&answer.entries),
        Ok(())
    );
    let view = aocheck::check::evidence::View::of(&answer.entries, &answer.flag_map);
    assert!(view.illegal.is_empty(), "{:?}", view.illegal);
    assert_eq!(
        aocheck::check::contradictions(&answer, &view),
        Vec::<(Req, String)>::new()
    );
    assert_eq!(answer.report.state, aocheck::vocab::State::Resolved);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("answer.json");
    std::fs::write(&path, json.to_string()).expect("write");
    let schema =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/schemas/state.schema.json");
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg("import json,sys,jsonschema; jsonschema.validate(json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))); print('valid')")
        .arg(&path)
        .arg(&schema)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The schema refuses what the decoder refuses: an entered entry without its attempt.
    let mut bad = json.clone();
    bad["entries"][2]
        .as_object_mut()
        .expect("entry")
        .remove("attempt");
    std::fs::write(&path, bad.to_string()).expect("write");
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg("import json,sys,jsonschema; jsonschema.validate(json.load(open(sys.argv[1])), json.load(open(sys.argv[2])))")
        .arg(&path)
        .arg(&schema)
        .output()
        .expect("python3 runs");
    assert!(
        !out.status.success(),
        "the schema accepted an entry without its attempt"
    );
    assert!(aocheck::check::evidence::StateAnswer::decode(bad).is_err());
}

/// AOC-REQ-003: a binding is fixed only to what the domain pins: a profile it pins, one of that
/// profile's environments, a status source the profile pins, and the profile's key rule. Each
/// departure is refused at `reserve` and writes nothing; the pinned binding is accepted.
#[rstest]
#[case::unpinned_profile_version(|b: &mut ProviderBinding| b.profile_version = "9".into())]
#[case::unknown_environment(|b: &mut ProviderBinding| b.environment = "prod-eu".into())]
#[case::unpinned_status_source(|b: &mut ProviderBinding| b.status_source = "payments.webhook".into())]
#[case::another_key_rule(|b: &mut ProviderBinding| b.key_rule = "Idempotency-Key = random".into())]
#[tokio::test]
async fn req003_a_binding_outside_the_pinned_profile_is_refused(
    #[values(Arm::Memory, Arm::Sqlite, Arm::Postgres)] arm: Arm,
    #[case] change: fn(&mut ProviderBinding),
) {
    let Some(w) = world(arm).await else { return };
    let h = w.join("a").await;
    let occ = w.d.create(&h, create_req("1")).await.expect("create");
    let mut b = binding("1");
    change(&mut b);
    let before = w.snap().await;
    refused(
        &w,
        &before,
        w.d.reserve(&h, &occ, &b, 100).await,
        Req::R003,
        Some(&occ),
    )
    .await;
    w.d.reserve(&h, &occ, &binding("1"), 100)
        .await
        .expect("the pinned binding is accepted");
}

/// Seed 003 with AOC-REQ-011: an occurrence resolved and then contradicted by authoritative
/// evidence is unresolved again ("conflicting evidence … stays unresolved"), so readback keeps
/// its unknown admission unknown; it neither completes nor fails it.
#[rstest]
#[tokio::test]
async fn seed003_readback_keeps_unknown_when_the_outcome_is_contested(
    #[values(Arm::Memory, Arm::Sqlite, Arm::Postgres)] arm: Arm,
) {
    let Some(w) = world(arm).await else { return };
    let l = lane("lane-a");
    let (a1, h1) = w.claimed("1").await;
    let (occ1, _, _) = w.entered(&h1, "1").await;
    w.d.link_admission(&h1, &a1.id, &occ1).await.expect("link");
    for label in ["succeeded", "declined"] {
        let t = w.clock.now_millis();
        w.d.record_evidence(
            &occ1,
            &evidence(
                &binding("1"),
                EvidenceKind::StatusQuery,
                status(label),
                Some("pay_1"),
                t,
            ),
            None,
        )
        .await
        .expect("evidence");
    }
    assert!(w.d.state(&occ1).await.expect("state").is_unresolved());
    let h2 = w.d.replace(&l, &ex("b")).await.expect("replace");
    w.d.recover(&h2).await.expect("recover");
    let after = w.d.resolve_unknown(&h2, &a1.id).await.expect("readback");
    assert!(
        matches!(after.state, AdmissionState::Unknown { .. }),
        "{:?}",
        after.state
    );
}

/// Seed 003 readback of an unknown admission ends it by its occurrence's truth: released before
/// entry is `not_executed`; resolved as not accepted is `failed` (never `completed`, never still
/// unknown).
#[rstest]
#[case::released_before_entry(true, AdmissionEnd::NotExecuted)]
#[case::resolved_not_accepted(false, AdmissionEnd::Failed)]
#[tokio::test]
async fn seed003_readback_ends_unknown_by_the_occurrence(
    #[values(Arm::Memory, Arm::Sqlite, Arm::Postgres)] arm: Arm,
    #[case] released: bool,
    #[case] want: AdmissionEnd,
) {
    let Some(w) = world(arm).await else { return };
    let l = lane("lane-a");
    let (a1, h1) = w.claimed("1").await;
    let occ = if released {
        let occ = w.d.create(&h1, create_req("1")).await.expect("create");
        w.d.reserve(&h1, &occ, &binding("1"), 100)
            .await
            .expect("reserve");
        occ
    } else {
        let (occ, _, _) = w.entered(&h1, "1").await;
        let t = w.clock.now_millis();
        w.d.record_evidence(
            &occ,
            &evidence(
                &binding("1"),
                EvidenceKind::StatusQuery,
                status("declined"),
                Some("pay_1"),
                t,
            ),
            None,
        )
        .await
        .expect("evidence");
        occ
    };
    w.d.link_admission(&h1, &a1.id, &occ).await.expect("link");
    let h2 = w.d.replace(&l, &ex("b")).await.expect("replace");
    w.d.recover(&h2).await.expect("recover");
    if released {
        let (_, token) = w.d.adopt(&h2, &occ).await.expect("adopt");
        w.d.release(
            &h2,
            &occ,
            &token.expect("a reservation adopted"),
            &request_digest("1"),
            ReleaseReason::PredecessorNeverEntered,
        )
        .await
        .expect("release");
    }
    let after = w.d.resolve_unknown(&h2, &a1.id).await.expect("readback");
    assert_eq!(after.state, AdmissionState::Ended { end: want });
}
