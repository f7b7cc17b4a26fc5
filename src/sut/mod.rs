//! Systems under test: the reference implementation in process ([`ReferenceSut`]), or any
//! implementation as processes speaking `aocheck-sut/1` ([`remote::ProcessSut`]; the reference
//! speaks it too, `aocheck sut reference`). [`Sut`] is what the runner drives: the same steps,
//! the same checkers, whichever it is.

pub mod message;
pub mod operator;
pub mod process;
pub mod protocol;
pub mod remote;

use crate::aoc::admission::{Admission, AdmissionEnd};
use crate::aoc::composition::{BypassPath, CompositionStatus};
use crate::aoc::history::{ChainedEntry, ReleaseReason};
use crate::aoc::ids::{AdmissionId, OccurrenceId};
use crate::aoc::occurrence::OccurrenceState;
pub use crate::reference::{ReferenceSut, Variant};
use message::{Request, reply};
use remote::ProcessSut;

/// What went wrong with one SUT call.
#[derive(Debug, thiserror::Error)]
pub enum SutError {
    #[error(transparent)]
    Refused(crate::aoc::Refusal),
    /// The SUT's own state is impossible (a corrupt history): a finding, not a harness error.
    #[error("corrupt: {0}")]
    Corrupt(String),
    /// The harness could not decide (an unknown executor, a store that failed …).
    #[error("{0}")]
    Harness(String),
    /// The implementation answered, but not as the step requires.
    #[error("{1}")]
    Mismatch(crate::aoc::Req, String),
    /// An implementation refused (through the protocol) without naming the requirement.
    #[error("{0}")]
    RefusedUnnamed(String),
}

impl From<crate::aoc::DomainError> for SutError {
    fn from(e: crate::aoc::DomainError) -> Self {
        match e {
            crate::aoc::DomainError::Refused(r) => SutError::Refused(r),
            crate::aoc::DomainError::Corrupt { .. } => SutError::Corrupt(e.to_string()),
            other => SutError::Harness(other.to_string()),
        }
    }
}

/// The system under test the runner drives.
#[derive(Debug)]
pub enum Sut {
    Local(Box<ReferenceSut>),
    Process(Box<ProcessSut>),
}

