//! `aocheck analyze` over a run's folder: every case's verdict derived again from its evidence
//! (`evidence/<case>.json`, a [`Tape`] re-judged by [`rejudge`]) and compared with what
//! `report.json` says, and the report's occurrences derived from the last judged look.

use super::model::{Failure, OccurrenceReport, Report, Summary, Verdict};
use crate::check::Snapshot;
use crate::check::replay::{Rejudged, SCHEMA, Tape, rejudge};
use std::collections::BTreeSet;

/// The report's occurrences, derived from one look (the case's last): each as the
/// implementation answered there, with the provider effects that look's ledger attributes to it
/// by the declared key rule. `report.json` publishes nothing else (GUIDE §4: only what a judged
/// look said), and `analyze` derives it again from the evidence.
pub fn occurrence_reports(snap: &Snapshot) -> Vec<OccurrenceReport> {
    let ids: Vec<&str> = snap.occurrences.iter().map(|o| o.id.as_str()).collect();
    let acct =
        crate::check::accounting::Accounting::of(&snap.provider, snap.key_rule.as_ref(), &ids);
    snap.occurrences
        .iter()
        .filter_map(|o| {
            let a = o.answer.as_ref().ok()?;
            let st = &a.report;
            Some(OccurrenceReport {
                label: o.label.clone(),
                occurrence_id: o.id.clone(),
                executor_generation: st.executor_generation,
                provider_binding_digest: st.binding_digest.clone(),
                state: st.state,
                outcome: st.outcome,
                provider_entry_state: serde_json::to_value(st.provider_entry)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
                authority_state: st.authority,
                entry_attempts: st.entry_attempts,
                evidence_sources: st.evidence_sources.clone(),
                missing_knowledge: st.missing_knowledge.clone(),
                provider_effects: acct.effects_of(&o.id).len() as u32,
                history_len: a.entries.len() as u64,
            })
        })
        .collect()
}

/// What `aocheck analyze` made of one case.
#[derive(Clone, Debug)]
pub struct CaseAnalysis {
    pub case: String,
    pub reported: Verdict,
    /// `None`: the case has no evidence (it did not run).
    pub derived: Option<Rejudged>,
    /// Every way the derived verdict differs from the report (empty: the same).
    pub differences: Vec<String>,
}

/// Derives every case's verdict again from `dir/evidence/` and compares it with `dir/report.json`.
/// An error names the file and what is wrong with it.
pub fn analyze_folder(dir: &std::path::Path) -> Result<Vec<CaseAnalysis>, String> {
    let report_path = dir.join("report.json");
    let bytes =
        std::fs::read(&report_path).map_err(|e| format!("{}: {e}", report_path.display()))?;
    let report: Report = serde_json::from_slice(&bytes)
        .map_err(|e| format!("{}: not an aocheck run report ({e})", report_path.display()))?;
    let mut out = Vec::new();
    for c in &report.cases {
        let path = dir.join("evidence").join(format!("{}.json", c.id));
        let tape: Option<Tape> = match super::attest::read_regular(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(format!("{}: {e}", path.display())),
            Ok(b) => {
                let t: Tape = serde_json::from_slice(&b)
                    .map_err(|e| format!("{}: not aocheck evidence ({e})", path.display()))?;
                if t.schema != SCHEMA || t.case != c.id {
                    return Err(format!(
                        "{}: schema {:?} for case {:?}; expected {SCHEMA} for {}",
                        path.display(),
                        t.schema,
                        t.case,
                        c.id
                    ));
                }
                Some(t)
            }
        };
        let Some(tape) = tape else {
            // A case that never ran has nothing to derive; any other needs its evidence.
            let never_ran = c.steps.is_empty() && c.failures.is_empty();
            let differences =
                if never_ran && matches!(c.verdict, Verdict::NotRun | Verdict::HarnessError) {
                    Vec::new()
                } else {
                    vec![format!(
                        "no evidence (evidence/{}.json): its verdict {} cannot be derived again",
                        c.id,
                        c.verdict.label()
                    )]
                };
            out.push(CaseAnalysis {
                case: c.id.clone(),
                reported: c.verdict,
                derived: None,
                differences,
            });
            continue;
        };
        let r = rejudge(&tape);
        let mut differences = Vec::new();
        if r.verdict != c.verdict {
            differences.push(format!(
                "verdict: reported {}, derived {}",
                c.verdict.label(),
                r.verdict.label()
            ));
        }
        // A failure is its requirement, its step and its words: each is compared.
        let triple = |f: &Failure| format!("{} at step {:?}: {}", f.requirement, f.step, f.msg);
        let reported: BTreeSet<String> = c.failures.iter().map(triple).collect();
        let derived: BTreeSet<String> = r.failures.iter().map(triple).collect();
        for m in derived.difference(&reported) {
            differences.push(format!("failure derived, not reported: {m}"));
        }
        for m in reported.difference(&derived) {
            differences.push(format!("failure reported, not derived: {m}"));
        }
        if tape.faults != c.faults {
            differences.push(format!(
                "faults: reported {:?}, recorded in the evidence {:?}",
                c.faults, tape.faults
            ));
        }
        if r.not_established != c.not_established {
            differences.push(format!(
                "not established: reported {:?}, derived {:?}",
                c.not_established, r.not_established
            ));
        }
        if r.facts != c.facts {
            differences.push(format!(
                "facts: reported {:?}, derived {:?}",
                c.facts, r.facts
            ));
        }
        // The occurrences published are what the last judged look said.
        let said = tape
            .published
            .and_then(|i| tape.looks.get(i))
            .map(|l| occurrence_reports(&l.snapshot))
            .unwrap_or_default();
        if said != c.occurrences {
            differences.push(format!(
                "occurrences: reported {:?}, the last judged look says {:?}",
                c.occurrences, said
            ));
        }
        differences.extend(r.looks_differ.iter().cloned());
        out.push(CaseAnalysis {
            case: c.id.clone(),
            reported: c.verdict,
            derived: Some(r),
            differences,
        });
    }
    // Evidence of a case the report does not list: the report dropped a case it ran.
    let listed: BTreeSet<String> = report
        .cases
        .iter()
        .map(|c| format!("{}.json", c.id))
        .collect();
    if let Ok(entries) = std::fs::read_dir(dir.join("evidence")) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if !listed.contains(&name) {
                out.push(CaseAnalysis {
                    case: name.trim_end_matches(".json").to_string(),
                    reported: Verdict::NotRun,
                    derived: None,
                    differences: vec![format!(
                        "evidence/{name} is here, but report.json lists no such case"
                    )],
                });
            }
        }
    }
    // The summary is what the cases add up to.
    let again = Summary::of(&report.cases);
    if again != report.summary {
        out.push(CaseAnalysis {
            case: "(summary)".into(),
            reported: Verdict::NotRun,
            derived: None,
            differences: vec![format!(
                "report.json's summary {:?} is not what its cases add up to {:?}",
                report.summary, again
            )],
        });
    }
    Ok(out)
}
