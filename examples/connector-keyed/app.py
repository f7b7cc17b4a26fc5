#!/usr/bin/env python3
"""connector-keyed: a Hermes operator connector that sends each external command at most once.

An action (``action_id``, ``objective``) is taken over HTTP and bound durably in SQLite, keyed by
the action id. A worker thread starts one Hermes run for it (``POST /v1/runs`` with session id
``aip-operator-<action_id>``), follows it, and copies what Hermes says of it into the binding.
It follows seed 000 (the AIP Hermes operator capability). Three provider calls change the world
and none of them is idempotent at Hermes: the start, an approval decision and a stop. Each is
recorded durably before it leaves, and an answer that leaves its effect unknown is
``outcome_unknown``. Nothing is ever resent.

Start (``POST /v1/runs``):

* Before the request leaves, one committed transaction (``BEGIN IMMEDIATE``) writes a start claim
  (claim id, instance, claimed_at, expires_at) on a binding that is ``starting``, has no
  ``run_id``, no claim and no cancellation. Only the instance that wins it sends the start.
* A 2xx with a ``run_id`` binds the run (``running``) and clears the claim. A 4xx is a definitive
  refusal (``failed``). Anything else (a 5xx, a dropped connection, a timeout, a 2xx without
  ``run_id``, a 409) may have started a run: the binding becomes ``outcome_unknown`` and is never
  started again.
* A claim whose owner is gone (its process was replaced, its heartbeat stopped) or has expired,
  and that bound no run, becomes ``outcome_unknown``. No instance ever steals a claim.

Observation:

* Right after it binds a run, the instance that started it follows the run's event stream
  (``GET /v1/runs/{run_id}/events``, SSE). Every event's name is recorded with a sequence number
  (``last_event``, ``next_sequence``). A ``run.*`` or ``approval.*`` event makes the worker read
  the run's status at once; the status document, never an event or message text, decides the
  action's status. A 404, an HTTP error, a frame that does not decode, or a stream that ends
  without a terminal event falls back to polling ``GET /v1/runs/{run_id}`` every 250 ms. Every
  other instance, and a restarted one, polls: a consumed stream is never opened again.
* ``queued`` and ``running`` keep the action ``running``. ``waiting_for_approval`` with a pending
  approval (the status document's ``approval`` object, or ``last_event`` =
  ``approval.request``) makes it ``waiting_for_approval`` and increments ``approval_generation``
  once per distinct pending approval (its ``request_id``, else the moment Hermes asked).
  ``completed``, ``failed`` and ``cancelled`` are copied with Hermes's ``output`` / ``error``;
  the first terminal write wins. Any other status fails closed to ``outcome_unknown``. A 404
  (Hermes restarted and forgot its in-memory runs) proves nothing: after ``NOT_FOUND_LIMIT``
  consecutive 404s the action becomes ``outcome_unknown``.

Resume (``POST /actions`` with ``resume``: a new command id pointing at a source action):

* The command (its id, the fingerprint of its canonical input, the approval generation it
  answers, the choice, its owner = this process's boot id, timestamps, state ``claimed``) is
  committed in one transaction before Hermes is contacted, and only if the source is
  ``waiting_for_approval`` and no other command answered that generation. Only the writer of
  that row sends ``POST /v1/runs/{run_id}/approval``.
* 2xx: ``applied``. A 4xx: ``rejected`` (nothing was applied). A 5xx, a transport error or a
  timeout: ``outcome_unknown``, and the source action becomes ``outcome_unknown``
  (``approval_outcome_unknown``).
* An exact replay of a known command returns its stored state and never sends again. A command
  still ``claimed`` whose owner process is gone (replaced, or silent for 5 s) or whose claim
  expired becomes ``outcome_unknown`` (command and source); it is never resent.

Cancel (``POST /actions/{id}/cancel``): ``cancel_requested`` is written durably (before the run
is bound, if need be). An action whose start was never claimed is ``cancelled`` at once: nothing
reached Hermes. Once a run is bound the action is ``cancelling`` and one claimed
``POST /v1/runs/{run_id}/stop`` is sent. ``stopping`` is progress. Hermes's ``completed`` or
``failed`` stays authoritative, and only Hermes's ``cancelled`` makes the action ``cancelled``.
Without a terminal state ``CANCEL_GRACE_SECONDS`` after the stop, the action is
``outcome_unknown`` (``cancellation_outcome_unknown``).

Configuration (environment): PORT, HERMES_URL, HERMES_API_KEY, CONNECTOR_DB, INSTANCE.
Python 3.9+, standard library only.
"""

import contextlib
import hashlib
import http.client
import json
import os
import queue
import re
import signal
import socket
import sqlite3
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import quote, unquote, urlsplit

NAME = "connector-keyed"
POLL_SECONDS = 0.25           # Hermes status polling without a stream (and while confirming)
STREAM_POLL_SECONDS = 2.0     # a safety-net status read while the event stream is healthy
CONFIRM_SECONDS = 3.0         # after a run.* / approval.* event, read the status every 250 ms
SCAN_SECONDS = 0.2            # how often the worker looks for actions to start or observe
WAIT_SECONDS = 0.1            # a waiter's pause while another live instance holds the claim
HEARTBEAT_SECONDS = 0.5       # each instance's liveness write
OWNER_STALE_SECONDS = 5.0     # a claim owner silent this long is gone
CLAIM_TTL_SECONDS = 60.0      # the start and approval claims' expiry (the contract's default)
START_TIMEOUT_SECONDS = 55.0  # below the claim window: a live owner always decides first
APPROVAL_TIMEOUT_SECONDS = 55.0
RESUME_ANSWER_SECONDS = 3.0   # how long POST /actions (resume) waits for Hermes's answer
READ_TIMEOUT_SECONDS = 10.0
STREAM_READ_TIMEOUT_SECONDS = 75.0  # Hermes sends `: keepalive` after 30 s of silence
CANCEL_GRACE_SECONDS = 15.0
NOT_FOUND_LIMIT = 40          # consecutive 404s (10 s at 250 ms) before outcome_unknown
MAX_EVENTS = 4096             # events followed per run; past it, polling
MAX_FRAME_BYTES = 1 << 20     # one SSE line
MAX_COMMANDS = 256            # resume commands per source action
MAX_BODY = 1 << 20
ACTION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}")
CHOICES = ("once", "session", "always", "deny")

