//! The HTTP application: routes, the request pipeline (authenticate → read and validate →
//! select a fault → idempotency → pre-effect faults → effect → post-effect faults → sign), the
//! control API, and a server loop that can drop a connection without replying.
//!
//! Effects run in a task of their own, so a client that disappears (or is killed by the harness
//! while its request is held) does not cancel an effect once the provider has decided to commit it;
//! the ledger then records the reply as `client_gone`.

use crate::config::{AccountConfig, CURRENCIES, Config, IdempotencyProfile, MAX_AMOUNT};
use crate::contract::{self, SIGNATURE_HEADER};
use crate::faults::{self, Fault, ForgeMode, Op, Plan, RuleState};
use crate::ledger::{EffectKind, Ledger, Reply};
use crate::profile;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine as _;
use ed25519_dalek::SigningKey;
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::oneshot;

#[derive(Default)]
struct Data {
    /// Where time comes from (retention, idempotency ages, `delay` faults); kept by a reset.
    clock: fake_control::clock::Clock,
    /// The ground truth and the provider's state, kept compactly.
    book: Book,
    rules: Vec<RuleState>,
}

impl Data {
    fn new(clock: fake_control::clock::Clock, cap: usize) -> Self {
        Data {
            clock,
            book: Book::with_cap(cap),
            rules: Vec::new(),
        }
    }

    /// Sets the reply of a request (and so of its effect, if any).
    fn set_reply(&mut self, seq: u64, reply: Reply) {
        if let Some(r) = self.book.rec_mut(seq) {
            r.reply = reply;
        }
    }
}

pub use fake_control::ReleaseAction;

pub use fake_control::serve;

mod book;
mod control;
mod documents;
mod effects;
mod pipeline;
mod requests;
mod responses;
mod stripe;
mod webhooks;

use book::*;
use control::*;
use documents::*;
use effects::*;
use pipeline::*;
use requests::*;
use responses::*;
pub use stripe::{DEFAULT_VERSION as STRIPE_DEFAULT_VERSION, Settings as StripeSettings};
pub use webhooks::{
    Delivery as WebhookDelivery, Endpoint as WebhookEndpoint, signature as webhook_signature,
};

struct Shared {
    config: Config,
    accounts: HashMap<String, Arc<AccountConfig>>,
    /// Credentials issued at run time (one per implementation process), by key.
    issued: Mutex<HashMap<String, Issued>>,
    key: SigningKey,
    key_id: String,
    forge_key: SigningKey,
    data: Mutex<Data>,
    /// Whether the plan holds a rule that can make a request wait (hold, delay): such a request
    /// runs in a task of its own. Kept with the plan, so a request learns it without the lock.
    waits: std::sync::atomic::AtomicBool,
    holds: fake_control::Holds,
    /// Every request that reached a `/_control` route over HTTP.
    control_log: fake_control::control::ControlLog,
    /// The Stripe dialect's settings (`POST /_control/stripe`).
    stripe: Mutex<stripe::Settings>,
    /// The Stripe dialect's webhook deliveries.
    hooks: Arc<webhooks::Hooks>,
}

/// A credential issued at run time for one account, under a label the ledger records.
#[derive(Clone, Debug)]
struct Issued {
    account: String,
    label: String,
    revoked: bool,
}

/// A handle on a running fake: ledger, faults and holds, for in-process tests and the binary.
#[derive(Clone)]
pub struct Handle(Arc<Shared>);

impl std::fmt::Debug for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle")
            .field("key_id", &self.0.key_id)
            .finish()
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn random_key() -> SigningKey {
    let mut seed = [0u8; 32];
    if getrandom::fill(&mut seed).is_err() {
        // No entropy source: derive from time and address so the fake still starts; the key is
        // for tests, never for real money.
        let t = now_ms().to_le_bytes();
        seed[..8].copy_from_slice(&t);
    }
    SigningKey::from_bytes(&seed)
}

