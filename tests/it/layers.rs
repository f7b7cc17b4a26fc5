//! The crate's layers point one way: no two source files import each other, directly or around a
//! loop, and every import goes down the floor table ([`FLOORS`]): the base (`digest`, `vocab`,
//! `clock`, the providers' room), the domain (`aoc`), the stores, and so up to the command line. Read from the source text (`crate::…` and `super::…` paths outside
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
                let rel = rel.to_string_lossy();
                let name = rel.strip_suffix("/mod").unwrap_or(&rel).replace('/', "::");
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

/// The floors of the crate, lowest first (issue 38): a module imports only from its own folder
/// or from a folder on a lower floor, never sideways (two folders on one floor import nothing of
/// each other) and never up. A new top-level folder is given its floor here.
const FLOORS: &[&[&str]] = &[
    // The base: words, digests, the clock, secrets, and the providers' room (the simulators,
    // reached through `provider_model`).
    &["clock", "digest", "vocab", "secrets", "providers"],
    // The coordination domain and its port to storage.
    &["aoc"],
    // The stores, which implement the domain's port.
    &["store"],
    // The Hermes operator connector (seed 000), written against the domain and a store.
    &["operator"],
    // Seed 002's Hermes Workflow: its rulebook, plan and runner, and a host that reaches Hermes
    // through the connector's client.
    &["workflow"],
    // Case files: what a case declares.
    &["case"],
    // The judge: facts, checkers, verdicts and the evidence tape.
    &["check"],
    // What a verdict looks like on paper; talking to an implementation through the protocol.
    &["report", "sut"],
    // Exit codes (read from a report).
    &["exit"],
    // The reference implementation; setting up a run (keys, output folders, processes).
    &["reference", "setup"],
    // The runner: one case against one implementation and the simulated providers.
    &["runner"],
    // Seeded exploration of fault schedules.
    &["explore"],
    // CI verification runs: expectations, diffs and merges over runs.
    &["ci"],
    // Deploy mode: a running service judged through its own API.
    &["deploy"],
    // The command line, and the binaries built on the library.
    &["cli", "bin"],
];

/// Every import that does not go down a floor, and every folder with no floor.
fn against_the_floors(
    edges: &BTreeMap<String, BTreeSet<String>>,
    floors: &[&[&str]],
) -> Vec<String> {
    let top = |m: &str| m.split("::").next().unwrap_or("").to_string();
    let floor = |f: &str| floors.iter().position(|fl| fl.contains(&f));
    let mut out = Vec::new();
    for (m, to) in edges {
        let (a, Some(fa)) = (top(m), floor(&top(m))) else {
            out.push(format!("{m}: folder {} has no floor in FLOORS", top(m)));
            continue;
        };
        for t in to {
            let b = top(t);
            if a == b {
                continue;
            }
            match floor(&b) {
                None => out.push(format!("{t}: folder {b} has no floor in FLOORS")),
                Some(fb) if fb >= fa => out.push(format!(
                    "{m} (floor {fa}) -> {t} (floor {fb}): {}",
                    if fb == fa { "sideways" } else { "upward" }
                )),
                Some(_) => {}
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

#[test]
fn every_import_goes_down_a_floor() {
    let g = edges();
    assert!(g.len() > 40, "the source was not read: {} modules", g.len());
    let wrong = against_the_floors(&g, FLOORS);
    assert!(wrong.is_empty(), "against the floors: {wrong:#?}");
    // Every floor names a folder that is there (a stale table is a wrong table).
    let tops: BTreeSet<String> = g
        .keys()
        .map(|m| m.split("::").next().unwrap_or("").to_string())
        .collect();
    for f in FLOORS.iter().flat_map(|fl| fl.iter()) {
        assert!(
            tops.contains(*f),
            "FLOORS names {f}, which src/ does not have"
        );
    }
    // The base is the base: digests and words import nothing of the crate.
    for (m, to) in &g {
        if ["digest", "vocab"].contains(&m.as_str()) {
            assert!(to.is_empty(), "{m} imports {to:?}");
        }
    }
    // The rule itself, both ways: down is allowed, up, sideways and unknown are named.
    let one = |from: &str, to: &str| {
        BTreeMap::from([(from.to_string(), BTreeSet::from([to.to_string()]))])
    };
    assert!(against_the_floors(&one("check::steps", "case::model"), FLOORS).is_empty());
    assert!(against_the_floors(&one("check::steps", "check::facts"), FLOORS).is_empty());
    assert_eq!(
        against_the_floors(&one("aoc::domain", "store"), FLOORS),
        ["aoc::domain (floor 1) -> store (floor 2): upward"]
    );
    assert_eq!(
        against_the_floors(&one("report::html", "sut::message"), FLOORS),
        ["report::html (floor 7) -> sut::message (floor 7): sideways"]
    );
    assert_eq!(
        against_the_floors(&one("mcp::server", "aoc"), FLOORS),
        ["mcp::server: folder mcp has no floor in FLOORS"]
    );
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
