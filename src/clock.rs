//! Time as the domain sees it. Every timestamp in a history comes from one [`Clock`], so tests can
//! drive lease expiry, freshness and retention without sleeping.

use crate::aoc::ids::Millis;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A source of wall-clock milliseconds.
pub trait Clock: Send + Sync + std::fmt::Debug {
    fn now(&self) -> Millis;
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
    pub fn advance(&self, ms: u64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
    pub fn set(&self, ms: u64) {
        self.0.store(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Millis {
        Millis(self.0.load(Ordering::SeqCst))
    }
}
