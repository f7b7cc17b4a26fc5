//! The reference system under test: the AOC domain of `crate::aoc` plus an in-process executor per
//! generation that talks to fake-payments through [`super::payments::PaymentsClient`]. Executors are
//! named by the case; a crash wipes an executor's memory (tokens, entry permits), a replacement
//! advances the lane's generation, and every action reaches the provider only through the domain.
//!
//! [`Variant`] selects a deliberately broken implementation for the harness's own tests.

use super::payments::PaymentsClient;
use crate::aoc::admission::{Admission, AdmissionEnd};
use crate::aoc::binding::ProviderBinding;
#[cfg(feature = "test-knobs")]
use crate::aoc::domain::Defect;
use crate::aoc::domain::{CreateRequest, EntryPermit, RemedyRequest};
use crate::aoc::history::{ChainedEntry, ReleaseReason};
use crate::aoc::ids::{ExecutorId, Holder, LaneId, OccurrenceId, OwnerToken};
use crate::aoc::occurrence::OccurrenceState;
use crate::aoc::{Domain, Req};
use crate::store::{AnyStore, Store};
use crate::sut::SutError;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;

/// Which implementation: the conforming reference, or one deliberately broken variant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Variant {
    #[default]
    Conforming,
    /// Sends again, under a fresh key, when an entered occurrence's outcome is unknown.
    ReplayUnknown,
    /// Lets a retired generation enter the provider.
    RetiredEnters,
    /// Accepts a rebinding of the account (or any bound field).
    RebindAccount,
    /// Treats deadline expiry after entry as non-entry and closes the occurrence.
    ReleaseOnTimeout,
    /// Reports consumed authority as restored after a remedy.
    RestoreAuthority,
    /// Rewrites the last history entry after recording evidence.
    OverwriteHistory,
    /// Trusts a response whose authentication tag does not verify.
    TrustUnauthenticated,
    /// Verifies a reply's tag for the account the tag names, not the bound account: an
    /// authentic reply about another binding is taken as evidence (AOC-REQ-007).
    TrustReplyAccount,
    /// Puts an `unknown` admission back in the queue on recovery.
    ResetUnknownToQueued,
    /// Sends again under the same key when an entered occurrence's outcome is unknown: the
    /// provider answers from its idempotency store, so no second effect appears.
    ResendSameKey,
    /// Reports an unresolved entered occurrence as resolved with success (its history is honest).
    RosyState,
    /// Drops the earliest observation from its history once a second one is recorded, and
    /// recomputes the chain so that it verifies.
    DropObservation,
    /// States about itself that copying an operation record transfers exclusive ownership of a
    /// live ledger (a claim AOC-REQ-013 forbids).
    ProhibitedClaim,
    /// Takes AADP's permit expiry as the end of the AOC occurrence's exposure and releases it,
    /// even after provider entry (§5 forbids relabelling entry as non-entry).
    AadpExpiryReleases,
    /// Takes a new caller retry id for a new occurrence (AOC-REQ-002: labels alone never
    /// create one).
    LabelsMint,
    /// Ignores the declared durable action fence (AOC-REQ-002).
    NoActionFence,
    /// Accepts the original occurrence's grant as a remedy's authorization (AOC-REQ-012: a
    /// remedy needs separate native authorization).
    RemedyReusesGrant,
    /// Takes a replacement-attempt remedy as leave to send the original's request again, under
    /// a fresh key (AOC-REQ-012: a replacement attempt has its own replay-protected identity).
    ReplacementReenters,
    // Combination-only defects (issue 22): the fixed suite passes each (no fixed case builds
    // the combination), and `aocheck explore` must find each.
    /// A successor sends an entered occurrence's request again, under a fresh key, when its
    /// predecessor's entry was answered with a 5xx (AOC-REQ-010: an unresolved occurrence never
    /// enters the provider again, whatever generation asks).
    #[serde(rename = "successor_resends_after_5xx")]
    SuccessorResendsAfter5xx,
    /// Accepts a rebinding asked by a successor generation of the one that created the
    /// occurrence (AOC-REQ-003: the binding never changes, whoever asks).
    RebindAfterTakeover,
    /// A retired executor whose request is answered late with a 5xx sends it again, under a
    /// fresh key (AOC-REQ-007: a historical response never authorises a replay).
    #[serde(rename = "retired_retries_late_5xx")]
    RetiredRetriesLate5xx,
    /// Once a lookup found nothing past the provider's retention, an entry the domain refuses
    /// (as made before, or to a lapsed lease) sends the request again under its own key: the
    /// provider forgot the key, so it pays twice (AOC-REQ-010: a provider idempotency key is not
    /// permission for a second attempt).
    ResendAfterForget,
    /// Releases an entered occurrence once a lookup found nothing past the provider's retention
    /// (AOC-REQ-008: not-found proves no non-entry).
    ReleaseAfterForget,
    /// A successor reports an occurrence its predecessor entered, whose outcome only a 5xx
    /// answered, as failed (AOC-REQ-009: never a terminal state from an HTTP class).
    #[serde(rename = "successor_reads_5xx_as_failed")]
    SuccessorReads5xxAsFailed,
    /// Honest alternative: every refusal is reported without a requirement label (the draft
    /// requires the refusal, not its label; decisions D22).
    NoLabels,
    /// Honest alternative: a successor never enters a reservation it adopted from a
    /// predecessor; it refuses the entry and releases the reservation with a tombstone
    /// (AOC-CASE-002's path; decisions D30).
    ReleaseAndTombstone,
    /// Honest alternative: an authenticated generic final failure leaves the occurrence
    /// unresolved instead of resolving it as `final_failure` (decisions D24).
    GenericFailureUnresolved,
}

