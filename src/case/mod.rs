//! Conformance cases: the model (YAML, `deny_unknown_fields`), the loader and one pure validator
//! that reports every defect at once, naming the file, the case, the field and the fix.

use crate::aoc::composition::{AadpAccounting, BypassPath};
use crate::aoc::domain::Limits;
use crate::aoc::requirement::Req;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

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
        authorization: String,
        #[serde(default)]
        executor: Option<String>,
        #[serde(default)]
        expect: Expect,
    },
    /// Adds a fault rule to the provider (GUIDE §5 vocabulary).
    ProviderFault {
        op: fake_payments::faults::Op,
        fault: fake_payments::faults::Fault,
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
    },
    /// Cancels an Action's run; `status` is the binding status it must end in.
    OperatorCancel {
        action: String,
        #[serde(default)]
        instance: Option<String>,
        #[serde(default)]
        status: Option<String>,
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
        route: fake_hermes::faults::Route,
        fault: fake_hermes::faults::Fault,
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
}

impl Step {
    /// The fake-payments rule a `provider_fault` step declares (one place for its defaults).
    pub fn payments_rule(&self) -> Option<fake_payments::faults::Rule> {
        let Step::ProviderFault {
            op,
            fault,
            nth,
            times,
        } = self
        else {
            return None;
        };
        Some(fake_payments::faults::Rule {
            op: *op,
            nth: nth.unwrap_or(1),
            times: times.unwrap_or(1),
            account: None,
            key: None,
            fault: fault.clone(),
        })
    }

    /// The fake-hermes rule a `hermes_fault` step declares.
    pub fn hermes_rule(&self) -> Option<fake_hermes::faults::Rule> {
        let Step::HermesFault {
            route,
            fault,
            nth,
            times,
        } = self
        else {
            return None;
        };
        Some(fake_hermes::faults::Rule {
            route: *route,
            nth: nth.unwrap_or(1),
            times: times.unwrap_or(1),
            session_id: None,
            fault: fault.clone(),
        })
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
            | HermesForget {} => None,
        }
    }
}

/// What one occurrence must look like at the end.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct OccurrenceExpect {
    /// `pending`, `unresolved`, `resolved` or `released`.
    #[serde(default)]
    pub state: Option<String>,
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
}

