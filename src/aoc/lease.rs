//! Seed 003's durable, holder-fenced lease, one per lane, as pure transitions the stores apply
//! inside their own transactions.
//!
//! - The holder identity is executor id + generation ([`Holder`]).
//! - Acquiring advances the generation (monotonic, never reused) and thereby retires the
//!   predecessor in the same write (AOC-REQ-006).
//! - A refresh or release by anyone but the current, unexpired holder fails with a holder mismatch
//!   and cannot touch the successor's lease.
//! - A refresh after expiry fails: "the next refresh won't make up for expiration".

use crate::aoc::ids::{ExecutorId, Generation, Holder, LaneId, Millis};
use serde::{Deserialize, Serialize};

/// Lease timing. Defaults are seed 003's: TTL 300 s, refresh about every 60 s, wait limit 1800 s.
#[derive(Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct LeaseConfig {
    pub ttl_ms: u64,
    pub refresh_ms: u64,
    pub wait_ms: u64,
}

impl Default for LeaseConfig {
    fn default() -> Self {
        LeaseConfig {
            ttl_ms: 300_000,
            refresh_ms: 60_000,
            wait_ms: 1_800_000,
        }
    }
}

impl LeaseConfig {
    /// Refresh must come well inside the TTL, and waiting must be bounded.
    pub fn validate(&self) -> Result<(), String> {
        if self.ttl_ms == 0 {
            return Err("lease.ttl_ms must be above 0".into());
        }
        if self.refresh_ms == 0 || self.refresh_ms >= self.ttl_ms {
            return Err(format!(
                "lease.refresh_ms ({}) must be above 0 and below lease.ttl_ms ({})",
                self.refresh_ms, self.ttl_ms
            ));
        }
        Ok(())
    }
}

/// The lease row of a lane.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, Debug)]
pub struct Lease {
    pub holder: Holder,
    pub acquired_at: Millis,
    pub expires_at: Millis,
    pub released: bool,
}

impl Lease {
    /// Whether `holder` may act now: current holder, not released, not expired.
    pub fn admits(&self, holder: &Holder, now: Millis) -> bool {
        self.holder == *holder && !self.released && now < self.expires_at
    }
    /// Whether anyone holds it now.
    pub fn is_live(&self, now: Millis) -> bool {
        !self.released && now < self.expires_at
    }
}

/// How to acquire.
#[derive(Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Debug)]
#[serde(rename_all = "snake_case")]
pub enum AcquireMode {
    /// Only when the lane is free (never held, released, or expired).
    IfFree,
    /// Administrative replacement: retire the live holder now. Fences only what the domain
    /// mediates; it revokes no credential and stops no outside path.
    Replace,
}

/// Why a lease operation failed.
#[derive(Clone, PartialEq, Eq, Debug, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LeaseError {
    Busy {
        holder: Holder,
        expires_at: Millis,
    },
    HolderMismatch {
        holder: Holder,
        current: Option<Holder>,
    },
}

/// Acquire (pure): the next lease for `lane`.
pub fn acquire(
    current: Option<&Lease>,
    lane: &LaneId,
    executor: &ExecutorId,
    now: Millis,
    ttl_ms: u64,
    mode: AcquireMode,
) -> Result<Lease, LeaseError> {
    if let Some(c) = current
        && mode == AcquireMode::IfFree
        && c.is_live(now)
    {
        return Err(LeaseError::Busy {
            holder: c.holder.clone(),
            expires_at: c.expires_at,
        });
    }
    let generation = Generation(current.map_or(0, |c| c.holder.generation.0) + 1);
    Ok(Lease {
        holder: Holder {
            lane: lane.clone(),
            executor: executor.clone(),
            generation,
        },
        acquired_at: now,
        expires_at: now.plus(ttl_ms),
        released: false,
    })
}

