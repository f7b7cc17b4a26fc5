//! The service's own AOC record of each order (`drive.report`), read at every look and judged
//! as the process protocol judges a `state` answer: the same checker (`check::Checker`), over
//! the record, the provider's ledger read around it, what each order asked for and the
//! generations the harness retired by killing their instances.
//!
//! A look is taken while an order is watched, just before an instance is killed, and once the
//! order is settled. A look while the service is busy (a read that does not answer, a 5xx, an
//! order it does not know yet) is not taken: it is counted, never judged. At the closing look
//! of an order every record must be served: one that is not is unusable evidence (AOC-REQ-004).

use super::drive::{Vars, fill};
use super::file::{Loaded, RecordRoute};
use crate::aoc::domain::Limits;
use crate::aoc::ids::Generation;
use crate::aoc::requirement::Req;
use crate::check::accounting::KeyRule;
use crate::check::evidence::{Kind, StateAnswer};
use crate::check::ledger::Asked;
use crate::check::{Checker, Facts, Finding, Observed, Snapshot};
use std::collections::BTreeMap;
use std::time::Duration;

/// How long one record read may take before the look is given up.
const READ_WAIT: Duration = Duration::from_secs(3);

/// The records of one schedule run and what judging them found.
#[derive(Debug)]
pub struct Records {
    route: RecordRoute,
    key_rule: KeyRule,
    account: String,
    checker: Checker,
    retired: BTreeMap<String, Vec<u64>>,
    /// The last usable answer per order.
    last: BTreeMap<String, StateAnswer>,
    pub findings: Vec<Finding>,
    /// Looks judged, and looks not taken (the service busy), for the report.
    pub looks: u32,
    pub skipped: u32,
    /// Per order: looks taken and refused while it was open.
    open: BTreeMap<String, (u32, u32)>,
    /// What could not be judged for want of a served record: (order, requirement, why).
    blind: Vec<(String, Req, String)>,
}

/// When a look is taken, for the order being watched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum At {
    /// Before its first final label (the pre-kill look included).
    Open,
    /// Final, through the settle time.
    Settling,
    /// Its closing look: every instance up, every record must be served.
    Close,
}

/// What one read gave.
enum Read {
    Answer(Box<StateAnswer>),
    /// A 2xx that is not a record in the protocol's shape: unusable evidence at any look.
    Unusable(String),
    /// No answer, a 5xx or a 404: the look is not taken (unusable at an order's closing look).
    NotNow(String),
}

impl Records {
    /// The records of a deploy file that declares a report route (and the key rule it needs).
    pub fn of(d: &Loaded, account: &str) -> Option<Records> {
        let route = d.file.drive.report.clone()?;
        let rule = d.file.attribution.as_ref()?.idempotency_key.as_deref()?;
        let key_rule = KeyRule::parse(rule).ok()?;
        Some(Records {
            route,
            key_rule,
            account: account.to_string(),
            checker: Checker::default(),
            retired: BTreeMap::new(),
            last: BTreeMap::new(),
            findings: Vec::new(),
            looks: 0,
            skipped: 0,
            open: BTreeMap::new(),
            blind: Vec::new(),
        })
    }

    /// The last usable record of an order.
    pub fn last(&self, occurrence: &str) -> Option<&StateAnswer> {
        self.last.get(occurrence)
    }

    /// One look at every order submitted so far, at a moment of the order being watched (the
    /// last): while it is open (no final label yet), while it settles, or at its close (every
    /// record must then be served). Returns why a look was not taken.
    pub async fn look(
        &mut self,
        client: &reqwest::Client,
        base: &str,
        orders: &[Vars],
        payments: &crate::providers::Payments,
        at: At,
    ) -> Option<String> {
        if orders.is_empty() {
            return None;
        }
        // The requests the provider had received before the records were read: a later one
        // may have left after its record was read (the protocol's `requests_before`).
        let requests_before = payments.ledger().requests.last().map_or(0, |r| r.seq);
        let watched = orders
            .last()
            .map(|v| v.occurrence.clone())
            .unwrap_or_default();
        let mut occurrences = Vec::new();
        for v in orders {
            let answer = match self.read(client, base, v).await {
                Read::Answer(a) => Ok(*a),
                Read::Unusable(why) => Err(why),
                Read::NotNow(why) if at == At::Close => Err(why),
                Read::NotNow(why) => {
                    self.skipped += 1;
                    if at == At::Open {
                        self.open.entry(watched).or_default().1 += 1;
                    }
                    return Some(why);
                }
            };
            occurrences.push(Observed {
                label: v.occurrence.clone(),
                id: v.occurrence.clone(),
                answer,
            });
        }
        // Read after the records: every request a record names has reached it. The service
        // kept running while its records were read, so an observation is backed by any
        // request up to this reading (`requests_by_answer`), while an entry is owed only for
        // a request that left before the first read (`requests_before`).
        let provider = payments.ledger();
        let requests_by_answer = provider.requests.last().map_or(0, |r| r.seq);
        let snap = Snapshot {
            occurrences,
            provider,
            generation: Generation(0),
            limits: Limits::UNDECLARED,
            key_rule: Some(self.key_rule.clone()),
            asked: orders
                .iter()
                .map(|v| {
                    (
                        v.occurrence.clone(),
                        Asked {
                            amount: v.amount,
                            currency: v.currency.clone(),
                            account: self.account.clone(),
                        },
                    )
                })
                .collect(),
            remedies: BTreeMap::new(),
            admitted: Vec::new(),
            statuses: BTreeMap::new(),
            requests_before: Some(requests_before),
            requests_by_answer: Some(requests_by_answer),
            retired: self.retired.clone(),
        };
        self.looks += 1;
        // A look counts as one in flight only where the record it read was still unresolved:
        // an order that settled between its status read and its record read was not judged
        // in flight.
        let in_flight = snap.occurrences.iter().any(|o| {
            o.id == watched
                && o.answer
                    .as_ref()
                    .is_ok_and(|a| a.report.state != crate::vocab::State::Resolved)
        });
        if at == At::Open && in_flight {
            self.open.entry(watched.clone()).or_default().0 += 1;
        }
        for f in self.checker.check(&snap) {
            if !self.findings.iter().any(|x| x.line() == f.line()) {
                self.findings.push(f);
            }
        }
        for o in snap.occurrences {
            if let Ok(a) = o.answer {
                self.last.insert(o.id, a);
            }
        }
        None
    }

