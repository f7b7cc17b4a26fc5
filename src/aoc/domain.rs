//! The coordination domain service (AOC-REQ-001): one domain per store namespace serializes
//! occurrence creation, reservation, provider entry, executor-generation changes, pre-entry release
//! and terminal reconciliation. Each call loads and verifies the occurrence's history, folds it,
//! asks the pure core for a decision, and appends under the store's fence, length and limit checks.
//! A lost optimistic race is retried from a fresh read (bounded); everything else is returned.

use crate::aoc::admission::{self, Admission, AdmissionEnd, AdmissionState};
use crate::aoc::binding::ProviderBinding;
use crate::aoc::composition::{AadpAccounting, BypassPath, CompositionStatus, composition_status};
use crate::aoc::error::{DomainError, LimitKind, Refusal, RefusalKind};
use crate::aoc::history::{
    CallerLabels, ChainedEntry, EntryBody, Outcome, ReleaseReason, RemedyOf, verify_chain_with,
};
use crate::aoc::ids::{
    AdmissionId, AttemptId, ExecutorId, Holder, LaneId, OccurrenceId, OwnerToken,
};
use crate::aoc::lease::{AcquireMode, Lease, LeaseConfig, LeaseError};
use crate::aoc::occurrence::{self, OccurrenceState, Phase};
use crate::aoc::port::{
    Append, Class, CreateResult, Fence, LimitCheck, NewOccurrence, OccurrenceSummary, Store,
    StoreError,
};
use crate::aoc::profile::{Evidence, ProviderProfile};
use crate::aoc::requirement::Req;
use crate::clock::Clock;
use crate::digest::{Digest, digest_of};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// How many times a transition is re-decided after losing an optimistic race.
pub const MAX_CONTENDED_ATTEMPTS: u32 = 32;

/// Declared finite limits per lane (AOC-REQ-006): so that executor failure cannot create unbounded
/// held state.
#[derive(Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Occurrences created or reserved but not entered.
    pub max_pending: u32,
    /// Occurrences entered and unresolved.
    pub max_in_flight: u32,
}

impl Limits {
    /// No declared limit: a deployment judged at its own boundary declares none, and a limit
    /// nobody declared is no fact about AOC-REQ-006.
    pub const UNDECLARED: Limits = Limits {
        max_pending: u32::MAX,
        max_in_flight: u32::MAX,
    };
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_pending: 64,
            max_in_flight: 64,
        }
    }
}

/// Everything a deployment declares about its domain.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct DomainConfig {
    /// The domain id, also the store namespace.
    pub domain_id: String,
    /// Pinned provider profiles (id + version); bindings must name one of them.
    pub profiles: Vec<ProviderProfile>,
    pub limits: Limits,
    pub lease: LeaseConfig,
    /// Paths that reach the provider without this domain; disclosed, never fenced (§3).
    pub bypass_paths: Vec<BypassPath>,
    /// At most one occurrence per action digest (AOC-REQ-002's durable action fence).
    pub action_fence: bool,
    /// AADP composition (§5).
    pub aadp: AadpAccounting,
    /// Whether authenticated generic final failure (a `FinalFailure` status that does not prove
    /// no effect) resolves the occurrence as `final_failure`, or leaves it unresolved. The draft
    /// allows both (§6: generic FAILED "is not proof of non-entry or no protected effect";
    /// AOC-CASE-010: it "may leave effect unresolved"); either way authority stays consumed.
    #[serde(default = "resolves")]
    pub generic_failure_resolves: bool,
}

fn resolves() -> bool {
    true
}

impl DomainConfig {
    /// A config with one profile and defaults elsewhere.
    pub fn new(domain_id: impl Into<String>, profile: ProviderProfile) -> Self {
        DomainConfig {
            domain_id: domain_id.into(),
            profiles: vec![profile],
            limits: Limits::default(),
            lease: LeaseConfig::default(),
            bypass_paths: Vec::new(),
            action_fence: false,
            aadp: AadpAccounting::None,
            generic_failure_resolves: true,
        }
    }

    /// Every defect at once, each naming its field.
    pub fn validate(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.domain_id.trim().is_empty() {
            out.push("domain_id: name the domain".to_string());
        }
        if self.limits.max_pending == 0 || self.limits.max_in_flight == 0 {
            out.push("limits: max_pending and max_in_flight must be at least 1".to_string());
        }
        if let Err(e) = self.lease.validate() {
            out.push(e);
        }
        if self.profiles.is_empty() {
            out.push("profiles: pin at least one provider profile".to_string());
        }
        for (i, p) in self.profiles.iter().enumerate() {
            for d in p.validate() {
                out.push(format!("profiles[{i}].{}: {}", d.field, d.msg));
            }
        }
        out
    }

    pub fn profile(&self, id: &str, version: &str) -> Option<&ProviderProfile> {
        self.profiles
            .iter()
            .find(|p| p.id == id && p.version == version)
    }
}

/// What `create` needs: the domain-owned creation rule keys on `creation_key` (AOC-REQ-002).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct CreateRequest {
    /// The authenticated business key that identifies one intended occurrence.
    pub creation_key: String,
    /// Digest of the intended exact request.
    pub request_digest: Digest,
    /// Caller labels: recorded with the original, never minting a new occurrence.
    #[serde(default)]
    pub labels: CallerLabels,
}

