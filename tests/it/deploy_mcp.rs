//! `aocheck deploy` with `provider: mcp` (issue 42): a service whose effects are MCP tool calls,
//! pointed at fake-mcp and judged from its ledger. Two example services on PyPI's official `mcp`
//! client: one that keys its writes and reconciles by lookup (passes every case), one that
//! retries a write whose reply was lost (fails AOC-REQ-010 with two effects in fake-mcp's
//! ledger, and `deploy explore` finds and shrinks it).

use aocheck::deploy::file;
use aocheck::report::model::Verdict;
use serde_json::Value;

fn example(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(name)
        .join("aocheck-deploy.yaml")
}

/// The examples call their tools through PyPI's official `mcp` package.
fn python_mcp() {
    let ok = std::process::Command::new("python3")
        .args(["-c", "import mcp"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "the MCP example services need PyPI's mcp package: run the README's test command (bash scripts/test), which installs it"
    );
}

/// The example's deploy file run (its cases `only`, or all).
async fn judge(name: &str, only: &[&str]) -> aocheck::report::model::Report {
    python_mcp();
    let loaded = file::load(&example(name)).expect("the example's deploy file loads");
    let out = tempfile::tempdir().expect("tempdir");
    let only: Vec<String> = only.iter().map(|s| s.to_string()).collect();
    aocheck::deploy::run(&loaded, out.path(), &only, &mut |_| {}).await
}

#[test]
fn the_mcp_deploy_files_load() {
    for n in ["mcp-keyed", "mcp-retrying"] {
        let l = file::load(&example(n)).unwrap_or_else(|d| panic!("{n}: {d:?}"));
        assert_eq!(l.file.provider, file::ProviderKind::Mcp);
    }
}

/// The cases in two halves, run at once (each half a run of its own, with its own providers):
/// together every case.
const HALVES: [&[&str]; 2] = [
    &["MCP-001", "MCP-002", "MCP-003", "MCP-004", "MCP-005"],
    &["MCP-006", "MCP-007", "MCP-008", "MCP-009", "MCP-010"],
];

#[test]
fn the_halves_hold_every_case_once() {
    let mut all: Vec<&str> = HALVES.concat();
    all.sort();
    let mut ids: Vec<&str> = aocheck::deploy::mcp::CASES.iter().map(|c| c.id).collect();
    ids.sort();
    assert_eq!(all, ids);
}

/// The keyed service passes every case: one write call per action whatever the fault, and an
/// outcome only from a lookup (each case's fault acted, so none is a pass by default).
#[rstest::rstest]
#[case::first_half(0)]
#[case::second_half(1)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_keyed_mcp_service_passes_every_case(#[case] half: usize) {
    let r = judge("mcp-keyed", HALVES[half]).await;
    let ids: Vec<&str> = r.cases.iter().map(|c| c.id.as_str()).collect();
    for id in HALVES[half] {
        assert!(ids.contains(id), "{id} did not run: {ids:?}");
    }
    for c in &r.cases {
        let want = if c.id == "DEPLOY-HISTORY" {
            Verdict::Unsupported
        } else {
            Verdict::Pass
        };
        assert_eq!(c.verdict, want, "{}: {}\n{:#?}", c.id, c.reasons(), c.steps);
        if c.id.starts_with("MCP-") {
            assert!(c.faults.iter().all(|f| f.fired), "{}: {:?}", c.id, c.faults);
            // One write call per action; an effect where the fault let the call make one.
            assert_eq!(c.occurrences[0].entry_attempts, 1, "{}", c.id);
            let made = if ["MCP-009", "MCP-010"].contains(&c.id.as_str()) {
                0
            } else {
                1
            };
            assert_eq!(c.occurrences[0].provider_effects, made, "{}", c.id);
        }
    }
    assert_eq!(aocheck::deploy::exit_code(&r), 0);
}

/// The retrying service fails AOC-REQ-010 where its reply was lost (and where the server
/// restarted after the effect): two write calls, two effects in fake-mcp's ledger. (Every other
/// ambiguous case fails it the same way; these two keep the suite short.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_retrying_mcp_service_fails_for_its_second_effect() {
    let r = judge("mcp-retrying", &["MCP-002", "MCP-005"]).await;
    for id in ["MCP-002", "MCP-005"] {
        let c = r.cases.iter().find(|c| c.id == id).expect("case");
        assert_eq!(c.verdict, Verdict::Fail, "{id}: {}", c.reasons());
        assert!(
            c.failures
                .iter()
                .any(|f| f.requirement.to_string() == "AOC-REQ-010"
                    && f.msg
                        .contains("2 write calls for one action, which made 2 effects")),
            "{id}: {:?}",
            c.failures
        );
    }
    assert_eq!(aocheck::deploy::exit_code(&r), 1);
}

