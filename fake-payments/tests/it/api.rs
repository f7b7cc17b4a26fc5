//! fake-payments over a real loopback socket: every fault × operation × idempotency profile
//! checked against the ledger, idempotency semantics, response authentication, bad input and the
//! control API.

use fake_payments::config::{Config, IdempotencyProfile};
use fake_payments::contract::{self, VerifyError};
use fake_payments::faults::{Fault, ForgeMode, Op, Plan, Rule};
use fake_payments::ledger::{EffectKind, Reply};
use fake_payments::{Handle, app::ReleaseAction};
use rstest::rstest;
use serde_json::{Value, json};
use std::time::Duration;

type Server = fake_control::testing::Served<Handle>;

async fn start_with(config: Config) -> Server {
    let (app, handle) = fake_payments::router(config).expect("valid config");
    Server::start(app, handle, Duration::from_secs(10)).await
}

async fn start() -> Server {
    start_with(Config::example()).await
}

fn key_of(profile: IdempotencyProfile) -> (&'static str, &'static str) {
    match profile {
        IdempotencyProfile::StripeV1 => ("acct_a", "sk_test_a"),
        IdempotencyProfile::IetfDraft => ("acct_b", "sk_test_b"),
        IdempotencyProfile::None => ("acct_c", "sk_test_c"),
    }
}

#[derive(Debug)]
struct Resp {
    status: u16,
    body: Vec<u8>,
    tag: Option<String>,
    digest: String,
}

impl Resp {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
    fn verify(&self, s: &Server, account: &str) -> Result<(), VerifyError> {
        contract::verify(
            &s.handle.public_key(),
            self.tag.as_deref(),
            self.status,
            &self.body,
            account,
            &self.digest,
        )
    }
}

