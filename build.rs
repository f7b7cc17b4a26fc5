//! Names the git commit the binary is built from (`aocheck --version`): `AOCHECK_GIT_COMMIT`
//! from the environment when given (a build from a source archive), else `git rev-parse`, else
//! "unknown". Nothing else is generated.
//!
//! Cargo reruns a build script whose watched path does not exist on every build, so only paths
//! that exist are watched: HEAD, the reflog of HEAD (appended by every commit, checkout and
//! reset, whether the branch's ref is loose or packed), the branch's loose ref and the packed
//! refs. A build with nothing changed is then a no-op.
use std::path::{Path, PathBuf};
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}

fn watch(path: &Path) {
    if path.exists() {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}

fn main() {
    println!("cargo:rerun-if-env-changed=AOCHECK_GIT_COMMIT");
    let commit = std::env::var("AOCHECK_GIT_COMMIT")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .or_else(|| git(&["rev-parse", "--short=12", "HEAD"]))
        .unwrap_or_else(|| "unknown".into());
    match git(&["rev-parse", "--git-dir"]) {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            watch(&dir.join("HEAD"));
            watch(&dir.join("logs").join("HEAD"));
            watch(&dir.join("packed-refs"));
            if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
                watch(&dir.join(branch));
            }
        }
        // Not a git checkout: the commit can only come from the environment, watched above;
        // watching build.rs itself keeps cargo from rerunning the script on every change.
        None => println!("cargo:rerun-if-changed=build.rs"),
    }
    println!("cargo:rustc-env=AOCHECK_GIT_COMMIT={commit}");
}
