//! The case model: what a case file says (YAML, `deny_unknown_fields`), as read.

use crate::aoc::composition::{AadpAccounting, BypassPath};
use crate::aoc::domain::Limits;
use crate::aoc::requirement::Req;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// What a step must produce: `ok`, `refused`, `refused AOC-REQ-00N`, or `any`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(transparent)]
pub struct Expect(pub Option<String>);

/// A parsed expectation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expected {
    Ok,
    Refused(Option<Req>),
    Any,
}

impl Expect {
    /// No expectation written (the step's default).
    pub fn is_unset(&self) -> bool {
        self.0.is_none()
    }

    /// `any`: the answer is not judged by its form, only by the invariants.
    pub fn is_any(&self) -> bool {
        matches!(self.parse(), Ok(Expected::Any))
    }

    pub fn parse(&self) -> Result<Expected, String> {
        let Some(s) = &self.0 else {
            return Ok(Expected::Ok);
        };
        let t = s.trim();
        match t {
            "ok" => Ok(Expected::Ok),
            "any" => Ok(Expected::Any),
            "refused" => Ok(Expected::Refused(None)),
            _ => match t.strip_prefix("refused ") {
                Some(r) => Req::parse(r)
                    .map(|q| Expected::Refused(Some(q)))
                    .ok_or_else(|| {
                        format!("{r:?} is not a requirement id (AOC-REQ-001 … AOC-REQ-013)")
                    }),
                None => Err(format!(
                    "{t:?}: use ok, any, refused, or refused AOC-REQ-00N"
                )),
            },
        }
    }
}

