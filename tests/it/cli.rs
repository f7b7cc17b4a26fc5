//! The binary's inputs and exit codes: every bad input names the file, field and fix.

use crate::support;

use std::process::Command;

fn aocheck(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_aocheck"))
        .args(args)
        .env_remove("AOCHECK_STORE")
        .output()
        .expect("run aocheck");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_valid_profile_prints_its_digest() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = dir.path().join("profile.json");
    std::fs::write(
        &f,
        serde_json::to_vec_pretty(&support::profile()).expect("json"),
    )
    .expect("write");
    let (code, out, err) = aocheck(&["profile", f.to_str().expect("utf8")]);
    assert_eq!(code, 0, "{err}");
    let digest = support::profile().digest().expect("digest").to_string();
    assert!(out.contains(&digest), "{out}");
}

#[test]
fn an_incomplete_profile_names_every_missing_field_and_exits_3() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = dir.path().join("profile.json");
    let mut p = support::profile();
    p.status_sources.clear();
    p.lookup_key = String::new();
    std::fs::write(&f, serde_json::to_vec(&p).expect("json")).expect("write");
    let (code, _, err) = aocheck(&["profile", f.to_str().expect("utf8")]);
    assert_eq!(code, 3);
    assert!(
        err.contains("profile.json")
            && err.contains("`status_sources`")
            && err.contains("`lookup_key`"),
        "{err}"
    );
}

#[test]
fn malformed_json_names_line_and_column() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = dir.path().join("bad.json");
    std::fs::write(&f, "{\n  \"id\": \"x\",\n  \"version\": 3\n}").expect("write");
    let (code, _, err) = aocheck(&["profile", f.to_str().expect("utf8")]);
    assert_eq!(code, 3);
    assert!(err.contains("bad.json:3:"), "{err}");
}

#[test]
fn a_bad_store_spec_says_how_to_write_one() {
    let (code, _, err) = aocheck(&["store", "--store", "mysql://x"]);
    assert_eq!(code, 3);
    assert!(err.contains("sqlite:PATH"), "{err}");
}

#[test]
fn an_unknown_occurrence_is_invalid_input_and_an_empty_store_lists_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = format!("sqlite:{}", dir.path().join("a.db").display());
    let (code, out, err) = aocheck(&["store", "--store", &db]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("0 occurrence(s)"), "{out}");
    let (code, _, err) = aocheck(&["verify-history", "--store", &db, "occ_missing"]);
    assert_eq!(code, 3);
    assert!(err.contains("occ_missing"), "{err}");
}

#[test]
fn a_report_verifies_with_its_key_and_fails_with_exit_5_under_another() {
    let root = env!("CARGO_MANIFEST_DIR");
    let env = format!("{root}/reports/examples/report.dsse.json");
    let (code, out, err) = aocheck(&[
        "verify",
        &env,
        "--key",
        &format!("{root}/reports/examples/signing-key.pub.pem"),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("verified"));
    let dir = tempfile::tempdir().expect("tempdir");
    let key = dir.path().join("k.pem");
    let (code, _, err) = aocheck(&["keygen", key.to_str().expect("utf8")]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = aocheck(&["keygen", key.to_str().expect("utf8")]);
    assert_eq!(code, 3, "keygen refuses to overwrite a key: {err}");
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = |p: &std::path::Path| {
            std::fs::metadata(p).expect("key file").permissions().mode() & 0o777
        };
        assert_eq!(mode(&key), 0o600, "the private key is the owner's alone");
        // A public key alone is not overwritten either; --force replaces the pair.
        let lone = dir.path().join("lone.pem");
        std::fs::write(dir.path().join("lone.pem.pub"), "mine").expect("write");
        let (code, _, err) = aocheck(&["keygen", lone.to_str().expect("utf8")]);
        assert_eq!(code, 3, "{err}");
        assert!(err.contains("lone.pem.pub"), "{err}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("lone.pem.pub")).expect("pub"),
            "mine"
        );
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let (code, _, err) = aocheck(&["keygen", "--force", key.to_str().expect("utf8")]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(mode(&key), 0o600, "a replaced key is the owner's alone too");
        // A key others can read is refused for signing, naming the fix.
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o640)).expect("chmod");
        let out = dir.path().join("o");
        let (code, _, err) = aocheck(&[
            "run",
            "--case",
            "AOC-CASE-001",
            "--store",
            "memory",
            "--out",
            out.to_str().expect("utf8"),
            "--sign",
            key.to_str().expect("utf8"),
        ]);
        assert_eq!(code, 3, "{err}");
        assert!(err.contains("chmod 600"), "{err}");
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    }
    let (code, _, err) = aocheck(&["verify", &env, "--key", &format!("{}.pub", key.display())]);
    assert_eq!(code, 5);
    assert!(err.contains("NOT verified"));
}

