#!/usr/bin/env python3
"""connector-naive: a Hermes operator connector written the way many real ones are.

An action (``action_id``, ``objective``) is taken over HTTP and stored in SQLite. A thread
starts a Hermes run for it (``POST /v1/runs`` with session id ``aip-operator-<action_id>``) and
polls the run (``GET /v1/runs/{run_id}``) until Hermes says it ended, copying the status,
``output`` and ``error``.

Its defects, on purpose (each is a common pattern, and each is harmless on a good day):

* No start claim. The action is ``starting`` until a 202 names its run, and nothing records
  that a start went out.
* A 5xx, a dropped connection or a timeout on the start is treated as "it did not happen": the
  start is POSTed again, up to ``START_RETRIES`` more times. Hermes does not honour the
  ``Idempotency-Key`` on ``POST /v1/runs``, so a start that committed before its reply was lost
  becomes a second run.
* At boot, every action still ``starting`` is started again ("resume interrupted work"). An
  instance killed while its start was in flight, or a second instance that boots while another
  is starting, makes a second run for the same action.
* The latest objective wins: the same ``action_id`` with another objective replaces the old one
  and starts it, so one action gets a second run (seed 000 calls it a collision: no run).
* A run Hermes no longer knows (``GET`` 404 after a Hermes restart) is taken to have finished:
  the action becomes ``completed``, a terminal status nobody reported.

Same API and configuration as connector-keyed: PORT, HERMES_URL, HERMES_API_KEY, CONNECTOR_DB,
INSTANCE. Python 3.9+, standard library only.
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
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

NAME = "connector-naive"
POLL_SECONDS = 0.25
START_RETRIES = 3           # further POSTs after a 5xx / connection error / timeout
RETRY_PAUSE_SECONDS = 0.5
START_TIMEOUT_SECONDS = 30.0
READ_TIMEOUT_SECONDS = 10.0
MAX_BODY = 1 << 20
ACTION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,199}")

TERMINAL = ("completed", "failed", "cancelled", "outcome_unknown")
FINAL_PROVIDER = ("completed", "failed", "cancelled")

SCHEMA = """
CREATE TABLE IF NOT EXISTS actions (
    action_id   TEXT PRIMARY KEY,
    fingerprint TEXT NOT NULL,
    objective   TEXT NOT NULL,
    session_id  TEXT NOT NULL,
    status      TEXT NOT NULL,   -- starting | running | completed | failed | cancelled
    run_id      TEXT,
    output      TEXT,            -- JSON
    error       TEXT,            -- JSON
    created_at  REAL NOT NULL,
    updated_at  REAL NOT NULL
);
"""

INSTANCE = os.environ.get("INSTANCE", "-")


def log(msg):
    print(f"{NAME}[{INSTANCE}:{os.getpid()}] {msg}", flush=True)


def now():
    return time.time()


class Store:
    def __init__(self, path):
        self.path = path
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with self.conn() as c:
            c.execute("PRAGMA journal_mode=WAL")
            c.executescript(SCHEMA)

    @contextlib.contextmanager
    def conn(self):
        c = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
        c.row_factory = sqlite3.Row
        try:
            c.execute("PRAGMA busy_timeout=30000")
            yield c
        finally:
            c.close()

    def get(self, action_id):
        with self.conn() as c:
            return c.execute("SELECT * FROM actions WHERE action_id = ?", (action_id,)).fetchone()

    def insert(self, action_id, objective):
        """(created, row); raises Collision for another objective under the same id."""
        fp = hashlib.sha256(objective.encode("utf-8")).hexdigest()
        t = now()
        with self.conn() as c:
            n = c.execute(
                "INSERT OR IGNORE INTO actions (action_id, fingerprint, objective, session_id, status,"
                " created_at, updated_at) VALUES (?, ?, ?, ?, 'starting', ?, ?)",
                (action_id, fp, objective, f"aip-operator-{action_id}", t, t),
            ).rowcount
            r = c.execute("SELECT * FROM actions WHERE action_id = ?", (action_id,)).fetchone()
        if r["fingerprint"] != fp:
            # "The latest objective wins": the action starts over with the new one.
            with self.conn() as c:
                c.execute(
                    "UPDATE actions SET fingerprint = ?, objective = ?, status = 'starting',"
                    " run_id = NULL, updated_at = ? WHERE action_id = ?",
                    (fp, objective, t, action_id),
                )
                r = c.execute("SELECT * FROM actions WHERE action_id = ?", (action_id,)).fetchone()
            return True, r
        return n == 1, r

    def update(self, action_id, **fields):
        fields["updated_at"] = now()
        cols = ", ".join(f"{k} = ?" for k in fields)
        with self.conn() as c:
            c.execute(f"UPDATE actions SET {cols} WHERE action_id = ?", (*fields.values(), action_id))

    def with_status(self, *statuses):
        q = ", ".join("?" for _ in statuses)
        with self.conn() as c:
            return [r["action_id"] for r in c.execute(f"SELECT action_id FROM actions WHERE status IN ({q})", statuses)]


class Collision(Exception):
    def __init__(self, row):
        super().__init__("collision")
        self.row = row


class Hermes:
    def __init__(self, base, key):
        self.base = base.rstrip("/")
        self.key = key

    def call(self, method, path, body=None, headers=None, timeout=READ_TIMEOUT_SECONDS):
        """(status or None, parsed body or None, transport error or None)."""
        data = None if body is None else json.dumps(body).encode("utf-8")
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.key}")
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
            except Exception:  # noqa: BLE001
                raw = b""
        except Exception as e:  # noqa: BLE001
            return None, None, f"{type(e).__name__}: {e}"
        try:
            parsed = json.loads(raw.decode("utf-8")) if raw else None
        except ValueError:
            parsed = None
        return status, parsed, None


class Runner:
    def __init__(self, store, hermes, stop):
        self.store, self.hermes, self.stop = store, hermes, stop
        self.lock = threading.Lock()
        self.busy = set()

    def spawn(self, action_id):
        with self.lock:
            if action_id in self.busy:
                return
            self.busy.add(action_id)
        threading.Thread(target=self.run, args=(action_id,), name=f"action-{action_id}", daemon=True).start()

    def run(self, action_id):
        try:
            a = self.store.get(action_id)
            if a is None:
                return
            if a["status"] == "starting":
                a = self.start(a)
            if a is not None and a["status"] == "running":
                self.poll(a)
        except Exception as e:  # noqa: BLE001
            log(f"{action_id}: {type(e).__name__}: {e}")
        finally:
            with self.lock:
                self.busy.discard(action_id)

    def start(self, a):
        action_id = a["action_id"]
        body = {"input": a["objective"], "session_id": a["session_id"]}
        for attempt in range(1 + START_RETRIES):
            if self.stop.is_set():
                return None
            log(f"{action_id}: POST /v1/runs (attempt {attempt + 1})")
            status, doc, transport = self.hermes.call(
                "POST", "/v1/runs", body, headers={"Idempotency-Key": action_id}, timeout=START_TIMEOUT_SECONDS
            )
            run_id = doc.get("run_id") if isinstance(doc, dict) else None
            if status is not None and 200 <= status < 300 and run_id:
                self.store.update(action_id, status="running", run_id=run_id)
                log(f"{action_id}: started {run_id}")
                return self.store.get(action_id)
            if status is not None and 400 <= status < 500:
                self.store.update(action_id, status="failed", error=json.dumps({"http_status": status, "provider": doc}))
                log(f"{action_id}: start refused ({status}) → failed")
                return None
            # 5xx, no reply, timeout, or a 2xx without a run id: "it did not work, try again".
            log(f"{action_id}: start failed ({transport or status}); retrying")
            self.stop.wait(RETRY_PAUSE_SECONDS)
        self.store.update(
            action_id, status="failed", error=json.dumps({"message": f"start failed after {1 + START_RETRIES} attempts"})
        )
        log(f"{action_id}: giving up → failed")
        return None

    def poll(self, a):
        action_id, run_id = a["action_id"], a["run_id"]
        while not self.stop.is_set():
            status, doc, _ = self.hermes.call("GET", f"/v1/runs/{run_id}")
            if status == 404:
                # Hermes no longer knows the run: it must have finished.
                self.store.update(action_id, status="completed")
                log(f"{action_id}: {run_id} gone (404), taken as completed")
                return
            if status == 200 and isinstance(doc, dict):
                st = doc.get("status")
                if st in FINAL_PROVIDER:
                    self.store.update(
                        action_id, status=st, output=json.dumps(doc.get("output")), error=json.dumps(doc.get("error"))
                    )
                    log(f"{action_id}: {run_id} {st}")
                    return
            self.stop.wait(POLL_SECONDS)


def view(a):
    def decoded(x):
        return None if x is None else json.loads(x)

    return {
        "action_id": a["action_id"],
        "status": a["status"],
        "run_id": a["run_id"],
        "output": decoded(a["output"]),
        "error": decoded(a["error"]),
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
            return self.reply(200 if app.ready.is_set() else 503, {"ok": app.ready.is_set()})
        m = re.fullmatch(r"/actions/([^/]+)", path)
        if m:
            a = app.store.get(unquote(m.group(1)))
            if a is None:
                return self.error_reply(404, "not_found", "no such action")
            return self.reply(200, view(a))
        self.error_reply(404, "not_found", "no such route")

    def do_POST(self):
        path = urlsplit(self.path).path
        app = self.server.app
        try:
            n = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            n = -1
        if n < 0 or n > MAX_BODY:
            self.close_connection = True
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
            created, a = app.store.insert(action_id, objective)
        except Collision as c:
            return self.reply(
                409,
                {"error": {"code": "idempotency_collision", "message": "another objective"}, "action": view(c.row)},
            )
        if created:
            app.runner.spawn(action_id)
            return self.reply(202, view(a))
        return self.reply(200, view(a))


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128  # the default listen backlog (5) resets clients under a burst


class App:
    def __init__(self, store, runner):
        self.store, self.runner = store, runner
        self.ready = threading.Event()


def main():
    missing = [k for k in ("PORT", "HERMES_URL", "HERMES_API_KEY", "CONNECTOR_DB") if not os.environ.get(k)]
    if missing:
        print(f"{NAME}: missing environment: {', '.join(missing)}", file=sys.stderr)
        sys.exit(2)
    port = int(os.environ["PORT"])
    store = Store(os.environ["CONNECTOR_DB"])
    stop = threading.Event()
    runner = Runner(store, Hermes(os.environ["HERMES_URL"], os.environ["HERMES_API_KEY"]), stop)
    server = Server(("127.0.0.1", port), Handler)
    server.app = App(store, runner)

    def shutdown(*_):
        stop.set()
        threading.Thread(target=server.shutdown, daemon=True).start()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, shutdown)
    # Resume interrupted work: an action still `starting` is started (again), a `running` one
    # is polled. (This is the defect: nothing says whether a start already went out.)
    for action_id in store.with_status("starting", "running"):
        log(f"{action_id}: resuming after boot")
        runner.spawn(action_id)
    server.app.ready.set()
    log(f"listening on 127.0.0.1:{port}, hermes {os.environ['HERMES_URL']}")
    server.serve_forever(poll_interval=0.2)
    server.server_close()
    log("stopped")


if __name__ == "__main__":
    main()
