#!/usr/bin/env python3
"""shop-keyed: a small shop that charges each order at most once, and keeps a record that shows it.

An order is taken over HTTP, queued as a job in SQLite, and charged by a worker thread that
creates a confirmed Stripe PaymentIntent through the official SDK. The job queue retries a job
whose worker died (its lease expired), so the same order can come back to a worker more than
once; what keeps it to one charge:

* the Idempotency-Key is derived from the order (``order-<order_id>``), never random, so the one
  create an order gets is attributable to it, by whichever instance sent it;
* before the create leaves, the order is committed as ``charging`` (entered) with that key, in
  the same transaction as the record of its binding and its entry; only the job's current lease
  holder, at the generation it claimed, may do so, and only from ``queued``;
* an order is entered at most once, and an entered order is never created again: not by the
  SDK (``max_network_retries=0``), not by a restarted or second instance, not under the same key
  ("a provider idempotency key is not permission for a second attempt", AOC §4.10). A job that
  finds its order ``charging`` only asks the provider what became of it;
* an answer whose outcome is ambiguous (a connection error, a 5xx, a 409 while the first request
  is still in flight, any unexpected 4xx) is reconciled from the provider's own records (search
  by ``metadata['order_id']``, a consistent listing, then retrieve); without evidence the order
  stays ``charging`` and the job is retried later. It is never marked ``paid`` unless Stripe says
  ``succeeded``, and never failed from an HTTP status class alone;
* after 24 h without the provider's word the service stops asking on its own: the order becomes
  ``unknown`` for a human (its record stays unresolved).

The record (``GET /orders/{order_id}/aoc``): every state change of an order is recorded in
``aoc_entries`` in the same transaction as the change itself, append-only, in this service's own
words, and served in the shape of aocheck's ``state`` answer (docs/sut-protocol.md, "`state` and
the evidence envelope"): the history, each entry mapped onto AOC §4.4's distinctions, and the
AOC §7 report folded from it. The executor generation is the job's claim count: the claim that
enters an order binds it under its generation, and a later claim that works the order records
that it took it over (a higher generation) before it asks the provider anything.

Configuration (environment): PORT, STRIPE_API_BASE, STRIPE_SECRET_KEY, SHOP_DB, INSTANCE,
STRIPE_WEBHOOK_SECRET (optional). Python 3.9+, standard library plus ``stripe`` (the official SDK).
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
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

import stripe

NAME = "shop-keyed"
# The coordination domain the record names (one SQLite store, whichever instance serves it).
DOMAIN = "shop-keyed"
LEASE_SECONDS = 2.0
RENEW_SECONDS = 0.5
POLL_SECONDS = 0.1
MAX_BODY = 64 * 1024
MAX_AMOUNT = 99_999_999
# Without the provider's word for this long after entry, the order is handed to a human.
GIVE_UP_SECONDS = 24 * 3600
# How far before its entry a listing looks for the order's PaymentIntent.
LIST_MARGIN_SECONDS = 300
LIST_MAX_ITEMS = 1000
ORDER_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,199}")
CURRENCY = re.compile(r"[a-z]{3}")
TERMINAL = ("paid", "declined", "unknown")
SETTLED = ("paid", "declined")
CREATE = "POST /v1/payment_intents"

SCHEMA = """
CREATE TABLE IF NOT EXISTS orders (
    order_id        TEXT PRIMARY KEY,
    amount          INTEGER NOT NULL,
    currency        TEXT NOT NULL,
    state           TEXT NOT NULL,   -- queued | charging | paid | declined | unknown
    payment_intent  TEXT,
    idempotency_key TEXT,            -- set when the order enters the provider
    entered_at      REAL,            -- when it entered the provider
    last_attempt_at REAL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    detail          TEXT,
    created_at      REAL NOT NULL,
    updated_at      REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS jobs (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    order_id    TEXT NOT NULL UNIQUE REFERENCES orders(order_id),
    run_after   REAL NOT NULL,
    lease_owner TEXT,
    lease_until REAL NOT NULL DEFAULT 0,
    claims      INTEGER NOT NULL DEFAULT 0   -- the executor generation of the latest claim
);
CREATE INDEX IF NOT EXISTS jobs_due ON jobs (run_after);
-- The order's AOC record: append-only, each entry written in the transaction of the change it
-- records, never updated or deleted.
CREATE TABLE IF NOT EXISTS aoc_entries (
    order_id   TEXT NOT NULL REFERENCES orders(order_id),
    seq        INTEGER NOT NULL,   -- 0, 1, 2 … per order: the entry's index in the record
    type       TEXT NOT NULL,      -- the entry's own type (body.type)
    generation INTEGER,            -- body.generation, where the entry names one
    body       TEXT NOT NULL,      -- the entry, JSON
    PRIMARY KEY (order_id, seq)
);
"""

# ---------- the record's vocabulary ----------

# Which AOC §4.4 distinction each of this service's entry types stands for.
KINDS = {
    "order_taken": "created",
    "charge_bound": "prepared",
    "job_taken_over": "replaced",
    "charge_sent": "entered",
    "provider_answered": "observed",
    "intent_known": "acknowledged",
    "order_settled": "decided",
    "webhook_received": "other",
    "lookup_unanswered": "other",
    "handed_to_human": "other",
}
# What a provider answer says of the order, in this service's words, and in AOC's.
READINGS = {"paid": "success", "declined": "not_accepted", "in_progress": "accepted"}
OUTCOMES = {"paid": "success", "declined": "not_accepted"}
# This service's words for what it does not know, and aocheck's flag for each (the record's
# flag_map; None: no aocheck equivalent).
GAPS = {
    "no-reply": "transport",            # the request went out and no answer came back
    "status-only": "http_status_only",  # an error status, nothing about the charge
    "search-may-lag": "stale",          # search found nothing; its index lags behind
    "not-listed": "not_found",          # a consistent listing holds no intent of the order
    "not-found": "not_found",           # the provider says no such intent
    "listing-incomplete": "incomplete_listing",
    "status-unmapped": "unmapped",      # an intent status this service does not read
    "sources-disagree": "conflicting",  # two final answers that disagree
    "several-intents": None,            # more than one intent names the order
    "another-binding": None,            # an intent names the order with another amount or currency
}


def log(msg):
    print(f"{NAME}[{os.environ.get('INSTANCE', '-')}:{os.getpid()}] {msg}", flush=True)


def now_ms():
    return int(time.time() * 1000)


def canonical(value):
    """The JSON this service hashes: sorted keys, no whitespace, no floats in what it hashes."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def sha256(value):
    return "sha256:" + hashlib.sha256(canonical(value)).hexdigest()


def create_params(order):
    """The create request an order is bound to (everything but the key)."""
    return {
        "amount": order["amount"],
        "currency": order["currency"],
        "payment_method": "pm_card_visa",
        "payment_method_types": ["card"],
        "confirm": True,
        "metadata": {"order_id": order["order_id"]},
    }


def key_of(order_id):
    return f"order-{order_id}"


def binding_of(order):
    """The provider binding: the endpoint, the whole request and its Idempotency-Key."""
    return {"request": CREATE, "params": create_params(order), "idempotency_key": key_of(order["order_id"])}


class BadRequest(Exception):
    pass


# ---------- the store: orders, the durable job queue, and the record ----------


def append(c, order_id, body):
    """Appends one entry to an order's record inside the caller's transaction; its seq."""
    body = dict(body)
    body.setdefault("at", now_ms())
    seq = c.execute(
        "SELECT COALESCE(MAX(seq) + 1, 0) FROM aoc_entries WHERE order_id = ?", (order_id,)
    ).fetchone()[0]
    c.execute(
        "INSERT INTO aoc_entries (order_id, seq, type, generation, body) VALUES (?, ?, ?, ?, ?)",
        (order_id, seq, body["type"], body.get("generation"), canonical(body).decode()),
    )
    return seq


def held_generation(c, order_id):
    """The generation holding the order by its record (its latest binding or takeover)."""
    return c.execute(
        "SELECT MAX(generation) FROM aoc_entries WHERE order_id = ?"
        " AND type IN ('charge_bound', 'job_taken_over')",
        (order_id,),
    ).fetchone()[0]


def disagreeing(c, order_id):
    """Whether the provider's final answers on record disagree (then nothing is decided)."""
    seen = set()
    for (body,) in c.execute(
        "SELECT body FROM aoc_entries WHERE order_id = ? AND type = 'provider_answered'", (order_id,)
    ):
        r = json.loads(body).get("reading")
        if r in SETTLED:
            seen.add(r)
    return len(seen) > 1


class Store:
    def __init__(self, path):
        self.path = path

    def connect(self):
        conn = sqlite3.connect(self.path, timeout=10.0, isolation_level=None)
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA busy_timeout = 10000")
        conn.execute("PRAGMA synchronous = FULL")
        return conn

    @contextlib.contextmanager
    def tx(self):
        """One write transaction (BEGIN IMMEDIATE: writers queue up, readers are not blocked)."""
        conn = self.connect()
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        finally:
            conn.close()

    @contextlib.contextmanager
    def read(self):
        conn = self.connect()
        try:
            yield conn
        finally:
            conn.close()

    def init(self):
        # Several instances may start at once on a fresh file: retry while another sets it up.
        for attempt in range(50):
            try:
                conn = self.connect()
                try:
                    conn.execute("PRAGMA journal_mode = WAL")
                    conn.executescript(SCHEMA)
                finally:
                    conn.close()
                return
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) and "busy" not in str(e):
                    raise
                time.sleep(0.1 * (attempt + 1))
        raise RuntimeError(f"could not initialise {self.path}: the database stays locked")

    # -- orders --

    def submit(self, order_id, amount, currency):
        """(order, created): the existing order for this id, or a new one with its job."""
        now = time.time()
        with self.tx() as c:
            row = c.execute("SELECT * FROM orders WHERE order_id = ?", (order_id,)).fetchone()
            if row is not None:
                return dict(row), False
            c.execute(
                "INSERT INTO orders (order_id, amount, currency, state, created_at, updated_at)"
                " VALUES (?, ?, ?, 'queued', ?, ?)",
                (order_id, amount, currency, now, now),
            )
            c.execute("INSERT INTO jobs (order_id, run_after) VALUES (?, ?)", (order_id, now))
            append(c, order_id, {"type": "order_taken", "order_id": order_id, "amount": amount,
                                 "currency": currency})
            row = c.execute("SELECT * FROM orders WHERE order_id = ?", (order_id,)).fetchone()
            return dict(row), True

    def order(self, order_id):
        with self.read() as c:
            row = c.execute("SELECT * FROM orders WHERE order_id = ?", (order_id,)).fetchone()
            return dict(row) if row is not None else None

    def entries(self, order_id):
        """The order's record, oldest first: [(seq, body)]."""
        with self.read() as c:
            rows = c.execute(
                "SELECT seq, body FROM aoc_entries WHERE order_id = ? ORDER BY seq", (order_id,)
            ).fetchall()
        return [(r["seq"], json.loads(r["body"])) for r in rows]

    # -- jobs --

    def claim(self, owner):
        """Leases one due job whose lease is free or expired; None when there is none.

        The claim's generation is the job's claim count. A claim of an order already entered
        records, in the same transaction, that its generation takes the order over."""
        now = time.time()
        with self.tx() as c:
            row = c.execute(
                "SELECT j.id, j.order_id, j.claims, o.state FROM jobs j"
                " JOIN orders o ON o.order_id = j.order_id"
                " WHERE j.run_after <= ? AND j.lease_until < ? ORDER BY j.run_after, j.id LIMIT 1",
                (now, now),
            ).fetchone()
            if row is None:
                return None
            generation = row["claims"] + 1
            c.execute(
                "UPDATE jobs SET lease_owner = ?, lease_until = ?, claims = ? WHERE id = ?",
                (owner, now + LEASE_SECONDS, generation, row["id"]),
            )
            if row["state"] == "charging":
                held = held_generation(c, row["order_id"])
                if held is None or generation > held:
                    append(c, row["order_id"], {"type": "job_taken_over", "generation": generation,
                                                "from_generation": held, "owner": owner})
            return {"id": row["id"], "order_id": row["order_id"], "claims": generation}

    def renew(self, job_id, owner, generation):
        with self.tx() as c:
            cur = c.execute(
                "UPDATE jobs SET lease_until = ? WHERE id = ? AND lease_owner = ? AND claims = ?",
                (time.time() + LEASE_SECONDS, job_id, owner, generation),
            )
            return cur.rowcount == 1

    def enter(self, job, owner, order):
        """Records, before the create leaves, that the order enters the provider: the binding
        and the entry, with the order's move from ``queued`` to ``charging``, in one transaction.

        Only the job's current lease holder at the generation it claimed may do so, and only
        once per order. Returns (order, attempt), or None when the lease or the generation moved
        on or the order is no longer queued."""
        now = time.time()
        oid, generation = order["order_id"], job["claims"]
        key = key_of(oid)
        with self.tx() as c:
            held = c.execute(
                "SELECT 1 FROM jobs WHERE id = ? AND lease_owner = ? AND lease_until >= ? AND claims = ?",
                (job["id"], owner, now, generation),
            ).fetchone()
            if held is None:
                return None
            cur = c.execute(
                "UPDATE orders SET state = 'charging', idempotency_key = ?, entered_at = ?,"
                " last_attempt_at = ?, attempts = attempts + 1, updated_at = ?"
                " WHERE order_id = ? AND state = 'queued'",
                (key, now, now, now, oid),
            )
            if cur.rowcount != 1:
                return None
            binding = binding_of(order)
            append(c, oid, {"type": "charge_bound", "generation": generation, "binding": binding,
                            "binding_digest": sha256(binding)})
            attempt = f"{key}/g{generation}"
            append(c, oid, {"type": "charge_sent", "generation": generation, "attempt": attempt,
                            "owner": owner, "idempotency_key": key})
            row = c.execute("SELECT * FROM orders WHERE order_id = ?", (oid,)).fetchone()
            return dict(row), attempt

    def observe(self, order_id, body, payment_intent=None):
        """Records a provider answer (and, the first time an answer names the order's
        PaymentIntent, that it is known). Returns the answer's seq, or None when the order was
        settled meanwhile (nothing is recorded then: the record after a decision stays closed)."""
        with self.tx() as c:
            row = c.execute(
                "SELECT state, payment_intent FROM orders WHERE order_id = ?", (order_id,)
            ).fetchone()
            if row is None or row["state"] in SETTLED:
                return None
            seq = append(c, order_id, dict(body, type="provider_answered"))
            if payment_intent and row["payment_intent"] is None:
                c.execute(
                    "UPDATE orders SET payment_intent = ?, updated_at = ? WHERE order_id = ?",
                    (payment_intent, time.time(), order_id),
                )
                append(c, order_id, {"type": "intent_known", "payment_intent": payment_intent,
                                     "named_by": seq})
            return seq

    def note(self, order_id, body):
        """Records something else of an open order (its seq; None once it is settled)."""
        with self.tx() as c:
            row = c.execute("SELECT state FROM orders WHERE order_id = ?", (order_id,)).fetchone()
            if row is None or row["state"] in SETTLED:
                return None
            return append(c, order_id, body)

    def settle(self, order_id, state, payment_intent, detail, evidence, job_id=None):
        """Records the provider's verdict, resting on the answers at `evidence` (seqs): one of
        'decided', 'already' (settled before; nothing written) or 'disagree' (the answers on
        record disagree: nothing is decided). A verdict is the provider's own record, so it is
        written whoever holds the lease; a settled order is never rewritten. The job ends unless
        the answers disagree (`job_id`: the worker's own; None: any job no worker holds)."""
        now = time.time()
        with self.tx() as c:
            row = c.execute(
                "SELECT state, payment_intent FROM orders WHERE order_id = ?", (order_id,)
            ).fetchone()
            if row is None or row["state"] in SETTLED or row["state"] == "queued":
                result = "already"
            elif disagreeing(c, order_id):
                c.execute(
                    "UPDATE orders SET detail = ?, updated_at = ? WHERE order_id = ?",
                    (f"the provider's answers disagree; {detail}", now, order_id),
                )
                return "disagree"
            else:
                if payment_intent and row["payment_intent"] is None:
                    append(c, order_id, {"type": "intent_known", "payment_intent": payment_intent,
                                         "named_by": max(evidence)})
                c.execute(
                    "UPDATE orders SET state = ?, payment_intent = COALESCE(payment_intent, ?),"
                    " detail = ?, updated_at = ? WHERE order_id = ?",
                    (state, payment_intent, detail, now, order_id),
                )
                append(c, order_id, {"type": "order_settled", "state": state,
                                     "payment_intent": payment_intent, "evidence": sorted(evidence),
                                     "detail": detail})
                result = "decided"
            if job_id is not None:
                c.execute("DELETE FROM jobs WHERE id = ?", (job_id,))
            elif result == "decided":
                c.execute("DELETE FROM jobs WHERE order_id = ? AND lease_until < ?", (order_id, now))
            return result

    def give_up(self, job_id, order_id, detail):
        """No word from the provider for too long: the order is `unknown`, for a human; the
        record says so and stays unresolved (nothing is decided)."""
        with self.tx() as c:
            cur = c.execute(
                "UPDATE orders SET state = 'unknown', detail = ?, updated_at = ?"
                " WHERE order_id = ? AND state = 'charging'",
                (detail, time.time(), order_id),
            )
            if cur.rowcount == 1:
                append(c, order_id, {"type": "handed_to_human", "detail": detail})
            c.execute("DELETE FROM jobs WHERE id = ?", (job_id,))

    def retry_later(self, job_id, owner, delay, order_id=None, detail=None):
        """Gives the job back, due again after `delay` seconds (the order keeps its state)."""
        with self.tx() as c:
            c.execute(
                "UPDATE jobs SET lease_owner = NULL, lease_until = 0, run_after = ?"
                " WHERE id = ? AND lease_owner = ?",
                (time.time() + delay, job_id, owner),
            )
            if order_id is not None:
                c.execute(
                    "UPDATE orders SET detail = ?, updated_at = ? WHERE order_id = ?",
                    (detail, time.time(), order_id),
                )

    def drop_job(self, job_id):
        with self.tx() as c:
            c.execute("DELETE FROM jobs WHERE id = ?", (job_id,))

    # -- the record, served --

    def record(self, order_id):
        """The order's record in the shape of aocheck's `state` answer, or None."""
        if self.order(order_id) is None:
            return None
        return render(order_id, self.entries(order_id))


