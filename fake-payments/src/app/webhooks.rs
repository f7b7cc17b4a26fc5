//! Signed webhooks of the Stripe dialect: a status source a service may listen to. Each state
//! change of a payment intent made through the dialect is an event (`payment_intent.succeeded`,
//! `.amount_capturable_updated`, `.payment_failed`, `.canceled`) delivered to the configured
//! endpoint with `Stripe-Signature: t=…,v1=…` (HMAC-SHA256 of `t.payload` under the endpoint's
//! secret), as Stripe signs them. Faults: a delivery late by `delay_ms`, duplicated
//! (`duplicate`), held (`held`: queued until `release_webhooks`, then delivered to the
//! endpoint configured at that moment), and forged deliveries (signed with another secret) on
//! the control plane's demand. Every delivery attempt is logged with its answer.

use super::*;
use sha2::Sha256;

/// Where events go.
#[derive(Clone, Debug, serde::Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Endpoint {
    pub url: String,
    /// The endpoint's signing secret (`whsec_…`).
    pub secret: String,
    /// Each delivery waits this long first (a late event).
    #[serde(default)]
    pub delay_ms: u64,
    /// Each event is delivered twice (a duplicated event).
    #[serde(default)]
    pub duplicate: bool,
    /// Events are queued, not sent, until released (`Handle::release_webhooks`).
    #[serde(default)]
    pub held: bool,
}

/// One delivery attempt.
#[derive(Clone, Debug, serde::Serialize, Deserialize, PartialEq, Eq)]
pub struct Delivery {
    pub event_id: String,
    #[serde(rename = "type")]
    pub kind: String,
    /// The payment intent the event is about (its Stripe id, `pi_…`).
    pub payment_intent: String,
    /// The same payment under the provider's own id (`pay_…`, as its ledger names it).
    #[serde(default)]
    pub payment_id: String,
    /// Signed with a secret that is not the endpoint's.
    pub forged: bool,
    pub attempt: u32,
    /// When the attempt was sent (milliseconds since the Unix epoch): the event's own time, not
    /// the time the log was read.
    #[serde(default)]
    pub sent_ms: u64,
    /// Whether the attempt reached the endpoint (or may still be reaching it): false only when
    /// no connection could be made, so the endpoint never saw the event.
    #[serde(default)]
    pub connected: bool,
    /// The endpoint's HTTP status; `None` when it could not be reached.
    pub status: Option<u16>,
    pub error: Option<String>,
}

/// The deliveries made so far and the client that makes them.
#[derive(Debug, Default)]
pub struct Hooks {
    log: Mutex<Vec<Delivery>>,
    /// Events held back (`Endpoint::held`), each with its number of copies, in order.
    queue: Mutex<Vec<(Value, u32)>>,
    next: std::sync::atomic::AtomicU64,
    /// Bumped by a reset: a delivery queued before it is dropped, never made or logged after.
    generation: std::sync::atomic::AtomicU64,
    client: std::sync::OnceLock<reqwest::Client>,
}

impl Hooks {
    pub(super) fn deliveries(&self) -> Vec<Delivery> {
        self.log.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
    pub(super) fn clear(&self) {
        let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        self.generation
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        log.clear();
        self.queue.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }
    fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::SeqCst)
    }
    fn client(&self) -> reqwest::Client {
        self.client
            .get_or_init(|| {
                reqwest::Client::builder()
                    .timeout(std::time::Duration::from_secs(10))
                    .build()
                    .unwrap_or_default()
            })
            .clone()
    }
}

