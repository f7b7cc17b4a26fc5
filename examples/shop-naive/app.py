#!/usr/bin/env python3
"""shop-naive: a small shop that charges each order, the way many real services do.

An order is taken over HTTP, queued as a job in SQLite, and charged by a worker thread that
creates a confirmed Stripe PaymentIntent through the official SDK (which retries a failed call up
to twice, reusing the Idempotency-Key it generated for that call). The order is marked ``paid``
once the call returns; if the call raises, the job is put back on the queue and charged again
later. A job whose worker died is claimed again by any instance when its lease expires.

Its defect, on purpose: no Idempotency-Key of its own. Each call gets a fresh random key from the
SDK, so a worker killed after the provider committed, or a 5xx that came after the commit, makes
the queue's next attempt a brand-new charge for the same order.

Configuration (environment): PORT, STRIPE_API_BASE, STRIPE_SECRET_KEY, SHOP_DB, INSTANCE.
Standard library plus ``stripe`` (the official SDK).
"""

import contextlib
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

NAME = "shop-naive"
LEASE_SECONDS = 2.0
RENEW_SECONDS = 0.5
POLL_SECONDS = 0.1
MAX_BODY = 64 * 1024
MAX_AMOUNT = 99_999_999
ORDER_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,199}")
CURRENCY = re.compile(r"[a-z]{3}")
TERMINAL = ("paid", "declined", "unknown")
MAX_ATTEMPTS = 10

SCHEMA = """
CREATE TABLE IF NOT EXISTS orders (
    order_id        TEXT PRIMARY KEY,
    amount          INTEGER NOT NULL,
    currency        TEXT NOT NULL,
    state           TEXT NOT NULL,   -- queued | charging | paid | declined | unknown
    payment_intent  TEXT,
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
    claims      INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS jobs_due ON jobs (run_after);
"""


def log(msg):
    print(f"{NAME}[{os.environ.get('INSTANCE', '-')}:{os.getpid()}] {msg}", flush=True)


class BadRequest(Exception):
    pass


