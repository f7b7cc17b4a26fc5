//! Where seed 002 keeps designs and runs: `<home>/workflow-designs/<name>.json` and
//! `<home>/workflow-runs/<run_id>.json`, each written to a temp file in its own folder and then
//! renamed over the old one (`os.replace`), so a reader polling the file while the runner saves
//! after every step never sees a partial one. Names and run ids are checked
//! ([`super::names`]) before they become paths. A missing file and an unreadable or corrupt
//! one are told apart, and each names the design or run.

use super::design::{Defect, validate};
use super::names::{design_name_ok, run_id_ok};
use super::run::RunState;
use serde_json::Value;
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// Why a design or a run could not be read or written.
#[derive(Debug, PartialEq)]
pub enum StoreError {
    /// A name or run id that is not one (it would reach outside its folder).
    BadName(String),
    /// No such design or run (the seed's `FileNotFoundError`).
    Missing(String),
    /// There, but unreadable or not what it should be (the seed's `ValueError`, naming it).
    Corrupt(String),
    /// A design the rulebook refuses (the store re-validates before it writes).
    Invalid(Vec<Defect>),
    /// The disk refused.
    Io(String),
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::BadName(m)
            | StoreError::Missing(m)
            | StoreError::Corrupt(m)
            | StoreError::Io(m) => f.write_str(m),
            StoreError::Invalid(d) => write!(
                f,
                "the design is refused: {}",
                d.iter()
                    .map(|d| format!("{} {}: {}", d.node, d.field, d.msg))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        }
    }
}

/// Writes `bytes` to `path` atomically: a temp file in the same folder, flushed to disk, then
/// renamed over `path`.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let dir = path
        .parent()
        .ok_or_else(|| StoreError::Io(format!("{}: no folder", path.display())))?;
    std::fs::create_dir_all(dir).map_err(|e| StoreError::Io(format!("{}: {e}", dir.display())))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}.tmp", uuid::Uuid::new_v4().simple()));
    let io = |e: std::io::Error| StoreError::Io(format!("{}: {e}", tmp.display()));
    let mut f = std::fs::File::create(&tmp).map_err(io)?;
    f.write_all(bytes).map_err(io)?;
    f.sync_all().map_err(io)?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        StoreError::Io(format!("{}: {e}", path.display()))
    })
}

/// Designs and runs under one home folder.
#[derive(Clone, Debug)]
pub struct Home(pub PathBuf);

impl Home {
    fn design_path(&self, name: &str) -> Result<PathBuf, StoreError> {
        if !design_name_ok(name) {
            return Err(StoreError::BadName(format!(
                "design name {name:?}: use ^[a-z0-9][a-z0-9_.-]{{0,63}}$"
            )));
        }
        Ok(self.0.join("workflow-designs").join(format!("{name}.json")))
    }
    fn run_path(&self, run_id: &str) -> Result<PathBuf, StoreError> {
        if !run_id_ok(run_id) {
            return Err(StoreError::BadName(format!(
                "run id {run_id:?}: use ^[a-f0-9]{{6,32}}$"
            )));
        }
        Ok(self.0.join("workflow-runs").join(format!("{run_id}.json")))
    }

    /// Saves a design, validated again first (a second line of defence, not a second rulebook).
    pub fn save_design(&self, name: &str, graph: &Value) -> Result<(), StoreError> {
        let path = self.design_path(name)?;
        let d = validate(graph);
        if !d.is_empty() {
            return Err(StoreError::Invalid(d));
        }
        let bytes = serde_json::to_vec_pretty(graph)
            .map_err(|e| StoreError::Io(format!("design {name}: {e}")))?;
        write_atomic(&path, &bytes)
    }

    pub fn load_design(&self, name: &str) -> Result<Value, StoreError> {
        let path = self.design_path(name)?;
        read(&path, &format!("design {name}"))
    }

    pub fn save_run(&self, st: &RunState) -> Result<(), StoreError> {
        let path = self.run_path(&st.run_id)?;
        let bytes = serde_json::to_vec_pretty(st)
            .map_err(|e| StoreError::Io(format!("run {}: {e}", st.run_id)))?;
        write_atomic(&path, &bytes)
    }

    /// Where run `run_id` is kept (for a reader beside the runner).
    pub fn run_file(&self, run_id: &str) -> Result<PathBuf, StoreError> {
        self.run_path(run_id)
    }

    /// A save cut off by a kill mid-write: the first half of the new state is in a temp file
    /// beside the run file, which stays as it was (the harness's kill at that save point).
    pub fn save_run_cut(&self, st: &RunState) -> Result<(), StoreError> {
        let path = self.run_path(&st.run_id)?;
        let bytes = serde_json::to_vec_pretty(st)
            .map_err(|e| StoreError::Io(format!("run {}: {e}", st.run_id)))?;
        let dir = path
            .parent()
            .ok_or_else(|| StoreError::Io(format!("{}: no folder", path.display())))?;
        std::fs::create_dir_all(dir)
            .map_err(|e| StoreError::Io(format!("{}: {e}", dir.display())))?;
        let tmp = dir.join(format!(".{}.json.cut.tmp", st.run_id));
        std::fs::write(&tmp, &bytes[..bytes.len() / 2])
            .map_err(|e| StoreError::Io(format!("{}: {e}", tmp.display())))
    }

