//! The command line. Today: inspect stores, provider profiles and occurrence histories. The
//! conformance run arrives with the harness.

use crate::aoc::ids::OccurrenceId;
use crate::aoc::profile::ProviderProfile;
use crate::exit;
use crate::store::{Store, StoreSpec};
use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "aocheck",
    version,
    about = "Conformance harness for agent executors (AOC profile)"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Open a store, apply its migrations and list what it holds for a domain.
    Store {
        /// `memory`, `sqlite:PATH` or `postgres:URL`.
        #[arg(long, env = "AOCHECK_STORE")]
        store: StoreSpec,
        /// The domain (store namespace) to list.
        #[arg(long, default_value = "default")]
        domain: String,
    },
    /// Validate a provider profile (JSON) and print its digest, or every defect.
    Profile { file: PathBuf },
    /// Verify the digest chain of one occurrence's history in a store.
    Verify {
        #[arg(long, env = "AOCHECK_STORE")]
        store: StoreSpec,
        #[arg(long, default_value = "default")]
        domain: String,
        occurrence: String,
    },
}

/// Runs a parsed command; returns the exit code (see [`crate::exit`]).
pub async fn run(cli: Cli) -> u8 {
    match cli.command {
        Command::Store { store, domain } => {
            let s = match store.open().await {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("error: cannot open store: {e}");
                    return exit::UNREACHABLE;
                }
            };
            match s.list(&domain, None).await {
                Ok(rows) => {
                    println!(
                        "store {} (durable: {}), domain {domain:?}: {} occurrence(s)",
                        s.info().kind,
                        s.info().durable,
                        rows.len()
                    );
                    for r in rows {
                        println!(
                            "  {}  lane {}  {}  {} entries",
                            r.id,
                            r.lane,
                            r.class.label(),
                            r.len
                        );
                    }
                    exit::OK
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    exit::UNREACHABLE
                }
            }
        }
        Command::Profile { file } => {
            let text = match std::fs::read_to_string(&file) {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("error: {}: {e}", file.display());
                    return exit::INVALID_INPUT;
                }
            };
            let p: ProviderProfile = match serde_json::from_str(&text) {
                Ok(p) => p,
                Err(e) => {
                    eprintln!("error: {}:{}:{}: {e}", file.display(), e.line(), e.column());
                    return exit::INVALID_INPUT;
                }
            };
            let defects = p.validate();
            if !defects.is_empty() {
                for d in defects {
                    eprintln!("error: {}: field `{}`: {}", file.display(), d.field, d.msg);
                }
                return exit::INVALID_INPUT;
            }
            match p.digest() {
                Ok(d) => {
                    println!("profile {} version {}: valid, digest {d}", p.id, p.version);
                    exit::OK
                }
                Err(e) => {
                    eprintln!("error: {}: {e}", file.display());
                    exit::INVALID_INPUT
                }
            }
        }
        Command::Verify {
            store,
            domain,
            occurrence,
        } => {
            let s = match store.open().await {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("error: cannot open store: {e}");
                    return exit::UNREACHABLE;
                }
            };
            let occ = OccurrenceId::from_stored(occurrence);
            match s.load(&domain, &occ).await {
                Ok(None) => {
                    eprintln!("error: no occurrence {occ} in domain {domain:?}");
                    exit::INVALID_INPUT
                }
                Ok(Some(entries)) => match crate::aoc::history::verify_chain(&entries) {
                    Ok(()) => {
                        println!("{occ}: {} entries, chain valid", entries.len());
                        exit::OK
                    }
                    Err(b) => {
                        println!("{occ}: chain BROKEN: {b}");
                        exit::REQUIREMENT_FAILED
                    }
                },
                Err(e) => {
                    eprintln!("error: {e}");
                    exit::UNREACHABLE
                }
            }
        }
    }
}
