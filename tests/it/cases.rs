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

/// Alternatives (`any_of`) are checked like any expectation: each word, and their shape.
#[rstest]
#[case::nested(
    "any_of: [{state: resolved, any_of: [{state: released}, {state: pending}]}, {state: released}]",
    "expect.occurrences.o1.any_of[0].any_of",
    "do not nest"
)]
#[case::single(
    "any_of: [{state: resolved}]",
    "expect.occurrences.o1.any_of",
    "no choice"
)]
#[case::empty(
    "any_of: [{}, {state: released}]",
    "expect.occurrences.o1.any_of[0]",
    "accepts anything"
)]
#[case::unknown_word(
    "any_of: [{state: resolved}, {state: floating}]",
    "expect.occurrences.o1.any_of[1].state",
    "floating"
)]
#[case::unknown_authority(
    "any_of: [{authority: lent}, {state: released}]",
    "expect.occurrences.o1.any_of[0].authority",
    "lent"
)]
fn alternatives_are_validated(#[case] expect: &str, #[case] field: &str, #[case] needle: &str) {
    let text = format!(
        "id: X-4\ntitle: t\nrequirements: [AOC-REQ-010]\nsteps:\n  - {{do: join, executor: e1}}\n  - {{do: create, occurrence: o1}}\nexpect:\n  occurrences:\n    o1: {{{expect}}}\n"
    );
    assert_refused(&text, field, needle);
}

/// The case `text` is refused with a defect naming `field`, and never runs.
fn assert_refused(text: &str, field: &str, needle: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "X-4-t.yaml", text);
    let (cases, defects) = aocheck::case::load(dir.path());
    assert!(
        defects
            .iter()
            .any(|d| d.field == field && d.to_string().contains(needle)),
        "{defects:#?}"
    );
    assert!(
        cases.iter().all(|c| c.checked.is_none()),
        "a defective case must not run"
    );
}

#[rstest]
#[case::unknown_verb("steps:\n  - {do: teleport}\n", "steps[0]", "teleport")]
#[case::unknown_field(
    "steps:\n  - {do: join, executor: e1, colour: red}\n",
    "steps[0]",
    "colour"
)]
#[case::unknown_block_field(
    "steps:\n  - {do: join, executor: e1}\n  - do: join\n    colour: red\n",
    "steps[1].colour",
    "X-1-t.yaml:7:"
)]
#[case::syntax_error(
    "steps:\n  - {do: join, executor: e1}\n  - do: join\n    executor: e2\n   oops: 1\n",
    "steps[1].oops",
    "X-1-t.yaml:8: X-1: "
)]
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

/// The case schema's words for an occurrence's final state are the shared vocabulary, exactly.
#[test]
fn the_case_schema_lists_exactly_the_shared_vocabulary() {
    use aocheck::vocab::{Authority, Flag, Outcome, State};
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("cases/schema/case.schema.json"),
        )
        .expect("schema"),
    )
    .expect("json");
    let occ = &schema["properties"]["expect"]["properties"]["occurrences"]["additionalProperties"]
        ["properties"];
    let listed = |v: &serde_json::Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let names = |all: Vec<&str>| all.into_iter().map(str::to_string).collect::<Vec<_>>();
    assert_eq!(
        listed(&occ["state"]["oneOf"][0]["enum"]),
        names(State::ALL.iter().map(|w| w.name()).collect())
    );
    assert_eq!(
        listed(&occ["outcome"]["enum"]),
        names(Outcome::ALL.iter().map(|w| w.name()).collect())
    );
    assert_eq!(
        listed(&occ["authority"]["enum"]),
        names(Authority::ALL.iter().map(|w| w.name()).collect())
    );
    assert_eq!(
        listed(&occ["missing_knowledge"]["items"]["enum"]),
        names(Flag::ALL.iter().map(|w| w.name()).collect())
    );
}

