//! Signed evidence: an in-toto Statement (subject = the report's SHA-256, predicate = the report)
//! in a DSSE envelope, signed with Ed25519 over the DSSE pre-authentication encoding of the exact
//! canonical payload bytes. Verification rejects any changed byte.

use base64::Engine as _;
use ed25519_dalek::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePublicKey};
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

/// The DER of an RFC 8410 Ed25519 private key in PKCS#8 v1 (`OneAsymmetricKey` version 0, no
/// public key): what `openssl genpkey -algorithm ed25519` writes and every reader takes, the
/// 32-byte seed after this fixed prefix.
const PKCS8_V1_PREFIX: [u8; 16] = [
    0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20,
];

/// A private key as standard PKCS#8 v1 PEM (see [`PKCS8_V1_PREFIX`]).
pub fn private_pem(key: &SigningKey) -> String {
    let mut der = PKCS8_V1_PREFIX.to_vec();
    der.extend_from_slice(&key.to_bytes());
    format!(
        "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
        base64::engine::general_purpose::STANDARD.encode(&der)
    )
}

/// A fresh key pair as PEM (PKCS#8 v1 private, SPKI public).
pub fn keygen() -> Result<(String, String), AttestError> {
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(|e| AttestError::Key(format!("no entropy: {e}")))?;
    let key = SigningKey::from_bytes(&seed);
    let private = private_pem(&key);
    let public = key
        .verifying_key()
        .to_public_key_pem(Default::default())
        .map_err(|e| AttestError::Key(e.to_string()))?;
    Ok((private, public))
}

pub fn signing_key(pem: &str) -> Result<SigningKey, AttestError> {
    SigningKey::from_pkcs8_pem(pem)
        .map_err(|e| AttestError::Key(format!("not an Ed25519 PKCS#8 private key: {e}")))
}

pub fn verifying_key(pem: &str) -> Result<VerifyingKey, AttestError> {
    VerifyingKey::from_public_key_pem(pem)
        .map_err(|e| AttestError::Key(format!("not an Ed25519 public key: {e}")))
}

/// The key id put in every envelope: `sha256:` and the SHA-256 of the public key's SPKI DER, as
/// anyone re-derives it (`openssl pkey -pubin -in KEY.pub -outform DER | sha256sum`). A hint
/// only: `verify` never chooses a key by it.
pub fn key_id(k: &VerifyingKey) -> String {
    match k.to_public_key_der() {
        Ok(der) => format!(
            "sha256:{}",
            crate::digest::Digest::of_bytes(der.as_bytes()).hex()
        ),
        Err(_) => format!(
            "sha256:{}",
            crate::digest::Digest::of_bytes(k.as_bytes()).hex()
        ),
    }
}

/// The statement for a report (as JSON): subject = `report.json` with the SHA-256 of the report's
/// canonical bytes (the form of one JSON value signed alone; runs sign their folder, see
/// [`run_statement`]).
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

/// Signs a statement into an envelope.
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

/// A JSON value parsed with every object's members unique: a duplicate member is an error, not
/// "the last one wins" (two readers of one envelope must not see two statements).
#[derive(Debug)]
struct Strict(Value);

impl<'de> Deserialize<'de> for Strict {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrictVisitor).map(Strict)
    }
}

struct StrictVisitor;

impl<'de> serde::de::Visitor<'de> for StrictVisitor {
    type Value = Value;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(Strict(v)) = seq.next_element()? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = serde_json::Map::new();
        while let Some(k) = map.next_key::<String>()? {
            if out.contains_key(&k) {
                return Err(serde::de::Error::custom(format!("duplicate member {k:?}")));
            }
            let Strict(v) = map.next_value()?;
            out.insert(k, v);
        }
        Ok(Value::Object(out))
    }
}

/// JSON text parsed strictly (duplicate members refused).
pub fn parse_strict(bytes: &[u8]) -> Result<Value, String> {
    serde_json::from_slice::<Strict>(bytes)
        .map(|s| s.0)
        .map_err(|e| e.to_string())
}

