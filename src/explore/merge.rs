//! `aocheck merge OUT DIR...`: the explore reports of the shards of one exploration (`aocheck
//! explore --shard K/N` on N machines, one seed) made one report set in `OUT`: `explore.json`,
//! `summary.md`, `junit.xml`, `explore.html` (and `explore.dsse.json` with `--sign`), with the
//! shrunk case files copied under `found/`.
//!
//! Only shards of one exploration merge: the same seed, workload and implementation (its
//! self-description; the command that started it may differ between machines), the same N,
//! each K once. Counts are summed, coverage is united, findings are concatenated in order of
//! the schedule that found them, and the shards of N that were not given are named. Anything
//! else is refused (exit 3) naming the file, the field and what to do.

use super::report::{self, ExploreReport, Merged, MergedShard};
use crate::exit;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Why shard reports cannot be merged: the file, and the field when one is at fault.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error("{file}: {why}")]
    File { file: PathBuf, why: String },
    #[error("{file}: field `{field}`: {why}")]
    Field {
        file: PathBuf,
        field: &'static str,
        why: String,
    },
}

/// One shard's report, read.
#[derive(Clone, Debug)]
pub struct Shard {
    /// Its `explore.json`, and the folder its `found/` is in.
    pub file: PathBuf,
    pub dir: PathBuf,
    pub report: ExploreReport,
    /// `K/N`.
    pub k: u64,
    pub n: u64,
}

/// Reads a shard's report: `PATH/explore.json` for a folder, else the file itself.
pub fn read(path: &Path) -> Result<Shard, MergeError> {
    let file = if path.is_dir() {
        path.join("explore.json")
    } else {
        path.to_path_buf()
    };
    let dir = file.parent().map(Path::to_path_buf).unwrap_or_default();
    let bad = |why: String| MergeError::File {
        file: file.clone(),
        why,
    };
    let field = |field: &'static str, why: String| MergeError::Field {
        file: file.clone(),
        field,
        why,
    };
    let bytes = std::fs::read(&file).map_err(|e| {
        bad(format!(
            "cannot be read ({e}); name each shard's output folder (or its explore.json)"
        ))
    })?;
    let value: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| {
        bad(format!(
            "not JSON ({e}): give the explore.json a shard wrote"
        ))
    })?;
    if value["schema"] != report::SCHEMA {
        return Err(field(
            "schema",
            format!(
                "is {}, not {:?}: only explore reports merge",
                value["schema"],
                report::SCHEMA
            ),
        ));
    }
    let report: ExploreReport = serde_json::from_value(value).map_err(|e| {
        bad(format!(
            "not an explore report this aocheck reads ({e}); explore the shard again with this aocheck"
        ))
    })?;
    if report.merged.is_some() {
        return Err(field(
            "merged",
            "this is a merged report already; merge the shards' own reports".into(),
        ));
    }
    let Some((k, n)) = super::cmd::parse_shard(&report.shard) else {
        return Err(field(
            "shard",
            format!(
                "{:?} is not K/N with 1 ≤ K ≤ N: give the report a shard wrote",
                report.shard
            ),
        ));
    };
    Ok(Shard {
        file,
        dir,
        report,
        k,
        n,
    })
}

/// What makes two implementations the same for a merge: the self-description without the
/// command that started it (a path differs between machines).
fn identity(implementation: &serde_json::Value) -> serde_json::Value {
    let mut v = implementation.clone();
    if let Some(o) = v.as_object_mut() {
        o.remove("command");
    }
    v
}

