//! Seed 002's validator table as a conformance set (`cases/workflow/sets/validator.yaml`): for
//! every row of the seed's rule table, graphs a validator must accept and graphs it must refuse,
//! each refusal with the defects (`{node, field}`) it reports. [`judge`] holds any validator to
//! it; the reference is held to every `{node, field}`, another validator to the refusal alone
//! where the defect's place is a reading of aocheck's (docs/decisions.md D81: a graph-level
//! defect's node `""`, a node named by its place `nodes[i]`, the trigger count's field).

use super::design::Defect;
use serde::Deserialize;
use serde_json::{Value, json};

/// The set shipped with aocheck.
pub const SHIPPED: &str = include_str!("../../cases/workflow/sets/validator.yaml");

/// The conformance set, as rows.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Set {
    pub rows: Vec<Row>,
}

/// One row of seed 002's rule table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Row {
    pub rule: String,
    pub says: String,
    pub pass: Vec<Value>,
    pub refuse: Vec<Refusal>,
}

/// A graph the validator must refuse, and what it must report.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Refusal {
    pub graph: Value,
    pub defects: Vec<Want>,
    /// The listed defects are all the graph has.
    #[serde(default)]
    pub only: bool,
}

/// One defect a refusal must report (`says`: words its message must hold, the cycle's path).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Want {
    pub node: String,
    pub field: String,
    #[serde(default)]
    pub says: Option<String>,
}

impl Want {
    /// Whether this defect's place is a reading of aocheck's that another validator may make
    /// otherwise (only the refusal binds it).
    fn reading(&self, rule: &str) -> bool {
        self.node.is_empty() || self.node.starts_with("nodes[") || rule == "one_trigger"
    }
}

/// Reads a set (YAML), naming what does not parse.
pub fn read(text: &str) -> Result<Set, String> {
    serde_saphyr::from_str(text).map_err(|e| format!("the validator set does not read: {e}"))
}

/// `nodes: "@N"` stands for N nodes: one trigger and N-1 notes.
pub fn expand(g: &Value) -> Value {
    match g
        .get("nodes")
        .and_then(Value::as_str)
        .and_then(|s| s.strip_prefix('@'))
        .and_then(|n| n.parse::<usize>().ok())
    {
        Some(n) => {
            let mut nodes = vec![json!({"id": "start", "type": "trigger"})];
            nodes.extend((1..n).map(|i| json!({"id": format!("note{i}"), "type": "note"})));
            json!({ "nodes": nodes })
        }
        None => g.clone(),
    }
}

impl Set {
    /// Every graph the set asks about, expanded, in order (each once).
    pub fn graphs(&self) -> Vec<Value> {
        let mut out: Vec<Value> = Vec::new();
        for r in &self.rows {
            for g in r.pass.iter().chain(r.refuse.iter().map(|x| &x.graph)) {
                let g = expand(g);
                if !out.contains(&g) {
                    out.push(g);
                }
            }
        }
        out
    }
}

/// How a validator did on one row: every way it missed (empty: the row is met).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowResult {
    pub rule: String,
    pub missed: Vec<String>,
}

/// Holds `validate` to every row. `strict`: every `{node, field}` binds (the reference);
/// otherwise a defect whose place is a reading is met by any defect (the refusal alone), and
/// `only` binds only where no listed defect is a reading.
pub fn judge(
    set: &Set,
    validate: &mut dyn FnMut(&Value) -> Vec<Defect>,
    strict: bool,
) -> Vec<RowResult> {
    let mut out = Vec::new();
    for r in &set.rows {
        let mut missed = Vec::new();
        for g in &r.pass {
            let g = expand(g);
            let d = validate(&g);
            if !d.is_empty() {
                missed.push(format!(
                    "{g} must be accepted, and was refused: {}",
                    shown(&d)
                ));
            }
        }
        for x in &r.refuse {
            let g = expand(&x.graph);
            let d = validate(&g);
            let mut readings = false;
            for w in &x.defects {
                let reading = !strict && w.reading(&r.rule);
                readings |= reading;
                let met = if reading {
                    !d.is_empty()
                } else {
                    d.iter().any(|f| {
                        f.node == w.node
                            && f.field == w.field
                            && w.says.as_ref().is_none_or(|s| f.msg.contains(s.as_str()))
                    })
                };
                if !met {
                    missed.push(format!(
                        "{g} must be refused with {{node: {:?}, field: {:?}}}{}; the validator said {}",
                        w.node,
                        w.field,
                        w.says
                            .as_ref()
                            .map(|s| format!(" saying {s:?}"))
                            .unwrap_or_default(),
                        shown(&d)
                    ));
                }
            }
            if x.only && !readings && d.len() != x.defects.len() {
                missed.push(format!(
                    "{g} has exactly {} defect(s); the validator said {}",
                    x.defects.len(),
                    shown(&d)
                ));
            }
        }
        out.push(RowResult {
            rule: r.rule.clone(),
            missed,
        });
    }
    out
}

fn shown(d: &[Defect]) -> String {
    if d.is_empty() {
        return "nothing (valid)".into();
    }
    d.iter()
        .map(|d| format!("{{{:?}, {:?}: {}}}", d.node, d.field, d.msg))
        .collect::<Vec<_>>()
        .join(", ")
}
