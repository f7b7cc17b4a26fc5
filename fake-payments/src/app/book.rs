//! The book: the ground truth (requests, effects, payments, idempotency keys) kept at the cost of
//! its facts. A load test fills a ledger with hundreds of thousands of requests, so a record holds
//! ids and digests as bytes, names (accounts, credentials, currencies, statuses, fault labels) as
//! one shared copy each, short strings inline, and refers to the request it came from instead of
//! copying its digest, key and reply. The ledger a reader gets ([`Book::ledger`]) is rendered
//! from it and says exactly what the uncompacted records said.

use crate::faults::Op;
use crate::ledger::{Effect, EffectKind, Ledger, Reply, RequestRecord};
use std::collections::{HashMap, HashSet};

/// A string of up to 22 bytes kept inline (idempotency keys, descriptions), longer ones boxed.
#[derive(Clone)]
pub(super) enum Small {
    Inline { len: u8, buf: [u8; 22] },
    Heap(Box<str>),
}

impl Small {
    pub(super) fn new(s: &str) -> Self {
        if s.len() <= 22 {
            let mut buf = [0u8; 22];
            buf[..s.len()].copy_from_slice(s.as_bytes());
            Small::Inline {
                len: s.len() as u8,
                buf,
            }
        } else {
            Small::Heap(s.into())
        }
    }
    pub(super) fn as_str(&self) -> &str {
        match self {
            // Always whole UTF-8: copied from a `&str` of exactly `len` bytes.
            Small::Inline { len, buf } => std::str::from_utf8(&buf[..*len as usize]).unwrap_or(""),
            Small::Heap(s) => s,
        }
    }
}

impl PartialEq for Small {
    fn eq(&self, o: &Self) -> bool {
        self.as_str() == o.as_str()
    }
}
impl Eq for Small {}
impl std::hash::Hash for Small {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.as_str().hash(h)
    }
}
impl std::fmt::Debug for Small {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.as_str().fmt(f)
    }
}

/// A request digest, `sha256:` and 64 lowercase hex digits, as its 32 bytes; `None` for any
/// other text (kept aside by the book, see [`Book::odd_digests`]).
pub(super) fn digest32(s: &str) -> Option<[u8; 32]> {
    let h = s.strip_prefix("sha256:")?;
    if h.len() != 64 || h.bytes().any(|b| b.is_ascii_uppercase()) {
        return None;
    }
    let mut out = [0u8; 32];
    hex::decode_to_slice(h, &mut out).ok()?;
    Some(out)
}

/// An id the fake mints, `<prefix><32 lowercase hex>` (a UUID v7 in simple form), as its 16
/// bytes. Byte order is the text's order, so a map keyed by it lists ids in text order.
pub(super) type Id16 = [u8; 16];

pub(super) fn id16(prefix: &str, s: &str) -> Option<Id16> {
    let h = s.strip_prefix(prefix)?;
    if h.len() != 32 || h.bytes().any(|b| b.is_ascii_uppercase()) {
        return None;
    }
    let mut out = [0u8; 16];
    hex::decode_to_slice(h, &mut out).ok()?;
    Some(out)
}

pub(super) fn id_text(prefix: &str, id: &Id16) -> String {
    format!("{prefix}{}", hex::encode(id))
}

pub(super) const PAY: &str = "pay_";
pub(super) const REFUND: &str = "re_";

/// The payment ids a reply named.
#[derive(Clone, Debug, Default)]
pub(super) enum Refs {
    #[default]
    None,
    One(Id16),
    Many(Box<[Box<str>]>),
}

impl Refs {
    pub(super) fn of(ids: Vec<String>) -> Refs {
        match ids.as_slice() {
            [] => Refs::None,
            [one] => match id16(PAY, one) {
                Some(b) => Refs::One(b),
                None => Refs::Many(vec![one.as_str().into()].into_boxed_slice()),
            },
            _ => Refs::Many(ids.into_iter().map(String::into_boxed_str).collect()),
        }
    }
    fn render(&self) -> Vec<String> {
        match self {
            Refs::None => Vec::new(),
            Refs::One(b) => vec![id_text(PAY, b)],
            Refs::Many(v) => v.iter().map(|s| s.to_string()).collect(),
        }
    }
}