/// One step. `executor` defaults to the lane's current executor (the last one that joined or
/// replaced).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "do", rename_all = "snake_case", deny_unknown_fields)]
pub enum Step {
    Join {
        executor: String,
        #[serde(default)]
        expect: Expect,
    },
    Replace {
        executor: String,
        #[serde(default)]
        expect: Expect,
    },
    Crash {
        executor: String,
        /// Kill only once a request is parked at this provider hold (crash during the request).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at_hold: Option<String>,
        #[serde(default)]
        expect: Expect,
    },
    Create {
        occurrence: String,
        #[serde(default)]
        executor: Option<String>,
        #[serde(default)]
        key: Option<String>,
        #[serde(default)]
        amount: Option<i64>,
        #[serde(default)]
        simulate: Option<String>,
        /// Caller-selected labels sent with the creation (AOC-REQ-002: alone, they never
        /// create an occurrence).
        #[serde(default)]
        labels: crate::vocab::CreateLabels,
        #[serde(default)]
        expect: Expect,
    },
    Reserve {
        occurrence: String,
        #[serde(default)]
        executor: Option<String>,
        #[serde(default)]
        expect: Expect,
    },
    Enter {
        occurrence: String,
        #[serde(default)]
        executor: Option<String>,
        #[serde(default)]
        expect: Expect,
    },
    Send {
        occurrence: String,
        #[serde(default)]
        executor: Option<String>,
        #[serde(default)]
        background: bool,
        #[serde(default)]
        expect: Expect,
    },
    Execute {
        occurrence: String,
        #[serde(default)]
        executor: Option<String>,
        #[serde(default)]
        expect: Expect,
    },
    Settle {
        #[serde(default)]
        expect: Expect,
    },
    Adopt {
        occurrence: String,
        #[serde(default)]
        executor: Option<String>,
        #[serde(default)]
        expect: Expect,
    },
    Reconcile {
        occurrence: String,
        #[serde(default)]
        executor: Option<String>,
        #[serde(default)]
        expect: Expect,
    },
    /// AADP's no-report expiry of the permit composed with the occurrence (AOC §5). Whatever
    /// the answer, an entered or released occurrence must be left exactly as it was.
    AadpExpire {
        occurrence: String,
        #[serde(default)]
        executor: Option<String>,
        #[serde(default)]
        expect: Expect,
    },
    Release {
        occurrence: String,
        #[serde(default)]
        executor: Option<String>,
        #[serde(default)]
        reason: Option<String>,
        #[serde(default)]
        expect: Expect,
    },
    Rebind {
        occurrence: String,
        field: String,
        value: String,
        #[serde(default)]
        executor: Option<String>,
        #[serde(default)]
        expect: Expect,
    },
    Remedy {
        occurrence: String,
        remedy: String,
        /// `refund` (the default), `reversal`, `compensation`, `adjustment`,
        /// `replacement_attempt` or `new_allocation`.
        #[serde(default)]
        kind: crate::vocab::RemedyKind,
        authorization: String,
        #[serde(default)]
        executor: Option<String>,
        #[serde(default)]
        expect: Expect,
    },
    /// Adds a fault rule to the provider (GUIDE §5 vocabulary).
    ProviderFault {
        op: provider_model::payments::faults::Op,
        fault: provider_model::payments::faults::Fault,
        #[serde(default)]
        nth: Option<u32>,
        #[serde(default)]
        times: Option<u32>,
    },
    /// Waits until a held provider request is parked, then releases it.
    ProviderRelease {
        hold: String,
        #[serde(default)]
        reject: Option<u16>,
        /// Let the held request proceed, then answer with a forged tag (a late response that
        /// does not authenticate).
        #[serde(default)]
        forged: bool,
        /// Let the held request proceed, then answer with a reply the provider really signed,
        /// but for another account (a late response about another binding).
        #[serde(default)]
        mismatched: bool,
    },
    /// The provider's own status change (settlement, dispute).
    ProviderStatus {
        occurrence: String,
        status: String,
    },
    /// Moves an occurrence's payment (or every payment) beyond the provider's retention.
    ProviderExpire {
        #[serde(default)]
        occurrence: Option<String>,
    },
    /// Moves the domain's clock forward.
    Advance {
        ms: u64,
    },
    Submit {
        submission: String,
        #[serde(default)]
        expect: Expect,
    },
    Claim {
        submission: String,
        #[serde(default)]
        executor: Option<String>,
        #[serde(default)]
        expect: Expect,
    },
    Link {
        submission: String,
        occurrence: String,
        #[serde(default)]
        executor: Option<String>,
        #[serde(default)]
        expect: Expect,
    },
    Recover {
        #[serde(default)]
        executor: Option<String>,
        #[serde(default)]
        expect: Expect,
    },
    ResolveUnknown {
        submission: String,
        #[serde(default)]
        executor: Option<String>,
        #[serde(default)]
        expect: Expect,
    },
    Finish {
        submission: String,
        end: String,
        #[serde(default)]
        executor: Option<String>,
        #[serde(default)]
        expect: Expect,
    },
    LeaseRefresh {
        executor: String,
        #[serde(default)]
        expect: Expect,
    },
    LeaseRelease {
        executor: String,
        #[serde(default)]
        expect: Expect,
    },
    /// Asks the domain to import an occurrence record from another domain (AOC-REQ-013).
    Import {
        #[serde(default)]
        expect: Expect,
    },
    /// Invokes the Hermes operator capability for an Action: an objective, or a resume of
    /// another Action's run. `result` / `error` state what it must return.
    OperatorInvoke {
        action: String,
        #[serde(default)]
        objective: Option<String>,
        #[serde(default)]
        resume: Option<String>,
        #[serde(default)]
        choice: Option<String>,
        /// The connector process (instance) that invokes; default `p1`.
        #[serde(default)]
        instance: Option<String>,
        #[serde(default)]
        background: bool,
        /// `completed`, `failed`, `cancelled` or `requires_human`.
        #[serde(default)]
        result: Option<String>,
        /// A failure code suffix, e.g. `operator_outcome_unknown`.
        #[serde(default)]
        error: Option<String>,
        /// `any`: whatever the connector answers is not judged by its form (a schedule of the
        /// explorer, D65); what it did is judged by the invariants as always. Without it, the
        /// answer must be `result` / `error`, or a success.
        #[serde(default, skip_serializing_if = "Expect::is_unset")]
        expect: Expect,
    },
    /// Cancels an Action's run; `status` is the binding status it must end in.
    OperatorCancel {
        action: String,
        #[serde(default)]
        instance: Option<String>,
        #[serde(default)]
        status: Option<String>,
        /// `any`: a failed cancel is not a finding by itself (as for `operator_invoke`).
        #[serde(default, skip_serializing_if = "Expect::is_unset")]
        expect: Expect,
    },
    /// Replaces the operator policy (overlaid on the harness's fast defaults) and the resolver's
    /// tenant; every connector is rebuilt. `error` expects the policy to be refused.
    OperatorConfigure {
        #[serde(default)]
        policy: serde_json::Map<String, serde_json::Value>,
        #[serde(default)]
        tenant: Option<String>,
        /// `false` runs without a delegated-result resolver.
        #[serde(default = "yes")]
        resolver: bool,
        #[serde(default)]
        error: Option<String>,
    },
    /// Sends a native DelegationRequest for a child Action (`action`) to the operator. `approval`
    /// and `child` say what the durable approval store and the AIP queue/lifecycle hold.
    OperatorDelegate {
        action: String,
        #[serde(default)]
        capability: Option<String>,
        #[serde(default)]
        scope: Option<Vec<String>>,
        /// Length of the delegation chain so far; default 1.
        #[serde(default)]
        chain: Option<u32>,
        /// `approved` (default), `none`, `unstored`, `expired` or `other_action`.
        #[serde(default)]
        approval: Option<String>,
        /// What AIP's queue and lifecycle show: `ran` (default), `never`, `altered_contract`,
        /// `forged_owner`, `identity_drift`, `tenant_drift` or `stores_disagree`.
        #[serde(default)]
        child: Option<String>,
        #[serde(default)]
        instance: Option<String>,
        #[serde(default)]
        result: Option<String>,
        #[serde(default)]
        error: Option<String>,
        /// `any`: as for `operator_invoke`.
        #[serde(default, skip_serializing_if = "Expect::is_unset")]
        expect: Expect,
    },
    /// Kills every connector process and reopens the store on a fresh handle: every binding must
    /// be there, unchanged, and later steps run on the reopened store. On the memory store, which
    /// claims no durability, the case is `unsupported`.
    OperatorDurability {},
    /// Compares the connector's published manifest with the contract seed 000 pins.
    OperatorManifest {},
    /// Waits until the Action's binding has a run id bound.
    OperatorWaitBound {
        action: String,
    },
    /// Waits for every background invocation.
    OperatorSettle {},
    /// Kills a connector process: its in-flight invocations stop where they are.
    OperatorKill {
        instance: String,
    },
    HermesFault {
        route: provider_model::hermes::faults::Route,
        fault: provider_model::hermes::faults::Fault,
        #[serde(default)]
        nth: Option<u32>,
        #[serde(default)]
        times: Option<u32>,
    },
    /// Sets the script every run gets.
    HermesScript {
        script: serde_json::Value,
    },
    HermesWaitParked {
        hold: String,
    },
    HermesRelease {
        hold: String,
        #[serde(default)]
        reject: Option<u16>,
    },
    HermesForget {},
    /// Starts a run of a Hermes Workflow design (seed 002) and drives it until it parks or ends,
    /// or until `kill` stops the runner. `status` is the run status it must be left in.
    WorkflowStart {
        design: serde_json::Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kill: Option<WorkflowKill>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status: Option<OneOrMany>,
    },
    /// Resumes the run from its saved state. `error: missing | corrupt`: the resume must be
    /// refused so, naming the run (and start nothing).
    WorkflowResume {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kill: Option<WorkflowKill>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status: Option<OneOrMany>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// Answers the step the run waits for (an approval's choice, or an agent step's result, as
    /// `workflow_design_respond` does), then resumes it.
    WorkflowAnswer {
        node: String,
        answer: serde_json::Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kill: Option<WorkflowKill>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status: Option<OneOrMany>,
    },
    /// Damages the run's saved state (`corrupt`: not JSON; `remove`: no file).
    WorkflowDamage {
        how: String,
    },
    /// Adds a fault rule to the delivery channel.
    ChannelFault {
        fault: crate::providers::channel::ChannelFault,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        nth: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        times: Option<u32>,
    },
    /// Sends its steps at once, each before any answers (AOC-REQ-001: admissions of one
    /// occurrence are serialised by its coordination domain, whatever the order). The steps are
    /// requests to executors that already joined; which of them wins depends on the order, so
    /// they carry no `expect`: the race is judged by the history and the provider's ledger.
    Race {
        steps: Vec<Step>,
    },
}

/// The occurrence field of the steps that act on one, by reference or to change it (`$as` is
/// `as_ref` or `as_mut`, for the one optional field).
macro_rules! occurrence_of {
    ($step:expr, $as:ident) => {{
        use Step::*;
        match $step {
            Reserve { occurrence, .. }
            | Enter { occurrence, .. }
            | Send { occurrence, .. }
            | Execute { occurrence, .. }
            | Adopt { occurrence, .. }
            | Reconcile { occurrence, .. }
            | AadpExpire { occurrence, .. }
            | Release { occurrence, .. }
            | Rebind { occurrence, .. }
            | Remedy { occurrence, .. }
            | Link { occurrence, .. }
            | ProviderStatus { occurrence, .. } => Some(occurrence),
            ProviderExpire { occurrence } => occurrence.$as(),
            _ => None,
        }
    }};
}

impl Step {
    /// The fake-payments rule a `provider_fault` step declares (one place for its defaults).
    pub fn payments_rule(&self) -> Option<provider_model::payments::faults::Rule> {
        let Step::ProviderFault {
            op,
            fault,
            nth,
            times,
        } = self
        else {
            return None;
        };
        Some(provider_model::payments::faults::Rule {
            op: *op,
            nth: nth.unwrap_or(1),
            times: times.unwrap_or(1),
            account: None,
            key: None,
            fault: fault.clone(),
        })
    }

