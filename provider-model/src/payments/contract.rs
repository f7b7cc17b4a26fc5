//! The HTTP contract a client needs to talk to fake-payments and to check what it is told:
//! the request digest, the response authentication tag, and its verification.
//!
//! - **Request digest**: `sha256:` + hex SHA-256 of RFC 8785 JSON `{"method", "path", "body"}`,
//!   where `path` is the path and query exactly as sent and `body` the request JSON (or `null`).
//! - **Tag**: every response carries `X-Fake-Signature: keyid=…; account=…; request-digest=…;
//!   sig=…`, an Ed25519 signature (base64) over RFC 8785 JSON `{"status", "account",
//!   "request_digest", "body"}`. `account` is `-` when the request was not authenticated.
//! - **Verification** ([`verify`]) checks the key id against the published key, the account
//!   and request digest against what the client sent, and the signature over the exact body.

use base64::Engine as _;
use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use serde_json::Value;
use sha2::{Digest as _, Sha256};

/// The response header carrying the tag.
pub const SIGNATURE_HEADER: &str = "x-fake-signature";

/// A native payment id's prefix, and the Stripe dialect's for the same payment (a payment
/// intent: the native id's hex after it).
pub const NATIVE_PAYMENT: &str = "pay_";
pub const STRIPE_INTENT: &str = "pi_";

/// The native payment id a reference names: a Stripe intent id is the same payment under the
/// dialect's prefix; anything else is itself.
pub fn native_payment_id(id: &str) -> String {
    match id.strip_prefix(STRIPE_INTENT) {
        Some(hex) => format!("{NATIVE_PAYMENT}{hex}"),
        None => id.to_string(),
    }
}

/// Why a response cannot be trusted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    #[error("response has no {SIGNATURE_HEADER} header")]
    Missing,
    #[error("malformed tag: {0}")]
    Malformed(String),
    #[error("body is not JSON, so it cannot be verified")]
    Undecodable,
    #[error("signed by key {got:?}, not the published key {want:?}")]
    UnknownKey { got: String, want: String },
    #[error("tag is for account {claimed:?}, not {expected:?}")]
    AccountMismatch { claimed: String, expected: String },
    #[error("tag is for request {claimed}, not {expected}")]
    RequestMismatch { claimed: String, expected: String },
    #[error("signature does not verify")]
    BadSignature,
}

fn sha256_hex(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

fn jcs(v: &Value) -> Vec<u8> {
    canonical(v)
}

/// RFC 8785 canonical bytes of a JSON value.
///
/// Values made only of null, booleans, integers, strings, arrays and objects (everything this
/// provider signs) are written directly: object keys sorted by UTF-16 code units, strings escaped
/// as serde_json escapes them (which is RFC 8785's escaping), integers in decimal. A value holding
/// a non-integer number goes through `serde_json_canonicalizer` for ECMAScript number formatting.
pub fn canonical(v: &Value) -> Vec<u8> {
    fn integers_only(v: &Value) -> bool {
        match v {
            // RFC 8785 writes numbers as IEEE doubles: only integers exactly representable
            // as one (|n| < 2^53) print as their decimal digits.
            Value::Number(n) => n
                .as_i64()
                .map(|i| i.unsigned_abs() < (1 << 53))
                .or_else(|| n.as_u64().map(|u| u < (1 << 53)))
                .unwrap_or(false),
            Value::Array(a) => a.iter().all(integers_only),
            Value::Object(o) => o.values().all(integers_only),
            _ => true,
        }
    }
    fn write(v: &Value, out: &mut Vec<u8>) {
        match v {
            Value::Object(o) => {
                let mut keys: Vec<&String> = o.keys().collect();
                keys.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
                out.push(b'{');
                for (i, k) in keys.into_iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    // Serialising a str into a Vec cannot fail.
                    let _ = serde_json::to_writer(&mut *out, k);
                    out.push(b':');
                    if let Some(x) = o.get(k) {
                        write(x, out);
                    }
                }
                out.push(b'}');
            }
            Value::Array(a) => {
                out.push(b'[');
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    write(x, out);
                }
                out.push(b']');
            }
            other => {
                let _ = serde_json::to_writer(&mut *out, other);
            }
        }
    }
    if integers_only(v) {
        let mut out = Vec::with_capacity(256);
        write(v, &mut out);
        out
    } else {
        // Finite numbers always canonicalise; fall back to plain serialisation rather than panic
        // (a mismatch then surfaces as a bad signature).
        serde_json_canonicalizer::to_vec(v).unwrap_or_else(|_| v.to_string().into_bytes())
    }
}

