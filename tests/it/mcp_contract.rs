//! The official MCP clients against fake-mcp over Streamable HTTP (issue 42): PyPI's `mcp` 2.3.0
//! (`tests/sdk/mcp_contract.py`) and npm's `@modelcontextprotocol/sdk` 1.32.2
//! (`tests/sdk/mcp_contract.mjs`, pinned by `tests/sdk/package-lock.json`), each run as a
//! process: `initialize`, `tools/list` and a `tools/call` of every tool, what the client makes of
//! each fault, a restart; then fake-mcp's ground-truth ledger, which says what really happened
//! behind each reply (an effect made whose reply never came; an error answered after an effect;
//! a refusal that made nothing).
//!
//! A missing or different client fails this test, never skips it: `scripts/test` installs both.

use fake_mcp::Handle;
use provider_model::mcp::faults::{Fault, Rule};
use provider_model::mcp::ledger::Reply;
use provider_model::mcp::tools::default_tools;
use rstest::rstest;
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;

fn rule(tool: &str, fault: Fault, nth: u32) -> Rule {
    Rule {
        tool: Some(tool.into()),
        fault,
        nth,
        times: 1,
    }
}

/// Runs the contract script of `sdk` against `url`: its JSON lines by step.
async fn client(sdk: &str, url: &str, token: &str) -> BTreeMap<String, Value> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sdk");
    let (program, script) = match sdk {
        "python" => ("python3", dir.join("mcp_contract.py")),
        _ => ("node", dir.join("mcp_contract.mjs")),
    };
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(program)
            .arg(&script)
            .arg(url)
            .arg(token)
            .current_dir(&dir)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the client finished within 120 s")
    .unwrap_or_else(|e| panic!("{program} runs: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the {sdk} MCP client failed ({:?}); run the README's test command, which installs tests/requirements.txt and tests/sdk/package-lock.json:\n{stdout}\n{stderr}",
        out.status
    );
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|v| (v["step"].as_str().unwrap_or_default().to_string(), v))
        .collect()
}

#[rstest]
#[case("python")]
#[case("node")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_official_client_drives_every_tool_and_fault(#[case] sdk: &str) {
    let token = format!("ctl_{}", uuid::Uuid::new_v4().simple());
    let h =
        Handle::with_control(default_tools(), token.clone()).expect("the default tools are valid");
    for r in [
        rule("send_message", Fault::CommitThenDrop, 2),
        rule("create_payment", Fault::ErrorAfterCommit, 2),
        rule("create_payment", Fault::RpcErrorAfterCommit, 3),
        rule("create_payment", Fault::Refuse, 4),
        rule("write_record", Fault::Slow { ms: 300 }, 1),
    ] {
        h.add_rule(r).expect("a valid rule");
    }
    let (url, task) = fake_mcp::start(&h).await.expect("fake-mcp serves");
    let steps = client(sdk, &url, &token).await;
    // The control API answers only with its token, and says what the handle says.
    let ledger_url = url.replace("/mcp", "/_control/ledger");
    let http = reqwest::Client::new();
    let anon = http
        .get(&ledger_url)
        .send()
        .await
        .expect("fake-mcp answers");
    assert_eq!(anon.status().as_u16(), 401);
    let told: provider_model::mcp::ledger::Ledger = http
        .get(&ledger_url)
        .bearer_auth(&token)
        .send()
        .await
        .expect("fake-mcp answers")
        .json()
        .await
        .expect("a ledger");
    assert_eq!(told, h.ledger());
    task.abort();
    let step = |s: &str| {
        steps
            .get(s)
            .unwrap_or_else(|| panic!("{sdk}: no step {s}: {steps:?}"))
    };
    // The handshake and the tool list, as the client parsed them.
    assert_eq!(step("initialize")["server"], "fake-mcp");
    assert_eq!(step("initialize")["tools"], true);
    let listed: Vec<&str> = step("tools/list")["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(
        listed,
        [
            "send_message",
            "create_payment",
            "write_record",
            "lookup",
            "list_effects"
        ]
    );
    assert_eq!(
        step("tools/list")["tools"][0]["required"],
        serde_json::json!(["text", "to"])
    );
    // What the client saw of each call.
    assert_eq!(step("send_message#1")["content"][0]["effect"], "eff_1");
    assert_eq!(step("send_message#2")["outcome"], "no_reply");
    assert_eq!(step("create_payment#1")["is_error"], false);
    assert_eq!(step("create_payment#2")["is_error"], true);
    assert_eq!(step("create_payment#3")["outcome"], "rpc_error");
    assert_eq!(step("create_payment#3")["code"], -32603);
    assert_eq!(step("create_payment#4")["is_error"], true);
    assert!(step("write_record#1")["seconds"].as_f64().unwrap_or(0.0) >= 0.3);
    // A lookup finds the effect whose reply was lost; the refused call made none.
    assert_eq!(
        step("lookup m2")["content"][0]["found"][0]["effect"],
        "eff_2"
    );
    assert_eq!(
        step("lookup p4")["content"][0]["found"],
        serde_json::json!([])
    );
    assert_eq!(step("unknown tool")["code"], -32602);
    // The ground truth behind the replies.
    let l = h.ledger();
    let replies: Vec<(String, Reply, bool)> = l
        .calls
        .iter()
        .map(|c| (c.tool.clone(), c.reply, c.effect.is_some()))
        .collect();
    let want = [
        ("send_message", Reply::Answered, true),
        ("send_message", Reply::Dropped, true),
        ("create_payment", Reply::Answered, true),
        ("create_payment", Reply::ToolError, true),
        ("create_payment", Reply::RpcError, true),
        ("create_payment", Reply::ToolError, false),
        ("write_record", Reply::Answered, true),
    ];
    for (i, (tool, reply, effect)) in want.iter().enumerate() {
        assert_eq!(
            replies.get(i),
            Some(&(tool.to_string(), *reply, *effect)),
            "{sdk} call {i}: {replies:?}"
        );
    }
    // A restart forgets the session (its next call fails, and made nothing) and keeps the
    // effects (a new session finds the one whose reply was lost).
    assert_eq!(step("restart")["body"]["effects_kept"], 6);
    let old = step("after restart, old session");
    assert_ne!(old["outcome"], "result", "{old}");
    assert_eq!(
        step("after restart, new session")["content"][0]["found"][0]["effect"],
        "eff_2"
    );
    assert_eq!(l.effects.len(), 6, "{:?}", l.effects);
    // Keys as declared: an argument (send_message) and `_meta` (create_payment).
    assert_eq!(l.effects[1].key.as_deref(), Some("m2"));
    assert_eq!(l.effects[2].key.as_deref(), Some("p1"));
    assert!(l.calls.iter().all(|c| c.session.is_some()), "{:?}", l.calls);
    assert!(h.rules().iter().all(|r| r.fired == 1), "{:?}", h.rules());
}