async fn call(
    s: &Server,
    method: &str,
    path: &str,
    bearer: Option<&str>,
    idem: Option<&str>,
    body: Option<Value>,
) -> Result<Resp, reqwest::Error> {
    let m = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
    let mut rb = s.client.request(m, format!("{}{path}", s.base));
    if let Some(b) = bearer {
        rb = rb.bearer_auth(b);
    }
    if let Some(k) = idem {
        rb = rb.header("Idempotency-Key", k);
    }
    if let Some(b) = &body {
        rb = rb
            .header("content-type", "application/json")
            .body(b.to_string());
    }
    let digest = contract::request_digest(method, path, body.as_ref());
    let r = rb.send().await?;
    let status = r.status().as_u16();
    let tag = r
        .headers()
        .get(contract::SIGNATURE_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body = r.bytes().await?.to_vec();
    Ok(Resp {
        status,
        body,
        tag,
        digest,
    })
}

fn create_body(capture: bool) -> Value {
    json!({"amount": 1250, "currency": "eur", "description": "invoice 7", "metadata": {"order": "7"}, "capture": capture})
}

async fn create_ok(s: &Server, bearer: &str, key: &str, capture: bool) -> Value {
    let r = call(
        s,
        "POST",
        "/v1/payments",
        Some(bearer),
        Some(key),
        Some(create_body(capture)),
    )
    .await
    .expect("create");
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    r.json()
}

/// A replay returns the first reply byte for byte, for creations of every kind (captured,
/// authorised only, declined, with and without description and metadata), even after the payment
/// changed since: the fake keeps a creation's reply as the payment it created and renders it
/// again, and this is what says the rendering is the same.
#[rstest]
#[case::captured(json!({"amount": 1250, "currency": "eur", "description": "invoice 7", "metadata": {"order": "7"}, "capture": true}), 201)]
#[case::authorised(json!({"amount": 990, "currency": "usd", "capture": false}), 201)]
#[case::declined(json!({"amount": 5, "currency": "eur", "metadata": {"simulate": "declined"}}), 402)]
#[case::processing(json!({"amount": 7, "currency": "gbp", "description": "a description longer than twenty-two bytes", "metadata": {"simulate": "processing", "b": "2", "a": "1"}}), 201)]
#[tokio::test]
async fn a_replayed_creation_is_the_first_reply_byte_for_byte(
    #[case] body: Value,
    #[case] status: u16,
) {
    let s = start().await;
    let send = || {
        call(
            &s,
            "POST",
            "/v1/payments",
            Some("sk_test_a"),
            Some("same"),
            Some(body.clone()),
        )
    };
    let first = send().await.expect("create");
    assert_eq!(
        first.status,
        status,
        "{}",
        String::from_utf8_lossy(&first.body)
    );
    let id = first.json()["id"]
        .as_str()
        .or(first.json()["error"]["payment"]["id"].as_str())
        .expect("a payment id")
        .to_string();
    // The payment changes after its creation: captured, refunded, or its status set.
    let capture = call(
        &s,
        "POST",
        &format!("/v1/payments/{id}/capture"),
        Some("sk_test_a"),
        Some("cap"),
        None,
    )
    .await
    .expect("capture");
    if capture.status == 200 {
        let refund = call(
            &s,
            "POST",
            &format!("/v1/payments/{id}/refund"),
            Some("sk_test_a"),
            Some("ref"),
            Some(json!({"amount": 1})),
        )
        .await
        .expect("refund");
        assert_eq!(refund.status, 201);
    }
    s.handle.set_status(&id, "disputed").expect("status");
    let again = send().await.expect("replay");
    assert_eq!(again.status, first.status);
    assert_eq!(
        String::from_utf8_lossy(&again.body),
        String::from_utf8_lossy(&first.body)
    );
    again.verify(&s, "acct_a").expect("the replay is signed");
    let l = s.handle.ledger();
    assert!(l.requests.last().expect("req").replayed);
    assert_eq!(
        l.effects
            .iter()
            .filter(|e| e.kind == EffectKind::PaymentCreated)
            .count(),
        1
    );
}

// ---------- every fault × operation × idempotency profile ----------

fn fault_named(name: &str, op: Op) -> Fault {
    match name {
        "reject" => Fault::Reject { status: 503 },
        "commit_then" => Fault::CommitThen { status: 502 },
        "commit_then_drop" => Fault::CommitThenDrop,
        "delay" => Fault::Delay { ms: 30 },
        "garble" => Fault::Garble,
        "omit" => Fault::Omit {
            field: if op == Op::List {
                "complete".into()
            } else {
                "id".into()
            },
        },
        "forge_bad_key" => Fault::Forge {
            mode: ForgeMode::BadKey,
        },
        "forge_other_account" => Fault::Forge {
            mode: ForgeMode::OtherAccount,
        },
        "forget" => Fault::Forget,
        "incomplete_listing" => Fault::IncompleteListing,
        "expire_retention" => Fault::ExpireRetention,
        "hold" => Fault::Hold { name: "h".into() },
        other => panic!("unknown fault {other}"),
    }
}

#[rstest]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fault_on_every_operation_against_the_ledger(
    #[values(
        "reject",
        "commit_then",
        "commit_then_drop",
        "delay",
        "garble",
        "omit",
        "forge_bad_key",
        "forge_other_account",
        "forget",
        "incomplete_listing",
        "expire_retention",
        "hold"
    )]
    fault_name: &str,
    #[values(Op::Create, Op::Capture, Op::Refund, Op::Get, Op::List)] op: Op,
    #[values(
        IdempotencyProfile::StripeV1,
        IdempotencyProfile::IetfDraft,
        IdempotencyProfile::None
    )]
    profile: IdempotencyProfile,
) {
    let s = start().await;
    let (acct, bearer) = key_of(profile);
    // Arrange a payment the operation can act on.
    let target = match op {
        Op::Create => None,
        Op::Capture => Some(create_ok(&s, bearer, "setup", false).await),
        _ => Some(create_ok(&s, bearer, "setup", true).await),
    };
    let id = target
        .as_ref()
        .map(|p| p["id"].as_str().expect("id").to_string());
    let effects_before = s.handle.ledger().effects.len();
    let fault = fault_named(fault_name, op);
    let applicable = match fault {
        Fault::CommitThen { .. } | Fault::CommitThenDrop => op.is_effectful(),
        Fault::IncompleteListing => op == Op::List,
        _ => true,
    };
    let planned = s.handle.set_plan(Plan {
        rules: vec![Rule {
            op,
            nth: 1,
            times: 1,
            account: None,
            key: None,
            fault: fault.clone(),
        }],
    });
    if !applicable {
        // A fault that cannot apply to this operation is refused up front, naming the rule's op.
        let defects = planned.expect_err("an inapplicable fault must be refused");
        assert!(
            defects.iter().any(|d| d.starts_with("rules[0].op")),
            "{defects:?}"
        );
        return;
    }
    planned.expect("plan");
    let (method, path, body) = match op {
        Op::Create => ("POST", "/v1/payments".to_string(), Some(create_body(true))),
        Op::Capture => (
            "POST",
            format!("/v1/payments/{}/capture", id.as_deref().unwrap_or("")),
            None,
        ),
        Op::Refund => (
            "POST",
            format!("/v1/payments/{}/refund", id.as_deref().unwrap_or("")),
            Some(json!({"amount": 250})),
        ),
        Op::Get => (
            "GET",
            format!("/v1/payments/{}", id.as_deref().unwrap_or("")),
            None,
        ),
        _ => ("GET", "/v1/payments?limit=10".to_string(), None),
    };
    let idem = op.is_effectful().then_some("k-1");
    let fut = call(&s, method, &path, Some(bearer), idem, body);
    let result = if fault_name == "hold" {
        let h = s.handle.clone();
        let releaser = tokio::spawn(async move {
            assert!(
                h.wait_parked("h", 1, Duration::from_secs(5)).await,
                "request was not parked"
            );
            assert!(
                h.ledger().effects.len() == effects_before,
                "effect before release"
            );
            h.release("h", ReleaseAction::Proceed)
        });
        let r = fut.await;
        assert_eq!(releaser.await.expect("join"), 1);
        r
    } else {
        fut.await
    };

    let fired = applicable;
    let ledger = s.handle.ledger();
    let rec = ledger.requests.last().expect("the request is recorded");
    assert_eq!(rec.fault.is_some(), fired, "{rec:?}");
    let expired_target =
        fired && fault == Fault::ExpireRetention && matches!(op, Op::Capture | Op::Refund);
    let effect_expected =
        op.is_effectful() && !(fired && matches!(fault, Fault::Reject { .. })) && !expired_target;
    let new_effects: Vec<_> = ledger.effects[effects_before..].to_vec();
    assert_eq!(
        new_effects.len(),
        usize::from(effect_expected),
        "{new_effects:?}"
    );
    assert_eq!(rec.effect, effect_expected);
    if let Some(e) = new_effects.first() {
        assert_eq!(e.request_seq, rec.seq);
        assert_eq!(e.account, acct);
        assert_eq!(e.idempotency_key.as_deref(), idem);
        assert_eq!(
            e.request_digest,
            contract::request_digest(method, &path, rec_body(op).as_ref())
        );
        assert_eq!(e.fault.is_some(), fired);
        let kind = match op {
            Op::Create => EffectKind::PaymentCreated,
            Op::Capture => EffectKind::PaymentCaptured,
            _ => EffectKind::PaymentRefunded,
        };
        assert_eq!(e.kind, kind);
    }

    // What the client saw, and what the ledger says about the reply.
    match (fired, &fault) {
        (true, Fault::CommitThenDrop) => {
            assert!(
                result.is_err(),
                "a dropped connection gives no reply: {result:?}"
            );
            assert_eq!(rec.reply, Reply::Dropped);
            assert_eq!(new_effects[0].reply, Reply::Dropped);
        }
        _ => {
            let r = result.expect("a reply");
            match (fired, &fault) {
                (true, Fault::Reject { status }) | (true, Fault::CommitThen { status }) => {
                    assert_eq!(r.status, *status);
                    r.verify(&s, acct).expect("error replies are signed too");
                    let want = if matches!(fault, Fault::CommitThen { .. }) {
                        Reply::ErrorAfterCommit
                    } else {
                        Reply::Written
                    };
                    assert_eq!(rec.reply, want);
                }
                (true, Fault::Garble) => {
                    assert_eq!(r.verify(&s, acct), Err(VerifyError::Undecodable));
                    assert!(serde_json::from_slice::<Value>(&r.body).is_err());
                    assert_eq!(rec.reply, Reply::Garbled);
                }
                (
                    true,
                    Fault::Forge {
                        mode: ForgeMode::BadKey,
                    },
                ) => {
                    assert_eq!(r.verify(&s, acct), Err(VerifyError::BadSignature));
                    assert_eq!(rec.reply, Reply::Forged);
                }
                (
                    true,
                    Fault::Forge {
                        mode: ForgeMode::OtherAccount,
                    },
                ) => {
                    assert!(matches!(
                        r.verify(&s, acct),
                        Err(VerifyError::AccountMismatch { .. })
                    ));
                    // Signed by the provider's own key, for another account.
                    assert_eq!(rec.reply, Reply::Misdirected);
                }
                (true, Fault::Omit { field }) => {
                    r.verify(&s, acct).expect("an omission is signed as sent");
                    if r.status < 300 {
                        assert!(r.json().get(field).is_none(), "{field} still present");
                    }
                }
                (true, Fault::ExpireRetention) if op != Op::Create => {
                    r.verify(&s, acct).expect("signed");
                    match op {
                        Op::List => {
                            assert_eq!(r.json()["data"], json!([]));
                            assert_eq!(
                                r.json()["complete"],
                                true,
                                "expired items are honestly absent"
                            );
                        }
                        _ => assert_eq!(r.status, 404),
                    }
                }
                (true, Fault::IncompleteListing) => {
                    r.verify(&s, acct).expect("signed");
                    assert_eq!(r.json()["complete"], false);
                    assert_eq!(r.json()["data"], json!([]), "the only payment is left out");
                }
                _ => {
                    // Not fired, or a fault that does not change the reply (delay, forget, hold).
                    r.verify(&s, acct).expect("verifies");
                    assert!(
                        r.status < 300,
                        "status {} body {}",
                        r.status,
                        String::from_utf8_lossy(&r.body)
                    );
                    assert_eq!(rec.reply, Reply::Written);
                }
            }
        }
    }
}

