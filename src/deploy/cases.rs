//! The faults that make sense at a deployment's boundary ([`Kind`]: each one provider fault
//! and what the harness does around it), the deployment cases built on them ([`CASES`]), and
//! the requirements this boundary cannot judge ([`NEEDS_HISTORY`]).

use super::file::Loaded;
use crate::aoc::requirement::Req;
use crate::check::deploy::Ambiguity;
use provider_model::payments::faults::Fault;
use serde::{Deserialize, Serialize};

crate::vocab::words!(
    /// The faults that make sense at a deployment's boundary: each one provider fault
    /// ([`Kind::fault`], in the provider model's vocabulary) and what the harness does around it.
    Kind {
        /// The instance is killed while the provider holds its entry.
        CrashAtHold = "crash_at_hold",
        LostReply = "lost_reply",
        ErrorAfterCommit = "error_after_commit",
        /// The same order again while the first entry is held.
        Resubmit = "resubmit",
        /// A second instance takes over from one killed at the hold (two instances).
        Takeover = "takeover",
        /// A 5xx after commit, then the real event late and twice, and a forged failure first
        /// (a webhook endpoint).
        Webhooks = "webhooks",
    }
);

#[derive(Debug)]
pub struct DeployCase {
    pub id: &'static str,
    pub title: &'static str,
    pub kind: Kind,
    pub requirements: &'static [Req],
}

pub const CASES: [DeployCase; 6] = [
    DeployCase {
        id: "DEPLOY-001",
        title: "The instance is killed while the provider holds its entry; the provider then commits",
        kind: Kind::CrashAtHold,
        requirements: &[Req::R010, Req::R002, Req::R011],
    },
    DeployCase {
        id: "DEPLOY-002",
        title: "The provider commits and the reply is lost (connection closed)",
        kind: Kind::LostReply,
        requirements: &[Req::R010, Req::R011, Req::R009],
    },
    DeployCase {
        id: "DEPLOY-003",
        title: "The provider commits and answers 500",
        kind: Kind::ErrorAfterCommit,
        requirements: &[Req::R010, Req::R011, Req::R009],
    },
    DeployCase {
        id: "DEPLOY-004",
        title: "The same order is submitted again while its entry is held at the provider",
        kind: Kind::Resubmit,
        requirements: &[Req::R010, Req::R002, Req::R011],
    },
    DeployCase {
        id: "DEPLOY-005",
        title: "A second instance takes over from one killed while the provider holds its entry",
        kind: Kind::Takeover,
        requirements: &[Req::R010, Req::R011],
    },
    DeployCase {
        id: "DEPLOY-006",
        title: "A 5xx after commit; the real webhook comes late and twice, a forged failure first",
        kind: Kind::Webhooks,
        requirements: &[Req::R010, Req::R011, Req::R009],
    },
];

/// The requirements that need the occurrence's history, which a business API does not show.
pub const NEEDS_HISTORY: [Req; 9] = [
    Req::R001,
    Req::R003,
    Req::R004,
    Req::R005,
    Req::R006,
    Req::R007,
    Req::R008,
    Req::R012,
    Req::R013,
];

impl Kind {
    pub fn fault(self, hold: &str) -> Fault {
        match self {
            Kind::CrashAtHold | Kind::Resubmit | Kind::Takeover => {
                Fault::Hold { name: hold.into() }
            }
            Kind::LostReply => Fault::CommitThenDrop,
            Kind::ErrorAfterCommit | Kind::Webhooks => Fault::CommitThen { status: 500 },
        }
    }
    pub fn ambiguity(self) -> Ambiguity {
        match self {
            Kind::LostReply => Ambiguity::Dropped,
            Kind::ErrorAfterCommit => Ambiguity::ErrorAfterCommit,
            Kind::Webhooks => Ambiguity::ForgedEvent,
            _ => Ambiguity::None,
        }
    }
    /// Whether a deployment with `instances` instances and (or without) a webhook endpoint can
    /// take it.
    pub fn available(self, instances: u32, webhooks: bool) -> bool {
        match self {
            Kind::Takeover => instances >= 2,
            Kind::Webhooks => webhooks,
            _ => true,
        }
    }
}

/// Why this deploy file cannot take a fault (`None`: it can).
pub fn cannot_take(d: &Loaded, kind: Kind) -> Option<String> {
    match kind {
        Kind::Webhooks if d.file.webhook.is_none() => {
            Some("the deploy file declares no `webhook`: the service receives no events".into())
        }
        Kind::Takeover if d.file.service.instances < 2 => Some(format!(
            "service.instances is {}: a takeover needs 2",
            d.file.service.instances
        )),
        _ => None,
    }
}
