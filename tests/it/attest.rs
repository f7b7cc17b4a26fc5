//! Signed runs an auditor can re-check (issue 24): one statement over every file of the run,
//! verified here and by an independent DSSE implementation (PyPI's securesystemslib, with keys
//! read by PyPI's cryptography and by OpenSSL), both ways; and nothing secret in any output.

use crate::support::{aocheck_bin as aocheck, said as text, utf8};
use std::path::Path;
use std::process::{Command, Output};

/// Whether the predicate of the envelope at `envelope` satisfies `docs/schemas/<schema>`
/// (checked by PyPI's jsonschema, an independent validator).
pub fn predicate_satisfies(envelope: &Path, schema: &str) -> Result<(), String> {
    let schema = format!("{}/docs/schemas/{schema}", env!("CARGO_MANIFEST_DIR"));
    let o = Command::new("python3")
        .args([
            "-c",
            "import base64, json, sys, jsonschema; e = json.load(open(sys.argv[1])); st = json.loads(base64.b64decode(e['payload'])); jsonschema.validate(st['predicate'], json.load(open(sys.argv[2])))",
            utf8(envelope),
            &schema,
        ])
        .output()
        .expect("python3");
    if o.status.success() {
        Ok(())
    } else {
        Err(text(&o))
    }
}

fn python(args: &[&str]) -> Output {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/it/scripts/dsse_independent.py"
    );
    Command::new("python3")
        .arg(script)
        .args(args)
        .output()
        .expect("python3")
}

/// A signed run: its folder verifies with aocheck and with securesystemslib; a changed byte, a
/// file added or removed, and a stale envelope are each named; an envelope Python signs over
/// the folder verifies with aocheck, and with another key it does not.
#[test]
fn a_signed_run_is_checked_by_us_and_by_someone_else() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = dir.path().join("k.pem");
    let pubk = dir.path().join("k.pem.pub");
    assert_eq!(aocheck(&["keygen", utf8(&key)]).status.code(), Some(0));
    let out = dir.path().join("run");
    let r = aocheck(&[
        "run",
        "--case",
        "AOC-CASE-001",
        "--case",
        "AOC-CASE-003",
        "--store",
        "memory",
        "--out",
        utf8(&out),
        "--sign",
        utf8(&key),
    ]);
    assert_eq!(r.status.code(), Some(0), "{}", text(&r));
    let ok = aocheck(&["verify", utf8(&out), "--key", utf8(&pubk)]);
    assert_eq!(ok.status.code(), Some(0), "{}", text(&ok));
    assert!(text(&ok).contains("exactly as signed"), "{}", text(&ok));
    let theirs = python(&["verify", utf8(&out), "report.dsse.json", utf8(&pubk)]);
    assert!(
        theirs.status.success(),
        "securesystemslib: {}",
        text(&theirs)
    );
    assert!(text(&theirs).contains("conformance-run/v1"));
    predicate_satisfies(
        &out.join("report.dsse.json"),
        "conformance-run-v1.schema.json",
    )
    .expect("the predicate satisfies its documented schema");
    // The statement names every report format.
    let env: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("report.dsse.json")).expect("env"))
            .expect("json");
    assert!(
        env["signatures"][0]["keyid"]
            .as_str()
            .is_some_and(|k| k.starts_with("sha256:") && k.len() == 71)
    );
    // One changed byte in report.html: both verifiers name it.
    let page = out.join("report.html");
    let mut bytes = std::fs::read(&page).expect("page");
    bytes[20] ^= 1;
    std::fs::write(&page, &bytes).expect("write");
    let bad = aocheck(&["verify", utf8(&out), "--key", utf8(&pubk)]);
    assert_eq!(bad.status.code(), Some(5));
    assert!(
        text(&bad).contains("changed: report.html"),
        "{}",
        text(&bad)
    );
    let theirs = python(&["verify", utf8(&out), "report.dsse.json", utf8(&pubk)]);
    assert!(!theirs.status.success());
    assert!(text(&theirs).contains("report.html"), "{}", text(&theirs));
    bytes[20] ^= 1;
    std::fs::write(&page, &bytes).expect("write back");
    // A file removed, and one added.
    let sarif = std::fs::read(out.join("report.sarif")).expect("sarif");
    std::fs::remove_file(out.join("report.sarif")).expect("rm");
    std::fs::write(out.join("extra.txt"), "x").expect("write");
    let bad = aocheck(&["verify", utf8(&out), "--key", utf8(&pubk)]);
    assert_eq!(bad.status.code(), Some(5));
    let said = text(&bad);
    assert!(
        said.contains("missing: report.sarif") && said.contains("not signed: extra.txt"),
        "{said}"
    );
    std::fs::write(out.join("report.sarif"), sarif).expect("write back");
    std::fs::remove_file(out.join("extra.txt")).expect("rm");
    // A stale envelope: an unsigned run into the same folder removes the old envelope, and an
    // old envelope copied back beside the new files does not verify.
    let old = std::fs::read(out.join("report.dsse.json")).expect("env");
    let r = aocheck(&[
        "run",
        "--case",
        "AOC-CASE-001",
        "--store",
        "memory",
        "--out",
        utf8(&out),
    ]);
    assert_eq!(r.status.code(), Some(0), "{}", text(&r));
    assert!(
        !out.join("report.dsse.json").exists(),
        "a stale envelope was left"
    );
    std::fs::write(out.join("report.dsse.json"), old).expect("write");
    let bad = aocheck(&["verify", utf8(&out), "--key", utf8(&pubk)]);
    assert_eq!(bad.status.code(), Some(5), "{}", text(&bad));
    assert!(
        text(&bad).contains("changed: report.json"),
        "{}",
        text(&bad)
    );
    // Python signs the folder with our key (PKCS#8 read by cryptography): aocheck verifies it;
    // with another key it does not.
    std::fs::remove_file(out.join("report.dsse.json")).expect("rm");
    let signed = python(&["sign", utf8(&out), "report.dsse.json", utf8(&key)]);
    assert!(signed.status.success(), "{}", text(&signed));
    let ok = aocheck(&["verify", utf8(&out), "--key", utf8(&pubk)]);
    assert_eq!(ok.status.code(), Some(0), "{}", text(&ok));
    let other = dir.path().join("o.pem");
    assert_eq!(aocheck(&["keygen", utf8(&other)]).status.code(), Some(0));
    let bad = aocheck(&[
        "verify",
        utf8(&out),
        "--key",
        &format!("{}.pub", other.display()),
    ]);
    assert_eq!(bad.status.code(), Some(5));
}

