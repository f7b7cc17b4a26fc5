//! The deploy file (`aocheck-deploy.yaml`, version 1; schema `docs/schemas/deploy-v1.schema.json`):
//! how to start the implementer's service, when it is ready, how to kill it, how its provider
//! entries map to occurrences, and how to drive and observe it through its own business API.
//! Every defect is named with the file, the field and the fix, all at once.

use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Placeholders a service's environment may hold.
pub const ENV_PLACEHOLDERS: [&str; 10] = [
    "payments.url",
    "payments.key",
    "payments.webhook_secret",
    "hermes.url",
    "hermes.key",
    "mcp.url",
    "store.url",
    "store.dir",
    "port",
    "instance",
];

/// Placeholders a request template may hold (`{amount:int}` writes a JSON number).
pub const DRIVE_PLACEHOLDERS: [&str; 7] = [
    "occurrence",
    "amount",
    "amount:int",
    "currency",
    "objective",
    "command",
    "choice",
];

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeployFile {
    pub version: u32,
    pub name: String,
    /// Which provider the service's effects go to, and so which cases judge it.
    #[serde(default)]
    pub provider: ProviderKind,
    pub service: Service,
    /// Where the provider delivers its signed webhook events on each instance (optional).
    #[serde(default)]
    pub webhook: Option<Webhook>,
    /// How the provider's entries map to occurrences; without it no verdict can be green.
    #[serde(default)]
    pub attribution: Option<Attribution>,
    pub drive: Drive,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Service {
    /// The argv, run in the deploy file's folder.
    pub command: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    #[serde(default = "one")]
    pub instances: u32,
    pub ready: Ready,
    #[serde(default)]
    pub kill: KillMode,
}

fn one() -> u32 {
    1
}

/// The provider a deployment is judged against: a payment service (fake-payments' Stripe
/// dialect), a Hermes connector (fake-hermes' `/v1/runs`), or a service whose effects are MCP
/// tool calls (fake-mcp over Streamable HTTP).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderKind {
    #[default]
    Payments,
    Hermes,
    Mcp,
}

