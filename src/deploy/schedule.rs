//! One schedule of orders against the running service: its instances started, each order
//! submitted through the service's own API with its fault landed at the provider (a hold and a
//! kill, a lost reply, a 5xx after commit, a resubmission, a takeover, late and forged
//! webhooks), its outcome watched until final and settled, and the whole judged by the
//! providers' ledgers ([`run_schedule`]).

mod charges;
mod events;
mod watch;

use super::*;
use crate::report::story::{Beat, Telling, Tone};
use charges::{faults_acted, unattributed};
use events::{events_seen, wall_ms};
use watch::{
    DriveErrorOr, Sent, accepted, answered, describe_answer, lost_with, send, sent_done, watch,
};

pub(super) fn rule(fault: Fault) -> Rule {
    Rule {
        op: Op::Create,
        nth: 1,
        times: 1,
        account: None,
        key: None,
        fault,
    }
}

/// The provider's hold that parks step `k`'s entry.
/// The rows of the page's timeline.
pub(super) const CLIENT: &str = "aocheck (the client)";
pub(super) const PROVIDER: &str = "fake-payments";
pub(super) const WEBHOOKS: &str = "the provider's webhooks";
const LABELS: &str = "the service's status route";

fn hold_name(k: usize) -> String {
    format!("deploy-{k}")
}

/// One order of a schedule, and the fault its first payment creation meets.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    pub occurrence: String,
    #[serde(default)]
    pub fault: Option<Kind>,
}

/// Orders submitted one after another, each watched until its outcome is final and settled.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Schedule {
    pub steps: Vec<Step>,
}

/// What running a schedule gave.
#[derive(Debug, Default)]
pub struct Ran {
    pub steps: Vec<String>,
    pub faults: Vec<FaultReport>,
    /// Why aocheck could not decide, when it could not.
    pub undecided: Option<(HarnessCause, String)>,
    /// Why a pass would not be earned (an order settled by a held event, a fault that acted on
    /// no charge): the case is undecided unless the ledger shows a failure anyway.
    pub not_earned: Option<String>,
    pub reported: Vec<Reported>,
    pub observed: Vec<Option<Observed>>,
    pub findings: Vec<crate::check::Finding>,
    pub facts: Facts,
    /// Provider entries per occurrence, by the declared attribution.
    pub entries: Vec<u32>,
    /// The effects the provider made per occurrence, where they are not the entries (a tool
    /// call may make none); empty: one effect per entry.
    pub effects: Vec<u32>,
    pub millis: u64,
    /// What the looks at the service's own record saw (a deploy file with `drive.report`).
    pub record: Option<super::record::Seen>,
    /// The case told in time (the page's timeline).
    pub beats: Vec<Beat>,
    /// The clients (`User-Agent`) and API versions (`Stripe-Version`) seen on the wire.
    pub agents: BTreeSet<String>,
    pub versions: BTreeSet<String>,
    /// When the case's watch ended before the file's deadline (a case whose run waits for a
    /// decision nobody gives), how long it watched, in ms.
    pub watched_ms: Option<u64>,
}

/// How the provider's events are delivered: late by `delay_ms`, twice, or held until released.
#[derive(Clone, Copy, Debug, Default)]
struct Events {
    delay_ms: u64,
    duplicate: bool,
    held: bool,
}

struct Ctx<'a> {
    d: &'a Loaded,
    p: &'a Providers,
    client: reqwest::Client,
    env: Env,
    logs: PathBuf,
    /// The case as it happens (its steps and the timeline's beats).
    t: Telling,
    /// `t.started` on the wall clock (milliseconds since the Unix epoch), for the provider's event
    /// times.
    started_wall_ms: u64,
    next_label: u8,
    /// How the provider's events are delivered now.
    events: Events,
    /// The service's record of each order (`drive.report`), and the orders submitted so far.
    records: Option<super::record::Records>,
    orders: Vec<Vars>,
    last_skip: Option<String>,
}

