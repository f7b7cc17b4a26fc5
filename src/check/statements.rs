//! What an implementation states about itself, as data (issue 37, GUIDE §4 "claims are data,
//! not prose"): `init`'s `statements`, a closed vocabulary whose every field is judged exactly.
//! Free text (`claims`) cannot be judged by a word list; it is shown for review and leaves
//! AOC-REQ-013 undecided (`Checker::claims`), never passed.
//!
//! Each statement is about one thing the draft constrains what may be said of:
//! - `fencing` (§4.6): "Fencing inside the coordination domain MUST NOT be described as revoking
//!   credentials or stopping paths outside that domain" (AOC-REQ-006).
//! - `admission` (§4.1): "A profile instance MUST NOT claim exclusive admission control beyond
//!   paths mediated by that domain" (AOC-REQ-001).
//! - `equivalence` (§4.2): native identifiers mapped to one occurrence keep "their types and
//!   native meanings"; an implementation "MUST NOT claim semantic equivalence merely because
//!   values are stored together or carry equal text" (AOC-REQ-002).
//! - `migration`, `succession_receipt`, `state_machines`, `evidence_format` (§4.13): the four
//!   claims AOC-REQ-013 forbids (AOC-REQ-013).
//!
//! A statement that says the permitted thing is one fact about its requirement; one that says
//! the forbidden thing fails it.

use crate::aoc::requirement::Req;
use serde::{Deserialize, Serialize};

/// A native identifier an occurrence may be mapped to (§4.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NativeId {
    OccurrenceId,
    AadpRequestId,
    AadpPermitId,
    SuccessionReceiptId,
    BcrOperationId,
    ProviderKey,
    ProviderRef,
}

/// One statement of the closed vocabulary.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "about", rename_all = "snake_case", deny_unknown_fields)]
pub enum Statement {
    /// What executor-generation fencing does.
    Fencing {
        revokes_credentials: bool,
        stops_paths_outside_domain: bool,
    },
    /// Which paths the domain's admission control is exclusive over.
    Admission { exclusive_over: AdmissionScope },
    /// Two native identifiers stored with one occurrence, and whether they are claimed to mean
    /// the same thing.
    Equivalence {
        between: [NativeId; 2],
        semantic: bool,
    },
    /// Whether copying an operation record transfers exclusive ownership of a live ledger.
    Migration {
        copy_transfers_exclusive_ownership: bool,
    },
    /// Whether a Succession Receipt fences a provider path.
    SuccessionReceipt { fences_provider_path: bool },
    /// Whether AADP and BCR state machines are interchangeable.
    StateMachines { aadp_bcr_interchangeable: bool },
    /// Evidence formats the implementation holds mandatory (EP, AADP, Succession Receipt, AEB,
    /// BCR, provider-native or local: §5 makes none mandatory).
    EvidenceFormat { mandatory: Vec<String> },
}

/// The paths admission control is claimed exclusive over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AdmissionScope {
    /// The paths the coordination domain mediates.
    MediatedPaths,
    /// Every path to the provider, bypass paths included.
    AllPaths,
}

