//! `aocheck deploy`: the driver against a wiremock server standing in for the user's service
//! (each request template rendered exactly, each outcome read by its JSON path, each malformed
//! answer refused with the template's name), the deploy files of `examples/` against the
//! schema (an independent validator) and the loader, and both example services judged end to
//! end through the official Python SDK.

use aocheck::deploy::drive::{self, DriveError, Vars};
use aocheck::deploy::file::{self, Outcome, Request, Status};
use rstest::rstest;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use wiremock::matchers::{body_json, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn vars() -> Vars {
    Vars {
        occurrence: "o-1".into(),
        amount: 2000,
        currency: "usd".into(),
        ..Vars::default()
    }
}

fn status_t(outcome: &str) -> Status {
    Status {
        method: "GET".into(),
        path: "/orders/{occurrence}".into(),
        outcome: outcome.into(),
        outcomes: BTreeMap::from([
            ("paid".to_string(), Outcome::Success),
            ("declined".to_string(), Outcome::NotAccepted),
            ("queued".to_string(), Outcome::Pending),
        ]),
    }
}

#[tokio::test]
async fn the_submit_template_is_sent_exactly_as_rendered() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/shops/usd/orders"))
        .and(header("content-type", "application/json"))
        .and(body_json(json!({
            "order_id": "o-1",
            "amount": 2000,
            "label": "order o-1 for 2000",
            "nested": {"o-1": ["usd"]},
        })))
        .respond_with(ResponseTemplate::new(202).set_body_json(json!({"state": "queued"})))
        .expect(1)
        .mount(&server)
        .await;
    let t = Request {
        method: "POST".into(),
        path: "/shops/{currency}/orders".into(),
        body: Some(json!({
            "order_id": "{occurrence}",
            "amount": "{amount:int}",
            "label": "order {occurrence} for {amount}",
            "nested": {"{occurrence}": ["{currency}"]},
        })),
        accept: vec![202],
    };
    let got = drive::submit(&reqwest::Client::new(), &server.uri(), &t, &vars()).await;
    assert_eq!(got, Ok(202));
}

#[rstest]
#[case::member("$.state", json!({"state": "paid"}), "paid", Outcome::Success)]
#[case::nested("$.order['state']", json!({"order": {"state": "declined"}}), "declined", Outcome::NotAccepted)]
#[case::indexed("$.history[0].state", json!({"history": [{"state": "queued"}]}), "queued", Outcome::Pending)]
#[tokio::test]
async fn the_outcome_is_read_by_its_json_path(
    #[case] jp: &str,
    #[case] answer: Value,
    #[case] label: &str,
    #[case] outcome: Outcome,
) {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/orders/o-1"))
        .respond_with(ResponseTemplate::new(200).set_body_json(answer))
        .expect(1)
        .mount(&server)
        .await;
    let got = drive::status(
        &reqwest::Client::new(),
        &server.uri(),
        &status_t(jp),
        &vars(),
    )
    .await
    .expect("read");
    assert_eq!(got.label, label);
    assert_eq!(got.outcome, outcome);
}

#[rstest]
#[case::not_json(ResponseTemplate::new(200).set_body_string("<html>ok</html>"), "drive.status: the answer is not JSON")]
#[case::no_such_member(ResponseTemplate::new(200).set_body_json(json!({"status": "paid"})), "drive.status: $.state is not in the answer")]
#[case::unmapped(ResponseTemplate::new(200).set_body_json(json!({"state": "settled"})), "drive.status: $.state is \"settled\", a label the deploy file does not map")]
#[case::an_object(ResponseTemplate::new(200).set_body_json(json!({"state": {"x": 1}})), "a label the deploy file does not map")]
#[case::error_status(ResponseTemplate::new(500).set_body_json(json!({"state": "paid"})), "drive.status: GET")]
#[tokio::test]
async fn a_malformed_status_answer_is_refused_with_the_templates_name(
    #[case] answer: ResponseTemplate,
    #[case] said: &str,
) {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/orders/o-1"))
        .respond_with(answer)
        .mount(&server)
        .await;
    let got = drive::status(
        &reqwest::Client::new(),
        &server.uri(),
        &status_t("$.state"),
        &vars(),
    )
    .await;
    let e = got.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(e.contains(said), "{e}");
}

