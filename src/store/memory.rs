//! The memory store: the model every durable store is judged against. Not durable: a process
//! crash loses everything, and reports say so.

use super::{
    Append, Class, CreateResult, Fence, LimitCheck, NewOccurrence, OccurrenceSummary, Store,
    StoreError, StoreInfo, check_fence, check_limit,
};
use crate::aoc::admission::{self, Admission, AdmissionState};
use crate::aoc::history::ChainedEntry;
use crate::aoc::ids::{AdmissionId, ExecutorId, Holder, LaneId, Millis, OccurrenceId};
use crate::aoc::lease::{self, AcquireMode, Lease};
use crate::digest::Digest;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

#[derive(Debug, Default, Clone)]
struct OccRow {
    lane: Option<LaneId>,
    class: Option<Class>,
    entries: Vec<ChainedEntry>,
}

#[derive(Debug, Default, Clone)]
struct Namespace {
    leases: HashMap<LaneId, Lease>,
    occurrences: BTreeMap<OccurrenceId, OccRow>,
    creation: HashMap<Digest, OccurrenceId>,
    action_fence: HashMap<Digest, OccurrenceId>,
    admissions: BTreeMap<AdmissionId, Admission>,
    admission_keys: HashMap<String, AdmissionId>,
    admission_seq: u64,
    /// Versioned records (compare-and-set).
    records: HashMap<String, (u64, serde_json::Value)>,
    /// Occurrences per (lane, class), kept in step with every write, for O(1) limit checks.
    class_counts: HashMap<(LaneId, Class), u32>,
}

impl Namespace {
    fn count(
        &self,
        lane: &LaneId,
        which: crate::aoc::ids::LimitKind,
        except: Option<&OccurrenceId>,
    ) -> u32 {
        let class = Class::of_limit(which);
        let total = self
            .class_counts
            .get(&(lane.clone(), class))
            .copied()
            .unwrap_or(0);
        let own = except
            .and_then(|id| self.occurrences.get(id))
            .is_some_and(|r| r.class == Some(class));
        total - u32::from(own)
    }

    fn moved(&mut self, lane: &LaneId, from: Option<Class>, to: Class) {
        if let Some(f) = from
            && let Some(n) = self.class_counts.get_mut(&(lane.clone(), f))
        {
            *n = n.saturating_sub(1);
        }
        *self.class_counts.entry((lane.clone(), to)).or_default() += 1;
    }
}

/// The in-memory store. Cloning shares the same state (like a second connection).
#[derive(Debug, Default, Clone)]
pub struct MemoryStore {
    inner: Arc<Mutex<HashMap<String, Namespace>>>,
}

impl MemoryStore {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> Result<MutexGuard<'_, HashMap<String, Namespace>>, StoreError> {
        self.inner
            .lock()
            .map_err(|_| StoreError::backend("memory store mutex poisoned"))
    }

    /// Test hook for the conformance suite: overwrite one stored entry in place, as a faulty or
    /// malicious store would. The chain verifier must notice.
    #[cfg(feature = "test-knobs")]
    pub fn tamper_entry(
        &self,
        ns: &str,
        occ: &OccurrenceId,
        seq: usize,
        entry: ChainedEntry,
    ) -> bool {
        let Ok(mut g) = self.lock() else { return false };
        match g
            .get_mut(ns)
            .and_then(|n| n.occurrences.get_mut(occ))
            .and_then(|r| r.entries.get_mut(seq))
        {
            Some(e) => {
                *e = entry;
                true
            }
            None => false,
        }
    }
}

impl Store for MemoryStore {
    fn info(&self) -> StoreInfo {
        StoreInfo {
            kind: "memory",
            durable: false,
        }
    }

    async fn lease_get(&self, ns: &str, lane: &LaneId) -> Result<Option<Lease>, StoreError> {
        Ok(self
            .lock()?
            .get(ns)
            .and_then(|n| n.leases.get(lane).cloned()))
    }

    async fn lease_acquire(
        &self,
        ns: &str,
        lane: &LaneId,
        executor: &ExecutorId,
        now: Millis,
        ttl_ms: u64,
        mode: AcquireMode,
    ) -> Result<Lease, StoreError> {
        let mut g = self.lock()?;
        let n = g.entry(ns.to_string()).or_default();
        let next = lease::acquire(n.leases.get(lane), lane, executor, now, ttl_ms, mode)
            .map_err(StoreError::Lease)?;
        n.leases.insert(lane.clone(), next.clone());
        Ok(next)
    }

