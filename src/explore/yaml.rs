//! A case as a file a person reads: the top-level fields in block style, each step on one line
//! in flow style (`- {do: execute, occurrence: o1, expect: any}`), defaults left out. Strings
//! that YAML would read as something else are written as JSON strings (valid YAML).

use crate::case::Case;
use serde_json::Value;

/// The case file's text. Reading it back gives the same case (a test).
pub fn case(c: &Case) -> String {
    let mut out = String::new();
    out.push_str(&format!("id: {}\n", scalar(&Value::String(c.id.clone()))));
    out.push_str(&format!(
        "title: {}\n",
        scalar(&Value::String(c.title.clone()))
    ));
    if let Some(d) = &c.description {
        out.push_str(&format!(
            "description: {}\n",
            scalar(&Value::String(d.clone()))
        ));
    }
    out.push_str(&format!(
        "requirements: [{}]\n",
        c.requirements
            .iter()
            .map(|r| scalar(&Value::String(r.clone())))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    if let Ok(v) = serde_json::to_value(&c.config)
        && let Some(v) = pruned(v)
    {
        out.push_str(&format!("config: {}\n", flow(&v)));
    }
    out.push_str("steps:\n");
    for s in &c.steps {
        let v = serde_json::to_value(s)
            .ok()
            .and_then(pruned)
            .unwrap_or(Value::Null);
        out.push_str(&format!("  - {}\n", flow(&v)));
    }
    if let Ok(v) = serde_json::to_value(&c.expect)
        && let Some(v) = pruned(v)
    {
        out.push_str(&format!("expect: {}\n", flow(&v)));
    }
    out
}

/// Drops what a reader would read back as the default anyway: nulls, `false`, empty lists and
/// maps (recursively). `None` when nothing is left.
fn pruned(v: Value) -> Option<Value> {
    match v {
        Value::Null | Value::Bool(false) => None,
        Value::Array(a) if a.is_empty() => None,
        Value::Array(a) => Some(Value::Array(a.into_iter().filter_map(pruned).collect())),
        Value::Object(m) => {
            let m: serde_json::Map<String, Value> = m
                .into_iter()
                .filter_map(|(k, v)| match v {
                    // The one field whose default is `true`.
                    Value::Bool(false) if k == "resolver" => Some((k, Value::Bool(false))),
                    v => pruned(v).map(|v| (k, v)),
                })
                .collect();
            (!m.is_empty()).then_some(Value::Object(m))
        }
        other => Some(other),
    }
}

/// One value in flow style; `do` first, so a step reads as its verb.
fn flow(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort_by_key(|k| (k.as_str() != "do", k.as_str() != "type", k.as_str()));
            let parts: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{}: {}", scalar(&Value::String(k.clone())), flow(&m[k])))
                .collect();
            format!("{{{}}}", parts.join(", "))
        }
        Value::Array(a) => format!("[{}]", a.iter().map(flow).collect::<Vec<_>>().join(", ")),
        other => scalar(other),
    }
}

/// A scalar: a plain word where YAML reads it back as that string, a JSON string otherwise.
fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => {
            let plain = !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
                && s.starts_with(|c: char| c.is_ascii_alphabetic())
                && !matches!(
                    s.to_ascii_lowercase().as_str(),
                    "true"
                        | "false"
                        | "null"
                        | "yes"
                        | "no"
                        | "on"
                        | "off"
                        | "y"
                        | "n"
                        | "nan"
                        | "inf"
                );
            if plain {
                s.clone()
            } else {
                serde_json::to_string(s).unwrap_or_default()
            }
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shipped_case_reads_back_as_itself() {
        for path in [
            "cases/aoc/AOC-CASE-003-crash-after-entry.yaml",
            "cases/aoc/AOC-CASE-011-compensation.yaml",
            "cases/aoc/AOCHECK-KILL-01-kill-during-request.yaml",
            "cases/aoc/AOCHECK-RACE-02-retired-and-successor-race.yaml",
        ] {
            let (loaded, defects) = crate::case::load(std::path::Path::new(path));
            assert!(defects.is_empty(), "{path}: {defects:?}");
            for lc in loaded {
                let text = case(&lc.case);
                let back: Case =
                    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}\n{text}"));
                assert_eq!(back, lc.case, "{path}\n{text}");
            }
        }
    }

    #[test]
    fn words_yaml_would_misread_are_quoted() {
        for (s, want) in [
            ("o1", "o1"),
            ("yes", "\"yes\""),
            ("AOC-REQ-003", "AOC-REQ-003"),
            ("1250", "\"1250\""),
            ("a: b", "\"a: b\""),
            ("", "\"\""),
            ("Schedule 3 of seed 4", "\"Schedule 3 of seed 4\""),
        ] {
            assert_eq!(scalar(&Value::String(s.into())), want);
        }
    }
}