/// HMAC-SHA256 (RFC 2104).
pub fn hmac_sha256(key: &[u8], msg: &[u8]) -> [u8; 32] {
    use sha2::Digest as _;
    let mut k = [0u8; 64];
    if key.len() > 64 {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let mut inner = Sha256::new();
    inner.update(k.map(|b| b ^ 0x36));
    inner.update(msg);
    let mut outer = Sha256::new();
    outer.update(k.map(|b| b ^ 0x5c));
    outer.update(inner.finalize());
    outer.finalize().into()
}

/// The `Stripe-Signature` header of `payload` at time `t` (seconds) under `secret`.
pub fn signature(secret: &str, t: u64, payload: &[u8]) -> String {
    let mut signed = format!("{t}.").into_bytes();
    signed.extend_from_slice(payload);
    format!(
        "t={t},v1={}",
        hex::encode(hmac_sha256(secret.as_bytes(), &signed))
    )
}

fn event_type(native_status: &str) -> &'static str {
    match native_status {
        "succeeded" => "payment_intent.succeeded",
        "requires_capture" => "payment_intent.amount_capturable_updated",
        "canceled" => "payment_intent.canceled",
        "processing" => "payment_intent.processing",
        _ => "payment_intent.payment_failed",
    }
}

/// Queues the event of payment `id`'s state as it is now (under the data lock; the delivery
/// runs on its own task).
pub(super) fn emit(s: &Shared, d: &Data, id: &Id16) {
    let Some(ep) = s
        .stripe
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .webhook
        .clone()
    else {
        return;
    };
    let Some(p) = d.book.payments.get(id) else {
        return;
    };
    let native = d.book.payment_json(id, p);
    let kind = event_type(d.book.names.str(p.status));
    let intent = super::stripe::intent_of(&d.book, &native);
    let event = event(&s.hooks, kind, intent, d.clock.now_ms() / 1000);
    let copies = if ep.duplicate { 2 } else { 1 };
    if ep.held {
        // Queued under the settings' lock, which a release holds while it takes the queue:
        // an event is either taken by the release or sees the endpoint released.
        let settings = s.stripe.lock().unwrap_or_else(|p| p.into_inner());
        if settings.webhook.as_ref().is_some_and(|w| w.held) {
            s.hooks
                .queue
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((event, copies));
            return;
        }
    }
    let hooks = s.hooks.clone();
    let generation = hooks.generation();
    tokio::spawn(async move {
        if ep.delay_ms > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(ep.delay_ms)).await;
        }
        for _ in 0..copies {
            deliver(&hooks, &ep.url, &ep.secret, &event, false, generation).await;
        }
    });
}

fn event(hooks: &Hooks, kind: &str, intent: Value, created: u64) -> Value {
    let n = hooks.next.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
    json!({
        "id": format!("evt_{n:024}"),
        "object": "event",
        "api_version": super::stripe::DEFAULT_VERSION,
        "created": created,
        "livemode": false,
        "pending_webhooks": 1,
        "type": kind,
        "data": {"object": intent},
    })
}

