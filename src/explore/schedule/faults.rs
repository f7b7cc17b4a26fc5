//! What goes wrong in a schedule: provider fault rules drawn from what applies to each
//! operation (the provider model's vocabulary), crashes, replacements, clock advances, races
//! and held requests.

use super::*;

impl Gen<'_> {
    /// A provider fault rule on one operation, drawn from what applies to it.
    pub(super) fn fault(&mut self) -> bool {
        let op = *self.rng.pick(&[
            POp::Create,
            POp::Create,
            POp::Create,
            POp::Get,
            POp::Get,
            POp::List,
            POp::List,
            POp::Refund,
            POp::Any,
        ]);
        let step = self.fault_step(op);
        self.try_push(vec![step])
    }

    pub(super) fn fault_step(&mut self, op: POp) -> Step {
        let fault = self.draw_fault(op);
        let nth = (self.rng.chance(1, 4)).then_some(2);
        let times = (self.rng.chance(1, 4)).then_some(2);
        Step::ProviderFault {
            op,
            fault,
            nth,
            times,
        }
    }

    pub(super) fn draw_fault(&mut self, op: POp) -> Fault {
        let effectful = op.is_effectful() || op == POp::Any;
        // reject, commit_then, commit_then_drop, delay, garble, omit, forge, forget,
        // incomplete_listing, expire_retention: the kinds that apply to `op`, by weight.
        let applies = [
            2,
            2 * u32::from(effectful),
            2 * u32::from(effectful),
            1,
            1,
            1,
            1,
            1,
            u32::from(matches!(op, POp::List | POp::Any)),
            u32::from(self.m.advanced > crate::explore::shrink::RETENTION_MS),
        ];
        let mut w = applies;
        w.iter_mut()
            .zip(self.fault_swarm)
            .for_each(|(w, m)| *w *= m);
        if w.iter().all(|w| *w == 0) {
            w = applies;
        }
        match self.rng.weighted(&w) {
            0 => Fault::Reject {
                status: *self.rng.pick(&REJECT),
            },
            1 => Fault::CommitThen {
                status: *self.rng.pick(&[500, 502, 503]),
            },
            2 => Fault::CommitThenDrop,
            3 => Fault::Delay {
                ms: *self.rng.pick(&[5, 50]),
            },
            4 => Fault::Garble,
            5 => Fault::Omit {
                field: self.rng.pick(&["status", "id"]).to_string(),
            },
            6 => Fault::Forge {
                mode: *self.rng.pick(&[ForgeMode::BadKey, ForgeMode::OtherAccount]),
            },
            7 => Fault::Forget,
            8 => Fault::IncompleteListing,
            _ => Fault::ExpireRetention,
        }
    }

    pub(super) fn crash(&mut self) -> bool {
        let alive = self.m.alive();
        if alive.is_empty() {
            return false;
        }
        let executor = self.rng.pick(&alive).clone();
        if self.try_push(vec![Step::Crash {
            executor: executor.clone(),
            at_hold: None,
            expect: any(),
        }]) {
            self.kill(&executor);
            true
        } else {
            false
        }
    }

    pub(super) fn kill(&mut self, name: &str) {
        if let Some(i) = self.m.execs.iter().position(|e| e.name == name) {
            self.m.execs[i].alive = false;
            if self.m.current == Some(i) {
                self.m.current = None;
            }
        }
    }

    pub(super) fn replace(&mut self) -> bool {
        if self.m.execs.len() >= 5 {
            return false;
        }
        let name = format!("e{}", self.m.next_exec + 1);
        let mut block = vec![Step::Replace {
            executor: name.clone(),
            expect: any(),
        }];
        // The retired holder, still alive, races its successor at times (AOC-CASE-005): it
        // tries to enter an occurrence at once.
        let retired = self.m.current_name();
        if let (Some(retired), false) = (retired, self.m.occs.is_empty())
            && self.rng.chance(1, 3)
        {
            let occurrence = self.rng.pick(&self.m.occs).clone();
            let a = *self.rng.pick(&[Act::Enter, Act::Execute]);
            block.push(act(a, occurrence, Some(retired), any()));
        }
        // A successor of a lane with admissions recovers them (often at once), and then, at
        // times, claims the next work at once.
        let mut fresh_claim = false;
        if self.admissions && !self.m.subs.is_empty() && self.rng.chance(2, 3) {
            block.push(Step::Recover {
                executor: None,
                expect: any(),
            });
            let last = self.m.subs[self.m.subs.len() - 1].clone();
            if self.rng.chance(1, 2)
                && let Some((submission, fresh)) = self.next_claim(last)
            {
                block.push(Step::Claim {
                    submission,
                    executor: None,
                    expect: any(),
                });
                fresh_claim = fresh;
            }
        }
        // A successor reads what its predecessor left before it acts (AOC-REQ-005): at times
        // it adopts an occurrence at once.
        if !self.m.occs.is_empty() && self.rng.chance(1, 3) {
            let occurrence = self.rng.pick(&self.m.occs).clone();
            block.push(act(Act::Adopt, occurrence, None, any()));
        }
        // … and asks the provider what became of one.
        if !self.m.occs.is_empty() && self.rng.chance(1, 3) {
            let occurrence = self.rng.pick(&self.m.occs).clone();
            block.push(act(Act::Reconcile, occurrence, None, any()));
        }
        if self.try_push(block) {
            if fresh_claim {
                self.m.claims += 1;
            }
            self.m.next_exec += 1;
            self.m.execs.push(Exec { name, alive: true });
            self.m.current = Some(self.m.execs.len() - 1);
            true
        } else {
            false
        }
    }

    pub(super) fn clock(&mut self) -> bool {
        let forget = if self.m.advanced > crate::explore::shrink::RETENTION_MS {
            self.rng.chance(2, 3)
        } else {
            false
        };
        if forget {
            let occurrence = if self.rng.chance(2, 3) {
                self.occ()
            } else {
                None
            };
            self.try_push(vec![Step::ProviderExpire { occurrence }])
        } else {
            let ms = *self.rng.pick(&ADVANCE_MS);
            let mut block = vec![Step::Advance { ms }];
            // A day passes and the provider forgets at once (what a provider's retention
            // allows), often about one occurrence.
            if ms > crate::explore::shrink::RETENTION_MS && self.rng.chance(1, 2) {
                let occurrence = if self.rng.chance(2, 3) {
                    self.occ()
                } else {
                    None
                };
                block.push(Step::ProviderExpire { occurrence });
            }
            let ok = self.try_push(block);
            if ok {
                self.m.advanced = self.m.advanced.saturating_add(ms);
                // Past a lease's life the holder's lease has lapsed: a successor takes the lane
                // over before anything else acts on it (the lapsed holder may still try: a
                // stale retry).
                if ms > LEASE_MS {
                    self.m.current = None;
                }
            }
            ok
        }
    }

    /// Two or three admitting requests on one occurrence at once, by the current executor and
    /// retired ones still alive.
    pub(super) fn race(&mut self) -> bool {
        let Some(occurrence) = self.occ() else {
            return false;
        };
        let mut who: Vec<Option<String>> = vec![None];
        who.extend(self.m.alive_others().into_iter().map(Some));
        let n = 2 + self.rng.below(2) as usize;
        let steps = (0..n)
            .map(|_| {
                let executor = self.rng.pick(&who).clone();
                let occurrence = occurrence.clone();
                // A race's requests carry no expectation.
                let a = *self.rng.pick(&[Act::Enter, Act::Send, Act::Execute]);
                act(a, occurrence, executor, Expect::default())
            })
            .collect();
        self.try_push(vec![Step::Race { steps }])
    }

    /// A request the provider holds: the executor is killed while it is parked (then the
    /// provider commits), or the provider lets it go and commits, rejects, or answers with a
    /// forged or mismatched reply.
    pub(super) fn held(&mut self) -> bool {
        self.held_on(None)
    }

    pub(super) fn held_on(&mut self, occurrence: Option<String>) -> bool {
        let occurrence = occurrence.or_else(|| self.occ());
        let (Some(occurrence), Some(current)) = (occurrence, self.m.current_name()) else {
            return false;
        };
        let hold = format!("h{}", self.m.next_hold + 1);
        let mut block = vec![
            Step::ProviderFault {
                op: POp::Create,
                fault: Fault::Hold { name: hold.clone() },
                nth: None,
                times: None,
            },
            Step::Enter {
                occurrence: occurrence.clone(),
                executor: None,
                expect: any(),
            },
            Step::Send {
                occurrence: occurrence.clone(),
                executor: None,
                background: true,
                expect: any(),
            },
        ];
        let killed = self.rng.chance(1, 2);
        let mut successor = None;
        if killed {
            block.push(Step::Crash {
                executor: current.clone(),
                at_hold: Some(hold.clone()),
                expect: any(),
            });
            // Then the provider commits (mostly) or rejects what it held.
            let reject = self.rng.chance(1, 4).then_some(503);
            block.push(Step::ProviderRelease {
                hold,
                reject,
                forged: false,
                mismatched: false,
            });
        } else {
            // At times a successor takes over while the provider holds the request: its reply
            // reaches a retired executor (AOC-REQ-007).
            if self.m.execs.len() < 5 && self.rng.chance(1, 3) {
                successor = Some(format!("e{}", self.m.next_exec + 1));
                block.push(Step::Replace {
                    executor: successor.clone().unwrap_or_default(),
                    expect: any(),
                });
            }
            let (reject, forged, mismatched) = match self.rng.below(4) {
                0 => (None, false, false),
                1 => (Some(*self.rng.pick(&[500, 503, 409])), false, false),
                2 => (None, true, false),
                _ => (None, false, true),
            };
            block.push(Step::ProviderRelease {
                hold,
                reject,
                forged,
                mismatched,
            });
            block.push(Step::Settle { expect: any() });
        }
        if self.try_push(block) {
            self.m.phase.insert(occurrence, 2);
            self.m.next_hold += 1;
            if killed {
                self.kill(&current);
            }
            if let Some(name) = successor {
                self.m.next_exec += 1;
                self.m.execs.push(Exec { name, alive: true });
                self.m.current = Some(self.m.execs.len() - 1);
            }
            true
        } else {
            false
        }
    }
}
