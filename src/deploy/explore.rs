//! `aocheck deploy explore FILE`: seeded random schedules against a deployment (a payment
//! service's orders one after another, each meeting one fault or none at its first payment
//! creation; a connector's actions, each meeting one of the connector faults or none), each
//! judged by the provider's ledger; the first failing schedule is shrunk (orders or actions
//! dropped, faults removed or simplified, while the same checker still fails) and written as a
//! schedule file that `aocheck deploy run FILE --schedule S` replays, with the run's reports.

use super::explorer::Explorer;
use super::file::Loaded;
use super::{Kind, Providers, Ran, Schedule, Step, run_schedule};
use crate::aoc::requirement::Req;
use crate::explore::rng::Rng;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

#[derive(clap::Args, Debug)]
pub struct ExploreArgs {
    /// The deploy file (`aocheck-deploy.yaml`).
    pub file: PathBuf,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// How many schedules to try.
    #[arg(long, default_value_t = 8)]
    pub runs: u64,
    /// The most orders in one schedule.
    #[arg(long, default_value_t = 2)]
    pub orders: u64,
    /// Where the findings, the shrunk schedule and its reports go (default
    /// `reports/runs/deploy-explore-<name>`).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// How many shrinking runs at most.
    #[arg(long, default_value_t = 12)]
    pub shrink_runs: u32,
}

/// The schedule of run `index` of `seed`: 1 to `orders` orders, each with a fault or none.
pub fn generate(seed: u64, index: u64, orders: u64, instances: u32, webhooks: bool) -> Schedule {
    let mut rng = Rng::schedule(seed, index);
    let n = 1 + rng.below(orders.max(1));
    // No fault, or one the deployment can take, in the vocabulary's order.
    let kinds: Vec<Option<Kind>> = std::iter::once(None)
        .chain(
            Kind::ALL
                .iter()
                .filter(|k| k.available(instances, webhooks))
                .map(|k| Some(*k)),
        )
        .collect();
    Schedule {
        steps: (0..n)
            .map(|k| Step {
                occurrence: format!("x{seed}-{index}-{k}"),
                fault: *rng.pick(&kinds),
            })
            .collect(),
    }
}

impl crate::explore::shrink::Shrinkable for Schedule {
    fn smaller(&self) -> Vec<Schedule> {
        candidates(self)
    }
}

/// Smaller schedules to try, simplest first: an order dropped, a fault removed, a takeover made
/// a crash.
pub fn candidates(s: &Schedule) -> Vec<Schedule> {
    let mut out = Vec::new();
    if s.steps.len() > 1 {
        for i in 0..s.steps.len() {
            let mut c = s.clone();
            c.steps.remove(i);
            out.push(c);
        }
    }
    for i in 0..s.steps.len() {
        if s.steps[i].fault.is_some() {
            let mut c = s.clone();
            c.steps[i].fault = None;
            out.push(c);
        }
        if s.steps[i].fault == Some(Kind::Takeover) {
            let mut c = s.clone();
            c.steps[i].fault = Some(Kind::CrashAtHold);
            out.push(c);
        }
        if s.steps[i].fault == Some(Kind::Webhooks) {
            let mut c = s.clone();
            c.steps[i].fault = Some(Kind::ErrorAfterCommit);
            out.push(c);
        }
    }
    out
}

/// The requirements a run's findings fail.
fn failed(r: &Ran) -> BTreeSet<Req> {
    r.findings.iter().map(|f| f.requirement()).collect()
}

/// What a run's findings are, by checker and requirement: a shrunk schedule must fail the same
/// way, not merely the same requirement.
fn signature(r: &Ran) -> BTreeSet<(&'static str, Req)> {
    r.findings
        .iter()
        .map(|f| (f.checker(), f.requirement()))
        .collect()
}

/// A payment service's schedules: orders one after another, each with a fault or none.
#[derive(Debug)]
pub struct Orders<'a> {
    pub d: &'a Loaded,
    pub p: &'a Providers,
}

impl Explorer for Orders<'_> {
    type S = Schedule;
    fn generate(&self, seed: u64, index: u64, size: u64) -> Schedule {
        generate(
            seed,
            index,
            size,
            self.d.file.service.instances,
            self.d.file.webhook.is_some(),
        )
    }
    async fn run(&self, s: &Schedule, work: &Path, logs: &Path) -> Ran {
        run_schedule(self.d, self.p, work, logs, s).await
    }
    fn describe(&self, s: &Schedule) -> String {
        describe(s)
    }
    fn yaml(&self, s: &Schedule) -> String {
        schedule_yaml(s)
    }
    fn report(&self, s: &Schedule, ran: Ran, file: &Path) -> crate::report::model::Report {
        super::schedule_report(self.d, s, ran, file)
    }
    fn read(d: &Loaded, f: &Path) -> Result<Schedule, String> {
        let s = super::read_schedule(f)?;
        for (i, st) in s.steps.iter().enumerate() {
            if let Some(why) = st.fault.and_then(|k| super::cannot_take(d, k)) {
                return Err(format!("{}: steps[{i}].fault: {why}", f.display()));
            }
        }
        Ok(s)
    }
}

