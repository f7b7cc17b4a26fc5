//! Time as the domain sees it. Every timestamp in a history comes from one [`Clock`], so tests can
//! drive lease expiry, freshness and retention without sleeping.

use crate::aoc::ids::Millis;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A source of wall-clock milliseconds.
pub trait Clock: Send + Sync + std::fmt::Debug {
    fn now(&self) -> Millis;
    /// Whether time passes while nobody moves it. A wait on a clock that does not (a case
    /// clock) can never see a lease expire, so it must not wait at all.
    fn moves_by_itself(&self) -> bool {
        true
    }
}

/// The system clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Millis {
        let ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        Millis(ms)
    }
}

/// A clock that moves only when told (tests, simulations).
#[derive(Debug, Default, Clone)]
pub struct ManualClock(Arc<AtomicU64>);

impl ManualClock {
    pub fn at(ms: u64) -> Self {
        ManualClock(Arc::new(AtomicU64::new(ms)))
    }
    /// Moves the clock forward; it saturates at the end of time rather than wrap backwards.
    pub fn advance(&self, ms: u64) {
        let _ = self
            .0
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |t| {
                Some(t.saturating_add(ms))
            });
    }
    pub fn set(&self, ms: u64) {
        self.0.store(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Millis {
        Millis(self.0.load(Ordering::SeqCst))
    }
    fn moves_by_itself(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_case_clock_moves_only_forward_and_only_when_told() {
        let c = ManualClock::at(5);
        assert!(!c.moves_by_itself());
        assert!(SystemClock.moves_by_itself());
        c.advance(10);
        assert_eq!(c.now(), Millis(15));
        // The end of time holds: no wrap back to the epoch.
        c.advance(u64::MAX);
        assert_eq!(c.now(), Millis(u64::MAX));
        c.advance(1);
        assert_eq!(c.now(), Millis(u64::MAX));
    }
}
