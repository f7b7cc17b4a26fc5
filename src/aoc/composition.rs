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

/// Negation words that, followed by these, deny nothing ("not only", "no doubt").
const NOT_NEGATING: [(&str, &str); 5] = [
    ("not", "only"),
    ("not", "just"),
    ("no", "doubt"),
    ("no", "question"),
    ("without", "doubt"),
];

/// Words that open a new clause: a negation in another clause governs nothing here.
const CLAUSE_WORDS: [&str; 8] = [
    "but", "although", "though", "whereas", "however", "yet", "while", "except",
];

/// What [`prohibited_in`] answers for a claim it cannot read as one script: a word that mixes
/// scripts can be read as any of them, so it is refused rather than judged (decisions D55).
pub const UNREADABLE: &str = "a claim whose words mix scripts is refused as unreadable";

/// Whether a code point is invisible by default (Unicode's Default_Ignorable_Code_Point: soft
/// hyphen, zero-width and joiner characters, bidirectional controls, variation selectors, tags):
/// such a character can split a word without showing.
fn ignorable(c: char) -> bool {
    matches!(c as u32,
        0x00AD | 0x034F | 0x061C | 0x115F..=0x1160 | 0x17B4..=0x17B5 | 0x180B..=0x180F
        | 0x200B..=0x200F | 0x202A..=0x202E | 0x2060..=0x206F | 0x3164 | 0xFE00..=0xFE0F
        | 0xFEFF | 0xFFA0 | 0x1BCA0..=0x1BCA3 | 0x1D173..=0x1D17A | 0xE0000..=0xE0FFF)
}

/// One word as the matcher compares it: its confusable skeleton (UTS #39), lowercased, so that
/// a Cyrillic `е` in `fеnce` reads as the Latin letter it imitates.
fn fold(word: &str) -> String {
    unicode_security::confusable_detection::skeleton(word)
        .collect::<String>()
        .to_lowercase()
}

/// A sentence read as words, each with the index of the clause it stands in.
struct Sentence {
    words: Vec<(usize, String)>,
}

/// Reads a claim: NFKC (full-width and compatibility letters become plain ones), invisible
/// characters dropped, lowercased, split into sentences, clauses and words, each word folded to
/// its skeleton. `Err` names a word that mixes scripts.
fn read(claim: &str) -> Result<Vec<Sentence>, String> {
    use unicode_normalization::UnicodeNormalization;
    use unicode_security::MixedScript;
    let text: String = claim
        .nfkc()
        .filter(|c| !ignorable(*c))
        .collect::<String>()
        .to_lowercase()
        .replace(['\u{2019}', '\u{02bc}'], "'")
        .replace("n't", " not");
    let mut out = Vec::new();
    for sentence in text.split(['.', ';', '!', '?', '\n']) {
        let mut words = Vec::new();
        for (clause, part) in sentence
            .split([',', ':', '(', ')', '\u{2013}', '\u{2014}'])
            .enumerate()
        {
            for w in part
                .split(|c: char| !c.is_alphanumeric())
                .filter(|w| !w.is_empty())
            {
                if !w.is_single_script() {
                    return Err(w.to_string());
                }
                words.push((clause, fold(w)));
            }
        }
        // A clause word opens a clause of its own.
        let mut shift = 0;
        for (clause, w) in words.iter_mut() {
            if CLAUSE_WORDS.contains(&w.as_str()) {
                shift += 1;
            }
            *clause += shift;
        }
        out.push(Sentence { words });
    }
    Ok(out)
}

/// Whether a claim text makes one of the prohibited claims, and which. Judged per sentence, by
/// concept rather than exact wording (decisions D32, D55): a sentence that names every concept
/// of a prohibited claim makes that claim unless a negation governs it, that is, stands in the
/// same clause as, and before, the last of the words that name its concepts. Text is read after
/// NFKC, with invisible characters dropped and confusable letters folded; a word mixing scripts
/// makes the claim [`UNREADABLE`].
pub fn prohibited_in(claim: &str) -> Option<&'static str> {
    let sentences = match read(claim) {
        Ok(s) => s,
        Err(_) => return Some(UNREADABLE),
    };
    sentences.iter().find_map(prohibited_in_sentence)
}

/// The unreadable word of a claim, if any (for the finding's message).
pub fn unreadable_word(claim: &str) -> Option<String> {
    read(claim).err()
}

