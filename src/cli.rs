//! The command line: `run` (the suite, in process or through `--sut`), `explore` and `merge`
//! (seeded schedules, and the reports of their shards made one), `cases check`, `sut
//! reference` (the reference as an `aocheck-sut/2` process), `keygen` and `verify` (signed
//! evidence), and `store`, `profile` and `verify-history` to inspect what an implementation left.
//! Exit codes are `crate::exit`'s.

use crate::aoc::ids::OccurrenceId;
use crate::aoc::profile::ProviderProfile;
use crate::exit;
use crate::store::{Store, StoreSpec};
use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "aocheck",
    version = crate::VERSION,
    about = "Conformance harness for agent executors (AOC profile)"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the conformance suite against the reference implementation and write reports.
    Run(RunArgs),
    /// Explore seeded random fault schedules, judged by the invariants; shrink each finding to a
    /// case file.
    Explore(crate::explore::cmd::ExploreArgs),
    /// Judge a running service, not an adapter: start it as a deploy file says, drive it through
    /// its own business API, land faults at the provider, judge by the providers' ledgers.
    Deploy(crate::deploy::DeployArgs),
    /// Merge the explore reports of the shards of one exploration (`explore --shard K/N`) into
    /// one report set in OUT.
    Merge(crate::explore::merge::MergeArgs),
    /// Compare two run reports (plain, signed, or their folders): regressions, fixes, new and
    /// removed cases, changed missing-knowledge flags. Exit 1 on a regression.
    Diff {
        old: PathBuf,
        new: PathBuf,
        /// Verify signed reports with this public key first.
        #[arg(long)]
        key: Option<PathBuf>,
        /// `markdown` (a pull-request comment) or `json`.
        #[arg(long, default_value = "markdown")]
        format: String,
    },
    /// Check case files: every defect at once, with file, case, field, line and fix.
    Cases {
        #[command(subcommand)]
        what: CasesCmd,
    },
    /// Be a system under test: speak `aocheck-sut/2` on stdin/stdout.
    Sut {
        #[command(subcommand)]
        what: SutCmd,
    },
    /// Make an Ed25519 key pair for signing reports (PEM files KEY and KEY.pub).
    Keygen {
        /// Where to write the private key (the public key goes to PATH.pub).
        #[arg(default_value = "aocheck-signing.pem")]
        path: PathBuf,
        /// Replace an existing key pair at PATH and PATH.pub (without it, an existing file of
        /// either is never touched).
        #[arg(long)]
        force: bool,
    },
    /// Verify a signed run or exploration with a public key: the envelope (`report.dsse.json`,
    /// `explore.dsse.json`, or the folder holding it), then every file it names, byte for byte,
    /// and that the folder holds no file it does not name.
    Verify {
        /// The run's folder or its envelope.
        #[arg(value_name = "DIR|ENVELOPE")]
        envelope: PathBuf,
        #[arg(long)]
        key: PathBuf,
    },
    /// Derive every verdict of a run again from its evidence folder alone (no implementation, no
    /// provider) and compare with its report: exit 0 when every verdict is the same, 1 when any
    /// differs (each difference listed).
    Analyze {
        /// The run's folder (`report.json` and `evidence/`).
        dir: PathBuf,
        /// Verify the folder's signature with this public key first (exit 5 if it fails).
        #[arg(long)]
        key: Option<PathBuf>,
    },
    /// Hold a Hermes Workflow validator (seed 002) to its conformance set: every row of the
    /// seed's rule table, graphs it must accept and graphs it must refuse with their defects.
    /// Without `--sut`, the reference's validator; with it, the implementation's, asked through
    /// `aocheck-sut/2`'s `workflow_validate`. Exit 0 when every row is met, 1 when any is
    /// missed (each listed), 2 when the implementation does not list the operation.
    WorkflowValidator {
        #[command(flatten)]
        sut: crate::setup::SutArgs,
        /// The set (YAML); default: the one shipped (`cases/workflow/sets/validator.yaml`).
        #[arg(long)]
        set: Option<PathBuf>,
        /// Where the implementation's process log goes (`sut/workflow-validator/` in it).
        #[arg(long, default_value = "reports/runs/workflow-validator")]
        out: PathBuf,
    },
    /// Open a store, apply its migrations and list what it holds for a domain.
    Store {
        /// `memory`, `sqlite:PATH` or `postgres:URL`.
        #[arg(long, env = "AOCHECK_STORE")]
        store: StoreSpec,
        /// The domain (store namespace) to list.
        #[arg(long, default_value = "default")]
        domain: String,
    },
    /// Validate a provider profile (JSON) and print its digest, or every defect.
    Profile { file: PathBuf },
    /// Verify the digest chain of one occurrence's history in a store.
    VerifyHistory {
        #[arg(long, env = "AOCHECK_STORE")]
        store: StoreSpec,
        #[arg(long, default_value = "default")]
        domain: String,
        occurrence: String,
    },
}

