//! Canonical JSON (RFC 8785, JCS) and SHA-256 digests: the single place in aocheck where a value
//! becomes bytes that are hashed or signed.
//!
//! Integers outside the range JavaScript represents exactly (|n| > 2^53 - 1) are rejected before
//! hashing: two verifiers would otherwise disagree on the bytes. Carry such values as strings.

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use std::fmt;

/// Largest integer an RFC 8785 canonicaliser represents exactly.
pub const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// Why a value could not be canonicalised.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CanonicalError {
    #[error("value does not serialise to JSON: {0}")]
    Serialize(String),
    #[error("integer {value} at {path} is beyond 2^53-1; carry it as a string")]
    UnsafeInteger { path: String, value: String },
    #[error("canonicalisation failed: {0}")]
    Canonicalize(String),
}

/// A SHA-256 digest, written `sha256:<64 lowercase hex>`.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Digest([u8; 32]);

impl Digest {
    /// The digest of raw bytes.
    pub fn of_bytes(bytes: &[u8]) -> Self {
        Digest(Sha256::digest(bytes).into())
    }
    /// The 64 hex characters without the `sha256:` prefix.
    pub fn hex(&self) -> String {
        hex::encode(self.0)
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.hex())
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}…", &self.hex()[..12])
    }
}

impl From<Digest> for String {
    fn from(d: Digest) -> String {
        d.to_string()
    }
}

impl TryFrom<String> for Digest {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        let hex_part = s
            .strip_prefix("sha256:")
            .ok_or_else(|| format!("digest {s:?} does not start with `sha256:`"))?;
        let bytes = hex::decode(hex_part).map_err(|e| format!("digest {s:?}: {e}"))?;
        let arr: [u8; 32] = bytes
            .try_into()
            .map_err(|_| format!("digest {s:?} is not 32 bytes"))?;
        Ok(Digest(arr))
    }
}

fn check_integers(v: &serde_json::Value, path: &mut String) -> Result<(), CanonicalError> {
    match v {
        serde_json::Value::Number(n) => {
            let unsafe_int = if let Some(u) = n.as_u64() {
                u > MAX_SAFE_INTEGER
            } else if let Some(i) = n.as_i64() {
                i.unsigned_abs() > MAX_SAFE_INTEGER
            } else {
                false
            };
            if unsafe_int {
                return Err(CanonicalError::UnsafeInteger {
                    path: if path.is_empty() {
                        "$".into()
                    } else {
                        path.clone()
                    },
                    value: n.to_string(),
                });
            }
            Ok(())
        }
        serde_json::Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                check_integers(item, path)?;
                path.truncate(len);
            }
            Ok(())
        }
        serde_json::Value::Object(map) => {
            for (k, item) in map {
                let len = path.len();
                path.push('.');
                path.push_str(k);
                check_integers(item, path)?;
                path.truncate(len);
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// RFC 8785 canonical bytes of a value.
pub fn canonical_bytes<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, CanonicalError> {
    let v = serde_json::to_value(value).map_err(|e| CanonicalError::Serialize(e.to_string()))?;
    check_integers(&v, &mut String::new())?;
    serde_json_canonicalizer::to_vec(&v).map_err(|e| CanonicalError::Canonicalize(e.to_string()))
}

/// SHA-256 over the RFC 8785 canonical bytes of a value.
pub fn digest_of<T: Serialize + ?Sized>(value: &T) -> Result<Digest, CanonicalError> {
    Ok(Digest::of_bytes(&canonical_bytes(value)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_order_and_whitespace_do_not_change_the_digest() {
        let a: serde_json::Value =
            serde_json::from_str(r#"{"b": 1, "a": [true, null, "x"]}"#).expect("json");
        let b = json!({"a": [true, null, "x"], "b": 1});
        assert_eq!(canonical_bytes(&a), canonical_bytes(&b));
        assert_eq!(
            canonical_bytes(&a).expect("bytes"),
            br#"{"a":[true,null,"x"],"b":1}"#.to_vec()
        );
    }

    #[test]
    fn rfc8785_number_forms() {
        let v = json!({"n": 1.0, "m": 1e21, "k": -0.0});
        assert_eq!(
            String::from_utf8(canonical_bytes(&v).expect("bytes")).expect("utf8"),
            r#"{"k":0,"m":1e+21,"n":1}"#
        );
    }

    #[test]
    fn unsafe_integers_are_rejected_with_their_path() {
        let v = json!({"outer": {"list": [1, 9007199254740993u64]}});
        assert_eq!(
            canonical_bytes(&v),
            Err(CanonicalError::UnsafeInteger {
                path: ".outer.list[1]".into(),
                value: "9007199254740993".into()
            })
        );
        assert!(canonical_bytes(&json!(MAX_SAFE_INTEGER)).is_ok());
        assert!(canonical_bytes(&json!(-(MAX_SAFE_INTEGER as i64) - 1)).is_err());
    }

    #[test]
    fn digest_round_trips_through_its_text_form() {
        let d = digest_of(&json!({"x": 1})).expect("digest");
        let s = d.to_string();
        assert!(s.starts_with("sha256:") && s.len() == 71);
        assert_eq!(Digest::try_from(s).expect("parse"), d);
        assert!(Digest::try_from("md5:00".to_string()).is_err());
        assert!(Digest::try_from("sha256:zz".to_string()).is_err());
    }
}
