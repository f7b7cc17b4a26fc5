//! The messages of `aocheck-sut/2` as Rust types: [`Init`] and its answer [`Hello`], one
//! [`Request`] variant per operation with typed fields, the typed ok results in [`reply`], and
//! [`Failure`]. The harness encodes these types (the World, `processes.rs`, `operator.rs`) and
//! the reference decodes them (its dispatch); the operations a case needs are [`Op`] values
//! derived from its steps. `docs/sut-protocol.md` is checked against these types by a test, so
//! the two cannot drift.
//!
//! On the wire a request is one flat JSON object: `{"id", "now"?, "op", …fields}`
//! ([`Envelope`]); the framing (lines, pairing, violations) is `protocol.rs`.

use crate::aoc::admission::AdmissionEnd;
use crate::aoc::composition::{AadpAccounting, BypassPath, CompositionStatus};
use crate::aoc::domain::Limits;
use crate::aoc::history::ReleaseReason;
use crate::aoc::ids::{AdmissionId, OccurrenceId};
use crate::operator::delegation::DelegationRequest;
use crate::operator::{Action, Binding};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use super::protocol::{Outcome, PROTOCOL, SutFailure as Failure};

/// An operation's name, as `op` carries it and `init`'s answer lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    Join,
    Takeover,
    Create,
    Reserve,
    Enter,
    Send,
    Execute,
    Settle,
    Adopt,
    Reconcile,
    Release,
    Rebind,
    Remedy,
    State,
    Lane,
    Submit,
    Claim,
    Link,
    Recover,
    ResolveUnknown,
    Finish,
    Admission,
    LeaseRefresh,
    LeaseRelease,
    Import,
    AadpExpire,
    Describe,
    Invoke,
    Delegate,
    Cancel,
    Binding,
    Manifest,
    Policy,
    WorkflowValidate,
    WorkflowStart,
    WorkflowResume,
    WorkflowAnswer,
}

impl Op {
    /// Every operation beyond `init`, in the order the specification lists them.
    pub const ALL: [Op; 37] = [
        Op::Join,
        Op::Takeover,
        Op::Create,
        Op::Reserve,
        Op::Enter,
        Op::Send,
        Op::Execute,
        Op::Settle,
        Op::Adopt,
        Op::Reconcile,
        Op::Release,
        Op::Rebind,
        Op::Remedy,
        Op::State,
        Op::Lane,
        Op::Submit,
        Op::Claim,
        Op::Link,
        Op::Recover,
        Op::ResolveUnknown,
        Op::Finish,
        Op::Admission,
        Op::LeaseRefresh,
        Op::LeaseRelease,
        Op::Import,
        Op::AadpExpire,
        Op::Describe,
        Op::Invoke,
        Op::Delegate,
        Op::Cancel,
        Op::Binding,
        Op::Manifest,
        Op::Policy,
        Op::WorkflowValidate,
        Op::WorkflowStart,
        Op::WorkflowResume,
        Op::WorkflowAnswer,
    ];

    /// The wire name (`resolve_unknown`, `lease_refresh` …).
    pub fn name(self) -> &'static str {
        match self {
            Op::Join => "join",
            Op::Takeover => "takeover",
            Op::Create => "create",
            Op::Reserve => "reserve",
            Op::Enter => "enter",
            Op::Send => "send",
            Op::Execute => "execute",
            Op::Settle => "settle",
            Op::Adopt => "adopt",
            Op::Reconcile => "reconcile",
            Op::Release => "release",
            Op::Rebind => "rebind",
            Op::Remedy => "remedy",
            Op::State => "state",
            Op::Lane => "lane",
            Op::Submit => "submit",
            Op::Claim => "claim",
            Op::Link => "link",
            Op::Recover => "recover",
            Op::ResolveUnknown => "resolve_unknown",
            Op::Finish => "finish",
            Op::Admission => "admission",
            Op::LeaseRefresh => "lease_refresh",
            Op::LeaseRelease => "lease_release",
            Op::Import => "import",
            Op::AadpExpire => "aadp_expire",
            Op::Describe => "describe",
            Op::Invoke => "invoke",
            Op::Delegate => "delegate",
            Op::Cancel => "cancel",
            Op::Binding => "binding",
            Op::Manifest => "manifest",
            Op::Policy => "policy",
            Op::WorkflowValidate => "workflow_validate",
            Op::WorkflowStart => "workflow_start",
            Op::WorkflowResume => "workflow_resume",
            Op::WorkflowAnswer => "workflow_answer",
        }
    }

    pub fn parse(s: &str) -> Option<Op> {
        Op::ALL.into_iter().find(|o| o.name() == s)
    }

    /// The Hermes operator operations: answered concurrently (a `cancel` must reach the connector
    /// while the `invoke` it cancels is still waiting for its run).
    pub fn is_operator(self) -> bool {
        matches!(
            self,
            Op::Invoke | Op::Delegate | Op::Cancel | Op::Binding | Op::Manifest | Op::Policy
        )
    }
}

