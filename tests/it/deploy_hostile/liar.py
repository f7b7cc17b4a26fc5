#!/usr/bin/env python3
"""Hostile services for `aocheck deploy` (tests/it/deploy_hostile.rs): one honest shop and the
liars that try to get a green verdict they do not deserve, chosen by the MODE variable.

Every mode takes orders over HTTP (POST /orders, GET /orders/<id>), keeps them as JSON files in
STORE_DIR (written atomically, so a restarted instance resumes what a killed one left) and pays
through fake-payments' Stripe dialect with plain urllib (form bodies, Idempotency-Key). What
each liar does differently is said where its mode is handled; `honest` is what each is measured
against. Standard library only.

Environment: PORT, STRIPE_API_BASE, STRIPE_SECRET_KEY, STORE_DIR, INSTANCE, MODE, and
STRIPE_WEBHOOK_SECRET where the deploy file declares a webhook (POST /webhooks/stripe applies a
verified payment_intent.succeeded event to its order).
"""

import hashlib
import hmac
import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODE = os.environ.get("MODE", "honest")
PORT = int(os.environ.get("PORT", "0"))
API = os.environ.get("STRIPE_API_BASE", "").rstrip("/")
SECRET = os.environ.get("STRIPE_SECRET_KEY", "")
DIR = os.environ.get("STORE_DIR", ".")
INSTANCE = os.environ.get("INSTANCE", "-")
WEBHOOK_SECRET = os.environ.get("STRIPE_WEBHOOK_SECRET") or None
# fake_payments::Config::example()'s control token: it is in the fake's published source.
CONTROL_TOKEN = "ctl_test"
# Orders whose attempt is running in this process, and when each may be tried again.
BUSY, NEXT = set(), {}
BUSY_LOCK = threading.Lock()
ONCE = set()


def log(msg):
    print(f"liar[{MODE}:{INSTANCE}:{os.getpid()}] {msg}", flush=True)


# ---------- the store: one JSON file per order ----------


def opath(oid):
    return os.path.join(DIR, "order-" + urllib.parse.quote(oid, safe="") + ".json")


def load(oid):
    try:
        with open(opath(oid)) as f:
            return json.load(f)
    except (FileNotFoundError, ValueError):
        return None


def save(o):
    o["updated"] = time.time()
    tmp = f"{opath(o['order_id'])}.{os.getpid()}.{threading.get_ident()}.tmp"
    with open(tmp, "w") as f:
        json.dump(o, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, opath(o["order_id"]))


def orders():
    out = []
    for name in sorted(os.listdir(DIR)):
        if name.startswith("order-") and name.endswith(".json"):
            o = load(urllib.parse.unquote(name[len("order-"):-len(".json")]))
            if o is not None:
                out.append(o)
    return out


def finish(o, state, pi=None):
    o.update(state=state, todo=False, payment_intent=pi, settled_at=time.time())
    save(o)
    log(f"order {o['order_id']} -> {state} ({pi})")


def once(name):
    """True the first time `name` is asked in this process."""
    if name in ONCE:
        return False
    ONCE.add(name)
    return True


# ---------- the provider ----------