TERMINAL = ("completed", "failed", "cancelled", "outcome_unknown")
OPEN = ("starting", "running", "waiting_for_approval", "cancelling")
BOUND = ("running", "waiting_for_approval", "cancelling")   # open with a run bound
LIVE_PROVIDER = ("queued", "running", "waiting_for_approval", "stopping")
FINAL_PROVIDER = ("completed", "failed", "cancelled")

SCHEMA = """
CREATE TABLE IF NOT EXISTS bindings (
    action_id           TEXT PRIMARY KEY,
    request_fingerprint TEXT NOT NULL,   -- sha256 of the objective
    objective           TEXT NOT NULL,
    session_id          TEXT NOT NULL,   -- aip-operator-<action_id>
    status              TEXT NOT NULL,   -- starting | running | waiting_for_approval | cancelling
                                         -- | completed | failed | cancelled | outcome_unknown
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
CREATE TABLE IF NOT EXISTS approval_commands (
    action_id           TEXT PRIMARY KEY,  -- the resume command's own action id
    source_action_id    TEXT NOT NULL,
    fingerprint         TEXT NOT NULL,     -- sha256 of the canonical resume input
    approval_generation INTEGER NOT NULL,  -- the source's generation it answers
    approval_key        TEXT NOT NULL,     -- the pending approval it answers
    request_id          TEXT,              -- Hermes's request_id for it, when Hermes gave one
    choice              TEXT NOT NULL,     -- once | session | always | deny
    resolve_all         INTEGER NOT NULL,
    state               TEXT NOT NULL,     -- claimed | applied | rejected | outcome_unknown
    claim_boot          TEXT NOT NULL,     -- the owner: boot id of the process that sends it
    claim_instance      TEXT NOT NULL,
    claimed_at          REAL NOT NULL,
    claim_expires_at    REAL NOT NULL,
    answer              TEXT,              -- JSON: what Hermes answered
    error               TEXT,              -- JSON
    created_at          REAL NOT NULL,
    updated_at          REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS approval_commands_source ON approval_commands (source_action_id, approval_generation);
CREATE INDEX IF NOT EXISTS approval_commands_state ON approval_commands (state);
"""

# Columns added to `bindings` after its first version: added in place to an older store.
BINDING_COLUMNS = (
    ("cancel_requested", "INTEGER NOT NULL DEFAULT 0"),
    ("cancel_requested_at", "REAL"),
    ("stop_claim_boot", "TEXT"),       # the one instance that sends the stop
    ("stop_claimed_at", "REAL"),       # the cancellation grace window runs from here
    ("stop_answer", "TEXT"),           # JSON: what Hermes answered the stop
    ("approval_generation", "INTEGER NOT NULL DEFAULT 0"),
    ("pending_approval_key", "TEXT"),  # the last distinct pending approval seen
    ("pending_approval", "TEXT"),      # JSON, redacted: the approval waiting now
    ("last_event", "TEXT"),            # the last event name followed (message.delta aside)
    ("next_sequence", "INTEGER NOT NULL DEFAULT 0"),  # events followed so far
)

INSTANCE = os.environ.get("INSTANCE", "-")
BOOT = uuid.uuid4().hex
OWNER = f"{INSTANCE}:{os.getpid()}:{BOOT[:8]}"


def log(msg):
    print(f"{NAME}[{OWNER}] {msg}", flush=True)


def now():
    return time.time()


def fingerprint(objective):
    return hashlib.sha256(objective.encode("utf-8")).hexdigest()