#[derive(Subcommand, Debug)]
pub enum CasesCmd {
    /// Validate case files (default: cases/).
    Check { path: Option<PathBuf> },
}

#[derive(Subcommand, Debug)]
pub enum SutCmd {
    /// The reference Hermes connector behind a small HTTP front (`POST /actions`,
    /// `GET /actions/{id}`), a running service for `aocheck deploy` (`provider: hermes`).
    Connector(crate::reference::front::FrontArgs),
    /// The reference implementation, one executor generation per process.
    Reference {
        /// A deliberately broken variant (for checking the harness), e.g. `replay_unknown`.
        /// Only in builds with the `test-knobs` feature (the test suite's).
        #[cfg(feature = "test-knobs")]
        #[arg(long, default_value = "conforming")]
        variant: String,
    },
}

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// Case files or folder.
    #[arg(long, default_value = "cases")]
    pub cases: PathBuf,
    /// Only these case ids (repeatable).
    #[arg(long = "case")]
    pub case_ids: Vec<String>,
    /// Only cases evaluating these requirements (repeatable), e.g. AOC-REQ-006.
    #[arg(long = "req")]
    pub reqs: Vec<String>,
    /// `memory`, `sqlite:PATH` or `postgres:URL` (default: SQLite in the output folder).
    #[arg(long)]
    pub store: Option<StoreSpec>,
    /// Output folder (default: `reports/runs/<run id>`).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// The seed (printed first; reproduces a run).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Sign the report with this Ed25519 private key (PEM).
    #[arg(long)]
    pub sign: Option<PathBuf>,
    #[command(flatten)]
    pub sut: crate::setup::SutArgs,
    /// Seconds the whole run may take; past them every process is killed and the report of the
    /// cases that ended is written, the rest `not_run`, the run marked `incomplete` (exit 6
    /// unless a case that ended failed).
    #[arg(long)]
    pub timeout: Option<u64>,
    /// Known failures (TOML, `[[expected]]` entries). Default: `aocheck.toml` in the working
    /// folder when there is one.
    #[arg(long)]
    pub expect: Option<PathBuf>,
    /// An expected failure that did not fail (an unexpected pass) fails the run.
    #[arg(long)]
    pub strict: bool,
    /// An earlier run's report (`report.json`, `report.dsse.json` or its folder): the run ends
    /// with a diff against it (`diff.md`, `diff.json`), and a regression fails the run.
    #[arg(long)]
    pub baseline: Option<PathBuf>,
    /// The public key a signed baseline is verified with.
    #[arg(long, requires = "baseline")]
    pub baseline_key: Option<PathBuf>,
    /// Run only part K of N of the cases (every N-th from the K-th, in suite order); `aocheck
    /// merge` joins the parts' reports.
    #[arg(long)]
    pub shard: Option<String>,
}

