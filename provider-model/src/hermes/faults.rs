//! Fault plans for the run routes: rules target "the Nth request to route R (for session S)".

use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Route {
    Start,
    Status,
    Events,
    Approval,
    Stop,
    Steer,
    Any,
}

impl Route {
    pub fn label(self) -> &'static str {
        match self {
            Route::Start => "start",
            Route::Status => "status",
            Route::Events => "events",
            Route::Approval => "approval",
            Route::Stop => "stop",
            Route::Steer => "steer",
            Route::Any => "any",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Fault {
    /// Refuse before anything happens (no run, no approval, no stop).
    Reject {
        status: u16,
    },
    /// Do it (run created, approval applied, stop requested), then answer with this 5xx.
    CommitThen {
        status: u16,
    },
    /// Do it, then close the connection with no reply.
    CommitThenDrop,
    /// Start the run but answer 202 without a `run_id`.
    StartWithoutRunId,
    /// Answer the events request with 404 although the stream exists.
    Events404,
    /// Garble the `frame`-th data frame of the stream (1-based).
    GarbleFrame {
        frame: u32,
    },
    /// Close the stream after `after` data frames, with no `: stream closed`.
    DropStream {
        after: u32,
    },
    /// Accept the stop, but the executor never exits: the run stays `stopping`.
    StopStuck,
    /// Accept the stop, but the run completes first: `completed` stays authoritative.
    CompleteRacesStop,
    /// A server restart before the request: in-memory runs are lost (GET 404); the ledger survives.
    Forget,
    Delay {
        ms: u64,
    },
    /// Park the request until `/_control/release` names this hold.
    Hold {
        name: String,
    },
}

/// A fault's kind: its `type` in a plan, without its parameters. The one vocabulary of Hermes
/// faults.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Reject,
    CommitThen,
    CommitThenDrop,
    StartWithoutRunId,
    Events404,
    GarbleFrame,
    DropStream,
    StopStuck,
    CompleteRacesStop,
    Forget,
    Delay,
    Hold,
}

impl Kind {
    /// Every kind, in the order of [`Fault`]'s variants.
    pub const ALL: [Kind; 12] = [
        Kind::Reject,
        Kind::CommitThen,
        Kind::CommitThenDrop,
        Kind::StartWithoutRunId,
        Kind::Events404,
        Kind::GarbleFrame,
        Kind::DropStream,
        Kind::StopStuck,
        Kind::CompleteRacesStop,
        Kind::Forget,
        Kind::Delay,
        Kind::Hold,
    ];

    /// As a plan spells it (`type`).
    pub fn label(self) -> &'static str {
        match self {
            Kind::Reject => "reject",
            Kind::CommitThen => "commit_then",
            Kind::CommitThenDrop => "commit_then_drop",
            Kind::StartWithoutRunId => "start_without_run_id",
            Kind::Events404 => "events404",
            Kind::GarbleFrame => "garble_frame",
            Kind::DropStream => "drop_stream",
            Kind::StopStuck => "stop_stuck",
            Kind::CompleteRacesStop => "complete_races_stop",
            Kind::Forget => "forget",
            Kind::Delay => "delay",
            Kind::Hold => "hold",
        }
    }

    /// The routes a fault of this kind can apply to.
    pub fn applies(self, r: Route) -> bool {
        match self {
            Kind::StartWithoutRunId => r == Route::Start,
            Kind::Events404 | Kind::GarbleFrame | Kind::DropStream => r == Route::Events,
            Kind::StopStuck | Kind::CompleteRacesStop => r == Route::Stop,
            Kind::CommitThen | Kind::CommitThenDrop => {
                matches!(
                    r,
                    Route::Start | Route::Approval | Route::Stop | Route::Steer
                )
            }
            _ => true,
        }
    }
}

impl Fault {
    /// Its kind.
    pub fn kind(&self) -> Kind {
        match self {
            Fault::Reject { .. } => Kind::Reject,
            Fault::CommitThen { .. } => Kind::CommitThen,
            Fault::CommitThenDrop => Kind::CommitThenDrop,
            Fault::StartWithoutRunId => Kind::StartWithoutRunId,
            Fault::Events404 => Kind::Events404,
            Fault::GarbleFrame { .. } => Kind::GarbleFrame,
            Fault::DropStream { .. } => Kind::DropStream,
            Fault::StopStuck => Kind::StopStuck,
            Fault::CompleteRacesStop => Kind::CompleteRacesStop,
            Fault::Forget => Kind::Forget,
            Fault::Delay { .. } => Kind::Delay,
            Fault::Hold { .. } => Kind::Hold,
        }
    }

