//! Fault plans: rules that target "the Nth request of operation K (for key X, for account A)" and
//! the fault each applies. One vocabulary with the harness (GUIDE §5).

use serde::{Deserialize, Serialize};
use std::fmt;

/// The operations a rule can target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    Create,
    Capture,
    Refund,
    Get,
    List,
    /// Confirming a payment intent created unconfirmed (the Stripe dialect): the charge.
    Confirm,
    /// Canceling a payment intent (the Stripe dialect): voids an authorisation.
    Cancel,
    Any,
}

impl Op {
    pub fn label(self) -> &'static str {
        match self {
            Op::Create => "create",
            Op::Capture => "capture",
            Op::Refund => "refund",
            Op::Get => "get",
            Op::List => "list",
            Op::Confirm => "confirm",
            Op::Cancel => "cancel",
            Op::Any => "any",
        }
    }
    pub fn is_effectful(self) -> bool {
        matches!(
            self,
            Op::Create | Op::Capture | Op::Refund | Op::Confirm | Op::Cancel
        )
    }
}

/// How a forged tag is wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ForgeMode {
    /// Signed by a key that is not the published one.
    BadKey,
    /// Correctly signed, but for another account.
    OtherAccount,
}

/// One fault.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Fault {
    /// Refuse before any effect with this status.
    Reject { status: u16 },
    /// Let the effect happen, then answer with this (5xx) status.
    CommitThen { status: u16 },
    /// Let the effect happen, then close the connection with no reply.
    CommitThenDrop,
    /// Wait before processing.
    Delay { ms: u64 },
    /// Process, then send an undecodable body.
    Garble,
    /// Process, then remove this top-level field from the JSON body.
    Omit { field: String },
    /// Process, then send a tag that does not authenticate the reply.
    Forge { mode: ForgeMode },
    /// A provider restart before processing: the volatile idempotency index is lost; payments and
    /// the ledger survive.
    Forget,
    /// Answer a listing with some matching items missing and `complete: false`.
    IncompleteListing,
    /// Before processing, move the target payment (and its idempotency key) beyond retention.
    ExpireRetention,
    /// Park the request before processing until `/_control/release` names this hold.
    Hold { name: String },
}

/// A fault's kind: its `type` in a plan, without its parameters. The one vocabulary of
/// payments faults: case steps, exploration's coverage and the reports all name kinds by it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Reject,
    CommitThen,
    CommitThenDrop,
    Delay,
    Garble,
    Omit,
    Forge,
    Forget,
    IncompleteListing,
    ExpireRetention,
    Hold,
}

impl Kind {
    /// Every kind, in the order of [`Fault`]'s variants.
    pub const ALL: [Kind; 11] = [
        Kind::Reject,
        Kind::CommitThen,
        Kind::CommitThenDrop,
        Kind::Delay,
        Kind::Garble,
        Kind::Omit,
        Kind::Forge,
        Kind::Forget,
        Kind::IncompleteListing,
        Kind::ExpireRetention,
        Kind::Hold,
    ];

    /// As a plan spells it (`type`).
    pub fn label(self) -> &'static str {
        match self {
            Kind::Reject => "reject",
            Kind::CommitThen => "commit_then",
            Kind::CommitThenDrop => "commit_then_drop",
            Kind::Delay => "delay",
            Kind::Garble => "garble",
            Kind::Omit => "omit",
            Kind::Forge => "forge",
            Kind::Forget => "forget",
            Kind::IncompleteListing => "incomplete_listing",
            Kind::ExpireRetention => "expire_retention",
            Kind::Hold => "hold",
        }
    }

    /// Whether a fault of this kind fires on a request of `op` (what [`select`] applies):
    /// effect faults on effectful operations, listing faults on listings, the rest anywhere.
    pub fn applies(self, op: Op) -> bool {
        match self {
            Kind::CommitThen | Kind::CommitThenDrop => op.is_effectful(),
            Kind::IncompleteListing => op == Op::List,
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
            Fault::Delay { .. } => Kind::Delay,
            Fault::Garble => Kind::Garble,
            Fault::Omit { .. } => Kind::Omit,
            Fault::Forge { .. } => Kind::Forge,
            Fault::Forget => Kind::Forget,
            Fault::IncompleteListing => Kind::IncompleteListing,
            Fault::ExpireRetention => Kind::ExpireRetention,
            Fault::Hold { .. } => Kind::Hold,
        }
    }

    /// Whether this fault can make a request wait before its effect (a hold, a delay).
    pub fn waits(&self) -> bool {
        matches!(self, Fault::Hold { .. } | Fault::Delay { .. })
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Reject { status } => write!(f, "reject({status})"),
            Fault::CommitThen { status } => write!(f, "commit_then({status})"),
            Fault::CommitThenDrop => f.write_str("commit_then_drop"),
            Fault::Delay { ms } => write!(f, "delay({ms})"),
            Fault::Garble => f.write_str("garble"),
            Fault::Omit { field } => write!(f, "omit({field})"),
            Fault::Forge { mode } => write!(
                f,
                "forge({})",
                match mode {
                    ForgeMode::BadKey => "bad_key",
                    ForgeMode::OtherAccount => "other_account",
                }
            ),
            Fault::Forget => f.write_str("forget"),
            Fault::IncompleteListing => f.write_str("incomplete_listing"),
            Fault::ExpireRetention => f.write_str("expire_retention"),
            Fault::Hold { name } => write!(f, "hold({name})"),
        }
    }
}

