//! How the reference answers `state` in `aocheck-sut/2`'s evidence envelope: each of its own
//! stored entries (a [`ChainedEntry`], chained by the `jcs-sha256` rule) wrapped with the §4.4
//! distinction it stands for, and its state in AOC §7's report words. This is the reference's
//! own mapping of its own vocabulary, exactly as any implementation writes one.

use crate::aoc::binding::EvidenceBinding;
use crate::aoc::history::{ChainedEntry, EntryBody, Outcome as O};
use crate::aoc::occurrence::{OccurrenceState, Phase};
use crate::aoc::profile::{EvidenceKind, MissingKnowledge, NativeResult, StatusClass};
use crate::check::evidence::{
    CHAIN_JCS_SHA256, Entry, Interpretation, Kind, ProviderEntry, Report, SourceKind, StateAnswer,
};
use crate::digest::digest_of;
use crate::vocab::{Authority, Flag, Outcome, State};

/// An occurrence's state in the shared vocabulary.
pub fn state_word(st: &OccurrenceState) -> State {
    if st.is_unresolved() {
        State::Unresolved
    } else {
        match st.phase {
            Phase::Created | Phase::Reserved => State::Pending,
            Phase::Released => State::Released,
            _ => State::Resolved,
        }
    }
}

fn outcome(o: O) -> Outcome {
    match o {
        O::Success => Outcome::Success,
        O::NotAccepted => Outcome::NotAccepted,
        O::FinalFailure { no_effect: false } => Outcome::FinalFailure,
        O::FinalFailure { no_effect: true } => Outcome::FinalFailureNoEffect,
    }
}

/// The authority accounting in the shared vocabulary.
pub fn authority_word(a: &crate::aoc::occurrence::Authority) -> Authority {
    if a.consumed > 0 {
        Authority::Consumed
    } else if a.released > 0 {
        Authority::Released
    } else if a.held > 0 {
        Authority::Held
    } else {
        Authority::None
    }
}

/// A missing-knowledge flag in the shared vocabulary (without its detail).
pub fn flag_word(m: &MissingKnowledge) -> Flag {
    use MissingKnowledge as M;
    match m {
        M::Unauthenticated => Flag::Unauthenticated,
        M::UnboundAttempt => Flag::UnboundAttempt,
        M::Unmapped { .. } => Flag::Unmapped,
        M::NotFound => Flag::NotFound,
        M::BeyondRetention => Flag::BeyondRetention,
        M::IncompleteListing => Flag::IncompleteListing,
        M::Stale => Flag::Stale,
        M::HttpStatusOnly { .. } => Flag::HttpStatusOnly,
        M::Transport => Flag::Transport,
        M::Undecodable => Flag::Undecodable,
        M::Conflicting => Flag::Conflicting,
        M::NoEntryRecorded => Flag::NoEntryRecorded,
        M::CompositionUnsupported => Flag::CompositionUnsupported,
    }
}

fn bare(kind: Kind, e: &ChainedEntry) -> Entry {
    Entry::bare(kind, serde_json::to_value(e).unwrap_or_default())
}