impl Variant {
    pub const BROKEN: [Variant; 18] = [
        Variant::ReplayUnknown,
        Variant::RetiredEnters,
        Variant::RebindAccount,
        Variant::ReleaseOnTimeout,
        Variant::RestoreAuthority,
        Variant::OverwriteHistory,
        Variant::TrustUnauthenticated,
        Variant::TrustReplyAccount,
        Variant::ResetUnknownToQueued,
        Variant::ResendSameKey,
        Variant::RosyState,
        Variant::DropObservation,
        Variant::ProhibitedClaim,
        Variant::AadpExpiryReleases,
        Variant::LabelsMint,
        Variant::NoActionFence,
        Variant::RemedyReusesGrant,
        Variant::ReplacementReenters,
    ];

    /// Broken only in a combination no fixed case builds: each passes the fixed suite, and
    /// `aocheck explore` must find each (tests/it/explore.rs, tests/it/broken.rs).
    pub const COMBINATION: [Variant; 6] = [
        Variant::SuccessorResendsAfter5xx,
        Variant::RebindAfterTakeover,
        Variant::RetiredRetriesLate5xx,
        Variant::ResendAfterForget,
        Variant::ReleaseAfterForget,
        Variant::SuccessorReads5xxAsFailed,
    ];

    /// Conforming choices other than the reference's own: each must pass everything.
    pub const HONEST: [Variant; 3] = [
        Variant::NoLabels,
        Variant::ReleaseAndTombstone,
        Variant::GenericFailureUnresolved,
    ];
}

#[derive(Debug)]
struct Exec {
    holder: Holder,
    alive: bool,
    tokens: HashMap<OccurrenceId, OwnerToken>,
    permits: HashMap<OccurrenceId, EntryPermit>,
    /// Reservations this executor took over from a predecessor by adopting them.
    adopted: std::collections::HashSet<OccurrenceId>,
}

/// The request an occurrence stands for. Kept durable (`INTENTS`) beside the domain's records, so
/// a successor process on the same store can act on an occurrence its predecessor created.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
struct Intent {
    body: Value,
    binding: ProviderBinding,
}

/// The record namespace of the reference's request intents.
pub const INTENTS: &str = "aocheck.reference.intents.v1";

/// The reference implementation, driven step by step by the runner.
#[derive(Debug)]
pub struct ReferenceSut {
    pub domain: Domain<AnyStore>,
    pub client: PaymentsClient,
    lane: LaneId,
    executors: HashMap<String, Exec>,
    intents: HashMap<OccurrenceId, Intent>,
    knobs: super::Knobs,
    background: Vec<(String, tokio::task::JoinHandle<Result<(), SutError>>)>,
}

#[cfg(feature = "test-knobs")]
fn domain_defect(v: Variant) -> Option<Defect> {
    match v {
        Variant::RetiredEnters => Some(Defect::SkipEntryFence),
        Variant::RebindAccount => Some(Defect::AllowRebind),
        Variant::ReleaseOnTimeout | Variant::AadpExpiryReleases => Some(Defect::ReleaseAfterEntry),
        Variant::ResetUnknownToQueued => Some(Defect::ResetUnknownToQueued),
        Variant::RemedyReusesGrant => Some(Defect::RemedyReusesGrant),
        Variant::ReleaseAfterForget => Some(Defect::ReleaseAfterForget),
        _ => None,
    }
}

/// A dropped reference is a dead process: nothing it started in the background outlives it.
impl Drop for ReferenceSut {
    fn drop(&mut self) {
        self.abort_background();
    }
}

