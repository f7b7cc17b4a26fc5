use super::*;
use crate::workflow::design::build_run_plan;
use proptest::prelude::*;
use serde_json::json;
use std::collections::BTreeMap;

fn plan(g: Value) -> Vec<PlanStep> {
    assert!(crate::workflow::design::validate(&g).is_empty(), "{g}");
    build_run_plan(&g).expect("plan")
}

/// trigger → ask (agent) → gate (condition on ask) → send (delivered) and memo (collected).
fn graph() -> Value {
    json!({"nodes": [
        {"id": "start", "type": "trigger"},
        {"id": "ask", "type": "agent", "prompt": "Summarise", "after": ["start"]},
        {"id": "gate", "type": "condition", "expression": "out.ask.ok == true", "after": ["ask"]},
        {"id": "send", "type": "output", "deliver": "channel", "target": "chat:ops", "after": ["gate", "ask"]},
        {"id": "memo", "type": "output", "after": ["ask"]},
    ]})
}

#[test]
fn a_run_launches_records_delivers_and_completes() {
    let p = plan(graph());
    let mut st = RunState::new("d7b493cae249", "hello-world");
    let Next::Launch(l) = next(&p, &mut st, true) else {
        panic!("a launch first")
    };
    assert_eq!(l.correlation, "workflow:d7b493cae249:ask");
    assert_eq!(st.attempts["ask"].state, "launching");
    agent_returned(&p, &mut st, "ask", &json!({"structured": {"ok": true}}));
    assert_eq!(next(&p, &mut st, true), Next::Stepped); // the condition holds
    let Next::Deliver(d) = next(&p, &mut st, true) else {
        panic!("a delivery")
    };
    assert_eq!(d.payload, json!({"gate": true, "ask": {"ok": true}}));
    assert_eq!(st.deliveries[0].ok, None);
    delivered(
        &p,
        &mut st,
        "send",
        Some(false),
        Some("chat unreachable".into()),
    );
    assert_eq!(next(&p, &mut st, true), Next::Stepped); // memo collected
    assert_eq!(next(&p, &mut st, true), Next::Finished);
    // A failed delivery is a receipt with ok: false, never a failed run.
    assert_eq!(st.status, Status::Completed);
    assert_eq!(st.deliveries[0].ok, Some(false));
    assert_eq!(st.outputs["memo"], json!({"ask": {"ok": true}}));
    // The state is JSON as the seed shows it.
    let v = serde_json::to_value(&st).expect("json");
    for k in [
        "run_id",
        "name",
        "cursor",
        "status",
        "outputs",
        "skipped",
        "pending",
        "error",
        "answers",
        "deliveries",
        "attempts",
    ] {
        assert!(v.get(k).is_some(), "{k} in {v}");
    }
    assert_eq!(v["status"], "completed");
}

/// Key presence, not truthiness: 0, false and {} are results.
#[rstest::rstest]
#[case(json!({"output": 0}), json!(0))]
#[case(json!({"output": false}), json!(false))]
#[case(json!({"structured": {}}), json!({}))]
#[case(json!({"structured": null, "output": "x"}), json!(null))]
#[case(json!({}), json!(""))]
fn an_agent_result_is_taken_by_key_presence(#[case] result: Value, #[case] kept: Value) {
    let p = plan(graph());
    let mut st = RunState::new("abcdef", "x");
    let _ = next(&p, &mut st, true);
    agent_returned(&p, &mut st, "ask", &result);
    assert_eq!(st.outputs["ask"], kept);
}

/// A false condition prunes its whole downstream branch; another branch runs.
#[test]
fn a_false_condition_skips_everything_below_it() {
    let p = plan(json!({"nodes": [
        {"id": "start", "type": "trigger"},
        {"id": "ask", "type": "agent", "prompt": "P", "after": ["start"]},
        {"id": "gate", "type": "condition", "expression": "out.ask.score > 5", "after": ["ask"]},
        {"id": "deep", "type": "agent", "prompt": "P", "after": ["gate"]},
        {"id": "deeper", "type": "output", "deliver": "notification", "after": ["deep"]},
        {"id": "other", "type": "output", "after": ["ask"]},
    ]}));
    let mut st = RunState::new("abcdef", "x");
    let _ = next(&p, &mut st, true);
    agent_returned(&p, &mut st, "ask", &json!({"output": {"score": 2}}));
    let mut launched = Vec::new();
    loop {
        match next(&p, &mut st, true) {
            Next::Launch(l) => launched.push(l.node),
            Next::Deliver(d) => launched.push(d.node),
            Next::Finished => break,
            Next::Stepped => {}
            Next::Parked => panic!("parked"),
        }
    }
    assert_eq!(st.skipped, ["gate", "deep", "deeper"]);
    assert!(launched.is_empty(), "{launched:?}");
    assert!(st.outputs.contains_key("other"));
}

