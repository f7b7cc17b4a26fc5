//! Shrinking: a schedule with a finding is made smaller while the same finding (checker and
//! requirement) reproduces. Candidates come largest cut first: every step of one occurrence,
//! two occurrences made one, a held request dropped whole or sent without its hold, then runs
//! of steps (half the schedule, then smaller), then each step made simpler (a fault
//! without its ordinals, a race with fewer requests or none, a creation without its extras, a
//! shorter clock advance, a step by the current executor instead of a retired one). A
//! candidate the case validator refuses is never run. The first candidate that reproduces is
//! kept and the search starts again from it, until none does or the budget is spent.

use super::file_name;
use crate::case::{Case, Step};
use provider_model::payments::faults::Op as POp;
use std::collections::BTreeMap;
use std::time::Instant;

/// The smaller schedules to try next, largest cut first; each is valid.
pub fn candidates(c: &Case) -> Vec<Case> {
    let mut out: Vec<Case> = Vec::new();
    let mut push = |steps: Vec<Step>| {
        if steps.len() == c.steps.len() && steps == c.steps {
            return;
        }
        let mut x = c.clone();
        x.steps = steps;
        if fair(&x.steps) && crate::case::validate(&file_name(&x.id), &x).is_empty() {
            out.push(x);
        }
    };
    // Every step of one occurrence (and what names it).
    let mut labels: Vec<String> = Vec::new();
    for s in &c.steps {
        if let Step::Create { occurrence, .. }
        | Step::Remedy {
            remedy: occurrence, ..
        } = s
            && !labels.contains(occurrence)
        {
            labels.push(occurrence.clone());
        }
    }
    for l in labels.iter().rev() {
        push(c.steps.iter().filter(|s| !names(s, l)).cloned().collect());
    }
    // Two occurrences made one: every step on the later acts on the earlier instead (its
    // creation becomes a retry, which a later pass removes).
    let originals: Vec<&String> = c
        .steps
        .iter()
        .filter_map(|s| match s {
            Step::Create { occurrence, .. } => Some(occurrence),
            _ => None,
        })
        .collect();
    for (i, b) in originals.iter().enumerate() {
        for a in &originals[..i] {
            if a != b {
                push(c.steps.iter().map(|s| renamed(s, b, a)).collect());
            }
        }
    }
    // A whole held request: its hold, its entry and background send, the crash or release
    // that ends it (and the release after such a crash).
    for steps in held_cuts(&c.steps) {
        push(steps);
    }
    // A whole held Hermes start (`explore::hermes::held_span`).
    for i in 0..c.steps.len() {
        if let Some(end) = super::hermes::held_span(&c.steps, i) {
            let mut steps = c.steps.clone();
            steps.drain(i..=end);
            push(steps);
        }
    }
    // Runs of steps, halving.
    let n = c.steps.len();
    let mut size = n / 2;
    while size >= 1 {
        let mut start = n.saturating_sub(size);
        loop {
            let mut steps = c.steps.clone();
            steps.drain(start..start + size);
            push(steps);
            if start == 0 {
                break;
            }
            start = start.saturating_sub(size);
        }
        size /= 2;
    }
    // Each step made simpler.
    for (i, s) in c.steps.iter().enumerate() {
        for simpler in simpler(s) {
            let mut steps = c.steps.clone();
            match simpler {
                Some(one) => steps[i] = one,
                None => {
                    steps.remove(i);
                }
            }
            push(steps);
        }
    }
    // An execution only entered, with the faults armed for its request gone (they would fire
    // on nothing, and a candidate whose faults do not all fire is not taken).
    for steps in entered_only(&c.steps) {
        push(steps);
    }
    // The configuration made plainer.
    if c.config.action_fence || c.config.idempotency.is_some() || c.config.aadp.is_some() {
        let mut x = c.clone();
        x.config.action_fence = false;
        x.config.idempotency = None;
        x.config.aadp = None;
        if crate::case::validate(&file_name(&x.id), &x).is_empty() {
            out.push(x);
        }
    }
    out
}

