#!/usr/bin/env python3
"""connector-keyed: a Hermes operator connector that starts each action's run at most once.

An action (``action_id``, ``objective``) is taken over HTTP and bound durably in SQLite, keyed by
the action id. A worker thread starts one Hermes run for it (``POST /v1/runs`` with session id
``aip-operator-<action_id>``) and polls that run (``GET /v1/runs/{run_id}``) until Hermes says it
ended, copying Hermes's ``output`` / ``error`` into the binding.

``POST /v1/runs`` is not idempotent at the provider, so the start is fenced:

* Before the request leaves, one committed transaction (``BEGIN IMMEDIATE``) writes a start claim
  (claim id, instance, claimed_at, expires_at) on a binding that is ``starting``, has no
  ``run_id`` and has no claim. Only the instance that wins that transaction sends the start.
* A 2xx with a ``run_id`` binds the run (``running``) and clears the claim. A 4xx is a definitive
  refusal (``failed``). Anything else (a 5xx, a dropped connection, a timeout, a 2xx without
  ``run_id``, a 409) may have started a run: the binding becomes ``outcome_unknown`` and is never
  started again.
* A claim whose owner is gone (its process was replaced, its heartbeat stopped) or has expired,
  and that bound no run, becomes ``outcome_unknown``. No instance ever steals a claim and sends a
  second start.
* A terminal status is written only from what Hermes said about the bound run. A 404 while
  polling (Hermes restarted and forgot its in-memory runs) proves nothing: the action stays
  ``running`` and, after ``NOT_FOUND_LIMIT`` consecutive 404s, becomes ``outcome_unknown``.

Configuration (environment): PORT, HERMES_URL, HERMES_API_KEY, CONNECTOR_DB, INSTANCE.
Python 3.9+, standard library only.
"""

import contextlib
import hashlib
import json
import os
import re
import signal
import sqlite3
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

NAME = "connector-keyed"
POLL_SECONDS = 0.25           # Hermes status polling while a run is live
SCAN_SECONDS = 0.2            # how often the worker looks for actions to start or observe
WAIT_SECONDS = 0.1            # a waiter's pause while another live instance holds the claim
HEARTBEAT_SECONDS = 0.5       # each instance's liveness write
OWNER_STALE_SECONDS = 5.0     # a claim owner silent this long is gone
CLAIM_TTL_SECONDS = 60.0      # the start claim's expiry (the contract's default window)
START_TIMEOUT_SECONDS = 55.0  # below the claim window: a live owner always decides first
READ_TIMEOUT_SECONDS = 10.0
NOT_FOUND_LIMIT = 40          # consecutive 404s (10 s at 250 ms) before outcome_unknown
MAX_BODY = 1 << 20
ACTION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,199}")

TERMINAL = ("completed", "failed", "cancelled", "outcome_unknown")
LIVE_PROVIDER = ("queued", "running", "waiting_for_approval", "stopping")
FINAL_PROVIDER = ("completed", "failed", "cancelled")

SCHEMA = """
CREATE TABLE IF NOT EXISTS bindings (
    action_id           TEXT PRIMARY KEY,
    request_fingerprint TEXT NOT NULL,   -- sha256 of the objective
    objective           TEXT NOT NULL,
    session_id          TEXT NOT NULL,   -- aip-operator-<action_id>
    status              TEXT NOT NULL,   -- starting | running | completed | failed | cancelled | outcome_unknown
    run_id              TEXT,
    received_by         TEXT NOT NULL,   -- boot id of the instance that took the submission
    claim_id            TEXT,            -- the start claim (kept on outcome_unknown: the attempt that may have entered)
    claim_instance      TEXT,
    claim_boot          TEXT,
    claimed_at          REAL,
    claim_expires_at    REAL,
    provider_status     TEXT,            -- the last status Hermes reported for run_id
    not_found           INTEGER NOT NULL DEFAULT 0,
    output              TEXT,            -- JSON of Hermes's `output`
    error               TEXT,            -- JSON of Hermes's `error`, or the connector's own reason
    created_at          REAL NOT NULL,
    updated_at          REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS history (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    action_id TEXT NOT NULL,
    at        REAL NOT NULL,
    instance  TEXT NOT NULL,
    event     TEXT NOT NULL,
    detail    TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS history_action ON history (action_id, id);
CREATE TABLE IF NOT EXISTS instances (
    boot_id      TEXT PRIMARY KEY,
    instance     TEXT NOT NULL,
    pid          INTEGER NOT NULL,
    started_at   REAL NOT NULL,
    heartbeat_at REAL NOT NULL,
    retired_at   REAL
);
"""