# ---------- the store: orders and the durable job queue ----------


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
            row = c.execute("SELECT * FROM orders WHERE order_id = ?", (order_id,)).fetchone()
            return dict(row), True

    def order(self, order_id):
        with self.read() as c:
            row = c.execute("SELECT * FROM orders WHERE order_id = ?", (order_id,)).fetchone()
            return dict(row) if row is not None else None

    # -- jobs --

    def claim(self, owner):
        """Leases one due job whose lease is free or expired; None when there is none."""
        now = time.time()
        with self.tx() as c:
            row = c.execute(
                "SELECT id, order_id, claims FROM jobs"
                " WHERE run_after <= ? AND lease_until < ? ORDER BY run_after, id LIMIT 1",
                (now, now),
            ).fetchone()
            if row is None:
                return None
            c.execute(
                "UPDATE jobs SET lease_owner = ?, lease_until = ?, claims = claims + 1 WHERE id = ?",
                (owner, now + LEASE_SECONDS, row["id"]),
            )
            return {"id": row["id"], "order_id": row["order_id"], "claims": row["claims"] + 1}

    def renew(self, job_id, owner):
        with self.tx() as c:
            cur = c.execute(
                "UPDATE jobs SET lease_until = ? WHERE id = ? AND lease_owner = ?",
                (time.time() + LEASE_SECONDS, job_id, owner),
            )
            return cur.rowcount == 1

    def start_attempt(self, job_id, owner, order_id):
        """Marks the order as being charged by this job's lease holder; returns the order, or
        None when the lease was lost (another worker has the job)."""
        now = time.time()
        with self.tx() as c:
            held = c.execute(
                "SELECT 1 FROM jobs WHERE id = ? AND lease_owner = ? AND lease_until >= ?",
                (job_id, owner, now),
            ).fetchone()
            if held is None:
                return None
            c.execute(
                "UPDATE orders SET state = 'charging', last_attempt_at = ?,"
                " attempts = attempts + 1, updated_at = ?"
                " WHERE order_id = ? AND state IN ('queued', 'charging')",
                (now, now, order_id),
            )
            return dict(c.execute("SELECT * FROM orders WHERE order_id = ?", (order_id,)).fetchone())

    def settle(self, job_id, order_id, state, payment_intent, detail):
        """Records the outcome of the charge and ends the job."""
        with self.tx() as c:
            c.execute(
                "UPDATE orders SET state = ?, payment_intent = COALESCE(?, payment_intent),"
                " detail = ?, updated_at = ? WHERE order_id = ?",
                (state, payment_intent, detail, time.time(), order_id),
            )
            c.execute("DELETE FROM jobs WHERE id = ?", (job_id,))

    def requeue(self, job_id, owner, delay, order_id=None, detail=None):
        """Puts the job back on the queue, due again after `delay` seconds; the order with it."""
        with self.tx() as c:
            cur = c.execute(
                "UPDATE jobs SET lease_owner = NULL, lease_until = 0, run_after = ?"
                " WHERE id = ? AND lease_owner = ?",
                (time.time() + delay, job_id, owner),
            )
            if order_id is not None and cur.rowcount == 1:
                c.execute(
                    "UPDATE orders SET state = 'queued', detail = ?, updated_at = ?"
                    " WHERE order_id = ? AND state = 'charging'",
                    (detail, time.time(), order_id),
                )

    def settle_from_event(self, order_id, state, payment_intent, detail):
        """Records what a webhook event says of an order; its jobs that no worker holds end."""
        now = time.time()
        with self.tx() as c:
            cur = c.execute(
                "UPDATE orders SET state = ?, payment_intent = COALESCE(?, payment_intent),"
                " detail = ?, updated_at = ? WHERE order_id = ?",
                (state, payment_intent, detail, now, order_id),
            )
            if cur.rowcount and state in ("paid", "declined"):
                c.execute("DELETE FROM jobs WHERE order_id = ? AND lease_until < ?", (order_id, now))
            return cur.rowcount == 1

    def drop_job(self, job_id):
        with self.tx() as c:
            c.execute("DELETE FROM jobs WHERE id = ?", (job_id,))


class Lease:
    """Keeps a claimed job's lease alive from a thread of its own while the worker works."""

    def __init__(self, store, job_id, owner):
        self.store, self.job_id, self.owner = store, job_id, owner
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._renew, name=f"lease-{job_id}", daemon=True)

    def _renew(self):
        while not self.done.wait(RENEW_SECONDS):
            try:
                if not self.store.renew(self.job_id, self.owner):
                    return  # lost: another worker has the job
            except sqlite3.Error as e:
                log(f"lease renewal of job {self.job_id} failed: {e}")

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.thread.join()


# ---------- the worker ----------


def backoff(claims):
    return min(5.0, 0.25 * 2 ** min(claims, 5))


def describe(e):
    status = getattr(e, "http_status", None)
    kind = type(e).__name__
    msg = (getattr(e, "user_message", None) or str(e) or "").strip().splitlines()
    return f"{kind}{f' {status}' if status else ''}: {msg[0] if msg else ''}"[:300]


def intent_state(status):
    if status == "succeeded":
        return "paid"
    if status == "requires_payment_method":
        return "declined"
    return "unknown"