/// Refresh (pure): only the current, unexpired holder extends its own lease.
pub fn refresh(
    current: Option<&Lease>,
    holder: &Holder,
    now: Millis,
    ttl_ms: u64,
) -> Result<Lease, LeaseError> {
    match current {
        Some(c) if c.admits(holder, now) => Ok(Lease {
            expires_at: now.plus(ttl_ms),
            ..c.clone()
        }),
        other => Err(LeaseError::HolderMismatch {
            holder: holder.clone(),
            current: other.map(|c| c.holder.clone()),
        }),
    }
}

/// Release (pure): only the recorded holder releases; the generation is kept so it is never
/// reused.
pub fn release(current: Option<&Lease>, holder: &Holder) -> Result<Lease, LeaseError> {
    match current {
        Some(c) if c.holder == *holder && !c.released => Ok(Lease {
            released: true,
            ..c.clone()
        }),
        other => Err(LeaseError::HolderMismatch {
            holder: holder.clone(),
            current: other.map(|c| c.holder.clone()),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lane() -> LaneId {
        LaneId("l".into())
    }
    fn ex(s: &str) -> ExecutorId {
        ExecutorId(s.into())
    }

    #[test]
    fn seed_003_experiment_c_holder_fence() {
        let a = acquire(None, &lane(), &ex("a"), Millis(0), 300, AcquireMode::IfFree).expect("a");
        assert_eq!(a.holder.generation, Generation(1));
        // B cannot take a live lease, but can after expiry.
        assert!(matches!(
            acquire(
                Some(&a),
                &lane(),
                &ex("b"),
                Millis(10),
                300,
                AcquireMode::IfFree
            ),
            Err(LeaseError::Busy { .. })
        ));
        let b = acquire(
            Some(&a),
            &lane(),
            &ex("b"),
            Millis(300),
            300,
            AcquireMode::IfFree,
        )
        .expect("b");
        assert_eq!(b.holder.generation, Generation(2));
        // The old holder's late refresh and release fail and leave B's lease alone.
        assert!(matches!(
            refresh(Some(&b), &a.holder, Millis(301), 300),
            Err(LeaseError::HolderMismatch { .. })
        ));
        assert!(matches!(
            release(Some(&b), &a.holder),
            Err(LeaseError::HolderMismatch { .. })
        ));
        assert!(b.admits(&b.holder, Millis(301)));
        assert!(!b.admits(&a.holder, Millis(301)));
    }

    #[test]
    fn refresh_after_expiry_fails_and_release_keeps_generation() {
        let a = acquire(None, &lane(), &ex("a"), Millis(0), 100, AcquireMode::IfFree).expect("a");
        assert!(refresh(Some(&a), &a.holder, Millis(50), 100).is_ok());
        assert!(refresh(Some(&a), &a.holder, Millis(100), 100).is_err());
        let r = release(Some(&a), &a.holder).expect("release");
        assert!(!r.admits(&a.holder, Millis(1)));
        let b = acquire(
            Some(&r),
            &lane(),
            &ex("a"),
            Millis(2),
            100,
            AcquireMode::IfFree,
        )
        .expect("b");
        assert_eq!(
            b.holder.generation,
            Generation(2),
            "generations are never reused"
        );
    }

    #[test]
    fn replace_retires_a_live_holder() {
        let a = acquire(
            None,
            &lane(),
            &ex("a"),
            Millis(0),
            1000,
            AcquireMode::IfFree,
        )
        .expect("a");
        let b = acquire(
            Some(&a),
            &lane(),
            &ex("b"),
            Millis(1),
            1000,
            AcquireMode::Replace,
        )
        .expect("b");
        assert!(b.holder.generation > a.holder.generation);
        assert!(!b.admits(&a.holder, Millis(2)));
    }

    #[test]
    fn config_is_validated() {
        assert!(LeaseConfig::default().validate().is_ok());
        let bad = LeaseConfig {
            ttl_ms: 100,
            refresh_ms: 100,
            wait_ms: 0,
        };
        assert!(bad.validate().is_err());
    }
}
