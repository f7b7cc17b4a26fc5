//! The reference's dispatch: one executor generation answering typed `aocheck-sut` requests
//! ([`Dispatch::handle`] for the AOC operations, [`OperatorSide::operator`] for the connector's,
//! which may run concurrently). The stdin/stdout server (`serve.rs`) and the in-process reference
//! (`in_process.rs`) both answer through it, so the reference is judged the same way either way.

use super::Knobs;
use super::executor::{ReferenceSut, Variant};
use super::payments::PaymentsClient;
use crate::aoc::domain::DomainConfig;
use crate::aoc::{Domain, Req};
use crate::clock::ManualClock;
use crate::operator::connector::OperatorResult;
use crate::operator::delegation::Resolver;
use crate::operator::error::ErrorCode;
use crate::operator::{Connector, ConnectorError, Policy};
use crate::store::{AnyStore, Store, StoreSpec};
use crate::sut::SutError;
use crate::sut::message::{Failure, Hello, Init, Op, Outcome, PROTOCOL, Request, StoreInit, reply};
use serde_json::{Value, json};
use std::sync::Arc;

/// The reference implementation's identity, for reports.
pub fn implementation(knobs: Knobs) -> serde_json::Value {
    serde_json::json!({
        "name": "aocheck-reference",
        "version": env!("CARGO_PKG_VERSION"),
        "same_team": true,
        "claims": hello(knobs).claims,
        "statements": hello(knobs).statements,
    })
}

/// What the reference says about itself in answer to `init`.
pub fn hello(knobs: Knobs) -> Hello {
    // Everything the reference says about itself is a statement of the closed vocabulary:
    // free text would leave AOC-REQ-013 undecided (GUIDE §4, "claims are data").
    let mut statements = crate::check::statements::reference_statements();
    if knobs.is(Variant::ProhibitedClaim) {
        statements.push(crate::check::statements::Statement::Migration {
            copy_transfers_exclusive_ownership: true,
        });
    }
    Hello {
        protocol: PROTOCOL.into(),
        name: "aocheck-reference".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        operations: Op::ALL.iter().map(|o| o.name().to_string()).collect(),
        key_rule: crate::check::accounting::PLACEHOLDER.into(),
        claims: Vec::new(),
        statements,
        clock: Some("driven".into()),
        same_team: true,
    }
}

/// One executor generation of the reference, answering typed requests: what one
/// `aocheck sut reference` process is, and what the in-process reference holds per executor.
#[derive(Debug)]
pub struct Dispatch {
    sut: ReferenceSut,
    name: String,
    clock: ManualClock,
    store: Arc<AnyStore>,
    /// The Hermes operator connector (when `init` names a Hermes endpoint).
    connector: Option<Arc<Connector<AnyStore>>>,
}

/// A connector failure as a protocol error: the seed's code as `kind`, the whole error in
/// `details`.
fn connector_failure(e: &ConnectorError) -> Failure {
    let mut f = failure(
        e.code.as_str(),
        None,
        e.message.clone(),
        !e.uncertain_outcome,
    );
    f.details = Some(json!(e));
    f
}

/// A typed error answer.
pub(crate) fn failure(
    kind: &str,
    requirement: Option<Req>,
    message: String,
    definite: bool,
) -> Failure {
    Failure {
        kind: kind.into(),
        requirement: requirement.map(|r| r.to_string()),
        message,
        outcome: if definite {
            Outcome::Definite
        } else {
            Outcome::Indefinite
        },
        details: None,
    }
}

/// A reference error as a protocol error. A refusal is definite (the domain wrote nothing); a
/// store or provider failure is indefinite (fail closed). `labels`: whether a refusal names the
/// requirement it enforces (optional in the protocol; the `no_labels` alternative never does).
fn sut_failure(e: &SutError, labels: bool) -> Failure {
    match e {
        SutError::Refused(r) => failure(
            "refused",
            labels.then_some(r.requirement),
            r.to_string(),
            true,
        ),
        SutError::Corrupt(m) => failure("corrupt", Some(Req::R004), m.clone(), false),
        SutError::Harness(m) => failure("internal", None, m.clone(), false),
        SutError::RefusedUnnamed(m) => failure("refused", None, m.clone(), true),
        SutError::Version(m) => failure("internal", None, m.clone(), false),
    }
}

impl Dispatch {
    /// The executor's name, and how a domain error is said to the harness (with the refusal's
    /// labels, or without them under the `no_labels` variant).
    fn speaker(&self) -> (String, impl Fn(SutError) -> Failure + use<>) {
        let labels = self.sut.variant() != Variant::NoLabels;
        (self.name.clone(), move |e: SutError| {
            sut_failure(&e, labels)
        })
    }

