//! Runs are scripts (seed 002's design): a small graph of steps, one pure validator as the only
//! rulebook, a stable topological plan, and a JSON-serialisable run state that a resumable runner
//! advances one step at a time.
//!
//! A script is `{"steps": [{"id", "kind", "after"?, …payload}]}`. Kinds: `message{text, chunks?}`
//! (`{run_id}` in the text stands for the run's id),
//! `reasoning{text}`, `tool{tool, preview?, duration_ms?, error?, retries?}`,
//! `approval{tool, command, description?, pattern_key?, allow_permanent?, timeout_ms?}`,
//! `condition{expr}` with `out.<step>.<field> == | != <literal>`, `sleep{ms}`, `fail{error}`,
//! `complete{output?}`.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// At most this many steps in one script.
/// Which script a started run follows: the first rule whose session id and objective match
/// (`POST /_control/scripts`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptRule {
    #[serde(default)]
    pub session_id: Option<String>,
    #[serde(default)]
    pub objective_contains: Option<String>,
    pub script: Value,
}

pub const MAX_STEPS: usize = 50;
/// Known kinds (the accepted vocabulary).
pub const KINDS: [&str; 8] = [
    "message",
    "reasoning",
    "tool",
    "approval",
    "condition",
    "sleep",
    "fail",
    "complete",
];

/// One defect: which step, which field, what is wrong. An empty list means valid.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Defect {
    pub step: String,
    pub field: String,
    pub msg: String,
}

fn defect(step: &str, field: &str, msg: impl Into<String>) -> Defect {
    Defect {
        step: step.to_string(),
        field: field.to_string(),
        msg: msg.into(),
    }
}

use crate::graph::whole;

/// A parsed condition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Condition {
    pub step: String,
    pub field: String,
    pub negate: bool,
    pub literal: String,
}

fn parse_condition(expr: &str) -> Result<Condition, String> {
    let parts: Vec<&str> = expr.split_whitespace().collect();
    let [lhs, op, lit] = parts.as_slice() else {
        return Err(format!(
            "expected `out.<step>.<field> == <literal>`, got {expr:?}"
        ));
    };
    let path: Vec<&str> = lhs.split('.').collect();
    let ["out", step, field] = path.as_slice() else {
        return Err(format!(
            "the left side must be `out.<step>.<field>`, got {lhs:?}"
        ));
    };
    let negate = match *op {
        "==" => false,
        "!=" => true,
        other => return Err(format!("operator {other:?}: use == or !=")),
    };
    Ok(Condition {
        step: step.to_string(),
        field: field.to_string(),
        negate,
        literal: lit.trim_matches('"').to_string(),
    })
}