impl std::fmt::Display for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One request from aocheck (everything but `init`), with its typed fields.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// Join the lane as its first holder. Ok: [`reply::Generation`].
    Join,
    /// Replace the lane's holder (dead or merely retired). Ok: [`reply::Generation`].
    Takeover,
    /// Create (or find, by the creation key) an occurrence (AOC-REQ-002). Ok:
    /// [`reply::Occurrence`].
    Create {
        key: String,
        amount: i64,
        /// A fake-payments outcome script.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        simulate: Option<String>,
        /// Caller-selected labels (retry, task, grant, action, AADP and BCR ids).
        #[serde(default, skip_serializing_if = "CreateLabels::is_empty")]
        labels: CreateLabels,
    },
    Reserve {
        occurrence: OccurrenceId,
        amount: u64,
    },
    /// Serialized provider entry, before any request leaves.
    Enter {
        occurrence: OccurrenceId,
    },
    /// Send the entered attempt's request; with `background`, answer at once and record later
    /// (in this process: it dies with it).
    Send {
        occurrence: OccurrenceId,
        background: bool,
    },
    /// `enter`, then `send`.
    Execute {
        occurrence: OccurrenceId,
    },
    /// Wait for this process's background sends.
    Settle,
    /// A successor takes ownership of an occurrence (AOC-REQ-005).
    Adopt {
        occurrence: OccurrenceId,
    },
    /// Ask the status source and record the answer.
    Reconcile {
        occurrence: OccurrenceId,
    },
    /// Pre-entry release with a tombstone.
    Release {
        occurrence: OccurrenceId,
        reason: ReleaseReason,
    },
    /// AADP's no-report expiry of the permit composed with this occurrence (§5): the PDP appended
    /// its expiry and released its own permit reservation.
    AadpExpire {
        occurrence: OccurrenceId,
    },
    /// An attempt to change one bound field (cases expect a refusal).
    Rebind {
        occurrence: OccurrenceId,
        field: String,
        value: String,
    },
    /// Ok: [`reply::Occurrence`], the remedy occurrence, linked.
    Remedy {
        occurrence: OccurrenceId,
        /// What the remedy is: the draft requires the same of every kind.
        kind: RemedyKind,
        authorization: String,
    },
    /// Ok: [`reply::State`].
    State {
        occurrence: OccurrenceId,
    },
    /// Ok: [`reply::Generation`], `null` when nobody holds the lane.
    Lane,
    /// A client submission (seed 003 admission). Ok: [`reply::Admitted`].
    Submit {
        key: String,
    },
    /// Ok: [`reply::Admitted`], `null` when nothing is waiting.
    Claim,
    Link {
        admission: AdmissionId,
        occurrence: OccurrenceId,
    },
    /// Started admissions become unknown. Ok: [`reply::Recovered`].
    Recover,
    ResolveUnknown {
        admission: AdmissionId,
    },
    Finish {
        admission: AdmissionId,
        end: AdmissionEnd,
    },
    /// Ok: the admission (aocheck's `Admission` JSON).
    Admission {
        admission: AdmissionId,
    },
    LeaseRefresh,
    LeaseRelease,
    /// Cross-domain import (cases expect a refusal).
    Import,
    /// Ok: [`reply::Describe`].
    Describe,
    /// Ok: the operator result `{action_id, status, output, error}`.
    Invoke {
        action: Action,
    },
    /// Ok: as `invoke`.
    Delegate {
        request: DelegationRequest,
        aip_records: Vec<AipRecord>,
    },
    /// Ok: the binding after cancellation reconciliation.
    Cancel {
        action_id: String,
    },
    /// Ok: [`reply::Binding`] or `null`.
    Binding {
        action_id: String,
    },
    /// Ok: the capability manifest.
    Manifest,
    /// Ok: `{}` when the implementation accepts the policy; otherwise the connector's error.
    /// Carried as JSON: a policy the implementation cannot even parse is its answer to judge.
    Policy {
        policy: Value,
    },
    /// Seed 002's rulebook over a designer graph. Ok: [`reply::Defects`]. Carried as JSON: a
    /// graph of any shape is the validator's to judge.
    WorkflowValidate {
        graph: Value,
    },
    /// Saves design `name` and starts run `run_id` of it, driving it until it parks or ends.
    /// Ok: [`reply::WorkflowState`].
    WorkflowStart {
        name: String,
        design: Value,
        run_id: String,
    },
    /// Resumes run `run_id` from its saved state, driving it until it parks or ends. Ok:
    /// [`reply::WorkflowState`]; a missing run is the failure `missing`, a corrupt one
    /// `corrupt` (naming the run).
    WorkflowResume {
        run_id: String,
    },
    /// Answers the step run `run_id` waits for (an approval's choice or an agent step's result)
    /// and drives the run on. Ok: [`reply::WorkflowState`]; a run that waits for something else
    /// is the failure `not_waiting`.
    WorkflowAnswer {
        run_id: String,
        node: String,
        answer: Value,
    },
}