    /// Answers one AOC request (the operator requests go to [`Dispatch::operator_side`]).
    pub async fn handle(&mut self, now: Option<u64>, req: Request) -> Result<Value, Failure> {
        if let Some(now) = now {
            self.clock.set(now);
        }
        let (name, e) = self.speaker();
        let ok = |v: &dyn erased::Encode| v.encode();
        let done = || ok(&reply::Done {});
        match req {
            Request::Join => {
                let h = self.sut.join(&name).await.map_err(e)?;
                ok(&reply::Generation {
                    generation: Some(h.generation.0),
                })
            }
            Request::Takeover => {
                let h = self.sut.replace(&name).await.map_err(e)?;
                ok(&reply::Generation {
                    generation: Some(h.generation.0),
                })
            }
            Request::Create {
                key,
                amount,
                simulate,
                labels,
            } => {
                let occurrence = self
                    .sut
                    .create(&name, &key, amount, simulate.as_deref(), &labels)
                    .await
                    .map_err(e)?;
                ok(&reply::Occurrence { occurrence })
            }
            Request::Reserve { occurrence, amount } => {
                self.sut
                    .reserve(&name, &occurrence, amount)
                    .await
                    .map_err(e)?;
                done()
            }
            Request::Enter { occurrence } => {
                self.sut.enter(&name, &occurrence).await.map_err(e)?;
                done()
            }
            Request::Send {
                occurrence,
                background,
            } => {
                self.sut
                    .send(&name, &occurrence, background)
                    .await
                    .map_err(e)?;
                done()
            }
            Request::Execute { occurrence } => {
                self.sut.execute(&name, &occurrence).await.map_err(e)?;
                done()
            }
            Request::Settle => {
                self.sut.settle().await.map_err(e)?;
                done()
            }
            Request::Adopt { occurrence } => {
                self.sut.adopt(&name, &occurrence).await.map_err(e)?;
                done()
            }
            Request::Reconcile { occurrence } => {
                self.sut.reconcile(&name, &occurrence).await.map_err(e)?;
                done()
            }
            Request::Release { occurrence, reason } => {
                self.sut
                    .release(&name, &occurrence, reason)
                    .await
                    .map_err(e)?;
                done()
            }
            Request::Rebind {
                occurrence,
                field,
                value,
            } => {
                self.sut
                    .rebind(&name, &occurrence, &field, &value)
                    .await
                    .map_err(e)?;
                done()
            }
            Request::Remedy {
                occurrence,
                kind,
                authorization,
            } => {
                let occurrence = self
                    .sut
                    .remedy(&name, &occurrence, kind, &authorization)
                    .await
                    .map_err(e)?;
                ok(&reply::Occurrence { occurrence })
            }
            Request::State { occurrence } => {
                let (history, state) = self.sut.answer(&occurrence).await.map_err(e)?;
                ok(&super::envelope::answer(&history, &state))
            }
            Request::Lane => {
                let lease = self
                    .sut
                    .domain
                    .lease(self.sut.lane())
                    .await
                    .map_err(|d| e(d.into()))?;
                ok(&reply::Generation {
                    generation: lease.map(|l| l.holder.generation.0),
                })
            }
            req @ (Request::Submit { .. }
            | Request::Claim
            | Request::Link { .. }
            | Request::Recover
            | Request::ResolveUnknown { .. }
            | Request::Finish { .. }
            | Request::Admission { .. }
            | Request::LeaseRefresh
            | Request::LeaseRelease
            | Request::AadpExpire { .. }) => self.admission(req).await,
            Request::Import => {
                self.sut
                    .domain
                    .import_from_other_domain(&[])
                    .map_err(|d| e(d.into()))?;
                done()
            }
            Request::Describe => ok(&reply::Describe {
                composition: self.sut.domain.composition(),
                bypass_paths: self.sut.domain.bypass_paths().to_vec(),
            }),
            other => Err(failure(
                "internal",
                None,
                format!(
                    "`{}` is not an executor's operation: a connector instance or a workflow runner answers it",
                    other.op()
                ),
                true,
            )),
        }
    }