def render(order_id, rows):
    """The envelope around each entry (its kind and the fields the kind carries) and the AOC §7
    report folded from the entries alone, so that it says exactly what the record holds."""
    entries, sources, gaps, readings = [], set(), [], set()
    generation, digest, outcome = None, None, None
    attempts, acknowledged = 0, False
    for seq, body in rows:
        t = body.get("type")
        env = {"kind": KINDS.get(t, "other"), "at": body["at"]}
        if t == "charge_bound":
            env.update(generation=body["generation"], binding_digest=body["binding_digest"])
            generation, digest = body["generation"], body["binding_digest"]
        elif t == "job_taken_over":
            env["generation"] = body["generation"]
            generation = body["generation"]
        elif t == "charge_sent":
            env.update(generation=body["generation"], attempt=body["attempt"])
            attempts += 1
        elif t == "intent_known":
            env["provider_ref"] = body["payment_intent"]
            acknowledged = True
        elif t == "provider_answered":
            env.update(source=body["source"], source_kind=body["asked"],
                       authenticated=bool(body.get("reply_received")))
            if body.get("attempt"):
                env["attempt"] = body["attempt"]
            if body.get("binding_digest"):
                env["binding_digest"] = body["binding_digest"]
            if body.get("reading") in READINGS:
                env["interpretation"] = READINGS[body["reading"]]
            if body.get("gaps"):
                env["flags"] = list(body["gaps"])
                gaps.extend(body["gaps"])
            if body.get("reading") in SETTLED:
                readings.add(body["reading"])
            sources.add(body["source"])
        elif t == "order_settled":
            env.update(outcome=OUTCOMES[body["state"]], evidence=list(body["evidence"]))
            outcome = OUTCOMES[body["state"]]
            gaps = []  # decided: the earlier gaps are history
        env["entry"] = dict(body, seq=seq)
        entries.append(env)
    disagree = len(readings) > 1
    if disagree:
        gaps.append("sources-disagree")
    if outcome is not None and not disagree:
        state = "resolved"
    elif attempts:
        state = "unresolved"
    else:
        state = "pending"
    report = {
        "occurrence": order_id,
        "domain": DOMAIN,
        "executor_generation": generation or 0,
        "binding_digest": digest,
        "state": state,
        "outcome": outcome if state == "resolved" else None,
        "provider_entry": "acknowledged" if acknowledged else ("entered" if attempts else "not_entered"),
        "authority": "consumed" if attempts else ("held" if digest else "none"),
        "entry_attempts": attempts,
        "evidence_sources": sorted(sources),
        "missing_knowledge": sorted(set(gaps)),
        "remedies": [],
    }
    return {"entries": entries, "report": report, "flag_map": dict(GAPS)}