impl ReferenceSut {
    pub fn new(domain: Domain<AnyStore>, mut client: PaymentsClient, knobs: super::Knobs) -> Self {
        client.trust_unauthenticated = knobs.is(Variant::TrustUnauthenticated);
        client.trust_reply_account = knobs.is(Variant::TrustReplyAccount);
        #[cfg(feature = "test-knobs")]
        let domain = match domain_defect(knobs.variant()) {
            Some(d) => domain.with_defect_for_tests(d),
            None => domain,
        };
        ReferenceSut {
            domain,
            client,
            lane: LaneId("lane-1".into()),
            executors: HashMap::new(),
            intents: HashMap::new(),
            knobs,
            background: Vec::new(),
        }
    }

    pub fn variant(&self) -> Variant {
        self.knobs.variant()
    }
    pub fn lane(&self) -> &LaneId {
        &self.lane
    }

    fn exec(&self, name: &str) -> Result<&Exec, SutError> {
        let e = self
            .executors
            .get(name)
            .ok_or_else(|| SutError::Harness(format!("no executor {name:?}")))?;
        if !e.alive {
            return Err(SutError::Harness(format!(
                "executor {name:?} crashed; it cannot act"
            )));
        }
        Ok(e)
    }

    pub fn holder_of(&self, name: &str) -> Option<Holder> {
        self.executors.get(name).map(|e| e.holder.clone())
    }

    /// An executor joins the lane (acquires its lease).
    pub async fn join(&mut self, name: &str) -> Result<Holder, SutError> {
        let h = self
            .domain
            .join(&self.lane, &ExecutorId(name.into()))
            .await?;
        self.insert_exec(name, h.clone());
        Ok(h)
    }

    /// A new executor replaces the lane's holder (its predecessor is retired, not necessarily dead).
    pub async fn replace(&mut self, name: &str) -> Result<Holder, SutError> {
        let h = self
            .domain
            .replace(&self.lane, &ExecutorId(name.into()))
            .await?;
        self.insert_exec(name, h.clone());
        Ok(h)
    }

    fn insert_exec(&mut self, name: &str, holder: Holder) {
        self.executors.insert(
            name.into(),
            Exec {
                holder,
                alive: true,
                tokens: HashMap::new(),
                permits: HashMap::new(),
                adopted: Default::default(),
            },
        );
    }

    /// Every background send dies now (the provider sees its connection go).
    pub fn abort_background(&mut self) {
        for (_, t) in self.background.drain(..) {
            t.abort();
        }
    }

    /// The executor process dies: everything it held in memory is gone.
    pub fn crash(&mut self, name: &str) -> Result<(), SutError> {
        let e = self
            .executors
            .get_mut(name)
            .ok_or_else(|| SutError::Harness(format!("no executor {name:?}")))?;
        e.alive = false;
        e.tokens.clear();
        e.permits.clear();
        // Its in-flight requests die with it (the provider sees the connection go).
        for (who, t) in &self.background {
            if who == name {
                t.abort();
            }
        }
        Ok(())
    }

    pub async fn create(
        &mut self,
        name: &str,
        key: &str,
        amount: i64,
        simulate: Option<&str>,
        labels: &crate::sut::message::CreateLabels,
    ) -> Result<OccurrenceId, SutError> {
        let holder = self.exec(name)?.holder.clone();
        let metadata = match simulate {
            Some(s) => json!({"simulate": s}),
            None => json!({}),
        };
        // The native key is the occurrence id, known only after creation; the request body does
        // not contain it, so the request digest is fixed first.
        let (body, probe) =
            self.client
                .create_request(amount, crate::sut::message::CURRENCY, "", &metadata);
        let occ = self
            .domain
            .create(
                &holder,
                CreateRequest {
                    // The `labels_mint` defect: a new retry id is taken for a new occurrence.
                    creation_key: match (&labels.retry_id, self.knobs.is(Variant::LabelsMint)) {
                        (Some(r), true) => format!("{key}/{r}"),
                        _ => key.into(),
                    },
                    request_digest: probe.request_digest.clone(),
                    labels: crate::aoc::history::CallerLabels {
                        retry_id: labels.retry_id.clone(),
                        task_id: labels.task_id.clone(),
                        grant_id: labels.grant_id.clone(),
                        action_digest: labels
                            .action
                            .as_deref()
                            .map(|a| crate::digest::Digest::of_bytes(a.as_bytes())),
                        aadp_request_id: labels.aadp_request_id.clone(),
                        bcr_operation_id: labels.bcr_operation_id.clone(),
                    },
                },
            )
            .await?;
        let (_, binding) = self.client.create_request(
            amount,
            crate::sut::message::CURRENCY,
            occ.as_str(),
            &metadata,
        );
        let intent = Intent { body, binding };
        let doc = serde_json::to_value(&intent)
            .map_err(|e| SutError::Harness(format!("intent of {occ}: {e}")))?;
        // Written once, before any entry: a conflict means an earlier create stored it already.
        match self
            .domain
            .store()
            .record_cas(INTENTS, occ.as_str(), None, &doc)
            .await
        {
            Ok(_) | Err(crate::store::StoreError::Conflict { .. }) => {}
            Err(e) => return Err(SutError::Harness(format!("store the intent of {occ}: {e}"))),
        }
        self.intents.entry(occ.clone()).or_insert(intent);
        Ok(occ)
    }

