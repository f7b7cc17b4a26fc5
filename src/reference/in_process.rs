//! The reference implementation in process, behind the same boundary as any process: each
//! executor generation is a [`Dispatch`] over the case's store answering the same typed requests
//! a `aocheck sut reference` process answers, an observer dispatch answers the reads, and each
//! connector instance is a dispatch's operator side. A crash drops the executor's dispatch: its
//! memory is gone and its background sends are aborted (the provider sees the connection go).

use super::Knobs;
use super::dispatch::{self, Dispatch, OperatorSide};
use super::payments::PaymentsClient;
use crate::clock::{Clock, ManualClock};
use crate::store::AnyStore;
use crate::sut::failure_error;
use crate::sut::message::{ExecutorInit, Failure, Hello, HermesInit, Init, OperatorInit, Request};
use crate::sut::operator::{Conn, Connection};
use crate::sut::processes::OBSERVER;
use crate::sut::{BoxFuture, Connect, Sut, SutError, To};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

/// The reference, in process.
#[derive(Debug)]
pub struct InProcess {
    /// The case's `init`; each executor gets its own `executor` and `now`.
    init: Init,
    store: Arc<AnyStore>,
    /// One connected client for every executor, as one deployment's executors would share
    /// their provider configuration (connecting fetches the provider's key and profile).
    client: PaymentsClient,
    knobs: Knobs,
    clock: ManualClock,
    observer: Dispatch,
    executors: BTreeMap<String, Dispatch>,
    /// Executors crashed by the harness, so a later call says so.
    killed: BTreeSet<String>,
    retired: u64,
    hello: Hello,
    connect: Arc<LocalConnect>,
}

/// An error the dispatch answered, as the boundary's error (the same reading as for a process).
fn answer(op: &str, r: Result<Value, Failure>) -> Result<Value, SutError> {
    r.map_err(|f| failure_error(op, f))
}

impl InProcess {
    /// The observer starts at once; executors start with `join` or `takeover`. `init.store` and
    /// `init.providers.payments` are not consulted: every executor and instance works on `store`
    /// with a clone of `client`.
    pub fn start(
        store: Arc<AnyStore>,
        client: PaymentsClient,
        init: Init,
        knobs: Knobs,
        clock: ManualClock,
    ) -> Result<Self, SutError> {
        let connect = Arc::new(LocalConnect {
            store: Mutex::new(store.clone()),
            client: client.clone(),
            init: init.clone(),
            knobs,
        });
        Ok(InProcess {
            observer: Dispatch::over(
                store.clone(),
                client.clone(),
                for_executor(&init, OBSERVER, clock.now().0),
                knobs,
            )
            .map_err(SutError::Harness)?,
            init,
            store,
            client,
            knobs,
            clock,
            executors: BTreeMap::new(),
            killed: BTreeSet::new(),
            retired: 0,
            hello: dispatch::hello(knobs),
            connect,
        })
    }

    async fn start_executor(&mut self, name: &str, req: Request) -> Result<Value, SutError> {
        let init = for_executor(&self.init, name, self.clock.now().0);
        let d = Dispatch::over(self.store.clone(), self.client.clone(), init, self.knobs)
            .map_err(SutError::Harness)?;
        if let Some(old) = self.executors.insert(name.into(), d) {
            // The same name again: the earlier executor is retired, not dead.
            self.retired += 1;
            self.executors
                .insert(format!("{name}#{}", self.retired), old);
        }
        self.killed.remove(name);
        self.call_exec(name, req).await
    }

    async fn call_exec(&mut self, who: &str, req: Request) -> Result<Value, SutError> {
        let now = self.clock.now().0;
        let Some(d) = self.executors.get_mut(who) else {
            return Err(SutError::Harness(if self.killed.contains(who) {
                format!("executor {who:?} crashed; it cannot act")
            } else {
                format!("no executor {who:?}")
            }));
        };
        let op = req.op();
        answer(op.name(), d.handle(Some(now), req).await)
    }

    /// Executors race each other; one executor, like its `serve` loop, answers its own
    /// requests one at a time (its choice: AOC-REQ-001 asks that admissions be serialised).
    async fn race_executors(
        &mut self,
        calls: Vec<(String, Request)>,
    ) -> Vec<Result<Value, SutError>> {
        let now = self.clock.now().0;
        let mut out: Vec<Option<Result<Value, SutError>>> = calls.iter().map(|_| None).collect();
        let mut lanes: BTreeMap<String, (Dispatch, Vec<(usize, Request)>)> = BTreeMap::new();
        for (i, (who, req)) in calls.into_iter().enumerate() {
            if let Some((_, queue)) = lanes.get_mut(&who) {
                queue.push((i, req));
            } else if let Some(d) = self.executors.remove(&who) {
                lanes.insert(who, (d, vec![(i, req)]));
            } else {
                out[i] = Some(self.call_exec(&who, req).await);
            }
        }
        let finished = futures_util::future::join_all(lanes.into_iter().map(
            |(who, (mut d, queue))| async move {
                let mut answers = Vec::new();
                for (i, req) in queue {
                    let op = req.op();
                    answers.push((i, answer(op.name(), d.handle(Some(now), req).await)));
                }
                (who, d, answers)
            },
        ))
        .await;
        for (who, d, answers) in finished {
            self.executors.insert(who, d);
            for (i, a) in answers {
                out[i] = Some(a);
            }
        }
        out.into_iter()
            .map(|a| {
                a.unwrap_or_else(|| Err(SutError::Harness("a racing request was lost".into())))
            })
            .collect()
    }