/// `deploy explore` over the retrying service finds the duplicate and shrinks it to one action
/// with one fault, a schedule that replays as a failing run.
#[test]
fn exploring_the_retrying_mcp_service_shrinks_to_one_action_made_twice() {
    python_mcp();
    let f = example("mcp-retrying");
    let out = tempfile::tempdir().expect("tempdir");
    let o = crate::support::aocheck_bin(&[
        "deploy",
        "explore",
        crate::support::utf8(&f),
        "--seed",
        "1",
        "--runs",
        "4",
        "--out",
        crate::support::utf8(out.path()),
    ]);
    let said = crate::support::said(&o);
    assert_eq!(o.status.code(), Some(1), "{said}");
    let loaded = file::load(&f).expect("loads");
    let shrunk = aocheck::deploy::mcp::read_schedule(&loaded, &out.path().join("shrunk.yaml"))
        .expect("shrunk schedule");
    assert_eq!(shrunk.steps.len(), 1, "{said}");
    assert!(shrunk.steps[0].fault.is_some(), "{said}");
    let explored: Value = serde_json::from_str(
        &std::fs::read_to_string(out.path().join("explore.json")).expect("explore.json"),
    )
    .expect("json");
    let line = explored["finding"]["failures"][0]["line"].to_string();
    assert!(line.contains("write calls for one action"), "{line}");
    let again = tempfile::tempdir().expect("tempdir");
    let r = crate::support::aocheck_bin(&[
        "deploy",
        "run",
        crate::support::utf8(&f),
        "--schedule",
        crate::support::utf8(&out.path().join("shrunk.yaml")),
        "--out",
        crate::support::utf8(again.path()),
    ]);
    assert_eq!(r.status.code(), Some(1), "{}", crate::support::said(&r));
    let report: Value = serde_json::from_str(
        &std::fs::read_to_string(again.path().join("report.json")).expect("report.json"),
    )
    .expect("json");
    assert_eq!(report["cases"][0]["id"], "MCP-SCHEDULE");
    assert_eq!(report["cases"][0]["verdict"], "fail", "{report}");
}

/// A lying twin of the keyed service (`tests/it/deploy_mcp_liars/liar.py`, one lie per deploy
/// file) fails the case its lie meets, for the requirement it breaks: the lies a hostile review
/// found passing, each now caught (a retry through another tool after a restart, `sent` with
/// nothing made, `sent` before the call or while it is held, a claim withdrawn to `unknown`,
/// in-flight labels declared `unknown` to end the watch before a retry).
#[rstest::rstest]
#[case::another_tool_after_a_restart("other-tool", "MCP-001", "AOC-REQ-010")]
#[case::sent_after_a_refusal("assume-sent", "MCP-010", "AOC-REQ-011")]
#[case::sent_before_the_call("sent-early", "MCP-006", "AOC-REQ-011")]
#[case::sent_while_held("sent-while-held", "MCP-001", "AOC-REQ-011")]
#[case::claim_withdrawn("relabel-unknown", "MCP-002", "AOC-REQ-011")]
#[case::in_flight_declared_unknown("pending-as-unknown", "MCP-003", "AOC-REQ-010")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lying_mcp_service_fails_for_its_lie(
    #[case] lie: &str,
    #[case] case: &str,
    #[case] req: &str,
) {
    python_mcp();
    let f = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/it/deploy_mcp_liars")
        .join(format!("{lie}.yaml"));
    let loaded = file::load(&f).expect("the liar's deploy file loads");
    let out = tempfile::tempdir().expect("tempdir");
    let r = aocheck::deploy::run(&loaded, out.path(), &[case.to_string()], &mut |_| {}).await;
    let c = r.cases.iter().find(|c| c.id == case).expect("the case ran");
    assert_eq!(
        c.verdict,
        Verdict::Fail,
        "{lie} {case}: {}\n{:#?}",
        c.reasons(),
        c.steps
    );
    assert!(
        c.failures.iter().any(|f| f.requirement.to_string() == req),
        "{lie} {case}: {:?}",
        c.failures
    );
}