/// One stored entry in the envelope. `binding` is the occurrence's binding as recorded so far
/// (what an observation's claim is compared with).
fn wrap(e: &ChainedEntry, binding: Option<&crate::aoc::binding::ProviderBinding>) -> Entry {
    match &e.body {
        EntryBody::Created { at, .. } => Entry {
            at: Some(at.0),
            ..bare(Kind::Created, e)
        },
        EntryBody::Reserved {
            generation,
            binding_digest,
            at,
            ..
        } => Entry {
            at: Some(at.0),
            generation: Some(generation.0),
            binding_digest: Some(binding_digest.to_string()),
            ..bare(Kind::Prepared, e)
        },
        EntryBody::Adopted {
            to_generation, at, ..
        } => Entry {
            at: Some(at.0),
            generation: Some(to_generation.0),
            ..bare(Kind::Replaced, e)
        },
        EntryBody::Entered {
            generation,
            attempt,
            at,
            ..
        } => Entry {
            at: Some(at.0),
            generation: Some(generation.0),
            attempt: Some(attempt.to_string()),
            ..bare(Kind::Entered, e)
        },
        EntryBody::Acknowledged {
            provider_ref, at, ..
        } => Entry {
            at: Some(at.0),
            provider_ref: Some(provider_ref.to_string()),
            ..bare(Kind::Acknowledged, e)
        },
        EntryBody::Observed {
            evidence,
            interpretation,
            at,
            ..
        } => {
            let (source_kind, attempt) = match (&evidence.kind, &evidence.native) {
                (EvidenceKind::Response { attempt }, _) => {
                    (SourceKind::Response, Some(attempt.to_string()))
                }
                // A listing, whatever it answered (a failed one is still a listing).
                (EvidenceKind::Listing, _)
                | (EvidenceKind::StatusQuery, NativeResult::Listing { .. }) => {
                    (SourceKind::Listing, None)
                }
                (EvidenceKind::StatusQuery, _) => (SourceKind::Lookup, None),
            };
            // The binding the evidence is about: the occurrence's, when its claim matches it.
            let about = match binding {
                Some(b)
                    if EvidenceBinding::matching(b, evidence.bound_to.provider_ref.as_deref())
                        == evidence.bound_to =>
                {
                    b.digest().ok().map(|d| d.to_string())
                }
                _ => digest_of(&evidence.bound_to).ok().map(|d| d.to_string()),
            };
            Entry {
                at: Some(at.0),
                attempt,
                binding_digest: about,
                source: Some(evidence.source.clone()),
                source_kind: Some(source_kind),
                authenticated: Some(evidence.authenticated),
                interpretation: interpretation.class.map(|c| match c {
                    StatusClass::Accepted => Interpretation::Accepted,
                    StatusClass::NotAccepted => Interpretation::NotAccepted,
                    StatusClass::FinalFailure => Interpretation::FinalFailure,
                    StatusClass::Success => Interpretation::Success,
                }),
                flags: interpretation
                    .missing
                    .iter()
                    .map(|m| flag_word(m).name().to_string())
                    .collect(),
                ..bare(Kind::Observed, e)
            }
        }
        EntryBody::Resolved {
            outcome: o,
            evidence,
            at,
        } => Entry {
            at: Some(at.0),
            outcome: Some(outcome(*o)),
            evidence: evidence.iter().map(|r| r.seq as usize).collect(),
            ..bare(Kind::Decided, e)
        },
        EntryBody::EffectClosed { evidence, at } => Entry {
            at: Some(at.0),
            outcome: Some(Outcome::FinalFailureNoEffect),
            evidence: vec![evidence.seq as usize],
            ..bare(Kind::Decided, e)
        },
        EntryBody::Released { at, .. } => Entry {
            at: Some(at.0),
            ..bare(Kind::Released, e)
        },
        EntryBody::RemedyLinked { remedy, at, .. } => Entry {
            at: Some(at.0),
            remedy: Some(remedy.to_string()),
            ..bare(Kind::RemedyLinked, e)
        },
        #[allow(unreachable_patterns)]
        _ => bare(Kind::Other, e),
    }
}

/// The §7 report of a state.
pub fn report(st: &OccurrenceState) -> Report {
    Report {
        occurrence: st.id.to_string(),
        domain: st.domain.clone(),
        executor_generation: st.owner_generation.0,
        binding_digest: st.binding_digest.as_ref().map(|d| d.to_string()),
        state: state_word(st),
        outcome: st.outcome.map(outcome),
        provider_entry: if st.entry_attempts == 0 {
            ProviderEntry::NotEntered
        } else if st.provider_ref.is_some() {
            ProviderEntry::Acknowledged
        } else {
            ProviderEntry::Entered
        },
        authority: authority_word(&st.authority),
        entry_attempts: st.entry_attempts,
        evidence_sources: st.evidence_sources.iter().cloned().collect(),
        missing_knowledge: st
            .missing
            .iter()
            .map(|m| flag_word(m).name().to_string())
            .collect(),
        remedies: st.remedies.iter().map(|r| r.to_string()).collect(),
    }
}

/// The whole `state` answer: the history in the envelope, chained, and the report.
pub fn answer(history: &[ChainedEntry], st: &OccurrenceState) -> StateAnswer {
    let mut binding = None;
    let entries = history
        .iter()
        .map(|e| {
            if let EntryBody::Reserved { binding: b, .. } = &e.body {
                binding = Some(b.clone());
            }
            wrap(e, binding.as_ref())
        })
        .collect();
    StateAnswer {
        entries,
        report: report(st),
        chain: Some(CHAIN_JCS_SHA256.into()),
        flag_map: Default::default(),
        report_generation: Default::default(),
    }
}