INSTANCE = os.environ.get("INSTANCE", "-")
BOOT = uuid.uuid4().hex
OWNER = f"{INSTANCE}:{os.getpid()}:{BOOT[:8]}"


def log(msg):
    print(f"{NAME}[{OWNER}] {msg}", flush=True)


def now():
    return time.time()


def fingerprint(objective):
    return hashlib.sha256(objective.encode("utf-8")).hexdigest()


# ---------- the store ----------


class Store:
    """The durable bindings, their history and the instances' heartbeats, in one SQLite file
    shared by every instance (WAL, one connection per operation, writes under BEGIN IMMEDIATE)."""

    def __init__(self, path):
        self.path = path
        d = os.path.dirname(os.path.abspath(path))
        os.makedirs(d, exist_ok=True)
        with self.conn() as c:
            c.execute("PRAGMA journal_mode=WAL")
            c.executescript(SCHEMA)

    @contextlib.contextmanager
    def conn(self):
        c = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
        c.row_factory = sqlite3.Row
        try:
            c.execute("PRAGMA busy_timeout=30000")
            c.execute("PRAGMA synchronous=FULL")
            yield c
        finally:
            c.close()

    @staticmethod
    @contextlib.contextmanager
    def tx(c):
        c.execute("BEGIN IMMEDIATE")
        try:
            yield c
        except BaseException:
            c.execute("ROLLBACK")
            raise
        else:
            c.execute("COMMIT")

    @staticmethod
    def note(c, action_id, event, **detail):
        c.execute(
            "INSERT INTO history (action_id, at, instance, event, detail) VALUES (?, ?, ?, ?, ?)",
            (action_id, now(), OWNER, event, json.dumps(detail, sort_keys=True)),
        )

    # -- instances --

    def register(self):
        t = now()
        with self.conn() as c, self.tx(c):
            # A new process under this instance's name replaces the one before it: that one's
            # claims have lost their owner.
            c.execute(
                "UPDATE instances SET retired_at = ? WHERE instance = ? AND retired_at IS NULL",
                (t, INSTANCE),
            )
            c.execute(
                "INSERT INTO instances (boot_id, instance, pid, started_at, heartbeat_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (BOOT, INSTANCE, os.getpid(), t, t),
            )

    def heartbeat(self):
        with self.conn() as c, self.tx(c):
            c.execute("UPDATE instances SET heartbeat_at = ? WHERE boot_id = ?", (now(), BOOT))

    def alive(self, boot_id):
        """Whether the process with this boot id is still running (as far as the store can tell)."""
        if boot_id == BOOT:
            return True
        with self.conn() as c:
            r = c.execute(
                "SELECT heartbeat_at, retired_at FROM instances WHERE boot_id = ?", (boot_id,)
            ).fetchone()
        return r is not None and r["retired_at"] is None and now() - r["heartbeat_at"] < OWNER_STALE_SECONDS

    # -- bindings --

    def get(self, action_id):
        with self.conn() as c:
            return c.execute("SELECT * FROM bindings WHERE action_id = ?", (action_id,)).fetchone()

    def history(self, action_id):
        with self.conn() as c:
            rows = c.execute(
                "SELECT at, instance, event, detail FROM history WHERE action_id = ? ORDER BY id",
                (action_id,),
            ).fetchall()
        return [
            {"at": r["at"], "instance": r["instance"], "event": r["event"], "detail": json.loads(r["detail"])}
            for r in rows
        ]

    def submit(self, action_id, objective):
        """Creates the binding, or finds it. Returns (created, row) or raises Collision."""
        fp = fingerprint(objective)
        t = now()
        with self.conn() as c, self.tx(c):
            r = c.execute("SELECT * FROM bindings WHERE action_id = ?", (action_id,)).fetchone()
            if r is not None:
                if r["request_fingerprint"] != fp:
                    raise Collision(r)
                return False, r
            c.execute(
                "INSERT INTO bindings (action_id, request_fingerprint, objective, session_id, status,"
                " received_by, created_at, updated_at) VALUES (?, ?, ?, ?, 'starting', ?, ?, ?)",
                (action_id, fp, objective, f"aip-operator-{action_id}", BOOT, t, t),
            )
            self.note(c, action_id, "bound", request_fingerprint=fp)
            r = c.execute("SELECT * FROM bindings WHERE action_id = ?", (action_id,)).fetchone()
            return True, r

    def open_actions(self):
        with self.conn() as c:
            return [
                r["action_id"]
                for r in c.execute(
                    "SELECT action_id FROM bindings WHERE status IN ('starting', 'running') ORDER BY created_at"
                )
            ]

    def claim(self, action_id):
        """The compare-and-set start claim: returns the claim id if this instance won it."""
        claim_id = uuid.uuid4().hex
        t = now()
        with self.conn() as c, self.tx(c):
            n = c.execute(
                "UPDATE bindings SET claim_id = ?, claim_instance = ?, claim_boot = ?, claimed_at = ?,"
                " claim_expires_at = ?, updated_at = ?"
                " WHERE action_id = ? AND status = 'starting' AND run_id IS NULL AND claim_id IS NULL",
                (claim_id, OWNER, BOOT, t, t + CLAIM_TTL_SECONDS, t, action_id),
            ).rowcount
            if n != 1:
                return None
            self.note(c, action_id, "start_claimed", claim_id=claim_id, expires_at=t + CLAIM_TTL_SECONDS)
        return claim_id

    def bind(self, action_id, claim_id, run_id, answer):
        """Binds the run the claim's start created. Also accepted on an `outcome_unknown` binding
        whose recorded claim is this one: the reply answers exactly that attempt (a late,
        authenticated response is evidence; it starts nothing)."""
        with self.conn() as c, self.tx(c):
            n = c.execute(
                "UPDATE bindings SET run_id = ?, status = 'running', error = NULL, claim_id = NULL,"
                " claim_instance = NULL, claim_boot = NULL, claimed_at = NULL, claim_expires_at = NULL,"
                " updated_at = ?"
                " WHERE action_id = ? AND claim_id = ? AND run_id IS NULL"
                " AND status IN ('starting', 'outcome_unknown')",
                (run_id, now(), action_id, claim_id),
            ).rowcount
            self.note(c, action_id, "run_bound" if n == 1 else "bind_refused", claim_id=claim_id, run_id=run_id, answer=answer)
        return n == 1

    def settle_start(self, action_id, claim_id, status, error, answer):
        """The claim's start ended without a run to bind: `failed` (a definitive 4xx) or
        `outcome_unknown`. The claim stays recorded."""
        with self.conn() as c, self.tx(c):
            n = c.execute(
                "UPDATE bindings SET status = ?, error = ?, updated_at = ?"
                " WHERE action_id = ? AND claim_id = ? AND status = 'starting' AND run_id IS NULL",
                (status, json.dumps(error), now(), action_id, claim_id),
            ).rowcount
            self.note(c, action_id, f"start_{status}", claim_id=claim_id, error=error, answer=answer, applied=n == 1)
        return n == 1

    def abandon_claim(self, action_id, claim_id, reason):
        """Another instance's claim lost its owner before a run was bound: `outcome_unknown`."""
        with self.conn() as c, self.tx(c):
            n = c.execute(
                "UPDATE bindings SET status = 'outcome_unknown', error = ?, updated_at = ?"
                " WHERE action_id = ? AND claim_id = ? AND status = 'starting' AND run_id IS NULL",
                (json.dumps({"code": "operator_outcome_unknown", "reason": reason}), now(), action_id, claim_id),
            ).rowcount
            if n == 1:
                self.note(c, action_id, "claim_abandoned", claim_id=claim_id, reason=reason)
        return n == 1

    def observed(self, action_id, run_id, provider_status, not_found):
        """A non-terminal observation: kept only when it changes something."""
        with self.conn() as c, self.tx(c):
            r = c.execute(
                "SELECT provider_status, not_found FROM bindings WHERE action_id = ? AND run_id = ? AND status = 'running'",
                (action_id, run_id),
            ).fetchone()
            if r is None or (r["provider_status"] == provider_status and r["not_found"] == not_found):
                return
            c.execute(
                "UPDATE bindings SET provider_status = ?, not_found = ?, updated_at = ? WHERE action_id = ?",
                (provider_status, not_found, now(), action_id),
            )
            if r["provider_status"] != provider_status:
                self.note(c, action_id, "observed", run_id=run_id, provider_status=provider_status)

    def finish(self, action_id, run_id, status, output, error, evidence):
        """The first terminal write wins; only a `running` binding of this run is settled."""
        with self.conn() as c, self.tx(c):
            n = c.execute(
                "UPDATE bindings SET status = ?, output = ?, error = ?, provider_status = ?, updated_at = ?"
                " WHERE action_id = ? AND run_id = ? AND status = 'running'",
                (status, json.dumps(output), json.dumps(error), evidence.get("status"), now(), action_id, run_id),
            ).rowcount
            if n == 1:
                self.note(c, action_id, "settled", run_id=run_id, status=status, evidence=evidence)
        return n == 1


