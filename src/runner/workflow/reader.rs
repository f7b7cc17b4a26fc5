//! The reader beside a workflow runner: it reads the run file every millisecond while the
//! runner drives, as seed 002's canvas polls it, and tells what it saw (partial reads, a file
//! rewritten in place or gone, and each whole state once).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// What the reader beside the runner saw of the run file.
#[derive(Debug, Default)]
pub(super) struct Seen {
    pub(super) reads: u64,
    /// A read that was not a whole state (the bytes' start, for the message).
    pub(super) partial: Option<String>,
    /// The file's contents changed while it stayed the same file (rewritten in place).
    pub(super) in_place: bool,
    /// The file was gone after a whole state had been read from it.
    pub(super) vanished: bool,
    /// Each whole state read, once, in the order read (at most [`MAX_BETWEEN`]).
    pub(super) states: Vec<crate::workflow::run::RunState>,
    /// More distinct states came than the reader keeps: those after [`MAX_BETWEEN`] were
    /// read and not judged (the drive cannot be decided whole).
    pub(super) overflow: bool,
    /// A whole JSON document that is not a run state (the bytes' start, for the message).
    pub(super) not_state: Option<String>,
}

/// The states a reader keeps from one drive, at most (a drive of an honest runner saves about
/// once per step; a drive that saves more distinct states is not judged whole, never passed).
pub(super) const MAX_BETWEEN: usize = 1024;

/// Tells the reader beside the runner to stop when dropped, so a drive whose future is dropped
/// (a case cut short) leaves no reader behind.
pub(super) struct Stop(pub(super) Arc<AtomicBool>);

impl Drop for Stop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Reads `path` every millisecond until `stop`, keeping the file it last read open, so its
/// inode cannot be reused: new contents under the same inode were written into the same file.
pub(super) fn read_beside(path: std::path::PathBuf, stop: Arc<AtomicBool>) -> Seen {
    let mut seen = Seen::default();
    let mut last: Option<(std::fs::File, u64, Vec<u8>)> = None;
    loop {
        let done = stop.load(Ordering::SeqCst);
        let opened = std::fs::File::open(&path);
        if let Err(e) = &opened
            && e.kind() == std::io::ErrorKind::NotFound
            && last.is_some()
        {
            seen.vanished = true;
        }
        if let Ok(mut f) = opened {
            let mut bytes = Vec::new();
            let ino = inode(&f);
            if std::io::Read::read_to_end(&mut f, &mut bytes).is_ok() {
                seen.reads += 1;
                // The same bytes as the read before were judged then: parsed only on a change.
                let changed = last.as_ref().is_none_or(|(_, _, b)| *b != bytes);
                if !changed {
                } else if serde_json::from_slice::<serde_json::Value>(&bytes).is_err() {
                    if seen.partial.is_none() {
                        let head =
                            String::from_utf8_lossy(&bytes[..bytes.len().min(40)]).to_string();
                        seen.partial = Some(format!("{} bytes, starting {head:?}", bytes.len()));
                    }
                } else {
                    match serde_json::from_slice::<crate::workflow::run::RunState>(&bytes) {
                        Err(_) if seen.not_state.is_none() => {
                            let head =
                                String::from_utf8_lossy(&bytes[..bytes.len().min(60)]).to_string();
                            seen.not_state =
                                Some(format!("{} bytes, starting {head:?}", bytes.len()));
                        }
                        Err(_) => {}
                        Ok(st) if seen.states.last() == Some(&st) => {}
                        Ok(_) if seen.states.len() >= MAX_BETWEEN => seen.overflow = true,
                        Ok(st) => seen.states.push(st),
                    }
                }
                if let Some((_, last_ino, last_bytes)) = &last
                    && ino.is_some_and(|i| i == *last_ino)
                    && *last_bytes != bytes
                {
                    seen.in_place = true;
                }
                if let Some(i) = ino {
                    last = Some((f, i, bytes));
                }
            }
        }
        if done {
            return seen;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[cfg(unix)]
fn inode(f: &std::fs::File) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    f.metadata().ok().map(|m| m.ino())
}

#[cfg(not(unix))]
fn inode(_: &std::fs::File) -> Option<u64> {
    None
}