async fn run_suite_cmd(a: RunArgs) -> u8 {
    use std::io::Write;
    let seed = crate::setup::seed_or_draw(a.seed);
    println!("aocheck: seed {seed} (reproduce with --seed {seed})");
    let (mut cases, defects) = crate::case::load(&a.cases);
    if !defects.is_empty() {
        for d in &defects {
            eprintln!("error: {d}");
        }
        eprintln!("{} defect(s) in the cases; nothing was run", defects.len());
        return exit::INVALID_INPUT;
    }
    let mut wanted_reqs = Vec::new();
    for r in &a.reqs {
        match crate::aoc::Req::parse(r) {
            Some(q) => wanted_reqs.push(q),
            None => {
                eprintln!(
                    "error: --req {r:?} is not a requirement id; use AOC-REQ-001 … AOC-REQ-013"
                );
                return exit::INVALID_INPUT;
            }
        }
    }
    for id in &a.case_ids {
        if !cases.iter().any(|c| &c.case.id == id) {
            eprintln!(
                "error: --case {id:?}: no such case under {}",
                a.cases.display()
            );
            return exit::INVALID_INPUT;
        }
    }
    cases.retain(|c| {
        (a.case_ids.is_empty() || a.case_ids.contains(&c.case.id))
            && (wanted_reqs.is_empty()
                || c.case
                    .requirements
                    .iter()
                    .any(|r| crate::aoc::Req::parse(r).is_some_and(|q| wanted_reqs.contains(&q))))
    });
    // Expectations name ids of the whole suite (a filter does not void an entry).
    let all_ids: std::collections::BTreeSet<String> =
        cases.iter().map(|c| c.case.id.clone()).collect();
    let expect_file = a.expect.clone().or_else(|| {
        let d = PathBuf::from("aocheck.toml");
        d.is_file().then_some(d)
    });
    let expectations = match &expect_file {
        None => None,
        Some(f) => match crate::ci::expect::load(f, &all_ids) {
            Ok(x) => {
                println!(
                    "aocheck: expectations from {} ({} known failure(s))",
                    x.file,
                    x.entries.len()
                );
                Some(x)
            }
            Err(defects) => {
                for d in &defects {
                    eprintln!("error: {d}");
                }
                eprintln!(
                    "{} defect(s) in the expectations; nothing was run",
                    defects.len()
                );
                return exit::INVALID_INPUT;
            }
        },
    };
    if a.strict && expectations.is_none() {
        eprintln!("error: --strict needs an expectations file (--expect FILE or ./aocheck.toml)");
        return exit::INVALID_INPUT;
    }
    let baseline = match &a.baseline {
        None => None,
        Some(b) => match crate::ci::diff::read_report(b, a.baseline_key.as_deref()) {
            Ok(x) => Some(x),
            Err((code, e)) => {
                eprintln!("error: --baseline {e}");
                return code;
            }
        },
    };
    // A shard keeps every N-th case from the K-th and names the whole suite it is part of.
    let mut shard = None;
    if let Some(s) = &a.shard {
        let (k, n) = match crate::explore::cmd::shard_arg(s) {
            Ok(kn) => kn,
            Err(code) => return code,
        };
        shard = Some(crate::report::model::Shard {
            k,
            n,
            suite_digest: crate::runner::test_input_digest(&cases),
            suite_cases: cases.len(),
        });
        let mut i = 0u64;
        cases.retain(|_| {
            i += 1;
            (i - 1) % n == k - 1
        });
    }
    let run_id = format!("run-{}", uuid::Uuid::now_v7().simple());
    let out = match crate::setup::out_dir(a.out.as_ref(), "runs", &run_id) {
        Ok(o) => o,
        Err(code) => return code,
    };
    let _held = match crate::setup::lock_out(&out) {
        Ok(f) => f,
        Err(code) => return code,
    };
    let signing = match crate::setup::signing_key(a.sign.as_deref()) {
        Ok(k) => k,
        Err(code) => return code,
    };
    if let Err(e) = crate::ci::clear_outputs(&out) {
        eprintln!("error: --out {}: {e}", out.display());
        return exit::INVALID_INPUT;
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
    let total = cases.len();
    let width = cases.iter().map(|c| c.case.id.len()).max().unwrap_or(16);
    let mut done = 0usize;
    let mut progress = |e: crate::runner::RunEvent| {
        if let crate::runner::RunEvent::CaseFinished {
            case,
            verdict,
            millis,
            why,
        } = e
        {
            done += 1;
            println!(
                "[{done:>2}/{total}] {case:<width$} {:<14} {millis} ms",
                verdict.label()
            );
            if let Some(why) = why {
                // The implementation's words may be in it: one line of printable text.
                println!(
                    "        why: {}",
                    crate::report::model::one_line(&crate::secrets::scrub(&why), 400)
                );
            }
            let _ = std::io::stdout().flush();
        }
    };
    let opts = crate::runner::RunOptions {
        run_id: run_id.clone(),
        seed,
        knobs: crate::reference::Knobs::default(),
        repro_store: match &spec {
            StoreSpec::Memory => Some("memory".into()),
            StoreSpec::Postgres(u) => {
                Some(format!("postgres:{}", crate::secrets::redact_store_url(u)))
            }
            StoreSpec::Sqlite(_) => None,
        },
        sut: None,
        explore: false,
    };
    let mut opts = opts;
    match a.sut.spec(&out, &spec) {
        Ok(s) => opts.sut = s,
        Err(code) => return code,
    }
    let finished = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = finished.clone();
    let mut progress = move |e: crate::runner::RunEvent| {
        if matches!(e, crate::runner::RunEvent::CaseFinished { .. }) {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        progress(e)
    };
    let mut done = Vec::new();
    // Each case's evidence is written (scrubbed) as the case ends and leaves memory; the page
    // keeps only the timeline drawn from it.
    let mut evidence_errors: Vec<String> = Vec::new();
    let mut written: Vec<String> = Vec::new();
    let mut ended = |c: &mut crate::report::model::CaseReport| {
        let Some(e) = c.evidence.take() else {
            return;
        };
        // Drawn from the evidence in memory; scrubbed with the report below.
        c.timeline = <crate::check::replay::Tape as serde::Deserialize>::deserialize(&*e)
            .ok()
            .and_then(|t| crate::report::html::timeline(&t));
        match crate::ci::write_evidence(&out, &[(c.id.clone(), e)]) {
            Ok(()) => written.push(c.id.clone()),
            Err(why) => evidence_errors.push(why),
        }
    };
    let run = crate::runner::run_suite_into(
        &cases,
        store.clone(),
        &opts,
        &mut progress,
        &mut ended,
        &mut done,
    );
    let mut stopped = None;
    match a.timeout {
        None => run.await,
        Some(secs) => {
            if tokio::time::timeout(std::time::Duration::from_secs(secs), run)
                .await
                .is_err()
            {
                // Dropping the run killed every implementation process it started.
                let ended = finished.load(std::sync::atomic::Ordering::SeqCst);
                let why = format!(
                    "stopped by --timeout {secs} s: {ended} of {} case(s) ended; the rest are not_run",
                    cases.len()
                );
                eprintln!(
                    "error: the run did not finish within --timeout {secs} s: {ended} of {} case(s) ended; every process was killed; the report lists the rest as not_run",
                    cases.len()
                );
                stopped = Some(why);
            }
        }
    }
    let report = crate::runner::assemble(&cases, done, store.as_ref(), &opts);
    // Each case's evidence goes to its own file (scrubbed like everything written).
    let evidence: Vec<(String, std::sync::Arc<serde_json::Value>)> = report
        .cases
        .iter()
        .filter_map(|c| c.evidence.clone().map(|e| (c.id.clone(), e)))
        .collect();
    if let Some(e) = evidence_errors.first() {
        eprintln!("error: writing the evidence to {}: {e}", out.display());
        return exit::INVALID_INPUT;
    }
    if let Err(e) = crate::ci::write_evidence(&out, &evidence) {
        eprintln!("error: writing the evidence to {}: {e}", out.display());
        return exit::INVALID_INPUT;
    }
    // A secret registered after a case's evidence was written (a later case's credential) is
    // scrubbed from it too.
    if let Err(e) = crate::ci::rescrub_evidence(&out, &written) {
        eprintln!("error: writing the evidence to {}: {e}", out.display());
        return exit::INVALID_INPUT;
    }
    // The timelines drawn as each case ended are not part of the report's JSON: kept aside
    // while it is scrubbed, and scrubbed themselves.
    let timelines: Vec<Option<String>> = report.cases.iter().map(|c| c.timeline.clone()).collect();
    // Nothing secret leaves the run: every registered credential is scrubbed from the report
    // before any format, line or signature is made of it.
    let mut report = match crate::secrets::scrubbed(report) {
        Ok(r) => r,
        Err((_, e)) => {
            eprintln!(
                "error: the report could not be scrubbed of secrets, so it is not written: {e} (an aocheck bug)"
            );
            return exit::BUG;
        }
    };
    for (c, t) in report.cases.iter_mut().zip(timelines) {
        c.timeline = t.map(|t| crate::secrets::scrub(&t));
    }
    // The page draws each case's timeline from its evidence (scrubbed like the rest).
    for (id, e) in &evidence {
        if let Some(c) = report.cases.iter_mut().find(|c| &c.id == id) {
            c.evidence = crate::secrets::scrubbed((**e).clone())
                .ok()
                .map(std::sync::Arc::new);
        }
    }
    report.incomplete = stopped;
    report.shard = shard;
    if let Some(x) = &expectations {
        report.expectations = Some(crate::ci::expect::apply(x, &report, a.strict));
    }
    if let Err(e) = write_reports(&report, &out, baseline.as_ref().map(|(r, _)| r)) {
        eprintln!("error: writing reports to {}: {e}", out.display());
        return exit::INVALID_INPUT;
    }
    for c in report
        .cases
        .iter()
        .filter(|c| c.verdict != crate::report::model::Verdict::Pass)
    {
        println!("{} {}: {}", c.id, c.verdict.label(), c.reasons());
        if c.repro.is_empty() {
            println!("  not run: the run was stopped before this case ended");
        } else {
            println!("  reproduce: {}", c.repro);
        }
    }
    if let Some(x) = &report.expectations {
        println!(
            "expectations ({}): {} expected failure(s), {} unexpected failure(s), {} unexpected pass(es){}, {} entr(ies) not exercised",
            x.file,
            x.expected_failures.len(),
            x.unexpected_failures.len(),
            x.unexpected_passes.len(),
            if x.strict {
                " (--strict: they fail the run)"
            } else {
                ""
            },
            x.not_exercised.len()
        );
        for e in &x.unexpected_passes {
            println!(
                "  unexpected pass: {e} covered no failure; remove it from {}",
                x.file
            );
        }
    }
    println!(
        "{} passed, {} failed, {} other; reports in {}",
        report.summary.pass,
        report.summary.fail,
        report.summary.other,
        out.display()
    );
    let mut code = exit::of_report(&report);
    if let Some((old, side)) = &baseline {
        let d = match crate::ci::diff::against_baseline(old, side, &report, &out) {
            Ok(d) => d,
            Err(e) => {
                eprintln!("error: {e}");
                return exit::INVALID_INPUT;
            }
        };
        println!(
            "against the baseline {}: {} regression(s), {} fix(es); diff.md and diff.json in {}",
            side.file,
            d.regressions.len(),
            d.fixes.len(),
            out.display()
        );
        for r in &d.regressions {
            println!(
                "  regression: {} {}: {} → {}",
                r.requirement,
                r.case,
                r.from.label(),
                r.to.label()
            );
        }
        if d.has_regression() && code != exit::REQUIREMENT_FAILED {
            code = exit::REQUIREMENT_FAILED;
        }
    }
    // Signed last, over every file the run wrote (the store closed first: its file is final).
    if let Some(k) = &signing {
        drop(store);
        match crate::ci::seal_run(&report, &out, k) {
            Ok(n) => println!(
                "signed {n} file(s): {} (key {})",
                out.join("report.dsse.json").display(),
                crate::report::attest::key_id(&k.verifying_key())
            ),
            Err(e) => {
                eprintln!("error: signing the run in {}: {e}", out.display());
                return exit::INVALID_INPUT;
            }
        }
    }
    code
}

pub use crate::ci::write_reports;

fn diff_cmd(
    old: &std::path::Path,
    new: &std::path::Path,
    key: Option<&std::path::Path>,
    format: &str,
) -> u8 {
    if format != "markdown" && format != "json" {
        eprintln!("error: --format {format:?}: use markdown or json");
        return exit::INVALID_INPUT;
    }
    let read = |p: &std::path::Path| crate::ci::diff::read_report(p, key);
    let ((o, os), (n, ns)) = match (read(old), read(new)) {
        (Ok(o), Ok(n)) => (o, n),
        (Err((code, e)), _) | (_, Err((code, e))) => {
            eprintln!("error: {e}");
            return code;
        }
    };
    let d = crate::ci::diff::diff(&o, os, &n, ns);
    if format == "json" {
        match serde_json::to_string_pretty(&d) {
            Ok(j) => println!("{j}"),
            Err(e) => {
                eprintln!("error: {e}");
                return exit::INVALID_INPUT;
            }
        }
    } else {
        print!("{}", crate::ci::diff::markdown(&d));
    }
    if d.has_regression() {
        exit::REQUIREMENT_FAILED
    } else {
        exit::OK
    }
}

/// Runs a parsed command; returns the exit code (see [`crate::exit`]).
pub async fn run(cli: Cli) -> u8 {
    match cli.command {
        Command::Run(a) => run_suite_cmd(a).await,
        Command::Explore(a) => crate::explore::cmd::explore_cmd(a).await,
        Command::Deploy(a) => crate::deploy::deploy_cmd(a).await,
        Command::Sut {
            what: SutCmd::Connector(a),
        } => crate::reference::front::serve(a).await,
        Command::Merge(a) => {
            if a.shards
                .first()
                .is_some_and(|p| crate::ci::merge::is_run_report(p))
            {
                crate::ci::merge::merge_cmd(a)
            } else {
                crate::explore::merge::merge_cmd(a)
            }
        }
        Command::Diff {
            old,
            new,
            key,
            format,
        } => diff_cmd(&old, &new, key.as_deref(), &format),
        #[cfg(not(feature = "test-knobs"))]
        Command::Sut {
            what: SutCmd::Reference {},
        } => crate::reference::serve::serve(crate::reference::Knobs::default()).await,
        #[cfg(feature = "test-knobs")]
        Command::Sut {
            what: SutCmd::Reference { variant },
        } => {
            use crate::reference::Knobs;
            let v = serde_json::Value::String(variant.clone());
            if let Ok(d) =
                serde_json::from_value::<crate::operator::connector::ConnectorDefect>(v.clone())
            {
                return crate::reference::serve::serve(Knobs::broken(
                    crate::reference::Variant::Conforming,
                    Some(d),
                ))
                .await;
            }
            if let Ok(d) = serde_json::from_value::<crate::workflow::WorkflowDefect>(v.clone()) {
                return crate::reference::serve::serve(Knobs::workflow_broken(d)).await;
            }
            match serde_json::from_value::<crate::reference::Variant>(v) {
                Ok(v) => crate::reference::serve::serve(Knobs::broken(v, None)).await,
                Err(_) => {
                    let names = |vs: &[crate::reference::Variant]| {
                        vs.iter()
                            .filter_map(|v| serde_json::to_value(v).ok())
                            .filter_map(|v| v.as_str().map(str::to_string))
                            .collect::<Vec<_>>()
                            .join(", ")
                    };
                    eprintln!(
                        "error: --variant {variant:?}: use conforming; an honest alternative ({}); a broken domain variant ({}); a combination-only one ({}); or a connector defect (steal_expired_claim, five_xx_is_failed, stopping_is_cancelled, replay_unknown_start, approval_replay, accept_prose, identity_in_args, manifest_without_approval, restart_takes_own_claim); or a workflow runner defect (relaunch_on_resume, write_in_place, lost_reply_is_failed, unknown_is_done, eager_output, truncate_retries)",
                        names(&crate::reference::Variant::HONEST),
                        names(&crate::reference::Variant::BROKEN),
                        names(&crate::reference::Variant::COMBINATION)
                    );
                    exit::INVALID_INPUT
                }
            }
        }
        Command::Cases {
            what: CasesCmd::Check { path },
        } => {
            let p = path.unwrap_or_else(|| PathBuf::from("cases"));
            let (cases, defects) = crate::case::load(&p);
            for d in &defects {
                eprintln!("error: {d}");
            }
            if defects.is_empty() {
                println!("{} case(s) valid under {}", cases.len(), p.display());
                exit::OK
            } else {
                eprintln!("{} defect(s)", defects.len());
                exit::INVALID_INPUT
            }
        }
        Command::Keygen { path, force } => keygen(&path, force),
        Command::Verify { envelope, key } => verify_cmd(&envelope, &key),
        Command::Analyze { dir, key } => analyze_cmd(&dir, key.as_deref()),
        Command::WorkflowValidator { sut, set, out } => {
            workflow_validator_cmd(&sut, set.as_deref(), &out).await
        }
        Command::Store { store, domain } => {
            let s = match store.open().await {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("error: cannot open store: {e}");
                    return exit::UNREACHABLE;
                }
            };
            match s.list(&domain, None).await {
                Ok(rows) => {
                    println!(
                        "store {} (durable: {}), domain {domain:?}: {} occurrence(s)",
                        s.info().kind,
                        s.info().durable,
                        rows.len()
                    );
                    for r in rows {
                        println!(
                            "  {}  lane {}  {}  {} entries",
                            r.id,
                            r.lane,
                            r.class.label(),
                            r.len
                        );
                    }
                    exit::OK
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    exit::UNREACHABLE
                }
            }
        }
        Command::Profile { file } => {
            let text = match std::fs::read_to_string(&file) {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("error: {}: {e}", file.display());
                    return exit::INVALID_INPUT;
                }
            };
            let p: ProviderProfile = match serde_json::from_str(&text) {
                Ok(p) => p,
                Err(e) => {
                    eprintln!("error: {}:{}:{}: {e}", file.display(), e.line(), e.column());
                    return exit::INVALID_INPUT;
                }
            };
            let defects = p.validate();
            if !defects.is_empty() {
                for d in defects {
                    eprintln!("error: {}: field `{}`: {}", file.display(), d.field, d.msg);
                }
                return exit::INVALID_INPUT;
            }
            match p.digest() {
                Ok(d) => {
                    println!("profile {} version {}: valid, digest {d}", p.id, p.version);
                    exit::OK
                }
                Err(e) => {
                    eprintln!("error: {}: {e}", file.display());
                    exit::INVALID_INPUT
                }
            }
        }
        Command::VerifyHistory {
            store,
            domain,
            occurrence,
        } => {
            let s = match store.open().await {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("error: cannot open store: {e}");
                    return exit::UNREACHABLE;
                }
            };
            let occ = OccurrenceId::from_stored(occurrence);
            match s.load(&domain, &occ).await {
                Ok(None) => {
                    eprintln!("error: no occurrence {occ} in domain {domain:?}");
                    exit::INVALID_INPUT
                }
                Ok(Some(entries)) => match crate::aoc::history::verify_chain(&entries) {
                    Ok(()) => {
                        println!("{occ}: {} entries, chain valid", entries.len());
                        exit::OK
                    }
                    Err(b) => {
                        println!("{occ}: chain BROKEN: {b}");
                        exit::REQUIREMENT_FAILED
                    }
                },
                Err(e) => {
                    eprintln!("error: {e}");
                    exit::UNREACHABLE
                }
            }
        }
    }
}