impl ProviderKind {
    /// The simulator whose ledger judges the deployment.
    pub fn simulator(self) -> &'static str {
        match self {
            ProviderKind::Payments => "fake-payments",
            ProviderKind::Hermes => "fake-hermes",
            ProviderKind::Mcp => "fake-mcp",
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ready {
    pub path: String,
    #[serde(default = "ready_timeout")]
    pub timeout_ms: u64,
}

fn ready_timeout() -> u64 {
    30_000
}

/// How an instance is killed: SIGKILL to its process group, or `cgroup.kill` of a cgroup v2
/// aocheck makes for it under its own (delegated) cgroup.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KillMode {
    #[default]
    ProcessGroup,
    Cgroup,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Webhook {
    /// The path on each instance that receives events (`POST`, `Stripe-Signature` signed with
    /// `{payments.webhook_secret}`).
    pub path: String,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Attribution {
    /// The Idempotency-Key a provider entry of occurrence `{occurrence}` carries.
    #[serde(default)]
    pub idempotency_key: Option<String>,
    /// The metadata field of a provider payment that holds the occurrence.
    #[serde(default)]
    pub metadata: Option<String>,
    /// The session id a Hermes run of occurrence `{occurrence}` carries (seed 000:
    /// `aip-operator-{occurrence}`).
    #[serde(default)]
    pub session_id: Option<String>,
}

impl Attribution {
    /// The rule in words (the report's key rule).
    pub fn describe(&self) -> String {
        match (&self.idempotency_key, &self.metadata, &self.session_id) {
            (Some(k), _, _) => format!("Idempotency-Key {k}"),
            (None, Some(m), _) => format!("metadata.{m} holds the occurrence"),
            (None, None, Some(s)) => format!("session id {s}"),
            (None, None, None) => "none declared".into(),
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Drive {
    pub submit: Request,
    pub status: Status,
    /// Where the service serves its AOC record of an order (optional): the history and the §7
    /// report in the shape of the process protocol's `state` answer
    /// (`docs/schemas/state.schema.json`). With it the cases also judge what the protocol
    /// judges; without it those requirements stay `unsupported`.
    #[serde(default)]
    pub report: Option<RecordRoute>,
    /// A connector's resume of an action waiting for a provider approval (optional): a new
    /// resume command `{command}` with `{choice}` for the source action `{occurrence}` (seed
    /// 000's `resume` branch). Without it the approval case is `unsupported`.
    #[serde(default)]
    pub resume: Option<Request>,
    /// A connector's cancellation of the action `{occurrence}` (optional). Without it the
    /// cancellation case is `unsupported`.
    #[serde(default)]
    pub cancel: Option<Request>,
    /// A service of MCP tool calls: the write call an action asks for (optional). Each effect
    /// of the action is compared with it; without it only the count and the outcome are judged.
    #[serde(default)]
    pub effect: Option<EffectTemplate>,
    /// How long to keep watching after the outcome is final, so that a late duplicate entry is
    /// seen (a job queue's retry after a lease expires).
    #[serde(default = "settle_ms")]
    pub settle_ms: u64,
    /// How long an occurrence may stay pending before the case gives up waiting.
    #[serde(default = "deadline_ms")]
    pub deadline_ms: u64,
}

fn settle_ms() -> u64 {
    4_000
}
fn deadline_ms() -> u64 {
    60_000
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    #[serde(default = "post")]
    pub method: String,
    pub path: String,
    #[serde(default)]
    pub body: Option<Value>,
    #[serde(default = "accepted")]
    pub accept: Vec<u16>,
}

impl Request {
    /// Whether the template holds the placeholder `{p}`, in its path or any string of its body.
    pub fn holds(&self, p: &str) -> bool {
        let mut all = vec![self.path.clone()];
        if let Some(b) = &self.body {
            strings(b, &mut all);
        }
        all.iter().any(|s| placeholders(s).contains(&p))
    }
}

fn post() -> String {
    "POST".into()
}
fn get() -> String {
    "GET".into()
}
fn accepted() -> Vec<u16> {
    vec![200, 201, 202]
}

/// The write call an action asks for: its tool, and arguments its effect must carry (a subset;
/// strings may hold `{occurrence}`).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EffectTemplate {
    pub tool: String,
    #[serde(default)]
    pub arguments: serde_json::Map<String, Value>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordRoute {
    #[serde(default = "get")]
    pub method: String,
    pub path: String,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Status {
    #[serde(default = "get")]
    pub method: String,
    pub path: String,
    /// A JSON path (`$.state`, `$.order['state']`, `$.items[0].state`) to the service's label.
    pub outcome: String,
    /// The service's labels and what each means in AOC terms.
    pub outcomes: BTreeMap<String, Outcome>,
}

/// What a label of the service means.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Success,
    NotAccepted,
    FinalFailure,
    /// Not final yet: never a verdict on the outcome.
    Pending,
    /// Final: the service says the outcome cannot be known from the evidence it has (seed
    /// 000's `outcome_unknown`). Honest caution: it claims no outcome, so the ledger can never
    /// contradict it.
    Unknown,
}

impl Outcome {
    pub fn is_final(self) -> bool {
        self != Outcome::Pending
    }
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::NotAccepted => "not_accepted",
            Outcome::FinalFailure => "final_failure",
            Outcome::Pending => "pending",
            Outcome::Unknown => "unknown",
        }
    }
}

/// A loaded deploy file and the folder it was read from.
#[derive(Clone, Debug)]
pub struct Loaded {
    pub file: DeployFile,
    pub path: PathBuf,
    pub dir: PathBuf,
    pub sha256: String,
}

impl Loaded {
    /// Whether the service's environment names fake-mcp (or its effects are tool calls).
    pub fn needs_mcp(&self) -> bool {
        self.file.provider == ProviderKind::Mcp
            || self
                .file
                .service
                .env
                .values()
                .any(|v| v.contains("{mcp.url}"))
    }

    /// Whether the service's environment names fake-hermes (or it is a connector).
    pub fn needs_hermes(&self) -> bool {
        self.file.provider == ProviderKind::Hermes
            || self
                .file
                .service
                .env
                .values()
                .any(|v| v.contains("{hermes.url}"))
    }
}

/// Reads and checks a deploy file; every defect at once, each naming the file and field.
pub fn load(path: &Path) -> Result<Loaded, Vec<String>> {
    let shown = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| vec![format!("{shown}: cannot read: {e}")])?;
    let text =
        String::from_utf8(bytes.clone()).map_err(|_| vec![format!("{shown}: not UTF-8 text")])?;
    // The YAML first: a syntax error (with its line and column) ends the reading there.
    let doc: Value = serde_saphyr::from_str(&text).map_err(|e| {
        vec![format!(
            "{shown}: {e} (the YAML cannot be read past this point; the fields are described in docs/schemas/deploy-v1.schema.json)"
        )]
    })?;
    // Then its shape, every defect at once; then what a schema cannot say.
    let shape = super::shape::defects(&text, &doc);
    let typed: Result<DeployFile, _> = serde_saphyr::from_str(&text);
    let file = match typed {
        // What a schema cannot say, beside every shape defect, whenever the file reads.
        Ok(f) if !shape.is_empty() => {
            return Err(shape
                .into_iter()
                .chain(validate(&f))
                .map(|d| format!("{shown}: {d}"))
                .collect());
        }
        Ok(f) => f,
        Err(_) if !shape.is_empty() => {
            return Err(shape.into_iter().map(|d| format!("{shown}: {d}")).collect());
        }
        Err(e) => {
            return Err(vec![format!(
                "{shown}: {e} (the fields are described in docs/schemas/deploy-v1.schema.json)"
            )]);
        }
    };
    let defects = validate(&file);
    if !defects.is_empty() {
        return Err(defects
            .into_iter()
            .map(|d| format!("{shown}: {d}"))
            .collect());
    }
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    Ok(Loaded {
        file,
        path: path.to_path_buf(),
        dir,
        sha256: crate::digest::Digest::of_bytes(&bytes).hex(),
    })
}

/// The placeholders (`{name}`) in a string.
pub fn placeholders(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(i) = rest.find('{') {
        let after = &rest[i + 1..];
        match after.find('}') {
            Some(j) => {
                out.push(&after[..j]);
                rest = &after[j + 1..];
            }
            None => break,
        }
    }
    out
}

fn strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        Value::Object(o) => o.iter().for_each(|(k, x)| {
            out.push(k.clone());
            strings(x, out)
        }),
        _ => {}
    }
}

/// Every defect of a parsed file: field, what is wrong, and the fix.
pub fn validate(f: &DeployFile) -> Vec<String> {
    let mut d = Vec::new();
    if f.version != 1 {
        d.push(format!(
            "version: {} is not a version this aocheck reads; write `version: 1`",
            f.version
        ));
    }
    if f.name.trim().is_empty()
        || !f
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        d.push(format!(
            "name: {:?} must be letters, digits, `-` or `_` (it names the report folder)",
            f.name
        ));
    }
    if f.service.command.is_empty() || f.service.command[0].trim().is_empty() {
        d.push("service.command: give the argv, e.g. `[python3, app.py]`".into());
    }
    if !(1..=8).contains(&f.service.instances) {
        d.push(format!(
            "service.instances: {} is outside 1..=8",
            f.service.instances
        ));
    }
    for (k, v) in &f.service.env {
        for p in placeholders(v) {
            if !ENV_PLACEHOLDERS.contains(&p) {
                d.push(format!(
                    "service.env.{k}: unknown placeholder {{{p}}}; one of {}",
                    ENV_PLACEHOLDERS.map(|p| format!("{{{p}}}")).join(", ")
                ));
            }
        }
    }
    if !f.service.ready.path.starts_with('/') {
        d.push(format!(
            "service.ready.path: {:?} must start with `/`",
            f.service.ready.path
        ));
    }
    if let Some(w) = &f.webhook
        && !w.path.starts_with('/')
    {
        d.push(format!("webhook.path: {:?} must start with `/`", w.path));
    }
    if f.webhook.is_some()
        && !f
            .service
            .env
            .values()
            .any(|v| v.contains("{payments.webhook_secret}"))
    {
        d.push("service.env: a webhook is declared but no variable holds {payments.webhook_secret}; the service cannot verify what it receives".into());
    }
    if !f.service.env.values().any(|v| v.contains("{port}")) {
        d.push("service.env: no variable holds {port}; the service must listen where aocheck says (e.g. `PORT: \"{port}\"`)".into());
    }
    if let Some(a) = &f.attribution {
        attribution_defects(f.provider, a, &mut d);
    }
    if f.provider == ProviderKind::Hermes {
        if !f.service.env.values().any(|v| v.contains("{hermes.url}")) {
            d.push("service.env: `provider: hermes` but no variable holds {hermes.url}; the connector must be pointed at fake-hermes (e.g. `HERMES_URL: \"{hermes.url}\"`)".into());
        }
        if !f.service.env.values().any(|v| v.contains("{hermes.key}")) {
            d.push("service.env: `provider: hermes` but no variable holds {hermes.key}; fake-hermes refuses a start without its API key (e.g. `HERMES_API_KEY: \"{hermes.key}\"`)".into());
        }
        if f.webhook.is_some() {
            d.push("webhook: a Hermes connector receives no payment events; remove it".into());
        }
        if f.drive.report.is_some() {
            d.push("drive.report: a connector's record is not read yet (the payment services' record shape only); remove it".into());
        }
        let templates = [
            (
                "resume",
                &f.drive.resume,
                &["occurrence", "command", "choice"][..],
                "a resume names its command ({command}), the action it resumes ({occurrence}) and the choice ({choice})",
            ),
            (
                "cancel",
                &f.drive.cancel,
                &["occurrence"][..],
                "the cancellation of which action?",
            ),
        ];
        for (name, r, needs, why) in templates {
            let Some(r) = r else { continue };
            request_defects(name, &r.method, &r.path, r.body.as_ref(), &mut d);
            for p in needs.iter().filter(|p| !r.holds(p)) {
                d.push(format!("drive.{name}: holds no {{{p}}}; {why}"));
            }
            accept_defects(name, &r.accept, &mut d);
        }
    } else if f.drive.resume.is_some() || f.drive.cancel.is_some() {
        d.push("drive.resume / drive.cancel: a payment service has no approval or cancellation case; they belong to `provider: hermes`".into());
    }
    if f.provider == ProviderKind::Mcp {
        if !f.service.env.values().any(|v| v.contains("{mcp.url}")) {
            d.push("service.env: `provider: mcp` but no variable holds {mcp.url}; the service must be pointed at fake-mcp's MCP endpoint (e.g. `MCP_URL: \"{mcp.url}\"`)".into());
        }
        if f.webhook.is_some() {
            d.push("webhook: an MCP tool server sends no webhook events; remove it".into());
        }
        if f.drive.report.is_some() {
            d.push("drive.report: the record is read for a payment service only; remove it".into());
        }
        if let Some(e) = &f.drive.effect {
            let writes: Vec<String> = provider_model::mcp::tools::default_tools()
                .into_iter()
                .filter(|t| t.writes())
                .map(|t| t.name)
                .collect();
            let mut all = Vec::new();
            strings(&Value::Object(e.arguments.clone()), &mut all);
            for x in &all {
                for p in placeholders(x) {
                    if p != "occurrence" {
                        d.push(format!(
                            "drive.effect.arguments: unknown placeholder {{{p}}}; only {{occurrence}}"
                        ));
                    }
                }
            }
            if !writes.contains(&e.tool) {
                d.push(format!(
                    "drive.effect.tool: {:?} is not a write tool fake-mcp serves; one of {}",
                    e.tool,
                    writes.join(", ")
                ));
            }
        }
    } else if f.drive.effect.is_some() {
        d.push("drive.effect: the expected tool call belongs to `provider: mcp`; remove it".into());
    }
    let r = &f.drive.submit;
    request_defects("submit", &r.method, &r.path, r.body.as_ref(), &mut d);
    accept_defects("submit", &r.accept, &mut d);
    let s = &f.drive.status;
    request_defects("status", &s.method, &s.path, None, &mut d);
    if !s.path.contains("{occurrence}") {
        d.push("drive.status.path: must hold {occurrence} (the status of which order?)".into());
    }
    if let Err(e) = JsonPath::parse(&s.outcome) {
        d.push(format!("drive.status.outcome: {e}"));
    }
    if !s.outcomes.values().any(|o| *o == Outcome::Success) {
        d.push("drive.status.outcomes: map at least one label to `success`".into());
    }
    if let Some(r) = &f.drive.report {
        request_defects("report", &r.method, &r.path, None, &mut d);
        if !r.path.contains("{occurrence}") {
            d.push("drive.report.path: must hold {occurrence} (the record of which order?)".into());
        }
        // The record is judged with the provider's ledger read by the order's key, as the
        // protocol reads it by `init`'s key rule (D79).
        if f.attribution
            .as_ref()
            .is_none_or(|a| a.idempotency_key.is_none())
        {
            d.push("drive.report: the record is judged against the provider's ledger by each order's Idempotency-Key; declare `attribution.idempotency_key: \"…{occurrence}…\"` (a metadata attribution cannot place the provider's requests)".into());
        }
    }
    if f.drive.deadline_ms == 0 || f.drive.deadline_ms > 600_000 {
        d.push("drive.deadline_ms: give 1 to 600000".into());
    }
    if !(settle_ms()..=120_000).contains(&f.drive.settle_ms) {
        d.push(format!(
            "drive.settle_ms: give {} to 120000 (it may lengthen the watch for a late duplicate, never shorten it)",
            settle_ms()
        ));
    }
    d
}

