//! An order's own answer (sent on a task of its own, read whole, described in the steps) and
//! the watch of its outcome through the service's status route until it is final and settled.

use super::*;

/// Why an order's answer is not a status.
#[derive(Debug)]
pub(super) enum DriveErrorOr {
    Drive(drive::DriveError),
    /// No answer within the wait.
    Late,
    /// The task that sent it failed.
    Lost(String),
}

pub(super) type Sent = tokio::task::JoinHandle<Result<u16, drive::DriveError>>;

pub(super) fn send(cx: &Ctx<'_>, base: &str, t: &file::Request, vars: &Vars) -> Sent {
    let (client, base, t, vars) = (cx.client.clone(), base.to_string(), t.clone(), vars.clone());
    tokio::spawn(async move { drive::submit(&client, &base, &t, &vars).await })
}

pub(super) async fn answered(s: Sent, wait: Duration) -> Result<u16, DriveErrorOr> {
    match tokio::time::timeout(wait, s).await {
        Err(_) => Err(DriveErrorOr::Late),
        Ok(Err(e)) => Err(DriveErrorOr::Lost(e.to_string())),
        Ok(Ok(r)) => r.map_err(DriveErrorOr::Drive),
    }
}

/// The answer of an order whose instance was killed (its connection is gone with it).
pub(super) async fn sent_done(s: Sent) -> Result<u16, DriveErrorOr> {
    answered(s, Duration::from_secs(5)).await
}

pub(super) fn describe_answer(a: &Result<u16, DriveErrorOr>) -> String {
    match a {
        Ok(code) => code.to_string(),
        Err(DriveErrorOr::Drive(e)) => e.to_string(),
        Err(DriveErrorOr::Late) => "no answer within 60 s".into(),
        Err(DriveErrorOr::Lost(e)) => format!("lost ({e})"),
    }
}

pub(super) fn lost_with(cx: &mut Ctx<'_>, a: Result<u16, DriveErrorOr>) {
    cx.step(format!(
        "the order's own answer: {} (a service that answers after charging lost it with the instance)",
        describe_answer(&a)
    ));
}

/// Judges the service's answer to an order: a status outside `accept` is the service's own
/// business when the step lands a fault (it may answer the provider's 5xx with its own), and a
/// harness error without one; no answer at all is always a harness error.
pub(super) fn accepted(
    cx: &mut Ctx<'_>,
    vars: &Vars,
    label: &str,
    a: Result<u16, DriveErrorOr>,
    faulted: bool,
) -> Result<(), (HarnessCause, String)> {
    match a {
        Ok(code) => {
            cx.told(
                CLIENT,
                Tone::Plain,
                format!(
                    "order {} submitted to instance {label} ({code})",
                    vars.occurrence
                ),
            );
            Ok(())
        }
        Err(DriveErrorOr::Drive(e @ drive::DriveError::Status { .. })) if faulted => {
            cx.step(format!(
                "order {} submitted to instance {label}, which answered outside `accept` ({e}); its outcome is read from the status route",
                vars.occurrence
            ));
            Ok(())
        }
        Err(e) => Err((HarnessCause::Unreachable, describe_answer(&Err(e)))),
    }
}

/// Watches an order's outcome until it is final (or the deadline), then through the settle
/// time, on the instance started last. Returns the last observation.
pub(super) async fn watch(
    cx: &mut Ctx<'_>,
    live: &mut [Instance],
    vars: &Vars,
    extra_settle_ms: u64,
) -> Result<(Vec<(Observed, usize)>, Option<u64>), (HarnessCause, String)> {
    let unreachable = |e: String| (HarnessCause::Unreachable, e);
    let status = cx.d.file.drive.status.clone();
    let deadline = Instant::now() + Duration::from_millis(cx.d.file.drive.deadline_ms);
    // Each distinct observation with the provider's effect count just after it was read: a
    // label cannot be backed by a charge the provider recorded after the service showed it.
    let mut seen: Vec<(Observed, usize)> = Vec::new();
    let mut final_at: Option<Instant> = None;
    let mut final_wall_ms: Option<u64> = None;
    loop {
        let Some(i) = live.last_mut() else {
            return Err(unreachable("no instance is running".into()));
        };
        if let Some(st) = i.exited() {
            return Err(unreachable(format!(
                "instance {} exited unasked ({st}); its output: {}",
                i.label,
                service::tail(&i.log)
            )));
        }
        let o = drive::status(&cx.client, &i.base, &status, vars)
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        let read_wall_ms = wall_ms();
        let is_final = o.outcome.is_final();
        if seen.last().map(|(x, _)| x) != Some(&o) {
            cx.told(
                LABELS,
                if is_final { Tone::Settled } else { Tone::Plain },
                format!(
                    "the service reports {:?} ({}) for order {}",
                    o.label,
                    o.outcome.label(),
                    vars.occurrence
                ),
            );
            let effects = cx.p.payments.ledger().effects.len();
            seen.push((o, effects));
        }
        let base = i.base.clone();
        if is_final && final_at.is_none() {
            final_at = Some(Instant::now());
            // When the final label was read: every event the release sends goes after it.
            final_wall_ms = Some(read_wall_ms);
            // The recovery window closes: the held events go out now, late, and the settle
            // time watches what they do.
            cx.release_events("the service having shown a final outcome by its own path");
        }
        let at = if final_at.is_some() {
            super::record::At::Settling
        } else {
            super::record::At::Open
        };
        cx.look(&base, at).await;
        // Once a label is final the full settle time is always watched (a late duplicate);
        // the deadline bounds only the wait for a final label.
        let settle = Duration::from_millis(cx.d.file.drive.settle_ms.max(extra_settle_ms));
        let settled = final_at.is_some_and(|t| t.elapsed() >= settle);
        if settled || (final_at.is_none() && Instant::now() > deadline) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok((seen, final_wall_ms))
}
