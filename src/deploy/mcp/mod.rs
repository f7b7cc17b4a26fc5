//! Judging a running service whose effects are MCP tool calls (`provider: mcp`): an agent or
//! MCP client service pointed at fake-mcp (`{mcp.url}`, Streamable HTTP). aocheck starts the
//! service, submits one action through the service's own API and lands a fault on the action's
//! write call ([`McpKind`]): held and the instance killed, the reply lost after the effect, an
//! error result or a JSON-RPC error after the effect, the server restarted after the effect
//! (every session forgotten), the same action submitted again while the call is held. It
//! watches the action's status and judges by fake-mcp's ledger (`check::mcp`): at most one
//! write call per action, and no outcome the ledger contradicts.

mod steps;

use super::Providers;
use super::actions::{self, ActionKind, ActionRan};
use super::file::Loaded;
use super::schedule::Ran;
use super::{LOGS, WORK};
use crate::aoc::requirement::Req;
use crate::check::deploy::Ambiguity;
use crate::report::model::{CaseReport, FaultReport, HarnessCause};
use provider_model::mcp::faults::{Fault, Rule};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Instant;

crate::vocab::words!(
    /// The faults a service's write call meets at fake-mcp.
    McpKind {
        /// The call is held at fake-mcp, the instance killed, the effect then made, and the
        /// instance started again on the same store.
        CrashAtHeldCall = "crash_at_held_call",
        /// The effect is made and the connection closes with no result, ever.
        LostReply = "lost_reply",
        /// The effect is made and the call answers a tool error (`isError: true`).
        ErrorAfterCommit = "error_after_commit",
        /// The effect is made and the call answers a JSON-RPC error (`-32603`).
        RpcErrorAfterCommit = "rpc_error_after_commit",
        /// The effect is made, the reply lost, and the server restarts: every session is
        /// forgotten (the old session's next request is answered 404); the effect is kept.
        RestartAfterCommit = "restart_after_commit",
        /// The same action submitted again while its call is held.
        ReplayWhileHeld = "replay_while_held",
        /// The effect is made and the call's session expires: the reply is lost and the
        /// session's next request is answered 404.
        ExpireAfterCommit = "expire_after_commit",
        /// The effect is made and the reply lost, and lookups and listings lag: the effect
        /// shows in them only [`LAG`] after it was made, and each says `complete: false`.
        LostReplyLaggingLookup = "lost_reply_lagging_lookup",
        /// The call is held at fake-mcp, the instance killed, and the call then refused:
        /// nothing is made, and the killed caller never learns it.
        CrashAtHeldCallRefused = "crash_at_held_call_refused",
        /// The call is refused before any effect (a tool error, `isError`): nothing is made.
        RefusedNothingMade = "refused_nothing_made",
    }
);

/// A deployment case of a service of MCP tool calls.
#[derive(Debug)]
pub struct McpCase {
    pub id: &'static str,
    pub title: &'static str,
    pub kind: McpKind,
    pub requirements: &'static [Req],
}

pub const CASES: [McpCase; 10] = [
    McpCase {
        id: "MCP-001",
        title: "The instance is killed while fake-mcp holds its write call; the effect is then made",
        kind: McpKind::CrashAtHeldCall,
        requirements: &[Req::R010, Req::R002, Req::R011, Req::R009],
    },
    McpCase {
        id: "MCP-002",
        title: "The write call's effect is made and its reply is lost (connection closed, no result)",
        kind: McpKind::LostReply,
        requirements: &[Req::R010, Req::R011, Req::R009],
    },
    McpCase {
        id: "MCP-003",
        title: "The write call's effect is made and the call answers a tool error (isError)",
        kind: McpKind::ErrorAfterCommit,
        requirements: &[Req::R010, Req::R011, Req::R009],
    },
    McpCase {
        id: "MCP-004",
        title: "The write call's effect is made and the call answers a JSON-RPC error",
        kind: McpKind::RpcErrorAfterCommit,
        requirements: &[Req::R010, Req::R011, Req::R009],
    },
    McpCase {
        id: "MCP-005",
        title: "The write call's effect is made, its reply lost, and the server restarts (sessions forgotten)",
        kind: McpKind::RestartAfterCommit,
        requirements: &[Req::R010, Req::R011, Req::R009],
    },
    McpCase {
        id: "MCP-006",
        title: "The same action is submitted again while its write call is held",
        kind: McpKind::ReplayWhileHeld,
        requirements: &[Req::R010, Req::R002, Req::R011],
    },
    McpCase {
        id: "MCP-007",
        title: "The write call's effect is made and its session expires (reply lost, the session refused after)",
        kind: McpKind::ExpireAfterCommit,
        requirements: &[Req::R010, Req::R011, Req::R009],
    },
    McpCase {
        id: "MCP-008",
        title: "The write call's reply is lost and lookups lag behind the effect (it shows 5 s after it was made)",
        kind: McpKind::LostReplyLaggingLookup,
        requirements: &[Req::R010, Req::R011, Req::R009],
    },
    McpCase {
        id: "MCP-009",
        title: "The instance is killed while fake-mcp holds its write call; the call is then refused and nothing is made",
        kind: McpKind::CrashAtHeldCallRefused,
        requirements: &[Req::R010, Req::R002, Req::R011, Req::R009],
    },
    McpCase {
        id: "MCP-010",
        title: "The write call is refused before any effect (a tool error; nothing is made)",
        kind: McpKind::RefusedNothingMade,
        requirements: &[Req::R010, Req::R011],
    },
];