/// An envelope's parts: the envelope and its decoded payload (nothing verified yet). Both the
/// envelope and the statement must be JSON with unique members.
fn open(envelope_bytes: &[u8]) -> Result<(Envelope, Vec<u8>), AttestError> {
    let v = parse_strict(envelope_bytes).map_err(AttestError::Envelope)?;
    let env: Envelope =
        serde_json::from_value(v).map_err(|e| AttestError::Envelope(e.to_string()))?;
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

/// Verifies an envelope's exact bytes with a public key and returns the statement it carries
/// (`_type` checked; the predicate type is the caller's to check).
pub fn verify_statement(envelope_bytes: &[u8], key: &VerifyingKey) -> Result<Value, AttestError> {
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
    let st =
        parse_strict(&payload).map_err(|e| AttestError::Envelope(format!("statement: {e}")))?;
    if st["_type"] != STATEMENT_TYPE {
        return Err(AttestError::Envelope(format!(
            "_type {} is not {STATEMENT_TYPE}",
            st["_type"]
        )));
    }
    Ok(st)
}

/// Verifies an envelope that signs one JSON value alone (subject = that value's canonical
/// digest); returns the value.
pub fn verify(envelope_bytes: &[u8], key: &VerifyingKey) -> Result<Value, AttestError> {
    let st = verify_statement(envelope_bytes, key)?;
    let report = st["predicate"].clone();
    let want = crate::digest::digest_of(&report)?.hex();
    if st["subject"][0]["digest"]["sha256"].as_str() != Some(want.as_str()) {
        return Err(AttestError::SubjectMismatch);
    }
    Ok(report)
}

/// The predicate of a signed run folder (`aocheck run --sign`): see `docs/attestation.md`.
pub const RUN_PREDICATE_TYPE: &str = "https://aocheck.dev/conformance-run/v1";
/// The predicate of a signed exploration folder (`aocheck explore --sign`, `aocheck merge --sign`).
pub const EXPLORE_RUN_PREDICATE_TYPE: &str = "https://aocheck.dev/explore-run/v1";
/// Where a signed folder keeps its public key (a convenience copy: verify with a key you hold).
pub const PUBLIC_KEY_FILE: &str = "signing-key.pub.pem";
/// The envelopes aocheck writes at the top of a folder.
pub const ENVELOPE_FILES: [&str; 2] = ["report.dsse.json", "explore.dsse.json"];
/// Files at the top of a folder that are not subjects: the envelopes, the key copy, the lock.
const NOT_SUBJECTS: [&str; 4] = [
    "report.dsse.json",
    "explore.dsse.json",
    PUBLIC_KEY_FILE,
    ".aocheck.lock",
];

/// One file of a signed folder: its path below the folder (`/`-separated) and SHA-256.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subject {
    pub name: String,
    pub sha256: String,
}

/// Every regular file below `dir` (the subjects of its statement), sorted by name, with its
/// SHA-256.
pub fn subjects_of(dir: &std::path::Path) -> Result<Vec<Subject>, String> {
    files_of(dir)?
        .into_iter()
        .map(|name| {
            let bytes = read_regular(&dir.join(&name)).map_err(|e| format!("{name}: {e}"))?;
            Ok(Subject {
                sha256: crate::digest::Digest::of_bytes(&bytes).hex(),
                name,
            })
        })
        .collect()
}

