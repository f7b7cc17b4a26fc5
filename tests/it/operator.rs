//! The Hermes operator connector against fake-hermes: the seed's "verify an integration" items that
//! concern the start fence, approvals and cancellation, each checked against fake-hermes's ledger.

use aocheck::operator::connector::ResultStatus;
use aocheck::operator::{Action, BindingStatus, Connector, ErrorCode, Policy};
use aocheck::store::AnyStore;
use aocheck::{ManualClock, MemoryStore, SystemClock};
use fake_hermes::app::{ReleaseAction, ScriptRule};
use fake_hermes::faults::{Fault, Plan, Route, Rule};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

struct Hermes {
    base: String,
    handle: fake_hermes::Handle,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Hermes {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn hermes() -> Hermes {
    let config = fake_hermes::Config {
        stream_wait_ms: 200,
        ..fake_hermes::Config::default()
    };
    let (app, handle) = fake_hermes::router(config).expect("config");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let task = tokio::spawn(async move {
        let _ = fake_hermes::serve(listener, app).await;
    });
    Hermes { base, handle, task }
}

fn policy() -> Policy {
    Policy {
        poll_interval_ms: 20,
        start_claim_ttl_ms: 1_000,
        cancel_grace_ms: 1_000,
        ..Policy::default()
    }
}

fn connector(h: &Hermes, store: &Arc<AnyStore>, instance: &str) -> Connector<AnyStore> {
    connector_with(h, store, instance, policy())
}

fn connector_with(
    h: &Hermes,
    store: &Arc<AnyStore>,
    instance: &str,
    policy: Policy,
) -> Connector<AnyStore> {
    Connector::new(
        store.clone(),
        "primary",
        &h.base,
        "hermes-test-key",
        policy,
        instance,
        Arc::new(SystemClock),
    )
    .expect("connector")
}

fn store() -> Arc<AnyStore> {
    Arc::new(AnyStore::Memory(MemoryStore::new()))
}

fn action(id: &str, input: Value) -> Action {
    Action {
        id: id.into(),
        idempotency_key: format!("idem-{id}"),
        capability: "cap:hermes_agent:primary:operator".into(),
        input,
        deadline_ms: Some(20_000),
        identity: None,
        approval: None,
        delegation: None,
    }
}

fn objective(text: &str) -> Value {
    json!({"objective": text, "context": {"case_id": "case-1"}, "candidate_capabilities": ["cap:support:case.get"]})
}

fn plan(route: Route, fault: Fault) -> Plan {
    Plan {
        rules: vec![Rule {
            route,
            nth: 1,
            times: 1,
            session_id: None,
            fault,
        }],
    }
}

fn script(h: &Hermes, s: Value) {
    h.handle
        .set_scripts(
            vec![ScriptRule {
                session_id: None,
                objective_contains: Some(String::new()),
                script: s,
            }],
            None,
        )
        .expect("script");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_objective_completes_with_the_governed_payload() {
    let h = hermes().await;
    let s = store();
    let c = connector(&h, &s, "i1");
    let r = c
        .invoke(&action("act_1", objective("summarise the case")))
        .await
        .expect("invoke");
    assert_eq!(r.status, ResultStatus::Completed, "{r:?}");
    assert_eq!(r.output["session_id"], "aip-operator-act_1");
    assert_eq!(r.output["source_action_id"], "act_1");
    let l = h.handle.ledger();
    assert_eq!(l.runs.len(), 1);
    assert_eq!(l.runs[0].session_id, "aip-operator-act_1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_2_concurrent_replays_of_one_action_start_one_run() {
    let h = hermes().await;
    script(
        &h,
        json!({"steps": [{"id": "t", "kind": "tool", "tool": "search", "duration_ms": 300}, {"id": "m", "kind": "message", "text": "done", "after": ["t"]}]}),
    );
    let s = store();
    let a = action("act_2", objective("x"));
    let mut tasks = Vec::new();
    for i in 0..5 {
        let c = connector(&h, &s, &format!("i{}", i % 2));
        let a = a.clone();
        tasks.push(tokio::spawn(async move { c.invoke(&a).await }));
    }
    let mut run_ids = Vec::new();
    for t in tasks {
        let r = t.await.expect("join").expect("invoke");
        assert_eq!(r.status, ResultStatus::Completed, "{r:?}");
        run_ids.push(r.output["run_id"].clone());
    }
    run_ids.dedup();
    assert_eq!(run_ids.len(), 1, "every replay observed the same binding");
    assert_eq!(
        h.handle.ledger().runs.len(),
        1,
        "exactly one run was started"
    );
}

#[tokio::test]
async fn verify_3_changed_input_under_the_same_action_id_is_rejected() {
    let h = hermes().await;
    let s = store();
    let c = connector(&h, &s, "i1");
    c.invoke(&action("act_3", objective("first")))
        .await
        .expect("first");
    let e = c
        .invoke(&action("act_3", objective("second")))
        .await
        .expect_err("collision");
    assert_eq!(e.code, ErrorCode::OperatorPolicy);
    assert!(!e.retryable);
    assert_eq!(h.handle.ledger().runs.len(), 1);
}

#[rstest::rstest]
#[case::lost_reply(
    Fault::CommitThenDrop,
    1,
    BindingStatus::OutcomeUnknown,
    ErrorCode::OperatorOutcomeUnknown
)]
#[case::five_xx_after_commit(Fault::CommitThen { status: 502 }, 1, BindingStatus::OutcomeUnknown, ErrorCode::OperatorOutcomeUnknown)]
#[case::five_xx_before(Fault::Reject { status: 503 }, 0, BindingStatus::OutcomeUnknown, ErrorCode::OperatorOutcomeUnknown)]
#[case::no_run_id(
    Fault::StartWithoutRunId,
    1,
    BindingStatus::OutcomeUnknown,
    ErrorCode::OperatorOutcomeUnknown
)]
#[case::four_xx(Fault::Reject { status: 400 }, 0, BindingStatus::Failed, ErrorCode::OperatorStartRejected)]
#[tokio::test]
async fn start_outcomes_map_fail_closed_and_are_never_replayed(
    #[case] fault: Fault,
    #[case] runs: usize,
    #[case] status: BindingStatus,
    #[case] code: ErrorCode,
) {
    let h = hermes().await;
    h.handle.set_plan(plan(Route::Start, fault)).expect("plan");
    let s = store();
    let c = connector(&h, &s, "i1");
    let a = action("act_4", objective("x"));
    let r = c.invoke(&a).await.expect("result");
    assert_eq!(r.status, ResultStatus::Failed);
    assert_eq!(r.error.as_ref().map(|e| e.code), Some(code), "{r:?}");
    assert_eq!(
        r.error.as_ref().map(|e| e.uncertain_outcome),
        Some(code != ErrorCode::OperatorStartRejected)
    );
    let (_, b) = c.binding("act_4").await.expect("read").expect("binding");
    assert_eq!(b.status, status);
    // A replay returns the stored outcome and never starts again.
    let again = c.invoke(&a).await.expect("replay");
    assert_eq!(again.status, ResultStatus::Failed);
    assert_eq!(h.handle.ledger().runs.len(), runs, "no second start");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_4_a_lost_unbound_start_is_outcome_unknown_after_process_replacement() {
    let h = hermes().await;
    h.handle
        .set_plan(plan(
            Route::Start,
            Fault::Hold {
                name: "slow".into(),
            },
        ))
        .expect("plan");
    let s = store();
    let a = action("act_5", objective("x"));
    let first = {
        let c = connector(&h, &s, "process-a");
        let a = a.clone();
        tokio::spawn(async move { c.invoke(&a).await })
    };
    assert!(
        h.handle
            .wait_parked("slow", 1, Duration::from_secs(5))
            .await
    );
    first.abort(); // the process dies while its start is in flight
    let _ = first.await;
    // The provider then answers the dead process's request: the run exists.
    h.handle.release("slow", ReleaseAction::Proceed);
    let c2 = connector(&h, &s, "process-b");
    let r = c2.invoke(&a).await.expect("result");
    assert_eq!(
        r.error.as_ref().map(|e| e.code),
        Some(ErrorCode::OperatorOutcomeUnknown),
        "{r:?}"
    );
    assert_eq!(
        h.handle.ledger().runs.len(),
        1,
        "the successor never started a second run"
    );
}

fn approval_script() -> Value {
    json!({"steps": [
        {"id": "ap", "kind": "approval", "tool": "terminal", "command": "rm -rf build/"},
        {"id": "m", "kind": "message", "text": "cleaned", "after": ["ap"]}
    ]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_5_an_approval_prompt_requires_a_human_and_an_exact_resume_replay_sends_one_command()
{
    let h = hermes().await;
    script(&h, approval_script());
    let s = store();
    let c = connector(&h, &s, "i1");
    let r = c
        .invoke(&action("act_6", objective("clean")))
        .await
        .expect("invoke");
    assert_eq!(r.status, ResultStatus::RequiresHuman, "{r:?}");
    assert!(!r.output["pending_approval"].is_null());
    let resume = action(
        "act_7",
        json!({"resume": {"source_action_id": "act_6", "choice": "once"}}),
    );
    let r = c.invoke(&resume).await.expect("resume");
    assert_eq!(r.action_id, "act_7");
    assert_eq!(r.output["source_action_id"], "act_6");
    assert_eq!(r.status, ResultStatus::Completed, "{r:?}");
    let replay = c.invoke(&resume).await.expect("replay");
    assert_eq!(replay.status, ResultStatus::Completed);
    assert_eq!(
        h.handle.ledger().approvals.len(),
        1,
        "the exact replay sent no second command"
    );
    let changed = action(
        "act_7",
        json!({"resume": {"source_action_id": "act_6", "choice": "deny"}}),
    );
    assert_eq!(
        c.invoke(&changed).await.expect_err("collision").code,
        ErrorCode::OperatorPolicy
    );
    let missing = action(
        "act_8",
        json!({"resume": {"source_action_id": "act_404", "choice": "once"}}),
    );
    assert_eq!(
        c.invoke(&missing).await.expect_err("no source").code,
        ErrorCode::OperatorPolicy
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_lost_after_being_applied_is_approval_outcome_unknown() {
    let h = hermes().await;
    script(&h, approval_script());
    let s = store();
    let c = connector(&h, &s, "i1");
    c.invoke(&action("act_9", objective("clean")))
        .await
        .expect("invoke");
    h.handle
        .set_plan(plan(Route::Approval, Fault::CommitThen { status: 500 }))
        .expect("plan");
    let r = c
        .invoke(&action(
            "act_10",
            json!({"resume": {"source_action_id": "act_9", "choice": "once"}}),
        ))
        .await
        .expect("resume");
    assert_eq!(
        r.error.as_ref().map(|e| e.code),
        Some(ErrorCode::ApprovalOutcomeUnknown),
        "{r:?}"
    );
    assert_eq!(h.handle.ledger().approvals.len(), 1, "it was applied");
    let (_, b) = c.binding("act_9").await.expect("read").expect("binding");
    assert_eq!(b.status, BindingStatus::OutcomeUnknown);
    assert_eq!(b.approval_commands[0].status, "outcome_unknown");
}

fn slow() -> Value {
    json!({"steps": [{"id": "t", "kind": "tool", "tool": "search", "duration_ms": 5000}, {"id": "m", "kind": "message", "text": "done", "after": ["t"]}]})
}

async fn bound_run(
    h: &Hermes,
    c: &Arc<Connector<AnyStore>>,
    id: &str,
) -> tokio::task::JoinHandle<()> {
    let a = action(id, objective("slow"));
    let c2 = c.clone();
    let t = tokio::spawn(async move {
        let _ = c2.invoke(&a).await;
    });
    for _ in 0..200 {
        if let Ok(Some((_, b))) = c.binding(id).await
            && b.run_id.is_some()
        {
            return t;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let _ = h;
    panic!("the run was never bound");
}

#[rstest::rstest]
#[case::cancelled(None, BindingStatus::Cancelled)]
#[case::stop_stuck(Some(Fault::StopStuck), BindingStatus::OutcomeUnknown)]
#[case::completion_races(Some(Fault::CompleteRacesStop), BindingStatus::Completed)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_6_cancelled_only_after_provider_terminal_evidence(
    #[case] fault: Option<Fault>,
    #[case] want: BindingStatus,
) {
    let h = hermes().await;
    script(&h, slow());
    if let Some(f) = fault {
        h.handle.set_plan(plan(Route::Stop, f)).expect("plan");
    }
    let s = store();
    let c = Arc::new(connector(&h, &s, "i1"));
    let t = bound_run(&h, &c, "act_11").await;
    let b = c.cancel("act_11").await.expect("cancel");
    t.abort();
    assert_eq!(b.status, want, "{b:?}");
    assert!(b.cancel_requested);
    if want == BindingStatus::OutcomeUnknown {
        assert_eq!(
            b.error.as_ref().and_then(|e| e["code"].as_str()),
            Some(ErrorCode::CancellationOutcomeUnknown.as_str())
        );
    }
    assert_eq!(h.handle.ledger().stops.len(), 1);
}

#[rstest::rstest]
#[case::events_404(Fault::Events404)]
#[case::garbled_frame(Fault::GarbleFrame { frame: 1 })]
#[case::dropped_stream(Fault::DropStream { after: 1 })]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_event_stream_falls_back_to_polling(#[case] fault: Fault) {
    let h = hermes().await;
    h.handle.set_plan(plan(Route::Events, fault)).expect("plan");
    let s = store();
    let c = connector(&h, &s, "i1");
    let r = c
        .invoke(&action("act_12", objective("x")))
        .await
        .expect("invoke");
    assert_eq!(r.status, ResultStatus::Completed, "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_lost_to_a_provider_restart_is_missing_knowledge_not_terminal() {
    let h = hermes().await;
    script(&h, slow());
    let s = store();
    let c = Arc::new(connector(&h, &s, "i1"));
    let t = bound_run(&h, &c, "act_13").await;
    t.abort();
    h.handle.forget();
    let e = c
        .invoke(&action("act_13", objective("slow")))
        .await
        .expect_err("unknown status");
    assert_eq!(e.code, ErrorCode::OperatorState);
    let (_, b) = c.binding("act_13").await.expect("read").expect("binding");
    assert_eq!(
        b.status,
        BindingStatus::Running,
        "nothing was concluded from a 404"
    );
    let _ = ManualClock::at(0);
}

// ---------- delegation (seed 000 items 7, 8, 9) ----------

mod delegation {
    use super::*;
    use aocheck::operator::connector::ConnectorDefect;
    use aocheck::operator::delegation::{
        APPROVALS, ApprovalRecord, AuthenticatedPrincipal, DelegationRequest, LIFECYCLE,
        LifecycleEntry, QUEUE, QueueEntry, Resolver,
    };
    use aocheck::store::Store;

    const PRINCIPAL: &str = "agent:hermes_operator:primary";

    fn child() -> Value {
        json!({
            "id": "act_child", "capability": "cap:crm:update", "input": {"account": "a1"},
            "mode": "async", "timeout": 20000, "identity": {"sub": "hermes@primary"},
            "approval": {"id": "apr1", "decision": "approved"},
        })
    }

    fn request() -> DelegationRequest {
        DelegationRequest {
            delegation_id: "del_1".into(),
            parent_action_id: "act_parent".into(),
            requested_by: "agent:planner".into(),
            delegate: PRINCIPAL.into(),
            scope: vec!["crm:write".into()],
            delegation_chain: vec!["agent:planner".into()],
            child: child(),
        }
    }

    fn enabled() -> Policy {
        Policy {
            delegation_enabled: true,
            delegation_capability_prefixes: vec!["cap:crm:".into()],
            delegation_scope_prefixes: vec!["crm:".into()],
            ..policy()
        }
    }

    async fn approved_store() -> Arc<AnyStore> {
        let s = store();
        let rec = ApprovalRecord {
            approval_id: "apr1".into(),
            decision: "approved".into(),
            action_id: "act_child".into(),
            capability_id: "cap:crm:update".into(),
            expires_at: u64::MAX,
        };
        s.record_cas(APPROVALS, "apr1", None, &json!(rec))
            .await
            .expect("approval");
        s
    }

    fn delegating(h: &Hermes, s: &Arc<AnyStore>, p: Policy) -> Connector<AnyStore> {
        connector_with(h, s, "i1", p)
    }

    /// What AIP's queue and lifecycle hold once Hermes's single `aip_call` ran the child.
    async fn child_ran(s: &Arc<AnyStore>, result: Value) {
        let q = QueueEntry {
            action: child(),
            owner: PRINCIPAL.into(),
            status: "completed".into(),
            result: Some(result.clone()),
            authenticated: AuthenticatedPrincipal {
                principal: PRINCIPAL.into(),
                scopes: vec!["action:write".into()],
                expires_at: u64::MAX,
                identity: json!({"sub": "hermes@primary"}),
            },
            actor: PRINCIPAL.into(),
            tenant: "t1".into(),
            tenant_expires_at: None,
        };
        s.record_cas(QUEUE, "act_child", None, &json!(q))
            .await
            .expect("queue");
        let l = LifecycleEntry {
            action_id: "act_child".into(),
            status: "completed".into(),
            result: Some(result),
        };
        s.record_cas(LIFECYCLE, "act_child", None, &json!(l))
            .await
            .expect("lifecycle");
    }

    #[rstest::rstest]
    #[case::off_by_default(policy())]
    #[case::one_allowlist(Policy { delegation_enabled: true, delegation_capability_prefixes: vec!["cap:crm:".into()], ..policy() })]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn delegation_is_refused_without_both_allowlists_and_nothing_reaches_hermes(
        #[case] p: Policy,
    ) {
        let h = hermes().await;
        let s = approved_store().await;
        // A policy with one allowlist is refused when the connector is built; a disabled one
        // refuses the delegation at admission.
        match Connector::new(
            s.clone(),
            "primary",
            &h.base,
            "k",
            p,
            "i1",
            Arc::new(SystemClock),
        ) {
            Err(e) => assert!(e.message.contains("needs both"), "{e}"),
            Ok(c) => {
                let e = c.delegate(&request()).await.expect_err("refused");
                assert_eq!(e.code, ErrorCode::OperatorPolicy, "{e}");
            }
        }
        assert!(h.handle.ledger().runs.is_empty(), "a run reached Hermes");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_payload_is_the_exact_aip_call_arguments_without_identity() {
        let h = hermes().await;
        let s = approved_store().await;
        let c = delegating(&h, &s, enabled());
        // No resolver: Hermes's reply is not accepted as the result.
        let e = c.delegate(&request()).await.expect_err("no resolver");
        assert_eq!(e.code, ErrorCode::DelegatedResultResolverMissing, "{e}");
        let ledger = h.handle.ledger();
        assert_eq!(ledger.runs.len(), 1);
        assert_eq!(ledger.runs[0].session_id, "aip-operator-act_child");
        let sent: Value = serde_json::from_str(&ledger.runs[0].prompt).expect("payload is JSON");
        let mut want = child();
        let m = want.as_object_mut().expect("object");
        let id = m.remove("id").expect("id");
        m.remove("identity");
        m.insert("action_id".into(), id);
        assert_eq!(sent["kind"], "aip_delegation");
        assert_eq!(sent["aip_call_arguments"], want);
        assert_eq!(sent["execution_contract"]["arguments"], want);
        assert_eq!(sent["execution_contract"]["invocations"], 1);
        assert!(!ledger.runs[0].prompt.contains("hermes@primary"));
        // A replay observes the one binding: no second run.
        let _ = c.delegate(&request()).await;
        assert_eq!(h.handle.ledger().runs.len(), 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_connector_that_leaks_identity_is_visible_in_the_ground_truth() {
        let h = hermes().await;
        let s = approved_store().await;
        let c =
            delegating(&h, &s, enabled()).with_defect_for_tests(ConnectorDefect::IdentityInArgs);
        let _ = c.delegate(&request()).await;
        let ledger = h.handle.ledger();
        assert!(ledger.runs[0].prompt.contains("hermes@primary"));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_delegated_result_comes_from_the_lifecycle_never_from_hermes() {
        let h = hermes().await;
        let s = approved_store().await;
        child_ran(&s, json!({"updated": "a1"})).await;
        let c = delegating(&h, &s, enabled()).with_resolver(Resolver {
            tenant: "t1".into(),
        });
        let r = c.delegate(&request()).await.expect("delegated");
        assert_eq!(r.status, ResultStatus::Completed);
        let d = &r.output["provider"]["delegated"];
        assert_eq!(d["result"], json!({"updated": "a1"}), "{r:?}");
        assert_eq!(d["authority"], "aip_native_lifecycle");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_child_never_queued_is_not_observed_and_prose_is_not_a_result() {
        let h = hermes().await;
        let s = approved_store().await;
        let c = delegating(&h, &s, enabled()).with_resolver(Resolver {
            tenant: "t1".into(),
        });
        let e = c.delegate(&request()).await.expect_err("not observed");
        assert_eq!(e.code, ErrorCode::DelegatedExecutionNotObserved, "{e}");
        assert!(!e.retryable);
        // The broken connector takes Hermes's final message instead.
        let h2 = hermes().await;
        let s2 = approved_store().await;
        let c = delegating(&h2, &s2, enabled())
            .with_resolver(Resolver {
                tenant: "t1".into(),
            })
            .with_defect_for_tests(ConnectorDefect::AcceptProse);
        let r = c.delegate(&request()).await.expect("prose accepted");
        assert_eq!(
            r.output["provider"]["delegated"]["authority"],
            "hermes_prose"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_child_still_running_at_the_deadline_is_not_ready_and_retryable() {
        let h = hermes().await;
        let s = approved_store().await;
        child_ran(&s, json!({"updated": "a1"})).await;
        // The child is queued but still running: overwrite the queue status.
        let (v, mut q) = s
            .record_get(QUEUE, "act_child")
            .await
            .expect("read")
            .expect("queued");
        q["status"] = json!("running");
        q["result"] = Value::Null;
        q["action"]["timeout"] = json!(1500);
        s.record_cas(QUEUE, "act_child", Some(v), &q)
            .await
            .expect("update");
        let mut req = request();
        req.child["timeout"] = json!(1500);
        let c = delegating(&h, &s, enabled()).with_resolver(Resolver {
            tenant: "t1".into(),
        });
        let e = c.delegate(&req).await.expect_err("not ready");
        assert_eq!(e.code, ErrorCode::DelegatedResultNotReady, "{e}");
        assert!(e.retryable && !e.uncertain_outcome);
        assert_eq!(h.handle.ledger().runs.len(), 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_tenant_drift_fails_closed() {
        let h = hermes().await;
        let s = approved_store().await;
        child_ran(&s, json!({"updated": "a1"})).await;
        let c = delegating(&h, &s, enabled()).with_resolver(Resolver {
            tenant: "t2".into(),
        });
        let e = c.delegate(&request()).await.expect_err("tenant drift");
        assert_eq!(e.code, ErrorCode::DelegatedTenantMismatch, "{e}");
    }
}
