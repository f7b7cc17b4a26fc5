//! The standalone binary: invalid files exit 3 naming the defect; a good start prints its address.

use fake_control::testing::{get_json, run_with_file, spawn_binary};

const EXE: &str = env!("CARGO_BIN_EXE_fake-hermes");

#[test]
fn invalid_scripts_and_plans_exit_3_naming_the_defect() {
    let (code, err) = run_with_file(
        EXE,
        "--scripts",
        "scripts.json",
        r#"{"rules": [{"objective_contains": "x", "script": {"steps": [{"id": "a", "kind": "sleep", "ms": 1, "after": ["b"]}, {"id": "b", "kind": "sleep", "ms": 1, "after": ["a"]}]}}]}"#,
    );
    assert_eq!(code, Some(3));
    assert!(err.contains("cycle: a -> b -> a"), "{err}");
    let (code, err) = run_with_file(
        EXE,
        "--faults",
        "plan.json",
        r#"{"rules": [{"route": "status", "fault": {"type": "stop_stuck"}}]}"#,
    );
    assert_eq!(code, Some(3));
    assert!(err.contains("rules[0].route"), "{err}");
}

#[test]
fn it_prints_its_address_and_answers_health() {
    let (mut child, addr) = spawn_binary(EXE, &["--listen", "127.0.0.1:0", "--mode", "newer"]);
    let (status, _) = get_json(&format!("http://{addr}/health"));
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(status, 200);
}
