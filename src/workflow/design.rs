//! Seed 002's rulebook for a designer graph and the run plan built from it.
//!
//! [`validate`] is `validate_designer_graph`: one pure function, no I/O, the input never
//! changed. A defect is `{node, field, msg}`; an empty list means the graph is valid. Only a
//! wrong graph shape short-circuits (nothing else can be read); every other defect is
//! accumulated so that all of them can be shown at once. The rules, as seed 002's table gives
//! them:
//!
//! | rule | enforced |
//! |---|---|
//! | graph shape | an object with a non-empty `nodes` list, at most 50 nodes |
//! | identity | every node has a unique, non-empty string `id` |
//! | one trigger | zero or several `trigger` nodes is a defect |
//! | known kinds | an unknown `type` is refused with the accepted vocabulary |
//! | required payloads | `prompt` (agent), `expression` (condition), `question` (approval) |
//! | edges | `after` is a list of strings naming real nodes, never itself, never a note |
//! | acyclicity | a DFS over `after` reports the cycle path |
//! | retries | an agent's `retries` is a whole number in 0–3 |
//! | deadlines | `timeout_minutes` is 1–4320; `on_timeout` is `reject` or `escalate` |
//! | delivery | `deliver` is `notification` or `channel`; a channel `target` contains `:` |
//! | conditions | `out.<node>.<path> <op> <literal>` only |
//! | note tint | `color` is yellow, blue, green, red or empty |
//!
//! Where the seed is silent (docs/decisions.md D81): a graph-level defect names node `""`; the
//! trigger count is one defect on field `type`; deadlines and deliveries are checked on any
//! node that carries them; the condition's operators are `==`, `!=`, `<`, `<=`, `>`, `>=` and its
//! literal is the non-empty rest of the expression; a condition naming a node that does not
//! exist is left to the run (the seed's grammar rule says nothing of it).
//!
//! [`build_run_plan`] drops the trigger and the notes and orders the other steps by a stable
//! topological sort; it assumes a valid graph but still refuses duplicate or missing ids and
//! unknown kinds, since hand-written JSON reaches it too.

use provider_model::graph::{cycle, stable_order, whole};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// At most this many nodes in a graph.
pub const MAX_NODES: usize = 50;
/// The node kinds (`type`), the accepted vocabulary.
pub const KINDS: [&str; 6] = [
    "trigger",
    "agent",
    "condition",
    "approval",
    "output",
    "note",
];
/// A note's tints.
pub const TINTS: [&str; 5] = ["yellow", "blue", "green", "red", ""];
/// Where an output delivers.
pub const DELIVERIES: [&str; 2] = ["notification", "channel"];
/// What a deadline does when it passes.
pub const ON_TIMEOUT: [&str; 2] = ["reject", "escalate"];
/// A condition's comparisons.
pub const OPERATORS: [&str; 6] = ["==", "!=", "<", "<=", ">", ">="];

/// One defect of a graph: which node (`""` for the graph), which field, what is wrong.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Defect {
    pub node: String,
    pub field: String,
    pub msg: String,
}

fn defect(node: &str, field: &str, msg: impl Into<String>) -> Defect {
    Defect {
        node: node.to_string(),
        field: field.to_string(),
        msg: msg.into(),
    }
}

/// A condition's parts: `out.<node>.<path> <op> <literal>`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Condition {
    pub node: String,
    pub path: Vec<String>,
    pub op: String,
    pub literal: String,
}

/// Parses a condition expression, or says what is wrong with it.
pub fn parse_condition(expr: &str) -> Result<Condition, String> {
    let expr = expr.trim();
    let mut parts = expr.splitn(3, char::is_whitespace);
    let (Some(lhs), Some(op), Some(lit)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(format!(
            "expected `out.<node>.<path> <op> <literal>`, got {expr:?}"
        ));
    };
    let lit = lit.trim();
    let path: Vec<&str> = lhs.split('.').collect();
    let ("out", Some(node), true) = (
        path[0],
        path.get(1).filter(|n| !n.is_empty()),
        path.len() >= 3 && path[2..].iter().all(|p| !p.is_empty()),
    ) else {
        return Err(format!(
            "the left side must be `out.<node>.<path>`, got {lhs:?}"
        ));
    };
    if !OPERATORS.contains(&op) {
        return Err(format!(
            "operator {op:?}: use one of {}",
            OPERATORS.join(", ")
        ));
    }
    if lit.is_empty() {
        return Err("the literal after the operator is missing".into());
    }
    Ok(Condition {
        node: node.to_string(),
        path: path[2..].iter().map(|p| p.to_string()).collect(),
        op: op.to_string(),
        literal: lit.to_string(),
    })
}

