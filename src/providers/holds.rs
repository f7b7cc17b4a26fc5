//! The one hold choreography. A hold parks the requests a fault rule names at the provider
//! until the harness lets them go; every use of it (a crash during a request, a release with a
//! chosen fate, a kill of a deployed service's instance, an operator step against fake-hermes)
//! goes through these verbs, in this order:
//!
//! 1. *arm*: the fault rule `hold(name)` is added (the caller's step);
//! 2. [`Hold::parked`]: wait until a request is parked there;
//! 3. the caller kills the sender, then [`Hold::landed`]: wait until the provider saw the
//!    parked request's client go (a dead process's socket closes asynchronously, so a commit
//!    released before this could still find someone to answer);
//! 4. [`Hold::release`]: let the parked requests go with an action, and wait until the
//!    provider decided each of them (committed or refused, in its ledger), so the next step
//!    never races ahead of a commit whose sender is gone.
//!
//! [`Hold::bypassed`] tells, in an explored schedule, that the request went past the hold (an
//! earlier rule took it) rather than that the hold is still waiting.

use super::{Hermes, Mcp, Payments};
use provider_model::holds::ReleaseAction;
use std::time::Duration;

/// A simulator that can park requests under a hold name.
pub trait HoldSite: Sync {
    /// Its name in messages.
    const NAME: &'static str;
    fn wait_parked(
        &self,
        hold: &str,
        within: Duration,
    ) -> impl std::future::Future<Output = bool> + Send;
    fn wait_client_gone(
        &self,
        hold: &str,
        within: Duration,
    ) -> impl std::future::Future<Output = bool> + Send;
    /// Lets every request parked under `hold` go; how many.
    fn let_go(&self, hold: &str, action: ReleaseAction) -> usize;
    /// The provider's own numbers of the requests parked under `hold` (none where the
    /// simulator numbers no requests).
    fn parked_seqs(&self, hold: &str) -> Vec<u64>;
    /// Whether each of `seqs` is decided in the ledger.
    fn decided(&self, seqs: &[u64]) -> bool;
    /// Whether a hold rule for `hold` saw matching requests and never fired: an earlier rule
    /// took them.
    fn passed_by(&self, hold: &str) -> bool;
    /// Disarms every hold rule named `hold` that has not fired (it parks nothing more); how many.
    fn disarm(&self, hold: &str) -> usize;
}

fn seqs_of(list: &serde_json::Value, hold: &str) -> Vec<u64> {
    list[hold]
        .as_array()
        .map(|a| a.iter().filter_map(|p| p["request_seq"].as_u64()).collect())
        .unwrap_or_default()
}

impl HoldSite for Payments {
    const NAME: &'static str = "fake-payments";
    fn wait_parked(
        &self,
        hold: &str,
        within: Duration,
    ) -> impl std::future::Future<Output = bool> + Send {
        Payments::wait_parked(self, hold, 1, within)
    }
    fn wait_client_gone(
        &self,
        hold: &str,
        within: Duration,
    ) -> impl std::future::Future<Output = bool> + Send {
        Payments::wait_client_gone(self, hold, within)
    }
    fn let_go(&self, hold: &str, action: ReleaseAction) -> usize {
        self.release(hold, action)
    }
    fn parked_seqs(&self, hold: &str) -> Vec<u64> {
        seqs_of(&self.holds(), hold)
    }
    fn decided(&self, seqs: &[u64]) -> bool {
        Payments::decided(self, seqs)
    }
    fn passed_by(&self, hold: &str) -> bool {
        self.rules().iter().any(|r| {
            r.fired == 0
                && r.seen > 0
                && matches!(&r.rule.fault, provider_model::payments::faults::Fault::Hold { name } if name == hold)
        })
    }
    fn disarm(&self, hold: &str) -> usize {
        self.disarm_hold(hold)
    }
}

impl HoldSite for Hermes {
    const NAME: &'static str = "fake-hermes";
    fn wait_parked(
        &self,
        hold: &str,
        within: Duration,
    ) -> impl std::future::Future<Output = bool> + Send {
        Hermes::wait_parked(self, hold, 1, within)
    }
    fn wait_client_gone(
        &self,
        hold: &str,
        within: Duration,
    ) -> impl std::future::Future<Output = bool> + Send {
        Hermes::wait_client_gone(self, hold, within)
    }
    fn let_go(&self, hold: &str, action: ReleaseAction) -> usize {
        self.release(hold, action)
    }
    // fake-hermes numbers no requests: a released request is decided by the engine itself,
    // and the operator steps read its ledger after their own waits.
    fn parked_seqs(&self, _hold: &str) -> Vec<u64> {
        Vec::new()
    }
    fn decided(&self, _seqs: &[u64]) -> bool {
        true
    }
    fn passed_by(&self, hold: &str) -> bool {
        self.rules().iter().any(|r| {
            r.fired == 0
                && r.seen > 0
                && matches!(&r.rule.fault, provider_model::hermes::faults::Fault::Hold { name } if name == hold)
        })
    }
    fn disarm(&self, hold: &str) -> usize {
        self.disarm_hold(hold)
    }
}