/// One request, as recorded (see [`RequestRecord`]); its seq is its position plus one.
#[derive(Clone, Debug)]
pub(super) struct Rec {
    pub(super) op: Op,
    pub(super) reply: Reply,
    pub(super) status: u16,
    pub(super) replayed: bool,
    pub(super) effect: bool,
    pub(super) revoked: bool,
    pub(super) account: Name,
    pub(super) credential: Name,
    pub(super) fault: Name,
    pub(super) digest: [u8; 32],
    pub(super) key: Option<Small>,
    pub(super) payment: Option<Box<str>>,
    pub(super) lookup_key: Option<Box<str>>,
    pub(super) refs: Refs,
    /// The client's `User-Agent` and `Stripe-Version` (`Name::NONE` when absent).
    pub(super) agent: Name,
    pub(super) version: Name,
    /// Spoken in the Stripe dialect.
    pub(super) stripe: bool,
    /// When it was received (wall clock, ms since the Unix epoch): for a story told in time,
    /// never part of the ground truth's digest.
    pub(super) received_ms: u64,
}

/// One effect (see [`Effect`]); its seq is its position plus one. Its account and currency are
/// its payment's, its digest, key and reply its request's.
#[derive(Clone, Debug)]
pub(super) struct Eff {
    pub(super) kind: EffectKind,
    pub(super) status: Name,
    pub(super) fault: Name,
    /// The index of the request that caused it.
    pub(super) req: u32,
    pub(super) payment: Id16,
    pub(super) refund: Option<Id16>,
    pub(super) amount: i64,
    /// When it happened (wall clock, ms since the Unix epoch).
    pub(super) at_ms: u64,
}

/// A payment. Its digest and idempotency key are those of the request that created it.
#[derive(Clone, Debug)]
pub(super) struct Payment {
    pub(super) account: Name,
    pub(super) currency: Name,
    pub(super) status: Name,
    /// The status it was created with (what its creation's reply showed).
    pub(super) first_status: Name,
    /// The index of the request that created it.
    pub(super) req: u32,
    pub(super) amount: i64,
    pub(super) amount_captured: i64,
    pub(super) amount_refunded: i64,
    pub(super) created_ms: u64,
    pub(super) description: Option<Small>,
    /// Sorted by key, as the request's object had them (empty: no allocation).
    pub(super) metadata: Box<[(Box<str>, Box<str>)]>,
}

/// A saved response for idempotent replays.
#[derive(Clone, Debug)]
pub(super) enum Saved {
    /// A creation's reply: the payment as it was created, rendered again on replay (a declined
    /// one wrapped in the decline error, as the first reply was).
    Created(Id16),
    /// Any other reply, as its canonical JSON.
    Bytes(Box<[u8]>),
}

/// An idempotency key's state: the request that first used it, when, and its saved status and
/// reply once done.
#[derive(Clone, Debug)]
pub(super) struct Slot {
    pub(super) req: u32,
    pub(super) at_ms: u64,
    pub(super) done: Option<(u16, Saved)>,
}

/// A name (account, credential label, currency, status, fault label) as its number in
/// [`Names`]; [`Name::NONE`] for none.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct Name(u32);

impl Name {
    pub(super) const NONE: Name = Name(u32::MAX);
}

/// One copy of every name, numbered.
#[derive(Default, Debug)]
pub(super) struct Names {
    all: Vec<Box<str>>,
    index: HashMap<Box<str>, Name>,
}