fn rec_body(op: Op) -> Option<Value> {
    match op {
        Op::Create => Some(create_body(true)),
        Op::Refund => Some(json!({"amount": 250})),
        _ => None,
    }
}

// ---------- idempotency profiles ----------

#[tokio::test]
async fn stripe_v1_replays_the_first_response_including_5xx_and_refuses_changed_parameters() {
    let s = start().await;
    let first = create_ok(&s, "sk_test_a", "k", true).await;
    let again = call(
        &s,
        "POST",
        "/v1/payments",
        Some("sk_test_a"),
        Some("k"),
        Some(create_body(true)),
    )
    .await
    .expect("retry");
    assert_eq!(again.status, 201);
    assert_eq!(again.json()["id"], first["id"]);
    let changed = call(
        &s,
        "POST",
        "/v1/payments",
        Some("sk_test_a"),
        Some("k"),
        Some(json!({"amount": 1, "currency": "eur"})),
    )
    .await
    .expect("changed");
    assert_eq!(changed.status, 400);
    assert_eq!(changed.json()["error"]["code"], "idempotency_key_reuse");
    // commit_then(500): the effect happened, 500 is saved and replayed, nothing is created twice.
    s.handle
        .set_plan(Plan {
            rules: vec![Rule {
                op: Op::Create,
                nth: 1,
                times: 1,
                account: None,
                key: Some("k5".into()),
                fault: Fault::CommitThen { status: 500 },
            }],
        })
        .expect("plan");
    let r1 = call(
        &s,
        "POST",
        "/v1/payments",
        Some("sk_test_a"),
        Some("k5"),
        Some(create_body(true)),
    )
    .await
    .expect("r1");
    let r2 = call(
        &s,
        "POST",
        "/v1/payments",
        Some("sk_test_a"),
        Some("k5"),
        Some(create_body(true)),
    )
    .await
    .expect("r2");
    assert_eq!((r1.status, r2.status), (500, 500));
    let l = s.handle.ledger();
    assert_eq!(
        l.effects
            .iter()
            .filter(|e| e.idempotency_key.as_deref() == Some("k5"))
            .count(),
        1
    );
    assert!(l.requests.last().expect("req").replayed);
}

