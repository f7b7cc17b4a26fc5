//! The run engine: a run's script executed step by step (model turns, tools, approvals), its
//! events emitted to the SSE queues and the ledger.

use super::*;

// ---------- the engine ----------

pub(super) struct Emitter<'a> {
    pub(super) s: &'a Shared,
    pub(super) cell: &'a RunCell,
}

impl Emitter<'_> {
    /// Emits one event: `{"event", "run_id", "timestamp", …fields}`.
    pub(super) async fn emit(&self, name: &str, fields: Vec<(&str, Py)>) {
        let run_id = lock(&self.cell.info).run_id.clone();
        let mut pairs: Vec<(String, Py)> = vec![
            ("event".into(), Py::str(name)),
            ("run_id".into(), Py::str(&run_id)),
            ("timestamp".into(), Py::Float(self.s.clock.now_secs())),
        ];
        pairs.extend(fields.into_iter().map(|(k, v)| (k.to_string(), v)));
        self.send(name, Py::Obj(pairs)).await;
    }

    async fn send(&self, name: &str, event: Py) {
        if self.s.config.event_gap_ms > 0 {
            self.cell.sleep(self.s.config.event_gap_ms).await;
        }
        let text = event.dumps();
        {
            let mut i = lock(&self.cell.info);
            if i.events >= self.s.config.max_events_per_run
                || text.len() > self.s.config.max_frame_bytes
            {
                return;
            }
            i.events += 1;
            if name != "message.delta" {
                i.last_event = Some(name.to_string());
            }
            i.updated_at = self.s.clock.now_secs();
        }
        if let Some(tx) = lock(&self.cell.tx).as_ref() {
            let _ = tx.send(Frame::Data(format!("data: {text}\n\n")));
        }
    }
}

pub(super) enum Wake {
    Done,
    Stopped,
}

pub(super) async fn sleep_or_stop(cell: &RunCell, ms: u64) -> Wake {
    // Registered before the intent is read, so that a stop between the two is not missed (a
    // missed stop would sleep out its wait, and on a driven clock the unit it handed would
    // hold that wait for ever).
    let stop = cell.stop.notified();
    tokio::pin!(stop);
    stop.as_mut().enable();
    if lock(&cell.info).stop_requested {
        return Wake::Stopped;
    }
    tokio::select! {
        _ = cell.sleep_until_stopped(ms) => {
            if lock(&cell.info).stop_requested { Wake::Stopped } else { Wake::Done }
        }
        _ = stop => Wake::Stopped,
    }
}

/// Marks the engine ended however it ends (returned or aborted), and gives back a unit a stop
/// handed it.
struct EngineLife<'a>(&'a RunCell);

impl Drop for EngineLife<'_> {
    fn drop(&mut self) {
        self.0.engine_ended.store(true, Ordering::SeqCst);
        self.0.awake();
    }
}