/// What `enter` returns: the attempt that may now be sent, exactly once.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, Debug)]
pub struct EntryPermit {
    pub occurrence: OccurrenceId,
    pub attempt: AttemptId,
    pub binding_digest: Digest,
}

/// A separately authorized remedy (AOC-REQ-012).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RemedyRequest {
    /// The remedy's own native authorization (never the original's grant).
    pub authorization: String,
    pub request_digest: Digest,
}

/// The coordination domain over a store.
#[derive(Debug)]
pub struct Domain<S: Store> {
    store: Arc<S>,
    config: Arc<DomainConfig>,
    clock: Arc<dyn Clock>,
    /// Last known state per occurrence, for deciding without a read. Never trusted for a refusal
    /// or an adoption; an append from a stale state fails its length check and is re-decided.
    cache: Arc<std::sync::Mutex<std::collections::HashMap<OccurrenceId, OccurrenceState>>>,
    /// History entries already verified (a read verifies the whole chain; an entry it verified
    /// before, equal in every field, is not hashed again).
    verified: Arc<crate::aoc::history::Verified>,
    /// Test-only: a deliberate defect, so that the harness can be shown to catch it. Always
    /// `None` outside `tests/it/broken.rs`.
    defect: Option<Defect>,
}

/// Deliberate defects for the harness's own tests (`tests/it/broken.rs`): each breaks one requirement.
/// Never reachable from the command line or a configuration file.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Defect {
    /// Provider entry without the generation fence (AOC-REQ-006 broken).
    SkipEntryFence,
    /// Rebinding is accepted (AOC-REQ-010 broken).
    AllowRebind,
    /// Release after entry resolves the occurrence as not accepted (AOC-REQ-008 broken).
    ReleaseAfterEntry,
    /// Recovery puts a started admission back in the queue (seed 003 / AOC-REQ-005 broken).
    ResetUnknownToQueued,
    /// A remedy may reuse the original occurrence's grant as its authorization (AOC-REQ-012
    /// broken).
    RemedyReusesGrant,
    /// Release after entry resolves the occurrence as not accepted once a lookup found nothing
    /// past the provider's retention (AOC-REQ-008 broken, only in that combination).
    ReleaseAfterForget,
}

/// How many occurrence states a domain instance keeps for deciding without a read.
const CACHE_CAPACITY: usize = 4096;

impl<S: Store> Clone for Domain<S> {
    fn clone(&self) -> Self {
        Domain {
            store: self.store.clone(),
            config: self.config.clone(),
            clock: self.clock.clone(),
            cache: self.cache.clone(),
            verified: self.verified.clone(),
            defect: self.defect,
        }
    }
}

fn refused(occ: Option<&OccurrenceId>, req: Req, kind: RefusalKind) -> DomainError {
    DomainError::Refused(Refusal::new(occ, req, kind))
}

/// Maps a store precondition failure onto the refusal it means; other store errors pass through.
fn map_store(occ: Option<&OccurrenceId>, e: StoreError) -> DomainError {
    match e {
        StoreError::Fenced { holder, current } => refused(
            occ,
            Req::R006,
            RefusalKind::StaleGeneration { holder, current },
        ),
        StoreError::Limit {
            which,
            limit,
            current,
        } => refused(
            occ,
            Req::R006,
            RefusalKind::LimitReached {
                which,
                limit,
                current,
            },
        ),
        StoreError::Lease(LeaseError::Busy { holder, expires_at }) => refused(
            occ,
            Req::R006,
            RefusalKind::LeaseBusy { holder, expires_at },
        ),
        StoreError::Lease(LeaseError::HolderMismatch { holder, current }) => refused(
            occ,
            Req::R006,
            RefusalKind::HolderMismatch { holder, current },
        ),
        StoreError::Admission(a) => refused(occ, Req::R005, RefusalKind::Admission { msg: a.msg }),
        other => DomainError::Store(other),
    }
}

#[derive(Serialize)]
struct CreationRule<'a> {
    rule: &'static str,
    domain: &'a str,
    creation_key: &'a str,
}

impl<S: Store> Domain<S> {
    /// A domain over `store`. Refuses an invalid config, listing every defect.
    pub fn new(
        store: Arc<S>,
        config: DomainConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, Vec<String>> {
        let defects = config.validate();
        if !defects.is_empty() {
            return Err(defects);
        }
        Ok(Domain {
            store,
            config: Arc::new(config),
            clock,
            cache: Arc::default(),
            verified: Arc::default(),
            defect: None,
        })
    }

    pub fn config(&self) -> &DomainConfig {
        &self.config
    }

    /// Test-only: this domain with a deliberate defect (see [`Defect`]).
    #[doc(hidden)]
    #[cfg(feature = "test-knobs")]
    pub fn with_defect_for_tests(mut self, defect: Defect) -> Self {
        self.defect = Some(defect);
        self
    }
    pub fn store(&self) -> &Arc<S> {
        &self.store
    }
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }
    fn ns(&self) -> &str {
        &self.config.domain_id
    }
    fn fence(&self, holder: &Holder) -> Fence {
        Fence {
            holder: holder.clone(),
            now: self.clock.now(),
        }
    }

