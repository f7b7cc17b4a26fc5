//! Report assembly: what a case found about each occurrence and each Hermes binding, in the
//! report model's terms.

use super::world::World;
use crate::report::model::OccurrenceReport;

use crate::check::hermes::runs_of;

pub(super) fn admission_label(s: &crate::aoc::admission::AdmissionState) -> String {
    use crate::aoc::admission::{AdmissionEnd, AdmissionState};
    match s {
        AdmissionState::Queued => "queued".into(),
        AdmissionState::Started { .. } => "started".into(),
        AdmissionState::Unknown { .. } => "unknown".into(),
        AdmissionState::Ended { end } => format!(
            "ended:{}",
            match end {
                AdmissionEnd::Completed => "completed",
                AdmissionEnd::Failed => "failed",
                AdmissionEnd::Cancelled => "cancelled",
                AdmissionEnd::NotExecuted => "not_executed",
            }
        ),
    }
}

impl World {
    /// Every operator binding of the case against fake-hermes's ledger, with what the pinned
    /// Hermes cannot tell flagged as missing knowledge.
    pub(super) async fn operator_reports(&mut self) -> Vec<crate::report::model::OperatorReport> {
        use crate::operator::BindingStatus as B;
        let mut out = Vec::new();
        let Some((_, h, _)) = &self.operator.hermes else {
            return out;
        };
        let ledger = h.ledger();
        let Ok(c) = self.operator.reader().await else {
            return out;
        };
        let delegated: Vec<String> = self
            .operator
            .delegations
            .iter()
            .map(|(l, _)| l.clone())
            .collect();
        let actions: Vec<(String, String)> = self
            .operator
            .actions
            .iter()
            .filter(|(l, _)| l.as_str() != "parent" && !self.operator.resumes.contains(*l))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (label, id) in actions {
            let b = self.judged_binding(&c, &id).await;
            let runs = runs_of(&ledger, &id);
            let in_runs = |run: &str| runs.iter().any(|r| r.run_id == run);
            let approvals = ledger
                .approvals
                .iter()
                .filter(|a| in_runs(&a.run_id))
                .count() as u32;
            let stops = ledger.stops.iter().filter(|a| in_runs(&a.run_id)).count() as u32;
            let status = b.as_ref().map_or("no_binding".to_string(), |b| {
                serde_json::to_value(b.status)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default()
            });
            let delegation_error = self.operator.delegation_errors.get(&label);
            let aoc_state = match b.as_ref().map(|b| b.status) {
                None => "not_entered",
                Some(B::Completed) if delegation_error.is_some() => "unresolved",
                Some(B::OutcomeUnknown) => "unresolved",
                Some(s) if s.is_terminal() => "resolved",
                Some(B::Starting) if b.as_ref().is_some_and(|b| b.run_id.is_none()) => "pending",
                Some(_) => "unresolved",
            };
            let mut mk = Vec::new();
            if b.as_ref()
                .is_some_and(|b| b.status == B::OutcomeUnknown && b.run_id.is_none())
            {
                // No provider idempotency key or lookup by session: whether the start happened
                // cannot be asked of the pinned Hermes.
                mk.push("start_unverifiable_no_provider_idempotency".to_string());
            }
            if b.as_ref()
                .is_some_and(|b| b.status == B::OutcomeUnknown && b.run_id.is_some())
            {
                mk.push("provider_effect_unresolved".to_string());
            }
            if approvals > 0
                && ledger
                    .approvals
                    .iter()
                    .any(|a| in_runs(&a.run_id) && a.request_id.is_none())
            {
                // The pinned Hermes resolves the oldest pending prompt: which prompt a decision
                // answered is not in its reply.
                mk.push("approval_target_fifo".to_string());
            }
            if let Some(code) = delegation_error
                && b.is_some()
            {
                // Hermes finished, but the child's result was not established.
                mk.push(format!(
                    "delegated_result_unverified:{}",
                    code.trim_start_matches("connector.hermes_agent.")
                ));
            }
            if b.as_ref()
                .is_some_and(|b| b.run_id.is_some() && !b.status.is_terminal())
            {
                // Still running at the end: a status 404 after a restart would prove nothing.
                mk.push("run_status_not_terminal".to_string());
            }
            out.push(crate::report::model::OperatorReport {
                label: label.clone(),
                status,
                aoc_state: aoc_state.into(),
                runs: runs.len() as u32,
                approvals,
                stops,
                delegated: delegated.contains(&label),
                missing_knowledge: mk,
            });
        }
        out
    }

    /// An Action's binding as the last judged look read it, where that look read the bindings
    /// (GUIDE §4: what is published and expected is what a judged look said); otherwise read
    /// now through `reader`.
    pub(super) async fn judged_binding(
        &self,
        reader: &crate::sut::operator::Conn,
        id: &str,
    ) -> Option<crate::operator::Binding> {
        match &self.last_bindings {
            Some(judged) => judged
                .iter()
                .find(|(_, i, _)| i == id)
                .map(|(_, _, b)| b.clone()),
            None => reader.binding_of(id).await,
        }
    }

    /// The published occurrences: what the last judged look said (`check::replay`).
    pub(super) fn occurrence_reports(&self) -> Vec<OccurrenceReport> {
        self.last_look
            .as_ref()
            .map(|(snap, _)| crate::report::analyze::occurrence_reports(snap))
            .unwrap_or_default()
    }
}