    /// Seed 003's admission and the lane's lease: a submission, a claim, a link, a recovery, a
    /// resolution, an end, an admission read, a lease refreshed or released, an AADP expiry.
    async fn admission(&mut self, req: Request) -> Result<Value, Failure> {
        let (name, e) = self.speaker();
        let ok = |v: &dyn erased::Encode| v.encode();
        let done = || ok(&reply::Done {});
        match req {
            Request::Submit { key } => {
                let a = self.sut.submit(&key).await.map_err(e)?;
                ok(&reply::Admitted {
                    admission: Some(a.id),
                })
            }
            Request::Claim => {
                let a = self.sut.claim(&name).await.map_err(e)?;
                ok(&reply::Admitted {
                    admission: a.map(|a| a.id),
                })
            }
            Request::Link {
                admission,
                occurrence,
            } => {
                self.sut
                    .link(&name, &admission, &occurrence)
                    .await
                    .map_err(e)?;
                done()
            }
            Request::Recover => {
                let count = self.sut.recover(&name).await.map_err(e)?;
                ok(&reply::Recovered {
                    count: count as u64,
                })
            }
            Request::ResolveUnknown { admission } => {
                self.sut
                    .resolve_unknown(&name, &admission)
                    .await
                    .map_err(e)?;
                done()
            }
            Request::Finish { admission, end } => {
                self.sut.finish(&name, &admission, end).await.map_err(e)?;
                done()
            }
            Request::Admission { admission } => {
                let a = self
                    .sut
                    .domain
                    .admission(&admission)
                    .await
                    .map_err(|d| e(d.into()))?;
                ok(&a)
            }
            Request::LeaseRefresh | Request::LeaseRelease => {
                self.sut
                    .lease_call(&name, req == Request::LeaseRelease)
                    .await
                    .map_err(e)?;
                done()
            }
            Request::AadpExpire { occurrence } => {
                self.sut.aadp_expire(&name, &occurrence).await.map_err(e)?;
                done()
            }
            other => Err(failure(
                "internal",
                None,
                format!("`{}` is not an admission operation", other.op()),
                true,
            )),
        }
    }
}

/// Encoding an ok result (a typed reply) as the `ok` object.
mod erased {
    pub trait Encode {
        fn encode(&self) -> Result<serde_json::Value, crate::sut::message::Failure>;
    }
    impl<T: serde::Serialize> Encode for T {
        fn encode(&self) -> Result<serde_json::Value, crate::sut::message::Failure> {
            serde_json::to_value(self)
                .map_err(|e| super::failure("internal", None, format!("cannot encode: {e}"), false))
        }
    }
}

/// The operator operations ([`Op::is_operator`]), answered concurrently.
#[derive(Clone, Debug)]
pub struct OperatorSide {
    connector: Option<Arc<Connector<AnyStore>>>,
    store: Arc<AnyStore>,
}

impl OperatorSide {
    /// Answers one operator request; concurrent calls are allowed.
    pub async fn operator(&self, req: Request) -> Result<Value, Failure> {
        if let Request::Policy { policy } = req {
            // Validation only: the policy a later process would be started with.
            let p: Policy = serde_json::from_value(policy).map_err(|e| {
                connector_failure(&ConnectorError::new(
                    ErrorCode::OperatorPolicy,
                    format!("policy: {e}"),
                ))
            })?;
            p.validate().map_err(|e| connector_failure(&e))?;
            return Ok(json!({}));
        }
        let c = self.connector.as_ref().ok_or_else(|| {
            failure(
                "invalid",
                None,
                "no Hermes endpoint was configured at init (providers.hermes)".into(),
                true,
            )
        })?;
        let invalid = |e: serde_json::Error| failure("invalid", None, e.to_string(), true);
        let encode = |r: OperatorResult| serde_json::to_value(r).map_err(invalid);
        match req {
            Request::Invoke { action } => {
                encode(c.invoke(&action).await.map_err(|e| connector_failure(&e))?)
            }
            Request::Delegate {
                request,
                aip_records,
            } => {
                // AIP's records the connector consults (approvals, queue, lifecycle), as AIP
                // holds them; written once, like AIP would.
                for rec in aip_records {
                    match self
                        .store
                        .record_cas(&rec.namespace, &rec.key, None, &rec.value)
                        .await
                    {
                        Ok(_) | Err(crate::store::StoreError::Conflict { .. }) => {}
                        Err(e) => return Err(failure("internal", None, e.to_string(), false)),
                    }
                }
                encode(
                    c.delegate(&request)
                        .await
                        .map_err(|e| connector_failure(&e))?,
                )
            }
            Request::Cancel { action_id } => {
                let b = c
                    .cancel(&action_id)
                    .await
                    .map_err(|e| connector_failure(&e))?;
                Ok(json!(b))
            }
            Request::Binding { action_id } => {
                match c
                    .binding(&action_id)
                    .await
                    .map_err(|e| connector_failure(&e))?
                {
                    Some((version, binding)) => Ok(json!(reply::Binding { version, binding })),
                    None => Ok(Value::Null),
                }
            }
            Request::Manifest => Ok(c.manifest()),
            other => Err(failure(
                "internal",
                None,
                format!("`{}` is not an operator operation", other.op()),
                true,
            )),
        }
    }
}

