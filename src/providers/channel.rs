//! A simulated delivery channel for seed 002's output steps (`deliver: notification | channel`),
//! in process: it takes a delivery under its receipt id and keeps the ground truth of what it
//! took ([`ChannelLedger`]) and what became of each answer. Faults come from rules, as at the
//! other simulators: refuse before delivering, deliver and lose the answer, or hold the delivery
//! until the harness lets it go (then it is delivered whether or not its sender still waits:
//! [`super::holds`]'s choreography, through [`HoldSite`]).

use super::holds::HoldSite;
use provider_model::holds::ReleaseAction;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::oneshot;

/// What the channel does to a delivery a rule takes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum ChannelFault {
    /// Refused before anything is delivered, with this status.
    Refuse { status: u16 },
    /// Delivered; the answer never reaches the sender.
    LoseReply,
    /// Not delivered, and no answer: the connection closes (the sender cannot tell this from
    /// a lost answer).
    Drop,
    /// Parked under `name` until the harness lets it go.
    Hold { name: String },
}

/// A fault for the `nth` delivery (counted from 1) and the `times - 1` after it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelRule {
    pub fault: ChannelFault,
    pub nth: u32,
    pub times: u32,
}

/// A rule and what it did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RuleSeen {
    pub rule: ChannelRule,
    /// Deliveries it applied to.
    pub fired: u32,
}

/// What became of a delivered message's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reply {
    /// The sender was told it was delivered.
    Answered,
    /// Delivered, and the answer was lost (a fault).
    Lost,
    /// Delivered after a hold, when its sender no longer waited.
    SenderGone,
}

/// One delivery the channel took (ground truth).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Taken {
    /// The channel's own number for the request.
    pub seq: u64,
    /// The receipt id the sender gave (`workflow:<run_id>:<node_id>`).
    pub id: String,
    pub deliver: String,
    pub target: Option<String>,
    /// SHA-256 of the payload's canonical JSON.
    pub digest: String,
    pub reply: Reply,
}

/// The channel's ground truth: what it delivered, and how many requests it refused.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelLedger {
    pub taken: Vec<Taken>,
    pub refused: u32,
    /// Every request the channel did not deliver (refused, or dropped with no answer).
    #[serde(default)]
    pub untaken: Vec<Untaken>,
}

/// A request the channel did not deliver.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Untaken {
    /// The channel's own number for the request (one sequence with [`Taken::seq`]).
    pub seq: u64,
    pub id: String,
    /// The status it was refused with; `None`: dropped with no answer.
    pub status: Option<u16>,
}

impl ChannelLedger {
    /// Deliveries by receipt id.
    pub fn by_id(&self) -> BTreeMap<String, u32> {
        let mut m = BTreeMap::new();
        for t in &self.taken {
            *m.entry(t.id.clone()).or_insert(0) += 1;
        }
        m
    }
}

/// What the sender is answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChannelAnswer {
    Delivered,
    Refused {
        status: u16,
    },
    /// No answer came (the reply was lost): the sender cannot tell what happened.
    NoAnswer,
}

/// A delivery to take: its receipt id, kind, target and payload.
#[derive(Clone, Debug)]
pub struct Message {
    pub id: String,
    pub deliver: String,
    pub target: Option<String>,
    pub payload: serde_json::Value,
}

#[derive(Debug)]
struct Parked {
    seq: u64,
    message: Message,
    waiter: oneshot::Sender<ChannelAnswer>,
}

#[derive(Debug, Default)]
struct State {
    seq: u64,
    ledger: ChannelLedger,
    rules: Vec<RuleSeen>,
    parked: BTreeMap<String, Vec<Parked>>,
}

/// The channel (clone it to share).
#[derive(Clone, Debug, Default)]
pub struct FakeChannel {
    state: Arc<Mutex<State>>,
}

/// SHA-256 of a payload's canonical JSON (RFC 8785), as the ledger keeps it.
pub fn digest(v: &serde_json::Value) -> String {
    use sha2::Digest as _;
    let bytes = serde_json_canonicalizer::to_vec(v).unwrap_or_default();
    hex::encode(sha2::Sha256::digest(&bytes))
}

impl FakeChannel {
    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while the lock was held leaves plain data behind; it is still the truth.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn add_rule(&self, rule: ChannelRule) {
        self.state().rules.push(RuleSeen { rule, fired: 0 });
    }

    pub fn rules(&self) -> Vec<RuleSeen> {
        self.state().rules.clone()
    }

    pub fn ledger(&self) -> ChannelLedger {
        self.state().ledger.clone()
    }