/// How long lookups and listings lag in the lagging case.
pub const LAG: std::time::Duration = std::time::Duration::from_secs(5);

impl McpKind {
    /// The fault at fake-mcp on an action's first call of each write tool.
    fn fault(self, hold: &str) -> Fault {
        match self {
            McpKind::CrashAtHeldCall
            | McpKind::ReplayWhileHeld
            | McpKind::CrashAtHeldCallRefused => Fault::Hold {
                name: hold.to_string(),
            },
            McpKind::RefusedNothingMade => Fault::Refuse,
            McpKind::LostReply | McpKind::RestartAfterCommit | McpKind::LostReplyLaggingLookup => {
                Fault::CommitThenDrop
            }
            McpKind::ExpireAfterCommit => Fault::ExpireAfterCommit,
            McpKind::ErrorAfterCommit => Fault::ErrorAfterCommit,
            McpKind::RpcErrorAfterCommit => Fault::RpcErrorAfterCommit,
        }
    }
    /// What the call's answer left the service knowing: a killed instance never read its
    /// reply.
    fn ambiguity(self) -> Ambiguity {
        match self {
            McpKind::CrashAtHeldCall
            | McpKind::LostReply
            | McpKind::RestartAfterCommit
            | McpKind::ExpireAfterCommit
            | McpKind::LostReplyLaggingLookup
            | McpKind::CrashAtHeldCallRefused => Ambiguity::Dropped,
            McpKind::ErrorAfterCommit | McpKind::RpcErrorAfterCommit => Ambiguity::ErrorAfterCommit,
            McpKind::ReplayWhileHeld | McpKind::RefusedNothingMade => Ambiguity::None,
        }
    }
}

/// The tools fake-mcp serves in a deployment, and which of them make effects.
fn write_tools() -> Vec<String> {
    provider_model::mcp::tools::default_tools()
        .into_iter()
        .filter(|t| t.writes())
        .map(|t| t.name)
        .collect()
}

/// Whether `c` is a write call (one of `writes`) the declared rule places under `occurrence`.
fn of_action(
    d: &Loaded,
    writes: &[String],
    occurrence: &str,
    c: &provider_model::mcp::ledger::Call,
) -> bool {
    writes.contains(&c.tool) && owner_of(d, c.key.as_deref()).as_deref() == Some(occurrence)
}

/// The action a call belongs to, by the declared rule (the key it carried, a template around
/// `{occurrence}`).
pub fn owner_of(d: &Loaded, key: Option<&str>) -> Option<String> {
    let t = d.file.attribution.as_ref()?.idempotency_key.as_ref()?;
    let (pre, post) = t.split_once("{occurrence}")?;
    let o = key?.strip_prefix(pre)?.strip_suffix(post)?;
    (!o.is_empty()).then(|| o.to_string())
}