#[tokio::test]
async fn stripe_v1_after_a_dropped_reply_the_retry_learns_the_committed_payment() {
    let s = start().await;
    s.handle
        .set_plan(Plan {
            rules: vec![Rule {
                op: Op::Create,
                nth: 1,
                times: 1,
                account: None,
                key: None,
                fault: Fault::CommitThenDrop,
            }],
        })
        .expect("plan");
    assert!(
        call(
            &s,
            "POST",
            "/v1/payments",
            Some("sk_test_a"),
            Some("kd"),
            Some(create_body(true))
        )
        .await
        .is_err()
    );
    let retry = call(
        &s,
        "POST",
        "/v1/payments",
        Some("sk_test_a"),
        Some("kd"),
        Some(create_body(true)),
    )
    .await
    .expect("retry");
    assert_eq!(retry.status, 201);
    let l = s.handle.ledger();
    assert_eq!(l.effects.len(), 1);
    assert_eq!(retry.json()["id"], l.effects[0].payment_id);
}

#[tokio::test]
async fn beyond_retention_or_after_forget_a_key_no_longer_protects() {
    let s = start().await;
    create_ok(&s, "sk_test_a", "k", true).await;
    s.handle.expire(None);
    create_ok(&s, "sk_test_a", "k", true).await;
    assert_eq!(
        s.handle.ledger().effects.len(),
        2,
        "the pruned key let a duplicate through"
    );
    s.handle
        .set_plan(Plan {
            rules: vec![Rule {
                op: Op::Create,
                nth: 1,
                times: 1,
                account: None,
                key: None,
                fault: Fault::Forget,
            }],
        })
        .expect("plan");
    create_ok(&s, "sk_test_a", "k", true).await;
    assert_eq!(
        s.handle.ledger().effects.len(),
        3,
        "a forgetful restart let a duplicate through"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ietf_draft_requires_a_key_refuses_in_flight_and_mismatched_payloads() {
    let s = start().await;
    let missing = call(
        &s,
        "POST",
        "/v1/payments",
        Some("sk_test_b"),
        None,
        Some(create_body(true)),
    )
    .await
    .expect("r");
    assert_eq!(missing.status, 400);
    assert_eq!(missing.json()["error"]["code"], "idempotency_key_missing");
    assert!(s.handle.ledger().effects.is_empty());
    s.handle
        .set_plan(Plan {
            rules: vec![Rule {
                op: Op::Create,
                nth: 1,
                times: 1,
                account: None,
                key: None,
                fault: Fault::Hold {
                    name: "first".into(),
                },
            }],
        })
        .expect("plan");
    let s2 = &s;
    let first = async move {
        call(
            s2,
            "POST",
            "/v1/payments",
            Some("sk_test_b"),
            Some("kb"),
            Some(create_body(true)),
        )
        .await
    };
    let second = async {
        assert!(
            s.handle
                .wait_parked("first", 1, Duration::from_secs(5))
                .await
        );
        let dup = call(
            &s,
            "POST",
            "/v1/payments",
            Some("sk_test_b"),
            Some("kb"),
            Some(create_body(true)),
        )
        .await
        .expect("dup");
        let mismatch = call(
            &s,
            "POST",
            "/v1/payments",
            Some("sk_test_b"),
            Some("kb"),
            Some(json!({"amount": 5, "currency": "usd"})),
        )
        .await
        .expect("mm");
        s.handle.release("first", ReleaseAction::Proceed);
        (dup, mismatch)
    };
    let (first, (dup, mismatch)) = tokio::join!(first, second);
    assert_eq!(first.expect("first").status, 201);
    assert_eq!(dup.status, 409);
    assert_eq!(mismatch.status, 422);
    let replay = call(
        &s,
        "POST",
        "/v1/payments",
        Some("sk_test_b"),
        Some("kb"),
        Some(create_body(true)),
    )
    .await
    .expect("replay");
    assert_eq!(replay.status, 201);
    assert_eq!(s.handle.ledger().effects.len(), 1);
}

#[tokio::test]
async fn without_idempotency_every_retry_is_a_new_payment() {
    let s = start().await;
    create_ok(&s, "sk_test_c", "k", true).await;
    create_ok(&s, "sk_test_c", "k", true).await;
    assert_eq!(s.handle.ledger().effects.len(), 2);
}

// ---------- authentication tags ----------

#[tokio::test]
async fn tags_verify_and_every_tampering_is_detected() {
    let s = start().await;
    let r = call(
        &s,
        "POST",
        "/v1/payments",
        Some("sk_test_a"),
        Some("k"),
        Some(create_body(true)),
    )
    .await
    .expect("create");
    r.verify(&s, "acct_a").expect("good tag");
    // Another account's client, a changed body, a changed status, another request, no tag.
    assert!(matches!(
        r.verify(&s, "acct_b"),
        Err(VerifyError::AccountMismatch { .. })
    ));
    let mut changed = r.body.clone();
    let pos = changed.iter().position(|b| *b == b'1').expect("a digit");
    changed[pos] = b'9';
    assert_eq!(
        contract::verify(
            &s.handle.public_key(),
            r.tag.as_deref(),
            r.status,
            &changed,
            "acct_a",
            &r.digest
        ),
        Err(VerifyError::BadSignature)
    );
    assert_eq!(
        contract::verify(
            &s.handle.public_key(),
            r.tag.as_deref(),
            200,
            &r.body,
            "acct_a",
            &r.digest
        ),
        Err(VerifyError::BadSignature)
    );
    assert!(matches!(
        contract::verify(
            &s.handle.public_key(),
            r.tag.as_deref(),
            r.status,
            &r.body,
            "acct_a",
            "sha256:00"
        ),
        Err(VerifyError::RequestMismatch { .. })
    ));
    assert_eq!(
        contract::verify(
            &s.handle.public_key(),
            None,
            r.status,
            &r.body,
            "acct_a",
            &r.digest
        ),
        Err(VerifyError::Missing)
    );
    // Another provider instance's key is not the published one.
    let other = start().await;
    assert!(matches!(
        contract::verify(
            &other.handle.public_key(),
            r.tag.as_deref(),
            r.status,
            &r.body,
            "acct_a",
            &r.digest
        ),
        Err(VerifyError::UnknownKey { .. })
    ));
    // The published key document parses to the same key.
    let doc = call(&s, "GET", "/v1/provider-key", None, None, None)
        .await
        .expect("key");
    assert_eq!(
        contract::parse_public_key(&doc.json()).expect("parse"),
        s.handle.public_key()
    );
}

#[tokio::test]
async fn the_published_profile_names_every_required_item_and_its_digest() {
    let s = start().await;
    let r = call(&s, "GET", "/v1/profile", None, None, None)
        .await
        .expect("profile");
    let doc = r.json();
    let p = &doc["profile"];
    for field in [
        "id",
        "version",
        "provider",
        "account_authority",
        "environments",
        "status_sources",
        "lookup_key",
        "key_rule",
        "retention_ms",
        "freshness_ms",
        "complete_listing_proves_absence",
        "mapping",
        "final_failure_proves_no_effect",
    ] {
        assert!(!p[field].is_null(), "{field}");
    }
    assert_eq!(doc["digest"], fake_payments::profile::digest(p));
    assert!(
        p["mapping"].get("disputed").is_none(),
        "one status stays unmapped on purpose"
    );
    assert_eq!(p["status_sources"][0]["pin"], s.handle.key_id());
}

// ---------- bad input ----------

#[rstest]
#[case::malformed_json(
    "POST",
    "/v1/payments",
    Some("sk_test_a"),
    Some("{\"amount\": 1,"),
    400,
    "invalid_json"
)]
#[case::amount_as_string(
    "POST",
    "/v1/payments",
    Some("sk_test_a"),
    Some(r#"{"amount":"100","currency":"usd"}"#),
    400,
    "invalid_request"
)]
#[case::negative_amount(
    "POST",
    "/v1/payments",
    Some("sk_test_a"),
    Some(r#"{"amount":-5,"currency":"usd"}"#),
    400,
    "invalid_request"
)]
#[case::zero_amount(
    "POST",
    "/v1/payments",
    Some("sk_test_a"),
    Some(r#"{"amount":0,"currency":"usd"}"#),
    400,
    "invalid_request"
)]
#[case::fractional_amount(
    "POST",
    "/v1/payments",
    Some("sk_test_a"),
    Some(r#"{"amount":1.5,"currency":"usd"}"#),
    400,
    "invalid_request"
)]
#[case::oversized_amount(
    "POST",
    "/v1/payments",
    Some("sk_test_a"),
    Some(r#"{"amount":100000000,"currency":"usd"}"#),
    400,
    "invalid_request"
)]
#[case::unknown_currency(
    "POST",
    "/v1/payments",
    Some("sk_test_a"),
    Some(r#"{"amount":5,"currency":"xyz"}"#),
    400,
    "invalid_request"
)]
#[case::unknown_field(
    "POST",
    "/v1/payments",
    Some("sk_test_a"),
    Some(r#"{"amount":5,"currency":"usd","tip":1}"#),
    400,
    "invalid_request"
)]
#[case::array_body(
    "POST",
    "/v1/payments",
    Some("sk_test_a"),
    Some("[]"),
    400,
    "invalid_request"
)]
#[case::missing_credentials(
    "POST",
    "/v1/payments",
    None,
    Some(r#"{"amount":5,"currency":"usd"}"#),
    401,
    "unauthenticated"
)]
#[case::wrong_credentials(
    "POST",
    "/v1/payments",
    Some("sk_wrong_key"),
    Some(r#"{"amount":5,"currency":"usd"}"#),
    401,
    "unauthenticated"
)]
#[case::control_token_on_the_api(
    "POST",
    "/v1/payments",
    Some("ctl_test"),
    Some(r#"{"amount":5,"currency":"usd"}"#),
    401,
    "unauthenticated"
)]
#[case::account_key_on_control(
    "GET",
    "/_control/ledger",
    Some("sk_test_a"),
    None,
    401,
    "unauthenticated"
)]
#[case::unknown_route("GET", "/v1/nothing", Some("sk_test_a"), None, 404, "not_found")]
#[case::wrong_method(
    "DELETE",
    "/v1/payments",
    Some("sk_test_a"),
    None,
    405,
    "method_not_allowed"
)]
#[case::bad_limit(
    "GET",
    "/v1/payments?limit=0",
    Some("sk_test_a"),
    None,
    400,
    "invalid_request"
)]
#[case::bad_refund(
    "POST",
    "/v1/payments/pay_x/refund",
    Some("sk_test_a"),
    Some(r#"{"amount":"all"}"#),
    400,
    "invalid_request"
)]
#[tokio::test]
async fn bad_input_gets_the_error_envelope_and_changes_nothing(
    #[case] method: &str,
    #[case] path: &str,
    #[case] bearer: Option<&str>,
    #[case] raw: Option<&str>,
    #[case] status: u16,
    #[case] code: &str,
) {
    let s = start().await;
    let m = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
    let mut rb = s.client.request(m, format!("{}{path}", s.base));
    if let Some(b) = bearer {
        rb = rb.bearer_auth(b);
    }
    if let Some(raw) = raw {
        rb = rb
            .header("content-type", "application/json")
            .body(raw.to_string());
    }
    let r = rb.send().await.expect("send");
    assert_eq!(r.status().as_u16(), status);
    let body: Value = r.json().await.expect("an error envelope");
    assert_eq!(body["error"]["code"], code, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty())
    );
    assert!(s.handle.ledger().effects.is_empty());
}

