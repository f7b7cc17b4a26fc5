//! AOC §3, §5 and AOC-REQ-013: what the domain does not cover, declared as data that reports
//! disclose, and the composition settings it refuses to claim.
//!
//! Bypass paths are never "fenced": the type has no such field, because fencing inside the domain
//! revokes no credential and stops no outside path (AOC-REQ-006).

use serde::{Deserialize, Serialize};

/// Kinds of path that reach the provider without the domain (AOC §3).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, Debug)]
#[serde(rename_all = "snake_case")]
pub enum BypassKind {
    Direct,
    Administrator,
    BreakGlass,
    Queued,
    AlternateProtocol,
    SystemOfRecord,
}

impl BypassKind {
    pub const ALL: [BypassKind; 6] = [
        BypassKind::Direct,
        BypassKind::Administrator,
        BypassKind::BreakGlass,
        BypassKind::Queued,
        BypassKind::AlternateProtocol,
        BypassKind::SystemOfRecord,
    ];
}

/// One disclosed bypass path.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct BypassPath {
    pub kind: BypassKind,
    pub description: String,
}

/// How AADP permit reservations are accounted beside the AOC occurrence exposure (§5).
#[derive(Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Debug, Default)]
#[serde(rename_all = "snake_case")]
pub enum AadpAccounting {
    /// Not composed with AADP.
    #[default]
    None,
    /// Two distinct native accounting facts: supported.
    Distinct,
    /// One counter for both: contradictory transitions, reported unsupported.
    AliasedToOccurrenceExposure,
}

/// The composition verdict the domain reports about itself.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, Debug)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum CompositionStatus {
    Supported,
    Unsupported { reason: String },
}

/// §5: aliasing the AADP reservation to the AOC exposure counter is unsupported.
pub fn composition_status(aadp: AadpAccounting) -> CompositionStatus {
    match aadp {
        AadpAccounting::None | AadpAccounting::Distinct => CompositionStatus::Supported,
        AadpAccounting::AliasedToOccurrenceExposure => CompositionStatus::Unsupported {
            reason: "the AADP permit reservation is aliased to the AOC occurrence exposure counter; \
                     AADP expiry and AOC provider-entry accounting are contradictory transitions on one \
                     counter (AOC §5)"
                .into(),
        },
    }
}

/// Statements AOC-REQ-013 forbids an implementation to make about itself.
pub const PROHIBITED_CLAIMS: [&str; 4] = [
    "copying an operation record transfers exclusive ownership of a live ledger",
    "a Succession Receipt fences a provider path",
    "AADP and BCR state machines are interchangeable",
    "an EP evidence format is mandatory",
];

/// What the reference domain says about itself (checked against [`PROHIBITED_CLAIMS`]).
pub fn reference_claims() -> Vec<String> {
    vec![
        "One coordination domain per store namespace serializes reservation, provider entry, \
         executor-generation changes and terminal reconciliation for the paths it mediates."
            .into(),
        "Executor-generation fencing applies only inside this domain; it revokes no credential and \
         stops no path outside it."
            .into(),
        "Same-team reference implementation: passing its cases shows consistency with the profile, \
         not interoperability, live-provider correctness, deployment or adoption."
            .into(),
    ]
}

/// What makes a sentence one of [`PROHIBITED_CLAIMS`] whatever its wording: every group must
/// have a word in the sentence (a word matches a term it starts with: `fences` matches `fence`).
const CLAIM_CONCEPTS: [&[&[&str]]; 4] = [
    &[
        &[
            "copy", "copies", "copying", "import", "migrat", "transfer", "move",
        ],
        &["ownership", "owner", "exclusive"],
        &["ledger", "record"],
    ],
    &[&["succession"], &["receipt"], &["fence", "fencing"]],
    &[
        &["aadp"],
        &["bcr"],
        &[
            "interchangeab",
            "equivalen",
            "same",
            "identical",
            "substitut",
        ],
    ],
    &[
        &["ep", "evidence"],
        &["format", "formats"],
        &["mandatory", "required", "requires", "must", "obligatory"],
    ],
];