class Worker(threading.Thread):
    def __init__(self, store, client, owner, stop):
        super().__init__(name="worker", daemon=True)
        self.store, self.client, self.owner, self.stop = store, client, owner, stop
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
            with Lease(self.store, job["id"], self.owner):
                try:
                    self.work(job)
                except Exception as e:  # a bug or a storage error: the job comes back later
                    log(f"job {job['id']} order={job['order_id']} failed: {e!r}")
                    with contextlib.suppress(sqlite3.Error):
                        self.store.requeue(job["id"], self.owner, backoff(job["claims"]))

    def params(self, order):
        return {
            "amount": order["amount"],
            "currency": order["currency"],
            "payment_method": "pm_card_visa",
            "payment_method_types": ["card"],
            "confirm": True,
            "metadata": {"order_id": order["order_id"]},
        }

    def work(self, job):
        order = self.store.order(job["order_id"])
        if order is None or order["state"] in TERMINAL:
            self.store.drop_job(job["id"])
            return
        oid = order["order_id"]
        order = self.store.start_attempt(job["id"], self.owner, oid)
        if order is None or order["state"] != "charging":
            return  # the lease was lost, or the order was settled meanwhile
        try:
            # The SDK sends an Idempotency-Key of its own making and reuses it for its retries.
            pi = self.client.v1.payment_intents.create(params=self.params(order))
        except stripe.CardError as e:
            body = (e.json_body or {}).get("error") or {}
            pi_id = (body.get("payment_intent") or {}).get("id")
            code = body.get("decline_code") or e.code
            log(f"charge order={oid} -> declined {pi_id} ({code})")
            self.store.settle(job["id"], oid, "declined", pi_id, f"card declined: {code}")
            return
        except stripe.StripeError as e:
            if order["attempts"] >= MAX_ATTEMPTS:
                log(f"charge order={oid} -> unknown after {order['attempts']} attempts: {describe(e)}")
                self.store.settle(job["id"], oid, "unknown", None, describe(e))
                return
            delay = backoff(job["claims"])
            log(f"charge order={oid} -> {describe(e)}; queued again in {delay:.2f}s")
            self.store.requeue(job["id"], self.owner, delay, oid, describe(e))
            return
        state = intent_state(pi.status)
        log(f"charge order={oid} -> {state} {pi.id} ({pi.status})")
        self.store.settle(job["id"], oid, state, pi.id, f"intent {pi.status}")


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


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = NAME
    store = None
    worker = None

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
            elif path.startswith("/orders/") and path.count("/") == 2:
                o = self.store.order(unquote(path[len("/orders/"):]))
                if o is None:
                    self.send_json(404, {"error": "no such order"})
                else:
                    self.send_json(200, order_view(o))
            elif path == "/orders":
                self.send_json(405, {"error": "use POST /orders or GET /orders/{order_id}"})
            else:
                self.send_json(404, {"error": f"no route {path}"})
        except sqlite3.Error as e:
            self.send_json(503, {"error": f"storage: {e}"})

    def webhook(self):
        """POST /webhooks/stripe: applies a payment intent's state change from the event body
        (the signature is not checked: the tempting shortcut)."""
        try:
            length = int(self.headers.get("Content-Length") or "0")
        except ValueError:
            length = -1
        if not 0 < length <= MAX_BODY:
            self.close_connection = True
            return self.send_json(400, {"error": "a webhook is a JSON body with Content-Length"})
        try:
            event = json.loads(self.rfile.read(length))
            pi = event["data"]["object"]
            oid, kind = pi["metadata"]["order_id"], event["type"]
        except (ValueError, KeyError, TypeError):
            return self.send_json(400, {"error": "not an event"})
        verdict = {"payment_intent.succeeded": "paid", "payment_intent.payment_failed": "declined"}.get(kind)
        if verdict is not None:
            try:
                self.store.settle_from_event(oid, verdict, pi.get("id"), f"webhook {event.get('id')}")
            except sqlite3.Error as e:
                return self.send_json(503, {"error": f"storage: {e}"})
            log(f"webhook {event.get('id')} {kind} order={oid} -> {verdict}")
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
    client = stripe.StripeClient(secret, base_addresses={"api": base}, max_network_retries=2)
    stop = threading.Event()
    worker = Worker(store, client, owner, stop)
    Handler.store, Handler.worker = store, worker
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