impl Request {
    pub fn op(&self) -> Op {
        match self {
            Request::Join => Op::Join,
            Request::Takeover => Op::Takeover,
            Request::Create { .. } => Op::Create,
            Request::Reserve { .. } => Op::Reserve,
            Request::Enter { .. } => Op::Enter,
            Request::Send { .. } => Op::Send,
            Request::Execute { .. } => Op::Execute,
            Request::Settle => Op::Settle,
            Request::Adopt { .. } => Op::Adopt,
            Request::Reconcile { .. } => Op::Reconcile,
            Request::Release { .. } => Op::Release,
            Request::AadpExpire { .. } => Op::AadpExpire,
            Request::Rebind { .. } => Op::Rebind,
            Request::Remedy { .. } => Op::Remedy,
            Request::State { .. } => Op::State,
            Request::Lane => Op::Lane,
            Request::Submit { .. } => Op::Submit,
            Request::Claim => Op::Claim,
            Request::Link { .. } => Op::Link,
            Request::Recover => Op::Recover,
            Request::ResolveUnknown { .. } => Op::ResolveUnknown,
            Request::Finish { .. } => Op::Finish,
            Request::Admission { .. } => Op::Admission,
            Request::LeaseRefresh => Op::LeaseRefresh,
            Request::LeaseRelease => Op::LeaseRelease,
            Request::Import => Op::Import,
            Request::Describe => Op::Describe,
            Request::Invoke { .. } => Op::Invoke,
            Request::Delegate { .. } => Op::Delegate,
            Request::Cancel { .. } => Op::Cancel,
            Request::Binding { .. } => Op::Binding,
            Request::Manifest => Op::Manifest,
            Request::Policy { .. } => Op::Policy,
            Request::WorkflowValidate { .. } => Op::WorkflowValidate,
            Request::WorkflowStart { .. } => Op::WorkflowStart,
            Request::WorkflowResume { .. } => Op::WorkflowResume,
            Request::WorkflowAnswer { .. } => Op::WorkflowAnswer,
        }
    }