/// The one rule an attribution gives, for its provider: a Payment's Idempotency-Key or
/// metadata field, a Hermes run's session id or Idempotency-Key; a template holds
/// `{occurrence}` once and nothing else.
fn attribution_defects(provider: ProviderKind, a: &Attribution, d: &mut Vec<String>) {
    let given: Vec<(&str, &String)> = [
        ("idempotency_key", a.idempotency_key.as_ref()),
        ("metadata", a.metadata.as_ref()),
        ("session_id", a.session_id.as_ref()),
    ]
    .into_iter()
    .filter_map(|(n, v)| v.map(|v| (n, v)))
    .collect();
    let allowed: &[&str] = match provider {
        ProviderKind::Payments => &["idempotency_key", "metadata"],
        // The key each write call carries, in its arguments or `_meta` (the tool declares
        // where).
        ProviderKind::Mcp => &["idempotency_key"],
        // fake-hermes' pinned default mode ignores a start's Idempotency-Key and records none,
        // so only the session id can place a run (D80).
        ProviderKind::Hermes => &["session_id"],
    };
    let example = match provider {
        ProviderKind::Payments => {
            "`idempotency_key: \"order-{occurrence}\"` or `metadata: order_id`"
        }
        ProviderKind::Hermes => "`session_id: \"aip-operator-{occurrence}\"`",
        ProviderKind::Mcp => {
            "`idempotency_key: \"msg-{occurrence}\"` (the key each write call carries)"
        }
    };
    match given.as_slice() {
        [] => d.push(format!(
            "attribution: give {example} (or leave attribution out: then no verdict can pass)"
        )),
        [_, _, ..] => d.push(format!(
            "attribution: give one rule, not {}: {example}",
            given
                .iter()
                .map(|(n, _)| *n)
                .collect::<Vec<_>>()
                .join(" and ")
        )),
        [(name, _)] if !allowed.contains(name) => d.push(format!(
            "attribution.{name}: not a rule for this provider's entries; give {example}"
        )),
        [("metadata", m)] => {
            if m.trim().is_empty() {
                d.push("attribution.metadata: name the metadata field".into())
            }
        }
        [(name, t)] => {
            let n = placeholders(t)
                .iter()
                .filter(|p| **p == "occurrence")
                .count();
            if n == 0 {
                d.push(format!(
                    "attribution.{name}: {t:?} must hold {{occurrence}}"
                ));
            } else if n > 1 {
                d.push(format!(
                    "attribution.{name}: {t:?} holds {{occurrence}} more than once; give it once"
                ));
            }
            for p in placeholders(t) {
                if p != "occurrence" {
                    d.push(format!(
                        "attribution.{name}: unknown placeholder {{{p}}}; only {{occurrence}}"
                    ));
                }
            }
        }
    }
}