    /// The fake-hermes rule a `hermes_fault` step declares.
    pub fn hermes_rule(&self) -> Option<provider_model::hermes::faults::Rule> {
        let Step::HermesFault {
            route,
            fault,
            nth,
            times,
        } = self
        else {
            return None;
        };
        Some(provider_model::hermes::faults::Rule {
            route: *route,
            nth: nth.unwrap_or(1),
            times: times.unwrap_or(1),
            session_id: None,
            fault: fault.clone(),
        })
    }

    /// The requests a step sends: itself, or each of a race's.
    pub fn requests(&self) -> Vec<&Step> {
        match self {
            Step::Race { steps } => steps.iter().collect(),
            other => vec![other],
        }
    }

    /// The same label, to change it (the explorer's shrinking merges occurrences).
    pub fn occurrence_mut(&mut self) -> Option<&mut String> {
        occurrence_of!(self, as_mut)
    }

    /// The occurrence label a step acts on (not the one a creation or a remedy makes).
    pub fn occurrence(&self) -> Option<&String> {
        occurrence_of!(self, as_ref)
    }

    /// The submission label a step acts on (not the one a `submit` makes).
    pub fn submission(&self) -> Option<&String> {
        use Step::*;
        match self {
            Claim { submission, .. }
            | Link { submission, .. }
            | ResolveUnknown { submission, .. }
            | Finish { submission, .. } => Some(submission),
            _ => None,
        }
    }