class Lease:
    """Keeps a claimed job's lease alive from a thread of its own while the worker works."""

    def __init__(self, store, job, owner):
        self.store, self.job, self.owner = store, job, owner
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._renew, name=f"lease-{job['id']}", daemon=True)

    def _renew(self):
        while not self.done.wait(RENEW_SECONDS):
            try:
                if not self.store.renew(self.job["id"], self.owner, self.job["claims"]):
                    return  # lost: another worker has the job; its writes are checked anyway
            except sqlite3.Error as e:
                log(f"lease renewal of job {self.job['id']} failed: {e}")

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.thread.join()


# ---------- reading the provider ----------


def backoff(claims):
    return min(60.0, 0.25 * 2 ** min(claims, 8))


def describe(e):
    status = getattr(e, "http_status", None)
    kind = type(e).__name__
    msg = (getattr(e, "user_message", None) or str(e) or "").strip().splitlines()
    return f"{kind}{f' {status}' if status else ''}: {msg[0] if msg else ''}"[:300]


def order_of(pi):
    """The order a PaymentIntent was made for (its metadata[order_id]), or None."""
    md = pi["metadata"] if "metadata" in pi else None
    return md["order_id"] if md is not None and "order_id" in md else None


def intent_verdict(status):
    """The order state a PaymentIntent status proves, or None while it proves nothing final."""
    if status == "succeeded":
        return "paid"
    if status in ("requires_payment_method", "canceled"):
        return "declined"
    return None