def resume_fingerprint(source_action_id, choice, resolve_all):
    canonical = json.dumps(
        {"resume": {"choice": choice, "resolve_all": resolve_all, "source_action_id": source_action_id}},
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def decoded(x):
    return None if x is None else json.loads(x)


REDACTED_APPROVAL_FIELDS = ("request_id", "description", "pattern_key", "pattern_keys", "choices", "allow_permanent", "allow_session")


def redact_approval(fields):
    """What is kept of a pending approval: its identity and the question, not the command."""
    out = {}
    for k in REDACTED_APPROVAL_FIELDS:
        v = (fields or {}).get(k)
        if isinstance(v, str):
            out[k] = v[:500]
        elif isinstance(v, (bool, int)) or (isinstance(v, list) and all(isinstance(x, str) for x in v)):
            out[k] = v
    return out


# ---------- the store ----------


class Store:
    """The durable bindings, their resume commands, their history and the instances'
    heartbeats, in one SQLite file shared by every instance (WAL, one connection per operation,
    writes under BEGIN IMMEDIATE)."""

    def __init__(self, path):
        self.path = path
        d = os.path.dirname(os.path.abspath(path))
        os.makedirs(d, exist_ok=True)
        with self.conn() as c:
            c.execute("PRAGMA journal_mode=WAL")
            c.executescript(SCHEMA)
            with self.tx(c):
                have = {r["name"] for r in c.execute("PRAGMA table_info(bindings)")}
                for name, decl in BINDING_COLUMNS:
                    if name not in have:
                        c.execute(f"ALTER TABLE bindings ADD COLUMN {name} {decl}")

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

    def record(self, action_id, event, **detail):
        with self.conn() as c, self.tx(c):
            self.note(c, action_id, event, **detail)

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
            if c.execute("SELECT 1 FROM approval_commands WHERE action_id = ?", (action_id,)).fetchone():
                raise Collision(None)  # the id names a resume command
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
                    "SELECT action_id FROM bindings WHERE status IN (?, ?, ?, ?) ORDER BY created_at", OPEN
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
                " WHERE action_id = ? AND status = 'starting' AND run_id IS NULL AND claim_id IS NULL"
                " AND cancel_requested = 0",
                (claim_id, OWNER, BOOT, t, t + CLAIM_TTL_SECONDS, t, action_id),
            ).rowcount
            if n != 1:
                return None
            self.note(c, action_id, "start_claimed", claim_id=claim_id, expires_at=t + CLAIM_TTL_SECONDS)
        return claim_id

    def bind(self, action_id, claim_id, run_id, answer):
        """Binds the run the claim's start created (``cancelling`` if a cancellation came in
        meanwhile). Also accepted on an `outcome_unknown` binding whose recorded claim is this
        one: the reply answers exactly that attempt (a late, authenticated response is evidence;
        it starts nothing)."""
        with self.conn() as c, self.tx(c):
            n = c.execute(
                "UPDATE bindings SET run_id = ?, error = NULL, claim_id = NULL,"
                " status = CASE WHEN cancel_requested = 1 THEN 'cancelling' ELSE 'running' END,"
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

    def events(self, action_id, run_id, names):
        """Events followed on the run's stream: the sequence advances by one per event."""
        named = [n for n in names if n != "message.delta"]
        with self.conn() as c, self.tx(c):
            n = c.execute(
                "UPDATE bindings SET next_sequence = next_sequence + ?, last_event = COALESCE(?, last_event),"
                " updated_at = ? WHERE action_id = ? AND run_id = ? AND status IN (?, ?, ?)",
                (len(names), named[-1] if named else None, now(), action_id, run_id, *BOUND),
            ).rowcount
            if n == 1:
                for name in named:
                    self.note(c, action_id, "event", run_id=run_id, name=name)
            r = c.execute("SELECT next_sequence FROM bindings WHERE action_id = ?", (action_id,)).fetchone()
        return r["next_sequence"] if r else 0

    def observed(self, action_id, run_id, doc, hint):
        """A live (non-terminal) status document of the bound run: the action's status, its
        pending approval and approval generation follow it. `hint` is the last approval.request
        event followed on the stream, if any (its redacted fields describe the approval)."""
        st = doc.get("status")
        approval = doc.get("approval") if isinstance(doc.get("approval"), dict) else None
        pending = st == "waiting_for_approval" and (approval is not None or doc.get("last_event") == "approval.request")
        key = fields = None
        if pending:
            rid = (approval or {}).get("request_id")
            key = f"request:{rid}" if isinstance(rid, str) and rid else f"asked_at:{doc.get('updated_at')}"
            fields = redact_approval(approval or hint or {})
            fields["key"] = key
        with self.conn() as c, self.tx(c):
            r = c.execute(
                "SELECT * FROM bindings WHERE action_id = ? AND run_id = ? AND status IN (?, ?, ?)",
                (action_id, run_id, *BOUND),
            ).fetchone()
            if r is None:
                return None
            status, gen = r["status"], r["approval_generation"]
            sets = {}
            if pending and key != r["pending_approval_key"]:
                gen += 1
                sets.update(approval_generation=gen, pending_approval_key=key, pending_approval=json.dumps(fields))
                if status != "cancelling":
                    status = "waiting_for_approval"
                self.note(c, action_id, "approval_requested", run_id=run_id, approval_generation=gen, approval=fields)
            elif pending:
                # The same approval still shows; a decision already given for it (the status read
                # may predate it) does not bring the action back to waiting.
                answered = c.execute(
                    "SELECT 1 FROM approval_commands WHERE source_action_id = ? AND approval_generation = ?"
                    " AND state != 'rejected'",
                    (action_id, gen),
                ).fetchone()
                if status == "running" and not answered:
                    status = "waiting_for_approval"
            else:
                if status == "waiting_for_approval":
                    status = "running"
                if r["pending_approval"] is not None:
                    sets["pending_approval"] = None
            if status != r["status"]:
                sets["status"] = status
            if r["provider_status"] != st or r["not_found"] != 0:
                sets.update(provider_status=st, not_found=0)
            if sets:
                sets["updated_at"] = now()
                cols = ", ".join(f"{k} = ?" for k in sets)
                c.execute(f"UPDATE bindings SET {cols} WHERE action_id = ?", (*sets.values(), action_id))
                if r["provider_status"] != st or status != r["status"]:
                    self.note(c, action_id, "observed", run_id=run_id, provider_status=st, status=status)
            return status

    def not_found(self, action_id, run_id, count):
        with self.conn() as c, self.tx(c):
            c.execute(
                "UPDATE bindings SET not_found = ?, updated_at = ? WHERE action_id = ? AND run_id = ?"
                " AND status IN (?, ?, ?) AND not_found != ?",
                (count, now(), action_id, run_id, *BOUND, count),
            )

    def finish(self, action_id, run_id, status, output, error, evidence):
        """The first terminal write wins; only an open binding of this run is settled."""
        with self.conn() as c, self.tx(c):
            n = c.execute(
                "UPDATE bindings SET status = ?, output = ?, error = ?, provider_status = ?,"
                " pending_approval = NULL, updated_at = ?"
                " WHERE action_id = ? AND run_id = ? AND status IN (?, ?, ?)",
                (status, json.dumps(output), json.dumps(error), evidence.get("status"), now(), action_id, run_id, *BOUND),
            ).rowcount
            if n == 1:
                self.note(c, action_id, "settled", run_id=run_id, status=status, evidence=evidence)
        return n == 1

    # -- cancellation --

    def cancel(self, action_id):
        """Records the cancellation intent. Returns (what, row): `unknown`, `command` (the id
        names a resume command), `terminal`, `already`, `cancelled` (never started) or
        `requested`."""
        t = now()
        with self.conn() as c, self.tx(c):
            r = c.execute("SELECT * FROM bindings WHERE action_id = ?", (action_id,)).fetchone()
            if r is None:
                cmd = c.execute("SELECT 1 FROM approval_commands WHERE action_id = ?", (action_id,)).fetchone()
                return ("command" if cmd else "unknown"), None
            if r["status"] in TERMINAL:
                return "terminal", r
            if r["cancel_requested"]:
                return "already", r
            if r["status"] == "starting" and r["claim_id"] is None:
                # No claim was ever committed, so no start ever left: it never will.
                err = {"code": "cancelled_before_start", "reason": "cancelled before its run was started"}
                c.execute(
                    "UPDATE bindings SET status = 'cancelled', cancel_requested = 1, cancel_requested_at = ?,"
                    " error = ?, updated_at = ? WHERE action_id = ?",
                    (t, json.dumps(err), t, action_id),
                )
                self.note(c, action_id, "cancelled_before_start")
                what = "cancelled"
            else:
                # A claimed start goes on; its run, once bound, is stopped.
                status = "starting" if r["status"] == "starting" else "cancelling"
                c.execute(
                    "UPDATE bindings SET status = ?, cancel_requested = 1, cancel_requested_at = ?, updated_at = ?"
                    " WHERE action_id = ?",
                    (status, t, t, action_id),
                )
                self.note(c, action_id, "cancel_requested", status=status, run_id=r["run_id"])
                what = "requested"
            return what, c.execute("SELECT * FROM bindings WHERE action_id = ?", (action_id,)).fetchone()

    def claim_stop(self, action_id):
        """The compare-and-set stop claim: the row if this instance is the one to send the stop."""
        t = now()
        with self.conn() as c, self.tx(c):
            n = c.execute(
                "UPDATE bindings SET stop_claim_boot = ?, stop_claimed_at = ?, updated_at = ?"
                " WHERE action_id = ? AND status = 'cancelling' AND cancel_requested = 1"
                " AND run_id IS NOT NULL AND stop_claimed_at IS NULL",
                (BOOT, t, t, action_id),
            ).rowcount
            if n != 1:
                return None
            self.note(c, action_id, "stop_claimed")
            return c.execute("SELECT * FROM bindings WHERE action_id = ?", (action_id,)).fetchone()

    def stop_answered(self, action_id, answer):
        with self.conn() as c, self.tx(c):
            c.execute(
                "UPDATE bindings SET stop_answer = ?, updated_at = ? WHERE action_id = ?",
                (json.dumps(answer), now(), action_id),
            )
            self.note(c, action_id, "stop_answered", answer=answer)

    # -- resume commands --

    def command(self, action_id):
        with self.conn() as c:
            return c.execute("SELECT * FROM approval_commands WHERE action_id = ?", (action_id,)).fetchone()

    def claimed_commands(self):
        with self.conn() as c:
            return c.execute("SELECT * FROM approval_commands WHERE state = 'claimed'").fetchall()

    def claim_command(self, action_id, source_action_id, choice, resolve_all, fp):
        """Records a new resume command, claimed by this process, in one transaction. Returns
        (what, row): `claimed` (send it), `exists` (a known command), `collision` (the id names
        an action), `no_source`, `limit`, `not_waiting` (row: the source) or `answered` (row:
        the source; another command answered its pending approval)."""
        t = now()
        with self.conn() as c, self.tx(c):
            cmd = c.execute("SELECT * FROM approval_commands WHERE action_id = ?", (action_id,)).fetchone()
            if cmd is not None:
                return "exists", cmd
            if c.execute("SELECT 1 FROM bindings WHERE action_id = ?", (action_id,)).fetchone():
                return "collision", None
            src = c.execute("SELECT * FROM bindings WHERE action_id = ?", (source_action_id,)).fetchone()
            if src is None:
                return "no_source", None
            n = c.execute(
                "SELECT COUNT(*) AS n FROM approval_commands WHERE source_action_id = ?", (source_action_id,)
            ).fetchone()["n"]
            if n >= MAX_COMMANDS:
                return "limit", src
            if src["status"] != "waiting_for_approval" or not src["pending_approval_key"] or not src["run_id"]:
                return "not_waiting", src
            gen = src["approval_generation"]
            if c.execute(
                "SELECT 1 FROM approval_commands WHERE source_action_id = ? AND approval_generation = ?"
                " AND state != 'rejected'",
                (source_action_id, gen),
            ).fetchone():
                return "answered", src
            pending = decoded(src["pending_approval"]) or {}
            rid = pending.get("request_id") if isinstance(pending.get("request_id"), str) else None
            c.execute(
                "INSERT INTO approval_commands (action_id, source_action_id, fingerprint, approval_generation,"
                " approval_key, request_id, choice, resolve_all, state, claim_boot, claim_instance, claimed_at,"
                " claim_expires_at, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'claimed', ?, ?, ?, ?, ?, ?)",
                (action_id, source_action_id, fp, gen, src["pending_approval_key"], rid, choice,
                 1 if resolve_all else 0, BOOT, OWNER, t, t + CLAIM_TTL_SECONDS, t, t),
            )
            detail = dict(resume_action_id=action_id, approval_generation=gen, choice=choice, resolve_all=resolve_all)
            self.note(c, source_action_id, "resume_claimed", **detail)
            self.note(c, action_id, "claimed", source_action_id=source_action_id, **detail)
            return "claimed", c.execute("SELECT * FROM approval_commands WHERE action_id = ?", (action_id,)).fetchone()

    def settle_command(self, action_id, state, answer, error):
        """A claimed command's end: `applied`, `rejected` or `outcome_unknown` (which makes its
        source `outcome_unknown` too). Only a command still `claimed` is settled."""
        t = now()
        with self.conn() as c, self.tx(c):
            cmd = c.execute("SELECT * FROM approval_commands WHERE action_id = ?", (action_id,)).fetchone()
            n = c.execute(
                "UPDATE approval_commands SET state = ?, answer = ?, error = ?, updated_at = ?"
                " WHERE action_id = ? AND state = 'claimed'",
                (state, json.dumps(answer), json.dumps(error), t, action_id),
            ).rowcount
            if n != 1:
                self.note(c, action_id, "settle_refused", state=state, answer=answer)
                return False
            src = cmd["source_action_id"]
            if state == "outcome_unknown":
                error = {"code": "approval_outcome_unknown", **(error or {})}
                c.execute("UPDATE approval_commands SET error = ? WHERE action_id = ?", (json.dumps(error), action_id))
            self.note(c, action_id, state, answer=answer, error=error)
            if state == "applied":
                c.execute(
                    "UPDATE bindings SET status = 'running', pending_approval = NULL, updated_at = ?"
                    " WHERE action_id = ? AND status = 'waiting_for_approval' AND approval_generation = ?",
                    (t, src, cmd["approval_generation"]),
                )
            elif state == "outcome_unknown":
                err = {**error, "resume_action_id": action_id}
                c.execute(
                    "UPDATE bindings SET status = 'outcome_unknown', error = ?, pending_approval = NULL, updated_at = ?"
                    " WHERE action_id = ? AND status IN (?, ?, ?, ?)",
                    (json.dumps(err), t, src, *OPEN),
                )
            self.note(c, src, f"resume_{state}", resume_action_id=action_id, answer=answer, error=error)
            return True

    def command_lost(self, cmd):
        """A `claimed` command whose owner can no longer decide it: its owner process is gone
        or its claim expired. Returns the reason (the command is then settled
        `outcome_unknown`), or None while the owner may still decide."""
        if cmd["state"] != "claimed":
            return None
        if now() >= cmd["claim_expires_at"]:
            reason = "claim_expired"
        elif cmd["claim_boot"] != BOOT and not self.alive(cmd["claim_boot"]):
            reason = "claim_owner_gone"
        else:
            return None
        if self.settle_command(cmd["action_id"], "outcome_unknown", None, {"reason": reason}):
            log(f"{cmd['action_id']}: resume command of {cmd['claim_instance']} lost its owner ({reason})"
                f" → outcome_unknown, with its source {cmd['source_action_id']}; it is never sent again")
        return reason


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

    def ok(self):
        return self.status is not None and 200 <= self.status < 300

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
        return self.call("GET", f"/v1/runs/{quote(run_id, safe='')}")

    def approval(self, run_id, body):
        return self.call("POST", f"/v1/runs/{quote(run_id, safe='')}/approval", body, timeout=APPROVAL_TIMEOUT_SECONDS)

    def stop(self, run_id):
        return self.call("POST", f"/v1/runs/{quote(run_id, safe='')}/stop", {})

    def events(self, run_id):
        return EventStream(self, run_id)


class EventStream:
    """One run's SSE stream, read by its own thread into a queue of ("event", name, data) and,
    last, ("end", reason, terminal_seen). `close()` shuts the socket, which ends the reader."""

    def __init__(self, hermes, run_id):
        self.hermes, self.run_id = hermes, run_id
        self.items = queue.Queue()
        self.lock = threading.Lock()
        self.sock = None
        self.closed = False
        threading.Thread(target=self.read, name=f"events-{run_id}", daemon=True).start()

    def close(self):
        with self.lock:
            self.closed = True
            sock = self.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def read(self):
        terminal = False
        reason = "ended_without_terminal_event"
        conn = None
        try:
            u = urlsplit(self.hermes.base)
            cls = http.client.HTTPSConnection if u.scheme == "https" else http.client.HTTPConnection
            conn = cls(u.hostname, u.port, timeout=STREAM_READ_TIMEOUT_SECONDS)
            conn.connect()
            with self.lock:
                self.sock = conn.sock
                if self.closed:
                    return
            conn.request(
                "GET",
                f"{u.path.rstrip('/')}/v1/runs/{quote(self.run_id, safe='')}/events",
                headers={"Authorization": f"Bearer {self.hermes.key}", "Accept": "text/event-stream"},
            )
            resp = conn.getresponse()
            if resp.status != 200:
                reason = f"http_{resp.status}"
                return
            if "text/event-stream" not in (resp.getheader("Content-Type") or ""):
                reason = "decode_error: not an event stream"
                return
            name, data = None, []
            while True:
                raw = resp.readline(MAX_FRAME_BYTES + 1)
                if not raw:
                    reason = "closed_after_terminal_event" if terminal else "ended_without_terminal_event"
                    return
                if len(raw) > MAX_FRAME_BYTES:
                    reason = "decode_error: frame too large"
                    return
                line = raw.decode("utf-8").rstrip("\r\n")
                if line == "":
                    if data:
                        text = "\n".join(data)
                        doc = json.loads(text)  # ValueError: a frame that does not decode
                        if not isinstance(doc, dict):
                            raise ValueError("event data is not an object")
                        ev = name or doc.get("event")
                        if not isinstance(ev, str) or not ev:
                            raise ValueError("event without a name")
                        if doc.get("run_id", self.run_id) != self.run_id:
                            raise ValueError("event of another run")
                        if ev in ("run.completed", "run.failed", "run.cancelled"):
                            terminal = True
                        self.items.put(("event", ev, doc))
                    name, data = None, []
                    continue
                if line.startswith(":"):
                    continue  # a comment: keepalive, `stream closed`
                field, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if field == "event":
                    name = value
                elif field == "data":
                    data.append(value)
        except (ValueError, UnicodeDecodeError) as e:
            reason = f"decode_error: {e}"
        except Exception as e:  # noqa: BLE001 - the stream broke: polling takes over
            reason = "closed" if self.closed else f"transport_error: {type(e).__name__}: {e}"
        finally:
            if conn is not None:
                with contextlib.suppress(Exception):
                    conn.close()
            self.items.put(("end", reason, terminal))


# ---------- the worker ----------


class Observer:
    """What one task knows of its action's run between status reads."""

    def __init__(self):
        self.not_found = 0
        self.hint = None          # the last approval.request event followed (its fields)
        self.next_poll = 0.0
        self.confirm_until = 0.0


class Worker(threading.Thread):
    """Finds open actions and gives each one a task thread in this process: start it (if this
    instance wins the claim), wait for another instance's claim, or observe its run. It also
    settles resume commands whose owner is gone."""

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
                for cmd in self.store.claimed_commands():
                    self.store.command_lost(cmd)
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
        obs = Observer()
        stream = None
        try:
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
                            stream = self.send_start(b, claim_id)
                            obs.next_poll = now() + (STREAM_POLL_SECONDS if stream else 0)
                        else:
                            self.stop.wait(WAIT_SECONDS)  # another instance won it (or a cancel)
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
                # A run is bound: stop it if asked, follow its stream, read its status.
                if b["cancel_requested"] and b["stop_claimed_at"] is None:
                    self.send_stop(action_id)
                    obs.next_poll = now()
                if stream is not None:
                    wait = max(0.0, min(POLL_SECONDS, obs.next_poll - now()))
                    if not self.follow(b, stream, obs, wait):
                        stream = None
                t = now()
                if t >= obs.next_poll:
                    self.poll(b, obs)
                    fast = stream is None or t < obs.confirm_until or b["status"] == "cancelling"
                    obs.next_poll = now() + (POLL_SECONDS if fast else STREAM_POLL_SECONDS)
                    b = self.store.get(action_id)
                    if b is not None and b["status"] == "cancelling":
                        self.grace(b, obs)
                if stream is None:
                    self.stop.wait(max(0.0, obs.next_poll - now()))
        finally:
            if stream is not None:
                stream.close()

    def follow(self, b, stream, obs, wait):
        """Takes what the event stream has (waiting up to `wait` for the first item). Returns
        False once the stream has ended: from then on the action is polled."""
        action_id, run_id = b["action_id"], b["run_id"]
        names, ended = [], None
        try:
            item = stream.items.get(timeout=wait) if wait > 0 else stream.items.get_nowait()
            while True:
                if item[0] == "end":
                    ended = item
                    break
                _, name, data = item
                names.append(name)
                if name == "approval.request":
                    obs.hint = data
                if name.startswith("run.") or name.startswith("approval."):
                    # The status document confirms what the event announces.
                    obs.next_poll = now()
                    obs.confirm_until = now() + CONFIRM_SECONDS
                item = stream.items.get_nowait()
        except queue.Empty:
            pass
        if names:
            seq = self.store.events(action_id, run_id, names)
            if seq >= MAX_EVENTS and ended is None:
                stream.close()
                ended = ("end", "event_limit", False)
                self.drain_end(stream)
        if ended is None:
            return True
        _, reason, terminal = ended
        if terminal:
            self.store.record(action_id, "stream_closed", run_id=run_id, reason=reason)
        else:
            self.store.record(action_id, "stream_fallback", run_id=run_id, reason=reason)
            log(f"{action_id}: event stream of {run_id} ended ({reason}); polling")
        obs.next_poll = now()
        return False

    @staticmethod
    def drain_end(stream):
        with contextlib.suppress(queue.Empty):
            while stream.items.get(timeout=1.0)[0] != "end":
                pass

    def send_start(self, b, claim_id):
        """Sends the claimed start; returns the bound run's event stream, if a run was bound."""
        action_id = b["action_id"]
        log(f"{action_id}: start claimed ({claim_id}); POST /v1/runs")
        a = self.hermes.start(action_id, b["objective"], b["session_id"])
        run_id = a.body.get("run_id") if isinstance(a.body, dict) else None
        if a.ok() and isinstance(run_id, str) and run_id:
            if self.store.bind(action_id, claim_id, run_id, a.describe()):
                log(f"{action_id}: started {run_id}; following its events")
                return self.hermes.events(run_id)
            log(f"{action_id}: started {run_id}, but the binding no longer holds this claim")
            return None
        if a.status is not None and 400 <= a.status < 500 and a.status != 409:
            # A definitive refusal before acceptance (409 is a replay signal on newer builds).
            err = {"code": "operator_start_rejected", "http_status": a.status, "provider": a.body}
            self.store.settle_start(action_id, claim_id, "failed", err, a.describe())
            log(f"{action_id}: start refused ({a.status}) → failed")
            return None
        if a.status is None:
            reason = "transport_error"
        elif 200 <= a.status < 300:
            reason = "started_without_run_id"
        else:
            reason = f"http_{a.status}"
        err = {"code": "operator_outcome_unknown", "reason": reason}
        self.store.settle_start(action_id, claim_id, "outcome_unknown", err, a.describe())
        log(f"{action_id}: start answer ambiguous ({reason}) → outcome_unknown; it is never sent again")
        return None

    def send_stop(self, action_id):
        """Sends the run's one stop, if this instance wins its claim. Whatever the answer, the
        status document decides the ending (or the grace window does)."""
        b = self.store.claim_stop(action_id)
        if b is None:
            return
        log(f"{action_id}: cancellation requested; POST /v1/runs/{b['run_id']}/stop")
        a = self.hermes.stop(b["run_id"])
        self.store.stop_answered(action_id, a.describe())
        said = a.body.get("status") if isinstance(a.body, dict) else None
        log(f"{action_id}: stop answered {a.status or a.transport} ({said or '-'}); waiting for a terminal status")

    def grace(self, b, obs):
        """A cancellation whose run has not ended CANCEL_GRACE_SECONDS after its stop."""
        since = b["stop_claimed_at"]
        if since is None or now() - since < CANCEL_GRACE_SECONDS:
            return
        evidence = {"source": "GET /v1/runs/{run_id}", "status": b["provider_status"], "grace_seconds": CANCEL_GRACE_SECONDS}
        err = {
            "code": "cancellation_outcome_unknown",
            "reason": "no terminal status within the grace window",
            "provider_status": b["provider_status"],
        }
        if self.store.finish(b["action_id"], b["run_id"], "outcome_unknown", None, err, evidence):
            log(f"{b['action_id']}: no terminal status {CANCEL_GRACE_SECONDS:.0f} s after the stop"
                f" (Hermes says {b['provider_status']!r}) → outcome_unknown")

    def poll(self, b, obs):
        """One status read of the bound run, written to the binding."""
        action_id, run_id = b["action_id"], b["run_id"]
        a = self.hermes.status(run_id)
        doc = a.body if isinstance(a.body, dict) else {}
        unknown_code = "cancellation_outcome_unknown" if b["cancel_requested"] else "operator_outcome_unknown"
        if a.status == 200 and doc.get("run_id", run_id) == run_id:
            obs.not_found = 0
            st = doc.get("status")
            if st in FINAL_PROVIDER:
                evidence = {"source": "GET /v1/runs/{run_id}", "status": st, "last_event": doc.get("last_event")}
                if self.store.finish(action_id, run_id, st, doc.get("output"), doc.get("error"), evidence):
                    log(f"{action_id}: {run_id} {st}")
                return
            if st in LIVE_PROVIDER:
                now_status = self.store.observed(action_id, run_id, doc, obs.hint)
                if now_status is not None and now_status != b["status"]:
                    log(f"{action_id}: {run_id} is {st} → {now_status}")
                return
            # Unmapped: fail closed, without inventing an ending.
            evidence = {"source": "GET /v1/runs/{run_id}", "status": st}
            err = {"code": unknown_code, "reason": f"unsupported_provider_status:{st}"}
            self.store.finish(action_id, run_id, "outcome_unknown", None, err, evidence)
            log(f"{action_id}: {run_id} reports unmapped status {st!r} → outcome_unknown")
            return
        if a.status == 404:
            # Hermes keeps runs in memory: a 404 says it forgot, not how the run ended.
            obs.not_found += 1
            self.store.not_found(action_id, run_id, obs.not_found)
            if obs.not_found >= NOT_FOUND_LIMIT:
                evidence = {"source": "GET /v1/runs/{run_id}", "status": None, "http_status": 404, "consecutive": obs.not_found}
                err = {"code": unknown_code, "reason": "run_not_found"}
                self.store.finish(action_id, run_id, "outcome_unknown", None, err, evidence)
                log(f"{action_id}: {run_id} not found {obs.not_found} times → outcome_unknown")
        # A 5xx, a 401, a transport error: no knowledge; keep asking.

    def send_approval(self, cmd, run_id):
        """Sends a claimed resume command's decision, once, and settles the command."""
        action_id = cmd["action_id"]
        try:
            body = {"choice": cmd["choice"]}
            if cmd["resolve_all"]:
                body["resolve_all"] = True
            if cmd["request_id"]:
                body["request_id"] = cmd["request_id"]
            log(f"{action_id}: resume claimed; POST /v1/runs/{run_id}/approval ({cmd['choice']})")
            a = self.hermes.approval(run_id, body)
            if a.ok():
                state, error = "applied", None
            elif a.status is not None and 400 <= a.status < 500:
                state = "rejected"
                error = {"code": "approval_rejected", "http_status": a.status, "provider": a.body}
            else:
                state = "outcome_unknown"
                error = {"reason": "transport_error" if a.status is None else f"http_{a.status}"}
            self.store.settle_command(action_id, state, a.describe(), error)
            log(f"{action_id}: approval answered {a.status or a.transport} → {state}")
        except Exception as e:  # noqa: BLE001 - the decision may have left: never resend
            self.store.settle_command(action_id, "outcome_unknown", None, {"reason": f"{type(e).__name__}"})
            log(f"{action_id}: approval call failed ({type(e).__name__}) → outcome_unknown")


# ---------- the HTTP API ----------


def view(b):
    return {
        "action_id": b["action_id"],
        "status": b["status"],
        "run_id": b["run_id"],
        "output": decoded(b["output"]),
        "error": decoded(b["error"]),
        "provider_status": b["provider_status"],
        "cancel_requested": bool(b["cancel_requested"]),
        "approval_generation": b["approval_generation"],
        "pending_approval": decoded(b["pending_approval"]),
        "last_event": b["last_event"],
        "next_sequence": b["next_sequence"],
    }


def command_view(cmd, src):
    return {
        "action_id": cmd["action_id"],
        "source_action_id": cmd["source_action_id"],
        "command_status": cmd["state"],
        "choice": cmd["choice"],
        "resolve_all": bool(cmd["resolve_all"]),
        "approval_generation": cmd["approval_generation"],
        "status": src["status"] if src is not None else None,
        "run_id": src["run_id"] if src is not None else None,
        "error": decoded(cmd["error"]),
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

    def error_reply(self, status, code, message, **more):
        self.reply(status, {"error": {"code": code, "message": message}, **more})

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
            cmd = app.store.command(action_id) if b is None else None
            if b is None and cmd is None:
                return self.error_reply(404, "not_found", f"no action {action_id!r}")
            if m.group(2):
                return self.reply(200, {"action_id": action_id, "history": app.store.history(action_id)})
            if cmd is not None:
                return self.reply(200, command_view(cmd, app.store.get(cmd["source_action_id"])))
            return self.reply(200, view(b))
        self.error_reply(404, "not_found", "no such route")

    def do_POST(self):
        path = urlsplit(self.path).path
        try:
            n = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            n = -1
        if n < 0 or n > MAX_BODY:
            self.close_connection = True  # the body is left unread
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
        action_id = req.get("action_id")
        if not isinstance(action_id, str) or not ACTION_ID.fullmatch(action_id):
            return self.error_reply(400, "bad_request", "action_id: 1-200 of [A-Za-z0-9._:-], starting alphanumeric")
        if "resume" in req:
            if "objective" in req:
                return self.error_reply(400, "bad_request", "send exactly one of objective and resume")
            return self.resume(action_id, req["resume"])
        return self.submit(action_id, req.get("objective"))

    def submit(self, action_id, objective):
        app = self.server.app
        if not isinstance(objective, str) or not objective.strip():
            return self.error_reply(400, "bad_request", "objective: a non-empty string")
        try:
            created, b = app.store.submit(action_id, objective)
        except Collision as c:
            log(f"{action_id}: submitted again with another input → 409")
            more = {"action": view(c.row)} if c.row is not None else {}
            return self.error_reply(409, "idempotency_collision", "this action_id is bound to another input", **more)
        if created:
            log(f"{action_id}: bound (starting)")
            app.worker.wake.set()
            return self.reply(202, view(b))
        return self.reply(200, view(b))

    def resume(self, action_id, spec):
        app = self.server.app
        if not isinstance(spec, dict):
            return self.error_reply(400, "bad_request", "resume: an object {source_action_id, choice, resolve_all?}")
        source, choice, resolve_all = spec.get("source_action_id"), spec.get("choice"), spec.get("resolve_all", False)
        unknown = sorted(set(spec) - {"source_action_id", "choice", "resolve_all"})
        if unknown:
            return self.error_reply(400, "bad_request", f"resume: unknown field(s) {', '.join(unknown)}")
        if not isinstance(source, str) or not ACTION_ID.fullmatch(source):
            return self.error_reply(400, "bad_request", "resume.source_action_id: an action id")
        if choice not in CHOICES:
            return self.error_reply(400, "invalid_approval_choice", "resume.choice: one of once, session, always, deny")
        if not isinstance(resolve_all, bool):
            return self.error_reply(400, "bad_request", "resume.resolve_all: a boolean")
        if source == action_id:
            return self.error_reply(400, "bad_request", "a resume command needs its own action_id")
        fp = resume_fingerprint(source, choice, resolve_all)
        cmd = app.store.command(action_id)
        if cmd is not None:
            return self.known_command(cmd, fp)
        src = app.store.get(source)
        if src is not None and src["status"] in BOUND and src["run_id"]:
            # What is pending at Hermes now, not at the worker's last look: an approval the worker
            # has not seen yet, or a newer one than the store knows.
            app.worker.poll(src, Observer())
        what, row = app.store.claim_command(action_id, source, choice, resolve_all, fp)
        if what == "exists":
            return self.known_command(row, fp)
        if what == "collision":
            return self.error_reply(409, "idempotency_collision", "this action_id names an action, not a resume command")
        if what == "no_source":
            return self.error_reply(404, "source_not_found", f"no action {source!r}")
        if what == "limit":
            return self.error_reply(409, "approval_command_limit", f"{MAX_COMMANDS} resume commands for this action already", action=view(row))
        if what == "not_waiting":
            return self.error_reply(409, "source_not_waiting_for_approval", "the source action waits for no approval", action=view(row))
        if what == "answered":
            return self.error_reply(409, "approval_already_answered", "another resume command answered this approval", action=view(row))
        src = app.store.get(source)
        log(f"{action_id}: resume of {source} claimed (generation {row['approval_generation']}, {choice})")
        sender = threading.Thread(target=app.worker.send_approval, args=(row, src["run_id"]), name=f"resume-{action_id}", daemon=True)
        sender.start()
        sender.join(RESUME_ANSWER_SECONDS)
        cmd = app.store.command(action_id)
        return self.reply(202 if cmd["state"] == "claimed" else 200, command_view(cmd, app.store.get(source)))

    def known_command(self, cmd, fp):
        """A resume command already recorded: its stored state. It is never sent again."""
        app = self.server.app
        if cmd["fingerprint"] != fp:
            log(f"{cmd['action_id']}: resume command submitted again with another input → 409")
            return self.error_reply(409, "idempotency_collision", "this resume action_id is bound to another input")
        if app.store.command_lost(cmd):
            cmd = app.store.command(cmd["action_id"])
        log(f"{cmd['action_id']}: resume command replayed ({cmd['state']}); nothing is sent")
        return self.reply(200, command_view(cmd, app.store.get(cmd["source_action_id"])))

    def cancel(self, action_id):
        app = self.server.app
        what, b = app.store.cancel(action_id)
        if what == "unknown":
            return self.error_reply(404, "not_found", f"no action {action_id!r}")
        if what == "command":
            return self.error_reply(409, "not_cancellable", "a resume command is not cancelled; cancel its source action")
        if what in ("terminal", "cancelled"):
            if what == "cancelled":
                log(f"{action_id}: cancelled before its start was claimed; nothing reached Hermes")
            return self.reply(200, view(b))
        if what == "requested":
            log(f"{action_id}: cancellation requested ({b['status']})")
            if b["run_id"]:
                threading.Thread(target=app.worker.send_stop, args=(action_id,), name=f"stop-{action_id}", daemon=True).start()
            app.worker.wake.set()
        return self.reply(202, view(b))


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
