//! The World's operator and Hermes verbs (seed 000): each step performed on the connector
//! instances or on fake-hermes, and what it answered recorded. Every judgement of an answer is
//! `check::hermes`'s; the World keeps the findings it returns.

use super::world::World;
use crate::case::Step;
use crate::check::hermes::result_facts;
use crate::check::hermes::{check_operator_result, judge_delegated_result};
use crate::sut::SutError;
use crate::sut::operator::Conn;
use std::time::Duration;

impl World {
    /// One operator or Hermes step (the others are `perform`'s).
    pub(super) async fn perform_operator(&mut self, step: &Step) -> Result<(), SutError> {
        match step {
            Step::OperatorInvoke { .. }
            | Step::OperatorManifest { .. }
            | Step::OperatorDurability { .. }
            | Step::OperatorConfigure { .. } => self.connector_setup(step).await?,
            Step::OperatorDelegate { .. }
            | Step::OperatorCancel { .. }
            | Step::OperatorWaitBound { .. }
            | Step::OperatorSettle { .. }
            | Step::OperatorKill { .. } => self.connector_work(step).await?,
            Step::HermesFault { .. }
            | Step::HermesScript { .. }
            | Step::HermesWaitParked { .. }
            | Step::HermesRelease { .. }
            | Step::HermesForget { .. } => self.hermes_step(step).await?,
            other => {
                return Err(SutError::Harness(format!(
                    "{} is not an operator step",
                    other.verb()
                )));
            }
        }
        Ok(())
    }

    /// The connector is invoked, its manifest and durability are read, its policy is configured.
    async fn connector_setup(&mut self, step: &Step) -> Result<(), SutError> {
        match step {
            Step::OperatorInvoke {
                action,
                objective,
                resume,
                choice,
                instance,
                background,
                result,
                error,
                expect,
            } => {
                let instance = instance.clone().unwrap_or_else(|| "p1".into());
                let input = match (objective, resume) {
                    (Some(o), _) => {
                        serde_json::json!({"objective": o, "context": {"case": action}})
                    }
                    (None, Some(src)) => {
                        self.operator.resumes.insert(action.clone());
                        let sid = self.operator.action_id(src);
                        serde_json::json!({"resume": {"source_action_id": sid, "choice": choice.clone().unwrap_or_default()}})
                    }
                    _ => return Err(SutError::Harness("objective or resume".into())),
                };
                let a = self.operator.action(action, input);
                let c = self.operator.connector(&instance).await?;
                if *background {
                    self.operator.background.push((instance, {
                        let c = c.detached();
                        tokio::spawn(async move { c.invoke(&a).await })
                    }));
                } else {
                    let r = c.invoke(&a).await?;
                    // `expect: any`: the answer's form is not judged, what it did is.
                    if !expect.is_any() {
                        result_facts(&mut self.checker.facts, result, error);
                        self.findings
                            .extend(check_operator_result(&r, result, error));
                    }
                    if let Ok(o) = &r {
                        self.result_from_provider(o).await;
                    }
                }
            }
            Step::OperatorManifest {} => {
                let c = self.operator.connector("p1").await?;
                let m = c.manifest().await?;
                self.findings
                    .extend(crate::check::hermes::manifest_departures(
                        &m,
                        &mut self.checker.facts,
                    ));
            }
            Step::OperatorDurability {} => self.durability().await?,
            Step::OperatorConfigure {
                policy,
                tenant,
                resolver,
                error,
            } => {
                self.operator.policy_overlay = policy.clone();
                self.operator.resolver = *resolver;
                if let Some(t) = tenant {
                    self.operator.tenant = t.clone();
                }
                // New policy, new connector processes.
                let mut stopped: Vec<Conn> = std::mem::take(&mut self.operator.connectors)
                    .into_values()
                    .collect();
                stopped.extend(self.operator.reader.take());
                for c in stopped {
                    c.stop("stopped: the case changed the connector's policy")
                        .await;
                }
                let policy = self
                    .operator
                    .policy()
                    .map_err(|e| SutError::Harness(format!("operator policy: {e}")))?;
                // The implementation decides whether it accepts the policy.
                let got = self
                    .operator
                    .reader()
                    .await?
                    .validate_policy(&policy)
                    .await?;
                self.findings
                    .extend(crate::check::hermes::policy_validation(
                        error.as_deref(),
                        got.as_ref(),
                        &mut self.checker.facts,
                    ));
            }
            other => {
                return Err(SutError::Harness(format!(
                    "{} is not a step of connector_setup",
                    other.verb()
                )));
            }
        }
        Ok(())
    }

