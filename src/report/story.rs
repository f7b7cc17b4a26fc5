//! A case told in time, as inline SVG: one row per actor (the client aocheck plays, each
//! instance of the service, the provider, its webhooks, the service's labels), one column per
//! beat in the order they happened, each beat's words written whole (wrapped, never cut) with
//! its time. A beat that is the defect (a second charge for one order) is drawn red; a fault
//! aocheck landed, orange. Every word goes through `text::xml`: the service's words add no
//! markup.

use super::text::xml;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

/// How a beat is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tone {
    Plain,
    /// A fault aocheck landed (a hold, a kill, a lost reply, a forged event).
    Fault,
    /// What the verdict is about (a duplicate charge, a wrong label).
    Defect,
    /// A final label or a settled charge.
    Settled,
}

/// One thing that happened.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Beat {
    /// Milliseconds since the case started.
    pub ms: u64,
    /// Who did it (a row).
    pub actor: String,
    pub tone: Tone,
    pub text: String,
}

/// A case told as it happens: each step with its time since the start, and the beats of the
/// page's timeline (the deploy cases of either provider tell theirs through one).
#[derive(Debug)]
pub struct Telling {
    pub started: std::time::Instant,
    pub steps: Vec<String>,
    pub beats: Vec<Beat>,
}

impl Telling {
    /// A telling whose times count from `started`.
    pub fn at(started: std::time::Instant) -> Telling {
        Telling {
            started,
            steps: Vec::new(),
            beats: Vec::new(),
        }
    }
    /// Milliseconds since the start.
    pub fn ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }
    /// A step of the report's list only.
    pub fn step(&mut self, s: impl Into<String>) {
        let ms = self.ms();
        self.steps.push(format!("{ms:>6} ms  {}", s.into()));
    }
    /// A step that is also a beat of the timeline, by `actor`, now.
    pub fn told(&mut self, actor: &str, tone: Tone, s: impl Into<String>) {
        let ms = self.ms();
        self.told_at(ms, actor, tone, s);
    }
    /// A step and a beat timed at `ms` (a moment read before the thing was done).
    pub fn told_at(&mut self, ms: u64, actor: &str, tone: Tone, s: impl Into<String>) {
        let s = s.into();
        self.steps.push(format!("{ms:>6} ms  {s}"));
        self.beat_at(ms, actor, tone, s);
    }
    /// A beat of the timeline only.
    pub fn beat_at(&mut self, ms: u64, actor: &str, tone: Tone, text: String) {
        self.beats.push(Beat {
            ms,
            actor: actor.to_string(),
            tone,
            text,
        });
    }
}

/// Characters per line of a beat's words.
const WRAP: usize = 22;

fn wrap(s: &str) -> Vec<String> {
    let mut lines = vec![String::new()];
    for word in s.split_whitespace() {
        let mut w = word;
        loop {
            let cur = lines.last_mut().map_or(0, |l| l.chars().count());
            let n = w.chars().count();
            if cur > 0 && cur + 1 + n > WRAP {
                lines.push(String::new());
                continue;
            }
            if n > WRAP {
                // A word longer than a line (a key, an id) is split, never cut.
                let head: String = w.chars().take(WRAP).collect();
                let rest = &w[head.len()..];
                if let Some(l) = lines.last_mut() {
                    l.push_str(&head);
                }
                lines.push(String::new());
                w = rest;
                continue;
            }
            if let Some(l) = lines.last_mut() {
                if cur > 0 {
                    l.push(' ');
                }
                l.push_str(w);
            }
            break;
        }
    }
    lines.retain(|l| !l.is_empty());
    lines
}

/// The beats as SVG (`None` when there are none), in the order of their times.
pub fn svg(title: &str, beats: &[Beat]) -> Option<String> {
    if beats.is_empty() {
        return None;
    }
    let mut beats: Vec<&Beat> = beats.iter().collect();
    beats.sort_by_key(|b| b.ms);
    let mut actors: Vec<&str> = Vec::new();
    for b in &beats {
        if !actors.contains(&b.actor.as_str()) {
            actors.push(&b.actor);
        }
    }
    let wrapped: Vec<Vec<String>> = beats.iter().map(|b| wrap(&b.text)).collect();
    // Each row as tall as its tallest beat.
    let line_h = 12.0_f64;
    let mut row_y = Vec::new();
    let mut y = 30.0_f64;
    for a in &actors {
        let tallest = beats
            .iter()
            .zip(&wrapped)
            .filter(|(b, _)| b.actor == *a)
            .map(|(_, w)| w.len())
            .max()
            .unwrap_or(1);
        row_y.push(y);
        y += 22.0 + line_h * tallest as f64;
    }
    let (left, col) = (130.0_f64, 140.0_f64);
    let width = left + col * beats.len() as f64 + 10.0;
    let height = y + 6.0;
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg class=\"timeline story\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {width} {height}\" width=\"{width}\" role=\"img\" aria-label=\"timeline of {}\" font-family=\"system-ui,sans-serif\" font-size=\"10\">",
        xml(title)
    );
    for (a, ry) in actors.iter().zip(&row_y) {
        let _ = write!(
            s,
            "<line x1=\"0\" x2=\"{width}\" y1=\"{}\" y2=\"{}\" stroke=\"#eee\"/><text x=\"4\" y=\"{}\" font-weight=\"bold\">{}</text>",
            ry - 14.0,
            ry - 14.0,
            ry,
            xml(a)
        );
    }
    for (i, (b, lines)) in beats.iter().zip(&wrapped).enumerate() {
        let x = left + col * i as f64;
        let row = actors.iter().position(|a| *a == b.actor).unwrap_or(0);
        let ry = row_y[row];
        let colour = match b.tone {
            Tone::Plain => "#424242",
            Tone::Fault => "#e65100",
            Tone::Defect => "#c62828",
            Tone::Settled => "#2e7d32",
        };
        let _ = write!(
            s,
            "<line x1=\"{x}\" x2=\"{x}\" y1=\"16\" y2=\"{height}\" stroke=\"#f3f3f3\"/><text x=\"{x}\" y=\"12\" fill=\"#757575\">{} ms</text><circle cx=\"{}\" cy=\"{}\" r=\"4\" fill=\"{colour}\"><title>{}</title></circle>",
            b.ms,
            x + 4.0,
            ry - 3.0,
            xml(&b.text)
        );
        let weight = if b.tone == Tone::Defect {
            " font-weight=\"bold\""
        } else {
            ""
        };
        for (k, l) in lines.iter().enumerate() {
            let _ = write!(
                s,
                "<text x=\"{}\" y=\"{}\" fill=\"{colour}\"{weight}>{}</text>",
                x + 11.0,
                ry + line_h * k as f64,
                xml(l)
            );
        }
    }
    s.push_str("</svg>");
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_wrapped_whole_and_escaped() {
        let long = "a charge pay_0123456789abcdef0123456789 of <2000> usd & more";
        let w = wrap(long);
        assert_eq!(w.concat().replace(' ', ""), long.replace(' ', ""));
        assert!(w.iter().all(|l| l.chars().count() <= WRAP), "{w:?}");
        let out = svg(
            "case <x>",
            &[Beat {
                ms: 5,
                actor: "fake-payments".into(),
                tone: Tone::Defect,
                text: long.into(),
            }],
        )
        .expect("svg");
        assert!(
            !out.contains("<2000>") && out.contains("&lt;2000&gt;"),
            "{out}"
        );
        assert!(out.contains("case &lt;x&gt;"));
        assert!(out.contains("#c62828"));
        assert_eq!(svg("none", &[]), None);
    }
}
