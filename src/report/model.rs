//! The report model (versioned: `aocheck.report/1`) and what it must name (AOC §7): implementation
//! and provider-profile versions, the test-input digest, per occurrence its id, executor
//! generation, provider-binding digest, terminal or unresolved state, entry and authority state,
//! entry attempts, evidence sources and missing-knowledge flags; case results; the requirement ids
//! evaluated; bypass paths; the seed; the same-team label. Never credentials, tokens or raw requests.

use crate::aoc::composition::{BypassPath, CompositionStatus};
use crate::aoc::domain::Limits;
use crate::aoc::requirement::Req;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

pub const SCHEMA: &str = "aocheck.report/1";

pub use crate::check::verdict::{Failure, FaultReport, Verdict};

/// One Hermes operator binding at the end of a case, in AOC terms: the source Action is the
/// occurrence, the start claim the provider entry, `outcome_unknown` the unresolved state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperatorReport {
    pub label: String,
    /// The binding status (`no_binding` when the connector refused before writing one).
    pub status: String,
    /// `pending`, `unresolved` or `resolved` (AOC vocabulary).
    pub aoc_state: String,
    /// Hermes runs, approval decisions and stops really applied (fake-hermes ground truth).
    pub runs: u32,
    pub approvals: u32,
    pub stops: u32,
    pub delegated: bool,
    /// What the pinned Hermes cannot tell; never turned into a verdict.
    pub missing_knowledge: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OccurrenceReport {
    pub label: String,
    pub occurrence_id: String,
    pub executor_generation: u64,
    pub provider_binding_digest: Option<String>,
    pub state: crate::vocab::State,
    pub outcome: Option<crate::vocab::Outcome>,
    pub provider_entry_state: String,
    pub authority_state: crate::vocab::Authority,
    pub entry_attempts: u32,
    pub evidence_sources: Vec<String>,
    pub missing_knowledge: Vec<String>,
    /// Effects the provider's ground-truth ledger holds for this occurrence.
    pub provider_effects: u32,
    pub history_len: u64,
}

/// Why aocheck could not decide a case; it decides the exit code (`crate::exit`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HarnessCause {
    /// The implementation, a provider or a store could not be reached, hung, exited unasked or
    /// broke the protocol (exit 4).
    Unreachable,
    /// What the case needs could not be established: a declared fault never fired, or the
    /// implementation speaks another protocol version (exit 2).
    Undecided,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CaseReport {
    pub id: String,
    pub title: String,
    pub file: String,
    /// The SHA-256 of the case file's bytes as the run read them (empty when not read).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub file_sha256: String,
    /// The case's evidence (`check::replay::Tape` as JSON), written to `evidence/<case>.json`
    /// beside the report, never inside it.
    #[serde(skip)]
    pub evidence: Option<std::sync::Arc<serde_json::Value>>,
    /// The page's timeline of the case, drawn from its evidence when the evidence was written
    /// to disk as the case ended (and dropped from memory: a run's memory does not grow with
    /// the evidence of the cases it has finished).
    #[serde(skip)]
    pub timeline: Option<String>,
    pub requirements: Vec<String>,
    pub verdict: Verdict,
    pub failures: Vec<Failure>,
    pub harness: Option<String>,
    /// Why, when `harness` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub harness_cause: Option<HarnessCause>,
    /// Why the case could not be exercised on this configuration (verdict `unsupported`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsupported: Option<String>,
    pub faults: Vec<FaultReport>,
    pub steps: Vec<String>,
    /// Facts some check examined, per requirement id (a requirement passes only above zero).
    pub facts: BTreeMap<String, u32>,
    /// Declared requirements no check examined a fact about: the case cannot pass them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_established: Vec<String>,
    /// Expectations aocheck could not decide, and why (their requirements are not established).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub undecided: Vec<String>,
    /// The implementation's declared key rule, by which the provider's ledger was attributed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_rule: Option<String>,
    pub occurrences: Vec<OccurrenceReport>,
    /// Hermes operator bindings (Hermes cases only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub operators: Vec<OperatorReport>,
    pub provider_profile: Option<serde_json::Value>,
    pub bypass_paths: Vec<BypassPath>,
    pub composition: CompositionStatus,
    pub limits: Option<Limits>,
    /// The implementation that answered (process runs only: `aocheck-sut/2` self-description).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub implementation: Option<serde_json::Value>,
    /// Every implementation process the case started, and how each ended (process runs only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sut_processes: Vec<String>,
    /// The service's logs, relative to the report's folder (deployment runs only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub logs: Vec<String>,
    pub millis: u64,
    pub repro: String,
}