    /// The step's executor, when it names one for a step that may leave it implicit.
    pub fn executor_mut(&mut self) -> Option<&mut Option<String>> {
        use Step::*;
        match self {
            Create { executor, .. }
            | Reserve { executor, .. }
            | Enter { executor, .. }
            | Send { executor, .. }
            | Execute { executor, .. }
            | Adopt { executor, .. }
            | Reconcile { executor, .. }
            | AadpExpire { executor, .. }
            | Release { executor, .. }
            | Rebind { executor, .. }
            | Remedy { executor, .. }
            | Claim { executor, .. }
            | Link { executor, .. }
            | Recover { executor, .. }
            | ResolveUnknown { executor, .. }
            | Finish { executor, .. } => Some(executor),
            _ => None,
        }
    }

    pub fn verb(&self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v["do"].as_str().map(str::to_string))
            .unwrap_or_default()
    }
    pub fn expect(&self) -> Option<&Expect> {
        use Step::*;
        match self {
            Join { expect, .. }
            | Replace { expect, .. }
            | Crash { expect, .. }
            | Create { expect, .. }
            | Reserve { expect, .. }
            | Enter { expect, .. }
            | Send { expect, .. }
            | Execute { expect, .. }
            | Settle { expect }
            | Adopt { expect, .. }
            | Reconcile { expect, .. }
            | AadpExpire { expect, .. }
            | Release { expect, .. }
            | Rebind { expect, .. }
            | Remedy { expect, .. }
            | Submit { expect, .. }
            | Claim { expect, .. }
            | Link { expect, .. }
            | Recover { expect, .. }
            | ResolveUnknown { expect, .. }
            | Finish { expect, .. }
            | LeaseRefresh { expect, .. }
            | LeaseRelease { expect, .. }
            | Import { expect } => Some(expect),
            ProviderFault { .. }
            | ProviderRelease { .. }
            | ProviderStatus { .. }
            | ProviderExpire { .. }
            | Advance { .. }
            | OperatorInvoke { .. }
            | OperatorConfigure { .. }
            | OperatorDelegate { .. }
            | OperatorCancel { .. }
            | OperatorWaitBound { .. }
            | OperatorSettle {}
            | OperatorDurability {}
            | OperatorManifest {}
            | OperatorKill { .. }
            | HermesFault { .. }
            | HermesScript { .. }
            | HermesWaitParked { .. }
            | HermesRelease { .. }
            | HermesForget {}
            | WorkflowStart { .. }
            | WorkflowResume { .. }
            | WorkflowAnswer { .. }
            | WorkflowDamage { .. }
            | ChannelFault { .. }
            | Race { .. } => None,
        }
    }