/// Words that make a sentence deny what it names rather than claim it.
const NEGATIONS: [&str; 8] = [
    "not", "no", "never", "neither", "nor", "without", "cannot", "none",
];

/// Whether a claim text makes one of the prohibited claims, and which. Judged per sentence, by
/// concept rather than exact wording (decisions D32): a sentence that names every concept of a
/// prohibited claim and does not negate it makes that claim.
pub fn prohibited_in(claim: &str) -> Option<&'static str> {
    claim
        .split(['.', ';', '!', '?', '\n'])
        .find_map(prohibited_in_sentence)
}

fn prohibited_in_sentence(sentence: &str) -> Option<&'static str> {
    let lc = sentence.to_lowercase().replace("n't", " not");
    let words: Vec<&str> = lc
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    if words.iter().any(|w| NEGATIONS.contains(w)) {
        return None;
    }
    let has = |term: &str| {
        words.iter().any(|w| {
            if term.len() <= 3 {
                *w == term
            } else {
                w.starts_with(term)
            }
        })
    };
    CLAIM_CONCEPTS
        .iter()
        .position(|groups| groups.iter().all(|g| g.iter().any(|t| has(t))))
        .map(|i| PROHIBITED_CLAIMS[i])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliasing_is_unsupported_and_distinct_is_supported() {
        assert_eq!(
            composition_status(AadpAccounting::Distinct),
            CompositionStatus::Supported
        );
        assert!(matches!(
            composition_status(AadpAccounting::AliasedToOccurrenceExposure),
            CompositionStatus::Unsupported { .. }
        ));
    }

    #[test]
    fn reference_claims_make_no_prohibited_claim_and_say_what_they_must() {
        let claims = reference_claims();
        for c in &claims {
            assert_eq!(prohibited_in(c), None, "{c}");
        }
        // AOC §7: "A same-team model or runner MUST be labeled as such", and fencing is claimed
        // only inside the domain (§3).
        assert!(
            claims.iter().any(|c| c.starts_with("Same-team")),
            "{claims:?}"
        );
        assert!(claims.iter().any(|c| c.contains("only inside this domain")));
    }

    /// Both directions, by wording: each prohibited claim in other words is caught, and the same
    /// subject denied, or an unrelated statement, is not.
    #[rstest::rstest]
    #[case::verbatim(
        "Copying an operation record transfers exclusive ownership of a live ledger.",
        Some(0)
    )]
    #[case::migration_reworded(
        "Importing a record from another domain makes us its exclusive owner.",
        Some(0)
    )]
    #[case::receipt("We guarantee a Succession Receipt fences a provider path.", Some(1))]
    #[case::receipt_reworded("Succession receipts provide fencing for provider calls", Some(1))]
    #[case::aadp_bcr("AADP and BCR state machines are interchangeable.", Some(2))]
    #[case::aadp_bcr_reworded("Our BCR ledger is equivalent to the AADP permit machine", Some(2))]
    #[case::aadp_alone("AADP permits and our own ledger are interchangeable", None)]
    #[case::ep_inside_a_word("A step-by-step format is mandatory for our logs", None)]
    #[case::ep_format("An EP evidence format is mandatory.", Some(3))]
    #[case::ep_format_reworded("Our EP evidence format is mandatory for every provider.", Some(3))]
    #[case::second_sentence("Fencing is local. Succession Receipts fence provider paths.", Some(1))]
    #[case::denied("A Succession Receipt does not fence a provider path.", None)]
    #[case::denied_contraction(
        "Copying a record doesn't transfer ownership of a live ledger.",
        None
    )]
    #[case::no_format("No evidence format is mandatory.", None)]
    #[case::unrelated("Executor fencing applies inside this domain only.", None)]
    fn prohibited_claims_are_found_by_concept(#[case] text: &str, #[case] which: Option<usize>) {
        assert_eq!(
            prohibited_in(text),
            which.map(|i| PROHIBITED_CLAIMS[i]),
            "{text}"
        );
    }
}
