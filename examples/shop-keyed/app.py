#!/usr/bin/env python3
"""shop-keyed: a small shop that charges each order at most once.

An order is taken over HTTP, queued as a job in SQLite, and charged by a worker thread that
creates a confirmed Stripe PaymentIntent through the official SDK. The job queue retries a job
whose worker died (its lease expired), so the same order can reach the provider more than once;
what keeps it to one charge:

* the Idempotency-Key is derived from the order (``order-<order_id>``), never random, so every
  attempt for one order, by any instance and after any restart, is the same request to Stripe;
* before the first call leaves, the order is committed as ``charging`` with that key and the time
  it entered the provider; a job that finds it ``charging`` repeats the create under the SAME key
  (Stripe replays the first answer) and never under another one;
* an answer whose outcome is ambiguous (a connection error, a 5xx, a replayed 5xx, a 409 while
  the first request is still in flight) is reconciled from the provider's own records (search by
  ``metadata['order_id']``, a consistent listing, then retrieve); without evidence the order stays
  ``charging`` and the job is retried later. It is never marked ``paid`` unless Stripe says
  ``succeeded``, and never failed from an HTTP status class alone;
* once the key may have left Stripe's idempotency window (24 h), it stops creating altogether and
  only reconciles; an order still without evidence then becomes ``unknown`` for a human.

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

NAME = "shop-keyed"
LEASE_SECONDS = 2.0
RENEW_SECONDS = 0.5
POLL_SECONDS = 0.1
MAX_BODY = 64 * 1024
MAX_AMOUNT = 99_999_999
# Stripe keeps an idempotency key for 24 hours; past this age a create could charge anew.
KEY_SAFE_SECONDS = 20 * 3600
# How far before its first attempt a listing looks for the order's PaymentIntent.
LIST_MARGIN_SECONDS = 300
LIST_MAX_ITEMS = 1000
ORDER_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,199}")
CURRENCY = re.compile(r"[a-z]{3}")
TERMINAL = ("paid", "declined", "unknown")

SCHEMA = """
CREATE TABLE IF NOT EXISTS orders (
    order_id        TEXT PRIMARY KEY,
    amount          INTEGER NOT NULL,
    currency        TEXT NOT NULL,
    state           TEXT NOT NULL,   -- queued | charging | paid | declined | unknown
    payment_intent  TEXT,
    idempotency_key TEXT,            -- set when the order first enters the provider
    entered_at      REAL,            -- when it first entered the provider
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

    def enter(self, job_id, owner, order_id, key):
        """Records, before the call leaves, that the order enters the provider under `key`.

        Only the job's current lease holder may do so; returns the order as it now stands, or
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
                "UPDATE orders SET state = 'charging',"
                " idempotency_key = COALESCE(idempotency_key, ?),"
                " entered_at = COALESCE(entered_at, ?),"
                " last_attempt_at = ?, attempts = attempts + 1, updated_at = ?"
                " WHERE order_id = ? AND state IN ('queued', 'charging')",
                (key, now, now, now, order_id),
            )
            return dict(c.execute("SELECT * FROM orders WHERE order_id = ?", (order_id,)).fetchone())

    def note_intent(self, order_id, payment_intent, detail):
        with self.tx() as c:
            c.execute(
                "UPDATE orders SET payment_intent = COALESCE(?, payment_intent), detail = ?,"
                " updated_at = ? WHERE order_id = ?",
                (payment_intent, detail, time.time(), order_id),
            )

    def settle(self, job_id, order_id, state, payment_intent, detail):
        """Records the provider's verdict and ends the job. A verdict is the provider's own
        record, so it is written whoever holds the lease; a settled order is never rewritten."""
        with self.tx() as c:
            c.execute(
                "UPDATE orders SET state = ?, payment_intent = COALESCE(?, payment_intent),"
                " detail = ?, updated_at = ? WHERE order_id = ? AND state NOT IN ('paid', 'declined')",
                (state, payment_intent, detail, time.time(), order_id),
            )
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

    def settle_from_event(self, order_id, state, payment_intent, detail):
        """Records what a webhook event says of an order (a settled order is never rewritten); its jobs that no worker holds end."""
        now = time.time()
        with self.tx() as c:
            cur = c.execute(
                "UPDATE orders SET state = ?, payment_intent = COALESCE(?, payment_intent),"
                " detail = ?, updated_at = ? WHERE order_id = ? AND state NOT IN ('paid', 'declined')",
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
                    return  # lost: another worker has the job; its writes are checked anyway
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
                        self.store.retry_later(job["id"], self.owner, backoff(job["claims"]))

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
        key = order["idempotency_key"] or f"order-{oid}"
        # A charging order whose PaymentIntent is known, or whose key may have expired at the
        # provider: ask the provider what happened instead of creating.
        if order["state"] == "charging" and (
            order["payment_intent"]
            or time.time() - (order["entered_at"] or time.time()) > KEY_SAFE_SECONDS
        ):
            self.reconcile(job, order, "resuming a charging order")
            return
        order = self.store.enter(job["id"], self.owner, oid, key)
        if order is None or order["state"] != "charging":
            return  # the lease was lost, or the order was settled meanwhile
        try:
            pi = self.client.v1.payment_intents.create(
                params=self.params(order), options={"idempotency_key": key}
            )
        except stripe.CardError as e:
            body = (e.json_body or {}).get("error") or {}
            pi_id = (body.get("payment_intent") or {}).get("id")
            code = body.get("decline_code") or e.code
            log(f"charge order={oid} key={key} -> declined {pi_id} ({code})")
            self.store.settle(job["id"], oid, "declined", pi_id, f"card declined: {code}")
            return
        except stripe.StripeError as e:
            # 5xx (replayed or not), a dropped connection, 409 in flight, 429, 401, 400 …: the
            # class of an error says nothing of whether the charge happened. Ask the provider.
            self.reconcile(job, order, describe(e))
            return
        self.settle_intent(job, order, pi.id, pi.status, "create")

    def settle_intent(self, job, order, pi_id, status, source):
        oid = order["order_id"]
        verdict = intent_verdict(status)
        if verdict is None:
            log(f"charge order={oid} -> {pi_id} is {status}; checking again later")
            self.store.note_intent(oid, pi_id, f"{source}: intent {status}")
            self.store.retry_later(job["id"], self.owner, backoff(job["claims"]))
            return
        log(f"charge order={oid} key={order['idempotency_key']} -> {verdict} {pi_id} ({source})")
        self.store.settle(job["id"], oid, verdict, pi_id, f"{source}: intent {status}")

    def reconcile(self, job, order, why):
        """Finds the order's PaymentIntent at the provider; without one, nothing is decided."""
        oid = order["order_id"]
        found, notes = set(), []
        if order["payment_intent"]:
            found.add(order["payment_intent"])
        try:
            res = self.client.v1.payment_intents.search(
                params={"query": f"metadata['order_id']:'{oid}'", "limit": 10}
            )
            found.update(pi.id for pi in res.data)
        except stripe.StripeError as e:
            notes.append(f"search: {describe(e)}")
        if not found:
            # Search is eventually consistent: an empty answer proves nothing. A listing is
            # consistent; look through the intents created since shortly before our first call.
            # Paged by hand: a page that says has_more with no items ends the walk (the SDK's
            # auto-pager would index into the empty page).
            since = int((order["entered_at"] or time.time()) - LIST_MARGIN_SECONDS)
            params = {"created": {"gte": since}, "limit": 100}
            seen = 0
            try:
                while seen < LIST_MAX_ITEMS:
                    page = self.client.v1.payment_intents.list(params=params)
                    found.update(pi.id for pi in page.data if order_of(pi) == oid)
                    seen += len(page.data)
                    if not page.has_more:
                        break
                    if not page.data:
                        notes.append("list: has_more with an empty page")
                        break
                    params["starting_after"] = page.data[-1].id
            except stripe.StripeError as e:
                notes.append(f"list: {describe(e)}")
        intents = []
        for pi_id in sorted(found):
            try:
                pi = self.client.v1.payment_intents.retrieve(pi_id)
            except stripe.StripeError as e:
                notes.append(f"retrieve {pi_id}: {describe(e)}")
                continue
            if order_of(pi) == oid:
                intents.append(pi)
        if len(intents) > 1:
            log(f"WARNING order={oid} has {len(intents)} PaymentIntents: {[p.id for p in intents]}")
        # A success anywhere is the answer; then anything still moving; then a decline.
        rank = {"paid": 0, None: 1, "declined": 2}
        intents.sort(key=lambda p: rank[intent_verdict(p.status)])
        if intents:
            best = intents[0]
            self.settle_intent(job, order, best.id, best.status, f"reconciled after {why}")
            return
        detail = "; ".join([why] + notes)
        entered = order["entered_at"] or time.time()
        if time.time() - entered > KEY_SAFE_SECONDS:
            log(f"charge order={oid} -> unknown: no intent found and the key may have expired")
            self.store.settle(job["id"], oid, "unknown", None, f"no evidence after the key window: {detail}")
            return
        delay = backoff(job["claims"])
        log(f"charge order={oid} -> still charging ({why}); no intent found yet, retry in {delay:.2f}s")
        self.store.retry_later(job["id"], self.owner, delay, oid, detail)


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
        """POST /webhooks/stripe: a payment intent's state change, believed only when its
        Stripe-Signature verifies under our endpoint secret (a forged event changes nothing)."""
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
            oid, verdict = order_of(pi), intent_verdict(pi["status"])
            if oid is not None and verdict is not None:
                try:
                    changed = self.store.settle_from_event(oid, verdict, pi["id"], f"webhook {event['id']}")
                except sqlite3.Error as e:
                    return self.send_json(503, {"error": f"storage: {e}"})
                log(f"webhook {event['id']} {event['type']} order={oid} -> {verdict} ({'applied' if changed else 'already settled'})")
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