fn request_defects(
    name: &str,
    method: &str,
    path: &str,
    body: Option<&Value>,
    d: &mut Vec<String>,
) {
    if !["GET", "POST", "PUT", "PATCH", "DELETE"].contains(&method) {
        d.push(format!(
            "drive.{name}.method: {method:?} is not one of GET, POST, PUT, PATCH, DELETE"
        ));
    }
    if !path.starts_with('/') {
        d.push(format!("drive.{name}.path: {path:?} must start with `/`"));
    }
    let mut all = vec![path.to_string()];
    if let Some(b) = body {
        strings(b, &mut all);
    }
    for s in &all {
        for p in placeholders(s) {
            if !DRIVE_PLACEHOLDERS.contains(&p) {
                d.push(format!(
                    "drive.{name}: unknown placeholder {{{p}}}; one of {}",
                    DRIVE_PLACEHOLDERS.map(|p| format!("{{{p}}}")).join(", ")
                ));
            }
        }
    }
}

fn accept_defects(name: &str, accept: &[u16], d: &mut Vec<String>) {
    if accept.is_empty() || accept.iter().any(|s| !(100..=599).contains(s)) {
        d.push(format!(
            "drive.{name}.accept: list the HTTP statuses that mean accepted, e.g. [200, 202]"
        ));
    }
}