    /// §5: whether this domain's composition is supported. An unsupported (aliased) composition
    /// refuses AADP expiry ([`Domain::aadp_expired`]), so nothing from the AADP side resolves,
    /// releases or re-authorises an occurrence; only provider evidence does.
    pub fn composition(&self) -> CompositionStatus {
        composition_status(self.config.aadp)
    }

    /// §3: disclosed bypass paths.
    pub fn bypass_paths(&self) -> &[BypassPath] {
        &self.config.bypass_paths
    }

    /// AOC-REQ-013: a cross-domain ledger migration is outside the profile and always refused.
    pub fn import_from_other_domain(&self, _record: &[ChainedEntry]) -> Result<(), DomainError> {
        Err(refused(
            None,
            Req::R013,
            RefusalKind::Unsupported {
                what: "copying an occurrence record from another domain does not transfer exclusive \
                       ownership; cross-domain migration needs a separate exclusive cutover protocol"
                    .into(),
            },
        ))
    }

    /// §5: AADP's no-report expiry of the permit composed with `occ`. The AADP permit
    /// reservation and the AOC occurrence exposure are distinct accounting facts here, so the
    /// expiry releases only the AADP-native permit, which this domain does not hold: the
    /// occurrence is left exactly as it is (its tombstone, its provider entry, its consumed
    /// authority, its right to no other attempt). An aliased composition cannot apply both
    /// contradictory transitions and is refused as unsupported; a domain not composed with AADP
    /// refuses too. Nothing is written either way.
    pub async fn aadp_expired(&self, occ: &OccurrenceId) -> Result<(), DomainError> {
        match self.config.aadp {
            AadpAccounting::Distinct => {
                self.state(occ).await?;
                Ok(())
            }
            AadpAccounting::None => Err(refused(
                Some(occ),
                Req::R013,
                RefusalKind::Unsupported {
                    what: "this domain is not composed with AADP".into(),
                },
            )),
            AadpAccounting::AliasedToOccurrenceExposure => Err(refused(
                Some(occ),
                Req::R013,
                RefusalKind::Unsupported {
                    what: match composition_status(self.config.aadp) {
                        CompositionStatus::Unsupported { reason } => reason,
                        CompositionStatus::Supported => "aliased AADP accounting".into(),
                    },
                },
            )),
        }
    }

    // ---- executors and generations (AOC-REQ-005/006, seed 003) ----