/// A case the rulebook refuses is never run: the loader gives it no typed form, and the runner
/// says so instead of guessing (no silent `ok` for an unreadable expectation).
#[test]
fn a_case_with_defects_has_no_typed_form() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        "X-3.yaml",
        "id: X-3\ntitle: t\nrequirements: [AOC-REQ-002]\nsteps:\n  - {do: join, executor: e1}\n  - {do: create, occurrence: o1, expect: refussed}\n",
    );
    let (cases, defects) = aocheck::case::load(dir.path());
    assert!(
        defects.iter().any(|d| d.field == "steps[1].expect"),
        "{defects:#?}"
    );
    assert!(cases[0].checked.is_none());
    write(
        dir.path(),
        "X-3.yaml",
        "id: X-3\ntitle: t\nrequirements: [AOC-REQ-002]\nsteps:\n  - {do: join, executor: e1}\n  - {do: create, occurrence: o1, expect: refused AOC-REQ-002}\n  - {do: create, occurrence: o2}\nexpect:\n  occurrences:\n    o1: {state: pending, missing_knowledge: [transport]}\n    o2: {state: [resolved, unresolved]}\n",
    );
    let (cases, defects) = aocheck::case::load(dir.path());
    assert!(defects.is_empty(), "{defects:#?}");
    let k = cases[0].checked.as_ref().expect("checked");
    assert_eq!(
        k.expected[1],
        aocheck::case::Expected::Refused(Some(aocheck::aoc::Req::R002))
    );
    assert_eq!(k.occurrences["o1"].state, [aocheck::vocab::State::Pending]);
    assert_eq!(
        k.occurrences["o2"].state,
        [
            aocheck::vocab::State::Resolved,
            aocheck::vocab::State::Unresolved
        ]
    );
    assert_eq!(
        k.occurrences["o1"].missing_knowledge,
        [aocheck::vocab::Flag::Transport]
    );
}

/// A race is refused unless it is two or more requests that can race, to executors that joined,
/// on occurrences already created, with no expectation of their own (its order decides who wins).
#[rstest]
#[case::one_step("[{do: execute, occurrence: o1}]", "steps[3].steps", "two or more")]
#[case::own_expect(
    "[{do: execute, occurrence: o1, expect: ok}, {do: execute, occurrence: o1}]",
    "steps[3].steps[0].expect",
    "depends on the order"
)]
#[case::background(
    "[{do: send, occurrence: o1, background: true}, {do: execute, occurrence: o1}]",
    "steps[3].steps[0].background",
    "answered in the race"
)]
#[case::not_joined(
    "[{do: execute, occurrence: o1, executor: e9}, {do: execute, occurrence: o1}]",
    "steps[3].steps[0].executor",
    "e9"
)]
#[case::not_created(
    "[{do: execute, occurrence: o1}, {do: execute, occurrence: o7}]",
    "steps[3].steps[1].occurrence",
    "o7"
)]
#[case::nothing_raced(
    "[{do: execute, occurrence: o1}, {do: reconcile, occurrence: o1}]",
    "steps[3].steps",
    "nothing is raced"
)]
#[case::cannot_race(
    "[{do: execute, occurrence: o1}, {do: replace, executor: e2}]",
    "steps[3].steps[1].do",
    "cannot race"
)]
fn races_are_validated(#[case] race: &str, #[case] field: &str, #[case] needle: &str) {
    let text = format!(
        "id: X-5\ntitle: t\nrequirements: [AOC-REQ-001]\nsteps:\n  - {{do: join, executor: e1}}\n  - {{do: create, occurrence: o1}}\n  - {{do: reserve, occurrence: o1}}\n  - {{do: race, steps: {race}}}\n"
    );
    assert_refused(&text, field, needle);
}

/// Steps the implementation would be blamed for: a join on a lane another executor holds
/// (refused, as the case clock never expires the lease by itself), a clock advance of nothing or
/// past the end of time, a Hermes hold released with a status that is no HTTP error.
#[rstest]
#[case::join_on_a_held_lane("  - {do: join, executor: e2}\n", "steps[1].expect", "held by \"e1\"")]
#[case::advance_nothing("  - {do: advance, ms: 0}\n", "steps[1].ms", "not a clock advance")]
#[case::advance_past_time(
    "  - {do: advance, ms: 18446744073709551615}\n",
    "steps[1].ms",
    "not a clock advance"
)]
#[case::hermes_reject_zero(
    "  - {do: hermes_release, hold: h, reject: 0}\n",
    "steps[1].reject",
    "not a 4xx or 5xx"
)]
fn steps_the_implementation_would_be_blamed_for_are_refused(
    #[case] step: &str,
    #[case] field: &str,
    #[case] needle: &str,
) {
    let text = format!(
        "id: X-6\ntitle: t\nrequirements: [AOC-REQ-006]\nsteps:\n  - {{do: join, executor: e1}}\n{step}"
    );
    assert_refused(&text, field, needle);
}