/// `aocheck keygen`: the private key readable by its owner only (mode 0600, set at creation),
/// the public key beside it; neither replaces an existing file without `--force`.
fn keygen(path: &std::path::Path, force: bool) -> u8 {
    let pubp = PathBuf::from(format!("{}.pub", path.display()));
    if !force {
        for p in [path, pubp.as_path()] {
            if p.exists() {
                eprintln!(
                    "error: {} exists; refusing to overwrite a key (remove it, or pass --force to replace the pair)",
                    p.display()
                );
                return exit::INVALID_INPUT;
            }
        }
    }
    let (private, public) = match crate::report::attest::keygen() {
        Ok(x) => x,
        Err(e) => {
            eprintln!("error: {e}");
            return exit::INVALID_INPUT;
        }
    };
    let write = |p: &std::path::Path, body: &str, mode: u32| -> std::io::Result<()> {
        use std::io::Write as _;
        use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
        let mut o = std::fs::OpenOptions::new();
        o.write(true).mode(mode);
        if force {
            o.create(true).truncate(true);
        } else {
            o.create_new(true);
        }
        let mut f = o.open(p)?;
        // A replaced file keeps its old mode through `open`: set it.
        f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        f.write_all(body.as_bytes())?;
        f.sync_all()
    };
    match write(path, &private, 0o600).and_then(|_| write(&pubp, &public, 0o644)) {
        Ok(()) => {
            println!(
                "private key {} (mode 0600; keep it secret), public key {}",
                path.display(),
                pubp.display()
            );
            exit::OK
        }
        Err(e) => {
            eprintln!("error: writing the key pair at {}: {e}", path.display());
            exit::INVALID_INPUT
        }
    }
}