    /// The request's fields, without `op` (what the framing layer sends beside `id` and `now`).
    pub fn fields(&self) -> Map<String, Value> {
        match serde_json::to_value(self) {
            Ok(Value::Object(mut m)) => {
                m.remove("op");
                m
            }
            // Every variant is a struct or unit variant of an internally tagged enum: an object.
            _ => Map::new(),
        }
    }
}

/// One request line: `id`, the case clock `now`, and the request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    pub id: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub now: Option<u64>,
    #[serde(flatten)]
    pub request: Request,
}

/// Why a request line could not be taken as a request.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("not a request ({0})")]
    NoId(String),
    #[error("operation {op:?} is not implemented")]
    Unsupported { id: u64, op: String },
    #[error("`{op}`: {reason}")]
    Invalid { id: u64, op: String, reason: String },
}

/// What a line from aocheck is: the handshake or a request.
#[derive(Debug)]
pub enum Incoming {
    Init { id: u64, init: Box<Init> },
    Request(Box<Envelope>),
}

/// Decodes one request line. An unknown operation is `Unsupported`; a known one whose fields do
/// not fit its type is `Invalid`, naming the field serde could not take.
pub fn decode(line: &[u8]) -> Result<Incoming, DecodeError> {
    let v: Value = serde_json::from_slice(line).map_err(|e| DecodeError::NoId(e.to_string()))?;
    let id = v
        .get("id")
        .and_then(Value::as_u64)
        .ok_or_else(|| DecodeError::NoId("`id` must be a positive integer".into()))?;
    let op = v
        .get("op")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if op == "init" {
        let mut m = match v {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        m.remove("id");
        m.remove("op");
        return serde_json::from_value::<Init>(Value::Object(m))
            .map(|init| Incoming::Init {
                id,
                init: Box::new(init),
            })
            .map_err(|e| DecodeError::Invalid {
                id,
                op,
                reason: e.to_string(),
            });
    }
    if Op::parse(&op).is_none() {
        return Err(DecodeError::Unsupported { id, op });
    }
    serde_json::from_value::<Envelope>(v)
        .map(|e| Incoming::Request(Box::new(e)))
        .map_err(|e| DecodeError::Invalid {
            id,
            op,
            reason: e.to_string(),
        })
}

/// One record AIP holds that the connector consults (approval, queue entry, lifecycle entry).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AipRecord {
    pub namespace: String,
    pub key: String,
    pub value: Value,
}

/// The handshake: the first message to every process.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Init {
    pub protocol: String,
    pub executor: ExecutorInit,
    pub store: StoreInit,
    pub providers: Providers,
    pub limits: Limits,
    #[serde(default)]
    pub domain: DomainInit,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator: Option<OperatorInit>,
    /// A Hermes Workflow runner's process (seed 002): where it keeps designs and runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<WorkflowInit>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub case: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub now: Option<u64>,
}

impl Init {
    /// A case's `init`, before it names an executor (the observer's name until then).
    pub fn for_case(
        store: StoreInit,
        case: &str,
        payments: PaymentsInit,
        limits: Limits,
        domain: DomainInit,
        seed: u64,
    ) -> Init {
        Init {
            protocol: PROTOCOL.into(),
            executor: ExecutorInit {
                name: "aocheck-observer".into(),
                generation: None,
                credential: None,
            },
            store,
            providers: Providers {
                payments: Some(payments),
                hermes: None,
                channel: None,
            },
            limits,
            domain,
            operator: None,
            workflow: None,
            case: Some(case.into()),
            seed: Some(seed),
            now: None,
        }
    }
}

