//! JSON the way the real Hermes server writes it: Python's `json.dumps` defaults, i.e. `", "` and
//! `": "` separators, keys in insertion order, and `ensure_ascii` (every character outside
//! U+0020–U+007E escaped as `\uXXXX` in lower-case hex, characters beyond the BMP as surrogate
//! pairs). Floats print like Python's `repr` (`1.0`, not `1`).

use std::fmt::Write as _;

/// An ordered JSON value.
#[derive(Clone, Debug, PartialEq)]
pub enum Py {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    List(Vec<Py>),
    Obj(Vec<(String, Py)>),
}

impl Py {
    /// An object from `(key, value)` pairs, in order.
    pub fn obj<K: Into<String>>(pairs: Vec<(K, Py)>) -> Py {
        Py::Obj(pairs.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }
    pub fn str(s: impl Into<String>) -> Py {
        Py::Str(s.into())
    }
    /// Converts a serde_json value (object keys keep serde_json's order).
    pub fn from_json(v: &serde_json::Value) -> Py {
        match v {
            serde_json::Value::Null => Py::Null,
            serde_json::Value::Bool(b) => Py::Bool(*b),
            serde_json::Value::Number(n) => match n.as_i64() {
                Some(i) => Py::Int(i),
                None => Py::Float(n.as_f64().unwrap_or(0.0)),
            },
            serde_json::Value::String(s) => Py::Str(s.clone()),
            serde_json::Value::Array(a) => Py::List(a.iter().map(Py::from_json).collect()),
            serde_json::Value::Object(o) => Py::Obj(
                o.iter()
                    .map(|(k, v)| (k.clone(), Py::from_json(v)))
                    .collect(),
            ),
        }
    }
    /// Appends or replaces a key.
    pub fn set(&mut self, key: &str, value: Py) {
        if let Py::Obj(pairs) = self {
            match pairs.iter_mut().find(|(k, _)| k == key) {
                Some(slot) => slot.1 = value,
                None => pairs.push((key.to_string(), value)),
            }
        }
    }
    pub fn get(&self, key: &str) -> Option<&Py> {
        match self {
            Py::Obj(pairs) => pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// `json.dumps(value)`.
    pub fn dumps(&self) -> String {
        let mut out = String::with_capacity(128);
        self.write(&mut out);
        out
    }

    fn write(&self, out: &mut String) {
        match self {
            Py::Null => out.push_str("null"),
            Py::Bool(true) => out.push_str("true"),
            Py::Bool(false) => out.push_str("false"),
            Py::Int(i) => {
                let _ = write!(out, "{i}");
            }
            Py::Float(f) => out.push_str(&py_float(*f)),
            Py::Str(s) => write_str(s, out),
            Py::List(items) => {
                out.push('[');
                for (i, x) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    x.write(out);
                }
                out.push(']');
            }
            Py::Obj(pairs) => {
                out.push('{');
                for (i, (k, v)) in pairs.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    write_str(k, out);
                    out.push_str(": ");
                    v.write(out);
                }
                out.push('}');
            }
        }
    }
}

/// Python's `repr(float)` for finite values.
pub fn py_float(f: f64) -> String {
    if !f.is_finite() {
        return if f.is_nan() {
            "NaN".into()
        } else if f > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        };
    }
    let s = format!("{f}");
    if s.contains('.') || s.contains('e') {
        s
    } else {
        format!("{s}.0")
    }
}

fn write_str(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            other => {
                let mut buf = [0u16; 2];
                for unit in other.encode_utf16(&mut buf) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_python_json_dumps_defaults() {
        let v = Py::obj(vec![
            ("event", Py::str("message.delta")),
            ("delta", Py::str("héllo \"w\"\n😀\u{7f}")),
            ("timestamp", Py::Float(1753012345.5)),
            ("n", Py::Float(3.0)),
            ("list", Py::List(vec![Py::Int(1), Py::Null, Py::Bool(true)])),
        ]);
        assert_eq!(
            v.dumps(),
            r#"{"event": "message.delta", "delta": "h\u00e9llo \"w\"\n\ud83d\ude00\u007f", "timestamp": 1753012345.5, "n": 3.0, "list": [1, null, true]}"#
        );
    }
}