/// `aocheck verify DIR --key PUB`: exit 0 only when the signature verifies with the key given
/// and every file in the folder is exactly as signed; each missing, changed or unsigned file is
/// named (exit 5).
fn verify_cmd(path: &std::path::Path, key: &std::path::Path) -> u8 {
    use crate::report::attest;
    if !path.exists() {
        eprintln!(
            "error: {}: no such folder or file; give a signed run's folder or its envelope",
            path.display()
        );
        return exit::INVALID_INPUT;
    }
    let envelope = if path.is_dir() {
        let found: Vec<PathBuf> = attest::ENVELOPE_FILES
            .iter()
            .map(|n| path.join(n))
            .filter(|p| p.is_file())
            .collect();
        match found.as_slice() {
            [one] => one.clone(),
            [] => {
                eprintln!(
                    "error: {}: no {} here; give the folder of a run made with --sign, or its envelope",
                    path.display(),
                    attest::ENVELOPE_FILES.join(" or ")
                );
                return exit::INVALID_INPUT;
            }
            _ => {
                eprintln!(
                    "error: {}: both {} are here; name the envelope to verify",
                    path.display(),
                    attest::ENVELOPE_FILES.join(" and ")
                );
                return exit::INVALID_INPUT;
            }
        }
    } else {
        path.to_path_buf()
    };
    let vk = match std::fs::read_to_string(key)
        .map_err(|e| e.to_string())
        .and_then(|pem| attest::verifying_key(&pem).map_err(|e| e.to_string()))
    {
        Ok(k) => k,
        Err(e) => {
            eprintln!("error: --key {}: {e}", key.display());
            return exit::INVALID_INPUT;
        }
    };
    let checked = match attest::verify_folder(&envelope, &vk) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("NOT verified: {}: {e}", envelope.display());
            return exit::SIGNATURE_FAILED;
        }
    };
    if !checked.problems.is_empty() {
        eprintln!(
            "NOT verified: the signature of {} is good, but the folder is not as signed ({} problem(s)):",
            envelope.display(),
            checked.problems.len()
        );
        for p in &checked.problems {
            eprintln!("  {p}");
        }
        return exit::SIGNATURE_FAILED;
    }
    let p = &checked.statement["predicate"];
    let what = if checked.predicate_type == attest::EXPLORE_RUN_PREDICATE_TYPE {
        format!(
            "exploration {} (seed {}, shard {}, {} schedules, {} finding(s))",
            p["run_id"].as_str().unwrap_or("?"),
            p["seed"],
            p["shard"].as_str().unwrap_or("?"),
            p["schedules"],
            p["findings"]
        )
    } else {
        format!(
            "run {} (seed {}, {} case(s))",
            p["run_id"].as_str().unwrap_or("?"),
            p["seed"],
            p["verdicts"].as_object().map_or(0, serde_json::Map::len)
        )
    };
    println!(
        "verified: {what}: {} file(s) exactly as signed by {}",
        checked.subjects,
        attest::key_id(&vk)
    );
    exit::OK
}