impl Init {
    /// A workflow runner's `init` (seed 002): its home and a store file in `dir`, no payment
    /// provider; the caller adds `providers.hermes` and `providers.channel` where the runner
    /// drives a run.
    pub fn for_workflow(
        dir: &std::path::Path,
        home: &std::path::Path,
        case: &str,
        seed: u64,
    ) -> Init {
        Init {
            protocol: PROTOCOL.into(),
            executor: ExecutorInit {
                name: "aocheck-observer".into(),
                generation: None,
                credential: None,
            },
            store: StoreInit::Sqlite {
                path: dir.join("store.db").display().to_string(),
            },
            providers: Providers {
                payments: None,
                hermes: None,
                channel: None,
            },
            limits: Limits {
                max_pending: 1,
                max_in_flight: 1,
            },
            domain: DomainInit::default(),
            operator: None,
            workflow: Some(WorkflowInit {
                home: home.display().to_string(),
            }),
            case: Some(case.into()),
            seed: Some(seed),
            now: None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecutorInit {
    pub name: String,
    /// The number of the process within the case (informative only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<u64>,
    /// A secret unique to this process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum StoreInit {
    Sqlite {
        path: String,
    },
    Postgres {
        url: String,
    },
    /// The in-process reference shares the harness's store handle; never on the wire.
    #[serde(skip)]
    InProcess,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Providers {
    /// fake-payments (every AOC case; a workflow runner's process has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payments: Option<PaymentsInit>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hermes: Option<HermesInit>,
    /// The simulated delivery channel (workflow cases): `POST {base_url}/v1/deliveries`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<ChannelInit>,
}

/// Where a workflow runner delivers its outputs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChannelInit {
    pub base_url: String,
}

/// A workflow runner's home (seed 002's `$HERMES_HOME`): designs at
/// `{home}/workflow-designs/<name>.json`, runs at `{home}/workflow-runs/<run_id>.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkflowInit {
    pub home: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaymentsInit {
    pub base_url: String,
    pub account: String,
    pub api_key: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HermesInit {
    pub base_url: String,
    pub api_key: String,
    pub endpoint_id: String,
    /// The harness's clock (`{url, token}`): a connector that moves its timers by it lets a
    /// case that waits for a TTL jump instead of sleeping.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<ClockInit>,
}

/// Where the harness's clock is served (`GET {url}/now`, `POST {url}/sleep {"ms"}`, Bearer
/// `token`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClockInit {
    pub url: String,
    pub token: String,
}

/// The operator connector's configuration (Hermes cases).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct OperatorInit {
    /// The connector policy (`src/operator/policy.rs`), as JSON: the implementation validates it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    #[serde(default)]
    pub resolver: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct DomainInit {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default)]
    pub bypass_paths: Vec<BypassPath>,
    #[serde(default)]
    pub aadp: AadpAccounting,
    #[serde(default)]
    pub action_fence: bool,
}

pub use crate::vocab::RemedyKind;

pub use crate::vocab::CreateLabels;

/// The currency of every `create`'s amount (minor units): the protocol's, not the
/// implementation's choice (docs/sut-protocol.md).
pub const CURRENCY: &str = "eur";

/// What the implementation says about itself in answer to `init`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    pub protocol: String,
    pub name: String,
    pub version: String,
    /// Names, not [`Op`]s: an implementation may list operations this aocheck does not know.
    pub operations: Vec<String>,
    /// How the implementation derives the provider's Idempotency-Key from an occurrence id: a
    /// template with one `{occurrence}` (`crate::check::accounting::KeyRule`). Every effect and
    /// create request in the provider's ledger is attributed by it; the harness never assumes one.
    pub key_rule: String,
    /// What the implementation states about itself (its conformance statement, in its words).
    /// Every claim is checked in every case against AOC-REQ-013's prohibited claims.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub claims: Vec<String>,
    /// What the implementation states about itself as data (`check::statements`): a closed
    /// vocabulary, each statement judged exactly in every case.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub statements: Vec<crate::check::statements::Statement>,
    /// `"driven"`: the implementation's timers move by the harness's clock when `init` gives
    /// one. Otherwise the harness's clock follows real time for the case.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<String>,
    /// AOC §7: "a same-team model or runner MUST be labeled as such". Declared by the
    /// implementation (true when the authors of its tests wrote it too), never inferred from its
    /// name.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub same_team: bool,
}