#[test]
fn sut_runs_refuse_what_cannot_work_and_say_what_would() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    let out = out.to_str().expect("utf-8 path");
    // Processes cannot share a memory store.
    let (code, _, err) = aocheck(&["run", "--out", out, "--store", "memory", "--sut", "x"]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("postgres:URL"), "{err}");
    // An empty command names what is wanted.
    let (code, _, err) = aocheck(&["run", "--out", out, "--sut", " "]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("aocheck-sut/2"), "{err}");
    // An unknown variant lists the real ones.
    let (code, _, err) = aocheck(&["sut", "reference", "--variant", "nope"]);
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains("replay_unknown") && err.contains("accept_prose"),
        "{err}"
    );
}

#[test]
fn the_reference_server_answers_a_request_before_init_with_an_error() {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_aocheck"))
        .args(["sut", "reference"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(b"{\"id\":1,\"op\":\"state\",\"occurrence\":\"o\"}\n")
        .expect("write");
    drop(stdin);
    let out = child.wait_with_output().expect("wait");
    let text = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value = serde_json::from_str(text.trim()).expect("one JSON line");
    assert_eq!(v["id"], 1);
    assert_eq!(v["error"]["kind"], "invalid");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("before init"),
        "{v}"
    );
    assert_eq!(out.status.code(), Some(0));
}

/// Exit codes as documented (`src/exit.rs`, README): a declared fault that never fired and an
/// implementation speaking another protocol version leave the case undecided (2); an
/// implementation that hangs is unreachable (4); a conforming run is 0.
#[test]
fn undecided_cases_exit_2_and_unreachable_implementations_exit_4() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cases = dir.path().join("cases");
    std::fs::create_dir_all(&cases).expect("mkdir");
    // A refund fault the steps never reach: the case did not exercise what it claims.
    std::fs::write(
        cases.join("X-UNFIRED.yaml"),
        "id: X-UNFIRED\ntitle: a fault that never fires\nrequirements: [AOC-REQ-010]\nsteps:\n  - {do: provider_fault, op: refund, fault: {type: reject, status: 503}}\n  - {do: join, executor: e1}\n  - {do: create, occurrence: o1}\n  - {do: reserve, occurrence: o1}\n  - {do: execute, occurrence: o1}\nexpect:\n  occurrences:\n    o1: {state: resolved, entry_attempts: 1, provider_effects: 1}\n",
    )
    .expect("write");
    let run = |extra: &[&str], out: &str| {
        let out_dir = dir.path().join(out);
        let mut args = vec![
            "run",
            "--cases",
            cases.to_str().expect("utf8"),
            "--out",
            out_dir.to_str().expect("utf8"),
        ];
        args.extend_from_slice(extra);
        let (code, stdout, stderr) = aocheck(&args);
        let report: serde_json::Value = std::fs::read_to_string(out_dir.join("report.json"))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default();
        (code, report, format!("{stdout}{stderr}"))
    };
    let (code, report, text) = run(&[], "unfired");
    assert_eq!(code, 2, "{text}");
    assert_eq!(report["cases"][0]["verdict"], "harness_error", "{text}");
    assert_eq!(report["cases"][0]["harness_cause"], "undecided");
    // The reason is on the console and in the summary, not only in report.json.
    assert!(text.contains("        why: declared fault"), "{text}");
    let summary =
        std::fs::read_to_string(dir.path().join("unfired").join("summary.md")).expect("summary");
    assert!(summary.contains("  - harness: declared fault"), "{summary}");

    let script = |name: &str, body: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, body).expect("write");
        format!("python3 '{}'", p.display())
    };
    let old = script(
        "old.py",
        "import json, sys\nfor line in sys.stdin:\n    req = json.loads(line)\n    print(json.dumps({\"id\": req[\"id\"], \"ok\": {\"protocol\": \"aocheck-sut/0\", \"name\": \"old\", \"version\": \"0\", \"operations\": []}}), flush=True)\n",
    );
    let (code, report, text) = run(&["--sut", &old], "version");
    assert_eq!(code, 2, "{text}");
    assert_eq!(report["cases"][0]["harness_cause"], "undecided", "{text}");

    let hang = script(
        "hang.py",
        "import sys, time\nsys.stdin.readline()\ntime.sleep(60)\n",
    );
    let (code, report, text) = run(&["--sut", &hang, "--sut-timeout", "1"], "hang");
    assert_eq!(code, 4, "{text}");
    assert_eq!(report["cases"][0]["harness_cause"], "unreachable", "{text}");
}

