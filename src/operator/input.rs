//! The AIP Action and the operator input schema: `objective` xor `resume`, no extra keys. The
//! Action id, idempotency key, approval, identity, deadline and delegation chain live on the
//! Action, never in the input; the client cannot choose the endpoint, credential, instructions or
//! model.

use super::error::{ConnectorError, ErrorCode};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The parts of an AIP Action the connector reads.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Action {
    /// `act_…`
    pub id: String,
    pub idempotency_key: String,
    pub capability: String,
    pub input: Value,
    /// Milliseconds from now the caller allows, if any.
    #[serde(default)]
    pub deadline_ms: Option<u64>,
    #[serde(default)]
    pub identity: Option<Value>,
    #[serde(default)]
    pub approval: Option<Value>,
    #[serde(default)]
    pub delegation: Option<Value>,
}

/// A validated operator input.
#[derive(Clone, Debug, PartialEq)]
pub enum OperatorInput {
    Objective {
        objective: String,
        context: Value,
        candidate_capabilities: Vec<String>,
        constraints: Map<String, Value>,
    },
    Resume {
        source_action_id: String,
        choice: String,
        resolve_all: bool,
    },
}

fn bad(msg: impl Into<String>) -> ConnectorError {
    ConnectorError::new(ErrorCode::ConfigurationOrInput, msg)
}

impl OperatorInput {
    /// Validates the input schema (every rule of the published `oneOf`).
    pub fn parse(input: &Value) -> Result<OperatorInput, ConnectorError> {
        let obj = input
            .as_object()
            .ok_or_else(|| bad("the operator input must be an object"))?;
        match (obj.get("objective"), obj.get("resume")) {
            (Some(_), Some(_)) => Err(bad("give either `objective` or `resume`, not both")),
            (None, None) => Err(bad("give `objective` or `resume`")),
            (Some(o), None) => {
                for k in obj.keys() {
                    if ![
                        "objective",
                        "context",
                        "candidate_capabilities",
                        "constraints",
                    ]
                    .contains(&k.as_str())
                    {
                        return Err(bad(format!(
                            "unknown field `{k}`: the Action id, idempotency key, approval, identity, deadline and delegation chain belong on the Action; endpoint, credential, instructions and model belong to the deployment"
                        )));
                    }
                }
                let objective = o
                    .as_str()
                    .filter(|s| !s.trim().is_empty())
                    .ok_or_else(|| bad("`objective` must be a non-empty string"))?
                    .to_string();
                let caps = match obj.get("candidate_capabilities") {
                    None => Vec::new(),
                    Some(Value::Array(a)) => {
                        if a.len() > 256 {
                            return Err(bad(format!(
                                "`candidate_capabilities` holds at most 256 entries, got {}",
                                a.len()
                            )));
                        }
                        a.iter()
                            .map(|c| c.as_str().filter(|s| !s.is_empty()).map(str::to_string).ok_or_else(|| bad("`candidate_capabilities` entries must be non-empty strings")))
                            .collect::<Result<_, _>>()?
                    }
                    Some(_) => {
                        return Err(bad("`candidate_capabilities` must be a list of strings"));
                    }
                };
                let constraints = match obj.get("constraints") {
                    None => Map::new(),
                    Some(Value::Object(m)) => m.clone(),
                    Some(_) => return Err(bad("`constraints` must be an object")),
                };
                Ok(OperatorInput::Objective {
                    objective,
                    context: obj.get("context").cloned().unwrap_or(Value::Null),
                    candidate_capabilities: caps,
                    constraints,
                })
            }
            (None, Some(r)) => {
                if obj.len() != 1 {
                    return Err(bad("a resume input holds only `resume`"));
                }
                let r = r
                    .as_object()
                    .ok_or_else(|| bad("`resume` must be an object"))?;
                for k in r.keys() {
                    if !["source_action_id", "choice", "resolve_all"].contains(&k.as_str()) {
                        return Err(bad(format!("unknown field `resume.{k}`")));
                    }
                }
                let source = r
                    .get("source_action_id")
                    .and_then(Value::as_str)
                    .filter(|s| s.starts_with("act_"))
                    .ok_or_else(|| bad("`resume.source_action_id` must be an Action id (act_…)"))?;
                let choice = r
                    .get("choice")
                    .and_then(Value::as_str)
                    .filter(|c| ["once", "session", "always", "deny"].contains(c))
                    .ok_or_else(|| {
                        bad("`resume.choice` must be exactly once, session, always or deny")
                    })?;
                let resolve_all = match r.get("resolve_all") {
                    None => false,
                    Some(Value::Bool(b)) => *b,
                    Some(_) => return Err(bad("`resume.resolve_all` must be a boolean")),
                };
                Ok(OperatorInput::Resume {
                    source_action_id: source.to_string(),
                    choice: choice.to_string(),
                    resolve_all,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::json;

    #[rstest]
    #[case::both(json!({"objective": "x", "resume": {}}))]
    #[case::neither(json!({}))]
    #[case::empty_objective(json!({"objective": " "}))]
    #[case::action_id_in_input(json!({"objective": "x", "action_id": "act_1"}))]
    #[case::model_in_input(json!({"objective": "x", "model": "gpt"}))]
    #[case::too_many_caps(json!({"objective": "x", "candidate_capabilities": (0..257).map(|i| format!("cap:{i}")).collect::<Vec<_>>()}))]
    #[case::empty_cap(json!({"objective": "x", "candidate_capabilities": [""]}))]
    #[case::constraints_not_object(json!({"objective": "x", "constraints": []}))]
    #[case::bad_choice(json!({"resume": {"source_action_id": "act_1", "choice": "yes"}}))]
    #[case::bad_source(json!({"resume": {"source_action_id": "run_1", "choice": "once"}}))]
    #[case::resume_extra(json!({"resume": {"source_action_id": "act_1", "choice": "once", "x": 1}}))]
    fn invalid_inputs_are_refused(#[case] v: Value) {
        assert_eq!(
            OperatorInput::parse(&v).expect_err("invalid").code,
            ErrorCode::ConfigurationOrInput
        );
    }

    #[test]
    fn valid_inputs_parse() {
        assert!(matches!(
            OperatorInput::parse(
                &json!({"objective": "x", "context": {"a": 1}, "candidate_capabilities": ["cap:a"]})
            ),
            Ok(OperatorInput::Objective { .. })
        ));
        assert!(matches!(
            OperatorInput::parse(
                &json!({"resume": {"source_action_id": "act_1", "choice": "deny", "resolve_all": true}})
            ),
            Ok(OperatorInput::Resume {
                resolve_all: true,
                ..
            })
        ));
    }
}
