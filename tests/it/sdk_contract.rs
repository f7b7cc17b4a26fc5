//! The official Stripe SDKs against fake-payments' Stripe dialect: PyPI's `stripe` 16.1.0
//! (`tests/sdk/contract.py`) and npm's `stripe` 23.2.0 (`tests/sdk/contract.mjs`, pinned by
//! `tests/sdk/package-lock.json`), each run as a process against the fake served on loopback.
//!
//! The scripts check what the SDK makes of the replies (its objects, the fields an integration
//! reads, the exception class of every error); this module sets the fault plan and the
//! `Stripe-Should-Retry` advice before a run and reads the ground-truth ledger after it: how many
//! requests the SDK really sent, under which `Idempotency-Key`, and how many effects they made.
//! Each SDK's retry behaviour asserted here is what its installed source says (see the scripts'
//! headers for the functions and lines).
//!
//! CI installs both SDKs (`.ci/run`). A missing or different SDK fails these tests, never skips
//! them: a contract test that cannot run is a check that cannot fail.

use fake_payments::StripeSettings;
use fake_payments::config::Config;
use fake_payments::faults::{Fault, Op, Plan, Rule};
use fake_payments::ledger::{EffectKind, Ledger, Reply};
use rstest::rstest;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

type Server = fake_control::testing::Served<fake_payments::Handle>;

/// What one SDK process may take: generous, for a loaded 2-core machine (the slowest scenario
/// sleeps about 1.5 s in the SDK's own backoff).
const PROCESS_TIMEOUT: Duration = Duration::from_secs(60);