/// Validates a script: every defect at once (only a wrong overall shape short-circuits).
pub fn validate(script: &Value) -> Vec<Defect> {
    let mut out = Vec::new();
    let steps = match crate::graph::list_of(script, "steps", MAX_STEPS) {
        Ok(s) => s,
        Err(m) => return vec![defect("", "steps", m)],
    };
    if let Some(obj) = script.as_object() {
        for k in obj.keys() {
            if k != "steps" && k != "name" {
                out.push(defect(
                    "",
                    k,
                    "unknown top-level field; a script has `name` and `steps`",
                ));
            }
        }
    }
    let (ids, bad) = crate::graph::identities(steps, "steps", "step");
    out.extend(bad.into_iter().map(|(n, m)| defect(&n, "id", m)));
    let id_set: BTreeSet<&str> = ids.iter().map(String::as_str).collect();
    let mut kinds: HashMap<&str, &str> = HashMap::new();
    let mut edges: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (s, id) in steps.iter().zip(ids.iter()) {
        let id = id.as_str();
        let kind = match s.get("kind").and_then(Value::as_str) {
            Some(k) if KINDS.contains(&k) => k,
            Some(k) => {
                out.push(defect(
                    id,
                    "kind",
                    format!("unknown kind {k:?}; one of {}", KINDS.join(", ")),
                ));
                continue;
            }
            None => {
                out.push(defect(
                    id,
                    "kind",
                    format!("`kind` is required; one of {}", KINDS.join(", ")),
                ));
                continue;
            }
        };
        kinds.insert(id, kind);
        // Edges.
        let mut after = Vec::new();
        match s.get("after") {
            None | Some(Value::Null) => {}
            Some(Value::Array(a)) => {
                for x in a {
                    match x.as_str() {
                        Some(t) if t == id => {
                            out.push(defect(id, "after", "a step cannot come after itself"))
                        }
                        Some(t) if id_set.contains(t) => after.push(t.to_string()),
                        Some(t) => out.push(defect(id, "after", format!("names no step: {t:?}"))),
                        None => out.push(defect(
                            id,
                            "after",
                            format!("must list step ids (strings), got {x}"),
                        )),
                    }
                }
            }
            Some(other) => out.push(defect(
                id,
                "after",
                format!("must be a list of step ids, got {other}"),
            )),
        }
        edges.insert(id, after);
        // Payloads and ranges.
        let text_field = |field: &str, out: &mut Vec<Defect>| match s.get(field) {
            Some(Value::String(t)) if !t.is_empty() && t.len() <= 1 << 20 => {}
            Some(Value::String(t)) if t.is_empty() => {
                out.push(defect(id, field, "must not be empty"))
            }
            Some(Value::String(_)) => out.push(defect(id, field, "is over the 1 MiB frame bound")),
            Some(other) => out.push(defect(id, field, format!("must be a string, got {other}"))),
            None => out.push(defect(id, field, format!("a {kind} step needs `{field}`"))),
        };
        let range = |field: &str, lo: i64, hi: i64, required: bool, out: &mut Vec<Defect>| match s
            .get(field)
        {
            None if !required => {}
            None => out.push(defect(id, field, format!("a {kind} step needs `{field}`"))),
            Some(v) => match whole(v) {
                Some(n) if (lo..=hi).contains(&n) => {}
                Some(n) => out.push(defect(id, field, format!("must be {lo}–{hi}, got {n}"))),
                None => out.push(defect(
                    id,
                    field,
                    format!("must be a whole number {lo}–{hi}, got {v}"),
                )),
            },
        };
        let boolean = |field: &str, out: &mut Vec<Defect>| {
            if let Some(v) = s.get(field)
                && !v.is_boolean()
            {
                out.push(defect(id, field, format!("must be true or false, got {v}")));
            }
        };
        match kind {
            "message" => {
                text_field("text", &mut out);
                range("chunks", 1, 100, false, &mut out);
                match s.get("usage") {
                    None => {}
                    Some(Value::Object(u)) => {
                        for k in ["input_tokens", "output_tokens"] {
                            match u.get(k).and_then(whole) {
                                Some(n) if (0..=1_000_000_000).contains(&n) => {}
                                _ => out.push(defect(
                                    id,
                                    "usage",
                                    format!("`usage.{k}` must be a whole number 0–1000000000"),
                                )),
                            }
                        }
                        if let Some(k) = u
                            .keys()
                            .find(|k| !["input_tokens", "output_tokens"].contains(&k.as_str()))
                        {
                            out.push(defect(
                                id,
                                "usage",
                                format!(
                                    "unknown field `usage.{k}`; use input_tokens and output_tokens"
                                ),
                            ));
                        }
                    }
                    Some(other) => out.push(defect(
                        id,
                        "usage",
                        format!("must be {{input_tokens, output_tokens}}, got {other}"),
                    )),
                }
            }
            "reasoning" => text_field("text", &mut out),
            "tool" => {
                text_field("tool", &mut out);
                range("duration_ms", 0, 600_000, false, &mut out);
                range("retries", 0, 3, false, &mut out);
                boolean("error", &mut out);
            }
            "approval" => {
                text_field("tool", &mut out);
                text_field("command", &mut out);
                range("timeout_ms", 1, 3_600_000, false, &mut out);
                boolean("allow_permanent", &mut out);
                boolean("error", &mut out);
            }
            "condition" => match s.get("expr").and_then(Value::as_str) {
                Some(e) => match parse_condition(e) {
                    Ok(c) => {
                        if !id_set.contains(c.step.as_str()) {
                            out.push(defect(
                                id,
                                "expr",
                                format!("`out.{}` names no step", c.step),
                            ));
                        }
                        if !["choice", "error"].contains(&c.field.as_str()) {
                            out.push(defect(
                                id,
                                "expr",
                                format!("field {:?}: use `choice` or `error`", c.field),
                            ));
                        }
                    }
                    Err(m) => out.push(defect(id, "expr", m)),
                },
                None => out.push(defect(id, "expr", "a condition step needs `expr`")),
            },
            "sleep" => range("ms", 0, 600_000, true, &mut out),
            "fail" => text_field("error", &mut out),
            "complete" => {
                if let Some(v) = s.get("output")
                    && !v.is_string()
                {
                    out.push(defect(id, "output", format!("must be a string, got {v}")));
                }
            }
            _ => {}
        }
    }
    // Acyclicity: DFS over `after`, reporting the cycle path.
    if let Some(cycle) = crate::graph::cycle(&edges) {
        out.push(defect(
            &cycle[0],
            "after",
            format!("cycle: {}", cycle.join(" -> ")),
        ));
    }
    out
}