/// The envelope is read strictly: a duplicate member, another payload type, or a predicate
/// type aocheck does not write is refused, whatever the signature.
#[test]
fn an_envelope_is_read_strictly() {
    use aocheck::report::attest;
    use base64::Engine as _;
    let key = ed25519_dalek::SigningKey::from_bytes(&[5u8; 32]);
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("report.json"), "{}").expect("write");
    attest::seal(
        dir.path(),
        "report.dsse.json",
        attest::RUN_PREDICATE_TYPE,
        serde_json::json!({}),
        &key,
    )
    .expect("seal");
    let path = dir.path().join("report.dsse.json");
    let good = std::fs::read_to_string(&path).expect("env");
    let vk = key.verifying_key();
    assert!(
        attest::verify_folder(&path, &vk)
            .expect("verifies")
            .problems
            .is_empty()
    );
    // A duplicate member in the envelope.
    let dup = good.replacen(
        "\"payloadType\"",
        "\"payloadType\": \"x\", \"payloadType\"",
        1,
    );
    std::fs::write(&path, &dup).expect("write");
    let e = attest::verify_folder(&path, &vk).expect_err("duplicate refused");
    assert!(e.to_string().contains("duplicate"), "{e}");
    // A duplicate member inside the signed statement (signed, so only strictness stops it).
    let b64 = base64::engine::general_purpose::STANDARD;
    let payload = br#"{"_type":"https://in-toto.io/Statement/v1","predicateType":"https://aocheck.dev/conformance-run/v1","subject":[],"subject":[{"name":"report.json","digest":{"sha256":"00"}}],"predicate":{}}"#;
    let sig = ed25519_dalek::Signer::sign(&key, &attest::pae(attest::PAYLOAD_TYPE, payload));
    let env = serde_json::json!({
        "payload": b64.encode(payload), "payloadType": attest::PAYLOAD_TYPE,
        "signatures": [{"sig": b64.encode(sig.to_bytes())}],
    });
    std::fs::write(&path, env.to_string()).expect("write");
    let e = attest::verify_folder(&path, &vk).expect_err("duplicate refused");
    assert!(e.to_string().contains("duplicate"), "{e}");
    // Another payload type, and a predicate type aocheck does not write.
    std::fs::write(
        &path,
        good.replace("application/vnd.in-toto+json", "text/plain"),
    )
    .expect("w");
    assert!(attest::verify_folder(&path, &vk).is_err());
    let st = serde_json::json!({"_type": attest::STATEMENT_TYPE, "predicateType": "https://example.com/x", "subject": [], "predicate": {}});
    let env = attest::sign_statement(&st, &key).expect("sign");
    std::fs::write(&path, serde_json::to_string(&env).expect("json")).expect("write");
    let e = attest::verify_folder(&path, &vk).expect_err("unknown predicate refused");
    assert!(e.to_string().contains("predicateType"), "{e}");
}