/// `validate_designer_graph`: every defect of `graph` (empty: valid).
pub fn validate(graph: &Value) -> Vec<Defect> {
    check(graph, None)
}

/// [`validate`] with one deliberate defect (test builds only).
#[cfg(feature = "test-knobs")]
pub fn validate_broken(graph: &Value, d: super::WorkflowDefect) -> Vec<Defect> {
    check(graph, Some(d))
}

fn check(graph: &Value, broken: Option<super::WorkflowDefect>) -> Vec<Defect> {
    let lax = broken == Some(super::WorkflowDefect::TruncateRetries);
    let nodes = match provider_model::graph::list_of(graph, "nodes", MAX_NODES) {
        Ok(n) => n,
        Err(m) => return vec![defect("", "nodes", m)],
    };
    let mut out = Vec::new();
    // Identity: each node's id, or its place in the list where it has none.
    let (ids, bad) = provider_model::graph::identities(nodes, "nodes", "node");
    out.extend(bad.into_iter().map(|(n, m)| defect(&n, "id", m)));
    let kinds: BTreeMap<&str, &str> = nodes
        .iter()
        .zip(&ids)
        .filter_map(|(n, id)| Some((id.as_str(), n.get("type")?.as_str()?)))
        .collect();
    let triggers: Vec<&str> = kinds
        .iter()
        .filter(|(_, k)| **k == "trigger")
        .map(|(id, _)| *id)
        .collect();
    if triggers.len() != 1 {
        out.push(defect(
            "",
            "type",
            if triggers.is_empty() {
                "a graph needs exactly one trigger; it has none".to_string()
            } else {
                format!(
                    "a graph needs exactly one trigger; it has {}: {}",
                    triggers.len(),
                    triggers.join(", ")
                )
            },
        ));
    }
    let mut edges: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (n, id) in nodes.iter().zip(&ids) {
        let id = id.as_str();
        let kind = match n.get("type") {
            Some(Value::String(k)) if KINDS.contains(&k.as_str()) => Some(k.as_str()),
            Some(k) => {
                out.push(defect(
                    id,
                    "type",
                    format!("unknown type {k}; one of {}", KINDS.join(", ")),
                ));
                None
            }
            None => {
                out.push(defect(
                    id,
                    "type",
                    format!("`type` is required; one of {}", KINDS.join(", ")),
                ));
                None
            }
        };
        edges.insert(id, after_defects(n, id, &kinds, &mut out));
        node_defects(n, id, kind, lax, &mut out);
    }
    if let Some(c) = cycle(&edges) {
        out.push(defect(&c[0], "after", format!("cycle: {}", c.join(" -> "))));
    }
    out
}

/// A node's `after`: the names it may keep (the cycle walk's edges), its defects pushed.
fn after_defects(
    n: &Value,
    id: &str,
    kinds: &BTreeMap<&str, &str>,
    out: &mut Vec<Defect>,
) -> Vec<String> {
    let mut after = Vec::new();
    match n.get("after") {
        None | Some(Value::Null) => {}
        Some(Value::Array(a)) => {
            for x in a {
                match x.as_str() {
                    Some(t) if t == id => {
                        out.push(defect(id, "after", "a node cannot come after itself"))
                    }
                    Some(t) => match kinds.get(t) {
                        Some(&"note") => out.push(defect(
                            id,
                            "after",
                            format!("{t:?} is a note; nothing comes after a note"),
                        )),
                        Some(_) => after.push(t.to_string()),
                        None => out.push(defect(id, "after", format!("names no node: {t:?}"))),
                    },
                    None => out.push(defect(
                        id,
                        "after",
                        format!("must list node ids (strings), got {x}"),
                    )),
                }
            }
        }
        Some(other) => out.push(defect(
            id,
            "after",
            format!("must be a list of node ids, got {other}"),
        )),
    }
    after
}