impl Ctx<'_> {
    fn step(&mut self, s: impl Into<String>) {
        self.t.step(s);
    }
    /// A step that is also a beat of the page's timeline, by `actor`.
    fn told(&mut self, actor: &str, tone: Tone, s: impl Into<String>) {
        self.t.told(actor, tone, s);
    }
    async fn start(&mut self, label: &str) -> Result<Instance, (HarnessCause, String)> {
        let i = service::start_told(
            self.d,
            &self.env,
            label,
            &self.logs,
            &self.client,
            &mut self.t,
        )
        .await?;
        let events = self.events;
        self.point_webhook(&i.base, events);
        Ok(i)
    }
    /// Points the provider's webhook endpoint at an instance (the one orders go to).
    fn point_webhook(&mut self, base: &str, events: Events) {
        self.events = events;
        if let Some(w) = &self.d.file.webhook {
            self.p
                .payments
                .set_stripe(crate::providers::StripeSettings {
                    webhook: Some(crate::providers::WebhookEndpoint {
                        url: format!("{base}{}", w.path),
                        secret: self.p.webhook_secret.clone(),
                        delay_ms: events.delay_ms,
                        duplicate: events.duplicate,
                        held: events.held,
                    }),
                    ..self.p.payments.stripe_settings()
                });
        }
    }
    /// Sends the provider's held events now (to the instance started last), and says so.
    fn release_events(&mut self, why: &str) {
        if !self.events.held {
            return;
        }
        self.events.held = false;
        // Timed before the release: the events go out on a task of their own at once.
        let ms = self.t.ms();
        let n = self.p.payments.release_webhooks();
        self.t.told_at(
            ms,
            WEBHOOKS,
            Tone::Fault,
            format!("the provider's {n} held event(s) released, {why}"),
        );
    }
    fn fresh_label(&mut self) -> String {
        self.next_label += 1;
        ((b'a' + self.next_label.min(25)) as char).to_string()
    }
    async fn parked(&mut self, hold: &str) -> Result<(), (HarnessCause, String)> {
        match holds::hold(&self.p.payments, hold, Duration::from_secs(30))
            .parked()
            .await
        {
            Ok(()) => {
                self.told(
                    PROVIDER,
                    Tone::Fault,
                    "the service's payment creation is parked at the provider's hold",
                );
                Ok(())
            }
            Err(_) => Err((
                HarnessCause::Undecided,
                "the service sent no payment creation to the provider within 30 s of the order (the hold never fired)".into(),
            )),
        }
    }
    /// One look at the service's record of every order so far (a deploy file with
    /// `drive.report`); a look not taken is said in the steps.
    async fn look(&mut self, base: &str, at: super::record::At) {
        let Some(r) = self.records.as_mut() else {
            return;
        };
        if let Some(why) = r
            .look(&self.client, base, &self.orders, &self.p.payments, at)
            .await
        {
            // Said once per reason: the watch looks every 200 ms.
            if self.last_skip.as_deref() != Some(why.as_str()) {
                self.step(format!(
                    "the service's record was not read this time ({why})"
                ));
                self.last_skip = Some(why);
            }
        }
    }
    async fn kill(
        &mut self,
        i: &mut Instance,
        hold: &str,
    ) -> Result<String, (HarnessCause, String)> {
        // The record just before the kill: the generation it names for the order parked at
        // the provider is the killed instance's, retired with it.
        if self.records.is_some() {
            let base = i.base.clone();
            self.look(&base, super::record::At::Open).await;
            let last = self.orders.last().map(|v| v.occurrence.clone());
            if let (Some(r), Some(o)) = (self.records.as_mut(), last) {
                let said = match r.retire(&o) {
                    Some(g) => format!(
                        "the service's record names generation {g} for order {o}: retired with instance {}",
                        i.label
                    ),
                    None => format!(
                        "the service's record names no generation for order {o}: none is retired with instance {}",
                        i.label
                    ),
                };
                self.step(said);
            }
        }
        let k = i.kill().await.map_err(|e| (HarnessCause::Unreachable, e))?;
        let gone = holds::hold(&self.p.payments, hold, Duration::from_secs(10))
            .landed()
            .await
            .is_ok();
        let how = format!(
            "{}; {}",
            k.how,
            if gone {
                "the provider saw the parked request's connection close"
            } else {
                "the parked request's connection did not close within 10 s"
            }
        );
        self.told(
            &format!("instance {}", i.label),
            Tone::Fault,
            format!("instance {} killed: {how}", i.label),
        );
        if !gone {
            return Err((
                HarnessCause::Undecided,
                format!("the kill was not confirmed at the provider: {how}"),
            ));
        }
        Ok(how)
    }
    /// Waits until the provider has recorded a creation beyond the first `before` effects;
    /// its payment id.
    async fn entered(&mut self, before: usize) -> Result<String, (HarnessCause, String)> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let l = self.p.payments.ledger();
            if let Some(e) =
                l.effects.iter().skip(before).find(|e| {
                    e.kind == provider_model::payments::ledger::EffectKind::PaymentCreated
                })
            {
                self.step(format!("the provider recorded the charge {}", e.payment_id));
                return Ok(e.payment_id.clone());
            }
            if Instant::now() > deadline {
                return Err((
                    HarnessCause::Undecided,
                    "the service made no payment creation within 30 s of the order".into(),
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    async fn release(&mut self, hold: &str) -> Result<(), (HarnessCause, String)> {
        let n = holds::hold(&self.p.payments, hold, Duration::from_secs(10))
            .release(provider_model::holds::ReleaseAction::Proceed)
            .await
            .map_err(|e| (HarnessCause::Undecided, e.to_string()))?;
        // What became of each released request's reply, from the provider's own record: the
        // service got it, or its connection was gone (a killed instance).
        let parked_here = format!("hold({hold})");
        let fates: Vec<String> = self
            .p
            .payments
            .ledger()
            .requests
            .iter()
            .filter(|r| r.fault.as_deref() == Some(parked_here.as_str()))
            .map(|r| {
                use provider_model::payments::ledger::Reply;
                match r.reply {
                    Reply::Written => format!("request {}: its reply was written to the service", r.seq),
                    Reply::ClientGone => format!(
                        "request {}: committed with nobody left to answer (the service's connection was gone)",
                        r.seq
                    ),
                    other => format!("request {}: {other:?}", r.seq),
                }
            })
            .collect();
        self.told(
            PROVIDER,
            Tone::Fault,
            format!(
                "the provider commits the held request ({n} released; {})",
                if fates.is_empty() {
                    "no reply recorded".to_string()
                } else {
                    fates.join("; ")
                }
            ),
        );
        Ok(())
    }
}

/// Runs a schedule against a fresh service (a fresh store folder `work`, providers reset) and
/// judges it by the ledger.
pub async fn run_schedule(
    d: &Loaded,
    p: &Providers,
    work: &Path,
    logs: &Path,
    schedule: &Schedule,
) -> Ran {
    // The case's two clocks read at one moment: steps count from `started`, the provider's
    // wall-clock times (requests, charges, webhooks) from `started_wall_ms`.
    let started = Instant::now();
    let started_wall_ms = wall_ms();
    let mut ran = Ran::default();
    p.payments.reset();
    for dir in [work, logs] {
        if let Err(e) = std::fs::create_dir_all(dir) {
            ran.undecided = Some((HarnessCause::Unreachable, format!("{}: {e}", dir.display())));
            return ran;
        }
    }
    let client = match reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
    {
        Ok(c) => c,
        Err(e) => {
            ran.undecided = Some((HarnessCause::Unreachable, format!("http client: {e}")));
            return ran;
        }
    };
    let mut cx = Ctx {
        d,
        p,
        client,
        env: p.env(work),
        logs: logs.to_path_buf(),
        t: Telling::at(started),
        started_wall_ms,
        next_label: 0,
        events: Events::default(),
        records: super::record::Records::of(d, super::ACCOUNT),
        orders: Vec::new(),
        last_skip: None,
    };
    let control_before = p.payments.control_attempts().len();
    let mut live: Vec<Instance> = Vec::new();
    let result = drive_schedule(&mut cx, schedule, &mut live, &mut ran).await;
    for i in live.drain(..) {
        i.stop().await;
    }
    ran.steps = std::mem::take(&mut cx.t.steps);
    ran.beats = std::mem::take(&mut cx.t.beats);
    let record = cx.records.take().map(super::record::Records::finish);
    ran.millis = started.elapsed().as_millis() as u64;
    // One reading of the ground truth, with every instance stopped: the faults, the clients
    // seen on the wire and the verdicts all come from it.
    let ledger = p.payments.ledger();
    for q in &ledger.requests {
        if q.dialect.is_some() {
            ran.agents.extend(q.user_agent.clone());
            ran.versions.extend(q.stripe_version.clone());
        }
    }
    ran.faults = faults_acted(d, p, schedule, &ledger);
    ran.beats
        .extend(charges::provider_beats(d, p, &ledger, cx.started_wall_ms));
    let reached = p.payments.control_attempts();
    if let Some(why) = crate::check::credentials::control_reached(&[(
        "fake-payments",
        reached.get(control_before..).unwrap_or(&[]),
    )]) {
        ran.undecided = Some((HarnessCause::Undecided, why));
    }
    if let Err(e) = result {
        ran.undecided = Some(e);
        return ran;
    }
    if ran.undecided.is_some() {
        return ran;
    }
    let owner = |pay: &str, key: Option<&str>| owner_of(d, &p.payments, pay, key);
    if let Some(f) = ran.faults.iter().find(|f| !f.fired) {
        // Charges the declared rule gives to no order of the case are never hidden behind
        // "nothing was exercised": they are judged (each one an entry nobody accounts for), and
        // the steps name the rule and the keys the provider saw (D78).
        match unattributed(d, p, &ledger, schedule) {
            Some(said) => ran.steps.push(said),
            None => {
                let why = format!(
                    "a declared fault did not act on a charge ({}): the case exercised nothing",
                    f.what
                );
                ran.not_earned.get_or_insert(why);
            }
        }
    }
    let owner_ref: Option<crate::check::deploy::Owner<'_>> =
        d.file.attribution.as_ref().map(|_| &owner as _);
    ran.findings = crate::check::deploy::judge(&ledger, owner_ref, &ran.reported, &mut ran.facts);
    // The service's own record, judged at every look as the protocol judges a `state` answer.
    if let Some((findings, facts, seen)) = record {
        for f in findings {
            if !ran.findings.iter().any(|x| x.line() == f.line()) {
                ran.findings.push(f);
            }
        }
        ran.facts.absorb(&facts);
        ran.record = Some(seen);
    }
    ran.entries = ran
        .reported
        .iter()
        .map(|r| {
            ledger
                .effects
                .iter()
                .filter(|e| {
                    e.kind == provider_model::payments::ledger::EffectKind::PaymentCreated
                        && owner(&e.payment_id, e.idempotency_key.as_deref()).as_deref()
                            == Some(r.occurrence.as_str())
                })
                .count() as u32
        })
        .collect();
    // The ledger is judged first: a double charge or a wrong label is a failure whatever else
    // happened. Only a case with nothing failed is undecided for a pass it did not earn.
    if let Some(why) = ran.not_earned.take() {
        if ran.findings.is_empty() {
            ran.undecided = Some((HarnessCause::Undecided, why));
        } else {
            ran.steps
                .push(format!("also (it could not have passed): {why}"));
        }
    }
    ran
}

/// Lands an order's fault around its submission (the order is out on `sent`): the instance
/// killed at the hold and restarted, or taken over by a second one; the same order again while
/// the first is held; a forged failure event before the real one. A lost reply and a 5xx after
/// commit land at the provider alone.
#[allow(clippy::too_many_arguments)]
async fn land(
    cx: &mut Ctx<'_>,
    live: &mut Vec<Instance>,
    fault: Option<Kind>,
    hold: &str,
    label: &str,
    sent: &mut Option<Sent>,
    vars: &Vars,
    before: usize,
) -> Result<(), (HarnessCause, String)> {
    let unreachable = |e: String| (HarnessCause::Unreachable, e);
    let submit = &cx.d.file.drive.submit.clone();
    match fault {
        Some(Kind::CrashAtHold) => {
            cx.parked(hold).await?;
            let Some(mut a) = live.pop() else {
                return Err(unreachable("no instance is running".into()));
            };
            cx.kill(&mut a, hold).await?;
            cx.release(hold).await?;
            drop(a);
            if let Some(s) = sent.take() {
                lost_with(cx, sent_done(s).await);
            }
            live.push(cx.start(label).await?);
            cx.step(format!("instance {label} restarted on the same store"));
        }
        Some(Kind::Takeover) => {
            cx.parked(hold).await?;
            let next = cx.fresh_label();
            let b = cx.start(&next).await?;
            let Some(mut a) = live.pop() else {
                return Err(unreachable("no instance is running".into()));
            };
            live.push(b);
            cx.kill(&mut a, hold).await?;
            cx.release(hold).await?;
            drop(a);
            if let Some(s) = sent.take() {
                lost_with(cx, sent_done(s).await);
            }
        }
        Some(Kind::Resubmit) => {
            cx.parked(hold).await?;
            let again = send(cx, &live[live.len() - 1].base, submit, vars);
            // The second order may wait for the first's entry (a service that serialises
            // them): release the hold while it is out, then read both answers.
            tokio::time::sleep(Duration::from_millis(300)).await;
            cx.told(
                CLIENT,
                Tone::Fault,
                "the same order submitted again while its entry is held",
            );
            cx.release(hold).await?;
            for (what, s) in [("first", sent.take()), ("second", Some(again))] {
                let Some(s) = s else {
                    continue;
                };
                let a = answered(s, Duration::from_secs(60)).await;
                cx.step(format!(
                    "the {what} submission answered: {}",
                    describe_answer(&a)
                ));
                if let Err(DriveErrorOr::Drive(e @ drive::DriveError::Unreachable { .. })) = a {
                    return Err(unreachable(e.to_string()));
                }
            }
        }
        Some(Kind::Webhooks) => {
            let pay = cx.entered(before).await?;
            match cx.p.payments.forge_webhook(&pay, "declined").await {
                Ok(ev) => cx.told(
                    WEBHOOKS,
                    Tone::Fault,
                    format!(
                        "a forged payment_intent.payment_failed ({ev}) for {pay} delivered, signed with another secret"
                    ),
                ),
                Err(e) => return Err(unreachable(format!("forging a webhook: {e}"))),
            }
        }
        Some(Kind::LostReply | Kind::ErrorAfterCommit) | None => {}
    }
    Ok(())
}

async fn drive_schedule(
    cx: &mut Ctx<'_>,
    schedule: &Schedule,
    live: &mut Vec<Instance>,
    ran: &mut Ran,
) -> Result<(), (HarnessCause, String)> {
    let unreachable = |e: String| (HarnessCause::Unreachable, e);
    live.push(cx.start("a").await?);
    let submit = cx.d.file.drive.submit.clone();
    for (k, st) in schedule.steps.iter().enumerate() {
        // Checked before anything is sent: a fault this deploy file cannot take.
        if let Some(why) = st.fault.and_then(|kind| cannot_take(cx.d, kind)) {
            return Err((HarnessCause::Undecided, why));
        }
        let hold = hold_name(k);
        if let Some(kind) = st.fault {
            cx.p.payments
                .add_rule(rule(kind.fault(&hold)))
                .map_err(|e| unreachable(format!("fault plan: {}", e.join("; "))))?;
        }
        let vars = Vars {
            occurrence: st.occurrence.clone(),
            amount: 2000,
            currency: "usd".into(),
            ..Vars::default()
        };
        let before = cx.p.payments.ledger().effects.len();
        let Some(target) = live.last() else {
            return Err(unreachable("no instance is running".into()));
        };
        // Faults own the webhooks: in a case whose fault is not the events themselves, the
        // provider holds its events until the service has shown a final outcome by its own path
        // (its retry, its restart, its successor), or the deadline has passed; that path is
        // what settles the order and what is judged (D77).
        let holds_events =
            cx.d.file.webhook.is_some() && st.fault.is_some_and(|k| k != Kind::Webhooks);
        let order_sent_ms = wall_ms();
        if st.fault == Some(Kind::Webhooks) {
            let base = target.base.clone();
            cx.point_webhook(
                &base,
                Events {
                    delay_ms: WEBHOOK_DELAY_MS,
                    duplicate: true,
                    held: false,
                },
            );
            cx.step(format!(
                "the provider's events come {WEBHOOK_DELAY_MS} ms late from now on, each twice"
            ));
        } else if holds_events {
            let base = target.base.clone();
            cx.point_webhook(
                &base,
                Events {
                    held: true,
                    ..Events::default()
                },
            );
            cx.told(
                WEBHOOKS,
                Tone::Fault,
                "the provider's events are held until the service shows a final outcome or the deadline passes (the recovery window): the service's own path must settle the order",
            );
        }
        let Some(target) = live.last() else {
            return Err(unreachable("no instance is running".into()));
        };
        // The order goes out on a task of its own: a service that charges inside its own
        // request handler answers only once the provider does, and a hold parks that.
        let label = target.label.clone();
        let mut sent = Some(send(cx, &target.base, &submit, &vars));
        cx.orders.push(vars.clone());
        let held = matches!(
            st.fault,
            Some(Kind::CrashAtHold | Kind::Takeover | Kind::Resubmit)
        );
        if held {
            cx.told(
                CLIENT,
                Tone::Plain,
                format!("order {} submitted to instance {label}", vars.occurrence),
            );
        } else {
            if let Some(s) = sent.take() {
                let answer = answered(s, Duration::from_secs(60)).await;
                accepted(cx, &vars, &label, answer, st.fault.is_some())?;
            }
        }
        land(cx, live, st.fault, &hold, &label, &mut sent, &vars, before).await?;
        // Late, duplicated or held events must have come before the watch ends.
        let settle_floor = if st.fault == Some(Kind::Webhooks) {
            WEBHOOK_DELAY_MS + 3_000
        } else {
            0
        };
        let (seen, final_ms) = watch(cx, live, &vars, settle_floor).await?;
        cx.release_events(
            "the deadline passed with no final outcome shown by the service's own path",
        );
        if let Some(i) = live.last() {
            let base = i.base.clone();
            cx.look(&base, super::record::At::Close).await;
        }
        let o = seen.last().map(|(o, _)| o.clone());
        if cx.d.file.webhook.is_some()
            && let Some(why) =
                events_seen(cx, &st.occurrence, order_sent_ms, holds_events, final_ms)
        {
            ran.not_earned.get_or_insert(why);
        }
        if st.fault == Some(Kind::Webhooks) {
            let log = events::order_events(cx, &st.occurrence, order_sent_ms);
            let forged_answered = log.iter().any(|w| w.forged && w.status.is_some());
            let real_ok = log
                .iter()
                .filter(|w| !w.forged && w.status.is_some_and(|s| (200..300).contains(&s)))
                .count();
            if !forged_answered || real_ok < 2 {
                return Err((
                    HarnessCause::Undecided,
                    format!(
                        "the webhook faults did not reach the service (the forged event {}; {real_ok} of the 2 real deliveries answered 2xx): check `webhook.path`",
                        if forged_answered {
                            "was answered"
                        } else {
                            "got no answer"
                        }
                    ),
                ));
            }
        }
        if st.fault == Some(Kind::Webhooks) || holds_events {
            let base = live[live.len() - 1].base.clone();
            cx.point_webhook(&base, Events::default());
        }
        ran.reported.push(super::drive::reported(
            &st.occurrence,
            seen.iter().map(|(o, effects)| (o, *effects)),
            st.fault.map_or(Ambiguity::None, Kind::ambiguity),
            vars.amount,
            &vars.currency,
        ));
        ran.observed.push(o);
    }
    Ok(())
}