/// A JSON path of member names and array indices: `$`, `.name`, `['name']`, `[N]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JsonPath(Vec<Seg>);

#[derive(Clone, Debug, PartialEq, Eq)]
enum Seg {
    Key(String),
    Index(usize),
}

impl JsonPath {
    pub fn parse(s: &str) -> Result<JsonPath, String> {
        let Some(mut rest) = s.strip_prefix('$') else {
            return Err(format!("{s:?} must start with `$` (e.g. `$.state`)"));
        };
        let mut segs = Vec::new();
        while !rest.is_empty() {
            if let Some(r) = rest.strip_prefix('.') {
                let end = r.find(['.', '[']).unwrap_or(r.len());
                let name = &r[..end];
                if name.is_empty() {
                    return Err(format!("{s:?}: an empty member name after `.`"));
                }
                segs.push(Seg::Key(name.to_string()));
                rest = &r[end..];
            } else if let Some(r) = rest.strip_prefix("['") {
                let Some(end) = r.find("']") else {
                    return Err(format!("{s:?}: `['` without its `']`"));
                };
                segs.push(Seg::Key(r[..end].to_string()));
                rest = &r[end + 2..];
            } else if let Some(r) = rest.strip_prefix('[') {
                let Some(end) = r.find(']') else {
                    return Err(format!("{s:?}: `[` without its `]`"));
                };
                let n = r[..end]
                    .parse::<usize>()
                    .map_err(|_| format!("{s:?}: `[{}]` is no array index", &r[..end]))?;
                segs.push(Seg::Index(n));
                rest = &r[end + 1..];
            } else {
                return Err(format!(
                    "{s:?}: cannot read {rest:?} (use `.name`, `['name']` or `[N]`)"
                ));
            }
        }
        Ok(JsonPath(segs))
    }