    async fn intent(&self, occ: &OccurrenceId) -> Result<Intent, SutError> {
        if let Some(i) = self.intents.get(occ) {
            return Ok(i.clone());
        }
        match self.domain.store().record_get(INTENTS, occ.as_str()).await {
            Ok(Some((_, v))) => serde_json::from_value(v)
                .map_err(|e| SutError::Corrupt(format!("stored intent of {occ}: {e}"))),
            // Not created by a `create` of this implementation (a remedy is recorded, never
            // carried out here): no request is bound to it, so there is nothing to send.
            Ok(None) => Err(not_bound(occ)),
            Err(e) => Err(SutError::Harness(format!("read the intent of {occ}: {e}"))),
        }
    }

    pub async fn reserve(
        &mut self,
        name: &str,
        occ: &OccurrenceId,
        amount: u64,
    ) -> Result<(), SutError> {
        let holder = self.exec(name)?.holder.clone();
        let intent = self.intent(occ).await?;
        let tok = self
            .domain
            .reserve(&holder, occ, &intent.binding, amount)
            .await?;
        if let Some(e) = self.executors.get_mut(name) {
            e.tokens.insert(occ.clone(), tok);
        }
        Ok(())
    }

    pub async fn adopt(
        &mut self,
        name: &str,
        occ: &OccurrenceId,
    ) -> Result<OccurrenceState, SutError> {
        let holder = self.exec(name)?.holder.clone();
        let (st, tok) = self.domain.adopt(&holder, occ).await?;
        if let (Some(t), Some(e)) = (tok, self.executors.get_mut(name)) {
            e.tokens.insert(occ.clone(), t);
            e.adopted.insert(occ.clone());
        }
        Ok(st)
    }

    /// Serialized provider entry only (the request is not sent yet).
    pub async fn enter(&mut self, name: &str, occ: &OccurrenceId) -> Result<(), SutError> {
        let e = self.exec(name)?;
        if self.knobs.is(Variant::ReleaseAndTombstone) && e.adopted.contains(occ) {
            // The choice: a predecessor's reservation is released with a tombstone, not entered.
            return Err(SutError::Refused(crate::aoc::Refusal {
                occurrence: Some(occ.clone()),
                requirement: Req::R008,
                kind: crate::aoc::RefusalKind::WrongPhase {
                    phase: "adopted from a predecessor".into(),
                    op: "enter (this implementation releases such a reservation instead)".into(),
                },
            }));
        }
        let holder = e.holder.clone();
        let token = e.tokens.get(occ).cloned().unwrap_or_else(OwnerToken::mint);
        let intent = self.intent(occ).await?;
        let permit = match self
            .domain
            .enter(&holder, occ, &token, &intent.binding)
            .await
        {
            Ok(p) => p,
            Err(err) => {
                let refusal = SutError::from(err);
                if (self.knobs.is(Variant::ReplayUnknown) || self.knobs.is(Variant::ResendSameKey))
                    && let SutError::Refused(r) = &refusal
                    && matches!(r.kind, crate::aoc::RefusalKind::AlreadyEntered { .. })
                {
                    // The defect: the outcome is unknown, so try again under a fresh key.
                    let st = self.domain.state(occ).await?;
                    if st.is_unresolved() {
                        let key = self
                            .knobs
                            .is(Variant::ReplayUnknown)
                            .then(|| format!("{occ}-retry"));
                        self.send_outside_domain(&intent, key).await;
                        return Ok(());
                    }
                }
                if let SutError::Refused(r) = &refusal
                    && let Some(key) = self
                        .resend_key(
                            &holder,
                            occ,
                            matches!(r.kind, crate::aoc::RefusalKind::AlreadyEntered { .. }),
                        )
                        .await?
                {
                    self.send_outside_domain(&intent, key).await;
                    return Ok(());
                }
                return Err(refusal);
            }
        };
        if let Some(e) = self.executors.get_mut(name) {
            e.permits.insert(occ.clone(), permit);
        }
        Ok(())
    }