/// Runs one case and builds its report.
pub async fn run_case(
    d: &Loaded,
    c: &McpCase,
    p: &Providers,
    out: &Path,
    mut report: CaseReport,
) -> CaseReport {
    let occurrence = format!("{}-a1", c.id.to_lowercase());
    let a = run_action(
        d,
        Some(c.kind),
        &occurrence,
        p,
        &out.join(WORK).join(c.id),
        &out.join(LOGS).join(c.id),
    )
    .await;
    // With the expected call declared, a case whose fault lets the call make its effect also
    // answers for the effect being the one asked for (AOC-REQ-003).
    let mut reqs = c.requirements.to_vec();
    let makes = !matches!(
        c.kind,
        McpKind::CrashAtHeldCallRefused | McpKind::RefusedNothingMade
    );
    if d.file.drive.effect.is_some() && makes && !reqs.contains(&Req::R003) {
        reqs.push(Req::R003);
        reqs.sort();
    }
    report.requirements = reqs.iter().map(|r| r.to_string()).collect();
    let mut report = super::case_report(d, report, &reqs, a.ran);
    report.logs = super::logs_under(out, &Path::new(LOGS).join(c.id));
    report
}

/// One action submitted through the service's API with `kind`'s fault (or none) on a fresh
/// fake-mcp ledger, its store under `work` and its instances' logs under `logs`, judged.
pub async fn run_action(
    d: &Loaded,
    kind: Option<McpKind>,
    occurrence: &str,
    p: &Providers,
    work: &Path,
    logs: &Path,
) -> ActionRan {
    let started = Instant::now();
    let undecided = |cause: HarnessCause, why: String| ActionRan {
        ran: Ran {
            undecided: Some((cause, why)),
            millis: started.elapsed().as_millis() as u64,
            ..Ran::default()
        },
        beyond_reach: None,
    };
    let Some(mcp) = p.mcp.as_ref() else {
        return undecided(HarnessCause::Unreachable, "fake-mcp is not running".into());
    };
    mcp.reset();
    // Only this action's requests to the control routes count (the log spans the run).
    let control_before = mcp.control_attempts().len();
    if kind == Some(McpKind::LostReplyLaggingLookup) {
        mcp.set_lag(LAG);
    }
    let hold = format!("{occurrence}-call");
    let writes = write_tools();
    if let Some(k) = kind {
        for tool in &writes {
            let rule = Rule {
                tool: Some(tool.clone()),
                fault: k.fault(&hold),
                nth: 1,
                times: 1,
            };
            if let Err(e) = mcp.add_rule(rule) {
                // A plan fake-mcp refuses is aocheck's own defect: undecided.
                return undecided(
                    HarnessCause::Undecided,
                    format!("fault plan: {}", e.join("; ")),
                );
            }
        }
    }
    let driven = steps::drive(d, p, mcp, kind, occurrence, &hold, work, logs, started).await;
    let (mut cx, result) = match driven {
        Ok(x) => x,
        Err((cause, why)) => return undecided(cause, why),
    };
    // A call still parked (sent after the hold's one release, by an instance now stopped) is
    // refused and recorded before the ledger is read: it is an entry like any other.
    if mcp.wait_parked(&hold, 1, std::time::Duration::ZERO).await {
        let n = crate::providers::holds::hold(mcp, &hold, std::time::Duration::from_secs(10))
            .release(provider_model::holds::ReleaseAction::Reject { status: 503 })
            .await;
        cx.t.step(format!(
            "a write call was still held at fake-mcp when the case ended: refused ({})",
            match n {
                Ok(n) => format!("{n} let go"),
                Err(e) => e.to_string(),
            }
        ));
    }
    let ledger = cx.tell_calls();
    let mine: Vec<&provider_model::mcp::ledger::Call> = ledger
        .calls
        .iter()
        .filter(|c| of_action(d, &writes, occurrence, c))
        .collect();
    // The fault acted where a write call of this action met it (fake-mcp records the fault on
    // the call it took), and what the harness does around it happened.
    let met = mine.iter().any(|c| c.fault.is_some());
    let fault = kind.map(|k| FaultReport {
        what: format!(
            "action {occurrence}: its first write call meets {} ({})",
            k.name(),
            k.fault(&hold)
        ),
        fired: met
            && match k {
                McpKind::RestartAfterCommit => cx.restarted,
                McpKind::ReplayWhileHeld => cx.replay_answer.is_some(),
                _ => true,
            },
    });
    let mut ran = Ran {
        steps: std::mem::take(&mut cx.t.steps),
        faults: fault.into_iter().collect(),
        millis: cx.t.ms(),
        beats: std::mem::take(&mut cx.t.beats),
        ..Ran::default()
    };
    let reached = mcp.control_attempts();
    if let Some(why) = crate::check::credentials::control_reached(&[(
        "fake-mcp",
        reached.get(control_before..).unwrap_or(&[]),
    )]) {
        ran.undecided = Some((HarnessCause::Undecided, why));
    }
    // The ledger is judged even where the watch could not finish: a second call is a failure
    // whatever else happened; only a case with nothing failed is undecided.
    let (seen, failed_watch) = match result {
        Ok(seen) => (seen, None),
        Err(e) => (Vec::new(), Some(e)),
    };
    let o = seen.last().map(|(o, _)| o.clone());
    let reported = super::drive::reported(
        occurrence,
        seen.iter().map(|(o, n)| (o, *n)),
        kind.map_or(Ambiguity::None, McpKind::ambiguity),
        0,
        "",
    );
    let owner = |k: Option<&str>| owner_of(d, k);
    let owner_ref: Option<crate::check::mcp::CallOwner<'_>> =
        d.file.attribution.as_ref().map(|_| &owner as _);
    let vars = super::drive::Vars {
        occurrence: occurrence.to_string(),
        ..super::drive::Vars::default()
    };
    let expected = d
        .file
        .drive
        .effect
        .as_ref()
        .map(|e| crate::check::mcp::Expected {
            tool: e.tool.clone(),
            arguments: match super::drive::render_body(
                &serde_json::Value::Object(e.arguments.clone()),
                &vars,
            ) {
                serde_json::Value::Object(m) => m,
                _ => serde_json::Map::new(),
            },
        });
    ran.findings = crate::check::mcp::judge(
        &ledger,
        &writes,
        owner_ref,
        std::slice::from_ref(&reported),
        &[expected],
        &mut ran.facts,
    );
    ran.entries = vec![mine.len() as u32];
    ran.effects = vec![mine.iter().filter(|c| c.effect.is_some()).count() as u32];
    ran.reported = vec![reported];
    ran.observed = vec![o];
    if let Some((cause, why)) = failed_watch {
        if ran.findings.is_empty() {
            ran.undecided = Some((cause, why));
        } else {
            ran.steps
                .push(format!("also (it could not have passed): {why}"));
        }
    }
    ActionRan {
        ran,
        beyond_reach: None,
    }
}

