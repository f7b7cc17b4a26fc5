//! Driving and observing the service through its own business API: request templates
//! rendered for an occurrence, and the outcome read from a response by a JSON path and the
//! deploy file's mapping. Every malformed answer is refused with the template's name.

use super::file::{JsonPath, Outcome, Request, Status};
use serde_json::Value;
use std::collections::BTreeMap;

/// The values a template's placeholders take for one occurrence.
#[derive(Clone, Debug, Default)]
pub struct Vars {
    pub occurrence: String,
    pub amount: i64,
    pub currency: String,
    /// A connector's objective for the action (empty for a payment).
    pub objective: String,
    /// A connector's resume command id and its choice (empty elsewhere).
    pub command: String,
    pub choice: String,
}

impl Vars {
    fn get(&self, name: &str) -> Option<String> {
        match name {
            "occurrence" => Some(self.occurrence.clone()),
            "amount" | "amount:int" => Some(self.amount.to_string()),
            "currency" => Some(self.currency.clone()),
            "objective" => Some(self.objective.clone()),
            "command" => Some(self.command.clone()),
            "choice" => Some(self.choice.clone()),
            _ => None,
        }
    }
}

/// `s` with each `{name}` replaced (unknown names are left as written; the file check refuses
/// them before any run).
pub fn fill(s: &str, vars: &Vars, encode: bool) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('{') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        match after.find('}') {
            Some(j) => {
                let name = &after[..j];
                match vars.get(name) {
                    Some(v) if encode => out.push_str(&path_encode(&v)),
                    Some(v) => out.push_str(&v),
                    None => {
                        out.push('{');
                        out.push_str(name);
                        out.push('}');
                    }
                }
                rest = &after[j + 1..];
            }
            None => {
                out.push_str(&rest[i..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

fn path_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            b => format!("%{b:02X}"),
        })
        .collect()
}

/// A body template rendered: strings filled in; a string that is exactly `"{amount:int}"`
/// becomes the number.
pub fn render_body(v: &Value, vars: &Vars) -> Value {
    match v {
        Value::String(s) if s == "{amount:int}" => Value::from(vars.amount),
        Value::String(s) => Value::String(fill(s, vars, false)),
        Value::Array(a) => Value::Array(a.iter().map(|x| render_body(x, vars)).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, x)| (fill(k, vars, false), render_body(x, vars)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Why the driver could not use an answer; names the template.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DriveError {
    #[error("drive.{template}: {method} {url} did not answer: {why}")]
    Unreachable {
        template: &'static str,
        method: String,
        url: String,
        why: String,
    },
    #[error("drive.{template}: {method} {url} answered {status}, not one of {accept:?}")]
    Status {
        template: &'static str,
        method: String,
        url: String,
        status: u16,
        accept: Vec<u16>,
    },
    #[error("drive.{template}: the answer is not JSON ({why}): {excerpt:?}")]
    NotJson {
        template: &'static str,
        why: String,
        excerpt: String,
    },
    #[error("drive.{template}: {path} is not in the answer: {excerpt}")]
    NoOutcome {
        template: &'static str,
        path: String,
        excerpt: String,
    },
    #[error(
        "drive.{template}: {path} is {found}, a label the deploy file does not map; add it under drive.status.outcomes (known: {known:?})"
    )]
    Unmapped {
        template: &'static str,
        path: String,
        found: String,
        known: Vec<String>,
    },
}

/// What the status route said of an occurrence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observed {
    /// The service's own label, as it wrote it.
    pub label: String,
    pub outcome: Outcome,
}

/// What a service reported of an occurrence, from the labels its status route showed in
/// order (each with the provider's effects for it then): its last label, and every final one.
pub fn reported<'a>(
    occurrence: &str,
    seen: impl IntoIterator<Item = (&'a Observed, usize)>,
    ambiguity: crate::check::deploy::Ambiguity,
    amount: i64,
    currency: &str,
) -> crate::check::deploy::Reported {
    let seen: Vec<(&Observed, usize)> = seen.into_iter().collect();
    let last = seen.last().map(|(o, _)| *o);
    crate::check::deploy::Reported {
        occurrence: occurrence.to_string(),
        outcome: last
            .filter(|o| o.outcome.is_final())
            .map(|o| o.outcome.label()),
        label: last.map_or("(none)".into(), |o| o.label.clone()),
        finals: seen
            .iter()
            .filter(|(o, _)| o.outcome.is_final())
            .map(|(o, effects)| crate::check::deploy::Shown {
                label: o.label.clone(),
                outcome: o.outcome.label(),
                effects_then: *effects,
            })
            .collect(),
        ambiguity,
        amount,
        currency: currency.to_string(),
    }
}

fn excerpt(bytes: &[u8]) -> String {
    crate::report::model::one_line(&String::from_utf8_lossy(bytes), 200)
}

/// Sends the submit template for `vars` to the instance at `base`.
pub async fn submit(
    client: &reqwest::Client,
    base: &str,
    t: &Request,
    vars: &Vars,
) -> Result<u16, DriveError> {
    request(client, base, "submit", t, vars).await
}

/// Sends one of the deploy file's request templates (`name` is its key under `drive`, for the
/// error): the HTTP status, when it is one of the template's `accept`.
pub async fn request(
    client: &reqwest::Client,
    base: &str,
    name: &'static str,
    t: &Request,
    vars: &Vars,
) -> Result<u16, DriveError> {
    let url = format!("{base}{}", fill(&t.path, vars, true));
    let method = reqwest::Method::from_bytes(t.method.as_bytes()).unwrap_or(reqwest::Method::POST);
    let mut rb = client.request(method, &url);
    if let Some(b) = &t.body {
        rb = rb
            .header("content-type", "application/json")
            .body(render_body(b, vars).to_string());
    }
    let unreachable = |why: String| DriveError::Unreachable {
        template: name,
        method: t.method.clone(),
        url: url.clone(),
        why,
    };
    let r = rb.send().await.map_err(|e| unreachable(e.to_string()))?;
    let status = r.status().as_u16();
    // Read the answer whole, so that the connection is reused cleanly.
    let _ = r.bytes().await;
    if !t.accept.contains(&status) {
        return Err(DriveError::Status {
            template: name,
            method: t.method.clone(),
            url,
            status,
            accept: t.accept.clone(),
        });
    }
    Ok(status)
}

/// Reads the status template's answer for `vars` and maps its label.
pub async fn status(
    client: &reqwest::Client,
    base: &str,
    t: &Status,
    vars: &Vars,
) -> Result<Observed, DriveError> {
    let url = format!("{base}{}", fill(&t.path, vars, true));
    let method = reqwest::Method::from_bytes(t.method.as_bytes()).unwrap_or(reqwest::Method::GET);
    let r = client
        .request(method, &url)
        .send()
        .await
        .map_err(|e| DriveError::Unreachable {
            template: "status",
            method: t.method.clone(),
            url: url.clone(),
            why: e.to_string(),
        })?;
    let code = r.status().as_u16();
    let bytes = r.bytes().await.map_err(|e| DriveError::Unreachable {
        template: "status",
        method: t.method.clone(),
        url: url.clone(),
        why: e.to_string(),
    })?;
    if !(200..300).contains(&code) {
        return Err(DriveError::Status {
            template: "status",
            method: t.method.clone(),
            url,
            status: code,
            accept: vec![200],
        });
    }
    read_outcome(&bytes, &t.outcome, &t.outcomes)
}

/// The outcome in a status answer's bytes.
pub fn read_outcome(
    bytes: &[u8],
    path: &str,
    outcomes: &BTreeMap<String, Outcome>,
) -> Result<Observed, DriveError> {
    let v: Value = serde_json::from_slice(bytes).map_err(|e| DriveError::NotJson {
        template: "status",
        why: e.to_string(),
        excerpt: excerpt(bytes),
    })?;
    let jp = JsonPath::parse(path).map_err(|e| DriveError::NoOutcome {
        template: "status",
        path: path.to_string(),
        excerpt: e,
    })?;
    let found = jp.find(&v).ok_or_else(|| DriveError::NoOutcome {
        template: "status",
        path: path.to_string(),
        excerpt: excerpt(bytes),
    })?;
    let label = match found {
        Value::String(s) => s.clone(),
        Value::Bool(_) | Value::Number(_) => found.to_string(),
        other => {
            return Err(DriveError::Unmapped {
                template: "status",
                path: path.to_string(),
                found: crate::report::model::one_line(&other.to_string(), 80),
                known: outcomes.keys().cloned().collect(),
            });
        }
    };
    match outcomes.get(&label) {
        Some(o) => Ok(Observed { label, outcome: *o }),
        None => Err(DriveError::Unmapped {
            template: "status",
            path: path.to_string(),
            found: format!("{:?}", crate::report::model::one_line(&label, 80)),
            known: outcomes.keys().cloned().collect(),
        }),
    }
}

/// A request of the deploy file's templates on a task of its own, and its status when it ends.
pub type Sent = tokio::task::JoinHandle<Result<u16, DriveError>>;

/// Sends the deploy file's `drive.<name>` template `t` for `vars` to `base` on a task of its
/// own (a fault may hold it for long: the case goes on meanwhile).
pub fn send(
    client: &reqwest::Client,
    base: &str,
    name: &'static str,
    t: &Request,
    vars: &Vars,
) -> Sent {
    let (client, base, t, vars) = (client.clone(), base.to_string(), t.clone(), vars.clone());
    tokio::spawn(async move { request(&client, &base, name, &t, &vars).await })
}

/// A sent request's HTTP status, if it got one (inside `accept` or not), and its words.
pub async fn answered(s: Sent, wait: std::time::Duration) -> (Option<u16>, String) {
    match tokio::time::timeout(wait, s).await {
        Err(_) => (None, format!("no answer within {} s", wait.as_secs())),
        Ok(Err(e)) => (None, format!("lost ({e})")),
        Ok(Ok(Ok(code))) => (Some(code), code.to_string()),
        Ok(Ok(Err(DriveError::Status { status, .. }))) => (Some(status), status.to_string()),
        Ok(Ok(Err(e))) => (None, e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::json;

    fn vars() -> Vars {
        Vars {
            occurrence: "o/1 x".into(),
            amount: 2000,
            currency: "usd".into(),
            ..Vars::default()
        }
    }

    #[test]
    fn a_body_is_rendered_with_numbers_where_asked() {
        let t = json!({"order_id": "{occurrence}", "amount": "{amount:int}", "note": "{amount} {currency}", "n": 3});
        assert_eq!(
            render_body(&t, &vars()),
            json!({"order_id": "o/1 x", "amount": 2000, "note": "2000 usd", "n": 3})
        );
    }

    #[test]
    fn a_path_placeholder_is_percent_encoded() {
        assert_eq!(
            fill("/orders/{occurrence}", &vars(), true),
            "/orders/o%2F1%20x"
        );
        assert_eq!(fill("/a/{nope}/{", &vars(), true), "/a/{nope}/{");
    }

    #[rstest]
    #[case("$.state", json!({"state": "paid"}), Some(json!("paid")))]
    #[case("$.order['state']", json!({"order": {"state": "x"}}), Some(json!("x")))]
    #[case("$.items[1].s", json!({"items": [{"s": 1}, {"s": 2}]}), Some(json!(2)))]
    #[case("$", json!("top"), Some(json!("top")))]
    #[case("$.missing", json!({"state": "paid"}), None)]
    fn a_json_path_finds_its_value(
        #[case] path: &str,
        #[case] doc: Value,
        #[case] want: Option<Value>,
    ) {
        let jp = JsonPath::parse(path).expect("parses");
        assert_eq!(jp.find(&doc).cloned(), want);
    }

    #[rstest]
    #[case("state")]
    #[case("$.")]
    #[case("$[x]")]
    #[case("$['a'")]
    fn a_bad_json_path_is_refused(#[case] path: &str) {
        assert!(JsonPath::parse(path).is_err(), "{path}");
    }
}
