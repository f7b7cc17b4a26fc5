//! What an exploration shows while it runs, never into a report file: on a terminal, a live
//! bar (schedules done of the budget, or time spent of the time budget; the rate per minute;
//! the findings so far), with a line above it per finding; elsewhere (a CI log, a pipe), plain
//! lines: at most one every [`PLAIN_EVERY`], and one per finding as it is found.

use super::Progress;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::time::Duration;

/// The least time between two plain progress lines.
pub const PLAIN_EVERY: Duration = Duration::from_secs(5);

/// The progress of one exploration, on a live bar or as plain lines.
#[derive(Debug)]
pub struct Meter {
    bar: Option<ProgressBar>,
    /// The schedules this shard runs at most, and the time budget.
    schedules: Option<u64>,
    time: Option<Duration>,
    /// When the last plain line was printed (time since the start).
    last: Duration,
}

/// `12.5s`, `3m05s`.
fn clock(d: Duration) -> String {
    let s = d.as_secs();
    if s < 60 {
        format!("{:.1}s", d.as_secs_f64())
    } else {
        format!("{}m{:02}s", s / 60, s % 60)
    }
}

impl Meter {
    /// A live bar on standard error when `live`, plain lines otherwise.
    pub fn new(live: bool, schedules: Option<u64>, time: Option<Duration>) -> Self {
        let bar = live.then(|| {
            // By schedules when there is a budget of them, else by seconds of the time budget.
            let (len, template) = match (schedules, time) {
                (Some(n), _) => (
                    n,
                    "{spinner} {elapsed:>4} [{bar:30}] {pos}/{len} schedules · {msg}",
                ),
                (None, Some(t)) => (
                    t.as_secs().max(1),
                    "{spinner} {elapsed:>4} [{bar:30}] of {prefix} · {msg}",
                ),
                (None, None) => (0, "{spinner} {elapsed:>4} {msg}"),
            };
            let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
            if let Ok(style) = ProgressStyle::with_template(template) {
                bar.set_style(style.progress_chars("=> "));
            }
            if let Some(t) = time {
                bar.set_prefix(clock(t));
            }
            bar.enable_steady_tick(Duration::from_millis(250));
            bar
        });
        Meter {
            bar,
            schedules,
            time,
            last: Duration::ZERO,
        }
    }

    /// The plain lines an event calls for (on a live bar, none: the bar shows it, and a
    /// finding's line is printed above the bar).
    pub fn lines(&mut self, p: &Progress) -> Vec<String> {
        match p {
            Progress::Schedule {
                done,
                findings,
                elapsed,
            } => {
                let rate = *done as f64 * 60.0 / elapsed.as_secs_f64().max(0.001);
                let msg = format!("{rate:.0}/min · {findings} finding(s)");
                if let Some(bar) = &self.bar {
                    match (self.schedules, self.time) {
                        (Some(_), _) => bar.set_position(*done),
                        (None, Some(_)) => {
                            bar.set_position(elapsed.as_secs());
                        }
                        (None, None) => {}
                    }
                    bar.set_message(if self.schedules.is_some() {
                        msg
                    } else {
                        format!("{done} schedules · {msg}")
                    });
                    return Vec::new();
                }
                if elapsed.saturating_sub(self.last) < PLAIN_EVERY {
                    return Vec::new();
                }
                self.last = *elapsed;
                let of =
                    |budget: Option<String>| budget.map(|b| format!("/{b}")).unwrap_or_default();
                vec![format!(
                    "  {done}{} schedules, {}{} elapsed, {rate:.0}/min, {findings} finding(s)",
                    of(self.schedules.map(|n| n.to_string())),
                    clock(*elapsed),
                    of(self.time.map(clock)),
                )]
            }
            Progress::Finding { schedule, key } => {
                if let Some(bar) = &self.bar {
                    bar.set_message(format!("shrinking {key}"));
                }
                self.say(format!("  schedule {schedule}: {key}; shrinking"))
            }
            Progress::Shrunk {
                key,
                before,
                after,
                cut_short,
            } => match &self.bar {
                // Plain: the finding had its line; the command's closing lines say the rest.
                None => Vec::new(),
                Some(bar) => {
                    bar.println(format!(
                        "  {key}: shrunk from {before} to {after} steps{}",
                        if *cut_short {
                            " (cut short by --time)"
                        } else {
                            ""
                        }
                    ));
                    Vec::new()
                }
            },
        }
    }

    /// A line above the live bar, or as a plain line.
    fn say(&self, line: String) -> Vec<String> {
        match &self.bar {
            Some(bar) => {
                bar.println(line);
                Vec::new()
            }
            None => vec![line],
        }
    }

    /// Clears the live bar, before the command's closing lines.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aoc::Req;
    use crate::explore::Key;

    fn schedule(done: u64, ms: u64) -> Progress {
        Progress::Schedule {
            done,
            findings: 0,
            elapsed: Duration::from_millis(ms),
        }
    }

    #[test]
    fn plain_lines_come_at_most_every_few_seconds_and_once_per_finding() {
        let mut m = Meter::new(false, Some(1000), Some(Duration::from_secs(60)));
        // A schedule every 100 ms for 21 s: four lines (at 5, 10, 15 and 20 s).
        let mut lines = Vec::new();
        for i in 1..=210u64 {
            lines.extend(m.lines(&schedule(i, i * 100)));
        }
        assert_eq!(lines.len(), 4, "{lines:#?}");
        assert_eq!(
            lines[0],
            "  50/1000 schedules, 5.0s/1m00s elapsed, 600/min, 0 finding(s)"
        );
        let key = Key {
            checker: "effect_as_asked".into(),
            requirement: Req::R004,
        };
        let found = m.lines(&Progress::Finding {
            schedule: 7,
            key: key.clone(),
        });
        assert_eq!(found.len(), 1);
        assert!(found[0].contains("schedule 7") && found[0].contains("effect_as_asked"));
        let shrunk = m.lines(&Progress::Shrunk {
            key,
            before: 20,
            after: 5,
            cut_short: false,
        });
        assert!(shrunk.is_empty());
    }

    #[test]
    fn a_live_bar_prints_no_plain_line() {
        // A bar drawn to a hidden target: what it would show goes nowhere here.
        let mut m = Meter::new(true, None, Some(Duration::from_secs(30)));
        if let Some(b) = &m.bar {
            b.set_draw_target(ProgressDrawTarget::hidden());
        }
        for i in 1..=100u64 {
            assert!(m.lines(&schedule(i, i * 1000)).is_empty());
        }
        assert_eq!(m.bar.as_ref().map(|b| b.position()), Some(100));
        m.finish();
    }
}
