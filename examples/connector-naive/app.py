#!/usr/bin/env python3
"""connector-naive: a Hermes operator connector written the way many real ones are.

An action (``action_id``, ``objective``) is taken over HTTP and stored in SQLite. A thread
starts a Hermes run for it (``POST /v1/runs`` with session id ``aip-operator-<action_id>``),
follows the run's event stream (``GET /v1/runs/{run_id}/events``) and then polls the run
(``GET /v1/runs/{run_id}``) until Hermes says it ended, copying the status, ``output`` and
``error``. A waiting approval is resumed with ``POST /actions`` and a ``resume`` object (the
decision is forwarded to ``POST /v1/runs/{run_id}/approval``), and an action is cancelled with
``POST /actions/{id}/cancel`` (forwarded to ``POST /v1/runs/{run_id}/stop``).

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
* A resume command is forwarded every time it is submitted, an exact replay included: the
  handler keeps no record of what it already sent. Its outbox is "at least once": a command
  whose answer was not recorded as applied (the process died waiting) is sent again at boot.
  Hermes's approval route resolves whatever approval is pending now, so a second send of one
  command answers the next approval with a choice nobody gave for it.
* A cancellation is done when Hermes accepts the stop: a 2xx (``{"status": "stopping"}``) makes
  the action ``cancelled`` and polling stops, even if the run then completes.
* A stream that ends is taken as the run's end: when the event stream breaks off without a
  terminal event, the last thing the model said (the message text, else its last reasoning) is
  kept as the output and the action is ``completed``.

Same configuration as connector-keyed: PORT, HERMES_URL, HERMES_API_KEY, CONNECTOR_DB,
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
STREAM_TIMEOUT_SECONDS = 75.0
MAX_BODY = 1 << 20
ACTION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}")
CHOICES = ("once", "session", "always", "deny")

TERMINAL = ("completed", "failed", "cancelled", "outcome_unknown")
FINAL_PROVIDER = ("completed", "failed", "cancelled")

SCHEMA = """
CREATE TABLE IF NOT EXISTS actions (
    action_id   TEXT PRIMARY KEY,
    fingerprint TEXT NOT NULL,
    objective   TEXT NOT NULL,
    session_id  TEXT NOT NULL,
    status      TEXT NOT NULL,   -- starting | running | waiting_for_approval | completed | failed | cancelled
    run_id      TEXT,
    output      TEXT,            -- JSON
    error       TEXT,            -- JSON
    created_at  REAL NOT NULL,
    updated_at  REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS commands (
    action_id        TEXT PRIMARY KEY,   -- the resume command's id
    source_action_id TEXT NOT NULL,
    choice           TEXT NOT NULL,
    resolve_all      INTEGER NOT NULL,
    state            TEXT NOT NULL,      -- sending | applied | failed
    sent             INTEGER NOT NULL DEFAULT 0,
    updated_at       REAL NOT NULL
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

    def command(self, action_id):
        with self.conn() as c:
            return c.execute("SELECT * FROM commands WHERE action_id = ?", (action_id,)).fetchone()

    def save_command(self, action_id, source_action_id, choice, resolve_all):
        with self.conn() as c:
            c.execute(
                "INSERT OR REPLACE INTO commands (action_id, source_action_id, choice, resolve_all, state, sent,"
                " updated_at) VALUES (?, ?, ?, ?, 'sending',"
                " COALESCE((SELECT sent FROM commands WHERE action_id = ?), 0), ?)",
                (action_id, source_action_id, choice, 1 if resolve_all else 0, action_id, now()),
            )

    def command_state(self, action_id, state):
        with self.conn() as c:
            c.execute(
                "UPDATE commands SET state = ?, sent = sent + 1, updated_at = ? WHERE action_id = ?",
                (state, now(), action_id),
            )

    def unfinished_commands(self):
        with self.conn() as c:
            return [r["action_id"] for r in c.execute("SELECT action_id FROM commands WHERE state != 'applied'")]


class Collision(Exception):
    def __init__(self, row):
        super().__init__("collision")
        self.row = row


class Hermes:
    def __init__(self, base, key):
        self.base = base.rstrip("/")
        self.key = key

    def request(self, method, path, body=None, headers=None):
        data = None if body is None else json.dumps(body).encode("utf-8")
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.key}")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        return req

    def call(self, method, path, body=None, headers=None, timeout=READ_TIMEOUT_SECONDS):
        """(status or None, parsed body or None, transport error or None)."""
        req = self.request(method, path, body, headers)
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

    def spawn(self, action_id, follow=True):
        with self.lock:
            if action_id in self.busy:
                return
            self.busy.add(action_id)
        threading.Thread(target=self.run, args=(action_id, follow), name=f"action-{action_id}", daemon=True).start()

    def run(self, action_id, follow):
        try:
            a = self.store.get(action_id)
            if a is None:
                return
            if a["status"] == "starting":
                a = self.start(a)
                if a is not None and follow and self.follow(a):
                    return
            if a is not None and a["status"] not in TERMINAL:
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

    def follow(self, a):
        """Follows the run's event stream. True when the action is settled here; False to poll
        (no stream, or the stream announced the run's end)."""
        action_id, run_id = a["action_id"], a["run_id"]
        req = self.hermes.request("GET", f"/v1/runs/{run_id}/events", headers={"Accept": "text/event-stream"})
        try:
            resp = urllib.request.urlopen(req, timeout=STREAM_TIMEOUT_SECONDS)
        except Exception as e:  # noqa: BLE001 - no stream: poll instead
            log(f"{action_id}: no event stream ({type(e).__name__}); polling")
            return False
        said = reasoning = ""
        with resp:
            try:
                for raw in resp:
                    line = raw.decode("utf-8", "replace").strip()
                    if not line.startswith("data:"):
                        continue
                    try:
                        ev = json.loads(line[5:].strip())
                    except ValueError:
                        continue  # a bad frame: skip it, the next one will do
                    name = ev.get("event")
                    if name == "message.delta":
                        said += ev.get("delta") or ""
                    elif name == "reasoning.available":
                        reasoning = ev.get("text") or reasoning
                    elif name == "approval.request":
                        self.store.update(action_id, status="waiting_for_approval")
                    elif name == "approval.responded":
                        self.store.update(action_id, status="running")
                    elif name in ("run.completed", "run.failed", "run.cancelled"):
                        return False  # the status read copies the ending
                    cur = self.store.get(action_id)
                    if cur is None or cur["status"] in TERMINAL:
                        return True  # cancelled meanwhile
            except Exception as e:  # noqa: BLE001 - the stream broke off: same as its end
                log(f"{action_id}: event stream broke ({type(e).__name__})")
        # The stream is over, so the run is over: what the model said last is the result.
        cur = self.store.get(action_id)
        if cur is not None and cur["status"] not in TERMINAL:
            self.store.update(action_id, status="completed", output=json.dumps(said.strip() or reasoning))
            log(f"{action_id}: event stream ended; {run_id} taken as completed")
        return True

    def poll(self, a):
        action_id, run_id = a["action_id"], a["run_id"]
        while not self.stop.is_set():
            cur = self.store.get(action_id)
            if cur is None or cur["status"] in TERMINAL:
                return  # cancelled meanwhile: nothing left to watch
            status, doc, _ = self.hermes.call("GET", f"/v1/runs/{run_id}")
            if status == 404:
                # Hermes no longer knows the run: it must have finished.
                self.store.update(action_id, status="completed")
                log(f"{action_id}: {run_id} gone (404), taken as completed")
                return
            if status == 200 and isinstance(doc, dict):
                st = doc.get("status")
                if st in FINAL_PROVIDER:
                    cur = self.store.get(action_id)
                    if cur is None or cur["status"] in TERMINAL:
                        return  # cancelled while the status was read: the cancellation stands
                    self.store.update(
                        action_id, status=st, output=json.dumps(doc.get("output")), error=json.dumps(doc.get("error"))
                    )
                    log(f"{action_id}: {run_id} {st}")
                    return
                shown = "waiting_for_approval" if st == "waiting_for_approval" else "running"
                if cur["status"] != shown:
                    self.store.update(action_id, status=shown)
            self.stop.wait(POLL_SECONDS)

    def send_command(self, action_id):
        """Forwards a resume command's decision to Hermes: (HTTP status or None, body)."""
        cmd = self.store.command(action_id)
        src = self.store.get(cmd["source_action_id"]) if cmd is not None else None
        if src is None or not src["run_id"]:
            return None, None
        body = {"choice": cmd["choice"]}
        if cmd["resolve_all"]:
            body["resolve_all"] = True
        log(f"{action_id}: POST /v1/runs/{src['run_id']}/approval ({cmd['choice']})")
        status, doc, transport = self.hermes.call("POST", f"/v1/runs/{src['run_id']}/approval", body)
        ok = status is not None and 200 <= status < 300
        self.store.command_state(action_id, "applied" if ok else "failed")
        if ok and src["status"] == "waiting_for_approval":
            self.store.update(src["action_id"], status="running")
        log(f"{action_id}: approval answered {status or transport}")
        return status, doc

    def resend_commands(self):
        # Resume interrupted work: a command not known to be applied is sent (again).
        for action_id in self.store.unfinished_commands():
            log(f"{action_id}: resume command not confirmed before the restart; sending it again")
            self.send_command(action_id)


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


def command_view(cmd, src):
    return {
        "action_id": cmd["action_id"],
        "source_action_id": cmd["source_action_id"],
        "command_status": cmd["state"],
        "choice": cmd["choice"],
        "status": src["status"] if src is not None else None,
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
            action_id = unquote(m.group(1))
            a = app.store.get(action_id)
            if a is not None:
                return self.reply(200, view(a))
            cmd = app.store.command(action_id)
            if cmd is not None:
                return self.reply(200, command_view(cmd, app.store.get(cmd["source_action_id"])))
            return self.error_reply(404, "not_found", "no such action")
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
        m = re.fullmatch(r"/actions/([^/]+)/cancel", path)
        if m:
            return self.cancel(unquote(m.group(1)))
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
        if isinstance(req.get("resume"), dict):
            return self.resume(action_id, req["resume"])
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

    def resume(self, action_id, spec):
        """Records the command and forwards its decision to Hermes, every time it is asked."""
        app = self.server.app
        source, choice = spec.get("source_action_id"), spec.get("choice")
        if choice not in CHOICES:
            return self.error_reply(400, "bad_request", "resume.choice: one of once, session, always, deny")
        src = app.store.get(source) if isinstance(source, str) else None
        if src is None:
            return self.error_reply(404, "not_found", "no such source action")
        if not src["run_id"]:
            return self.error_reply(409, "not_started", "the source action has no run yet")
        app.store.save_command(action_id, source, choice, bool(spec.get("resolve_all")))
        status, doc = app.runner.send_command(action_id)
        cmd = app.store.command(action_id)
        if status is not None and 200 <= status < 300:
            return self.reply(200, command_view(cmd, app.store.get(source)))
        return self.reply(502, {"error": {"code": "approval_failed", "message": f"Hermes answered {status}", "provider": doc},
                                "command": command_view(cmd, app.store.get(source))})

    def cancel(self, action_id):
        """Forwards the stop; Hermes accepting it means the action is cancelled."""
        app = self.server.app
        a = app.store.get(action_id)
        if a is None:
            return self.error_reply(404, "not_found", "no such action")
        if a["status"] in TERMINAL:
            return self.reply(200, view(a))
        if not a["run_id"]:
            app.store.update(action_id, status="cancelled")
            return self.reply(200, view(app.store.get(action_id)))
        status, doc, transport = app.runner.hermes.call("POST", f"/v1/runs/{a['run_id']}/stop", {})
        if status is not None and 200 <= status < 300:
            # Hermes said "stopping": as good as done.
            app.store.update(action_id, status="cancelled")
            log(f"{action_id}: stop accepted ({(doc or {}).get('status')}) → cancelled")
            return self.reply(200, view(app.store.get(action_id)))
        return self.reply(502, {"error": {"code": "stop_failed", "message": f"Hermes answered {status or transport}"}})


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
    # Resume interrupted work: an action still `starting` is started (again), a live one is
    # polled, and a resume command not known to be applied is sent (again). (This is the
    # defect: nothing says whether a start or a decision already went out.)
    for action_id in store.with_status("starting", "running", "waiting_for_approval"):
        log(f"{action_id}: resuming after boot")
        runner.spawn(action_id, follow=False)
    threading.Thread(target=runner.resend_commands, name="resend", daemon=True).start()
    server.app.ready.set()
    log(f"listening on 127.0.0.1:{port}, hermes {os.environ['HERMES_URL']}")
    server.serve_forever(poll_interval=0.2)
    server.server_close()
    log("stopped")


if __name__ == "__main__":
    main()