impl Names {
    pub(super) fn get(&mut self, s: &str) -> Name {
        if let Some(n) = self.index.get(s) {
            return *n;
        }
        let n = Name(self.all.len() as u32);
        self.all.push(s.into());
        self.index.insert(s.into(), n);
        n
    }
    pub(super) fn opt(&mut self, s: Option<&str>) -> Name {
        s.map_or(Name::NONE, |s| self.get(s))
    }
    /// The name's text; `""` for [`Name::NONE`].
    pub(super) fn str(&self, n: Name) -> &str {
        self.all.get(n.0 as usize).map_or("", |s| s)
    }
    pub(super) fn text(&self, n: Name) -> Option<String> {
        (n != Name::NONE).then(|| self.str(n).to_string())
    }
}

/// The payments by id, in id order: a sorted vector (ids are minted in increasing order, so an
/// insertion is a push), 16 bytes of key beside each payment and no per-node overhead.
#[derive(Default, Debug)]
pub(super) struct Payments(Vec<(Id16, Payment)>);

impl Payments {
    fn at(&self, id: &Id16) -> Result<usize, usize> {
        self.0.binary_search_by(|(k, _)| k.cmp(id))
    }
    pub(super) fn get(&self, id: &Id16) -> Option<&Payment> {
        self.at(id).ok().map(|i| &self.0[i].1)
    }
    pub(super) fn get_mut(&mut self, id: &Id16) -> Option<&mut Payment> {
        self.at(id).ok().map(|i| &mut self.0[i].1)
    }
    pub(super) fn contains_key(&self, id: &Id16) -> bool {
        self.at(id).is_ok()
    }
    pub(super) fn insert(&mut self, id: Id16, p: Payment) {
        match self.0.last() {
            Some((last, _)) if *last >= id => match self.at(&id) {
                Ok(i) => self.0[i].1 = p,
                Err(i) => self.0.insert(i, (id, p)),
            },
            _ => self.0.push((id, p)),
        }
    }
    pub(super) fn iter(&self) -> impl DoubleEndedIterator<Item = (&Id16, &Payment)> {
        self.0.iter().map(|(k, v)| (k, v))
    }
    pub(super) fn keys(&self) -> impl Iterator<Item = &Id16> {
        self.0.iter().map(|(k, _)| k)
    }
}

/// The whole ground truth.
#[derive(Default, Debug)]
pub(super) struct Book {
    pub(super) requests: Vec<Rec>,
    pub(super) effects: Vec<Eff>,
    pub(super) payments: Payments,
    pub(super) idem: HashMap<(Name, Small), Slot>,
    pub(super) expired: HashSet<Id16>,
    pub(super) names: Names,
    /// Request index → a request digest not of the `sha256:` form (never made by this fake's
    /// own digest rule; kept so that the ledger says exactly what was recorded).
    pub(super) odd_digests: HashMap<u32, Box<str>>,
    /// What the Stripe dialect knows of a payment intent beyond the payment: its payment method
    /// and capture method, and an intent not yet confirmed (no payment exists for it yet).
    pub(super) intents: HashMap<Id16, super::stripe::Intent>,
}

/// Records reserved ahead at most (a cap above it grows the vectors as they fill).
const RESERVE_AT_MOST: usize = 1 << 20;

impl Book {
    /// An empty book with room for `cap` requests reserved (address space only: a page is
    /// resident once a record is written to it; the key table touches one byte per slot), so
    /// that filling it never copies the records nor holds two tables at once.
    pub(super) fn with_cap(cap: usize) -> Self {
        let n = cap.min(RESERVE_AT_MOST);
        Book {
            requests: Vec::with_capacity(n),
            effects: Vec::with_capacity(n),
            payments: Payments(Vec::with_capacity(n)),
            idem: HashMap::with_capacity(n),
            ..Book::default()
        }
    }

    pub(super) fn rec(&self, seq: u64) -> Option<&Rec> {
        seq.checked_sub(1)
            .and_then(|i| self.requests.get(usize::try_from(i).ok()?))
    }
    pub(super) fn rec_mut(&mut self, seq: u64) -> Option<&mut Rec> {
        seq.checked_sub(1)
            .and_then(|i| self.requests.get_mut(usize::try_from(i).ok()?))
    }

