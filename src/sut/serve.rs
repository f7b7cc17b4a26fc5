//! The reference implementation behind `aocheck-sut/1` (`aocheck sut reference`): one process is
//! one executor generation. It reads requests from stdin, answers on stdout, logs on stderr, and
//! keeps everything durable in the store named by `init`, so a successor process on the same store
//! continues where a killed predecessor stopped.
//!
//! Requests are answered in order. A background `send` runs inside the process and dies with it,
//! which is what a SIGKILL during a held provider request needs.

use super::payments::PaymentsClient;
use super::protocol::{self, MAX_LINE, PROTOCOL};
use super::reference::{ReferenceSut, SutError, Variant};
use crate::aoc::admission::AdmissionEnd;
use crate::aoc::composition::{AadpAccounting, BypassPath};
use crate::aoc::domain::{DomainConfig, Limits};
use crate::aoc::history::ReleaseReason;
use crate::aoc::ids::{AdmissionId, OccurrenceId};
use crate::aoc::{Domain, Req};
use crate::clock::ManualClock;
use crate::operator::connector::{ConnectorDefect, OperatorResult};
use crate::operator::delegation::{DelegationRequest, Resolver};
use crate::operator::error::ErrorCode;
use crate::operator::{Action, Connector, ConnectorError, Policy};
use crate::store::{AnyStore, Store, StoreSpec};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::sync::Arc;
use tokio::io::{AsyncWriteExt, BufReader};

