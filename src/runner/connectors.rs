//! The Hermes side of a case: fake-hermes (started on first use), the connector instances the
//! case names, the reader that answers `binding` for the checkers, and the Actions invoked.

use crate::operator::{Action, OperatorResult};
use crate::sut::Connect;
use crate::sut::SutError;
use crate::sut::message::{HermesInit, OperatorInit};
use crate::sut::operator::{AipRecord, Answer, Conn};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The Hermes side of a case: fake-hermes (started on first use), connector processes and the
/// Actions invoked.
pub(super) struct OperatorWorld {
    pub(super) hermes: Option<(
        String,
        crate::providers::Hermes,
        tokio::task::JoinHandle<()>,
    )>,
    /// Each connector process's own Hermes credential comes from here (processes only).
    pub(super) credentials: Option<std::sync::Arc<super::credentials::CaseCredentials>>,
    pub(super) connectors: BTreeMap<String, Conn>,
    pub(super) actions: BTreeMap<String, String>,
    pub(super) background: Vec<(String, tokio::task::JoinHandle<Answer<OperatorResult>>)>,
    /// Where connector instances come from (the implementation under test).
    pub(super) connect: Arc<dyn Connect>,
    /// The instance that reads bindings for the checkers (never invoked, never killed by a case).
    pub(super) reader: Option<Conn>,
    pub(super) case_key: String,
    /// Case-set policy fields, overlaid on the harness's fast defaults.
    pub(super) policy_overlay: serde_json::Map<String, serde_json::Value>,
    pub(super) tenant: String,
    pub(super) resolver: bool,
    /// Delegated children (label, the child Action as AIP holds it).
    pub(super) delegations: Vec<(String, serde_json::Value)>,
    /// Set when a step cannot be exercised on this configuration.
    pub(super) unsupported: Option<String>,
    /// Resume Actions (their effect is counted on the source binding).
    pub(super) resumes: std::collections::BTreeSet<String>,
    /// The last failure code of each delegation (absent when its result was established).
    pub(super) delegation_errors: BTreeMap<String, String>,
    /// Each binding as last seen, for the monotonic checks.
    pub(super) seen: BTreeMap<String, crate::operator::Binding>,
    /// The case's Hermes clock (started with fake-hermes): the clock, the harness's own busy
    /// unit, and where it is served to the implementation.
    pub(super) clock: Option<CaseClock>,
}

/// The clock of a case's Hermes side (`crate::providers::HermesClock`): fake-hermes, the implementation's
/// connector instances (through `providers.hermes.clock`) and the harness share it. The harness
/// holds one busy unit while it runs steps, so time moves only while it waits for the
/// implementation and everything in flight waits on the clock.
pub(super) struct CaseClock {
    pub(super) sim: crate::providers::SimClock,
    /// Who may move it, when, and by how much (and what each participant did).
    pub(super) gate: crate::providers::ClockGate,
    _harness: crate::providers::Busy,
    init: crate::sut::message::ClockInit,
}

impl Drop for OperatorWorld {
    fn drop(&mut self) {
        if let Some((_, _, t)) = &self.hermes {
            t.abort();
        }
        for (_, t) in &self.background {
            t.abort();
        }
    }
}

impl OperatorWorld {
    pub(super) async fn hermes(&mut self) -> Result<(String, crate::providers::Hermes), SutError> {
        if self.hermes.is_none() {
            let config = provider_model::hermes::config::Config {
                // Never given to the implementation (the harness uses the handle).
                control_token: super::control_token().map_err(SutError::Harness)?,
                ..provider_model::hermes::config::Config::default()
            };
            // Each connector process reaches the clock with a token of its own, through the
            // gate; the harness's token (the in-process reference's) is not gated.
            let clock = crate::providers::HermesClock::at(
                crate::clock::Clock::now(&crate::clock::SystemClock).0,
                super::control_token().map_err(SutError::Harness)?,
            );
            let crate::providers::Served {
                url: base,
                handle,
                task,
            } = crate::providers::start_hermes(config, Some(&clock))
                .await
                .map_err(SutError::Harness)?;
            let gate = clock.gate.clone();
            self.clock = Some(CaseClock {
                gate: clock.gate,
                _harness: clock.sim.busy(),
                init: crate::sut::message::ClockInit {
                    url: format!("{base}{}", crate::providers::CLOCK_PATH),
                    token: clock.token,
                },
                sim: clock.sim,
            });
            if let Some(c) = &self.credentials {
                c.set_hermes(handle.clone(), gate);
            }
            self.hermes = Some((base, handle, task));
        }
        let (b, h, _) = self
            .hermes
            .as_ref()
            .ok_or_else(|| SutError::Harness("fake-hermes did not start".into()))?;
        Ok((b.clone(), h.clone()))
    }

