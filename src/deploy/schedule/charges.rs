//! What the provider's ledger says of a schedule once every instance is stopped: which declared
//! faults acted on a charge of their order, and which charges the declared attribution gives to
//! no order at all (never hidden, D78).

use super::*;

/// A fault counts only where it acted on a charge: the request it landed on made the
/// order's payment (a draft creation, a refused or unrelated request absorbs a rule and
/// exercises nothing the case is about).
pub(super) fn faults_acted(
    d: &Loaded,
    p: &Providers,
    schedule: &Schedule,
    ledger: &provider_model::payments::ledger::Ledger,
) -> Vec<FaultReport> {
    let rules = p.payments.rules();
    let mut faults: Vec<FaultReport> = Vec::new();
    let mut taken: std::collections::BTreeMap<String, usize> = Default::default();
    for (i, st) in schedule.steps.iter().enumerate() {
        if let Some(k) = st.fault {
            let fault = k.fault(&hold_name(i));
            let label = fault.to_string();
            let rule_fired = rules.get(faults.len()).is_some_and(|r| r.fired > 0);
            let nth = taken.entry(label.clone()).or_default();
            let landed = ledger
                .requests
                .iter()
                .filter(|q| q.fault.as_deref() == Some(label.as_str()))
                .nth(*nth);
            *nth += 1;
            // …and the charge it made is this order's, by the declared attribution (without
            // one, nothing can be judged anyway).
            let charged = landed.is_some_and(|q| {
                ledger.effects.iter().any(|e| {
                    e.request_seq == q.seq
                        && e.kind == provider_model::payments::ledger::EffectKind::PaymentCreated
                        && (d.file.attribution.is_none()
                            || owner_of(
                                d,
                                &p.payments,
                                &e.payment_id,
                                e.idempotency_key.as_deref(),
                            )
                            .as_deref()
                                == Some(st.occurrence.as_str()))
                })
            });
            let mut what = format!(
                "order {}: its first payment creation meets {} ({fault})",
                st.occurrence,
                k.name(),
            );
            if let Some(q) = landed.filter(|_| !charged) {
                // A charge the request made that the rule gives to another order, or to none,
                // is said as such: never "no charge".
                let made = ledger.effects.iter().find(|e| {
                    e.request_seq == q.seq
                        && e.kind == provider_model::payments::ledger::EffectKind::PaymentCreated
                });
                what.push_str(&format!(
                    "; it landed on request {} ({}, status {}), which made {}",
                    q.seq,
                    q.op.label(),
                    q.status,
                    match made {
                        None => "no charge".to_string(),
                        Some(e) => format!(
                            "charge {} (key {}), which the declared attribution ({}) does not give to order {}",
                            e.payment_id,
                            e.idempotency_key.as_deref().unwrap_or("none"),
                            d.file
                                .attribution
                                .as_ref()
                                .map_or("none declared".to_string(), |a| a.describe()),
                            st.occurrence
                        ),
                    }
                ));
            }
            faults.push(FaultReport {
                what,
                fired: rule_fired && charged,
            });
        }
    }
    faults
}

/// The charges the declared rule gives to no order of `schedule`, said with the rule, each
/// charge's key and amount, the keys the provider saw and the fix; `None` when there are none.
pub(super) fn unattributed(
    d: &Loaded,
    p: &Providers,
    ledger: &provider_model::payments::ledger::Ledger,
    schedule: &Schedule,
) -> Option<String> {
    d.file.attribution.as_ref()?;
    let stray: Vec<&provider_model::payments::ledger::Effect> = ledger
        .effects
        .iter()
        .filter(|e| {
            e.kind == provider_model::payments::ledger::EffectKind::PaymentCreated
                && !owner_of(d, &p.payments, &e.payment_id, e.idempotency_key.as_deref())
                    .is_some_and(|o| schedule.steps.iter().any(|st| st.occurrence == o))
        })
        .collect();
    if stray.is_empty() {
        return None;
    }
    let keys: BTreeSet<&str> = ledger
        .requests
        .iter()
        .filter_map(|q| q.idempotency_key.as_deref())
        .collect();
    Some(format!(
        "the declared attribution ({}) gives {} charge(s) to no order of this case: {}; the keys the provider saw: {}. If these are your orders' charges, fix `attribution` in {}",
        d.file
            .attribution
            .as_ref()
            .map_or("none declared".to_string(), |a| a.describe()),
        stray.len(),
        stray
            .iter()
            .map(|e| format!(
                "{} ({} {}, key {})",
                e.payment_id,
                e.amount,
                e.currency,
                e.idempotency_key.as_deref().unwrap_or("none")
            ))
            .collect::<Vec<_>>()
            .join(", "),
        if keys.is_empty() {
            "none".to_string()
        } else {
            keys.into_iter().collect::<Vec<_>>().join(", ")
        },
        d.path.display()
    ))
}

/// The provider's side of the story: each request the service made (its operation, key, status
/// and what became of its reply) and each charge, at the time the provider received it; a
/// charge for an order that already had one is the defect, drawn red. `t0`: the case's start
/// on the wall clock.
pub(super) fn provider_beats(
    d: &Loaded,
    p: &Providers,
    ledger: &provider_model::payments::ledger::Ledger,
    t0: u64,
) -> Vec<Beat> {
    use provider_model::payments::ledger::EffectKind;
    let at = |seq: u64| {
        ledger
            .requests
            .iter()
            .find(|r| r.seq == seq)
            .and_then(|r| r.received_ms)
            .map_or(0, |ms| ms.saturating_sub(t0))
    };
    let mut out: Vec<Beat> = ledger
        .requests
        .iter()
        .filter(|r| r.dialect.is_some())
        .map(|r| Beat {
            ms: at(r.seq),
            actor: PROVIDER.into(),
            tone: if r.fault.is_some() {
                Tone::Fault
            } else {
                Tone::Plain
            },
            text: format!(
                "request {}: {}{} answered {}{}, reply {:?}",
                r.seq,
                r.op.label(),
                r.idempotency_key
                    .as_deref()
                    .map_or(String::new(), |k| format!(" key {k}")),
                r.status,
                r.fault
                    .as_deref()
                    .map_or(String::new(), |f| format!(" under fault {f}")),
                r.reply
            ),
        })
        .collect();
    let mut charged: std::collections::BTreeMap<String, u32> = Default::default();
    for e in ledger
        .effects
        .iter()
        .filter(|e| e.kind == EffectKind::PaymentCreated)
    {
        let owner = owner_of(d, &p.payments, &e.payment_id, e.idempotency_key.as_deref());
        let n = owner.as_ref().map_or(0, |o| {
            let n = charged.entry(o.clone()).or_default();
            *n += 1;
            *n
        });
        out.push(Beat {
            // When it happened (a held request commits at its release).
            ms: e
                .at_ms
                .map_or_else(|| at(e.request_seq), |ms| ms.saturating_sub(t0)),
            actor: PROVIDER.into(),
            tone: if n > 1 { Tone::Defect } else { Tone::Settled },
            text: format!(
                "{}charge {} ({} {}, {}) for {}, key {}, by request {}",
                if n > 1 { "SECOND " } else { "" },
                e.payment_id,
                e.amount,
                e.currency,
                e.status,
                owner
                    .as_deref()
                    .map_or("no order the attribution names".into(), |o| format!(
                        "order {o}"
                    )),
                e.idempotency_key.as_deref().unwrap_or("none"),
                e.request_seq
            ),
        });
    }
    out
}
