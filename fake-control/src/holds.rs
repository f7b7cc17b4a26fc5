//! Holds: a request that meets a `hold(name)` fault is parked until the control API releases it
//! (`proceed`: go on and commit; `reject`: refuse before any effect). The harness uses them to
//! crash a client at an exact point: it waits until a request is parked, kills the client, waits
//! until the fake has seen the client go, then releases the hold.

use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::{Notify, oneshot};

pub use provider_model::holds::{Parked, ReleaseAction};

struct Entry {
    shown: Parked,
    release: oneshot::Sender<ReleaseAction>,
    client: ClientFlag,
}

/// Every parked request, by hold name.
#[derive(Default)]
pub struct Holds {
    parked: Mutex<BTreeMap<String, Vec<Entry>>>,
    changed: Arc<Notify>,
}

impl std::fmt::Debug for Holds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Holds")
            .field("holds", &self.list())
            .finish()
    }
}

/// Whether a request's client is still there (set by its [`ClientWatch`]).
#[derive(Clone, Debug, Default)]
pub struct ClientFlag(Arc<AtomicBool>);

impl ClientFlag {
    pub fn gone(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// A parked request's side: wait for the release.
#[derive(Debug)]
pub struct Release(oneshot::Receiver<ReleaseAction>);

impl Release {
    /// The release action; a reset (or a dropped fake) rejects with 503.
    pub async fn released(self) -> ReleaseAction {
        self.0
            .await
            .unwrap_or(ReleaseAction::Reject { status: 503 })
    }
}

/// Marks a request's client as gone when the handler that holds it is dropped before answering
/// (the client closed the connection, or died).
#[derive(Debug)]
pub struct ClientWatch {
    flag: ClientFlag,
    changed: Arc<Notify>,
    answered: bool,
}

impl ClientWatch {
    /// The handler answered: its client was there to the end.
    pub fn answered(&mut self) {
        self.answered = true;
    }
}

impl Drop for ClientWatch {
    fn drop(&mut self) {
        if !self.answered {
            self.flag.0.store(true, Ordering::SeqCst);
            self.changed.notify_waiters();
        }
    }
}

impl Holds {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, Vec<Entry>>> {
        self.parked.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A watch on one request's client, and the flag it sets; keep the watch in the handler
    /// future that answers the client.
    pub fn watch(&self) -> (ClientFlag, ClientWatch) {
        let flag = ClientFlag::default();
        let watch = ClientWatch {
            flag: flag.clone(),
            changed: self.changed.clone(),
            answered: false,
        };
        (flag, watch)
    }

    /// Parks a request under `name` until it is released; `client` says whether its client is
    /// still there.
    pub fn park(&self, name: &str, shown: Parked, client: ClientFlag) -> Release {
        let (tx, rx) = oneshot::channel();
        self.lock()
            .entry(name.to_string())
            .or_default()
            .push(Entry {
                shown,
                release: tx,
                client,
            });
        self.changed.notify_waiters();
        Release(rx)
    }

    /// The request of `client` was given up by its caller (a cancellation) while it waited:
    /// its caller is gone, as if the connection had closed.
    pub fn caller_left(&self, client: &ClientFlag) {
        client.0.store(true, Ordering::SeqCst);
        self.changed.notify_waiters();
    }

    /// Releases every request parked under `name`; returns how many.
    pub fn release(&self, name: &str, action: ReleaseAction) -> usize {
        let parked = self.lock().remove(name).unwrap_or_default();
        let n = parked.len();
        for p in parked {
            let _ = p.release.send(action.clone());
        }
        n
    }

    /// Releases everything with a 503 (a reset).
    pub fn reject_all(&self) {
        let all = std::mem::take(&mut *self.lock());
        for p in all.into_values().flatten() {
            let _ = p.release.send(ReleaseAction::Reject { status: 503 });
        }
    }

    /// How many requests are parked under `name`.
    pub fn count(&self, name: &str) -> usize {
        self.lock().get(name).map_or(0, Vec::len)
    }

    /// What is parked, by hold name: `{name: [{request_seq, op, account, idempotency_key}]}`.
    pub fn list(&self) -> Value {
        let m: BTreeMap<String, Vec<Parked>> = self
            .lock()
            .iter()
            .map(|(k, v)| (k.clone(), v.iter().map(|e| e.shown.clone()).collect()))
            .collect();
        json!(m)
    }

    async fn wait_until(&self, timeout: Duration, done: impl Fn(&Self) -> bool) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.changed.notified();
            if done(self) {
                return true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return false;
            }
        }
    }

    /// Waits until at least `n` requests are parked under `name` (or the timeout passes).
    pub async fn wait_parked(&self, name: &str, n: usize, timeout: Duration) -> bool {
        self.wait_until(timeout, |h| h.count(name) >= n).await
    }

    /// Waits until every request parked under `name` (at least one) has lost its client. A
    /// commit released after this is certain to find nobody to answer.
    pub async fn wait_client_gone(&self, name: &str, timeout: Duration) -> bool {
        self.wait_until(timeout, |h| {
            h.lock()
                .get(name)
                .is_some_and(|v| !v.is_empty() && v.iter().all(|p| p.client.gone()))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_parked_request_waits_for_its_release_and_tells_when_its_client_went() {
        let h = Holds::default();
        let (flag, watch) = h.watch();
        let release = h.park("x", Parked::default(), flag);
        assert!(h.wait_parked("x", 1, Duration::from_millis(50)).await);
        assert!(!h.wait_client_gone("x", Duration::from_millis(20)).await);
        drop(watch);
        assert!(h.wait_client_gone("x", Duration::from_millis(50)).await);
        assert_eq!(h.release("x", ReleaseAction::Proceed), 1);
        assert_eq!(release.released().await, ReleaseAction::Proceed);
        assert_eq!(h.count("x"), 0);
    }

    #[tokio::test]
    async fn an_answered_request_never_counts_as_gone_and_a_reset_rejects() {
        let h = Holds::default();
        let (flag, mut watch) = h.watch();
        let release = h.park("y", Parked::default(), flag);
        watch.answered();
        drop(watch);
        assert!(!h.wait_client_gone("y", Duration::from_millis(20)).await);
        h.reject_all();
        assert_eq!(
            release.released().await,
            ReleaseAction::Reject { status: 503 }
        );
        assert!(!h.wait_parked("y", 1, Duration::from_millis(10)).await);
    }

    #[test]
    fn holds_are_listed_in_one_shape() {
        let h = Holds::default();
        let shown = Parked {
            request_seq: Some(3),
            op: "create".into(),
            account: Some("acct_a".into()),
            idempotency_key: Some("k".into()),
        };
        let _r = h.park("z", shown, ClientFlag::default());
        assert_eq!(
            h.list(),
            json!({"z": [{"request_seq": 3, "op": "create", "account": "acct_a", "idempotency_key": "k"}]})
        );
    }
}
