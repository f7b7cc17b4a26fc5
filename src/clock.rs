//! Time as the domain sees it. Every timestamp in a history comes from one [`Clock`], so tests can
//! drive lease expiry, freshness and retention without sleeping.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Milliseconds since the Unix epoch, from the domain's clock.
#[derive(
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    serde::Serialize,
    serde::Deserialize,
    Debug,
    Default,
)]
#[serde(transparent)]
pub struct Millis(pub u64);

impl Millis {
    pub fn plus(self, ms: u64) -> Millis {
        Millis(self.0.saturating_add(ms))
    }
    pub fn since(self, earlier: Millis) -> u64 {
        self.0.saturating_sub(earlier.0)
    }
}

type Wait<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// A source of wall-clock milliseconds.
pub trait Clock: Send + Sync + std::fmt::Debug {
    fn now(&self) -> Millis;
    /// Whether time passes while nobody moves it. A wait on a clock that does not (a case
    /// clock) can never see a lease expire, so it must not wait at all.
    fn moves_by_itself(&self) -> bool {
        true
    }
    /// Waits `ms` on this clock (real time unless the clock is driven).
    fn sleep(&self, ms: u64) -> Wait<'_> {
        Box::pin(tokio::time::sleep(Duration::from_millis(ms)))
    }
    /// Brings `now` up to date where reading it costs a request (a driven clock).
    fn sync(&self) -> Wait<'_> {
        Box::pin(async {})
    }
}

/// A clock the harness drives, reached over HTTP (`providers.hermes.clock` in `init`): sleeps
/// are waits on the harness's discrete-event clock, which jumps over them when nobody is busy,
/// and `now` is the harness's. If the harness cannot be reached, time falls back to real time
/// from where it stood (a sleep is then a real sleep), so a lost clock never hangs a wait.
#[derive(Debug)]
pub struct DrivenClock {
    http: reqwest::Client,
    url: String,
    token: String,
    now: AtomicU64,
}

impl DrivenClock {
    pub fn new(url: &str, token: &str) -> Result<Self, String> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(600))
            .build()
            .map_err(|e| format!("clock client: {e}"))?;
        Ok(DrivenClock {
            http,
            url: url.trim_end_matches('/').to_string(),
            token: token.to_string(),
            now: AtomicU64::new(SystemClock.now().0),
        })
    }

    fn learn(&self, v: Option<serde_json::Value>) -> bool {
        match v.and_then(|v| v.get("now").and_then(serde_json::Value::as_u64)) {
            Some(n) => {
                self.now.fetch_max(n, Ordering::SeqCst);
                true
            }
            None => false,
        }
    }

    async fn ask(&self, req: reqwest::RequestBuilder) -> Option<serde_json::Value> {
        let r = req.bearer_auth(&self.token).send().await.ok()?;
        if !r.status().is_success() {
            return None;
        }
        r.json().await.ok()
    }
}

impl Clock for DrivenClock {
    fn now(&self) -> Millis {
        Millis(self.now.load(Ordering::SeqCst))
    }
    fn sleep(&self, ms: u64) -> Wait<'_> {
        Box::pin(async move {
            let req = self
                .http
                .post(format!("{}/sleep", self.url))
                .json(&serde_json::json!({ "ms": ms }));
            let v = self.ask(req).await;
            if !self.learn(v) {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                self.now.fetch_add(ms, Ordering::SeqCst);
            }
        })
    }
    fn sync(&self) -> Wait<'_> {
        Box::pin(async move {
            let v = self.ask(self.http.get(format!("{}/now", self.url))).await;
            self.learn(v);
        })
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