impl Sut {
    pub async fn join(&mut self, name: &str) -> Result<(), SutError> {
        match self {
            Sut::Local(s) => s.join(name).await.map(|_| ()),
            Sut::Process(p) => p.join(name).await,
        }
    }
    pub async fn replace(&mut self, name: &str) -> Result<(), SutError> {
        match self {
            Sut::Local(s) => s.replace(name).await.map(|_| ()),
            Sut::Process(p) => p.replace(name).await,
        }
    }
    pub async fn crash(&mut self, name: &str) -> Result<(), SutError> {
        match self {
            Sut::Local(s) => s.crash(name),
            Sut::Process(p) => p.crash(name).await,
        }
    }
    pub async fn create(
        &mut self,
        who: &str,
        key: &str,
        amount: i64,
        simulate: Option<&str>,
    ) -> Result<OccurrenceId, SutError> {
        match self {
            Sut::Local(s) => s.create(who, key, amount, simulate).await,
            Sut::Process(p) => p
                .ask::<reply::Occurrence>(
                    who,
                    Request::Create {
                        key: key.into(),
                        amount,
                        simulate: simulate.map(str::to_string),
                    },
                )
                .await
                .map(|r| r.occurrence),
        }
    }
    pub async fn reserve(
        &mut self,
        who: &str,
        o: &OccurrenceId,
        amount: u64,
    ) -> Result<(), SutError> {
        match self {
            Sut::Local(s) => s.reserve(who, o, amount).await,
            Sut::Process(p) => p
                .call(
                    who,
                    Request::Reserve {
                        occurrence: o.clone(),
                        amount,
                    },
                )
                .await
                .map(|_| ()),
        }
    }
    pub async fn enter(&mut self, who: &str, o: &OccurrenceId) -> Result<(), SutError> {
        match self {
            Sut::Local(s) => s.enter(who, o).await,
            Sut::Process(p) => p
                .call(
                    who,
                    Request::Enter {
                        occurrence: o.clone(),
                    },
                )
                .await
                .map(|_| ()),
        }
    }
    pub async fn send(
        &mut self,
        who: &str,
        o: &OccurrenceId,
        background: bool,
    ) -> Result<(), SutError> {
        match self {
            Sut::Local(s) => s.send(who, o, background).await,
            Sut::Process(p) => p
                .call(
                    who,
                    Request::Send {
                        occurrence: o.clone(),
                        background,
                    },
                )
                .await
                .map(|_| ()),
        }
    }
    /// Enter, then send if the entry was granted.
    pub async fn execute(&mut self, who: &str, o: &OccurrenceId) -> Result<(), SutError> {
        match self {
            Sut::Local(s) => s.execute(who, o).await,
            Sut::Process(p) => p
                .call(
                    who,
                    Request::Execute {
                        occurrence: o.clone(),
                    },
                )
                .await
                .map(|_| ()),
        }
    }
    pub async fn settle(&mut self) -> Result<(), SutError> {
        match self {
            Sut::Local(s) => s.settle().await,
            Sut::Process(p) => p.settle().await,
        }
    }
    pub async fn adopt(&mut self, who: &str, o: &OccurrenceId) -> Result<(), SutError> {
        match self {
            Sut::Local(s) => s.adopt(who, o).await.map(|_| ()),
            Sut::Process(p) => p
                .call(
                    who,
                    Request::Adopt {
                        occurrence: o.clone(),
                    },
                )
                .await
                .map(|_| ()),
        }
    }
    pub async fn reconcile(&mut self, who: &str, o: &OccurrenceId) -> Result<(), SutError> {
        match self {
            Sut::Local(s) => s.reconcile(who, o).await,
            Sut::Process(p) => p
                .call(
                    who,
                    Request::Reconcile {
                        occurrence: o.clone(),
                    },
                )
                .await
                .map(|_| ()),
        }
    }
    pub async fn release(
        &mut self,
        who: &str,
        o: &OccurrenceId,
        reason: ReleaseReason,
    ) -> Result<(), SutError> {
        match self {
            Sut::Local(s) => s.release(who, o, reason).await,
            Sut::Process(p) => p
                .call(
                    who,
                    Request::Release {
                        occurrence: o.clone(),
                        reason,
                    },
                )
                .await
                .map(|_| ()),
        }
    }
    pub async fn rebind(
        &mut self,
        who: &str,
        o: &OccurrenceId,
        field: &str,
        value: &str,
    ) -> Result<(), SutError> {
        match self {
            Sut::Local(s) => s.rebind(who, o, field, value).await,
            Sut::Process(p) => p
                .call(
                    who,
                    Request::Rebind {
                        occurrence: o.clone(),
                        field: field.into(),
                        value: value.into(),
                    },
                )
                .await
                .map(|_| ()),
        }
    }
    pub async fn remedy(
        &mut self,
        who: &str,
        o: &OccurrenceId,
        authorization: &str,
    ) -> Result<OccurrenceId, SutError> {
        match self {
            Sut::Local(s) => s.remedy(who, o, authorization).await,
            Sut::Process(p) => p
                .ask::<reply::Occurrence>(
                    who,
                    Request::Remedy {
                        occurrence: o.clone(),
                        authorization: authorization.into(),
                    },
                )
                .await
                .map(|r| r.occurrence),
        }
    }
    /// What the implementation reports about an occurrence, and its raw stored history.
    pub async fn observe(
        &mut self,
        o: &OccurrenceId,
    ) -> Result<(Result<OccurrenceState, String>, Vec<ChainedEntry>), SutError> {
        match self {
            Sut::Local(s) => Ok((
                s.state(o).await.map_err(|e| e.to_string()),
                s.history(o).await.unwrap_or_default(),
            )),
            Sut::Process(p) => p.observe_occurrence(o).await,
        }
    }
    pub async fn state(&mut self, o: &OccurrenceId) -> Result<OccurrenceState, SutError> {
        match self {
            Sut::Local(s) => s.state(o).await,
            Sut::Process(p) => p.observe_occurrence(o).await?.0.map_err(SutError::Corrupt),
        }
    }
    /// The lane's current generation (0 when nobody holds it).
    pub async fn lane_generation(&mut self) -> Result<u64, SutError> {
        match self {
            Sut::Local(s) => Ok(match s.domain.lease(s.lane()).await {
                Ok(Some(l)) => l.holder.generation.0,
                _ => 0,
            }),
            Sut::Process(p) => Ok(p.lane_generation().await?.unwrap_or(0)),
        }
    }
    pub async fn submit(&mut self, key: &str) -> Result<AdmissionId, SutError> {
        match self {
            Sut::Local(s) => s.submit(key).await.map(|a| a.id),
            Sut::Process(p) => p.submit(key).await,
        }
    }
    pub async fn claim(&mut self, who: &str) -> Result<Option<AdmissionId>, SutError> {
        match self {
            Sut::Local(s) => s.claim(who).await.map(|a| a.map(|a| a.id)),
            Sut::Process(p) => p
                .ask::<reply::Admitted>(who, Request::Claim)
                .await
                .map(|r| r.admission),
        }
    }
    pub async fn link(
        &mut self,
        who: &str,
        a: &AdmissionId,
        o: &OccurrenceId,
    ) -> Result<(), SutError> {
        match self {
            Sut::Local(s) => s.link(who, a, o).await,
            Sut::Process(p) => p
                .call(
                    who,
                    Request::Link {
                        admission: a.clone(),
                        occurrence: o.clone(),
                    },
                )
                .await
                .map(|_| ()),
        }
    }
    pub async fn recover(&mut self, who: &str) -> Result<(), SutError> {
        match self {
            Sut::Local(s) => s.recover(who).await.map(|_| ()),
            Sut::Process(p) => p
                .ask::<reply::Recovered>(who, Request::Recover)
                .await
                .map(|_| ()),
        }
    }
    pub async fn resolve_unknown(&mut self, who: &str, a: &AdmissionId) -> Result<(), SutError> {
        match self {
            Sut::Local(s) => s.resolve_unknown(who, a).await.map(|_| ()),
            Sut::Process(p) => p
                .call(
                    who,
                    Request::ResolveUnknown {
                        admission: a.clone(),
                    },
                )
                .await
                .map(|_| ()),
        }
    }
    pub async fn finish(
        &mut self,
        who: &str,
        a: &AdmissionId,
        end: AdmissionEnd,
    ) -> Result<(), SutError> {
        match self {
            Sut::Local(s) => s.finish(who, a, end).await,
            Sut::Process(p) => p
                .call(
                    who,
                    Request::Finish {
                        admission: a.clone(),
                        end,
                    },
                )
                .await
                .map(|_| ()),
        }
    }
    pub async fn admission(&mut self, a: &AdmissionId) -> Result<Admission, SutError> {
        match self {
            Sut::Local(s) => s.domain.admission(a).await.map_err(SutError::from),
            Sut::Process(p) => p.admission(a).await,
        }
    }
    pub async fn lease_call(&mut self, who: &str, release: bool) -> Result<(), SutError> {
        match self {
            Sut::Local(s) => s.lease_call(who, release).await,
            Sut::Process(p) => p
                .call(
                    who,
                    if release {
                        Request::LeaseRelease
                    } else {
                        Request::LeaseRefresh
                    },
                )
                .await
                .map(|_| ()),
        }
    }
    pub async fn import(&mut self) -> Result<(), SutError> {
        match self {
            Sut::Local(s) => s
                .domain
                .import_from_other_domain(&[])
                .map_err(SutError::from),
            Sut::Process(p) => p.import().await,
        }
    }
    /// The composition status and the bypass paths the implementation discloses.
    pub async fn describe(&mut self) -> Result<(CompositionStatus, Vec<BypassPath>), SutError> {
        match self {
            Sut::Local(s) => Ok((s.domain.composition(), s.domain.bypass_paths().to_vec())),
            Sut::Process(p) => p.describe_if_supported().await?.ok_or_else(|| {
                SutError::Harness("the implementation does not list `describe`".into())
            }),
        }
    }
}
