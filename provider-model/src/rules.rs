//! Targeted fault rules: a rule matches some requests and fires on the `nth` … `nth + times - 1`
//! of them. Each fake says what a rule matches and which faults it has; the counting, and the
//! checks every plan shares, are here.

use serde::{Deserialize, Serialize};

/// The default of `nth` and `times`.
pub fn one() -> u32 {
    1
}

/// A fault plan: rules in priority order (`{"rules": [...]}`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan<R> {
    pub rules: Vec<R>,
}

impl<R> Default for Plan<R> {
    fn default() -> Self {
        Plan { rules: Vec::new() }
    }
}

/// What a fake checks of one of its rules beyond the ordinals.
pub trait Check: Targeted {
    fn check(&self, at: &str, out: &mut Defects);
}

impl<R: Check> Plan<R> {
    /// Every defect at once, naming the rule and field.
    pub fn validate(&self) -> Vec<String> {
        let mut out = Defects::default();
        for (i, r) in self.rules.iter().enumerate() {
            let at = format!("rules[{i}]");
            out.ordinals(&at, r);
            r.check(&at, &mut out);
        }
        out.0
    }
}

/// Implements [`Targeted`] for a rule type with `nth` and `times` fields.
#[macro_export]
macro_rules! targeted {
    ($rule:ty) => {
        impl $crate::rules::Targeted for $rule {
            fn nth(&self) -> u32 {
                self.nth
            }
            fn times(&self) -> u32 {
                self.times
            }
        }
    };
}

/// A rule with its counters (what `GET /_control/faults` shows).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RuleState<R> {
    pub rule: R,
    /// Matching requests seen.
    pub seen: u32,
    /// Times it fired.
    pub fired: u32,
}

impl<R> RuleState<R> {
    pub fn new(rule: R) -> Self {
        RuleState {
            rule,
            seen: 0,
            fired: 0,
        }
    }
}

/// A rule that fires on an ordinal range of the requests it matches.
pub trait Targeted {
    /// 1-based ordinal among the matching requests.
    fn nth(&self) -> u32;
    /// How many consecutive matches it fires on.
    fn times(&self) -> u32;
}

/// Counts one request against every rule it `matches` (in priority order); returns the first
/// rule in its ordinal range whose fault `applies` to this request, with its index. A rule in
/// range whose fault does not apply is counted as seen, not as fired.
pub fn select<R: Targeted>(
    states: &mut [RuleState<R>],
    matches: impl Fn(&R) -> bool,
    applies: impl Fn(&R) -> bool,
) -> Option<(usize, &R)> {
    let mut chosen = None;
    for (i, s) in states.iter_mut().enumerate() {
        if !matches(&s.rule) {
            continue;
        }
        s.seen += 1;
        if chosen.is_none()
            && s.seen >= s.rule.nth()
            && s.fired < s.rule.times()
            && applies(&s.rule)
        {
            s.fired += 1;
            chosen = Some(i);
        }
    }
    chosen.map(|i| (i, &states[i].rule))
}

/// The checks every plan shares, each defect naming the rule (`at`) and field.
#[derive(Debug, Default)]
pub struct Defects(pub Vec<String>);

impl Defects {
    pub fn ordinals(&mut self, at: &str, r: &impl Targeted) {
        if r.nth() == 0 {
            self.0.push(format!("{at}.nth: ordinals start at 1"));
        }
        if r.times() == 0 {
            self.0.push(format!("{at}.times: must be at least 1"));
        }
    }
    /// `reject(status)`: refused before any effect.
    pub fn reject(&mut self, at: &str, status: u16) {
        if !(400..=599).contains(&status) {
            self.0.push(format!(
                "{at}.fault.status: reject needs a 4xx or 5xx status, got {status}"
            ));
        }
    }
    /// `commit_then(status)`: the effect happens, then an error.
    pub fn commit_then(&mut self, at: &str, status: u16) {
        if !(500..=599).contains(&status) {
            self.0.push(format!(
                "{at}.fault.status: commit_then needs a 5xx status, got {status}"
            ));
        }
    }
    pub fn delay(&mut self, at: &str, ms: u64) {
        if ms > 600_000 {
            self.0.push(format!(
                "{at}.fault.ms: at most 600000 (10 minutes), got {ms}"
            ));
        }
    }
    pub fn hold(&mut self, at: &str, name: &str) {
        if name.trim().is_empty() {
            self.0.push(format!("{at}.fault.name: name the hold"));
        }
    }
    pub fn push(&mut self, defect: String) {
        self.0.push(defect);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct R(u32, u32, bool);
    impl Targeted for R {
        fn nth(&self) -> u32 {
            self.0
        }
        fn times(&self) -> u32 {
            self.1
        }
    }

    #[test]
    fn a_rule_fires_on_its_ordinal_range_of_matching_requests_only() {
        let mut s = vec![
            RuleState::new(R(2, 2, true)),
            RuleState::new(R(1, 1, false)),
        ];
        let fired: Vec<bool> = (0..5)
            .map(|_| select(&mut s, |r| r.2, |_| true).is_some())
            .collect();
        assert_eq!(fired, [false, true, true, false, false]);
        assert_eq!((s[0].seen, s[0].fired), (5, 2));
        assert_eq!((s[1].seen, s[1].fired), (0, 0));
    }

    #[test]
    fn shared_checks_name_rule_and_field() {
        let mut d = Defects::default();
        d.ordinals("rules[0]", &R(0, 0, true));
        d.reject("rules[1]", 200);
        d.commit_then("rules[2]", 404);
        d.delay("rules[3]", 600_001);
        d.hold("rules[4]", " ");
        assert_eq!(d.0.len(), 6, "{:?}", d.0);
        assert!(d.0[0].starts_with("rules[0].nth"));
        assert!(d.0[5].starts_with("rules[4].fault.name"));
    }
}