/// The stdio transport: PyPI's client starts `fake-mcp --stdio` itself and drives it through a
/// lost reply (no result ever comes over the pipe) and an error after commit; the ledger, read
/// over the control API, holds both effects, each call with no session id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_client_drives_fake_mcp_over_stdio() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plan = dir.path().join("plan.json");
    let rules = serde_json::json!({"rules": [
        rule("send_message", Fault::CommitThenDrop, 2),
        rule("create_payment", Fault::ErrorAfterCommit, 1),
    ]});
    std::fs::write(&plan, rules.to_string()).expect("write the plan");
    let token = format!("ctl_{}", uuid::Uuid::new_v4().simple());
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sdk/mcp_stdio.py");
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new("python3")
            .arg(&script)
            .arg(env!("CARGO_BIN_EXE_fake-mcp"))
            .arg(&plan)
            .arg(&token)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the client finished within 120 s")
    .expect("python3 runs");
    let said = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{said}");
    let steps: BTreeMap<String, Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|v| (v["step"].as_str().unwrap_or_default().to_string(), v))
        .collect();
    let step = |s: &str| {
        steps
            .get(s)
            .unwrap_or_else(|| panic!("no step {s}: {said}"))
    };
    assert_eq!(step("initialize")["server"], "fake-mcp");
    assert_eq!(step("send_message#1")["outcome"], "result");
    assert_eq!(step("send_message#2")["outcome"], "no_reply");
    assert_eq!(step("create_payment#1")["is_error"], true);
    assert!(
        step("lookup m2")["text"][0]
            .as_str()
            .unwrap_or_default()
            .contains("eff_2"),
        "{said}"
    );
    let l: provider_model::mcp::ledger::Ledger =
        serde_json::from_value(step("ledger")["ledger"].clone()).expect("a ledger");
    let replies: Vec<(&str, Reply, bool)> = l
        .calls
        .iter()
        .map(|c| (c.tool.as_str(), c.reply, c.effect.is_some()))
        .collect();
    assert_eq!(
        replies[..3],
        [
            ("send_message", Reply::Answered, true),
            ("send_message", Reply::Dropped, true),
            ("create_payment", Reply::ToolError, true),
        ],
        "{replies:?}"
    );
    assert!(l.calls.iter().all(|c| c.session.is_none()), "{:?}", l.calls);
}
