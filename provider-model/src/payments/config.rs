//! Server configuration: accounts and their credentials and idempotency profiles, the control
//! token, retention, bounds and the signing key.

use serde::{Deserialize, Serialize};

/// How an account treats `Idempotency-Key`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum IdempotencyProfile {
    /// The first response for a key (5xx included) is saved and replayed for retries; changed
    /// parameters are an error (400); keys are pruned after the retention window.
    StripeV1,
    /// A key is required on create (400 without); 409 while the first request is in flight; 422
    /// on a payload mismatch; otherwise the saved response is replayed.
    IetfDraft,
    /// Keys are ignored: every request is new.
    None,
}

/// One account.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccountConfig {
    pub id: String,
    /// The account's Bearer credential.
    pub key: String,
    pub idempotency: IdempotencyProfile,
}

/// The whole configuration (also the shape of `--config FILE`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub accounts: Vec<AccountConfig>,
    /// The credential of `/_control`; never an account key.
    pub control_token: String,
    /// Idempotency keys and payments older than this are beyond retention.
    #[serde(default = "default_retention")]
    pub retention_secs: u64,
    /// Request bodies above this are refused with 413.
    #[serde(default = "default_max_body")]
    pub max_body_bytes: usize,
    /// 64 hex characters; a random key when absent.
    #[serde(default)]
    pub signing_seed_hex: Option<String>,
    /// The most requests the ground-truth ledger records. Once full, every API request is
    /// refused with `503` and the error code `ledger_full` (nothing is processed, so the ledger
    /// stays the truth) until `POST /_control/reset`. Bounds memory in long soaks.
    #[serde(default = "default_max_ledger")]
    pub max_ledger_requests: usize,
}

/// About 47 MB of resident memory at the cap, the whole process (measured by
/// `cargo bench -p fake-payments --bench create`; 432 bytes per recorded creation).
fn default_max_ledger() -> usize {
    100_000
}

fn default_retention() -> u64 {
    86_400
}
fn default_max_body() -> usize {
    64 * 1024
}

/// The largest amount accepted, in minor units.
pub const MAX_AMOUNT: i64 = 99_999_999;
/// Accepted currencies (ISO 4217, lower case).
pub const CURRENCIES: [&str; 6] = ["usd", "eur", "gbp", "jpy", "chf", "cad"];

impl Config {
    /// Two accounts, one per non-trivial idempotency profile, plus one without idempotency.
    pub fn example() -> Config {
        Config {
            accounts: vec![
                AccountConfig {
                    id: "acct_a".into(),
                    key: "sk_test_a".into(),
                    idempotency: IdempotencyProfile::StripeV1,
                },
                AccountConfig {
                    id: "acct_b".into(),
                    key: "sk_test_b".into(),
                    idempotency: IdempotencyProfile::IetfDraft,
                },
                AccountConfig {
                    id: "acct_c".into(),
                    key: "sk_test_c".into(),
                    idempotency: IdempotencyProfile::None,
                },
            ],
            control_token: "ctl_test".into(),
            retention_secs: default_retention(),
            max_body_bytes: default_max_body(),
            signing_seed_hex: None,
            max_ledger_requests: default_max_ledger(),
        }
    }

    /// Every defect at once, each naming its field and the fix.
    pub fn validate(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.accounts.is_empty() {
            out.push("accounts: configure at least one account".into());
        }
        if self.max_ledger_requests == 0 {
            out.push("max_ledger_requests: allow at least one request".into());
        }
        let mut ids = std::collections::BTreeSet::new();
        let mut keys = std::collections::BTreeSet::new();
        for (i, a) in self.accounts.iter().enumerate() {
            if a.id.trim().is_empty() {
                out.push(format!("accounts[{i}].id: must not be empty"));
            }
            if a.key.len() < 8 {
                out.push(format!(
                    "accounts[{i}].key: use a credential of at least 8 characters"
                ));
            }
            if !ids.insert(&a.id) {
                out.push(format!("accounts[{i}].id: {:?} is configured twice", a.id));
            }
            if !keys.insert(&a.key) {
                out.push(format!(
                    "accounts[{i}].key: two accounts share one credential"
                ));
            }
            if a.key == self.control_token {
                out.push(format!(
                    "accounts[{i}].key: equals the control token; an account credential must never reach /_control"
                ));
            }
        }
        if self.control_token.len() < 8 {
            out.push("control_token: use a token of at least 8 characters".into());
        }
        if self.max_body_bytes < 256 {
            out.push("max_body_bytes: must be at least 256".into());
        }
        if let Some(h) = &self.signing_seed_hex
            && hex::decode(h).map(|b| b.len()) != Ok(32)
        {
            out.push("signing_seed_hex: must be 64 hex characters (32 bytes)".into());
        }
        out
    }
}