/// The first finding's checker and requirement.
fn first_signature(r: &Ran) -> Option<(&'static str, Req)> {
    r.findings.first().map(|f| (f.checker(), f.requirement()))
}

/// `aocheck deploy explore`; returns the exit code.
pub async fn explore_cmd(a: ExploreArgs) -> u8 {
    let loaded = match super::file::load(&a.file) {
        Ok(l) => l,
        Err(d) => {
            for x in d {
                eprintln!("{x}");
            }
            return crate::exit::INVALID_INPUT;
        }
    };
    if a.runs == 0 || a.orders == 0 {
        eprintln!("--runs and --orders: give at least 1");
        return crate::exit::INVALID_INPUT;
    }
    let out = a.out.clone().unwrap_or_else(|| {
        PathBuf::from("reports/runs").join(format!("deploy-explore-{}", loaded.file.name))
    });
    if let Err(e) = super::prepare_out(&out) {
        eprintln!("{e}");
        return crate::exit::INVALID_INPUT;
    }
    let p = match super::start_providers(&loaded).await {
        Ok(p) => p,
        Err(e) => {
            eprintln!("providers: {e}");
            return crate::exit::UNREACHABLE;
        }
    };
    match loaded.file.provider {
        super::file::ProviderKind::Payments => {
            explore_with(&Orders { d: &loaded, p: &p }, &loaded, &a, &out).await
        }
        super::file::ProviderKind::Hermes => {
            let e = super::connector::explore::Actions::new(&loaded, &p);
            explore_with(&e, &loaded, &a, &out).await
        }
        super::file::ProviderKind::Mcp => {
            let e = super::mcp::Calls::new(&loaded, &p);
            explore_with(&e, &loaded, &a, &out).await
        }
    }
}