/// The provider's retention (fake-payments' default profile, 86 400 s).
pub const RETENTION_MS: u64 = 86_400_000;

/// Whether a schedule is fair to the implementation and to the harness:
/// - the provider forgets a payment (`expire_retention`, `provider_expire`) only once the clock
///   has moved past its published retention: before that, a provider that answers "not found"
///   breaks its own profile, and an implementation that reads the profile would be blamed for it;
/// - every hold is armed only for the background send that follows it: between a hold's fault
///   and the crash or release that ends it there are only entries and background sends (at
///   least one), and it is ended. Anything else could park a request in the foreground, and the
///   step would wait for a release that comes only after it.
pub fn fair(steps: &[Step]) -> bool {
    // A workflow schedule has rules of its own (`explore::workflow::fair`).
    if steps.iter().any(Step::is_workflow) {
        return super::workflow::fair(steps);
    }
    // A step that can make a payment (the clock must pass the retention after the last of them).
    let pays = |s: &Step| {
        matches!(
            s,
            Step::Execute { .. } | Step::Send { .. } | Step::Race { .. }
        )
    };
    let mut since_payment = u64::MAX;
    for (i, s) in steps.iter().enumerate() {
        match s {
            Step::Advance { ms } => since_payment = since_payment.saturating_add(*ms),
            s if pays(s) => since_payment = 0,
            Step::ProviderExpire { .. } if since_payment <= RETENTION_MS => return false,
            // A fault fires on a later request: no payment may be made after it either.
            Step::ProviderFault {
                fault: provider_model::payments::faults::Fault::ExpireRetention,
                ..
            } if since_payment <= RETENTION_MS || steps[i + 1..].iter().any(pays) => {
                return false;
            }
            _ => {}
        }
    }
    // A creation retried under a label uses the key its first creation used (a retry under
    // another key is another creation, and the original coming back would be demanded of it).
    let mut keys: BTreeMap<&str, &Option<String>> = BTreeMap::new();
    for s in steps {
        if let Step::Create {
            occurrence, key, ..
        } = s
            && *keys.entry(occurrence.as_str()).or_insert(key) != key
        {
            return false;
        }
    }
    for (i, s) in steps.iter().enumerate() {
        let Step::ProviderFault {
            fault: provider_model::payments::faults::Fault::Hold { name },
            ..
        } = s
        else {
            continue;
        };
        let mut sent = false;
        let mut ended = false;
        let mut crashed = false;
        for t in &steps[i + 1..] {
            match t {
                // A takeover makes no provider request: the held reply then reaches a retired
                // executor.
                Step::Enter { .. } | Step::Replace { .. } => {}
                Step::Send {
                    background: true, ..
                } => sent = true,
                Step::Crash {
                    at_hold: Some(h), ..
                } if h == name => {
                    crashed = true;
                    ended = true;
                    break;
                }
                Step::ProviderRelease { hold: h, .. } if h == name => {
                    ended = true;
                    break;
                }
                _ => return false,
            }
        }
        // A kill at a hold is judged by what the provider does with the request after it:
        // the hold must be let go later (commit or reject), or the kill never lands.
        let released = |t: &Step| matches!(t, Step::ProviderRelease { hold: h, .. } if h == name);
        if !(sent && ended) || (crashed && !steps[i + 1..].iter().any(released)) {
            return false;
        }
    }
    // The Hermes side's holds, start faults and waits (`explore::hermes::fair`).
    super::hermes::fair(steps)
}

/// Whether a step acts on, or creates, the occurrence `label`.
fn names(s: &Step, label: &str) -> bool {
    s.requests().into_iter().any(|r| match r {
        Step::Create { occurrence, .. } => occurrence == label,
        Step::Remedy { remedy, .. } if remedy == label => true,
        r => r.occurrence().is_some_and(|o| o == label),
    })
}

