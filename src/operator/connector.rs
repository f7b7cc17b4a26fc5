//! The connector: invoke (objective or resume) and cancel, over the durable binding.

use super::NAMESPACE;
use super::binding::{ApprovalCommand, Binding, BindingStatus, StartClaim, fingerprint};
use super::delegation::{self, DelegationRequest, Resolution, Resolver};
use super::error::{ConnectorError, ErrorCode};
use super::hermes::{ApprovalOutcome, HermesClient, PollError, SseParser, StartOutcome};
use super::input::{Action, OperatorInput};
use super::policy::Policy;
use crate::clock::Clock;
use crate::store::{Store, StoreError};
use serde::Serialize;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

/// How a result reads for AIP.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResultStatus {
    Completed,
    Failed,
    Cancelled,
    RequiresHuman,
}

/// An operator result, returned under the invoking Action's id.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct OperatorResult {
    pub action_id: String,
    pub status: ResultStatus,
    pub output: Value,
    pub error: Option<ConnectorError>,
}

/// Deliberately broken connectors for the harness's own tests (`tests/it/broken.rs`,
/// `tests/it/protocol.rs`). Reachable only as `aocheck sut reference --variant NAME`, which exists to
/// show that the harness catches each defect; never from a configuration.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConnectorDefect {
    /// Steals an expired unbound claim and starts again.
    StealExpiredClaim,
    /// Treats a 5xx on start as a definitive failure.
    FiveXxIsFailed,
    /// Calls a `stopping` run cancelled.
    StoppingIsCancelled,
    /// Starts again when a replay finds `outcome_unknown`.
    ReplayUnknownStart,
    /// Sends the approval again on an exact resume replay.
    ApprovalReplay,
    /// Accepts Hermes's prose as the delegated result.
    AcceptProse,
    /// Leaves the child's identity inside the `aip_call` arguments.
    IdentityInArgs,
    /// Publishes a manifest that does not require AIP approval.
    ManifestWithoutApproval,
    /// Takes an unbound start claim recorded under its own instance id, which this process did
    /// not make (the instance was restarted after it claimed), for a start that never left, and
    /// starts again. The dead process's start may have reached Hermes (a kill while Hermes held
    /// it): a second run for one source Action. Only a kill during a held start followed by a
    /// replay on the restarted instance shows it; no fixed case builds that combination.
    RestartTakesOwnClaim,
}

impl ConnectorDefect {
    /// The defects the fixed suite catches (`RestartTakesOwnClaim` needs a combination only
    /// `aocheck explore` builds).
    pub const FIXED: [ConnectorDefect; 8] = [
        ConnectorDefect::StealExpiredClaim,
        ConnectorDefect::FiveXxIsFailed,
        ConnectorDefect::StoppingIsCancelled,
        ConnectorDefect::ReplayUnknownStart,
        ConnectorDefect::ApprovalReplay,
        ConnectorDefect::AcceptProse,
        ConnectorDefect::IdentityInArgs,
        ConnectorDefect::ManifestWithoutApproval,
    ];
}

/// Whether provider news may move a binding (AOC-REQ-005): a resolved binding never moves, an
/// unresolved one (`outcome_unknown`) only to a terminal state the provider reports (`terminal`);
/// progress (`stopping`, an approval prompt) never takes it back.
fn may_move(b: &Binding, terminal: bool) -> bool {
    match b.status {
        BindingStatus::OutcomeUnknown => terminal,
        s => !s.is_terminal(),
    }
}

/// The connector for one Hermes endpoint.
#[derive(Debug)]
pub struct Connector<S: Store> {
    store: Arc<S>,
    endpoint_id: String,
    policy: Policy,
    instance_id: String,
    hermes: HermesClient,
    clock: Arc<dyn Clock>,
    defect: Option<ConnectorDefect>,
    resolver: Option<Resolver>,
    /// The start claims this process made (kept only under `RestartTakesOwnClaim`).
    made: std::sync::Mutex<std::collections::BTreeSet<String>>,
}

const CAS_ATTEMPTS: u32 = 32;

fn state_err(e: impl std::fmt::Display) -> ConnectorError {
    ConnectorError::new(ErrorCode::OperatorState, e.to_string())
}