async fn start() -> Server {
    let (app, handle) =
        fake_payments::router(Config::example()).expect("the example configuration is valid");
    Server::start(app, handle, Duration::from_secs(10)).await
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn sdk_dir() -> PathBuf {
    root().join("tests/sdk")
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sdk {
    Python,
    Node,
}

/// One finished process: its exit code, the JSON lines it printed, and its raw output.
#[derive(Debug)]
struct Run {
    what: String,
    code: Option<i32>,
    lines: Vec<Value>,
    stdout: String,
    stderr: String,
}

impl Run {
    fn failure(&self) -> String {
        let check = self
            .lines
            .iter()
            .find(|l| l["ok"] == false)
            .map_or_else(|| "(no failed check printed)".to_string(), Value::to_string);
        format!(
            "{} exited with {:?}; failed check: {check}\n--- stdout\n{}\n--- stderr\n{}",
            self.what, self.code, self.stdout, self.stderr
        )
    }

    fn assert_passed(&self) {
        assert_eq!(self.code, Some(0), "{}", self.failure());
    }

    /// The value of the last line that has `key` (`summary`, `result`).
    fn last(&self, key: &str) -> &Value {
        self.lines
            .iter()
            .rev()
            .find_map(|l| l.get(key))
            .unwrap_or_else(|| panic!("no {key:?} line\n{}", self.failure()))
    }
}

/// Runs `program args` in `dir` with stdout and stderr captured, killed after
/// [`PROCESS_TIMEOUT`].
async fn run_process(program: &str, args: &[String], dir: &Path, what: String) -> Run {
    let child = tokio::process::Command::new(program)
        .args(args)
        .current_dir(dir)
        // The fake is on loopback: a proxy from the environment must not be asked for it.
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env("no_proxy", "127.0.0.1,localhost")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| {
            panic!("{what}: cannot start {program:?} ({e}); CI installs it with .ci/run")
        });
    let out = tokio::time::timeout(PROCESS_TIMEOUT, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("{what}: did not finish within {PROCESS_TIMEOUT:?} (killed)"))
        .unwrap_or_else(|e| panic!("{what}: cannot read its output ({e})"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let lines = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect();
    Run {
        what,
        code: out.status.code(),
        lines,
        stdout,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

impl Sdk {
    /// The pinned version: what the scripts' assertions were read from.
    fn version(self) -> &'static str {
        match self {
            Sdk::Python => "16.1.0",
            Sdk::Node => "23.2.0",
        }
    }

    /// How the SDK names itself in `User-Agent` (`_APIRequestor.request_headers`,
    /// `RequestSender._getUserAgentString`); an AI-agent or app-info suffix may follow.
    fn user_agent(self) -> String {
        match self {
            Sdk::Python => format!("Stripe/v1 PythonBindings/{}", self.version()),
            Sdk::Node => format!("Stripe/v1 NodeBindings/{}", self.version()),
        }
    }

    /// Whether `key` has the shape of a key this SDK generates: Python's
    /// `_generate_idempotency_key` (16 random bytes as 8-4-4-4-12 hex), Node's
    /// `_defaultIdempotencyKey` (`stripe-node-retry-` and a v4 UUID).
    fn generated(self, key: &str) -> bool {
        let uuid = |u: &str| {
            let parts: Vec<&str> = u.split('-').collect();
            parts.iter().map(|p| p.len()).eq([8, 4, 4, 4, 12])
                && parts
                    .iter()
                    .all(|p| p.chars().all(|c| c.is_ascii_hexdigit()))
        };
        match self {
            Sdk::Python => uuid(key),
            Sdk::Node => key.strip_prefix("stripe-node-retry-").is_some_and(uuid),
        }
    }

    /// Fails, saying how to install it, unless the pinned SDK is there.
    async fn require(self) {
        match self {
            Sdk::Python => {
                let args = [
                    "-c".to_string(),
                    "import stripe, sys; sys.stdout.write(stripe.VERSION)".to_string(),
                ];
                let r = run_process("python3", &args, root(), "import stripe".into()).await;
                assert!(
                    r.code == Some(0) && r.stdout == self.version(),
                    "the contract tests need PyPI's stripe=={v} for python3 (found: exit {:?}, \
                     version {:?}, {}): run .ci/run, or `pip install stripe=={v}`",
                    r.code,
                    r.stdout,
                    r.stderr.trim(),
                    v = self.version(),
                );
            }
            Sdk::Node => {
                let manifest = sdk_dir().join("node_modules/stripe/package.json");
                let version = std::fs::read_to_string(&manifest)
                    .ok()
                    .and_then(|t| serde_json::from_str::<Value>(&t).ok())
                    .and_then(|v| v["version"].as_str().map(str::to_string));
                assert_eq!(
                    version.as_deref(),
                    Some(self.version()),
                    "the contract tests need npm's stripe@{v} in tests/sdk/node_modules \
                     ({} unreadable or another version): run .ci/run, or \
                     `npm ci --prefix tests/sdk`",
                    manifest.display(),
                    v = self.version(),
                );
                let r = run_process(
                    "node",
                    &["--version".to_string()],
                    root(),
                    "node --version".into(),
                )
                .await;
                assert_eq!(r.code, Some(0), "node is required: {}", r.failure());
            }
        }
    }

    /// Runs this SDK's contract script against `base` with `args`.
    async fn run(self, base: &str, args: &[&str]) -> Run {
        let mut all = Vec::with_capacity(args.len() + 2);
        let (program, dir) = match self {
            Sdk::Python => {
                all.push(sdk_dir().join("contract.py").display().to_string());
                ("python3", root().to_path_buf())
            }
            // From tests/sdk, where node_modules is.
            Sdk::Node => {
                all.push("contract.mjs".to_string());
                ("node", sdk_dir())
            }
        };
        all.push(base.to_string());
        all.extend(args.iter().map(|a| a.to_string()));
        let what = format!("{self:?} contract {}", args.join(" "));
        run_process(program, &all, &dir, what).await
    }
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn intent_id(payment_id: &str) -> String {
    payment_id.replacen("pay_", "pi_", 1)
}

/// Every request spoke the Stripe dialect through this SDK.
fn all_from(sdk: Sdk, l: &Ledger) {
    assert!(!l.requests.is_empty(), "the SDK sent nothing");
    for r in &l.requests {
        assert_eq!(r.dialect.as_deref(), Some("stripe"), "{r:?}");
        let ua = r.user_agent.as_deref().unwrap_or_default();
        assert!(
            ua.starts_with(&sdk.user_agent()),
            "User-Agent {ua:?}, want {:?}…: {r:?}",
            sdk.user_agent()
        );
    }
}

#[rstest]
#[case::python(Sdk::Python)]
#[case::node(Sdk::Node)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_drives_the_whole_surface_and_the_ledger_agrees(#[case] sdk: Sdk) {
    sdk.require().await;
    let s = start().await;
    let run = sdk.run(&s.base, &["--scenario", "surface"]).await;
    run.assert_passed();
    let summary = run.last("summary");
    assert_eq!(summary["sdk_version"], sdk.version(), "{summary}");
    let api_version = summary["api_version"].as_str().expect("api_version");
    let intents: BTreeSet<&str> = strings(&summary["intents"]).into_iter().collect();
    let uncharged: BTreeSet<&str> = strings(&summary["uncharged"]).into_iter().collect();
    let explicit: BTreeSet<&str> = strings(&summary["explicit_keys"]).into_iter().collect();
    let mut refunds = strings(&summary["refunds"]);
    refunds.sort_unstable();

    let l = s.handle.ledger();
    all_from(sdk, &l);
    let mut per_key: BTreeMap<&str, usize> = BTreeMap::new();
    for r in &l.requests {
        // The API version the SDK pins, sent with every request.
        assert_eq!(r.stripe_version.as_deref(), Some(api_version), "{r:?}");
        match (r.op, r.idempotency_key.as_deref()) {
            // A GET carries no key (both SDKs key POSTs only).
            (Op::Get | Op::List, key) => assert_eq!(key, None, "{r:?}"),
            (_, None) => panic!("a POST without an Idempotency-Key: {r:?}"),
            (_, Some(k)) => {
                assert!(
                    explicit.contains(k) || sdk.generated(k),
                    "a key neither chosen by the script nor shaped like the SDK's: {r:?}"
                );
                *per_key.entry(k).or_default() += 1;
            }
        }
    }
    // One key per call: a key the SDK generated names exactly one request (no fault, no retry).
    for (k, n) in &per_key {
        if !explicit.contains(k) {
            assert_eq!(*n, 1, "the SDK reused its key {k:?}: {:#?}", l.requests);
        }
    }
    // The explicit key: the first call, its replay, then the changed-parameter refusal.
    let reused: Vec<_> = l
        .requests
        .iter()
        .filter(|r| r.idempotency_key.as_deref() == Some("contract-replay-1"))
        .collect();
    let shape: Vec<(bool, bool)> = reused.iter().map(|r| (r.effect, r.replayed)).collect();
    assert_eq!(
        shape,
        vec![(true, false), (false, true), (false, false)],
        "{reused:#?}"
    );
    assert_eq!(reused[2].status, 400, "{:?}", reused[2]);

    // Every effect is on an intent the script created, caused by a request under its key.
    for e in &l.effects {
        assert!(
            intents.contains(intent_id(&e.payment_id).as_str()),
            "{e:?} is on no intent of the run {intents:?}"
        );
        let cause = l
            .requests
            .iter()
            .find(|r| r.seq == e.request_seq)
            .expect("the effect's request");
        assert_eq!(e.idempotency_key, cause.idempotency_key, "{e:?} {cause:?}");
        assert!(cause.effect, "{cause:?}");
    }
    let kind = |k: EffectKind| l.effects.iter().filter(move |e| e.kind == k);
    // Each intent charged (or declined) once; the draft canceled unconfirmed never was a payment.
    let created: Vec<String> = kind(EffectKind::PaymentCreated)
        .map(|e| intent_id(&e.payment_id))
        .collect();
    let created_set: BTreeSet<&str> = created.iter().map(String::as_str).collect();
    assert_eq!(created.len(), created_set.len(), "{created:?}");
    let want: BTreeSet<&str> = intents.difference(&uncharged).copied().collect();
    assert_eq!(created_set, want);
    assert_eq!(kind(EffectKind::PaymentCaptured).count(), 1);
    assert_eq!(kind(EffectKind::PaymentCanceled).count(), 1);
    let mut refunded: Vec<&str> = kind(EffectKind::PaymentRefunded)
        .filter_map(|e| e.refund_id.as_deref())
        .collect();
    refunded.sort_unstable();
    assert_eq!(refunded, refunds);
}

/// Stripe reflects a POST's `Idempotency-Key` in its reply, and both SDKs expose it
/// (`last_response.idempotency_key`, `lastResponse.idempotencyKey`): an integration logs the key
/// it can read back there.
#[rstest]
#[case::python(Sdk::Python)]
#[case::node(Sdk::Node)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_echoes_the_idempotency_key_the_sdk_sent(#[case] sdk: Sdk) {
    sdk.require().await;
    let s = start().await;
    let run = sdk.run(&s.base, &["--scenario", "echo"]).await;
    run.assert_passed();
    let l = s.handle.ledger();
    all_from(sdk, &l);
    let echoed = run.last("result")["generated_key"]
        .as_str()
        .map(str::to_string);
    assert_eq!(echoed, l.requests[1].idempotency_key, "{:?}", l.requests[1]);
}

/// One confirmed creation under a fault, as each SDK's retry logic meets it; the ledger says how
/// many requests it sent, and that they were one call: one key, one effect.
#[rstest]
// Python: `_should_retry` treats an unset `max_network_retries` as 0 and checks the budget first.
#[case::python_5xx_after_commit_is_not_retried_without_a_budget(
    Sdk::Python, None, Fault::CommitThen { status: 500 }, None, "api_error", 1
)]
#[case::python_should_retry_true_does_not_open_a_budget(
    Sdk::Python, None, Fault::CommitThen { status: 500 }, Some(true), "api_error", 1
)]
#[case::python_5xx_after_commit_is_retried_into_the_saved_5xx(
    Sdk::Python, Some(2), Fault::CommitThen { status: 500 }, None, "api_error", 3
)]
#[case::python_should_retry_false_stops_a_retry(
    Sdk::Python, Some(2), Fault::CommitThen { status: 500 }, Some(false), "api_error", 1
)]
#[case::python_dropped_connection_without_a_budget_is_a_connection_error(
    Sdk::Python,
    None,
    Fault::CommitThenDrop,
    None,
    "connection_error",
    1
)]
#[case::python_dropped_connection_is_retried_into_the_replay(
    Sdk::Python,
    Some(2),
    Fault::CommitThenDrop,
    None,
    "ok",
    2
)]
#[case::python_5xx_before_commit_is_retried_and_commits_once(
    Sdk::Python, Some(2), Fault::Reject { status: 503 }, None, "ok", 2
)]
// Node: maxNetworkRetries defaults to 2 (PlatformFunctions.getDefaultMaxNetworkRetries).
#[case::node_default_budget_retries_a_5xx_after_commit_twice(
    Sdk::Node, None, Fault::CommitThen { status: 500 }, None, "api_error", 3
)]
#[case::node_5xx_after_commit_is_not_retried_without_a_budget(
    Sdk::Node, Some(0), Fault::CommitThen { status: 500 }, None, "api_error", 1
)]
#[case::node_should_retry_false_stops_the_default_retries(
    Sdk::Node, None, Fault::CommitThen { status: 500 }, Some(false), "api_error", 1
)]
#[case::node_should_retry_true_does_not_open_a_budget(
    Sdk::Node, Some(0), Fault::CommitThen { status: 500 }, Some(true), "api_error", 1
)]
// A connection closed without a reply is `socket hang up`, code ECONNRESET, one of
// HttpClient.CONNECTION_CLOSED_ERROR_CODES: `_shouldRetry` retries it once before it looks at the
// budget, so even with maxNetworkRetries 0 (and no reply, so no advice header, can stop it).
#[case::node_closed_connection_is_retried_once_without_a_budget(
    Sdk::Node,
    Some(0),
    Fault::CommitThenDrop,
    None,
    "ok",
    2
)]
#[case::node_closed_connection_is_retried_whatever_the_advice(
    Sdk::Node,
    Some(0),
    Fault::CommitThenDrop,
    Some(false),
    "ok",
    2
)]
#[case::node_closed_connection_is_retried_into_the_replay(
    Sdk::Node,
    None,
    Fault::CommitThenDrop,
    None,
    "ok",
    2
)]
#[case::node_5xx_before_commit_is_retried_and_commits_once(
    Sdk::Node, None, Fault::Reject { status: 503 }, None, "ok", 2
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_sdk_retries_as_its_source_says_under_one_key(
    #[case] sdk: Sdk,
    #[case] retries: Option<u32>,
    #[case] fault: Fault,
    #[case] advice: Option<bool>,
    #[case] expect: &str,
    #[case] requests: usize,
) {
    sdk.require().await;
    let s = start().await;
    s.handle.set_stripe(StripeSettings {
        should_retry: advice,
        search_lag_ms: 0,
        ..Default::default()
    });
    s.handle
        .set_plan(Plan {
            rules: vec![Rule {
                op: Op::Create,
                nth: 1,
                times: 1,
                account: None,
                key: None,
                fault: fault.clone(),
            }],
        })
        .expect("a valid plan");
    let mut args = vec![
        "--scenario".to_string(),
        "retry".into(),
        "--expect".into(),
        expect.into(),
    ];
    if let Some(n) = retries {
        args.extend(["--retries".to_string(), n.to_string()]);
    }
    if let Fault::CommitThen { status } = fault {
        args.extend(["--status".to_string(), status.to_string()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = sdk.run(&s.base, &args).await;
    run.assert_passed();
    let result = run.last("result");
    assert_eq!(result["outcome"], expect, "{result}");
    if sdk == Sdk::Node {
        // The budget the client ran with, as the SDK reports it: its default is 2.
        assert_eq!(
            result["max_network_retries"],
            retries.unwrap_or(2),
            "{result}"
        );
    }

    let l = s.handle.ledger();
    all_from(sdk, &l);
    assert_eq!(
        l.requests.len(),
        requests,
        "{sdk:?} sent {} requests: {:#?}",
        l.requests.len(),
        l.requests
    );
    let key = l.requests[0]
        .idempotency_key
        .clone()
        .expect("the SDK keys a POST");
    assert!(sdk.generated(&key), "{key:?}");
    for r in &l.requests {
        assert_eq!(r.op, Op::Create, "{r:?}");
        assert_eq!(
            r.idempotency_key.as_deref(),
            Some(key.as_str()),
            "one key for one call: {r:?}"
        );
    }
    assert_eq!(l.effects.len(), 1, "one charge: {:#?}", l.effects);
    let e = &l.effects[0];
    assert_eq!(e.kind, EffectKind::PaymentCreated);
    assert_eq!(e.idempotency_key.as_deref(), Some(key.as_str()));
    // Before commit nothing is saved: the last request is the first to commit. After commit the
    // first request committed and every retry is its replay.
    let before_commit = matches!(fault, Fault::Reject { .. });
    let committing = if before_commit { requests } else { 1 };
    assert_eq!(e.request_seq, l.requests[committing - 1].seq, "{e:?}");
    for (i, r) in l.requests.iter().enumerate() {
        assert_eq!(r.effect, i + 1 == committing, "{r:?}");
        assert_eq!(r.replayed, !before_commit && i > 0, "{r:?}");
    }
    let first_reply = match fault {
        Fault::CommitThen { .. } => Reply::ErrorAfterCommit,
        Fault::CommitThenDrop => Reply::Dropped,
        _ => Reply::Written,
    };
    assert_eq!(l.requests[0].reply, first_reply, "{:?}", l.requests[0]);
    if expect == "ok" {
        // What the SDK returned is the one payment, and it knew whether it was a replay.
        assert_eq!(result["intent"], intent_id(&e.payment_id), "{result}");
        assert_eq!(result["replayed"], !before_commit, "{result}");
    }
}

/// The contract can fail: a reply missing one field (`amount_received`, from a native body
/// without `amount_captured`) stops the script at the check that reads it.
#[rstest]
#[case::python(Sdk::Python)]
#[case::node(Sdk::Node)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_field_breaks_the_contract(#[case] sdk: Sdk) {
    sdk.require().await;
    let s = start().await;
    s.handle
        .set_plan(Plan {
            rules: vec![Rule {
                op: Op::Create,
                nth: 1,
                times: 1,
                account: None,
                key: None,
                fault: Fault::Omit {
                    field: "amount_captured".into(),
                },
            }],
        })
        .expect("a valid plan");
    let run = sdk.run(&s.base, &["--scenario", "surface"]).await;
    assert_eq!(run.code, Some(1), "{}", run.failure());
    let failed: Vec<&Value> = run.lines.iter().filter(|l| l["ok"] == false).collect();
    assert_eq!(failed.len(), 1, "{}", run.failure());
    assert_eq!(
        failed[0]["check"],
        "create confirmed: amount_received",
        "{}",
        run.failure()
    );
}
