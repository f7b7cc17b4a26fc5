use super::*;
use serde_json::json;

use crate::workflow::conformance::{self, expand};

fn table() -> conformance::Set {
    conformance::read(conformance::SHIPPED).expect("the validator table reads")
}

/// Every row of seed 002's table has a graph that passes and one refused for it, and the
/// reference validator agrees with each: no defect for a passing graph; for a refused one,
/// each defect it must report (node and field, the cycle's path where the row names it), and
/// nothing else where the row says so.
#[test]
fn the_validator_meets_its_conformance_set() {
    let t = table();
    let rules: BTreeSet<&str> = t.rows.iter().map(|r| r.rule.as_str()).collect();
    for rule in [
        "graph_shape",
        "identity",
        "one_trigger",
        "known_kinds",
        "required_payloads",
        "edges",
        "acyclicity",
        "retries",
        "deadlines",
        "delivery",
        "conditions",
        "note_tint",
    ] {
        assert!(rules.contains(rule), "no row for {rule}");
    }
    for r in &t.rows {
        assert!(!r.pass.is_empty() && !r.refuse.is_empty(), "{}", r.rule);
    }
    // The reference is held to every {node, field}, and to `only`.
    for row in conformance::judge(&t, &mut |g| validate(g), true) {
        assert!(row.missed.is_empty(), "{}: {:?}", row.rule, row.missed);
    }
}

/// The set's judge, both ways: a validator that accepts everything misses every row; one that
/// names every defect elsewhere than the set says misses the rows whose places are not
/// readings, and meets the others only where another validator is judged (not strictly).
#[test]
fn the_conformance_judge_catches_a_validator_that_misses() {
    let t = table();
    let all = conformance::judge(&t, &mut |_| Vec::new(), false);
    assert!(all.iter().all(|r| !r.missed.is_empty()), "{all:?}");
    let elsewhere = |g: &Value| {
        validate(g)
            .into_iter()
            .map(|mut d| {
                d.node = "somewhere".into();
                d
            })
            .collect::<Vec<_>>()
    };
    let strict = conformance::judge(&t, &mut |g| elsewhere(g), true);
    let lax = conformance::judge(&t, &mut |g| elsewhere(g), false);
    let missed = |rs: &[conformance::RowResult], rule: &str| {
        rs.iter().any(|r| r.rule == rule && !r.missed.is_empty())
    };
    // graph_shape's defects are all graph-level: a reading, met by the refusal alone.
    assert!(missed(&strict, "graph_shape") && !missed(&lax, "graph_shape"));
    // retries names its node: a validator that names another misses it either way.
    assert!(missed(&strict, "retries") && missed(&lax, "retries"));
}

/// The validator never changes its input and says the same twice.
#[test]
fn the_validator_is_pure() {
    for r in table().rows {
        for g in r
            .refuse
            .iter()
            .map(|x| expand(&x.graph))
            .chain(r.pass.iter().map(expand))
        {
            let before = g.clone();
            assert_eq!(validate(&g), validate(&g));
            assert_eq!(g, before);
        }
    }
}

/// The plan drops the trigger and the notes and keeps the graph's order among ready steps.
#[test]
fn the_plan_is_a_stable_topological_order_without_trigger_or_notes() {
    let g = json!({"nodes": [
        {"id": "start", "type": "trigger"},
        {"id": "send", "type": "output", "after": ["b", "a"]},
        {"id": "memo", "type": "note", "color": "red"},
        {"id": "b", "type": "agent", "prompt": "P", "after": ["start"]},
        {"id": "a", "type": "agent", "prompt": "P", "after": ["start"]},
    ]});
    assert!(validate(&g).is_empty());
    let ids: Vec<String> = build_run_plan(&g)
        .expect("plan")
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(ids, ["b", "a", "send"]);
}

/// Hand-written JSON reaches the plan too: a duplicate id, a missing one, an unknown kind and a
/// cycle are refused there, named.
#[test]
fn the_plan_refuses_what_no_validator_stopped() {
    for (g, field) in [
        (
            json!({"nodes": [{"id": "a", "type": "agent"}, {"id": "a", "type": "output"}]}),
            "id",
        ),
        (json!({"nodes": [{"type": "agent"}]}), "id"),
        (json!({"nodes": [{"id": "a", "type": "cron"}]}), "type"),
        (
            json!({"nodes": [{"id": "a", "type": "agent", "after": ["b"]}, {"id": "b", "type": "agent", "after": ["a"]}]}),
            "after",
        ),
    ] {
        let e = build_run_plan(&g).expect_err("refused");
        assert!(e.iter().any(|d| d.field == field), "{g}: {e:?}");
    }
}

#[test]
fn a_condition_is_parsed_into_its_parts() {
    let c = parse_condition("out.ask.result.score >= 3").expect("parses");
    assert_eq!(c.node, "ask");
    assert_eq!(c.path, ["result", "score"]);
    assert_eq!(c.op, ">=");
    assert_eq!(c.literal, "3");
    let c = parse_condition("out.ask.label == \"needs review\"").expect("parses");
    assert_eq!(c.literal, "\"needs review\"");
}
