//! The GitHub Action (`action.yml`) and the scripts it runs (`scripts/ci/`), run here as the
//! runner would run them: a conforming run appends its summary, sets its outputs and annotates
//! nothing; a broken implementation gets one `::error` per failure at its case file and the step
//! exits 1; what an implementation says cannot break or inject a workflow command; the action's
//! inputs and the scripts' variables cannot drift apart; the installer pins its ref.

use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_aocheck");

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// What one run of `scripts/ci/aocheck-action.sh` left.
struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    summary: String,
    outputs: BTreeMap<String, String>,
}

impl Ran {
    fn text(&self) -> String {
        format!(
            "exit {:?}\nstdout:\n{}\nstderr:\n{}\noutputs: {:?}",
            self.code, self.stdout, self.stderr, self.outputs
        )
    }

    fn commands(&self, kind: &str) -> Vec<&str> {
        let head = format!("::{kind} ");
        self.stdout
            .lines()
            .filter(|l| l.starts_with(&head))
            .collect()
    }
}

/// A command with none of the caller's GitHub or aocheck variables (a test run inside a CI job
/// must not write into that job's summary).
fn clean_command(program: &str) -> Command {
    let mut c = Command::new(program);
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy().into_owned();
        if k.starts_with("GITHUB_") || k.starts_with("AOCHECK_") || k.starts_with("RUNNER_") {
            c.env_remove(k);
        }
    }
    c.current_dir(root());
    c
}

/// Runs the action's script from the repository root (so case files are named `cases/...`), as
/// a GitHub runner would: job summary and output files, `GITHUB_ACTIONS=true`.
fn action(tmp: &Path, env: &[(&str, &str)]) -> Ran {
    action_in(tmp, &root(), env)
}

/// The same from another working folder.
fn action_in(tmp: &Path, cwd: &Path, env: &[(&str, &str)]) -> Ran {
    let summary = tmp.join("step-summary.md");
    let outputs = tmp.join("github-output");
    std::fs::write(&summary, "## earlier step\n\n").expect("summary");
    std::fs::write(&outputs, "").expect("outputs");
    let mut c = clean_command("bash");
    c.arg(root().join("scripts/ci/aocheck-action.sh"))
        .env("AOCHECK_BIN", BIN)
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_WORKSPACE", root())
        .env("GITHUB_STEP_SUMMARY", &summary)
        .env("GITHUB_OUTPUT", &outputs)
        .env("RUNNER_TEMP", tmp)
        .current_dir(cwd);
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().expect("bash runs");
    let outputs = std::fs::read_to_string(&outputs).expect("outputs");
    Ran {
        code: o.status.code(),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        summary: std::fs::read_to_string(&summary).expect("summary"),
        outputs: parse_outputs(&outputs),
    }
}

/// `name=value` lines and `name<<DELIMITER` blocks, as GitHub reads GITHUB_OUTPUT.
fn parse_outputs(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut lines = text.lines();
    while let Some(l) = lines.next() {
        if let Some((k, delim)) = l.split_once("<<") {
            let mut v = Vec::new();
            for m in lines.by_ref() {
                if m == delim {
                    break;
                }
                v.push(m);
            }
            out.insert(k.to_string(), v.join("\n"));
        } else if let Some((k, v)) = l.split_once('=') {
            out.insert(k.to_string(), v.to_string());
        }
    }
    out
}

fn report(out: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(out.join("report.json")).expect("report.json"))
        .expect("json")
}

/// The workflow-command rules (GitHub's `toCommandValue`/`escapeProperty`), reversed.
fn unescape(s: &str) -> String {
    s.replace("%0D", "\r")
        .replace("%0A", "\n")
        .replace("%3A", ":")
        .replace("%2C", ",")
        .replace("%25", "%")
}

/// `::kind prop=v,prop=v::message` taken apart (values unescaped).
fn parse_command(line: &str) -> (String, BTreeMap<String, String>, String) {
    let rest = line.strip_prefix("::").expect("a workflow command");
    let (head, message) = rest.split_once("::").expect("`::` after the properties");
    let (kind, props) = head.split_once(' ').unwrap_or((head, ""));
    let props = props
        .split(',')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').expect("key=value");
            (k.to_string(), unescape(v))
        })
        .collect();
    (kind.to_string(), props, unescape(message))
}

