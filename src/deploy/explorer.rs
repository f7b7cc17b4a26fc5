//! What `deploy explore` needs of a provider's schedules (`explore::explore_with` runs any):
//! a payment service's orders (`explore::Orders`) or a connector's actions
//! (`actions::Actions`: a connector's, or a service's MCP tool calls).

use super::Ran;
use std::path::Path;

/// What `deploy explore` draws and runs, for one provider: schedules of orders (payments) or
/// of actions (a connector).
pub trait Explorer {
    type S: crate::explore::shrink::Shrinkable + serde::Serialize;
    /// The schedule of run `index` of `seed`, with at most `size` orders or actions.
    fn generate(&self, seed: u64, index: u64, size: u64) -> Self::S;
    /// Runs a schedule, its stores under `work` and its logs under `logs`.
    fn run(&self, s: &Self::S, work: &Path, logs: &Path) -> impl Future<Output = Ran>;
    fn describe(&self, s: &Self::S) -> String;
    /// The schedule file `deploy run --schedule` replays.
    fn yaml(&self, s: &Self::S) -> String;
    /// The reports of a schedule's run, as `deploy run --schedule FILE` writes them.
    fn report(&self, s: &Self::S, ran: Ran, file: &Path) -> crate::report::model::Report;
    /// Reads a schedule file for deploy file `d`, every defect named with its step (before any
    /// provider starts).
    fn read(d: &super::file::Loaded, f: &Path) -> Result<Self::S, String>
    where
        Self: Sized;
}

/// A schedule in one line: `id(fault) → …`, from each step's id and fault name.
pub fn describe_steps<'a>(steps: impl Iterator<Item = (&'a str, Option<&'static str>)>) -> String {
    steps
        .map(|(id, fault)| format!("{id}({})", fault.unwrap_or("no fault")))
        .collect::<Vec<_>>()
        .join(" → ")
}

/// A schedule file (YAML) as `--schedule` reads it: `what` in its heading comment, then each
/// step's id and fault name.
pub fn steps_yaml<'a>(
    what: &str,
    steps: impl Iterator<Item = (&'a str, Option<&'static str>)>,
) -> String {
    let mut out = format!(
        "# aocheck deploy schedule: {what}\n# Replay: aocheck deploy run DEPLOY_FILE --schedule THIS_FILE\nsteps:\n"
    );
    for (id, fault) in steps {
        out.push_str(&format!(
            "  - {{occurrence: {}, fault: {}}}\n",
            serde_json::Value::String(id.to_string()),
            fault.unwrap_or("null")
        ));
    }
    out
}