    /// The combination-only defects that send an entered occurrence's request again when the
    /// domain refuses its entry (`already_entered`: refused as entered before): `Some(key)`
    /// (`None` inside: the occurrence's own key) when this variant sends again now.
    async fn resend_key(
        &self,
        holder: &Holder,
        occ: &OccurrenceId,
        already_entered: bool,
    ) -> Result<Option<Option<String>>, SutError> {
        use crate::aoc::history::EntryBody;
        use crate::aoc::profile::{EvidenceKind, MissingKnowledge};
        let resends = [
            Variant::SuccessorResendsAfter5xx,
            Variant::ResendAfterForget,
        ];
        if !resends.iter().any(|v| self.knobs.is(*v)) {
            return Ok(None);
        }
        let st = self.domain.state(occ).await?;
        if !st.is_unresolved() {
            return Ok(None);
        }
        // The entry's own request was answered with a 5xx.
        let server_error = self.domain.history(occ).await?.iter().any(|e| {
            matches!(&e.body, EntryBody::Observed { evidence, .. }
                if matches!(evidence.kind, EvidenceKind::Response { .. })
                    && matches!(evidence.native, crate::aoc::NativeResult::HttpError { status } if status >= 500))
        });
        let successor = st.entered_generation.is_some_and(|g| g < holder.generation);
        Ok(
            if self.knobs.is(Variant::SuccessorResendsAfter5xx)
                && already_entered
                && server_error
                && successor
            {
                Some(Some(format!("{occ}-successor")))
            } else if self.knobs.is(Variant::ResendAfterForget)
                && st.missing.contains(&MissingKnowledge::BeyondRetention)
            {
                Some(None)
            } else {
                None
            },
        )
    }

    /// Test knobs' defect: the occurrence's request sent to the provider with no entry the
    /// domain admitted, under `key` (or its own key). What the provider answers is ignored.
    async fn send_outside_domain(&self, intent: &Intent, key: Option<String>) {
        let mut b = intent.binding.clone();
        if let Some(k) = key {
            b.native_key = Some(k);
        }
        let _ = self
            .client
            .send_create(
                &b,
                &intent.body,
                &crate::aoc::ids::AttemptId::mint(),
                self.domain.clock().now(),
            )
            .await;
    }

    /// Whether the executor holds an entry permit for the occurrence (it entered it).
    pub fn has_permit(&self, name: &str, occ: &OccurrenceId) -> bool {
        self.executors
            .get(name)
            .is_some_and(|e| e.permits.contains_key(occ))
    }

    /// Sends the entered attempt's request and records what comes back. In the background, the
    /// send outlives its executor: a late response is recorded as the retired executor's.
    pub async fn send(
        &mut self,
        name: &str,
        occ: &OccurrenceId,
        background: bool,
    ) -> Result<(), SutError> {
        self.exec(name)?;
        if !self.has_permit(name, occ) {
            return Err(no_permit(name, occ));
        }
        // An outcome decided while the request was unsent (an absence the status source
        // proved) ends the entry: the request is never sent after it, or the decision would be
        // false (AOC-REQ-011).
        if !self.domain.state(occ).await?.phase.is_in_flight() {
            return Err(SutError::Refused(crate::aoc::Refusal::new(
                Some(occ),
                Req::R011,
                crate::aoc::RefusalKind::Terminal,
            )));
        }
        let intent = self.intent(occ).await?;
        // A permit is one send: the first takes it (a second send of the same entry, raced or
        // after the first, is a second provider request for one admitted entry, AOC §4.1). No
        // permit, no send: a refusal, never an error of the executor. Taken once everything
        // the send needs was read, so a failed read does not spend it.
        let permit = self
            .executors
            .get_mut(name)
            .and_then(|e| e.permits.remove(occ))
            .ok_or_else(|| no_permit(name, occ))?;
        let client = self.client.clone();
        let domain = self.domain.clone();
        let who = ExecutorId(name.into());
        let occ = occ.clone();
        #[cfg(feature = "test-knobs")]
        let overwrite = self.knobs.is(Variant::OverwriteHistory);
        let retry_late = self.knobs.is(Variant::RetiredRetriesLate5xx);
        let holder = self.exec(name)?.holder.clone();
        let job = async move {
            let ev = client
                .send_create(
                    &intent.binding,
                    &intent.body,
                    &permit.attempt,
                    domain.clock().now(),
                )
                .await;
            domain.record_evidence(&occ, &ev, Some(&who)).await?;
            // The defect: a 5xx that reaches a retired executor late is taken as leave to try
            // again, under a fresh key.
            if retry_late
                && matches!(ev.native, crate::aoc::NativeResult::HttpError { status } if status >= 500)
                && domain
                    .lease(&holder.lane)
                    .await?
                    .is_some_and(|l| l.holder.generation > holder.generation)
            {
                let mut b = intent.binding.clone();
                b.native_key = Some(format!("{occ}-late-retry"));
                let _ = client
                    .send_create(
                        &b,
                        &intent.body,
                        &crate::aoc::ids::AttemptId::mint(),
                        domain.clock().now(),
                    )
                    .await;
            }
            #[cfg(feature = "test-knobs")]
            if overwrite {
                overwrite_last(&domain, &occ).await?;
            }
            Ok::<(), SutError>(())
        };
        if background {
            self.background.push((name.to_string(), tokio::spawn(job)));
            Ok(())
        } else {
            job.await
        }
    }