#[tokio::test]
async fn an_oversized_body_is_413_and_changes_nothing() {
    let mut config = Config::example();
    config.max_body_bytes = 1024;
    let s = start_with(config).await;
    let big = json!({"amount": 5, "currency": "usd", "description": "x".repeat(2000)});
    let r = call(
        &s,
        "POST",
        "/v1/payments",
        Some("sk_test_a"),
        Some("k"),
        Some(big),
    )
    .await
    .expect("send");
    assert_eq!(r.status, 413);
    assert_eq!(r.json()["error"]["code"], "body_too_large");
    assert!(s.handle.ledger().effects.is_empty());
}

// ---------- reads, isolation, pagination ----------

#[tokio::test]
async fn accounts_see_only_their_own_payments_and_listings_paginate_with_a_completeness_flag() {
    let s = start().await;
    let p = create_ok(&s, "sk_test_a", "k0", true).await;
    let id = p["id"].as_str().expect("id");
    let other = call(
        &s,
        "GET",
        &format!("/v1/payments/{id}"),
        Some("sk_test_b"),
        None,
        None,
    )
    .await
    .expect("get");
    assert_eq!(other.status, 404);
    for i in 1..5 {
        create_ok(&s, "sk_test_a", &format!("k{i}"), true).await;
    }
    let mut seen = Vec::new();
    let mut path = "/v1/payments?limit=2".to_string();
    loop {
        let r = call(&s, "GET", &path, Some("sk_test_a"), None, None)
            .await
            .expect("list");
        r.verify(&s, "acct_a").expect("signed");
        let j = r.json();
        for p in j["data"].as_array().expect("data") {
            seen.push(p["id"].as_str().expect("id").to_string());
        }
        if j["complete"] == true {
            assert_eq!(j["has_more"], false);
            break;
        }
        assert_eq!(j["has_more"], true);
        path = format!(
            "/v1/payments?limit=2&starting_after={}",
            j["next_cursor"].as_str().expect("cursor")
        );
    }
    assert_eq!(seen.len(), 5);
    let by_key = call(
        &s,
        "GET",
        "/v1/payments?idempotency_key=k3",
        Some("sk_test_a"),
        None,
        None,
    )
    .await
    .expect("by key");
    assert_eq!(by_key.json()["data"].as_array().map(Vec::len), Some(1));
    assert_eq!(by_key.json()["complete"], true);
}