/// A defect if `result` names no operator result status.
fn unknown_result(result: &Option<String>) -> Option<String> {
    result
        .as_ref()
        .filter(|r| !["completed", "failed", "cancelled", "requires_human"].contains(&r.as_str()))
        .map(|r| format!("{r:?} is unknown"))
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

/// A loaded case and where it came from.
#[derive(Clone, Debug)]
pub struct LoadedCase {
    pub path: PathBuf,
    pub case: Case,
    /// The file's exact bytes (for the test-input digest).
    pub bytes: Vec<u8>,
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

const STATES: [&str; 4] = ["pending", "unresolved", "resolved", "released"];
const OUTCOMES: [&str; 4] = [
    "success",
    "not_accepted",
    "final_failure",
    "final_failure_no_effect",
];
const AUTHORITY: [&str; 4] = ["none", "held", "consumed", "released"];
const FIELDS: [&str; 7] = [
    "account",
    "environment",
    "native_key",
    "profile_version",
    "status_source",
    "request",
    "provider_ref",
];
const FLAGS: [&str; 13] = [
    "unauthenticated",
    "unbound_attempt",
    "unmapped",
    "not_found",
    "beyond_retention",
    "incomplete_listing",
    "stale",
    "http_status_only",
    "transport",
    "undecodable",
    "conflicting",
    "no_entry_recorded",
    "composition_unsupported",
];

/// Validates one parsed case (pure): every defect at once.
pub fn validate(file: &str, c: &Case) -> Vec<CaseDefect> {
    let mut out = Vec::new();
    let mut d = |field: String, msg: String, fix: &str| {
        out.push(CaseDefect {
            file: file.into(),
            case: Some(c.id.clone()),
            field,
            line: None,
            msg,
            fix: fix.into(),
        })
    };
    let stem = Path::new(file)
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default();
    if c.id.trim().is_empty()
        || !c
            .id
            .chars()
            .all(|ch| ch.is_ascii_uppercase() || ch.is_ascii_digit() || ch == '-')
    {
        d(
            "id".into(),
            format!(
                "{:?} is not an id of upper-case letters, digits and dashes",
                c.id
            ),
            "use an id like AOC-CASE-003",
        );
    } else if !stem.starts_with(&c.id) {
        d(
            "id".into(),
            format!(
                "the file name {stem:?} does not start with the id {:?}",
                c.id
            ),
            "name the file <id>-<slug>.yaml",
        );
    }
    if c.title.trim().is_empty() {
        d("title".into(), "empty".into(), "say what the case checks");
    }
    if c.requirements.is_empty() {
        d(
            "requirements".into(),
            "no requirement is evaluated".into(),
            "list the AOC-REQ ids the case evaluates",
        );
    }
    for (i, r) in c.requirements.iter().enumerate() {
        if Req::parse(r).is_none() || !r.starts_with("AOC-REQ-") {
            d(
                format!("requirements[{i}]"),
                format!("{r:?} is not a requirement id"),
                "use AOC-REQ-001 … AOC-REQ-013",
            );
        }
    }
    if let Some(p) = &c.config.idempotency
        && !["stripe-v1", "ietf-draft", "none"].contains(&p.as_str())
    {
        d(
            "config.idempotency".into(),
            format!("{p:?} is unknown"),
            "use stripe-v1, ietf-draft or none",
        );
    }
    if c.steps.is_empty() {
        d(
            "steps".into(),
            "no steps".into(),
            "add the steps the case performs",
        );
    }
    let mut executors: BTreeSet<String> = BTreeSet::new();
    let mut current: Option<String> = None;
    let mut occurrences: BTreeSet<String> = BTreeSet::new();
    let mut submissions: BTreeSet<String> = BTreeSet::new();
    let mut holds: BTreeSet<String> = BTreeSet::new();
    let mut actions: BTreeSet<String> = BTreeSet::new();
    for (i, s) in c.steps.iter().enumerate() {
        let at = |f: &str| format!("steps[{i}].{f}");
        if let Some(e) = s.expect()
            && let Err(m) = e.parse()
        {
            d(
                at("expect"),
                m,
                "use ok, any, refused or refused AOC-REQ-00N",
            );
        }
        let need_exec = |e: &Option<String>, out: &mut Vec<(String, String, &str)>| match e {
            Some(name) if !executors.contains(name) => out.push((
                at("executor"),
                format!("executor {name:?} has not joined"),
                "join or replace with it first",
            )),
            None if current.is_none() => out.push((
                at("executor"),
                "no executor has joined yet".into(),
                "start with a join step",
            )),
            _ => {}
        };
        let mut pending: Vec<(String, String, &str)> = Vec::new();
        let occ_known = |o: &str, pending: &mut Vec<(String, String, &str)>| {
            if !occurrences.contains(o) {
                pending.push((
                    at("occurrence"),
                    format!("occurrence {o:?} was not created by an earlier step"),
                    "create it first",
                ));
            }
        };
        match s {
            Step::Join { executor, .. } | Step::Replace { executor, .. } => {
                executors.insert(executor.clone());
                current = Some(executor.clone());
            }
            Step::Crash {
                executor,
                at_hold: Some(h),
                ..
            } => {
                need_exec(&Some(executor.clone()), &mut pending);
                if !holds.contains(h) {
                    pending.push((
                        at("at_hold"),
                        format!("no earlier provider_fault declares the hold {h:?}"),
                        "declare it with {do: provider_fault, op: create, fault: {type: hold, name: …}}",
                    ));
                }
            }
            Step::Crash { executor, .. }
            | Step::LeaseRefresh { executor, .. }
            | Step::LeaseRelease { executor, .. } => {
                need_exec(&Some(executor.clone()), &mut pending)
            }
            Step::Create {
                occurrence,
                executor,
                amount,
                simulate,
                ..
            } => {
                need_exec(executor, &mut pending);
                if let Some(a) = amount
                    && *a <= 0
                {
                    pending.push((
                        at("amount"),
                        format!("{a} is not a positive amount"),
                        "use minor units above 0",
                    ));
                }
                if let Some(sim) = simulate
                    && !fake_payments::profile::STATUSES.contains(&sim.as_str())
                {
                    pending.push((
                        at("simulate"),
                        format!("{sim:?} is not a provider status"),
                        "use one of the profile's native statuses",
                    ));
                }
                occurrences.insert(occurrence.clone());
            }
            Step::Reserve {
                occurrence,
                executor,
                ..
            }
            | Step::Enter {
                occurrence,
                executor,
                ..
            }
            | Step::Send {
                occurrence,
                executor,
                ..
            }
            | Step::Execute {
                occurrence,
                executor,
                ..
            }
            | Step::Adopt {
                occurrence,
                executor,
                ..
            }
            | Step::Reconcile {
                occurrence,
                executor,
                ..
            } => {
                need_exec(executor, &mut pending);
                occ_known(occurrence, &mut pending);
            }
            Step::Release {
                occurrence,
                executor,
                reason,
                ..
            } => {
                need_exec(executor, &mut pending);
                occ_known(occurrence, &mut pending);
                if let Some(r) = reason
                    && crate::aoc::ReleaseReason::parse(r).is_none()
                {
                    pending.push((
                        at("reason"),
                        format!("{r:?} is unknown"),
                        "use owner_abandoned, predecessor_never_entered or deadline_expired",
                    ));
                }
            }
            Step::Rebind {
                occurrence,
                executor,
                field,
                ..
            } => {
                need_exec(executor, &mut pending);
                occ_known(occurrence, &mut pending);
                if !FIELDS.contains(&field.as_str()) {
                    pending.push((at("field"), format!("{field:?} is not a binding field"), "use account, environment, native_key, profile_version, status_source, request or provider_ref"));
                }
            }
            Step::Remedy {
                occurrence,
                remedy,
                executor,
                ..
            } => {
                need_exec(executor, &mut pending);
                occ_known(occurrence, &mut pending);
                occurrences.insert(remedy.clone());
            }
            Step::ProviderFault { fault, .. } => {
                if let fake_payments::faults::Fault::Hold { name } = fault {
                    holds.insert(name.clone());
                }
                let plan = fake_payments::faults::Plan {
                    rules: s.payments_rule().into_iter().collect(),
                };
                for m in plan.validate() {
                    pending.push((
                        at("fault"),
                        m.replace("rules[0].", ""),
                        "see the provider's fault vocabulary",
                    ));
                }
            }
            Step::ProviderStatus { occurrence, status } => {
                occ_known(occurrence, &mut pending);
                if !fake_payments::profile::STATUSES.contains(&status.as_str()) {
                    pending.push((
                        at("status"),
                        format!("{status:?} is not a provider status"),
                        "use a native status",
                    ));
                }
            }
            Step::ProviderExpire {
                occurrence: Some(o),
            } => occ_known(o, &mut pending),
            Step::Submit { submission, .. } => {
                submissions.insert(submission.clone());
            }
            Step::Claim {
                submission,
                executor,
                ..
            }
            | Step::ResolveUnknown {
                submission,
                executor,
                ..
            } => {
                need_exec(executor, &mut pending);
                if !submissions.contains(submission) {
                    pending.push((
                        at("submission"),
                        format!("submission {submission:?} was not submitted"),
                        "submit it first",
                    ));
                }
            }
            Step::Link {
                submission,
                occurrence,
                executor,
                ..
            } => {
                need_exec(executor, &mut pending);
                occ_known(occurrence, &mut pending);
                if !submissions.contains(submission) {
                    pending.push((
                        at("submission"),
                        format!("submission {submission:?} was not submitted"),
                        "submit it first",
                    ));
                }
            }
            Step::Finish {
                submission,
                end,
                executor,
                ..
            } => {
                need_exec(executor, &mut pending);
                if !submissions.contains(submission) {
                    pending.push((
                        at("submission"),
                        format!("submission {submission:?} was not submitted"),
                        "submit it first",
                    ));
                }
                if crate::aoc::admission::AdmissionEnd::parse(end).is_none() {
                    pending.push((
                        at("end"),
                        format!("{end:?} is unknown"),
                        "use completed, failed, cancelled or not_executed",
                    ));
                }
            }
            Step::Recover { executor, .. } => need_exec(executor, &mut pending),
            Step::OperatorInvoke {
                action,
                objective,
                resume,
                choice,
                result,
                ..
            } => {
                match (objective, resume) {
                    (Some(_), None) => {}
                    (None, Some(src)) => {
                        if !actions.contains(src) {
                            pending.push((
                                at("resume"),
                                format!("action {src:?} was not invoked earlier"),
                                "resume an Action invoked by an earlier step",
                            ));
                        }
                        if !choice
                            .as_deref()
                            .is_some_and(|c| ["once", "session", "always", "deny"].contains(&c))
                        {
                            pending.push((
                                at("choice"),
                                "a resume needs a choice".into(),
                                "use once, session, always or deny",
                            ));
                        }
                    }
                    _ => pending.push((
                        at("objective"),
                        "give exactly one of objective or resume".into(),
                        "set objective, or resume with a choice",
                    )),
                }
                if let Some(d) = unknown_result(result) {
                    pending.push((
                        at("result"),
                        d,
                        "use completed, failed, cancelled or requires_human",
                    ));
                }
                actions.insert(action.clone());
            }
            Step::OperatorConfigure { policy, .. } => {
                let mut base =
                    serde_json::to_value(crate::operator::Policy::default()).unwrap_or_default();
                if let Some(m) = base.as_object_mut() {
                    m.extend(policy.clone());
                }
                if let Err(e) = serde_json::from_value::<crate::operator::Policy>(base) {
                    pending.push((
                        at("policy"),
                        format!("not an operator policy: {e}"),
                        "use the policy fields of seed 000 (delegation_enabled, delegation_capability_prefixes, …)",
                    ));
                }
            }
            Step::OperatorDelegate {
                action,
                approval,
                child,
                result,
                ..
            } => {
                if !approval.as_deref().is_none_or(|a| {
                    ["approved", "none", "unstored", "expired", "other_action"].contains(&a)
                }) {
                    pending.push((
                        at("approval"),
                        format!("{approval:?} is unknown"),
                        "use approved, none, unstored, expired or other_action",
                    ));
                }
                if !child
                    .as_deref()
                    .is_none_or(|c| DELEGATED_CHILD.contains(&c))
                {
                    pending.push((
                        at("child"),
                        format!("{child:?} is unknown"),
                        "use ran, never, altered_contract, forged_owner, identity_drift, tenant_drift or stores_disagree",
                    ));
                }
                if let Some(d) = unknown_result(result) {
                    pending.push((
                        at("result"),
                        d,
                        "use completed, failed, cancelled or requires_human",
                    ));
                }
                actions.insert(action.clone());
            }
            Step::OperatorCancel { action, .. } | Step::OperatorWaitBound { action }
                if !actions.contains(action) =>
            {
                pending.push((
                    at("action"),
                    format!("action {action:?} was not invoked earlier"),
                    "invoke it first",
                ));
            }
            Step::HermesFault { .. } => {
                let plan = fake_hermes::faults::Plan {
                    rules: s.hermes_rule().into_iter().collect(),
                };
                for m in plan.validate() {
                    pending.push((
                        at("fault"),
                        m.replace("rules[0].", ""),
                        "see fake-hermes's fault vocabulary",
                    ));
                }
            }
            Step::HermesScript { script } => {
                for d in fake_hermes::script::validate(script) {
                    pending.push((
                        at("script"),
                        format!("step {:?} field {:?}: {}", d.step, d.field, d.msg),
                        "fix the script",
                    ));
                }
            }
            _ => {}
        }
        for (f, m, fix) in pending {
            d(f, m, fix);
        }
    }
    for (label, e) in &c.expect.occurrences {
        let at = |f: &str| format!("expect.occurrences.{label}.{f}");
        if !occurrences.contains(label) {
            d(
                format!("expect.occurrences.{label}"),
                "no step creates this occurrence".into(),
                "name an occurrence the steps create",
            );
        }
        if let Some(s) = &e.state
            && !STATES.contains(&s.as_str())
        {
            d(
                at("state"),
                format!("{s:?} is unknown"),
                "use pending, unresolved, resolved or released",
            );
        }
        if let Some(o) = &e.outcome
            && !OUTCOMES.contains(&o.as_str())
        {
            d(
                at("outcome"),
                format!("{o:?} is unknown"),
                "use success, not_accepted, final_failure or final_failure_no_effect",
            );
        }
        if let Some(a) = &e.authority
            && !AUTHORITY.contains(&a.as_str())
        {
            d(
                at("authority"),
                format!("{a:?} is unknown"),
                "use none, held, consumed or released",
            );
        }
        for f in &e.missing_knowledge {
            if !FLAGS.contains(&f.as_str()) {
                d(
                    at("missing_knowledge"),
                    format!("{f:?} is not a missing-knowledge flag"),
                    "use a flag name such as transport or unauthenticated",
                );
            }
        }
    }
    for label in c.expect.operators.keys() {
        if !actions.contains(label) {
            d(
                format!("expect.operators.{label}"),
                "no step invokes this Action".into(),
                "name an Action the steps invoke",
            );
        }
    }
    for (sub, state) in &c.expect.admissions {
        if !submissions.contains(sub) {
            d(
                format!("expect.admissions.{sub}"),
                "no step submits this".into(),
                "name a submission the steps submit",
            );
        }
        let ok = ["queued", "started", "unknown"].contains(&state.as_str())
            || state
                .strip_prefix("ended:")
                .is_some_and(|e| crate::aoc::admission::AdmissionEnd::parse(e).is_some());
        if !ok {
            d(
                format!("expect.admissions.{sub}"),
                format!("{state:?} is unknown"),
                "use queued, started, unknown or ended:<end>",
            );
        }
    }
    if let Some(cmp) = &c.expect.composition
        && !["supported", "unsupported"].contains(&cmp.as_str())
    {
        d(
            "expect.composition".into(),
            format!("{cmp:?} is unknown"),
            "use supported or unsupported",
        );
    }
    out
}

/// Finds the 1-based line a field path points at, where possible: `steps[N]…` → the Nth item of
/// the `steps:` list; `expect.occurrences.<label>…` → the label's line; otherwise the first line
/// starting with the path's last key.
fn line_of(text: &str, field: &str) -> Option<usize> {
    let lines: Vec<&str> = text.lines().collect();
    if let Some(rest) = field.strip_prefix("steps[") {
        let n: usize = rest.split(']').next()?.parse().ok()?;
        let start = lines.iter().position(|l| l.trim_end() == "steps:")?;
        let indent = lines
            .get(start + 1..)?
            .iter()
            .find(|l| l.trim_start().starts_with("- "))?
            .len()
            - lines[start + 1..]
                .iter()
                .find(|l| l.trim_start().starts_with("- "))?
                .trim_start()
                .len();
        let mut k = 0;
        for (i, l) in lines.iter().enumerate().skip(start + 1) {
            let lead = l.len() - l.trim_start().len();
            if !l.trim().is_empty() && lead < indent {
                break;
            }
            if lead == indent && l.trim_start().starts_with("- ") {
                if k == n {
                    return Some(i + 1);
                }
                k += 1;
            }
        }
        return None;
    }
    if let Some(rest) = field
        .strip_prefix("expect.occurrences.")
        .or_else(|| field.strip_prefix("expect.admissions."))
    {
        let label = rest.split('.').next()?;
        return lines
            .iter()
            .position(|l| l.trim_start().starts_with(&format!("{label}:")))
            .map(|i| i + 1);
    }
    let key = field.rsplit('.').next()?.split('[').next()?;
    if key.is_empty() || key == "-" {
        return None;
    }
    lines
        .iter()
        .position(|l| {
            l.trim_start()
                .trim_start_matches("- ")
                .starts_with(&format!("{key}:"))
        })
        .map(|i| i + 1)
}

/// Loads every `*.yaml` under `path` (a file or a folder, recursively), validating each; returns
/// the cases and every defect found.
pub fn load(path: &Path) -> (Vec<LoadedCase>, Vec<CaseDefect>) {
    let mut files = Vec::new();
    collect(path, &mut files);
    files.sort();
    let mut cases = Vec::new();
    let mut defects = Vec::new();
    let mut ids: BTreeMap<String, String> = BTreeMap::new();
    if files.is_empty() {
        defects.push(CaseDefect {
            file: path.display().to_string(),
            case: None,
            field: "-".into(),
            line: None,
            msg: "no *.yaml case files here".into(),
            fix: "point at the cases folder or a case file".into(),
        });
    }
    for f in files {
        let name = f.display().to_string();
        let bytes = match std::fs::read(&f) {
            Ok(b) => b,
            Err(e) => {
                defects.push(CaseDefect {
                    file: name,
                    case: None,
                    field: "-".into(),
                    line: None,
                    msg: e.to_string(),
                    fix: "make the file readable".into(),
                });
                continue;
            }
        };
        let text = String::from_utf8_lossy(&bytes).into_owned();
        match serde_saphyr::from_str::<Case>(&text) {
            Ok(c) => {
                let mut ds = validate(&name, &c);
                for d in &mut ds {
                    d.line = line_of(&text, &d.field);
                }
                if let Some(prev) = ids.insert(c.id.clone(), name.clone()) {
                    ds.push(CaseDefect {
                        file: name.clone(),
                        case: Some(c.id.clone()),
                        field: "id".into(),
                        line: line_of(&text, "id"),
                        msg: format!("the id is also used by {prev}"),
                        fix: "give every case its own id".into(),
                    });
                }
                defects.extend(ds);
                cases.push(LoadedCase {
                    path: f,
                    case: c,
                    bytes,
                });
            }
            Err(e) => {
                let msg = e.to_string();
                let line = msg
                    .split("line ")
                    .nth(1)
                    .and_then(|r| r.split(|ch: char| !ch.is_ascii_digit()).next())
                    .and_then(|n| n.parse().ok());
                defects.push(CaseDefect {
                    file: name,
                    case: None,
                    field: "-".into(),
                    line,
                    msg,
                    fix: "check the YAML and the field names against cases/schema/case.schema.json"
                        .into(),
                });
            }
        }
    }
    (cases, defects)
}

fn collect(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_file() {
        out.push(path.to_path_buf());
    } else if let Ok(rd) = std::fs::read_dir(path) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                if p.file_name().is_some_and(|n| n != "schema") {
                    collect(&p, out);
                }
            } else if p.extension().is_some_and(|x| x == "yaml" || x == "yml") {
                out.push(p);
            }
        }
    }
}