/// Merges the shards' reports into one, under `run_id`.
pub fn merge(shards: &[Shard], run_id: &str) -> Result<ExploreReport, MergeError> {
    let Some(first) = shards.first() else {
        return Err(MergeError::File {
            file: PathBuf::new(),
            why: "no shard report was given: name the output folder, then each shard's folder"
                .into(),
        });
    };
    let mut by_k: BTreeMap<u64, &Shard> = BTreeMap::new();
    for s in shards {
        let differs = |field: &'static str, mine: String, theirs: String| MergeError::Field {
            file: s.file.clone(),
            field,
            why: format!(
                "is {mine}, but {} has {theirs}: only the shards of one exploration merge",
                first.file.display()
            ),
        };
        let (r, f) = (&s.report, &first.report);
        if r.seed != f.seed {
            return Err(differs("seed", r.seed.to_string(), f.seed.to_string()));
        }
        if r.workload != f.workload {
            return Err(differs(
                "workload",
                format!("{:?}", r.workload),
                format!("{:?}", f.workload),
            ));
        }
        if identity(&r.implementation) != identity(&f.implementation) {
            return Err(differs(
                "implementation",
                identity(&r.implementation).to_string(),
                identity(&f.implementation).to_string(),
            ));
        }
        if s.n != first.n {
            return Err(MergeError::Field {
                file: s.file.clone(),
                field: "shard",
                why: format!(
                    "is {}, a shard of {}, but {} is a shard of {}: merge the shards of one split",
                    r.shard,
                    s.n,
                    first.file.display(),
                    first.n
                ),
            });
        }
        if let Some(other) = by_k.insert(s.k, s) {
            return Err(MergeError::Field {
                file: s.file.clone(),
                field: "shard",
                why: format!(
                    "{} is given twice (also {}): give each shard once",
                    r.shard,
                    other.file.display()
                ),
            });
        }
    }
    let f = &first.report;
    let mut m = ExploreReport {
        run_id: run_id.into(),
        shard: format!(
            "{}/{}",
            by_k.keys()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(","),
            first.n
        ),
        schedules: 0,
        clean: 0,
        undecided: BTreeMap::new(),
        unsupported: 0,
        findings: Vec::new(),
        coverage: Default::default(),
        step_counts: BTreeMap::new(),
        millis: 0,
        ..f.clone()
    };
    let mut stores = BTreeSet::new();
    for s in by_k.values() {
        let r = &s.report;
        m.schedules += r.schedules;
        m.clean += r.clean;
        m.unsupported += r.unsupported;
        m.millis += r.millis;
        for (why, n) in &r.undecided {
            *m.undecided.entry(why.clone()).or_default() += n;
        }
        for (len, n) in &r.step_counts {
            *m.step_counts.entry(*len).or_default() += n;
        }
        m.coverage.merge(&r.coverage);
        m.findings.extend(r.findings.iter().cloned());
        stores.insert(r.store.clone());
    }
    m.findings.sort_by_key(|x| x.schedule);
    m.never_fired = m.coverage.never_fired(&m.workload);
    m.median_steps = report::median(&m.step_counts);
    m.schedules_per_minute = report::per_minute(m.schedules, m.millis);
    m.store = stores.into_iter().collect::<Vec<_>>().join(", ");
    m.merged = Some(Merged {
        of: first.n,
        shards: by_k
            .values()
            .map(|s| MergedShard {
                shard: s.report.shard.clone(),
                run_id: s.report.run_id.clone(),
                schedules: s.report.schedules,
            })
            .collect(),
        missing: (1..=first.n).filter(|k| !by_k.contains_key(k)).collect(),
    });
    Ok(m)
}

/// Copies every finding's case file from its shard's `found/` into `out/found/`. A name that
/// is not a plain file name is refused (it could write outside `out`).
pub fn copy_cases(shards: &[Shard], out: &Path) -> Result<(), MergeError> {
    std::fs::create_dir_all(out.join("found")).map_err(|e| MergeError::File {
        file: out.join("found"),
        why: format!("cannot be created: {e}"),
    })?;
    for s in shards {
        for (i, f) in s.report.findings.iter().enumerate() {
            let name = &f.case_file;
            let plain = Path::new(name)
                .file_name()
                .is_some_and(|n| n == name.as_str())
                && !name.starts_with('.');
            if !plain {
                return Err(MergeError::Field {
                    file: s.file.clone(),
                    field: "findings[].case_file",
                    why: format!(
                        "finding {i} names {name:?}, not a file name under found/: give the report a shard wrote"
                    ),
                });
            }
            let from = s.dir.join("found").join(name);
            std::fs::copy(&from, out.join("found").join(name)).map_err(|e| {
                MergeError::File {
                    file: from.clone(),
                    why: format!(
                        "cannot be copied ({e}); the shard's report names it (findings[{i}].case_file): merge the shard's whole output folder"
                    ),
                }
            })?;
        }
    }
    Ok(())
}

/// `aocheck merge OUT DIR...`.
#[derive(clap::Args, Debug)]
pub struct MergeArgs {
    /// The folder for the merged report (created; not a shard's own folder).
    pub out: PathBuf,
    /// Each shard's output folder (or its `explore.json`).
    #[arg(required = true, num_args = 1..)]
    pub shards: Vec<PathBuf>,
    /// Sign the merged `explore.json` with this Ed25519 private key (PEM).
    #[arg(long)]
    pub sign: Option<PathBuf>,
}