    /// The connector works: a delegation, a cancel, a wait until bound, a settle, a kill of an
    /// instance.
    async fn connector_work(&mut self, step: &Step) -> Result<(), SutError> {
        match step {
            Step::OperatorDelegate {
                action,
                capability,
                scope,
                chain,
                approval,
                child,
                instance,
                result,
                error,
                expect,
            } => {
                let child = child.as_deref().unwrap_or("ran");
                let (req, records) = self
                    .operator
                    .stage_delegation(
                        action,
                        capability.as_deref().unwrap_or("cap:crm:update"),
                        scope.clone().unwrap_or_else(|| vec!["crm:write".into()]),
                        chain.unwrap_or(1),
                        approval.as_deref().unwrap_or("approved"),
                        child,
                    )
                    .await?;
                let c = self
                    .operator
                    .connector(instance.as_deref().unwrap_or("p1"))
                    .await?;
                let r = c.delegate(&req, &records).await?;
                match &r {
                    Err(e) => {
                        self.operator
                            .delegation_errors
                            .insert(action.clone(), e.code.as_str().to_string());
                    }
                    Ok(_) => {
                        self.operator.delegation_errors.remove(action);
                    }
                }
                self.findings.extend(judge_delegated_result(
                    &r,
                    child,
                    action,
                    &mut self.checker.facts,
                ));
                if !expect.is_any() {
                    result_facts(&mut self.checker.facts, result, error);
                    self.findings
                        .extend(check_operator_result(&r, result, error));
                }
            }
            Step::OperatorCancel {
                action,
                instance,
                status,
                expect,
            } => {
                let id = self.operator.action_id(action);
                let c = self
                    .operator
                    .connector(instance.as_deref().unwrap_or("p1"))
                    .await?;
                let answer = c.cancel(&id).await?;
                if expect.is_any() {
                    // The binding it left is judged by the invariants at this step.
                    return Ok(());
                }
                self.findings.extend(crate::check::hermes::cancel_binding(
                    action,
                    &answer,
                    status.as_deref(),
                    &mut self.checker.facts,
                ));
            }
            Step::OperatorWaitBound { action } => {
                let id = self.operator.action_id(action);
                let c = self.operator.reader().await?;
                let mut bound = false;
                for _ in 0..500 {
                    if let Some(b) = c.binding_of(&id).await
                        && (b.run_id.is_some() || b.status.is_terminal())
                    {
                        bound = true;
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                if !bound {
                    return Err(SutError::Harness(format!(
                        "{action}: no run was bound within 5 s"
                    )));
                }
            }
            Step::OperatorSettle {} => {
                for (_, t) in std::mem::take(&mut self.operator.background) {
                    let _ = self.operator.idle(t).await;
                }
            }
            Step::OperatorKill { instance } => {
                let (kill, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.operator.background)
                    .into_iter()
                    .partition(|(i, _)| i == instance);
                if let Some(c) = self.operator.connectors.remove(instance) {
                    // A process dies by SIGKILL; its requests in flight fail with it.
                    c.stop("killed with SIGKILL").await;
                }
                for (_, t) in kill {
                    t.abort();
                    let _ = t.await;
                }
                self.operator.background = keep;
            }
            other => {
                return Err(SutError::Harness(format!(
                    "{} is not a step of connector_work",
                    other.verb()
                )));
            }
        }
        Ok(())
    }

    /// The steps on fake-hermes: a fault rule, a script, a hold waited for or released (through the
    /// one hold choreography), a forgotten run.
    async fn hermes_step(&mut self, step: &Step) -> Result<(), SutError> {
        match step {
            Step::HermesFault { .. } => {
                let (_, h) = self.operator.hermes().await?;
                let rule = step
                    .hermes_rule()
                    .ok_or_else(|| SutError::Harness("not a Hermes fault".into()))?;
                h.add_rule(rule)
                    .map_err(|d| SutError::Harness(d.join("; ")))?;
            }
            Step::HermesScript { script } => {
                let (_, h) = self.operator.hermes().await?;
                h.set_scripts(Vec::new(), Some(script.clone()))
                    .map_err(|d| SutError::Harness(d.join("; ")))?;
            }
            Step::HermesWaitParked { hold } => {
                let (_, h) = self.operator.hermes().await?;
                crate::providers::holds::hold(&h, hold, Duration::from_secs(10))
                    .parked()
                    .await
                    .map_err(|e| SutError::Harness(e.to_string()))?;
            }
            Step::HermesRelease { hold, reject } => {
                let (_, h) = self.operator.hermes().await?;
                let action = match reject {
                    Some(status) => {
                        provider_model::holds::ReleaseAction::Reject { status: *status }
                    }
                    None => provider_model::holds::ReleaseAction::Proceed,
                };
                crate::providers::holds::hold(&h, hold, Duration::from_secs(10))
                    .release(action)
                    .await
                    .map_err(|e| SutError::Harness(e.to_string()))?;
            }
            Step::HermesForget {} => {
                let (_, h) = self.operator.hermes().await?;
                h.forget();
            }
            other => {
                return Err(SutError::Harness(format!(
                    "{} is not a step of hermes_step",
                    other.verb()
                )));
            }
        }
        Ok(())
    }
}
