//! Judging a service that reaches its effects through MCP tool calls (`aocheck deploy` with
//! `provider: mcp`): what fake-mcp's ground-truth ledger recorded, attributed to occurrences by
//! the idempotency key each call carried (the declared rule), against what the service said of
//! each occurrence through its own API. The service is never believed about an effect.
//!
//! - `deploy_one_call` (AOC-REQ-010, -002): at most one write call per occurrence, whatever
//!   the crash, lost reply, error after commit or server restart. A write call whose reply was
//!   lost, answered an error, or never read is an entry of unknown outcome: it is reconciled
//!   (a lookup), never repeated (§4.10: a key is not permission for a second attempt, and most
//!   tools do not even deduplicate by it). Every write call the attribution cannot place is a
//!   finding too: an effect accounted for by nothing.
//! - `deploy_effect_from_ledger` (AOC-REQ-011, -009): a final label is what the ledger shows:
//!   `success` only with an effect of the occurrence already made when the label was shown;
//!   `not_accepted` / `final_failure` never while the ledger holds an effect of it; a failure
//!   never inferred from a lost reply or an error answered after the effect. `unknown` claims
//!   nothing and is honest caution.

use super::deploy::{Ambiguity, Reported};
use super::{Facts, Finding};
use crate::aoc::requirement::Req;
use provider_model::mcp::ledger::{Call, Ledger};

/// The write call an action asked for: its tool, and arguments its effect must carry.
#[derive(Clone, Debug, PartialEq)]
pub struct Expected {
    pub tool: String,
    pub arguments: serde_json::Map<String, serde_json::Value>,
}

/// Attributes a call (by the idempotency key it carried) to an occurrence, by the declared rule.
pub type CallOwner<'a> = &'a dyn Fn(Option<&str>) -> Option<String>;

/// Whether a call was of a tool that makes effects (the ledger's own effects say which tools
/// made one; a call of a write tool that was refused made none and is still an attempt).
fn is_write(call: &Call, writes: &[String]) -> bool {
    writes.contains(&call.tool)
}

fn show(c: &Call) -> String {
    format!(
        "call {} {} (key {}, session {}, effect {}, reply {:?}{})",
        c.seq,
        c.tool,
        c.key.as_deref().unwrap_or("none"),
        c.session.as_deref().unwrap_or("none"),
        c.effect.as_deref().unwrap_or("none"),
        c.reply,
        c.fault
            .as_deref()
            .map_or(String::new(), |f| format!(", fault {f}"))
    )
}

