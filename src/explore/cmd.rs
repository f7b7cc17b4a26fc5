//! `aocheck explore`'s command line.

use super::schedule::Workload;
use super::{ExploreOptions, Progress};
use crate::exit;
use crate::store::StoreSpec;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct ExploreArgs {
    #[command(flatten)]
    pub sut: crate::setup::SutArgs,
    /// What to explore: `aoc` (the coordination domain and the payment provider), `hermes` (the
    /// Hermes operator connector and fake-hermes), `all` (the two by turns) or `workflow` (seed
    /// 002's Hermes Workflow runner over fake-hermes and the channel; in process only).
    #[arg(long, default_value = "aoc")]
    pub workload: String,
    /// The seed (printed first; the same seed gives the same schedules).
    #[arg(long)]
    pub seed: Option<u64>,
    /// How many schedules (of this shard) to run.
    #[arg(long)]
    pub schedules: Option<u64>,
    /// How long to explore, e.g. `60s`, `5m` (with --schedules: whichever ends first),
    /// shrinking included: past it, each finding keeps the smallest schedule found so far.
    #[arg(long)]
    pub time: Option<String>,
    /// `memory`, `sqlite:PATH` or `postgres:URL` (default: SQLite in the output folder).
    #[arg(long)]
    pub store: Option<StoreSpec>,
    /// Output folder (default: `reports/explore/<run id>`).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// `K/N`: explore the K-th of N disjoint parts of the seed's schedules.
    #[arg(long, default_value = "1/1")]
    pub shard: String,
    /// Candidates tried per finding while shrinking.
    #[arg(long, default_value_t = 400)]
    pub shrink_budget: u32,
    /// Runs of a shrinking candidate before it is taken not to reproduce.
    #[arg(long, default_value_t = 2)]
    pub tries: u32,
    /// Replays of each shrunk schedule, to say how often it reproduces.
    #[arg(long, default_value_t = 5)]
    pub replays: u32,
    /// Stop at the first finding a replay reproduces (after shrinking it): how long finding it
    /// takes. A finding no replay reproduces is reported, and the exploration goes on.
    #[arg(long)]
    pub stop_on_finding: bool,
    /// Schedules run at once (default: the number of cores; through the protocol, twice that,
    /// since its processes mostly wait). Results are taken in schedule order: the report does
    /// not depend on it.
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Sign `explore.json` with this Ed25519 private key (PEM): `explore.dsse.json`, which
    /// `aocheck verify` checks.
    #[arg(long)]
    pub sign: Option<PathBuf>,
}

/// Signs every file of the exploration's folder (`explore.json`, its other formats, the
/// findings' case files): `out/explore.dsse.json`, predicate `…/explore-run/v1`.
pub fn sign_report(
    out: &std::path::Path,
    report: &super::report::ExploreReport,
    key: &ed25519_dalek::SigningKey,
) -> Result<(), String> {
    let predicate = serde_json::json!({
        "harness": {
            "name": "aocheck",
            "version": report.aocheck_version,
            "commit": env!("AOCHECK_GIT_COMMIT"),
        },
        "report": "explore.json",
        "run_id": report.run_id,
        "seed": report.seed,
        "shard": report.shard,
        "workload": report.workload,
        "store": {"kind": report.store},
        "implementation": report.implementation,
        "schedules": report.schedules,
        "findings": report.findings.len(),
    });
    crate::report::attest::seal(
        out,
        "explore.dsse.json",
        crate::report::attest::EXPLORE_RUN_PREDICATE_TYPE,
        predicate,
        key,
    )
    .map(|_| ())
}

/// `60s`, `5m`, `1h`, or plain seconds.
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let (num, unit) = match s.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => (&s[..i], &s[i..]),
        None => (s, "s"),
    };
    let n: u64 = num.parse().ok()?;
    let secs = match unit {
        "s" => n,
        "m" => n.checked_mul(60)?,
        "h" => n.checked_mul(3600)?,
        _ => return None,
    };
    (secs > 0).then(|| Duration::from_secs(secs))
}

/// `K/N` with 1 ≤ K ≤ N.
pub fn parse_shard(s: &str) -> Option<(u64, u64)> {
    let (k, n) = s.split_once('/')?;
    let (k, n): (u64, u64) = (k.trim().parse().ok()?, n.trim().parse().ok()?);
    (k >= 1 && k <= n).then_some((k, n))
}

/// `--shard K/N` of `run` or `explore`, or the message that says how to write it (exit 3).
pub fn shard_arg(s: &str) -> Result<(u64, u64), u8> {
    parse_shard(s).ok_or_else(|| {
        eprintln!("error: --shard {s:?}: use K/N with 1 ≤ K ≤ N, e.g. 2/4");
        exit::INVALID_INPUT
    })
}

/// The flags that need more than clap: the workload, the shard, the time, no zero schedules or
/// jobs (`Err`: the exit code, the reason said on standard error).
#[allow(clippy::type_complexity)]
fn flags(a: &ExploreArgs) -> Result<(Workload, (u64, u64), Option<std::time::Duration>), u8> {
    let Some(workload) = Workload::parse(&a.workload) else {
        eprintln!(
            "error: --workload {:?} is unknown; use aoc, hermes, all or workflow",
            a.workload
        );
        return Err(exit::INVALID_INPUT);
    };
    let shard = shard_arg(&a.shard)?;
    let time = match &a.time {
        Some(t) => match parse_duration(t) {
            Some(d) => Some(d),
            None => {
                eprintln!("error: --time {t:?}: use seconds, or 60s, 5m, 1h");
                return Err(exit::INVALID_INPUT);
            }
        },
        None => None,
    };
    if a.schedules == Some(0) {
        eprintln!("error: --schedules 0 explores nothing; give 1 or more");
        return Err(exit::INVALID_INPUT);
    }
    if a.jobs == Some(0) {
        eprintln!(
            "error: --jobs 0: at least one schedule must run at a time; use --jobs 1 or more"
        );
        return Err(exit::INVALID_INPUT);
    }
    Ok((workload, shard, time))
}

