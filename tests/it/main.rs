//! aocheck's integration tests: one binary (the library links once), one module per area.
//! `support` is the shared builder; `broken.md` describes the broken variants `broken` runs.

mod analyze;
mod attest;
mod attest_hostile;
mod broken;
mod cases;
mod ci_action;
mod cli;
mod deploy;
mod deploy_hostile;
mod deploy_mcp;
mod domain;
mod explore;
mod explore_hermes;
mod explore_report;
mod fake_bins;
mod hostile;
mod html;
mod layers;
mod mcp_contract;
mod model;
mod operator;
mod pipeline;
mod protocol;
mod providers;
mod python_sut;
mod report;
mod schema;
mod sdk_contract;
mod store_conformance;
mod successor_process;
#[allow(dead_code)]
mod support;
mod vacuous;
mod workflow;
