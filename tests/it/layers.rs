//! The crate's layers point one way: no two source files import each other, directly or around a
//! loop, and the base (`digest`, `vocab`, `clock`), the domain (`aoc`) and the stores import
//! nothing above them. Read from the source text (`crate::…` and `super::…` paths outside
//! tests; a module and its own parent or children are one unit).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

fn modules() -> BTreeMap<String, String> {
    fn walk(dir: &Path, out: &mut BTreeMap<String, String>) {
        for e in std::fs::read_dir(dir).expect("src").flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let rel = p
                    .strip_prefix(Path::new(env!("CARGO_MANIFEST_DIR")).join("src"))
                    .expect("under src")
                    .with_extension("");
                let name = rel.to_string_lossy().replace("/mod", "").replace('/', "::");
                if name == "lib" || name == "main" {
                    continue;
                }
                let text = std::fs::read_to_string(&p).expect("read");
                let code = text.split("#[cfg(test)]").next().unwrap_or("").to_string();
                out.insert(name, code);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut out);
    out
}

fn edges() -> BTreeMap<String, BTreeSet<String>> {
    let mods = modules();
    let names: BTreeSet<String> = mods.keys().cloned().collect();
    let mut edges = BTreeMap::new();
    for (m, code) in &mods {
        let mut to = BTreeSet::new();
        let here: Vec<&str> = m.split("::").collect();
        for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
            // `crate::a::b` and `super::…::a::b` (each `super::` names the parent), so that
            // two files importing each other through `super::` are seen too.
            let mut paths: Vec<Vec<String>> = Vec::new();
            for (i, _) in line.match_indices("crate::") {
                let path: String = line[i + 7..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
                    .collect();
                paths.push(
                    path.split("::")
                        .filter(|p| !p.is_empty())
                        .map(str::to_string)
                        .collect(),
                );
            }
            for (i, _) in line.match_indices("super::") {
                if line[..i].ends_with("super::")
                    || line[..i].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
                {
                    continue;
                }
                let mut ups = 0;
                let mut tail = &line[i..];
                while let Some(t) = tail.strip_prefix("super::") {
                    ups += 1;
                    tail = t;
                }
                let path: String = tail
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
                    .collect();
                let mut parts: Vec<String> = here[..here.len().saturating_sub(ups)]
                    .iter()
                    .map(|s| s.to_string())
                    .collect();
                parts.extend(
                    path.split("::")
                        .filter(|p| !p.is_empty())
                        .map(str::to_string),
                );
                paths.push(parts);
            }
            for parts in paths {
                let target = (1..=parts.len())
                    .rev()
                    .map(|k| parts[..k].join("::"))
                    .find(|c| names.contains(c));
                if let Some(t) = target
                    && &t != m
                    && !t.starts_with(&format!("{m}::"))
                    && !m.starts_with(&format!("{t}::"))
                {
                    to.insert(t);
                }
            }
        }
        edges.insert(m.clone(), to);
    }
    edges
}

#[test]
fn no_source_file_imports_around_a_loop() {
    let g = edges();
    // Depth-first search for a back edge.
    fn visit(
        v: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(v.to_string(), 1);
        path.push(v.to_string());
        for w in g.get(v).into_iter().flatten() {
            match state.get(w.as_str()) {
                Some(1) => {
                    let at = path.iter().position(|p| p == w).unwrap_or(0);
                    let mut cycle = path[at..].to_vec();
                    cycle.push(w.clone());
                    return Some(cycle);
                }
                Some(_) => {}
                None => {
                    if let Some(c) = visit(w, g, state, path) {
                        return Some(c);
                    }
                }
            }
        }
        path.pop();
        state.insert(v.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    assert!(g.len() > 40, "the source was not read: {} modules", g.len());
    for v in g.keys() {
        if !state.contains_key(v.as_str())
            && let Some(c) = visit(v, &g, &mut state, &mut Vec::new())
        {
            panic!("an import loop: {}", c.join(" -> "));
        }
    }
}

#[test]
fn the_base_the_domain_and_the_stores_import_nothing_above_them() {
    let low = ["digest", "vocab", "clock", "aoc", "store"];
    let top = |m: &str| m.split("::").next().unwrap_or("").to_string();
    let mut upward = Vec::new();
    for (m, to) in edges() {
        if !low.contains(&top(&m).as_str()) {
            continue;
        }
        for t in to {
            if !low.contains(&top(&t).as_str()) {
                upward.push(format!("{m} -> {t}"));
            }
        }
    }
    assert!(upward.is_empty(), "upward imports: {upward:?}");
    // The base is the base: digests and words import nothing of the crate.
    for (m, to) in edges() {
        if ["digest", "vocab"].contains(&m.as_str()) {
            assert!(to.is_empty(), "{m} imports {to:?}");
        }
    }
}

/// The providers' room (issue 38): only `src/providers/` and the simulators' own binaries
/// (`src/bin/`) name a simulator crate. Everything else reads what the providers record through
/// `provider_model` and drives them through `crate::providers`, so a change inside a simulator
/// reaches the harness in one place, and a new provider is a new room member.
#[test]
fn only_the_providers_room_names_a_simulator() {
    fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).expect("src").flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    walk(&src, &mut files);
    assert!(
        files.len() > 40,
        "the source was not read: {} files",
        files.len()
    );
    let mut naming = Vec::new();
    for p in files {
        let rel = p
            .strip_prefix(&src)
            .expect("under src")
            .to_string_lossy()
            .to_string();
        let text = std::fs::read_to_string(&p).expect("read");
        naming.extend(names_a_simulator(&rel, &text));
    }
    assert!(naming.is_empty(), "outside src/providers/: {naming:#?}");
    // The rule itself, both ways: a checker naming a simulator is found; the room is not.
    assert_eq!(
        names_a_simulator("check/x.rs", "use fake_hermes::Handle;"),
        ["src/check/x.rs names fake_hermes"]
    );
    assert!(names_a_simulator("providers/mod.rs", "use fake_hermes::Handle;").is_empty());
}

/// What `rel` (a path under `src/`) with source `text` names of the simulator crates, where it
/// may not.
fn names_a_simulator(rel: &str, text: &str) -> Vec<String> {
    if rel.starts_with("providers/") || rel.starts_with("bin/") {
        return Vec::new();
    }
    ["fake_payments", "fake_hermes", "fake_control"]
        .into_iter()
        .filter(|c| text.contains(c))
        .map(|c| format!("src/{rel} names {c}"))
        .collect()
}

/// The World performs and records (issue 38): which requirements a step examined is decided
/// in `src/check/`, so no file outside it counts a fact itself.
#[test]
fn only_the_checkers_count_facts() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut counting = Vec::new();
    for (m, code) in modules() {
        if m == "check" || m.starts_with("check::") {
            continue;
        }
        if code.contains(".saw(") {
            counting.push(m);
        }
    }
    assert!(src.is_dir());
    assert!(
        counting.is_empty(),
        "facts counted outside src/check/: {counting:?}"
    );
}
