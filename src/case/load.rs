//! Loading: case files from a file or a folder, parsed, validated, and checked once; each defect
//! names its file and, where it can, its line.

use super::model::*;
use super::validate::validate;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Finds the 1-based line a field path points at, where possible: `steps[N]…` → the Nth item of
/// the `steps:` list; `expect.occurrences.<label>…` → the label's line; otherwise the first line
/// starting with the path's last key.
/// Where a YAML syntax error stopped the parser, as a field path (`steps[3]`, `expect.
/// occurrences.o1`), read from the block structure of the lines up to `line` (1-based): a
/// syntax error has no parsed field to name, but the nearest enclosing one tells where to look.
pub(crate) fn path_at(text: &str, line: usize) -> String {
    enum Seg {
        Key(String),
        Item(usize),
    }
    let mut stack: Vec<(usize, Seg)> = Vec::new();
    for l in text.lines().take(line) {
        let body = l.trim_start();
        if body.is_empty() || body.starts_with('#') {
            continue;
        }
        let indent = l.len() - body.len();
        let key_of = |t: &str| {
            let (k, _) = t.split_once(':')?;
            let k = k.trim();
            (!k.is_empty() && !k.starts_with(['{', '[', '"', '\'', '-']) && !k.contains(' '))
                .then(|| k.to_string())
        };
        if body == "-" || body.starts_with("- ") {
            while stack.last().is_some_and(|(i, _)| *i > indent) {
                stack.pop();
            }
            match stack.last_mut() {
                Some((i, Seg::Item(n))) if *i == indent => *n += 1,
                _ => stack.push((indent, Seg::Item(0))),
            }
            if let Some(k) = key_of(body[1..].trim_start()) {
                stack.push((indent + 2, Seg::Key(k)));
            }
        } else if let Some(k) = key_of(body) {
            while stack.last().is_some_and(|(i, _)| *i >= indent) {
                stack.pop();
            }
            stack.push((indent, Seg::Key(k)));
        }
    }
    let mut out = String::new();
    for (_, seg) in &stack {
        match seg {
            Seg::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Seg::Item(n) => out.push_str(&format!("[{n}]")),
        }
    }
    if out.is_empty() { "-".into() } else { out }
}

/// The case id a file states (`id: X` at the top level), read from the text when the file does
/// not parse.
fn id_in(text: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let v = l.strip_prefix("id:")?.trim().trim_matches(['"', '\'']);
        (!v.is_empty()).then(|| v.to_string())
    })
}

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
                let mut line: Option<usize> = msg
                    .split("line ")
                    .nth(1)
                    .and_then(|r| r.split(|ch: char| !ch.is_ascii_digit()).next())
                    .and_then(|n| n.parse().ok());
                // An unknown field is reported at its mapping's start: point at the field itself.
                if let (Some(from), Some(field)) = (
                    line,
                    msg.split("unknown field `")
                        .nth(1)
                        .and_then(|r| r.split('`').next()),
                ) {
                    let own =
                        text.lines()
                            .enumerate()
                            .skip(from.saturating_sub(1))
                            .find(|(_, l)| {
                                let b = l
                                    .trim_start()
                                    .trim_start_matches("- ")
                                    .trim_start_matches('{');
                                b.trim_start().starts_with(&format!("{field}:"))
                            });
                    if let Some((i, _)) = own {
                        line = Some(i + 1);
                    }
                }
                defects.push(CaseDefect {
                    file: name,
                    case: id_in(&text),
                    field: line.map_or_else(|| "-".into(), |n| path_at(&text, n)),
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
                // Not cases: the case schema, and conformance sets (data a test reads, such as
                // seed 002's validator table in cases/workflow/sets/).
                if p.file_name().is_some_and(|n| n != "schema" && n != "sets") {
                    collect(&p, out);
                }
            } else if p.extension().is_some_and(|x| x == "yaml" || x == "yml") {
                out.push(p);
            }
        }
    }
}

#[cfg(test)]
mod syntax_tests {
    use super::path_at;
    use rstest::rstest;

    const CASE: &str = "id: X\nsteps:\n  - {do: join, executor: e1}\n  - do: create\n    occurrence: o1\n  - {do: reserve\nexpect:\n  occurrences:\n    o1:\n      state: resolved\n";

    #[rstest]
    #[case(1, "id")]
    #[case(3, "steps[0]")]
    #[case(5, "steps[1].occurrence")]
    #[case(6, "steps[2]")]
    #[case(9, "expect.occurrences.o1")]
    #[case(10, "expect.occurrences.o1.state")]
    fn a_syntax_error_is_placed_in_its_enclosing_field(#[case] line: usize, #[case] want: &str) {
        assert_eq!(path_at(CASE, line), want);
    }

    #[test]
    fn zero_indented_sequences_count_their_items() {
        let t = "steps:\n- do: join\n- do: create\n  key: k\n";
        assert_eq!(path_at(t, 4), "steps[1].key");
    }
}