/// Judges one action of a deployment against fake-mcp: `writes` names the tools that make
/// effects; `owner` places a call by its key (`None`: no attribution declared, nothing is
/// established).
pub fn judge(
    ledger: &Ledger,
    writes: &[String],
    owner: Option<CallOwner<'_>>,
    reported: &[Reported],
    expected: &[Option<Expected>],
    facts: &mut Facts,
) -> Vec<Finding> {
    let mut out = Vec::new();
    let Some(owner) = owner else {
        return out;
    };
    let calls: Vec<(&Call, Option<String>)> = ledger
        .calls
        .iter()
        .filter(|c| is_write(c, writes))
        .map(|c| {
            let o = owner(c.key.as_deref()).filter(|o| reported.iter().any(|r| r.occurrence == *o));
            (c, o)
        })
        .collect();
    for (c, _) in calls.iter().filter(|(_, o)| o.is_none()) {
        out.push(Finding::new(
            "deploy_one_call",
            Req::R010,
            format!(
                "fake-mcp received {} that the declared attribution places under no action of the case (ground truth): an effect accounted for by nothing",
                show(c)
            ),
        ));
    }
    for (i, r) in reported.iter().enumerate() {
        let mine: Vec<&Call> = calls
            .iter()
            .filter(|(_, o)| o.as_deref() == Some(r.occurrence.as_str()))
            .map(|(c, _)| *c)
            .collect();
        facts.saw(Req::R010);
        facts.saw(Req::R002);
        if mine.len() > 1 {
            let effects = mine.iter().filter(|c| c.effect.is_some()).count();
            out.push(
                Finding::new(
                    "deploy_one_call",
                    Req::R010,
                    format!(
                        "fake-mcp received {} write calls for one action, which made {effects} effect{}: {} (ground truth): a call whose reply was lost, answered an error or was never read has an unknown outcome; it is looked up, never made again",
                        mine.len(),
                        if effects == 1 { "" } else { "s" },
                        mine.iter().map(|c| show(c)).collect::<Vec<_>>().join("; ")
                    ),
                )
                .about(Some(&r.occurrence)),
            );
        }
        // Each effect of the action is the one it asked for (AOC-REQ-003): the tool, and every
        // argument declared, as made.
        if let Some(Some(want)) = expected.get(i) {
            for c in mine.iter().filter(|c| c.effect.is_some()) {
                facts.saw(Req::R003);
                let effect = ledger
                    .effects
                    .iter()
                    .find(|e| Some(&e.id) == c.effect.as_ref());
                let differs: Vec<String> = want
                    .arguments
                    .iter()
                    .filter(|(k, v)| effect.and_then(|e| e.args.get(k.as_str())) != Some(*v))
                    .map(|(k, v)| {
                        format!(
                            "{k} {} (asked {v})",
                            effect
                                .and_then(|e| e.args.get(k.as_str()))
                                .map_or("missing".to_string(), |x| x.to_string())
                        )
                    })
                    .collect();
                if c.tool != want.tool || !differs.is_empty() {
                    out.push(
                        Finding::new(
                            "deploy_entry_matches_order",
                            Req::R003,
                            format!(
                                "fake-mcp made {} through {} (the action asked for {}){} (ground truth): the effect is not the one the action asked for",
                                c.effect.as_deref().unwrap_or("?"),
                                c.tool,
                                want.tool,
                                if differs.is_empty() {
                                    String::new()
                                } else {
                                    format!(", with {}", differs.join(", "))
                                }
                            ),
                        )
                        .about(Some(&r.occurrence)),
                    );
                }
            }
        }
        let made = mine.iter().filter(|c| c.effect.is_some()).count();
        let mut distinct: Vec<&'static str> = Vec::new();
        for shown in &r.finals {
            let said = shown.outcome;
            // `unknown` after a claimed outcome withdraws the claim: a relabel too (D71).
            let withdrawn = said == "unknown" && distinct.last().is_some_and(|d| *d != "unknown");
            if (said != "unknown" && !distinct.contains(&said)) || withdrawn {
                distinct.push(said);
            }
            let wrong = match said {
                // An effect of the action was made when the label was shown.
                "success" => shown.effects_then == 0,
                // A failure while the ledger holds an effect of the action.
                "not_accepted" | "final_failure" => made > 0,
                _ => false,
            };
            if wrong {
                out.push(
                    Finding::new(
                        "deploy_effect_from_ledger",
                        Req::R011,
                        format!(
                            "the service reported {:?} ({said}), but fake-mcp {} (ground truth): an outcome comes from the provider's record",
                            shown.label,
                            if said == "success" {
                                "had made no effect of the action when it was shown".to_string()
                            } else {
                                format!("made {made} effect(s) of the action")
                            }
                        ),
                    )
                    .about(Some(&r.occurrence)),
                );
                if said != "success" && r.ambiguity != Ambiguity::None {
                    out.push(
                        Finding::new(
                            "deploy_effect_from_ledger",
                            Req::R009,
                            format!(
                                "a terminal failure was reported after {}, which proves nothing about the effect",
                                match r.ambiguity {
                                    Ambiguity::ErrorAfterCommit => {
                                        "an error answered after the call's effect"
                                    }
                                    _ => "a call whose reply was lost",
                                }
                            ),
                        )
                        .about(Some(&r.occurrence)),
                    );
                }
            }
            // Every final label after an ambiguous reply was examined for a failure inferred
            // from it (a success, a failure or `unknown` alike).
            if r.ambiguity != Ambiguity::None {
                facts.saw(Req::R009);
            }
        }
        out.extend(super::deploy::relabelled(
            "deploy_effect_from_ledger",
            "service",
            &distinct,
            r,
        ));
        if r.outcome.is_some() {
            facts.saw(Req::R011);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::deploy::Shown;
    use provider_model::mcp::ledger::Reply;
    use rstest::rstest;

    fn call(seq: u64, key: &str, effect: bool, reply: Reply) -> Call {
        Call {
            seq,
            session: Some("s1".into()),
            tool: "send_message".into(),
            args_digest: "00".into(),
            key: Some(key.into()),
            effect: effect.then(|| format!("eff_{seq}")),
            reply,
            fault: None,
        }
    }

    fn lookup(seq: u64, key: &str) -> Call {
        Call {
            tool: "lookup".into(),
            effect: None,
            ..call(seq, key, false, Reply::Answered)
        }
    }

    fn reported(finals: &[(&'static str, usize)], ambiguity: Ambiguity) -> Reported {
        Reported {
            occurrence: "o1".into(),
            outcome: finals.last().map(|f| f.0),
            label: finals.last().map_or("sending".into(), |f| f.0.to_string()),
            finals: finals
                .iter()
                .map(|(o, n)| Shown {
                    label: o.to_string(),
                    outcome: o,
                    effects_then: *n,
                })
                .collect(),
            ambiguity,
            amount: 0,
            currency: String::new(),
        }
    }

    fn owner(k: Option<&str>) -> Option<String> {
        k?.strip_prefix("msg-").map(str::to_string)
    }

    /// Both ways: the honest answers pass (one call then a lookup, success with its effect;
    /// unknown after a lost reply with or without an effect; a refusal before any effect
    /// reported as a failure); each lie fails its requirement (a second call, a success
    /// nothing made, a failure the ledger contradicts, a failure inferred from a lost reply, a
    /// call nobody owns, a relabelled outcome).
    #[rstest]
    #[case::keyed_then_reconciled(vec![call(1, "msg-o1", true, Reply::Dropped), lookup(2, "msg-o1")], &[("success", 1)], Ambiguity::Dropped, &[])]
    #[case::unknown_after_a_lost_reply(vec![call(1, "msg-o1", true, Reply::Dropped)], &[("unknown", 1)], Ambiguity::Dropped, &[])]
    #[case::unknown_with_nothing_made(vec![call(1, "msg-o1", false, Reply::ToolError)], &[("unknown", 0)], Ambiguity::None, &[])]
    #[case::refused_reported_failed(vec![call(1, "msg-o1", false, Reply::ToolError)], &[("not_accepted", 0)], Ambiguity::None, &[])]
    #[case::pending_claims_nothing(vec![call(1, "msg-o1", true, Reply::Answered)], &[], Ambiguity::None, &[])]
    #[case::retried_after_a_lost_reply(vec![call(1, "msg-o1", true, Reply::Dropped), call(2, "msg-o1", true, Reply::Answered)], &[("success", 2)], Ambiguity::Dropped, &[("deploy_one_call", Req::R010)])]
    #[case::retried_after_a_refusal(vec![call(1, "msg-o1", false, Reply::ToolError), call(2, "msg-o1", true, Reply::Answered)], &[("success", 1)], Ambiguity::None, &[("deploy_one_call", Req::R010)])]
    #[case::success_nothing_made(vec![call(1, "msg-o1", false, Reply::ToolError)], &[("success", 0)], Ambiguity::None, &[("deploy_effect_from_ledger", Req::R011)])]
    #[case::success_before_the_effect(vec![call(1, "msg-o1", true, Reply::Answered)], &[("success", 0)], Ambiguity::None, &[("deploy_effect_from_ledger", Req::R011)])]
    #[case::failed_after_a_lost_reply(vec![call(1, "msg-o1", true, Reply::Dropped)], &[("final_failure", 1)], Ambiguity::Dropped, &[("deploy_effect_from_ledger", Req::R011), ("deploy_effect_from_ledger", Req::R009)])]
    #[case::failed_after_an_error_after_commit(vec![call(1, "msg-o1", true, Reply::ToolError)], &[("not_accepted", 1)], Ambiguity::ErrorAfterCommit, &[("deploy_effect_from_ledger", Req::R011), ("deploy_effect_from_ledger", Req::R009)])]
    #[case::a_call_nobody_owns(vec![call(1, "msg-o1", true, Reply::Answered), call(2, "other-o1", true, Reply::Answered)], &[("success", 1)], Ambiguity::None, &[("deploy_one_call", Req::R010)])]
    #[case::relabelled(vec![call(1, "msg-o1", true, Reply::Answered)], &[("success", 1), ("final_failure", 1)], Ambiguity::None, &[("deploy_effect_from_ledger", Req::R011), ("deploy_effect_from_ledger", Req::R011)])]
    #[case::claim_withdrawn(vec![call(1, "msg-o1", true, Reply::Dropped)], &[("success", 1), ("unknown", 1)], Ambiguity::Dropped, &[("deploy_effect_from_ledger", Req::R011)])]
    #[case::unknown_then_settled(vec![call(1, "msg-o1", true, Reply::Dropped), lookup(2, "msg-o1")], &[("unknown", 1), ("success", 1)], Ambiguity::Dropped, &[])]
    fn each_answer_is_judged_against_the_ledger(
        #[case] calls: Vec<Call>,
        #[case] finals: &[(&'static str, usize)],
        #[case] ambiguity: Ambiguity,
        #[case] fails: &[(&str, Req)],
    ) {
        let ledger = Ledger {
            calls,
            effects: Vec::new(),
        };
        let mut facts = Facts::default();
        let writes = vec!["send_message".to_string()];
        let o: CallOwner<'_> = &owner;
        let found = judge(
            &ledger,
            &writes,
            Some(o),
            &[reported(finals, ambiguity)],
            &[None],
            &mut facts,
        );
        let got: Vec<(&str, Req)> = found
            .iter()
            .map(|f| (f.checker(), f.requirement()))
            .collect();
        assert_eq!(got, fails, "{found:?}");
        assert!(facts.count(Req::R010) > 0);
        // A final label after an ambiguous reply is a fact about AOC-REQ-009, whatever it says.
        assert_eq!(
            facts.count(Req::R009) > 0,
            ambiguity != Ambiguity::None && !finals.is_empty()
        );
        // Without an attribution nothing is judged, and nothing is established.
        let mut none = Facts::default();
        assert!(
            judge(
                &ledger,
                &writes,
                None,
                &[reported(finals, ambiguity)],
                &[None],
                &mut none
            )
            .is_empty()
        );
        assert_eq!(none.count(Req::R010), 0);
    }

    /// Both ways: an effect made through the tool the action asked for, with the arguments it
    /// declared, passes (extra arguments are the service's own); another text, a missing
    /// argument or another tool fails AOC-REQ-003.
    #[rstest]
    #[case::as_asked("send_message", serde_json::json!({"to": "ops", "text": "hi", "idempotency_key": "msg-o1"}), &[])]
    #[case::another_text("send_message", serde_json::json!({"to": "ops", "text": "HI", "idempotency_key": "msg-o1"}), &[("deploy_entry_matches_order", Req::R003)])]
    #[case::missing("send_message", serde_json::json!({"text": "hi", "idempotency_key": "msg-o1"}), &[("deploy_entry_matches_order", Req::R003)])]
    #[case::another_tool("write_record", serde_json::json!({"to": "ops", "text": "hi", "idempotency_key": "msg-o1"}), &[("deploy_entry_matches_order", Req::R003)])]
    fn each_effect_is_the_one_the_action_asked_for(
        #[case] tool: &str,
        #[case] args: serde_json::Value,
        #[case] fails: &[(&str, Req)],
    ) {
        let c = Call {
            tool: tool.into(),
            ..call(1, "msg-o1", true, Reply::Answered)
        };
        let ledger = Ledger {
            calls: vec![c],
            effects: vec![provider_model::mcp::ledger::Effect {
                id: "eff_1".into(),
                seq: 1,
                tool: tool.into(),
                kind: "message".into(),
                key: Some("msg-o1".into()),
                args_digest: "00".into(),
                args,
            }],
        };
        let want = Expected {
            tool: "send_message".into(),
            arguments: serde_json::json!({"to": "ops", "text": "hi"})
                .as_object()
                .cloned()
                .unwrap_or_default(),
        };
        let writes = vec!["send_message".to_string(), "write_record".to_string()];
        let o: CallOwner<'_> = &owner;
        let mut facts = Facts::default();
        let found = judge(
            &ledger,
            &writes,
            Some(o),
            &[reported(&[("success", 1)], Ambiguity::None)],
            &[Some(want)],
            &mut facts,
        );
        let got: Vec<(&str, Req)> = found
            .iter()
            .map(|f| (f.checker(), f.requirement()))
            .collect();
        assert_eq!(got, fails, "{found:?}");
        assert_eq!(facts.count(Req::R003), 1);
    }
}
