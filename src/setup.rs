//! What `aocheck run` and `aocheck explore` both set up from their command line: the seed, the
//! output folder and the implementation's process spec. Each refusal is printed with the flag
//! and the fix, and returned as the exit code.

use crate::exit;
use crate::store::StoreSpec;
use std::path::{Path, PathBuf};

/// The seed given, or one drawn from the OS's entropy (kept short enough to type).
pub fn seed_or_draw(seed: Option<u64>) -> u64 {
    seed.unwrap_or_else(|| {
        let mut b = [0u8; 8];
        let _ = getrandom::fill(&mut b);
        u64::from_le_bytes(b) % 1_000_000_000
    })
}

/// The output folder (`--out`, or `reports/<kind>/<run id>`), created.
pub fn out_dir(out: Option<&PathBuf>, kind: &str, run_id: &str) -> Result<PathBuf, u8> {
    let out = match out {
        Some(o) => {
            if o.components()
                .any(|c| matches!(c, std::path::Component::ParentDir))
            {
                eprintln!(
                    "error: --out {}: `..` could escape the reports folder; name a folder without it",
                    o.display()
                );
                return Err(exit::INVALID_INPUT);
            }
            o.clone()
        }
        None => PathBuf::from("reports").join(kind).join(run_id),
    };
    if let Err(e) = std::fs::create_dir_all(&out) {
        eprintln!("error: cannot create {}: {e}", out.display());
        return Err(exit::INVALID_INPUT);
    }
    Ok(out)
}

/// Whether two paths name the same existing folder (a merge must not write into a shard's own).
pub fn same_folder(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

/// Holds `out` for this run alone: two runs writing one folder would delete each other's
/// per-case stores under their processes. The lock (`out/.aocheck.lock`) is released when the
/// returned file is dropped, or when the process ends, however it ends.
pub fn lock_out(out: &Path) -> Result<std::fs::File, u8> {
    let path = out.join(".aocheck.lock");
    let file = match std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
    {
        Ok(f) => f,
        Err(e) => {
            eprintln!("error: cannot create {}: {e}", path.display());
            return Err(exit::INVALID_INPUT);
        }
    };
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => {
            eprintln!(
                "error: --out {}: another aocheck run is writing this folder; give this run its own --out",
                out.display()
            );
            Err(exit::INVALID_INPUT)
        }
        Err(std::fs::TryLockError::Error(e)) => {
            eprintln!("error: cannot lock {}: {e}", path.display());
            Err(exit::INVALID_INPUT)
        }
    }
}

/// How to reach an implementation that aocheck did not write (`run` and `explore` alike).
#[derive(clap::Args, Debug)]
pub struct SutArgs {
    /// Judge this implementation through `aocheck-sut/2` (one process per executor generation,
    /// crashes are SIGKILL), e.g. `--sut 'python3 examples/python-sut/sut.py'`; without it, the
    /// reference in process.
    #[arg(long, value_name = "COMMAND")]
    pub sut: Option<String>,
    /// Seconds each `aocheck-sut/2` request may take before the process is killed.
    #[arg(long, default_value_t = 10)]
    pub sut_timeout: u64,
    /// A value that must never appear in any output (a credential the implementation is given
    /// some other way, e.g. through its environment); repeatable. Values in `--sut` after
    /// `NAME=`, `--token`, `--password`, `--api-key` and the like, and a store URL's password,
    /// are removed without it.
    #[arg(long, value_name = "VALUE")]
    pub redact: Vec<String>,
    /// Run the implementation's processes as this user (a name from /etc/passwd, or `UID` or
    /// `UID:GID`) when aocheck runs as root, so that they cannot read aocheck's memory,
    /// environment or files (a root process can read a non-dumpable one). The case folders
    /// they write are given to that user.
    #[arg(long, value_name = "USER")]
    pub sut_user: Option<String>,
}

impl SutArgs {
    /// The process spec, `None` without `--sut`.
    pub fn spec(
        &self,
        out: &Path,
        store: &StoreSpec,
    ) -> Result<Option<crate::sut::processes::ProcessSpec>, u8> {
        for v in &self.redact {
            if v.trim().chars().count() < crate::secrets::MIN_LEN {
                eprintln!(
                    "error: --redact: a value of fewer than {} characters would be removed from every word of every report; give the whole credential",
                    crate::secrets::MIN_LEN
                );
                return Err(exit::INVALID_INPUT);
            }
            crate::secrets::register(v);
        }
        if let StoreSpec::Postgres(u) = store {
            crate::secrets::redact_store_url(u);
        }
        let Some(command) = self.sut.as_deref() else {
            return Ok(None);
        };
        let user = sut_user(self.sut_user.as_deref())?;
        let mut spec = process_spec(command, self.sut_timeout, out, store)?;
        spec.user = user;
        Ok(Some(spec))
    }
}

/// The uid and gid `--sut-user` names; a note when aocheck runs as root without it.
fn sut_user(given: Option<&str>) -> Result<Option<(u32, u32)>, u8> {
    let root = rustix::process::geteuid().is_root();
    let Some(name) = given else {
        if root {
            eprintln!(
                "aocheck: note: aocheck runs as root and so do the implementation's processes, which can then read aocheck's memory and files; give --sut-user nobody (or another user) to run them apart"
            );
        }
        return Ok(None);
    };
    if !root {
        eprintln!(
            "error: --sut-user {name}: only root can start processes as another user; run aocheck as root, or leave --sut-user out (aocheck is then not dumpable, so processes of the same user cannot read it)"
        );
        return Err(exit::INVALID_INPUT);
    }
    resolve_user(
        name,
        &std::fs::read_to_string("/etc/passwd").unwrap_or_default(),
    )
    .map(Some)
    .map_err(|why| {
        eprintln!("error: --sut-user {name}: {why}");
        exit::INVALID_INPUT
    })
}

