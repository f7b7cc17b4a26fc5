//! Time for a simulator: the system's, or a clock the harness drives.
//!
//! A [`SimClock`] is a discrete-event clock shared by everything in one simulation (the fakes'
//! run engines, the harness, the implementation's calls). Every participant that is doing work
//! holds one *busy* unit ([`Busy`]); a participant that waits on the clock ([`SimClock::sleep`])
//! gives its unit back for the wait. When no unit is held and someone sleeps, nothing can happen
//! until time passes, so the clock jumps to the earliest wake-up instead of waiting for it: a
//! 60 s approval timeout or a 1 s claim expiry costs a few microseconds, and the order of events
//! is the order of their deadlines. No duration is shortened; time simply moves.
//!
//! Until [`SimClock::follow_real_time`] is called the clock is *driven*; after it, it reads the
//! system clock (offset to where it stood) and sleeps are real, for implementations that keep
//! their own time.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};
use tokio::sync::{Notify, oneshot};

/// Milliseconds since the Unix epoch, from the system clock.
pub fn system_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// A simulator's time source.
#[derive(Clone, Debug, Default)]
pub enum Clock {
    /// The system clock; sleeps are real.
    #[default]
    System,
    /// A clock the harness drives.
    Sim(SimClock),
}

impl Clock {
    pub fn now_ms(&self) -> u64 {
        match self {
            Clock::System => system_ms(),
            Clock::Sim(c) => c.now_ms(),
        }
    }
    /// Seconds since the epoch as a float (Hermes's timestamps).
    pub fn now_secs(&self) -> f64 {
        match self {
            Clock::System => std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs_f64())
                .unwrap_or(0.0),
            Clock::Sim(c) => c.now_ms() as f64 / 1000.0,
        }
    }
    /// Waits `ms` on this clock (giving back one busy unit for the wait on a driven clock).
    pub async fn sleep(&self, ms: u64) {
        match self {
            Clock::System => tokio::time::sleep(Duration::from_millis(ms)).await,
            Clock::Sim(c) => c.sleep(ms).await,
        }
    }
    /// A busy unit for a participant that starts work (none on the system clock).
    pub fn busy(&self) -> Option<Busy> {
        match self {
            Clock::System => None,
            Clock::Sim(c) => Some(c.busy()),
        }
    }
    /// Runs `fut` without holding a busy unit: for a participant that waits on another one
    /// (a queued run waiting for its turn), not on time.
    pub async fn idle_while<F: std::future::Future>(&self, fut: F) -> F::Output {
        match self {
            Clock::System => fut.await,
            Clock::Sim(c) => {
                let _idle = c.idle();
                fut.await
            }
        }
    }
}

#[derive(Debug)]
struct State {
    now: u64,
    /// Wake-ups by (deadline, registration order).
    timers: BTreeMap<(u64, u64), oneshot::Sender<()>>,
    seq: u64,
    /// Busy units held; a sleep without a unit of its own (a handler waiting for its client)
    /// may take it below zero, which reads as "nobody busy".
    busy: i64,
    /// Bumped on every change: the driver jumps only over a quiet, unchanged state.
    generation: u64,
}

#[derive(Debug)]
struct Inner {
    state: Mutex<State>,
    changed: Notify,
    driver: AtomicBool,
    real: Mutex<Option<(Instant, u64)>>,
}

/// A discrete-event clock (see the module docs). Clones share one clock.
#[derive(Clone, Debug)]
pub struct SimClock(Arc<Inner>);

/// One busy unit; given back when dropped.
#[derive(Debug)]
pub struct Busy(Weak<Inner>);

impl Drop for Busy {
    fn drop(&mut self) {
        if let Some(i) = self.0.upgrade() {
            change(&i, |s| s.busy -= 1);
        }
    }
}

/// A unit given back for a while (see [`Clock::idle_while`]); taken again when dropped.
#[derive(Debug)]
pub struct Idle(Weak<Inner>);

