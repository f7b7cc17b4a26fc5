//! AOC-REQ-003: the immutable provider binding, and the comparison every later admission, status
//! query, response and reconciliation goes through.

use crate::digest::{CanonicalError, Digest, digest_of};
use serde::{Deserialize, Serialize};
use std::fmt;

/// The tuple bound before provider entry (AOC-REQ-003 items 1–4; item 5, the provider reference,
/// is bound once when it becomes known and is kept beside the binding, see [`ProviderRef`]).
///
/// The binding digest covers every field here, so it is constant for the life of the occurrence.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct ProviderBinding {
    /// (1) provider profile and its version.
    pub profile_id: String,
    pub profile_version: String,
    /// (2) account / tenant and environment.
    pub account: String,
    pub environment: String,
    /// (3) digest of the exact request representation.
    pub request_digest: Digest,
    /// (4) native key derivation rule and key, if the provider supports one.
    pub key_rule: String,
    pub native_key: Option<String>,
    /// The pinned status source this occurrence is reconciled through.
    pub status_source: String,
}

/// A provider operation reference (binding item 5), bound at most once.
pub type ProviderRef = String;

/// One field of the binding, named in conflict refusals.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Debug)]
#[serde(rename_all = "snake_case")]
pub enum BindingField {
    Profile,
    ProfileVersion,
    Account,
    Environment,
    Request,
    KeyRule,
    NativeKey,
    ProviderRef,
    StatusSource,
}

impl fmt::Display for BindingField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            BindingField::Profile => "profile",
            BindingField::ProfileVersion => "profile version",
            BindingField::Account => "account",
            BindingField::Environment => "environment",
            BindingField::Request => "request",
            BindingField::KeyRule => "native key rule",
            BindingField::NativeKey => "native key",
            BindingField::ProviderRef => "provider reference",
            BindingField::StatusSource => "status source",
        };
        f.write_str(s)
    }
}

impl ProviderBinding {
    /// The binding digest reported for the occurrence (SHA-256 over RFC 8785 JSON).
    pub fn digest(&self) -> Result<Digest, CanonicalError> {
        digest_of(self)
    }

    /// Every field in which `other` differs from this binding, in a stable order.
    pub fn diff(&self, other: &ProviderBinding) -> Vec<BindingField> {
        let mut out = Vec::new();
        if self.profile_id != other.profile_id {
            out.push(BindingField::Profile);
        }
        if self.profile_version != other.profile_version {
            out.push(BindingField::ProfileVersion);
        }
        if self.account != other.account {
            out.push(BindingField::Account);
        }
        if self.environment != other.environment {
            out.push(BindingField::Environment);
        }
        if self.request_digest != other.request_digest {
            out.push(BindingField::Request);
        }
        if self.key_rule != other.key_rule {
            out.push(BindingField::KeyRule);
        }
        if self.native_key != other.native_key {
            out.push(BindingField::NativeKey);
        }
        if self.status_source != other.status_source {
            out.push(BindingField::StatusSource);
        }
        out
    }

    /// The fields in which provider evidence fails to match this binding and the bound reference.
    pub fn mismatches(
        &self,
        bound_ref: Option<&str>,
        claim: &EvidenceBinding,
        source: &str,
    ) -> Vec<BindingField> {
        let mut out = Vec::new();
        if self.profile_id != claim.profile_id {
            out.push(BindingField::Profile);
        }
        if self.profile_version != claim.profile_version {
            out.push(BindingField::ProfileVersion);
        }
        if self.account != claim.account {
            out.push(BindingField::Account);
        }
        if self.environment != claim.environment {
            out.push(BindingField::Environment);
        }
        if self.request_digest != claim.request_digest {
            out.push(BindingField::Request);
        }
        if let (Some(k), Some(c)) = (&self.native_key, &claim.native_key)
            && k != c
        {
            out.push(BindingField::NativeKey);
        }
        if let (Some(r), Some(c)) = (bound_ref, &claim.provider_ref)
            && r != c
        {
            out.push(BindingField::ProviderRef);
        }
        if self.status_source != source {
            out.push(BindingField::StatusSource);
        }
        out
    }
}

/// What a provider response or status record says it is about. Compared field by field with the
/// binding; any difference is a conflicting operation, never evidence (AOC-REQ-003, §9).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct EvidenceBinding {
    pub profile_id: String,
    pub profile_version: String,
    pub account: String,
    pub environment: String,
    pub request_digest: Digest,
    pub native_key: Option<String>,
    pub provider_ref: Option<ProviderRef>,
}

impl EvidenceBinding {
    /// The claim a faithful provider would make about an occurrence bound with `b`.
    pub fn matching(b: &ProviderBinding, provider_ref: Option<&str>) -> Self {
        EvidenceBinding {
            profile_id: b.profile_id.clone(),
            profile_version: b.profile_version.clone(),
            account: b.account.clone(),
            environment: b.environment.clone(),
            request_digest: b.request_digest.clone(),
            native_key: b.native_key.clone(),
            provider_ref: provider_ref.map(str::to_owned),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b() -> ProviderBinding {
        ProviderBinding {
            profile_id: "fake-payments".into(),
            profile_version: "1".into(),
            account: "acct_a".into(),
            environment: "test".into(),
            request_digest: Digest::of_bytes(b"req"),
            key_rule: "idempotency-key = occurrence id".into(),
            native_key: Some("k1".into()),
            status_source: "payments.get".into(),
        }
    }

    #[test]
    fn digest_is_stable_and_sensitive_to_every_field() {
        let base = b();
        assert_eq!(base.digest(), b().digest());
        let mut variants = Vec::new();
        let mut x = b();
        x.profile_id = "other".into();
        variants.push((x, BindingField::Profile));
        let mut x = b();
        x.profile_version = "2".into();
        variants.push((x, BindingField::ProfileVersion));
        let mut x = b();
        x.account = "acct_b".into();
        variants.push((x, BindingField::Account));
        let mut x = b();
        x.environment = "live".into();
        variants.push((x, BindingField::Environment));
        let mut x = b();
        x.request_digest = Digest::of_bytes(b"other");
        variants.push((x, BindingField::Request));
        let mut x = b();
        x.key_rule = "random".into();
        variants.push((x, BindingField::KeyRule));
        let mut x = b();
        x.native_key = Some("k2".into());
        variants.push((x, BindingField::NativeKey));
        let mut x = b();
        x.status_source = "listing".into();
        variants.push((x, BindingField::StatusSource));
        for (v, field) in variants {
            assert_ne!(v.digest(), base.digest(), "{field}");
            assert_eq!(base.diff(&v), vec![field]);
        }
    }

    #[test]
    fn evidence_mismatch_names_fields() {
        let base = b();
        let mut claim = EvidenceBinding::matching(&base, Some("pay_1"));
        assert!(
            base.mismatches(Some("pay_1"), &claim, "payments.get")
                .is_empty()
        );
        claim.account = "acct_b".into();
        claim.provider_ref = Some("pay_2".into());
        assert_eq!(
            base.mismatches(Some("pay_1"), &claim, "listing"),
            vec![
                BindingField::Account,
                BindingField::ProviderRef,
                BindingField::StatusSource
            ]
        );
    }
}