/// `aocheck analyze DIR [--key PUB]`.
async fn workflow_validator_cmd(
    sut: &crate::setup::SutArgs,
    set: Option<&std::path::Path>,
    out: &std::path::Path,
) -> u8 {
    let text = match set {
        None => crate::workflow::conformance::SHIPPED.to_string(),
        Some(p) => match std::fs::read_to_string(p) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("error: --set {}: {e}", p.display());
                return exit::INVALID_INPUT;
            }
        },
    };
    let shown = set.map_or_else(
        || "the shipped set".to_string(),
        |p| p.display().to_string(),
    );
    let set = match crate::workflow::conformance::read(&text) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {shown}: {e}");
            return exit::INVALID_INPUT;
        }
    };
    let spec = match sut.spec(out, &crate::store::StoreSpec::Sqlite(out.join("store.db"))) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let rows = match crate::sut::validator::judge_set(spec.as_ref(), &set).await {
        Ok(r) => r,
        Err(crate::sut::validator::Unjudged::Unsupported(m)) => {
            eprintln!("unsupported: {m}");
            return exit::UNDECIDED;
        }
        Err(crate::sut::validator::Unjudged::Harness(m)) => {
            eprintln!("error: {m}");
            return exit::UNREACHABLE;
        }
    };
    let (lines, missed) = crate::sut::validator::lines(&rows, &shown, spec.is_some());
    for l in lines {
        println!("{l}");
    }
    if missed > 0 {
        exit::REQUIREMENT_FAILED
    } else {
        exit::OK
    }
}