#[tokio::test]
async fn a_submit_answered_outside_accept_is_refused_with_the_templates_name() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(409))
        .mount(&server)
        .await;
    let t = Request {
        method: "POST".into(),
        path: "/orders".into(),
        body: None,
        accept: vec![200, 202],
    };
    let got = drive::submit(&reqwest::Client::new(), &server.uri(), &t, &vars()).await;
    assert!(
        matches!(
            &got,
            Err(DriveError::Status {
                template: "submit",
                status: 409,
                ..
            })
        ),
        "{got:?}"
    );
    let e = got.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(e.starts_with("drive.submit: POST"), "{e}");
}

fn examples() -> Vec<std::path::PathBuf> {
    [
        "shop-keyed",
        "shop-naive",
        "connector-keyed",
        "connector-naive",
        "connector-reference",
        "mcp-keyed",
        "mcp-retrying",
    ]
    .iter()
    .map(|n| {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("examples")
            .join(n)
            .join("aocheck-deploy.yaml")
    })
    .collect()
}

#[test]
fn the_example_deploy_files_load_and_meet_the_schema() {
    let schema =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/schemas/deploy-v1.schema.json");
    let mut all = examples();
    all.push(all[1].with_file_name("aocheck-deploy-webhooks.yaml"));
    for f in all {
        if let Err(d) = file::load(&f) {
            panic!("{}: {d:?}", f.display());
        }
        // An independent reading: PyPI's YAML-free route is JSON, so the file is read by our
        // loader's YAML parser into JSON first, then validated by PyPI's jsonschema.
        let text = std::fs::read_to_string(&f).expect("read");
        let v: Value = serde_saphyr::from_str(&text).expect("yaml");
        let out = std::process::Command::new("python3")
            .args([
                "-c",
                "import json,sys,jsonschema; s=json.load(open(sys.argv[1])); jsonschema.validate(json.loads(sys.argv[2]), s, cls=jsonschema.Draft202012Validator)",
            ])
            .arg(&schema)
            .arg(v.to_string())
            .output()
            .expect("python3");
        assert!(
            out.status.success(),
            "{}: {}",
            f.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn the_schema_refuses_what_the_loader_refuses() {
    let schema =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/schemas/deploy-v1.schema.json");
    let bad = [
        json!({"version": 2, "name": "x", "service": {"command": ["a"], "ready": {"path": "/"}}, "drive": {}}),
        json!({"version": 1, "name": "x", "service": {"command": ["a"], "ready": {"path": "/"}, "extra": 1},
               "drive": {"submit": {"path": "/o"}, "status": {"path": "/o/{occurrence}", "outcome": "$.s", "outcomes": {"a": "success"}}}}),
        json!({"version": 1, "name": "x", "service": {"command": ["a"], "ready": {"path": "/"}},
               "attribution": {"idempotency_key": "fixed"},
               "drive": {"submit": {"path": "/o"}, "status": {"path": "/o/{occurrence}", "outcome": "$.s", "outcomes": {"a": "success"}}}}),
    ];
    for b in bad {
        let out = std::process::Command::new("python3")
            .args([
                "-c",
                "import json,sys,jsonschema; s=json.load(open(sys.argv[1])); jsonschema.validate(json.loads(sys.argv[2]), s, cls=jsonschema.Draft202012Validator)",
            ])
            .arg(&schema)
            .arg(b.to_string())
            .output()
            .expect("python3");
        assert!(!out.status.success(), "the schema accepted {b}");
        let parsed: Result<file::DeployFile, _> = serde_json::from_value(b.clone());
        assert!(
            parsed
                .map(|f| file::validate(&f))
                .is_ok_and(|d| !d.is_empty())
                || serde_json::from_value::<file::DeployFile>(b.clone()).is_err(),
            "the loader accepted {b}"
        );
    }
}

/// The examples pay through PyPI's official `stripe` package: without it they cannot start.
fn python_stripe() {
    let ok = std::process::Command::new("python3")
        .args(["-c", "import stripe"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "the example services need PyPI's stripe package: run .ci/run, or `python3 -m pip install stripe==16.1.0`"
    );
}

async fn judge_example(name: &str) -> aocheck::report::model::Report {
    python_stripe();
    let f = examples()
        .into_iter()
        .find(|p| p.to_string_lossy().contains(name))
        .expect("example");
    let loaded = file::load(&f).expect("the example's deploy file loads");
    let out = tempfile::tempdir().expect("tempdir");
    aocheck::deploy::run(&loaded, out.path(), &[], &mut |_| {}).await
}

/// Case `id` of `r`, which must fail `req` with a failure that says `words`.
fn fails_with<'a>(
    r: &'a aocheck::report::model::Report,
    id: &str,
    req: &str,
    words: &str,
) -> &'a aocheck::report::model::CaseReport {
    let c = r.cases.iter().find(|c| c.id == id).expect("case");
    assert_eq!(
        c.verdict,
        aocheck::report::model::Verdict::Fail,
        "{id}: {}",
        c.reasons()
    );
    assert!(
        c.failures
            .iter()
            .any(|f| f.requirement.to_string() == req && f.msg.contains(words)),
        "{id}: {:?}",
        c.failures
    );
    c
}

fn verdict_of(r: &aocheck::report::model::Report, id: &str) -> aocheck::report::model::Verdict {
    r.cases
        .iter()
        .find(|c| c.id == id)
        .map(|c| c.verdict)
        .unwrap_or(aocheck::report::model::Verdict::NotRun)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_keyed_example_passes_every_case_it_supports() {
    use aocheck::report::model::Verdict;
    let r = judge_example("shop-keyed").await;
    for c in &r.cases {
        let want = if c.id == "DEPLOY-HISTORY" {
            Verdict::Unsupported
        } else {
            Verdict::Pass
        };
        assert_eq!(c.verdict, want, "{}: {} {:?}", c.id, c.reasons(), c.steps);
        if want == Verdict::Pass {
            assert!(c.faults.iter().all(|f| f.fired) && !c.faults.is_empty());
            assert!(c.occurrences.iter().all(|o| o.provider_effects == 1));
            // Its record was read and judged: each case answers for the history too.
            assert!(c.occurrences.iter().all(|o| o.history_len > 0), "{}", c.id);
            for r in ["AOC-REQ-004", "AOC-REQ-005", "AOC-REQ-006"] {
                assert!(c.requirements.iter().any(|x| x == r), "{}: {r}", c.id);
            }
            // The page tells the case in time, with the service's logs beside it.
            assert!(
                c.timeline
                    .as_deref()
                    .is_some_and(|t| t.contains("fake-payments"))
            );
            assert!(!c.logs.is_empty(), "{}", c.id);
        }
    }
    // What no deployment case exercises stays unsupported, and says why.
    let h = r
        .cases
        .iter()
        .find(|c| c.id == "DEPLOY-HISTORY")
        .expect("history case");
    assert_eq!(h.requirements, ["AOC-REQ-008", "AOC-REQ-013"]);
    let agents = r.implementation["user_agents_seen"].to_string();
    assert!(
        agents.contains("Stripe/v1 PythonBindings/16.1.0"),
        "{agents}"
    );
    let req = |id: &str| {
        r.requirements
            .iter()
            .find(|x| x.id.to_string() == id)
            .map(|x| x.verdict)
    };
    assert_eq!(req("AOC-REQ-010"), Some(Verdict::Pass));
    assert_eq!(req("AOC-REQ-011"), Some(Verdict::Pass));
    for id in [
        "AOC-REQ-003",
        "AOC-REQ-004",
        "AOC-REQ-005",
        "AOC-REQ-006",
        "AOC-REQ-012",
    ] {
        assert_eq!(req(id), Some(Verdict::Pass), "{id}");
    }
    assert_eq!(req("AOC-REQ-008"), Some(Verdict::Unsupported));
    assert_eq!(aocheck::deploy::exit_code(&r), aocheck::exit::OK);
    // The steps say what became of the held request's reply: the killed instance's was never
    // delivered, the resubmitting instance got its own.
    let steps_of = |id: &str| {
        r.cases
            .iter()
            .find(|c| c.id == id)
            .map(|c| c.steps.join("\n"))
            .unwrap_or_default()
    };
    assert!(
        steps_of("DEPLOY-001").contains("committed with nobody left to answer"),
        "{}",
        steps_of("DEPLOY-001")
    );
    assert!(
        steps_of("DEPLOY-004").contains("its reply was written to the service"),
        "{}",
        steps_of("DEPLOY-004")
    );
    // The forged event was refused, the real one came late and twice.
    let w = r.cases.iter().find(|c| c.id == "DEPLOY-006").expect("case");
    assert!(
        w.steps
            .iter()
            .any(|s| s.contains("(forged), sent at") && s.ends_with(": 400")),
        "{:?}",
        w.steps
    );
    // The real events verified with the SDK's construct_event (our signature is Stripe's).
    assert!(
        w.steps
            .iter()
            .any(|s| s.contains("payment_intent.succeeded")
                && s.contains("attempt 1, sent at")
                && s.ends_with(": 200")),
        "{:?}",
        w.steps
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_naive_example_fails_for_the_duplicate_charge_in_the_ledger() {
    use aocheck::report::model::Verdict;
    let r = judge_example("shop-naive").await;
    for id in ["DEPLOY-001", "DEPLOY-003", "DEPLOY-005"] {
        let c = fails_with(
            &r,
            id,
            "AOC-REQ-010",
            "recorded 2 entries for one occurrence",
        );
        assert_eq!(c.occurrences[0].provider_effects, 2);
    }
    assert_eq!(verdict_of(&r, "DEPLOY-006"), Verdict::Unsupported);
    // The SDK's own retry under its own key charges once but enters twice: a second attempt
    // after a lost reply (§4.10, D79), once a pass; a resubmission is deduplicated by the
    // order id: an honest pass where the service does hold.
    let lost = r.cases.iter().find(|c| c.id == "DEPLOY-002").expect("case");
    assert_eq!(lost.verdict, Verdict::Fail, "{}", lost.reasons());
    assert!(
        lost.failures
            .iter()
            .any(|f| f.requirement.to_string() == "AOC-REQ-010"
                && f.msg
                    .contains("2 create requests reached the provider for one occurrence")),
        "{:?}",
        lost.failures
    );
    assert_eq!(lost.occurrences[0].provider_effects, 1);
    assert_eq!(verdict_of(&r, "DEPLOY-004"), Verdict::Pass);
    assert_eq!(
        aocheck::deploy::exit_code(&r),
        aocheck::exit::REQUIREMENT_FAILED
    );
}

/// Faults own the webhooks (issue 39): the naive shop applies verified events promptly, and
/// before the events were held they settled its orders ahead of its blind retry, so DEPLOY-003
/// and DEPLOY-005 passed over a service that charges twice. Held through the recovery window,
/// the retry runs and the duplicate is in the ledger.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_webhooks_declared_the_naive_example_still_fails_for_its_duplicates() {
    use aocheck::report::model::Verdict;
    python_stripe();
    let f = examples()[1].with_file_name("aocheck-deploy-webhooks.yaml");
    let loaded = file::load(&f).expect("loads");
    let out = tempfile::tempdir().expect("tempdir");
    let cases = ["DEPLOY-003".to_string(), "DEPLOY-005".to_string()];
    let r = aocheck::deploy::run(&loaded, out.path(), &cases, &mut |_| {}).await;
    for id in &cases {
        let c = r.cases.iter().find(|c| &c.id == id).expect("case");
        assert_eq!(
            c.verdict,
            Verdict::Fail,
            "{id}: {} {:?}",
            c.reasons(),
            c.steps
        );
        assert!(
            c.failures
                .iter()
                .any(|f| f.requirement.to_string() == "AOC-REQ-010"),
            "{id}: {:?}",
            c.failures
        );
        assert!(
            c.steps.iter().any(|s| s.contains("events are held")),
            "{id}: {:?}",
            c.steps
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_naive_example_believes_a_forged_webhook_and_is_judged_for_it() {
    use aocheck::report::model::Verdict;
    python_stripe();
    let f = examples()[1].with_file_name("aocheck-deploy-webhooks.yaml");
    let loaded = file::load(&f).expect("loads");
    let out = tempfile::tempdir().expect("tempdir");
    let r = aocheck::deploy::run(
        &loaded,
        out.path(),
        &["DEPLOY-006".to_string()],
        &mut |_| {},
    )
    .await;
    let c = &r.cases[0];
    assert_eq!(c.verdict, Verdict::Fail, "{}", c.reasons());
    assert!(
        c.failures
            .iter()
            .any(|f| f.requirement.to_string() == "AOC-REQ-011"
                && f.msg.contains("reported \"declined\" (not_accepted)")),
        "{:?}",
        c.failures
    );
    assert!(
        c.steps
            .iter()
            .any(|s| s.contains("(forged), sent at") && s.ends_with(": 200")),
        "{:?}",
        c.steps
    );
}

/// `aocheck deploy check` over a deploy file holding `text`: it refuses it (exit 3), and every
/// line of `want` is in what it said, with the file's name.
fn check_refuses(text: &str, want: &[&str]) {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = dir.path().join("aocheck-deploy.yaml");
    std::fs::write(&f, text).expect("write");
    let o = crate::support::aocheck_bin(&["deploy", "check", crate::support::utf8(&f)]);
    assert_eq!(o.status.code(), Some(3));
    let said = crate::support::said(&o);
    for w in want {
        assert!(said.contains(w), "{w} not in {said}");
    }
    assert!(said.contains("aocheck-deploy.yaml"), "{said}");
}

#[test]
fn a_bad_deploy_file_is_refused_naming_file_field_and_fix() {
    check_refuses(
        "version: 1\nname: x\nservice: {command: [true], env: {P: \"{prot}\"}, ready: {path: healthz}}\ndrive:\n  submit: {path: /o}\n  status: {path: /o, outcome: state, outcomes: {a: pending}}\n",
        &[
            "service.env.P: unknown placeholder {prot}",
            "service.ready.path",
            "no variable holds {port}",
            "drive.status.path: must hold {occurrence}",
            "drive.status.outcome",
            "at least one label to `success`",
        ],
    );
}

#[test]
fn deploy_check_names_every_shape_defect_at_once_with_line_and_column() {
    check_refuses(
        "version: 1\nname: x\nservce: {}\ndrive:\n  submit: {path: [3], metod: GET}\n  status: {path: /x}\n",
        &[
            "line 1 column 1: (the document): the field `service` is missing",
            "line 3 column 1: servce: unknown field",
            "line 5 column 12: drive.submit.path: must be a string, not a list",
            "line 5 column 23: drive.submit.metod: unknown field; the fields here are accept, body, method, path",
            "line 6 column 3: drive.status: the field `outcome` is missing",
        ],
    );
    // A YAML syntax error is named where it is, and nothing past it is guessed at.
    check_refuses(
        "version: 1\nname: x\nservice:\n  command: [a\n  env: {b: 1}\n",
        &["line 5 column 6", "cannot be read past this point"],
    );
    // A shape defect and what only the loader can say, together.
    check_refuses(
        "version: 1\nname: x\nservice: {command: [a], env: {P: \"{prot}\"}, ready: {path: /h}, extra: 1}\ndrive:\n  submit: {path: /o}\n  status: {path: \"/o/{occurrence}\", outcome: $.s, outcomes: {a: success}}\n",
        &["service.extra: unknown field"],
    );
}

/// `aocheck deploy explore F --seed 1 --runs N` into a folder of its own.
fn explore(f: &std::path::Path, runs: &str) -> (tempfile::TempDir, std::process::Output) {
    let out = tempfile::tempdir().expect("tempdir");
    let o = crate::support::aocheck_bin(&[
        "deploy",
        "explore",
        crate::support::utf8(f),
        "--seed",
        "1",
        "--runs",
        runs,
        "--out",
        crate::support::utf8(out.path()),
    ]);
    (out, o)
}

#[test]
fn exploring_the_naive_example_shrinks_to_one_order_charged_twice_and_replays() {
    python_stripe();
    let f = &examples()[1];
    let (out, o) = explore(f, "4");
    let said = crate::support::said(&o);
    assert_eq!(o.status.code(), Some(1), "{said}");
    let shrunk =
        aocheck::deploy::read_schedule(&out.path().join("shrunk.yaml")).expect("shrunk schedule");
    assert_eq!(shrunk.steps.len(), 1, "{said}");
    assert!(
        matches!(
            shrunk.steps[0].fault,
            Some(
                aocheck::deploy::Kind::CrashAtHold
                    | aocheck::deploy::Kind::Takeover
                    | aocheck::deploy::Kind::ErrorAfterCommit
            )
        ),
        "{said}"
    );
    assert!(first_finding(out.path()).contains("recorded 2 entries"));
    // The reports written beside it name the exploration's seed (issue 39: it said 0).
    let written: Value = serde_json::from_str(
        &std::fs::read_to_string(out.path().join("report.json")).expect("report.json"),
    )
    .expect("json");
    assert_eq!(written["seed"], 1, "{written}");
    // The shrunk schedule replays as a run, and fails the same way.
    let report = replay_shrunk(f, out.path());
    assert_eq!(report["cases"][0]["id"], "DEPLOY-SCHEDULE");
    assert_eq!(report["cases"][0]["verdict"], "fail");
    assert_eq!(
        report["cases"][0]["failures"][0]["requirement"],
        "AOC-REQ-010"
    );
}

/// The first finding `deploy explore` wrote to `out/explore.json`, in its words.
fn first_finding(out: &std::path::Path) -> String {
    let explored: Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("explore.json")).expect("explore.json"),
    )
    .expect("json");
    explored["finding"]["failures"][0]["line"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// `deploy run F --schedule out/shrunk.yaml`, which must fail (exit 1): its report.
fn replay_shrunk(f: &std::path::Path, out: &std::path::Path) -> Value {
    let again = tempfile::tempdir().expect("tempdir");
    let r = crate::support::aocheck_bin(&[
        "deploy",
        "run",
        crate::support::utf8(f),
        "--schedule",
        crate::support::utf8(&out.join("shrunk.yaml")),
        "--out",
        crate::support::utf8(again.path()),
    ]);
    assert_eq!(r.status.code(), Some(1), "{}", crate::support::said(&r));
    serde_json::from_str(
        &std::fs::read_to_string(again.path().join("report.json")).expect("report.json"),
    )
    .expect("json")
}

#[test]
fn exploring_the_keyed_example_finds_nothing() {
    python_stripe();
    let f = &examples()[0];
    let (_out, o) = explore(f, "2");
    let said = crate::support::said(&o);
    assert_eq!(o.status.code(), Some(0), "{said}");
    assert!(said.contains("no finding in 2 schedules"), "{said}");
}

/// `kill: cgroup` where a cgroup v2 is delegated (it is on this project's machines): the kill
/// lands by `cgroup.kill` and is confirmed; where none is, the case is a harness error that names
/// the fix, never a verdict.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cgroup_kill_is_confirmed_or_refused_naming_the_fix() {
    use aocheck::report::model::Verdict;
    python_stripe();
    let src = &examples()[0];
    let dir = tempfile::tempdir().expect("tempdir");
    let app = src.with_file_name("app.py");
    let text = std::fs::read_to_string(src)
        .expect("read")
        .replace("kill: process_group", "kill: cgroup")
        .replace(
            "command: [python3, app.py]",
            &format!(
                "command: [python3, {}]",
                Value::String(crate::support::utf8(&app).into())
            ),
        );
    assert!(text.contains("kill: cgroup"), "{text}");
    let f = dir.path().join("aocheck-deploy.yaml");
    std::fs::write(&f, text).expect("write");
    let loaded = file::load(&f).expect("loads");
    let out = dir.path().join("out");
    let r = aocheck::deploy::run(&loaded, &out, &["DEPLOY-001".to_string()], &mut |_| {}).await;
    let c = &r.cases[0];
    // Whether this machine delegates a cgroup v2 to this process, asked independently.
    let delegated = (|| {
        let rel = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        let rel = rel
            .lines()
            .find_map(|l| l.strip_prefix("0::"))?
            .trim_start_matches('/')
            .to_string();
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
        let root = mounts.lines().find_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            (right.split_whitespace().next()? == "cgroup2")
                .then(|| left.split_whitespace().nth(4).map(str::to_string))?
        })?;
        let probe = std::path::Path::new(&root)
            .join(rel)
            .join("aocheck-test-probe");
        std::fs::create_dir(&probe).ok()?;
        let ok = probe.join("cgroup.kill").exists();
        std::fs::remove_dir(&probe).ok()?;
        Some(ok)
    })()
    .unwrap_or(false);
    if delegated {
        assert_eq!(c.verdict, Verdict::Pass, "{}: {:?}", c.reasons(), c.steps);
        assert!(
            c.steps.iter().any(|s| s.contains("cgroup.kill of")
                && s.contains("signal 9")
                && s.contains("the cgroup is empty")),
            "{:?}",
            c.steps
        );
    } else {
        assert_eq!(c.verdict, Verdict::HarnessError, "{}", c.reasons());
        assert!(
            c.harness
                .as_deref()
                .is_some_and(|h| h.contains("use `kill: process_group`")),
            "{:?}",
            c.harness
        );
    }
}

/// Issue 40, both ways: the keyed connector (a start claim before `POST /v1/runs`, an
/// ambiguous start left `outcome_unknown`, never started again; a resume command claimed
/// before its decision is sent and never resent; `cancelled` only from Hermes; polling when
/// the event stream breaks) passes every connector case with one run per action in
/// fake-hermes' ledger; the naive one (it starts again after a 5xx, a lost reply or a restart,
/// resends a resume command, takes `stopping` for cancelled and a broken stream for the end)
/// fails AOC-REQ-010 with two runs or two decisions, and AOC-REQ-011 for what it invented.
/// The two deployments are judged at once (each on a fake-hermes of its own).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_keyed_connector_passes_and_the_naive_one_starts_twice() {
    use aocheck::report::model::Verdict;
    let (keyed, naive) = tokio::join!(
        judge_example("connector-keyed"),
        judge_example("connector-naive")
    );
    for c in keyed
        .cases
        .iter()
        .filter(|c| c.id.starts_with("CONNECTOR-"))
    {
        assert_eq!(
            c.verdict,
            Verdict::Pass,
            "{}: {} {:?}",
            c.id,
            c.reasons(),
            c.steps
        );
        assert!(c.faults.iter().all(|f| f.fired) && !c.faults.is_empty());
        assert!(
            c.occurrences.iter().all(|o| o.provider_effects == 1),
            "{}",
            c.id
        );
        assert!(
            c.timeline
                .as_deref()
                .is_some_and(|t| t.contains("fake-hermes"))
        );
    }
    assert_eq!(
        keyed
            .cases
            .iter()
            .filter(|c| c.id.starts_with("CONNECTOR-"))
            .count(),
        aocheck::deploy::connector::CASES.len()
    );
    // After an ambiguous start the honest answer is outcome_unknown: a pass, said as such.
    let lost = keyed
        .cases
        .iter()
        .find(|c| c.id == "CONNECTOR-002")
        .expect("case");
    assert!(
        lost.occurrences[0]
            .missing_knowledge
            .iter()
            .any(|m| m.contains("outcome_unknown")),
        "{:?}",
        lost.occurrences
    );
    assert_eq!(aocheck::deploy::exit_code(&keyed), aocheck::exit::OK);
    for id in ["CONNECTOR-001", "CONNECTOR-002", "CONNECTOR-003"] {
        let c = fails_with(
            &naive,
            id,
            "AOC-REQ-010",
            "fake-hermes started 2 runs for one action",
        );
        assert_eq!(c.occurrences[0].provider_effects, 2, "{id}");
    }
    // A changed objective under the same id started again; a run Hermes forgot taken as
    // completed.
    let changed = naive
        .cases
        .iter()
        .find(|c| c.id == "CONNECTOR-006")
        .expect("case");
    assert!(
        changed
            .failures
            .iter()
            .any(|f| f.requirement.to_string() == "AOC-REQ-010"),
        "{}",
        changed.reasons()
    );
    let forgot = naive
        .cases
        .iter()
        .find(|c| c.id == "CONNECTOR-005")
        .expect("case");
    assert!(
        forgot
            .failures
            .iter()
            .any(|f| f.requirement.to_string() == "AOC-REQ-011" && f.msg.contains("not ended")),
        "{}",
        forgot.reasons()
    );
    // One resume command, two decisions: the replay resolved the second approval.
    fails_with(
        &naive,
        "CONNECTOR-007",
        "AOC-REQ-010",
        "[deploy_one_decision] act_connector007a1: fake-hermes applied 2 approval decisions",
    );
    // `cancelled` on a stop's `stopping` receipt, while Hermes completed the run.
    fails_with(
        &naive,
        "CONNECTOR-008",
        "AOC-REQ-011",
        "reported \"cancelled\"",
    );
    // `completed` when the event stream broke, before Hermes ended the run.
    fails_with(&naive, "CONNECTOR-009", "AOC-REQ-011", "not ended");
    assert_eq!(
        aocheck::deploy::exit_code(&naive),
        aocheck::exit::REQUIREMENT_FAILED
    );
}

/// Issue 40's done-when: `deploy explore` over the naive connector finds its second run for one
/// action and shrinks the schedule to the one action and fault that make it; the shrunk
/// schedule replays as a run and fails the same way.
#[test]
fn exploring_the_naive_connector_shrinks_to_one_action_started_twice_and_replays() {
    let f = examples()
        .into_iter()
        .find(|p| p.to_string_lossy().contains("connector-naive"))
        .expect("example");
    let (out, o) = explore(&f, "2");
    let said = crate::support::said(&o);
    assert_eq!(o.status.code(), Some(1), "{said}");
    let loaded = file::load(&f).expect("loads");
    let shrunk = aocheck::deploy::connector::explore::read_schedule(
        &loaded,
        &out.path().join("shrunk.yaml"),
    )
    .expect("shrunk schedule");
    assert_eq!(shrunk.steps.len(), 1, "{said}");
    use aocheck::deploy::connector::HermesKind as K;
    assert!(
        matches!(
            shrunk.steps[0].fault,
            Some(K::CrashAtHeldStart | K::LostStart | K::StartErrorAfterCommit)
        ),
        "{said}"
    );
    assert!(first_finding(out.path()).contains("started 2 runs for one action"));
    let report = replay_shrunk(&f, out.path());
    let case = report["cases"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["id"] == "CONNECTOR-SCHEDULE"))
        .expect("the schedule's case");
    assert_eq!(case["verdict"], "fail", "{case}");
    assert!(
        case["failures"].to_string().contains("started 2 runs"),
        "{case}"
    );
}

#[test]
fn a_connector_deploy_file_is_checked_for_its_provider() {
    let service = "service: {command: [a], env: {P: \"{port}\"}, ready: {path: /h}}";
    let drive = "drive:\n  submit: {path: /a}\n  status: {path: \"/a/{occurrence}\", outcome: $.s, outcomes: {c: success, u: unknown}}\n";
    check_refuses(
        &format!(
            "version: 1\nname: x\nprovider: hermes\n{service}\nattribution: {{metadata: order_id}}\n{drive}"
        ),
        &[
            "no variable holds {hermes.url}",
            "attribution.metadata: not a rule for this provider's entries",
        ],
    );
    check_refuses(
        &format!(
            "version: 1\nname: x\n{service}\nattribution: {{session_id: \"aip-operator-{{occurrence}}\"}}\n{drive}"
        ),
        &["attribution.session_id: not a rule for this provider's entries"],
    );
    check_refuses(
        &format!(
            "version: 1\nname: x\nprovider: hermes\n{service}\nattribution: {{session_id: \"aip-operator\"}}\n{drive}"
        ),
        &["attribution.session_id: \"aip-operator\" must hold {occurrence}"],
    );
    // A resume names its command, its source and the choice; a cancellation its action; and
    // neither belongs to a payment service.
    let hermes_service = "service: {command: [a], env: {P: \"{port}\", U: \"{hermes.url}\", K: \"{hermes.key}\"}, ready: {path: /h}}";
    check_refuses(
        &format!(
            "version: 1\nname: x\nprovider: hermes\n{hermes_service}\nattribution: {{session_id: \"aip-operator-{{occurrence}}\"}}\n{drive}  resume: {{path: /a, body: {{source: \"{{occurrence}}\", choice: \"{{choice}}\"}}}}\n  cancel: {{path: /a/cancel}}\n"
        ),
        &[
            "drive.resume: holds no {command}",
            "drive.cancel: holds no {occurrence}",
        ],
    );
    check_refuses(
        &format!(
            "version: 1\nname: x\n{service}\nattribution: {{idempotency_key: \"k-{{occurrence}}\"}}\n{drive}  cancel: {{path: \"/a/{{occurrence}}/cancel\"}}\n"
        ),
        &["a payment service has no approval or cancellation case"],
    );
}

/// A connector file without `drive.resume` or `drive.cancel` cannot take the approval or the
/// cancellation case, and says which template is missing; one with both takes every case.
#[test]
fn a_connector_case_needs_its_template() {
    use aocheck::deploy::connector::{HermesKind, cannot_take};
    let f = examples()
        .into_iter()
        .find(|p| p.to_string_lossy().contains("connector-keyed"))
        .expect("example");
    let mut loaded = file::load(&f).expect("loads");
    assert!(
        HermesKind::ALL
            .iter()
            .all(|k| cannot_take(&loaded, *k).is_none())
    );
    loaded.file.drive.resume = None;
    loaded.file.drive.cancel = None;
    assert!(
        cannot_take(&loaded, HermesKind::ResumeAfterRestart)
            .is_some_and(|w| w.contains("no drive.resume"))
    );
    assert!(
        cannot_take(&loaded, HermesKind::CancelRacesCompletion)
            .is_some_and(|w| w.contains("no drive.cancel"))
    );
}

/// The same truth judged at two boundaries (issue 40): aocheck's reference connector
/// (`src/operator/`, judged through the process protocol by the HERMES cases) behind its HTTP
/// front (`aocheck sut connector`) passes every connector deployment case, with one run per
/// action in fake-hermes' ledger.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_connector_behind_its_http_front_passes_the_connector_cases() {
    use aocheck::report::model::Verdict;
    let f = examples()
        .into_iter()
        .find(|p| p.to_string_lossy().contains("connector-reference"))
        .expect("example");
    let mut loaded = file::load(&f).expect("the example's deploy file loads");
    // The example runs `aocheck` from the PATH; here, the binary under test.
    loaded.file.service.command[0] = env!("CARGO_BIN_EXE_aocheck").into();
    let out = tempfile::tempdir().expect("tempdir");
    let r = aocheck::deploy::run(&loaded, out.path(), &[], &mut |_| {}).await;
    let cases: Vec<_> = r
        .cases
        .iter()
        .filter(|c| c.id.starts_with("CONNECTOR-"))
        .collect();
    assert_eq!(cases.len(), aocheck::deploy::connector::CASES.len());
    for c in cases {
        assert_eq!(
            c.verdict,
            Verdict::Pass,
            "{}: {} {:?}",
            c.id,
            c.reasons(),
            c.steps
        );
        assert!(
            c.faults.iter().all(|f| f.fired) && !c.faults.is_empty(),
            "{}",
            c.id
        );
        assert!(
            c.occurrences.iter().all(|o| o.provider_effects == 1),
            "{}",
            c.id
        );
    }
    assert_eq!(aocheck::deploy::exit_code(&r), aocheck::exit::OK);
}