/// The request digest of a request (see the module docs).
pub fn request_digest(method: &str, path_and_query: &str, body: Option<&Value>) -> String {
    // RFC 8785 of {"body", "method", "path"}: keys already in canonical order.
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(b"{\"body\":");
    match body {
        Some(b) => out.extend_from_slice(&jcs(b)),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"method\":");
    push_str(&mut out, &method.to_ascii_uppercase());
    out.extend_from_slice(b",\"path\":");
    push_str(&mut out, path_and_query);
    out.push(b'}');
    sha256_hex(&out)
}

fn push_str(out: &mut Vec<u8>, s: &str) {
    // Serialising a str into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// The key id of a public key: `ed25519:` + the first 16 hex of SHA-256 of the key bytes.
pub fn key_id(public: &VerifyingKey) -> String {
    let h = Sha256::digest(public.as_bytes());
    format!("ed25519:{}", hex::encode(&h[..8]))
}

/// RFC 8785 of `{"account", "body", "request_digest", "status"}` (keys in canonical order), with
/// the body's canonical bytes spliced in.
fn message(status: u16, account: &str, request_digest: &str, body_canonical: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body_canonical.len() + 160);
    out.extend_from_slice(b"{\"account\":");
    push_str(&mut out, account);
    out.extend_from_slice(b",\"body\":");
    out.extend_from_slice(body_canonical);
    out.extend_from_slice(b",\"request_digest\":");
    push_str(&mut out, request_digest);
    out.extend_from_slice(format!(",\"status\":{status}}}").as_bytes());
    out
}

/// A parsed tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tag {
    pub key_id: String,
    pub account: String,
    pub request_digest: String,
    pub signature: Vec<u8>,
}

impl Tag {
    pub fn to_header(&self) -> String {
        format!(
            "keyid={}; account={}; request-digest={}; sig={}",
            self.key_id,
            self.account,
            self.request_digest,
            base64::engine::general_purpose::STANDARD.encode(&self.signature)
        )
    }

    pub fn parse(h: &str) -> Result<Tag, VerifyError> {
        let mut key_id = None;
        let mut account = None;
        let mut digest = None;
        let mut sig = None;
        for part in h.split(';') {
            let (k, v) = part
                .trim()
                .split_once('=')
                .ok_or_else(|| VerifyError::Malformed(format!("{part:?} is not key=value")))?;
            match k {
                "keyid" => key_id = Some(v.to_string()),
                "account" => account = Some(v.to_string()),
                "request-digest" => digest = Some(v.to_string()),
                "sig" => {
                    sig = Some(
                        base64::engine::general_purpose::STANDARD
                            .decode(v)
                            .map_err(|e| VerifyError::Malformed(format!("sig: {e}")))?,
                    )
                }
                other => return Err(VerifyError::Malformed(format!("unknown field {other:?}"))),
            }
        }
        let need =
            |x: Option<String>, n: &str| x.ok_or_else(|| VerifyError::Malformed(format!("no {n}")));
        Ok(Tag {
            key_id: need(key_id, "keyid")?,
            account: need(account, "account")?,
            request_digest: need(digest, "request-digest")?,
            signature: sig.ok_or_else(|| VerifyError::Malformed("no sig".into()))?,
        })
    }
}