impl Hello {
    /// Whether the implementation moves its timers by the harness's clock.
    pub fn driven_clock(&self) -> bool {
        self.clock.as_deref() == Some("driven")
    }

    pub fn supports(&self, op: Op) -> bool {
        self.operations.iter().any(|o| o == op.name())
    }
}

/// The typed ok results.
pub mod reply {
    use super::*;

    /// `join`, `takeover`, `lane`.
    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    pub struct Generation {
        pub generation: Option<u64>,
    }

    /// `create`, `remedy`.
    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    pub struct Occurrence {
        pub occurrence: OccurrenceId,
    }

    /// `submit` (never `null`), `claim`.
    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    pub struct Admitted {
        pub admission: Option<AdmissionId>,
    }

    /// `recover`.
    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    pub struct Recovered {
        pub count: u64,
    }

    /// `state`: the occurrence's history in the evidence envelope and its §7 report.
    pub use crate::check::evidence::StateAnswer as State;

    /// `describe`.
    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    pub struct Describe {
        pub composition: CompositionStatus,
        pub bypass_paths: Vec<BypassPath>,
    }

    /// `binding` (or `null`).
    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    pub struct Binding {
        pub version: u64,
        pub binding: super::Binding,
    }

    /// An operation with nothing to say.
    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
    pub struct Done {}

    /// `workflow_validate`: every defect the rulebook found (empty: the graph is valid).
    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    pub struct Defects {
        pub defects: Vec<crate::workflow::design::Defect>,
    }