/// `_busy` is the engine's unit on the clock, held for the run's life (taken by the start
/// handler before the run is announced).
pub(super) async fn run_engine(
    s: Arc<Shared>,
    cell: Arc<RunCell>,
    plan: Arc<Vec<Step>>,
    prompt: String,
    _busy: Option<Busy>,
) {
    let _life = EngineLife(&cell);
    let (run_id, session_id) = {
        let i = lock(&cell.info);
        (i.run_id.clone(), i.session_id.clone())
    };
    // Admission: wait for the session's turn lease (FIFO, one at a time).
    let holder = loop {
        let notified = s.turns.notified();
        // Registered before the intent is read (see `sleep_or_stop`).
        let stop = cell.stop.notified();
        tokio::pin!(stop);
        stop.as_mut().enable();
        let got = lock(&s.data)
            .sessions
            .get_mut(&session_id)
            .map(|sess| sess.acquire(&run_id));
        match got {
            Some(Ok(h)) => break h,
            Some(Err(_)) => {
                // Waiting for another run, not for time.
                if !lock(&cell.info).stop_requested {
                    cell.idle_while(async {
                        tokio::select! {
                            _ = notified => {}
                            _ = stop => {}
                        }
                    })
                    .await;
                }
                if lock(&cell.info).stop_requested {
                    // Stopped while queued: it never executed; it leaves the queue.
                    if let Some(sess) = lock(&s.data).sessions.get_mut(&session_id) {
                        sess.forget(&run_id);
                    }
                    finish_cancelled(&s, &cell, &Emitter { s: &s, cell: &cell }).await;
                    s.turns.notify_waiters();
                    return;
                }
            }
            None => return, // forgotten
        }
    };
    cell.set_status("running", None);
    let em = Emitter { s: &s, cell: &cell };
    let mut st = RunState {
        run_id: run_id.clone(),
        session_id: session_id.clone(),
        status: "running".into(),
        ..RunState::default()
    };
    // The execution state is in memory only: what survives a restart is the durable record
    // (newer mode, `durable`), written at the start and the end.
    let mut stopped = matches!(
        sleep_or_stop(&cell, s.config.first_event_delay_ms).await,
        Wake::Stopped
    );
    let mut after_tool = false;
    // What the model calls reported, summed (one entry per message step).
    let mut usage: Option<(i64, i64)> = None;
    let mut failed: Option<String> = None;
    let mut explicit_output: Option<String> = None;
    while !stopped && failed.is_none() && st.cursor < plan.len() {
        let step = &plan[st.cursor];
        st.cursor += 1;
        if st.parent_skipped(step) {
            st.skipped.push(step.id.clone());
            continue;
        }
        match &step.kind {
            StepKind::Message {
                text,
                chunks,
                usage: reported,
            } => {
                let (i, o) = reported
                    .unwrap_or(((prompt.len() / 4 + 1) as i64, (text.len() / 4 + 1) as i64));
                let sum = usage.unwrap_or((0, 0));
                usage = Some((sum.0 + i, sum.1 + o));
                // A model turn takes a pending steer in.
                lock(&cell.info).pending_steer.take();
                // `{run_id}` in a script's text stands for the run's own id: each run's output
                // is then its own, and nobody can record it without having read it.
                let text = &text.replace("{run_id}", &run_id);
                let n = (*chunks as usize).max(1);
                let chars: Vec<char> = text.chars().collect();
                let size = chars.len().div_ceil(n).max(1);
                for (i, piece) in chars.chunks(size).enumerate() {
                    let mut delta: String = piece.iter().collect();
                    if i == 0 && after_tool {
                        delta = format!("\n\n{delta}");
                    }
                    st.text.push_str(&delta);
                    em.emit("message.delta", vec![("delta", Py::Str(delta))])
                        .await;
                }
                after_tool = false;
            }
            StepKind::Reasoning { text } => {
                em.emit("reasoning.available", vec![("text", Py::str(text))])
                    .await
            }
            StepKind::Tool {
                tool,
                preview,
                duration_ms,
                error,
                ..
            } => {
                em.emit(
                    "tool.started",
                    vec![("tool", Py::str(tool)), ("preview", Py::str(preview))],
                )
                .await;
                if let Wake::Stopped = sleep_or_stop(&cell, *duration_ms).await {
                    stopped = true;
                }
                em.emit(
                    "tool.completed",
                    vec![
                        ("tool", Py::str(tool)),
                        ("duration", Py::Float(*duration_ms as f64 / 1000.0)),
                        ("error", Py::Bool(*error || stopped)),
                    ],
                )
                .await;
                st.outputs
                    .insert(step.id.clone(), json!({"error": *error || stopped}));
                after_tool = true;
            }
            StepKind::Approval {
                tool,
                command,
                description,
                pattern_key,
                allow_permanent,
                timeout_ms,
                error: tool_failed,
            } => {
                let started = s.clock.now_ms();
                em.emit(
                    "tool.started",
                    vec![("tool", Py::str(tool)), ("preview", Py::str(command))],
                )
                .await;
                let request_id = uuid::Uuid::new_v4().simple().to_string();
                let mut choices = vec![Py::str("once"), Py::str("session")];
                if *allow_permanent {
                    choices.push(Py::str("always"));
                }
                choices.push(Py::str("deny"));
                // Observed key order: the approval's own fields, then event, run_id, timestamp, choices.
                let mut pairs: Vec<(String, Py)> = vec![
                    ("command".into(), Py::str(command)),
                    ("pattern_key".into(), Py::str(pattern_key)),
                    ("pattern_keys".into(), Py::List(vec![Py::str(pattern_key)])),
                    ("description".into(), Py::str(description)),
                    ("allow_permanent".into(), Py::Bool(*allow_permanent)),
                ];
                if s.config.mode == Mode::Newer {
                    pairs.push(("allow_session".into(), Py::Bool(true)));
                    pairs.push(("request_id".into(), Py::str(&request_id)));
                }
                pairs.push(("event".into(), Py::str("approval.request")));
                pairs.push(("run_id".into(), Py::str(&run_id)));
                pairs.push(("timestamp".into(), Py::Float(s.clock.now_secs())));
                pairs.push(("choices".into(), Py::List(choices)));
                let (tx, rx) = oneshot::channel();
                *lock(&cell.approval) = Some(PendingApproval {
                    request_id: request_id.clone(),
                    tx,
                });
                em.send("approval.request", Py::Obj(pairs.clone())).await;
                {
                    let mut i = lock(&cell.info);
                    if !i.stop_requested {
                        i.status = "waiting_for_approval".into();
                    }
                    i.approval_doc = Some(Py::Obj(pairs));
                }
                st.pending =
                    Some(json!({"step": step.id, "kind": "approval", "request_id": request_id}));
                let timeout = timeout_ms.unwrap_or(s.config.approval_timeout_ms);
                // Registered before the intent is read (see `sleep_or_stop`): a stop between the
                // two would otherwise wait out the approval timeout holding the unit it handed.
                let stop = cell.stop.notified();
                tokio::pin!(stop);
                stop.as_mut().enable();
                let outcome = if lock(&cell.info).stop_requested {
                    None
                } else {
                    tokio::select! {
                        // The decision's unit is given back here: the engine is awake.
                        d = rx => d.ok().map(|d| Ok((d.choice, d.resolved))),
                        _ = cell.sleep_until_stopped(timeout) => Some(Err("timeout")),
                        _ = stop => None,
                    }
                };
                lock(&cell.approval).take();
                {
                    // After a timeout the status stays `waiting_for_approval` (with nothing
                    // pending) until the run ends, as observed; a decision set `running` in the
                    // approval handler already.
                    let mut i = lock(&cell.info);
                    i.approval_doc = None;
                }
                st.pending = None;
                let secs = s.clock.now_ms().saturating_sub(started) as f64 / 1000.0;
                // Every ending emits one tool.completed and records the choice (the handler
                // emitted `approval.responded` before it answered); only a stop ends the run.
                let (choice, error) = match outcome {
                    Some(Ok((choice, _resolved))) => {
                        let denied = choice == "deny";
                        (choice, denied || *tool_failed)
                    }
                    Some(Err(_)) => ("timeout".to_string(), true),
                    None => {
                        stopped = true;
                        ("cancelled".to_string(), true)
                    }
                };
                em.emit(
                    "tool.completed",
                    vec![
                        ("tool", Py::str(tool)),
                        ("duration", Py::Float(secs)),
                        ("error", Py::Bool(error)),
                    ],
                )
                .await;
                st.outputs
                    .insert(step.id.clone(), json!({"choice": choice, "error": error}));
                after_tool = true;
            }
            StepKind::Condition(c) => {
                if !st.eval(c) {
                    st.skipped.push(step.id.clone());
                }
            }
            StepKind::Sleep { ms } => {
                if let Wake::Stopped = sleep_or_stop(&cell, *ms).await {
                    stopped = true;
                }
            }
            StepKind::Fail { error } => failed = Some(error.clone()),
            StepKind::Complete { output } => {
                explicit_output = output.clone();
                st.cursor = plan.len();
            }
        }
        if lock(&cell.info).stop_requested {
            stopped = true;
        }
    }
    if stopped {
        let fault = lock(&cell.info).stop_fault.clone();
        match fault {
            Some(Fault::StopStuck) => {
                // The executor never exits: no event, the status stays `stopping`, the lease is
                // held until the process is wiped (waiting for nothing, so time moves on).
                st.status = "stopping".into();
                cell.idle_while(std::future::pending::<()>()).await;
            }
            Some(Fault::CompleteRacesStop) => {
                complete(&s, &cell, &em, &mut st, explicit_output, &prompt, usage).await;
            }
            _ => {
                cell.sleep(s.config.stop_grace_ms).await;
                st.status = "cancelled".into();
                finish_cancelled(&s, &cell, &em).await;
            }
        }
    } else if let Some(err) = failed {
        em.emit("run.failed", vec![("error", Py::str(&err))]).await;
        {
            let mut i = lock(&cell.info);
            i.error = Some(err);
            i.status = "failed".into();
        }
        st.status = "failed".into();
        ended(&s, &cell, "failed");
    } else {
        complete(&s, &cell, &em, &mut st, explicit_output, &prompt, usage).await;
    }
    {
        let mut d = lock(&s.data);
        if let Some(sess) = d.sessions.get_mut(&session_id) {
            let _ = sess.release(&holder);
        }
    }
    s.turns.notify_waiters();
}