/// aocheck's own output lies between `::stop-commands::TOKEN` and `::TOKEN::`, and the
/// script's annotations after it.
fn assert_commands_stopped_while_aocheck_ran(r: &Ran) {
    let lines: Vec<&str> = r.stdout.lines().collect();
    let stop = lines
        .iter()
        .position(|l| l.starts_with("::stop-commands::"))
        .unwrap_or_else(|| panic!("no stop-commands\n{}", r.text()));
    let token = &lines[stop]["::stop-commands::".len()..];
    assert!(token.len() >= 32, "a guessable token: {token:?}");
    let resume = lines
        .iter()
        .position(|l| *l == format!("::{token}::"))
        .unwrap_or_else(|| panic!("commands never resumed\n{}", r.text()));
    assert!(
        lines[stop + 1..resume]
            .iter()
            .any(|l| l.starts_with("aocheck: seed")),
        "aocheck's output is not inside the stopped stretch\n{}",
        r.text()
    );
    for (i, l) in lines.iter().enumerate() {
        if l.starts_with("::error") || l.starts_with("::warning") || l.starts_with("::notice") {
            assert!(i > resume, "an annotation while commands are stopped: {l}");
        }
    }
}

#[test]
fn a_conforming_run_appends_its_summary_sets_outputs_and_annotates_nothing() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("report");
    let r = action(
        tmp.path(),
        &[
            ("AOCHECK_STORE", "memory"),
            ("AOCHECK_OUT", out.to_str().expect("utf-8")),
            (
                "AOCHECK_EXTRA_ARGS",
                "--case AOC-CASE-001 --case 'AOC-CASE-002' --seed 23",
            ),
        ],
    );
    assert_eq!(r.code, Some(0), "{}", r.text());
    assert!(r.commands("error").is_empty(), "{}", r.text());
    assert_commands_stopped_while_aocheck_ran(&r);
    let rep = report(&out);
    let ids: Vec<&str> = rep["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .filter_map(|c| c["id"].as_str())
        .collect();
    assert_eq!(ids, ["AOC-CASE-001", "AOC-CASE-002"], "the extra arguments");
    assert_eq!(r.outputs["pass"], "2", "{}", r.text());
    assert_eq!(r.outputs["fail"], "0");
    assert_eq!(r.outputs["other"], "0");
    assert_eq!(r.outputs["exit-code"], "0");
    assert_eq!(r.outputs["explore-exit-code"], "");
    assert_eq!(
        r.outputs["report"],
        out.join("report.json").to_str().expect("utf-8")
    );
    assert_eq!(r.outputs["artifact-name"], "aocheck-report");
    // Appended after what an earlier step wrote, not in its place.
    let md = std::fs::read_to_string(out.join("summary.md")).expect("summary.md");
    assert!(
        r.summary.starts_with("## earlier step\n\n") && r.summary.contains(md.trim_end()),
        "{}",
        r.summary
    );
}

#[test]
fn without_a_cases_folder_the_suite_shipped_with_the_action_runs_at_the_given_seed() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let work = tmp.path().join("workspace");
    std::fs::create_dir_all(&work).expect("dir");
    let r = action_in(
        tmp.path(),
        &work,
        &[
            ("GITHUB_WORKSPACE", work.to_str().expect("utf-8")),
            ("GITHUB_ACTION_PATH", root().to_str().expect("utf-8")),
            ("AOCHECK_STORE", "memory"),
            ("AOCHECK_SEED", "4242"),
            ("AOCHECK_EXTRA_ARGS", "--case AOC-CASE-001"),
        ],
    );
    assert_eq!(r.code, Some(0), "{}", r.text());
    let rep = report(&work.join("aocheck-report"));
    assert_eq!(rep["seed"], 4242);
    let file = rep["cases"][0]["file"].as_str().expect("file");
    assert!(Path::new(file).starts_with(root().join("cases")), "{file}");
}