    /// Records a request digest for the request at `req`: its bytes, or the text aside.
    pub(super) fn digest_for(&mut self, req: u32, text: &str) -> [u8; 32] {
        match digest32(text) {
            Some(b) => b,
            None => {
                self.odd_digests.insert(req, text.into());
                [0u8; 32]
            }
        }
    }
    /// The digest of the request at `req`, as text.
    pub(super) fn digest_of(&self, req: u32) -> Option<String> {
        if let Some(t) = self.odd_digests.get(&req) {
            return Some(t.to_string());
        }
        let r = self.requests.get(req as usize)?;
        Some(format!("sha256:{}", hex::encode(r.digest)))
    }
    /// Whether the request at `req` had digest `text`.
    pub(super) fn same_digest(&self, req: u32, text: &str) -> bool {
        match (self.odd_digests.get(&req), digest32(text)) {
            (Some(t), _) => &**t == text,
            (None, Some(b)) => self
                .requests
                .get(req as usize)
                .is_some_and(|r| r.digest == b),
            (None, None) => false,
        }
    }
    /// The idempotency key of the request at `req`.
    pub(super) fn key_of(&self, req: u32) -> Option<&str> {
        self.requests
            .get(req as usize)
            .and_then(|r| r.key.as_ref())
            .map(Small::as_str)
    }

    /// A payment's body as the API returns it, with its mutable fields as given.
    pub(super) fn payment_json_with(
        &self,
        id: &Id16,
        p: &Payment,
        status: Name,
        captured: i64,
        refunded: i64,
    ) -> serde_json::Value {
        let metadata: serde_json::Map<String, serde_json::Value> = p
            .metadata
            .iter()
            .map(|(k, v)| (k.to_string(), serde_json::Value::from(&**v)))
            .collect();
        serde_json::json!({
            "object": "payment",
            "id": id_text(PAY, id),
            "account": self.names.str(p.account),
            "environment": crate::profile::ENVIRONMENT,
            "amount": p.amount,
            "amount_captured": captured,
            "amount_refunded": refunded,
            "currency": self.names.str(p.currency),
            "description": p.description.as_ref().map(Small::as_str),
            "metadata": metadata,
            "status": self.names.str(status),
            "created": p.created_ms / 1000,
            "request_digest": self.digest_of(p.req),
            "idempotency_key": self.key_of(p.req),
        })
    }

    /// A payment's body as it is now.
    pub(super) fn payment_json(&self, id: &Id16, p: &Payment) -> serde_json::Value {
        self.payment_json_with(id, p, p.status, p.amount_captured, p.amount_refunded)
    }

    /// A payment's body as its creation's reply showed it.
    pub(super) fn created_json(&self, id: &Id16, p: &Payment) -> serde_json::Value {
        let captured = if self.names.str(p.first_status) == "succeeded" {
            p.amount
        } else {
            0
        };
        self.payment_json_with(id, p, p.first_status, captured, 0)
    }

