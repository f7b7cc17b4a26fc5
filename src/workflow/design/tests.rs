use super::*;
use serde_json::json;

/// The conformance set (`cases/workflow/sets/validator.yaml`), as rows.
#[derive(Debug, Deserialize)]
struct Table {
    rows: Vec<Row>,
}

#[derive(Debug, Deserialize)]
struct Row {
    rule: String,
    #[allow(dead_code)]
    says: String,
    pass: Vec<Value>,
    refuse: Vec<Refusal>,
}

#[derive(Debug, Deserialize)]
struct Refusal {
    graph: Value,
    defects: Vec<Want>,
    #[serde(default)]
    only: bool,
}

#[derive(Debug, Deserialize)]
struct Want {
    node: String,
    field: String,
    #[serde(default)]
    says: Option<String>,
}

fn table() -> Table {
    serde_saphyr::from_str(include_str!("../../../cases/workflow/sets/validator.yaml"))
        .expect("the validator table reads")
}

/// `nodes: "@N"`: one trigger and N-1 notes.
fn expand(g: &Value) -> Value {
    match g
        .get("nodes")
        .and_then(Value::as_str)
        .and_then(|s| s.strip_prefix('@'))
    {
        Some(n) => {
            let n: usize = n.parse().expect("@N");
            let mut nodes = vec![json!({"id": "start", "type": "trigger"})];
            nodes.extend((1..n).map(|i| json!({"id": format!("note{i}"), "type": "note"})));
            json!({ "nodes": nodes })
        }
        None => g.clone(),
    }
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
        for g in &r.pass {
            let g = expand(g);
            let d = validate(&g);
            assert!(d.is_empty(), "{}: {g} was refused: {d:?}", r.rule);
        }
        for x in &r.refuse {
            let g = expand(&x.graph);
            let d = validate(&g);
            for w in &x.defects {
                assert!(
                    d.iter().any(|f| f.node == w.node
                        && f.field == w.field
                        && w.says.as_ref().is_none_or(|s| f.msg.contains(s.as_str()))),
                    "{}: {g}: no defect {{{}, {}}} in {d:?}",
                    r.rule,
                    w.node,
                    w.field
                );
            }
            if x.only {
                assert_eq!(d.len(), x.defects.len(), "{}: {g}: {d:?}", r.rule);
            }
        }
    }
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