impl Handle {
    fn lock(&self) -> MutexGuard<'_, Data> {
        self.0.data.lock().unwrap_or_else(|p| p.into_inner())
    }
    /// The ground-truth ledger.
    /// Issues a fresh Bearer credential for `account`, recorded in the ledger as `label` on
    /// every request made with it (the label, never the key). `None` for an unknown account.
    pub fn issue_key(&self, account: &str, label: &str) -> Option<String> {
        self.0.config.accounts.iter().find(|a| a.id == account)?;
        let key = format!("sk_issued_{}", uuid::Uuid::new_v4().simple());
        self.0
            .issued
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(
                key.clone(),
                Issued {
                    account: account.to_string(),
                    label: label.to_string(),
                    revoked: false,
                },
            );
        Some(key)
    }

    /// Revokes every credential issued under `label`: a request made with one afterwards is
    /// answered 401 and recorded with `revoked: true`, and changes nothing. Returns how many.
    pub fn revoke(&self, label: &str) -> usize {
        let mut n = 0;
        for i in self
            .0
            .issued
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values_mut()
            .filter(|i| i.label == label)
        {
            i.revoked = true;
            n += 1;
        }
        n
    }

    /// Every request that reached a `/_control` route over HTTP, refused or not.
    pub fn control_attempts(&self) -> Vec<fake_control::control::ControlAttempt> {
        self.0.control_log.attempts()
    }

    pub fn ledger(&self) -> Ledger {
        self.lock().book.ledger()
    }
    /// How many requests the ledger holds, without rendering it.
    pub fn recorded_requests(&self) -> usize {
        self.lock().book.requests.len()
    }
    /// Replaces the fault plan (counters restart).
    pub fn set_plan(&self, plan: Plan) -> Result<(), Vec<String>> {
        let defects = plan.validate();
        if !defects.is_empty() {
            return Err(defects);
        }
        let mut d = self.lock();
        d.rules = plan.rules.into_iter().map(RuleState::new).collect();
        self.0.waits.store(
            d.rules.iter().any(|x| x.rule.fault.waits()),
            std::sync::atomic::Ordering::SeqCst,
        );
        Ok(())
    }
    /// Appends one rule to the plan; the counters of the rules already set are kept.
    pub fn add_rule(&self, rule: faults::Rule) -> Result<(), Vec<String>> {
        let defects = Plan {
            rules: vec![rule.clone()],
        }
        .validate();
        if !defects.is_empty() {
            return Err(defects);
        }
        let mut d = self.lock();
        if rule.fault.waits() {
            self.0
                .waits
                .store(true, std::sync::atomic::Ordering::SeqCst);
        }
        d.rules.push(RuleState::new(rule));
        Ok(())
    }
    /// Disarms every hold rule named `name` that has not fired, so that it parks nothing more
    /// (the harness's own undo, for a hold no request reached); it stays in the plan, unfired.
    /// Returns how many were disarmed.
    pub fn disarm_hold(&self, name: &str) -> usize {
        let mut d = self.lock();
        let mut n = 0;
        for r in d.rules.iter_mut() {
            if r.fired == 0 && matches!(&r.rule.fault, faults::Fault::Hold { name: h } if h == name)
            {
                r.rule.times = 0;
                n += 1;
            }
        }
        n
    }
    /// Rules with their counters.
    pub fn rules(&self) -> Vec<RuleState> {
        self.lock().rules.clone()
    }
    /// Clears payments, idempotency keys, faults, holds and the ledger.
    pub fn reset(&self) {
        let mut d = self.lock();
        let clock = d.clock.clone();
        *d = Data::new(clock, self.0.config.max_ledger_requests);
        self.0
            .waits
            .store(false, std::sync::atomic::Ordering::SeqCst);
        drop(d);
        *self.0.stripe.lock().unwrap_or_else(|p| p.into_inner()) = stripe::Settings::default();
        self.0.hooks.clear();
        self.0.holds.reject_all();
    }
    /// The Stripe dialect's settings now.
    pub fn stripe_settings(&self) -> StripeSettings {
        self.0
            .stripe
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
    /// Sets the Stripe dialect's settings (`Stripe-Should-Retry`, search lag).
    pub fn set_stripe(&self, settings: StripeSettings) {
        *self.0.stripe.lock().unwrap_or_else(|p| p.into_inner()) = settings;
    }
    /// Releases every request parked under `name`; returns how many.
    pub fn release(&self, name: &str, action: ReleaseAction) -> usize {
        self.0.holds.release(name, action)
    }
    /// Whether every request of `seqs` has been decided (its record carries a status), read
    /// under the lock without copying the ledger.
    pub fn decided(&self, seqs: &[u64]) -> bool {
        let d = self.lock();
        seqs.iter()
            .all(|seq| d.book.rec(*seq).is_some_and(|r| r.status != 0))
    }
    /// Requests parked per hold name.
    pub fn holds(&self) -> Value {
        self.0.holds.list()
    }
    /// Waits until every request parked under `name` (at least one) has lost its client: the
    /// connection closed, or the client process died. A commit released after this is certain
    /// to find nobody to answer (`client_gone`).
    pub async fn wait_client_gone(&self, name: &str, timeout: std::time::Duration) -> bool {
        self.0.holds.wait_client_gone(name, timeout).await
    }
    /// Waits until at least `n` requests are parked under `name` (or the timeout passes).
    pub async fn wait_parked(&self, name: &str, n: usize, timeout: std::time::Duration) -> bool {
        self.0.holds.wait_parked(name, n, timeout).await
    }
    /// Moves one payment (or, with `None`, every payment) beyond retention.
    pub fn expire(&self, payment_id: Option<&str>) -> usize {
        let mut d = self.lock();
        let ids: Vec<Id16> = match payment_id {
            Some(id) => id16(PAY, id)
                .filter(|b| d.book.payments.contains_key(b))
                .into_iter()
                .collect(),
            None => d.book.payments.keys().copied().collect(),
        };
        for id in &ids {
            expire_payment(&mut d, id);
        }
        ids.len()
    }
    /// Sets a payment's native status (settlement, dispute …) as the provider's own doing.
    pub fn set_status(&self, payment_id: &str, status: &str) -> Result<(), String> {
        if !profile::STATUSES.contains(&status) {
            return Err(format!(
                "unknown status {status:?}; one of {:?}",
                profile::STATUSES
            ));
        }
        let mut d = self.lock();
        let name = d.book.names.get(status);
        let p = id16(PAY, payment_id)
            .and_then(|b| d.book.payments.get_mut(&b))
            .ok_or_else(|| format!("no payment {payment_id}"))?;
        p.status = name;
        if status == "succeeded" {
            p.amount_captured = p.amount;
        }
        Ok(())
    }
    /// A payment as the native API renders it now (metadata included), whatever its account;
    /// `None` for an id that is no payment (a draft intent is none).
    pub fn payment(&self, payment_id: &str) -> Option<Value> {
        let d = self.lock();
        let id = id16(PAY, payment_id)?;
        d.book
            .payments
            .get(&id)
            .map(|p| d.book.payment_json(&id, p))
    }
    /// The published verifying key.
    pub fn public_key(&self) -> ed25519_dalek::VerifyingKey {
        self.0.key.verifying_key()
    }
    pub fn key_id(&self) -> &str {
        &self.0.key_id
    }
    pub fn config(&self) -> &Config {
        &self.0.config
    }
    /// The published profile and its digest.
    pub fn profile(&self) -> (Value, String) {
        let p = profile::profile(&self.0.key_id, self.0.config.retention_secs);
        let d = profile::digest(&p);
        (p, d)
    }
}