#[test]
fn a_broken_implementation_fails_the_step_with_one_error_per_failure_at_its_case_file() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("report");
    let sut = format!("'{BIN}' sut reference --variant replay_unknown");
    let r = action(
        tmp.path(),
        &[
            ("AOCHECK_SUT", &sut),
            ("AOCHECK_OUT", out.to_str().expect("utf-8")),
            ("AOCHECK_SHARD", ""),
            ("AOCHECK_STRICT", "false"),
            (
                "AOCHECK_EXTRA_ARGS",
                "--case AOC-CASE-001 --case AOC-CASE-003 --seed 23",
            ),
        ],
    );
    assert_eq!(r.code, Some(1), "{}", r.text());
    assert_commands_stopped_while_aocheck_ran(&r);
    let rep = report(&out);
    // Every failed case x requirement, with the case file the report names.
    let mut wanted = BTreeSet::new();
    for c in rep["cases"].as_array().expect("cases") {
        if c["verdict"] == "fail" {
            for f in c["failures"].as_array().expect("failures") {
                wanted.insert((
                    c["file"].as_str().expect("file").to_string(),
                    format!(
                        "{} {}",
                        c["id"].as_str().expect("id"),
                        f["requirement"].as_str().expect("requirement")
                    ),
                ));
            }
        }
    }
    assert!(
        !wanted.is_empty(),
        "replay_unknown fails a case\n{}",
        r.text()
    );
    let errors = r.commands("error");
    assert_eq!(errors.len(), wanted.len(), "{}", r.text());
    let mut got = BTreeSet::new();
    for e in &errors {
        let (kind, props, message) = parse_command(e);
        assert_eq!(kind, "error");
        let file = props["file"].clone();
        assert!(file.starts_with("cases/"), "{e}");
        assert!(root().join(&file).is_file(), "{file} is not a case file");
        let line: usize = props["line"].parse().expect("a line number");
        let lines = std::fs::read_to_string(root().join(&file))
            .expect("case file")
            .lines()
            .count();
        assert!((1..=lines).contains(&line), "{e}");
        let case = props["title"].split(' ').next().expect("case id");
        assert!(message.starts_with(case), "{e}");
        got.insert((file, props["title"].clone()));
    }
    assert_eq!(got, wanted);
    assert!(
        got.iter()
            .any(|(f, t)| f.contains("AOC-CASE-003") && t == "AOC-CASE-003 AOC-REQ-010"),
        "{got:?}"
    );
    assert_eq!(r.outputs["fail"], "1", "{}", r.text());
    assert_eq!(r.outputs["pass"], "1");
    assert_eq!(r.outputs["exit-code"], "1");
    assert!(r.summary.contains("AOC-CASE-003"), "{}", r.summary);

    // Without report.sarif the same failures come from report.json, at line 1.
    let _ = std::fs::remove_file(out.join("report.sarif"));
    let o = annotate(&out);
    let lines: Vec<&str> = o.lines().filter(|l| l.starts_with("::error ")).collect();
    let from_json: BTreeSet<(String, String)> = lines
        .iter()
        .map(|l| {
            let (_, p, _) = parse_command(l);
            assert_eq!(p["line"], "1", "{l}");
            (p["file"].clone(), p["title"].clone())
        })
        .collect();
    assert_eq!(from_json, wanted, "{o}");
}

#[test]
fn a_shard_names_its_artifact_and_a_bad_input_is_refused_before_anything_runs() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("report");
    let r = action(
        tmp.path(),
        &[
            ("AOCHECK_OUT", out.to_str().expect("utf-8")),
            ("AOCHECK_STRICT", "maybe"),
            ("AOCHECK_SHARD", "2/3"),
        ],
    );
    assert_eq!(r.code, Some(3), "{}", r.text());
    assert!(r.stderr.contains("strict"), "{}", r.text());
    assert!(!out.exists());
    // A key that is neither a file nor PEM: refused, and its value is not shown.
    let secret = "not-a-key-but-secret-7f3a";
    let r = action(
        tmp.path(),
        &[
            ("AOCHECK_OUT", out.to_str().expect("utf-8")),
            ("AOCHECK_SIGN_KEY", secret),
        ],
    );
    assert_eq!(r.code, Some(3), "{}", r.text());
    assert!(!r.stdout.contains(secret) && !r.stderr.contains(secret));
    // The artifact name of a shard (before aocheck runs, so no --shard support is needed).
    let r = action(
        tmp.path(),
        &[
            ("AOCHECK_OUT", out.to_str().expect("utf-8")),
            ("AOCHECK_BIN", "/nonexistent/aocheck"),
            ("AOCHECK_SHARD", "2/3"),
            ("AOCHECK_ARTIFACT_NAME", "impl:report"),
        ],
    );
    assert_eq!(r.outputs["artifact-name"], "impl-report-shard-2-of-3");
    assert_eq!(r.outputs["exit-code"], "127", "{}", r.text());
    assert!(
        r.summary.contains("before writing a report"),
        "{}",
        r.summary
    );
}

