//! The Stripe dialect over a real loopback socket: its objects, its error envelope, v1
//! idempotency with `Idempotent-Replayed`, `Request-Id`, `Stripe-Should-Retry`, the two-step
//! intent, capture and cancel, listing, search with lag, refunds, and the one ledger beneath.
//! (The official SDKs drive the same surface in the workspace's `sdk_contract` tests.)

use fake_payments::StripeSettings;
use fake_payments::config::Config;
use fake_payments::faults::{Fault, Op, Plan, Rule};
use fake_payments::ledger::{EffectKind, Reply};
use fake_payments::{Handle, app::ReleaseAction};
use rstest::rstest;
use serde_json::Value;
use std::time::Duration;

type Server = fake_control::testing::Served<Handle>;

async fn start() -> Server {
    let (app, handle) = fake_payments::router(Config::example()).expect("valid config");
    Server::start(app, handle, Duration::from_secs(10)).await
}

struct Resp {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: Value,
}

impl Resp {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

const KEY: &str = "sk_test_a";

/// `application/x-www-form-urlencoded`, brackets left as they are (as the SDKs send them).
fn encode(fields: &[(&str, &str)]) -> String {
    let enc = |s: &str| {
        s.bytes()
            .map(|b| match b {
                b'A'..=b'Z'
                | b'a'..=b'z'
                | b'0'..=b'9'
                | b'-'
                | b'_'
                | b'.'
                | b'~'
                | b'['
                | b']' => (b as char).to_string(),
                b' ' => "+".to_string(),
                b => format!("%{b:02X}"),
            })
            .collect::<String>()
    };
    fields
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect::<Vec<_>>()
        .join("&")
}

async fn form(s: &Server, path: &str, key: Option<&str>, fields: &[(&str, &str)]) -> Resp {
    let mut rb = s
        .client
        .post(format!("{}{path}", s.base))
        .bearer_auth(KEY)
        .header("user-agent", "Stripe/v1 PythonBindings/16.1.0")
        .header("stripe-version", "2025-09-30.clover")
        .header("content-type", "application/x-www-form-urlencoded")
        .body(encode(fields));
    if let Some(k) = key {
        rb = rb.header("Idempotency-Key", k);
    }
    into(rb.send().await.expect("request")).await
}

async fn get(s: &Server, path: &str) -> Resp {
    let r = s
        .client
        .get(format!("{}{path}", s.base))
        .bearer_auth(KEY)
        .send()
        .await
        .expect("request");
    into(r).await
}

async fn into(r: reqwest::Response) -> Resp {
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    let bytes = r.bytes().await.expect("body");
    Resp {
        status,
        headers,
        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    }
}

const CHARGE: &[(&str, &str)] = &[
    ("amount", "2000"),
    ("currency", "usd"),
    ("payment_method", "pm_card_visa"),
    ("confirm", "true"),
    ("metadata[order_id]", "o-1"),
];

#[tokio::test]
async fn a_confirmed_creation_is_one_charge_and_its_replay_says_so() {
    let s = start().await;
    let first = form(&s, "/v1/payment_intents", Some("order-o-1"), CHARGE).await;
    assert_eq!(first.status, 200, "{}", first.body);
    assert_eq!(first.body["object"], "payment_intent");
    assert_eq!(first.body["status"], "succeeded");
    assert_eq!(first.body["amount_received"], 2000);
    assert_eq!(first.body["metadata"]["order_id"], "o-1");
    assert_eq!(first.body["payment_method"], "pm_card_visa");
    let id = first.body["id"].as_str().expect("id").to_string();
    assert!(id.starts_with("pi_"), "{id}");
    assert_eq!(first.header("idempotent-replayed"), None);
    assert_eq!(first.header("request-id"), Some("req_00000000000001"));
    assert_eq!(first.header("idempotency-key"), Some("order-o-1"));
    assert_eq!(first.header("x-fake-signature"), None);

    let again = form(&s, "/v1/payment_intents", Some("order-o-1"), CHARGE).await;
    assert_eq!(again.status, 200);
    assert_eq!(again.body, first.body, "the first response, replayed");
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(again.header("request-id"), Some("req_00000000000002"));

    let ledger = s.handle.ledger();
    assert_eq!(ledger.effects.len(), 1, "one charge: {:?}", ledger.effects);
    let e = &ledger.effects[0];
    assert_eq!(e.kind, EffectKind::PaymentCreated);
    assert_eq!(e.payment_id, id.replacen("pi_", "pay_", 1));
    assert_eq!(e.idempotency_key.as_deref(), Some("order-o-1"));
    assert_eq!(e.amount, 2000);
    for r in &ledger.requests {
        assert_eq!(r.dialect.as_deref(), Some("stripe"));
        assert_eq!(
            r.user_agent.as_deref(),
            Some("Stripe/v1 PythonBindings/16.1.0")
        );
        assert_eq!(r.stripe_version.as_deref(), Some("2025-09-30.clover"));
    }
    assert!(ledger.requests[1].replayed && !ledger.requests[1].effect);
    // The same payment through the native dialect.
    let native = s
        .client
        .get(format!("{}/v1/payments/{}", s.base, e.payment_id))
        .bearer_auth(KEY)
        .send()
        .await
        .expect("native get");
    assert_eq!(native.status().as_u16(), 200);
}

#[rstest]
#[case::declined(&[("amount", "500"), ("currency", "usd"), ("payment_method", "pm_card_chargeDeclined"), ("confirm", "true")], 402, "card_error", Some("card_declined"), None)]
#[case::insufficient(&[("amount", "500"), ("currency", "usd"), ("payment_method", "pm_card_chargeDeclinedInsufficientFunds"), ("confirm", "true")], 402, "card_error", Some("card_declined"), None)]
#[case::unknown_parameter(&[("amount", "500"), ("currency", "usd"), ("colour", "red")], 400, "invalid_request_error", Some("parameter_unknown"), Some("colour"))]
#[case::missing_amount(&[("currency", "usd")], 400, "invalid_request_error", Some("parameter_missing"), Some("amount"))]
#[case::bad_amount(&[("amount", "12.5"), ("currency", "usd")], 400, "invalid_request_error", Some("parameter_invalid"), Some("amount"))]
#[case::bad_currency(&[("amount", "500"), ("currency", "xyz")], 400, "invalid_request_error", Some("parameter_invalid"), Some("currency"))]
#[case::unknown_payment_method(&[("amount", "500"), ("currency", "usd"), ("payment_method", "pm_nope")], 400, "invalid_request_error", Some("resource_missing"), Some("payment_method"))]
#[case::confirm_without_a_method(&[("amount", "500"), ("currency", "usd"), ("confirm", "true")], 400, "invalid_request_error", Some("payment_intent_unexpected_state"), Some("payment_method"))]
#[case::bad_boolean(&[("amount", "500"), ("currency", "usd"), ("confirm", "yes")], 400, "invalid_request_error", Some("parameter_invalid"), Some("confirm"))]
#[tokio::test]
async fn a_refused_creation_has_stripes_envelope_and_charges_nothing(
    #[case] fields: &[(&str, &str)],
    #[case] status: u16,
    #[case] ty: &str,
    #[case] code: Option<&str>,
    #[case] param: Option<&str>,
) {
    let s = start().await;
    let r = form(&s, "/v1/payment_intents", Some("k"), fields).await;
    assert_eq!(r.status, status, "{}", r.body);
    assert_eq!(r.body["error"]["type"], ty, "{}", r.body);
    assert_eq!(r.body["error"]["code"].as_str(), code, "{}", r.body);
    assert_eq!(r.body["error"]["param"].as_str(), param, "{}", r.body);
    let money: i64 = s
        .handle
        .ledger()
        .effects
        .iter()
        .filter(|e| e.status == "succeeded")
        .map(|e| e.amount)
        .sum();
    assert_eq!(money, 0);
    if status == 402 {
        let pi = &r.body["error"]["payment_intent"];
        assert_eq!(pi["status"], "requires_payment_method");
        assert_eq!(pi["last_payment_error"]["code"], "card_declined");
        assert_eq!(
            r.body["error"]["decline_code"],
            pi["last_payment_error"]["decline_code"]
        );
        // A decline is recorded as the creation it was, with no money moved.
        let l = s.handle.ledger();
        assert_eq!(l.effects.len(), 1);
        assert_eq!(l.effects[0].status, "declined");
    }
}

#[tokio::test]
async fn changed_parameters_or_another_endpoint_under_one_key_are_an_idempotency_error() {
    let s = start().await;
    assert_eq!(
        form(&s, "/v1/payment_intents", Some("k1"), CHARGE)
            .await
            .status,
        200
    );
    let mut changed = CHARGE.to_vec();
    changed[0] = ("amount", "2001");
    let r = form(&s, "/v1/payment_intents", Some("k1"), &changed).await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.body["error"]["type"], "idempotency_error");
    let pi = s.handle.ledger().effects[0]
        .payment_id
        .replacen("pay_", "pi_", 1);
    let other = form(
        &s,
        "/v1/refunds",
        Some("k1"),
        &[("payment_intent", pi.as_str())],
    )
    .await;
    assert_eq!(other.status, 400, "{}", other.body);
    assert_eq!(other.body["error"]["type"], "idempotency_error");
    assert_eq!(s.handle.ledger().effects.len(), 1);
}

