//! Newer mode's durable run records (`--state-dir`): a run created with an `Idempotency-Key` is
//! written when it starts and when it ends, and a restarted fake reads the records back, showing
//! a run that had not ended as `interrupted` (its event stream is gone) and replaying its key.
//! The default mode keeps nothing across a restart, as observed, and refuses a state dir.

use super::*;

/// What survives a restart of one keyed run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DurableRun {
    pub run_id: String,
    pub session_id: String,
    pub status: String,
    pub created_at: f64,
    pub updated_at: f64,
    pub last_event: Option<String>,
    pub output: Option<String>,
    pub error: Option<String>,
    pub idempotency_key: String,
    pub body_digest: String,
}

fn runs_dir(s: &Shared) -> Option<std::path::PathBuf> {
    s.config.state_dir.as_ref().map(|d| d.join("runs"))
}

/// Writes a keyed run's record (newer mode with a state dir; otherwise nothing to do).
pub(super) fn write(s: &Shared, cell: &RunCell, body_digest: &str) -> Result<(), String> {
    let Some(dir) = runs_dir(s) else {
        return Ok(());
    };
    let rec = {
        let i = lock(&cell.info);
        let Some(key) = &i.idempotency_key else {
            return Ok(());
        };
        DurableRun {
            run_id: i.run_id.clone(),
            session_id: i.session_id.clone(),
            status: i.status.clone(),
            created_at: i.created_at,
            updated_at: i.updated_at,
            last_event: i.last_event.clone(),
            output: i.output.clone(),
            error: i.error.clone(),
            idempotency_key: key.clone(),
            body_digest: body_digest.to_string(),
        }
    };
    script::persist(&dir, &rec.run_id, &rec).map_err(|e| {
        format!(
            "{}: {e}",
            dir.join(format!("{}.json", rec.run_id)).display()
        )
    })
}

/// Writes the record at the run's end; a failure is never dropped: it is logged and kept in
/// the ledger (`persist_errors`).
pub(super) fn write_end(s: &Shared, cell: &RunCell) {
    let digest = lock(&cell.durable_digest).clone();
    let Some(digest) = digest else { return };
    if let Err(e) = write(s, cell, &digest) {
        eprintln!("fake-hermes: could not persist a run's end: {e}");
        lock(&s.data).ledger.persist_errors.push(e);
    }
}

/// Reads the records a previous process left (a restart): runs that had not ended become
/// `interrupted`, with no event stream; their keys replay. Every unreadable record is named.
pub(super) fn restore(s: &Shared) -> Result<(), Vec<String>> {
    let Some(dir) = runs_dir(s) else {
        return Ok(());
    };
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(vec![format!("state_dir: {}: {e}", dir.display())]),
    };
    let mut defects = Vec::new();
    let mut d = lock(&s.data);
    for e in entries.flatten() {
        let path = e.path();
        if path.extension().is_none_or(|x| x != "json") {
            continue; // a temp file of a write cut short
        }
        let rec: DurableRun = match std::fs::read(&path)
            .map_err(|e| e.to_string())
            .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
        {
            Ok(r) => r,
            Err(e) => {
                defects.push(format!(
                    "state_dir: {}: not a durable run record: {e} (fix: remove it)",
                    path.display()
                ));
                continue;
            }
        };
        let mut info = RunInfo {
            run_id: rec.run_id.clone(),
            session_id: rec.session_id.clone(),
            status: rec.status.clone(),
            created_at: rec.created_at,
            updated_at: rec.updated_at,
            last_event: rec.last_event.clone(),
            output: rec.output.clone(),
            error: rec.error.clone(),
            idempotency_key: Some(rec.idempotency_key.clone()),
            ..RunInfo::default()
        };
        if !TERMINAL.contains(&info.status.as_str()) {
            info.status = "interrupted".into();
            info.last_event = Some("run.interrupted".into());
            info.updated_at = s.clock.now_secs();
        }
        let cell = RunCell::new(info, s.clock.clone());
        cell.registered.store(false, Ordering::SeqCst);
        cell.close_stream();
        d.idem
            .insert(rec.idempotency_key, (rec.body_digest, rec.run_id.clone()));
        d.runs.insert(rec.run_id, cell);
    }
    if defects.is_empty() {
        Ok(())
    } else {
        Err(defects)
    }
}
