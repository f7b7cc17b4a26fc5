//! The standalone binary: bad configuration and fault files are refused with exit 3 naming the
//! defect; a good start prints the address it listens on and serves.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

#[test]
fn invalid_files_exit_3_and_name_the_defect() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path().join("config.json");
    std::fs::write(&cfg, r#"{"accounts": [], "control_token": "short"}"#).expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_fake-payments"))
        .arg("--config")
        .arg(&cfg)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("accounts:") && err.contains("control_token:"),
        "{err}"
    );

    let plan = dir.path().join("plan.json");
    std::fs::write(
        &plan,
        r#"{"rules": [{"op": "create", "fault": {"type": "reject", "status": 200}}]}"#,
    )
    .expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_fake-payments"))
        .arg("--faults")
        .arg(&plan)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("rules[0].fault.status"));

    std::fs::write(
        &plan,
        "{\n  \"rules\": [\n    {\"op\": \"explode\"}\n  ]\n}",
    )
    .expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_fake-payments"))
        .arg("--faults")
        .arg(&plan)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(3));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("plan.json:3:"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn it_prints_its_address_and_serves_the_profile() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_fake-payments"))
        .args(["--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).expect("read");
    let addr = line
        .trim()
        .strip_prefix("listening http://")
        .expect("address line")
        .to_string();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("rt");
    let body: serde_json::Value = rt
        .block_on(async {
            reqwest::get(format!("http://{addr}/v1/profile"))
                .await?
                .json()
                .await
        })
        .expect("profile");
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(body["profile"]["id"], "fake-payments");
    assert!(
        body["digest"]
            .as_str()
            .is_some_and(|d| d.starts_with("sha256:"))
    );
}
