//! Delegation to the Hermes operator (seed 000, "Delegation" and "Delegated results").
//!
//! Admission fails closed: delegation is off by default, needs both prefix lists, a chain shorter
//! than the depth limit, the expected delegate principal, and (unless the capability is exempt) an
//! Approved decision that exists in the durable approval store for this Action and capability and
//! has not expired. The model-facing payload carries the exact `aip_call` arguments: the child
//! Action with `id` renamed `action_id` and `identity` removed, to be called exactly once.
//!
//! The delegated result is never Hermes's prose: the [`Resolver`] reads the Action queue and the
//! lifecycle store (both durable records on the connector's store) and applies eight checks, each
//! failing closed with its own code.

use super::error::{ConnectorError, ErrorCode};
use super::policy::Policy;
use crate::store::Store;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// Durable approval decisions (`record_*` namespace).
pub const APPROVALS: &str = "aip.approvals.v1";
/// The AIP Action queue: what was really enqueued for a child Action id.
pub const QUEUE: &str = "aip.action_queue.v1";
/// The AIP lifecycle store: the native terminal result of a child Action.
pub const LIFECYCLE: &str = "aip.action_lifecycle.v1";

/// The immutable contract fields of an Action (resolver check 1).
pub const CONTRACT_FIELDS: [&str; 14] = [
    "id",
    "capability",
    "input",
    "mode",
    "idempotency",
    "timeout",
    "conversation",
    "delegation",
    "federation",
    "callback",
    "observability",
    "compliance",
    "approval",
    "transaction",
];

/// Terminal queue statuses.
pub const TERMINAL: [&str; 5] = [
    "completed",
    "failed",
    "cancelled",
    "requires_human",
    "expired",
];

/// A native `DelegationRequest` addressed to `agent:hermes_operator:<endpoint_id>`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DelegationRequest {
    pub delegation_id: String,
    pub parent_action_id: String,
    pub requested_by: String,
    pub delegate: String,
    pub scope: Vec<String>,
    #[serde(default)]
    pub delegation_chain: Vec<String>,
    /// The child Action exactly as AIP holds it (an object with at least `id` and `capability`).
    pub child: Value,
}

/// A durable approval decision.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ApprovalRecord {
    pub approval_id: String,
    /// `approved` or `denied`.
    pub decision: String,
    pub action_id: String,
    pub capability_id: String,
    pub expires_at: u64,
}

/// What the AIP queue holds for a child Action id.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QueueEntry {
    /// The Action as enqueued by the `aip_call`.
    pub action: Value,
    pub owner: String,
    pub status: String,
    #[serde(default)]
    pub result: Option<Value>,
    /// The transport-authenticated principal that enqueued it.
    pub authenticated: AuthenticatedPrincipal,
    pub actor: String,
    pub tenant: String,
    #[serde(default)]
    pub tenant_expires_at: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AuthenticatedPrincipal {
    pub principal: String,
    pub scopes: Vec<String>,
    pub expires_at: u64,
    /// The trusted identity the principal resolves to.
    pub identity: Value,
}

/// The lifecycle store's record of a child Action.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LifecycleEntry {
    pub action_id: String,
    pub status: String,
    #[serde(default)]
    pub result: Option<Value>,
}

fn policy_err(msg: impl Into<String>) -> ConnectorError {
    ConnectorError::new(ErrorCode::OperatorPolicy, msg)
}

fn state_err(e: impl std::fmt::Display) -> ConnectorError {
    ConnectorError::new(ErrorCode::OperatorState, e.to_string())
}

fn matches_prefix(prefixes: &[String], value: &str) -> bool {
    prefixes
        .iter()
        .any(|p| p == "*" || value.starts_with(p.as_str()))
}

impl DelegationRequest {
    pub fn child_id(&self) -> Result<&str, ConnectorError> {
        self.child["id"]
            .as_str()
            .filter(|s| !s.is_empty())
            .ok_or_else(|| policy_err("the child Action has no `id`"))
    }
    pub fn capability(&self) -> Result<&str, ConnectorError> {
        self.child["capability"]
            .as_str()
            .filter(|s| !s.is_empty())
            .ok_or_else(|| policy_err("the child Action has no `capability`"))
    }
}