impl Drop for Idle {
    fn drop(&mut self) {
        if let Some(i) = self.0.upgrade() {
            change(&i, |s| s.busy += 1);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn change(i: &Inner, f: impl FnOnce(&mut State)) {
    {
        let mut s = lock(&i.state);
        f(&mut s);
        s.generation += 1;
    }
    i.changed.notify_waiters();
}

/// How long the state must stay quiet (no unit taken or given, no timer set) before the driver
/// jumps: a margin for a wake-up handed from one task to another that no unit covers yet.
const QUIET: Duration = Duration::from_micros(300);

/// A sleep's registration; removed (and the unit taken back) if the sleep is dropped early.
struct Pending<'a> {
    clock: &'a Inner,
    key: (u64, u64),
    fired: bool,
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if self.fired {
            return;
        }
        let removed = {
            let mut s = lock(&self.clock.state);
            let r = s.timers.remove(&self.key).is_some();
            // Not removed: the driver fired it and took the unit back for us already.
            if r {
                s.busy += 1;
                s.generation += 1;
            }
            r
        };
        if removed {
            self.clock.changed.notify_waiters();
        }
    }
}

impl SimClock {
    /// A driven clock standing at `ms` (milliseconds since the epoch).
    pub fn at(ms: u64) -> Self {
        SimClock(Arc::new(Inner {
            state: Mutex::new(State {
                now: ms,
                timers: BTreeMap::new(),
                seq: 0,
                busy: 0,
                generation: 0,
            }),
            changed: Notify::new(),
            driver: AtomicBool::new(false),
            real: Mutex::new(None),
        }))
    }

    pub fn now_ms(&self) -> u64 {
        if let Some((at, base)) = *lock(&self.0.real) {
            return base + at.elapsed().as_millis() as u64;
        }
        lock(&self.0.state).now
    }

    /// Whether the clock is still driven (not following real time).
    pub fn is_driven(&self) -> bool {
        lock(&self.0.real).is_none()
    }

    /// From now on, the clock reads real time from where it stands, and sleeps are real (for
    /// an implementation that keeps its own time). Every pending sleep is woken. Once real, a
    /// second call changes nothing (it must not set the clock back to where it stood).
    pub fn follow_real_time(&self) {
        let now = lock(&self.0.state).now;
        {
            let mut real = lock(&self.0.real);
            if real.is_some() {
                return;
            }
            *real = Some((Instant::now(), now));
        }
        let timers = std::mem::take(&mut lock(&self.0.state).timers);
        for (_, tx) in timers {
            let _ = tx.send(());
        }
    }

    /// Takes a busy unit (see the module docs).
    pub fn busy(&self) -> Busy {
        change(&self.0, |s| s.busy += 1);
        Busy(Arc::downgrade(&self.0))
    }

    /// Gives a unit back until the guard is dropped.
    pub fn idle(&self) -> Idle {
        change(&self.0, |s| s.busy -= 1);
        Idle(Arc::downgrade(&self.0))
    }

    /// Busy units held now (for tests and diagnostics).
    pub fn busy_units(&self) -> i64 {
        lock(&self.0.state).busy
    }

    /// Sleeps waiting on the clock now (for tests and diagnostics: a test that moves time must
    /// first see the sleep it means to end registered, or the move lands before the sleep and the
    /// sleep's end moves with it).
    pub fn sleepers(&self) -> usize {
        lock(&self.0.state).timers.len()
    }

    /// Moves the clock forward by `ms` at once (saturating), waking every sleep now due.
    pub fn advance(&self, ms: u64) {
        let due = {
            let mut s = lock(&self.0.state);
            s.now = s.now.saturating_add(ms);
            take_due(&mut s)
        };
        for tx in due {
            let _ = tx.send(());
        }
        self.0.changed.notify_waiters();
    }

    /// Waits `ms` on the clock, giving one busy unit back for the wait.
    pub async fn sleep(&self, ms: u64) {
        if !self.is_driven() {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            return;
        }
        if ms == 0 {
            // No wait at all: nothing to jump over.
            tokio::task::yield_now().await;
            return;
        }
        self.ensure_driver();
        let (tx, rx) = oneshot::channel();
        let key = {
            let mut s = lock(&self.0.state);
            s.seq += 1;
            let key = (s.now.saturating_add(ms), s.seq);
            s.timers.insert(key, tx);
            s.busy -= 1;
            s.generation += 1;
            key
        };
        self.0.changed.notify_waiters();
        let mut pending = Pending {
            clock: &self.0,
            key,
            fired: false,
        };
        let _ = rx.await;
        pending.fired = true;
    }

