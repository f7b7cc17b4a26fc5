//! `aocheck explore --workload hermes`: both directions for the operator connector.

use aocheck::explore::schedule::{Workload, generate};
use aocheck::explore::{Outcome, outcome, run_schedule};
use aocheck::reference::Knobs;
use aocheck::runner::RunOptions;
use aocheck::store::AnyStore;
use std::sync::Arc;

fn memory() -> Arc<AnyStore> {
    Arc::new(AnyStore::Memory(aocheck::MemoryStore::new()))
}

fn run_options(knobs: Knobs, seed: u64) -> RunOptions {
    RunOptions {
        run_id: format!("explore-hermes-{}", uuid::Uuid::new_v4().simple()),
        seed,
        knobs,
        repro_store: None,
        sut: None,
        explore: true,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn measure() {
    let store = memory();
    let seed: u64 = std::env::var("SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let o = run_options(Knobs::default(), seed);
    let n: u64 = std::env::var("N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    for i in 0..n {
        let c = generate(Workload::Hermes, seed, i, None);
        let t = std::time::Instant::now();
        let r = run_schedule(&store, &c, &o, i).await;
        let out = outcome(&r);
        if i < 2 {
            println!(
                "{}\n{:#?}\n{:#?}",
                aocheck::explore::yaml::case(&c),
                r.steps,
                r.faults
            );
        }
        if !matches!(out, Outcome::Clean) {
            println!("{i}: {} steps {:?} {:?}", c.steps.len(), t.elapsed(), out);
            println!("{}", aocheck::explore::yaml::case(&c));
            println!("{:#?}", r.steps);
        }
    }
}