    /// The ledger as the control API and the checkers read it.
    pub(super) fn ledger(&self) -> Ledger {
        let requests = self
            .requests
            .iter()
            .enumerate()
            .map(|(i, r)| RequestRecord {
                seq: i as u64 + 1,
                op: r.op,
                account: self.names.text(r.account),
                idempotency_key: r.key.as_ref().map(|k| k.as_str().to_string()),
                request_digest: self.digest_of(i as u32).unwrap_or_default(),
                payment_id: r.payment.as_deref().map(str::to_string),
                lookup_key: r.lookup_key.as_deref().map(str::to_string),
                fault: self.names.text(r.fault),
                refs: r.refs.render(),
                status: r.status,
                replayed: r.replayed,
                effect: r.effect,
                reply: r.reply,
                credential: self.names.str(r.credential).to_string(),
                revoked: r.revoked,
                user_agent: self.names.text(r.agent),
                stripe_version: self.names.text(r.version),
                dialect: r.stripe.then(|| "stripe".to_string()),
                received_ms: Some(r.received_ms),
            })
            .collect();
        let effects = self
            .effects
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let rec = self.requests.get(e.req as usize);
                let pay = self.payments.get(&e.payment);
                Effect {
                    seq: i as u64 + 1,
                    kind: e.kind,
                    account: pay
                        .map(|p| self.names.str(p.account).to_string())
                        .unwrap_or_default(),
                    payment_id: id_text(PAY, &e.payment),
                    refund_id: e.refund.as_ref().map(|r| id_text(REFUND, r)),
                    amount: e.amount,
                    currency: pay
                        .map(|p| self.names.str(p.currency).to_string())
                        .unwrap_or_default(),
                    status: self.names.str(e.status).to_string(),
                    request_digest: self.digest_of(e.req).unwrap_or_default(),
                    idempotency_key: rec
                        .and_then(|r| r.key.as_ref())
                        .map(|k| k.as_str().to_string()),
                    fault: self.names.text(e.fault),
                    request_seq: e.req as u64 + 1,
                    reply: rec.map_or(Reply::Pending, |r| r.reply),
                    at_ms: Some(e.at_ms),
                }
            })
            .collect();
        Ledger { effects, requests }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_forms_say_what_the_text_said() {
        for s in [
            "",
            "w1-1",
            "exactly-twenty-two-by",
            "a key longer than twenty-two bytes",
            "é✓",
        ] {
            assert_eq!(Small::new(s).as_str(), s);
        }
        let d = format!("sha256:{}", "ab".repeat(32));
        assert_eq!(digest32(&d), Some([0xab; 32]));
        for odd in [
            "sha256:AB",
            "md5:00",
            &format!("sha256:{}", "AB".repeat(32)),
        ] {
            assert_eq!(digest32(odd), None, "{odd}");
        }
        let mut names = Names::default();
        let a = names.get("acct_a");
        assert_eq!(names.get("acct_a"), a);
        assert_ne!(names.get("acct_b"), a);
        assert_eq!(names.str(a), "acct_a");
        assert_eq!(names.text(Name::NONE), None);
        let id = format!("pay_{}", uuid::Uuid::now_v7().simple());
        let b = id16(PAY, &id).expect("minted id");
        assert_eq!(id_text(PAY, &b), id);
        assert_eq!(id16(PAY, "pay_nonexistent"), None);
        assert_eq!(id16(PAY, &id.to_uppercase()), None);
        let later = format!("pay_{}", uuid::Uuid::now_v7().simple());
        let pay = |req| Payment {
            account: Name::NONE,
            currency: Name::NONE,
            status: Name::NONE,
            first_status: Name::NONE,
            req,
            amount: 0,
            amount_captured: 0,
            amount_refunded: 0,
            created_ms: 0,
            description: None,
            metadata: Box::default(),
        };
        let mut ps = Payments::default();
        for (i, k) in [[3u8; 16], [1; 16], [2; 16], [9; 16], [2; 16]]
            .into_iter()
            .enumerate()
        {
            ps.insert(k, pay(i as u32));
        }
        let keys: Vec<u8> = ps.keys().map(|k| k[0]).collect();
        assert_eq!(keys, vec![1, 2, 3, 9], "in id order, one per id");
        assert_eq!(
            ps.get(&[2; 16]).map(|p| p.req),
            Some(4),
            "the later insert replaces"
        );
        assert!(ps.contains_key(&[9; 16]) && !ps.contains_key(&[4; 16]));
        let c = id16(PAY, &later).expect("minted id");
        assert_eq!(b.cmp(&c), id.cmp(&later), "byte order is text order");
        assert_eq!(Refs::of(vec![id.clone()]).render(), vec![id.clone()]);
        assert_eq!(Refs::of(vec!["x".into()]).render(), vec!["x".to_string()]);
        assert_eq!(
            Refs::of(vec![id.clone(), later.clone()]).render(),
            vec![id, later]
        );
    }
}
