//! Loading: case files from a file or a folder, parsed, validated, and checked once; each defect
//! names its file and, where it can, its line.

use super::model::*;
use super::validate::validate;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Finds the 1-based line a field path points at, where possible: `steps[N]…` → the Nth item of
/// the `steps:` list; `expect.occurrences.<label>…` → the label's line; otherwise the first line
/// starting with the path's last key.
fn line_of(text: &str, field: &str) -> Option<usize> {
    let lines: Vec<&str> = text.lines().collect();
    if let Some(rest) = field.strip_prefix("steps[") {
        let n: usize = rest.split(']').next()?.parse().ok()?;
        let start = lines.iter().position(|l| l.trim_end() == "steps:")?;
        let indent = lines
            .get(start + 1..)?
            .iter()
            .find(|l| l.trim_start().starts_with("- "))?
            .len()
            - lines[start + 1..]
                .iter()
                .find(|l| l.trim_start().starts_with("- "))?
                .trim_start()
                .len();
        let mut k = 0;
        for (i, l) in lines.iter().enumerate().skip(start + 1) {
            let lead = l.len() - l.trim_start().len();
            if !l.trim().is_empty() && lead < indent {
                break;
            }
            if lead == indent && l.trim_start().starts_with("- ") {
                if k == n {
                    return Some(i + 1);
                }
                k += 1;
            }
        }
        return None;
    }
    if let Some(rest) = field
        .strip_prefix("expect.occurrences.")
        .or_else(|| field.strip_prefix("expect.admissions."))
    {
        let label = rest.split('.').next()?;
        return lines
            .iter()
            .position(|l| l.trim_start().starts_with(&format!("{label}:")))
            .map(|i| i + 1);
    }
    let key = field.rsplit('.').next()?.split('[').next()?;
    if key.is_empty() || key == "-" {
        return None;
    }
    lines
        .iter()
        .position(|l| {
            l.trim_start()
                .trim_start_matches("- ")
                .starts_with(&format!("{key}:"))
        })
        .map(|i| i + 1)
}

/// Loads every `*.yaml` under `path` (a file or a folder, recursively), validating each; returns
/// the cases and every defect found.
pub fn load(path: &Path) -> (Vec<LoadedCase>, Vec<CaseDefect>) {
    let mut files = Vec::new();
    collect(path, &mut files);
    files.sort();
    let mut cases = Vec::new();
    let mut defects = Vec::new();
    let mut ids: BTreeMap<String, String> = BTreeMap::new();
    if files.is_empty() {
        defects.push(CaseDefect {
            file: path.display().to_string(),
            case: None,
            field: "-".into(),
            line: None,
            msg: "no *.yaml case files here".into(),
            fix: "point at the cases folder or a case file".into(),
        });
    }
    for f in files {
        let name = f.display().to_string();
        let bytes = match std::fs::read(&f) {
            Ok(b) => b,
            Err(e) => {
                defects.push(CaseDefect {
                    file: name,
                    case: None,
                    field: "-".into(),
                    line: None,
                    msg: e.to_string(),
                    fix: "make the file readable".into(),
                });
                continue;
            }
        };
        let text = String::from_utf8_lossy(&bytes).into_owned();
        // YAML 1.2 booleans: only `true` and `false` are booleans, so `executor: n` or
        // `occurrence: on` stay the strings they look like.
        let options = serde_saphyr::options! { strict_booleans: true };
        match serde_saphyr::from_str_with_options::<Case>(&text, options) {
            Ok(c) => {
                let mut ds = validate(&name, &c);
                for d in &mut ds {
                    d.line = line_of(&text, &d.field);
                }
                if let Some(prev) = ids.insert(c.id.clone(), name.clone()) {
                    ds.push(CaseDefect {
                        file: name.clone(),
                        case: Some(c.id.clone()),
                        field: "id".into(),
                        line: line_of(&text, "id"),
                        msg: format!("the id is also used by {prev}"),
                        fix: "give every case its own id".into(),
                    });
                }
                // Only a case the rulebook passed is put in typed vocabulary (and can run).
                let checked = if ds.is_empty() {
                    match Checked::of(&c) {
                        Ok(k) => Some(k),
                        Err(msg) => {
                            ds.push(CaseDefect {
                                file: name.clone(),
                                case: Some(c.id.clone()),
                                field: "-".into(),
                                line: None,
                                msg,
                                fix: "a word the validator accepted does not parse: report this aocheck bug".into(),
                            });
                            None
                        }
                    }
                } else {
                    None
                };
                defects.extend(ds);
                cases.push(LoadedCase {
                    path: f,
                    case: c,
                    bytes,
                    checked,
                });
            }
            Err(e) => {
                let msg = e.to_string();
                let line = msg
                    .split("line ")
                    .nth(1)
                    .and_then(|r| r.split(|ch: char| !ch.is_ascii_digit()).next())
                    .and_then(|n| n.parse().ok());
                defects.push(CaseDefect {
                    file: name,
                    case: None,
                    field: "-".into(),
                    line,
                    msg,
                    fix: "check the YAML and the field names against cases/schema/case.schema.json"
                        .into(),
                });
            }
        }
    }
    (cases, defects)
}

fn collect(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_file() {
        out.push(path.to_path_buf());
    } else if let Ok(rd) = std::fs::read_dir(path) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                if p.file_name().is_some_and(|n| n != "schema") {
                    collect(&p, out);
                }
            } else if p.extension().is_some_and(|x| x == "yaml" || x == "yml") {
                out.push(p);
            }
        }
    }
}