/// The step with every `occurrence` that is `from` made `to` (a race's requests and a
/// creation's too).
fn renamed(s: &Step, from: &str, to: &str) -> Step {
    fn rename(s: &mut Step, from: &str, to: &str) {
        let o = match s {
            Step::Create { occurrence, .. } => Some(occurrence),
            Step::Race { steps } => {
                steps.iter_mut().for_each(|r| rename(r, from, to));
                None
            }
            s => s.occurrence_mut(),
        };
        if let Some(o) = o
            && o == from
        {
            *o = to.to_string();
        }
    }
    let mut s = s.clone();
    rename(&mut s, from, to);
    s
}

/// Simpler forms of one step (`None`: the step replaced by nothing, for a race's requests that
/// shrink to a single one it is the request itself).
fn simpler(s: &Step) -> Vec<Option<Step>> {
    let mut out = Vec::new();
    match s {
        Step::ProviderFault {
            op,
            fault,
            nth,
            times,
        } if nth.is_some() || times.is_some() => {
            out.push(Some(Step::ProviderFault {
                op: *op,
                fault: fault.clone(),
                nth: None,
                times: None,
            }));
        }
        Step::Race { steps } => {
            if steps.len() > 2 {
                for j in 0..steps.len() {
                    let mut fewer = steps.clone();
                    fewer.remove(j);
                    out.push(Some(Step::Race { steps: fewer }));
                }
            }
            // One request alone, then sent one after the other.
            if let Some(first) = steps.first() {
                out.push(Some(with_any(first.clone())));
            }
        }
        Step::Create {
            occurrence,
            executor,
            key,
            amount,
            simulate,
            labels,
            expect,
        } if amount.is_some() || !labels.is_empty() => {
            out.push(Some(Step::Create {
                occurrence: occurrence.clone(),
                executor: executor.clone(),
                key: key.clone(),
                amount: None,
                simulate: simulate.clone(),
                labels: Default::default(),
                expect: expect.clone(),
            }));
        }
        // An execution only entered: what it sends may be what the finding does not need.
        Step::Execute {
            occurrence,
            executor,
            expect,
        } => {
            out.push(Some(Step::Enter {
                occurrence: occurrence.clone(),
                executor: executor.clone(),
                expect: expect.clone(),
            }));
        }
        Step::Advance { ms } if *ms > 1_000 => {
            out.push(Some(Step::Advance { ms: 1_000 }));
        }
        Step::ProviderRelease {
            hold,
            reject,
            forged,
            mismatched,
        } if reject.is_some() || *forged || *mismatched => {
            out.push(Some(Step::ProviderRelease {
                hold: hold.clone(),
                reject: None,
                forged: false,
                mismatched: false,
            }));
        }
        _ => {}
    }
    // A step by a named (retired) executor, by the current one instead.
    let mut x = s.clone();
    if let Some(e) = x.executor_mut()
        && e.take().is_some()
    {
        out.push(Some(x));
    }
    out
}

/// A race's request as a step of its own: it answers `any` like every explored step.
fn with_any(s: Step) -> Step {
    match serde_json::to_value(&s) {
        Ok(mut v) => {
            v["expect"] = serde_json::Value::String("any".into());
            serde_json::from_value(v).unwrap_or(s)
        }
        Err(_) => s,
    }
}