/// Every operation this implementation answers (beyond `init`).
pub const OPERATIONS: [&str; 32] = [
    "join",
    "takeover",
    "create",
    "reserve",
    "enter",
    "send",
    "execute",
    "settle",
    "adopt",
    "reconcile",
    "release",
    "rebind",
    "remedy",
    "state",
    "lane",
    "submit",
    "claim",
    "link",
    "recover",
    "resolve_unknown",
    "finish",
    "admission",
    "lease_refresh",
    "lease_release",
    "import",
    "describe",
    "invoke",
    "delegate",
    "cancel",
    "binding",
    "manifest",
    "policy",
];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Init {
    protocol: String,
    executor: ExecutorInit,
    store: StoreInit,
    providers: Providers,
    limits: Limits,
    #[serde(default)]
    domain: DomainInit,
    #[serde(default)]
    operator: OperatorInit,
    #[serde(default)]
    case: Option<String>,
    #[serde(default)]
    seed: Option<u64>,
    #[serde(default)]
    now: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExecutorInit {
    name: String,
    #[serde(default)]
    generation: Option<u64>,
    #[serde(default)]
    credential: Option<String>,
}

#[derive(Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
enum StoreInit {
    Sqlite { path: String },
    Postgres { url: String },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Providers {
    payments: PaymentsInit,
    #[serde(default)]
    hermes: Option<HermesInit>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HermesInit {
    base_url: String,
    api_key: String,
    endpoint_id: String,
}

/// The operator connector's configuration (Hermes cases).
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct OperatorInit {
    #[serde(default)]
    policy: Option<Value>,
    #[serde(default)]
    tenant: Option<String>,
    #[serde(default)]
    resolver: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PaymentsInit {
    base_url: String,
    account: String,
    api_key: String,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct DomainInit {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    bypass_paths: Vec<BypassPath>,
    #[serde(default)]
    aadp: AadpAccounting,
    #[serde(default)]
    action_fence: bool,
}

struct Served {
    sut: ReferenceSut,
    name: String,
    clock: ManualClock,
    store: Arc<AnyStore>,
    /// The Hermes operator connector (when `init` names a Hermes endpoint).
    connector: Option<Arc<Connector<AnyStore>>>,
}

/// A connector failure as a protocol error: the seed's code as `kind`, the whole error in
/// `details`.
fn connector_failure(e: &ConnectorError) -> Value {
    let mut f = failure(
        e.code.as_str(),
        None,
        e.message.clone(),
        !e.uncertain_outcome,
    );
    f["details"] = json!(e);
    f
}

fn failure(kind: &str, requirement: Option<Req>, message: String, definite: bool) -> Value {
    let mut e = json!({"kind": kind, "message": message,
        "outcome": if definite { "definite" } else { "indefinite" }});
    if let Some(r) = requirement {
        e["requirement"] = json!(r.to_string());
    }
    e
}

/// A reference error as a protocol error. A refusal is definite (the domain wrote nothing); a
/// store or provider failure is indefinite (fail closed).
fn sut_failure(e: &SutError) -> Value {
    match e {
        SutError::Refused(r) => failure("refused", Some(r.requirement), r.to_string(), true),
        SutError::Corrupt(m) => failure("corrupt", Some(Req::R004), m.clone(), false),
        SutError::Mismatch(r, m) => failure("internal", Some(*r), m.clone(), false),
        SutError::Harness(m) => failure("internal", None, m.clone(), false),
        SutError::RefusedUnnamed(m) => failure("refused", None, m.clone(), true),
    }
}

fn field<'a>(f: &'a Map<String, Value>, k: &str) -> Result<&'a str, Value> {
    f.get(k).and_then(Value::as_str).ok_or_else(|| {
        failure(
            "invalid",
            None,
            format!("`{k}` (a string) is required"),
            true,
        )
    })
}

fn occ(f: &Map<String, Value>) -> Result<OccurrenceId, Value> {
    field(f, "occurrence").map(OccurrenceId::from_stored)
}

fn adm(f: &Map<String, Value>) -> Result<AdmissionId, Value> {
    field(f, "admission").map(AdmissionId::from_stored)
}

impl Served {
    async fn handle(&mut self, op: &str, f: &Map<String, Value>) -> Result<Value, Value> {
        if let Some(now) = f.get("now").and_then(Value::as_u64) {
            self.clock.set(now);
        }
        let name = self.name.clone();
        let e = |e: SutError| sut_failure(&e);
        let done = || Ok(json!({}));
        match op {
            "join" => {
                let h = self.sut.join(&name).await.map_err(e)?;
                Ok(json!({"generation": h.generation.0}))
            }
            "takeover" => {
                let h = self.sut.replace(&name).await.map_err(e)?;
                Ok(json!({"generation": h.generation.0}))
            }
            "create" => {
                let key = field(f, "key")?;
                let amount = f.get("amount").and_then(Value::as_i64).unwrap_or(1250);
                let simulate = f.get("simulate").and_then(Value::as_str);
                let id = self
                    .sut
                    .create(&name, key, amount, simulate)
                    .await
                    .map_err(e)?;
                Ok(json!({"occurrence": id}))
            }
            "reserve" => {
                let amount = f.get("amount").and_then(Value::as_u64).unwrap_or(1250);
                self.sut.reserve(&name, &occ(f)?, amount).await.map_err(e)?;
                done()
            }
            "enter" => {
                self.sut.enter(&name, &occ(f)?).await.map_err(e)?;
                done()
            }
            "send" => {
                let background = f
                    .get("background")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                self.sut
                    .send(&name, &occ(f)?, background)
                    .await
                    .map_err(e)?;
                done()
            }
            "execute" => {
                self.sut.execute(&name, &occ(f)?).await.map_err(e)?;
                done()
            }
            "settle" => {
                self.sut.settle().await.map_err(e)?;
                done()
            }
            "adopt" => {
                self.sut.adopt(&name, &occ(f)?).await.map_err(e)?;
                done()
            }
            "reconcile" => {
                self.sut.reconcile(&name, &occ(f)?).await.map_err(e)?;
                done()
            }
            "release" => {
                let reason = match f.get("reason").and_then(Value::as_str) {
                    None => ReleaseReason::PredecessorNeverEntered,
                    Some(r) => ReleaseReason::parse(r).ok_or_else(|| {
                        failure(
                            "invalid",
                            None,
                            format!("unknown release reason {r:?}"),
                            true,
                        )
                    })?,
                };
                self.sut.release(&name, &occ(f)?, reason).await.map_err(e)?;
                done()
            }
            "rebind" => {
                let (fld, value) = (field(f, "field")?, field(f, "value")?);
                self.sut
                    .rebind(&name, &occ(f)?, fld, value)
                    .await
                    .map_err(e)?;
                done()
            }
            "remedy" => {
                let auth = field(f, "authorization")?;
                let r = self.sut.remedy(&name, &occ(f)?, auth).await.map_err(e)?;
                Ok(json!({"occurrence": r}))
            }
            "state" => {
                let o = occ(f)?;
                let history = self.sut.history(&o).await.map_err(e)?;
                let state = self.sut.state(&o).await.map_err(e)?;
                Ok(json!({"state": state, "history": history}))
            }
            "lane" => {
                let lease = self
                    .sut
                    .domain
                    .lease(self.sut.lane())
                    .await
                    .map_err(|d| e(d.into()))?;
                Ok(json!({"generation": lease.map(|l| l.holder.generation.0)}))
            }
            "submit" => {
                let a = self.sut.submit(field(f, "key")?).await.map_err(e)?;
                Ok(json!({"admission": a.id}))
            }
            "claim" => {
                let a = self.sut.claim(&name).await.map_err(e)?;
                Ok(json!({"admission": a.map(|a| a.id)}))
            }
            "link" => {
                self.sut.link(&name, &adm(f)?, &occ(f)?).await.map_err(e)?;
                done()
            }
            "recover" => {
                let n = self.sut.recover(&name).await.map_err(e)?;
                Ok(json!({"count": n}))
            }
            "resolve_unknown" => {
                self.sut.resolve_unknown(&name, &adm(f)?).await.map_err(e)?;
                done()
            }
            "finish" => {
                let end = field(f, "end")?;
                let end = AdmissionEnd::parse(end).ok_or_else(|| {
                    failure(
                        "invalid",
                        None,
                        format!("unknown admission end {end:?}"),
                        true,
                    )
                })?;
                self.sut.finish(&name, &adm(f)?, end).await.map_err(e)?;
                done()
            }
            "admission" => {
                let a = self
                    .sut
                    .domain
                    .admission(&adm(f)?)
                    .await
                    .map_err(|d| e(d.into()))?;
                Ok(json!(a))
            }
            "lease_refresh" | "lease_release" => {
                self.sut
                    .lease_call(&name, op == "lease_release")
                    .await
                    .map_err(e)?;
                done()
            }
            "import" => {
                self.sut
                    .domain
                    .import_from_other_domain(&[])
                    .map_err(|d| e(d.into()))?;
                done()
            }
            "describe" => Ok(json!({
                "composition": self.sut.domain.composition(),
                "bypass_paths": self.sut.domain.bypass_paths(),
            })),
            other => Err(failure(
                "unsupported",
                None,
                format!("operation {other:?} is not implemented"),
                true,
            )),
        }
    }
}

/// The operator operations: answered concurrently (a `cancel` must reach the connector while the
/// `invoke` it cancels is still waiting for its run).
const OPERATOR_OPS: [&str; 6] = [
    "invoke", "delegate", "cancel", "binding", "manifest", "policy",
];

struct OperatorSide {
    connector: Option<Arc<Connector<AnyStore>>>,
    store: Arc<AnyStore>,
}

impl OperatorSide {
    async fn operator(&self, op: &str, f: &Map<String, Value>) -> Result<Value, Value> {
        if op == "policy" {
            // Validation only: the policy a later process would be started with.
            let p: Policy = serde_json::from_value(f.get("policy").cloned().unwrap_or(json!({})))
                .map_err(|e| {
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
        let parse = |k: &str| {
            f.get(k)
                .cloned()
                .ok_or_else(|| failure("invalid", None, format!("`{k}` is required"), true))
        };
        let invalid = |e: serde_json::Error| failure("invalid", None, e.to_string(), true);
        let encode = |r: OperatorResult| serde_json::to_value(r).map_err(invalid);
        match op {
            "invoke" => {
                let a: Action = serde_json::from_value(parse("action")?).map_err(invalid)?;
                encode(c.invoke(&a).await.map_err(|e| connector_failure(&e))?)
            }
            "delegate" => {
                let r: DelegationRequest =
                    serde_json::from_value(parse("request")?).map_err(invalid)?;
                // AIP's records the connector consults (approvals, queue, lifecycle), as AIP
                // holds them; written once, like AIP would.
                if let Some(Value::Array(recs)) = f.get("aip_records") {
                    for rec in recs {
                        let (Some(ns), Some(key)) =
                            (rec["namespace"].as_str(), rec["key"].as_str())
                        else {
                            return Err(failure(
                                "invalid",
                                None,
                                "aip_records[]: {namespace, key, value}".into(),
                                true,
                            ));
                        };
                        match self.store.record_cas(ns, key, None, &rec["value"]).await {
                            Ok(_) | Err(crate::store::StoreError::Conflict { .. }) => {}
                            Err(e) => return Err(failure("internal", None, e.to_string(), false)),
                        }
                    }
                }
                encode(c.delegate(&r).await.map_err(|e| connector_failure(&e))?)
            }
            "cancel" => {
                let id = field(f, "action_id")?;
                let b = c.cancel(id).await.map_err(|e| connector_failure(&e))?;
                Ok(json!(b))
            }
            "binding" => {
                let id = field(f, "action_id")?;
                match c.binding(id).await.map_err(|e| connector_failure(&e))? {
                    Some((version, b)) => Ok(json!({"version": version, "binding": b})),
                    None => Ok(Value::Null),
                }
            }
            _ => Ok(c.manifest()),
        }
    }
}

async fn start(
    init: Init,
    variant: Variant,
    defect: Option<ConnectorDefect>,
) -> Result<Served, String> {
    if init.protocol != PROTOCOL {
        return Err(format!(
            "protocol {:?} requested; this implementation speaks {PROTOCOL}",
            init.protocol
        ));
    }
    let spec = match &init.store {
        StoreInit::Sqlite { path } => StoreSpec::Sqlite(path.into()),
        StoreInit::Postgres { url } => StoreSpec::Postgres(url.clone()),
    };
    let store = spec
        .open()
        .await
        .map_err(|e| format!("cannot open the store: {e}"))?;
    let client = PaymentsClient::connect(
        &init.providers.payments.base_url,
        &init.providers.payments.account,
        &init.providers.payments.api_key,
    )
    .await
    .map_err(|e| format!("cannot reach the payment provider: {e}"))?;
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
    config.action_fence = init.domain.action_fence;
    let clock = ManualClock::at(
        init.now
            .unwrap_or_else(|| crate::clock::Clock::now(&crate::clock::SystemClock).0),
    );
    let store = Arc::new(store);
    let domain = Domain::new(store.clone(), config, Arc::new(clock.clone()))
        .map_err(|d| format!("domain configuration: {}", d.join("; ")))?;
    let _ = (
        init.executor.generation,
        init.executor.credential,
        init.seed,
    );
    let connector = match &init.providers.hermes {
        None => None,
        Some(h) => {
            let policy: Policy =
                serde_json::from_value(init.operator.policy.clone().unwrap_or(json!({})))
                    .map_err(|e| format!("operator.policy: {e}"))?;
            let mut c = Connector::new(
                store.clone(),
                &h.endpoint_id,
                &h.base_url,
                &h.api_key,
                policy,
                &init.executor.name,
                Arc::new(crate::clock::SystemClock),
            )
            .map_err(|e| format!("operator connector: {e}"))?;
            if let Some(d) = defect {
                c = c.with_defect_for_tests(d);
            }
            if init.operator.resolver {
                c = c.with_resolver(Resolver {
                    tenant: init.operator.tenant.clone().unwrap_or_else(|| "t1".into()),
                });
            }
            Some(Arc::new(c))
        }
    };
    Ok(Served {
        sut: ReferenceSut::new(domain, client, variant),
        name: init.executor.name,
        clock,
        store,
        connector,
    })
}

/// Serves one process's lifetime on stdin/stdout. Returns the exit code.
pub async fn serve(variant: Variant, defect: Option<ConnectorDefect>) -> u8 {
    let mut input = BufReader::new(tokio::io::stdin());
    // One writer owns stdout; answers arrive from the main loop and from operator tasks.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Vec<u8>>();
    let writer = tokio::spawn(async move {
        let mut out = tokio::io::stdout();
        while let Some(bytes) = rx.recv().await {
            if out.write_all(&bytes).await.is_err() || out.flush().await.is_err() {
                return;
            }
        }
    });
    let send = move |id: u64, answer: Result<Value, Value>| {
        let msg = match answer {
            Ok(v) => json!({"id": id, "ok": v}),
            Err(e) => json!({"id": id, "error": e}),
        };
        match serde_json::to_vec(&msg) {
            Ok(mut bytes) => {
                bytes.push(b'\n');
                let _ = tx.send(bytes);
            }
            Err(e) => eprintln!("aocheck-reference: cannot encode a response: {e}"),
        }
    };
    let mut served: Option<Served> = None;
    loop {
        let line = match protocol::read_line(&mut input, MAX_LINE).await {
            Ok(Ok(Some(l))) => l,
            Ok(Ok(None)) => {
                // The harness closed stdin: write what is already answered, then go (requests
                // still in flight are abandoned with the process).
                drop(send);
                let _ = tokio::time::timeout(std::time::Duration::from_secs(1), writer).await;
                return crate::exit::OK;
            }
            Ok(Err(v)) => {
                eprintln!("aocheck-reference: {v}");
                return crate::exit::INVALID_INPUT;
            }
            Err(e) => {
                eprintln!("aocheck-reference: reading stdin: {e}");
                return crate::exit::INVALID_INPUT;
            }
        };
        let req: protocol::Request = match serde_json::from_slice(&line) {
            Ok(r) => r,
            Err(e) => {
                // Without an id there is nothing to answer: say why on stderr and stop.
                eprintln!(
                    "aocheck-reference: not a request ({e}): {}",
                    String::from_utf8_lossy(&line[..line.len().min(200)])
                );
                return crate::exit::INVALID_INPUT;
            }
        };
        let answer = match (req.op.as_str(), served.as_mut()) {
            ("init", None) => {
                let parsed: Result<Init, String> =
                    serde_json::from_value(Value::Object(req.fields.clone()))
                        .map_err(|e| format!("init: {e}"));
                match parsed {
                    Ok(init) => match start(init, variant, defect).await {
                        Ok(s) => {
                            eprintln!("aocheck-reference: executor {} ready", s.name);
                            served = Some(s);
                            Ok(json!({"protocol": PROTOCOL, "name": "aocheck-reference",
                                "version": env!("CARGO_PKG_VERSION"), "operations": OPERATIONS}))
                        }
                        Err(m) => Err(failure("invalid", None, m, true)),
                    },
                    Err(m) => Err(failure("invalid", None, m, true)),
                }
            }
            ("init", Some(_)) => Err(failure(
                "invalid",
                None,
                "init was already answered".into(),
                true,
            )),
            (_, None) => Err(failure(
                "invalid",
                None,
                format!("`{}` before init", req.op),
                true,
            )),
            (op, Some(s)) if OPERATOR_OPS.contains(&op) => {
                let side = OperatorSide {
                    connector: s.connector.clone(),
                    store: s.store.clone(),
                };
                let (id, op, fields) = (req.id, op.to_string(), req.fields);
                let send = send.clone();
                tokio::spawn(async move { send(id, side.operator(&op, &fields).await) });
                continue;
            }
            (op, Some(s)) => s.handle(op, &req.fields).await,
        };
        send(req.id, answer);
    }
}
