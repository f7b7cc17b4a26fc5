//! The case rulebook: every defect at once, each with file, case, field, line where possible and
//! the fix; the shipped cases are valid and cover every requirement.

use rstest::rstest;
use std::path::Path;

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write");
    p
}

#[test]
fn the_shipped_cases_are_valid_and_evaluate_every_requirement() {
    let (cases, defects) =
        aocheck::case::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("cases"));
    assert!(defects.is_empty(), "{defects:#?}");
    assert!(cases.len() >= 17);
    for r in aocheck::Req::ALL {
        assert!(
            cases
                .iter()
                .any(|c| c.case.requirements.iter().any(|x| x == r.id())),
            "{r} is evaluated by no case"
        );
    }
    for n in 1..=12 {
        let id = format!("AOC-CASE-{n:03}");
        assert!(cases.iter().any(|c| c.case.id == id), "{id} missing");
    }
    // The schema names every step verb the loader accepts.
    let schema = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("cases/schema/case.schema.json"),
    )
    .expect("schema");
    for c in &cases {
        for s in &c.case.steps {
            assert!(
                schema.contains(&format!("\"const\": \"{}\"", s.verb())),
                "schema lacks {}",
                s.verb()
            );
        }
    }
}

#[rstest]
#[case::unknown_verb("steps:\n  - {do: teleport}\n", "-", "teleport")]
#[case::unknown_field("steps:\n  - {do: join, executor: e1, colour: red}\n", "-", "colour")]
#[case::bad_requirement(
    "steps:\n  - {do: join, executor: e1}\n",
    "requirements[0]",
    "AOC-REQ-099"
)]
fn defects_name_the_field(#[case] steps: &str, #[case] field: &str, #[case] needle: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let req = if needle == "AOC-REQ-099" {
        "AOC-REQ-099"
    } else {
        "AOC-REQ-001"
    };
    let text = format!("id: X-1\ntitle: t\nrequirements: [{req}]\n{steps}");
    write(dir.path(), "X-1-t.yaml", &text);
    let (_, defects) = aocheck::case::load(dir.path());
    assert!(
        defects
            .iter()
            .any(|d| d.field == field && d.to_string().contains(needle)),
        "{defects:#?}"
    );
}

#[test]
fn every_semantic_defect_is_reported_at_once_with_line_and_fix() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        "WRONG-NAME.yaml",
        "id: X-2\ntitle: ''\nrequirements: []\nsteps:\n  - {do: create, occurrence: o1}\n  - {do: execute, occurrence: ghost, expect: refused AOC-REQ-042}\n  - {do: release, occurrence: o1, reason: bored}\nexpect:\n  occurrences:\n    nobody: {state: floating}\n",
    );
    let (_, defects) = aocheck::case::load(dir.path());
    let text: Vec<String> = defects.iter().map(|d| d.to_string()).collect();
    for needle in [
        "id:",
        "title:",
        "requirements:",
        "steps[0].executor",
        "steps[1].occurrence",
        "steps[1].expect",
        "steps[2].reason",
        "expect.occurrences.nobody",
    ] {
        assert!(
            text.iter().any(|t| t.contains(needle)),
            "{needle} not reported in {text:#?}"
        );
    }
    assert!(defects.iter().all(|d| !d.fix.is_empty()));
    assert!(
        defects
            .iter()
            .any(|d| d.line == Some(6) && d.field == "steps[1].occurrence"),
        "{defects:#?}"
    );
}

#[test]
fn cases_check_exits_3_on_defects() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        "X-3-t.yaml",
        "id: X-3\ntitle: t\nrequirements: [AOC-REQ-001]\nsteps: []\n",
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_aocheck"))
        .args(["cases", "check"])
        .arg(dir.path())
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("X-3-t.yaml"));
    let ok = std::process::Command::new(env!("CARGO_BIN_EXE_aocheck"))
        .args(["cases", "check"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run");
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
}