    fn ensure_driver(&self) {
        if self.0.driver.swap(true, Ordering::SeqCst) {
            return;
        }
        let weak = Arc::downgrade(&self.0);
        tokio::spawn(drive(weak));
    }
}

/// Takes every timer due at `s.now`, taking a busy unit back for each sleeper it wakes.
fn take_due(s: &mut State) -> Vec<oneshot::Sender<()>> {
    let mut due = Vec::new();
    while let Some(entry) = s.timers.first_entry() {
        if entry.key().0 > s.now {
            break;
        }
        due.push(entry.remove());
        s.busy += 1;
    }
    s.generation += 1;
    due
}

/// The driver: whenever nobody is busy and somebody sleeps, and the state stays so for a
/// moment, time jumps to the earliest wake-up.
async fn drive(weak: Weak<Inner>) {
    loop {
        let Some(inner) = weak.upgrade() else { return };
        if lock(&inner.real).is_some() {
            return;
        }
        let notified = inner.changed.notified();
        let quiet_at = {
            let s = lock(&inner.state);
            (s.busy <= 0 && !s.timers.is_empty()).then_some(s.generation)
        };
        let Some(generation) = quiet_at else {
            // Re-checked at least every 50 ms so that a dropped clock ends its driver.
            let _ = tokio::time::timeout(Duration::from_millis(50), notified).await;
            continue;
        };
        drop(notified);
        drop(inner);
        spin_quietly().await;
        let Some(inner) = weak.upgrade() else { return };
        let due = {
            let mut s = lock(&inner.state);
            if s.generation != generation || s.busy > 0 {
                continue;
            }
            let Some((&(deadline, _), _)) = s.timers.first_key_value() else {
                continue;
            };
            s.now = s.now.max(deadline);
            take_due(&mut s)
        };
        for tx in due {
            let _ = tx.send(());
        }
        inner.changed.notify_waiters();
    }
}

/// Lets the other tasks run for about [`QUIET`] of real time.
async fn spin_quietly() {
    let start = Instant::now();
    while start.elapsed() < QUIET {
        tokio::task::yield_now().await;
    }
}

pub use provider_model::clock::Participant;

/// Who may move the clock, and when (issue 21): each participant has a token of its own; its
/// `sleep` is accepted only while the harness has a call in flight on it, and for at most the
/// largest wait its policy allows. So no implementation moves the case's time
/// for the fakes at will, and one that says it is driven can be held to having slept.
#[derive(Clone, Debug, Default)]
pub struct ClockGate(Arc<std::sync::Mutex<GateState>>);

#[derive(Debug, Default)]
struct GateState {
    tokens: std::collections::HashMap<String, String>,
    participants: std::collections::BTreeMap<String, Participant>,
    max_ms: u64,
}

impl ClockGate {
    /// A gate whose participants may each sleep at most `max_ms` at a time.
    pub fn new(max_ms: u64) -> Self {
        let g = ClockGate::default();
        g.lock().max_ms = max_ms;
        g
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, GateState> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Admits `token` (drawn by the caller from a good source of entropy) as the participant
    /// `label`'s.
    pub fn issue(&self, label: &str, token: &str) {
        let mut st = self.lock();
        st.tokens.insert(token.to_string(), label.to_string());
        st.participants.entry(label.to_string()).or_default();
    }

    /// Raises the longest sleep admitted to `ms`, if it is longer than the bound so far.
    pub fn allow_up_to(&self, ms: u64) {
        let mut st = self.lock();
        st.max_ms = st.max_ms.max(ms);
    }

    /// Whether `label` declared that it moves its timers by the clock.
    pub fn declare(&self, label: &str, driven: bool) {
        self.lock()
            .participants
            .entry(label.to_string())
            .or_default()
            .driven = driven;
    }

    /// The harness sent `label` a call (held until the guard drops).
    pub fn call(&self, label: &str) -> InFlight {
        let mut st = self.lock();
        st.participants
            .entry(label.to_string())
            .or_default()
            .in_flight += 1;
        InFlight {
            gate: self.clone(),
            label: label.to_string(),
            since: Instant::now(),
        }
    }

    /// What the clock saw of every participant.
    pub fn participants(&self) -> std::collections::BTreeMap<String, Participant> {
        self.lock().participants.clone()
    }

    /// Admits one sleep of the token's holder (`Some(label)` for a participant's token, `None`
    /// for a token the gate does not hold), or says why not.
    fn admit(&self, token: &str, ms: u64) -> Result<Option<String>, String> {
        let mut st = self.lock();
        let Some(label) = st.tokens.get(token).cloned() else {
            return Ok(None);
        };
        let max = st.max_ms;
        let p = st.participants.entry(label.clone()).or_default();
        let why = if p.in_flight == 0 {
            Some("no call of the harness is in flight on it".to_string())
        } else if ms > max {
            Some(format!(
                "{ms} ms is longer than the largest wait its policy allows ({max} ms)"
            ))
        } else {
            None
        };
        match why {
            Some(w) => {
                p.refused.push(format!("sleep {ms} ms: {w}"));
                Err(w)
            }
            None => {
                p.sleeps += 1;
                Ok(Some(label))
            }
        }
    }
}

/// A call of the harness in flight on one participant.
#[derive(Debug)]
pub struct InFlight {
    gate: ClockGate,
    label: String,
    since: Instant,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let took = self.since.elapsed().as_millis() as u64;
        if let Some(p) = self.gate.lock().participants.get_mut(&self.label) {
            p.in_flight = p.in_flight.saturating_sub(1);
            p.longest_call_real_ms = p.longest_call_real_ms.max(took);
        }
    }
}

/// The clock as HTTP, for an implementation in another process that moves its timers by this
/// clock (Bearer `token`): `GET /now` answers `{"now": ms}`; `POST /sleep {"ms": n}` waits `n`
/// ms on the clock (giving back the unit of the call that waits) and answers `{"now": ms}`.
/// Mount it under a prefix with `Router::nest`.
pub fn routes(clock: SimClock, token: String) -> axum::Router {
    gated_routes(clock, token, ClockGate::default())
}

/// [`routes`], where `token` is the harness's own (ungated) and each token `gate` issued is a
/// participant's, whose sleeps the gate admits or refuses (409).
pub fn gated_routes(clock: SimClock, token: String, gate: ClockGate) -> axum::Router {
    use axum::Json;
    use axum::http::{HeaderMap, StatusCode};
    use axum::routing::{get, post};
    use serde_json::{Value, json};
    let token = Arc::new(token);
    let bearer = |h: &HeaderMap| {
        h.get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::to_string)
    };
    let (g1, g2) = (gate.clone(), gate);
    let ok = move |h: &HeaderMap, token: &str| {
        bearer(h).is_some_and(|t| t == token || g1.lock().tokens.contains_key(&t))
    };
    let ok2 = ok.clone();
    let refuse = || {
        (
            StatusCode::UNAUTHORIZED,
            Json(
                json!({"error": {"code": "unauthorized", "message": "the clock token is required"}}),
            ),
        )
    };
    let (c1, t1) = (clock.clone(), token.clone());
    let (c2, t2) = (clock, token);
    axum::Router::new()
        .route(
            "/now",
            get(move |h: HeaderMap| async move {
                if !ok(&h, &t1) {
                    return refuse();
                }
                (StatusCode::OK, Json(json!({"now": c1.now_ms()})))
            }),
        )
        .route(
            "/sleep",
            post(move |h: HeaderMap, body: axum::body::Bytes| async move {
                if !ok2(&h, &t2) {
                    return refuse();
                }
                let ms = serde_json::from_slice::<Value>(&body)
                    .ok()
                    .and_then(|v| v.get("ms").and_then(Value::as_u64));
                let Some(ms) = ms else {
                    return (
                        StatusCode::BAD_REQUEST,
                        Json(json!({"error": {"code": "invalid_request", "message": "body: {\"ms\": <milliseconds>} is required"}})),
                    );
                };
                if let Err(why) = g2.admit(&bearer(&h).unwrap_or_default(), ms) {
                    return (
                        StatusCode::CONFLICT,
                        Json(json!({"error": {"code": "sleep_refused", "message": why}})),
                    );
                }
                c2.sleep(ms).await;
                (StatusCode::OK, Json(json!({"now": c2.now_ms()})))
            }),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The gate admits a participant's sleep only while a call is in flight on it and only up
    /// to its bound; the harness's own token is not gated; every refusal is kept.
    #[test]
    fn the_gate_admits_sleeps_only_in_a_call_and_within_the_bound() {
        let g = ClockGate::new(1_000);
        g.issue("p1", "tok-p1");
        g.declare("p1", true);
        assert_eq!(
            g.admit("harness", 50),
            Ok(None),
            "an unknown token is not gated"
        );
        assert!(g.admit("tok-p1", 10).is_err(), "no call in flight");
        let call = g.call("p1");
        assert_eq!(g.admit("tok-p1", 10), Ok(Some("p1".into())));
        assert!(g.admit("tok-p1", 1_001).is_err(), "over the bound");
        g.allow_up_to(5_000);
        assert_eq!(g.admit("tok-p1", 1_001), Ok(Some("p1".into())));
        drop(call);
        assert!(g.admit("tok-p1", 10).is_err(), "the call ended");
        let p = &g.participants()["p1"];
        assert!(p.driven);
        assert_eq!((p.sleeps, p.in_flight, p.refused.len()), (2, 0, 3), "{p:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lone_sleep_jumps_and_a_busy_participant_holds_time() {
        let c = SimClock::at(1_000);
        let real = Instant::now();
        c.sleep(60_000).await;
        assert_eq!(c.now_ms(), 61_000);
        assert!(real.elapsed() < Duration::from_secs(1));
        // Someone busy: the sleep waits for real (and time stands).
        let busy = c.busy();
        let (c2, own) = (c.clone(), c.busy());
        let t = tokio::spawn(async move {
            let _own = own;
            c2.sleep(10).await
        });
        tokio::time::sleep(Duration::from_millis(30)).await;
        assert!(!t.is_finished());
        assert_eq!(c.now_ms(), 61_000);
        drop(busy);
        t.await.expect("sleep");
        assert_eq!(c.now_ms(), 61_010);
        assert_eq!(c.busy_units(), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sleeps_wake_in_deadline_order_and_a_dropped_sleep_gives_its_place_back() {
        let c = SimClock::at(0);
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for ms in [300u64, 100, 200] {
            let (c, order) = (c.clone(), order.clone());
            let b = c.busy();
            tasks.push(tokio::spawn(async move {
                let _b = b;
                c.sleep(ms).await;
                lock(&order).push((ms, c.now_ms()));
            }));
        }
        // A sleep dropped early (its future lost a race) leaves no timer behind.
        let b = c.busy();
        let _ = tokio::time::timeout(Duration::from_millis(1), c.sleep(50)).await;
        drop(b);
        for t in tasks {
            t.await.expect("task");
        }
        assert_eq!(*lock(&order), vec![(100, 100), (200, 200), (300, 300)]);
        assert_eq!(c.busy_units(), 0);
    }

    #[tokio::test]
    async fn advance_wakes_what_is_due_and_real_time_takes_over() {
        let c = SimClock::at(10);
        let b = c.busy();
        let c2 = c.clone();
        let t = tokio::spawn(async move { c2.sleep(5).await });
        tokio::task::yield_now().await;
        while lock(&c.0.state).timers.is_empty() {
            tokio::task::yield_now().await;
        }
        c.advance(5);
        t.await.expect("woken by advance");
        assert_eq!(c.now_ms(), 15);
        drop(b);
        c.follow_real_time();
        assert!(!c.is_driven());
        let before = c.now_ms();
        tokio::time::sleep(Duration::from_millis(20)).await;
        // Another implementation on its own time joins: the clock does not go back.
        c.follow_real_time();
        let after = c.now_ms();
        // Real time from where the clock stood (15): not before it, and at real speed.
        assert!((15..1_015).contains(&before), "{before}");
        assert!(
            after >= before + 15 && after < before + 250,
            "{before} → {after}"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sleeps_with_one_deadline_each_wait_for_it() {
        let c = SimClock::at(0);
        let held = c.busy();
        let mut tasks = Vec::new();
        for _ in 0..2 {
            let (c2, own) = (c.clone(), c.busy());
            tasks.push(tokio::spawn(async move {
                let _own = own;
                c2.sleep(100).await;
                c2.now_ms()
            }));
        }
        // Both asleep: the held unit is the only one left.
        while c.busy_units() != 1 {
            tokio::task::yield_now().await;
        }
        assert_eq!(lock(&c.0.state).timers.len(), 2, "one timer each");
        c.advance(99);
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(
            tasks.iter().all(|t| !t.is_finished()),
            "woken before the deadline"
        );
        c.advance(1);
        for t in tasks {
            assert_eq!(t.await.expect("sleep"), 100);
        }
        drop(held);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_sleep_dropped_early_takes_its_unit_back_and_leaves_no_timer() {
        let c = SimClock::at(0);
        // Two units held: the sleep gives one back and still cannot fire before it is dropped.
        let (b1, b2) = (c.busy(), c.busy());
        let _ = tokio::time::timeout(Duration::from_millis(5), c.sleep(50)).await;
        assert_eq!(c.busy_units(), 2);
        assert!(lock(&c.0.state).timers.is_empty());
        assert_eq!(c.now_ms(), 0);
        drop((b1, b2));
        assert_eq!(c.busy_units(), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_idle_participant_lets_time_move_and_takes_its_unit_back() {
        let c = SimClock::at(0);
        let held = c.busy();
        assert_eq!(c.busy_units(), 1);
        {
            let _idle = c.idle();
            assert_eq!(c.busy_units(), 0);
            // The holder waits on someone else: a sleep of another participant may jump.
            let (c2, own) = (c.clone(), c.busy());
            tokio::spawn(async move {
                let _own = own;
                c2.sleep(1_000).await
            })
            .await
            .expect("sleep");
            assert_eq!(c.now_ms(), 1_000);
        }
        assert_eq!(c.busy_units(), 1, "the idle unit is taken back");
        let via_clock = Clock::Sim(c.clone());
        via_clock
            .idle_while(async { assert_eq!(c.busy_units(), 0) })
            .await;
        assert_eq!(c.busy_units(), 1);
        drop(held);
        assert_eq!(c.busy_units(), 0);
        assert_eq!(via_clock.now_secs(), 1.0);
        assert!(via_clock.busy().is_some() && Clock::System.busy().is_none());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_clock_over_http_needs_its_token_and_sleeps_on_the_clock() {
        use tower::ServiceExt;
        let c = SimClock::at(7_000);
        let app = routes(c.clone(), "tok-123".into());
        let call = |method: &str, path: &str, token: &str, body: &str| {
            let req = axum::http::Request::builder()
                .method(method)
                .uri(path)
                .header(axum::http::header::AUTHORIZATION, format!("Bearer {token}"))
                .body(axum::body::Body::from(body.to_string()))
                .expect("request");
            let app = app.clone();
            async move {
                let r = app.oneshot(req).await.expect("answer");
                let status = r.status().as_u16();
                let bytes = axum::body::to_bytes(r.into_body(), 1 << 16)
                    .await
                    .expect("body");
                let v: serde_json::Value =
                    serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
                (status, v)
            }
        };
        assert_eq!(call("GET", "/now", "wrong", "").await.0, 401);
        assert_eq!(call("POST", "/sleep", "wrong", r#"{"ms": 1}"#).await.0, 401);
        let (st, v) = call("GET", "/now", "tok-123", "").await;
        assert_eq!((st, v["now"].as_u64()), (200, Some(7_000)));
        assert_eq!(
            call("POST", "/sleep", "tok-123", r#"{"ms": "x"}"#).await.0,
            400
        );
        // The caller's unit (the call that waits) is given back by the sleep: time jumps.
        let call_unit = c.busy();
        let (st, v) = call("POST", "/sleep", "tok-123", r#"{"ms": 2500}"#).await;
        assert_eq!((st, v["now"].as_u64()), (200, Some(9_500)));
        drop(call_unit);
        assert_eq!(c.busy_units(), 0);
    }
}