    /// A step of a Hermes Workflow case (`runner::workflow` runs such a case).
    pub fn is_workflow(&self) -> bool {
        matches!(
            self,
            Step::WorkflowStart { .. }
                | Step::WorkflowResume { .. }
                | Step::WorkflowAnswer { .. }
                | Step::WorkflowDamage { .. }
                | Step::ChannelFault { .. }
        )
    }
}

/// Where the harness kills a workflow runner: right after its nth save (counted from 1 in the
/// step), in the middle of its nth save (the run file is as it was; part of the new state is in
/// a temp file), or while a provider holds its request under `hold` (fake-hermes's start of an
/// agent step, or the channel's delivery); the held request then goes on, so its effect is made
/// with nobody left to hear of it. Exactly one of the three.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkflowKill {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub save: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mid_write: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold: Option<String>,
}

/// What a workflow run must look like at the end, read from the state the runner saved and
/// judged against the ledgers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct WorkflowExpect {
    /// `running`, `awaiting_agent`, `awaiting_approval`, `completed` or `failed`; or a list.
    #[serde(default)]
    pub status: Option<OneOrMany>,
    /// The steps skipped, in any order.
    #[serde(default)]
    pub skipped: Option<Vec<String>>,
    /// Output step → how many deliveries the channel took for it (ground truth).
    #[serde(default)]
    pub deliveries: BTreeMap<String, u32>,
    /// Agent step → how many runs fake-hermes started under its correlation (ground truth).
    #[serde(default)]
    pub runs: BTreeMap<String, u32>,
}