    /// Enters, then sends if the entry was granted (the `execute` step).
    pub async fn execute(&mut self, name: &str, occ: &OccurrenceId) -> Result<(), SutError> {
        self.enter(name, occ).await?;
        if self.has_permit(name, occ) {
            self.send(name, occ, false).await?;
        }
        Ok(())
    }

    /// Waits for every background send to finish.
    pub async fn settle(&mut self) -> Result<(), SutError> {
        for (_, t) in std::mem::take(&mut self.background) {
            match t.await {
                Ok(r) => r?,
                // Killed with its executor: nothing to wait for.
                Err(e) if e.is_cancelled() => {}
                Err(e) => return Err(SutError::Harness(format!("background send failed: {e}"))),
            }
        }
        Ok(())
    }

    /// Asks the status source and records the answer.
    pub async fn reconcile(&mut self, name: &str, occ: &OccurrenceId) -> Result<(), SutError> {
        self.exec(name)?;
        let st = self.domain.state(occ).await?;
        // Nothing was bound, so nothing reached the provider to ask about.
        let binding = st.binding.clone().ok_or_else(|| not_bound(occ))?;
        let ev = self
            .client
            .lookup(
                &binding,
                st.provider_ref.as_deref(),
                self.domain.clock().now(),
            )
            .await;
        self.domain
            .record_evidence(occ, &ev, Some(&ExecutorId(name.into())))
            .await?;
        #[cfg(feature = "test-knobs")]
        if self.knobs.is(Variant::OverwriteHistory) {
            overwrite_last(&self.domain, occ).await?;
        }
        Ok(())
    }

    pub async fn release(
        &mut self,
        name: &str,
        occ: &OccurrenceId,
        reason: ReleaseReason,
    ) -> Result<(), SutError> {
        let e = self.exec(name)?;
        let holder = e.holder.clone();
        let token = e.tokens.get(occ).cloned().unwrap_or_else(OwnerToken::mint);
        let intent = self.intent(occ).await?;
        self.domain
            .release(&holder, occ, &token, &intent.binding.request_digest, reason)
            .await?;
        Ok(())
    }

    /// AADP's permit expired (§5). The `aadp_expiry_releases` defect takes it as the end of the
    /// occurrence's exposure and releases the AOC reservation, even after entry.
    pub async fn aadp_expire(&mut self, name: &str, occ: &OccurrenceId) -> Result<(), SutError> {
        self.exec(name)?;
        if self.knobs.is(Variant::AadpExpiryReleases) {
            return self
                .release(name, occ, ReleaseReason::DeadlineExpired)
                .await;
        }
        self.domain.aadp_expired(occ).await?;
        Ok(())
    }

    /// Asks the domain to change one bound field.
    pub async fn rebind(
        &mut self,
        name: &str,
        occ: &OccurrenceId,
        field: &str,
        value: &str,
    ) -> Result<(), SutError> {
        let holder = self.exec(name)?.holder.clone();
        let mut b = self.intent(occ).await?.binding;
        let after_takeover = self.knobs.is(Variant::RebindAfterTakeover)
            && self.domain.state(occ).await?.created_generation < holder.generation;
        match field {
            "account" => b.account = value.into(),
            "environment" => b.environment = value.into(),
            "native_key" => b.native_key = Some(value.into()),
            "profile_version" => b.profile_version = value.into(),
            "status_source" => b.status_source = value.into(),
            "request" => b.request_digest = crate::digest::Digest::of_bytes(value.as_bytes()),
            "provider_ref" => {}
            other => {
                return Err(SutError::Harness(format!(
                    "unknown binding field {other:?}"
                )));
            }
        }
        let r = if field == "provider_ref" {
            Some(value)
        } else {
            None
        };
        if after_takeover {
            // The defect: a successor's rebinding is taken without asking the domain.
            if let Some(i) = self.intents.get_mut(occ) {
                i.binding = b;
            }
            return Ok(());
        }
        self.domain.rebind(&holder, occ, &b, r).await?;
        if self.knobs.is(Variant::RebindAccount)
            && let Some(i) = self.intents.get_mut(occ)
        {
            i.binding = b;
        }
        Ok(())
    }

