//! `report.html`: one self-contained page (no external resources), rendered by a template
//! (`templates/report.html.j2`, minijinja with HTML escaping on) from a view of the [`Report`]:
//! a head a person reads (the implementation, the run, the verdict counts, what did not pass and
//! why), the cases × requirements matrix (cases as rows, grouped by family, so it fits the page
//! at any number of cases), then per case its failures, faults, a timeline drawn from its
//! evidence (inline SVG), its processes, operators and occurrences.
//!
//! Every string from the report passes through [`clean`] (characters XML cannot hold become
//! U+FFFD) and the template escapes it; only the timeline is inserted as markup, and it is built
//! here with every text in it escaped by [`super::text::xml`].

use super::model::{CaseReport, Report, Verdict};
use super::text::xml;
use crate::check::replay::Tape;
use serde::Serialize;

const TEMPLATE: &str = include_str!("templates/report.html.j2");

/// A string for the template: every character XML 1.0 does not allow replaced by U+FFFD (the
/// template's escaping does the rest).
fn clean(s: &str) -> String {
    s.chars().map(super::text::xml_char).collect()
}

/// A vocabulary value's wire word (`client_gone`, `payment_created`): its serde name.
fn word<T: Serialize>(x: &T) -> String {
    serde_json::to_value(x)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

fn mark(v: Verdict) -> &'static str {
    match v {
        Verdict::Pass => "✓",
        Verdict::Fail => "✗",
        Verdict::HarnessError | Verdict::MissingKnowledge => "?",
        Verdict::Unsupported | Verdict::NotRun => "–",
    }
}

#[derive(Serialize)]
struct Count {
    label: &'static str,
    class: &'static str,
    n: usize,
}

#[derive(Serialize)]
struct Problem {
    id: String,
    verdict: &'static str,
    class: &'static str,
    reqs: String,
    why: String,
}

#[derive(Serialize)]
struct Head {
    /// "6 of 6 cases passed (1 unsupported)" (`model::passed_of_ran`).
    headline: String,
    counts: Vec<Count>,
    implementation: Vec<(String, String)>,
    run_id: String,
    seed: u64,
    store: String,
    test_input_digest: String,
    version: String,
    schema: String,
    disclaimer: String,
    notes: Vec<String>,
    problems: Vec<Problem>,
}

#[derive(Serialize)]
struct ReqHead {
    id: String,
    short: String,
    verdict: &'static str,
    class: &'static str,
    mark: &'static str,
}

#[derive(Serialize)]
struct Cell {
    class: &'static str,
    mark: &'static str,
    title: String,
}

#[derive(Serialize)]
struct Row {
    id: String,
    title: String,
    verdict: &'static str,
    class: &'static str,
    cells: Vec<Cell>,
}

#[derive(Serialize)]
struct Group {
    name: String,
    rows: Vec<Row>,
}

#[derive(Serialize)]
struct Matrix {
    reqs: Vec<ReqHead>,
    groups: Vec<Group>,
    span: usize,
}

#[derive(Serialize)]
struct OperatorView {
    label: String,
    delegated: bool,
    status: String,
    aoc_state: String,
    state_class: &'static str,
    runs: u64,
    approvals: u64,
    stops: u64,
    mk: Vec<String>,
}

#[derive(Serialize)]
struct OccurrenceView {
    label: String,
    id: String,
    state: String,
    state_class: &'static str,
    outcome: String,
    entry: String,
    attempts: u64,
    authority: String,
    generation: u64,
    effects: u64,
    mk: Vec<String>,
    sources: String,
    binding: String,
}

#[derive(Serialize)]
struct CaseView {
    id: String,
    title: String,
    verdict: &'static str,
    class: &'static str,
    reqs: String,
    millis: u64,
    facts: u32,
    repro: String,
    failures: Vec<String>,
    harness: Option<String>,
    unsupported: Option<String>,
    not_established: String,
    faults: Vec<(String, bool)>,
    timeline: Option<minijinja::Value>,
    processes: Vec<String>,
    logs: Vec<String>,
    operators: Vec<OperatorView>,
    occurrences: Vec<OccurrenceView>,
    /// Whether the history's columns (authority, generation, binding) mean anything here: not
    /// for a deployment whose record was never read (D79).
    record_columns: bool,
    steps: Vec<String>,
}