    /// The instance holding `occurrence` is being killed: the generation its record names for
    /// the order (its latest entry's, or its latest preparation's) is retired from now on.
    pub fn retire(&mut self, occurrence: &str) -> Option<u64> {
        let Some(a) = self.last.get(occurrence) else {
            self.blind.push((
                occurrence.to_string(),
                Req::R006,
                "its record was not served before its instance was killed, so no generation could be retired with it".into(),
            ));
            return None;
        };
        let g = a
            .entries
            .iter()
            .rev()
            .find(|e| e.kind == Kind::Entered && e.generation.is_some())
            .or_else(|| {
                a.entries.iter().rev().find(|e| {
                    matches!(e.kind, Kind::Prepared | Kind::Replaced) && e.generation.is_some()
                })
            })
            .and_then(|e| e.generation)?;
        let r = self.retired.entry(occurrence.to_string()).or_default();
        if !r.contains(&g) {
            r.push(g);
        }
        Some(g)
    }

    async fn read(&self, client: &reqwest::Client, base: &str, v: &Vars) -> Read {
        let url = format!("{base}{}", fill(&self.route.path, v, true));
        let method = reqwest::Method::from_bytes(self.route.method.as_bytes())
            .unwrap_or(reqwest::Method::GET);
        let what = format!("drive.report: {} {url}", self.route.method);
        let r = match client.request(method, &url).timeout(READ_WAIT).send().await {
            Ok(r) => r,
            Err(e) => return Read::NotNow(format!("{what} did not answer: {e}")),
        };
        let code = r.status().as_u16();
        let bytes = match r.bytes().await {
            Ok(b) => b,
            Err(e) => return Read::NotNow(format!("{what}: the answer was cut: {e}")),
        };
        if !(200..300).contains(&code) {
            return Read::NotNow(format!(
                "{what} answered {code}: {}",
                crate::report::model::one_line(&String::from_utf8_lossy(&bytes), 200)
            ));
        }
        // Decoded as the protocol decodes a `state` answer: a field a kind needs and lacks, or
        // a decision citing no earlier observation, is corruption (AOC-REQ-004).
        match serde_json::from_slice::<serde_json::Value>(&bytes)
            .map_err(|e| e.to_string())
            .and_then(StateAnswer::decode)
        {
            Ok(a) => Read::Answer(Box::new(a)),
            Err(e) => Read::Unusable(format!(
                "{what}: not a record in the protocol's `state` shape (docs/schemas/state.schema.json): {e}"
            )),
        }
    }
}

/// What the looks saw, for the report.
#[derive(Debug, Default)]
pub struct Seen {
    pub looks: u32,
    pub skipped: u32,
    /// The generations retired with a killed instance, by order.
    pub retired: BTreeMap<String, Vec<u64>>,
    /// The last usable record of each order.
    pub last: BTreeMap<String, StateAnswer>,
    /// What could not be judged for want of a served record: (order, requirement, why). A
    /// requirement here is not established for the order, whatever else was examined.
    pub blind: Vec<(String, Req, String)>,
}

impl Records {
    /// The findings, the facts examined and what was seen.
    pub fn finish(mut self) -> (Vec<Finding>, Facts, Seen) {
        // An order whose record was refused at every look while it was open was never
        // judged in flight: its entry before the request and its append-only history over
        // time are unknown (an order that settled before the first look was refused nothing).
        for (o, (taken, refused)) in &self.open {
            if *taken == 0 && *refused > 0 {
                self.blind.push((
                    o.clone(),
                    Req::R004,
                    format!(
                        "its record was refused at every one of the {refused} looks before its final label: its history in flight was never judged"
                    ),
                ));
            }
        }
        (
            self.findings,
            self.checker.facts,
            Seen {
                looks: self.looks,
                skipped: self.skipped,
                retired: self.retired,
                last: self.last,
                blind: self.blind,
            },
        )
    }
}