class Collision(Exception):
    def __init__(self, row):
        super().__init__("collision")
        self.row = row


# ---------- Hermes ----------


class Answer:
    def __init__(self, status=None, body=None, transport=None):
        self.status = status        # HTTP status, or None when no reply arrived
        self.body = body            # parsed JSON, or None
        self.transport = transport  # the transport error, if any

    def describe(self):
        if self.status is None:
            return {"transport_error": self.transport}
        return {"http_status": self.status, "body": self.body if isinstance(self.body, (dict, list)) else None}


class Hermes:
    def __init__(self, base, key):
        self.base = base.rstrip("/")
        self.key = key

    def call(self, method, path, body=None, headers=None, timeout=READ_TIMEOUT_SECONDS):
        data = None if body is None else json.dumps(body).encode("utf-8")
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.key}")
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                status, raw = r.status, r.read()
        except urllib.error.HTTPError as e:
            status = e.code
            try:
                raw = e.read()
            except Exception:  # noqa: BLE001 - a body lost on the way is still this status
                raw = b""
        except Exception as e:  # noqa: BLE001 - no reply: connection refused, dropped, timed out
            return Answer(transport=f"{type(e).__name__}: {e}")
        try:
            parsed = json.loads(raw.decode("utf-8")) if raw else None
        except ValueError:
            parsed = None
        return Answer(status=status, body=parsed)

    def start(self, action_id, objective, session_id):
        return self.call(
            "POST",
            "/v1/runs",
            {"input": objective, "session_id": session_id},
            headers={"Idempotency-Key": action_id},
            timeout=START_TIMEOUT_SECONDS,
        )

    def status(self, run_id):
        return self.call("GET", f"/v1/runs/{run_id}")


