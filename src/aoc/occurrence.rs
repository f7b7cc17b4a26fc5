//! The sans-IO core of one operation occurrence: a state folded from its history
//! ([`OccurrenceState::apply`]) and pure decision functions that turn a command into the entries to
//! append, or into a typed [`Refusal`]. Every decided entry is applied to a copy of the state before
//! it is returned ([`Appender`]), so a decision can never produce an illegal history.
//!
//! Requirement map: creation 002; binding 003/010; append-only history 004; adoption 005; owner
//! generation 006; late evidence 007; release 008; interpretation 009/011; one entry 010;
//! authority 012.

use crate::aoc::binding::{EvidenceBinding, ProviderBinding, ProviderRef};
use crate::aoc::history::{
    CallerLabels, ChainedEntry, EntryBody, EvidenceRef, Outcome, ReleaseReason, RemedyOf,
};
use crate::aoc::ids::{
    AttemptId, ExecutorId, Generation, Holder, LaneId, Millis, OccurrenceId, OwnerToken,
};
use crate::aoc::profile::{Evidence, EvidenceKind, MissingKnowledge, ProviderProfile, StatusClass};
use crate::aoc::refusal::{Refusal, RefusalKind};
use crate::aoc::requirement::Req;
use crate::digest::Digest;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fmt;

/// Where an occurrence stands. `Entered` and `Acknowledged` are unresolved.
#[derive(Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Debug)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Minted, nothing held.
    Created,
    /// Bound, authority held, no provider entry (pre-entry).
    Reserved,
    /// Serialized provider entry, no authoritative acknowledgement: unresolved.
    Entered,
    /// Provider reference known, no terminal evidence: unresolved.
    Acknowledged,
    /// Terminal reconciliation decision recorded.
    Resolved,
    /// Released before entry: terminal replay tombstone.
    Released,
}