/// Why this deploy file cannot take a case's fault (`None`: it can): every deploy file of
/// `provider: mcp` takes every one.
pub fn cannot_take(_d: &Loaded, _kind: McpKind) -> Option<String> {
    None
}

/// A service's schedule of actions.
pub type CallSchedule = actions::ActionSchedule<McpKind>;
/// A service's schedules of MCP tool calls, for `deploy explore`.
pub type Calls<'a> = actions::Actions<'a, McpKind>;

impl ActionKind for McpKind {
    fn all() -> &'static [Self] {
        McpKind::ALL
    }
    fn name(self) -> &'static str {
        McpKind::name(self)
    }
    fn cannot_take(self, d: &Loaded) -> Option<String> {
        cannot_take(d, self)
    }
    fn ambiguous(self) -> bool {
        self.ambiguity() != Ambiguity::None
    }
    fn occurrence(seed: u64, index: u64, k: u64) -> String {
        format!("x{seed}r{index}a{k}")
    }
    const CASE: &'static str = "MCP-SCHEDULE";
    const WHAT: &'static str = "a service's MCP tool-call actions";
    async fn run_action(
        d: &Loaded,
        kind: Option<Self>,
        occurrence: &str,
        p: &Providers,
        work: &Path,
        logs: &Path,
    ) -> ActionRan {
        run_action(d, kind, occurrence, p, work, logs).await
    }
}

/// Reads a schedule file of a service of MCP tool calls, every defect named with its step.
pub fn read_schedule(d: &Loaded, f: &Path) -> Result<CallSchedule, String> {
    actions::read_schedule(d, f)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind has a case, a fault fake-mcp accepts on every write tool, and its name back.
    #[test]
    fn every_kind_has_a_case_and_a_fault_fake_mcp_takes() {
        let h = crate::providers::Mcp::new(provider_model::mcp::tools::default_tools())
            .expect("the default tools");
        for k in McpKind::ALL {
            assert!(CASES.iter().any(|c| c.kind == *k), "{k} has no case");
            assert_eq!(McpKind::parse(k.name()), Some(*k));
            for tool in write_tools() {
                let r = Rule {
                    tool: Some(tool),
                    fault: k.fault("h"),
                    nth: 1,
                    times: 1,
                };
                assert!(h.add_rule(r).is_ok(), "{k}");
            }
        }
        assert_eq!(write_tools().len(), 3);
    }
}
