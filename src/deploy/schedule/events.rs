//! The provider's events about an order (its webhook deliveries): which belong to the order,
//! each in the case's steps with its time, attempt and answer, and whether one settled an order
//! whose fault it was held from (D77).

use super::*;

/// Every provider event about the order, with its time, attempt and answer, in the steps; and,
/// where the events were held for the service's own path (`held`), why the pass would not be
/// earned when an event was sent to the service before it showed a final outcome (`final_ms`),
/// whatever the service answered (a handler may act and then fail, or still be handling it):
/// the order may have been settled by the event, not by the path the fault exercises. The
/// caller judges the ledger first; this only stands in the way of a pass.
pub(super) fn events_seen(
    cx: &mut Ctx<'_>,
    occurrence: &str,
    since_ms: u64,
    held: bool,
    final_ms: Option<u64>,
) -> Option<String> {
    let log = order_events(cx, occurrence, since_ms);
    let t0 = cx.started_wall_ms;
    let at = |ms: u64| ms.saturating_sub(t0);
    let lines: Vec<(u64, bool, String)> = log
        .iter()
        .map(|w| {
            let line = format!(
                "webhook {} {} for {} attempt {}{}, sent at {} ms: {}",
                w.event_id,
                w.kind,
                w.payment_intent,
                w.attempt,
                if w.forged { " (forged)" } else { "" },
                at(w.sent_ms),
                w.status
                    .map_or_else(|| w.error.clone().unwrap_or_default(), |s| s.to_string())
            );
            (at(w.sent_ms), w.forged, line)
        })
        .collect();
    for (ms, forged, l) in lines {
        let tone = if forged { Tone::Fault } else { Tone::Plain };
        cx.t.beat_at(ms, WEBHOOKS, tone, l.clone());
        cx.step(l);
    }
    if !held {
        return None;
    }
    let f = final_ms?;
    // The provider holds the events until the final outcome is seen, so this finds one only
    // where that hold failed: a guard, never the way a pass is refused by design.
    let w = settled_by_event(&log, f)?;
    Some(format!(
        "the fault did not act: order {occurrence} was settled after the provider's event {} ({}) was sent to the service at {} ms (answered {}), before the service's own path showed a final outcome (at {} ms); this case judges the path that runs without the events, which were to be held until then",
        w.event_id,
        w.kind,
        at(w.sent_ms),
        w.status
            .map_or_else(|| w.error.clone().unwrap_or_default(), |s| s.to_string()),
        at(f)
    ))
}

/// The first real event sent to the service before `final_ms` (wall clock: when the final label
/// was read; the release that ends the hold comes after it) that reached it: an
/// attempt that could not connect never reached the service (a killed instance's port), and a
/// forged one settles nothing a verifying service applies.
fn settled_by_event(
    log: &[crate::providers::WebhookDelivery],
    final_ms: u64,
) -> Option<&crate::providers::WebhookDelivery> {
    log.iter()
        .find(|w| !w.forged && w.connected && w.sent_ms < final_ms)
}

/// The wall clock in milliseconds since the Unix epoch (the provider's event times are on it).
pub(super) fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The provider's event deliveries about order `occurrence` sent since `since_ms`: those about a
/// payment the declared attribution gives it (every one since then, without an attribution).
pub(super) fn order_events(
    cx: &Ctx<'_>,
    occurrence: &str,
    since_ms: u64,
) -> Vec<crate::providers::WebhookDelivery> {
    let ledger = cx.p.payments.ledger();
    cx.p.payments
        .webhook_deliveries()
        .into_iter()
        .filter(|w| w.sent_ms >= since_ms)
        .filter(|w| {
            cx.d.file.attribution.is_none() || {
                let key = ledger
                    .effects
                    .iter()
                    .find(|e| e.payment_id == w.payment_id)
                    .and_then(|e| e.idempotency_key.clone());
                owner_of(cx.d, &cx.p.payments, &w.payment_id, key.as_deref()).as_deref()
                    == Some(occurrence)
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn sent(at: u64, forged: bool, connected: bool) -> crate::providers::WebhookDelivery {
        crate::providers::WebhookDelivery {
            event_id: "evt_1".into(),
            kind: "payment_intent.succeeded".into(),
            payment_intent: "pi_1".into(),
            payment_id: "pay_1".into(),
            forged,
            attempt: 1,
            sent_ms: at,
            connected,
            status: Some(200),
            error: None,
        }
    }

    /// Both ways: an event that reached the service before its final label settled the order
    /// (no pass earned by its own path); one sent after, forged, or never connected did not.
    #[rstest]
    #[case::reached_it_before(sent(900, false, true), true)]
    #[case::released_as_the_label_was_read(sent(1000, false, true), false)]
    #[case::sent_after(sent(1001, false, true), false)]
    #[case::forged(sent(900, true, true), false)]
    #[case::never_connected(sent(900, false, false), false)]
    fn an_event_settled_the_order_only_if_it_reached_the_service_first(
        #[case] w: crate::providers::WebhookDelivery,
        #[case] settled: bool,
    ) {
        assert_eq!(settled_by_event(&[w], 1000).is_some(), settled);
    }
}
