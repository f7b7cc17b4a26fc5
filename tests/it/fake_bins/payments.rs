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

/// Out of file descriptors (`ulimit -n 40`, then a hundred idle connections), the server keeps
/// going: the failed accepts are logged and retried, and once the connections close it serves
/// again. (It used to exit on the first failed accept.)
#[test]
fn running_out_of_file_descriptors_does_not_stop_the_server() {
    let script = format!("ulimit -n 40 && exec '{EXE}' --listen 127.0.0.1:0");
    let (mut child, addr) = spawn_binary("sh", &["-c", &script]);
    let mut idle = Vec::new();
    for _ in 0..100 {
        if let Ok(s) = std::net::TcpStream::connect(&addr) {
            idle.push(s);
        }
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(
        child.try_wait().expect("try_wait").is_none(),
        "the server exited when it ran out of descriptors"
    );
    drop(idle);
    // The idle connections close; the backoff (at most 1 s) lets the server accept again.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let (status, body) = get_json(&format!("http://{addr}/v1/profile"));
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(status, 200, "{body}");
}