/// Signs a response (server side).
pub fn sign(
    key: &SigningKey,
    key_id: &str,
    status: u16,
    account: &str,
    request_digest: &str,
    body: &Value,
) -> Tag {
    sign_canonical(
        key,
        key_id,
        status,
        account,
        request_digest,
        &canonical(body),
    )
}

/// Signs a response whose body's canonical bytes are already at hand (they are also what is sent).
pub fn sign_canonical(
    key: &SigningKey,
    key_id: &str,
    status: u16,
    account: &str,
    request_digest: &str,
    body_canonical: &[u8],
) -> Tag {
    let sig: Signature = key.sign(&message(status, account, request_digest, body_canonical));
    Tag {
        key_id: key_id.to_string(),
        account: account.to_string(),
        request_digest: request_digest.to_string(),
        signature: sig.to_bytes().to_vec(),
    }
}

/// Verifies a response a client received (client side): the tag must be by the published key,
/// for the client's own account and exact request, and the signature must cover the exact status
/// and body.
pub fn verify(
    public: &VerifyingKey,
    tag_header: Option<&str>,
    status: u16,
    body: &[u8],
    expected_account: &str,
    expected_request_digest: &str,
) -> Result<(), VerifyError> {
    let tag = Tag::parse(tag_header.ok_or(VerifyError::Missing)?)?;
    let want = key_id(public);
    if tag.key_id != want {
        return Err(VerifyError::UnknownKey {
            got: tag.key_id,
            want,
        });
    }
    if tag.account != expected_account {
        return Err(VerifyError::AccountMismatch {
            claimed: tag.account,
            expected: expected_account.to_string(),
        });
    }
    if tag.request_digest != expected_request_digest {
        return Err(VerifyError::RequestMismatch {
            claimed: tag.request_digest,
            expected: expected_request_digest.to_string(),
        });
    }
    let value: Value = serde_json::from_slice(body).map_err(|_| VerifyError::Undecodable)?;
    let bytes: [u8; 64] = tag
        .signature
        .as_slice()
        .try_into()
        .map_err(|_| VerifyError::Malformed("signature is not 64 bytes".into()))?;
    let sig = Signature::from_bytes(&bytes);
    public
        .verify(
            &message(
                status,
                &tag.account,
                &tag.request_digest,
                &canonical(&value),
            ),
            &sig,
        )
        .map_err(|_| VerifyError::BadSignature)
}

/// Parses the published key document (`GET /v1/provider-key`).
pub fn parse_public_key(doc: &Value) -> Result<VerifyingKey, VerifyError> {
    let b64 = doc["public_key"]
        .as_str()
        .ok_or_else(|| VerifyError::Malformed("public_key missing".into()))?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|e| VerifyError::Malformed(format!("public_key: {e}")))?;
    let arr: [u8; 32] = bytes
        .as_slice()
        .try_into()
        .map_err(|_| VerifyError::Malformed("public_key is not 32 bytes".into()))?;
    VerifyingKey::from_bytes(&arr).map_err(|e| VerifyError::Malformed(format!("public_key: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            any::<u32>().prop_map(|n| json!(n)),
            "\\PC{0,12}".prop_map(Value::String),
            "[\\x00-\\x1f\"\\\\/é€😀a-z]{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                prop::collection::btree_map("[a-zA-Z_é😀\\x00-\\x1f]{0,6}", inner, 0..5)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]
        #[test]
        fn canonical_matches_the_rfc8785_reference(v in json_value()) {
            let reference = serde_json_canonicalizer::to_vec(&v).expect("reference");
            let ours = canonical(&v);
            prop_assert_eq!(String::from_utf8_lossy(&ours), String::from_utf8_lossy(&reference));
        }
    }

    #[test]
    fn floats_and_unsafe_integers_take_the_reference_path() {
        assert_eq!(
            canonical(&json!([9007199254740993u64])),
            b"[9007199254740992]".to_vec()
        );
        let v = json!({"b": 1e21, "a": 0.5});
        assert_eq!(canonical(&v), b"{\"a\":0.5,\"b\":1e+21}".to_vec());
    }
}