#[tokio::test]
async fn capture_and_refund_are_effects_and_statuses_can_be_simulated() {
    let s = start().await;
    let p = create_ok(&s, "sk_test_a", "k", false).await;
    assert_eq!(p["status"], "requires_capture");
    let id = p["id"].as_str().expect("id").to_string();
    let c = call(
        &s,
        "POST",
        &format!("/v1/payments/{id}/capture"),
        Some("sk_test_a"),
        Some("kc"),
        None,
    )
    .await
    .expect("capture");
    assert_eq!(c.json()["status"], "succeeded");
    let again = call(
        &s,
        "POST",
        &format!("/v1/payments/{id}/capture"),
        Some("sk_test_a"),
        Some("kc2"),
        None,
    )
    .await
    .expect("capture");
    assert_eq!(again.status, 409);
    let r = call(
        &s,
        "POST",
        &format!("/v1/payments/{id}/refund"),
        Some("sk_test_a"),
        Some("kr"),
        Some(json!({"amount": 1250})),
    )
    .await
    .expect("refund");
    assert_eq!(r.status, 201);
    assert_eq!(r.json()["object"], "refund");
    let kinds: Vec<EffectKind> = s.handle.ledger().effects.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        [
            EffectKind::PaymentCreated,
            EffectKind::PaymentCaptured,
            EffectKind::PaymentRefunded
        ]
    );
    let declined = call(
        &s,
        "POST",
        "/v1/payments",
        Some("sk_test_a"),
        Some("kx"),
        Some(json!({"amount": 5, "currency": "usd", "metadata": {"simulate": "declined"}})),
    )
    .await
    .expect("declined");
    assert_eq!(declined.status, 402);
    assert_eq!(declined.json()["error"]["payment"]["status"], "declined");
    assert_eq!(
        s.handle.ledger().effects.last().map(|e| e.status.clone()),
        Some("declined".into())
    );
    s.handle.set_status(&id, "disputed").expect("status");
    let g = call(
        &s,
        "GET",
        &format!("/v1/payments/{id}"),
        Some("sk_test_a"),
        None,
        None,
    )
    .await
    .expect("get");
    assert_eq!(g.json()["status"], "disputed");
}

