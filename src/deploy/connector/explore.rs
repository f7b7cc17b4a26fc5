//! `deploy explore` over a Hermes connector: its actions as [`super::super::actions`] draws and
//! runs them, each meeting one connector fault ([`HermesKind`]) or none and run as a case runs
//! its action ([`super::run_action`]).

use super::super::Providers;
use super::super::actions::{self, ActionKind, ActionRan};
use super::super::file::Loaded;
use super::{HermesKind, cannot_take, run_action};
use std::path::Path;

/// A connector's schedule of actions.
pub type ActionSchedule = actions::ActionSchedule<HermesKind>;
/// A connector's schedules, for `deploy explore`.
pub type Actions<'a> = actions::Actions<'a, HermesKind>;

impl ActionKind for HermesKind {
    fn all() -> &'static [Self] {
        HermesKind::ALL
    }
    fn name(self) -> &'static str {
        HermesKind::name(self)
    }
    fn cannot_take(self, d: &Loaded) -> Option<String> {
        cannot_take(d, self)
    }
    fn ambiguous(self) -> bool {
        matches!(
            self,
            HermesKind::LostStart | HermesKind::StartErrorAfterCommit
        )
    }
    /// An AIP Action id, as the cases' (seed 000's resume names its source so).
    fn occurrence(seed: u64, index: u64, k: u64) -> String {
        format!("act_x{seed}r{index}a{k}")
    }
    const CASE: &'static str = "CONNECTOR-SCHEDULE";
    const WHAT: &'static str = "a Hermes connector's actions";
    async fn run_action(
        d: &Loaded,
        kind: Option<Self>,
        occurrence: &str,
        p: &Providers,
        work: &Path,
        logs: &Path,
    ) -> ActionRan {
        run_action(d, kind, occurrence, p, work, logs).await
    }
}

/// Reads a connector's schedule file, every defect named with its step.
pub fn read_schedule(d: &Loaded, f: &Path) -> Result<ActionSchedule, String> {
    actions::read_schedule(d, f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explore::shrink::Shrinkable;
    use actions::{generate, schedule_yaml};
    use proptest::prelude::*;

    proptest! {
        /// A schedule is its seed's, draws only the faults given, and every candidate the
        /// shrinker tries is smaller.
        #[test]
        fn a_schedule_is_its_seeds_and_every_candidate_is_smaller(seed in 0u64..1000, i in 0u64..50, n in 1u64..4, k in 0usize..9) {
            let kinds = &HermesKind::ALL[..k];
            let s = generate(seed, i, n, kinds);
            prop_assert_eq!(&s, &generate(seed, i, n, kinds));
            prop_assert!(!s.steps.is_empty() && s.steps.len() as u64 <= n);
            prop_assert!(s.steps.iter().all(|x| x.fault.is_none_or(|f| kinds.contains(&f))));
            let weight = |s: &ActionSchedule| s.steps.len() * 10 + s.steps.iter().filter(|x| x.fault.is_some()).count();
            for c in s.smaller() {
                prop_assert!(weight(&c) < weight(&s));
            }
            let back: ActionSchedule = serde_saphyr::from_str(&schedule_yaml(&s)).expect("reads");
            prop_assert_eq!(back, s);
        }
    }
}
