//! Each implementation process's own provider credentials (issue 21, GUIDE §4 "nothing on trust
//! that can be measured"): issued by the case's fakes under the process's label, revoked when
//! the process is killed. The ledgers then say which process made each request; a request made
//! with a killed process's credential after its kill is proof that the crash did not happen.

use crate::sut::processes::Credentials;
use std::sync::Mutex;

/// The case's credential issuer: fake-payments from the start, fake-hermes once the case has
/// started it.
#[derive(Debug)]
pub(crate) struct CaseCredentials {
    pub(crate) payments: crate::providers::Payments,
    pub(crate) account: String,
    pub(crate) hermes: Mutex<Option<crate::providers::Hermes>>,
    /// Who may move the case's Hermes clock (once it has one).
    pub(crate) gate: Mutex<Option<crate::providers::ClockGate>>,
}

impl CaseCredentials {
    /// The case's fake-hermes and its clock's gate, for Hermes credentials and clock tokens
    /// from now on.
    pub(crate) fn set_hermes(
        &self,
        h: crate::providers::Hermes,
        gate: crate::providers::ClockGate,
    ) {
        if let Ok(mut slot) = self.hermes.lock() {
            *slot = Some(h);
        }
        if let Ok(mut slot) = self.gate.lock() {
            *slot = Some(gate);
        }
    }

    fn gate(&self) -> Option<crate::providers::ClockGate> {
        self.gate.lock().ok().and_then(|g| g.clone())
    }

    fn hermes_handle(&self) -> Option<crate::providers::Hermes> {
        self.hermes.lock().ok().and_then(|h| h.clone())
    }
}

impl Credentials for CaseCredentials {
    fn payments(&self, label: &str) -> Option<String> {
        let key = self.payments.issue_key(&self.account, label);
        key.inspect(|k| crate::secrets::register(k))
    }
    fn hermes(&self, label: &str) -> Option<String> {
        let key = self.hermes_handle().map(|h| h.issue_key(label));
        key.inspect(|k| crate::secrets::register(k))
    }
    fn revoke(&self, label: &str) {
        self.payments.revoke(label);
        if let Some(h) = self.hermes_handle() {
            h.revoke(label);
        }
    }
    fn clock(&self, label: &str) -> Option<String> {
        let gate = self.gate()?;
        let token = format!("clk_{}", uuid::Uuid::new_v4().simple());
        crate::secrets::register(&token);
        gate.issue(label, &token);
        Some(token)
    }
    fn declare_clock(&self, label: &str, driven: bool) {
        if let Some(g) = self.gate() {
            g.declare(label, driven);
        }
    }
    fn call(&self, label: &str) -> Option<Box<dyn std::any::Any + Send>> {
        self.gate()
            .map(|g| Box::new(g.call(label)) as Box<dyn std::any::Any + Send>)
    }
}