    /// The routes this fault can apply to.
    pub fn applies_to(&self, r: Route) -> bool {
        self.kind().applies(r)
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Reject { status } => write!(f, "reject({status})"),
            Fault::CommitThen { status } => write!(f, "commit_then({status})"),
            Fault::CommitThenDrop => f.write_str("commit_then_drop"),
            Fault::StartWithoutRunId => f.write_str("start_without_run_id"),
            Fault::Events404 => f.write_str("events_404"),
            Fault::GarbleFrame { frame } => write!(f, "garble_frame({frame})"),
            Fault::DropStream { after } => write!(f, "drop_stream({after})"),
            Fault::StopStuck => f.write_str("stop_stuck"),
            Fault::CompleteRacesStop => f.write_str("complete_races_stop"),
            Fault::Forget => f.write_str("forget"),
            Fault::Delay { ms } => write!(f, "delay({ms})"),
            Fault::Hold { name } => write!(f, "hold({name})"),
        }
    }
}

use crate::rules::one;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    pub route: Route,
    #[serde(default = "one")]
    pub nth: u32,
    #[serde(default = "one")]
    pub times: u32,
    #[serde(default)]
    pub session_id: Option<String>,
    pub fault: Fault,
}

/// A plan: rules in priority order.
pub type Plan = crate::rules::Plan<Rule>;

/// A rule with its counters.
pub type RuleState = crate::rules::RuleState<Rule>;

crate::targeted!(Rule);

impl crate::rules::Check for Rule {
    /// The checks of this fake's faults (the ordinals are checked by the plan).
    fn check(&self, at: &str, out: &mut crate::rules::Defects) {
        let r = self;
        match &r.fault {
            Fault::Reject { status } => out.reject(at, *status),
            Fault::CommitThen { status } => out.commit_then(at, *status),
            Fault::GarbleFrame { frame: 0 } => {
                out.push(format!("{at}.fault.frame: frames count from 1"))
            }
            Fault::Delay { ms } => out.delay(at, *ms),
            Fault::Hold { name } => out.hold(at, name),
            _ => {}
        }
        if r.route != Route::Any && !r.fault.applies_to(r.route) {
            out.push(format!(
                "{at}.route: {} does not apply to {}",
                r.fault,
                r.route.label()
            ));
        }
    }
}

/// Counts the request against matching rules; returns the first firing fault.
pub fn select(states: &mut [RuleState], route: Route, session: Option<&str>) -> Option<Fault> {
    crate::rules::select(
        states,
        |r| {
            (r.route == Route::Any || r.route == route)
                && r.session_id.as_deref().is_none_or(|x| Some(x) == session)
                && r.fault.applies_to(route)
        },
        |_| true,
    )
    .map(|(_, r)| r.fault.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kind vocabulary is the plan's: every kind's label is the `type` serde writes, `ALL`
    /// lists each variant once, and a fault applies where its kind does.
    #[test]
    fn every_kind_is_spelled_as_the_plan_spells_it() {
        let samples = [
            Fault::Reject { status: 503 },
            Fault::CommitThen { status: 500 },
            Fault::CommitThenDrop,
            Fault::StartWithoutRunId,
            Fault::Events404,
            Fault::GarbleFrame { frame: 1 },
            Fault::DropStream { after: 1 },
            Fault::StopStuck,
            Fault::CompleteRacesStop,
            Fault::Forget,
            Fault::Delay { ms: 1 },
            Fault::Hold { name: "h".into() },
        ];
        let kinds: Vec<Kind> = samples.iter().map(Fault::kind).collect();
        assert_eq!(kinds, Kind::ALL);
        for f in &samples {
            let v = serde_json::to_value(f).expect("json");
            assert_eq!(v["type"], f.kind().label(), "{f}");
        }
        assert!(Kind::StopStuck.applies(Route::Stop));
        assert!(!Kind::StopStuck.applies(Route::Start));
        assert!(!Kind::CommitThen.applies(Route::Status));
        assert!(Kind::Reject.applies(Route::Events));
    }
}