/// `keygen` writes standard PKCS#8 that OpenSSL and PyPI's cryptography read, and `--sign`
/// takes a key `openssl genpkey` made.
#[test]
fn keys_are_standard_both_ways() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = dir.path().join("k.pem");
    assert_eq!(aocheck(&["keygen", utf8(&key)]).status.code(), Some(0));
    let py = Command::new("python3")
        .args([
            "-c",
            "import sys; from cryptography.hazmat.primitives.serialization import load_pem_private_key as l; l(open(sys.argv[1],'rb').read(), None)",
            utf8(&key),
        ])
        .output()
        .expect("python3");
    assert!(py.status.success(), "cryptography: {}", text(&py));
    let o = Command::new("openssl")
        .args(["pkey", "-noout", "-in", utf8(&key)])
        .output()
        .expect("openssl is missing: run scripts/test, which installs Debian's openssl, or apt-get install openssl");
    assert!(o.status.success(), "openssl: {}", text(&o));
    let theirs = dir.path().join("openssl.pem");
    let o = Command::new("openssl")
        .args(["genpkey", "-algorithm", "ed25519", "-out", utf8(&theirs)])
        .output()
        .expect("openssl");
    assert!(o.status.success(), "{}", text(&o));
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    }
    let out = dir.path().join("run");
    let r = aocheck(&[
        "run",
        "--case",
        "AOC-CASE-001",
        "--store",
        "memory",
        "--out",
        utf8(&out),
        "--sign",
        utf8(&theirs),
    ]);
    assert_eq!(r.status.code(), Some(0), "{}", text(&r));
    let ok = aocheck(&[
        "verify",
        utf8(&out),
        "--key",
        utf8(&out.join("signing-key.pub.pem")),
    ]);
    assert_eq!(ok.status.code(), Some(0), "{}", text(&ok));
}

/// Nothing secret in any output: a run through the protocol on PostgreSQL with a password in
/// its URL, a token in the `--sut` command, and every credential the harness makes (control
/// tokens, provider keys, clock tokens, written by the test build to `AOCHECK_DUMP_SECRETS`):
/// no file the run wrote, nor its stdout or stderr, holds any of them.
#[test]
fn no_secret_reaches_any_output() {
    let Some(url) = std::env::var(crate::support::POSTGRES_ENV).ok() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must set {}",
            crate::support::POSTGRES_ENV
        );
        eprintln!(
            "note: the secret scan skipped: set {}",
            crate::support::POSTGRES_ENV
        );
        return;
    };
    let password = "pw-Zq81-secret";
    let token = "tok-9f3e-very-secret";
    let with_pw = match url.split_once("://") {
        Some((scheme, rest)) => match rest.split_once('@') {
            Some((user, host)) => format!(
                "{scheme}://{}:{password}@{host}",
                user.split(':').next().unwrap_or(user)
            ),
            None => format!("{scheme}://postgres:{password}@{rest}"),
        },
        None => panic!("{url}: not a URL"),
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let dump = dir.path().join("secrets.txt");
    let out = dir.path().join("run");
    let key = dir.path().join("k.pem");
    assert_eq!(aocheck(&["keygen", utf8(&key)]).status.code(), Some(0));
    let sut = format!(
        "env API_TOKEN={token} '{}' sut reference",
        env!("CARGO_BIN_EXE_aocheck")
    );
    let o = Command::new(env!("CARGO_BIN_EXE_aocheck"))
        .args([
            "run",
            "--case",
            "AOC-CASE-003",
            "--case",
            "AOCHECK-KILL-01",
            "--case",
            "HERMES-VERIFY-05",
            "--case",
            "AOC-CASE-009",
            "--store",
            &format!("postgres:{with_pw}"),
            "--sut",
            &sut,
            "--out",
            utf8(&out),
            "--sign",
            utf8(&key),
        ])
        .env("AOCHECK_DUMP_SECRETS", &dump)
        .output()
        .expect("aocheck");
    let said = text(&o);
    assert!(matches!(o.status.code(), Some(0..=2)), "{said}");
    let mut secrets: Vec<String> = std::fs::read_to_string(&dump)
        .expect("the test build lists the credentials it made")
        .lines()
        .map(str::to_string)
        .collect();
    let made = secrets.len();
    assert!(
        secrets.iter().any(|s| s.starts_with("ctl_"))
            && secrets.iter().any(|s| s.starts_with("clk_")),
        "control and clock tokens were made: {secrets:?}"
    );
    assert!(
        made >= 6,
        "provider keys were issued to each process: {secrets:?}"
    );
    secrets.push(password.into());
    secrets.push(token.into());
    let mut hits = Vec::new();
    for s in &secrets {
        if said.contains(s.as_str()) {
            hits.push(format!("stdout/stderr: {s}"));
        }
    }
    let mut stack = vec![out.clone()];
    let mut files = 0;
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            files += 1;
            let body = std::fs::read(&p).expect("read");
            let body = String::from_utf8_lossy(&body);
            // The signed envelope's payload is base64: decoded, it is scanned too.
            let decoded = serde_json::from_str::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| v["payload"].as_str().map(str::to_string))
                .and_then(|b| {
                    use base64::Engine as _;
                    base64::engine::general_purpose::STANDARD.decode(b).ok()
                })
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default();
            for s in &secrets {
                if body.contains(s.as_str()) || decoded.contains(s.as_str()) {
                    hits.push(format!("{}: {s}", p.display()));
                }
            }
        }
    }
    assert!(files >= 6, "the run wrote its files: {files}");
    assert!(hits.is_empty(), "secrets in the outputs: {hits:#?}");
    // The command is still shown, its token replaced.
    let report = std::fs::read_to_string(out.join("report.json")).expect("report");
    assert!(
        report.contains("env API_TOKEN=[redacted]"),
        "the command is shown redacted"
    );
    assert!(
        report.contains(":[redacted]@"),
        "the store URL is shown without its password"
    );
}