/// Admission: every policy rule, in order, before anything reaches Hermes.
pub async fn admit<S: Store>(
    policy: &Policy,
    endpoint_id: &str,
    store: &S,
    req: &DelegationRequest,
    now: u64,
) -> Result<(), ConnectorError> {
    policy.validate()?;
    if !policy.delegation_enabled {
        return Err(policy_err(
            "delegation is disabled on this endpoint (delegation_enabled is false)",
        ));
    }
    let expected = format!("agent:hermes_operator:{endpoint_id}");
    if req.delegate != expected {
        return Err(policy_err(format!(
            "the delegate is {:?}, not this endpoint's principal {expected:?}",
            req.delegate
        )));
    }
    let child_id = req.child_id()?;
    let capability = req.capability()?;
    if !matches_prefix(&policy.delegation_capability_prefixes, capability) {
        return Err(policy_err(format!(
            "capability {capability:?} is outside delegation_capability_prefixes"
        )));
    }
    if req.scope.is_empty() {
        return Err(policy_err("the delegation names no scope"));
    }
    if let Some(s) = req
        .scope
        .iter()
        .find(|s| !matches_prefix(&policy.delegation_scope_prefixes, s))
    {
        return Err(policy_err(format!(
            "scope {s:?} is outside delegation_scope_prefixes"
        )));
    }
    if req.delegation_chain.len() as u64 >= policy.max_delegation_depth {
        return Err(policy_err(format!(
            "delegation chain length {} reaches max_delegation_depth {}",
            req.delegation_chain.len(),
            policy.max_delegation_depth
        )));
    }
    let exempt = policy
        .delegation_approval_exempt_capability_prefixes
        .iter()
        .any(|p| capability.starts_with(p.as_str()));
    if policy.delegation_requires_approval && !exempt {
        let approval = &req.child["approval"];
        if approval["decision"].as_str() != Some("approved") {
            return Err(policy_err(
                "the child Action carries no Approved decision and its capability is not exempt",
            ));
        }
        let id = approval["id"]
            .as_str()
            .ok_or_else(|| policy_err("the Approved decision has no id"))?;
        let stored = store
            .record_get(APPROVALS, id)
            .await
            .map_err(state_err)?
            .ok_or_else(|| {
                policy_err(format!(
                    "approval {id} is not in the durable approval store"
                ))
            })?;
        let rec: ApprovalRecord = serde_json::from_value(stored.1).map_err(state_err)?;
        if rec.decision != "approved"
            || rec.action_id != child_id
            || rec.capability_id != capability
        {
            return Err(policy_err(format!(
                "stored approval {id} is {} for {} / {}, not approved for {child_id} / {capability}",
                rec.decision, rec.action_id, rec.capability_id
            )));
        }
        if rec.expires_at <= now {
            return Err(policy_err(format!("approval {id} has expired")));
        }
    }
    Ok(())
}

/// The exact `aip_call` arguments: the child Action, `id` renamed `action_id`, `identity` removed.
pub fn aip_call_arguments(child: &Value) -> Result<Value, ConnectorError> {
    let obj = child
        .as_object()
        .ok_or_else(|| policy_err("the child Action must be an object"))?;
    let mut out = Map::new();
    for (k, v) in obj {
        match k.as_str() {
            "identity" => {}
            "id" => {
                out.insert("action_id".into(), v.clone());
            }
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    Ok(Value::Object(out))
}

/// The model-facing delegation payload.
pub fn payload(req: &DelegationRequest, arguments: Value) -> Result<Value, ConnectorError> {
    Ok(json!({
        "kind": "aip_delegation",
        "delegation_id": req.delegation_id,
        "parent_action_id": req.parent_action_id,
        "child_action_id": req.child_id()?,
        "requested_by": req.requested_by,
        "delegate": req.delegate,
        "scope": req.scope,
        "capability_id": req.capability()?,
        "input": req.child.get("input").cloned().unwrap_or(Value::Null),
        "delegation_chain": req.delegation_chain,
        "execution_contract": {
            "tool": "aip_call",
            "arguments": arguments,
            "invocations": 1,
            "result_authority": "aip_native_lifecycle",
        },
        "aip_call_arguments": arguments,
    }))
}

/// Resolves a delegated child's result from the queue and the lifecycle store.
#[derive(Clone, Debug)]
pub struct Resolver {
    /// The tenant the endpoint serves.
    pub tenant: String,
}

/// What one resolution established.
#[derive(Clone, Debug, PartialEq)]
pub enum Resolution {
    /// Not in the queue (yet).
    NotObserved,
    /// In the queue, not terminal.
    Pending { status: String },
    /// Terminal with a verified result.
    Terminal { status: String, result: Value },
}

fn strip_aip(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| k.as_str() != "_aip")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        other => other.clone(),
    }
}