/// The implementation's self-description as label/value pairs a person reads.
fn implementation(v: &serde_json::Value) -> Vec<(String, String)> {
    let text = |x: &serde_json::Value| match x {
        serde_json::Value::String(s) => clean(s),
        serde_json::Value::Null => "—".into(),
        other => clean(&other.to_string()),
    };
    let mut out = Vec::new();
    for (key, label) in [
        ("name", "name"),
        ("version", "version"),
        ("same_team", "same team as aocheck"),
        ("variant", "variant"),
        ("protocol", "protocol"),
        ("key_rule", "key rule"),
        ("command", "command"),
    ] {
        if let Some(x) = v.get(key) {
            out.push((label.to_string(), text(x)));
        }
    }
    if let Some(p) = v.get("programs").and_then(|p| p.as_array()) {
        for p in p {
            out.push((
                format!("{} file", text(&p["role"])),
                format!(
                    "{} (sha256 {})",
                    text(&p["path"]),
                    p["sha256"].as_str().unwrap_or("unreadable")
                ),
            ));
        }
    }
    if let Some(ops) = v.get("operations").and_then(|o| o.as_array()) {
        out.push(("operations".into(), format!("{} listed", ops.len())));
    }
    if let Some(st) = v.get("statements").and_then(|o| o.as_array()) {
        out.push((
            "statements".into(),
            format!("{} (judged exactly in every case)", st.len()),
        ));
    }
    // Free text is shown whole, for a person to review: nothing judged it (GUIDE §4).
    if let Some(claims) = v.get("claims").and_then(|o| o.as_array())
        && !claims.is_empty()
    {
        out.push((
            "for review".into(),
            format!(
                "free-text claims, which establish nothing (AOC-REQ-013 undecided): {}",
                claims.iter().map(text).collect::<Vec<_>>().join(" | ")
            ),
        ));
    }
    out
}

fn family(id: &str) -> String {
    // The id up to its last `-` part: AOC-CASE-003 → AOC-CASE, HERMES-VERIFY-05 → HERMES-VERIFY.
    match id.rsplit_once('-') {
        Some((f, _)) if !f.is_empty() => f.to_string(),
        _ => id.to_string(),
    }
}

fn cell(c: &CaseReport, req: &str) -> Cell {
    if !c.requirements.iter().any(|r| r == req) {
        return Cell {
            class: "",
            mark: "",
            title: String::new(),
        };
    }
    let failed_here = c.failures.iter().any(|f| f.requirement.id() == req);
    let v = if failed_here {
        Verdict::Fail
    } else if c.verdict == Verdict::Fail || c.verdict == Verdict::Pass {
        Verdict::Pass
    } else {
        c.verdict
    };
    Cell {
        class: v.label(),
        mark: mark(v),
        title: format!("{} × {req}: {}", c.id, v.label()),
    }
}

fn case_view(c: &CaseReport) -> CaseView {
    let timeline = c
        .timeline
        .clone()
        .or_else(|| {
            c.evidence
                .as_ref()
                .and_then(|e| serde_json::from_value::<Tape>((**e).clone()).ok())
                .and_then(|t| timeline(&t))
        })
        .map(minijinja::Value::from_safe_string);
    let deployment = c
        .implementation
        .as_ref()
        .is_some_and(|i| i["kind"] == "deployment");
    let record_columns = !deployment || c.occurrences.iter().any(|o| o.history_len > 0);
    CaseView {
        record_columns,
        id: clean(&c.id),
        title: clean(&c.title),
        verdict: c.verdict.label(),
        class: c.verdict.label(),
        reqs: clean(&c.requirements.join(", ")),
        millis: c.millis,
        facts: c.facts.values().sum(),
        repro: clean(&c.repro),
        failures: c
            .failures
            .iter()
            .map(|f| clean(&format!("{}: {}", f.requirement, f.msg)))
            .collect(),
        harness: c.harness.as_deref().map(clean),
        unsupported: c.unsupported.as_deref().map(clean),
        not_established: clean(&c.not_established.join(", ")),
        faults: c.faults.iter().map(|f| (clean(&f.what), f.fired)).collect(),
        timeline,
        processes: c.sut_processes.iter().map(|p| clean(p)).collect(),
        // Paths the run wrote itself, relative to the page; escaped by the template.
        logs: c.logs.iter().map(|p| clean(p)).collect(),
        operators: c
            .operators
            .iter()
            .map(|o| OperatorView {
                label: clean(&o.label),
                delegated: o.delegated,
                status: clean(&o.status),
                aoc_state: clean(&o.aoc_state),
                state_class: if o.aoc_state == "unresolved" {
                    "missing_knowledge"
                } else {
                    ""
                },
                runs: o.runs as u64,
                approvals: o.approvals as u64,
                stops: o.stops as u64,
                mk: o.missing_knowledge.iter().map(|m| clean(m)).collect(),
            })
            .collect(),
        occurrences: c
            .occurrences
            .iter()
            .map(|o| OccurrenceView {
                label: clean(&o.label),
                id: clean(&o.occurrence_id),
                state: o.state.name().to_string(),
                state_class: if o.state == crate::vocab::State::Unresolved {
                    "missing_knowledge"
                } else {
                    ""
                },
                outcome: o.outcome.map_or("—", |x| x.name()).to_string(),
                entry: clean(&o.provider_entry_state),
                attempts: o.entry_attempts as u64,
                authority: o.authority_state.name().to_string(),
                generation: o.executor_generation,
                effects: o.provider_effects as u64,
                mk: o.missing_knowledge.iter().map(|m| clean(m)).collect(),
                sources: clean(&o.evidence_sources.join(", ")),
                binding: clean(o.provider_binding_digest.as_deref().unwrap_or("—")),
            })
            .collect(),
        steps: c.steps.iter().map(|s| clean(s)).collect(),
    }
}

