//! A deploy file's shape, checked against its schema (`docs/schemas/deploy-v1.schema.json`,
//! the one description of the fields) before it is read into its types: every unknown field,
//! missing field, wrong type and value out of range at once, each with its line and column in
//! the YAML. Deserialising straight into the types would stop at the first.
//!
//! The walker reads the schema keywords the deploy schema uses: `type`, `properties`,
//! `required`, `additionalProperties`, `items`, `enum`, `const`, `minimum`, `maximum`,
//! `minItems`, `minLength`, `minProperties` and `oneOf` (read as the union of its branches'
//! fields; which branch applies is `file::validate`'s to say, as are `pattern`s).

use serde_json::Value;

/// The deploy file's schema, as shipped.
const SCHEMA: &str = include_str!("../../docs/schemas/deploy-v1.schema.json");

/// Every shape defect of a deploy file's document (`doc`, read from `text`), each as
/// `line L column C: FIELD: what is wrong`.
pub fn defects(text: &str, doc: &Value) -> Vec<String> {
    let schema: Value = match serde_json::from_str(SCHEMA) {
        Ok(s) => s,
        Err(e) => return vec![format!("aocheck's own deploy schema does not parse: {e}")],
    };
    let mut out = Vec::new();
    walk(&schema, doc, &mut Vec::new(), &mut out);
    let mut placed: Vec<((usize, usize), String)> = out
        .into_iter()
        .map(|(path, what)| {
            let (line, col) = locate(text, &path);
            let field = if path.is_empty() {
                "(the document)".to_string()
            } else {
                path.join(".")
            };
            (
                (line, col),
                format!("line {line} column {col}: {field}: {what}"),
            )
        })
        .collect();
    // In the order of the file.
    placed.sort_by_key(|(at, _)| *at);
    placed.into_iter().map(|(_, s)| s).collect()
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "an integer",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

fn is_type(v: &Value, t: &str) -> bool {
    match t {
        "object" => v.is_object(),
        "array" => v.is_array(),
        // A plain scalar (`true`, `3`) is read as its text where text is expected, as the
        // typed reading does: the shape refuses nothing the loader accepts.
        "string" => v.is_string() || v.is_boolean() || v.is_number(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        _ => true,
    }
}

fn words(t: &str) -> &str {
    match t {
        "object" => "a mapping",
        "array" => "a list",
        "string" => "a string",
        "integer" => "a whole number",
        "boolean" => "true or false",
        other => other,
    }
}

fn walk(s: &Value, v: &Value, path: &mut Vec<String>, out: &mut Vec<(Vec<String>, String)>) {
    let mut say = |what: String| out.push((path.clone(), what));
    if let Some(c) = s.get("const")
        && c != v
    {
        say(format!("must be {c}, not {v}"));
        return;
    }
    if let Some(Value::Array(allowed)) = s.get("enum")
        && !allowed.contains(v)
    {
        let list: Vec<String> = allowed.iter().map(Value::to_string).collect();
        say(format!("{v} is not one of {}", list.join(", ")));
        return;
    }
    if let Some(Value::String(t)) = s.get("type")
        && !is_type(v, t)
    {
        say(format!("must be {}, not {}", words(t), type_name(v)));
        return;
    }
    if let Some(n) = v.as_f64() {
        if let Some(min) = s.get("minimum").and_then(Value::as_f64)
            && n < min
        {
            say(format!("{v} is below the least allowed, {min}"));
        }
        if let Some(max) = s.get("maximum").and_then(Value::as_f64)
            && n > max
        {
            say(format!("{v} is above the most allowed, {max}"));
        }
    }
    if let (Some(min), Some(t)) = (s.get("minLength").and_then(Value::as_u64), v.as_str())
        && (t.chars().count() as u64) < min
    {
        say(format!("give at least {min} character(s)"));
    }
    if let Value::Array(items) = v {
        if let Some(min) = s.get("minItems").and_then(Value::as_u64)
            && (items.len() as u64) < min
        {
            say(format!("give at least {min} item(s)"));
        }
        if let Some(each) = s.get("items") {
            for (i, x) in items.iter().enumerate() {
                path.push(format!("[{i}]"));
                walk(each, x, path, out);
                path.pop();
            }
        }
        return;
    }
    let Value::Object(fields) = v else {
        return;
    };
    if let Some(Value::Array(branches)) = s.get("oneOf") {
        // The union of the branches' fields; which branch applies is file::validate's to say.
        let mut union = serde_json::Map::new();
        for b in branches {
            if let Some(Value::Object(p)) = b.get("properties") {
                union.extend(p.clone());
            }
        }
        let merged = serde_json::json!({"type": "object", "additionalProperties": false, "properties": union});
        walk(&merged, v, path, out);
        return;
    }
    if let Some(min) = s.get("minProperties").and_then(Value::as_u64)
        && (fields.len() as u64) < min
    {
        say(format!("give at least {min} entr(ies)"));
    }
    let props = s.get("properties").and_then(Value::as_object);
    if let Some(Value::Array(req)) = s.get("required") {
        for r in req.iter().filter_map(Value::as_str) {
            if !fields.contains_key(r) {
                say(format!("the field `{r}` is missing"));
            }
        }
    }
    for (k, x) in fields {
        path.push(k.clone());
        match props.and_then(|p| p.get(k)) {
            Some(sub) => walk(sub, x, path, out),
            None => match s.get("additionalProperties") {
                Some(Value::Bool(false)) => {
                    let known: Vec<&str> = props
                        .map(|p| p.keys().map(String::as_str).collect())
                        .unwrap_or_default();
                    out.push((
                        path.clone(),
                        format!(
                            "unknown field; the fields here are {}",
                            if known.is_empty() {
                                "none".to_string()
                            } else {
                                known.join(", ")
                            }
                        ),
                    ));
                }
                Some(sub @ Value::Object(_)) => walk(sub, x, path, out),
                _ => {}
            },
        }
        path.pop();
    }
}

/// Where a field's key is written in the YAML (1-based line and column): each name of the path
/// found in turn, after the line and column of the one before (`[i]` steps stay where they
/// are); the innermost name found, or line 1 column 1.
fn locate(text: &str, path: &[String]) -> (usize, usize) {
    let lines: Vec<&str> = text.lines().collect();
    let (mut line, mut col) = (0usize, 0usize);
    let mut found = (1, 1);
    for seg in path.iter().filter(|s| !s.starts_with('[')) {
        let mut hit = None;
        'search: for (i, l) in lines.iter().enumerate().skip(line) {
            let from = if i == line { col } else { 0 };
            let mut start = from;
            while let Some(j) = l.get(start..).and_then(|r| r.find(seg.as_str())) {
                let at = start + j;
                let before = l[..at].trim_end_matches(['"', '\'']);
                let after = l[at + seg.len()..].trim_start_matches(['"', '\'']);
                let starts = before
                    .chars()
                    .last()
                    .is_none_or(|c| c.is_whitespace() || c == '{' || c == ',' || c == '-');
                if starts && after.trim_start().starts_with(':') && !l[..at].contains('#') {
                    hit = Some((i, at));
                    break 'search;
                }
                start = at + seg.len();
            }
        }
        match hit {
            Some((i, at)) => {
                (line, col) = (i, at + seg.len());
                found = (i + 1, at + 1);
            }
            None => break,
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(text: &str) -> Vec<String> {
        let doc: Value = serde_saphyr::from_str(text).expect("yaml");
        defects(text, &doc)
    }

    #[test]
    fn every_defect_is_named_at_once_with_its_line_and_column() {
        let text = "version: 2\nname: x\nservce: {}\ndrive:\n  submit: {path: [3], metod: GET}\n  status: {path: /x}\n";
        let d = of(text);
        let want = [
            "line 1 column 1: version: must be 1, not 2",
            "the field `service` is missing",
            "line 3 column 1: servce: unknown field",
            "line 5 column 12: drive.submit.path: must be a string, not a list",
            "line 5 column 23: drive.submit.metod: unknown field",
            "drive.status: the field `outcome` is missing",
            "drive.status: the field `outcomes` is missing",
        ];
        for w in want {
            assert!(d.iter().any(|x| x.contains(w)), "{w:?} not in {d:#?}");
        }
        assert_eq!(d.len(), want.len(), "{d:#?}");
    }

    #[test]
    fn a_sound_file_has_no_shape_defect() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/examples/shop-keyed/aocheck-deploy.yaml"
        ))
        .expect("example");
        assert_eq!(of(&text), Vec::<String>::new());
    }

    #[test]
    fn a_list_item_and_a_range_are_judged_inside() {
        let d = of(
            "version: 1\nname: x\nservice:\n  command: [a, [3]]\n  instances: 0\n  ready: {path: /h}\ndrive:\n  submit: {path: /o, accept: []}\n  status: {path: \"/o/{occurrence}\", outcome: $.s, outcomes: {p: paid}}\n",
        );
        for w in [
            "service.command.[1]: must be a string",
            "service.instances: 0 is below the least allowed, 1",
            "drive.submit.accept: give at least 1 item(s)",
            "drive.status.outcomes.p: \"paid\" is not one of",
        ] {
            assert!(d.iter().any(|x| x.contains(w)), "{w:?} not in {d:#?}");
        }
    }
}