/// What a step does.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StepKind {
    Message {
        text: String,
        chunks: u32,
        /// The usage this model call reports (`{input_tokens, output_tokens}`); estimated from
        /// the text when absent.
        usage: Option<(i64, i64)>,
    },
    Reasoning {
        text: String,
    },
    Tool {
        tool: String,
        preview: String,
        duration_ms: u64,
        error: bool,
        retries: u32,
    },
    Approval {
        tool: String,
        command: String,
        description: String,
        pattern_key: String,
        allow_permanent: bool,
        timeout_ms: Option<u64>,
        /// The tool's own outcome once approved (`error: true`: approved, then the tool failed).
        error: bool,
    },
    Condition(Condition),
    Sleep {
        ms: u64,
    },
    Fail {
        error: String,
    },
    Complete {
        output: Option<String>,
    },
}

/// A planned step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub id: String,
    pub after: Vec<String>,
    pub kind: StepKind,
}

/// Validates, then orders the steps by a stable topological sort (ties keep script order).
pub fn build_plan(script: &Value) -> Result<Vec<Step>, Vec<Defect>> {
    let defects = validate(script);
    if !defects.is_empty() {
        return Err(defects);
    }
    let steps = script
        .get("steps")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let s = |v: &Value, k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let n = |v: &Value, k: &str, d: u64| v.get(k).and_then(Value::as_u64).unwrap_or(d);
    let mut typed = Vec::new();
    for v in &steps {
        let kind = match v.get("kind").and_then(Value::as_str).unwrap_or_default() {
            "message" => StepKind::Message {
                text: s(v, "text"),
                chunks: n(v, "chunks", 1) as u32,
                usage: v.get("usage").map(|u| {
                    let t = |k: &str| u.get(k).and_then(Value::as_i64).unwrap_or(0);
                    (t("input_tokens"), t("output_tokens"))
                }),
            },
            "reasoning" => StepKind::Reasoning { text: s(v, "text") },
            "tool" => StepKind::Tool {
                tool: s(v, "tool"),
                preview: s(v, "preview"),
                duration_ms: n(v, "duration_ms", 0),
                error: v.get("error").and_then(Value::as_bool).unwrap_or(false),
                retries: n(v, "retries", 0) as u32,
            },
            "approval" => StepKind::Approval {
                tool: s(v, "tool"),
                command: s(v, "command"),
                description: v
                    .get("description")
                    .and_then(Value::as_str)
                    .unwrap_or("dangerous command")
                    .to_string(),
                pattern_key: v
                    .get("pattern_key")
                    .and_then(Value::as_str)
                    .unwrap_or("command")
                    .to_string(),
                allow_permanent: v
                    .get("allow_permanent")
                    .and_then(Value::as_bool)
                    .unwrap_or(true),
                timeout_ms: v.get("timeout_ms").and_then(Value::as_u64),
                error: v.get("error").and_then(Value::as_bool).unwrap_or(false),
            },
            "condition" => match parse_condition(&s(v, "expr")) {
                Ok(c) => StepKind::Condition(c),
                Err(m) => return Err(vec![defect(&s(v, "id"), "expr", m)]),
            },
            "sleep" => StepKind::Sleep { ms: n(v, "ms", 0) },
            "fail" => StepKind::Fail {
                error: s(v, "error"),
            },
            "complete" => StepKind::Complete {
                output: v.get("output").and_then(Value::as_str).map(str::to_string),
            },
            other => {
                return Err(vec![defect(
                    &s(v, "id"),
                    "kind",
                    format!("unknown kind {other:?}"),
                )]);
            }
        };
        let after = crate::graph::after(v);
        typed.push(Step {
            id: s(v, "id"),
            after,
            kind,
        });
    }
    // Kahn's algorithm, always taking the earliest ready step in script order.
    let order = crate::graph::stable_order(
        &typed
            .iter()
            .map(|st| (st.id.as_str(), st.after.as_slice()))
            .collect::<Vec<_>>(),
    )
    .ok_or_else(|| vec![defect("", "after", "no executable order (cycle)")])?;
    let plan: Vec<Step> = order.into_iter().map(|i| typed[i].clone()).collect();
    Ok(plan)
}