#[rstest]
#[case::should_retry(Some(true), Some("true"))]
#[case::should_not_retry(Some(false), Some("false"))]
#[case::no_advice(None, None)]
#[tokio::test]
async fn a_5xx_after_commit_is_saved_replayed_and_carries_the_advice(
    #[case] advice: Option<bool>,
    #[case] header: Option<&str>,
) {
    let s = start().await;
    s.handle.set_stripe(StripeSettings {
        should_retry: advice,
        search_lag_ms: 0,
        ..Default::default()
    });
    s.handle
        .set_plan(Plan {
            rules: vec![Rule {
                op: Op::Create,
                nth: 1,
                times: 1,
                account: None,
                key: None,
                fault: Fault::CommitThen { status: 500 },
            }],
        })
        .expect("plan");
    let r = form(&s, "/v1/payment_intents", Some("k5"), CHARGE).await;
    assert_eq!(r.status, 500);
    assert_eq!(r.body["error"]["type"], "api_error");
    assert_eq!(r.header("stripe-should-retry"), header);
    let again = form(&s, "/v1/payment_intents", Some("k5"), CHARGE).await;
    assert_eq!(again.status, 500, "the first response, 5xx included");
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    let l = s.handle.ledger();
    assert_eq!(l.effects.len(), 1);
    assert_eq!(l.effects[0].reply, Reply::ErrorAfterCommit);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_in_flight_is_409_and_the_held_request_still_commits() {
    let s = start().await;
    s.handle
        .set_plan(Plan {
            rules: vec![Rule {
                op: Op::Create,
                nth: 1,
                times: 1,
                account: None,
                key: None,
                fault: Fault::Hold { name: "h".into() },
            }],
        })
        .expect("plan");
    let (base, client) = (s.base.clone(), s.client.clone());
    let held = tokio::spawn(async move {
        client
            .post(format!("{base}/v1/payment_intents"))
            .bearer_auth(KEY)
            .header("Idempotency-Key", "k9")
            .header("content-type", "application/x-www-form-urlencoded")
            .body(encode(CHARGE))
            .send()
            .await
            .map(|r| r.status().as_u16())
    });
    assert!(s.handle.wait_parked("h", 1, Duration::from_secs(10)).await);
    let r = form(&s, "/v1/payment_intents", Some("k9"), CHARGE).await;
    assert_eq!(r.status, 409, "{}", r.body);
    assert_eq!(r.body["error"]["type"], "idempotency_error");
    assert_eq!(s.handle.release("h", ReleaseAction::Proceed), 1);
    assert_eq!(held.await.ok().and_then(Result::ok), Some(200));
    assert_eq!(s.handle.ledger().effects.len(), 1);
}

#[tokio::test]
async fn an_unconfirmed_intent_charges_only_when_confirmed() {
    let s = start().await;
    let draft = form(
        &s,
        "/v1/payment_intents",
        Some("d1"),
        &[
            ("amount", "700"),
            ("currency", "eur"),
            ("payment_method", "pm_card_visa"),
        ],
    )
    .await;
    assert_eq!(draft.status, 200, "{}", draft.body);
    assert_eq!(draft.body["status"], "requires_confirmation");
    let id = draft.body["id"].as_str().expect("id").to_string();
    assert!(s.handle.ledger().effects.is_empty(), "no charge yet");
    let got = get(&s, &format!("/v1/payment_intents/{id}")).await;
    assert_eq!(got.body["status"], "requires_confirmation");

    let c = form(
        &s,
        &format!("/v1/payment_intents/{id}/confirm"),
        Some("c1"),
        &[],
    )
    .await;
    assert_eq!(c.status, 200, "{}", c.body);
    assert_eq!(c.body["status"], "succeeded");
    assert_eq!(c.body["id"], id.as_str());
    let l = s.handle.ledger();
    assert_eq!(l.effects.len(), 1);
    assert_eq!(l.effects[0].idempotency_key.as_deref(), Some("c1"));
    assert_eq!(
        l.requests[l.effects[0].request_seq as usize - 1].op,
        Op::Confirm
    );

    let twice = form(
        &s,
        &format!("/v1/payment_intents/{id}/confirm"),
        Some("c2"),
        &[],
    )
    .await;
    assert_eq!(twice.status, 400, "{}", twice.body);
    assert_eq!(
        twice.body["error"]["code"],
        "payment_intent_unexpected_state"
    );
    assert_eq!(s.handle.ledger().effects.len(), 1);
}

#[tokio::test]
async fn a_manual_capture_is_captured_or_canceled_and_each_is_an_effect() {
    let s = start().await;
    let mut manual = CHARGE.to_vec();
    manual.push(("capture_method", "manual"));
    let a = form(&s, "/v1/payment_intents", Some("m1"), &manual).await;
    assert_eq!(a.body["status"], "requires_capture", "{}", a.body);
    assert_eq!(a.body["amount_capturable"], 2000);
    assert_eq!(a.body["capture_method"], "manual");
    let id = a.body["id"].as_str().expect("id");
    let cap = form(
        &s,
        &format!("/v1/payment_intents/{id}/capture"),
        Some("m1c"),
        &[],
    )
    .await;
    assert_eq!(cap.body["status"], "succeeded", "{}", cap.body);
    let cancel_late = form(&s, &format!("/v1/payment_intents/{id}/cancel"), None, &[]).await;
    assert_eq!(cancel_late.status, 400, "{}", cancel_late.body);

    let b = form(&s, "/v1/payment_intents", Some("m2"), &manual).await;
    let id = b.body["id"].as_str().expect("id");
    let cancel = form(
        &s,
        &format!("/v1/payment_intents/{id}/cancel"),
        Some("m2x"),
        &[],
    )
    .await;
    assert_eq!(cancel.body["status"], "canceled", "{}", cancel.body);
    let kinds: Vec<EffectKind> = s.handle.ledger().effects.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        vec![
            EffectKind::PaymentCreated,
            EffectKind::PaymentCaptured,
            EffectKind::PaymentCreated,
            EffectKind::PaymentCanceled
        ]
    );
}