    /// `workflow_start`, `workflow_resume`, `workflow_answer`: the run's state as the runner
    /// saved it when it parked or ended. Carried as JSON: a state that is not seed 002's is the
    /// runner's answer to judge.
    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    pub struct WorkflowState {
        pub state: serde_json::Value,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// One request of every operation, every optional field present. The match is exhaustive:
    /// a new [`Op`] does not compile until it has a sample.
    fn sample(op: Op) -> Request {
        let occurrence = OccurrenceId::from_stored("occ_1");
        let admission = AdmissionId::from_stored("adm_1");
        match op {
            Op::Join => Request::Join,
            Op::Takeover => Request::Takeover,
            Op::Create => Request::Create {
                key: "k".into(),
                amount: 1250,
                simulate: Some("pending,succeeded".into()),
                labels: CreateLabels {
                    retry_id: Some("r1".into()),
                    task_id: Some("t1".into()),
                    grant_id: Some("g1".into()),
                    action: Some("pay-invoice-7".into()),
                    aadp_request_id: Some("a1".into()),
                    bcr_operation_id: Some("b1".into()),
                },
            },
            Op::Reserve => Request::Reserve {
                occurrence,
                amount: 1250,
            },
            Op::Enter => Request::Enter { occurrence },
            Op::Send => Request::Send {
                occurrence,
                background: true,
            },
            Op::Execute => Request::Execute { occurrence },
            Op::Settle => Request::Settle,
            Op::Adopt => Request::Adopt { occurrence },
            Op::Reconcile => Request::Reconcile { occurrence },
            Op::Release => Request::Release {
                occurrence,
                reason: ReleaseReason::OwnerAbandoned,
            },
            Op::AadpExpire => Request::AadpExpire { occurrence },
            Op::Rebind => Request::Rebind {
                occurrence,
                field: "account".into(),
                value: "acct_b".into(),
            },
            Op::Remedy => Request::Remedy {
                occurrence,
                kind: RemedyKind::Refund,
                authorization: "auth_1".into(),
            },
            Op::State => Request::State { occurrence },
            Op::Lane => Request::Lane,
            Op::Submit => Request::Submit { key: "s1".into() },
            Op::Claim => Request::Claim,
            Op::Link => Request::Link {
                admission,
                occurrence,
            },
            Op::Recover => Request::Recover,
            Op::ResolveUnknown => Request::ResolveUnknown { admission },
            Op::Finish => Request::Finish {
                admission,
                end: AdmissionEnd::Completed,
            },
            Op::Admission => Request::Admission { admission },
            Op::LeaseRefresh => Request::LeaseRefresh,
            Op::LeaseRelease => Request::LeaseRelease,
            Op::Import => Request::Import,
            Op::Describe => Request::Describe,
            Op::Invoke => Request::Invoke {
                action: Action {
                    id: "act_1".into(),
                    idempotency_key: "k1".into(),
                    capability: "hermes.run".into(),
                    input: serde_json::json!({"objective": "hi"}),
                    deadline_ms: None,
                    identity: None,
                    approval: None,
                    delegation: None,
                },
            },
            Op::Delegate => Request::Delegate {
                request: DelegationRequest {
                    delegation_id: "del_1".into(),
                    parent_action_id: "act_1".into(),
                    requested_by: "agent_a".into(),
                    delegate: "hermes".into(),
                    scope: vec!["hermes.run".into()],
                    delegation_chain: vec![],
                    child: serde_json::json!({"id": "act_2", "capability": "hermes.run"}),
                },
                aip_records: vec![AipRecord {
                    namespace: "aip.approvals.v1".into(),
                    key: "k".into(),
                    value: serde_json::json!({}),
                }],
            },
            Op::Cancel => Request::Cancel {
                action_id: "act_1".into(),
            },
            Op::Binding => Request::Binding {
                action_id: "act_1".into(),
            },
            Op::Manifest => Request::Manifest,
            Op::Policy => Request::Policy {
                policy: serde_json::json!({}),
            },
            Op::WorkflowValidate => Request::WorkflowValidate {
                graph: serde_json::json!({"nodes": []}),
            },
            Op::WorkflowStart => Request::WorkflowStart {
                name: "case".into(),
                design: serde_json::json!({"nodes": []}),
                run_id: "abc123".into(),
            },
            Op::WorkflowResume => Request::WorkflowResume {
                run_id: "abc123".into(),
            },
            Op::WorkflowAnswer => Request::WorkflowAnswer {
                run_id: "abc123".into(),
                node: "ok".into(),
                answer: serde_json::json!("approve"),
            },
        }
    }

    #[test]
    fn every_operation_has_one_variant_that_names_it_on_the_wire() {
        let mut seen = BTreeSet::new();
        for op in Op::ALL {
            let r = sample(op);
            assert_eq!(r.op(), op);
            let v = serde_json::to_value(&r).expect("json");
            assert_eq!(v["op"], op.name(), "{v}");
            assert_eq!(Op::parse(op.name()), Some(op));
            assert_eq!(serde_json::to_value(op).expect("json"), op.name());
            assert!(seen.insert(op.name()), "{op} twice");
        }
    }

    #[test]
    fn a_request_line_decodes_to_the_request_it_encodes() {
        for op in Op::ALL {
            let r = sample(op);
            let mut m = r.fields();
            m.insert("id".into(), 7.into());
            m.insert("now".into(), 1_796_000_000_000u64.into());
            m.insert("op".into(), op.name().into());
            let line = serde_json::to_vec(&m).expect("json");
            match decode(&line) {
                Ok(Incoming::Request(env)) => {
                    assert_eq!(env.id, 7);
                    assert_eq!(env.now, Some(1_796_000_000_000));
                    assert_eq!(env.request, r);
                }
                other => panic!("{op}: {other:?}"),
            }
        }
    }

    #[test]
    fn undecodable_requests_say_which_operation_and_field() {
        match decode(br#"{"id":3,"op":"teleport"}"#) {
            Err(DecodeError::Unsupported { id: 3, op }) => assert_eq!(op, "teleport"),
            other => panic!("{other:?}"),
        }
        match decode(br#"{"id":4,"op":"reserve","occurrence":"o"}"#) {
            Err(DecodeError::Invalid { id: 4, op, reason }) => {
                assert_eq!(op, "reserve");
                assert!(reason.contains("amount"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        match decode(br#"{"id":5,"op":"release","occurrence":"o","reason":"bored"}"#) {
            Err(DecodeError::Invalid { reason, .. }) => assert!(reason.contains("bored")),
            other => panic!("{other:?}"),
        }
        assert!(matches!(decode(b"{}"), Err(DecodeError::NoId(_))));
        assert!(matches!(decode(b"nope"), Err(DecodeError::NoId(_))));
    }

    /// The backticked names in a table cell, outside parentheses, `?` (optional) stripped.
    fn names(cell: &str) -> BTreeSet<String> {
        let mut depth = 0usize;
        let mut outside = String::new();
        for ch in cell.chars() {
            match ch {
                '(' => depth += 1,
                ')' => depth = depth.saturating_sub(1),
                c if depth == 0 => outside.push(c),
                _ => {}
            }
        }
        outside
            .split('`')
            .skip(1)
            .step_by(2)
            .map(|n| n.trim_end_matches('?').to_string())
            .collect()
    }

    /// `docs/sut-protocol.md`'s operation tables list exactly these operations, each with
    /// exactly the fields its variant carries.
    #[test]
    fn the_specification_lists_exactly_these_operations_and_fields() {
        let spec = include_str!("../../docs/sut-protocol.md");
        let mut listed = BTreeSet::new();
        let mut in_table = false;
        for line in spec.lines() {
            if line.starts_with("| op |") {
                in_table = true;
                continue;
            }
            if !line.starts_with('|') {
                in_table = false;
                continue;
            }
            if !in_table || line.starts_with("|---") {
                continue;
            }
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let (ops, fields) = (names(cells[1]), names(cells[2]));
            for name in ops {
                let op = Op::parse(&name)
                    .unwrap_or_else(|| panic!("the specification lists `{name}`, no type has it"));
                let have: BTreeSet<String> = sample(op).fields().keys().cloned().collect();
                assert_eq!(have, fields, "`{name}`: the specification's request fields");
                listed.insert(op);
            }
        }
        let all: BTreeSet<Op> = Op::ALL.into();
        let missing: Vec<&str> = all.difference(&listed).map(|o| o.name()).collect();
        assert!(missing.is_empty(), "not in the specification: {missing:?}");
    }

    #[test]
    fn init_round_trips_and_refuses_unknown_fields() {
        let init = Init {
            protocol: PROTOCOL.into(),
            executor: ExecutorInit {
                name: "e1".into(),
                generation: Some(1),
                credential: Some("cred_x".into()),
            },
            store: StoreInit::Postgres {
                url: "postgres://x".into(),
            },
            providers: Providers {
                payments: Some(PaymentsInit {
                    base_url: "http://127.0.0.1:1".into(),
                    account: "acct_a".into(),
                    api_key: "sk".into(),
                }),
                channel: Some(ChannelInit {
                    base_url: "http://127.0.0.1:3".into(),
                }),
                hermes: Some(HermesInit {
                    base_url: "http://127.0.0.1:2".into(),
                    api_key: "hk".into(),
                    endpoint_id: "primary".into(),
                    clock: Some(ClockInit {
                        url: "http://127.0.0.1:2/_aocheck/clock".into(),
                        token: "t".into(),
                    }),
                }),
            },
            limits: Limits {
                max_pending: 16,
                max_in_flight: 16,
            },
            domain: DomainInit::default(),
            operator: Some(OperatorInit::default()),
            workflow: Some(WorkflowInit {
                home: "/tmp/home".into(),
            }),
            case: Some("AOC-CASE-001".into()),
            seed: Some(7),
            now: Some(1),
        };
        let mut v = serde_json::to_value(&init).expect("json");
        v["id"] = 1.into();
        v["op"] = "init".into();
        let line = serde_json::to_vec(&v).expect("json");
        match decode(&line) {
            Ok(Incoming::Init { id: 1, init: got }) => assert_eq!(*got, init),
            other => panic!("{other:?}"),
        }
        v["colour"] = "blue".into();
        let line = serde_json::to_vec(&v).expect("json");
        match decode(&line) {
            Err(DecodeError::Invalid { reason, .. }) => assert!(reason.contains("colour")),
            other => panic!("{other:?}"),
        }
    }
}