impl<S: Store> Connector<S> {
    /// `instance_id` names this connector process (claims record it).
    pub fn new(
        store: Arc<S>,
        endpoint_id: &str,
        base_url: &str,
        api_key: &str,
        policy: Policy,
        instance_id: &str,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, ConnectorError> {
        policy.validate()?;
        let hermes = HermesClient::new(base_url, api_key, Duration::from_secs(60))
            .map_err(|e| ConnectorError::new(ErrorCode::ConfigurationOrInput, e))?;
        Ok(Connector {
            store,
            endpoint_id: endpoint_id.into(),
            policy,
            instance_id: instance_id.into(),
            hermes,
            clock,
            defect: None,
            resolver: None,
            made: Default::default(),
        })
    }

    /// Test-only: this connector with a deliberate defect.
    #[doc(hidden)]
    #[cfg(feature = "test-knobs")]
    pub fn with_defect_for_tests(mut self, d: ConnectorDefect) -> Self {
        self.defect = Some(d);
        self
    }

    /// The delegated-result resolver (queue + lifecycle on this connector's store).
    pub fn with_resolver(mut self, r: Resolver) -> Self {
        self.resolver = Some(r);
        self
    }

    /// The published capability manifest.
    pub fn manifest(&self) -> Value {
        let mut m = super::manifest::manifest(&self.endpoint_id);
        if self.defect == Some(ConnectorDefect::ManifestWithoutApproval) {
            m["approval"]["required"] = json!(false);
        }
        m
    }

    pub fn instance_id(&self) -> &str {
        &self.instance_id
    }

    fn now(&self) -> u64 {
        self.clock.now().0
    }

    /// The binding of a source Action, if any.
    pub async fn binding(&self, action_id: &str) -> Result<Option<(u64, Binding)>, ConnectorError> {
        match self
            .store
            .record_get(NAMESPACE, action_id)
            .await
            .map_err(state_err)?
        {
            None => Ok(None),
            Some((v, value)) => Ok(Some((v, serde_json::from_value(value).map_err(state_err)?))),
        }
    }

    /// Compare-and-set update: `f` edits the binding (or refuses); retried from a fresh read.
    async fn update(
        &self,
        key: &str,
        f: impl Fn(&mut Binding) -> Result<(), ConnectorError>,
    ) -> Result<Binding, ConnectorError> {
        for _ in 0..CAS_ATTEMPTS {
            let (v, mut b) = self
                .binding(key)
                .await?
                .ok_or_else(|| state_err(format!("binding {key} vanished")))?;
            f(&mut b)?;
            b.updated_at = self.now();
            let value = serde_json::to_value(&b).map_err(state_err)?;
            match self.store.record_cas(NAMESPACE, key, Some(v), &value).await {
                Ok(_) => return Ok(b),
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(state_err(e)),
            }
        }
        Err(state_err(format!(
            "binding {key}: compare-and-set contended {CAS_ATTEMPTS} times"
        )))
    }

    /// Invokes the operator capability for an Action.
    pub async fn invoke(&self, action: &Action) -> Result<OperatorResult, ConnectorError> {
        self.policy.validate()?;
        self.clock.sync().await;
        match OperatorInput::parse(&action.input)? {
            OperatorInput::Objective {
                objective,
                context,
                candidate_capabilities,
                constraints,
            } => {
                let payload = json!({
                    "kind": "aip_operator_objective",
                    "objective": objective,
                    "context": context,
                    "candidate_capabilities": candidate_capabilities,
                    "constraints": constraints,
                    "execution_contract": {"downstream_action_ids": "server_assigned_per_call", "forbid_operator_action_id_reuse": true},
                });
                let input = serde_json::to_string_pretty(&payload).map_err(state_err)?;
                if input.len() as u64 > self.policy.max_input_bytes {
                    return Err(ConnectorError::new(
                        ErrorCode::ConfigurationOrInput,
                        format!(
                            "serialized provider input is {} bytes, over max_input_bytes {}",
                            input.len(),
                            self.policy.max_input_bytes
                        ),
                    ));
                }
                let session_id = super::session_id(&action.id);
                let mut body = json!({"input": input, "instructions": self.policy.system_instructions, "session_id": session_id});
                if let Some(m) = &self.policy.model {
                    body["model"] = json!(m);
                }
                let fp = fingerprint(&self.endpoint_id, action).map_err(state_err)?;
                self.create_or_match(&action.id, &fp, &session_id).await?;
                let deadline = self.deadline(action);
                let b = self.drive(&action.id, &body, deadline).await?;
                Ok(self.result(&action.id, &b))
            }
            OperatorInput::Resume {
                source_action_id,
                choice,
                resolve_all,
            } => {
                self.resume(action, &source_action_id, &choice, resolve_all)
                    .await
            }
        }
    }

    /// Runs a native `DelegationRequest` addressed to this endpoint's Hermes principal. The
    /// delegated result comes only from the resolver (queue + lifecycle), never from Hermes.
    pub async fn delegate(
        &self,
        req: &DelegationRequest,
    ) -> Result<OperatorResult, ConnectorError> {
        self.clock.sync().await;
        delegation::admit(
            &self.policy,
            &self.endpoint_id,
            &*self.store,
            req,
            self.now(),
        )
        .await?;
        let child_id = req.child_id()?.to_string();
        let args = if self.defect == Some(ConnectorDefect::IdentityInArgs) {
            // The defect: the child Action goes out as it is, identity included.
            let mut a = req.child.clone();
            if let Some(m) = a.as_object_mut()
                && let Some(id) = m.remove("id")
            {
                m.insert("action_id".into(), id);
            }
            a
        } else {
            delegation::aip_call_arguments(&req.child)?
        };
        let payload = delegation::payload(req, args)?;
        let input = serde_json::to_string_pretty(&payload).map_err(state_err)?;
        if input.len() as u64 > self.policy.max_input_bytes {
            return Err(ConnectorError::new(
                ErrorCode::ConfigurationOrInput,
                format!(
                    "serialized provider input is {} bytes, over max_input_bytes {}",
                    input.len(),
                    self.policy.max_input_bytes
                ),
            ));
        }
        let session_id = super::session_id(&child_id);
        let mut body = json!({"input": input, "instructions": self.policy.system_instructions, "session_id": session_id});
        if let Some(m) = &self.policy.model {
            body["model"] = json!(m);
        }
        let fp = crate::digest::digest_of(
            &json!({"endpoint_id": self.endpoint_id, "action": req.child, "delegation": req}),
        )
        .map_err(state_err)?
        .hex();
        self.create_or_match(&child_id, &fp, &session_id).await?;
        let (did, pid) = (req.delegation_id.clone(), req.parent_action_id.clone());
        self.update(&child_id, |b| {
            if b.delegation_id.is_none() {
                b.delegation_id = Some(did.clone());
                b.parent_action_id = Some(pid.clone());
            }
            Ok(())
        })
        .await?;
        let deadline = self.now()
            + req.child["timeout"]
                .as_u64()
                .map_or(self.policy.timeout_ms, |t| t.min(self.policy.timeout_ms));
        let b = self.drive(&child_id, &body, deadline).await?;
        let mut out = self.result(&child_id, &b);
        if b.status != BindingStatus::Completed {
            return Ok(out);
        }
        if self.defect == Some(ConnectorDefect::AcceptProse) {
            // The defect: Hermes's final message is taken for the business result.
            out.output["provider"]["delegated"] =
                json!({"status": "completed", "result": b.output, "authority": "hermes_prose"});
            return Ok(out);
        }
        let Some(resolver) = &self.resolver else {
            return Err(ConnectorError::new(
                ErrorCode::DelegatedResultResolverMissing,
                "no delegated-result resolver is configured; Hermes's reply is not a result",
            ));
        };
        let principal = format!("agent:hermes_operator:{}", self.endpoint_id);
        let observe_by = self.now() + (4 * self.policy.poll_interval_ms).clamp(1_000, 5_000);
        loop {
            match resolver
                .resolve(&*self.store, &req.child, &principal, self.now())
                .await?
            {
                Resolution::Terminal { status, result } => {
                    out.status = match status.as_str() {
                        "completed" => ResultStatus::Completed,
                        "requires_human" => ResultStatus::RequiresHuman,
                        "cancelled" => ResultStatus::Cancelled,
                        _ => ResultStatus::Failed,
                    };
                    out.output["provider"]["delegated"] = json!({"status": status, "result": result, "authority": "aip_native_lifecycle"});
                    return Ok(out);
                }
                Resolution::NotObserved if self.now() >= observe_by => {
                    return Err(ConnectorError::new(
                        ErrorCode::DelegatedExecutionNotObserved,
                        format!(
                            "Hermes finished but child Action {child_id} never reached the AIP queue"
                        ),
                    ));
                }
                Resolution::Pending { status } if self.now() >= deadline => {
                    return Err(ConnectorError::new(
                        ErrorCode::DelegatedResultNotReady,
                        format!("child Action {child_id} is {status} at the operator deadline"),
                    ));
                }
                _ => {
                    self.clock
                        .sleep(self.policy.poll_interval_ms.min(100))
                        .await
                }
            }
        }
    }

    fn deadline(&self, action: &Action) -> u64 {
        let ms = action
            .deadline_ms
            .map_or(self.policy.timeout_ms, |d| d.min(self.policy.timeout_ms));
        self.now() + ms
    }

    /// Creates the binding, or checks that an existing one is for the same request.
    async fn create_or_match(
        &self,
        key: &str,
        fp: &str,
        session_id: &str,
    ) -> Result<(), ConnectorError> {
        for _ in 0..CAS_ATTEMPTS {
            if let Some((_, b)) = self.binding(key).await? {
                if b.request_fingerprint != fp || b.endpoint_id != self.endpoint_id {
                    return Err(ConnectorError::new(
                        ErrorCode::OperatorPolicy,
                        format!(
                            "idempotency collision: Action {key} was already used with another input or endpoint"
                        ),
                    ));
                }
                return Ok(());
            }
            let now = self.now();
            let b = Binding {
                action_id: key.into(),
                request_fingerprint: fp.into(),
                endpoint_id: self.endpoint_id.clone(),
                run_id: None,
                session_id: session_id.into(),
                start_claim: None,
                delegation_id: None,
                parent_action_id: None,
                status: BindingStatus::Starting,
                cancel_requested: false,
                last_event: None,
                next_sequence: 0,
                approval_generation: 0,
                approval_commands: Vec::new(),
                pending_approval: None,
                output: None,
                error: None,
                created_at: now,
                updated_at: now,
            };
            match self
                .store
                .record_cas(
                    NAMESPACE,
                    key,
                    None,
                    &serde_json::to_value(&b).map_err(state_err)?,
                )
                .await
            {
                Ok(_) => return Ok(()),
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(state_err(e)),
            }
        }
        Err(state_err("binding creation contended"))
    }

    /// Moves the binding forward until it is terminal, waiting for approval, or the deadline.
    async fn drive(
        &self,
        key: &str,
        body: &Value,
        deadline: u64,
    ) -> Result<Binding, ConnectorError> {
        let mut fresh_start = false;
        loop {
            let (v, b) = self
                .binding(key)
                .await?
                .ok_or_else(|| state_err("binding vanished"))?;
            if self.defect == Some(ConnectorDefect::ReplayUnknownStart)
                && b.status == BindingStatus::OutcomeUnknown
                && b.run_id.is_none()
            {
                // The defect: an unknown start is taken for "never started" and retried.
                let mut reset = b.clone();
                reset.status = BindingStatus::Starting;
                reset.start_claim = None;
                reset.error = None;
                let doc = serde_json::to_value(&reset).map_err(state_err)?;
                let _ = self.store.record_cas(NAMESPACE, key, Some(v), &doc).await;
                continue;
            }
            if b.status.is_terminal() || b.status == BindingStatus::WaitingForApproval {
                return Ok(b);
            }
            if b.run_id.is_some() {
                if b.cancel_requested {
                    return self.reconcile_cancel(key).await;
                }
                return self.observe(key, fresh_start, deadline).await;
            }
            match &b.start_claim {
                None => {
                    // Claim the start (compare-and-set); only the winner calls Hermes.
                    let now = self.now();
                    let claim = StartClaim {
                        claim_id: uuid::Uuid::now_v7().to_string(),
                        instance_id: self.instance_id.clone(),
                        claimed_at: now,
                        expires_at: now + self.policy.start_claim_ttl_ms,
                    };
                    self.remember(&claim.claim_id);
                    let mut claimed = b.clone();
                    claimed.start_claim = Some(claim.clone());
                    claimed.updated_at = now;
                    match self
                        .store
                        .record_cas(
                            NAMESPACE,
                            key,
                            Some(v),
                            &serde_json::to_value(&claimed).map_err(state_err)?,
                        )
                        .await
                    {
                        Ok(_) => {
                            self.start_as_claimer(key, &claim, body).await?;
                            fresh_start = true;
                        }
                        Err(StoreError::Conflict { .. }) => continue,
                        Err(e) => return Err(state_err(e)),
                    }
                }
                Some(c) => {
                    // Someone else's unbound claim: never stolen. Wait until it is bound or
                    // terminal; once it expires unbound, the start's outcome is unknown.
                    let steal = match self.defect {
                        Some(ConnectorDefect::StealExpiredClaim) => self.now() >= c.expires_at,
                        Some(ConnectorDefect::RestartTakesOwnClaim) => {
                            c.instance_id == self.instance_id && !self.remembers(&c.claim_id)
                        }
                        _ => false,
                    };
                    if steal {
                        // The defect: take the (expired, or "own") claim over and start again.
                        let mut stolen = b.clone();
                        let now = self.now();
                        let claim = StartClaim {
                            claim_id: uuid::Uuid::now_v7().to_string(),
                            instance_id: self.instance_id.clone(),
                            claimed_at: now,
                            expires_at: now + self.policy.start_claim_ttl_ms,
                        };
                        self.remember(&claim.claim_id);
                        stolen.start_claim = Some(claim.clone());
                        if self
                            .store
                            .record_cas(
                                NAMESPACE,
                                key,
                                Some(v),
                                &serde_json::to_value(&stolen).map_err(state_err)?,
                            )
                            .await
                            .is_ok()
                        {
                            self.start_as_claimer(key, &claim, body).await?;
                            fresh_start = true;
                        }
                        continue;
                    }
                    if self.now() >= c.expires_at {
                        let cid = c.claim_id.clone();
                        self.update(key, |b| {
                            if b.run_id.is_none() && b.status == BindingStatus::Starting && b.start_claim.as_ref().map(|x| &x.claim_id) == Some(&cid) {
                                b.status = BindingStatus::OutcomeUnknown;
                                b.start_claim = None;
                                b.error = Some(json!({"code": ErrorCode::OperatorOutcomeUnknown.as_str(), "reason": "the start claim expired before a run id was bound"}));
                            }
                            Ok(())
                        })
                        .await?;
                    } else {
                        self.clock
                            .sleep(self.policy.poll_interval_ms.min(100))
                            .await;
                    }
                }
            }
        }
    }

    /// Under `RestartTakesOwnClaim`: this process made the claim `id`.
    fn remember(&self, id: &str) {
        if self.defect == Some(ConnectorDefect::RestartTakesOwnClaim)
            && let Ok(mut m) = self.made.lock()
        {
            m.insert(id.to_string());
        }
    }

    fn remembers(&self, id: &str) -> bool {
        self.made.lock().is_ok_and(|m| m.contains(id))
    }

    async fn start_as_claimer(
        &self,
        key: &str,
        claim: &StartClaim,
        body: &Value,
    ) -> Result<(), ConnectorError> {
        let outcome = self.hermes.start(body).await;
        let cid = claim.claim_id.clone();
        let apply = |b: &mut Binding| {
            if b.start_claim.as_ref().map(|c| &c.claim_id) != Some(&cid)
                || b.status != BindingStatus::Starting
            {
                return Err(state_err(format!(
                    "binding {} changed while its start was in flight (now {:?})",
                    b.action_id, b.status
                )));
            }
            b.start_claim = None;
            match &outcome {
                StartOutcome::Started { run_id } => {
                    b.run_id = Some(run_id.clone());
                    b.status = if b.cancel_requested {
                        BindingStatus::Cancelling
                    } else {
                        BindingStatus::Running
                    };
                    b.last_event = Some("run.started".into());
                }
                StartOutcome::Rejected { status } => {
                    b.status = BindingStatus::Failed;
                    b.error = Some(
                        json!({"code": ErrorCode::OperatorStartRejected.as_str(), "http_status": status}),
                    );
                }
                StartOutcome::NoRunId => {
                    b.status = BindingStatus::OutcomeUnknown;
                    b.error = Some(
                        json!({"code": ErrorCode::OperatorOutcomeUnknown.as_str(), "reason": "2xx without run_id"}),
                    );
                }
                StartOutcome::Unknown { reason }
                    if self.defect == Some(ConnectorDefect::FiveXxIsFailed)
                        && reason.starts_with("HTTP 5") =>
                {
                    // The defect: the HTTP class is taken for a definitive failure.
                    b.status = BindingStatus::Failed;
                    b.error = Some(
                        json!({"code": ErrorCode::OperatorStartRejected.as_str(), "reason": reason}),
                    );
                }
                StartOutcome::Unknown { reason } => {
                    b.status = BindingStatus::OutcomeUnknown;
                    b.error = Some(
                        json!({"code": ErrorCode::OperatorOutcomeUnknown.as_str(), "reason": reason}),
                    );
                }
            }
            Ok(())
        };
        self.update(key, apply).await.map(|_| ())
    }

    /// Applies one provider event to the binding.
    fn apply_event(b: &mut Binding, ev: &Value) {
        let name = ev["event"].as_str().unwrap_or("unknown").to_string();
        b.next_sequence += 1;
        let terminal = matches!(
            name.as_str(),
            "run.completed" | "run.failed" | "run.cancelled"
        );
        if !may_move(b, terminal) {
            return;
        }
        b.last_event = Some(name.clone());
        match name.as_str() {
            "approval.request" => {
                if b.status != BindingStatus::WaitingForApproval {
                    b.approval_generation += 1;
                }
                b.status = BindingStatus::WaitingForApproval;
                b.pending_approval = Some(ev.clone());
            }
            "approval.responded" => {
                b.pending_approval = None;
                if b.status == BindingStatus::WaitingForApproval {
                    b.status = BindingStatus::Running;
                }
            }
            "run.completed" => {
                b.status = BindingStatus::Completed;
                b.output = ev["output"].as_str().map(str::to_string);
                b.pending_approval = None;
            }
            "run.failed" => {
                b.status = BindingStatus::Failed;
                b.error = Some(
                    json!({"code": ErrorCode::OperatorFailed.as_str(), "provider_error": ev["error"]}),
                );
            }
            "run.cancelled" => {
                // Only the provider's terminal evidence makes a run cancelled.
                b.status = BindingStatus::Cancelled;
                b.pending_approval = None;
            }
            _ => {}
        }
    }

    /// Observes a bound run: SSE first for a fresh start, polling otherwise or as fallback.
    async fn observe(
        &self,
        key: &str,
        use_sse: bool,
        deadline: u64,
    ) -> Result<Binding, ConnectorError> {
        let (_, b) = self
            .binding(key)
            .await?
            .ok_or_else(|| state_err("binding vanished"))?;
        let run_id = b.run_id.clone().ok_or_else(|| state_err("no run id"))?;
        if use_sse && let Ok(mut resp) = self.hermes.events(&run_id).await {
            let mut parser = SseParser::default();
            let mut seen = 0u64;
            loop {
                let left = deadline.saturating_sub(self.now());
                // The wait for a frame is a wait on the clock: while it lasts, time may move.
                let next = tokio::select! {
                    c = resp.chunk() => Some(c),
                    _ = self.clock.sleep(left.max(1)) => None,
                };
                // A frame won the race: the clock may have moved meanwhile (a sleep that ran
                // out has told its time already).
                if next.is_some() {
                    self.clock.sync().await;
                }
                let chunk = match next {
                    Some(Ok(Some(c))) => c,
                    _ => break, // closed, failed or deadline: fall back to polling
                };
                let mut decode_failed = false;
                // A frame past the cap ends the stream: fall back to polling.
                let frames = parser.feed(&chunk).unwrap_or_else(|_| {
                    decode_failed = true;
                    Vec::new()
                });
                for data in frames {
                    let Ok(ev) = serde_json::from_str::<Value>(&data) else {
                        decode_failed = true;
                        break;
                    };
                    seen += 1;
                    let b = self
                        .update(key, |b| {
                            Self::apply_event(b, &ev);
                            Ok(())
                        })
                        .await?;
                    if b.status.is_terminal() || b.status == BindingStatus::WaitingForApproval {
                        return Ok(b);
                    }
                }
                if decode_failed || seen >= self.policy.max_events {
                    break;
                }
            }
        }
        self.poll(key, &run_id, deadline).await
    }

    async fn poll(
        &self,
        key: &str,
        run_id: &str,
        deadline: u64,
    ) -> Result<Binding, ConnectorError> {
        loop {
            match self.hermes.status(run_id).await {
                Ok(doc) => {
                    let status = doc["status"].as_str().unwrap_or("").to_string();
                    let b = match status.as_str() {
                        "queued" | "running" => None,
                        "waiting_for_approval" => Some(self.update(key, |b| {
                            if !may_move(b, false) {
                                return Ok(());
                            }
                            if b.status != BindingStatus::WaitingForApproval {
                                b.approval_generation += 1;
                            }
                            b.status = BindingStatus::WaitingForApproval;
                            b.last_event = Some("approval.request".into());
                            b.pending_approval = Some(doc.get("approval").cloned().unwrap_or(json!({"event": "approval.request"})));
                            Ok(())
                        }).await?),
                        "stopping" if self.defect == Some(ConnectorDefect::StoppingIsCancelled) => Some(
                            self.update(key, |b| {
                                // The defect: `stopping` is taken for terminal.
                                b.status = BindingStatus::Cancelled;
                                b.last_event = Some("run.stopping".into());
                                Ok(())
                            })
                            .await?,
                        ),
                        "stopping" => {
                            let b = self.update(key, |b| {
                                if may_move(b, false) {
                                    b.status = BindingStatus::Cancelling;
                                    b.last_event = Some("run.stopping".into());
                                }
                                Ok(())
                            })
                            .await?;
                            // Unresolved already (a cancel's grace ran out): stays so.
                            b.status.is_terminal().then_some(b)
                        }
                        "completed" | "failed" | "cancelled" => Some(self.update(key, |b| {
                            let ev = json!({"event": format!("run.{status}"), "output": doc["output"], "error": doc["error"]});
                            Self::apply_event(b, &ev);
                            Ok(())
                        }).await?),
                        other => {
                            // Fail closed: an unmapped status decides nothing (the binding stays
                            // as it is: unresolved).
                            return Err(ConnectorError::new(ErrorCode::OperatorState, format!("unsupported provider status {other:?} for run {run_id}")));
                        }
                    };
                    if let Some(b) = b {
                        return Ok(b);
                    }
                }
                Err(PollError::NotFound) => {
                    // A restart wiped the in-memory status: missing knowledge, never terminal.
                    return Err(ConnectorError::new(ErrorCode::OperatorState, format!("run {run_id} status unavailable (404): the provider's status is missing knowledge")).with(json!({"run_id": run_id})));
                }
                Err(_) => {}
            }
            if self.now() >= deadline {
                return self.reconcile_cancel(key).await;
            }
            self.clock.sleep(self.policy.poll_interval_ms).await;
        }
    }

    /// Cancellation: the intent is durable first, then stop and poll within the grace period.
    pub async fn cancel(&self, action_id: &str) -> Result<Binding, ConnectorError> {
        self.clock.sync().await;
        self.reconcile_cancel(action_id).await
    }

    async fn reconcile_cancel(&self, key: &str) -> Result<Binding, ConnectorError> {
        let b = self
            .update(key, |b| {
                if !b.status.is_terminal() {
                    b.cancel_requested = true;
                    if b.run_id.is_some() {
                        b.status = BindingStatus::Cancelling;
                        b.last_event = Some("run.stop_requested".into());
                    }
                }
                Ok(())
            })
            .await?;
        if b.status.is_terminal() {
            return Ok(b);
        }
        let Some(run_id) = b.run_id.clone() else {
            return Ok(b); // the start claimer binds it as cancelling and reconciles it
        };
        let stop_error = match self.hermes.stop(&run_id).await {
            Ok(s) if s < 300 || s == 404 || s == 409 => None,
            Ok(s) => Some(format!("HTTP {s}")),
            Err(e) => Some(e),
        };
        let grace_end = self.now() + self.policy.cancel_grace_ms;
        loop {
            match self.hermes.status(&run_id).await {
                Ok(doc) => match doc["status"].as_str().unwrap_or("") {
                    "stopping" if self.defect == Some(ConnectorDefect::StoppingIsCancelled) => {
                        return self
                            .update(key, |b| {
                                b.status = BindingStatus::Cancelled;
                                Ok(())
                            })
                            .await;
                    }
                    s @ ("cancelled" | "completed" | "failed") => {
                        let ev = json!({"event": format!("run.{s}"), "output": doc["output"], "error": doc["error"]});
                        return self
                            .update(key, |b| {
                                Self::apply_event(b, &ev);
                                Ok(())
                            })
                            .await;
                    }
                    "queued" | "running" | "waiting_for_approval" | "stopping" => {}
                    _ => break,
                },
                Err(PollError::NotFound) | Err(PollError::Http(400..=499)) => break,
                Err(_) => {}
            }
            if self.now() >= grace_end {
                break;
            }
            self.clock.sleep(self.policy.poll_interval_ms).await;
        }
        self.update(key, |b| {
            if !b.status.is_terminal() {
                b.status = BindingStatus::OutcomeUnknown;
                b.error = Some(json!({"code": ErrorCode::CancellationOutcomeUnknown.as_str(), "run_id": run_id, "stop_error": stop_error}));
            }
            Ok(())
        })
        .await
    }

    /// A resume Action: one approval command through the ledger, then the source's outcome.
    async fn resume(
        &self,
        action: &Action,
        source: &str,
        choice: &str,
        resolve_all: bool,
    ) -> Result<OperatorResult, ConnectorError> {
        let (_, b) = self.binding(source).await?.ok_or_else(|| {
            ConnectorError::new(
                ErrorCode::OperatorPolicy,
                format!("no source binding for {source}"),
            )
        })?;
        if b.endpoint_id != self.endpoint_id {
            return Err(ConnectorError::new(
                ErrorCode::OperatorPolicy,
                format!("source {source} belongs to another endpoint"),
            ));
        }
        let fp = fingerprint(&self.endpoint_id, action).map_err(state_err)?;
        if let Some(c) = b
            .approval_commands
            .iter()
            .find(|c| c.action_id == action.id)
        {
            if c.request_fingerprint != fp {
                return Err(ConnectorError::new(
                    ErrorCode::OperatorPolicy,
                    format!(
                        "idempotency collision: resume Action {} was used with another input",
                        action.id
                    ),
                ));
            }
            if self.defect == Some(ConnectorDefect::ApprovalReplay)
                && let Some(run) = &b.run_id
            {
                // The defect: the replay sends the command again.
                let _ = self.hermes.approval(run, choice, resolve_all).await;
            }
            // Exact replay: stored progress, no second provider command.
            return Ok(self.result(&action.id, &b));
        }
        if b.status != BindingStatus::WaitingForApproval || b.run_id.is_none() {
            return Err(ConnectorError::new(
                ErrorCode::OperatorPolicy,
                format!(
                    "source {source} is {:?}, not waiting for approval",
                    b.status
                ),
            ));
        }
        if b.approval_commands.len() >= 256 {
            return Err(ConnectorError::new(
                ErrorCode::OperatorPolicy,
                "at most 256 approval commands per run",
            ));
        }
        let now = self.now();
        let claim_id = uuid::Uuid::now_v7().to_string();
        let cmd = ApprovalCommand {
            action_id: action.id.clone(),
            request_fingerprint: fp.clone(),
            approval_generation: b.approval_generation,
            choice: choice.into(),
            resolve_all,
            claim_id: claim_id.clone(),
            instance_id: self.instance_id.clone(),
            status: "claimed".into(),
            diagnostic: None,
            created_at: now,
            updated_at: now,
            expires_at: now + 60_000,
        };
        let run_id = b.run_id.clone().unwrap_or_default();
        let aid = action.id.clone();
        self.update(source, |b| {
            if b.approval_commands.iter().any(|c| c.action_id == aid) {
                return Err(ConnectorError::new(
                    ErrorCode::OperatorState,
                    "a concurrent resume claimed this command",
                ));
            }
            b.approval_commands.push(cmd.clone());
            Ok(())
        })
        .await?;
        let outcome = self.hermes.approval(&run_id, choice, resolve_all).await;
        let b = self
            .update(source, |b| {
                let now = self.now();
                let Some(c) = b.approval_commands.iter_mut().find(|c| c.claim_id == claim_id) else {
                    return Err(state_err("approval command vanished"));
                };
                c.updated_at = now;
                match &outcome {
                    ApprovalOutcome::Applied => {
                        c.status = "applied".into();
                        b.status = BindingStatus::Running;
                        b.pending_approval = None;
                        b.last_event = Some("approval.responded".into());
                    }
                    ApprovalOutcome::Rejected { status, code } => {
                        c.status = "rejected".into();
                        c.diagnostic = Some(format!("HTTP {status} {}", code.clone().unwrap_or_default()));
                    }
                    ApprovalOutcome::Unknown { reason } => {
                        c.status = "outcome_unknown".into();
                        c.diagnostic = Some(reason.clone());
                        b.status = BindingStatus::OutcomeUnknown;
                        b.error = Some(json!({"code": ErrorCode::ApprovalOutcomeUnknown.as_str(), "reason": reason}));
                    }
                }
                Ok(())
            })
            .await?;
        if let ApprovalOutcome::Rejected { status, code } = &outcome {
            return Err(ConnectorError::new(
                ErrorCode::OperatorPolicy,
                format!(
                    "Hermes refused the approval: HTTP {status} {}",
                    code.clone().unwrap_or_default()
                ),
            ));
        }
        if b.status.is_terminal() {
            return Ok(self.result(&action.id, &b));
        }
        let deadline = self.deadline(action);
        let b = self.poll(source, &run_id, deadline).await?;
        Ok(self.result(&action.id, &b))
    }

    /// The AIP result for a binding, under the invoking Action's id.
    pub fn result(&self, invoking: &str, b: &Binding) -> OperatorResult {
        let status = match b.status {
            BindingStatus::Completed => ResultStatus::Completed,
            BindingStatus::Cancelled => ResultStatus::Cancelled,
            BindingStatus::WaitingForApproval => ResultStatus::RequiresHuman,
            _ => ResultStatus::Failed,
        };
        let error = b.error.as_ref().map(|e| {
            let code = match e["code"].as_str() {
                Some(c) if c == ErrorCode::OperatorOutcomeUnknown.as_str() => {
                    ErrorCode::OperatorOutcomeUnknown
                }
                Some(c) if c == ErrorCode::ApprovalOutcomeUnknown.as_str() => {
                    ErrorCode::ApprovalOutcomeUnknown
                }
                Some(c) if c == ErrorCode::CancellationOutcomeUnknown.as_str() => {
                    ErrorCode::CancellationOutcomeUnknown
                }
                Some(c) if c == ErrorCode::OperatorStartRejected.as_str() => {
                    ErrorCode::OperatorStartRejected
                }
                _ => ErrorCode::OperatorFailed,
            };
            ConnectorError::new(code, format!("{:?}", b.status)).with(e.clone())
        });
        OperatorResult {
            action_id: invoking.into(),
            status,
            output: json!({
                "endpoint_id": b.endpoint_id,
                "run_id": b.run_id,
                "session_id": b.session_id,
                "source_action_id": b.action_id,
                "delegation_id": b.delegation_id,
                "parent_action_id": b.parent_action_id,
                "status": b.status,
                "last_event": b.last_event,
                "pending_approval": b.pending_approval,
                "provider": {"event": b.last_event, "output": b.output},
            }),
            error,
        }
    }
}