    async fn lease_refresh(
        &self,
        ns: &str,
        holder: &Holder,
        now: Millis,
        ttl_ms: u64,
    ) -> Result<Lease, StoreError> {
        let mut g = self.lock()?;
        let n = g.entry(ns.to_string()).or_default();
        let next = lease::refresh(n.leases.get(&holder.lane), holder, now, ttl_ms)
            .map_err(StoreError::Lease)?;
        n.leases.insert(holder.lane.clone(), next.clone());
        Ok(next)
    }

    async fn lease_release(&self, ns: &str, holder: &Holder) -> Result<Lease, StoreError> {
        let mut g = self.lock()?;
        let n = g.entry(ns.to_string()).or_default();
        let next = lease::release(n.leases.get(&holder.lane), holder).map_err(StoreError::Lease)?;
        n.leases.insert(holder.lane.clone(), next.clone());
        Ok(next)
    }

    async fn create(
        &self,
        ns: &str,
        new: NewOccurrence,
        fence: Fence,
        limit: Option<LimitCheck>,
    ) -> Result<CreateResult, StoreError> {
        let mut g = self.lock()?;
        let n = g.entry(ns.to_string()).or_default();
        if let Some(existing) = n.creation.get(&new.creation_binding) {
            return Ok(CreateResult::Existing(existing.clone()));
        }
        check_fence(n.leases.get(&fence.holder.lane), &fence)?;
        if let Some(f) = &new.action_fence
            && let Some(existing) = n.action_fence.get(f)
        {
            return Ok(CreateResult::ActionFenced(existing.clone()));
        }
        check_limit(limit, |w| Ok(n.count(&new.lane, w, None)))?;
        if n.occurrences.contains_key(&new.id) {
            return Err(StoreError::Conflict {
                what: format!("occurrence id {} exists", new.id),
            });
        }
        n.creation
            .insert(new.creation_binding.clone(), new.id.clone());
        if let Some(f) = new.action_fence {
            n.action_fence.insert(f, new.id.clone());
        }
        n.moved(&new.lane, None, Class::Pending);
        n.occurrences.insert(
            new.id,
            OccRow {
                lane: Some(new.lane),
                class: Some(Class::Pending),
                entries: vec![new.first],
            },
        );
        Ok(CreateResult::Created)
    }

    async fn find_creation(
        &self,
        ns: &str,
        cb: &Digest,
    ) -> Result<Option<OccurrenceId>, StoreError> {
        Ok(self
            .lock()?
            .get(ns)
            .and_then(|n| n.creation.get(cb).cloned()))
    }

    async fn load(
        &self,
        ns: &str,
        occ: &OccurrenceId,
    ) -> Result<Option<Vec<ChainedEntry>>, StoreError> {
        Ok(self
            .lock()?
            .get(ns)
            .and_then(|n| n.occurrences.get(occ))
            .map(|r| r.entries.clone()))
    }

    async fn append(&self, ns: &str, a: Append) -> Result<(), StoreError> {
        let mut g = self.lock()?;
        let n = g.entry(ns.to_string()).or_default();
        let row = n
            .occurrences
            .get(&a.occurrence)
            .ok_or_else(|| StoreError::NotFound {
                what: format!("occurrence {}", a.occurrence),
            })?;
        let lane = row
            .lane
            .clone()
            .ok_or_else(|| StoreError::corrupt("occurrence without lane"))?;
        if let Some(f) = &a.fence {
            check_fence(n.leases.get(&f.holder.lane), f)?;
        }
        if row.entries.len() as u64 != a.expected_len {
            return Err(StoreError::Conflict {
                what: format!(
                    "occurrence {} has {} entries, expected {}",
                    a.occurrence,
                    row.entries.len(),
                    a.expected_len
                ),
            });
        }
        check_limit(a.limit, |w| Ok(n.count(&lane, w, Some(&a.occurrence))))?;
        let row = n
            .occurrences
            .get_mut(&a.occurrence)
            .ok_or_else(|| StoreError::corrupt("row vanished"))?;
        row.entries.extend(a.entries);
        if let Some(to) = a.class_change {
            let from = row.class.replace(to);
            n.moved(&lane, from, to);
        }
        Ok(())
    }

