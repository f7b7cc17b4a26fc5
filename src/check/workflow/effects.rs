//! The effects a workflow run made, against the providers' ledgers: each delivery the channel
//! saw has its receipt and came after its parents (`workflow_cursor_recorded`), no request
//! under a receipt id follows one whose fate the runner could not know
//! (`workflow_one_delivery_per_output`), and each effect is the one the design asks for
//! (`workflow_effect_as_designed`).

use crate::aoc::Req;
use crate::check::{Facts, Finding};
use crate::workflow::design::PlanStep;
use crate::workflow::run::RunState;
use provider_model::hermes::ledger::Ledger;

/// `workflow_one_delivery_per_output`: a request under a receipt id after an earlier one whose
/// fate the runner could not know (delivered with the answer lost, or to a sender gone; dropped
/// with no answer; a 5xx) is a second attempt, whatever came of it (ground truth, in the
/// channel's order); only a 4xx proved that nothing was delivered. Two deliveries taken are
/// [`one_delivery_per_output`]'s.
pub fn second_attempts(
    channel: &crate::providers::channel::ChannelLedger,
    run_id: &str,
    facts: &mut Facts,
) -> Vec<Finding> {
    use crate::providers::channel::Reply;
    let prefix = format!("workflow:{run_id}:");
    // (seq, id, taken, fate known to the sender: delivered and answered, or refused 4xx)
    let mut all: Vec<(u64, &str, bool, bool)> = channel
        .taken
        .iter()
        .map(|t| (t.seq, t.id.as_str(), true, t.reply == Reply::Answered))
        .chain(channel.untaken.iter().map(|u| {
            let known = u.status.is_some_and(|s| (400..500).contains(&s));
            (u.seq, u.id.as_str(), false, known)
        }))
        .filter(|x| x.1.starts_with(&prefix))
        .collect();
    all.sort_unstable();
    let mut out = Vec::new();
    for (i, later) in all.iter().enumerate() {
        let Some(earlier) = all[..i].iter().rev().find(|e| e.1 == later.1) else {
            continue;
        };
        facts.saw(Req::R010);
        let both_taken = earlier.2 && later.2;
        let refused_4xx = !earlier.2 && earlier.3;
        if !both_taken && !refused_4xx {
            let node = later.1.strip_prefix(&prefix).unwrap_or(later.1);
            out.push(
                Finding::new(
                    "workflow_one_delivery_per_output",
                    Req::R010,
                    format!(
                        "the channel got a second request under receipt {} after one whose fate the runner could not know ({}) (ground truth): a delivery that may have happened is never sent again",
                        later.1,
                        if earlier.2 {
                            "it was delivered and the answer was lost"
                        } else {
                            "it was dropped with no answer, or answered 5xx"
                        }
                    ),
                )
                .about(Some(node)),
            );
        }
    }
    out
}

/// `workflow_cursor_recorded`: every delivery the channel took or refused under one of the
/// run's receipt ids is an effect the state must record (its receipt, written before it was
/// sent), and was sent only once the step's parents were recorded. The mirror of "every run
/// has its attempt". One fact per delivery.
pub fn deliveries_recorded(
    plan: &[PlanStep],
    st: &RunState,
    channel: &crate::providers::channel::ChannelLedger,
    facts: &mut Facts,
) -> Vec<Finding> {
    let mut out = Vec::new();
    let prefix = format!("workflow:{}:", st.run_id);
    let ids =
        channel
            .taken
            .iter()
            .map(|t| (t.id.as_str(), "took"))
            .chain(channel.untaken.iter().map(|u| {
                (
                    u.id.as_str(),
                    if u.status.is_some() {
                        "refused"
                    } else {
                        "dropped with no answer"
                    },
                )
            }));
    for (id, what) in ids {
        let Some(node) = id.strip_prefix(&prefix) else {
            continue;
        };
        facts.saw(Req::R005);
        let said = |msg: String| {
            Finding::new("workflow_cursor_recorded", Req::R005, msg).about(Some(node))
        };
        if !st.deliveries.iter().any(|r| r.id == id) {
            out.push(said(format!(
                "the channel {what} a delivery under receipt {id} (ground truth), but the saved state records no receipt for it: a delivery is written before it is sent, and a refused one is recorded ok: false"
            )));
        }
        let recorded = |p: &str| {
            st.outputs.contains_key(p)
                || st.skipped.iter().any(|x| x == p)
                || st.answers.contains_key(p)
        };
        if let Some(s) = plan.iter().find(|s| s.id == node) {
            let open: Vec<&str> = s
                .after
                .iter()
                .filter(|p| plan.iter().any(|q| &q.id == *p) && !recorded(p))
                .map(String::as_str)
                .collect();
            if !open.is_empty() {
                out.push(said(format!(
                    "the channel {what} step {node}'s delivery (ground truth) while the saved state records no result for its parent(s) {}: an output step runs after its parents",
                    open.join(", ")
                )));
            }
        }
    }
    out
}

