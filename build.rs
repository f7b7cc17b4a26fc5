//! Names the git commit the binary is built from (`aocheck --version`): `AOCHECK_GIT_COMMIT`
//! from the environment when given (a build from a source archive), else `git rev-parse`, else
//! "unknown". Nothing else is generated.
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}

fn main() {
    println!("cargo:rerun-if-env-changed=AOCHECK_GIT_COMMIT");
    let commit = std::env::var("AOCHECK_GIT_COMMIT")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .or_else(|| git(&["rev-parse", "--short=12", "HEAD"]))
        .unwrap_or_else(|| "unknown".into());
    // Rebuilt when HEAD moves: HEAD itself, the branch it names, and the packed refs.
    if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
        let dir = std::path::PathBuf::from(dir);
        println!("cargo:rerun-if-changed={}", dir.join("HEAD").display());
        println!(
            "cargo:rerun-if-changed={}",
            dir.join("packed-refs").display()
        );
        if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
            println!("cargo:rerun-if-changed={}", dir.join(branch).display());
        }
    }
    println!("cargo:rustc-env=AOCHECK_GIT_COMMIT={commit}");
}