    /// Takes one delivery, as the rules say.
    pub async fn take(&self, message: Message) -> ChannelAnswer {
        let rx = {
            let mut st = self.state();
            st.seq += 1;
            let seq = st.seq;
            let fault = st
                .rules
                .iter_mut()
                .find(|r| seq >= u64::from(r.rule.nth) && r.fired < r.rule.times)
                .map(|r| {
                    r.fired += 1;
                    r.rule.fault.clone()
                });
            let commit = |st: &mut State, reply: Reply| {
                st.ledger.taken.push(Taken {
                    seq,
                    id: message.id.clone(),
                    deliver: message.deliver.clone(),
                    target: message.target.clone(),
                    digest: digest(&message.payload),
                    reply,
                })
            };
            match fault {
                None => {
                    commit(&mut st, Reply::Answered);
                    return ChannelAnswer::Delivered;
                }
                Some(ChannelFault::Refuse { status }) => {
                    st.ledger.refused += 1;
                    st.ledger.untaken.push(Untaken {
                        seq,
                        id: message.id.clone(),
                        status: Some(status),
                    });
                    return ChannelAnswer::Refused { status };
                }
                Some(ChannelFault::LoseReply) => {
                    commit(&mut st, Reply::Lost);
                    return ChannelAnswer::NoAnswer;
                }
                Some(ChannelFault::Drop) => {
                    st.ledger.untaken.push(Untaken {
                        seq,
                        id: message.id.clone(),
                        status: None,
                    });
                    return ChannelAnswer::NoAnswer;
                }
                Some(ChannelFault::Hold { name }) => {
                    let (tx, rx) = oneshot::channel();
                    st.parked.entry(name).or_default().push(Parked {
                        seq,
                        message,
                        waiter: tx,
                    });
                    rx
                }
            }
        };
        rx.await.unwrap_or(ChannelAnswer::NoAnswer)
    }

    async fn wait_for(&self, within: Duration, mut ok: impl FnMut(&State) -> bool) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if ok(&self.state()) {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
}

impl HoldSite for FakeChannel {
    const NAME: &'static str = "the channel";

    fn wait_parked(
        &self,
        hold: &str,
        within: Duration,
    ) -> impl std::future::Future<Output = bool> + Send {
        let hold = hold.to_string();
        async move {
            self.wait_for(within, |st| {
                st.parked.get(&hold).is_some_and(|p| !p.is_empty())
            })
            .await
        }
    }

    fn wait_client_gone(
        &self,
        hold: &str,
        within: Duration,
    ) -> impl std::future::Future<Output = bool> + Send {
        let hold = hold.to_string();
        async move {
            self.wait_for(within, |st| {
                st.parked
                    .get(&hold)
                    .is_none_or(|p| p.iter().all(|x| x.waiter.is_closed()))
            })
            .await
        }
    }

    fn let_go(&self, hold: &str, action: ReleaseAction) -> usize {
        let mut st = self.state();
        let parked = st.parked.remove(hold).unwrap_or_default();
        let n = parked.len();
        for p in parked {
            match action {
                ReleaseAction::Reject { status } => {
                    st.ledger.refused += 1;
                    st.ledger.untaken.push(Untaken {
                        seq: p.seq,
                        id: p.message.id.clone(),
                        status: Some(status),
                    });
                    let _ = p.waiter.send(ChannelAnswer::Refused { status });
                }
                _ => {
                    let reply = if p.waiter.is_closed() {
                        Reply::SenderGone
                    } else {
                        Reply::Answered
                    };
                    st.ledger.taken.push(Taken {
                        seq: p.seq,
                        id: p.message.id.clone(),
                        deliver: p.message.deliver.clone(),
                        target: p.message.target.clone(),
                        digest: digest(&p.message.payload),
                        reply,
                    });
                    let _ = p.waiter.send(ChannelAnswer::Delivered);
                }
            }
        }
        n
    }

    // A let-go decides each parked delivery at once, under the lock.
    fn parked_seqs(&self, _hold: &str) -> Vec<u64> {
        Vec::new()
    }

    fn decided(&self, _seqs: &[u64]) -> bool {
        true
    }

    fn passed_by(&self, hold: &str) -> bool {
        let st = self.state();
        st.seq > 0
            && st.rules.iter().any(|r| {
                r.fired == 0 && matches!(&r.rule.fault, ChannelFault::Hold { name } if name == hold)
            })
    }

    fn disarm(&self, name: &str) -> usize {
        let mut st = self.state();
        let mut n = 0;
        for r in st.rules.iter_mut() {
            if r.fired == 0 && matches!(&r.rule.fault, ChannelFault::Hold { name: h } if h == name)
            {
                r.rule.times = 0;
                n += 1;
            }
        }
        n
    }
}

/// A delivery as the channel's HTTP route takes it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Posted {
    id: String,
    deliver: String,
    #[serde(default)]
    target: Option<String>,
    #[serde(default)]
    payload: serde_json::Value,
}