/// A run's execution state (cursor, outputs, skipped steps, pending prompt).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
pub struct RunState {
    pub run_id: String,
    pub session_id: String,
    /// Index of the next step.
    pub cursor: usize,
    pub status: String,
    pub outputs: BTreeMap<String, Value>,
    /// A list, not a set, so the state stays JSON.
    pub skipped: Vec<String>,
    pub pending: Option<Value>,
    pub error: Option<String>,
    pub text: String,
}

impl RunState {
    /// Whether `step` must be skipped: one of its parents was skipped (transitive).
    pub fn parent_skipped(&self, step: &Step) -> bool {
        step.after.iter().any(|a| self.skipped.contains(a))
    }
    /// Evaluates a condition against recorded outputs; an absent output is `false`.
    pub fn eval(&self, c: &Condition) -> bool {
        let v = self.outputs.get(&c.step).and_then(|o| o.get(&c.field));
        let text = match v {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Bool(b)) => b.to_string(),
            Some(other) => other.to_string(),
            None => return false,
        };
        (text == c.literal) != c.negate
    }
}

/// Writes a run's record atomically as `<run_id>.json`: a temp file in the same directory,
/// then a rename, so a reader never sees a partial file.
pub fn persist<T: Serialize>(
    dir: &std::path::Path,
    run_id: &str,
    record: &T,
) -> std::io::Result<()> {
    if !run_id.starts_with("run_") || !run_id[4..].chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "run id is not run_<hex>",
        ));
    }
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".{run_id}.json.tmp"));
    let bytes = serde_json::to_vec_pretty(record).map_err(std::io::Error::other)?;
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, dir.join(format!("{run_id}.json")))
}

