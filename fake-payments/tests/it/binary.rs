//! The standalone binary: bad configuration and fault files are refused with exit 3 naming the
//! defect; a good start prints the address it listens on and serves.

use fake_control::testing::{get_json, run_with_file, spawn_binary};

const EXE: &str = env!("CARGO_BIN_EXE_fake-payments");

#[test]
fn invalid_files_exit_3_and_name_the_defect() {
    let (code, err) = run_with_file(
        EXE,
        "--config",
        "config.json",
        r#"{"accounts": [], "control_token": "short"}"#,
    );
    assert_eq!(code, Some(3));
    assert!(
        err.contains("accounts:") && err.contains("control_token:"),
        "{err}"
    );
    let (code, err) = run_with_file(
        EXE,
        "--faults",
        "plan.json",
        r#"{"rules": [{"op": "create", "fault": {"type": "reject", "status": 200}}]}"#,
    );
    assert_eq!(code, Some(3));
    assert!(err.contains("rules[0].fault.status"), "{err}");
    let (code, err) = run_with_file(
        EXE,
        "--faults",
        "plan.json",
        "{\n  \"rules\": [\n    {\"op\": \"explode\"}\n  ]\n}",
    );
    assert_eq!(code, Some(3));
    assert!(err.contains("plan.json:3:"), "{err}");
}

#[test]
fn it_prints_its_address_and_serves_the_profile() {
    let (mut child, addr) = spawn_binary(EXE, &["--listen", "127.0.0.1:0"]);
    let (status, body) = get_json(&format!("http://{addr}/v1/profile"));
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(status, 200);
    assert_eq!(body["profile"]["id"], "fake-payments");
    assert!(
        body["digest"]
            .as_str()
            .is_some_and(|d| d.starts_with("sha256:"))
    );
}