/// A whole held request cut out: its hold, its entry and background send, the crash or release
/// that ends it (and the release after such a crash).
fn held_cuts(steps_in: &[Step]) -> Vec<Vec<Step>> {
    let mut cuts = Vec::new();
    for (i, s) in steps_in.iter().enumerate() {
        if let Step::ProviderFault {
            fault: provider_model::payments::faults::Fault::Hold { name },
            ..
        } = s
        {
            let ends = |t: &Step| matches!(t, Step::Crash { at_hold: Some(h), .. } | Step::ProviderRelease { hold: h, .. } if h == name);
            if let Some(j) = steps_in[i + 1..].iter().position(ends).map(|k| i + 1 + k) {
                let mut end = j;
                if let Some(k) = steps_in[j + 1..].iter().position(ends) {
                    end = j + 1 + k;
                }
                let mut steps = steps_in.to_vec();
                steps.drain(i..=end);
                cuts.push(steps);
                // The same request not held: sent in the foreground (the provider answers at
                // once), a kill at the hold a plain kill after it, the release gone; what the
                // release did becomes a fault on the request (a rejection, a forged or
                // mismatched reply, or a commit its killed sender never heard of).
                let killed = steps_in[i + 1..]
                    .iter()
                    .any(|t| matches!(t, Step::Crash { at_hold: Some(h), .. } if h == name));
                let fault = steps_in[i + 1..].iter().find_map(|t| match t {
                    Step::ProviderRelease {
                        hold,
                        reject,
                        forged,
                        mismatched,
                    } if hold == name => {
                        use provider_model::payments::faults::{Fault, ForgeMode};
                        match (reject, forged, mismatched) {
                            (Some(status), ..) => Some(Fault::Reject { status: *status }),
                            (None, true, _) => Some(Fault::Forge {
                                mode: ForgeMode::BadKey,
                            }),
                            (None, _, true) => Some(Fault::Forge {
                                mode: ForgeMode::OtherAccount,
                            }),
                            _ if killed => Some(Fault::CommitThenDrop),
                            _ => None,
                        }
                    }
                    _ => None,
                });
                let mut steps = Vec::with_capacity(steps_in.len());
                for (k, t) in steps_in.iter().enumerate() {
                    match t {
                        Step::ProviderFault { op, .. } if k == i => {
                            if let Some(f) = &fault {
                                steps.push(Step::ProviderFault {
                                    op: *op,
                                    fault: f.clone(),
                                    nth: None,
                                    times: None,
                                });
                            }
                        }
                        Step::ProviderRelease { hold, .. } if hold == name => {}
                        Step::Send {
                            occurrence,
                            executor,
                            background: true,
                            expect,
                        } if k < j => steps.push(Step::Send {
                            occurrence: occurrence.clone(),
                            executor: executor.clone(),
                            background: false,
                            expect: expect.clone(),
                        }),
                        Step::Crash {
                            executor,
                            at_hold: Some(h),
                            expect,
                        } if h == name => steps.push(Step::Crash {
                            executor: executor.clone(),
                            at_hold: None,
                            expect: expect.clone(),
                        }),
                        t => steps.push(t.clone()),
                    }
                }
                cuts.push(steps);
            }
        }
    }
    cuts
}

/// An execution only entered, with the faults armed for its request gone (they would fire on
/// nothing, and a candidate whose faults do not all fire is not taken).
fn entered_only(steps_in: &[Step]) -> Vec<Vec<Step>> {
    let mut cuts = Vec::new();
    for (i, s) in steps_in.iter().enumerate() {
        let Step::Execute {
            occurrence,
            executor,
            expect,
        } = s
        else {
            continue;
        };
        let mut armed = Vec::new();
        for j in (0..i).rev() {
            match &steps_in[j] {
                Step::ProviderFault {
                    op: POp::Create | POp::Any,
                    ..
                } => armed.push(j),
                Step::Execute { .. } | Step::Send { .. } | Step::Race { .. } => break,
                _ => {}
            }
        }
        if armed.is_empty() {
            continue;
        }
        let mut steps = steps_in.to_vec();
        steps[i] = Step::Enter {
            occurrence: occurrence.clone(),
            executor: executor.clone(),
            expect: expect.clone(),
        };
        for j in armed {
            steps.remove(j);
        }
        cuts.push(steps);
    }
    cuts
}

/// A schedule that can be made smaller: explore's case files and deploy's schedules of orders
/// both shrink through [`shrink`], each giving its own candidates.
pub trait Shrinkable: Clone {
    /// The smaller schedules to try next, largest cut first.
    fn smaller(&self) -> Vec<Self>;
}

impl Shrinkable for Case {
    fn smaller(&self) -> Vec<Case> {
        candidates(self)
    }
}