fn analyze_cmd(dir: &std::path::Path, key: Option<&std::path::Path>) -> u8 {
    if let Some(k) = key {
        let code = verify_cmd(dir, k);
        if code != exit::OK {
            return code;
        }
    }
    let started = std::time::Instant::now();
    let all = match crate::report::analyze::analyze_folder(dir) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}");
            return exit::INVALID_INPUT;
        }
    };
    let (mut same, mut looks, mut finals, mut taken, mut differ) = (0, 0, 0, 0, 0);
    for a in &all {
        if let Some(r) = &a.derived {
            looks += r.looks;
            finals += r.finals;
            taken += r.taken;
        }
        if a.differences.is_empty() {
            same += 1;
            continue;
        }
        differ += 1;
        println!("{} (reported {}):", a.case, a.reported.label());
        for d in &a.differences {
            println!("  {}", crate::report::model::one_line(d, 600));
        }
    }
    let derived = all.iter().filter(|a| a.derived.is_some()).count();
    println!(
        "analyzed {} case(s) in {} ms: {derived} derived again from their evidence ({looks} checker look(s) and {finals} final expectation(s) re-run; {taken} failure(s) outside them taken from the record), {same} the same, {differ} different",
        all.len(),
        started.elapsed().as_millis()
    );
    if differ == 0 {
        exit::OK
    } else {
        exit::REQUIREMENT_FAILED
    }
}