#[test]
fn a_signing_key_given_as_pem_text_signs_and_is_neither_shown_nor_passed_on() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let key = tmp.path().join("k.pem");
    let o = clean_command(BIN)
        .args(["keygen", key.to_str().expect("utf-8")])
        .output()
        .expect("keygen");
    assert!(o.status.success());
    let pem = std::fs::read_to_string(&key).expect("pem");
    let body = pem.lines().nth(1).expect("a base64 line").to_string();
    let out = tmp.path().join("report");
    // The implementation writes down the environment it was given.
    let seen = tmp.path().join("sut-env");
    let sut = format!(
        "sh -c 'env >> \"{}\"; exec \"{BIN}\" sut reference'",
        seen.display()
    );
    let r = action(
        tmp.path(),
        &[
            ("AOCHECK_SUT", &sut),
            ("AOCHECK_OUT", out.to_str().expect("utf-8")),
            ("AOCHECK_SIGN_KEY", &pem),
            ("AOCHECK_EXTRA_ARGS", "--case AOC-CASE-001"),
        ],
    );
    assert_eq!(r.code, Some(0), "{}", r.text());
    assert!(out.join("report.dsse.json").is_file(), "{}", r.text());
    assert!(!r.stdout.contains(&body) && !r.stderr.contains(&body));
    let env = std::fs::read_to_string(&seen).expect("the implementation ran");
    assert!(
        !env.contains(&body) && !env.contains("AOCHECK_SIGN_KEY"),
        "the key reached the implementation"
    );
    assert!(r.stderr.contains("--sign '***'"), "{}", r.text());
    // The private file it was written to is gone.
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .expect("dir")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("aocheck-sign"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

fn annotate(out: &Path) -> String {
    let o = clean_command("python3")
        .arg(root().join("scripts/ci/aocheck_ci.py"))
        .arg("annotate")
        .arg(out)
        .env("GITHUB_WORKSPACE", root())
        .output()
        .expect("python3");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).expect("utf-8")
}

/// What an implementation may say: a percent sign, CR/LF, commas and colons, NUL, an escape
/// sequence, DEL, a C1 control, a tab, a line separator and a would-be workflow command.
const HOSTILE: &str =
    "100% wrong,\r\nsee: a\u{0}b\u{1b}[31m\u{7f}\u{85}\tc\u{2028}\n::warning::forged";
/// `HOSTILE` with the control characters dropped (a tab becomes a space), CR and LF kept.
const CLEANED: &str = "100% wrong,\r\nsee: ab[31m c\n::warning::forged";
const ODD_FILE: &str = "cases/odd, name: 50%.yaml";

#[test]
fn whatever_a_message_holds_each_annotation_is_one_well_formed_line() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let json_dir = tmp.path().join("json");
    std::fs::create_dir_all(&json_dir).expect("dir");
    let rep = json!({
        "cases": [{
            "id": "AOC-CASE-X",
            "file": ODD_FILE,
            "verdict": "fail",
            "failures": [{"requirement": "AOC-REQ-001", "step": 0, "msg": HOSTILE}],
        }],
        "summary": {"cases": 1, "pass": 0, "fail": 1, "other": 0},
    });
    std::fs::write(json_dir.join("report.json"), rep.to_string()).expect("write");
    let sarif_dir = tmp.path().join("sarif");
    std::fs::create_dir_all(&sarif_dir).expect("dir");
    let log = json!({"version": "2.1.0", "runs": [{"results": [{
        "ruleId": "AOC-REQ-001",
        "level": "error",
        "message": {"text": format!("AOC-CASE-X: {HOSTILE}")},
        "locations": [{"physicalLocation": {
            "artifactLocation": {"uri": ODD_FILE, "uriBaseId": "SRCROOT"},
            "region": {"startLine": 7},
        }}],
        "properties": {"case": "AOC-CASE-X", "verdict": "fail"},
    }]}]});
    std::fs::write(sarif_dir.join("report.sarif"), log.to_string()).expect("write");
    for (dir, line) in [(&json_dir, "1"), (&sarif_dir, "7")] {
        let o = annotate(dir);
        let lines: Vec<&str> = o.split('\n').filter(|l| !l.is_empty()).collect();
        assert_eq!(lines.len(), 1, "{o:?}");
        let l = lines[0];
        assert!(!l.chars().any(char::is_control), "{l:?}");
        assert!(!l.contains('\u{2028}'), "{l:?}");
        let (kind, props, message) = parse_command(l);
        assert_eq!(kind, "error", "{l}");
        assert_eq!(
            props.keys().map(String::as_str).collect::<Vec<_>>(),
            ["file", "line", "title"],
            "{l}"
        );
        assert_eq!(props["file"], ODD_FILE, "{l}");
        assert_eq!(props["line"], line, "{l}");
        assert_eq!(props["title"], "AOC-CASE-X AOC-REQ-001", "{l}");
        assert_eq!(message, format!("AOC-CASE-X: {CLEANED}"), "{l}");
    }
    // The helper's escaping on its own, as GitHub's rules have it.
    let esc = |what: &str, s: &str| {
        let o = clean_command("python3")
            .arg(root().join("scripts/ci/aocheck_ci.py"))
            .args([what, s])
            .output()
            .expect("python3");
        String::from_utf8(o.stdout)
            .expect("utf-8")
            .trim_end_matches('\n')
            .to_string()
    };
    assert_eq!(esc("escape-data", "a%b\r\nc:d,e"), "a%25b%0D%0Ac:d,e");
    assert_eq!(
        esc("escape-property", "a%b\r\nc:d,e"),
        "a%25b%0D%0Ac%3Ad%2Ce"
    );
}