/// `s` as one line of at most `max` characters: control characters (an implementation's words
/// can hold any) become spaces.
pub fn one_line(s: &str, max: usize) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(max)
        .collect()
}

impl CaseReport {
    /// Why the case did not pass, in one string: each failure (requirement and message), the
    /// harness error, the unsupported reason.
    pub fn reasons(&self) -> String {
        self.failures
            .iter()
            .map(|f| format!("{} {}", f.requirement, f.msg))
            .chain(self.harness.clone())
            .chain(self.unsupported.clone())
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// A case's report before it runs: `not_run`, nothing found yet.
    pub fn new(id: &str, title: &str, file: &Path, requirements: Vec<String>) -> Self {
        CaseReport {
            id: id.to_string(),
            title: title.to_string(),
            file: file.display().to_string(),
            file_sha256: String::new(),
            evidence: None,
            timeline: None,
            requirements,
            verdict: Verdict::NotRun,
            failures: Vec::new(),
            harness: None,
            harness_cause: None,
            unsupported: None,
            faults: Vec::new(),
            steps: Vec::new(),
            facts: BTreeMap::new(),
            not_established: Vec::new(),
            undecided: Vec::new(),
            key_rule: None,
            occurrences: Vec::new(),
            operators: Vec::new(),
            provider_profile: None,
            bypass_paths: Vec::new(),
            composition: CompositionStatus::Supported,
            limits: None,
            implementation: None,
            sut_processes: Vec::new(),
            logs: Vec::new(),
            millis: 0,
            repro: String::new(),
        }
    }
    pub fn harness_error(self, msg: String, started: std::time::Instant) -> Self {
        self.harness_error_because(HarnessCause::Unreachable, msg, started)
    }

    /// A harness error, saying why aocheck could not decide.
    pub fn harness_error_because(
        mut self,
        cause: HarnessCause,
        msg: String,
        started: std::time::Instant,
    ) -> Self {
        self.verdict = Verdict::HarnessError;
        self.harness = Some(msg);
        self.harness_cause = Some(cause);
        self.millis = started.elapsed().as_millis() as u64;
        self
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RequirementReport {
    pub id: Req,
    pub verdict: Verdict,
    pub cases: Vec<String>,
    pub checkers: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub cases: usize,
    pub pass: usize,
    pub fail: usize,
    pub other: usize,
}

impl Summary {
    /// The counts of these case reports.
    pub fn of(cases: &[CaseReport]) -> Self {
        let pass = cases.iter().filter(|c| c.verdict == Verdict::Pass).count();
        let fail = cases.iter().filter(|c| c.verdict == Verdict::Fail).count();
        Summary {
            cases: cases.len(),
            pass,
            fail,
            other: cases.len() - pass - fail,
        }
    }
}

/// A report's headline count: the cases that passed of the cases that ran, and, where some did
/// not run, how many were unsupported or not run ("6 of 6 cases passed (1 unsupported)"), so an
/// all-pass run never reads as a shortfall and a case that could not run never counts as one
/// that failed to pass.
pub fn passed_of_ran(cases: &[CaseReport]) -> String {
    let count = |v: Verdict| cases.iter().filter(|c| c.verdict == v).count();
    let (unsupported, not_run) = (count(Verdict::Unsupported), count(Verdict::NotRun));
    let ran = cases.len() - unsupported - not_run;
    let mut aside = Vec::new();
    if unsupported > 0 {
        aside.push(format!("{unsupported} unsupported"));
    }
    if not_run > 0 {
        aside.push(format!("{not_run} not run"));
    }
    format!(
        "{} of {ran} cases passed{}",
        count(Verdict::Pass),
        if aside.is_empty() {
            String::new()
        } else {
            format!(" ({})", aside.join(", "))
        }
    )
}

/// The whole report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub schema: String,
    pub run_id: String,
    pub seed: u64,
    pub started_at: String,
    pub aocheck_version: String,
    pub implementation: serde_json::Value,
    pub provider_profile: Option<serde_json::Value>,
    pub store: serde_json::Value,
    pub test_input_digest: String,
    pub requirements: Vec<RequirementReport>,
    pub cases: Vec<CaseReport>,
    pub summary: Summary,
    pub disclaimer: String,
    /// Set when the run was stopped (`--timeout`) before every case ended: why. The cases that
    /// did not end are listed with the verdict `not_run`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incomplete: Option<String>,
    /// The part of the suite this run judged (`--shard K/N`): every N-th case from the K-th.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<Shard>,
    /// What the run made of an expectations file (`--expect`, `aocheck.toml`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expectations: Option<ExpectationsOutcome>,
}

/// What a run made of an expectations file (the rules: `crate::ci::expect`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpectationsOutcome {
    pub file: String,
    /// Failed cases every failed requirement of which an entry covers.
    pub expected_failures: Vec<String>,
    /// Failed cases with a failure no entry covers (these fail the run).
    pub unexpected_failures: Vec<String>,
    /// Entries (named as in the file) that covered no failure although a case they name ran.
    pub unexpected_passes: Vec<String>,
    /// Entries whose cases did not run (filtered out, or not run): neither expected nor passing.
    pub not_exercised: Vec<String>,
    /// Whether an unexpected pass fails the run (`--strict`).
    pub strict: bool,
}

impl ExpectationsOutcome {
    /// Whether the run fails for a requirement once the expected failures are set aside.
    pub fn fails(&self) -> bool {
        !self.unexpected_failures.is_empty() || (self.strict && !self.unexpected_passes.is_empty())
    }
}

/// One part of a sharded run: cases `k-1`, `k-1+n`, … of the suite (in file order), and the
/// digest of the whole suite's case files, so that shards of different suites are not merged.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    pub k: u64,
    pub n: u64,
    pub suite_digest: String,
    pub suite_cases: usize,
}

