//! `aocheck merge OUT SHARD…` for run reports: the reports of `aocheck run --shard K/N` merged
//! into the report the unsharded run would have written (cases in suite order, requirements
//! aggregated again, the whole suite's test-input digest). Shards of different suites, seeds,
//! implementations or shard counts are refused, and so is a set with a part missing or twice.

use crate::exit;
use crate::report::model::{Report, Summary};
use std::path::{Path, PathBuf};

/// Whether `p` is (or holds) a run report rather than an explore report.
pub fn is_run_report(p: &Path) -> bool {
    if p.is_dir() {
        p.join("report.json").is_file() && !p.join("explore.json").is_file()
    } else {
        p.file_name().is_some_and(|n| n == "report.json")
    }
}

fn file_of(p: &Path) -> PathBuf {
    if p.is_dir() {
        p.join("report.json")
    } else {
        p.to_path_buf()
    }
}

/// Merges shard reports; the error names the shard and what differs.
pub fn merge(shards: &[(String, Report)], run_id: &str) -> Result<Report, String> {
    let Some((first_name, first)) = shards.first() else {
        return Err("no shard reports given".into());
    };
    let Some(s0) = &first.shard else {
        return Err(format!(
            "{first_name}: not a shard's report (it has no `shard`; run with --shard K/N)"
        ));
    };
    let n = s0.n;
    let mut parts: Vec<Option<&Report>> = vec![None; n as usize];
    for (name, r) in shards {
        let Some(s) = &r.shard else {
            return Err(format!(
                "{name}: not a shard's report (it has no `shard`; run with --shard K/N)"
            ));
        };
        let differs = |what: &str| {
            Err(format!(
                "{name}: its {what} differs from {first_name}'s; these are shards of different runs"
            ))
        };
        if s.n != n {
            return differs("shard count");
        }
        if s.suite_digest != s0.suite_digest || s.suite_cases != s0.suite_cases {
            return differs("suite (case files, test-input digest)");
        }
        if r.seed != first.seed {
            return differs("seed");
        }
        if r.implementation != first.implementation {
            return differs("implementation");
        }
        if r.aocheck_version != first.aocheck_version {
            return differs("aocheck version");
        }
        let slot = &mut parts[(s.k - 1) as usize];
        if slot.is_some() {
            return Err(format!("{name}: shard {}/{n} is given twice", s.k));
        }
        *slot = Some(r);
    }
    let missing: Vec<String> = parts
        .iter()
        .enumerate()
        .filter(|(_, p)| p.is_none())
        .map(|(i, _)| format!("{}/{n}", i + 1))
        .collect();
    if !missing.is_empty() {
        return Err(format!("shard(s) {} missing", missing.join(", ")));
    }
    let parts: Vec<&Report> = parts.into_iter().flatten().collect();
    // Case i of the suite is case i / n of shard i % n + 1.
    let mut cases = Vec::with_capacity(s0.suite_cases);
    for i in 0..s0.suite_cases {
        let part = parts[i % n as usize];
        match part.cases.get(i / n as usize) {
            Some(c) => cases.push(c.clone()),
            None => {
                return Err(format!(
                    "shard {}/{n} has {} case(s), fewer than its part of a {}-case suite",
                    i % n as usize + 1,
                    part.cases.len(),
                    s0.suite_cases
                ));
            }
        }
    }
    let incomplete: Vec<String> = parts.iter().filter_map(|p| p.incomplete.clone()).collect();
    Ok(Report {
        schema: first.schema.clone(),
        run_id: run_id.to_string(),
        seed: first.seed,
        started_at: parts
            .iter()
            .map(|p| p.started_at.clone())
            .min()
            .unwrap_or_default(),
        aocheck_version: first.aocheck_version.clone(),
        implementation: first.implementation.clone(),
        provider_profile: parts.iter().find_map(|p| p.provider_profile.clone()),
        store: first.store.clone(),
        test_input_digest: s0.suite_digest.clone(),
        requirements: crate::runner::aggregate(&cases),
        summary: Summary::of(&cases),
        cases,
        disclaimer: first.disclaimer.clone(),
        incomplete: (!incomplete.is_empty()).then(|| incomplete.join("; ")),
        shard: None,
        expectations: None,
    })
}

/// Each shard's `evidence/` copied into the merged folder (so `aocheck analyze` works on the
/// merged report too); a case's evidence in two shards is refused, as its report would be.
fn copy_evidence(shards: &[std::path::PathBuf], out: &Path) -> Result<(), String> {
    let to = out.join("evidence");
    for s in shards {
        let dir = if s.is_dir() {
            s.clone()
        } else {
            s.parent().map(Path::to_path_buf).unwrap_or_default()
        };
        let Ok(entries) = std::fs::read_dir(dir.join("evidence")) else {
            continue;
        };
        std::fs::create_dir_all(&to).map_err(|e| format!("{}: {e}", to.display()))?;
        for e in entries.flatten() {
            let target = to.join(e.file_name());
            if target.exists() {
                return Err(format!(
                    "{}: the same case's evidence is in two shards",
                    e.path().display()
                ));
            }
            std::fs::copy(e.path(), &target)
                .map_err(|err| format!("{}: {err}", e.path().display()))?;
        }
    }
    Ok(())
}

/// The command: reads each shard's report, merges, writes every format (signed with `sign`).
pub fn merge_cmd(a: crate::explore::merge::MergeArgs) -> u8 {
    let signing = match crate::setup::signing_key(a.sign.as_deref()) {
        Ok(k) => k,
        Err(code) => return code,
    };
    let mut shards = Vec::new();
    for p in &a.shards {
        let file = file_of(p);
        let shown = crate::runner::repro_case_path(&file).display().to_string();
        let r: Report = match std::fs::read(&file)
            .map_err(|e| e.to_string())
            .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
        {
            Ok(r) => r,
            Err(e) => {
                eprintln!("error: {shown}: not a readable run report ({e})");
                return exit::INVALID_INPUT;
            }
        };
        shards.push((shown, r));
    }
    let run_id = format!("run-merge-{}", uuid::Uuid::now_v7().simple());
    let merged = match merge(&shards, &run_id) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("error: {e}");
            return exit::INVALID_INPUT;
        }
    };
    let out = match crate::setup::out_dir(Some(&a.out), "runs", &run_id) {
        Ok(o) => o,
        Err(code) => return code,
    };
    let same = |x: &Path| crate::setup::same_folder(x, &out);
    if a.shards
        .iter()
        .any(|p| same(p) || p.parent().is_some_and(same))
    {
        eprintln!(
            "error: {}: a shard's own folder; give a new folder for the merged report",
            out.display()
        );
        return exit::INVALID_INPUT;
    }
    let written = super::clear_outputs(&out)
        .and_then(|()| super::write_reports(&merged, &out, None))
        .and_then(|()| copy_evidence(&a.shards, &out))
        .and_then(|()| match signing.as_ref() {
            Some(k) => super::seal_run(&merged, &out, k).map(|_| ()),
            None => Ok(()),
        });
    if let Err(e) = written {
        eprintln!("error: writing reports to {}: {e}", out.display());
        return exit::INVALID_INPUT;
    }
    println!(
        "merged {} shard(s): {} passed, {} failed, {} other; reports in {}",
        shards.len(),
        merged.summary.pass,
        merged.summary.fail,
        merged.summary.other,
        out.display()
    );
    exit::of_report(&merged)
}