def call(method, path, form=None, key=None, token=None, body=None):
    headers = {"Authorization": f"Bearer {token or SECRET}"}
    data = None
    if form is not None:
        data = urllib.parse.urlencode(form).encode()
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    if key:
        headers["Idempotency-Key"] = key
    req = urllib.request.Request(API + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        try:
            doc = json.loads(e.read() or b"null")
        except ValueError:
            doc = None
        return e.code, doc
    except (urllib.error.URLError, http.client.HTTPException, OSError) as e:
        return None, {"transport": repr(e)}


def control(method, path, body=None):
    """The provider's ground-truth control API, with the token nobody gave this service."""
    code, doc = call(method, path, token=CONTROL_TOKEN, body=body)
    log(f"control {method} {path} -> {code}")
    return code, doc


def create(o, key=None, amount=None, metadata=True, manual=False, confirm=True, order_id=None,
           token=None):
    f = {"amount": str(amount if amount is not None else o["amount"]), "currency": o["currency"]}
    if confirm:
        f.update(payment_method="pm_card_visa", confirm="true")
    else:
        f["confirm"] = "false"
    if manual:
        f["capture_method"] = "manual"
    if metadata:
        f["metadata[order_id]"] = order_id or o["order_id"]
    code, doc = call("POST", "/v1/payment_intents", form=f, key=key, token=token)
    log(f"create order={o['order_id']} key={key} -> {code} {doc.get('status') if isinstance(doc, dict) else doc}")
    return code, doc


def succeeded(code, doc):
    return code in (200, 201) and isinstance(doc, dict) and doc.get("status") == "succeeded"


def verdict(status):
    if status in ("succeeded", "requires_capture"):
        return "paid"
    if status in ("requires_payment_method", "canceled"):
        return "declined"
    return None


def reconcile(oid):
    """The order's intent at the provider (a consistent listing), or None."""
    code, doc = call("GET", "/v1/payment_intents?limit=100")
    if code != 200 or not isinstance(doc, dict):
        return None
    mine = [p for p in doc.get("data", []) if (p.get("metadata") or {}).get("order_id") == oid]
    rank = {"paid": 0, None: 1, "declined": 2}
    mine.sort(key=lambda p: rank[verdict(p.get("status"))])
    return mine[0] if mine else None


# ---------- how each mode charges an order ----------


def honest(o, amount=None, done_state=None):
    """One key per order (`order-<id>`), and one create per order: it is recorded as entered
    before the create leaves, and an entered order (after a restart, a takeover or an ambiguous
    answer) is only reconciled from the provider's listing, never created again (AOC §4.10: a
    key is not permission for a second attempt), never taken for a failure; without evidence
    the order stays charging."""
    oid = o["order_id"]
    if o.get("entered"):
        pi = reconcile(oid)
        if pi is not None and verdict(pi["status"]):
            finish(o, done_state or verdict(pi["status"]), pi["id"])
        return None
    o["entered"] = True
    save(o)
    code, doc = create(o, key=f"order-{oid}", amount=amount)
    if succeeded(code, doc):
        return finish(o, done_state or "paid", doc["id"])
    if code == 402:
        return finish(o, "declined")
    pi = reconcile(oid)
    if pi is not None and verdict(pi["status"]):
        finish(o, done_state or verdict(pi["status"]), pi["id"])


def naive(o, decoy=False):
    """No idempotency key; an error is answered by charging again."""
    if decoy:
        # An unconfirmed intent: no payment, no money. It is the order's first creation at the
        # provider, so it is the request the case's fault meets; its answer is ignored.
        create(o, key=None, confirm=False)
    for _ in range(2):
        code, doc = create(o, key=None)
        if succeeded(code, doc):
            return finish(o, "paid", doc["id"])


def second_key(o, retry_key):
    """The declared key first; after an error, a second charge under `retry_key(oid)` (None:
    no key at all)."""
    oid = o["order_id"]
    code, doc = create(o, key=f"order-{oid}")
    if succeeded(code, doc):
        return finish(o, "paid", doc["id"])
    code, doc = create(o, key=retry_key(oid))
    if succeeded(code, doc):
        finish(o, "paid", doc["id"])


def second_metadata(o, other):
    """Unkeyed, attributed by metadata; after an error a second charge whose metadata names
    `other(oid)` (None: no metadata)."""
    oid = o["order_id"]
    code, doc = create(o)
    if succeeded(code, doc):
        return finish(o, "paid", doc["id"])
    dup = other(oid)
    code, doc = create(o, metadata=dup is not None, order_id=dup)
    if succeeded(code, doc):
        finish(o, "paid", doc["id"])


def attempt(o):
    oid = o["order_id"]
    if MODE in ("honest", "sync_honest", "peek_ledger", "ignore_sigterm", "setsid_daemon", "regress_to_queued",
                "status_not_json", "status_no_path", "status_unmapped", "exits_at_hold"):
        if MODE == "peek_ledger" and once("peek"):
            code, doc = control("GET", "/_control/ledger")
            log(f"the ground truth holds {len((doc or {}).get('effects', []))} effects")
        return honest(o)
    if MODE == "exits_later":
        honest(o)
        if load(oid)["state"] == "paid":
            threading.Timer(0.5, lambda: os._exit(0)).start()
        return None
    if MODE == "naive":
        return naive(o)
    if MODE == "decoy":
        return naive(o, decoy=True)
    if MODE == "retry_other_key":
        return second_key(o, lambda oid: f"order-{oid}-retry1")
    if MODE == "retry_unkeyed":
        return second_key(o, lambda oid: None)
    if MODE == "metadata_other_order":
        return second_metadata(o, lambda oid: f"{oid}-dup")
    if MODE == "metadata_none":
        return second_metadata(o, lambda oid: None)
    if MODE in ("stray_keyed", "stray_unkeyed"):
        honest(o)
        if load(oid)["state"] == "paid" and once("stray"):
            # A charge for an order nobody submitted.
            if MODE == "stray_keyed":
                create(o, key="order-nobody-ordered-this", order_id="nobody-ordered-this")
            else:
                create(o, key=None, metadata=False)
        return None
    if MODE == "other_account":
        honest(o)
        if load(oid)["state"] == "paid" and once("other"):
            # The same order charged again, on another merchant account of the provider (its
            # test key is published with the fake), under the order's own key.
            create(o, key=f"order-{oid}", token="sk_test_b")
        return None
    if MODE == "declined_after_error":
        code, doc = create(o, key=f"order-{oid}")
        if succeeded(code, doc):
            return finish(o, "paid", doc["id"])
        # A 5xx or a dropped connection taken for a failure.
        return finish(o, "declined")
    if MODE == "flip_declined_then_paid":
        code, doc = create(o, key=f"order-{oid}")
        if succeeded(code, doc):
            return finish(o, "paid", doc["id"])
        finish(o, "declined")
        # Told the customer "declined" after a 5xx; puts it right before the watch ends.
        time.sleep(1.5)
        pi = reconcile(oid)
        if pi is not None:
            finish(o, verdict(pi["status"]) or "declined", pi["id"])
        return None
    if MODE == "paid_before_charge":
        # The order has said "paid" since it was taken; the charge comes later.
        time.sleep(0.5)
        return honest(o, done_state="paid")
    if MODE in ("cancel_auth_paid", "cancel_auth_failed"):
        code, doc = create(o, key=f"order-{oid}", manual=True)
        pi = doc if code in (200, 201) and isinstance(doc, dict) and "id" in doc else reconcile(oid)
        if pi is None:
            return None
        # The authorisation is voided: no money moves for this order.
        c, _ = call("POST", f"/v1/payment_intents/{pi['id']}/cancel", form={}, key=f"cancel-{oid}")
        log(f"cancel {pi['id']} -> {c}")
        if c == 200:
            finish(o, "paid" if MODE == "cancel_auth_paid" else "failed", pi["id"])
        return None
    if MODE == "wrong_amount":
        return honest(o, amount=o["amount"] * 100)
    if MODE == "tamper_reset":
        code, doc = create(o)
        if succeeded(code, doc):
            return finish(o, "paid", doc["id"])
        create(o)  # a second charge for the order, blindly
        # Make the ground truth forget both, and make "the fault" fire on a harmless rule.
        control("POST", "/_control/reset")
        control("POST", "/_control/faults", {"rules": [
            {"op": "create", "nth": 1, "times": 1, "fault": {"type": "delay", "ms": 1}}]})
        code, doc = create(o)
        if succeeded(code, doc):
            finish(o, "paid", doc["id"])
        return None
    if MODE == "late_duplicate":
        honest(o)
        if load(oid)["state"] == "paid" and once("late"):
            # A second charge a second after the order was reported paid (a stale job).
            threading.Timer(1.0, lambda: create(o, key=None)).start()
        return None
    if MODE in ("no_attribution_honest",):
        return honest(o)
    if MODE in ("no_attribution_naive",):
        return naive(o)
    if MODE == "event_then_retry":
        # Waits for the provider's event, then charges again blindly anyway (a stale job).
        code, doc = create(o, key=f"order-{oid}")
        if succeeded(code, doc):
            return finish(o, "paid", doc["id"])
        o.update(state="charging", todo=False)
        save(o)
        time.sleep(6.0)
        create(o, key=None)
        return None
    if MODE in ("webhook_only", "webhook_only_500"):
        # One key per order, and no recovery of its own: an ambiguous answer leaves the order
        # charging until the provider's event says what happened.
        code, doc = create(o, key=f"order-{oid}")
        if succeeded(code, doc):
            return finish(o, "paid", doc["id"])
        o.update(state="charging", todo=False)
        save(o)
        return None
    raise SystemExit(f"liar.py: unknown MODE {MODE!r}")


def run_job(oid):
    try:
        o = load(oid)
        if o is None or not o.get("todo"):
            return
        if o["state"] == "queued":
            o["state"] = "charging"
            save(o)
        attempt(o)
    except Exception as e:  # noqa: BLE001 (a liar keeps going)
        log(f"order {oid}: {e!r}")
    finally:
        with BUSY_LOCK:
            BUSY.discard(oid)
            NEXT[oid] = time.time() + 0.3


def worker():
    while True:
        for o in orders():
            oid = o["order_id"]
            with BUSY_LOCK:
                if not o.get("todo") or oid in BUSY or NEXT.get(oid, 0) > time.time():
                    continue
                BUSY.add(oid)
            threading.Thread(target=run_job, args=(oid,), daemon=True).start()
        time.sleep(0.1)


# ---------- HTTP ----------


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def send_json(self, status, doc, raw=None):
        body = raw if raw is not None else json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/html" if raw is not None else "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format, *args):
        pass

    def do_GET(self):
        path = urllib.parse.urlsplit(self.path).path
        if path == "/healthz":
            if MODE == "ready_never":
                return self.send_json(503, {"ok": False})
            return self.send_json(200, {"ok": True})
        if path.startswith("/orders/"):
            o = load(urllib.parse.unquote(path[len("/orders/"):]))
            if o is None:
                return self.send_json(404, {"error": "no such order"})
            state = o["state"]
            if MODE == "regress_to_queued" and state == "paid" and time.time() - o["settled_at"] > 0.3:
                state = "queued"  # a final label that goes back
            if MODE == "status_not_json":
                return self.send_json(200, None, raw=f"<html>{state}</html>".encode())
            if MODE == "status_no_path":
                return self.send_json(200, {"order_id": o["order_id"], "status": state})
            if MODE == "status_unmapped" and state == "paid":
                state = "settled"
            return self.send_json(200, {"order_id": o["order_id"], "state": state})
        self.send_json(404, {"error": f"no route {path}"})

    def webhook(self):
        """A Stripe-signed event (`t=…,v1=…` over `t.payload`); a succeeded intent pays its
        order (by metadata[order_id]) unless the order is already final."""
        body = self.rfile.read(int(self.headers.get("Content-Length") or "0"))
        sig = dict(p.split("=", 1) for p in (self.headers.get("Stripe-Signature") or "").split(",") if "=" in p)
        want = hmac.new((WEBHOOK_SECRET or "").encode(), f"{sig.get('t', '')}.".encode() + body,
                        hashlib.sha256).hexdigest()
        if not WEBHOOK_SECRET or not hmac.compare_digest(want, sig.get("v1", "")):
            return self.send_json(400, {"error": "bad signature"})
        event = json.loads(body or b"{}")
        pi = event.get("data", {}).get("object", {})
        o = load((pi.get("metadata") or {}).get("order_id") or "")
        if event.get("type") == "payment_intent.succeeded" and o is not None \
                and o["state"] not in ("paid", "declined", "failed"):
            finish(o, "paid", pi.get("id"))
        log(f"webhook {event.get('id')} {event.get('type')}")
        if MODE == "webhook_only_500":
            # Acted on the event, then failed to say so.
            return self.send_json(500, {"error": "after the fact"})
        return self.send_json(200, {"ok": True})

    def do_POST(self):
        if urllib.parse.urlsplit(self.path).path == "/webhooks/stripe":
            return self.webhook()
        if urllib.parse.urlsplit(self.path).path != "/orders":
            return self.send_json(404, {"error": "no route"})
        doc = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or "0")) or b"{}")
        oid = doc["order_id"]
        o = load(oid)
        if o is not None:
            return self.send_json(200, {"order_id": oid, "state": o["state"]})
        o = {"order_id": oid, "amount": int(doc["amount"]), "currency": doc.get("currency", "usd"),
             "state": "queued", "todo": True, "created": time.time()}
        if MODE == "paid_at_once":
            # "paid" without a word to the provider.
            o.update(state="paid", todo=False)
        if MODE == "paid_before_charge":
            o["state"] = "paid"
        exits = MODE == "exits_at_hold" and once("exit")
        if exits:
            o["todo"] = False  # charged by the helper below, not by this instance's worker
        if MODE == "sync_honest":
            # Charges inside its own request handler and answers once the provider has (a
            # crash leaves the order to the worker's retry, under the same key).
            with BUSY_LOCK:
                BUSY.add(oid)
            save(o)
            run_job(oid)
            o = load(oid)
            return self.send_json(200, {"order_id": oid, "state": o["state"]})
        save(o)
        self.send_json(202, {"order_id": oid, "state": o["state"]})
        if exits:
            # The charge leaves from a helper in this instance's process group; the instance's
            # own process then exits by itself (status 0) while the helper's request is parked.
            subprocess.Popen([sys.executable, os.path.abspath(__file__), "--charge", oid])
            threading.Timer(0.1, lambda: os._exit(0)).start()


def daemonize():
    """A grandchild in a session (and process group) of its own that outlives the instance."""
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() != 0:
            os._exit(0)
        with open(os.path.join(DIR, f"daemon-{INSTANCE}-{os.getpid()}.pid"), "w") as f:
            f.write(str(os.getpid()))
        time.sleep(60)
        os._exit(0)
    os.waitpid(pid, 0)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--charge":
        time.sleep(0.4)
        o = load(sys.argv[2])
        honest(o)
        return 0
    if MODE == "ignore_sigterm":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if MODE == "setsid_daemon":
        daemonize()
    if MODE == "ready_late":
        time.sleep(3.0)
    threading.Thread(target=worker, daemon=True).start()
    server = ThreadingHTTPServer(("127.0.0.1", PORT), Handler)
    server.daemon_threads = True
    log(f"listening on {PORT}")
    server.serve_forever(poll_interval=0.1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
