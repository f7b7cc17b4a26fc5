//! The stories a schedule follows: an occurrence taken through creation, reservation, entry,
//! the forget chain and its remedies, a submission through admission and its claims.

use super::*;

impl Gen<'_> {
    /// The story's next link (the story ends after its act, or when a link cannot be kept).
    pub(super) fn story(&mut self) -> bool {
        let Some(Story { occurrence, link }) = self.story.clone() else {
            return false;
        };
        let kept = match (link, occurrence) {
            (0, _) => {
                // An occurrence not yet executed, or a new one.
                let fresh: Vec<String> = self
                    .m
                    .originals
                    .iter()
                    .filter(|o| self.m.phase.get(*o).copied().unwrap_or(0) < 2)
                    .cloned()
                    .collect();
                if fresh.is_empty() {
                    let ok = self.create_new();
                    if !ok {
                        self.story = None;
                    }
                    return ok;
                }
                let occurrence = self.rng.pick(&fresh).clone();
                let fault = match self.rng.weighted(&[3, 2, 1]) {
                    0 => Fault::CommitThenDrop,
                    1 => Fault::CommitThen {
                        status: *self.rng.pick(&[500, 502, 503]),
                    },
                    _ => Fault::Reject {
                        status: *self.rng.pick(&[500, 502, 503]),
                    },
                };
                let block = vec![
                    Step::ProviderFault {
                        op: POp::Create,
                        fault,
                        nth: None,
                        times: None,
                    },
                    act(Act::Execute, occurrence.clone(), None, any()),
                ];
                let ok = self.try_push(block);
                if ok {
                    self.m.phase.insert(occurrence.clone(), 2);
                    self.story = Some(Story {
                        occurrence: Some(occurrence),
                        link: 1,
                    });
                }
                ok
            }
            (1, Some(o)) => {
                let ms = 86_400_001;
                let forgets = if self.rng.chance(2, 3) { Some(o) } else { None };
                let ok = self.try_push(vec![
                    Step::Advance { ms },
                    Step::ProviderExpire {
                        occurrence: forgets,
                    },
                ]);
                if ok {
                    self.m.advanced = self.m.advanced.saturating_add(ms);
                    // The lease has lapsed: a successor takes the lane over first.
                    self.m.current = None;
                    if let Some(s) = self.story.as_mut() {
                        s.link = 2;
                    }
                }
                ok
            }
            (2, Some(o)) => {
                let mut block = Vec::new();
                if self.rng.chance(1, 4) {
                    let op = *self.rng.pick(&[POp::Get, POp::List]);
                    block.push(self.fault_step(op));
                }
                block.push(act(Act::Reconcile, o, None, any()));
                let ok = self.try_push(block);
                if ok && let Some(s) = self.story.as_mut() {
                    s.link = 3;
                }
                ok
            }
            (_, Some(o)) => {
                let step = match self.rng.weighted(&[3, 3, 1, 1]) {
                    0 => act(Act::Execute, o, None, any()),
                    1 => Step::Release {
                        occurrence: o,
                        executor: None,
                        reason: Some(self.rng.pick(&REASONS).to_string()),
                        expect: any(),
                    },
                    2 => act(Act::Enter, o, None, any()),
                    _ => act(Act::Send, o, None, any()),
                };
                self.story = None;
                self.try_push(vec![step])
            }
            (_, None) => false,
        };
        if !kept {
            self.story = None;
        }
        kept
    }

    /// Seed 003's admission queue: submit, claim, link a claimed submission to an occurrence
    /// created under its key, recover, read back an unknown admission, finish.
    pub(super) fn admission(&mut self) -> bool {
        let Some(executor) = self.who() else {
            return false;
        };
        let expect = any();
        let sub = (!self.m.subs.is_empty()).then(|| self.rng.pick(&self.m.subs).clone());
        // submit, claim, create and link, recover, read back, finish.
        match (self.rng.weighted(&[2, 3, 2, 1, 1, 1]), sub) {
            (0, _) | (_, None) => {
                if self.m.subs.len() >= 3 {
                    return false;
                }
                let submission = format!("s{}", self.m.subs.len() + 1);
                if self.try_push(vec![Step::Submit {
                    submission: submission.clone(),
                    expect,
                }]) {
                    self.m.subs.push(submission);
                    true
                } else {
                    false
                }
            }
            (1, Some(last)) => {
                let Some((submission, fresh)) = self.next_claim(last) else {
                    return false;
                };
                let ok = self.try_push(vec![Step::Claim {
                    submission,
                    executor,
                    expect,
                }]);
                if ok && fresh {
                    self.m.claims += 1;
                }
                ok
            }
            (2, Some(submission)) => {
                // The occurrence created under the last claimed submission's key (mostly), then
                // linked.
                let submission = match self.m.claims.checked_sub(1) {
                    Some(last) if self.rng.chance(3, 4) => self.m.subs[last].clone(),
                    _ => submission,
                };
                let occurrence = format!("o{}", self.m.next_occ + 1);
                if self.m.originals.len() >= 3 {
                    return false;
                }
                let block = vec![
                    Step::Create {
                        occurrence: occurrence.clone(),
                        executor: executor.clone(),
                        key: Some(submission.clone()),
                        amount: None,
                        simulate: None,
                        labels: CreateLabels::default(),
                        expect: expect.clone(),
                    },
                    Step::Link {
                        submission,
                        occurrence: occurrence.clone(),
                        executor,
                        expect,
                    },
                ];
                if self.try_push(block) {
                    self.m.next_occ += 1;
                    self.m.occs.push(occurrence.clone());
                    self.m.originals.push(occurrence);
                    true
                } else {
                    false
                }
            }
            (3, _) => self.try_push(vec![Step::Recover { executor, expect }]),
            (4, Some(submission)) => self.try_push(vec![Step::ResolveUnknown {
                submission,
                executor,
                expect,
            }]),
            (_, Some(submission)) => {
                let end = self
                    .rng
                    .pick(&["completed", "failed", "cancelled", "not_executed"])
                    .to_string();
                self.try_push(vec![Step::Finish {
                    submission,
                    end,
                    executor,
                    expect,
                }])
            }
        }
    }

    /// The submission a claim names, and whether it is one not claimed before: the oldest
    /// submission not yet claimed (what the lane must hand out next), or, with every submission
    /// claimed, at times `last` all the same (the lane must then hand out nothing: an admission
    /// a replaced holder left unknown is never queued again, seed 003). In a schedule the World
    /// judges a claim against what the implementation admitted, whatever submission it names.
    pub(super) fn next_claim(&mut self, last: String) -> Option<(String, bool)> {
        match self.m.subs.get(self.m.claims) {
            Some(s) => Some((s.clone(), true)),
            None if self.rng.chance(1, 2) => Some((last, false)),
            None => None,
        }
    }

    pub(super) fn aadp_expire(&mut self) -> bool {
        let (Some(occurrence), Some(executor)) = (self.occ(), self.who()) else {
            return false;
        };
        self.try_push(vec![Step::AadpExpire {
            occurrence,
            executor,
            expect: any(),
        }])
    }

    /// The next step of one occurrence's path, at times after a fault on the request it makes.
    pub(super) fn progress(&mut self) -> bool {
        let Some(occurrence) = self.occ() else {
            return false;
        };
        let phase = self.m.phase.get(&occurrence).copied().unwrap_or(0);
        let expect = any();
        let fault_first = self.rng.chance(1, 2);
        let (block, next) = match phase {
            0 => (vec![act(Act::Reserve, occurrence.clone(), None, expect)], 1),
            1 if self.rng.chance(1, 4) => return self.held_on(Some(occurrence)),
            1 => {
                let mut b = Vec::new();
                if fault_first {
                    let op = *self.rng.pick(&[POp::Create, POp::Create, POp::Any]);
                    b.push(self.fault_step(op));
                }
                b.push(act(Act::Execute, occurrence.clone(), None, expect));
                (b, 2)
            }
            _ => {
                let mut b = Vec::new();
                if fault_first {
                    let op = *self.rng.pick(&[POp::Get, POp::List, POp::Get]);
                    b.push(self.fault_step(op));
                }
                // Reconcile, adopt, execute again (must be refused), or release (must be
                // refused after entry).
                match self.rng.weighted(&[3, 1, 2, 1]) {
                    3 => b.push(Step::Release {
                        occurrence: occurrence.clone(),
                        executor: None,
                        reason: Some(self.rng.pick(&REASONS).to_string()),
                        expect,
                    }),
                    i => {
                        let a = [Act::Reconcile, Act::Adopt, Act::Execute][i];
                        b.push(act(a, occurrence.clone(), None, expect));
                    }
                }
                (b, 2)
            }
        };
        if self.try_push(block) {
            self.m.phase.insert(occurrence, next);
            true
        } else {
            false
        }
    }

    pub(super) fn create_new(&mut self) -> bool {
        if self.m.originals.len() >= 3 {
            return false;
        }
        let label = format!("o{}", self.m.next_occ + 1);
        let Some(executor) = self.who() else {
            return false;
        };
        let amount = (!self.rng.chance(2, 3)).then(|| *self.rng.pick(&AMOUNTS));
        let mut labels = CreateLabels::default();
        if self.rng.chance(1, 2) {
            labels.grant_id = Some(format!("grant-{label}"));
        }
        if self.rng.chance(1, 6) {
            labels.retry_id = Some(format!("retry-{label}"));
        }
        if self.case.config.action_fence && self.rng.chance(1, 2) {
            labels.action = Some("pay-invoice".into());
        }
        let step = Step::Create {
            occurrence: label.clone(),
            executor,
            key: None,
            amount,
            simulate: None,
            labels,
            expect: any(),
        };
        if self.try_push(vec![step]) {
            self.m.next_occ += 1;
            self.m.occs.push(label.clone());
            self.m.originals.push(label);
            true
        } else {
            false
        }
    }

    /// A creation retried: the same label (the World keeps the first), or a new label under a
    /// key already used, or new caller labels on the same key.
    pub(super) fn create_again(&mut self) -> bool {
        if self.m.originals.is_empty() {
            return false;
        }
        let first = self.rng.pick(&self.m.originals).clone();
        let Some(executor) = self.who() else {
            return false;
        };
        // The key its first creation used (the World's default is `key-<label>`).
        let used = self
            .steps
            .iter()
            .find_map(|s| match s {
                Step::Create {
                    occurrence, key, ..
                } if *occurrence == first => Some(key.clone()),
                _ => None,
            })
            .flatten();
        let (occurrence, key) = if self.rng.chance(1, 2) {
            (first.clone(), used)
        } else {
            let key = used.unwrap_or_else(|| format!("key-{first}"));
            (format!("{first}-again"), Some(key))
        };
        let mut labels = CreateLabels::default();
        if self.rng.chance(1, 2) {
            labels.retry_id = Some(format!("retry-{}", self.rng.below(1000)));
        }
        let step = Step::Create {
            occurrence: occurrence.clone(),
            executor,
            key,
            amount: None,
            simulate: None,
            labels,
            expect: any(),
        };
        if self.try_push(vec![step]) {
            if !self.m.occs.contains(&occurrence) {
                self.m.occs.push(occurrence);
            }
            true
        } else {
            false
        }
    }

    pub(super) fn on_occurrence(&mut self) -> bool {
        let (Some(occurrence), Some(executor)) = (self.occ(), self.who()) else {
            return false;
        };
        let expect = any();
        const ACTS: [Act; 6] = [
            Act::Reserve,
            Act::Enter,
            Act::Send,
            Act::Execute,
            Act::Adopt,
            Act::Reconcile,
        ];
        let a = ACTS[self.rng.weighted(&[7, 4, 3, 12, 5, 7])];
        let step = act(a, occurrence, executor, expect);
        self.try_push(vec![step])
    }

    pub(super) fn release(&mut self) -> bool {
        let (Some(occurrence), Some(executor)) = (self.occ(), self.who()) else {
            return false;
        };
        let reason = Some(self.rng.pick(&REASONS).to_string());
        self.try_push(vec![Step::Release {
            occurrence,
            executor,
            reason,
            expect: any(),
        }])
    }

    pub(super) fn rebind(&mut self) -> bool {
        let (Some(occurrence), Some(executor)) = (self.occ(), self.who()) else {
            return false;
        };
        let field = self.rng.pick(&crate::case::validate::FIELDS).to_string();
        self.try_push(vec![Step::Rebind {
            occurrence,
            field,
            value: "rebound".into(),
            executor,
            expect: any(),
        }])
    }

    pub(super) fn remedy(&mut self) -> bool {
        if self.m.originals.is_empty() {
            return false;
        }
        let occurrence = self.rng.pick(&self.m.originals).clone();
        let Some(executor) = self.who() else {
            return false;
        };
        let n = self.m.next_remedy + 1;
        let remedy = format!("r{n}");
        let kind = *self.rng.pick(&REMEDIES);
        // Mostly its own authorization; at times the original's grant, or one used before.
        let authorization = match self.rng.weighted(&[5, 2, 1]) {
            0 => format!("remedy-authorization-{n}"),
            1 => format!("grant-{occurrence}"),
            _ => format!("remedy-authorization-{}", n.saturating_sub(1).max(1)),
        };
        let mut block = vec![Step::Remedy {
            occurrence,
            remedy: remedy.clone(),
            kind,
            authorization,
            executor,
            expect: any(),
        }];
        // A remedy is an occurrence: at times it is carried out at once.
        if self.rng.chance(1, 2) {
            block.push(Step::Execute {
                occurrence: remedy.clone(),
                executor: None,
                expect: any(),
            });
        }
        if self.try_push(block) {
            self.m.next_remedy = n;
            self.m.occs.push(remedy);
            true
        } else {
            false
        }
    }
}