    async fn list(
        &self,
        ns: &str,
        lane: Option<&LaneId>,
    ) -> Result<Vec<OccurrenceSummary>, StoreError> {
        let g = self.lock()?;
        let Some(n) = g.get(ns) else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for (id, r) in &n.occurrences {
            let (Some(l), Some(c)) = (&r.lane, r.class) else {
                return Err(StoreError::corrupt(format!(
                    "occurrence {id} lacks lane or class"
                )));
            };
            if lane.is_none_or(|want| want == l) {
                out.push(OccurrenceSummary {
                    id: id.clone(),
                    lane: l.clone(),
                    class: c,
                    len: r.entries.len() as u64,
                });
            }
        }
        Ok(out)
    }

    async fn admit(
        &self,
        ns: &str,
        lane: &LaneId,
        key: &str,
        payload: &Digest,
        now: Millis,
    ) -> Result<Admission, StoreError> {
        let mut g = self.lock()?;
        let n = g.entry(ns.to_string()).or_default();
        if let Some(id) = n.admission_keys.get(key) {
            return n
                .admissions
                .get(id)
                .cloned()
                .ok_or_else(|| StoreError::corrupt("admission key without row"));
        }
        n.admission_seq += 1;
        let a = Admission {
            id: AdmissionId::mint(),
            lane: lane.clone(),
            seq: n.admission_seq,
            submission_key: key.to_string(),
            payload_digest: payload.clone(),
            state: AdmissionState::Queued,
            occurrence: None,
            version: 0,
            admitted_at: now,
        };
        n.admission_keys.insert(key.to_string(), a.id.clone());
        n.admissions.insert(a.id.clone(), a.clone());
        Ok(a)
    }

    async fn admission_claim(
        &self,
        ns: &str,
        fence: Fence,
    ) -> Result<Option<Admission>, StoreError> {
        let mut g = self.lock()?;
        let n = g.entry(ns.to_string()).or_default();
        check_fence(n.leases.get(&fence.holder.lane), &fence)?;
        let rows: Vec<Admission> = n
            .admissions
            .values()
            .filter(|a| a.lane == fence.holder.lane)
            .cloned()
            .collect();
        let Some(head) = admission::choose_next(&rows).map_err(StoreError::Admission)? else {
            return Ok(None);
        };
        let next = admission::start(head, fence.holder.generation, &fence.holder.executor)
            .map_err(StoreError::Admission)?;
        n.admissions.insert(next.id.clone(), next.clone());
        Ok(Some(next))
    }

    async fn admission_put(
        &self,
        ns: &str,
        next: Admission,
        fence: Option<Fence>,
    ) -> Result<(), StoreError> {
        let mut g = self.lock()?;
        let n = g.entry(ns.to_string()).or_default();
        if let Some(f) = &fence {
            check_fence(n.leases.get(&f.holder.lane), f)?;
        }
        let cur = n
            .admissions
            .get(&next.id)
            .ok_or_else(|| StoreError::NotFound {
                what: format!("admission {}", next.id),
            })?;
        if cur.version + 1 != next.version {
            return Err(StoreError::Conflict {
                what: format!("admission {} is at version {}", next.id, cur.version),
            });
        }
        n.admissions.insert(next.id.clone(), next);
        Ok(())
    }

    async fn admission_get(
        &self,
        ns: &str,
        id: &AdmissionId,
    ) -> Result<Option<Admission>, StoreError> {
        Ok(self
            .lock()?
            .get(ns)
            .and_then(|n| n.admissions.get(id).cloned()))
    }

    async fn admission_list(&self, ns: &str, lane: &LaneId) -> Result<Vec<Admission>, StoreError> {
        let g = self.lock()?;
        let mut v: Vec<Admission> = g
            .get(ns)
            .map(|n| {
                n.admissions
                    .values()
                    .filter(|a| &a.lane == lane)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        v.sort_by_key(|a| a.seq);
        Ok(v)
    }

    async fn record_get(
        &self,
        ns: &str,
        key: &str,
    ) -> Result<Option<(u64, serde_json::Value)>, StoreError> {
        Ok(self
            .lock()?
            .get(ns)
            .and_then(|n| n.records.get(key).cloned()))
    }

    async fn record_cas(
        &self,
        ns: &str,
        key: &str,
        expected: Option<u64>,
        value: &serde_json::Value,
    ) -> Result<u64, StoreError> {
        let mut g = self.lock()?;
        let n = g.entry(ns.to_string()).or_default();
        let current = n.records.get(key).map(|(v, _)| *v);
        if current != expected {
            return Err(StoreError::Conflict {
                what: format!("record {key} is at version {current:?}, expected {expected:?}"),
            });
        }
        let next = expected.map_or(1, |v| v + 1);
        n.records.insert(key.to_string(), (next, value.clone()));
        Ok(next)
    }
}