def reading_of(status):
    """(reading, gaps) of an intent status: final, in progress, or not understood."""
    verdict = intent_verdict(status)
    if verdict is not None:
        return verdict, []
    if status in ("processing", "requires_capture", "requires_action", "requires_confirmation"):
        return "in_progress", []
    return None, ["status-unmapped"]


def field(obj, name):
    try:
        return obj[name]
    except (KeyError, TypeError):
        return None


def brief(pi):
    return {"id": field(pi, "id"), "status": field(pi, "status"), "amount": field(pi, "amount"),
            "currency": field(pi, "currency"), "order_id": order_of(pi)}


def bound_to(pi, order):
    """Whether an intent is the order's own charge: made for this order, amount and currency."""
    return (order_of(pi) == order["order_id"] and field(pi, "amount") == order["amount"]
            and field(pi, "currency") == order["currency"])


def error_reply(e):
    """What an error reply said (its status and error code), for the record."""
    body = (getattr(e, "json_body", None) or {}).get("error") or {}
    return {"http_status": getattr(e, "http_status", None), "error": body.get("type"),
            "code": body.get("code"), "message": (body.get("message") or str(e))[:200]}


class Provider:
    """The provider's answers about one order, each recorded as it comes in."""

    def __init__(self, store, client):
        self.store, self.client = store, client

    def failed(self, order, source, asked, e):
        """A lookup or listing that failed: an answer with an error status is recorded as such;
        one that got no answer at all is no observation of anything (recorded as such)."""
        oid = order["order_id"]
        if getattr(e, "http_status", None) is None:
            seq = self.store.note(oid, {"type": "lookup_unanswered", "source": source,
                                        "error": describe(e)})
            return seq is not None
        seq = self.store.observe(oid, {"source": source, "asked": asked, "reply_received": True,
                                       "reply": error_reply(e), "reading": None,
                                       "gaps": ["not-found" if e.http_status == 404 else "status-only"]})
        return seq is not None

    def search(self, order):
        """Search by metadata: (intent ids of the order, still open?)."""
        oid, source = order["order_id"], "stripe.payment_intents.search"
        try:
            res = self.client.v1.payment_intents.search(
                params={"query": f"metadata['order_id']:'{oid}'", "limit": 10}
            )
        except stripe.StripeError as e:
            return set(), self.failed(order, source, "listing", e)
        return self.listed(order, source, list(res.data), ["search-may-lag"], [])

    def listing(self, order):
        """The intents created since shortly before the entry, paged by hand (a page that says
        has_more with no items ends the walk: the SDK's auto-pager would index into it)."""
        oid, source = order["order_id"], "stripe.payment_intents.list"
        since = int((order["entered_at"] or time.time()) - LIST_MARGIN_SECONDS)
        params = {"created": {"gte": since}, "limit": 100}
        items, pages, gaps = [], 0, []
        while True:
            try:
                page = self.client.v1.payment_intents.list(params=params)
            except stripe.StripeError as e:
                if pages == 0:
                    return set(), self.failed(order, source, "listing", e)
                gaps.append("listing-incomplete")
                break
            pages += 1
            items.extend(page.data)
            if not page.has_more:
                break
            if not page.data or len(items) >= LIST_MAX_ITEMS:
                gaps.append("listing-incomplete")
                break
            params["starting_after"] = page.data[-1].id
        return self.listed(order, source, items, ["not-listed"], gaps)

    def listed(self, order, source, items, if_none, gaps):
        mine = [pi for pi in items if order_of(pi) == order["order_id"]]
        bound = [pi for pi in mine if bound_to(pi, order)]
        body = {"source": source, "asked": "listing", "reply_received": True,
                "reply": {"intents_seen": len(items), "of_this_order": [brief(pi) for pi in mine]}}
        reading, gaps = None, list(gaps)
        if len(bound) == 1:
            reading, more = reading_of(bound[0].status)
            gaps += more
            body["binding_digest"] = sha256(binding_of(order))
        elif not mine:
            gaps += if_none
        elif not bound:
            gaps.append("another-binding")
        else:
            gaps.append("several-intents")
        body.update(reading=reading, gaps=gaps)
        seq = self.store.observe(order["order_id"], body,
                                 payment_intent=bound[0].id if len(bound) == 1 else None)
        return {pi.id for pi in mine}, seq is not None

    def retrieve(self, order, pi_id, source="stripe.payment_intents.retrieve"):
        """Retrieves one intent: (seq, intent), (None, None) on no usable answer, or (False,
        None) when the order was settled meanwhile."""
        oid = order["order_id"]
        try:
            pi = self.client.v1.payment_intents.retrieve(pi_id)
        except stripe.StripeError as e:
            return (None if self.failed(order, source, "lookup", e) else False), None
        body = {"source": source, "asked": "lookup", "reply_received": True, "reply": brief(pi)}
        if bound_to(pi, order):
            reading, gaps = reading_of(pi.status)
            body.update(binding_digest=sha256(binding_of(order)), reading=reading, gaps=gaps)
            seq = self.store.observe(oid, body, payment_intent=pi.id)
        else:
            body.update(reading=None, gaps=["another-binding"])
            seq = self.store.observe(oid, body)
        if seq is None:
            return False, None
        return seq, (pi if bound_to(pi, order) else None)