pub fn merge_cmd(a: MergeArgs) -> u8 {
    let signing = match crate::setup::signing_key(a.sign.as_deref()) {
        Ok(k) => k,
        Err(code) => return code,
    };
    let refuse = |e: MergeError| {
        eprintln!("error: {e}");
        exit::INVALID_INPUT
    };
    let mut shards = Vec::new();
    for p in &a.shards {
        match read(p) {
            Ok(s) => shards.push(s),
            Err(e) => return refuse(e),
        }
    }
    let run_id = format!("explore-merge-{}", uuid::Uuid::now_v7().simple());
    let merged = match merge(&shards, &run_id) {
        Ok(m) => m,
        Err(e) => return refuse(e),
    };
    let out = match crate::setup::out_dir(Some(&a.out), "explore", &run_id) {
        Ok(o) => o,
        Err(code) => return code,
    };
    // Writing into a shard's own folder would overwrite its report.
    if let Some(s) = shards
        .iter()
        .find(|s| crate::setup::same_folder(&s.dir, &out))
    {
        eprintln!(
            "error: {}: the output folder is shard {}'s own folder, whose report it would overwrite; name another folder",
            a.out.display(),
            s.report.shard
        );
        return exit::INVALID_INPUT;
    }
    if let Err(e) = copy_cases(&shards, &out) {
        return refuse(e);
    }
    if let Err(e) = report::write_formats(&out, &merged) {
        eprintln!("error: writing the merged report to {}: {e}", out.display());
        return exit::INVALID_INPUT;
    }
    if let Some(k) = &signing
        && let Err(e) = super::cmd::sign_report(&out, &merged, k)
    {
        eprintln!("error: signing the merged report in {}: {e}", out.display());
        return exit::INVALID_INPUT;
    }
    println!(
        "aocheck: merged seed {}, {}: {} schedules: {} without a finding, {} distinct finding(s), {} undecided, {} unsupported; report in {}",
        merged.seed,
        merged.shard_words(),
        merged.schedules,
        merged.clean,
        merged.findings.len(),
        merged.undecided_total(),
        merged.unsupported,
        out.display()
    );
    merged.exit_code()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explore::schedule::Workload;
    use crate::explore::{Exploration, ExploreOptions};

    fn shard(seed: u64, k: u64, n: u64, schedules: u64) -> Shard {
        let mut o = ExploreOptions::new(Workload::Aoc, seed, format!("explore-{k}"));
        o.shard = (k, n);
        let x = Exploration {
            schedules,
            clean: schedules,
            lengths: vec![5; schedules as usize],
            millis: 1000,
            ..Default::default()
        };
        Shard {
            file: PathBuf::from(format!("s{k}/explore.json")),
            dir: PathBuf::from(format!("s{k}")),
            report: ExploreReport::of(&x, &o, "memory"),
            k,
            n,
        }
    }

    fn refusal(shards: &[Shard]) -> String {
        match merge(shards, "m") {
            Ok(_) => panic!("merged"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn counts_sum_and_the_missing_shards_are_named() {
        let m = merge(&[shard(3, 3, 3, 4), shard(3, 1, 3, 2)], "m").expect("merges");
        assert_eq!((m.schedules, m.clean, m.millis), (6, 6, 2000));
        assert_eq!(m.shard, "1,3/3");
        assert_eq!(m.median_steps, 5);
        let merged = m.merged.as_ref().expect("merged");
        assert_eq!(merged.missing, [2]);
        assert_eq!(merged.shards[0].shard, "1/3");
        assert_eq!(m.shard_words(), "shards 1, 3 of 3 (missing: 2)");
        // A shard missing is never a pass.
        assert_eq!(m.exit_code(), exit::UNDECIDED);
    }

    #[test]
    fn findings_are_concatenated_in_order_of_their_schedule() {
        let found = |schedule: u64| crate::explore::Found {
            key: crate::explore::Key {
                checker: "effect_as_asked".into(),
                requirement: crate::aoc::Req::R004,
            },
            schedule,
            found_after_millis: 0,
            found_after_schedules: 0,
            step: None,
            line: String::new(),
            schedules: 1,
            steps_before: 9,
            steps_after: 3,
            shrink_tried: 1,
            shrink_cut_short: false,
            case_file: format!("EXPLORE-3-{schedule}-found.yaml"),
            shrunk_line: String::new(),
            reproduced: 1,
            replays: 1,
            reference: None,
            case: None,
        };
        let (mut one, mut two) = (shard(3, 1, 2, 3), shard(3, 2, 2, 3));
        one.report.findings = vec![found(4)];
        two.report.findings = vec![found(1), found(5)];
        let m = merge(&[one, two], "m").expect("merges");
        let order: Vec<u64> = m.findings.iter().map(|f| f.schedule).collect();
        assert_eq!(order, [1, 4, 5]);
        assert_eq!(m.exit_code(), exit::REQUIREMENT_FAILED);
    }

    #[test]
    fn shards_of_another_exploration_or_split_or_twice_are_refused() {
        let seed = refusal(&[shard(3, 1, 2, 1), shard(4, 2, 2, 1)]);
        assert!(seed.starts_with("s2/explore.json: field `seed`"), "{seed}");
        let split = refusal(&[shard(3, 1, 2, 1), shard(3, 2, 3, 1)]);
        assert!(
            split.starts_with("s2/explore.json: field `shard`"),
            "{split}"
        );
        let twice = refusal(&[shard(3, 1, 2, 1), shard(3, 1, 2, 1)]);
        assert!(twice.contains("given twice"), "{twice}");
        let mut other = shard(3, 2, 2, 1);
        other.report.implementation["name"] = "another".into();
        let imp = refusal(&[shard(3, 1, 2, 1), other]);
        assert!(imp.contains("field `implementation`"), "{imp}");
        // The command that started it may differ.
        let mut moved = shard(3, 2, 2, 1);
        moved.report.implementation["command"] = "/elsewhere/sut".into();
        assert!(merge(&[shard(3, 1, 2, 1), moved], "m").is_ok());
    }
}