# ---------- the worker ----------


class Worker(threading.Thread):
    """Finds open actions and gives each one a task thread in this process: start it (if this
    instance wins the claim), wait for another instance's claim, or observe its run."""

    def __init__(self, store, hermes, stop):
        super().__init__(name="worker", daemon=True)
        self.store, self.hermes, self.stop = store, hermes, stop
        self.ready = threading.Event()
        self.wake = threading.Event()
        self.lock = threading.Lock()
        self.tasks = set()

    def run(self):
        threading.Thread(target=self.beat, name="heartbeat", daemon=True).start()
        self.ready.set()
        while not self.stop.is_set():
            try:
                for action_id in self.store.open_actions():
                    self.dispatch(action_id)
            except Exception as e:  # noqa: BLE001 - keep the worker alive; the store may be busy
                log(f"worker scan: {type(e).__name__}: {e}")
            self.wake.wait(SCAN_SECONDS)
            self.wake.clear()

    def beat(self):
        while not self.stop.is_set():
            try:
                self.store.heartbeat()
            except Exception as e:  # noqa: BLE001
                log(f"heartbeat: {type(e).__name__}: {e}")
            self.stop.wait(HEARTBEAT_SECONDS)

    def dispatch(self, action_id):
        with self.lock:
            if action_id in self.tasks:
                return
            self.tasks.add(action_id)
        threading.Thread(target=self.task, args=(action_id,), name=f"action-{action_id}", daemon=True).start()

    def task(self, action_id):
        try:
            self.drive(action_id)
        except Exception as e:  # noqa: BLE001 - the next scan picks the action up again
            log(f"{action_id}: {type(e).__name__}: {e}")
            time.sleep(SCAN_SECONDS)
        finally:
            with self.lock:
                self.tasks.discard(action_id)

    def drive(self, action_id):
        not_found = 0
        while not self.stop.is_set():
            b = self.store.get(action_id)
            if b is None or b["status"] in TERMINAL:
                return
            if b["status"] == "starting":
                if b["claim_id"] is None:
                    # No claim was ever committed, so no start ever left: it is safe to claim.
                    # The instance that took the submission does so, unless it is gone.
                    if b["received_by"] != BOOT and self.store.alive(b["received_by"]):
                        self.stop.wait(WAIT_SECONDS)
                        continue
                    claim_id = self.store.claim(action_id)
                    if claim_id is not None:
                        self.send_start(b, claim_id)
                    continue
                if b["claim_boot"] == BOOT:
                    # Our own claim, and no task of ours holds it any more (the start thread
                    # is the task itself): its start ended without being recorded. Never again.
                    self.store.abandon_claim(action_id, b["claim_id"], "claim_owner_lost_its_start")
                    continue
                if not self.store.alive(b["claim_boot"]):
                    self.store.abandon_claim(action_id, b["claim_id"], "claim_owner_gone")
                    log(f"{action_id}: the start claim of {b['claim_instance']} lost its owner → outcome_unknown")
                    continue
                if now() >= (b["claim_expires_at"] or 0):
                    self.store.abandon_claim(action_id, b["claim_id"], "claim_expired")
                    log(f"{action_id}: the start claim of {b['claim_instance']} expired → outcome_unknown")
                    continue
                self.stop.wait(WAIT_SECONDS)  # another live instance is starting it
                continue
            # running: observe the bound run
            not_found = self.poll(b, not_found)
            self.stop.wait(POLL_SECONDS)

    def send_start(self, b, claim_id):
        action_id = b["action_id"]
        log(f"{action_id}: start claimed ({claim_id}); POST /v1/runs")
        a = self.hermes.start(action_id, b["objective"], b["session_id"])
        run_id = a.body.get("run_id") if isinstance(a.body, dict) else None
        if a.status is not None and 200 <= a.status < 300 and isinstance(run_id, str) and run_id:
            if self.store.bind(action_id, claim_id, run_id, a.describe()):
                log(f"{action_id}: started {run_id}")
            else:
                log(f"{action_id}: started {run_id}, but the binding no longer holds this claim")
            return
        if a.status is not None and 400 <= a.status < 500 and a.status != 409:
            # A definitive refusal before acceptance (409 is a replay signal on newer builds).
            err = {"code": "operator_start_rejected", "http_status": a.status, "provider": a.body}
            self.store.settle_start(action_id, claim_id, "failed", err, a.describe())
            log(f"{action_id}: start refused ({a.status}) → failed")
            return
        if a.status is None:
            reason = "transport_error"
        elif 200 <= a.status < 300:
            reason = "started_without_run_id"
        else:
            reason = f"http_{a.status}"
        err = {"code": "operator_outcome_unknown", "reason": reason}
        self.store.settle_start(action_id, claim_id, "outcome_unknown", err, a.describe())
        log(f"{action_id}: start answer ambiguous ({reason}) → outcome_unknown; it is never sent again")

    def poll(self, b, not_found):
        action_id, run_id = b["action_id"], b["run_id"]
        a = self.hermes.status(run_id)
        doc = a.body if isinstance(a.body, dict) else {}
        if a.status == 200 and doc.get("run_id", run_id) == run_id:
            st = doc.get("status")
            if st in FINAL_PROVIDER:
                evidence = {"source": "GET /v1/runs/{run_id}", "status": st, "last_event": doc.get("last_event")}
                if self.store.finish(action_id, run_id, st, doc.get("output"), doc.get("error"), evidence):
                    log(f"{action_id}: {run_id} {st}")
                return 0
            if st in LIVE_PROVIDER:
                self.store.observed(action_id, run_id, st, 0)
                return 0
            # Unmapped: fail closed, without inventing an ending.
            evidence = {"source": "GET /v1/runs/{run_id}", "status": st}
            err = {"code": "operator_outcome_unknown", "reason": f"unsupported_provider_status:{st}"}
            self.store.finish(action_id, run_id, "outcome_unknown", None, err, evidence)
            log(f"{action_id}: {run_id} reports unmapped status {st!r} → outcome_unknown")
            return 0
        if a.status == 404:
            # Hermes keeps runs in memory: a 404 says it forgot, not how the run ended.
            not_found += 1
            self.store.observed(action_id, run_id, b["provider_status"], not_found)
            if not_found >= NOT_FOUND_LIMIT:
                evidence = {"source": "GET /v1/runs/{run_id}", "status": None, "http_status": 404, "consecutive": not_found}
                err = {"code": "operator_outcome_unknown", "reason": "run_not_found"}
                self.store.finish(action_id, run_id, "outcome_unknown", None, err, evidence)
                log(f"{action_id}: {run_id} not found {not_found} times → outcome_unknown")
            return not_found
        # A 5xx, a 401, a transport error: no knowledge; keep asking.
        return not_found


