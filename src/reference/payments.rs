//! The reference executor's provider adapter for fake-payments: an HTTP client that verifies each
//! response's authentication tag against the provider's published key, and turns every answer
//! (or its absence) into AOC evidence: the native response kept separately from whatever the
//! profile later makes of it.

use crate::aoc::binding::{EvidenceBinding, ProviderBinding};
use crate::aoc::ids::{AttemptId, Millis};
use crate::aoc::profile::{Evidence, EvidenceKind, NativeResult, ProviderProfile};
use crate::digest::Digest;
use provider_model::payments::contract;
use serde_json::{Value, json};

/// Why the adapter could not talk to the provider at all (not evidence: a harness problem).
#[derive(Debug, thiserror::Error)]
pub enum AdapterError {
    #[error("provider at {base} unreachable: {detail}")]
    Unreachable { base: String, detail: String },
    #[error("provider document invalid: {0}")]
    Document(String),
}

/// A client for one account.
#[derive(Clone, Debug)]
pub struct PaymentsClient {
    base: String,
    account: String,
    credential: String,
    public: ed25519_dalek::VerifyingKey,
    profile: ProviderProfile,
    http: reqwest::Client,
    /// Test-only: skip tag verification (a broken executor that trusts any HTTP 200).
    pub trust_unauthenticated: bool,
    /// Test-only: verify a reply's tag for the account the tag names, not the bound account (a
    /// broken executor that accepts an authentic reply about another binding).
    pub trust_reply_account: bool,
}