/// What shrinking did.
#[derive(Clone, Debug)]
pub struct Shrunk<S = Case> {
    pub case: S,
    /// Candidates run.
    pub tried: u32,
    /// Candidates kept (each smaller than the one before).
    pub kept: u32,
    /// The time ran out with candidates left to try: `case` is the smallest found until then.
    pub cut_short: bool,
}

/// Shrinks `start` while `reproduces` says the finding is still there, trying at most `budget`
/// candidates and none once `until` has passed (the exploration's time budget: the smallest
/// schedule found so far is kept). The first candidate that reproduces is kept and the search
/// starts again from it.
pub async fn shrink<S: Shrinkable>(
    start: S,
    budget: u32,
    until: Option<Instant>,
    mut reproduces: impl AsyncFnMut(&S) -> bool,
) -> Shrunk<S> {
    let mut best = start;
    let mut tried = 0;
    let mut kept = 0;
    let mut cut_short = false;
    'outer: loop {
        for cand in best.smaller() {
            if tried >= budget {
                break 'outer;
            }
            if until.is_some_and(|t| Instant::now() >= t) {
                cut_short = true;
                break 'outer;
            }
            tried += 1;
            if reproduces(&cand).await {
                best = cand;
                kept += 1;
                continue 'outer;
            }
        }
        break;
    }
    Shrunk {
        case: best,
        tried,
        kept,
        cut_short,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explore::schedule::{Workload, generate};
    use provider_model::payments::faults::Fault;

    /// A finding that needs a lost reply and a later execute of the same occurrence.
    fn needs_lost_reply_then_execute(c: &Case) -> bool {
        let lost = c.steps.iter().position(|s| {
            matches!(
                s,
                Step::ProviderFault {
                    fault: Fault::CommitThenDrop,
                    ..
                }
            )
        });
        lost.is_some_and(|at| {
            c.steps[at..]
                .iter()
                .filter(|s| matches!(s, Step::Execute { .. }))
                .count()
                >= 2
        })
    }

    #[test]
    fn shrinking_keeps_the_finding_and_reaches_its_core() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap_or_else(|e| panic!("{e}"));
        let mut shrunk_some = 0;
        for index in 0..400 {
            let c = generate(Workload::Aoc, 5, index, None);
            if !needs_lost_reply_then_execute(&c) {
                continue;
            }
            let before = c.steps.len();
            let s = rt.block_on(shrink(c, 500, None, async |x: &Case| {
                needs_lost_reply_then_execute(x)
            }));
            assert!(needs_lost_reply_then_execute(&s.case), "{index}");
            assert!(
                crate::case::validate(&file_name(&s.case.id), &s.case).is_empty(),
                "{index}"
            );
            // join, a creation (two, when the executes are of two occurrences), the fault, two
            // executes: nothing else is needed.
            assert!(
                s.case.steps.len() <= 6,
                "schedule {index}: {before} → {} steps: {:?}",
                s.case.steps.len(),
                s.case.steps.iter().map(Step::verb).collect::<Vec<_>>()
            );
            shrunk_some += 1;
        }
        assert!(
            shrunk_some >= 3,
            "only {shrunk_some} schedules had the core"
        );
    }

    /// A held request: its fault, the entry and the background send, then `rest`.
    fn held(rest: Vec<Step>) -> Vec<Step> {
        let any = || crate::case::Expect(Some("any".into()));
        let mut v = vec![
            Step::ProviderFault {
                op: provider_model::payments::faults::Op::Create,
                fault: Fault::Hold { name: "h1".into() },
                nth: None,
                times: None,
            },
            Step::Enter {
                occurrence: "o1".into(),
                executor: None,
                expect: any(),
            },
            Step::Send {
                occurrence: "o1".into(),
                executor: None,
                background: true,
                expect: any(),
            },
        ];
        v.extend(rest);
        v
    }

    #[test]
    fn a_kill_at_a_hold_is_fair_only_if_the_hold_is_let_go_later() {
        let any = || crate::case::Expect(Some("any".into()));
        let crash = Step::Crash {
            executor: "e1".into(),
            at_hold: Some("h1".into()),
            expect: any(),
        };
        let release = Step::ProviderRelease {
            hold: "h1".into(),
            reject: None,
            forged: false,
            mismatched: false,
        };
        let replace = Step::Replace {
            executor: "e2".into(),
            expect: any(),
        };
        assert!(fair(&held(vec![crash.clone(), release.clone()])));
        assert!(fair(&held(vec![
            crash.clone(),
            replace.clone(),
            release.clone()
        ])));
        assert!(!fair(&held(vec![crash, replace.clone()])), "never let go");
        // A takeover while the provider holds the request: the reply reaches a retired executor.
        assert!(fair(&held(vec![replace, release])));
    }

    #[test]
    fn a_held_request_is_tried_without_its_hold() {
        let any = || crate::case::Expect(Some("any".into()));
        let mut c = generate(Workload::Aoc, 5, 1, None);
        c.steps = vec![
            Step::Join {
                executor: "e1".into(),
                expect: any(),
            },
            Step::Create {
                occurrence: "o1".into(),
                executor: None,
                key: None,
                amount: None,
                simulate: None,
                labels: Default::default(),
                expect: any(),
            },
            Step::Reserve {
                occurrence: "o1".into(),
                executor: None,
                expect: any(),
            },
        ];
        c.steps.extend(held(vec![
            Step::Crash {
                executor: "e1".into(),
                at_hold: Some("h1".into()),
                expect: any(),
            },
            Step::ProviderRelease {
                hold: "h1".into(),
                reject: None,
                forged: false,
                mismatched: false,
            },
        ]));
        let unheld = candidates(&c).into_iter().find(|x| {
            !x.steps.iter().any(|s| {
                matches!(
                    s,
                    Step::ProviderFault {
                        fault: Fault::Hold { .. },
                        ..
                    } | Step::ProviderRelease { .. }
                )
            }) && x.steps.iter().any(|s| {
                matches!(
                    s,
                    Step::Send {
                        background: false,
                        ..
                    }
                )
            })
        });
        let unheld = unheld.expect("a candidate sends the request without its hold");
        assert!(
            unheld
                .steps
                .iter()
                .any(|s| matches!(s, Step::Crash { at_hold: None, .. }))
        );
        // The release that let the held request commit after its sender died is a lost reply.
        assert!(unheld.steps.iter().any(|s| matches!(
            s,
            Step::ProviderFault {
                fault: Fault::CommitThenDrop,
                ..
            }
        )));
        assert_eq!(unheld.steps.len(), c.steps.len() - 1);
    }

    #[test]
    fn a_budget_is_a_bound() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap_or_else(|e| panic!("{e}"));
        let c = generate(Workload::Aoc, 5, 1, None);
        let mut runs = 0;
        let s = rt.block_on(shrink(c, 3, None, async |_: &Case| {
            runs += 1;
            false
        }));
        assert!(s.tried <= 3 && runs <= 3);
        assert_eq!(s.kept, 0);
        assert!(!s.cut_short);
    }

    #[test]
    fn a_deadline_stops_shrinking_and_keeps_the_smallest_so_far() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap_or_else(|e| panic!("{e}"));
        let c = generate(Workload::Aoc, 5, 1, None);
        let before = c.steps.len();
        // The first candidate reproduces (and is kept); the time is up after it.
        let until = Instant::now() + std::time::Duration::from_millis(200);
        let mut runs = 0;
        let s = rt.block_on(shrink(c, 1000, Some(until), async |_: &Case| {
            runs += 1;
            std::thread::sleep(std::time::Duration::from_millis(250));
            true
        }));
        assert_eq!((s.tried, s.kept, runs), (1, 1, 1));
        assert!(s.cut_short);
        assert!(s.case.steps.len() < before);
        // A deadline already past tries nothing, and says so.
        let c = generate(Workload::Aoc, 5, 1, None);
        let s = rt.block_on(shrink(c, 1000, Some(Instant::now()), async |_: &Case| true));
        assert_eq!(
            (s.tried, s.cut_short, s.case.steps.len()),
            (0, true, before)
        );
    }
}