use crate::rules::one;

/// A targeted rule: fires on the `nth` … `nth + times - 1` matching requests.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    pub op: Op,
    /// 1-based ordinal among the requests this rule matches.
    #[serde(default = "one")]
    pub nth: u32,
    /// How many consecutive matches it fires on.
    #[serde(default = "one")]
    pub times: u32,
    /// Only requests of this account.
    #[serde(default)]
    pub account: Option<String>,
    /// Only requests with this idempotency key.
    #[serde(default)]
    pub key: Option<String>,
    pub fault: Fault,
}

/// A plan: rules in priority order.
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
            Fault::Delay { ms } => out.delay(at, *ms),
            Fault::Hold { name } => out.hold(at, name),
            Fault::Omit { field } if field.trim().is_empty() => {
                out.push(format!("{at}.fault.field: name the field to omit"))
            }
            _ => {}
        }
        let effect_only = matches!(r.fault, Fault::CommitThen { .. } | Fault::CommitThenDrop);
        if effect_only && !(r.op.is_effectful() || r.op == Op::Any) {
            out.push(format!(
                "{at}.op: {} needs an effect; use create, capture or refund",
                r.fault
            ));
        }
        if r.fault == Fault::IncompleteListing && !matches!(r.op, Op::List | Op::Any) {
            out.push(format!("{at}.op: incomplete_listing applies to list"));
        }
    }
}

/// Counts the request against every matching rule and returns the fault of the first rule that
/// fires, with its index. Effect faults fire only on effectful operations, listing faults only
/// on listings.
pub fn select(
    states: &mut [RuleState],
    op: Op,
    account: Option<&str>,
    key: Option<&str>,
) -> Option<(usize, Fault)> {
    crate::rules::select(
        states,
        |r| {
            (r.op == Op::Any || r.op == op)
                && r.account.as_deref().is_none_or(|a| Some(a) == account)
                && r.key.as_deref().is_none_or(|k| Some(k) == key)
        },
        |r| r.fault.kind().applies(op),
    )
    .map(|(i, r)| (i, r.fault.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(op: Op, nth: u32, times: u32, key: Option<&str>) -> RuleState {
        RuleState::new(Rule {
            op,
            nth,
            times,
            account: None,
            key: key.map(str::to_string),
            fault: Fault::Reject { status: 503 },
        })
    }

    /// The kind vocabulary is the plan's: every kind's label is the `type` serde writes, and
    /// `ALL` lists each variant once.
    #[test]
    fn every_kind_is_spelled_as_the_plan_spells_it() {
        let samples = [
            Fault::Reject { status: 503 },
            Fault::CommitThen { status: 500 },
            Fault::CommitThenDrop,
            Fault::Delay { ms: 1 },
            Fault::Garble,
            Fault::Omit { field: "id".into() },
            Fault::Forge {
                mode: ForgeMode::BadKey,
            },
            Fault::Forget,
            Fault::IncompleteListing,
            Fault::ExpireRetention,
            Fault::Hold { name: "h".into() },
        ];
        let kinds: Vec<Kind> = samples.iter().map(Fault::kind).collect();
        assert_eq!(kinds, Kind::ALL);
        for f in &samples {
            let v = serde_json::to_value(f).expect("json");
            assert_eq!(v["type"], f.kind().label(), "{f}");
        }
    }

    #[test]
    fn fires_on_the_nth_match_for_times() {
        let mut s = vec![rule(Op::Create, 2, 2, Some("k"))];
        let fired: Vec<bool> = (0..5)
            .map(|_| select(&mut s, Op::Create, Some("a"), Some("k")).is_some())
            .collect();
        assert_eq!(fired, [false, true, true, false, false]);
        assert!(select(&mut s, Op::Create, Some("a"), Some("other")).is_none());
        assert_eq!(s[0].seen, 5);
    }

    #[test]
    fn validation_names_rule_and_field() {
        let plan = Plan {
            rules: vec![
                Rule {
                    op: Op::Get,
                    nth: 0,
                    times: 1,
                    account: None,
                    key: None,
                    fault: Fault::CommitThen { status: 200 },
                },
                Rule {
                    op: Op::Create,
                    nth: 1,
                    times: 1,
                    account: None,
                    key: None,
                    fault: Fault::IncompleteListing,
                },
            ],
        };
        let d = plan.validate().join("\n");
        for needle in [
            "rules[0].nth",
            "rules[0].fault.status",
            "rules[0].op",
            "rules[1].op",
        ] {
            assert!(d.contains(needle), "{needle} in {d}");
        }
    }
}
