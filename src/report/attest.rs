//! Signed evidence: an in-toto Statement (subject = the report's SHA-256, predicate = the report)
//! in a DSSE envelope, signed with Ed25519 over the DSSE pre-authentication encoding of the exact
//! canonical payload bytes. Verification rejects any changed byte.

use base64::Engine as _;
use ed25519_dalek::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey};
use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

pub const PAYLOAD_TYPE: &str = "application/vnd.in-toto+json";
pub const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";
pub const PREDICATE_TYPE: &str = "https://aocheck.dev/conformance-report/v1";
/// The predicate of a signed `explore.json` (`aocheck explore --sign`, `aocheck merge --sign`).
pub const EXPLORE_PREDICATE_TYPE: &str = "https://aocheck.dev/explore-report/v1";

#[derive(Debug, thiserror::Error)]
pub enum AttestError {
    #[error("key: {0}")]
    Key(String),
    #[error("envelope: {0}")]
    Envelope(String),
    #[error("signature does not verify")]
    BadSignature,
    #[error("the statement's subject digest does not match the report it carries")]
    SubjectMismatch,
    #[error(transparent)]
    Canonical(#[from] crate::digest::CanonicalError),
}

/// The DSSE envelope. Unknown members are ignored on the way in, as the DSSE specification asks
/// of consumers; `keyid` is an unauthenticated hint and never filters keys.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Envelope {
    pub payload: String,
    pub payload_type: String,
    pub signatures: Vec<EnvelopeSignature>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvelopeSignature {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keyid: Option<String>,
    pub sig: String,
}

/// DSSE v1 pre-authentication encoding.
pub fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "DSSEv1 {} {} {} ",
        payload_type.len(),
        payload_type,
        payload.len()
    )
    .into_bytes();
    out.extend_from_slice(payload);
    out
}

/// A fresh key pair as PEM (PKCS#8 private, SPKI public).
pub fn keygen() -> Result<(String, String), AttestError> {
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(|e| AttestError::Key(format!("no entropy: {e}")))?;
    let key = SigningKey::from_bytes(&seed);
    let private = key
        .to_pkcs8_pem(Default::default())
        .map_err(|e| AttestError::Key(e.to_string()))?;
    let public = key
        .verifying_key()
        .to_public_key_pem(Default::default())
        .map_err(|e| AttestError::Key(e.to_string()))?;
    Ok((private.to_string(), public))
}

pub fn signing_key(pem: &str) -> Result<SigningKey, AttestError> {
    SigningKey::from_pkcs8_pem(pem)
        .map_err(|e| AttestError::Key(format!("not an Ed25519 PKCS#8 private key: {e}")))
}

pub fn verifying_key(pem: &str) -> Result<VerifyingKey, AttestError> {
    VerifyingKey::from_public_key_pem(pem)
        .map_err(|e| AttestError::Key(format!("not an Ed25519 public key: {e}")))
}

/// `ed25519:` + the first 16 hex of SHA-256 of the public key.
pub fn key_id(k: &VerifyingKey) -> String {
    format!(
        "ed25519:{}",
        &crate::digest::Digest::of_bytes(k.as_bytes()).hex()[..16]
    )
}

/// The statement for a report (as JSON): subject = `report.json` with the SHA-256 of the report's
/// canonical bytes.
pub fn statement(report: &Value) -> Result<Value, AttestError> {
    statement_of("report.json", PREDICATE_TYPE, report)
}

/// The statement for a report written as the file `name`, of the predicate type given.
pub fn statement_of(
    name: &str,
    predicate_type: &str,
    report: &Value,
) -> Result<Value, AttestError> {
    let digest = crate::digest::digest_of(report)?;
    Ok(json!({
        "_type": STATEMENT_TYPE,
        "subject": [{"name": name, "digest": {"sha256": digest.hex()}}],
        "predicateType": predicate_type,
        "predicate": report,
    }))
}

/// Signs a report into an envelope.
pub fn sign(report: &Value, key: &SigningKey) -> Result<Envelope, AttestError> {
    sign_statement(&statement(report)?, key)
}

