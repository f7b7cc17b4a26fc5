//! The words cases, the runner and the reports share, defined once: an occurrence's state, its
//! outcome, its authority accounting and the missing-knowledge flags. The case validator accepts
//! exactly these, the runner produces exactly these, the report model carries them, and the case
//! schema (`cases/schema/case.schema.json`) is checked against them by a test.

use serde::{Deserialize, Serialize};

macro_rules! words {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $v:ident = $s:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum $name {
            $($(#[$vm])* $v),+
        }

        impl $name {
            /// Every word, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$v),+];

            /// The word as cases and reports write it.
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$v => $s),+
                }
            }

            pub fn parse(s: &str) -> Option<Self> {
                Self::ALL.iter().copied().find(|w| w.name() == s)
            }

            /// Every word, for messages (`a, b or c`).
            pub fn listed() -> String {
                let names: Vec<&str> = Self::ALL.iter().map(|w| w.name()).collect();
                match names.split_last() {
                    Some((last, rest)) if !rest.is_empty() => {
                        format!("{} or {last}", rest.join(", "))
                    }
                    _ => names.join(""),
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

pub(crate) use words;

words!(
    /// Where an occurrence stands.
    State {
        /// Created or reserved, not entered.
        Pending = "pending",
        /// Entered, and no authenticated, interpreted evidence establishes the outcome.
        Unresolved = "unresolved",
        Resolved = "resolved",
        /// Released before entry, with a tombstone.
        Released = "released",
    }
);

words!(
    /// What an established outcome is.
    Outcome {
        Success = "success",
        NotAccepted = "not_accepted",
        FinalFailure = "final_failure",
        FinalFailureNoEffect = "final_failure_no_effect",
    }
);

words!(
    /// The accounting of an occurrence's authority.
    Authority {
        None = "none",
        Held = "held",
        Consumed = "consumed",
        Released = "released",
    }
);

words!(
    /// A missing-knowledge flag: the sources cannot establish the outcome (never a failure).
    Flag {
        Unauthenticated = "unauthenticated",
        UnboundAttempt = "unbound_attempt",
        Unmapped = "unmapped",
        NotFound = "not_found",
        BeyondRetention = "beyond_retention",
        IncompleteListing = "incomplete_listing",
        Stale = "stale",
        HttpStatusOnly = "http_status_only",
        Transport = "transport",
        Undecodable = "undecodable",
        Conflicting = "conflicting",
        NoEntryRecorded = "no_entry_recorded",
        CompositionUnsupported = "composition_unsupported",
    }
);

/// The kinds of remedy AOC-REQ-012 names ("Any adjustment, replacement attempt, compensation or
/// new allocation", and the refund or reversal that never restores consumed authority). Each
/// needs its own native authorization, a link to the original and its own replay-protected
/// identity; the draft asks nothing more of one kind than of another.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RemedyKind {
    #[default]
    Refund,
    Reversal,
    Compensation,
    Adjustment,
    ReplacementAttempt,
    NewAllocation,
}

impl RemedyKind {
    pub fn name(self) -> &'static str {
        match self {
            RemedyKind::Refund => "refund",
            RemedyKind::Reversal => "reversal",
            RemedyKind::Compensation => "compensation",
            RemedyKind::Adjustment => "adjustment",
            RemedyKind::ReplacementAttempt => "replacement_attempt",
            RemedyKind::NewAllocation => "new_allocation",
        }
    }
}

/// Caller-selected labels a creation carries. None of them alone identifies an occurrence
/// (AOC-REQ-002); `action` is the action a durable action fence keys on.
#[derive(Clone, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateLabels {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant_id: Option<String>,
    /// The action, as the caller names it (the fence keys on its digest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aadp_request_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bcr_operation_id: Option<String>,
}

impl CreateLabels {
    pub fn is_empty(&self) -> bool {
        *self == CreateLabels::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_round_trips_through_serde_and_its_name() {
        fn check<T: Copy + PartialEq + std::fmt::Debug + Serialize>(
            all: &[T],
            name: fn(T) -> &'static str,
            parse: fn(&str) -> Option<T>,
        ) {
            for w in all {
                assert_eq!(
                    serde_json::to_value(w).expect("json"),
                    serde_json::Value::from(name(*w))
                );
                assert_eq!(parse(name(*w)), Some(*w));
            }
            assert_eq!(parse("compelted"), None);
        }
        check(State::ALL, State::name, State::parse);
        check(Outcome::ALL, Outcome::name, Outcome::parse);
        check(Authority::ALL, Authority::name, Authority::parse);
        check(Flag::ALL, Flag::name, Flag::parse);
        assert_eq!(State::listed(), "pending, unresolved, resolved or released");
    }
}