/// The step of action.yml whose `run` calls `scripts/ci/NAME`, and NAME's text.
fn steps_with_scripts(action: &Value) -> Vec<(Value, String, String)> {
    action["runs"]["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .filter_map(|s| {
            let run = s["run"].as_str()?;
            let at = run.find("scripts/ci/")?;
            let name: String = run[at..]
                .chars()
                .take_while(|c| !c.is_whitespace() && *c != '"' && *c != '\'')
                .collect();
            let text = std::fs::read_to_string(root().join(&name))
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            Some((s.clone(), name, text))
        })
        .collect()
}

/// Every `AOCHECK_…` variable a script names.
fn variables(script: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = script;
    while let Some(at) = rest.find("AOCHECK_") {
        let name: String = rest[at..]
            .chars()
            .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
            .collect();
        out.insert(name.trim_end_matches('_').to_string());
        rest = &rest[at + "AOCHECK_".len()..];
    }
    out
}

/// `${{ inputs.NAME }}` → NAME.
fn input_of(v: &str) -> Option<&str> {
    v.trim()
        .strip_prefix("${{")?
        .strip_suffix("}}")?
        .trim()
        .strip_prefix("inputs.")
}

#[test]
fn the_actions_inputs_and_the_scripts_variables_cannot_drift_apart() {
    let text = std::fs::read_to_string(root().join("action.yml")).expect("action.yml");
    let action: Value = serde_saphyr::from_str(&text).expect("action.yml is YAML");
    assert_eq!(action["runs"]["using"], "composite");
    let declared: BTreeSet<String> = action["inputs"]
        .as_object()
        .expect("inputs")
        .keys()
        .cloned()
        .collect();
    for want in [
        "sut",
        "store",
        "cases",
        "expect",
        "strict",
        "baseline",
        "sign-key",
        "explore-time",
        "out",
        "ref",
        "shard",
    ] {
        assert!(declared.contains(want), "input {want} is not declared");
    }
    // Set by the scripts themselves, or for them by something other than an input.
    let internal: BTreeSet<&str> = [
        "AOCHECK_BIN",
        "AOCHECK_INSTALL_DRY_RUN",
        "AOCHECK_GIT_COMMIT",
    ]
    .into();
    let steps = steps_with_scripts(&action);
    assert_eq!(steps.len(), 2, "an install step and a run step");
    let mut passed = BTreeSet::new();
    for (step, name, script) in &steps {
        let run = step["run"].as_str().expect("run");
        assert!(
            !run.contains("${{"),
            "{name}: an expression spliced into a script"
        );
        let env: BTreeMap<String, String> = step["env"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                    .collect()
            })
            .unwrap_or_default();
        let read = variables(script);
        for v in &read {
            if internal.contains(v.as_str()) {
                continue;
            }
            assert!(
                env.contains_key(v),
                "{name} reads {v}, which its step in action.yml does not set"
            );
        }
        for (k, v) in &env {
            assert!(
                read.contains(k),
                "action.yml sets {k}, which {name} never reads"
            );
            if let Some(input) = input_of(v) {
                assert!(
                    declared.contains(input),
                    "{k} is set from undeclared input {input}"
                );
                passed.insert(input.to_string());
            } else {
                assert!(
                    v.trim().starts_with("${{ github."),
                    "{k} is set from neither an input nor the github context: {v}"
                );
            }
        }
    }
    assert_eq!(passed, declared, "an input that no script receives");
    // Each output is one the run script writes.
    let (_, _, run_script) = steps
        .iter()
        .find(|(s, _, _)| s["id"] == "run")
        .expect("the run step has id run");
    for (name, o) in action["outputs"].as_object().expect("outputs") {
        let v = o["value"].as_str().expect("value");
        assert_eq!(
            v,
            format!("${{{{ steps.run.outputs.{name} }}}}"),
            "output {name}"
        );
        assert!(
            run_script.contains(&format!("output {name} ")),
            "the run script never writes output {name}"
        );
    }
    for want in ["pass", "fail", "other", "exit-code", "report"] {
        assert!(action["outputs"].get(want).is_some(), "output {want}");
    }
    // The report folder is uploaded whatever the verdict.
    let upload = action["runs"]["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .find(|s| {
            s["uses"]
                .as_str()
                .is_some_and(|u| u.starts_with("actions/upload-artifact@v4"))
        })
        .expect("an upload-artifact step");
    assert_eq!(upload["if"], "always()");
    assert_eq!(upload["with"]["path"], "${{ inputs.out }}");
}

