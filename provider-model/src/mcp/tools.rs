//! fake-mcp's tools, as data: consequential tools that make an effect (send a message, create a
//! payment, write a record), each with declared arguments and, optionally, the argument or
//! `_meta` key that carries an idempotency key; and read tools that look up what was done, by
//! key or by listing.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// What a tool does.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum ToolKind {
    /// Makes one effect of this kind per call (`message`, `payment`, `record` …).
    Write { effect: String },
    /// The effect made under an idempotency key (`key` argument), or none.
    Lookup,
    /// Every effect made so far (of one tool's, with a `tool` argument).
    List,
}

/// One declared argument.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Arg {
    pub name: String,
    /// JSON Schema type: `string`, `integer`, `number`, `boolean`, `object`.
    #[serde(rename = "type")]
    pub ty: String,
    #[serde(default)]
    pub required: bool,
}

/// One tool fake-mcp serves.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    #[serde(flatten)]
    pub kind: ToolKind,
    #[serde(default)]
    pub args: Vec<Arg>,
    /// Where a write carries its idempotency key: `args.<name>` or `_meta.<key>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

impl ToolSpec {
    /// The tool's input schema (JSON Schema, an object).
    pub fn input_schema(&self) -> Value {
        let props: serde_json::Map<String, Value> = self
            .args
            .iter()
            .map(|a| (a.name.clone(), json!({"type": a.ty})))
            .collect();
        let required: Vec<&str> = self
            .args
            .iter()
            .filter(|a| a.required)
            .map(|a| a.name.as_str())
            .collect();
        json!({"type": "object", "properties": props, "required": required})
    }

    /// Whether it makes effects.
    pub fn writes(&self) -> bool {
        matches!(self.kind, ToolKind::Write { .. })
    }

    /// The idempotency key a call carries (`arguments`, `_meta`), where the tool declares one.
    pub fn key_of(&self, arguments: &Value, meta: &Value) -> Option<String> {
        let k = self.key.as_deref()?;
        let v = match k.split_once('.') {
            Some(("args", name)) => arguments.get(name),
            Some(("_meta", name)) => meta.get(name),
            _ => None,
        };
        v.and_then(Value::as_str).map(str::to_string)
    }
}

fn arg(name: &str, ty: &str, required: bool) -> Arg {
    Arg {
        name: name.into(),
        ty: ty.into(),
        required,
    }
}

/// The tools fake-mcp serves unless configured otherwise: three writes (one keyed by an
/// argument, one by `_meta`, one not keyed) and two reads.
pub fn default_tools() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: "send_message".into(),
            description: "Send a message to a recipient (an effect the recipient sees).".into(),
            kind: ToolKind::Write {
                effect: "message".into(),
            },
            args: vec![
                arg("to", "string", true),
                arg("text", "string", true),
                arg("idempotency_key", "string", false),
            ],
            key: Some("args.idempotency_key".into()),
        },
        ToolSpec {
            name: "create_payment".into(),
            description: "Create a payment (money moves).".into(),
            kind: ToolKind::Write {
                effect: "payment".into(),
            },
            args: vec![
                arg("amount", "integer", true),
                arg("currency", "string", true),
            ],
            key: Some("_meta.idempotency_key".into()),
        },
        ToolSpec {
            name: "write_record".into(),
            description: "Append a record (no idempotency key).".into(),
            kind: ToolKind::Write {
                effect: "record".into(),
            },
            args: vec![arg("key", "string", true), arg("value", "string", true)],
            key: None,
        },
        ToolSpec {
            name: "lookup".into(),
            description: "The effect made under an idempotency key, or none.".into(),
            kind: ToolKind::Lookup,
            args: vec![arg("key", "string", true)],
            key: None,
        },
        ToolSpec {
            name: "list_effects".into(),
            description: "Every effect made so far (of one tool's, given `tool`).".into(),
            kind: ToolKind::List,
            args: vec![arg("tool", "string", false)],
            key: None,
        },
    ]
}

/// Every defect of a tool set at once, naming the tool and field.
pub fn validate(tools: &[ToolSpec]) -> Vec<String> {
    let mut out = Vec::new();
    let mut names = std::collections::BTreeSet::new();
    for (i, t) in tools.iter().enumerate() {
        let at = format!("tools[{i}]");
        let ok_name = !t.name.is_empty()
            && t.name.len() <= 64
            && t.name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !ok_name {
            out.push(format!(
                "{at}.name: {:?} is not a tool name (1 to 64 of A-Z a-z 0-9 _ -)",
                t.name
            ));
        } else if !names.insert(t.name.clone()) {
            out.push(format!("{at}.name: {:?} is named twice", t.name));
        }
        for (j, a) in t.args.iter().enumerate() {
            if !["string", "integer", "number", "boolean", "object"].contains(&a.ty.as_str()) {
                out.push(format!(
                    "{at}.args[{j}].type: {:?} is none of string, integer, number, boolean, object",
                    a.ty
                ));
            }
        }
        if let Some(k) = &t.key {
            let fine = match k.split_once('.') {
                Some(("args", n)) => t.args.iter().any(|a| a.name == n && a.ty == "string"),
                Some(("_meta", n)) => !n.is_empty(),
                _ => false,
            };
            if !fine || !t.writes() {
                out.push(format!(
                    "{at}.key: {k:?} must be `args.<a string argument>` or `_meta.<name>`, on a write tool"
                ));
            }
        }
    }
    if tools.is_empty() {
        out.push("tools: serve at least one tool".into());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_tools_are_valid_and_each_refused_field_is_named() {
        assert!(validate(&default_tools()).is_empty());
        let mut t = default_tools();
        t[1].name = t[0].name.clone();
        t[2].key = Some("args.nothing".into());
        t[3].args[0].ty = "date".into();
        let d = validate(&t);
        assert!(d.iter().any(|x| x.starts_with("tools[1].name")), "{d:?}");
        assert!(d.iter().any(|x| x.starts_with("tools[2].key")), "{d:?}");
        assert!(
            d.iter().any(|x| x.starts_with("tools[3].args[0].type")),
            "{d:?}"
        );
        assert_eq!(validate(&[]), ["tools: serve at least one tool"]);
    }

    #[test]
    fn a_key_is_read_from_its_argument_or_meta() {
        let t = default_tools();
        let args = json!({"to": "a", "text": "b", "idempotency_key": "k1"});
        assert_eq!(t[0].key_of(&args, &json!({})), Some("k1".into()));
        assert_eq!(
            t[1].key_of(&json!({}), &json!({"idempotency_key": "k2"})),
            Some("k2".into())
        );
        assert_eq!(t[2].key_of(&args, &json!({})), None);
    }
}