/// What one occurrence must look like at the end.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct OccurrenceExpect {
    /// `pending`, `unresolved`, `resolved` or `released`; or a list of them, when the draft
    /// allows each (the observed state must be one of them).
    #[serde(default)]
    pub state: Option<OneOrMany>,
    /// `success`, `not_accepted`, `final_failure` or `final_failure_no_effect`.
    #[serde(default)]
    pub outcome: Option<String>,
    #[serde(default)]
    pub entry_attempts: Option<u32>,
    /// Effects on the provider's ground-truth ledger for this occurrence.
    #[serde(default)]
    pub provider_effects: Option<u32>,
    /// Missing-knowledge flags that must be raised.
    #[serde(default)]
    pub missing_knowledge: Vec<String>,
    /// `none`, `held`, `consumed` or `released`.
    #[serde(default)]
    pub authority: Option<String>,
    #[serde(default)]
    pub remedies: Option<u32>,
    /// Alternatives, when the draft allows more than one conforming path for this occurrence:
    /// the fields above hold on every path, and at least one alternative must hold entirely (an
    /// alternative takes the same fields, without a nested `any_of`).
    #[serde(default)]
    pub any_of: Vec<OccurrenceExpect>,
}

/// What AIP's queue and lifecycle may show for a delegated child.
pub const DELEGATED_CHILD: [&str; 7] = [
    "ran",
    "never",
    "altered_contract",
    "forged_owner",
    "identity_drift",
    "tenant_drift",
    "stores_disagree",
];

fn yes() -> bool {
    true
}

/// What one operator Action's binding must look like at the end (ground truth from fake-hermes).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct OperatorExpect {
    /// The binding status (`running`, `waiting_for_approval`, `completed`, `outcome_unknown` …).
    #[serde(default)]
    pub status: Option<String>,
    /// Runs Hermes really started for this Action.
    #[serde(default)]
    pub runs: Option<u32>,
    /// Approval decisions Hermes really applied to its run.
    #[serde(default)]
    pub approvals: Option<u32>,
    #[serde(default)]
    pub stops: Option<u32>,
}

/// One word, or a list of words any of which is accepted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    pub fn words(&self) -> Vec<&str> {
        match self {
            OneOrMany::One(s) => vec![s.as_str()],
            OneOrMany::Many(v) => v.iter().map(String::as_str).collect(),
        }
    }
}

/// Final expectations.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct FinalExpect {
    #[serde(default)]
    pub operators: BTreeMap<String, OperatorExpect>,
    #[serde(default)]
    pub occurrences: BTreeMap<String, OccurrenceExpect>,
    /// Submission → `queued`, `started`, `unknown` or `ended:<completed|failed|cancelled|not_executed>`.
    #[serde(default)]
    pub admissions: BTreeMap<String, String>,
    /// `supported` or `unsupported`.
    #[serde(default)]
    pub composition: Option<String>,
    /// Bypass-path kinds the report must disclose.
    #[serde(default)]
    pub bypass_disclosed: Vec<String>,
    /// A Hermes Workflow run (seed 002).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<WorkflowExpect>,
}

/// Per-case domain and provider settings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct CaseConfig {
    /// The provider account's idempotency profile: `stripe-v1` (default), `ietf-draft`, `none`.
    #[serde(default)]
    pub idempotency: Option<String>,
    #[serde(default)]
    pub limits: Option<Limits>,
    #[serde(default)]
    pub bypass_paths: Vec<BypassPath>,
    #[serde(default)]
    pub aadp: Option<AadpAccounting>,
    #[serde(default)]
    pub action_fence: bool,
}

/// A case file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    pub id: String,
    pub title: String,
    pub requirements: Vec<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub config: CaseConfig,
    pub steps: Vec<Step>,
    #[serde(default)]
    pub expect: FinalExpect,
}

impl Case {
    /// A Hermes Workflow case: one with a workflow step.
    pub fn is_workflow(&self) -> bool {
        self.steps.iter().any(Step::is_workflow)
    }
}