    pub async fn remedy(
        &mut self,
        name: &str,
        occ: &OccurrenceId,
        kind: crate::sut::message::RemedyKind,
        authorization: &str,
    ) -> Result<OccurrenceId, SutError> {
        let holder = self.exec(name)?.holder.clone();
        // The remedy's own request: what it is and what it remedies. One authorization is one
        // remedy, so the same authorization for another kind conflicts with its creation binding.
        let digest = crate::digest::Digest::of_bytes(format!("{} {occ}", kind.name()).as_bytes());
        let remedy = self
            .domain
            .remedy(
                &holder,
                occ,
                RemedyRequest {
                    authorization: authorization.into(),
                    request_digest: digest,
                },
            )
            .await?;
        if self.knobs.is(Variant::ReplacementReenters)
            && kind == crate::sut::message::RemedyKind::ReplacementAttempt
        {
            // The defect: the replacement attempt is the original's request sent again, under a
            // fresh key, instead of the linked occurrence's own entry.
            let intent = self.intent(occ).await?;
            self.send_outside_domain(&intent, Some(format!("{occ}-replacement")))
                .await;
        }
        Ok(remedy)
    }

    /// What the implementation reports about an occurrence (the checkers judge this, beside the
    /// raw history and the provider's ledger).
    pub async fn state(&self, occ: &OccurrenceId) -> Result<OccurrenceState, SutError> {
        let st = self.domain.state(occ).await?;
        Ok(self.reported(st))
    }

    /// The history and the report of one occurrence from one read of the store: the report is
    /// the fold of the very history returned beside it, never of a later write (a background
    /// send may record an observation between two reads).
    pub async fn answer(
        &self,
        occ: &OccurrenceId,
    ) -> Result<(Vec<ChainedEntry>, OccurrenceState), SutError> {
        let raw = self.load(occ).await?;
        let st = self.domain.fold_verified(occ, &raw)?;
        Ok((self.shown(raw)?, self.reported(st)))
    }

    fn reported(&self, mut st: OccurrenceState) -> OccurrenceState {
        if self.knobs.is(Variant::RestoreAuthority) && !st.remedies.is_empty() {
            // The defect: a remedy "refunds" the consumed authority.
            st.authority.released += st.authority.consumed;
            st.authority.consumed = 0;
        }
        if self.knobs.is(Variant::SuccessorReads5xxAsFailed)
            && st.is_unresolved()
            && st.entered_generation.is_some_and(|g| g < st.owner_generation)
            && st.missing.iter().any(|m| {
                matches!(m, crate::aoc::profile::MissingKnowledge::HttpStatusOnly { status } if *status >= 500)
            })
        {
            // The defect: the predecessor's 5xx read by its successor as a failure.
            st.phase = crate::aoc::occurrence::Phase::Resolved;
            st.outcome = Some(crate::aoc::history::Outcome::FinalFailure { no_effect: false });
            st.missing.clear();
        }
        if self.knobs.is(Variant::RosyState) && st.is_unresolved() && st.entry_attempts > 0 {
            // The defect: an unknown outcome reported as the hoped-for one.
            st.phase = crate::aoc::occurrence::Phase::Resolved;
            st.outcome = Some(crate::aoc::history::Outcome::Success);
            st.missing.clear();
        }
        st
    }

    /// The raw stored history, unverified: the checkers verify it themselves.
    async fn load(&self, occ: &OccurrenceId) -> Result<Vec<ChainedEntry>, SutError> {
        self.domain
            .store()
            .load(&self.domain.config().domain_id, occ)
            .await
            .map_err(|e| SutError::Harness(e.to_string()))?
            .ok_or_else(|| SutError::Harness(format!("no history for {occ}")))
    }

    pub async fn history(&self, occ: &OccurrenceId) -> Result<Vec<ChainedEntry>, SutError> {
        let h = self.load(occ).await?;
        self.shown(h)
    }

    /// The history as this variant shows it.
    fn shown(&self, h: Vec<ChainedEntry>) -> Result<Vec<ChainedEntry>, SutError> {
        let observed =
            |e: &ChainedEntry| matches!(e.body, crate::aoc::history::EntryBody::Observed { .. });
        if self.knobs.is(Variant::DropObservation) && h.iter().filter(|e| observed(e)).count() > 1 {
            // The defect: the inconvenient first observation is gone and the chain re-sealed.
            let mut kept = h;
            if let Some(i) = kept.iter().position(observed) {
                kept.remove(i);
            }
            let bodies = kept.into_iter().map(|e| e.body).collect();
            return ChainedEntry::seal_all(0, None, bodies)
                .map_err(|e| SutError::Harness(e.to_string()));
        }
        Ok(h)
    }