/// The footer of a run judged through the protocol, of an implementation that is not aocheck's
/// own reference: aocheck did not write it, so no same-team label applies to it.
pub const DISCLAIMER_THIRD_PARTY: &str = "Implementation under test judged against aocheck's synthetic providers. Passing these cases shows consistency with the AOC profile as aocheck reads it (docs/decisions.md); it does not establish live-provider correctness, deployment or adoption. Fencing applies only inside the coordination domain: it revokes no credential and stops no bypass path.";

pub const DISCLAIMER: &str = "Same-team reference implementation and synthetic provider. Passing these cases shows consistency with the AOC profile as aocheck reads it (docs/decisions.md); it does not establish independent interoperability, live-provider correctness, deployment or adoption. Fencing applies only inside the coordination domain: it revokes no credential and stops no bypass path.";

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    /// The headline counts the cases that ran: an all-pass run is "N of N", a case that could
    /// not run is said beside the count, never counted as one that did not pass.
    #[rstest]
    #[case::all_passed(&[Verdict::Pass, Verdict::Pass], "2 of 2 cases passed")]
    #[case::one_failed(&[Verdict::Pass, Verdict::Fail], "1 of 2 cases passed")]
    #[case::a_harness_error_ran(&[Verdict::Pass, Verdict::HarnessError], "1 of 2 cases passed")]
    #[case::deploy_history(&[Verdict::Pass, Verdict::Pass, Verdict::Unsupported], "2 of 2 cases passed (1 unsupported)")]
    #[case::cut_short(&[Verdict::Fail, Verdict::Unsupported, Verdict::NotRun, Verdict::NotRun], "0 of 1 cases passed (1 unsupported, 2 not run)")]
    fn the_headline_counts_the_cases_that_ran(#[case] verdicts: &[Verdict], #[case] want: &str) {
        let cases: Vec<CaseReport> = verdicts
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let mut c = CaseReport::new(&format!("C-{i}"), "t", Path::new("c.yaml"), vec![]);
                c.verdict = *v;
                c
            })
            .collect();
        assert_eq!(passed_of_ran(&cases), want);
    }
}