/// The ledger says what each request was about and what its reply named: the path's payment,
/// a listing's key filter, and the payment ids the written body carried (a created, read,
/// refunded or listed payment; none for a rejection).
#[tokio::test]
async fn each_request_records_what_it_was_about_and_what_its_reply_named() {
    let s = start().await;
    let p = create_ok(&s, "sk_test_a", "k1", true).await;
    let id = p["id"].as_str().expect("id").to_string();
    let get = format!("/v1/payments/{id}");
    call(&s, "GET", &get, Some("sk_test_a"), None, None)
        .await
        .expect("get");
    call(
        &s,
        "GET",
        "/v1/payments?idempotency_key=k1",
        Some("sk_test_a"),
        None,
        None,
    )
    .await
    .expect("list");
    call(
        &s,
        "GET",
        "/v1/payments?idempotency_key=other",
        Some("sk_test_a"),
        None,
        None,
    )
    .await
    .expect("empty list");
    let refund = format!("/v1/payments/{id}/refund");
    call(
        &s,
        "POST",
        &refund,
        Some("sk_test_a"),
        Some("r1"),
        Some(json!({"amount": 5})),
    )
    .await
    .expect("refund");
    call(
        &s,
        "GET",
        "/v1/payments/pay_nope",
        Some("sk_test_a"),
        None,
        None,
    )
    .await
    .expect("unknown");
    let l = s.handle.ledger();
    let row = |i: usize| {
        let r = &l.requests[i];
        (
            r.op.label(),
            r.payment_id.clone(),
            r.lookup_key.clone(),
            r.refs.clone(),
        )
    };
    let some = |x: &str| Some(x.to_string());
    assert_eq!(row(0), ("create", None, None, vec![id.clone()]));
    assert_eq!(row(1), ("get", some(&id), None, vec![id.clone()]));
    assert_eq!(row(2), ("list", None, some("k1"), vec![id.clone()]));
    assert_eq!(row(3), ("list", None, some("other"), vec![]));
    assert_eq!(row(4), ("refund", some(&id), None, vec![id.clone()]));
    assert_eq!(row(5), ("get", some("pay_nope"), None, vec![]));
    assert!(l.requests.iter().all(|r| r.reply == Reply::Written));
}

/// A credential issued at run time acts for its account and is recorded by label; once
/// revoked, a request made with it is recorded as such, answered 401, and changes nothing.
#[tokio::test]
async fn issued_credentials_are_labelled_and_revocation_is_recorded() {
    let s = start().await;
    let key = s.handle.issue_key("acct_a", "e1-1").expect("known account");
    assert!(s.handle.issue_key("acct_nope", "x").is_none());
    create_ok(&s, &key, "k1", true).await;
    assert_eq!(s.handle.revoke("e1-1"), 1);
    let late = call(
        &s,
        "POST",
        "/v1/payments",
        Some(&key),
        Some("k2"),
        Some(create_body(true)),
    )
    .await
    .expect("late");
    assert_eq!(late.status, 401);
    let l = s.handle.ledger();
    assert_eq!(l.effects.len(), 1, "the revoked request made nothing");
    let seen: Vec<(&str, bool, u16)> = l
        .requests
        .iter()
        .map(|r| (r.credential.as_str(), r.revoked, r.status))
        .collect();
    assert_eq!(seen, [("e1-1", false, 201), ("e1-1", true, 401)]);
    create_ok(&s, "sk_test_a", "k3", true).await;
    assert_eq!(s.handle.ledger().requests[2].credential, "account");
}

// ---------- control ----------