/// `UID`, `UID:GID` or a user name looked up in `passwd` (the text of /etc/passwd); root is
/// refused, since running apart from root is the point.
fn resolve_user(name: &str, passwd: &str) -> Result<(u32, u32), String> {
    let numeric = |s: &str| s.trim().parse::<u32>().ok();
    let ids = if let Some((u, g)) = name.split_once(':') {
        match (numeric(u), numeric(g)) {
            (Some(u), Some(g)) => (u, g),
            _ => return Err("give a user name, UID or UID:GID (both numbers)".into()),
        }
    } else if let Some(u) = numeric(name) {
        (u, u)
    } else {
        passwd
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split(':').collect();
                (f.len() >= 4 && f[0] == name).then(|| (numeric(f[2]), numeric(f[3])))
            })
            .find_map(|(u, g)| u.zip(g))
            .ok_or_else(|| {
                "no such user in /etc/passwd; give an existing user (`nobody` is on most systems) or a UID".to_string()
            })?
    };
    if ids.0 == 0 {
        return Err("that is root; name an unprivileged user, e.g. nobody".into());
    }
    Ok(ids)
}

/// The implementation as `aocheck-sut/2` processes: one per executor generation, each request
/// with `timeout_secs`, sharing the durable store `spec`.
fn process_spec(
    command: &str,
    timeout_secs: u64,
    out: &Path,
    spec: &StoreSpec,
) -> Result<crate::sut::processes::ProcessSpec, u8> {
    if command.trim().is_empty() {
        eprintln!("error: --sut: the command is empty; name the program that speaks aocheck-sut/2");
        return Err(exit::INVALID_INPUT);
    }
    if matches!(spec, StoreSpec::Memory) {
        eprintln!(
            "error: --sut with --store memory: processes cannot share a memory store; use sqlite (the default) or postgres:URL"
        );
        return Err(exit::INVALID_INPUT);
    }
    // Cases run one at a time and every child of this process is an implementation process: an
    // orphan that escapes its group is then still found (D52).
    if !crate::sut::process::become_subreaper() {
        eprintln!(
            "aocheck: note: cannot become the reaper of orphaned processes here; an implementation process that leaves its process group, clears its environment and closes its pipes would go unseen"
        );
    }
    Ok(crate::sut::processes::ProcessSpec {
        command: command.to_string(),
        timeout: std::time::Duration::from_secs(timeout_secs.max(1)),
        dir: out.to_path_buf(),
        postgres: match spec {
            StoreSpec::Postgres(u) => Some(u.clone()),
            _ => None,
        },
        user: None,
    })
}

/// The private key of `--sign PATH` (none without it); a key that cannot be read is refused
/// (exit 3) before anything runs.
pub fn signing_key(
    path: Option<&std::path::Path>,
) -> Result<Option<ed25519_dalek::SigningKey>, u8> {
    let Some(p) = path else {
        return Ok(None);
    };
    {
        use std::os::unix::fs::PermissionsExt as _;
        if let Ok(m) = std::fs::metadata(p)
            && m.permissions().mode() & 0o077 != 0
        {
            eprintln!(
                "error: --sign {}: the private key can be read by others (mode {:04o}); make it the owner's alone (chmod 600 {}) or make a new pair with `aocheck keygen`",
                p.display(),
                m.permissions().mode() & 0o7777,
                p.display()
            );
            return Err(crate::exit::INVALID_INPUT);
        }
    }
    std::fs::read_to_string(p)
        .map_err(|e| e.to_string())
        .and_then(|t| crate::report::attest::signing_key(&t).map_err(|e| e.to_string()))
        .map(Some)
        .map_err(|e| {
            eprintln!("error: --sign {}: {e}", p.display());
            crate::exit::INVALID_INPUT
        })
}

#[cfg(test)]
mod tests {
    use super::resolve_user;

    const PASSWD: &str = "root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\nbroken:x:abc:1::/:/bin/sh\nsvc:x:1001:1002::/home/svc:/bin/sh\n";

    #[rstest::rstest]
    #[case("nobody", Ok((65534, 65534)))]
    #[case("svc", Ok((1001, 1002)))]
    #[case("4242", Ok((4242, 4242)))]
    #[case("4242:77", Ok((4242, 77)))]
    #[case("root", Err("that is root"))]
    #[case("0", Err("that is root"))]
    #[case("0:5", Err("that is root"))]
    #[case("ghost", Err("no such user"))]
    #[case("broken", Err("no such user"))]
    #[case("a:b", Err("both numbers"))]
    fn sut_user_is_a_name_or_ids_and_never_root(
        #[case] given: &str,
        #[case] want: Result<(u32, u32), &str>,
    ) {
        match (resolve_user(given, PASSWD), want) {
            (Ok(got), Ok(w)) => assert_eq!(got, w),
            (Err(got), Err(w)) => assert!(got.contains(w), "{given}: {got}"),
            (got, w) => panic!("{given}: got {got:?}, want {w:?}"),
        }
    }
}