/// `workflow_effect_as_designed` (AOC-REQ-003: the effect is the one asked for): every Hermes
/// run under a step's correlation carries the step's prompt; every delivery the channel took
/// for an output step goes where the step says (`deliver`, `target`) and carries what the state
/// collected for it: the saved `outputs[step]` when the state records it, else the parents'
/// recorded results; and what it collected is what its parents recorded. One fact per run and
/// per delivery.
pub fn effect_as_designed(
    plan: &[PlanStep],
    st: &RunState,
    (ledger, channel): (&Ledger, &crate::providers::channel::ChannelLedger),
    facts: &mut Facts,
) -> Vec<Finding> {
    let mut out = Vec::new();
    let said = |node: &str, msg: String| {
        Finding::new("workflow_effect_as_designed", Req::R003, msg).about(Some(node))
    };
    let field = |s: &PlanStep, k: &str| {
        s.node
            .get(k)
            .and_then(serde_json::Value::as_str)
            .map(str::to_string)
    };
    let prefix = format!("workflow:{}:", st.run_id);
    for r in &ledger.runs {
        let Some(s) = r
            .session_id
            .strip_prefix(&prefix)
            .and_then(|n| plan.iter().find(|s| s.id == n && s.kind == "agent"))
        else {
            continue;
        };
        facts.saw(Req::R003);
        if let Some(prompt) = field(s, "prompt")
            && !r.prompt.contains(&prompt)
        {
            out.push(said(
                &s.id,
                format!(
                    "fake-hermes's run {} for step {} was not asked the step's prompt ({prompt:?}); it was asked {:?} (ground truth)",
                    r.run_id,
                    s.id,
                    r.prompt.chars().take(120).collect::<String>()
                ),
            ));
        }
    }
    // A parent's recorded result: its output, or the answer it was given, as the state keeps it.
    let result_of = |p: &str| st.outputs.get(p).or_else(|| st.answers.get(p));
    for t in &channel.taken {
        let Some(s) =
            t.id.strip_prefix(&prefix)
                .and_then(|n| plan.iter().find(|s| s.id == n && s.kind == "output"))
        else {
            continue;
        };
        facts.saw(Req::R003);
        let want = (field(s, "deliver"), field(s, "target"));
        if (Some(t.deliver.clone()), t.target.clone()) != want {
            out.push(said(
                &s.id,
                format!(
                    "the channel took step {}'s delivery as {:?} to {:?} (ground truth), but the design says {:?} to {:?}",
                    s.id, t.deliver, t.target, want.0, want.1
                ),
            ));
        }
        // Not recorded yet (the delivery is in flight): the parents' outputs, with or without
        // the answers a runner keeps apart (either is a runner's choice).
        let from_parents = |with_answers: bool| {
            serde_json::Value::Object(
                s.after
                    .iter()
                    .filter_map(|p| {
                        let v = if with_answers {
                            result_of(p)
                        } else {
                            st.outputs.get(p)
                        };
                        v.map(|v| (p.clone(), v.clone()))
                    })
                    .collect(),
            )
        };
        let candidates = match st.outputs.get(&s.id) {
            Some(v) => vec![v.clone()],
            None => vec![from_parents(false), from_parents(true)],
        };
        let collected = candidates
            .iter()
            .find(|c| crate::providers::channel::digest(c) == t.digest)
            .unwrap_or(&candidates[0])
            .clone();
        if crate::providers::channel::digest(&collected) != t.digest {
            out.push(said(
                &s.id,
                format!(
                    "the channel took a payload for step {} (digest {}, ground truth) that is not what the saved state collected for it ({})",
                    s.id,
                    &t.digest[..t.digest.len().min(16)],
                    collected.to_string().chars().take(120).collect::<String>()
                ),
            ));
        }
        if let Some(m) = collected.as_object() {
            for (p, v) in m {
                let parent = s.after.contains(p);
                if !parent || result_of(p) != Some(v) {
                    out.push(said(
                        &s.id,
                        format!(
                            "step {} collected {} for {p:?}, which {}",
                            s.id,
                            v.to_string().chars().take(80).collect::<String>(),
                            if parent {
                                "is not what that parent recorded"
                            } else {
                                "is no parent of it"
                            }
                        ),
                    ));
                }
            }
        }
    }
    out
}