# ---------- the worker ----------


class Worker(threading.Thread):
    def __init__(self, store, client, owner, stop):
        super().__init__(name="worker", daemon=True)
        self.store, self.client, self.owner, self.stop = store, client, owner, stop
        self.provider = Provider(store, client)
        self.running = threading.Event()

    def run(self):
        self.running.set()
        while not self.stop.is_set():
            try:
                job = self.store.claim(self.owner)
            except sqlite3.Error as e:
                log(f"claim failed: {e}")
                self.stop.wait(0.5)
                continue
            if job is None:
                self.stop.wait(POLL_SECONDS)
                continue
            with Lease(self.store, job, self.owner):
                try:
                    self.work(job)
                except Exception as e:  # a bug or a storage error: the job comes back later
                    log(f"job {job['id']} order={job['order_id']} failed: {e!r}")
                    with contextlib.suppress(sqlite3.Error):
                        self.store.retry_later(job["id"], self.owner, backoff(job["claims"]))

    def work(self, job):
        order = self.store.order(job["order_id"])
        if order is None or order["state"] in TERMINAL:
            self.store.drop_job(job["id"])
            return
        # An entered order is never created again: ask the provider what became of it.
        if order["state"] == "charging":
            self.reconcile(job, order, "resuming a charging order")
            return
        entered = self.store.enter(job, self.owner, order)
        if entered is None:
            return  # the lease or the generation moved on, or the order left `queued` meanwhile
        order, attempt = entered
        oid, key = order["order_id"], order["idempotency_key"]
        digest = sha256(binding_of(order))
        answer = {"source": "stripe.payment_intents.create", "asked": "response", "attempt": attempt,
                  "binding_digest": digest}
        try:
            pi = self.client.v1.payment_intents.create(
                params=create_params(order), options={"idempotency_key": key}
            )
        except stripe.CardError as e:
            # The provider's explicit decline, with the intent it declined.
            body = (e.json_body or {}).get("error") or {}
            pi_id = (body.get("payment_intent") or {}).get("id")
            code = body.get("decline_code") or e.code
            seq = self.store.observe(oid, dict(answer, reply_received=True, reply=error_reply(e),
                                               reading="declined", gaps=[]), payment_intent=pi_id)
            if seq is None:
                self.store.drop_job(job["id"])
                return
            self.decide(job, order, "declined", pi_id, f"card declined: {code}", [seq])
            return
        except stripe.StripeError as e:
            # 5xx, a dropped connection, 409 in flight, 429, 401, 400 …: the class of an error
            # says nothing of whether the charge happened. Record it, then ask the provider.
            received = getattr(e, "http_status", None) is not None
            seq = self.store.observe(oid, dict(answer, reply_received=received, reply=error_reply(e),
                                               reading=None,
                                               gaps=["status-only" if received else "no-reply"]))
            if seq is None:
                self.store.drop_job(job["id"])
                return
            self.reconcile(job, order, describe(e))
            return
        reading, gaps = reading_of(pi.status)
        seq = self.store.observe(oid, dict(answer, reply_received=True, reply=brief(pi),
                                           reading=reading, gaps=gaps), payment_intent=pi.id)
        if seq is None:
            self.store.drop_job(job["id"])
            return
        self.settle_intent(job, order, pi.id, pi.status, seq, "create")

    def decide(self, job, order, verdict, pi_id, detail, evidence):
        oid = order["order_id"]
        result = self.store.settle(oid, verdict, pi_id, detail, evidence, job_id=job["id"])
        if result == "disagree":
            log(f"charge order={oid} -> the provider's answers disagree; nothing decided")
            self.wait_or_give_up(job, order, "the provider's answers disagree")
        elif result == "decided":
            log(f"charge order={oid} key={order['idempotency_key']} -> {verdict} {pi_id} ({detail})")

    def settle_intent(self, job, order, pi_id, status, seq, source):
        verdict = intent_verdict(status)
        if verdict is None:
            log(f"charge order={order['order_id']} -> {pi_id} is {status}; checking again later")
            self.wait_or_give_up(job, order, f"{source}: intent {status}")
            return
        self.decide(job, order, verdict, pi_id, f"{source}: intent {status}", [seq])

    def wait_or_give_up(self, job, order, detail):
        oid = order["order_id"]
        entered = order["entered_at"] or time.time()
        if time.time() - entered > GIVE_UP_SECONDS:
            log(f"charge order={oid} -> unknown: no word from the provider for {GIVE_UP_SECONDS} s")
            self.store.give_up(job["id"], oid, f"no word from the provider: {detail}")
            return
        delay = backoff(job["claims"])
        log(f"charge order={oid} -> still charging ({detail}); retry in {delay:.2f}s")
        self.store.retry_later(job["id"], self.owner, delay, oid, detail)

    def reconcile(self, job, order, why):
        """Finds the order's PaymentIntent at the provider and settles only from its answer;
        without one, nothing is decided and the job comes back later."""
        p, oid = self.provider, order["order_id"]
        found = set()
        if order["payment_intent"]:
            found.add(order["payment_intent"])
        else:
            found, open_ = p.search(order)
            if not open_:
                self.store.drop_job(job["id"])
                return
            if not found:
                # Search is eventually consistent: an empty answer proves nothing. A listing is
                # consistent; look through the intents created since shortly before the entry.
                found, open_ = p.listing(order)
                if not open_:
                    self.store.drop_job(job["id"])
                    return
        intents = []
        for pi_id in sorted(found):
            seq, pi = p.retrieve(order, pi_id)
            if seq is False:
                self.store.drop_job(job["id"])
                return
            if pi is not None:
                intents.append((seq, pi))
        if len(intents) > 1:
            log(f"WARNING order={oid} has {len(intents)} PaymentIntents: {[x[1].id for x in intents]}")
        # A success anywhere is the answer; then anything still moving; then a decline.
        rank = {"paid": 0, None: 1, "declined": 2}
        intents.sort(key=lambda x: rank[intent_verdict(x[1].status)])
        if intents:
            seq, best = intents[0]
            self.settle_intent(job, order, best.id, best.status, seq, f"reconciled after {why}")
            return
        self.wait_or_give_up(job, order, f"{why}; no intent found yet")