    // ---- admissions and the lease (seed 003) ----

    pub async fn submit(&mut self, key: &str) -> Result<Admission, SutError> {
        Ok(self
            .domain
            .submit(
                &self.lane,
                key,
                &crate::digest::Digest::of_bytes(key.as_bytes()),
            )
            .await?)
    }
    pub async fn claim(&mut self, name: &str) -> Result<Option<Admission>, SutError> {
        let h = self.exec(name)?.holder.clone();
        Ok(self.domain.claim_next(&h).await?)
    }
    pub async fn link(
        &mut self,
        name: &str,
        adm: &crate::aoc::ids::AdmissionId,
        occ: &OccurrenceId,
    ) -> Result<(), SutError> {
        let h = self.exec(name)?.holder.clone();
        self.domain.link_admission(&h, adm, occ).await?;
        Ok(())
    }
    pub async fn recover(&mut self, name: &str) -> Result<usize, SutError> {
        let h = self.exec(name)?.holder.clone();
        Ok(self.domain.recover(&h).await?.len())
    }
    pub async fn resolve_unknown(
        &mut self,
        name: &str,
        adm: &crate::aoc::ids::AdmissionId,
    ) -> Result<Admission, SutError> {
        let h = self.exec(name)?.holder.clone();
        Ok(self.domain.resolve_unknown(&h, adm).await?)
    }
    pub async fn finish(
        &mut self,
        name: &str,
        adm: &crate::aoc::ids::AdmissionId,
        end: AdmissionEnd,
    ) -> Result<(), SutError> {
        let h = self.exec(name)?.holder.clone();
        self.domain.finish_admission(&h, adm, end).await?;
        Ok(())
    }
    /// A lease refresh or release by a possibly retired executor (it may act even after a
    /// replacement: that is the point).
    pub async fn lease_call(&mut self, name: &str, release: bool) -> Result<(), SutError> {
        let h = self
            .executors
            .get(name)
            .map(|e| e.holder.clone())
            .ok_or_else(|| SutError::Harness(format!("no executor {name:?}")))?;
        if release {
            self.domain.leave(&h).await?;
        } else {
            self.domain.refresh(&h).await?;
        }
        Ok(())
    }
}

/// The OverwriteHistory defect: re-seal the last entry with a changed body in place.
#[cfg(feature = "test-knobs")]
async fn overwrite_last(domain: &Domain<AnyStore>, occ: &OccurrenceId) -> Result<(), SutError> {
    use crate::aoc::history::EntryBody;
    let hist = domain.history(occ).await?;
    let Some(first_observed) = hist
        .iter()
        .find(|e| matches!(e.body, EntryBody::Observed { .. }))
    else {
        return Ok(());
    };
    let mut forged = first_observed.clone();
    if let EntryBody::Observed { evidence, .. } = &mut forged.body {
        evidence.authenticated = !evidence.authenticated;
    }
    let ns = &domain.config().domain_id;
    let body = serde_json::to_string(&forged.body).map_err(|e| SutError::Harness(e.to_string()))?;
    let store_err = |e: crate::store::StoreError| SutError::Harness(e.to_string());
    match &**domain.store() {
        AnyStore::Memory(m) => {
            m.tamper_entry(ns, occ, forged.seq as usize, forged);
        }
        AnyStore::Sqlite(s) => {
            s.tamper_entry_for_tests(ns, occ, forged.seq, body)
                .await
                .map_err(store_err)?;
        }
        AnyStore::Postgres(p) => {
            p.tamper_entry_for_tests(ns, occ, forged.seq, body)
                .await
                .map_err(store_err)?;
        }
    }
    Ok(())
}

/// Shared handle type used by the runner.
pub type SharedSut = Arc<tokio::sync::Mutex<ReferenceSut>>;

/// A send with no entry admitted to its executor (or whose permit was spent): a refusal.
fn no_permit(name: &str, occ: &OccurrenceId) -> SutError {
    SutError::Refused(crate::aoc::Refusal::new(
        Some(occ),
        Req::R001,
        crate::aoc::RefusalKind::WrongPhase {
            phase: format!("no entry admitted to {name} and not yet sent"),
            op: "send".into(),
        },
    ))
}

/// An operation on an occurrence with no bound request (never reserved, or not created by this
/// implementation's `create`): a refusal.
fn not_bound(occ: &OccurrenceId) -> SutError {
    SutError::Refused(crate::aoc::Refusal::new(
        Some(occ),
        Req::R003,
        crate::aoc::RefusalKind::NotBound,
    ))
}