/// The page. A template error (an aocheck bug) still yields a page that says so.
pub fn html(r: &Report) -> String {
    let count = |v: Verdict| r.cases.iter().filter(|c| c.verdict == v).count();
    let counts = [
        (Verdict::Pass, "passed"),
        (Verdict::Fail, "failed"),
        (Verdict::HarnessError, "harness error"),
        (Verdict::MissingKnowledge, "missing knowledge"),
        (Verdict::Unsupported, "unsupported"),
        (Verdict::NotRun, "not run"),
    ]
    .into_iter()
    .filter_map(|(v, label)| {
        let n = count(v);
        (n > 0).then_some(Count {
            label,
            class: v.label(),
            n,
        })
    })
    .collect();
    let problems = r
        .cases
        .iter()
        .filter(|c| c.verdict != Verdict::Pass)
        .map(|c| {
            let mut reqs: Vec<String> = c
                .failures
                .iter()
                .map(|f| f.requirement.id().to_string())
                .collect();
            reqs.dedup();
            Problem {
                id: clean(&c.id),
                verdict: c.verdict.label(),
                class: c.verdict.label(),
                reqs: reqs.join(", "),
                why: clean(&super::model::one_line(&c.reasons(), usize::MAX)),
            }
        })
        .collect();
    let store = format!(
        "{}{}",
        r.store["kind"].as_str().unwrap_or("?"),
        if r.store["durable"] == serde_json::Value::Bool(true) {
            " (durable)"
        } else {
            ""
        }
    );
    let head = Head {
        headline: clean(&super::model::passed_of_ran(&r.cases)),
        counts,
        implementation: implementation(&r.implementation),
        run_id: clean(&r.run_id),
        seed: r.seed,
        store: clean(&store),
        test_input_digest: clean(&r.test_input_digest),
        version: clean(&r.aocheck_version),
        schema: clean(&r.schema),
        disclaimer: clean(&r.disclaimer),
        notes: super::text::run_notes(r).iter().map(|n| clean(n)).collect(),
        problems,
    };
    let reqs: Vec<ReqHead> = r
        .requirements
        .iter()
        .map(|q| ReqHead {
            id: q.id.id().to_string(),
            short: q.id.id().rsplit('-').next().unwrap_or("").to_string(),
            verdict: q.verdict.label(),
            class: q.verdict.label(),
            mark: mark(q.verdict),
        })
        .collect();
    let mut groups: Vec<Group> = Vec::new();
    for c in &r.cases {
        let row = Row {
            id: clean(&c.id),
            title: clean(&c.title),
            verdict: c.verdict.label(),
            class: c.verdict.label(),
            cells: reqs.iter().map(|q| cell(c, &q.id)).collect(),
        };
        let name = clean(&family(&c.id));
        match groups.iter_mut().find(|g| g.name == name) {
            Some(g) => g.rows.push(row),
            None => groups.push(Group {
                name,
                rows: vec![row],
            }),
        }
    }
    let matrix = Matrix {
        span: reqs.len() + 2,
        reqs,
        groups,
    };
    let cases: Vec<CaseView> = r.cases.iter().map(case_view).collect();
    let mut env = minijinja::Environment::new();
    env.set_auto_escape_callback(|_| minijinja::AutoEscape::Html);
    let rendered = env
        .add_template("report.html", TEMPLATE)
        .and_then(|()| env.get_template("report.html"))
        .and_then(|t| {
            t.render(minijinja::context! {
                head => minijinja::Value::from_serialize(&head),
                matrix => minijinja::Value::from_serialize(&matrix),
                cases => minijinja::Value::from_serialize(&cases),
            })
        });
    match rendered {
        Ok(mut page) => {
            if !page.ends_with('\n') {
                page.push('\n');
            }
            page
        }
        Err(e) => format!(
            "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>aocheck report</title></head><body><p>The page could not be rendered (an aocheck bug): {}. report.json holds the report.</p></body></html>\n",
            xml(&e.to_string())
        ),
    }
}

