//! Seed 003's admission and turn lease for the runs of one session: runs are admitted in FIFO
//! order (a queued run is received, not executed) and execute one at a time under a single-writer
//! turn lease whose holder identity is run id + generation. A release or refresh by anyone but the
//! current holder fails and cannot touch the successor's lease.

use std::collections::VecDeque;

/// The holder of a session's turn lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TurnHolder {
    pub run_id: String,
    pub generation: u64,
}

/// Why a lease call failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LeaseError {
    #[error("the turn lease is held by {0:?}")]
    Busy(TurnHolder),
    #[error("holder mismatch: {holder:?} does not hold the lease (current {current:?})")]
    HolderMismatch {
        holder: TurnHolder,
        current: Option<TurnHolder>,
    },
    #[error("run {0} is not at the head of the session's queue")]
    NotHead(String),
}

/// A session: its durable FIFO of admitted runs and its turn lease.
#[derive(Clone, Debug, Default)]
pub struct Session {
    queue: VecDeque<String>,
    holder: Option<TurnHolder>,
    generation: u64,
}

impl Session {
    /// Admits a run (queued).
    pub fn admit(&mut self, run_id: &str) {
        self.queue.push_back(run_id.to_string());
    }
    /// Whether `run_id` is waiting behind another run.
    pub fn is_queued(&self, run_id: &str) -> bool {
        self.queue.front().is_some_and(|h| h != run_id) && self.queue.iter().any(|r| r == run_id)
    }
    /// The head of the queue takes the lease (the generation advances).
    pub fn acquire(&mut self, run_id: &str) -> Result<TurnHolder, LeaseError> {
        if let Some(h) = &self.holder {
            return Err(LeaseError::Busy(h.clone()));
        }
        if self.queue.front().map(String::as_str) != Some(run_id) {
            return Err(LeaseError::NotHead(run_id.to_string()));
        }
        self.generation += 1;
        let h = TurnHolder {
            run_id: run_id.to_string(),
            generation: self.generation,
        };
        self.holder = Some(h.clone());
        Ok(h)
    }
    /// Only the current holder refreshes.
    pub fn refresh(&self, holder: &TurnHolder) -> Result<(), LeaseError> {
        if self.holder.as_ref() == Some(holder) {
            Ok(())
        } else {
            Err(LeaseError::HolderMismatch {
                holder: holder.clone(),
                current: self.holder.clone(),
            })
        }
    }
    /// Only the current holder releases; its run leaves the queue.
    pub fn release(&mut self, holder: &TurnHolder) -> Result<(), LeaseError> {
        self.refresh(holder)?;
        self.holder = None;
        self.queue.retain(|r| r != &holder.run_id);
        Ok(())
    }
    /// Removes a run that never got the lease (a restart wiped it).
    pub fn forget(&mut self, run_id: &str) {
        self.queue.retain(|r| r != run_id);
        if self.holder.as_ref().is_some_and(|h| h.run_id == run_id) {
            self.holder = None;
        }
    }
    pub fn holder(&self) -> Option<&TurnHolder> {
        self.holder.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_one_at_a_time_and_the_holder_fence() {
        let mut s = Session::default();
        s.admit("run_a");
        s.admit("run_b");
        assert!(s.is_queued("run_b"), "queued is received, not executed");
        assert_eq!(s.acquire("run_b"), Err(LeaseError::NotHead("run_b".into())));
        let a = s.acquire("run_a").expect("head");
        assert!(matches!(s.acquire("run_a"), Err(LeaseError::Busy(_))));
        s.release(&a).expect("release");
        let b = s.acquire("run_b").expect("next");
        assert_eq!(b.generation, a.generation + 1);
        // The old holder's late refresh and release fail and leave b's lease alone.
        assert!(matches!(
            s.refresh(&a),
            Err(LeaseError::HolderMismatch { .. })
        ));
        assert!(matches!(
            s.release(&a),
            Err(LeaseError::HolderMismatch { .. })
        ));
        assert_eq!(s.holder(), Some(&b));
    }
}