fn expire_payment(d: &mut Data, id: &Id16) {
    let b = &mut d.book;
    b.expired.insert(*id);
    if let Some(p) = b.payments.get(id)
        && let Some(k) = b.requests.get(p.req as usize).and_then(|r| r.key.clone())
    {
        let slot = (p.account, k);
        b.idem.remove(&slot);
    }
}

/// Builds the application for `config` (refusing an invalid one with every defect) and a handle.
pub fn router(config: Config) -> Result<(Router, Handle), Vec<String>> {
    router_with_clock(config, fake_control::clock::Clock::System)
}

/// [`router`] on a given clock: retention, idempotency-key ages and `delay` faults read it (a
/// `SimClock` the harness drives, or the system clock).
pub fn router_with_clock(
    config: Config,
    clock: fake_control::clock::Clock,
) -> Result<(Router, Handle), Vec<String>> {
    let defects = config.validate();
    if !defects.is_empty() {
        return Err(defects);
    }
    let key = match &config.signing_seed_hex {
        Some(h) => {
            let bytes = hex::decode(h).map_err(|e| vec![format!("signing_seed_hex: {e}")])?;
            let seed: [u8; 32] = bytes
                .try_into()
                .map_err(|_| vec!["signing_seed_hex: must be 32 bytes".to_string()])?;
            SigningKey::from_bytes(&seed)
        }
        None => random_key(),
    };
    let key_id = contract::key_id(&key.verifying_key());
    let cap = config.max_ledger_requests;
    let shared = Arc::new(Shared {
        accounts: config
            .accounts
            .iter()
            .map(|a| (a.key.clone(), Arc::new(a.clone())))
            .collect(),
        issued: Mutex::new(HashMap::new()),
        config,
        key,
        key_id,
        forge_key: random_key(),
        data: Mutex::new(Data::new(clock, cap)),
        waits: std::sync::atomic::AtomicBool::new(false),
        holds: fake_control::Holds::default(),
        control_log: Default::default(),
        stripe: Mutex::new(stripe::Settings::default()),
        hooks: Arc::default(),
    });
    let handle = Handle(shared.clone());
    let api = Router::new()
        .route(
            "/v1/payments",
            post(create).get(list).fallback(method_not_allowed),
        )
        .route(
            "/v1/payments/{id}",
            get(get_payment).fallback(method_not_allowed),
        )
        .route(
            "/v1/payments/{id}/capture",
            post(capture).fallback(method_not_allowed),
        )
        .route(
            "/v1/payments/{id}/refund",
            post(refund).fallback(method_not_allowed),
        )
        .route(
            "/v1/provider-key",
            get(provider_key).fallback(method_not_allowed),
        )
        .route(
            "/v1/profile",
            get(published_profile).fallback(method_not_allowed),
        )
        .route(
            "/v1/payment_intents",
            post(stripe::pi_create)
                .get(stripe::pi_list)
                .fallback(method_not_allowed),
        )
        .route(
            "/v1/payment_intents/search",
            get(stripe::pi_search).fallback(method_not_allowed),
        )
        .route(
            "/v1/payment_intents/{id}",
            get(stripe::pi_get).fallback(method_not_allowed),
        )
        .route(
            "/v1/payment_intents/{id}/confirm",
            post(stripe::pi_confirm).fallback(method_not_allowed),
        )
        .route(
            "/v1/payment_intents/{id}/capture",
            post(stripe::pi_capture).fallback(method_not_allowed),
        )
        .route(
            "/v1/payment_intents/{id}/cancel",
            post(stripe::pi_cancel).fallback(method_not_allowed),
        )
        .route(
            "/v1/refunds",
            post(stripe::re_create)
                .get(stripe::re_list)
                .fallback(method_not_allowed),
        )
        .route(
            "/v1/refunds/{id}",
            get(stripe::re_get).fallback(method_not_allowed),
        )
        .route(
            "/_control/stripe",
            get(stripe::control_stripe)
                .post(stripe::control_stripe)
                .fallback(method_not_allowed),
        )
        .route(
            "/_control/stripe/webhooks",
            get(stripe::control_webhooks).fallback(method_not_allowed),
        )
        .route(
            "/_control/stripe/forge",
            post(stripe::control_forge).fallback(method_not_allowed),
        )
        .route(
            "/_control/expire",
            post(control_expire).fallback(method_not_allowed),
        )
        .route(
            "/_control/payments/{id}/status",
            post(control_status).fallback(method_not_allowed),
        )
        .merge(fake_control::control::routes::<Arc<Shared>, Handle>())
        .fallback(not_found)
        .layer(axum::extract::DefaultBodyLimit::disable());
    let api = shared
        .control_log
        .record(api, shared.config.control_token.clone())
        .with_state(shared);
    Ok((api, handle))
}
