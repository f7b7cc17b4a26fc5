//! The standalone binary: invalid tools or plans exit 3 naming the defect; a good start prints
//! its address, and its control API answers only its token.

use fake_control::testing::{get_json, run_with_file, spawn_binary};

const EXE: &str = env!("CARGO_BIN_EXE_fake-mcp");

#[test]
fn invalid_tools_and_plans_exit_3_naming_the_defect() {
    let (code, err) = run_with_file(EXE, "--config", "tools.json", "[]");
    assert_eq!(code, Some(3));
    assert!(err.contains("tools:"), "{err}");
    let (code, err) = run_with_file(
        EXE,
        "--faults",
        "plan.json",
        r#"{"rules": [{"tool": "send_message", "fault": {"type": "refuse"}, "nth": 0}]}"#,
    );
    assert_eq!(code, Some(3));
    assert!(err.contains("nth"), "{err}");
    let (code, err) = run_with_file(
        EXE,
        "--faults",
        "plan.json",
        r#"{"rules": [{"fault": {"type": "explode"}}]}"#,
    );
    assert_eq!(code, Some(3));
    assert!(err.contains("plan.json:1:"), "{err}");
}

#[test]
fn it_prints_its_address_and_its_ledger_answers_only_its_token() {
    let (mut child, addr) =
        spawn_binary(EXE, &["--listen", "127.0.0.1:0", "--control-token", "t0k"]);
    let (refused, _) = get_json(&format!("http://{addr}/_control/ledger"));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let ledger: serde_json::Value = rt.block_on(async {
        reqwest::Client::new()
            .get(format!("http://{addr}/_control/ledger"))
            .bearer_auth("t0k")
            .send()
            .await
            .expect("request")
            .json()
            .await
            .expect("json")
    });
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(refused, 401);
    assert_eq!(ledger, serde_json::json!({"calls": [], "effects": []}));
}