#[test]
fn an_approval_parks_and_its_answer_goes_on() {
    let p = plan(json!({"nodes": [
        {"id": "start", "type": "trigger"},
        {"id": "hold", "type": "approval", "question": "Ship it?", "after": ["start"]},
        {"id": "send", "type": "output", "after": ["hold"]},
    ]}));
    let mut st = RunState::new("abcdef", "x");
    assert_eq!(next(&p, &mut st, true), Next::Parked);
    assert_eq!(st.status, Status::AwaitingApproval);
    assert_eq!(
        st.pending.as_ref().map(|p| p["question"].clone()),
        Some(json!("Ship it?"))
    );
    assert_eq!(
        next(&p, &mut st, true),
        Next::Parked,
        "parked until answered"
    );
    assert!(answer(&p, &mut st, "send", json!("approve")).is_err());
    answer(&p, &mut st, "hold", json!("approve")).expect("answered");
    assert_eq!(next(&p, &mut st, true), Next::Stepped);
    assert_eq!(next(&p, &mut st, true), Next::Finished);
    assert_eq!(st.outputs["send"], json!({"hold": "approve"}));
}

/// With no seam an agent step parks and reports what it needs; its answer is its result.
#[test]
fn without_a_seam_an_agent_step_parks_and_is_answered() {
    let p = plan(graph());
    let mut st = RunState::new("abcdef", "x");
    assert_eq!(next(&p, &mut st, false), Next::Parked);
    assert_eq!(st.status, Status::AwaitingAgent);
    assert!(st.attempts.is_empty(), "nothing was launched");
    answer(&p, &mut st, "ask", json!({"output": {"ok": false}})).expect("answered");
    assert_eq!(next(&p, &mut st, false), Next::Stepped);
    assert_eq!(st.skipped, ["gate"]);
}

/// A definitive failure is launched again while `retries` allow, then fails the run.
#[test]
fn retries_relaunch_after_a_definitive_failure_only() {
    let p = plan(json!({"nodes": [
        {"id": "start", "type": "trigger"},
        {"id": "ask", "type": "agent", "prompt": "P", "retries": 1, "after": ["start"]},
    ]}));
    let mut st = RunState::new("abcdef", "x");
    assert!(matches!(next(&p, &mut st, true), Next::Launch(_)));
    agent_failed(&p, &mut st, "ask", "model refused");
    assert!(matches!(next(&p, &mut st, true), Next::Launch(_)));
    assert_eq!(st.attempts["ask"].launches, 2);
    agent_failed(&p, &mut st, "ask", "model refused");
    assert_eq!(next(&p, &mut st, true), Next::Finished);
    assert_eq!(st.status, Status::Failed);
}

#[rstest::rstest]
#[case("out.a.n == 2", json!({"n": 2.0}), true)]
#[case("out.a.n != 2", json!({"n": 3}), true)]
#[case("out.a.n >= 2", json!({"n": 2}), true)]
#[case("out.a.n < 2", json!({"n": "1"}), false)]
#[case("out.a.s == done", json!({"s": "done"}), true)]
#[case("out.a.s == \"done\"", json!({"s": "done"}), true)]
#[case("out.a.b == true", json!({"b": true}), true)]
#[case("out.a.missing == 1", json!({"n": 1}), false)]
#[case("out.a.x.y == null", json!({"x": {"y": null}}), true)]
fn a_condition_reads_the_outputs(#[case] expr: &str, #[case] out: Value, #[case] holds: bool) {
    let c = parse_condition(expr).expect("parses");
    let outputs = BTreeMap::from([("a".to_string(), out)]);
    assert_eq!(evaluate(&c, &outputs), holds, "{expr}");
}

/// What a host did over a run with kills: launches and deliveries per node, and the final state.
struct Hosted {
    launches: BTreeMap<String, u32>,
    deliveries: BTreeMap<String, u32>,
    st: RunState,
}