    pub fn find<'a>(&self, v: &'a Value) -> Option<&'a Value> {
        self.0.iter().try_fold(v, |v, s| match s {
            Seg::Key(k) => v.get(k),
            Seg::Index(i) => v.get(i),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    const GOOD: &str = r#"
version: 1
name: shop
service:
  command: [python3, app.py]
  env: {PORT: "{port}", KEY: "{payments.key}"}
  ready: {path: /healthz}
attribution: {idempotency_key: "order-{occurrence}"}
drive:
  submit: {path: /orders, body: {order_id: "{occurrence}", amount: "{amount:int}"}}
  status:
    path: "/orders/{occurrence}"
    outcome: $.state
    outcomes: {paid: success, queued: pending}
"#;

    fn parse(text: &str) -> DeployFile {
        serde_saphyr::from_str(text).expect("the test's file parses")
    }

    #[test]
    fn a_good_file_has_no_defect_and_takes_the_defaults() {
        let f = parse(GOOD);
        assert_eq!(validate(&f), Vec::<String>::new());
        assert_eq!(f.service.instances, 1);
        assert_eq!(f.service.kill, KillMode::ProcessGroup);
        assert_eq!(f.drive.submit.method, "POST");
        assert_eq!(f.drive.submit.accept, vec![200, 201, 202]);
        assert_eq!(f.drive.status.method, "GET");
    }

    #[rstest]
    #[case::version("version: 1", "version: 2", "version: 2 is not")]
    #[case::placeholder(
        "KEY: \"{payments.key}\"",
        "KEY: \"{payments.secret}\"",
        "service.env.KEY: unknown placeholder {payments.secret}"
    )]
    #[case::no_port("PORT: \"{port}\"", "PORT: \"8080\"", "no variable holds {port}")]
    #[case::key_rule("order-{occurrence}", "order-fixed", "must hold {occurrence}")]
    #[case::path("outcome: $.state", "outcome: state", "drive.status.outcome")]
    #[case::no_success("paid: success", "paid: pending", "at least one label to `success`")]
    #[case::drive_placeholder(
        "\"{amount:int}\"",
        "\"{price}\"",
        "drive.submit: unknown placeholder {price}"
    )]
    #[case::name("name: shop", "name: my shop", "name: \"my shop\"")]
    fn each_defect_names_its_field(#[case] from: &str, #[case] to: &str, #[case] said: &str) {
        let f = parse(&GOOD.replacen(from, to, 1));
        let d = validate(&f);
        assert!(d.iter().any(|x| x.contains(said)), "{d:?}");
    }

    /// Both ways, `provider: mcp`: a service pointed at fake-mcp and keyed by its calls' key
    /// is taken; without `{mcp.url}`, with a metadata rule, or with a webhook, each defect is
    /// named.
    #[rstest]
    #[case::good("", "")]
    #[case::no_url("MCP_URL: \"{mcp.url}\"", "no variable holds {mcp.url}")]
    #[case::metadata(
        "idempotency_key: \"order-{occurrence}\"",
        "attribution.metadata: not a rule"
    )]
    #[case::webhook("drive:", "webhook: an MCP tool server")]
    #[case::effect_tool(
        "effect: {tool: lookup}",
        "drive.effect.tool: \"lookup\" is not a write tool"
    )]
    #[case::effect_placeholder(
        "effect: {tool: send_message, arguments: {text: \"{amount}\"}}",
        "drive.effect.arguments: unknown placeholder {amount}"
    )]
    fn an_mcp_service_is_checked_for_its_provider(#[case] change: &str, #[case] said: &str) {
        let mcp = GOOD
            .replace("name: shop", "name: notes\nprovider: mcp")
            .replace("KEY: \"{payments.key}\"", "MCP_URL: \"{mcp.url}\"");
        let text = match change {
            "" => mcp,
            c if c.starts_with("MCP_URL") => mcp.replace(c, "X: \"1\""),
            c if c.starts_with("idempotency_key") => mcp.replace(c, "metadata: order_id"),
            c if c.starts_with("effect") => mcp.replace("  status:", &format!("  {c}\n  status:")),
            _ => mcp.replace("drive:", "webhook: {path: /hooks}\ndrive:"),
        };
        let d = validate(&parse(&text));
        if said.is_empty() {
            assert_eq!(d, Vec::<String>::new());
        } else {
            assert!(d.iter().any(|x| x.contains(said)), "{d:?}");
        }
    }

    #[test]
    fn an_unknown_field_is_refused_by_name() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("aocheck-deploy.yaml");
        std::fs::write(
            &p,
            GOOD.replace("instances", "x").replace("kill", "y") + "extra: 1\n",
        )
        .expect("write");
        let e = load(&p).err().unwrap_or_default().join("\n");
        assert!(
            e.contains("extra") && e.contains("aocheck-deploy.yaml"),
            "{e}"
        );
    }

    #[test]
    fn placeholders_are_found_in_order() {
        assert_eq!(placeholders("a{x}b{y.z}{"), vec!["x", "y.z"]);
    }
}