/// Signs a statement (see [`statement_of`]) into an envelope.
pub fn sign_statement(statement: &Value, key: &SigningKey) -> Result<Envelope, AttestError> {
    let payload = crate::digest::canonical_bytes(statement)?;
    let sig: Signature = key.sign(&pae(PAYLOAD_TYPE, &payload));
    let b64 = base64::engine::general_purpose::STANDARD;
    Ok(Envelope {
        payload: b64.encode(&payload),
        payload_type: PAYLOAD_TYPE.into(),
        signatures: vec![EnvelopeSignature {
            keyid: Some(key_id(&key.verifying_key())),
            sig: b64.encode(sig.to_bytes()),
        }],
    })
}

/// An envelope's parts: the envelope and its decoded payload (nothing verified yet).
fn open(envelope_bytes: &[u8]) -> Result<(Envelope, Vec<u8>), AttestError> {
    let env: Envelope =
        serde_json::from_slice(envelope_bytes).map_err(|e| AttestError::Envelope(e.to_string()))?;
    if env.payload_type != PAYLOAD_TYPE {
        return Err(AttestError::Envelope(format!(
            "payloadType {:?} is not {PAYLOAD_TYPE}",
            env.payload_type
        )));
    }
    let payload = base64::engine::general_purpose::STANDARD
        .decode(&env.payload)
        .map_err(|e| AttestError::Envelope(format!("payload: {e}")))?;
    Ok((env, payload))
}

/// The report an envelope carries, its signature **not** checked (a reader with no key; say so
/// wherever it is shown).
pub fn unverified_report(envelope_bytes: &[u8]) -> Result<Value, AttestError> {
    let (_, payload) = open(envelope_bytes)?;
    let st: Value = serde_json::from_slice(&payload)
        .map_err(|e| AttestError::Envelope(format!("statement: {e}")))?;
    Ok(st["predicate"].clone())
}

/// Verifies an envelope's exact bytes with a public key; returns the report it carries.
pub fn verify(envelope_bytes: &[u8], key: &VerifyingKey) -> Result<Value, AttestError> {
    let (env, payload) = open(envelope_bytes)?;
    let b64 = base64::engine::general_purpose::STANDARD;
    let msg = pae(&env.payload_type, &payload);
    let ok = env.signatures.iter().any(|s| {
        b64.decode(&s.sig)
            .ok()
            .and_then(|b| <[u8; 64]>::try_from(b.as_slice()).ok())
            .is_some_and(|b| key.verify(&msg, &Signature::from_bytes(&b)).is_ok())
    });
    if !ok {
        return Err(AttestError::BadSignature);
    }
    let st: Value = serde_json::from_slice(&payload)
        .map_err(|e| AttestError::Envelope(format!("statement: {e}")))?;
    let report = st["predicate"].clone();
    let want = crate::digest::digest_of(&report)?.hex();
    if st["subject"][0]["digest"]["sha256"].as_str() != Some(want.as_str())
        || st["_type"] != STATEMENT_TYPE
    {
        return Err(AttestError::SubjectMismatch);
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pae_matches_the_dsse_specification() {
        // The DSSE v1 specification's worked example.
        assert_eq!(
            pae("http://example.com/HelloWorld", b"hello world"),
            b"DSSEv1 29 http://example.com/HelloWorld 11 hello world".to_vec()
        );
    }

    #[test]
    fn sign_verify_and_any_changed_byte_is_rejected() {
        let (private, public) = keygen().expect("keygen");
        let key = signing_key(&private).expect("private");
        let vk = verifying_key(&public).expect("public");
        let report = json!({"schema": "aocheck.report/1", "cases": [{"id": "AOC-CASE-001", "verdict": "pass"}]});
        let env = sign(&report, &key).expect("sign");
        let bytes = serde_json::to_vec(&env).expect("json");
        assert_eq!(verify(&bytes, &vk).expect("verifies"), report);
        // Flip every byte of the payload's base64 in turn (a sample of positions).
        let text = String::from_utf8(bytes.clone()).expect("utf8");
        let start = text.find("\"payload\":\"").expect("payload") + 11;
        for i in (start..start + 40).step_by(7) {
            let mut b = bytes.clone();
            b[i] = if b[i] == b'A' { b'B' } else { b'A' };
            assert!(verify(&b, &vk).is_err(), "byte {i} changed but verified");
        }
        let (_, other) = keygen().expect("keygen");
        assert!(matches!(
            verify(&bytes, &verifying_key(&other).expect("pk")),
            Err(AttestError::BadSignature)
        ));
    }
}
