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
        self.sut
            .as_deref()
            .map(|c| process_spec(c, self.sut_timeout, out, store))
            .transpose()
    }
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