    /// Joins a lane: acquires its lease when free, waiting up to the configured wait limit.
    /// Acquiring advances the generation and retires the predecessor in the same write.
    pub async fn join(&self, lane: &LaneId, executor: &ExecutorId) -> Result<Holder, DomainError> {
        // Waiting for a held lane only makes sense on a clock that moves by itself: on a case
        // clock the holder's lease cannot expire while this waits, so a busy lane is refused now.
        let wait = if self.clock.moves_by_itself() {
            self.config.lease.wait_ms
        } else {
            0
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(wait);
        loop {
            match self
                .store
                .lease_acquire(
                    self.ns(),
                    lane,
                    executor,
                    self.clock.now(),
                    self.config.lease.ttl_ms,
                    AcquireMode::IfFree,
                )
                .await
            {
                Ok(l) => return Ok(l.holder),
                Err(StoreError::Lease(LeaseError::Busy { .. }))
                | Err(StoreError::Conflict { .. })
                    if std::time::Instant::now() < deadline =>
                {
                    let left = deadline.saturating_duration_since(std::time::Instant::now());
                    tokio::time::sleep(left.min(std::time::Duration::from_millis(50))).await;
                }
                Err(e) => return Err(map_store(None, e)),
            }
        }
    }

    /// Replaces the lane's executor now (administrative takeover): generation advanced, the
    /// predecessor retired. This fences only what the domain mediates.
    pub async fn replace(
        &self,
        lane: &LaneId,
        executor: &ExecutorId,
    ) -> Result<Holder, DomainError> {
        for _ in 0..MAX_CONTENDED_ATTEMPTS {
            match self
                .store
                .lease_acquire(
                    self.ns(),
                    lane,
                    executor,
                    self.clock.now(),
                    self.config.lease.ttl_ms,
                    AcquireMode::Replace,
                )
                .await
            {
                Ok(l) => return Ok(l.holder),
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(map_store(None, e)),
            }
        }
        Err(DomainError::Store(StoreError::Conflict {
            what: format!("lane {lane}: lease contended"),
        }))
    }

    /// Refreshes the holder's own lease; a retired or expired holder gets a holder mismatch.
    pub async fn refresh(&self, holder: &Holder) -> Result<Lease, DomainError> {
        self.store
            .lease_refresh(
                self.ns(),
                holder,
                self.clock.now(),
                self.config.lease.ttl_ms,
            )
            .await
            .map_err(|e| map_store(None, e))
    }

    /// Releases the holder's own lease; never the successor's.
    pub async fn leave(&self, holder: &Holder) -> Result<Lease, DomainError> {
        self.store
            .lease_release(self.ns(), holder)
            .await
            .map_err(|e| map_store(None, e))
    }

    pub async fn lease(&self, lane: &LaneId) -> Result<Option<Lease>, DomainError> {
        self.store
            .lease_get(self.ns(), lane)
            .await
            .map_err(DomainError::Store)
    }

    // ---- reading ----

    /// The verified history of an occurrence.
    pub async fn history(&self, occ: &OccurrenceId) -> Result<Vec<ChainedEntry>, DomainError> {
        let entries = self
            .store
            .load(self.ns(), occ)
            .await
            .map_err(DomainError::Store)?
            .ok_or_else(|| refused(Some(occ), Req::R002, RefusalKind::UnknownOccurrence))?;
        verify_chain_with(&entries, &self.verified).map_err(|b| DomainError::Corrupt {
            occurrence: occ.clone(),
            detail: b.to_string(),
        })?;
        Ok(entries)
    }

    /// The folded state of a verified history (AOC-REQ-005: what a successor reads before acting).
    pub async fn state(&self, occ: &OccurrenceId) -> Result<OccurrenceState, DomainError> {
        let entries = self.history(occ).await?;
        self.fold_verified(occ, &entries)
    }

    /// The folded state of a history already read: verified, folded and checked to be `occ`'s.
    pub fn fold_verified(
        &self,
        occ: &OccurrenceId,
        entries: &[ChainedEntry],
    ) -> Result<OccurrenceState, DomainError> {
        verify_chain_with(entries, &self.verified).map_err(|b| DomainError::Corrupt {
            occurrence: occ.clone(),
            detail: b.to_string(),
        })?;
        let st = OccurrenceState::fold(entries).map_err(|e| DomainError::Corrupt {
            occurrence: occ.clone(),
            detail: e.to_string(),
        })?;
        if &st.id != occ {
            return Err(DomainError::Corrupt {
                occurrence: occ.clone(),
                detail: format!("history names occurrence {}", st.id),
            });
        }
        Ok(st)
    }

    pub async fn list(&self, lane: Option<&LaneId>) -> Result<Vec<OccurrenceSummary>, DomainError> {
        self.store
            .list(self.ns(), lane)
            .await
            .map_err(DomainError::Store)
    }

    /// Whether `holder` is the lane's current, live lease holder (a read; writes re-check it).
    pub async fn check_current(
        &self,
        occ: Option<&OccurrenceId>,
        holder: &Holder,
    ) -> Result<(), DomainError> {
        let lease = self
            .store
            .lease_get(self.ns(), &holder.lane)
            .await
            .map_err(DomainError::Store)?;
        crate::aoc::port::check_fence(lease.as_ref(), &self.fence(holder))
            .map_err(|e| map_store(occ, e))
    }

    fn cached(&self, occ: &OccurrenceId) -> Option<OccurrenceState> {
        self.cache.lock().ok().and_then(|c| c.get(occ).cloned())
    }

    fn remember(&self, st: &OccurrenceState) {
        if let Ok(mut c) = self.cache.lock() {
            if c.len() >= CACHE_CAPACITY && !c.contains_key(&st.id) {
                c.clear();
            }
            c.insert(st.id.clone(), st.clone());
        }
    }

    fn forget(&self, occ: &OccurrenceId) {
        if let Ok(mut c) = self.cache.lock() {
            c.remove(occ);
        }
    }

    /// The state to decide on: this domain's last known state of the occurrence, or a fresh,
    /// verified read. A stale state is harmless: the append's expected length then mismatches and
    /// the decision is remade from a fresh read.
    async fn decision_state(
        &self,
        occ: &OccurrenceId,
    ) -> Result<(OccurrenceState, bool), DomainError> {
        if let Some(st) = self.cached(occ) {
            return Ok((st, true));
        }
        let st = self.state(occ).await?;
        self.remember(&st);
        Ok((st, false))
    }

    /// Load, decide, append; re-decide after a lost race. A refusal is only returned when decided
    /// on a fresh read, and a retired holder's refusal names AOC-REQ-006 whatever else was wrong.
    async fn transition(
        &self,
        occ: &OccurrenceId,
        holder: Option<&Holder>,
        limit: Option<LimitCheck>,
        fresh: bool,
        decide: impl Fn(&OccurrenceState) -> Result<Vec<ChainedEntry>, Refusal>,
    ) -> Result<OccurrenceState, DomainError> {
        if fresh {
            self.forget(occ);
        }
        for _ in 0..MAX_CONTENDED_ATTEMPTS {
            let (st, from_cache) = self.decision_state(occ).await?;
            let entries = match decide(&st) {
                Ok(e) => e,
                Err(refusal) if from_cache => {
                    // Re-decide on a fresh read before refusing.
                    let _ = refusal;
                    self.forget(occ);
                    continue;
                }
                Err(refusal) => {
                    if let Some(h) = holder {
                        // AOC-REQ-006 first: a retired generation is refused as retired.
                        self.check_current(Some(occ), h).await?;
                    }
                    return Err(refusal.into());
                }
            };
            if entries.is_empty() {
                return Ok(st);
            }
            let mut after = st.clone();
            for e in &entries {
                after = after.apply(e).map_err(|e| DomainError::Corrupt {
                    occurrence: occ.clone(),
                    detail: format!("decided an illegal entry: {e}"),
                })?;
            }
            let append = Append {
                occurrence: occ.clone(),
                expected_len: st.len,
                entries,
                class_change: (Class::from(after.phase) != Class::from(st.phase))
                    .then(|| Class::from(after.phase)),
                fence: holder.map(|h| self.fence(h)),
                limit: if Class::from(after.phase) != Class::from(st.phase) {
                    limit
                } else {
                    None
                },
            };
            match self.store.append(self.ns(), append).await {
                Ok(()) => {
                    self.remember(&after);
                    return Ok(after);
                }
                Err(StoreError::Conflict { .. }) => {
                    self.forget(occ);
                    continue;
                }
                Err(e) => {
                    self.forget(occ);
                    return Err(map_store(Some(occ), e));
                }
            }
        }
        Err(DomainError::Contention {
            occurrence: occ.clone(),
            attempts: MAX_CONTENDED_ATTEMPTS,
        })
    }

    // ---- occurrences ----

    /// AOC-REQ-002: the creation binding under the domain-owned rule.
    pub fn creation_binding(&self, creation_key: &str) -> Result<Digest, DomainError> {
        digest_of(&CreationRule {
            rule: "aocheck.creation.v1",
            domain: self.ns(),
            creation_key,
        })
        .map_err(|e| {
            refused(
                None,
                Req::R002,
                RefusalKind::InvalidInput {
                    field: "creation_key".into(),
                    msg: e.to_string(),
                },
            )
        })
    }

    /// Creates an occurrence, or returns the original for a creation retry (AOC-REQ-002). Caller
    /// relabels (retry, task, grant ids, action digest) never mint a new one; a retry with another
    /// request is a conflict (AOC-REQ-010). Fenced by the caller's lease; counted against the
    /// pending limit.
    pub async fn create(
        &self,
        holder: &Holder,
        req: CreateRequest,
    ) -> Result<OccurrenceId, DomainError> {
        self.create_inner(holder, req, None).await
    }

    async fn create_inner(
        &self,
        holder: &Holder,
        req: CreateRequest,
        remedy_of: Option<RemedyOf>,
    ) -> Result<OccurrenceId, DomainError> {
        if req.creation_key.trim().is_empty() {
            return Err(refused(
                None,
                Req::R002,
                RefusalKind::InvalidInput {
                    field: "creation_key".into(),
                    msg: "a creation key is required: the domain mints an occurrence only under a durable creation binding".into(),
                },
            ));
        }
        let cb = self.creation_binding(&req.creation_key)?;
        let action_fence = if self.config.action_fence {
            Some(req.labels.action_digest.clone().ok_or_else(|| {
                refused(
                    None,
                    Req::R002,
                    RefusalKind::InvalidInput {
                        field: "labels.action_digest".into(),
                        msg: "the action fence is on: every occurrence must name its action digest"
                            .into(),
                    },
                )
            })?)
        } else {
            None
        };
        for _ in 0..MAX_CONTENDED_ATTEMPTS {
            let id = OccurrenceId::mint();
            let first = ChainedEntry::seal(
                0,
                None,
                EntryBody::Created {
                    occurrence: id.clone(),
                    domain: self.ns().to_string(),
                    lane: holder.lane.clone(),
                    generation: holder.generation,
                    creation_binding: cb.clone(),
                    request_digest: req.request_digest.clone(),
                    labels: req.labels.clone(),
                    remedy_of: remedy_of.clone(),
                    at: self.clock.now(),
                },
            )
            .map_err(|e| {
                refused(
                    None,
                    Req::R004,
                    RefusalKind::InvalidInput {
                        field: "labels".into(),
                        msg: e.to_string(),
                    },
                )
            })?;
            // The new occurrence's state, known without a read once the store has it.
            let created = OccurrenceState::fold(std::slice::from_ref(&first)).ok();
            let new = NewOccurrence {
                id: id.clone(),
                lane: holder.lane.clone(),
                creation_binding: cb.clone(),
                action_fence: action_fence.clone(),
                first,
            };
            let limit = LimitCheck {
                which: LimitKind::Pending,
                limit: self.config.limits.max_pending,
            };
            match self
                .store
                .create(self.ns(), new, self.fence(holder), Some(limit))
                .await
            {
                Ok(CreateResult::Created) => {
                    if let Some(st) = &created {
                        self.remember(st);
                    }
                    return Ok(id);
                }
                Ok(CreateResult::Existing(existing)) => {
                    return self.creation_retry(existing, &req.request_digest).await;
                }
                Ok(CreateResult::ActionFenced(existing)) => {
                    return Err(refused(
                        None,
                        Req::R002,
                        RefusalKind::ActionFenced { existing },
                    ));
                }
                Err(StoreError::Conflict { .. }) => {
                    if let Some(existing) = self
                        .store
                        .find_creation(self.ns(), &cb)
                        .await
                        .map_err(DomainError::Store)?
                    {
                        return self.creation_retry(existing, &req.request_digest).await;
                    }
                    continue;
                }
                Err(e) => return Err(map_store(None, e)),
            }
        }
        Err(DomainError::Store(StoreError::Conflict {
            what: "occurrence creation contended".into(),
        }))
    }

    async fn creation_retry(
        &self,
        id: OccurrenceId,
        request_digest: &Digest,
    ) -> Result<OccurrenceId, DomainError> {
        let st = self.state(&id).await?;
        occurrence::check_creation_retry(&st, request_digest)?;
        Ok(id)
    }

    fn check_binding_pinned(
        &self,
        occ: &OccurrenceId,
        b: &ProviderBinding,
    ) -> Result<(), DomainError> {
        let Some(p) = self.config.profile(&b.profile_id, &b.profile_version) else {
            return Err(refused(
                Some(occ),
                Req::R003,
                RefusalKind::InvalidInput {
                    field: "binding.profile".into(),
                    msg: format!(
                        "profile {} version {} is not pinned by this domain",
                        b.profile_id, b.profile_version
                    ),
                },
            ));
        };
        let mut bad = Vec::new();
        if !p.environments.contains(&b.environment) {
            bad.push(format!(
                "environment {:?} is not one of the profile's",
                b.environment
            ));
        }
        if p.source(&b.status_source).is_none() {
            bad.push(format!(
                "status source {:?} is not pinned by the profile",
                b.status_source
            ));
        }
        if p.key_rule != b.key_rule {
            bad.push(format!(
                "key rule {:?} is not the profile's {:?}",
                b.key_rule, p.key_rule
            ));
        }
        if bad.is_empty() {
            Ok(())
        } else {
            Err(refused(
                Some(occ),
                Req::R003,
                RefusalKind::InvalidInput {
                    field: "binding".into(),
                    msg: bad.join("; "),
                },
            ))
        }
    }

    /// Binds the provider binding and holds `amount` of authority (AOC-REQ-003, -012). Returns the
    /// owner token that `enter` and `release` authenticate.
    pub async fn reserve(
        &self,
        holder: &Holder,
        occ: &OccurrenceId,
        binding: &ProviderBinding,
        amount: u64,
    ) -> Result<OwnerToken, DomainError> {
        self.check_binding_pinned(occ, binding)?;
        let token = OwnerToken::mint();
        let now = self.clock.now();
        self.transition(occ, Some(holder), None, false, |st| {
            occurrence::decide_reserve(st, holder, binding, amount, &token, now)
        })
        .await?;
        Ok(token)
    }

    /// A successor reads the occurrence and takes ownership (AOC-REQ-005). Returns the state it
    /// read and, when ownership moved, a fresh owner token.
    pub async fn adopt(
        &self,
        holder: &Holder,
        occ: &OccurrenceId,
    ) -> Result<(OccurrenceState, Option<OwnerToken>), DomainError> {
        let token = OwnerToken::mint();
        let now = self.clock.now();
        let before = self.state(occ).await?;
        let st = self
            .transition(occ, Some(holder), None, true, |st| {
                occurrence::decide_adopt(st, holder, &token, now)
            })
            .await?;
        let moved = st.owner_generation != before.owner_generation || st.len != before.len;
        Ok((st, moved.then_some(token)))
    }

    /// Serialized provider entry (AOC-REQ-006, -010, -012): durable before the request leaves.
    /// Exactly one per occurrence; counted against the in-flight limit.
    pub async fn enter(
        &self,
        holder: &Holder,
        occ: &OccurrenceId,
        token: &OwnerToken,
        binding: &ProviderBinding,
    ) -> Result<EntryPermit, DomainError> {
        let attempt = AttemptId::mint();
        let now = self.clock.now();
        let limit = LimitCheck {
            which: LimitKind::InFlight,
            limit: self.config.limits.max_in_flight,
        };
        let fenced = if self.defect == Some(Defect::SkipEntryFence) {
            None
        } else {
            Some(holder)
        };
        let st = self
            .transition(occ, fenced, Some(limit), false, |st| {
                if fenced.is_none() && holder.generation < st.owner_generation {
                    // The defect: a retired generation's entry passes as the owner's.
                    let mut as_owner = holder.clone();
                    as_owner.generation = st.owner_generation;
                    let mut entries =
                        occurrence::decide_enter(st, &as_owner, token, binding, &attempt, now)?;
                    for e in &mut entries {
                        if let EntryBody::Entered { generation, .. } = &mut e.body {
                            *generation = holder.generation;
                        }
                    }
                    let resealed = ChainedEntry::seal_all(
                        st.len,
                        st.head.clone(),
                        entries.into_iter().map(|e| e.body).collect(),
                    )
                    .map_err(|e| {
                        Refusal::new(
                            Some(occ),
                            Req::R004,
                            RefusalKind::InvalidInput {
                                field: "entry".into(),
                                msg: e.to_string(),
                            },
                        )
                    })?;
                    return Ok(resealed);
                }
                occurrence::decide_enter(st, holder, token, binding, &attempt, now)
            })
            .await?;
        Ok(EntryPermit {
            occurrence: occ.clone(),
            attempt,
            binding_digest: st
                .binding_digest
                .ok_or_else(|| refused(Some(occ), Req::R003, RefusalKind::NotBound))?,
        })
    }

    /// Provider evidence from anyone, including a retired executor's late response (AOC-REQ-007):
    /// recorded when it matches the binding, resolving only when authoritative; never changes
    /// generation, authority or entry count.
    pub async fn record_evidence(
        &self,
        occ: &OccurrenceId,
        evidence: &Evidence,
        submitted_by: Option<&ExecutorId>,
    ) -> Result<OccurrenceState, DomainError> {
        let now = self.clock.now();
        let (st0, _) = self.decision_state(occ).await?;
        let binding = st0
            .binding
            .clone()
            .ok_or_else(|| refused(Some(occ), Req::R003, RefusalKind::NotBound))?;
        let profile = self
            .config
            .profile(&binding.profile_id, &binding.profile_version)
            .ok_or_else(|| {
                refused(
                    Some(occ),
                    Req::R009,
                    RefusalKind::InvalidInput {
                        field: "profile".into(),
                        msg: "the bound profile is no longer pinned by this domain".into(),
                    },
                )
            })?
            .clone();
        let generic_resolves = self.config.generic_failure_resolves;
        self.transition(occ, None, None, false, |st| {
            occurrence::decide_evidence(st, &profile, evidence, submitted_by, now, generic_resolves)
        })
        .await
    }

    /// Pre-entry release (AOC-REQ-008).
    pub async fn release(
        &self,
        holder: &Holder,
        occ: &OccurrenceId,
        token: &OwnerToken,
        request_digest: &Digest,
        reason: ReleaseReason,
    ) -> Result<OccurrenceState, DomainError> {
        let now = self.clock.now();
        let defect = self.defect;
        self.transition(occ, Some(holder), None, false, |st| {
            let forgotten = defect == Some(Defect::ReleaseAfterForget)
                && st
                    .missing
                    .contains(&crate::aoc::profile::MissingKnowledge::BeyondRetention);
            if (defect == Some(Defect::ReleaseAfterEntry) || forgotten) && st.phase.is_in_flight() {
                // The defect: expiry "proves" non-entry and closes the occurrence.
                let mut a = occurrence::Appender::new(st);
                a.push(EntryBody::Resolved {
                    outcome: Outcome::NotAccepted,
                    evidence: Vec::new(),
                    at: now,
                })?;
                return Ok(a.entries);
            }
            occurrence::decide_release(st, holder, token, request_digest, reason, now)
        })
        .await
    }

    /// A request to change the binding or the provider reference (AOC-REQ-010): refused unless it
    /// changes nothing.
    pub async fn rebind(
        &self,
        holder: &Holder,
        occ: &OccurrenceId,
        proposed: &ProviderBinding,
        provider_ref: Option<&str>,
    ) -> Result<(), DomainError> {
        if self.defect == Some(Defect::AllowRebind) {
            return Ok(());
        }
        self.transition(occ, Some(holder), None, false, |st| {
            occurrence::decide_rebind(st, holder, proposed, provider_ref)
        })
        .await
        .map(|_| ())
    }

    /// A remedy (compensation, refund, replacement attempt) as a new, linked occurrence with its
    /// own authorization and replay-protected identity (AOC-REQ-012). The original keeps its id,
    /// binding, consumed authority and history; a link is appended.
    pub async fn remedy(
        &self,
        holder: &Holder,
        original: &OccurrenceId,
        req: RemedyRequest,
    ) -> Result<OccurrenceId, DomainError> {
        let st = self.state(original).await?;
        if st.entry_attempts == 0 {
            return Err(refused(
                Some(original),
                Req::R012,
                RefusalKind::WrongPhase {
                    phase: st.phase.label().into(),
                    op: "remedy (nothing was entered)".into(),
                },
            ));
        }
        let auth = req.authorization.trim();
        let reused = st.labels.grant_id.as_deref() == Some(auth)
            && self.defect != Some(Defect::RemedyReusesGrant);
        if auth.is_empty() || reused {
            return Err(refused(
                Some(original),
                Req::R012,
                RefusalKind::RemedyAuthorization {
                    msg: "a remedy needs its own native authorization, distinct from the original's grant".into(),
                },
            ));
        }
        let remedy_id = self
            .create_inner(
                holder,
                CreateRequest {
                    creation_key: format!("remedy:{original}:{auth}"),
                    request_digest: req.request_digest.clone(),
                    labels: CallerLabels {
                        grant_id: Some(auth.to_string()),
                        ..CallerLabels::default()
                    },
                },
                Some(RemedyOf {
                    original: original.clone(),
                    authorization: auth.to_string(),
                }),
            )
            .await?;
        let now = self.clock.now();
        self.transition(original, None, None, false, |st| {
            occurrence::decide_link_remedy(st, &remedy_id, auth, now)
        })
        .await?;
        Ok(remedy_id)
    }

    // ---- admissions (seed 003) ----

    /// Durable admission (`queued`), idempotent on the submission key; the same key with another
    /// payload is a conflict.
    pub async fn submit(
        &self,
        lane: &LaneId,
        submission_key: &str,
        payload_digest: &Digest,
    ) -> Result<Admission, DomainError> {
        if submission_key.trim().is_empty() {
            return Err(refused(
                None,
                Req::R002,
                RefusalKind::InvalidInput {
                    field: "submission_key".into(),
                    msg: "a submission key is required".into(),
                },
            ));
        }
        let a = self
            .store
            .admit(
                self.ns(),
                lane,
                submission_key,
                payload_digest,
                self.clock.now(),
            )
            .await
            .map_err(DomainError::Store)?;
        if &a.payload_digest != payload_digest || &a.lane != lane {
            return Err(refused(
                None,
                Req::R010,
                RefusalKind::Admission {
                    msg: format!(
                        "submission key {submission_key:?} was admitted with another payload or lane"
                    ),
                },
            ));
        }
        Ok(a)
    }

    /// Claims the lane's FIFO head (`queued` → `started`) for the holder.
    pub async fn claim_next(&self, holder: &Holder) -> Result<Option<Admission>, DomainError> {
        self.store
            .admission_claim(self.ns(), self.fence(holder))
            .await
            .map_err(|e| map_store(None, e))
    }

    pub async fn admission(&self, id: &AdmissionId) -> Result<Admission, DomainError> {
        self.store
            .admission_get(self.ns(), id)
            .await
            .map_err(DomainError::Store)?
            .ok_or_else(|| {
                refused(
                    None,
                    Req::R005,
                    RefusalKind::Admission {
                        msg: format!("no admission {id}"),
                    },
                )
            })
    }

    pub async fn admissions(&self, lane: &LaneId) -> Result<Vec<Admission>, DomainError> {
        self.store
            .admission_list(self.ns(), lane)
            .await
            .map_err(DomainError::Store)
    }

    async fn put_admission(
        &self,
        holder: &Holder,
        next: Admission,
    ) -> Result<Admission, DomainError> {
        self.store
            .admission_put(self.ns(), next.clone(), Some(self.fence(holder)))
            .await
            .map_err(|e| map_store(None, e))?;
        Ok(next)
    }

    fn adm_err(e: admission::AdmissionError) -> DomainError {
        refused(
            None,
            Req::R005,
            RefusalKind::Admission { msg: e.to_string() },
        )
    }

    /// Records the occurrence a started admission created.
    pub async fn link_admission(
        &self,
        holder: &Holder,
        id: &AdmissionId,
        occ: &OccurrenceId,
    ) -> Result<Admission, DomainError> {
        let a = self.admission(id).await?;
        let next = admission::link(&a, holder.generation, occ).map_err(Self::adm_err)?;
        self.put_admission(holder, next).await
    }

    /// Ends an admission the holder's generation started.
    pub async fn finish_admission(
        &self,
        holder: &Holder,
        id: &AdmissionId,
        end: AdmissionEnd,
    ) -> Result<Admission, DomainError> {
        let a = self.admission(id).await?;
        let next = admission::finish(&a, holder.generation, end).map_err(Self::adm_err)?;
        self.put_admission(holder, next).await
    }

    /// Recovery by a successor: every admission a retired generation started becomes `unknown`.
    pub async fn recover(&self, holder: &Holder) -> Result<Vec<AdmissionId>, DomainError> {
        let mut marked = Vec::new();
        for a in self.admissions(&holder.lane).await? {
            if matches!(&a.state, AdmissionState::Started { generation, .. } if *generation < holder.generation)
            {
                let next = if self.defect == Some(Defect::ResetUnknownToQueued) {
                    Admission {
                        state: AdmissionState::Queued,
                        version: a.version + 1,
                        ..a.clone()
                    }
                } else {
                    admission::mark_unknown(&a, holder.generation).map_err(Self::adm_err)?
                };
                self.put_admission(holder, next).await?;
                marked.push(a.id.clone());
            }
        }
        Ok(marked)
    }

    /// Resolves an `unknown` admission by readback of the occurrence its submission created:
    /// terminal occurrence → its end; no occurrence or a pre-entry tombstone → `not_executed`;
    /// anything else stays `unknown` (and is returned unchanged). Never back to `queued`.
    pub async fn resolve_unknown(
        &self,
        holder: &Holder,
        id: &AdmissionId,
    ) -> Result<Admission, DomainError> {
        let a = self.admission(id).await?;
        if !matches!(a.state, AdmissionState::Unknown { .. }) {
            return Err(Self::adm_err(admission::AdmissionError {
                id: id.to_string(),
                msg: format!("is {}, not unknown", a.state.label()),
            }));
        }
        // Readback: the linked occurrence, or the one the submission key created.
        let occ = match &a.occurrence {
            Some(o) => Some(o.clone()),
            None => {
                let cb = self.creation_binding(&a.submission_key)?;
                self.store
                    .find_creation(self.ns(), &cb)
                    .await
                    .map_err(DomainError::Store)?
            }
        };
        let end = match occ {
            None => Some(AdmissionEnd::NotExecuted),
            Some(o) => {
                let st = self.state(&o).await?;
                match (st.phase, st.outcome) {
                    _ if st.is_unresolved() => None,
                    (Phase::Released, _) => Some(AdmissionEnd::NotExecuted),
                    (Phase::Resolved, Some(Outcome::Success)) => Some(AdmissionEnd::Completed),
                    (Phase::Resolved, Some(_)) => Some(AdmissionEnd::Failed),
                    _ => None,
                }
            }
        };
        match end {
            Some(end) => {
                let next = admission::resolve_unknown(&a, end).map_err(Self::adm_err)?;
                self.put_admission(holder, next).await
            }
            None => Ok(a),
        }
    }
}