impl Statement {
    /// The requirement the statement is about, and why it breaks it, if it does.
    pub fn judge(&self) -> (Req, Option<String>) {
        use Statement as S;
        match self {
            S::Fencing {
                revokes_credentials,
                stops_paths_outside_domain,
            } => (
                Req::R006,
                (*revokes_credentials || *stops_paths_outside_domain).then(|| {
                    "describes executor fencing as revoking credentials or stopping paths outside the coordination domain (§4.6 forbids it)".to_string()
                }),
            ),
            S::Admission { exclusive_over } => (
                Req::R001,
                (*exclusive_over == AdmissionScope::AllPaths).then(|| {
                    "claims exclusive admission control over all paths, beyond those the domain mediates (§4.1 forbids it)".to_string()
                }),
            ),
            // §4.2 lets a stable native operation identifier *be* the occurrence identifier; what
            // it forbids is claiming two native identifiers mean the same thing.
            S::Equivalence { between, semantic } => (
                Req::R002,
                (*semantic
                    && between[0] != between[1]
                    && !between.contains(&NativeId::OccurrenceId))
                .then(|| {
                    format!(
                        "claims {:?} and {:?} are semantically equivalent: native identifiers keep their types and meanings (§4.2)",
                        between[0], between[1]
                    )
                }),
            ),
            S::Migration {
                copy_transfers_exclusive_ownership,
            } => (
                Req::R013,
                copy_transfers_exclusive_ownership.then(|| {
                    "claims that copying an operation record transfers exclusive ownership of a live ledger".to_string()
                }),
            ),
            S::SuccessionReceipt {
                fences_provider_path,
            } => (
                Req::R013,
                fences_provider_path
                    .then(|| "claims that a Succession Receipt fences a provider path".to_string()),
            ),
            S::StateMachines {
                aadp_bcr_interchangeable,
            } => (
                Req::R013,
                aadp_bcr_interchangeable
                    .then(|| "claims that AADP and BCR state machines are interchangeable".to_string()),
            ),
            // §4.13 forbids claiming an EP evidence format mandatory; §5's "no … format is
            // mandatory" for the others is no MUST, so only EP fails.
            S::EvidenceFormat { mandatory } => {
                let ep: Vec<&str> = mandatory
                    .iter()
                    .map(String::as_str)
                    .filter(|f| {
                        let f = f.trim().to_ascii_lowercase();
                        f == "ep" || f.starts_with("ep ") || f.starts_with("ep-") || f.starts_with("ep/")
                    })
                    .collect();
                (
                    Req::R013,
                    (!ep.is_empty()).then(|| {
                        format!("holds EP evidence format(s) {} mandatory", ep.join(", "))
                    }),
                )
            }
        }
    }
}

/// The statements the reference makes: each permitted one, said explicitly.
pub fn reference_statements() -> Vec<Statement> {
    vec![
        Statement::Fencing {
            revokes_credentials: false,
            stops_paths_outside_domain: false,
        },
        Statement::Admission {
            exclusive_over: AdmissionScope::MediatedPaths,
        },
        Statement::Equivalence {
            between: [NativeId::OccurrenceId, NativeId::ProviderKey],
            semantic: false,
        },
        Statement::Migration {
            copy_transfers_exclusive_ownership: false,
        },
        Statement::SuccessionReceipt {
            fences_provider_path: false,
        },
        Statement::StateMachines {
            aadp_bcr_interchangeable: false,
        },
        Statement::EvidenceFormat {
            mandatory: Vec::new(),
        },
    ]
}