#[tokio::test]
async fn listing_pages_and_search_lags_behind_retrieval() {
    let s = start().await;
    let mut ids = Vec::new();
    for i in 0..3 {
        let order = format!("o-{i}");
        let mut f = CHARGE.to_vec();
        f[4] = ("metadata[order_id]", order.as_str());
        let r = form(&s, "/v1/payment_intents", Some(&order), &f).await;
        ids.push(r.body["id"].as_str().expect("id").to_string());
    }
    // Newest first, as Stripe lists; `starting_after` pages toward older intents.
    let page = get(&s, "/v1/payment_intents?limit=2").await;
    assert_eq!(page.body["object"], "list");
    assert_eq!(page.body["has_more"], true);
    assert_eq!(page.body["data"][0]["id"], ids[2].as_str());
    assert_eq!(page.body["data"][1]["id"], ids[1].as_str());
    let last = page.body["data"][1]["id"].as_str().expect("id");
    let rest = get(
        &s,
        &format!("/v1/payment_intents?limit=2&starting_after={last}"),
    )
    .await;
    assert_eq!(rest.body["has_more"], false);
    assert_eq!(rest.body["data"].as_array().map(Vec::len), Some(1));
    assert_eq!(rest.body["data"][0]["id"], ids[0].as_str());
    let newer = get(&s, &format!("/v1/payment_intents?ending_before={}", ids[0])).await;
    assert_eq!(newer.body["data"].as_array().map(Vec::len), Some(2));
    let future = get(&s, "/v1/payment_intents?created%5Bgt%5D=99999999999").await;
    assert_eq!(future.body["data"].as_array().map(Vec::len), Some(0));
    assert_eq!(future.body["has_more"], false);
    let unknown = get(&s, "/v1/payment_intents?customer=cus_1").await;
    assert_eq!(unknown.status, 400);
    assert_eq!(unknown.body["error"]["param"], "customer");

    let q = "/v1/payment_intents/search?query=metadata%5B%27order_id%27%5D%3A%27o-1%27";
    s.handle.set_stripe(StripeSettings {
        should_retry: None,
        search_lag_ms: 3_600_000,
        ..Default::default()
    });
    let lagging = get(&s, q).await;
    assert_eq!(lagging.body["object"], "search_result", "{}", lagging.body);
    assert_eq!(lagging.body["data"].as_array().map(Vec::len), Some(0));
    let direct = get(&s, &format!("/v1/payment_intents/{}", ids[1])).await;
    assert_eq!(direct.status, 200, "retrieval does not lag");
    s.handle.set_stripe(StripeSettings::default());
    let found = get(&s, q).await;
    assert_eq!(found.body["data"].as_array().map(Vec::len), Some(1));
    assert_eq!(found.body["data"][0]["id"], ids[1].as_str());
    let bad = get(&s, "/v1/payment_intents/search?query=amount%3E5").await;
    assert_eq!(bad.status, 400);
    assert_eq!(bad.body["error"]["param"], "query");
}