impl Dispatch {
    /// A process's executor: the store is the one `init` names.
    pub async fn open(init: Init, knobs: Knobs) -> Result<Dispatch, String> {
        if init.protocol != PROTOCOL {
            return Err(format!(
                "protocol {:?} requested; this implementation speaks {PROTOCOL}",
                init.protocol
            ));
        }
        let spec = match &init.store {
            StoreInit::Sqlite { path } => StoreSpec::Sqlite(path.into()),
            StoreInit::Postgres { url } => StoreSpec::Postgres(url.clone()),
            StoreInit::InProcess => return Err("a process cannot open an in-process store".into()),
        };
        let store = spec
            .open()
            .await
            .map_err(|e| format!("cannot open the store: {e}"))?;
        let payments = init.providers.payments.as_ref().ok_or(
            "init.providers.payments is missing: an executor needs the payment provider (only a workflow runner's init, with `workflow`, has none)",
        )?;
        let client =
            PaymentsClient::connect(&payments.base_url, &payments.account, &payments.api_key)
                .await
                .map_err(|e| format!("cannot reach the payment provider: {e}"))?;
        Dispatch::over(Arc::new(store), client, init, knobs)
    }

    /// An executor over a store handle and a payments client the caller already holds (the
    /// in-process reference shares one connected client; `init.store` and
    /// `init.providers.payments` are not consulted).
    pub fn over(
        store: Arc<AnyStore>,
        client: PaymentsClient,
        init: Init,
        knobs: Knobs,
    ) -> Result<Dispatch, String> {
        let domain_id = init
            .domain
            .id
            .clone()
            .or_else(|| init.case.clone())
            .unwrap_or_else(|| "default".into());
        let mut config = DomainConfig::new(domain_id, client.profile().clone());
        config.limits = init.limits;
        config.bypass_paths = init.domain.bypass_paths;
        config.aadp = init.domain.aadp;
        config.action_fence = init.domain.action_fence && !knobs.is(Variant::NoActionFence);
        config.generic_failure_resolves = !knobs.is(Variant::GenericFailureUnresolved);
        let clock = ManualClock::at(
            init.now
                .unwrap_or_else(|| crate::clock::Clock::now(&crate::clock::SystemClock).0),
        );
        let domain = Domain::new(store.clone(), config, Arc::new(clock.clone()))
            .map_err(|d| format!("domain configuration: {}", d.join("; ")))?;
        let operator = init.operator.clone().unwrap_or_default();
        let connector = match &init.providers.hermes {
            None => None,
            Some(h) => {
                let policy: Policy =
                    serde_json::from_value(operator.policy.clone().unwrap_or(json!({})))
                        .map_err(|e| format!("operator.policy: {e}"))?;
                let mut c = Connector::new(
                    store.clone(),
                    &h.endpoint_id,
                    &h.base_url,
                    &h.api_key,
                    policy,
                    &init.executor.name,
                    match &h.clock {
                        Some(c) => Arc::new(crate::clock::DrivenClock::new(&c.url, &c.token)?),
                        None => Arc::new(crate::clock::SystemClock),
                    },
                )
                .map_err(|e| format!("operator connector: {e}"))?;
                #[cfg(feature = "test-knobs")]
                if let Some(d) = knobs.connector() {
                    c = c.with_defect_for_tests(d);
                }
                if operator.resolver {
                    c = c.with_resolver(Resolver {
                        tenant: operator.tenant.clone().unwrap_or_else(|| "t1".into()),
                    });
                }
                Some(Arc::new(c))
            }
        };
        Ok(Dispatch {
            sut: ReferenceSut::new(domain, client, knobs),
            name: init.executor.name,
            clock,
            store,
            connector,
        })
    }

    /// The executor's name (from `init`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The operator side, to answer operator requests concurrently.
    pub fn operator_side(&self) -> OperatorSide {
        OperatorSide {
            connector: self.connector.clone(),
            store: self.store.clone(),
        }
    }

    /// The executor dies: its memory goes, and its background sends die with it.
    pub fn crash(&mut self) {
        self.sut.abort_background();
    }
}