/// The channel over HTTP: `POST /v1/deliveries` with `{"id", "deliver", "target", "payload"}`
/// (the receipt id is the sender's, `workflow:<run_id>:<node_id>` for seed 002). A delivery is
/// answered `200 {"delivered": true, "id": …}`; a refusal, with its status and
/// `{"error": {"code": "refused", …}}`; a lost answer closes the connection with no reply. A
/// body that is not a delivery is `400` and delivers nothing.
pub fn router(channel: FakeChannel) -> axum::Router {
    use axum::body::Bytes;
    use axum::extract::State;
    use axum::http::StatusCode;
    use axum::response::{IntoResponse, Response};
    async fn post(State(c): State<FakeChannel>, req: axum::extract::Request) -> Response {
        let drop = req
            .extensions()
            .get::<fake_control::serve::DropConn>()
            .cloned();
        let body: Bytes = match axum::body::to_bytes(req.into_body(), 1 << 20).await {
            Ok(b) => b,
            Err(e) => return (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
        };
        let p: Posted = match serde_json::from_slice(&body) {
            Ok(p) => p,
            Err(e) => {
                let body = serde_json::json!({"error": {"code": "invalid_request", "message": e.to_string()}});
                return (StatusCode::BAD_REQUEST, axum::Json(body)).into_response();
            }
        };
        let id = p.id.clone();
        let answer = c
            .take(Message {
                id: p.id,
                deliver: p.deliver,
                target: p.target,
                payload: p.payload,
            })
            .await;
        match answer {
            ChannelAnswer::Delivered => {
                axum::Json(serde_json::json!({"delivered": true, "id": id})).into_response()
            }
            ChannelAnswer::Refused { status } => {
                let s = StatusCode::from_u16(status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
                let body = serde_json::json!({"error": {"code": "refused", "message": "the channel refused the delivery; nothing was delivered"}});
                (s, axum::Json(body)).into_response()
            }
            ChannelAnswer::NoAnswer => match drop {
                Some(d) => {
                    d.0.notify_one();
                    std::future::pending::<Response>().await
                }
                None => StatusCode::from_u16(599)
                    .unwrap_or(StatusCode::BAD_GATEWAY)
                    .into_response(),
            },
        }
    }
    axum::Router::new()
        .route("/v1/deliveries", axum::routing::post(post))
        .with_state(channel)
}

/// A channel served on a loopback port.
pub async fn start_channel() -> Result<super::Served<FakeChannel>, String> {
    let handle = FakeChannel::default();
    let app = router(handle.clone());
    let (l, url) = super::bind("the channel").await?;
    let task = tokio::spawn(async move {
        let _ = fake_control::serve::serve(l, app).await;
    });
    Ok(super::Served { url, handle, task })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn message(id: &str) -> Message {
        Message {
            id: id.into(),
            deliver: "channel".into(),
            target: Some("chat:x".into()),
            payload: json!({"a": 1}),
        }
    }

    /// Each fault does what it says to the ledger and to the answer: a refusal delivers nothing,
    /// a lost reply delivered, a held delivery is delivered when let go after its sender left.
    #[tokio::test]
    async fn the_ledger_is_what_was_delivered() {
        let c = FakeChannel::default();
        c.add_rule(ChannelRule {
            fault: ChannelFault::Refuse { status: 503 },
            nth: 1,
            times: 1,
        });
        c.add_rule(ChannelRule {
            fault: ChannelFault::LoseReply,
            nth: 2,
            times: 1,
        });
        c.add_rule(ChannelRule {
            fault: ChannelFault::Hold { name: "h".into() },
            nth: 3,
            times: 1,
        });
        assert_eq!(
            c.take(message("m1")).await,
            ChannelAnswer::Refused { status: 503 }
        );
        assert_eq!(c.take(message("m2")).await, ChannelAnswer::NoAnswer);
        let held = tokio::spawn({
            let c = c.clone();
            async move { c.take(message("m3")).await }
        });
        let h = crate::providers::holds::hold(&c, "h", Duration::from_secs(10));
        h.parked().await.expect("parked");
        held.abort();
        h.landed().await.expect("landed");
        assert_eq!(h.release(ReleaseAction::Proceed).await, Ok(1));
        assert_eq!(c.take(message("m4")).await, ChannelAnswer::Delivered);
        let l = c.ledger();
        assert_eq!(l.refused, 1);
        let got: Vec<_> = l.taken.iter().map(|t| (t.id.as_str(), t.reply)).collect();
        assert_eq!(
            got,
            [
                ("m2", Reply::Lost),
                ("m3", Reply::SenderGone),
                ("m4", Reply::Answered)
            ]
        );
        assert!(c.rules().iter().all(|r| r.fired == 1));
    }
}