/// The names (below `dir`, `/`-separated, sorted) of every regular file that would be a subject,
/// nothing read; a symbolic link, a pipe or a name that is not UTF-8 is refused (it cannot be
/// named or read back the same way).
pub fn files_of(dir: &std::path::Path) -> Result<Vec<String>, String> {
    fn walk(
        root: &std::path::Path,
        dir: &std::path::Path,
        out: &mut Vec<String>,
    ) -> Result<(), String> {
        let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for entry in entries {
            let entry = entry.map_err(|e| format!("{}: {e}", dir.display()))?;
            let path = entry.path();
            let rel = path
                .strip_prefix(root)
                .map_err(|e| e.to_string())?
                .components()
                .map(|c| {
                    c.as_os_str()
                        .to_str()
                        .map(str::to_string)
                        .ok_or_else(|| format!("{}: a name that is not UTF-8", path.display()))
                })
                .collect::<Result<Vec<_>, _>>()?
                .join("/");
            if dir == root && NOT_SUBJECTS.contains(&rel.as_str()) {
                continue;
            }
            let kind = entry
                .file_type()
                .map_err(|e| format!("{}: {e}", path.display()))?;
            if kind.is_dir() {
                walk(root, &path, out)?;
            } else if kind.is_file() {
                out.push(rel);
            } else {
                return Err(format!(
                    "{}: not a regular file (a link or a device cannot be signed as a file of the run)",
                    path.display()
                ));
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out)?;
    out.sort();
    Ok(out)
}

/// The in-toto Statement over a folder's files.
pub fn folder_statement(subjects: &[Subject], predicate_type: &str, predicate: Value) -> Value {
    json!({
        "_type": STATEMENT_TYPE,
        "subject": subjects
            .iter()
            .map(|s| json!({"name": s.name, "digest": {"sha256": s.sha256}}))
            .collect::<Vec<_>>(),
        "predicateType": predicate_type,
        "predicate": predicate,
    })
}

/// Signs every file of `dir` (see [`subjects_of`]) into `dir/<envelope>`, and writes the public
/// key beside it.
pub fn seal(
    dir: &std::path::Path,
    envelope: &str,
    predicate_type: &str,
    predicate: Value,
    key: &SigningKey,
) -> Result<usize, String> {
    scrub_folder(dir)?;
    let subjects = subjects_of(dir)?;
    let st = folder_statement(&subjects, predicate_type, predicate);
    let env = sign_statement(&st, key).map_err(|e| format!("signing: {e}"))?;
    let body = serde_json::to_string_pretty(&env).map_err(|e| e.to_string())?;
    std::fs::write(dir.join(envelope), body).map_err(|e| format!("{envelope}: {e}"))?;
    let pem = key
        .verifying_key()
        .to_public_key_pem(Default::default())
        .map_err(|e| e.to_string())?;
    std::fs::write(dir.join(PUBLIC_KEY_FILE), pem)
        .map_err(|e| format!("{PUBLIC_KEY_FILE}: {e}"))?;
    Ok(subjects.len())
}

/// Before signing: every file of the folder is searched for the credentials the run registered
/// (an implementation may write one beside its store). A text file holding one is scrubbed in
/// place; any other file holding one is refused, named: it is never signed.
fn scrub_folder(dir: &std::path::Path) -> Result<(), String> {
    for name in files_of(dir)? {
        let path = dir.join(&name);
        let bytes = read_regular(&path).map_err(|e| format!("{name}: {e}"))?;
        if !crate::secrets::holds_secret(&bytes) {
            continue;
        }
        match std::str::from_utf8(&bytes) {
            Ok(text) => std::fs::write(&path, crate::secrets::scrub(text))
                .map_err(|e| format!("{name}: {e}"))?,
            Err(_) => {
                return Err(format!(
                    "{name} holds a credential of this run and is not text: it is not signed (remove it, or keep the implementation from writing credentials into the run's folder)"
                ));
            }
        }
    }
    Ok(())
}

/// A verified folder: its statement, and every way the files beside the envelope differ from
/// its subjects (empty: every byte is as signed).
#[derive(Debug)]
pub struct FolderCheck {
    pub statement: Value,
    pub predicate_type: String,
    pub subjects: usize,
    pub problems: Vec<String>,
}

/// A file's bytes, only if it is a regular file (not a link, a pipe or a device, which could
/// point outside the folder, block the reader or never end).
pub fn read_regular(p: &std::path::Path) -> std::io::Result<Vec<u8>> {
    let m = std::fs::symlink_metadata(p)?;
    if !m.file_type().is_file() {
        return Err(std::io::Error::other(
            "not a regular file (a link, a pipe or a device is never read as a file of the run)",
        ));
    }
    std::fs::read(p)
}

/// Whether a subject name stays inside the folder: relative, `/`-separated, no `.` or `..`.
fn safe_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('/')
        && !name.contains('\\')
        && name
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != "..")
}