/// `--timeout` bounds the whole run: an implementation that never answers (here within each
/// request's own 10 s deadline) is cut off at the run's deadline with exit 6 (incomplete), a
/// message that says how far the run got, and the report of what ended (here nothing: both cases
/// `not_run`); its process does not outlive the run.
#[test]
fn a_run_past_its_timeout_exits_6_reports_and_says_how_far_it_got() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tag = format!("sleep {}", 40_000 + std::process::id() % 10_000);
    let started = std::time::Instant::now();
    let (code, _, err) = aocheck(&[
        "run",
        "--case",
        "AOC-CASE-001",
        "--case",
        "AOC-CASE-002",
        "--sut",
        &tag,
        "--timeout",
        "2",
        "--out",
        dir.path().to_str().expect("utf8"),
    ]);
    assert_eq!(code, 6, "{err}");
    assert!(
        err.contains("did not finish within --timeout 2 s") && err.contains("0 of 2 case(s) ended"),
        "{err}"
    );
    // A guard against a run that ignores its deadline, not a speed target.
    assert!(started.elapsed() < std::time::Duration::from_secs(15));
    let r: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.path().join("report.json")).expect("the partial report"),
    )
    .expect("json");
    assert!(r["incomplete"].is_string(), "{r:#}");
    assert!(
        r["cases"]
            .as_array()
            .expect("cases")
            .iter()
            .all(|c| c["verdict"] == "not_run"),
        "{r:#}"
    );
    std::thread::sleep(std::time::Duration::from_millis(200));
    let alive = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| {
            std::fs::read(e.path().join("cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).replace('\0', " ").trim() == tag)
        });
    assert!(!alive, "{tag} outlived the run");
}

/// A backticked token of the README's tables, as a repository path: `None` for what is not one
/// (a placeholder, a glob, a route, Rust or shell text). A trailing `:` or `(...)` is not part of
/// the path.
fn repository_path(token: &str) -> Option<&str> {
    if token.contains(['<', '{', '*']) {
        return None;
    }
    let t = token.split('(').next().unwrap_or(token);
    let t = t.trim_end_matches(':');
    let path_chars = t
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "_-./".contains(c));
    let looks_like_path = t.contains('/')
        || [".rs", ".md", ".yaml", ".json", ".py", ".toml"]
            .iter()
            .any(|e| t.ends_with(e));
    // A leading `/` is a route (`/_control`), not a file of this repository.
    (path_chars && looks_like_path && !t.is_empty() && !t.starts_with('/')).then_some(t)
}

