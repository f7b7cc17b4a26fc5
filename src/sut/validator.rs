//! Seed 002's validator of another implementation, asked through `aocheck-sut/2`'s
//! `workflow_validate` (issue 41): one process, given a workflow home of its own and no
//! provider, is asked about every graph of a conformance set; `crate::workflow::conformance`
//! judges the answers (`aocheck workflow-validator`).

use super::message::{self, Init, Op, Request};
use super::processes::{ProcessSpec, Spawner, case_folder};
use crate::workflow::conformance::{self, RowResult, Set};
use crate::workflow::design::Defect;
use serde_json::Value;
use std::collections::BTreeMap;

/// Why the validator could not be judged.
#[derive(Debug, PartialEq, Eq)]
pub enum Unjudged {
    /// The implementation does not list `workflow_validate`.
    Unsupported(String),
    /// aocheck could not talk to it, or an answer is not the protocol's.
    Harness(String),
}

/// The set judged against the implementation `spec` runs (`None`: the reference in process,
/// held to every `{node, field}`).
pub async fn judge_set(spec: Option<&ProcessSpec>, set: &Set) -> Result<Vec<RowResult>, Unjudged> {
    let Some(spec) = spec else {
        return Ok(conformance::judge(
            set,
            &mut |g| crate::workflow::design::validate(g),
            true,
        ));
    };
    let answers = ask(spec, &set.graphs()).await?;
    Ok(conformance::judge(
        set,
        // Every graph was asked about; one without an answer is never taken as valid.
        &mut |g| {
            answers.get(&g.to_string()).cloned().unwrap_or_else(|| {
                vec![Defect {
                    node: "?".into(),
                    field: "?".into(),
                    msg: "aocheck has no answer for this graph".into(),
                }]
            })
        },
        false,
    ))
}

/// Asks one process about every graph: the defects it reports, by the graph's JSON text.
async fn ask(
    spec: &ProcessSpec,
    graphs: &[Value],
) -> Result<BTreeMap<String, Vec<Defect>>, Unjudged> {
    let h = |e: String| Unjudged::Harness(e);
    let dir = case_folder(spec, "workflow-validator", "").map_err(|e| h(e.to_string()))?;
    let home = case_folder(spec, "workflow-validator", "home").map_err(|e| h(e.to_string()))?;
    let init = Init::for_workflow(&dir, &home, "workflow-validator", 0);
    let clock =
        crate::clock::ManualClock::at(crate::clock::Clock::now(&crate::clock::SystemClock).0);
    let spawner = Spawner::new(spec.clone(), dir, init, clock, None);
    let (p, hello, label) = spawner
        .spawn("validator", None)
        .await
        .map_err(|e| h(e.to_string()))?;
    let out = async {
        if !hello.supports(Op::WorkflowValidate) {
            return Err(Unjudged::Unsupported(format!(
                "the implementation does not list `{}` (docs/sut-protocol.md, Hermes Workflow runner)",
                Op::WorkflowValidate
            )));
        }
        let mut out = BTreeMap::new();
        for g in graphs {
            let req = Request::WorkflowValidate { graph: g.clone() };
            let v = match p.call(Op::WorkflowValidate.name(), req.fields()).await {
                Ok(Ok(v)) => v,
                Ok(Err(f)) => {
                    return Err(h(format!(
                        "workflow_validate failed ({}) for {g}: {}",
                        f.kind, f.message
                    )));
                }
                Err(e) => return Err(h(format!("implementation process {label}: {e}"))),
            };
            let d: message::reply::Defects = serde_json::from_value(v.clone()).map_err(|e| {
                h(format!(
                    "protocol violation: workflow_validate answered something other than {{\"defects\": [{{node, field, msg}}]}} ({e}): {}",
                    v.to_string().chars().take(300).collect::<String>()
                ))
            })?;
            out.insert(g.to_string(), d.defects);
        }
        Ok(out)
    }
    .await;
    let _ = spawner.kill(&p, &label, "stopped").await;
    out
}

/// The rows as `aocheck workflow-validator` prints them (each met or missed, with every miss),
/// then a summary line; and how many rows were missed. `foreign`: another validator's (held to
/// the refusal where a defect's place is a reading).
pub fn lines(rows: &[RowResult], shown: &str, foreign: bool) -> (Vec<String>, usize) {
    let mut out = Vec::new();
    let missed = rows.iter().filter(|r| !r.missed.is_empty()).count();
    for r in rows {
        if r.missed.is_empty() {
            out.push(format!("met     {}", r.rule));
            continue;
        }
        out.push(format!("missed  {}", r.rule));
        out.extend(r.missed.iter().map(|m| format!("        {m}")));
    }
    out.push(format!(
        "{} row(s) of {shown}: {} met, {missed} missed ({})",
        rows.len(),
        rows.len() - missed,
        if foreign {
            "another validator: held to the refusal where a defect's place is aocheck's reading, docs/decisions.md D81"
        } else {
            "the reference: held to every {node, field}"
        }
    ));
    (out, missed)
}