/// The script a run gets when no rule matches: a short text reply.
pub fn default_script() -> Value {
    serde_json::json!({"name": "text-reply", "steps": [
        {"id": "reply", "kind": "message", "text": "Done. I completed the objective.", "chunks": 3}
    ]})
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::json;

    fn fields(d: &[Defect]) -> Vec<(String, String)> {
        d.iter()
            .map(|x| (x.step.clone(), x.field.clone()))
            .collect()
    }

    #[rstest]
    #[case::not_an_object(json!([]), "", "steps")]
    #[case::empty(json!({"steps": []}), "", "steps")]
    #[case::too_many(json!({"steps": (0..51).map(|i| json!({"id": format!("s{i}"), "kind": "sleep", "ms": 0})).collect::<Vec<_>>()}), "", "steps")]
    #[case::missing_id(json!({"steps": [{"kind": "sleep", "ms": 1}]}), "steps[0]", "id")]
    #[case::duplicate_id(json!({"steps": [{"id": "a", "kind": "sleep", "ms": 1}, {"id": "a", "kind": "sleep", "ms": 1}]}), "a", "id")]
    #[case::unknown_kind(json!({"steps": [{"id": "a", "kind": "teleport"}]}), "a", "kind")]
    #[case::missing_text(json!({"steps": [{"id": "a", "kind": "message"}]}), "a", "text")]
    #[case::missing_command(json!({"steps": [{"id": "a", "kind": "approval", "tool": "terminal"}]}), "a", "command")]
    #[case::edge_to_nothing(json!({"steps": [{"id": "a", "kind": "sleep", "ms": 1, "after": ["ghost"]}]}), "a", "after")]
    #[case::edge_to_self(json!({"steps": [{"id": "a", "kind": "sleep", "ms": 1, "after": ["a"]}]}), "a", "after")]
    #[case::edge_not_a_string(json!({"steps": [{"id": "a", "kind": "sleep", "ms": 1, "after": [3]}]}), "a", "after")]
    #[case::retries_fraction(json!({"steps": [{"id": "a", "kind": "tool", "tool": "t", "retries": 2.5}]}), "a", "retries")]
    #[case::retries_bool(json!({"steps": [{"id": "a", "kind": "tool", "tool": "t", "retries": true}]}), "a", "retries")]
    #[case::retries_range(json!({"steps": [{"id": "a", "kind": "tool", "tool": "t", "retries": 4}]}), "a", "retries")]
    #[case::timeout_range(json!({"steps": [{"id": "a", "kind": "approval", "tool": "t", "command": "rm", "timeout_ms": 0}]}), "a", "timeout_ms")]
    #[case::sleep_required(json!({"steps": [{"id": "a", "kind": "sleep"}]}), "a", "ms")]
    #[case::bad_condition(json!({"steps": [{"id": "a", "kind": "condition", "expr": "choice is deny"}]}), "a", "expr")]
    #[case::condition_unknown_step(json!({"steps": [{"id": "a", "kind": "condition", "expr": "out.zz.choice == deny"}]}), "a", "expr")]
    #[case::chunks_range(json!({"steps": [{"id": "a", "kind": "message", "text": "x", "chunks": 0}]}), "a", "chunks")]
    #[case::unknown_top_level(json!({"steps": [{"id": "a", "kind": "sleep", "ms": 1}], "stepz": []}), "", "stepz")]
    fn each_rule_reports_its_step_and_field(
        #[case] script: Value,
        #[case] step: &str,
        #[case] field: &str,
    ) {
        let d = validate(&script);
        assert!(
            fields(&d).contains(&(step.to_string(), field.to_string())),
            "{d:?}"
        );
    }

    #[test]
    fn a_cycle_is_reported_with_its_path() {
        let d = validate(&json!({"steps": [
            {"id": "a", "kind": "sleep", "ms": 1, "after": ["c"]},
            {"id": "b", "kind": "sleep", "ms": 1, "after": ["a"]},
            {"id": "c", "kind": "sleep", "ms": 1, "after": ["b"]},
        ]}));
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].msg, "cycle: a -> c -> b -> a");
    }

    #[test]
    fn every_defect_at_once() {
        let d = validate(&json!({"steps": [
            {"id": "a", "kind": "teleport"},
            {"id": "b", "kind": "tool", "retries": 2.5},
            {"kind": "message"},
        ]}));
        assert!(d.len() >= 4, "{d:?}");
    }

    #[test]
    fn the_plan_is_a_stable_topological_order() {
        let plan = build_plan(&json!({"steps": [
            {"id": "done", "kind": "complete", "after": ["m2"]},
            {"id": "m1", "kind": "message", "text": "a"},
            {"id": "m2", "kind": "message", "text": "b", "after": ["m1"]},
            {"id": "side", "kind": "sleep", "ms": 0},
        ]}))
        .expect("valid");
        let ids: Vec<&str> = plan.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["m1", "m2", "done", "side"]);
    }

    #[test]
    fn skip_propagates_and_conditions_read_outputs() {
        let mut st = RunState::default();
        st.outputs.insert("ap".into(), json!({"choice": "deny"}));
        let c = parse_condition("out.ap.choice == deny").expect("parse");
        assert!(st.eval(&c));
        let c = parse_condition("out.ap.choice != deny").expect("parse");
        assert!(!st.eval(&c));
        st.skipped.push("x".into());
        let step = Step {
            id: "y".into(),
            after: vec!["x".into()],
            kind: StepKind::Sleep { ms: 0 },
        };
        assert!(st.parent_skipped(&step));
    }

    #[test]
    fn persisted_state_is_replaced_atomically() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut st = RunState {
            run_id: "run_00ff".into(),
            ..RunState::default()
        };
        for i in 0..20 {
            st.cursor = i;
            persist(dir.path(), &st.run_id, &st).expect("persist");
            let read: RunState = serde_json::from_slice(
                &std::fs::read(dir.path().join("run_00ff.json")).expect("read"),
            )
            .expect("whole file");
            assert_eq!(read.cursor, i);
        }
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .expect("dir")
            .filter_map(|e| e.ok())
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names.len(), 1, "no temp file left: {names:?}");
        assert!(persist(dir.path(), "../escape", &st).is_err());
    }
}
