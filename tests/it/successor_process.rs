//! A successor in a new process (a fresh `ReferenceSut` and `Domain` on the same store, nothing
//! shared in memory) can act on an occurrence its dead predecessor created and reserved: the
//! request intent is durable. This is what running each executor generation as its own process
//! (issue 7) needs from the reference.

use aocheck::aoc::Domain;
use aocheck::aoc::domain::DomainConfig;
use aocheck::reference::ReferenceSut;
use aocheck::reference::payments::PaymentsClient;
use aocheck::store::AnyStore;
use aocheck::{ManualClock, SystemClock};
use std::sync::Arc;

async fn process(store: &Arc<AnyStore>, base: &str, clock: &ManualClock) -> ReferenceSut {
    let client = PaymentsClient::connect(base, "acct_a", "sk_test_a")
        .await
        .expect("client");
    let config = DomainConfig::new("successor-test", client.profile().clone());
    let domain = Domain::new(store.clone(), config, Arc::new(clock.clone())).expect("domain");
    ReferenceSut::new(domain, client, aocheck::reference::Knobs::default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_process_on_the_same_store_finishes_what_its_predecessor_reserved() {
    let (app, provider) = fake_payments::router(fake_payments::Config::example()).expect("fake");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let server = tokio::spawn(async move {
        let _ = fake_payments::serve(listener, app).await;
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("store.db");
    let clock = ManualClock::at(aocheck::clock::Clock::now(&SystemClock).0);

    let first = Arc::new(AnyStore::Sqlite(
        aocheck::store::sqlite::SqliteStore::open(&path).expect("sqlite"),
    ));
    let mut a = process(&first, &base, &clock).await;
    a.join("e1").await.expect("join");
    let occ = a
        .create("e1", "op-1", 1200, None, &Default::default())
        .await
        .expect("create");
    a.reserve("e1", &occ, 1200).await.expect("reserve");
    drop(a); // the process dies: nothing in memory survives
    drop(first);

    let second = Arc::new(AnyStore::Sqlite(
        aocheck::store::sqlite::SqliteStore::open(&path).expect("sqlite"),
    ));
    let mut b = process(&second, &base, &clock).await;
    b.replace("e2").await.expect("replace");
    b.adopt("e2", &occ).await.expect("adopt");
    b.enter("e2", &occ).await.expect("enter");
    assert!(b.has_permit("e2", &occ));
    b.send("e2", &occ, false).await.expect("send");
    let st = b.state(&occ).await.expect("state");
    assert!(st.outcome.is_some(), "{st:?}");
    let ledger = provider.ledger();
    let rule = aocheck::check::accounting::KeyRule::parse("{occurrence}").expect("rule");
    let acct = aocheck::check::accounting::Accounting::of(&ledger, Some(&rule), &[occ.as_str()]);
    let effects = acct.effects_of(occ.as_str());
    assert!(acct.unattributed_effects.is_empty(), "{ledger:?}");
    assert_eq!(effects.len(), 1, "exactly one payment for the occurrence");
    server.abort();
}