pub async fn explore_cmd(a: ExploreArgs) -> u8 {
    // Every flag is checked before the output folder is made (a refused command leaves nothing).
    let (workload, shard, time) = match flags(&a) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let signing = match crate::setup::signing_key(a.sign.as_deref()) {
        Ok(k) => k,
        Err(code) => return code,
    };
    let seed = crate::setup::seed_or_draw(a.seed);
    println!("aocheck: explore seed {seed} (reproduce with --seed {seed})");
    let run_id = format!("explore-{}", uuid::Uuid::now_v7().simple());
    let out = match crate::setup::out_dir(a.out.as_ref(), "explore", &run_id) {
        Ok(o) => o,
        Err(code) => return code,
    };
    let _held = match crate::setup::lock_out(&out) {
        Ok(f) => f,
        Err(code) => return code,
    };
    // An envelope an earlier exploration left here must not stand beside this one's files.
    for stale in ["explore.dsse.json", crate::report::attest::PUBLIC_KEY_FILE] {
        let _ = std::fs::remove_file(out.join(stale));
    }
    let spec = a
        .store
        .clone()
        .unwrap_or_else(|| StoreSpec::Sqlite(out.join("store.db")));
    let store = match spec.open().await {
        Ok(s) => std::sync::Arc::new(s),
        Err(e) => {
            eprintln!("error: cannot open the store: {e}");
            return exit::UNREACHABLE;
        }
    };
    let kind = crate::store::Store::info(&*store).kind;
    let sut = match a.sut.spec(&out, &spec) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let sut_given = sut.is_some();
    let mut opts = ExploreOptions::new(workload, seed, run_id);
    opts.schedules = a.schedules;
    opts.time = time;
    opts.shard = shard;
    opts.shrink_budget = a.shrink_budget;
    opts.tries = a.tries;
    opts.replays = a.replays;
    opts.run.sut = sut;
    opts.check_reference = sut_given;
    opts.stop_on_finding = a.stop_on_finding;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    opts.jobs = match a.jobs {
        Some(j) => j,
        None if opts.run.sut.is_some() => 2 * cores,
        None => cores,
    };
    // A live bar when a person watches (standard error is a terminal), plain lines otherwise.
    let mut meter = super::out_progress::Meter::new(
        std::io::stderr().is_terminal(),
        opts.schedules.or(opts.time.is_none().then_some(100)),
        opts.time,
    );
    let mut progress = |p: Progress| {
        for line in meter.lines(&p) {
            println!("{line}");
        }
        let _ = std::io::stdout().flush();
    };
    let x = super::explore(store, &opts, &mut progress).await;
    meter.finish();
    if let Some(why) = &x.not_started {
        eprintln!(
            "error: the implementation could not be started, so nothing was explored (its first process, asked to join, {why}); check the --sut command (its stderr is in {})",
            out.join("sut").display()
        );
        return exit::UNREACHABLE;
    }
    let report = match super::report::write(&out, &x, &opts, kind) {
        Ok(r) => r,
        Err(e) => {
            eprintln!(
                "error: writing the explore report to {}: {e}",
                out.display()
            );
            return exit::INVALID_INPUT;
        }
    };
    // The store was moved into the exploration and is closed: its file is final.
    if let Some(k) = &signing
        && let Err(e) = sign_report(&out, &report, k)
    {
        eprintln!(
            "error: signing the explore report in {}: {e}",
            out.display()
        );
        return exit::INVALID_INPUT;
    }
    let undecided = report.undecided_total();
    for f in &x.findings {
        println!(
            "{}: {} → {} steps{}, reproduced {}/{}{}; replay: aocheck run --cases {}{}",
            f.key,
            f.steps_before,
            f.steps_after,
            if f.shrink_cut_short {
                " (shrinking cut short by --time)"
            } else {
                ""
            },
            f.reproduced,
            f.replays,
            f.reference
                .as_ref()
                .map(|r| format!(", on the reference: {r}"))
                .unwrap_or_default(),
            out.join("found").join(&f.case_file).display(),
            a.sut
                .sut
                .as_ref()
                .map(|s| format!(" --sut '{}'", s.replace('\'', "'\\''")))
                .unwrap_or_default()
        );
    }
    println!(
        "{} schedules: {} without a finding, {} distinct finding(s), {} undecided, {} unsupported; report in {}",
        x.schedules,
        x.clean,
        x.findings.len(),
        undecided,
        x.unsupported,
        out.display()
    );
    report.exit_code()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_shards_parse_or_are_refused() {
        assert_eq!(parse_duration("60s"), Some(Duration::from_secs(60)));
        assert_eq!(parse_duration("5m"), Some(Duration::from_secs(300)));
        assert_eq!(parse_duration("2"), Some(Duration::from_secs(2)));
        assert_eq!(parse_duration("0s"), None);
        assert_eq!(parse_duration("1d"), None);
        assert_eq!(parse_shard("2/4"), Some((2, 4)));
        assert_eq!(parse_shard("0/4"), None);
        assert_eq!(parse_shard("5/4"), None);
        assert_eq!(parse_shard("x"), None);
    }
}