/// A second join is fine where the case says it is refused, or after the holder let go.
#[rstest]
#[case::expected_refused("  - {do: join, executor: e2, expect: refused}\n")]
#[case::after_release("  - {do: lease_release, executor: e1}\n  - {do: join, executor: e2}\n")]
#[case::after_advance(
    "  - {do: advance, ms: 1800001}\n  - {do: join, executor: e2, expect: any}\n"
)]
fn a_second_join_is_valid_when_the_case_allows_for_the_lease(#[case] steps: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        "X-7-t.yaml",
        &format!(
            "id: X-7\ntitle: t\nrequirements: [AOC-REQ-006]\nsteps:\n  - {{do: join, executor: e1}}\n{steps}"
        ),
    );
    let (cases, defects) = aocheck::case::load(dir.path());
    assert!(defects.is_empty(), "{defects:#?}");
    assert!(cases[0].checked.is_some());
}

/// Typos the implementation would be blamed for are refused where they are read: an operator
/// step's error code and an operator's final status are seed 000's words, or a defect that names
/// the field.
#[rstest]
#[case::misspelled_error(
    "steps:\n  - {do: operator_invoke, action: a1, objective: x, error: operator_outcome_unknwn}\n",
    "steps[0].error",
    "operator_outcome_unknwn"
)]
#[case::misspelled_status(
    "steps:\n  - {do: operator_invoke, action: a1, objective: x}\nexpect:\n  operators:\n    a1: {status: compelted}\n",
    "expect.operators.a1.status",
    "compelted"
)]
fn misspelled_words_are_refused_where_they_are_read(
    #[case] body: &str,
    #[case] field: &str,
    #[case] needle: &str,
) {
    assert_refused(
        &format!("id: X-9\ntitle: t\nrequirements: [AOC-REQ-011]\n{body}"),
        field,
        needle,
    );
}

/// YAML 1.2's booleans only: `n`, `y`, `on`, `no` stay the strings they look like, so a case
/// may name an executor `n` or an occurrence `on`.
#[test]
fn plain_words_that_yaml_1_1_calls_booleans_stay_strings() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        "X-10-t.yaml",
        "id: X-10\ntitle: t\nrequirements: [AOC-REQ-006]\nsteps:\n  - {do: join, executor: n}\n  - {do: create, occurrence: on}\n  - {do: reserve, occurrence: on, executor: n}\n",
    );
    let (cases, defects) = aocheck::case::load(dir.path());
    assert!(defects.is_empty(), "{defects:#?}");
    match &cases[0].case.steps[0] {
        aocheck::case::Step::Join { executor, .. } => assert_eq!(executor, "n"),
        other => panic!("{other:?}"),
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(96))]
    /// A shipped case with bytes changed, cut or repeated is either still a case or refused with
    /// defects that name the file and say how to fix them; the loader never panics, and a
    /// refused case never runs.
    #[test]
    fn a_mangled_case_file_is_a_case_or_named_defects(
        at in 0usize..4000,
        len in 0usize..40,
        with in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..12),
    ) {
        let src = include_str!("../../cases/aoc/AOC-CASE-005-retired-executor-races.yaml").as_bytes();
        let at = at % src.len();
        let end = (at + len).min(src.len());
        let mut bytes = src[..at].to_vec();
        bytes.extend(&with);
        bytes.extend(&src[end..]);
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("AOC-CASE-005-x.yaml"), &bytes).expect("write");
        let (cases, defects) = aocheck::case::load(dir.path());
        for d in &defects {
            proptest::prop_assert!(d.file.ends_with("AOC-CASE-005-x.yaml"), "{d}");
            proptest::prop_assert!(!d.msg.is_empty() && !d.fix.is_empty(), "{d}");
        }
        if !defects.is_empty() {
            proptest::prop_assert!(cases.iter().all(|c| c.checked.is_none()));
        }
    }
}