#[tokio::test]
async fn refunds_are_created_read_and_listed_and_never_exceed_the_charge() {
    let s = start().await;
    let pi = form(&s, "/v1/payment_intents", Some("r0"), CHARGE).await;
    let id = pi.body["id"].as_str().expect("id");
    let re = form(
        &s,
        "/v1/refunds",
        Some("r1"),
        &[("payment_intent", id), ("amount", "500")],
    )
    .await;
    assert_eq!(re.status, 200, "{}", re.body);
    assert_eq!(re.body["object"], "refund");
    assert_eq!(re.body["payment_intent"], id);
    assert_eq!(re.body["amount"], 500);
    let rid = re.body["id"].as_str().expect("refund id");
    let got = get(&s, &format!("/v1/refunds/{rid}")).await;
    assert_eq!(got.body, re.body);
    let too_much = form(
        &s,
        "/v1/refunds",
        Some("r2"),
        &[("payment_intent", id), ("amount", "1501")],
    )
    .await;
    assert_eq!(too_much.status, 400, "{}", too_much.body);
    let listed = get(&s, &format!("/v1/refunds?payment_intent={id}")).await;
    assert_eq!(listed.body["data"].as_array().map(Vec::len), Some(1));
    let missing = get(&s, "/v1/refunds/re_00000000000000000000000000000000").await;
    assert_eq!(missing.status, 404);
    assert_eq!(missing.body["error"]["code"], "resource_missing");
    let refunded: i64 = s
        .handle
        .ledger()
        .effects
        .iter()
        .filter(|e| e.kind == EffectKind::PaymentRefunded)
        .map(|e| e.amount)
        .sum();
    assert_eq!(refunded, 500);
}