impl PaymentsClient {
    /// Fetches and checks the published key and profile.
    pub async fn connect(
        base: &str,
        account: &str,
        credential: &str,
    ) -> Result<Self, AdapterError> {
        let http = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(30))
            .build()
            .map_err(|e| AdapterError::Unreachable {
                base: base.into(),
                detail: e.to_string(),
            })?;
        let get = |path: &'static str| {
            let http = http.clone();
            let url = format!("{base}{path}");
            async move {
                let r = http
                    .get(&url)
                    .send()
                    .await
                    .map_err(|e| AdapterError::Unreachable {
                        base: url.clone(),
                        detail: e.to_string(),
                    })?;
                r.json::<Value>()
                    .await
                    .map_err(|e| AdapterError::Document(format!("{url}: {e}")))
            }
        };
        let key_doc = get("/v1/provider-key").await?;
        let public = contract::parse_public_key(&key_doc)
            .map_err(|e| AdapterError::Document(e.to_string()))?;
        let prof_doc = get("/v1/profile").await?;
        let profile: ProviderProfile = serde_json::from_value(prof_doc["profile"].clone())
            .map_err(|e| AdapterError::Document(format!("profile: {e}")))?;
        let digest = profile
            .digest()
            .map_err(|e| AdapterError::Document(e.to_string()))?;
        if prof_doc["digest"].as_str() != Some(digest.to_string().as_str()) {
            return Err(AdapterError::Document(format!(
                "profile digest {} does not match its content ({digest})",
                prof_doc["digest"]
            )));
        }
        let defects = profile.validate();
        if !defects.is_empty() {
            return Err(AdapterError::Document(format!(
                "profile incomplete: {defects:?}"
            )));
        }
        Ok(PaymentsClient {
            base: base.to_string(),
            account: account.to_string(),
            credential: credential.to_string(),
            public,
            profile,
            http,
            trust_unauthenticated: false,
            trust_reply_account: false,
        })
    }

    pub fn profile(&self) -> &ProviderProfile {
        &self.profile
    }
    pub fn account(&self) -> &str {
        &self.account
    }

    /// The create request for an occurrence and the binding it implies.
    pub fn create_request(
        &self,
        amount: i64,
        currency: &str,
        native_key: &str,
        metadata: &Value,
    ) -> (Value, ProviderBinding) {
        let body = json!({"amount": amount, "currency": currency, "description": "aocheck occurrence", "metadata": metadata});
        let digest = contract::request_digest("POST", "/v1/payments", Some(&body));
        let binding = ProviderBinding {
            profile_id: self.profile.id.clone(),
            profile_version: self.profile.version.clone(),
            account: self.account.clone(),
            environment: self
                .profile
                .environments
                .first()
                .cloned()
                .unwrap_or_default(),
            request_digest: digest_of_contract(&digest),
            key_rule: self.profile.key_rule.clone(),
            native_key: Some(native_key.to_string()),
            status_source: "payments.get".into(),
        };
        (body, binding)
    }

    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        key: Option<&str>,
        body: Option<&Value>,
    ) -> Result<(u16, Vec<u8>, Option<String>, String), String> {
        let digest = contract::request_digest(method.as_str(), path, body);
        let mut rb = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.credential);
        if let Some(k) = key {
            rb = rb.header("Idempotency-Key", k);
        }
        if let Some(b) = body {
            rb = rb
                .header("content-type", "application/json")
                .body(b.to_string());
        }
        let r = rb.send().await.map_err(|e| e.to_string())?;
        let status = r.status().as_u16();
        let tag = r
            .headers()
            .get(contract::SIGNATURE_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let bytes = r.bytes().await.map_err(|e| e.to_string())?.to_vec();
        Ok((status, bytes, tag, digest))
    }

    /// Sends the create request of an entered attempt and returns the evidence it yields.
    pub async fn send_create(
        &self,
        binding: &ProviderBinding,
        body: &Value,
        attempt: &AttemptId,
        now: Millis,
    ) -> Evidence {
        let result = self
            .call(
                reqwest::Method::POST,
                "/v1/payments",
                binding.native_key.as_deref(),
                Some(body),
            )
            .await;
        self.evidence(
            binding,
            EvidenceKind::Response {
                attempt: attempt.clone(),
            },
            "payments.get",
            result,
            now,
            false,
        )
    }

    /// Looks the occurrence up through a status source: by reference when known, else by key.
    pub async fn lookup(
        &self,
        binding: &ProviderBinding,
        provider_ref: Option<&str>,
        now: Millis,
    ) -> Evidence {
        // By reference when known, else a listing by key (the only difference: how it is read).
        let (path, listing) = match provider_ref {
            Some(r) => (format!("/v1/payments/{r}"), false),
            None => (
                format!(
                    "/v1/payments?idempotency_key={}",
                    binding.native_key.as_deref().unwrap_or_default()
                ),
                true,
            ),
        };
        let result = self.call(reqwest::Method::GET, &path, None, None).await;
        self.evidence(
            binding,
            if listing {
                EvidenceKind::Listing
            } else {
                EvidenceKind::StatusQuery
            },
            "payments.get",
            result,
            now,
            listing,
        )
    }

    fn evidence(
        &self,
        binding: &ProviderBinding,
        kind: EvidenceKind,
        source: &str,
        result: Result<(u16, Vec<u8>, Option<String>, String), String>,
        now: Millis,
        listing: bool,
    ) -> Evidence {
        let expected = EvidenceBinding::matching(binding, None);
        let (status, bytes, tag, digest) = match result {
            Err(detail) => {
                return Evidence {
                    source: source.into(),
                    kind,
                    observed_at: now,
                    authenticated: false,
                    bound_to: expected,
                    native: NativeResult::Transport { detail },
                    native_digest: Digest::of_bytes(b""),
                };
            }
            Ok(x) => x,
        };
        let native_digest = Digest::of_bytes(&bytes);
        // The defect's reading: whatever account the tag names is taken as the bound one.
        let account = match tag.as_deref().map(contract::Tag::parse) {
            Some(Ok(t)) if self.trust_reply_account => t.account,
            _ => self.account.clone(),
        };
        let verified = contract::verify(
            &self.public,
            tag.as_deref(),
            status,
            &bytes,
            &account,
            &digest,
        )
        .is_ok();
        let authenticated = verified || self.trust_unauthenticated;
        let parsed: Option<Value> = serde_json::from_slice(&bytes).ok();
        let Some(v) = parsed else {
            return Evidence {
                source: source.into(),
                kind,
                observed_at: now,
                authenticated,
                bound_to: expected,
                native: NativeResult::Undecodable,
                native_digest,
            };
        };
        // The object the answer is about: a payment, a declined payment inside an error, or a listing.
        let (object, native) = if listing && status == 200 {
            let found = v["data"].as_array().and_then(|d| d.first()).cloned();
            let complete = v["complete"].as_bool().unwrap_or(false);
            (
                found.clone(),
                NativeResult::Listing {
                    complete,
                    found: found.and_then(|p| p["status"].as_str().map(str::to_string)),
                },
            )
        } else if (200..300).contains(&status) {
            match v["status"].as_str() {
                Some(s) => (
                    Some(v.clone()),
                    NativeResult::Status {
                        label: s.to_string(),
                    },
                ),
                None => (Some(v.clone()), NativeResult::Undecodable),
            }
        } else if status == 402 && v["error"]["payment"].is_object() {
            let p = v["error"]["payment"].clone();
            let label = p["status"].as_str().unwrap_or("declined").to_string();
            (Some(p), NativeResult::Status { label })
        } else if status == 404 {
            (None, NativeResult::NotFound)
        } else {
            (None, NativeResult::HttpError { status })
        };
        let bound_to = match &object {
            Some(p) => EvidenceBinding {
                profile_id: self.profile.id.clone(),
                profile_version: self.profile.version.clone(),
                account: p["account"]
                    .as_str()
                    .unwrap_or(&expected.account)
                    .to_string(),
                environment: p["environment"]
                    .as_str()
                    .unwrap_or(&expected.environment)
                    .to_string(),
                request_digest: p["request_digest"]
                    .as_str()
                    .map(digest_of_contract)
                    .unwrap_or(expected.request_digest.clone()),
                native_key: p["idempotency_key"]
                    .as_str()
                    .map(str::to_string)
                    .or(expected.native_key.clone()),
                provider_ref: p["id"].as_str().map(str::to_string),
            },
            None => expected,
        };
        Evidence {
            source: source.into(),
            kind,
            observed_at: now,
            authenticated,
            bound_to,
            native,
            native_digest,
        }
    }
}

/// fake-payments writes digests as `sha256:<hex>`, as aocheck does.
fn digest_of_contract(s: &str) -> Digest {
    Digest::try_from(s.to_string()).unwrap_or_else(|_| Digest::of_bytes(s.as_bytes()))
}
