//! A workflow case's timeline (seed 002), from its evidence: one column per step (and the end);
//! a row for the steps (kills and damage red, refusals orange), a row for the runs fake-hermes
//! started (each at the look that first saw it, named by its step), a row for the deliveries
//! the channel took (coloured by what became of the answer), and a row for the run's saved
//! status at each look. Every text is escaped by [`super::text::xml`].

use super::text::xml;
use crate::check::replay::Tape;
use crate::check::workflow::WorkflowTape;
use crate::providers::channel::Reply;
use std::fmt::Write as _;

/// The timeline as inline SVG; `None` with no look (nothing to draw).
pub fn timeline(t: &Tape, w: &WorkflowTape) -> Option<String> {
    w.looks.last()?;
    let columns = t.steps.len() + 1;
    let (left, width) = (150.0_f64, 1100.0_f64);
    let col = (width - left - 10.0) / columns as f64;
    let x_of = |step: Option<usize>| left + (step.unwrap_or(t.steps.len()) as f64 + 0.5) * col;
    let rows = [
        "steps",
        "runs at fake-hermes",
        "deliveries at the channel",
        "saved state",
    ];
    let y_of = |row: usize| 58.0 + 34.0 * row as f64;
    let height = y_of(rows.len()) + 20.0;
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg class=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {width} {height}\" role=\"img\" aria-label=\"timeline of {}\" font-family=\"system-ui,sans-serif\" font-size=\"10\">",
        xml(&t.case)
    );
    for (i, row) in rows.iter().enumerate() {
        let y = y_of(i);
        let _ = write!(
            s,
            "<line x1=\"{left}\" y1=\"{y:.1}\" x2=\"{width}\" y2=\"{y:.1}\" stroke=\"#ddd\"/><text x=\"6\" y=\"{:.1}\" fill=\"#333\">{}</text>",
            y + 3.5,
            xml(row)
        );
    }
    for (i, step) in t.steps.iter().enumerate() {
        let x = x_of(Some(i));
        let verb = step.split(':').next().unwrap_or("").trim();
        let killed = step.contains("killed") || verb == "workflow_damage";
        let colour = if killed {
            "#c62828"
        } else if step.contains("refused") {
            "#ef6c00"
        } else {
            "#424242"
        };
        let _ = write!(
            s,
            "<line x1=\"{x:.1}\" y1=\"40\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"#eee\"/><text x=\"{x:.1}\" y=\"14\" text-anchor=\"middle\" fill=\"#777\">{i}</text><text x=\"{x:.1}\" y=\"30\" text-anchor=\"middle\" fill=\"{colour}\"><title>{}</title>{}</text>",
            height - 20.0,
            xml(step),
            xml(&verb
                .trim_start_matches("workflow_")
                .chars()
                .take(12)
                .collect::<String>())
        );
        let y = y_of(0);
        let marker = if killed {
            format!(
                "<path d=\"M{:.1} {:.1} l10 10 m0 -10 l-10 10\" stroke=\"#c62828\" stroke-width=\"2.5\"><title>{}</title></path>",
                x - 5.0,
                y - 5.0,
                xml(step)
            )
        } else {
            format!(
                "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"4\" fill=\"{colour}\"><title>{}</title></circle>",
                xml(step)
            )
        };
        s.push_str(&marker);
    }
    let _ = write!(
        s,
        "<text x=\"{:.1}\" y=\"30\" text-anchor=\"middle\" fill=\"#424242\">end</text>",
        x_of(None)
    );
    let prefix = format!("workflow:{}:", w.run_id);
    let (mut runs, mut taken) = (0usize, 0usize);
    for look in &w.looks {
        let x = x_of(look.after_step);
        for (k, r) in look.hermes.runs.iter().enumerate().skip(runs) {
            let node = r.session_id.strip_prefix(&prefix).unwrap_or(&r.session_id);
            let end = look
                .hermes
                .terminal
                .get(&r.run_id)
                .map_or("not ended", String::as_str);
            let cx = x - col / 2.0 + 8.0 + ((k - runs) as f64 * 10.0) % (col - 8.0).max(10.0);
            let _ = write!(
                s,
                "<circle cx=\"{cx:.1}\" cy=\"{:.1}\" r=\"4\" fill=\"#37474f\"><title>{}</title></circle>",
                y_of(1),
                xml(&format!(
                    "run {} for step {node} ({end}; reply {:?})",
                    r.run_id, r.reply
                ))
            );
        }
        runs = runs.max(look.hermes.runs.len());
        for (k, d) in look.channel.taken.iter().enumerate().skip(taken) {
            let (colour, fate) = match d.reply {
                Reply::Answered => ("#2e7d32", "answered"),
                Reply::Lost => ("#c62828", "answer lost"),
                Reply::SenderGone => ("#ef6c00", "delivered after its sender was gone"),
            };
            let cx = x - col / 2.0 + 8.0 + ((k - taken) as f64 * 10.0) % (col - 8.0).max(10.0);
            let _ = write!(
                s,
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"8\" height=\"8\" fill=\"{colour}\"><title>{}</title></rect>",
                cx - 4.0,
                y_of(2) - 4.0,
                xml(&format!("delivery {} ({}): {fate}", d.id, d.deliver))
            );
        }
        taken = taken.max(look.channel.taken.len());
        let status = match &look.state {
            _ if look.damaged => "damaged".to_string(),
            Ok(Some(st)) => crate::check::workflow::status_word(st),
            Ok(None) => "no file".to_string(),
            Err(_) => "unreadable".to_string(),
        };
        let _ = write!(
            s,
            "<text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#1b5e20\" font-size=\"8\">{}</text>",
            y_of(3) + 3.0,
            xml(&status.replace("awaiting_", "awaiting "))
        );
    }
    let _ = write!(
        s,
        "<text x=\"6\" y=\"{:.1}\" fill=\"#666\">● run (hover: its step and end) · ■ delivery (green: answered; red: answer lost; orange: after its sender was killed) · ✕ kill or damage</text></svg>",
        height - 6.0
    );
    Some(s)
}