/// A node's payload rules: what its kind needs, and the ranges and words of what it carries.
fn node_defects(n: &Value, id: &str, kind: Option<&str>, lax: bool, out: &mut Vec<Defect>) {
    let required = match kind {
        Some("agent") => Some("prompt"),
        Some("condition") => Some("expression"),
        Some("approval") => Some("question"),
        _ => None,
    };
    if let (Some(field), Some(kind)) = (required, kind) {
        match n.get(field) {
            Some(Value::String(t)) if !t.trim().is_empty() => {}
            Some(Value::String(_)) => out.push(defect(id, field, "must not be empty")),
            Some(other) => out.push(defect(id, field, format!("must be a string, got {other}"))),
            None => out.push(defect(
                id,
                field,
                format!("an {kind} node cannot run without `{field}`"),
            )),
        }
    }
    if kind == Some("condition")
        && let Some(Value::String(e)) = n.get("expression")
        && !e.trim().is_empty()
        && let Err(m) = parse_condition(e)
    {
        out.push(defect(id, "expression", m));
    }
    if kind == Some("agent") {
        range(n, id, "retries", 0, 3, lax, out);
    }
    range(n, id, "timeout_minutes", 1, 4320, false, out);
    words(n, id, "on_timeout", &ON_TIMEOUT, out);
    words(n, id, "deliver", &DELIVERIES, out);
    if n.get("deliver").and_then(Value::as_str) == Some("channel") {
        match n.get("target") {
            Some(Value::String(t)) if t.contains(':') => {}
            Some(Value::String(t)) => out.push(defect(
                id,
                "target",
                format!("a channel target is `platform:chat`, with a `:`; got {t:?}"),
            )),
            Some(other) => out.push(defect(
                id,
                "target",
                format!("must be a string, got {other}"),
            )),
            None => out.push(defect(
                id,
                "target",
                "a channel delivery needs its `target`",
            )),
        }
    }
    if kind == Some("note") {
        words(n, id, "color", &TINTS, out);
    }
}

/// A whole number in `lo..=hi`, where the field is present (`lax`: the broken variant's cast).
fn range(n: &Value, id: &str, field: &str, lo: i64, hi: i64, lax: bool, out: &mut Vec<Defect>) {
    if let Some(v) = n.get(field) {
        let cast = || match v {
            Value::Number(x) => x.as_f64().map(|f| f.trunc() as i64),
            Value::Bool(b) => Some(i64::from(*b)),
            _ => None,
        };
        match if lax { cast() } else { whole(v) } {
            Some(x) if (lo..=hi).contains(&x) => {}
            Some(x) => out.push(defect(id, field, format!("must be {lo}–{hi}, got {x}"))),
            None => out.push(defect(
                id,
                field,
                format!("must be a whole number {lo}–{hi}, got {v} (never rounded)"),
            )),
        }
    }
}

/// One of `allowed`, where the field is present.
fn words(n: &Value, id: &str, field: &str, allowed: &[&str], out: &mut Vec<Defect>) {
    if let Some(v) = n.get(field)
        && !v.as_str().is_some_and(|w| allowed.contains(&w))
    {
        out.push(defect(
            id,
            field,
            format!(
                "must be one of {}, got {v}",
                allowed
                    .iter()
                    .map(|w| format!("{w:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
}

/// One step of a run plan: its node, as the graph gave it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlanStep {
    pub id: String,
    pub kind: String,
    pub after: Vec<String>,
    pub node: Value,
}

/// `build_run_plan`: the trigger and the notes dropped, the other steps in a stable
/// topological order (ties keep the graph's order). Refuses duplicate or missing ids, unknown
/// kinds and an order that does not exist, whatever validated the graph before.
pub fn build_run_plan(graph: &Value) -> Result<Vec<PlanStep>, Vec<Defect>> {
    let nodes = graph
        .get("nodes")
        .and_then(Value::as_array)
        .ok_or_else(|| {
            vec![defect(
                "",
                "nodes",
                "a graph is an object with a `nodes` list",
            )]
        })?;
    let mut bad = Vec::new();
    let mut seen = BTreeSet::new();
    let mut steps = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        let id = match n.get("id").and_then(Value::as_str) {
            Some(id) if !id.trim().is_empty() => id.to_string(),
            _ => {
                bad.push(defect(&format!("nodes[{i}]"), "id", "missing id"));
                continue;
            }
        };
        if !seen.insert(id.clone()) {
            bad.push(defect(&id, "id", "duplicate node id"));
            continue;
        }
        let kind = n.get("type").and_then(Value::as_str).unwrap_or_default();
        if !KINDS.contains(&kind) {
            bad.push(defect(&id, "type", format!("unknown type {kind:?}")));
            continue;
        }
        if kind == "trigger" || kind == "note" {
            continue;
        }
        let after = provider_model::graph::after(n);
        steps.push(PlanStep {
            id,
            kind: kind.to_string(),
            after,
            node: n.clone(),
        });
    }
    if !bad.is_empty() {
        return Err(bad);
    }
    let order = stable_order(
        &steps
            .iter()
            .map(|s| (s.id.as_str(), s.after.as_slice()))
            .collect::<Vec<_>>(),
    )
    .ok_or_else(|| {
        vec![defect(
            "",
            "after",
            "no order exists: the steps form a cycle",
        )]
    })?;
    Ok(order.into_iter().map(|i| steps[i].clone()).collect())
}

#[cfg(test)]
mod tests;