# ---------- HTTP ----------


def order_view(o):
    return {"order_id": o["order_id"], "state": o["state"], "payment_intent": o["payment_intent"]}


def read_order(body):
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise BadRequest("the body is not JSON")
    if not isinstance(doc, dict):
        raise BadRequest("the body must be a JSON object")
    oid, amount, currency = doc.get("order_id"), doc.get("amount"), doc.get("currency")
    if not isinstance(oid, str) or not ORDER_ID.fullmatch(oid):
        raise BadRequest("order_id: 1 to 200 characters of A-Z a-z 0-9 . _ : -, starting alphanumeric")
    if not isinstance(amount, int) or isinstance(amount, bool) or not 1 <= amount <= MAX_AMOUNT:
        raise BadRequest(f"amount: an integer number of minor units, 1 to {MAX_AMOUNT}")
    if not isinstance(currency, str) or not CURRENCY.fullmatch(currency.lower()):
        raise BadRequest("currency: a three-letter ISO 4217 code such as usd")
    return oid, amount, currency.lower()


def confirm_event(store, provider, event_id, oid, pi_id):
    """A verified event about an open order: the service asks the provider for the intent and
    settles from that answer (the event itself is recorded, and is not the evidence)."""
    try:
        order = store.order(oid)
        if order is None or order["state"] not in ("charging", "unknown"):
            return
        seq, pi = provider.retrieve(order, pi_id)
        if not seq or pi is None:
            log(f"webhook {event_id} order={oid}: the provider did not confirm {pi_id}; the worker goes on")
            return
        verdict = intent_verdict(pi.status)
        if verdict is None:
            return
        result = store.settle(oid, verdict, pi.id, f"webhook {event_id}, confirmed: intent {pi.status}", [seq])
        log(f"webhook {event_id} order={oid} -> {verdict} {pi.id} ({result})")
    except (stripe.StripeError, sqlite3.Error) as e:
        log(f"webhook {event_id} order={oid}: confirmation failed: {describe(e)}")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = NAME
    store = None
    worker = None
    provider = None

    def send_json(self, status, doc):
        body = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_request(self, code="-", size="-"):
        log(f"{self.command} {self.path} {code}")

    def log_message(self, format, *args):  # the library's own chatter (malformed requests)
        sys.stderr.write(f"{NAME}: {format % args}\n")

    def do_GET(self):
        path = urlsplit(self.path).path
        try:
            if path == "/healthz":
                if self.worker.running.is_set() and self.worker.is_alive():
                    self.send_json(200, {"ok": True})
                else:
                    self.send_json(503, {"ok": False, "error": "the worker is not running"})
            elif path.startswith("/orders/") and path.endswith("/aoc") and path.count("/") == 3:
                rec = self.store.record(unquote(path[len("/orders/"):-len("/aoc")]))
                if rec is None:
                    self.send_json(404, {"error": "no such order"})
                else:
                    self.send_json(200, rec)
            elif path.startswith("/orders/") and path.count("/") == 2:
                o = self.store.order(unquote(path[len("/orders/"):]))
                if o is None:
                    self.send_json(404, {"error": "no such order"})
                else:
                    self.send_json(200, order_view(o))
            elif path == "/orders":
                self.send_json(405, {"error": "use POST /orders, GET /orders/{order_id} or GET /orders/{order_id}/aoc"})
            else:
                self.send_json(404, {"error": f"no route {path}"})
        except sqlite3.Error as e:
            self.send_json(503, {"error": f"storage: {e}"})

    def webhook(self):
        """POST /webhooks/stripe: a payment intent's state change, believed only when its
        Stripe-Signature verifies under our endpoint secret (a forged event changes nothing and
        is not recorded). A verified event about an open order makes the service retrieve the
        intent and settle from the provider's answer."""
        if not WEBHOOK_SECRET:
            return self.send_json(404, {"error": "no webhook endpoint configured"})
        try:
            length = int(self.headers.get("Content-Length") or "0")
        except ValueError:
            length = -1
        if not 0 < length <= MAX_BODY:
            self.close_connection = True
            return self.send_json(400, {"error": "a webhook is a JSON body with Content-Length"})
        payload = self.rfile.read(length)
        try:
            event = stripe.Webhook.construct_event(
                payload, self.headers.get("Stripe-Signature"), WEBHOOK_SECRET
            )
        except (stripe.SignatureVerificationError, ValueError) as e:
            log(f"webhook refused: {describe(e)}")
            return self.send_json(400, {"error": "the signature does not verify"})
        if event["type"] in ("payment_intent.succeeded", "payment_intent.payment_failed"):
            pi = event["data"]["object"]
            oid = order_of(pi)
            try:
                order = self.store.order(oid) if oid is not None else None
                if order is not None and order["state"] in ("charging", "unknown") and self.store.note(
                    oid, {"type": "webhook_received", "event": event["id"], "event_type": event["type"],
                          "payment_intent": pi["id"], "status": pi["status"], "signature_verified": True},
                ) is not None:
                    threading.Thread(
                        target=confirm_event, args=(self.store, self.provider, event["id"], oid, pi["id"]),
                        name=f"confirm-{event['id']}", daemon=True,
                    ).start()
                    log(f"webhook {event['id']} {event['type']} order={oid}: confirming with the provider")
                else:
                    log(f"webhook {event['id']} {event['type']} order={oid}: nothing to do")
            except sqlite3.Error as e:
                return self.send_json(503, {"error": f"storage: {e}"})
        self.send_json(200, {"received": True})

    def do_POST(self):
        path = urlsplit(self.path).path
        if path == "/webhooks/stripe":
            return self.webhook()
        if path != "/orders":
            return self.send_json(404 if not path.startswith("/orders") else 405, {"error": f"no route POST {path}"})
        try:
            length = int(self.headers.get("Content-Length") or "0")
        except ValueError:
            length = -1
        if not 0 < length <= MAX_BODY:
            self.close_connection = True
            return self.send_json(400, {"error": f"send a JSON body of 1 to {MAX_BODY} bytes with Content-Length"})
        body = self.rfile.read(length)
        try:
            oid, amount, currency = read_order(body)
            order, created = self.store.submit(oid, amount, currency)
        except BadRequest as e:
            return self.send_json(400, {"error": str(e)})
        except sqlite3.Error as e:
            return self.send_json(503, {"error": f"storage: {e}"})
        if not created and (order["amount"], order["currency"]) != (amount, currency):
            return self.send_json(409, {
                "error": "this order_id was submitted with another amount or currency",
                "order_id": oid, "state": order["state"],
            })
        self.send_json(202 if created else 200, {"order_id": oid, "state": order["state"]})