    /// [`Home::save_run`] with one deliberate defect (test builds only): `WriteInPlace`
    /// truncates the run file and writes it where it is.
    #[cfg(feature = "test-knobs")]
    pub fn save_run_broken(
        &self,
        st: &RunState,
        d: super::WorkflowDefect,
    ) -> Result<(), StoreError> {
        if d != super::WorkflowDefect::WriteInPlace {
            return self.save_run(st);
        }
        let path = self.run_path(&st.run_id)?;
        let bytes = serde_json::to_vec_pretty(st)
            .map_err(|e| StoreError::Io(format!("run {}: {e}", st.run_id)))?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| StoreError::Io(format!("{}: {e}", dir.display())))?;
        }
        std::fs::write(&path, bytes).map_err(|e| StoreError::Io(format!("{}: {e}", path.display())))
    }

    pub fn load_run(&self, run_id: &str) -> Result<RunState, StoreError> {
        let path = self.run_path(run_id)?;
        let v = read(&path, &format!("run {run_id}"))?;
        let st: RunState = serde_json::from_value(v)
            .map_err(|e| StoreError::Corrupt(format!("run {run_id} ({}): {e}", path.display())))?;
        if st.run_id != run_id {
            return Err(StoreError::Corrupt(format!(
                "run {run_id} ({}): it holds run {:?}",
                path.display(),
                st.run_id
            )));
        }
        Ok(st)
    }
}

fn read(path: &Path, what: &str) -> Result<Value, StoreError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(StoreError::Missing(format!(
                "{what}: no file {}",
                path.display()
            )));
        }
        Err(e) => {
            return Err(StoreError::Corrupt(format!(
                "{what} ({}): {e}",
                path.display()
            )));
        }
    };
    serde_json::from_slice(&bytes)
        .map_err(|e| StoreError::Corrupt(format!("{what} ({}): not JSON: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn home() -> (tempfile::TempDir, Home) {
        let d = tempfile::tempdir().expect("tempdir");
        let h = Home(d.path().to_path_buf());
        (d, h)
    }

    #[test]
    fn a_run_round_trips_and_missing_and_corrupt_are_told_apart() {
        let (_d, h) = home();
        let st = RunState::new("d7b493cae249", "hello-world");
        h.save_run(&st).expect("saved");
        assert_eq!(h.load_run("d7b493cae249").expect("loaded"), st);
        assert!(
            matches!(h.load_run("abcdef"), Err(StoreError::Missing(m)) if m.contains("run abcdef"))
        );
        std::fs::write(h.0.join("workflow-runs/abcdef.json"), b"{\"run_id\": \"abc")
            .expect("write");
        assert!(
            matches!(h.load_run("abcdef"), Err(StoreError::Corrupt(m)) if m.contains("run abcdef"))
        );
        std::fs::write(h.0.join("workflow-runs/abcdef.json"), b"{\"run_id\": 1}").expect("write");
        assert!(matches!(h.load_run("abcdef"), Err(StoreError::Corrupt(_))));
        // A file under one run's id that holds another's is not that run.
        let other = RunState::new("abcdef0", "x");
        std::fs::write(
            h.0.join("workflow-runs/abcdef.json"),
            serde_json::to_vec(&other).expect("json"),
        )
        .expect("write");
        assert!(
            matches!(h.load_run("abcdef"), Err(StoreError::Corrupt(m)) if m.contains("abcdef0"))
        );
    }

    #[test]
    fn no_name_reaches_outside_its_folder() {
        let (_d, h) = home();
        for bad in ["../evil", "a/b", "", "UP"] {
            assert!(
                matches!(h.load_design(bad), Err(StoreError::BadName(_))),
                "{bad}"
            );
        }
        for bad in ["../abcdef", "ABCDEF", "abc"] {
            assert!(
                matches!(h.load_run(bad), Err(StoreError::BadName(_))),
                "{bad}"
            );
            let st = RunState::new(bad, "x");
            assert!(
                matches!(h.save_run(&st), Err(StoreError::BadName(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn the_store_validates_again_before_it_writes() {
        let (_d, h) = home();
        let bad = json!({"nodes": [{"id": "a", "type": "agent"}]});
        assert!(matches!(h.save_design("bad", &bad), Err(StoreError::Invalid(d)) if !d.is_empty()));
        assert!(matches!(h.load_design("bad"), Err(StoreError::Missing(_))));
        let good = json!({"nodes": [{"id": "start", "type": "trigger"}]});
        h.save_design("good", &good).expect("saved");
        assert_eq!(h.load_design("good").expect("loaded"), good);
    }

    /// A reader polling the run file while it is saved again and again only ever reads a whole
    /// state (a write in place would truncate first, and a read would see a partial file).
    #[test]
    fn a_concurrent_reader_never_sees_a_partial_state() {
        let (_d, h) = home();
        let mut st = RunState::new("abcdef", "x");
        h.save_run(&st).expect("saved");
        let reader = {
            let h = h.clone();
            std::thread::spawn(move || {
                let mut reads = 0;
                for _ in 0..400 {
                    match h.load_run("abcdef") {
                        Ok(_) => reads += 1,
                        Err(e) => return Err(e.to_string()),
                    }
                }
                Ok(reads)
            })
        };
        for i in 0..400 {
            st.cursor = i;
            st.outputs
                .insert(format!("n{i}"), json!("x".repeat(i % 50)));
            h.save_run(&st).expect("saved");
        }
        let r = reader.join().expect("reader");
        assert_eq!(r, Ok(400));
        // No temp file is left behind.
        let left: Vec<_> = std::fs::read_dir(h.0.join("workflow-runs"))
            .expect("dir")
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(left.is_empty());
    }
}