/// A loaded case and where it came from.
#[derive(Clone, Debug)]
pub struct LoadedCase {
    pub path: PathBuf,
    pub case: Case,
    /// The file's exact bytes (for the test-input digest).
    pub bytes: Vec<u8>,
    /// The case in typed vocabulary, parsed once; `None` when the case has defects (it is
    /// never run then).
    pub checked: Option<Checked>,
}

/// What the runner judges by, parsed once from a case without defects.
#[derive(Clone, Debug, PartialEq)]
pub struct Checked {
    /// Each step's expectation, by step index.
    pub expected: Vec<Expected>,
    /// The final expectation of each occurrence, by label.
    pub occurrences: BTreeMap<String, CheckedOccurrence>,
}

/// [`OccurrenceExpect`] in typed vocabulary.
#[derive(Clone, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct CheckedOccurrence {
    /// The states accepted (empty: no expectation).
    pub state: Vec<crate::vocab::State>,
    /// The outcome a `resolved` occurrence must have (an occurrence in another accepted state has
    /// none to check).
    pub outcome: Option<crate::vocab::Outcome>,
    pub entry_attempts: Option<u32>,
    pub provider_effects: Option<u32>,
    pub missing_knowledge: Vec<crate::vocab::Flag>,
    pub authority: Option<crate::vocab::Authority>,
    pub remedies: Option<u32>,
    /// Alternative paths, one of which must hold entirely (empty: no alternatives).
    pub any_of: Vec<CheckedOccurrence>,
}

impl Checked {
    /// The typed form of a case the validator passed; a word it would have refused is `Err`.
    pub fn of(c: &Case) -> Result<Checked, String> {
        let expected = c
            .steps
            .iter()
            .map(|s| s.expect().map_or(Ok(Expected::Ok), Expect::parse))
            .collect::<Result<Vec<_>, _>>()?;
        let mut occurrences = BTreeMap::new();
        for (label, e) in &c.expect.occurrences {
            occurrences.insert(label.clone(), CheckedOccurrence::of(e)?);
        }
        Ok(Checked {
            expected,
            occurrences,
        })
    }
}

impl CheckedOccurrence {
    /// The typed form of one occurrence's expectation (and of its alternatives).
    pub fn of(e: &OccurrenceExpect) -> Result<CheckedOccurrence, String> {
        use crate::vocab::{Authority, Flag, Outcome, State};
        let word = |kind: &str, v: &str| format!("{kind} {v:?} is unknown");
        {
            let state = e
                .state
                .iter()
                .flat_map(|s| s.words())
                .map(|v| State::parse(v).ok_or_else(|| word("state", v)))
                .collect::<Result<Vec<_>, _>>()?;
            let outcome = e
                .outcome
                .as_deref()
                .map(|v| Outcome::parse(v).ok_or_else(|| word("outcome", v)))
                .transpose()?;
            let authority = e
                .authority
                .as_deref()
                .map(|v| Authority::parse(v).ok_or_else(|| word("authority", v)))
                .transpose()?;
            let missing_knowledge = e
                .missing_knowledge
                .iter()
                .map(|v| Flag::parse(v).ok_or_else(|| word("flag", v)))
                .collect::<Result<Vec<_>, _>>()?;
            let any_of = e
                .any_of
                .iter()
                .map(CheckedOccurrence::of)
                .collect::<Result<Vec<_>, _>>()?;
            Ok(CheckedOccurrence {
                state,
                outcome,
                entry_attempts: e.entry_attempts,
                provider_effects: e.provider_effects,
                missing_knowledge,
                authority,
                remedies: e.remedies,
                any_of,
            })
        }
    }
}

/// One defect in a case file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CaseDefect {
    pub file: String,
    pub case: Option<String>,
    pub field: String,
    pub line: Option<usize>,
    pub msg: String,
    pub fix: String,
}

impl std::fmt::Display for CaseDefect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
        }
        if let Some(c) = &self.case {
            write!(f, ": {c}")?;
        }
        write!(f, ": {}: {} (fix: {})", self.field, self.msg, self.fix)
    }
}
