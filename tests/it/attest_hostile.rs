//! Attacks on signed folders, analyze and the secret scrubbing, as a hostile implementation or
//! a forger would make them (issue 24).
//!
//! Each test is one attack. Where aocheck resists it, the test is a regression test; where it is
//! fooled, the test asserts what aocheck should do and is ignored with the defect named (run
//! them with `--ignored`).

use crate::support::{said, utf8};
use aocheck::report::attest;
use base64::Engine as _;
use ed25519_dalek::SigningKey;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_aocheck"));
    c.env_remove("AOCHECK_STORE");
    c
}

fn aocheck(args: &[&str]) -> Output {
    bin().args(args).output().expect("run aocheck")
}

fn read_json(p: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(p).expect("read")).expect("json")
}

fn write_json(p: &Path, v: &Value) {
    std::fs::write(p, serde_json::to_vec(v).expect("json")).expect("write");
}

fn sha256(bytes: &[u8]) -> String {
    aocheck::digest::Digest::of_bytes(bytes).hex()
}

/// The wrapper a hostile implementation is run through (`tests/it/scripts/`).
fn wrapper() -> String {
    format!(
        "{}/tests/it/scripts/hostile_attest_wrapper.py",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// The reference implementation through `aocheck-sut/2`.
fn reference() -> String {
    format!("{} sut reference", env!("CARGO_BIN_EXE_aocheck"))
}

// ---------------------------------------------------------------------------------------------
// The forger's tools: a key, a public key file, and envelopes over any payload bytes.
// ---------------------------------------------------------------------------------------------

struct Signer {
    key: SigningKey,
    public: PathBuf,
}

/// A fresh key pair (by `aocheck keygen`'s code), its public half written into `dir`.
fn signer(dir: &Path, name: &str) -> Signer {
    let (private, public) = attest::keygen().expect("keygen");
    let path = dir.join(format!("{name}.pub.pem"));
    std::fs::write(&path, public).expect("write public key");
    Signer {
        key: attest::signing_key(&private).expect("private key"),
        public: path,
    }
}

fn sig_over(key: &SigningKey, payload: &[u8]) -> Value {
    let sig = ed25519_dalek::Signer::sign(key, &attest::pae(attest::PAYLOAD_TYPE, payload));
    json!({
        "keyid": attest::key_id(&key.verifying_key()),
        "sig": base64::engine::general_purpose::STANDARD.encode(sig.to_bytes()),
    })
}

/// An envelope over exactly `payload` with the signatures given.
fn envelope(payload: &[u8], signatures: Vec<Value>) -> Value {
    json!({
        "payload": base64::engine::general_purpose::STANDARD.encode(payload),
        "payloadType": attest::PAYLOAD_TYPE,
        "signatures": signatures,
    })
}

/// A run statement over the subjects given (name, sha256).
fn statement(subjects: &[(String, String)]) -> Value {
    json!({
        "_type": attest::STATEMENT_TYPE,
        "subject": subjects
            .iter()
            .map(|(n, d)| json!({"name": n, "digest": {"sha256": d}}))
            .collect::<Vec<_>>(),
        "predicateType": attest::RUN_PREDICATE_TYPE,
        "predicate": {"run_id": "run-forged", "seed": 1, "verdicts": {}},
    })
}

/// Every file of `dir` as subjects, as `aocheck run --sign` lists them.
fn subjects(dir: &Path) -> Vec<(String, String)> {
    attest::subjects_of(dir)
        .expect("subjects")
        .into_iter()
        .map(|s| (s.name, s.sha256))
        .collect()
}

/// Writes `report.dsse.json` into `dir`: `payload` signed by `s`.
fn sign_into(dir: &Path, s: &Signer, payload: &[u8]) {
    write_json(
        &dir.join("report.dsse.json"),
        &envelope(payload, vec![sig_over(&s.key, payload)]),
    );
}

/// Signs `st` (canonical bytes, as aocheck does) into `dir`.
fn sign_statement_into(dir: &Path, s: &Signer, st: &Value) {
    let payload = aocheck::digest::canonical_bytes(st).expect("canonical");
    sign_into(dir, s, &payload);
}

/// A small run-like folder: `report.json`, `evidence/A.json`, `sut/A/e1-1.stderr`.
fn folder(root: &Path) -> PathBuf {
    let dir = root.join("run");
    std::fs::create_dir_all(dir.join("evidence")).expect("mkdir");
    std::fs::create_dir_all(dir.join("sut/A")).expect("mkdir");
    std::fs::write(dir.join("report.json"), "{\"cases\":[]}").expect("write");
    std::fs::write(dir.join("evidence/A.json"), "{\"case\":\"A\"}").expect("write");
    std::fs::write(dir.join("sut/A/e1-1.stderr"), "ready\n").expect("write");
    dir
}

fn verify(dir: &Path, s: &Signer) -> Output {
    aocheck(&["verify", utf8(dir), "--key", utf8(&s.public)])
}

/// `cmd` run to its end, or killed after `limit` (then `None`).
fn within(mut cmd: Command, limit: Duration) -> Option<Output> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let started = Instant::now();
    loop {
        if child.try_wait().expect("try_wait").is_some() {
            return Some(child.wait_with_output().expect("output"));
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

// ---------------------------------------------------------------------------------------------
// verify
// ---------------------------------------------------------------------------------------------

/// A signed subject whose name leaves the folder (`..`, an absolute path, a backslash, `.`, an
/// empty component, an empty name) is refused, even when the file it names outside exists with
/// the signed bytes and every file inside is exactly as signed.
#[test]
fn verify_refuses_subject_names_that_leave_the_folder() {
    let root = tempfile::tempdir().expect("tempdir");
    let s = signer(root.path(), "k");
    let dir = folder(root.path());
    let outside = root.path().join("outside.txt");
    std::fs::write(&outside, "outside the run").expect("write");
    let digest = sha256(b"outside the run");
    let inside = subjects(&dir);
    sign_statement_into(&dir, &s, &statement(&inside));
    let ok = verify(&dir, &s);
    assert_eq!(ok.status.code(), Some(0), "{}", said(&ok));
    for name in [
        "../outside.txt".to_string(),
        "evidence/../../outside.txt".to_string(),
        utf8(&outside).to_string(),
        "evidence\\..\\..\\outside.txt".to_string(),
        "./report.json".to_string(),
        "evidence//A.json".to_string(),
        String::new(),
    ] {
        let mut list = inside.clone();
        // Where the name, read naively, lands: a file with exactly the signed bytes.
        let d = match name.as_str() {
            "./report.json" => sha256(&std::fs::read(dir.join("report.json")).expect("read")),
            "evidence//A.json" => sha256(&std::fs::read(dir.join("evidence/A.json")).expect("r")),
            _ => digest.clone(),
        };
        list.push((name.clone(), d));
        sign_statement_into(&dir, &s, &statement(&list));
        let bad = verify(&dir, &s);
        assert_eq!(bad.status.code(), Some(5), "{name:?}: {}", said(&bad));
        assert!(
            !String::from_utf8_lossy(&bad.stdout).contains("verified:"),
            "{name:?}: {}",
            said(&bad)
        );
    }
}

/// A signed file replaced by a link to a copy outside the folder (same bytes), or a signed
/// subfolder replaced by a link to an identical folder outside, is not followed: verify fails.
#[test]
fn verify_does_not_follow_links_out_of_the_folder() {
    let root = tempfile::tempdir().expect("tempdir");
    let s = signer(root.path(), "k");
    let dir = folder(root.path());
    sign_statement_into(&dir, &s, &statement(&subjects(&dir)));
    // A file.
    let copy = root.path().join("evidence-copy.json");
    std::fs::rename(dir.join("evidence/A.json"), &copy).expect("move out");
    std::os::unix::fs::symlink(&copy, dir.join("evidence/A.json")).expect("symlink");
    let bad = verify(&dir, &s);
    assert_eq!(bad.status.code(), Some(5), "{}", said(&bad));
    assert!(said(&bad).contains("evidence/A.json"), "{}", said(&bad));
    std::fs::remove_file(dir.join("evidence/A.json")).expect("rm link");
    std::fs::rename(&copy, dir.join("evidence/A.json")).expect("move back");
    assert_eq!(verify(&dir, &s).status.code(), Some(0));
    // A folder.
    let away = root.path().join("sut-away");
    std::fs::rename(dir.join("sut"), &away).expect("move out");
    std::os::unix::fs::symlink(&away, dir.join("sut")).expect("symlink");
    let bad = verify(&dir, &s);
    assert_eq!(bad.status.code(), Some(5), "{}", said(&bad));
    assert!(said(&bad).contains("sut"), "{}", said(&bad));
}

/// A signed file replaced by a named pipe: verify must not wait forever on it (nor analyze on
/// an evidence file that is one); it names the file as not a regular file and exits 5.
#[test]
fn verify_and_analyze_do_not_hang_on_a_fifo() {
    let root = tempfile::tempdir().expect("tempdir");
    let s = signer(root.path(), "k");
    let dir = folder(root.path());
    sign_statement_into(&dir, &s, &statement(&subjects(&dir)));
    std::fs::remove_file(dir.join("evidence/A.json")).expect("rm");
    let made = Command::new("mkfifo")
        .arg(dir.join("evidence/A.json"))
        .status()
        .expect("mkfifo");
    assert!(made.success());
    let mut cmd = bin();
    cmd.args(["verify", utf8(&dir), "--key", utf8(&s.public)]);
    let o = within(cmd, Duration::from_secs(10)).expect("verify hung on a FIFO");
    assert_eq!(o.status.code(), Some(5), "{}", said(&o));
    assert!(said(&o).contains("evidence/A.json"), "{}", said(&o));
    // analyze without a key reads the evidence of the report's cases.
    write_json(
        &dir.join("report.json"),
        &json!({"cases": [{"id": "A", "verdict": "pass"}]}),
    );
    let mut cmd = bin();
    cmd.args(["analyze", utf8(&dir)]);
    let o = within(cmd, Duration::from_secs(10)).expect("analyze hung on a FIFO");
    assert_ne!(o.status.code(), Some(0), "{}", said(&o));
}

/// One subject listed twice (the same name and digest) is refused.
#[test]
fn verify_refuses_a_subject_listed_twice() {
    let root = tempfile::tempdir().expect("tempdir");
    let s = signer(root.path(), "k");
    let dir = folder(root.path());
    let mut list = subjects(&dir);
    list.push(list[0].clone());
    sign_statement_into(&dir, &s, &statement(&list));
    let bad = verify(&dir, &s);
    assert_eq!(bad.status.code(), Some(5), "{}", said(&bad));
    assert!(said(&bad).contains("listed twice"), "{}", said(&bad));
}

/// Files added deep in subfolders after signing are each named; a subject that names a folder
/// is a problem, not a crash.
#[test]
fn verify_names_files_added_in_subfolders_and_a_folder_as_subject() {
    let root = tempfile::tempdir().expect("tempdir");
    let s = signer(root.path(), "k");
    let dir = folder(root.path());
    sign_statement_into(&dir, &s, &statement(&subjects(&dir)));
    std::fs::create_dir_all(dir.join("evidence/deep/er")).expect("mkdir");
    std::fs::write(dir.join("evidence/deep/er/B.json"), "{}").expect("write");
    std::fs::write(dir.join("sut/A/e2-1.stderr"), "late").expect("write");
    // The names aocheck leaves out of the statement are left out at the top only.
    std::fs::write(dir.join("sut/report.dsse.json"), "{}").expect("write");
    let bad = verify(&dir, &s);
    let text = said(&bad);
    assert_eq!(bad.status.code(), Some(5), "{text}");
    for f in [
        "not signed: evidence/deep/er/B.json",
        "not signed: sut/A/e2-1.stderr",
        "not signed: sut/report.dsse.json",
    ] {
        assert!(text.contains(f), "{f}: {text}");
    }
    // A subject naming a folder.
    let root2 = tempfile::tempdir().expect("tempdir");
    let dir = folder(root2.path());
    let mut list = subjects(&dir);
    list.push(("evidence".into(), sha256(b"")));
    sign_statement_into(&dir, &s, &statement(&list));
    let bad = verify(&dir, &s);
    assert_eq!(bad.status.code(), Some(5), "{}", said(&bad));
    assert!(said(&bad).contains("evidence"), "{}", said(&bad));
}

/// A statement with no subjects proves nothing about a folder that holds files: every file is
/// named as not signed. (Over an empty folder it verifies 0 files, and says so.)
#[test]
fn an_empty_subject_list_signs_no_file() {
    let root = tempfile::tempdir().expect("tempdir");
    let s = signer(root.path(), "k");
    let dir = folder(root.path());
    sign_statement_into(&dir, &s, &statement(&[]));
    let bad = verify(&dir, &s);
    let text = said(&bad);
    assert_eq!(bad.status.code(), Some(5), "{text}");
    assert!(
        text.contains("not signed: report.json") && text.contains("not signed: evidence/A.json"),
        "{text}"
    );
    let empty = root.path().join("empty");
    std::fs::create_dir_all(&empty).expect("mkdir");
    sign_statement_into(&empty, &s, &statement(&[]));
    let ok = verify(&empty, &s);
    assert_eq!(ok.status.code(), Some(0), "{}", said(&ok));
    assert!(said(&ok).contains(" 0 file(s) exactly as signed"));
}

/// An envelope with several signatures verifies when one of them is good with the key given
/// (DSSE); garbage, another key's signature and a lying `keyid` never make it verify alone.
#[test]
fn one_good_signature_among_bad_ones() {
    let root = tempfile::tempdir().expect("tempdir");
    let s = signer(root.path(), "k");
    let other = signer(root.path(), "other");
    let dir = folder(root.path());
    let payload = aocheck::digest::canonical_bytes(&statement(&subjects(&dir))).expect("c");
    let garbage = json!({"keyid": "sha256:00", "sig": "not base64!"});
    let short = json!({"sig": base64::engine::general_purpose::STANDARD.encode([1u8; 63])});
    let theirs = sig_over(&other.key, &payload);
    let mut good_lying = sig_over(&s.key, &payload);
    good_lying["keyid"] = theirs["keyid"].clone();
    let env =
        |sigs: Vec<Value>| write_json(&dir.join("report.dsse.json"), &envelope(&payload, sigs));
    env(vec![
        garbage.clone(),
        short.clone(),
        theirs.clone(),
        good_lying,
    ]);
    let ok = verify(&dir, &s);
    assert_eq!(ok.status.code(), Some(0), "{}", said(&ok));
    env(vec![garbage, short, theirs]);
    let bad = verify(&dir, &s);
    assert_eq!(bad.status.code(), Some(5), "{}", said(&bad));
    assert!(said(&bad).contains("signature does not verify"));
    env(vec![]);
    assert_eq!(verify(&dir, &s).status.code(), Some(5));
}

/// A signed payload that is not exactly one JSON text is refused: a byte-order mark before it,
/// garbage or a second value after it (another parser could read another statement).
#[test]
fn a_payload_with_a_bom_or_trailing_garbage_is_refused() {
    let root = tempfile::tempdir().expect("tempdir");
    let s = signer(root.path(), "k");
    let dir = folder(root.path());
    let payload = aocheck::digest::canonical_bytes(&statement(&subjects(&dir))).expect("c");
    let mut with_bom = b"\xEF\xBB\xBF".to_vec();
    with_bom.extend_from_slice(&payload);
    let mut trailing = payload.clone();
    trailing.extend_from_slice(b" x");
    let mut second = payload.clone();
    second.extend_from_slice(br#"{"_type":"https://in-toto.io/Statement/v1"}"#);
    let mut nul = payload.clone();
    nul.push(0);
    for (what, bytes) in [
        ("a BOM", with_bom),
        ("trailing garbage", trailing),
        ("a second value", second),
        ("a NUL", nul),
    ] {
        sign_into(&dir, &s, &bytes);
        let bad = verify(&dir, &s);
        assert_eq!(bad.status.code(), Some(5), "{what}: {}", said(&bad));
        assert!(said(&bad).contains("statement"), "{what}: {}", said(&bad));
    }
    sign_into(&dir, &s, &payload);
    assert_eq!(verify(&dir, &s).status.code(), Some(0));
}

/// File names that look alike (Unicode NFC and NFD forms of one name) are different files: a
/// twin added beside a signed file, or a signed file renamed to its twin, is named.
#[test]
fn unicode_normalization_twins_are_different_files() {
    let root = tempfile::tempdir().expect("tempdir");
    let s = signer(root.path(), "k");
    let dir = folder(root.path());
    let nfc = "evidence/caf\u{e9}.json";
    let nfd = "evidence/cafe\u{301}.json";
    std::fs::write(dir.join(nfc), "{}").expect("write");
    sign_statement_into(&dir, &s, &statement(&subjects(&dir)));
    assert_eq!(verify(&dir, &s).status.code(), Some(0));
    std::fs::write(dir.join(nfd), "{}").expect("write");
    let bad = verify(&dir, &s);
    assert_eq!(bad.status.code(), Some(5), "{}", said(&bad));
    assert!(
        said(&bad).contains(&format!("not signed: {nfd}")),
        "{}",
        said(&bad)
    );
    std::fs::remove_file(dir.join(nfc)).expect("rm");
    let bad = verify(&dir, &s);
    assert_eq!(bad.status.code(), Some(5), "{}", said(&bad));
    assert!(
        said(&bad).contains(&format!("missing: {nfc}")),
        "{}",
        said(&bad)
    );
}

/// The right predicate type does not excuse the wrong statement type: another `_type`, none,
/// or a statement that is not an object is refused.
#[test]
fn a_statement_of_another_type_is_refused_whatever_its_predicate() {
    let root = tempfile::tempdir().expect("tempdir");
    let s = signer(root.path(), "k");
    let dir = folder(root.path());
    let good = statement(&subjects(&dir));
    let mut v01 = good.clone();
    v01["_type"] = "https://in-toto.io/Statement/v0.1".into();
    let mut none = good.clone();
    none.as_object_mut().expect("object").remove("_type");
    let mut number = good.clone();
    number["_type"] = 1.into();
    for (what, st) in [
        ("v0.1", v01),
        ("no _type", none),
        ("a number", number),
        ("an array", json!([good.clone()])),
    ] {
        sign_statement_into(&dir, &s, &st);
        let bad = verify(&dir, &s);
        assert_eq!(bad.status.code(), Some(5), "{what}: {}", said(&bad));
        assert!(said(&bad).contains("_type"), "{what}: {}", said(&bad));
    }
}

/// Subject digests in upper-case hex name the same bytes and are accepted; a digest of another
/// length, or with non-hex characters, is refused; a wrong digest in any case is "changed".
#[test]
fn subject_digest_spelling() {
    let root = tempfile::tempdir().expect("tempdir");
    let s = signer(root.path(), "k");
    let dir = folder(root.path());
    let list = subjects(&dir);
    let upper: Vec<_> = list
        .iter()
        .map(|(n, d)| (n.clone(), d.to_ascii_uppercase()))
        .collect();
    sign_statement_into(&dir, &s, &statement(&upper));
    let ok = verify(&dir, &s);
    assert_eq!(ok.status.code(), Some(0), "{}", said(&ok));
    for bad_digest in [
        format!("{}0", list[0].1),
        list[0].1[..63].to_string(),
        format!("{}g", &list[0].1[..63]),
        format!("sha256:{}", list[0].1),
        format!("{}0", &list[0].1.to_ascii_uppercase()[..63]),
    ] {
        let mut l = list.clone();
        l[0].1 = bad_digest.clone();
        sign_statement_into(&dir, &s, &statement(&l));
        let bad = verify(&dir, &s);
        assert_eq!(bad.status.code(), Some(5), "{bad_digest}: {}", said(&bad));
    }
}

/// An envelope nested a hundred thousand deep, unsigned or signed, is refused without crashing
/// the verifier (no stack overflow: exit 5, not a signal or 101).
#[test]
fn a_deeply_nested_envelope_or_statement_is_refused_cleanly() {
    let root = tempfile::tempdir().expect("tempdir");
    let s = signer(root.path(), "k");
    let dir = folder(root.path());
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    std::fs::write(dir.join("report.dsse.json"), &deep).expect("write");
    let bad = verify(&dir, &s);
    assert_eq!(bad.status.code(), Some(5), "{}", said(&bad));
    let payload = format!(
        "{{\"_type\":\"{}\",\"predicateType\":\"{}\",\"subject\":[],\"predicate\":{deep}}}",
        attest::STATEMENT_TYPE,
        attest::RUN_PREDICATE_TYPE
    );
    sign_into(&dir, &s, payload.as_bytes());
    let bad = verify(&dir, &s);
    assert_eq!(bad.status.code(), Some(5), "{}", said(&bad));
    // A large but honest envelope (an 8 MB unknown member) is read, and verifies.
    let mut env = envelope(
        &aocheck::digest::canonical_bytes(&statement(&subjects(&dir))).expect("c"),
        vec![],
    );
    let payload = base64::engine::general_purpose::STANDARD
        .decode(env["payload"].as_str().expect("payload"))
        .expect("b64");
    env["signatures"] = json!([sig_over(&s.key, &payload)]);
    env["padding"] = "x".repeat(8 << 20).into();
    write_json(&dir.join("report.dsse.json"), &env);
    let ok = verify(&dir, &s);
    assert_eq!(ok.status.code(), Some(0), "{}", said(&ok));
}

// ---------------------------------------------------------------------------------------------
// analyze
// ---------------------------------------------------------------------------------------------

/// A run into `root/name` of the cases given (SQLite in the folder), through `--sut` when one
/// is given, signed with a fresh key (`root/k.pem`); the public key's path.
fn run(root: &Path, name: &str, cases: &[&str], sut: Option<&str>) -> (PathBuf, PathBuf) {
    let key = root.join("k.pem");
    if !key.exists() {
        assert_eq!(aocheck(&["keygen", utf8(&key)]).status.code(), Some(0));
    }
    let out = root.join(name);
    let mut args = vec!["run", "--out", utf8(&out), "--sign", utf8(&key)];
    for c in cases {
        args.extend(["--case", c]);
    }
    if let Some(s) = sut {
        args.extend(["--sut", s]);
    }
    let o = aocheck(&args);
    assert!(matches!(o.status.code(), Some(0..=1)), "{}", said(&o));
    (out, root.join("k.pem.pub"))
}

/// A copy of a run folder's report and evidence, without the envelope (the forger's working
/// copy: analyze without `--key` is what is left to fool).
fn unsigned_copy(out: &Path, to: &Path) -> PathBuf {
    std::fs::create_dir_all(to.join("evidence")).expect("mkdir");
    std::fs::copy(out.join("report.json"), to.join("report.json")).expect("copy");
    for e in std::fs::read_dir(out.join("evidence"))
        .expect("ls")
        .flatten()
    {
        std::fs::copy(e.path(), to.join("evidence").join(e.file_name())).expect("copy");
    }
    to.to_path_buf()
}

fn analyze(dir: &Path) -> Output {
    aocheck(&["analyze", utf8(dir)])
}

/// `replay_unknown` fails AOC-CASE-003 twice over AOC-REQ-010: once at a look (the ledger's
/// second creation) and once outside them (a step's expected refusal).
fn failing_run(root: &Path) -> (PathBuf, PathBuf) {
    let sut = format!("{} --variant replay_unknown", reference());
    let (out, pubk) = run(root, "fail", &["AOC-CASE-003"], Some(&sut));
    let r = read_json(&out.join("report.json"));
    assert_eq!(r["cases"][0]["verdict"], "fail");
    (out, pubk)
}

/// Edits made consistently enough that the verdict stays the same but a recorded fact changes
/// are each named: an emptied `other_failures`, a look removed, a look's finding rewritten,
/// the final expectations removed; and with `--key` the signed folder names the changed file
/// before any analysis.
#[test]
fn analyze_names_evidence_edited_under_the_same_verdict() {
    let root = tempfile::tempdir().expect("tempdir");
    let (out, pubk) = failing_run(root.path());
    let ok = aocheck(&["analyze", utf8(&out), "--key", utf8(&pubk)]);
    assert_eq!(ok.status.code(), Some(0), "{}", said(&ok));
    let copy = unsigned_copy(&out, &root.path().join("copy"));
    let file = copy.join("evidence/AOC-CASE-003.json");
    let original = read_json(&file);
    let at_look = original["looks"]
        .as_array()
        .expect("looks")
        .iter()
        .position(|l| !l["found"].as_array().expect("found").is_empty())
        .expect("a look found the second creation");
    type Edit = fn(&mut Value, usize);
    let edits: [(&str, Edit, &str); 5] = [
        (
            "other_failures emptied",
            |t, _| t["other_failures"] = json!([]),
            "failure reported, not derived",
        ),
        (
            "a look removed",
            |t, _| {
                t["looks"].as_array_mut().expect("looks").remove(2);
            },
            "facts",
        ),
        (
            "a look's finding reworded",
            |t, i| t["looks"][i]["found"][0] = "[provider_accounting] nothing to see".into(),
            "in the record, not found now",
        ),
        (
            "the final expectations removed",
            |t, _| {
                t.as_object_mut().expect("object").remove("finals");
            },
            "facts",
        ),
        (
            "an outside failure reworded",
            |t, _| t["other_failures"][0]["msg"] = "execute was refused, as it must be".into(),
            "failure derived, not reported",
        ),
    ];
    for (what, edit, expect) in edits {
        let mut t = original.clone();
        edit(&mut t, at_look);
        write_json(&file, &t);
        let bad = analyze(&copy);
        let text = said(&bad);
        assert_eq!(bad.status.code(), Some(1), "{what}: {text}");
        assert!(
            text.contains("AOC-CASE-003 (reported fail)"),
            "{what}: {text}"
        );
        assert!(text.contains(expect), "{what}: {text}");
    }
    // The signed folder names the edit first.
    std::fs::copy(&file, out.join("evidence/AOC-CASE-003.json")).expect("copy");
    let bad = aocheck(&["analyze", utf8(&out), "--key", utf8(&pubk)]);
    assert_eq!(bad.status.code(), Some(5), "{}", said(&bad));
    assert!(said(&bad).contains("changed: evidence/AOC-CASE-003.json"));
}

/// A failure moved to another requirement (or another step) in the report, its text unchanged:
/// the verdict and the texts agree, but the report's per-requirement result (what
/// `aocheck.toml` expectations and the matrix read) is no longer what the evidence derives.
#[test]
fn analyze_names_a_failure_moved_to_another_requirement() {
    let root = tempfile::tempdir().expect("tempdir");
    let (out, _) = failing_run(root.path());
    let copy = unsigned_copy(&out, &root.path().join("copy"));
    let original = read_json(&copy.join("report.json"));
    for (field, value) in [("requirement", json!("AOC-REQ-001")), ("step", json!(1))] {
        let mut r = original.clone();
        for f in r["cases"][0]["failures"].as_array_mut().expect("failures") {
            f[field] = value.clone();
        }
        write_json(&copy.join("report.json"), &r);
        let bad = analyze(&copy);
        assert_eq!(bad.status.code(), Some(1), "{field}: {}", said(&bad));
    }
}

/// The facts a look examined are part of the evidence (an auditor reads them per look); a look
/// whose recorded facts were changed is named, as a look whose findings were changed is.
#[test]
fn analyze_names_a_look_whose_recorded_facts_were_changed() {
    let root = tempfile::tempdir().expect("tempdir");
    let (out, _) = run(root.path(), "ok", &["AOC-CASE-001"], None);
    let copy = unsigned_copy(&out, &root.path().join("copy"));
    let file = copy.join("evidence/AOC-CASE-001.json");
    let mut t = read_json(&file);
    t["looks"][1]["facts"]["AOC-REQ-013"] = 40.into();
    write_json(&file, &t);
    let bad = analyze(&copy);
    let text = said(&bad);
    assert_eq!(bad.status.code(), Some(1), "{text}");
    assert!(text.contains("look 1"), "{text}");
}

/// A declared fault recorded as never fired cannot stand beside a pass (GUIDE §4: a case passes
/// only if the faults it declares fired); analyze applies that rule to the evidence, or at
/// least names where the evidence's faults differ from the report's.
#[test]
fn analyze_does_not_pass_a_case_whose_declared_fault_never_fired() {
    let root = tempfile::tempdir().expect("tempdir");
    let (out, _) = run(root.path(), "ok", &["AOC-CASE-003"], None);
    let copy = unsigned_copy(&out, &root.path().join("copy"));
    let file = copy.join("evidence/AOC-CASE-003.json");
    let mut t = read_json(&file);
    assert!(!t["faults"].as_array().expect("faults").is_empty());
    for f in t["faults"].as_array_mut().expect("faults") {
        f["fired"] = false.into();
    }
    write_json(&file, &t);
    let bad = analyze(&copy);
    assert_eq!(bad.status.code(), Some(1), "{}", said(&bad));
}

/// The last look of a case's evidence (every occurrence is in its snapshot).
fn last_look(t: &mut Value) -> &mut Value {
    t["looks"]
        .as_array_mut()
        .expect("looks")
        .last_mut()
        .expect("a look")
}

/// Evidence is read strictly: an unknown member anywhere in it (not only at the top and in a
/// look) is refused, naming the file, so a field aocheck does not re-check cannot ride along.
#[test]
fn analyze_refuses_unknown_members_anywhere_in_evidence() {
    let root = tempfile::tempdir().expect("tempdir");
    let (out, _) = run(root.path(), "ok", &["AOC-CASE-003"], None);
    let copy = unsigned_copy(&out, &root.path().join("copy"));
    let file = copy.join("evidence/AOC-CASE-003.json");
    let original = read_json(&file);
    type Edit = fn(&mut Value);
    let edits: [(&str, Edit); 6] = [
        ("top", |t| t["verdict_override"] = "pass".into()),
        ("look", |t| last_look(t)["verdict"] = "pass".into()),
        ("snapshot", |t| {
            last_look(t)["snapshot"]["verdict"] = "pass".into()
        }),
        ("occurrence", |t| {
            last_look(t)["snapshot"]["occurrences"][0]["verdict"] = "pass".into()
        }),
        ("ledger", |t| {
            last_look(t)["snapshot"]["provider"]["verdict"] = "pass".into()
        }),
        ("fault", |t| t["faults"][0]["verdict"] = "pass".into()),
    ];
    let mut accepted = Vec::new();
    for (what, edit) in edits {
        let mut t = original.clone();
        edit(&mut t);
        write_json(&file, &t);
        let o = analyze(&copy);
        if o.status.code() != Some(3) || !said(&o).contains("AOC-CASE-003.json") {
            accepted.push(what);
        }
    }
    assert!(
        accepted.is_empty(),
        "unknown members accepted in: {accepted:?}"
    );
}

/// A missing evidence file for a case that ran is named; the order of the report's cases does
/// not matter.
#[test]
fn analyze_names_missing_evidence_and_ignores_case_order() {
    let root = tempfile::tempdir().expect("tempdir");
    let (out, _) = run(root.path(), "two", &["AOC-CASE-001", "AOC-CASE-003"], None);
    let copy = unsigned_copy(&out, &root.path().join("copy"));
    let mut r = read_json(&copy.join("report.json"));
    r["cases"].as_array_mut().expect("cases").reverse();
    write_json(&copy.join("report.json"), &r);
    let ok = analyze(&copy);
    assert_eq!(ok.status.code(), Some(0), "{}", said(&ok));
    assert!(
        said(&ok).contains("2 the same, 0 different"),
        "{}",
        said(&ok)
    );
    std::fs::remove_file(copy.join("evidence/AOC-CASE-003.json")).expect("rm");
    let bad = analyze(&copy);
    assert_eq!(bad.status.code(), Some(1), "{}", said(&bad));
    assert!(
        said(&bad).contains("no evidence (evidence/AOC-CASE-003.json)"),
        "{}",
        said(&bad)
    );
}

/// A case dropped from the report (its evidence left in `evidence/`), or turned into `not_run`
/// with its evidence removed while its steps and failures stay in the report, is named: the
/// folder says the case ran.
#[test]
fn analyze_names_a_case_dropped_from_the_report() {
    let root = tempfile::tempdir().expect("tempdir");
    let sut = format!("{} --variant replay_unknown", reference());
    let (out, _) = run(
        root.path(),
        "two",
        &["AOC-CASE-001", "AOC-CASE-003"],
        Some(&sut),
    );
    let copy = unsigned_copy(&out, &root.path().join("copy"));
    let original = read_json(&copy.join("report.json"));
    // Dropped from the list, the summary adjusted.
    let mut r = original.clone();
    r["cases"]
        .as_array_mut()
        .expect("cases")
        .retain(|c| c["id"] != "AOC-CASE-003");
    r["summary"] = json!({"cases": 1, "pass": 1, "fail": 0, "other": 0});
    write_json(&copy.join("report.json"), &r);
    let bad = analyze(&copy);
    assert_eq!(bad.status.code(), Some(1), "dropped: {}", said(&bad));
    assert!(said(&bad).contains("AOC-CASE-003"), "{}", said(&bad));
    // Turned into not_run, its evidence removed.
    let mut r = original.clone();
    for c in r["cases"].as_array_mut().expect("cases") {
        if c["id"] == "AOC-CASE-003" {
            c["verdict"] = "not_run".into();
        }
    }
    write_json(&copy.join("report.json"), &r);
    std::fs::remove_file(copy.join("evidence/AOC-CASE-003.json")).expect("rm");
    let bad = analyze(&copy);
    assert_eq!(bad.status.code(), Some(1), "not_run: {}", said(&bad));
}

/// The report's summary is what a reader (and `aocheck run`'s exit code) sees first: one that
/// its cases do not add up to is named.
#[test]
fn analyze_names_a_summary_its_cases_do_not_add_up_to() {
    let root = tempfile::tempdir().expect("tempdir");
    let (out, _) = failing_run(root.path());
    let copy = unsigned_copy(&out, &root.path().join("copy"));
    let mut r = read_json(&copy.join("report.json"));
    r["summary"] = json!({"cases": 1, "pass": 1, "fail": 0, "other": 0});
    write_json(&copy.join("report.json"), &r);
    let bad = analyze(&copy);
    assert_eq!(bad.status.code(), Some(1), "{}", said(&bad));
}

// ---------------------------------------------------------------------------------------------
// secrets
// ---------------------------------------------------------------------------------------------

/// Every place in `out` (file bytes, and the decoded payload of an envelope) and in the
/// process's output where one of `secrets` appears.
fn leaks(out: &Path, o: &Output, secrets: &[&str]) -> Vec<String> {
    let mut hits = Vec::new();
    let printed = said(o);
    for s in secrets {
        if printed.contains(s) {
            hits.push(format!("stdout/stderr: {s}"));
        }
    }
    let mut stack = vec![out.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let body = String::from_utf8_lossy(&std::fs::read(&p).expect("read")).into_owned();
            let decoded = serde_json::from_str::<Value>(&body)
                .ok()
                .and_then(|v| v["payload"].as_str().map(str::to_string))
                .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default();
            for s in secrets {
                if body.contains(s) || decoded.contains(s) {
                    hits.push(format!("{}: {s}", p.display()));
                }
            }
        }
    }
    hits
}

/// `aocheck run --case AOC-CASE-001 --out DIR --sut COMMAND [extra…]` with the environment
/// given.
fn run_sut(out: &Path, sut: &str, extra: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = bin();
    c.args([
        "run",
        "--case",
        "AOC-CASE-001",
        "--out",
        utf8(out),
        "--sut",
        sut,
    ])
    .args(extra);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("aocheck")
}

/// A token in the `--sut` command whose value is quoted and holds spaces
/// (`API_TOKEN='… …'`, as a shell user writes it) is removed whole, not its first word only.
#[test]
fn a_quoted_token_with_spaces_is_removed_whole() {
    let root = tempfile::tempdir().expect("tempdir");
    let out = root.path().join("run");
    let sut = format!(
        "env API_TOKEN='tok quoted spaced-secret-77' python3 {} --echo-env API_TOKEN -- {}",
        wrapper(),
        reference()
    );
    let o = run_sut(&out, &sut, &[], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", said(&o));
    let hits = leaks(&out, &o, &["spaced-secret-77"]);
    assert!(hits.is_empty(), "{hits:#?}");
}

/// Credentials passed as options (`--password=…`, `--db-password …`, `--api-key=…`,
/// `--client-secret …`, `--bearer …`, `AUTH_TOKEN=…`) reach no output; one the heuristic cannot
/// see (`-p …`) is named with `--redact` and reaches none either; an implementation that
/// writes its token to stderr has it removed from its log.
#[test]
fn credentials_in_options_reach_no_output() {
    let root = tempfile::tempdir().expect("tempdir");
    let out = root.path().join("run");
    let sut = format!(
        "env AUTH_TOKEN=pw-opt-secret-5 python3 {} --echo-env AUTH_TOKEN -- sh -c 'exec {}' impl --password=pw-opt-secret-1 --db-password pw-opt-secret-2 --api-key=pw-opt-secret-3 -p pw-short-opt-4 --client-secret pw-opt-secret-6 --bearer pw-opt-secret-7",
        wrapper(),
        reference()
    );
    let o = run_sut(&out, &sut, &["--redact", "pw-short-opt-4"], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", said(&o));
    let secrets = [
        "pw-opt-secret-1",
        "pw-opt-secret-2",
        "pw-opt-secret-3",
        "pw-short-opt-4",
        "pw-opt-secret-5",
        "pw-opt-secret-6",
        "pw-opt-secret-7",
    ];
    let hits = leaks(&out, &o, &secrets);
    assert!(hits.is_empty(), "{hits:#?}");
    let report = std::fs::read_to_string(out.join("report.json")).expect("report");
    assert!(
        report.contains("--password=[redacted]") && report.contains("--db-password [redacted]"),
        "the command stays recognisable"
    );
    let log = std::fs::read_to_string(out.join("sut/AOC-CASE-001/e1-1.stderr")).expect("log");
    assert!(log.contains("leak: [redacted]"), "{log}");
}

/// A URL in the command with a percent-encoded password: neither its encoded form (in the
/// command) nor its decoded form (echoed by the implementation) reaches any output.
#[test]
fn a_percent_encoded_url_password_reaches_no_output() {
    let root = tempfile::tempdir().expect("tempdir");
    let out = root.path().join("run");
    let sut = format!(
        "env DATABASE_URL=postgres://u:pw%40enc-secret%2F8@db.example/app python3 {} --echo-url-userinfo DATABASE_URL -- {}",
        wrapper(),
        reference()
    );
    let o = run_sut(&out, &sut, &[], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", said(&o));
    let hits = leaks(&out, &o, &["pw%40enc-secret%2F8", "pw@enc-secret/8"]);
    assert!(hits.is_empty(), "{hits:#?}");
    let report = std::fs::read_to_string(out.join("report.json")).expect("report");
    assert!(
        report.contains("DATABASE_URL=postgres://u:[redacted]@db.example/app"),
        "the URL is shown without its password"
    );
}

/// A grandchild that leaves the implementation's session and holds its stderr open past the
/// case (to write the token late, or to keep the log from being scrubbed at its end) is killed,
/// and the signed folder holds no token.
#[test]
fn a_lingering_grandchild_does_not_keep_a_log_unscrubbed() {
    let root = tempfile::tempdir().expect("tempdir");
    let key = root.path().join("k.pem");
    assert_eq!(aocheck(&["keygen", utf8(&key)]).status.code(), Some(0));
    let out = root.path().join("run");
    let sut = format!(
        "python3 {} --echo-env MY_SERVICE_CRED --linger 3 -- {}",
        wrapper(),
        reference()
    );
    let o = run_sut(
        &out,
        &sut,
        &["--redact", "tok-linger-secret-1", "--sign", utf8(&key)],
        &[("MY_SERVICE_CRED", "tok-linger-secret-1")],
    );
    assert!(matches!(o.status.code(), Some(0..=4)), "{}", said(&o));
    std::thread::sleep(Duration::from_secs(4));
    let hits = leaks(&out, &o, &["tok-linger-secret-1"]);
    assert!(hits.is_empty(), "{hits:#?}");
    let ok = aocheck(&[
        "verify",
        utf8(&out),
        "--key",
        &format!("{}.pub", key.display()),
    ]);
    assert_eq!(ok.status.code(), Some(0), "{}", said(&ok));
}

/// A file the implementation writes into the run folder (a log beside the SQLite store it was
/// given) with its token in it is signed as a file of the run: no signed output may hold a
/// credential, so the run must scrub it, or refuse to sign it.
#[test]
fn a_token_an_implementation_writes_into_the_folder_is_not_signed() {
    let root = tempfile::tempdir().expect("tempdir");
    let key = root.path().join("k.pem");
    assert_eq!(aocheck(&["keygen", utf8(&key)]).status.code(), Some(0));
    let out = root.path().join("run");
    let beside = out.join("sut/AOC-CASE-001/impl.log");
    let sut = format!(
        "env API_TOKEN=tok-written-secret-2 python3 {} --write-env API_TOKEN:{} -- {}",
        wrapper(),
        utf8(&beside),
        reference()
    );
    let o = run_sut(&out, &sut, &["--sign", utf8(&key)], &[]);
    assert!(beside.exists(), "the implementation wrote its log");
    let hits = leaks(&out, &o, &["tok-written-secret-2"]);
    assert!(hits.is_empty(), "{hits:#?}");
}

/// A credential that is also an ordinary word of the report (`verdict`, `holder`) is scrubbed
/// from values, never from the report's structure: the run still writes a report that parses,
/// and evidence that `analyze` reads.
#[test]
fn a_credential_that_is_a_report_word_does_not_break_the_run() {
    for word in ["verdict", "holder"] {
        let root = tempfile::tempdir().expect("tempdir");
        let out = root.path().join("run");
        let o = aocheck(&[
            "run",
            "--case",
            "AOC-CASE-001",
            "--store",
            "memory",
            "--out",
            utf8(&out),
            "--redact",
            word,
        ]);
        assert_eq!(o.status.code(), Some(0), "{word}: {}", said(&o));
        let a = analyze(&out);
        assert_eq!(a.status.code(), Some(0), "{word}: {}", said(&a));
    }
}

/// A PostgreSQL password that is a common word (`postgres`, the default of many setups) is
/// removed from the URL, but the store's kind and the reproduce command stay usable.
#[test]
fn a_common_word_store_password_keeps_the_report_usable() {
    let Ok(url) = std::env::var(crate::support::POSTGRES_ENV) else {
        eprintln!("note: skipped: set {}", crate::support::POSTGRES_ENV);
        return;
    };
    let Some((_, rest)) = url.split_once("://") else {
        panic!("{url}: not a URL");
    };
    let host = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
    let root = tempfile::tempdir().expect("tempdir");
    let out = root.path().join("run");
    let store = format!("postgres:postgres://postgres:postgres@{host}");
    let o = aocheck(&[
        "run",
        "--case",
        "AOC-CASE-001",
        "--store",
        &store,
        "--out",
        utf8(&out),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", said(&o));
    let r = read_json(&out.join("report.json"));
    assert_eq!(r["store"]["kind"], "postgres", "{}", r["store"]);
    let repro = r["cases"][0]["repro"].as_str().expect("repro");
    assert!(
        repro.contains("--store postgres:postgres://postgres:[redacted]@"),
        "{repro}"
    );
}

/// A `--store` value aocheck refuses (a typo in the scheme, the key/value form) is not echoed
/// back with its password.
#[test]
fn a_refused_store_value_is_not_echoed_with_its_password() {
    let root = tempfile::tempdir().expect("tempdir");
    let out = root.path().join("run");
    for store in [
        "postgres:postgress://postgres:pw-typo-secret-6@127.0.0.1:5432/test",
        "postgres:host=127.0.0.1 user=postgres password=pw-kv-secret-7 dbname=test",
        "postgre:postgres://postgres:pw-typo-secret-8@127.0.0.1:5432/test",
    ] {
        let o = aocheck(&[
            "run",
            "--case",
            "AOC-CASE-001",
            "--store",
            store,
            "--out",
            utf8(&out),
        ]);
        assert_eq!(o.status.code(), Some(3), "{store}: {}", said(&o));
        let hits = leaks(
            &out,
            &o,
            &["pw-typo-secret-6", "pw-kv-secret-7", "pw-typo-secret-8"],
        );
        assert!(hits.is_empty(), "{store}: {hits:#?}");
    }
}