impl HoldSite for Mcp {
    const NAME: &'static str = "fake-mcp";
    fn wait_parked(
        &self,
        hold: &str,
        within: Duration,
    ) -> impl std::future::Future<Output = bool> + Send {
        Mcp::wait_parked(self, hold, 1, within)
    }
    fn wait_client_gone(
        &self,
        hold: &str,
        within: Duration,
    ) -> impl std::future::Future<Output = bool> + Send {
        Mcp::wait_client_gone(self, hold, within)
    }
    fn let_go(&self, hold: &str, action: ReleaseAction) -> usize {
        self.release(hold, action)
    }
    fn parked_seqs(&self, hold: &str) -> Vec<u64> {
        seqs_of(&self.holds(), hold)
    }
    fn decided(&self, seqs: &[u64]) -> bool {
        Mcp::decided(self, seqs)
    }
    fn passed_by(&self, hold: &str) -> bool {
        self.rules().iter().any(|r| {
            r.fired == 0
                && r.seen > 0
                && matches!(&r.rule.fault, provider_model::mcp::faults::Fault::Hold { name } if name == hold)
        })
    }
    fn disarm(&self, hold: &str) -> usize {
        self.disarm_hold(hold)
    }
}

/// How a kill at a hold came out ([`kill_at`]).
#[derive(Debug)]
pub enum KillAt<T> {
    /// The sender ended (parked or finished its work) before any request reached the hold,
    /// which is disarmed: no kill happened.
    Ended(Result<T, tokio::task::JoinError>),
    /// The sender was killed while its request was parked, and the request then went on.
    Killed,
}

/// The kill of `sender` at the hold `name` of `site`, through the choreography: waits until a
/// request is parked there (or the sender ends first: the hold is then disarmed), kills the
/// sender (its task is aborted, and `kill` kills whatever it was talking to: a process), waits
/// until the provider saw its client go, and lets the request go on.
pub async fn kill_at<P: HoldSite, T>(
    site: &P,
    name: &str,
    within: Duration,
    sender: &mut tokio::task::JoinHandle<T>,
    kill: impl std::future::Future<Output = ()>,
) -> Result<KillAt<T>, HoldError> {
    let h = hold(site, name, within);
    tokio::select! {
        r = &mut *sender => {
            site.disarm(name);
            return Ok(KillAt::Ended(r));
        }
        parked = h.parked() => {
            if let Err(e) = parked {
                sender.abort();
                return Err(e);
            }
        }
    }
    sender.abort();
    kill.await;
    // Joined only so that the aborted task, and the request future it held, are gone before
    // the provider is asked whether its client went; its result (cancelled) says nothing.
    let _ = (&mut *sender).await;
    h.landed().await?;
    h.release(ReleaseAction::Proceed).await?;
    Ok(KillAt::Killed)
}

/// Which wait of the choreography ran out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HoldStep {
    /// No request was parked at the hold.
    Parked,
    /// The parked request's client was still connected after the kill.
    Landed,
    /// The released requests were not decided.
    Decided,
}

/// Why a step of the choreography did not happen: the wait that ran out, where, and how long
/// it was.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HoldError {
    pub step: HoldStep,
    pub provider: &'static str,
    pub hold: String,
    pub within: Duration,
}

impl std::fmt::Display for HoldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (provider, hold, secs) = (self.provider, &self.hold, self.within.as_secs());
        match self.step {
            HoldStep::Parked => write!(
                f,
                "no request was parked at {provider}'s hold {hold:?} within {secs} s"
            ),
            HoldStep::Landed => write!(
                f,
                "the sender was killed, but {provider} still held a live client at hold {hold:?} after {secs} s"
            ),
            HoldStep::Decided => write!(
                f,
                "the requests released at {provider}'s hold {hold:?} were not decided within {secs} s"
            ),
        }
    }
}

/// One hold of one simulator, and the waits of the choreography.
#[derive(Debug)]
pub struct Hold<'a, P> {
    site: &'a P,
    name: &'a str,
    within: Duration,
}

/// The hold `name` of `site`, each wait at most `within`.
pub fn hold<'a, P: HoldSite>(site: &'a P, name: &'a str, within: Duration) -> Hold<'a, P> {
    Hold { site, name, within }
}

impl<P: HoldSite> Hold<'_, P> {
    /// `Ok` when the wait held, the error naming `step` otherwise.
    fn held(&self, ok: bool, step: HoldStep) -> Result<(), HoldError> {
        if ok {
            return Ok(());
        }
        Err(HoldError {
            step,
            provider: P::NAME,
            hold: self.name.to_string(),
            within: self.within,
        })
    }

    /// Waits until a request is parked at the hold.
    pub async fn parked(&self) -> Result<(), HoldError> {
        let ok = self.site.wait_parked(self.name, self.within).await;
        self.held(ok, HoldStep::Parked)
    }

    /// After the caller killed the parked request's sender: waits until the provider saw its
    /// client go.
    pub async fn landed(&self) -> Result<(), HoldError> {
        let ok = self.site.wait_client_gone(self.name, self.within).await;
        self.held(ok, HoldStep::Landed)
    }

    /// Waits until a request is parked, lets every parked request go with `action`, and waits
    /// until the provider decided each; how many were let go.
    pub async fn release(&self, action: ReleaseAction) -> Result<usize, HoldError> {
        self.parked().await?;
        let seqs = self.site.parked_seqs(self.name);
        let n = self.site.let_go(self.name, action);
        self.held(n > 0, HoldStep::Parked)?;
        let deadline = tokio::time::Instant::now() + self.within;
        while !self.site.decided(&seqs) {
            self.held(tokio::time::Instant::now() < deadline, HoldStep::Decided)?;
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        Ok(n)
    }

    /// In an explored schedule: whether the request meant for the hold went past it (an
    /// earlier rule took it) or never came within the wait; false as soon as one is parked.
    pub async fn bypassed(&self) -> bool {
        let deadline = std::time::Instant::now() + self.within;
        loop {
            if self
                .site
                .wait_parked(self.name, Duration::from_millis(10))
                .await
            {
                return false;
            }
            if self.site.passed_by(self.name) || std::time::Instant::now() >= deadline {
                return true;
            }
        }
    }
}