#[tokio::test]
async fn a_bad_credential_is_an_authentication_error() {
    let s = start().await;
    let r = s
        .client
        .post(format!("{}/v1/payment_intents", s.base))
        .bearer_auth("sk_test_nobody")
        .header("content-type", "application/x-www-form-urlencoded")
        .body(encode(CHARGE))
        .send()
        .await
        .expect("request");
    let r = into(r).await;
    assert_eq!(r.status, 401);
    assert_eq!(r.body["error"]["type"], "invalid_request_error");
    assert!(s.handle.ledger().effects.is_empty());
}

/// A webhook endpoint on loopback that keeps every delivery (signature header and body).
async fn receiver() -> (
    String,
    std::sync::Arc<std::sync::Mutex<Vec<(String, String)>>>,
) {
    use axum::routing::post;
    let got: std::sync::Arc<std::sync::Mutex<Vec<(String, String)>>> = Default::default();
    let keep = got.clone();
    let app = axum::Router::new().route(
        "/hook",
        post(move |headers: axum::http::HeaderMap, body: String| {
            let keep = keep.clone();
            async move {
                let sig = headers
                    .get("stripe-signature")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_string();
                keep.lock().expect("lock").push((sig, body));
                "ok"
            }
        }),
    );
    let l = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/hook", l.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(l, app).await });
    (url, got)
}

