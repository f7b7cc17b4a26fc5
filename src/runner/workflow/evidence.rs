//! A workflow case's evidence (its looks, as the checkers judged them, and the final
//! expectations), and the final expectations themselves.

use super::Case;
use crate::check::Finding;
use crate::report::model::{CaseReport, Failure};
use std::sync::Arc;

impl Case<'_> {
    /// The case's evidence: its looks as the checkers judged them, and what was found and
    /// examined outside them (the steps' own findings, the reader's, the final expectations),
    /// taken as recorded.
    pub(super) fn evidence(
        &self,
        report: &CaseReport,
        failures: &[Failure],
    ) -> Option<Arc<serde_json::Value>> {
        use crate::check::replay::{SCHEMA, Tape};
        let replayed: std::collections::BTreeSet<&String> = self
            .looks
            .iter()
            .flat_map(|l| &l.found)
            .chain(self.finals.iter().flat_map(|f| &f.found))
            .collect();
        let other_facts = crate::check::replay::facts_outside(
            &self.facts,
            self.looks
                .iter()
                .map(|l| &l.facts)
                .chain(self.finals.iter().map(|f| &f.facts)),
        );
        let tape = Tape {
            schema: SCHEMA.into(),
            case: report.id.clone(),
            declared: report.requirements.clone(),
            steps: report.steps.clone(),
            end_step: self.lc.case.steps.len(),
            published: None,
            claims: Vec::new(),
            statements: Vec::new(),
            looks: Vec::new(),
            finals: Vec::new(),
            final_ledger: None,
            other_failures: failures
                .iter()
                .filter(|f| !replayed.contains(&f.msg))
                .cloned()
                .collect(),
            other_facts,
            undecided: Vec::new(),
            harness: report.harness.clone(),
            unsupported: report.unsupported.clone(),
            faults: report.faults.clone(),
            processes: Vec::new(),
            workflow: Some(crate::check::workflow::WorkflowTape {
                design: self.design.clone(),
                run_id: self.run_id.clone(),
                looks: self.looks.clone(),
                finals: self.finals.clone(),
            }),
        };
        serde_json::to_value(&tape).ok().map(Arc::new)
    }

    /// The final expectations, against the closing look; kept for the evidence.
    pub(super) fn finals(&mut self) -> Vec<Finding> {
        let Some(w) = self.lc.case.expect.workflow.clone() else {
            return Vec::new();
        };
        let Some(look) = self.looks.last() else {
            return Vec::new();
        };
        let req = self.primary();
        let before = self.facts.clone();
        let found = crate::check::workflow::final_expectations(
            &w,
            look,
            (&self.run_id, req),
            &mut self.facts,
        );
        self.finals = Some(crate::check::workflow::WorkflowFinals {
            expect: w,
            requirement: req.id().to_string(),
            found: found.iter().map(Finding::line).collect(),
            facts: crate::check::replay::facts_between(&before, &self.facts),
        });
        found
    }
}