    async fn observe(&mut self, req: Request) -> Result<Value, SutError> {
        let now = self.clock.now().0;
        let op = req.op();
        answer(op.name(), self.observer.handle(Some(now), req).await)
    }
}

/// The case's `init` for one executor or instance.
fn for_executor(base: &Init, name: &str, now: u64) -> Init {
    let mut init = base.clone();
    init.executor = ExecutorInit {
        name: name.into(),
        generation: None,
        credential: None,
    };
    init.now = Some(now);
    init
}

impl Sut for InProcess {
    fn hello(&self) -> &Hello {
        &self.hello
    }
    fn start<'a>(
        &'a mut self,
        name: &'a str,
        req: Request,
    ) -> BoxFuture<'a, Result<Value, SutError>> {
        Box::pin(self.start_executor(name, req))
    }
    fn call<'a>(&'a mut self, to: To<'a>, req: Request) -> BoxFuture<'a, Result<Value, SutError>> {
        Box::pin(async move {
            if req.op().is_operator() {
                return Err(SutError::Harness(format!(
                    "`{}` goes to a connector instance, not an executor",
                    req.op()
                )));
            }
            match to {
                To::Executor(who) => self.call_exec(who, req).await,
                To::Observer => self.observe(req).await,
            }
        })
    }
    fn crash<'a>(&'a mut self, name: &'a str) -> BoxFuture<'a, Result<(), SutError>> {
        Box::pin(async move {
            let mut d = self
                .executors
                .remove(name)
                .ok_or_else(|| SutError::Harness(format!("no executor {name:?} to kill")))?;
            d.crash();
            self.killed.insert(name.into());
            Ok(())
        })
    }
    fn race<'a>(
        &'a mut self,
        calls: Vec<(String, Request)>,
    ) -> BoxFuture<'a, Vec<Result<Value, SutError>>> {
        Box::pin(self.race_executors(calls))
    }
    fn executors(&self) -> Vec<String> {
        self.executors.keys().cloned().collect()
    }
    fn connectors(&self) -> Arc<dyn Connect> {
        self.connect.clone()
    }
    fn implementation(&self) -> Option<Value> {
        None
    }
    fn processes(&self) -> Vec<String> {
        Vec::new()
    }
    fn shutdown(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            for (_, mut d) in std::mem::take(&mut self.executors) {
                d.crash();
            }
        })
    }
}

/// Connector instances in process: each is a dispatch's operator side over the case's store.
#[derive(Debug)]
struct LocalConnect {
    store: Mutex<Arc<AnyStore>>,
    client: PaymentsClient,
    init: Init,
    knobs: Knobs,
}

impl Connect for LocalConnect {
    fn connect<'a>(
        &'a self,
        instance: &'a str,
        hermes: HermesInit,
        operator: OperatorInit,
    ) -> BoxFuture<'a, Result<Conn, SutError>> {
        Box::pin(async move {
            let store = self
                .store
                .lock()
                .map(|s| s.clone())
                .map_err(|_| SutError::Harness("the store handle is poisoned".into()))?;
            let mut init = for_executor(&self.init, instance, 0);
            init.now = None;
            init.providers.hermes = Some(hermes);
            init.operator = Some(operator);
            let d = Dispatch::over(store, self.client.clone(), init, self.knobs)
                .map_err(SutError::Harness)?;
            Ok(Conn::new(Arc::new(LocalConn {
                side: d.operator_side(),
            }))
            .with_driven(true))
        })
    }
    fn reopen(&self) -> BoxFuture<'_, Result<bool, SutError>> {
        Box::pin(async move {
            let current = self
                .store
                .lock()
                .map(|s| s.clone())
                .map_err(|_| SutError::Harness("the store handle is poisoned".into()))?;
            let Some(reopened) = current.reopen().await else {
                return Ok(false);
            };
            let reopened =
                reopened.map_err(|e| SutError::Harness(format!("reopen the store: {e}")))?;
            if let Ok(mut s) = self.store.lock() {
                *s = Arc::new(reopened);
            }
            Ok(true)
        })
    }
}

/// One connector instance in process. Stopping it is dropping it: the runner aborts the tasks
/// that were waiting on it, and their requests die with them.
#[derive(Debug)]
struct LocalConn {
    side: OperatorSide,
}

impl Connection for LocalConn {
    fn call(&self, req: Request) -> BoxFuture<'_, Result<Result<Value, Failure>, SutError>> {
        Box::pin(async move { Ok(self.side.operator(req).await) })
    }
    fn stop<'a>(&'a self, _why: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }
}