/// Whether `sig` (`t=…,v1=…`) signs `body` under `secret`, as an SDK's `construct_event` checks.
fn verifies(secret: &str, sig: &str, body: &str) -> bool {
    let t = sig
        .split(',')
        .find_map(|p| p.strip_prefix("t="))
        .and_then(|t| t.parse::<u64>().ok());
    t.is_some_and(|t| fake_payments::webhook_signature(secret, t, body.as_bytes()) == sig)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_are_signed_late_duplicated_or_forged_as_set() {
    let s = start().await;
    let (url, got) = receiver().await;
    let secret = "whsec_test_1";
    s.handle.set_stripe(StripeSettings {
        webhook: Some(fake_payments::WebhookEndpoint {
            url,
            secret: secret.into(),
            delay_ms: 300,
            duplicate: true,
            held: false,
        }),
        ..Default::default()
    });
    let r = form(&s, "/v1/payment_intents", Some("w1"), CHARGE).await;
    let id = r.body["id"].as_str().expect("id").to_string();
    assert!(
        got.lock().expect("lock").is_empty(),
        "late: not before its delay"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while got.lock().expect("lock").len() < 2 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let real = got.lock().expect("lock").clone();
    assert_eq!(real.len(), 2, "delivered twice: {real:?}");
    for (sig, body) in &real {
        assert!(verifies(secret, sig, body), "{sig} {body}");
        let ev: Value = serde_json::from_str(body).expect("event json");
        assert_eq!(ev["type"], "payment_intent.succeeded");
        assert_eq!(ev["data"]["object"]["id"], id.as_str());
        assert_eq!(ev["data"]["object"]["metadata"]["order_id"], "o-1");
    }
    assert_eq!(real[0].1, real[1].1, "the same event, twice");

    let native = id.replacen("pi_", "pay_", 1);
    let forged = s
        .handle
        .forge_webhook(&native, "declined")
        .await
        .expect("forged");
    let all = got.lock().expect("lock").clone();
    assert_eq!(all.len(), 3);
    let (sig, body) = &all[2];
    assert!(
        !verifies(secret, sig, body),
        "a forged delivery must not verify"
    );
    let ev: Value = serde_json::from_str(body).expect("event json");
    assert_eq!(ev["id"], forged.as_str());
    assert_eq!(ev["type"], "payment_intent.payment_failed");
    let log = s.handle.webhook_deliveries();
    assert_eq!(log.iter().filter(|d| d.forged).count(), 1);
    assert!(log.iter().all(|d| d.status == Some(200)));
    // The truth did not change: one charge, succeeded.
    let l = s.handle.ledger();
    assert_eq!(l.effects.len(), 1);
    assert_eq!(l.effects[0].status, "succeeded");
}

/// A held endpoint sends nothing until released; the release sends every held event, in
/// order, to the endpoint configured at that moment (a service restarted on another port gets
/// them); events after the release go out at once. A reset drops what was held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_webhooks_wait_for_their_release_and_go_where_the_endpoint_is_then() {
    let s = start().await;
    let (old_url, old_got) = receiver().await;
    let (new_url, new_got) = receiver().await;
    let secret = "whsec_test_2";
    let point = |url: &str, held: bool| {
        s.handle.set_stripe(StripeSettings {
            webhook: Some(fake_payments::WebhookEndpoint {
                url: url.to_string(),
                secret: secret.into(),
                delay_ms: 0,
                duplicate: false,
                held,
            }),
            ..Default::default()
        })
    };
    point(&old_url, true);
    let a = form(&s, "/v1/payment_intents", Some("h1"), CHARGE).await;
    let b = form(&s, "/v1/payment_intents", Some("h2"), CHARGE).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(
        old_got.lock().expect("lock").is_empty(),
        "held: nothing sent"
    );
    assert!(s.handle.webhook_deliveries().is_empty());
    // The service moved (restarted on another port) while its events were held.
    point(&new_url, true);
    assert_eq!(s.handle.release_webhooks(), 2);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while new_got.lock().expect("lock").len() < 2 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let got = new_got.lock().expect("lock").clone();
    let ids: Vec<Value> = got
        .iter()
        .map(|(_, body)| {
            serde_json::from_str::<Value>(body).expect("json")["data"]["object"]["id"].clone()
        })
        .collect();
    assert_eq!(
        ids,
        [a.body["id"].clone(), b.body["id"].clone()],
        "in order"
    );
    assert!(got.iter().all(|(sig, body)| verifies(secret, sig, body)));
    assert!(
        old_got.lock().expect("lock").is_empty(),
        "nothing to the old endpoint"
    );
    // Released: the next event goes out at once; nothing is held any more.
    let _c = form(&s, "/v1/payment_intents", Some("h3"), CHARGE).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while new_got.lock().expect("lock").len() < 3 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(new_got.lock().expect("lock").len(), 3);
    assert_eq!(s.handle.release_webhooks(), 0);
    // A reset drops what is held: nothing of it is ever sent.
    point(&new_url, true);
    let _d = form(&s, "/v1/payment_intents", Some("h4"), CHARGE).await;
    s.handle.reset();
    point(&new_url, true);
    assert_eq!(s.handle.release_webhooks(), 0);
}