/// Draws `a.runs` schedules, runs each until one fails, shrinks that one and writes it with
/// its reports.
async fn explore_with<E: Explorer>(e: &E, loaded: &Loaded, a: &ExploreArgs, out: &Path) -> u8 {
    let started = std::time::Instant::now();
    let run_at = async |name: &str, s: &E::S| {
        e.run(
            s,
            &out.join(super::WORK).join(name),
            &out.join(super::LOGS).join(name),
        )
        .await
    };
    let mut tried = Vec::new();
    let mut found: Option<(E::S, Ran)> = None;
    let mut undecided = 0;
    for i in 0..a.runs {
        let s = e.generate(a.seed, i, a.orders);
        let ran = run_at(&format!("run-{i}"), &s).await;
        let verdict = verdict_word(&ran);
        eprintln!(
            "run {}/{} {} → {verdict} ({:.1} s)",
            i + 1,
            a.runs,
            e.describe(&s),
            ran.millis as f64 / 1000.0
        );
        tried.push(serde_json::json!({"index": i, "schedule": s, "verdict": verdict}));
        if ran.undecided.is_some() {
            undecided += 1;
        }
        if !ran.findings.is_empty() {
            found = Some((s, ran));
            break;
        }
    }
    let Some((original, first)) = found else {
        return no_finding(loaded, a, out, &tried, undecided, started);
    };
    // Shrink through explore's shrinker: keep the first smaller schedule that still fails the
    // way the found one failed first (its first finding's checker and requirement: the defect
    // found, not another one met on the way) and is decided, until none does or the budget is
    // spent.
    let target: BTreeSet<(&'static str, Req)> = first_signature(&first).into_iter().collect();
    let mut step = 0;
    let mut kept_ran: Option<Ran> = None;
    let shrunk =
        crate::explore::shrink::shrink(original.clone(), a.shrink_runs, None, async |c: &E::S| {
            step += 1;
            let ran = run_at(&format!("shrink-{step}"), c).await;
            let still = !signature(&ran).is_disjoint(&target) && ran.undecided.is_none();
            eprintln!(
                "shrink {step}: {} → {}",
                e.describe(c),
                if still {
                    "still fails: kept"
                } else {
                    "holds: dropped"
                }
            );
            if still {
                kept_ran = Some(ran);
            }
            still
        })
        .await;
    let best = shrunk.case;
    let best_ran = kept_ran.unwrap_or(first);
    let schedule_file = out.join("shrunk.yaml");
    if let Err(err) = std::fs::write(&schedule_file, e.yaml(&best)) {
        eprintln!("{}: {err}", schedule_file.display());
        return crate::exit::UNREACHABLE;
    }
    let doc = serde_json::json!({
        "schema": "aocheck.deploy-explore/1",
        "deploy_file": loaded.path.display().to_string(),
        "seed": a.seed,
        "runs": tried,
        "finding": {
            "original": original,
            "shrunk": best,
            "failures": best_ran.findings.iter().map(|f| serde_json::json!({
                "requirement": f.requirement().to_string(), "line": f.line()})).collect::<Vec<_>>(),
            "steps": best_ran.steps,
            "replay": format!("aocheck deploy run {} --schedule {}", loaded.path.display(), schedule_file.display()),
        },
    });
    if let Err(err) = write_json(&out.join("explore.json"), &doc) {
        eprintln!("{err}");
        return crate::exit::UNREACHABLE;
    }
    // The shrunk schedule's reports, as a run writes them.
    let mut report = e.report(&best, best_ran, &schedule_file);
    // The exploration's seed, so the summary names the run it came from.
    report.seed = a.seed;
    if let Err(err) = crate::ci::write_reports(&report, out, None) {
        eprintln!("cannot write the reports in {}: {err}", out.display());
        return crate::exit::UNREACHABLE;
    }
    println!(
        "deploy explore {}: a finding after {} schedules (seed {}); shrunk from {} to {}:",
        loaded.file.name,
        tried.len(),
        a.seed,
        e.describe(&original),
        e.describe(&best)
    );
    for c in &report.cases {
        for f in &c.failures {
            println!("  {} {}", f.requirement, f.msg);
        }
    }
    println!(
        "replay: aocheck deploy run {} --schedule {} ({:.1} s; reports in {})",
        loaded.path.display(),
        schedule_file.display(),
        started.elapsed().as_secs_f64(),
        out.display()
    );
    crate::exit::REQUIREMENT_FAILED
}

/// `deploy explore` found nothing: `explore.json` says so (a failure to write it is said and
/// is exit 4, never a silent success), and the exit code says whether every run was decided.
fn no_finding(
    loaded: &Loaded,
    a: &ExploreArgs,
    out: &Path,
    tried: &[serde_json::Value],
    undecided: u32,
    started: std::time::Instant,
) -> u8 {
    let doc = serde_json::json!({
        "schema": "aocheck.deploy-explore/1",
        "deploy_file": loaded.path.display().to_string(),
        "seed": a.seed, "runs": tried, "finding": null,
    });
    if let Err(e) = write_json(&out.join("explore.json"), &doc) {
        eprintln!("{e}");
        return crate::exit::UNREACHABLE;
    }
    println!(
        "deploy explore {}: no finding in {} schedules (seed {}), {undecided} undecided, in {:.1} s",
        loaded.file.name,
        tried.len(),
        a.seed,
        started.elapsed().as_secs_f64()
    );
    if undecided > 0 {
        crate::exit::UNDECIDED
    } else {
        crate::exit::OK
    }
}

fn verdict_word(r: &Ran) -> String {
    match (&r.undecided, r.findings.is_empty()) {
        (Some((_, why)), _) => format!("undecided: {why}"),
        (None, false) => format!(
            "fails {}",
            failed(r)
                .iter()
                .map(|r| r.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        (None, true) => "holds".into(),
    }
}

/// A schedule in one line: `order(fault) → …`.
pub fn describe(s: &Schedule) -> String {
    super::explorer::describe_steps(
        s.steps
            .iter()
            .map(|st| (st.occurrence.as_str(), st.fault.map(Kind::name))),
    )
}

/// A schedule file (YAML), as `--schedule` reads it.
pub fn schedule_yaml(s: &Schedule) -> String {
    super::explorer::steps_yaml(
        "orders one after another, each with the fault its first payment creation meets.",
        s.steps
            .iter()
            .map(|st| (st.occurrence.as_str(), st.fault.map(Kind::name))),
    )
}

fn write_json(p: &Path, v: &serde_json::Value) -> Result<(), String> {
    let text = serde_json::to_string_pretty(v).map_err(|e| e.to_string())?;
    std::fs::write(p, text).map_err(|e| format!("{}: {e}", p.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn a_schedule_is_its_seeds_and_every_candidate_is_smaller(seed in 0u64..1000, i in 0u64..50, n in 1u64..4, inst in 1u32..3, hooks: bool) {
            let s = generate(seed, i, n, inst, hooks);
            prop_assert_eq!(&s, &generate(seed, i, n, inst, hooks));
            if !hooks {
                prop_assert!(s.steps.iter().all(|x| x.fault != Some(Kind::Webhooks)));
            }
            prop_assert!(!s.steps.is_empty() && s.steps.len() as u64 <= n);
            if inst < 2 {
                prop_assert!(s.steps.iter().all(|x| x.fault != Some(Kind::Takeover)));
            }
            let weight = |s: &Schedule| s.steps.len() * 10
                + s.steps.iter().map(|x| match x.fault { None => 0, Some(Kind::Takeover | Kind::Webhooks) => 2, _ => 1 }).sum::<usize>();
            for c in candidates(&s) {
                prop_assert!(weight(&c) < weight(&s));
            }
        }

        #[test]
        fn a_schedule_file_reads_back_as_the_schedule(seed in 0u64..1000, i in 0u64..50) {
            let s = generate(seed, i, 3, 2, true);
            let back: Schedule = serde_saphyr::from_str(&schedule_yaml(&s)).expect("reads");
            prop_assert_eq!(back, s);
        }
    }
}