/// README's "Adding things" table names the files to touch and the tests that check them: every
/// path it names exists, so the table cannot rot silently when a file moves.
#[test]
fn the_readme_adding_things_table_names_paths_that_exist() {
    // The reading itself: what is a path and what is not.
    assert_eq!(
        repository_path("tests/it/broken.rs"),
        Some("tests/it/broken.rs")
    );
    assert_eq!(repository_path("src/app/"), Some("src/app/"));
    assert_eq!(repository_path("src/vocab.rs:"), Some("src/vocab.rs"));
    assert_eq!(
        repository_path("src/cli.rs(write_reports)"),
        Some("src/cli.rs")
    );
    for not_a_path in [
        "self.sut.call(To::Executor(who), Request::…)",
        "aocheck cases check",
        "cases/<area>/<ID>.yaml",
        "/_control",
        "fake_control::testing",
        "Plane",
    ] {
        assert_eq!(repository_path(not_a_path), None, "{not_a_path}");
    }

    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let start = readme
        .find("\n## Adding things")
        .expect("README.md has a section \"## Adding things\"");
    let section = &readme[start + 1..];
    let section = match section[3..].find("\n## ") {
        Some(end) => &section[..end + 3],
        None => section,
    };
    let mut checked = 0;
    // The table's rows and the provider checklist's numbered lines.
    for row in section.lines().filter(|l| {
        l.starts_with('|')
            || l.split_once(". ")
                .is_some_and(|(n, _)| n.parse::<u32>().is_ok())
    }) {
        // Backticked tokens are the odd pieces between backticks.
        for token in row.split('`').skip(1).step_by(2) {
            let Some(path) = repository_path(token) else {
                continue;
            };
            assert!(
                root.join(path).exists(),
                "README.md \"## Adding things\" names `{token}`, but {path} does not exist in \
                 the repository (row: {row})"
            );
            checked += 1;
        }
    }
    assert!(
        checked >= 10,
        "the \"## Adding things\" table names only {checked} paths: was it found?"
    );
}

/// `aocheck --version` names the version and the git commit the binary was built from (the
/// commit of this checkout, when it is one).
#[test]
fn the_version_names_the_commit() {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_aocheck"))
        .arg("--version")
        .output()
        .expect("aocheck runs");
    assert_eq!(o.status.code(), Some(0));
    let said = String::from_utf8_lossy(&o.stdout).trim().to_string();
    let head = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    let commit = head.unwrap_or_else(|| "unknown".into());
    assert_eq!(
        said,
        format!("aocheck {} (commit {commit})", env!("CARGO_PKG_VERSION"))
    );
}

/// A crash at a hold lands only if the provider committed *the request that hold parked* with
/// nobody left to answer. A second crash whose held request the provider rejects did not land,
/// even though the first crash's `client_gone` is in the ledger: the case is undecided (exit 2),
/// never a pass. The same case with the second request committed passes.
#[test]
fn a_crash_at_a_hold_lands_only_on_its_own_request() {
    let dir = tempfile::tempdir().expect("tempdir");
    let case = |id: &str, end: &str| {
        format!(
            "id: {id}\ntitle: a second crash at a hold\nrequirements: [AOC-REQ-010]\nsteps:\n  - {{do: join, executor: e1}}\n  - {{do: create, occurrence: o1}}\n  - {{do: reserve, occurrence: o1}}\n  - {{do: provider_fault, op: create, fault: {{type: hold, name: first}}}}\n  - {{do: enter, occurrence: o1}}\n  - {{do: send, occurrence: o1, background: true}}\n  - {{do: crash, executor: e1, at_hold: first}}\n  - {{do: provider_release, hold: first}}\n  - {{do: replace, executor: e2}}\n  - {{do: adopt, occurrence: o1}}\n  - {{do: create, occurrence: o2}}\n  - {{do: reserve, occurrence: o2}}\n  - {{do: provider_fault, op: create, fault: {{type: hold, name: second}}}}\n  - {{do: enter, occurrence: o2}}\n  - {{do: send, occurrence: o2, background: true}}\n  - {{do: crash, executor: e2, at_hold: second}}\n  - {{do: provider_release, hold: second{end}}}\n"
        )
    };
    for (id, end, code) in [("LAND-REJ", ", reject: 503", 2), ("LAND-COM", "", 0)] {
        let file = dir.path().join(format!("{id}-x.yaml"));
        std::fs::write(&file, case(id, end)).expect("write");
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_aocheck"))
            .args(["run", "--store", "memory", "--cases"])
            .arg(&file)
            .arg("--out")
            .arg(dir.path().join(id))
            .output()
            .expect("aocheck runs");
        let said = String::from_utf8_lossy(&o.stdout);
        assert_eq!(o.status.code(), Some(code), "{id}: {said}");
        assert_eq!(
            said.contains("crash of e2 at hold second: no effect was committed"),
            code == 2,
            "{id}: {said}"
        );
    }
}