# ---------- main ----------


# The webhook endpoint's signing secret (optional: without it, no webhooks are accepted).
WEBHOOK_SECRET = os.environ.get("STRIPE_WEBHOOK_SECRET") or None


def config():
    env, missing = os.environ, []
    for name in ("PORT", "STRIPE_API_BASE", "STRIPE_SECRET_KEY", "SHOP_DB"):
        if not env.get(name):
            missing.append(name)
    if missing:
        sys.exit(f"{NAME}: set {', '.join(missing)} in the environment")
    try:
        port = int(env["PORT"])
    except ValueError:
        sys.exit(f"{NAME}: PORT must be a port number, not {env['PORT']!r}")
    return port, env["STRIPE_API_BASE"].rstrip("/"), env["STRIPE_SECRET_KEY"], env["SHOP_DB"]


def main():
    port, base, secret, db = config()
    owner = f"{os.environ.get('INSTANCE') or 'shop'}:{os.getpid()}"
    store = Store(db)
    store.init()
    # No SDK retries: a create that went out is never sent again (AOC §4.10), and a lookup that
    # failed is asked again by the next reconciliation.
    client = stripe.StripeClient(secret, base_addresses={"api": base}, max_network_retries=0)
    stop = threading.Event()
    worker = Worker(store, client, owner, stop)
    Handler.store, Handler.worker, Handler.provider = store, worker, Provider(store, client)
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    worker.start()
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True).start()
    log(f"listening http://127.0.0.1:{server.server_address[1]} owner={owner}")
    while not stop.wait(0.5):
        pass
    server.shutdown()
    server.server_close()
    # A job in the middle of a provider call is left to its lease: another worker resumes it.
    worker.join(timeout=2.0)
    log("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