/// The history entries (their kinds) an occurrence gained at one look (`None`: the end).
type Appended = (Option<usize>, Vec<String>);

/// What a reply's fate looks like on the timeline (the fate is fake-payments' word, from the
/// provider model: a new fate is a compile error here, not a grey dot).
fn reply_style(reply: provider_model::payments::ledger::Reply) -> (&'static str, &'static str) {
    use provider_model::payments::ledger::Reply;
    match reply {
        Reply::Written => ("#2e7d32", "reply written"),
        Reply::ClientGone => ("#c62828", "committed, nobody left to answer (client gone)"),
        Reply::Dropped => ("#c62828", "connection closed, no reply"),
        Reply::ErrorAfterCommit => ("#ef6c00", "effect committed, 5xx returned"),
        Reply::Garbled => ("#6a1b9a", "undecodable reply"),
        Reply::Forged => ("#6a1b9a", "forged reply"),
        Reply::Misdirected => ("#6a1b9a", "reply signed for another account"),
        Reply::Pending => ("#757575", "no reply yet"),
    }
}

/// The case's timeline as inline SVG, from its evidence: one column per step (and the end), a
/// row for the steps (crashes red, generation changes blue), a row per credential that made
/// requests (each request at the look that first saw it, coloured by what became of its reply),
/// the provider's effects, and a row per occurrence with the history entries appended at each
/// look. `None` for a case with no look (nothing to draw).
pub fn timeline(t: &Tape) -> Option<String> {
    use std::collections::BTreeMap;
    use std::fmt::Write as _;
    if let Some(w) = &t.workflow {
        return super::timeline_workflow::timeline(t, w);
    }
    let last = t.looks.last()?;
    let ledger = &last.snapshot.provider;
    let columns = t.steps.len() + 1;
    let (left, width) = (150.0_f64, 1100.0_f64);
    let col = (width - left - 10.0) / columns as f64;
    let x_of = |step: Option<usize>| left + (step.unwrap_or(t.steps.len()) as f64 + 0.5) * col;
    // When each request and entry was first seen.
    let mut request_at: BTreeMap<u64, Option<usize>> = BTreeMap::new();
    let mut appended: BTreeMap<String, Vec<Appended>> = BTreeMap::new();
    let mut seen_len: BTreeMap<String, usize> = BTreeMap::new();
    for look in &t.looks {
        for r in &look.snapshot.provider.requests {
            request_at.entry(r.seq).or_insert(look.after_step);
        }
        for o in &look.snapshot.occurrences {
            let Ok(a) = &o.answer else { continue };
            let before = seen_len.get(&o.label).copied().unwrap_or(0);
            if a.entries.len() > before {
                let kinds = a.entries[before..]
                    .iter()
                    .map(|e| {
                        let k = word(&e.kind);
                        match e.generation {
                            Some(g) if k != "observed" => format!("{k} g{g}"),
                            _ => k,
                        }
                    })
                    .collect();
                appended
                    .entry(o.label.clone())
                    .or_default()
                    .push((look.after_step, kinds));
            }
            seen_len.insert(o.label.clone(), a.entries.len().max(before));
        }
    }
    let mut credentials: Vec<String> = Vec::new();
    for r in &ledger.requests {
        if !credentials.contains(&r.credential) {
            credentials.push(r.credential.clone());
        }
    }
    // Rows: steps, one per credential, provider, one per occurrence (tall enough for its entries).
    let mut y = 58.0_f64;
    let steps_y = y;
    y += 34.0;
    let cred_y: Vec<f64> = credentials
        .iter()
        .map(|_| {
            let v = y;
            y += 34.0;
            v
        })
        .collect();
    let provider_y = y;
    y += 34.0;
    let mut occ_y = Vec::new();
    for entries in appended.values() {
        let tallest = entries.iter().map(|(_, k)| k.len()).max().unwrap_or(1);
        occ_y.push((y, tallest));
        y += 14.0 + 12.0 * tallest as f64;
    }
    let height = y + 26.0;
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg class=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {width} {height}\" role=\"img\" aria-label=\"timeline of {}\" font-family=\"system-ui,sans-serif\" font-size=\"10\">",
        xml(&t.case)
    );
    // Column guides and step names.
    for (i, step) in t.steps.iter().enumerate() {
        let x = x_of(Some(i));
        let verb = step.split(':').next().unwrap_or("").trim();
        let colour = match verb {
            "crash" => "#c62828",
            "join" | "replace" | "takeover" | "adopt" => "#1565c0",
            _ => "#424242",
        };
        let _ = write!(
            s,
            "<line x1=\"{x:.1}\" y1=\"40\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"#eee\"/><text x=\"{x:.1}\" y=\"14\" text-anchor=\"middle\" fill=\"#777\">{i}</text><text x=\"{x:.1}\" y=\"30\" text-anchor=\"middle\" fill=\"{colour}\"><title>{}</title>{}</text>",
            height - 20.0,
            xml(step),
            xml(&verb.chars().take(12).collect::<String>())
        );
        let marker = match verb {
            "crash" => format!(
                "<path d=\"M{:.1} {:.1} l10 10 m0 -10 l-10 10\" stroke=\"#c62828\" stroke-width=\"2.5\"><title>{}</title></path>",
                x - 5.0,
                steps_y - 5.0,
                xml(step)
            ),
            _ if step.contains("refused") => format!(
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"9\" height=\"9\" fill=\"#fff\" stroke=\"#ef6c00\" stroke-width=\"2\"><title>{}</title></rect>",
                x - 4.5,
                steps_y - 4.5,
                xml(step)
            ),
            _ => format!(
                "<circle cx=\"{x:.1}\" cy=\"{steps_y:.1}\" r=\"4\" fill=\"{colour}\"><title>{}</title></circle>",
                xml(step)
            ),
        };
        s.push_str(&marker);
    }
    let _ = write!(
        s,
        "<text x=\"{:.1}\" y=\"30\" text-anchor=\"middle\" fill=\"#424242\">end</text>",
        x_of(None)
    );
    let lane = |s: &mut String, y: f64, label: &str| {
        let _ = write!(
            s,
            "<line x1=\"{left}\" y1=\"{y:.1}\" x2=\"{width}\" y2=\"{y:.1}\" stroke=\"#ddd\"/><text x=\"6\" y=\"{:.1}\" fill=\"#333\">{}</text>",
            y + 3.5,
            xml(label)
        );
    };
    lane(&mut s, steps_y, "steps");
    for (c, y) in credentials.iter().zip(&cred_y) {
        let who = if c == "account" {
            "requests (the implementation)".to_string()
        } else {
            format!("requests by {c}")
        };
        lane(&mut s, *y, &who);
    }
    lane(&mut s, provider_y, "provider effects");
    for ((label, _), (y, _)) in appended.iter().zip(&occ_y) {
        lane(&mut s, *y, &format!("history of {label}"));
    }
    // Requests, and the effects they caused.
    let mut per_column: BTreeMap<Option<usize>, usize> = BTreeMap::new();
    for r in &ledger.requests {
        let at = request_at.get(&r.seq).copied().flatten();
        let k = per_column.entry(at).or_default();
        let x = x_of(at) - col / 2.0 + 6.0 + (*k as f64 * 9.0) % (col - 8.0).max(9.0);
        *k += 1;
        let Some(row) = credentials.iter().position(|c| *c == r.credential) else {
            continue;
        };
        let cy = cred_y[row];
        let (colour, fate) = reply_style(r.reply);
        let op = word(&r.op);
        let title = format!(
            "request {} {op} → {} {}{}{}",
            r.seq,
            r.status,
            fate,
            r.fault
                .as_deref()
                .map(|f| format!("; fault {f}"))
                .unwrap_or_default(),
            if r.replayed { "; replayed" } else { "" }
        );
        let _ = write!(
            s,
            "<line x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"{colour}\" stroke-width=\"1.5\"/><circle cx=\"{x:.1}\" cy=\"{cy:.1}\" r=\"3.5\" fill=\"{colour}\"><title>{}</title></circle>",
            cy + 3.5,
            provider_y - 2.0,
            xml(&title)
        );
        if r.fault.is_some() {
            let _ = write!(
                s,
                "<text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"{colour}\" font-size=\"8\">{}</text>",
                cy - 6.0,
                xml(&r
                    .fault
                    .clone()
                    .unwrap_or_default()
                    .chars()
                    .take(16)
                    .collect::<String>())
            );
        }
        for e in ledger.effects.iter().filter(|e| e.request_seq == r.seq) {
            let kind = word(&e.kind);
            let _ = write!(
                s,
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"8\" height=\"8\" fill=\"#37474f\"><title>{}</title></rect>",
                x - 4.0,
                provider_y - 4.0,
                xml(&format!(
                    "effect {}: {kind} {} {} {} ({})",
                    e.seq, e.payment_id, e.amount, e.currency, fate
                ))
            );
        }
    }
    // History entries appended at each look.
    for ((_, entries), (y, _)) in appended.iter().zip(&occ_y) {
        for (at, kinds) in entries {
            let x = x_of(*at);
            for (j, k) in kinds.iter().enumerate() {
                let _ = write!(
                    s,
                    "<text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#1b5e20\">{}</text>",
                    y + 3.5 + 12.0 * j as f64,
                    xml(k)
                );
            }
        }
    }
    let _ = write!(
        s,
        "<text x=\"6\" y=\"{:.1}\" fill=\"#666\">● request (green: reply written; red: reply lost; orange: 5xx after commit; purple: forged or garbled) · ■ effect · ✕ crash · □ refused step</text></svg>",
        height - 6.0
    );
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::model::{Failure, Summary};
    use proptest::prelude::*;

    /// A report of one failed case whose title, failure, step, store and self-description are
    /// all `said` (what an implementation could make the harness write).
    fn said(said: &str) -> Report {
        let mut c = CaseReport::new(
            "AOC-CASE-001",
            said,
            std::path::Path::new("cases/x.yaml"),
            vec!["AOC-REQ-001".into()],
        );
        c.verdict = Verdict::Fail;
        c.failures.push(Failure {
            requirement: crate::aoc::Req::R001,
            step: Some(0),
            msg: said.into(),
        });
        c.steps.push(said.into());
        c.harness = Some(said.into());
        let cases = vec![c];
        Report {
            schema: crate::report::model::SCHEMA.into(),
            run_id: "r".into(),
            seed: 1,
            started_at: "0".into(),
            aocheck_version: "0".into(),
            implementation: serde_json::json!({"name": said, "version": said, "command": said}),
            provider_profile: None,
            store: serde_json::json!({"kind": said}),
            test_input_digest: said.into(),
            requirements: crate::runner::aggregate(&cases),
            summary: Summary::of(&cases),
            cases,
            disclaimer: said.into(),
            incomplete: Some(said.into()),
            shard: None,
            expectations: None,
        }
    }

    fn allowed(ch: char) -> bool {
        matches!(ch, '\t' | '\n' | '\r')
            || ((ch as u32) >= 0x20 && ch != '\u{FFFE}' && ch != '\u{FFFF}')
    }

    proptest! {
        /// Whatever an implementation says, the page holds exactly the markup of the page where
        /// it said the same with its markup characters replaced (no tag or attribute of its
        /// own), and no character XML cannot hold.
        #[test]
        fn what_the_implementation_says_adds_no_markup(s in any::<String>()) {
            let harmless: String = s
                .chars()
                .map(|c| if "<>\"'&".contains(c) { 'x' } else { c })
                .collect();
            let (page, plain) = (html(&said(&s)), html(&said(&harmless)));
            for ch in ['<', '>', '"', '\''] {
                prop_assert_eq!(page.matches(ch).count(), plain.matches(ch).count());
            }
            prop_assert!(page.chars().all(allowed));
        }
    }

    #[test]
    fn markup_is_escaped_and_forbidden_characters_replaced() {
        let page = html(&said("<script>alert(1)</script>\u{1}\u{FFFF}"));
        assert!(!page.contains("<script>"), "a script got into the page");
        assert!(page.contains("&lt;script&gt;"));
        assert!(page.contains('\u{FFFD}'));
        assert!(page.chars().all(allowed));
    }
}