fn prohibited_in_sentence(s: &Sentence) -> Option<&'static str> {
    let words = &s.words;
    let matches = |w: &str, term: &str| {
        let t = fold(term);
        if t.chars().count() <= 3 {
            w == t
        } else {
            w.starts_with(&t)
        }
    };
    let negation_at = |i: usize| {
        NEGATIONS.contains(&words[i].1.as_str())
            && !NOT_NEGATING
                .iter()
                .any(|(n, next)| words[i].1 == *n && words.get(i + 1).is_some_and(|x| x.1 == *next))
    };
    CLAIM_CONCEPTS
        .iter()
        .position(|groups| {
            // The first word naming each concept; all must be there.
            let firsts: Option<Vec<usize>> = groups
                .iter()
                .map(|g| {
                    words
                        .iter()
                        .position(|(_, w)| g.iter().any(|t| matches(w, t)))
                })
                .collect();
            let Some(last) = firsts.and_then(|f| f.into_iter().max()) else {
                return false;
            };
            let clause = words[last].0;
            let governed = (0..last).any(|i| words[i].0 == clause && negation_at(i));
            !governed
        })
        .map(|i| PROHIBITED_CLAIMS[i])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A word that mixes scripts is refused as unreadable, whatever it says; one script, any
    /// script, is read.
    #[rstest::rstest]
    #[case::cyrillic_e_in_fence(
        "A Succession Receipt f\u{0435}nces a provider path.",
        "f\u{0435}nces"
    )]
    #[case::cyrillic_a_in_aadp("\u{0410}ADP and BCR are interchangeable.", "\u{0430}adp")]
    #[case::greek_o_in_a_harmless_word(
        "Fencing applies inside this d\u{03bf}main only.",
        "d\u{03bf}main"
    )]
    fn a_mixed_script_word_makes_a_claim_unreadable(#[case] text: &str, #[case] word: &str) {
        assert_eq!(prohibited_in(text), Some(UNREADABLE), "{text}");
        assert_eq!(unreadable_word(text).as_deref(), Some(word));
    }

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
    // Adversarial rewordings (issue 21): a negation elsewhere in the sentence governs nothing.
    #[case::negation_after(
        "A Succession Receipt fences a provider path and no operator can bypass it.",
        Some(1)
    )]
    #[case::negation_in_another_clause(
        "A Succession Receipt fences a provider path, not merely a record.",
        Some(1)
    )]
    #[case::negation_after_but(
        "AADP and BCR state machines are interchangeable but none of it matters.",
        Some(2)
    )]
    #[case::not_only("Not only do Succession Receipts fence provider paths.", Some(1))]
    #[case::no_doubt("No doubt an EP evidence format is mandatory.", Some(3))]
    #[case::denied_across_an_aside(
        "A Succession Receipt, we note, does not fence a provider path.",
        None
    )]
    #[case::concepts_across_an_aside(
        "Succession Receipts, in our deployment, fence provider paths.",
        Some(1)
    )]
    #[case::never_before_the_last_concept(
        "Copying a record never gives ownership of the ledger.",
        None
    )]
    #[case::it_is_not_true("It is not true that AADP and BCR are interchangeable.", None)]
    #[case::curly_contraction(
        "Copying a record doesn\u{2019}t transfer ownership of a live ledger.",
        None
    )]
    // Unicode: compatibility letters, invisible characters, confusable letters.
    #[case::fullwidth(
        "\u{ff21}\u{ff21}\u{ff24}\u{ff30} and BCR state machines are interchangeable.",
        Some(2)
    )]
    #[case::zero_width(
        "A Succ\u{200b}ession Rece\u{00ad}ipt fen\u{200d}ces a provider path.",
        Some(1)
    )]
    #[case::soft_hyphen_in_the_negation(
        "A Succession Receipt does n\u{00ad}ot fence a path.",
        None
    )]
    #[case::all_cyrillic_lookalike("An \u{0415}\u{0420} format is mandatory.", Some(3))]
    #[case::ligature("A Succession Receipt \u{fb00}ences nothing.", None)]
    #[case::single_script_other_language(
        "\u{041a}\u{0432}\u{0438}\u{0442}\u{0430}\u{043d}\u{0446}\u{0438}\u{044f} \u{043d}\u{0435} \u{043e}\u{0433}\u{0440}\u{0430}\u{0436}\u{0434}\u{0430}\u{0435}\u{0442}.",
        None
    )]
    fn prohibited_claims_are_found_by_concept(#[case] text: &str, #[case] which: Option<usize>) {
        assert_eq!(unreadable_word(text), None, "{text}");
        assert_eq!(
            prohibited_in(text),
            which.map(|i| PROHIBITED_CLAIMS[i]),
            "{text}"
        );
    }
}