# ---------- the HTTP API ----------


def view(b):
    def decoded(x):
        return None if x is None else json.loads(x)

    return {
        "action_id": b["action_id"],
        "status": b["status"],
        "run_id": b["run_id"],
        "output": decoded(b["output"]),
        "error": decoded(b["error"]),
    }


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = NAME

    def log_message(self, fmt, *args):
        log(f"{self.command} {self.path} -> {fmt % args}")

    def reply(self, status, body):
        raw = json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def error_reply(self, status, code, message):
        self.reply(status, {"error": {"code": code, "message": message}})

    def do_GET(self):
        path = urlsplit(self.path).path
        app = self.server.app
        if path == "/healthz":
            if app.worker.ready.is_set():
                return self.reply(200, {"ok": True})
            return self.reply(503, {"ok": False})
        m = re.fullmatch(r"/actions/([^/]+)(/history)?", path)
        if m:
            action_id = unquote(m.group(1))
            b = app.store.get(action_id)
            if b is None:
                return self.error_reply(404, "not_found", f"no action {action_id!r}")
            if m.group(2):
                return self.reply(200, {"action_id": action_id, "history": app.store.history(action_id)})
            return self.reply(200, view(b))
        self.error_reply(404, "not_found", "no such route")

    def do_POST(self):
        path = urlsplit(self.path).path
        app = self.server.app
        try:
            n = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            n = -1
        if n < 0 or n > MAX_BODY:
            self.close_connection = True  # the body is left unread
            return self.error_reply(413 if n > MAX_BODY else 400, "bad_request", f"a body of at most {MAX_BODY} bytes")
        raw = self.rfile.read(n)
        if path != "/actions":
            return self.error_reply(404, "not_found", "no such route")
        try:
            req = json.loads(raw.decode("utf-8"))
        except ValueError:
            return self.error_reply(400, "bad_request", "the body is not JSON")
        if not isinstance(req, dict):
            return self.error_reply(400, "bad_request", "the body must be a JSON object")
        action_id, objective = req.get("action_id"), req.get("objective")
        if not isinstance(action_id, str) or not ACTION_ID.fullmatch(action_id):
            return self.error_reply(400, "bad_request", "action_id: 1-200 of [A-Za-z0-9._:-], starting alphanumeric")
        if not isinstance(objective, str) or not objective.strip():
            return self.error_reply(400, "bad_request", "objective: a non-empty string")
        try:
            created, b = app.store.submit(action_id, objective)
        except Collision as c:
            log(f"{action_id}: submitted again with another objective → 409")
            return self.reply(
                409,
                {
                    "error": {
                        "code": "idempotency_collision",
                        "message": "this action_id is bound to another objective",
                    },
                    "action": view(c.row),
                },
            )
        if created:
            log(f"{action_id}: bound (starting)")
            app.worker.wake.set()
            return self.reply(202, view(b))
        return self.reply(200, view(b))


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128  # the default listen backlog (5) resets clients under a burst


class App:
    def __init__(self, store, worker):
        self.store, self.worker = store, worker


def config():
    missing = [k for k in ("PORT", "HERMES_URL", "HERMES_API_KEY", "CONNECTOR_DB") if not os.environ.get(k)]
    if missing:
        print(f"{NAME}: missing environment: {', '.join(missing)}", file=sys.stderr)
        sys.exit(2)
    return (
        int(os.environ["PORT"]),
        os.environ["HERMES_URL"],
        os.environ["HERMES_API_KEY"],
        os.environ["CONNECTOR_DB"],
    )


def main():
    port, url, key, db = config()
    store = Store(db)
    store.register()
    stop = threading.Event()
    worker = Worker(store, Hermes(url, key), stop)
    server = Server(("127.0.0.1", port), Handler)
    server.app = App(store, worker)

    def shutdown(*_):
        stop.set()
        threading.Thread(target=server.shutdown, daemon=True).start()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, shutdown)
    worker.start()
    log(f"listening on 127.0.0.1:{port}, hermes {url}, store {db}")
    server.serve_forever(poll_interval=0.2)
    server.server_close()
    log("stopped")


if __name__ == "__main__":
    main()