pub(super) async fn complete(
    s: &Shared,
    cell: &RunCell,
    em: &Emitter<'_>,
    st: &mut RunState,
    explicit: Option<String>,
    prompt: &str,
    usage: Option<(i64, i64)>,
) {
    // Both texts are stripped at both ends, as observed.
    if !st.text.trim().is_empty() {
        let text: String = st.text.trim().chars().take(500).collect::<String>();
        em.emit(
            "reasoning.available",
            vec![("text", Py::Str(text.trim().to_string()))],
        )
        .await;
    }
    let output = explicit.unwrap_or_else(|| st.text.trim().to_string());
    // The usage the model calls reported, summed; a run without a model step reports one call.
    let (input_tokens, output_tokens) =
        usage.unwrap_or(((prompt.len() / 4 + 1) as i64, (output.len() / 4 + 1) as i64));
    let usage = Py::obj(vec![
        ("input_tokens", Py::Int(input_tokens)),
        ("output_tokens", Py::Int(output_tokens)),
        ("total_tokens", Py::Int(input_tokens + output_tokens)),
    ]);
    let mut fields = vec![("output", Py::str(&output)), ("usage", usage)];
    // Newer builds: a steer no model turn took is reported with the completion, then leaves
    // the status document.
    let steer = lock(&cell.info).pending_steer.take();
    if let Some(p) = &steer {
        fields.push(("pending_steer", Py::str(p)));
    }
    em.emit("run.completed", fields).await;
    {
        let mut i = lock(&cell.info);
        i.output = Some(output);
        i.usage = Some((input_tokens, output_tokens, input_tokens + output_tokens));
        i.status = "completed".into();
        i.updated_at = s.clock.now_secs();
    }
    st.status = "completed".into();
    ended(s, cell, "completed");
}

pub(super) async fn finish_cancelled(s: &Shared, cell: &RunCell, em: &Emitter<'_>) {
    em.emit("run.cancelled", vec![]).await;
    cell.set_status("cancelled", Some("run.cancelled"));
    ended(s, cell, "cancelled");
}

pub(super) fn ended(s: &Shared, cell: &RunCell, status: &str) {
    durable::write_end(s, cell);
    let (run_id, result) = {
        let i = lock(&cell.info);
        (
            i.run_id.clone(),
            super::RunResult {
                output: i.output.clone(),
                error: i.error.clone(),
            },
        )
    };
    let mut d = lock(&s.data);
    d.ledger.terminal.insert(run_id.clone(), status.to_string());
    d.ledger.results.insert(run_id, result);
    drop(d);
    cell.close_stream();
}