    /// The case's Actions as (label, Action id), for a look that awaits each in turn.
    pub(super) fn action_ids(&self) -> Vec<(String, String)> {
        self.actions
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// What a connector instance is told at `init` beyond the case's common fields.
    /// The reader gets the harness's defaults, not the case's policy: it only reads, and a case
    /// may configure a policy it expects to be refused.
    pub(super) async fn instance_init(
        &mut self,
        reader: bool,
    ) -> Result<(HermesInit, OperatorInit), SutError> {
        let (base, _) = self.hermes().await?;
        let policy = if reader {
            self.base_policy()
        } else {
            self.policy()
                .map_err(|e| SutError::Harness(format!("operator policy: {e}")))?
        };
        let policy = serde_json::to_value(policy)
            .map_err(|e| SutError::Harness(format!("operator policy: {e}")))?;
        // The longest single wait this policy allows is the longest sleep the clock admits.
        if let Some(k) = &self.clock {
            let longest = policy
                .as_object()
                .into_iter()
                .flatten()
                .filter(|(k, _)| k.ends_with("_ms"))
                .filter_map(|(_, v)| v.as_u64())
                .max()
                .unwrap_or(0);
            k.gate.allow_up_to(longest);
        }
        Ok((
            HermesInit {
                base_url: base,
                api_key: "hermes-test-key".into(),
                endpoint_id: "primary".into(),
                clock: self.clock.as_ref().map(|c| c.init.clone()),
            },
            OperatorInit {
                policy: Some(policy),
                tenant: Some(self.tenant.clone()),
                resolver: self.resolver,
            },
        ))
    }

    /// Where bindings are read: an instance of its own, started with the harness's default
    /// policy.
    pub(super) async fn reader(&mut self) -> Result<Conn, SutError> {
        if let Some(r) = &self.reader {
            return Ok(r.clone());
        }
        let (hermes, operator) = self.instance_init(true).await?;
        let c = self
            .connect
            .connect("aocheck-operator-reader", hermes, operator)
            .await?;
        let c = self.on_clock(c);
        self.reader = Some(c.clone());
        Ok(c)
    }

    pub(super) async fn connector(&mut self, instance: &str) -> Result<Conn, SutError> {
        if let Some(c) = self.connectors.get(instance) {
            return Ok(c.clone());
        }
        let (hermes, operator) = self.instance_init(false).await?;
        let c = self.connect.connect(instance, hermes, operator).await?;
        let c = self.on_clock(c);
        self.connectors.insert(instance.into(), c.clone());
        Ok(c)
    }

    /// Accounts an instance's calls on the case's clock. An instance that keeps its own time
    /// (it did not answer `"clock": "driven"`) makes the clock follow real time for the case:
    /// its timers then run in real time, and so must the fake's.
    fn on_clock(&self, c: Conn) -> Conn {
        match &self.clock {
            Some(k) => {
                if !c.is_driven() {
                    k.sim.follow_real_time();
                }
                c.on_clock(k.sim.clone())
            }
            None => c,
        }
    }

    /// Runs `fut` while the harness waits for the implementation (its unit given back).
    pub(super) async fn idle<F: std::future::Future>(&self, fut: F) -> F::Output {
        match &self.clock {
            Some(k) => {
                let _idle = k.sim.idle();
                fut.await
            }
            None => fut.await,
        }
    }

    /// The harness's fast defaults with the case's overlay.
    pub(super) fn base_policy(&self) -> crate::operator::Policy {
        crate::operator::Policy {
            poll_interval_ms: 20,
            start_claim_ttl_ms: 1_000,
            cancel_grace_ms: 1_000,
            ..Default::default()
        }
    }

    pub(super) fn policy(&self) -> Result<crate::operator::Policy, serde_json::Error> {
        let mut v = serde_json::to_value(self.base_policy())?;
        if let Some(m) = v.as_object_mut() {
            m.extend(self.policy_overlay.clone());
        }
        serde_json::from_value(v)
    }

    /// Writes what the durable approval store and AIP's queue and lifecycle hold for a delegated
    /// child, and returns the child Action and the request.
    pub(super) async fn stage_delegation(
        &mut self,
        label: &str,
        capability: &str,
        scope: Vec<String>,
        chain: u32,
        approval: &str,
        child: &str,
    ) -> Result<
        (
            crate::operator::delegation::DelegationRequest,
            Vec<AipRecord>,
        ),
        SutError,
    > {
        let mut records: Vec<AipRecord> = Vec::new();
        use crate::operator::delegation::*;

        use serde_json::json;
        let id = self.action_id(label);
        let principal = "agent:hermes_operator:primary";
        let identity = json!({"sub": "hermes@primary", "tenant": self.tenant});
        let approval_id = format!("apr_{id}");
        let mut action = json!({
            "id": id, "capability": capability, "input": {"case": label},
            "mode": "async", "idempotency": {"key": format!("idem-{label}")},
            "identity": identity,
            "memory": {"notes": label, "_aip": {"trace": "harness"}},
        });
        if approval != "none" {
            action["approval"] = json!({"id": approval_id, "decision": "approved"});
        }
        // Staging is idempotent: a replayed delegation finds the records already written.
        let _store_err = |e: crate::store::StoreError| match e {
            crate::store::StoreError::Conflict { .. } => Ok(0),
            e => Err(SutError::Harness(format!("staging: {e}"))),
        };
        if approval != "none" && approval != "unstored" {
            let rec = ApprovalRecord {
                approval_id: approval_id.clone(),
                decision: "approved".into(),
                action_id: if approval == "other_action" {
                    "act_other".into()
                } else {
                    id.clone()
                },
                capability_id: capability.into(),
                expires_at: if approval == "expired" { 1 } else { u64::MAX },
            };
            records.push(AipRecord {
                namespace: APPROVALS.into(),
                key: approval_id.clone(),
                value: json!(rec),
            });
        }
        if child != "never" {
            let result = json!({"updated": label});
            let mut queued = action.clone();
            if child == "altered_contract" {
                queued["input"] = json!({"case": label, "amount": 1_000_000});
            }
            let q = QueueEntry {
                action: queued,
                owner: if child == "forged_owner" {
                    "agent:mallory".into()
                } else {
                    principal.into()
                },
                status: "completed".into(),
                result: Some(result.clone()),
                authenticated: AuthenticatedPrincipal {
                    principal: principal.into(),
                    scopes: vec!["action:write".into()],
                    expires_at: u64::MAX,
                    identity: if child == "identity_drift" {
                        json!({"sub": "someone-else"})
                    } else {
                        identity.clone()
                    },
                },
                actor: principal.into(),
                tenant: if child == "tenant_drift" {
                    "t-other".into()
                } else {
                    self.tenant.clone()
                },
                tenant_expires_at: None,
            };
            let l = LifecycleEntry {
                action_id: id.clone(),
                status: "completed".into(),
                result: Some(if child == "stores_disagree" {
                    json!({"updated": "forged"})
                } else {
                    result
                }),
            };
            records.push(AipRecord {
                namespace: QUEUE.into(),
                key: id.clone(),
                value: json!(q),
            });
            records.push(AipRecord {
                namespace: LIFECYCLE.into(),
                key: id.clone(),
                value: json!(l),
            });
        }
        if !self.delegations.iter().any(|(l, _)| l == label) {
            self.delegations.push((label.to_string(), action.clone()));
        }
        // AIP's records are handed to the instance with its request.
        let req = DelegationRequest {
            delegation_id: format!("del_{label}"),
            parent_action_id: self.action_id("parent"),
            requested_by: "agent:planner".into(),
            delegate: principal.into(),
            scope,
            delegation_chain: (0..chain).map(|i| format!("agent:hop{i}")).collect(),
            child: action,
        };
        Ok((req, records))
    }

    pub(super) fn action_id(&mut self, label: &str) -> String {
        let key = format!("{}-{label}", self.case_key);
        self.actions
            .entry(label.to_string())
            .or_insert_with(|| {
                format!(
                    "act_{}",
                    &crate::digest::Digest::of_bytes(key.as_bytes()).hex()[..32]
                )
            })
            .clone()
    }

    pub(super) fn action(&mut self, label: &str, input: serde_json::Value) -> Action {
        Action {
            id: self.action_id(label),
            idempotency_key: format!("idem-{label}"),
            capability: "cap:hermes_agent:primary:operator".into(),
            input,
            deadline_ms: Some(20_000),
            identity: None,
            approval: None,
            delegation: None,
        }
    }
}