/// Delivers one event, retrying a failed delivery twice (500 ms apart); a forged one once.
async fn deliver(
    hooks: &Hooks,
    url: &str,
    secret: &str,
    event: &Value,
    forged: bool,
    generation: u64,
) {
    let payload = event.to_string();
    let attempts = if forged { 1 } else { 3 };
    for attempt in 1..=attempts {
        if hooks.generation() != generation {
            return;
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let (t, sent_ms) = (now.as_secs(), now.as_millis() as u64);
        // The attempt is in the log from the moment it is sent (its answer still unknown), so a
        // reader sees an event the endpoint is still handling; the answer is filled in after.
        let at = {
            let mut log = hooks.log.lock().unwrap_or_else(|p| p.into_inner());
            if hooks.generation() != generation {
                return;
            }
            log.push(Delivery {
                event_id: event["id"].as_str().unwrap_or_default().to_string(),
                kind: event["type"].as_str().unwrap_or_default().to_string(),
                payment_intent: event["data"]["object"]["id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                payment_id: super::stripe::native_id(
                    event["data"]["object"]["id"].as_str().unwrap_or_default(),
                ),
                forged,
                attempt,
                sent_ms,
                connected: true,
                status: None,
                error: Some("no answer yet".into()),
            });
            log.len() - 1
        };
        let sent = hooks
            .client()
            .post(url)
            .header("content-type", "application/json")
            .header("stripe-signature", signature(secret, t, payload.as_bytes()))
            .body(payload.clone())
            .send()
            .await;
        let (status, error, connected) = match &sent {
            Ok(r) => (Some(r.status().as_u16()), None, true),
            Err(e) => (None, Some(e.to_string()), !e.is_connect()),
        };
        {
            let mut log = hooks.log.lock().unwrap_or_else(|p| p.into_inner());
            if hooks.generation() != generation {
                return;
            }
            if let Some(d) = log.get_mut(at) {
                d.status = status;
                d.error = error;
                d.connected = connected;
            }
        }
        if forged || status.is_some_and(|s| (200..300).contains(&s)) {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

impl Handle {
    /// Sends every held event now, in order, to the endpoint configured at this moment (an
    /// instance restarted on another port gets them); returns how many were held. Events
    /// emitted from now on follow the endpoint's settings as they are.
    pub fn release_webhooks(&self) -> usize {
        let (held, ep) = {
            let mut settings = self.0.stripe.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(w) = settings.webhook.as_mut() {
                w.held = false;
            }
            let held: Vec<(Value, u32)> =
                std::mem::take(&mut *self.0.hooks.queue.lock().unwrap_or_else(|p| p.into_inner()));
            (held, settings.webhook.clone())
        };
        let Some(ep) = ep else {
            return held.len();
        };
        let n = held.len();
        let hooks = self.0.hooks.clone();
        let generation = hooks.generation();
        tokio::spawn(async move {
            for (event, copies) in held {
                for _ in 0..copies {
                    deliver(&hooks, &ep.url, &ep.secret, &event, false, generation).await;
                }
            }
        });
        n
    }

    /// Every webhook delivery attempt so far.
    pub fn webhook_deliveries(&self) -> Vec<Delivery> {
        self.0.hooks.deliveries()
    }

    /// Delivers, now, a forged event about payment `payment_id`: its state with `status` in
    /// place of the real one (`payment_failed` for a failure), signed with a secret that is not
    /// the endpoint's. Returns the event id, or why it cannot.
    pub async fn forge_webhook(&self, payment_id: &str, status: &str) -> Result<String, String> {
        let ep = self
            .0
            .stripe
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .webhook
            .clone()
            .ok_or("no webhook endpoint is set")?;
        let event = {
            let d = self.lock();
            let id = id16(PAY, payment_id).ok_or_else(|| format!("no payment {payment_id}"))?;
            let p = d
                .book
                .payments
                .get(&id)
                .ok_or_else(|| format!("no payment {payment_id}"))?;
            let mut native = d.book.payment_json(&id, p);
            native["status"] = Value::from(status);
            let intent = super::stripe::intent_of(&d.book, &native);
            event(
                &self.0.hooks,
                event_type(status),
                intent,
                d.clock.now_ms() / 1000,
            )
        };
        let wrong = format!("whsec_forged_{}", uuid::Uuid::new_v4().simple());
        let generation = self.0.hooks.generation();
        deliver(&self.0.hooks, &ep.url, &wrong, &event, true, generation).await;
        Ok(event["id"].as_str().unwrap_or_default().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_sha256_meets_rfc_4231() {
        // RFC 4231 test cases 2 and 6 (a key longer than the block).
        assert_eq!(
            hex::encode(hmac_sha256(b"Jefe", b"what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert_eq!(
            hex::encode(hmac_sha256(
                &[0xaa; 131],
                b"Test Using Larger Than Block-Size Key - Hash Key First"
            )),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn a_signature_is_stripes_header() {
        let s = signature("whsec_x", 1700000000, b"{}");
        let want = hex::encode(hmac_sha256(b"whsec_x", b"1700000000.{}"));
        assert_eq!(s, format!("t=1700000000,v1={want}"));
    }
}