/// A host loop with a kill at each save point listed in `kills` (the n-th save, counting from
/// 1): the state on disk is the last saved; a kill loses the memory state and, at the point
/// after an effect, the effect's result. A step parked as unknown is answered, as a person
/// would after looking at the provider.
fn host(p: &[PlanStep], kills: &[u32]) -> Hosted {
    let mut disk = RunState::new("abcdef", "x");
    let mut launches = BTreeMap::new();
    let mut deliveries = BTreeMap::new();
    let mut saves = 0u32;
    // Saves the state; true when the runner is killed right after this save.
    let save = |disk: &mut RunState, st: &RunState, saves: &mut u32| -> bool {
        *disk = st.clone();
        *saves += 1;
        kills.contains(saves)
    };
    'run: for _ in 0..200 {
        let mut st = disk.clone();
        loop {
            let n = next(p, &mut st, true);
            if save(&mut disk, &st, &mut saves) {
                continue 'run;
            }
            match n {
                Next::Finished => break 'run,
                Next::Stepped => {}
                Next::Parked => {
                    let node = st
                        .pending
                        .as_ref()
                        .and_then(|p| p["node"].as_str())
                        .map(str::to_string);
                    let node = node.expect("parked for a node");
                    answer(p, &mut st, &node, json!({"output": "given"})).expect("answer");
                    if save(&mut disk, &st, &mut saves) {
                        continue 'run;
                    }
                }
                Next::Launch(l) => {
                    *launches.entry(l.node.clone()).or_insert(0) += 1;
                    // The effect is done; a kill here loses its result.
                    if kills.contains(&(saves + 1000)) {
                        continue 'run;
                    }
                    agent_returned(p, &mut st, &l.node, &json!({"output": {"ok": true}}));
                    if save(&mut disk, &st, &mut saves) {
                        continue 'run;
                    }
                }
                Next::Deliver(d) => {
                    *deliveries.entry(d.node.clone()).or_insert(0) += 1;
                    if kills.contains(&(saves + 1000)) {
                        continue 'run;
                    }
                    delivered(p, &mut st, &d.node, Some(true), None);
                    if save(&mut disk, &st, &mut saves) {
                        continue 'run;
                    }
                }
            }
        }
    }
    Hosted {
        launches,
        deliveries,
        st: disk,
    }
}

proptest! {
    /// The continuity rule, whatever the kills: at most one launch per agent step and one
    /// delivery per output step; the run ends completed with every step it did not skip
    /// recorded (the cursor never passed a step whose result it did not record).
    #[test]
    fn a_killed_runner_never_launches_or_delivers_twice(kills in proptest::collection::vec(prop_oneof![1u32..30, 1001u32..1030], 0..6)) {
        let p = plan(graph());
        let h = host(&p, &kills);
        prop_assert!(h.launches.values().all(|n| *n <= 1), "{:?}", h.launches);
        prop_assert!(h.deliveries.values().all(|n| *n <= 1), "{:?}", h.deliveries);
        prop_assert_eq!(h.st.status, Status::Completed);
        for s in &p {
            prop_assert!(h.st.outputs.contains_key(&s.id) || h.st.skipped.contains(&s.id), "{} unrecorded: {:?}", s.id, h.st);
        }
    }
}

/// Both ways for the property's kill point that matters: killed after the launch and before its
/// result was saved, the resume parks the step as unknown (no second launch); a runner that
/// launched again on resume would be caught by the count.
#[test]
fn a_resume_after_a_lost_result_parks_the_step_as_unknown() {
    let p = plan(graph());
    let mut st = RunState::new("abcdef", "x");
    assert!(matches!(next(&p, &mut st, true), Next::Launch(_)));
    let mut resumed = st.clone();
    assert_eq!(next(&p, &mut resumed, true), Next::Parked);
    let pending = resumed.pending.clone().unwrap_or_default();
    assert_eq!(pending["unknown"], true);
    assert_eq!(pending["correlation"], "workflow:abcdef:ask");
    assert_eq!(resumed.attempts["ask"].launches, 1);
    // The delivery likewise: in flight at the kill, never sent again; its fate unknown.
    let mut st = RunState::new("abcdef", "x");
    let _ = next(&p, &mut st, true);
    agent_returned(&p, &mut st, "ask", &json!({"output": {"ok": true}}));
    let _ = next(&p, &mut st, true);
    assert!(matches!(next(&p, &mut st, true), Next::Deliver(_)));
    let mut resumed = st.clone();
    assert_eq!(next(&p, &mut resumed, true), Next::Stepped);
    assert_eq!(resumed.deliveries.len(), 1);
    assert_eq!(resumed.deliveries[0].ok, None);
    assert!(
        resumed.deliveries[0]
            .detail
            .as_deref()
            .is_some_and(|d| d.contains("not sent again"))
    );
}