#[tokio::test]
async fn an_invalid_fault_plan_is_refused_with_every_defect() {
    let s = start().await;
    let r = s
        .client
        .post(format!("{}/_control/faults", s.base))
        .bearer_auth("ctl_test")
        .json(&json!({"rules": [{"op": "get", "nth": 0, "fault": {"type": "commit_then", "status": 200}}]}))
        .send()
        .await
        .expect("send");
    assert_eq!(r.status().as_u16(), 400);
    let body: Value = r.json().await.expect("json");
    let msg = body["error"]["message"].as_str().expect("message");
    for needle in ["rules[0].nth", "rules[0].fault.status", "rules[0].op"] {
        assert!(msg.contains(needle), "{needle}: {msg}");
    }
    let typo = s
        .client
        .post(format!("{}/_control/faults", s.base))
        .bearer_auth("ctl_test")
        .json(&json!({"rules": [{"op": "create", "fault": {"type": "explode"}}]}))
        .send()
        .await
        .expect("send");
    assert_eq!(typo.status().as_u16(), 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_request_commits_after_its_client_is_gone() {
    let s = start().await;
    s.handle
        .set_plan(Plan {
            rules: vec![Rule {
                op: Op::Create,
                nth: 1,
                times: 1,
                account: None,
                key: None,
                fault: Fault::Hold {
                    name: "crash".into(),
                },
            }],
        })
        .expect("plan");
    let client = s.client.clone();
    let url = format!("{}/v1/payments", s.base);
    let sender = tokio::spawn(async move {
        client
            .post(url)
            .bearer_auth("sk_test_a")
            .header("Idempotency-Key", "kh")
            .json(&create_body(true))
            .send()
            .await
    });
    assert!(
        s.handle
            .wait_parked("crash", 1, Duration::from_secs(5))
            .await
    );
    // While the client is alive, the provider says so.
    assert!(
        !s.handle
            .wait_client_gone("crash", Duration::from_millis(100))
            .await
    );
    sender.abort(); // the executor is killed while its request is held
    let _ = sender.await;
    // The provider notices the sender is gone before anything is released (no sleep needed).
    assert!(
        s.handle
            .wait_client_gone("crash", Duration::from_secs(5))
            .await
    );
    assert!(s.handle.ledger().effects.is_empty());
    assert_eq!(s.handle.release("crash", ReleaseAction::Proceed), 1);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let l = s.handle.ledger();
    assert_eq!(
        l.effects.len(),
        1,
        "the provider committed after the sender died"
    );
    assert_eq!(l.effects[0].reply, Reply::ClientGone);
    // Released with a rejection instead, nothing happens.
    s.handle
        .set_plan(Plan {
            rules: vec![Rule {
                op: Op::Create,
                nth: 1,
                times: 1,
                account: None,
                key: None,
                fault: Fault::Hold { name: "no".into() },
            }],
        })
        .expect("plan");
    let s2 = &s;
    let (r, _) = tokio::join!(
        call(
            s2,
            "POST",
            "/v1/payments",
            Some("sk_test_a"),
            Some("kn"),
            Some(create_body(true))
        ),
        async {
            assert!(s.handle.wait_parked("no", 1, Duration::from_secs(5)).await);
            s.handle
                .release("no", ReleaseAction::Reject { status: 503 })
        }
    );
    assert_eq!(r.expect("reply").status, 503);
    assert_eq!(s.handle.ledger().effects.len(), 1);
}

#[tokio::test]
async fn control_needs_its_token_and_reset_clears_everything() {
    let s = start().await;
    create_ok(&s, "sk_test_a", "k", true).await;
    let no = s
        .client
        .get(format!("{}/_control/ledger", s.base))
        .send()
        .await
        .expect("send");
    assert_eq!(no.status().as_u16(), 401);
    let l: Value = s
        .client
        .get(format!("{}/_control/ledger", s.base))
        .bearer_auth("ctl_test")
        .send()
        .await
        .expect("send")
        .json()
        .await
        .expect("json");
    assert_eq!(l["effects"].as_array().map(Vec::len), Some(1));
    let r = s
        .client
        .post(format!("{}/_control/reset", s.base))
        .bearer_auth("ctl_test")
        .send()
        .await
        .expect("send");
    assert_eq!(r.status().as_u16(), 200);
    assert!(s.handle.ledger().effects.is_empty());
}

#[test]
fn config_defects_are_all_listed() {
    let mut c = Config::example();
    c.accounts[1].key = c.accounts[0].key.clone();
    c.accounts[2].key = "ctl_test".into();
    c.control_token = "ctl_test".into();
    c.max_body_bytes = 10;
    c.signing_seed_hex = Some("zz".into());
    let d = c.validate().join("\n");
    for needle in [
        "share one credential",
        "equals the control token",
        "max_body_bytes",
        "signing_seed_hex",
    ] {
        assert!(d.contains(needle), "{needle}: {d}");
    }
}

/// The ledger is bounded: once it holds `max_ledger_requests`, every API request is refused with
/// `503 ledger_full` and nothing is processed (no effect goes unrecorded), until a reset.
#[tokio::test]
async fn a_full_ledger_refuses_everything_until_reset() {
    let s = start_with(Config {
        max_ledger_requests: 3,
        ..Config::example()
    })
    .await;
    for i in 0..3 {
        create_ok(&s, "sk_test_a", &format!("k-{i}"), true).await;
    }
    let r = call(
        &s,
        "POST",
        "/v1/payments",
        Some("sk_test_a"),
        Some("k-full"),
        Some(create_body(true)),
    )
    .await
    .expect("answer");
    assert_eq!(r.status, 503);
    assert_eq!(r.json()["error"]["code"], "ledger_full");
    let ledger = s.handle.ledger();
    assert_eq!((ledger.requests.len(), ledger.effects.len()), (3, 3));
    s.handle.reset();
    create_ok(&s, "sk_test_a", "k-after-reset", true).await;
}

/// On a clock the harness drives, retention is measured on that clock: a key protects until
/// the clock passes the retention window (no real wait), and a reset keeps the clock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_runs_on_the_clock_it_is_given() {
    let sim = fake_payments::clock::SimClock::at(1_800_000_000_000);
    let config = Config::example();
    let window = config.retention_secs * 1000;
    let (app, handle) =
        fake_payments::router_with_clock(config, fake_payments::clock::Clock::Sim(sim.clone()))
            .expect("valid config");
    let s = Server::start(app, handle, Duration::from_secs(10)).await;
    create_ok(&s, "sk_test_a", "k", true).await;
    sim.advance(window);
    create_ok(&s, "sk_test_a", "k", true).await;
    assert_eq!(
        s.handle.ledger().effects.len(),
        1,
        "inside the window the key protects"
    );
    sim.advance(1);
    create_ok(&s, "sk_test_a", "k", true).await;
    assert_eq!(
        s.handle.ledger().effects.len(),
        2,
        "past the window the key no longer protects"
    );
    s.handle.reset();
    create_ok(&s, "sk_test_a", "k2", true).await;
    let l = s.handle.ledger();
    assert_eq!(l.effects.len(), 1);
    sim.advance(window + 1);
    create_ok(&s, "sk_test_a", "k2", true).await;
    assert_eq!(
        s.handle.ledger().effects.len(),
        2,
        "the reset kept the driven clock"
    );
}