/// Verifies the envelope at `envelope_path` with `key`, then every subject against the files in
/// the envelope's folder: a missing file, a changed one (its digest), and a file the statement
/// does not name (a stale envelope beside newer files) are each a problem. The predicate type
/// must be one aocheck writes.
pub fn verify_folder(
    envelope_path: &std::path::Path,
    key: &VerifyingKey,
) -> Result<FolderCheck, AttestError> {
    let bytes = std::fs::read(envelope_path)
        .map_err(|e| AttestError::Envelope(format!("{}: {e}", envelope_path.display())))?;
    let st = verify_statement(&bytes, key)?;
    let predicate_type = st["predicateType"].as_str().unwrap_or_default().to_string();
    if ![RUN_PREDICATE_TYPE, EXPLORE_RUN_PREDICATE_TYPE].contains(&predicate_type.as_str()) {
        let why = if predicate_type == PREDICATE_TYPE || predicate_type == EXPLORE_PREDICATE_TYPE {
            " (an envelope of an earlier aocheck, which signed one report's content and none of the files beside it: sign the run again)"
        } else {
            ""
        };
        return Err(AttestError::Envelope(format!(
            "predicateType {predicate_type:?} is not {RUN_PREDICATE_TYPE} or {EXPLORE_RUN_PREDICATE_TYPE}{why}"
        )));
    }
    let Some(list) = st["subject"].as_array() else {
        return Err(AttestError::Envelope(
            "the statement has no subject list".into(),
        ));
    };
    let dir = envelope_path
        .parent()
        .map(std::path::Path::to_path_buf)
        .unwrap_or_default();
    let dir = if dir.as_os_str().is_empty() {
        std::path::PathBuf::from(".")
    } else {
        dir
    };
    let mut problems = Vec::new();
    let mut named = std::collections::BTreeSet::new();
    for (i, s) in list.iter().enumerate() {
        let (Some(name), Some(want)) = (s["name"].as_str(), s["digest"]["sha256"].as_str()) else {
            return Err(AttestError::Envelope(format!(
                "subject[{i}] has no name or no sha256 digest"
            )));
        };
        if !safe_name(name) || want.len() != 64 || !want.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(AttestError::Envelope(format!(
                "subject[{i}] {name:?}: a name outside the folder or a malformed digest"
            )));
        }
        if !named.insert(name.to_string()) {
            return Err(AttestError::Envelope(format!(
                "subject {name:?} is listed twice"
            )));
        }
        match read_regular(&dir.join(name)) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                problems.push(format!("missing: {name} (signed, not in the folder)"))
            }
            Err(e) => problems.push(format!("unreadable: {name}: {e}")),
            Ok(b) => {
                let got = crate::digest::Digest::of_bytes(&b).hex();
                if got != want.to_ascii_lowercase() {
                    problems.push(format!("changed: {name} (sha256 {got}, signed {want})"));
                }
            }
        }
    }
    // Only the names are needed here: every signed file was read above.
    match files_of(&dir) {
        Ok(on_disk) => {
            for name in on_disk.iter().filter(|n| !named.contains(*n)) {
                problems.push(format!(
                    "not signed: {name} (in the folder, not a subject of this envelope: a file written after it was signed, or an envelope older than the files beside it)"
                ));
            }
        }
        Err(e) => problems.push(format!("the folder cannot be listed: {e}")),
    }
    Ok(FolderCheck {
        subjects: list.len(),
        predicate_type,
        statement: st,
        problems,
    })
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
