//! The standalone binary: invalid files exit 3 naming the defect; a good start prints its address.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

#[test]
fn invalid_scripts_and_plans_exit_3_naming_the_defect() {
    let dir = tempfile::tempdir().expect("tempdir");
    let scripts = dir.path().join("scripts.json");
    std::fs::write(
        &scripts,
        r#"{"rules": [{"objective_contains": "x", "script": {"steps": [{"id": "a", "kind": "sleep", "ms": 1, "after": ["b"]}, {"id": "b", "kind": "sleep", "ms": 1, "after": ["a"]}]}}]}"#,
    )
    .expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_fake-hermes"))
        .arg("--scripts")
        .arg(&scripts)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cycle: a -> b -> a"), "{err}");
    let plan = dir.path().join("plan.json");
    std::fs::write(
        &plan,
        r#"{"rules": [{"route": "status", "fault": {"type": "stop_stuck"}}]}"#,
    )
    .expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_fake-hermes"))
        .arg("--faults")
        .arg(&plan)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("rules[0].route"));
}

#[test]
fn it_prints_its_address_and_answers_health() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_fake-hermes"))
        .args(["--listen", "127.0.0.1:0", "--mode", "newer"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("read");
    let addr = line
        .trim()
        .strip_prefix("listening http://")
        .expect("address")
        .to_string();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("rt");
    let status = rt.block_on(async {
        reqwest::get(format!("http://{addr}/health"))
            .await
            .map(|r| r.status().as_u16())
    });
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(status.expect("health"), 200);
}
