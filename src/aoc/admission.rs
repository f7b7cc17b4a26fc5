//! Seed 003's durable admission: work enters a lane as a durable row (`queued`), is claimed in FIFO
//! order by the current lease holder (`started`, with the claiming generation), and ends terminal.
//! A `started` row whose generation was retired becomes `unknown` on recovery; `unknown` is resolved
//! only by readback of the occurrence it created, and is never reset to `queued`.

use crate::aoc::ids::{AdmissionId, ExecutorId, Generation, LaneId, Millis, OccurrenceId};
use crate::digest::Digest;
use serde::{Deserialize, Serialize};

/// Terminal results of an admission.
#[derive(Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Debug)]
#[serde(rename_all = "snake_case")]
pub enum AdmissionEnd {
    Completed,
    Failed,
    Cancelled,
    /// Readback proved that no provider entry happened under this admission (no occurrence, or a
    /// pre-entry tombstone). The work is not re-queued: a new submission is new work.
    NotExecuted,
}

impl AdmissionEnd {
    /// The end named as cases and `aocheck-sut/2` write it (`completed`, `not_executed` …).
    pub fn parse(s: &str) -> Option<Self> {
        serde_json::from_value(serde_json::Value::String(s.into())).ok()
    }
}

/// Admission state.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, Debug)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum AdmissionState {
    Queued,
    Started {
        generation: Generation,
        executor: ExecutorId,
    },
    /// The claim/execution boundary cannot be verified: must be read back and reconciled.
    Unknown {
        from_generation: Generation,
    },
    Ended {
        end: AdmissionEnd,
    },
}

impl AdmissionState {
    pub fn label(&self) -> &'static str {
        match self {
            AdmissionState::Queued => "queued",
            AdmissionState::Started { .. } => "started",
            AdmissionState::Unknown { .. } => "unknown",
            AdmissionState::Ended { .. } => "ended",
        }
    }
}

/// A durable admission row.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, Debug)]
pub struct Admission {
    pub id: AdmissionId,
    pub lane: LaneId,
    pub seq: u64,
    pub submission_key: String,
    pub payload_digest: Digest,
    pub state: AdmissionState,
    pub occurrence: Option<OccurrenceId>,
    pub version: u64,
    pub admitted_at: Millis,
}

/// An illegal admission transition.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error, Serialize)]
#[error("admission {id}: {msg}")]
pub struct AdmissionError {
    pub id: String,
    pub msg: String,
}

fn err(a: &Admission, msg: impl Into<String>) -> AdmissionError {
    AdmissionError {
        id: a.id.to_string(),
        msg: msg.into(),
    }
}

/// FIFO choice (pure): the head of the queue, but only when nothing in the lane is `started` or
/// `unknown` (one turn at a time; `unknown` must be audited before the lane moves on).
pub fn choose_next(lane_rows: &[Admission]) -> Result<Option<&Admission>, AdmissionError> {
    if let Some(busy) = lane_rows.iter().find(|a| {
        matches!(
            a.state,
            AdmissionState::Started { .. } | AdmissionState::Unknown { .. }
        )
    }) {
        return Err(err(
            busy,
            format!(
                "lane {} is busy: this admission is {} and must end or be reconciled first",
                busy.lane,
                busy.state.label()
            ),
        ));
    }
    Ok(lane_rows
        .iter()
        .filter(|a| a.state == AdmissionState::Queued)
        .min_by_key(|a| a.seq))
}

/// queued → started.
pub fn start(
    a: &Admission,
    generation: Generation,
    executor: &ExecutorId,
) -> Result<Admission, AdmissionError> {
    match a.state {
        AdmissionState::Queued => Ok(Admission {
            state: AdmissionState::Started {
                generation,
                executor: executor.clone(),
            },
            version: a.version + 1,
            ..a.clone()
        }),
        _ => Err(err(a, format!("cannot start from {}", a.state.label()))),
    }
}

/// started → ended, by the generation that started it.
pub fn finish(
    a: &Admission,
    generation: Generation,
    end: AdmissionEnd,
) -> Result<Admission, AdmissionError> {
    match &a.state {
        AdmissionState::Started { generation: g, .. } if *g == generation => Ok(Admission {
            state: AdmissionState::Ended { end },
            version: a.version + 1,
            ..a.clone()
        }),
        AdmissionState::Started { generation: g, .. } => Err(err(
            a,
            format!("started by generation {g}; generation {generation} cannot finish it"),
        )),
        _ => Err(err(a, format!("cannot finish from {}", a.state.label()))),
    }
}

/// Links the occurrence the started admission created.
pub fn link(
    a: &Admission,
    generation: Generation,
    occurrence: &OccurrenceId,
) -> Result<Admission, AdmissionError> {
    match &a.state {
        AdmissionState::Started { generation: g, .. } if *g == generation => Ok(Admission {
            occurrence: Some(occurrence.clone()),
            version: a.version + 1,
            ..a.clone()
        }),
        _ => Err(err(a, "only the starting generation links its occurrence")),
    }
}

/// started by a retired generation → unknown (recovery by the successor).
pub fn mark_unknown(a: &Admission, current: Generation) -> Result<Admission, AdmissionError> {
    match &a.state {
        AdmissionState::Started { generation, .. } if *generation < current => Ok(Admission {
            state: AdmissionState::Unknown {
                from_generation: *generation,
            },
            version: a.version + 1,
            ..a.clone()
        }),
        _ => Err(err(a, format!("cannot mark {} unknown", a.state.label()))),
    }
}

/// unknown → ended, only from readback evidence. There is deliberately no transition back to
/// `queued`.
pub fn resolve_unknown(a: &Admission, end: AdmissionEnd) -> Result<Admission, AdmissionError> {
    match &a.state {
        AdmissionState::Unknown { .. } => Ok(Admission {
            state: AdmissionState::Ended { end },
            version: a.version + 1,
            ..a.clone()
        }),
        _ => Err(err(
            a,
            format!("cannot resolve {} as unknown", a.state.label()),
        )),
    }
}