/// Reads `init`'s `statements`, naming the index and the fix of any that is not in the
/// vocabulary.
pub fn decode(v: &serde_json::Value) -> Result<Vec<Statement>, String> {
    match v {
        serde_json::Value::Null => Ok(Vec::new()),
        serde_json::Value::Array(a) => a
            .iter()
            .enumerate()
            .map(|(i, s)| {
                serde_json::from_value(s.clone()).map_err(|e| {
                    format!(
                        "`statements[{i}]`: {e} (each statement is an object whose `about` is fencing, admission, equivalence, migration, succession_receipt, state_machines or evidence_format, with exactly that statement's fields: docs/sut-protocol.md)"
                    )
                })
            })
            .collect(),
        _ => Err("`statements` must be a list of objects".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Both directions, one row per statement: the permitted value is a fact and passes, the
    /// forbidden one fails its requirement.
    #[rstest::rstest]
    #[case::fencing_in_domain(json!({"about": "fencing", "revokes_credentials": false, "stops_paths_outside_domain": false}), Req::R006, false)]
    #[case::fencing_revokes(json!({"about": "fencing", "revokes_credentials": true, "stops_paths_outside_domain": false}), Req::R006, true)]
    #[case::fencing_stops_paths(json!({"about": "fencing", "revokes_credentials": false, "stops_paths_outside_domain": true}), Req::R006, true)]
    #[case::admission_mediated(json!({"about": "admission", "exclusive_over": "mediated_paths"}), Req::R001, false)]
    #[case::admission_all(json!({"about": "admission", "exclusive_over": "all_paths"}), Req::R001, true)]
    #[case::stored_together(json!({"about": "equivalence", "between": ["aadp_request_id", "bcr_operation_id"], "semantic": false}), Req::R002, false)]
    #[case::claimed_equivalent(json!({"about": "equivalence", "between": ["aadp_request_id", "bcr_operation_id"], "semantic": true}), Req::R002, true)]
    #[case::bcr_id_as_occurrence_id(json!({"about": "equivalence", "between": ["occurrence_id", "bcr_operation_id"], "semantic": true}), Req::R002, false)]
    #[case::no_migration(json!({"about": "migration", "copy_transfers_exclusive_ownership": false}), Req::R013, false)]
    #[case::migration(json!({"about": "migration", "copy_transfers_exclusive_ownership": true}), Req::R013, true)]
    #[case::receipt_fences(json!({"about": "succession_receipt", "fences_provider_path": true}), Req::R013, true)]
    #[case::interchangeable(json!({"about": "state_machines", "aadp_bcr_interchangeable": true}), Req::R013, true)]
    #[case::nothing_mandatory(json!({"about": "evidence_format", "mandatory": []}), Req::R013, false)]
    #[case::ep_mandatory(json!({"about": "evidence_format", "mandatory": ["EP"]}), Req::R013, true)]
    #[case::local_mandatory(json!({"about": "evidence_format", "mandatory": ["local"]}), Req::R013, false)]
    #[case::ep_versioned(json!({"about": "evidence_format", "mandatory": ["EP-05"]}), Req::R013, true)]
    #[case::ep_by_path(json!({"about": "evidence_format", "mandatory": ["ep/json"]}), Req::R013, true)]
    #[case::ep_in_words(json!({"about": "evidence_format", "mandatory": ["EP envelope"]}), Req::R013, true)]
    #[case::a_word_starting_ep(json!({"about": "evidence_format", "mandatory": ["epoch-log"]}), Req::R013, false)]
    fn each_statement_is_judged_exactly(
        #[case] v: serde_json::Value,
        #[case] req: Req,
        #[case] breaks: bool,
    ) {
        let s = decode(&json!([v])).expect("statement");
        let (r, why) = s[0].judge();
        assert_eq!(r, req);
        assert_eq!(why.is_some(), breaks, "{why:?}");
    }

    /// Outside the vocabulary is refused, naming the statement and the fix: an unknown `about`,
    /// a field another statement has, a word in place of a boolean.
    #[rstest::rstest]
    #[case(json!([{"about": "teleportation"}]), "statements[0]")]
    #[case(json!([{"about": "fencing", "revokes_credentials": false, "stops_paths_outside_domain": false, "note": "x"}]), "statements[0]")]
    #[case(json!([{"about": "admission", "exclusive_over": "mediated_paths"}, {"about": "fencing", "revokes_credentials": "no", "stops_paths_outside_domain": false}]), "statements[1]")]
    #[case(json!({"about": "fencing"}), "must be a list")]
    fn a_statement_outside_the_vocabulary_is_refused(
        #[case] v: serde_json::Value,
        #[case] needle: &str,
    ) {
        let e = decode(&v).expect_err("refused");
        assert!(e.contains(needle), "{e}");
    }

    #[test]
    fn the_reference_says_only_what_is_permitted() {
        for s in reference_statements() {
            assert_eq!(s.judge().1, None, "{s:?}");
            let v = serde_json::to_value(&s).expect("json");
            assert_eq!(decode(&json!([v])).expect("round trip"), vec![s]);
        }
    }
}