fn install(env: &[(&str, &str)], path_dir: Option<&Path>) -> Output {
    let mut c = clean_command("bash");
    c.arg(root().join("scripts/ci/install-aocheck.sh"))
        .env("AOCHECK_INSTALL_DRY_RUN", "true");
    // Only the system's tools on PATH, and the given folder before them: no aocheck of the
    // caller's is found.
    let mut path = String::from("/usr/bin:/bin");
    if let Some(d) = path_dir {
        path = format!("{}:{path}", d.display());
    }
    c.env("PATH", path);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("bash runs")
}

#[test]
fn the_installer_pins_its_ref_and_skips_an_aocheck_already_built_from_it() {
    let sha = "0123456789abcdef0123456789abcdef01234567";
    let o = install(
        &[
            ("AOCHECK_REF", sha),
            ("AOCHECK_ACTION_REPOSITORY", "someone/aocheck"),
        ],
        None,
    );
    assert!(o.status.success(), "{o:?}");
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        format!(
            "cargo install --locked --git https://github.com/someone/aocheck --rev {sha} aocheck"
        )
    );
    // No ref input: the action's own ref.
    let o = install(
        &[
            ("AOCHECK_ACTION_REF", "4c59b707"),
            ("AOCHECK_ACTION_REPOSITORY", "someone/aocheck"),
        ],
        None,
    );
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("--rev 4c59b707 aocheck"),
        "{o:?}"
    );
    // Neither known (a composite action's contexts can be empty): the action's own copy.
    let root_s = root().display().to_string();
    let o = install(&[("GITHUB_ACTION_PATH", &root_s)], None);
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        format!("cargo install --locked --path {root_s}")
    );
    // An aocheck on PATH built from the wanted commit is kept.
    let tmp = tempfile::tempdir().expect("tempdir");
    std::os::unix::fs::symlink(BIN, tmp.path().join("aocheck")).expect("symlink");
    let v = clean_command(BIN)
        .arg("--version")
        .output()
        .expect("version");
    let v = String::from_utf8_lossy(&v.stdout).to_string();
    let commit = v
        .split("(commit ")
        .nth(1)
        .and_then(|s| s.split(')').next())
        .expect("aocheck --version names a commit")
        .to_string();
    if commit.chars().all(|c| c.is_ascii_hexdigit()) && commit.len() >= 7 {
        let o = install(
            &[
                ("AOCHECK_REF", &commit),
                ("AOCHECK_ACTION_REPOSITORY", "someone/aocheck"),
            ],
            Some(tmp.path()),
        );
        assert!(o.status.success(), "{o:?}");
        assert!(o.stdout.is_empty(), "{o:?}");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("not installing"),
            "{o:?}"
        );
    }
    // ... and one built from another is not.
    let o = install(
        &[
            ("AOCHECK_REF", sha),
            ("AOCHECK_ACTION_REPOSITORY", "someone/aocheck"),
        ],
        Some(tmp.path()),
    );
    assert!(
        String::from_utf8_lossy(&o.stdout).contains(&format!("--rev {sha}")),
        "{o:?}"
    );
}