impl Phase {
    pub fn label(self) -> &'static str {
        match self {
            Phase::Created => "created",
            Phase::Reserved => "reserved",
            Phase::Entered => "entered",
            Phase::Acknowledged => "acknowledged",
            Phase::Resolved => "resolved",
            Phase::Released => "released",
        }
    }
    /// Pending: held before entry (counts against the pending limit).
    pub fn is_pending(self) -> bool {
        matches!(self, Phase::Created | Phase::Reserved)
    }
    /// In flight: entered and unresolved (counts against the in-flight limit).
    pub fn is_in_flight(self) -> bool {
        matches!(self, Phase::Entered | Phase::Acknowledged)
    }
    pub fn is_terminal(self) -> bool {
        matches!(self, Phase::Resolved | Phase::Released)
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// Authority accounting of one occurrence (AOC-REQ-012). `consumed` never decreases.
#[derive(Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Debug, Default)]
pub struct Authority {
    pub amount: u64,
    pub held: u64,
    pub consumed: u64,
    pub released: u64,
}

/// A history that cannot be folded: `event` is not legal from `from`.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error, Serialize)]
#[error("illegal transition: {event} from {from}")]
pub struct IllegalTransition {
    pub from: String,
    pub event: String,
}

/// The folded state of an occurrence.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, Debug)]
pub struct OccurrenceState {
    pub id: OccurrenceId,
    pub domain: String,
    pub lane: LaneId,
    pub creation_binding: Digest,
    pub request_digest: Digest,
    pub labels: CallerLabels,
    pub remedy_of: Option<RemedyOf>,
    pub phase: Phase,
    pub created_generation: Generation,
    pub owner_generation: Generation,
    pub owner_executor: Option<ExecutorId>,
    pub owner_token_digest: Option<Digest>,
    pub binding: Option<ProviderBinding>,
    pub binding_digest: Option<Digest>,
    pub provider_ref: Option<ProviderRef>,
    pub attempt: Option<AttemptId>,
    pub entry_attempts: u32,
    pub entered_at: Option<Millis>,
    pub entered_generation: Option<Generation>,
    pub authority: Authority,
    pub outcome: Option<Outcome>,
    pub missing: BTreeSet<MissingKnowledge>,
    pub evidence_sources: BTreeSet<String>,
    pub authoritative_classes: BTreeSet<StatusClass>,
    pub observations: u32,
    pub remedies: Vec<OccurrenceId>,
    pub generations: BTreeSet<Generation>,
    pub len: u64,
    pub head: Option<Digest>,
}

fn illegal(from: &str, event: &str) -> IllegalTransition {
    IllegalTransition {
        from: from.to_string(),
        event: event.to_string(),
    }
}

impl OccurrenceState {
    /// Whether the occurrence's outcome is unresolved: entered without a terminal decision, or a
    /// terminal decision that later authoritative evidence contradicts (AOC-REQ-011: conflicting
    /// evidence leaves the occurrence unresolved; no favourable selection, and the earlier decision
    /// stays in the history rather than being overwritten).
    pub fn is_unresolved(&self) -> bool {
        self.phase.is_in_flight()
            || (self.phase == Phase::Resolved
                && self.missing.contains(&MissingKnowledge::Conflicting))
    }

    /// Folds a whole history. Chain verification is separate ([`crate::aoc::history::verify_chain`]).
    pub fn fold(entries: &[ChainedEntry]) -> Result<OccurrenceState, IllegalTransition> {
        let mut it = entries.iter();
        let first = it
            .next()
            .ok_or_else(|| illegal("nothing", "empty history"))?;
        let mut st = OccurrenceState::genesis(first)?;
        for e in it {
            st = st.apply(e)?;
        }
        Ok(st)
    }

    /// The state after the first entry, which must be `created`.
    pub fn genesis(e: &ChainedEntry) -> Result<OccurrenceState, IllegalTransition> {
        match &e.body {
            EntryBody::Created {
                occurrence,
                domain,
                lane,
                generation,
                creation_binding,
                request_digest,
                labels,
                remedy_of,
                ..
            } if e.seq == 0 => Ok(OccurrenceState {
                id: occurrence.clone(),
                domain: domain.clone(),
                lane: lane.clone(),
                creation_binding: creation_binding.clone(),
                request_digest: request_digest.clone(),
                labels: labels.clone(),
                remedy_of: remedy_of.clone(),
                phase: Phase::Created,
                created_generation: *generation,
                owner_generation: *generation,
                owner_executor: None,
                owner_token_digest: None,
                binding: None,
                binding_digest: None,
                provider_ref: None,
                attempt: None,
                entry_attempts: 0,
                entered_at: None,
                entered_generation: None,
                authority: Authority::default(),
                outcome: None,
                missing: BTreeSet::new(),
                evidence_sources: BTreeSet::new(),
                authoritative_classes: BTreeSet::new(),
                observations: 0,
                remedies: Vec::new(),
                generations: BTreeSet::from([*generation]),
                len: 1,
                head: Some(e.digest.clone()),
            }),
            other => Err(illegal("nothing", other.kind())),
        }
    }

    /// Applies one entry (pure). Returns the typed illegal transition for an impossible history.
    pub fn apply(&self, e: &ChainedEntry) -> Result<OccurrenceState, IllegalTransition> {
        let from = self.phase.label();
        if e.seq != self.len || e.prev != self.head {
            return Err(illegal(from, &format!("{} out of sequence", e.body.kind())));
        }
        let mut s = self.clone();
        match &e.body {
            EntryBody::Created { .. } => return Err(illegal(from, "created")),
            EntryBody::Reserved {
                generation,
                binding,
                binding_digest,
                amount,
                owner_token_digest,
                ..
            } => {
                if s.phase != Phase::Created {
                    return Err(illegal(from, "reserved"));
                }
                s.phase = Phase::Reserved;
                s.owner_generation = *generation;
                s.owner_token_digest = Some(owner_token_digest.clone());
                s.binding = Some(binding.clone());
                s.binding_digest = Some(binding_digest.clone());
                s.authority.amount = *amount;
                s.authority.held = *amount;
                s.generations.insert(*generation);
            }
            EntryBody::Adopted {
                from_generation,
                to_generation,
                executor,
                owner_token_digest,
                ..
            } => {
                if s.phase.is_terminal()
                    || *from_generation != s.owner_generation
                    || to_generation <= from_generation
                {
                    return Err(illegal(from, "adopted"));
                }
                s.owner_generation = *to_generation;
                s.owner_executor = Some(executor.clone());
                s.owner_token_digest = Some(owner_token_digest.clone());
                s.generations.insert(*to_generation);
            }
            EntryBody::Entered {
                generation,
                attempt,
                at,
                ..
            } => {
                if s.phase != Phase::Reserved || s.entry_attempts != 0 {
                    return Err(illegal(from, "entered"));
                }
                s.phase = Phase::Entered;
                s.attempt = Some(attempt.clone());
                s.entry_attempts = 1;
                s.entered_at = Some(*at);
                s.entered_generation = Some(*generation);
                s.authority.consumed = s.authority.held;
                s.authority.held = 0;
            }
            EntryBody::Acknowledged { provider_ref, .. } => {
                if s.phase != Phase::Entered || s.provider_ref.is_some() {
                    return Err(illegal(from, "acknowledged"));
                }
                s.phase = Phase::Acknowledged;
                s.provider_ref = Some(provider_ref.clone());
            }
            EntryBody::Observed {
                evidence,
                interpretation,
                ..
            } => {
                s.observations += 1;
                s.evidence_sources.insert(evidence.source.clone());
                s.missing.extend(interpretation.missing.iter().cloned());
                if let Some(class) = interpretation.class {
                    if class.is_terminal()
                        && s.authoritative_classes
                            .iter()
                            .any(|c| c.is_terminal() && *c != class)
                    {
                        s.missing.insert(MissingKnowledge::Conflicting);
                    }
                    s.authoritative_classes.insert(class);
                }
            }
            EntryBody::Resolved { outcome, .. } => {
                if !s.phase.is_in_flight() || s.missing.contains(&MissingKnowledge::Conflicting) {
                    return Err(illegal(from, "resolved"));
                }
                s.phase = Phase::Resolved;
                s.outcome = Some(*outcome);
                // Resolved: earlier gaps are history; a conflict never is.
                s.missing.retain(|m| *m == MissingKnowledge::Conflicting);
            }
            EntryBody::EffectClosed { .. } => match s.outcome {
                Some(Outcome::FinalFailure { no_effect: false }) => {
                    s.outcome = Some(Outcome::FinalFailure { no_effect: true });
                }
                _ => return Err(illegal(from, "effect_closed")),
            },
            EntryBody::Released { .. } => {
                if !s.phase.is_pending() {
                    return Err(illegal(from, "released"));
                }
                s.phase = Phase::Released;
                s.authority.released = s.authority.held;
                s.authority.held = 0;
            }
            EntryBody::RemedyLinked { remedy, .. } => {
                if s.entry_attempts == 0 {
                    return Err(illegal(from, "remedy_linked"));
                }
                s.remedies.push(remedy.clone());
            }
        }
        s.len += 1;
        s.head = Some(e.digest.clone());
        Ok(s)
    }
}

/// Seals decided bodies one by one and applies each to a working copy of the state.
#[derive(Debug)]
pub struct Appender {
    pub state: OccurrenceState,
    pub entries: Vec<ChainedEntry>,
}

impl Appender {
    pub fn new(state: &OccurrenceState) -> Self {
        Appender {
            state: state.clone(),
            entries: Vec::new(),
        }
    }

    /// Seals and applies one body; returns a reference to it.
    pub fn push(&mut self, body: EntryBody) -> Result<EvidenceRef, Refusal> {
        let occ = self.state.id.clone();
        let entry =
            ChainedEntry::seal(self.state.len, self.state.head.clone(), body).map_err(|e| {
                Refusal::new(
                    Some(&occ),
                    Req::R004,
                    RefusalKind::InvalidInput {
                        field: "entry".into(),
                        msg: e.to_string(),
                    },
                )
            })?;
        let next = self.state.apply(&entry).map_err(|e| {
            Refusal::new(
                Some(&occ),
                Req::R004,
                RefusalKind::WrongPhase {
                    phase: e.from,
                    op: e.event,
                },
            )
        })?;
        let r = EvidenceRef {
            seq: entry.seq,
            digest: entry.digest.clone(),
        };
        self.state = next;
        self.entries.push(entry);
        Ok(r)
    }
}

fn refuse(st: &OccurrenceState, req: Req, kind: RefusalKind) -> Refusal {
    Refusal::new(Some(&st.id), req, kind)
}

/// AOC-REQ-005/006: the caller must be this occurrence's owner generation on its lane. An older
/// generation is retired (006); a newer one has not adopted (read) the occurrence yet (005).
pub fn check_owner(st: &OccurrenceState, holder: &Holder) -> Result<(), Refusal> {
    if holder.lane != st.lane || holder.generation < st.owner_generation {
        return Err(refuse(
            st,
            Req::R006,
            RefusalKind::StaleGeneration {
                holder: holder.clone(),
                current: None,
            },
        ));
    }
    if holder.generation > st.owner_generation {
        return Err(refuse(
            st,
            Req::R005,
            RefusalKind::NotOwner {
                owner_generation: st.owner_generation,
                caller_generation: holder.generation,
            },
        ));
    }
    Ok(())
}

fn check_token(st: &OccurrenceState, token: &OwnerToken, req: Req) -> Result<(), Refusal> {
    if st.owner_token_digest.as_ref() != Some(&token.digest()) {
        return Err(refuse(st, req, RefusalKind::OwnerTokenMismatch));
    }
    Ok(())
}

/// Refuses any admission of an occurrence that is past its pre-entry state (AOC-REQ-008, -010).
fn refuse_if_not_pre_entry(st: &OccurrenceState) -> Result<(), Refusal> {
    match st.phase {
        Phase::Released => Err(refuse(st, Req::R008, RefusalKind::Tombstoned)),
        Phase::Resolved => Err(refuse(st, Req::R010, RefusalKind::Terminal)),
        Phase::Entered | Phase::Acknowledged => Err(refuse(
            st,
            Req::R010,
            RefusalKind::AlreadyEntered {
                attempts: st.entry_attempts,
            },
        )),
        Phase::Created | Phase::Reserved => Ok(()),
    }
}

/// Creation retry: the same creation binding resolves to the original, but never with another
/// request (AOC-REQ-002, -010).
pub fn check_creation_retry(st: &OccurrenceState, request_digest: &Digest) -> Result<(), Refusal> {
    if &st.request_digest != request_digest {
        return Err(refuse(
            st,
            Req::R010,
            RefusalKind::BindingConflict {
                fields: vec![crate::aoc::binding::BindingField::Request],
            },
        ));
    }
    Ok(())
}

/// Reserve: bind and hold authority (AOC-REQ-003, -008, -012).
pub fn decide_reserve(
    st: &OccurrenceState,
    holder: &Holder,
    binding: &ProviderBinding,
    amount: u64,
    token: &OwnerToken,
    now: Millis,
) -> Result<Vec<ChainedEntry>, Refusal> {
    check_owner(st, holder)?;
    refuse_if_not_pre_entry(st)?;
    if st.phase == Phase::Reserved {
        // A re-presentation never re-reserves (AOC-REQ-008).
        return Err(refuse(
            st,
            Req::R008,
            RefusalKind::WrongPhase {
                phase: st.phase.label().into(),
                op: "reserve".into(),
            },
        ));
    }
    if binding.request_digest != st.request_digest {
        return Err(refuse(
            st,
            Req::R003,
            RefusalKind::BindingConflict {
                fields: vec![crate::aoc::binding::BindingField::Request],
            },
        ));
    }
    let binding_digest = binding.digest().map_err(|e| {
        refuse(
            st,
            Req::R003,
            RefusalKind::InvalidInput {
                field: "binding".into(),
                msg: e.to_string(),
            },
        )
    })?;
    let mut a = Appender::new(st);
    a.push(EntryBody::Reserved {
        generation: holder.generation,
        binding: binding.clone(),
        binding_digest,
        amount,
        owner_token_digest: token.digest(),
        at: now,
    })?;
    Ok(a.entries)
}

/// Adopt: a successor reads the occurrence and takes ownership before acting (AOC-REQ-005). The
/// occurrence keeps its id, binding, evidence, unresolved state and authority.
pub fn decide_adopt(
    st: &OccurrenceState,
    holder: &Holder,
    token: &OwnerToken,
    now: Millis,
) -> Result<Vec<ChainedEntry>, Refusal> {
    if holder.lane != st.lane || holder.generation < st.owner_generation {
        return Err(refuse(
            st,
            Req::R006,
            RefusalKind::StaleGeneration {
                holder: holder.clone(),
                current: None,
            },
        ));
    }
    if st.phase.is_terminal() || holder.generation == st.owner_generation {
        // A terminal occurrence is read, not owned: there is nothing left to act on.
        return Ok(Vec::new());
    }
    let mut a = Appender::new(st);
    a.push(EntryBody::Adopted {
        from_generation: st.owner_generation,
        to_generation: holder.generation,
        executor: holder.executor.clone(),
        owner_token_digest: token.digest(),
        at: now,
    })?;
    Ok(a.entries)
}

/// Provider entry: reserved → consumed, durable before the request leaves (AOC-REQ-006, -010,
/// -012). Exactly one attempt per occurrence, ever.
pub fn decide_enter(
    st: &OccurrenceState,
    holder: &Holder,
    token: &OwnerToken,
    binding: &ProviderBinding,
    attempt: &AttemptId,
    now: Millis,
) -> Result<Vec<ChainedEntry>, Refusal> {
    // An entered or terminal occurrence never enters again, whoever asks (AOC-REQ-010); a
    // retired generation is refused as retired before this decision is even made.
    refuse_if_not_pre_entry(st)?;
    check_owner(st, holder)?;
    let bound = st.binding.as_ref().ok_or_else(|| {
        refuse(
            st,
            Req::R003,
            RefusalKind::WrongPhase {
                phase: st.phase.label().into(),
                op: "enter before reserve".into(),
            },
        )
    })?;
    check_token(st, token, Req::R006)?;
    let fields = bound.diff(binding);
    if !fields.is_empty() {
        return Err(refuse(
            st,
            Req::R003,
            RefusalKind::BindingConflict { fields },
        ));
    }
    let mut a = Appender::new(st);
    a.push(EntryBody::Entered {
        generation: holder.generation,
        attempt: attempt.clone(),
        binding_digest: st
            .binding_digest
            .clone()
            .ok_or_else(|| refuse(st, Req::R003, RefusalKind::NotBound))?,
        at: now,
    })?;
    Ok(a.entries)
}

/// A request to change a bound field: refused as a conflicting operation (AOC-REQ-010). The same
/// binding is a no-op.
pub fn decide_rebind(
    st: &OccurrenceState,
    holder: &Holder,
    proposed: &ProviderBinding,
    provider_ref: Option<&str>,
) -> Result<Vec<ChainedEntry>, Refusal> {
    check_owner(st, holder)?;
    let bound = st
        .binding
        .as_ref()
        .ok_or_else(|| refuse(st, Req::R003, RefusalKind::NotBound))?;
    let mut fields = bound.diff(proposed);
    if let (Some(have), Some(want)) = (st.provider_ref.as_deref(), provider_ref)
        && have != want
    {
        fields.push(crate::aoc::binding::BindingField::ProviderRef);
    }
    if !fields.is_empty() {
        return Err(refuse(
            st,
            Req::R010,
            RefusalKind::BindingConflict { fields },
        ));
    }
    Ok(Vec::new())
}

/// Provider evidence (AOC-REQ-004, -007, -009, -011). Evidence that contradicts the binding is
/// refused; evidence that is merely weak is recorded with its missing-knowledge flags and changes
/// nothing else. Only authenticated, exactly bound, mapped, fresh evidence without conflict may
/// resolve an entered occurrence; it never changes generation, authority or entry count. Generic
/// final failure (not proving no effect) resolves it only when `generic_resolves` (the domain's
/// choice, [`crate::aoc::domain::DomainConfig::generic_failure_resolves`]).
pub fn decide_evidence(
    st: &OccurrenceState,
    profile: &ProviderProfile,
    ev: &Evidence,
    submitted_by: Option<&ExecutorId>,
    now: Millis,
    generic_resolves: bool,
) -> Result<Vec<ChainedEntry>, Refusal> {
    let bound = st
        .binding
        .as_ref()
        .ok_or_else(|| refuse(st, Req::R003, RefusalKind::NotBound))?;
    if profile.id != bound.profile_id || profile.version != bound.profile_version {
        return Err(refuse(
            st,
            Req::R003,
            RefusalKind::BindingConflict {
                fields: vec![crate::aoc::binding::BindingField::ProfileVersion],
            },
        ));
    }
    let mut fields = bound.mismatches(st.provider_ref.as_deref(), &ev.bound_to, &ev.source);
    if profile.source(&ev.source).is_none()
        && !fields.contains(&crate::aoc::binding::BindingField::StatusSource)
    {
        fields.push(crate::aoc::binding::BindingField::StatusSource);
    }
    if !fields.is_empty() {
        return Err(refuse(
            st,
            Req::R003,
            RefusalKind::BindingConflict { fields },
        ));
    }
    let mut interp = profile.interpret(ev, st.entered_at, now);
    if let EvidenceKind::Response { attempt } = &ev.kind
        && st.attempt.as_ref() != Some(attempt)
    {
        interp.missing.insert(MissingKnowledge::UnboundAttempt);
        interp.class = None;
        interp.proves_no_effect = false;
    }
    if st.entry_attempts == 0 {
        interp.missing.insert(MissingKnowledge::NoEntryRecorded);
        interp.class = None;
        interp.proves_no_effect = false;
    }
    let mut a = Appender::new(st);
    if interp.class.is_some()
        && st.phase == Phase::Entered
        && let Some(r) = &ev.bound_to.provider_ref
    {
        a.push(EntryBody::Acknowledged {
            attempt: st.attempt.clone(),
            provider_ref: r.clone(),
            at: now,
        })?;
    }
    let class = interp.class;
    let no_effect = interp.proves_no_effect;
    let obs = a.push(EntryBody::Observed {
        evidence: ev.clone(),
        interpretation: interp,
        submitted_by: submitted_by.cloned(),
        at: now,
    })?;
    let conflicted = a.state.missing.contains(&MissingKnowledge::Conflicting);
    let kept_open = class == Some(StatusClass::FinalFailure) && !no_effect && !generic_resolves;
    if let Some(class) = class
        && class.is_terminal()
        && !conflicted
        && !kept_open
    {
        let outcome = match class {
            StatusClass::Success => Outcome::Success,
            StatusClass::NotAccepted => Outcome::NotAccepted,
            _ => Outcome::FinalFailure { no_effect },
        };
        if a.state.phase.is_in_flight() {
            a.push(EntryBody::Resolved {
                outcome,
                evidence: vec![obs],
                at: now,
            })?;
        } else if a.state.outcome == Some(Outcome::FinalFailure { no_effect: false })
            && class == StatusClass::FinalFailure
            && no_effect
        {
            a.push(EntryBody::EffectClosed {
                evidence: obs,
                at: now,
            })?;
        }
    }
    Ok(a.entries)
}

/// Pre-entry release (AOC-REQ-008): only from the pre-entry state, read serially by the domain;
/// the owner authenticated by its token; the exact request matched; atomic with returning the held
/// authority; leaves a terminal tombstone. The reason is recorded, never the proof.
pub fn decide_release(
    st: &OccurrenceState,
    holder: &Holder,
    token: &OwnerToken,
    request_digest: &Digest,
    reason: ReleaseReason,
    now: Millis,
) -> Result<Vec<ChainedEntry>, Refusal> {
    check_owner(st, holder)?;
    match st.phase {
        Phase::Created | Phase::Reserved => {}
        Phase::Released => return Err(refuse(st, Req::R008, RefusalKind::Tombstoned)),
        other => {
            return Err(refuse(
                st,
                Req::R008,
                RefusalKind::NotPreEntry {
                    phase: other.label().into(),
                },
            ));
        }
    }
    if st.phase == Phase::Reserved {
        check_token(st, token, Req::R008)?;
    }
    if &st.request_digest != request_digest {
        return Err(refuse(
            st,
            Req::R008,
            RefusalKind::BindingConflict {
                fields: vec![crate::aoc::binding::BindingField::Request],
            },
        ));
    }
    let mut a = Appender::new(st);
    a.push(EntryBody::Released {
        generation: holder.generation,
        reason,
        at: now,
    })?;
    Ok(a.entries)
}

/// Links a remedy occurrence to an entered original (AOC-REQ-012): appended, never rewriting.
pub fn decide_link_remedy(
    st: &OccurrenceState,
    remedy: &OccurrenceId,
    authorization: &str,
    now: Millis,
) -> Result<Vec<ChainedEntry>, Refusal> {
    if st.remedies.contains(remedy) {
        return Ok(Vec::new());
    }
    if st.entry_attempts == 0 {
        return Err(refuse(
            st,
            Req::R012,
            RefusalKind::WrongPhase {
                phase: st.phase.label().into(),
                op: "remedy (nothing was entered)".into(),
            },
        ));
    }
    let mut a = Appender::new(st);
    a.push(EntryBody::RemedyLinked {
        remedy: remedy.clone(),
        authorization: authorization.to_string(),
        at: now,
    })?;
    Ok(a.entries)
}

/// The evidence binding a faithful provider would report for this occurrence.
pub fn expected_evidence_binding(st: &OccurrenceState) -> Option<EvidenceBinding> {
    st.binding
        .as_ref()
        .map(|b| EvidenceBinding::matching(b, st.provider_ref.as_deref()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aoc::binding::ProviderBinding;
    use crate::aoc::history::ChainedEntry;
    use crate::aoc::profile::{Interpretation, NativeResult};
    use rstest::rstest;

    fn binding() -> ProviderBinding {
        ProviderBinding {
            profile_id: "p".into(),
            profile_version: "1".into(),
            account: "a".into(),
            environment: "test".into(),
            request_digest: Digest::of_bytes(b"r"),
            key_rule: "k".into(),
            native_key: None,
            status_source: "get".into(),
        }
    }

    fn body(kind: &str) -> EntryBody {
        let at = Millis(1);
        let g = Generation(1);
        match kind {
            "created" => EntryBody::Created {
                occurrence: OccurrenceId::from_stored("occ_t"),
                domain: "d".into(),
                lane: LaneId("l".into()),
                generation: g,
                creation_binding: Digest::of_bytes(b"cb"),
                request_digest: Digest::of_bytes(b"r"),
                labels: CallerLabels::default(),
                remedy_of: None,
                at,
            },
            "reserved" => EntryBody::Reserved {
                generation: g,
                binding: binding(),
                binding_digest: binding().digest().expect("digest"),
                amount: 5,
                owner_token_digest: Digest::of_bytes(b"t"),
                at,
            },
            "adopted" => EntryBody::Adopted {
                from_generation: g,
                to_generation: Generation(2),
                executor: ExecutorId("e2".into()),
                owner_token_digest: Digest::of_bytes(b"t2"),
                at,
            },
            "entered" => EntryBody::Entered {
                generation: g,
                attempt: AttemptId::from_stored("att_t"),
                binding_digest: binding().digest().expect("digest"),
                at,
            },
            "acknowledged" => EntryBody::Acknowledged {
                attempt: None,
                provider_ref: "ref".into(),
                at,
            },
            "observed" => EntryBody::Observed {
                evidence: Evidence {
                    source: "get".into(),
                    kind: EvidenceKind::StatusQuery,
                    observed_at: at,
                    authenticated: true,
                    bound_to: EvidenceBinding::matching(&binding(), None),
                    native: NativeResult::NotFound,
                    native_digest: Digest::of_bytes(b"n"),
                },
                interpretation: Interpretation::default(),
                submitted_by: None,
                at,
            },
            "resolved" => EntryBody::Resolved {
                outcome: Outcome::FinalFailure { no_effect: false },
                evidence: Vec::new(),
                at,
            },
            "effect_closed" => EntryBody::EffectClosed {
                evidence: EvidenceRef {
                    seq: 0,
                    digest: Digest::of_bytes(b"x"),
                },
                at,
            },
            "released" => EntryBody::Released {
                generation: g,
                reason: ReleaseReason::OwnerAbandoned,
                at,
            },
            "remedy_linked" => EntryBody::RemedyLinked {
                remedy: OccurrenceId::from_stored("occ_r"),
                authorization: "auth".into(),
                at,
            },
            other => panic!("unknown kind {other}"),
        }
    }

    /// Folds a path of entry kinds, returning the final phase or the illegal step.
    fn fold_path(kinds: &[&str]) -> Result<OccurrenceState, IllegalTransition> {
        let entries =
            ChainedEntry::seal_all(0, None, kinds.iter().map(|k| body(k)).collect()).expect("seal");
        OccurrenceState::fold(&entries)
    }

    #[rstest]
    #[case::success(&["created", "reserved", "entered", "acknowledged", "observed", "resolved"], Phase::Resolved)]
    #[case::resolve_without_ack(&["created", "reserved", "entered", "observed", "resolved"], Phase::Resolved)]
    #[case::effect_closed(&["created", "reserved", "entered", "resolved", "effect_closed"], Phase::Resolved)]
    #[case::release_from_reserved(&["created", "reserved", "released"], Phase::Released)]
    #[case::release_from_created(&["created", "released"], Phase::Released)]
    #[case::adopt_reserved(&["created", "reserved", "adopted"], Phase::Reserved)]
    #[case::adopt_entered(&["created", "reserved", "entered", "adopted"], Phase::Entered)]
    #[case::evidence_on_reserved(&["created", "reserved", "observed"], Phase::Reserved)]
    #[case::evidence_after_terminal(&["created", "reserved", "entered", "resolved", "observed"], Phase::Resolved)]
    #[case::remedy_after_resolution(&["created", "reserved", "entered", "resolved", "remedy_linked"], Phase::Resolved)]
    fn legal_paths(#[case] kinds: &[&str], #[case] phase: Phase) {
        let st = fold_path(kinds).expect("legal path");
        assert_eq!(st.phase, phase);
        assert_eq!(st.len, kinds.len() as u64);
    }

    #[rstest]
    #[case::not_created_first(&["reserved"], "nothing", "reserved")]
    #[case::created_twice(&["created", "created"], "created", "created")]
    #[case::enter_unreserved(&["created", "entered"], "created", "entered")]
    #[case::enter_twice(&["created", "reserved", "entered", "entered"], "entered", "entered")]
    #[case::reserve_twice(&["created", "reserved", "reserved"], "reserved", "reserved")]
    #[case::release_after_entry(&["created", "reserved", "entered", "released"], "entered", "released")]
    #[case::resolve_before_entry(&["created", "reserved", "resolved"], "reserved", "resolved")]
    #[case::resolve_twice(&["created", "reserved", "entered", "resolved", "resolved"], "resolved", "resolved")]
    #[case::ack_before_entry(&["created", "reserved", "acknowledged"], "reserved", "acknowledged")]
    #[case::rebind_reference(&["created", "reserved", "entered", "acknowledged", "acknowledged"], "acknowledged", "acknowledged")]
    #[case::adopt_tombstone(&["created", "released", "adopted"], "released", "adopted")]
    #[case::enter_tombstone(&["created", "reserved", "released", "entered"], "released", "entered")]
    #[case::remedy_without_entry(&["created", "reserved", "remedy_linked"], "reserved", "remedy_linked")]
    #[case::effect_closed_on_success_path(&["created", "reserved", "entered", "effect_closed"], "entered", "effect_closed")]
    fn illegal_paths_are_typed(#[case] kinds: &[&str], #[case] from: &str, #[case] event: &str) {
        let err = fold_path(kinds).expect_err("illegal path");
        assert_eq!(
            err,
            IllegalTransition {
                from: from.into(),
                event: event.into()
            }
        );
    }

    #[test]
    fn an_out_of_sequence_entry_is_illegal() {
        let entries =
            ChainedEntry::seal_all(0, None, vec![body("created"), body("reserved")]).expect("seal");
        let st = OccurrenceState::genesis(&entries[0]).expect("genesis");
        // Applying entry 1 twice: the second is out of sequence.
        let st1 = st.apply(&entries[1]).expect("apply");
        assert!(st1.apply(&entries[1]).is_err());
    }

    #[test]
    fn entering_consumes_what_was_held_and_release_returns_it() {
        let st = fold_path(&["created", "reserved", "entered"]).expect("fold");
        assert_eq!((st.authority.held, st.authority.consumed), (0, 5));
        let st = fold_path(&["created", "reserved", "released"]).expect("fold");
        assert_eq!(
            (
                st.authority.held,
                st.authority.released,
                st.authority.consumed
            ),
            (0, 5, 0)
        );
    }
}