impl Resolver {
    /// The eight checks. `expected` is the delegated child Action; `principal` the Hermes
    /// principal expected to have enqueued it.
    pub async fn resolve<S: Store>(
        &self,
        store: &S,
        expected: &Value,
        principal: &str,
        now: u64,
    ) -> Result<Resolution, ConnectorError> {
        let child_id = expected["id"]
            .as_str()
            .ok_or_else(|| policy_err("the child Action has no `id`"))?;
        let Some((_, q)) = store.record_get(QUEUE, child_id).await.map_err(state_err)? else {
            return Ok(Resolution::NotObserved);
        };
        let q: QueueEntry = serde_json::from_value(q).map_err(|e| {
            ConnectorError::new(
                ErrorCode::DelegatedResultIntegrity,
                format!("queue entry for {child_id} is unreadable: {e}"),
            )
        })?;
        // 1. Immutable contract fields.
        for f in CONTRACT_FIELDS {
            if expected.get(f) != q.action.get(f) {
                return Err(ConnectorError::new(
                    ErrorCode::DelegatedActionContractMismatch,
                    format!("the queued Action's `{f}` differs from the delegated contract"),
                )
                .with(json!({"field": f})));
            }
        }
        // 2. Memory context, after stripping the trusted `_aip` part.
        if strip_aip(expected.get("memory").unwrap_or(&Value::Null))
            != strip_aip(q.action.get("memory").unwrap_or(&Value::Null))
        {
            return Err(ConnectorError::new(
                ErrorCode::DelegatedActionContractMismatch,
                "the queued Action's memory context differs from the delegated contract",
            )
            .with(json!({"field": "memory"})));
        }
        // 3. An unexpired transport-authenticated principal with action:write.
        if q.authenticated.expires_at <= now
            || !q.authenticated.scopes.iter().any(|s| s == "action:write")
        {
            return Err(ConnectorError::new(
                ErrorCode::DelegatedIdentityUnverified,
                "the enqueuing principal is expired or lacks action:write",
            ));
        }
        // 4. The expected Hermes principal is the owner, the authenticated owner and the actor.
        if q.owner != principal || q.authenticated.principal != principal || q.actor != principal {
            return Err(ConnectorError::new(
                ErrorCode::DelegatedIdentityMismatch,
                format!(
                    "owner {:?}, authenticated {:?} and actor {:?} are not all {principal:?}",
                    q.owner, q.authenticated.principal, q.actor
                ),
            ));
        }
        // 5. The Action's identity is the resolved trusted identity.
        if q.action.get("identity") != Some(&q.authenticated.identity) {
            return Err(ConnectorError::new(
                ErrorCode::DelegatedIdentityIntegrity,
                "the queued Action's identity is not the resolved trusted identity",
            ));
        }
        // 6. The exact, valid tenant.
        if q.tenant != self.tenant {
            return Err(ConnectorError::new(
                ErrorCode::DelegatedTenantMismatch,
                format!(
                    "queued under tenant {:?}, endpoint serves {:?}",
                    q.tenant, self.tenant
                ),
            ));
        }
        if q.tenant_expires_at.is_some_and(|t| t <= now) {
            return Err(ConnectorError::new(
                ErrorCode::DelegatedTenantExpired,
                format!("tenant {:?} has expired", q.tenant),
            ));
        }
        if !TERMINAL.contains(&q.status.as_str()) {
            return Ok(Resolution::Pending { status: q.status });
        }
        // 7. Queue and lifecycle agree on a durable result.
        let integrity = |m: String| ConnectorError::new(ErrorCode::DelegatedResultIntegrity, m);
        let Some(qr) = q.result.clone() else {
            return Err(integrity(format!(
                "queue status {} has no durable result",
                q.status
            )));
        };
        let l: LifecycleEntry = match store.record_get(LIFECYCLE, child_id).await {
            Ok(Some((_, v))) => serde_json::from_value(v)
                .map_err(|e| integrity(format!("lifecycle entry is unreadable: {e}")))?,
            Ok(None) => {
                return Err(integrity(format!(
                    "queue says {} but the lifecycle store has no record",
                    q.status
                )));
            }
            Err(e) => return Err(state_err(e)),
        };
        if l.status != q.status || l.result.as_ref() != Some(&qr) {
            return Err(integrity(format!(
                "queue ({}) and lifecycle ({}) disagree",
                q.status, l.status
            )));
        }
        // 8. The result is bound to the expected child.
        if l.action_id != child_id {
            return Err(integrity(format!(
                "the lifecycle result is bound to {}, not {child_id}",
                l.action_id
            )));
        }
        Ok(Resolution::Terminal {
            status: q.status,
            result: qr,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemoryStore;
    use rstest::rstest;

    const P: &str = "agent:hermes_operator:e1";

    fn child() -> Value {
        json!({
            "id": "act_child1", "capability": "cap:crm:update", "input": {"x": 1},
            "mode": "async", "idempotency": {"key": "k1"}, "timeout": 60000,
            "identity": {"sub": "hermes@e1"},
            "approval": {"id": "apr1", "decision": "approved"},
            "memory": {"notes": "n", "_aip": {"trace": "t1"}},
        })
    }

    fn request() -> DelegationRequest {
        DelegationRequest {
            delegation_id: "del1".into(),
            parent_action_id: "act_parent".into(),
            requested_by: "agent:planner".into(),
            delegate: P.into(),
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
            ..Policy::default()
        }
    }

    async fn store_with_approval(rec: ApprovalRecord) -> MemoryStore {
        let s = MemoryStore::new();
        s.record_cas(APPROVALS, &rec.approval_id.clone(), None, &json!(rec))
            .await
            .expect("approval");
        s
    }

    fn approval() -> ApprovalRecord {
        ApprovalRecord {
            approval_id: "apr1".into(),
            decision: "approved".into(),
            action_id: "act_child1".into(),
            capability_id: "cap:crm:update".into(),
            expires_at: 10_000,
        }
    }

    #[tokio::test]
    async fn an_approved_allowlisted_delegation_is_admitted() {
        let s = store_with_approval(approval()).await;
        admit(&enabled(), "e1", &s, &request(), 1_000)
            .await
            .expect("admitted");
    }

    #[rstest]
    #[case::disabled(Policy::default(), request(), approval(), "disabled")]
    #[case::no_allowlists(Policy { delegation_enabled: true, ..Policy::default() }, request(), approval(), "needs both")]
    #[case::wrong_delegate(enabled(), DelegationRequest { delegate: "agent:hermes_operator:e2".into(), ..request() }, approval(), "not this endpoint")]
    #[case::capability(enabled(), DelegationRequest { child: json!({"id": "act_child1", "capability": "cap:pay:send", "approval": {"id": "apr1", "decision": "approved"}}), ..request() }, approval(), "capability_prefixes")]
    #[case::scope(enabled(), DelegationRequest { scope: vec!["pay:write".into()], ..request() }, approval(), "scope_prefixes")]
    #[case::no_scope(enabled(), DelegationRequest { scope: vec![], ..request() }, approval(), "no scope")]
    #[case::depth(Policy { max_delegation_depth: 1, ..enabled() }, request(), approval(), "max_delegation_depth")]
    #[case::not_approved(enabled(), DelegationRequest { child: json!({"id": "act_child1", "capability": "cap:crm:update"}), ..request() }, approval(), "no Approved")]
    #[case::approval_not_stored(enabled(), request(), ApprovalRecord { approval_id: "other".into(), ..approval() }, "not in the durable")]
    #[case::approval_denied(enabled(), request(), ApprovalRecord { decision: "denied".into(), ..approval() }, "not approved")]
    #[case::approval_other_action(enabled(), request(), ApprovalRecord { action_id: "act_other".into(), ..approval() }, "not approved")]
    #[case::approval_other_capability(enabled(), request(), ApprovalRecord { capability_id: "cap:crm:delete".into(), ..approval() }, "not approved")]
    #[case::approval_expired(enabled(), request(), ApprovalRecord { expires_at: 1_000, ..approval() }, "expired")]
    #[tokio::test]
    async fn admission_fails_closed(
        #[case] policy: Policy,
        #[case] req: DelegationRequest,
        #[case] rec: ApprovalRecord,
        #[case] needle: &str,
    ) {
        let s = store_with_approval(rec).await;
        let e = admit(&policy, "e1", &s, &req, 1_000)
            .await
            .expect_err("refused");
        assert!(
            matches!(
                e.code,
                ErrorCode::OperatorPolicy | ErrorCode::ConfigurationOrInput
            ),
            "{e}"
        );
        assert!(e.message.contains(needle), "{e}");
    }

    #[tokio::test]
    async fn an_exempt_capability_needs_no_approval() {
        let p = Policy {
            delegation_approval_exempt_capability_prefixes: vec!["cap:crm:update".into()],
            ..enabled()
        };
        let req = DelegationRequest {
            child: json!({"id": "act_child1", "capability": "cap:crm:update"}),
            ..request()
        };
        admit(&p, "e1", &MemoryStore::new(), &req, 1_000)
            .await
            .expect("exempt");
    }

    #[test]
    fn the_aip_call_arguments_rename_id_and_drop_identity_and_nothing_else() {
        let a = aip_call_arguments(&child()).expect("args");
        let mut want = child();
        let m = want.as_object_mut().expect("object");
        let id = m.remove("id").expect("id");
        m.remove("identity");
        m.insert("action_id".into(), id);
        assert_eq!(a, want);
        let p = payload(&request(), a.clone()).expect("payload");
        assert_eq!(p["execution_contract"]["arguments"], a);
        assert_eq!(p["aip_call_arguments"], a);
        assert_eq!(p["execution_contract"]["invocations"], 1);
        assert_eq!(
            p["execution_contract"]["result_authority"],
            "aip_native_lifecycle"
        );
        assert_eq!(p["child_action_id"], "act_child1");
        assert!(!p.to_string().contains("hermes@e1"), "identity leaked");
    }

    fn queued() -> QueueEntry {
        QueueEntry {
            action: child(),
            owner: P.into(),
            status: "completed".into(),
            result: Some(json!({"updated": true})),
            authenticated: AuthenticatedPrincipal {
                principal: P.into(),
                scopes: vec!["action:write".into()],
                expires_at: 10_000,
                identity: json!({"sub": "hermes@e1"}),
            },
            actor: P.into(),
            tenant: "t1".into(),
            tenant_expires_at: None,
        }
    }

    fn lifecycle() -> LifecycleEntry {
        LifecycleEntry {
            action_id: "act_child1".into(),
            status: "completed".into(),
            result: Some(json!({"updated": true})),
        }
    }

    async fn resolve_with(
        q: Option<QueueEntry>,
        l: Option<LifecycleEntry>,
    ) -> Result<Resolution, ConnectorError> {
        let s = MemoryStore::new();
        if let Some(q) = q {
            s.record_cas(QUEUE, "act_child1", None, &json!(q))
                .await
                .expect("q");
        }
        if let Some(l) = l {
            s.record_cas(LIFECYCLE, "act_child1", None, &json!(l))
                .await
                .expect("l");
        }
        Resolver {
            tenant: "t1".into(),
        }
        .resolve(&s, &child(), P, 1_000)
        .await
    }

    #[tokio::test]
    async fn a_consistent_child_resolves_to_the_lifecycle_result() {
        let r = resolve_with(Some(queued()), Some(lifecycle()))
            .await
            .expect("ok");
        assert_eq!(
            r,
            Resolution::Terminal {
                status: "completed".into(),
                result: json!({"updated": true})
            }
        );
        // The trusted `_aip` part of the memory context may differ.
        let mut q = queued();
        q.action["memory"]["_aip"] = json!({"trace": "t2"});
        assert!(resolve_with(Some(q), Some(lifecycle())).await.is_ok());
        assert_eq!(resolve_with(None, None).await, Ok(Resolution::NotObserved));
        let mut q = queued();
        q.status = "running".into();
        q.result = None;
        assert_eq!(
            resolve_with(Some(q), None).await,
            Ok(Resolution::Pending {
                status: "running".into()
            })
        );
    }

    fn altered(f: impl Fn(&mut QueueEntry)) -> QueueEntry {
        let mut q = queued();
        f(&mut q);
        q
    }

    #[rstest]
    #[case::altered_input(altered(|q| q.action["input"] = json!({"x": 2})), lifecycle(), ErrorCode::DelegatedActionContractMismatch)]
    #[case::altered_capability(altered(|q| q.action["capability"] = json!("cap:crm:delete")), lifecycle(), ErrorCode::DelegatedActionContractMismatch)]
    #[case::altered_approval(altered(|q| q.action["approval"] = json!(null)), lifecycle(), ErrorCode::DelegatedActionContractMismatch)]
    #[case::altered_memory(altered(|q| q.action["memory"]["notes"] = json!("forged")), lifecycle(), ErrorCode::DelegatedActionContractMismatch)]
    #[case::expired_principal(altered(|q| q.authenticated.expires_at = 1_000), lifecycle(), ErrorCode::DelegatedIdentityUnverified)]
    #[case::no_write_scope(altered(|q| q.authenticated.scopes = vec!["action:read".into()]), lifecycle(), ErrorCode::DelegatedIdentityUnverified)]
    #[case::forged_owner(altered(|q| q.owner = "agent:mallory".into()), lifecycle(), ErrorCode::DelegatedIdentityMismatch)]
    #[case::forged_actor(altered(|q| q.actor = "agent:mallory".into()), lifecycle(), ErrorCode::DelegatedIdentityMismatch)]
    #[case::identity_drift(altered(|q| q.authenticated.identity = json!({"sub": "other"})), lifecycle(), ErrorCode::DelegatedIdentityIntegrity)]
    #[case::tenant_drift(altered(|q| q.tenant = "t2".into()), lifecycle(), ErrorCode::DelegatedTenantMismatch)]
    #[case::tenant_expired(altered(|q| q.tenant_expires_at = Some(500)), lifecycle(), ErrorCode::DelegatedTenantExpired)]
    #[case::no_durable_result(altered(|q| q.result = None), lifecycle(), ErrorCode::DelegatedResultIntegrity)]
    #[case::stores_disagree(queued(), LifecycleEntry { result: Some(json!({"updated": false})), ..lifecycle() }, ErrorCode::DelegatedResultIntegrity)]
    #[case::status_disagrees(queued(), LifecycleEntry { status: "failed".into(), ..lifecycle() }, ErrorCode::DelegatedResultIntegrity)]
    #[case::other_child(queued(), LifecycleEntry { action_id: "act_other".into(), ..lifecycle() }, ErrorCode::DelegatedResultIntegrity)]
    #[tokio::test]
    async fn the_resolver_fails_closed_with_the_named_code(
        #[case] q: QueueEntry,
        #[case] l: LifecycleEntry,
        #[case] code: ErrorCode,
    ) {
        let e = resolve_with(Some(q), Some(l)).await.expect_err("refused");
        assert_eq!(e.code, code, "{e}");
        assert!(!e.retryable);
    }

    #[tokio::test]
    async fn a_terminal_queue_entry_without_a_lifecycle_record_is_an_integrity_error() {
        let e = resolve_with(Some(queued()), None)
            .await
            .expect_err("refused");
        assert_eq!(e.code, ErrorCode::DelegatedResultIntegrity);
    }
}
