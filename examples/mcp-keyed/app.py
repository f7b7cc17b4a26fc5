#!/usr/bin/env python3
"""mcp-keyed: a message service that makes each message's tool call at most once.

A message is taken over HTTP and stored in SQLite; the message row is its job. A worker
thread sends it through an MCP tool server (the tool ``send_message``, over Streamable HTTP,
with the official MCP Python SDK). Every call of a message carries the idempotency key
``msg-<message_id>``.

The part that differs from ../mcp-retrying/app.py is marked "THE PART THAT DIFFERS"; the rest of
the two files is the same. In this service:

* before the call goes out, the message is committed as ``sending``;
* ``send_message`` is called at most once per message, whatever happens after it (a lost reply,
  a timeout, an isError result, a JSON-RPC error, a refused session, a restart). The tool does
  not deduplicate by the key, and a key is not permission for a second attempt anyway;
* a call that did not return a clean success, and every message found ``sending`` at startup, is
  reconciled: a fresh session asks ``lookup(key="msg-<id>")``. Found: ``sent`` with the effect
  id. Nothing found within about 20 s (the lookup retried with backoff), or the server not
  reachable: ``unknown``, for a person to look at. It is never sent again.

Configuration (environment): PORT, MCP_URL, MESSAGES_DB, INSTANCE, MCP_CALL_TIMEOUT
(seconds, default 10) and MCP_RECONCILE_SECONDS (how long a lookup is retried, default 20). Python 3.11+, standard
library plus ``mcp`` (the official SDK, 2.3.0).
"""

import asyncio
import contextlib
import json
import logging
import os
import re
import signal
import sqlite3
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

NAME = "mcp-keyed"
CALL_TIMEOUT = float(os.environ.get("MCP_CALL_TIMEOUT") or 10.0)  # seconds to wait for any one MCP answer: a lost reply is noticed
ATTEMPT_TIMEOUT = 45.0    # a whole session (connect, initialize, call, close), at most
POLL_SECONDS = 0.1
MAX_BODY = 64 * 1024
MESSAGE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,199}")
STATES = ("queued", "sending", "sent", "failed", "unknown")


def log(msg):
    print(f"{NAME}[{os.environ.get('INSTANCE', '-')}:{os.getpid()}] {msg}", flush=True)


# The SDK's own warnings (e.g. "Session termination failed: 202" when a server answers the
# session's DELETE with 202) go to stdout in the same shape, marked as the SDK's.
logging.basicConfig(
    stream=sys.stdout, level=logging.WARNING,
    format=f"{NAME}[{os.environ.get('INSTANCE', '-')}:{os.getpid()}] sdk %(name)s %(levelname)s: %(message)s",
)


def key_of(message_id):
    """The idempotency key every call of a message carries (the deploy file's attribution)."""
    return f"msg-{message_id}"


def describe(e):
    """One line for an exception; an exception group is described by what it holds."""
    if isinstance(e, BaseExceptionGroup):
        return "; ".join(describe(x) for x in e.exceptions)
    if isinstance(e, MCPError):
        return f"MCP error {e.code}: {e.message}"
    return f"{type(e).__name__}: {e}"


# ---------- the store: one row per message, which is also its job ----------


class Store:
    def __init__(self, path):
        self.path = path

    @contextlib.contextmanager
    def conn(self):
        c = sqlite3.connect(self.path, timeout=10, isolation_level=None)
        c.row_factory = sqlite3.Row
        try:
            c.execute("PRAGMA synchronous=FULL")
            yield c
        finally:
            c.close()

    def init(self):
        with self.conn() as c:
            c.execute("PRAGMA journal_mode=WAL")
            c.execute(
                """CREATE TABLE IF NOT EXISTS messages (
                       message_id TEXT PRIMARY KEY,
                       recipient TEXT NOT NULL,
                       text TEXT NOT NULL,
                       state TEXT NOT NULL,
                       effect TEXT,
                       note TEXT,
                       created_at REAL NOT NULL,
                       updated_at REAL NOT NULL)"""
            )

    def get(self, message_id):
        with self.conn() as c:
            r = c.execute("SELECT * FROM messages WHERE message_id = ?", (message_id,)).fetchone()
            return dict(r) if r else None

    def submit(self, message_id, to, text):
        """The message, and whether this call created it (the id is the message's identity)."""
        now = time.time()
        with self.conn() as c:
            cur = c.execute(
                "INSERT OR IGNORE INTO messages (message_id, recipient, text, state, created_at, updated_at)"
                " VALUES (?, ?, ?, 'queued', ?, ?)",
                (message_id, to, text, now, now),
            )
            r = c.execute("SELECT * FROM messages WHERE message_id = ?", (message_id,)).fetchone()
            return dict(r), cur.rowcount == 1

    def next_queued(self):
        with self.conn() as c:
            r = c.execute(
                "SELECT * FROM messages WHERE state = 'queued' ORDER BY created_at, message_id LIMIT 1"
            ).fetchone()
            return dict(r) if r else None

    def in_state(self, state):
        with self.conn() as c:
            return [dict(r) for r in c.execute(
                "SELECT * FROM messages WHERE state = ? ORDER BY created_at, message_id", (state,))]

    def move(self, message_id, frm, to, effect=None, note=None):
        """Moves a message from state `frm` to `to` in one committed transaction; False if it
        was not in `frm` (someone else moved it)."""
        with self.conn() as c:
            cur = c.execute(
                "UPDATE messages SET state = ?, effect = COALESCE(?, effect), note = ?, updated_at = ?"
                " WHERE message_id = ? AND state = ?",
                (to, effect, note, time.time(), message_id, frm),
            )
            return cur.rowcount == 1


# ---------- MCP: one fresh session per attempt or lookup ----------


MCP_URL = None


@contextlib.asynccontextmanager
async def session():
    """A new MCP session: connect, initialize, list the tools (so that call_tool's check of a
    result against the tool's output schema needs no extra round trip after the call)."""
    async with streamable_http_client(MCP_URL) as streams:
        async with ClientSession(streams[0], streams[1], read_timeout_seconds=CALL_TIMEOUT) as s:
            await s.initialize()
            await s.list_tools()
            yield s


def texts_of(result):
    return [c.text for c in result.content if getattr(c, "type", "") == "text"]


def json_of(result):
    for t in texts_of(result):
        try:
            doc = json.loads(t)
        except ValueError:
            continue
        if isinstance(doc, dict):
            return doc
    return None


async def call_send(msg):
    """One ``send_message`` call for a message, on a fresh session. Returns one of
    ("sent", effect_id): the call returned a clean success naming its effect;
    ("not_called", why): the session never opened, so no call left this process;
    ("unclear", why): a call went out and did not come back clean (lost reply, timeout,
    isError, JSON-RPC error, refused session): its effect may or may not have been made."""
    got = {"called": False, "result": None, "error": None}
    args = {"to": msg["recipient"], "text": msg["text"], "idempotency_key": key_of(msg["message_id"])}

    async def run():
        async with session() as s:
            got["called"] = True
            try:
                got["result"] = await s.call_tool("send_message", args, read_timeout_seconds=CALL_TIMEOUT)
            except Exception as e:
                got["error"] = e

    try:
        await asyncio.wait_for(run(), ATTEMPT_TIMEOUT)
    except Exception as e:  # opening or closing the session (a result already read stands)
        if got["result"] is None and got["error"] is None:
            got["error"] = e
    r = got["result"]
    if r is not None:
        doc = json_of(r)
        if not r.is_error and doc and isinstance(doc.get("effect"), str):
            return "sent", doc["effect"]
        if r.is_error:
            return "unclear", f"isError result: {' '.join(texts_of(r))[:200]}"
        return "unclear", f"a result without an effect id: {' '.join(texts_of(r))[:200]}"
    why = describe(got["error"])
    return ("unclear" if got["called"] else "not_called"), why


async def lookup(key):
    """What the server made under a key, asked on a fresh session: (found, complete). Raises
    when the server cannot be asked."""
    async def run():
        async with session() as s:
            return await s.call_tool("lookup", {"key": key}, read_timeout_seconds=CALL_TIMEOUT)

    r = await asyncio.wait_for(run(), ATTEMPT_TIMEOUT)
    doc = json_of(r)
    if r.is_error or doc is None or not isinstance(doc.get("found"), list):
        raise RuntimeError(f"lookup answered {'isError' if r.is_error else 'no JSON'}: {' '.join(texts_of(r))[:200]}")
    return doc["found"], doc.get("complete", True) is not False


# ========== THE PART THAT DIFFERS (mcp-keyed): one call, then reconcile by lookup ==========

RECONCILE_SECONDS = float(os.environ.get("MCP_RECONCILE_SECONDS") or 20.0)


async def reconcile(store, msg, why):
    """A message whose call's outcome is not known: ask the server what it made under the key,
    on a fresh session. Found: sent. Not found, or not reachable, for about 20 s: unknown. An
    empty lookup after a call of unknown fate is no proof that nothing was made (the call may
    still be running at the server, or the lookup may lag), so the message is never sent again."""
    mid, key = msg["message_id"], key_of(msg["message_id"])
    log(f"message={mid} reconcile ({why}): lookup {key}; it is not sent again")
    deadline = time.monotonic() + RECONCILE_SECONDS
    delay, last = 0.5, ""
    while True:
        try:
            found, complete = await lookup(key)
        except Exception as e:
            last = f"lookup failed: {describe(e)}"
        else:
            if found:
                effect = found[0].get("effect")
                if len(found) > 1:
                    log(f"WARNING message={mid}: {len(found)} effects under {key}: {[f.get('effect') for f in found]}")
                store.move(mid, "sending", "sent", effect, f"reconciled: lookup found {effect}")
                log(f"message={mid} -> sent {effect} (lookup found it)")
                return
            last = "lookup found nothing" + ("" if complete else " (and says it is not complete)")
        if time.monotonic() + delay > deadline:
            break
        log(f"message={mid} {last}; looking again in {delay:.1f}s")
        await asyncio.sleep(delay)
        delay = min(delay * 2, 4.0)
    store.move(mid, "sending", "unknown", None, f"{why}; {last}")
    log(f"message={mid} -> unknown ({last}); not sent again: a person must look")


async def recover_at_startup(store):
    """A message left ``sending`` by an earlier process had a call go out whose outcome this
    process cannot know: it is reconciled, never sent again."""
    for msg in store.in_state("sending"):
        await reconcile(store, msg, "found sending at startup")


async def deliver(store, msg):
    mid = msg["message_id"]
    # Entering the provider is committed first: a crash from here on is known at restart.
    if not store.move(mid, "queued", "sending", note="calling send_message"):
        return
    log(f"message={mid} sending (committed): send_message(to={msg['recipient']!r}, idempotency_key={key_of(mid)!r})")
    what, x = await call_send(msg)
    if what == "sent":
        store.move(mid, "sending", "sent", x, "send_message answered")
        log(f"message={mid} -> sent {x}")
    elif what == "not_called":
        # The session never opened, so no call left: the message may safely wait for another try.
        store.move(mid, "sending", "queued", note=f"not called: {x}")
        log(f"message={mid} back to queued: no call went out ({x}); trying again in 2s")
        await asyncio.sleep(2.0)
    else:
        # A lost reply, a timeout, an isError result or a JSON-RPC error says nothing about the
        # effect (the server may have made it before it failed to answer): look it up.
        await reconcile(store, msg, f"send_message: {x}")

# ========== END OF THE PART THAT DIFFERS ==========


# ---------- the worker ----------


class Worker(threading.Thread):
    def __init__(self, store, stop):
        super().__init__(name="worker", daemon=True)
        self.store, self.stop, self.running = store, stop, threading.Event()

    def run(self):
        self.running.set()
        try:
            asyncio.run(self.main())
        except Exception as e:  # the worker must not die silently: healthz turns 503
            log(f"worker died: {describe(e)}")

    async def main(self):
        await recover_at_startup(self.store)
        while not self.stop.is_set():
            try:
                msg = self.store.next_queued()
            except sqlite3.Error as e:
                log(f"storage: {e}")
                msg = None
            if msg is None:
                await asyncio.sleep(POLL_SECONDS)
                continue
            await deliver(self.store, msg)


# ---------- HTTP ----------


class BadRequest(Exception):
    pass


def read_message(body):
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise BadRequest("the body is not JSON")
    if not isinstance(doc, dict):
        raise BadRequest("the body must be a JSON object")
    mid, to, text = doc.get("message_id"), doc.get("to"), doc.get("text")
    if not isinstance(mid, str) or not MESSAGE_ID.fullmatch(mid):
        raise BadRequest("message_id: 1 to 200 characters of A-Z a-z 0-9 . _ : -, starting alphanumeric")
    if not isinstance(to, str) or not 0 < len(to) <= 320:
        raise BadRequest("to: a non-empty string of at most 320 characters")
    if not isinstance(text, str) or not 0 < len(text) <= 10_000:
        raise BadRequest("text: a non-empty string of at most 10000 characters")
    return mid, to, text


def view(m):
    return {"message_id": m["message_id"], "state": m["state"], "effect": m["effect"]}


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
            elif path.startswith("/messages/") and path.count("/") == 2:
                m = self.store.get(unquote(path[len("/messages/"):]))
                if m is None:
                    self.send_json(404, {"error": "no such message"})
                else:
                    self.send_json(200, view(m))
            else:
                self.send_json(404, {"error": f"no route GET {path}"})
        except sqlite3.Error as e:
            self.send_json(503, {"error": f"storage: {e}"})

    def do_POST(self):
        path = urlsplit(self.path).path
        if path != "/messages":
            return self.send_json(404, {"error": f"no route POST {path}"})
        try:
            length = int(self.headers.get("Content-Length") or "0")
        except ValueError:
            length = -1
        if not 0 < length <= MAX_BODY:
            self.close_connection = True
            return self.send_json(400, {"error": f"send a JSON body of 1 to {MAX_BODY} bytes with Content-Length"})
        body = self.rfile.read(length)
        try:
            mid, to, text = read_message(body)
            m, created = self.store.submit(mid, to, text)
        except BadRequest as e:
            return self.send_json(400, {"error": str(e)})
        except sqlite3.Error as e:
            return self.send_json(503, {"error": f"storage: {e}"})
        if not created and (m["recipient"], m["text"]) != (to, text):
            return self.send_json(409, {
                "error": "this message_id was submitted with another to or text",
                "message_id": mid, "state": m["state"],
            })
        if created:
            log(f"message={mid} queued")
        self.send_json(202 if created else 200, {"message_id": mid, "state": m["state"]})


# ---------- main ----------


def config():
    env, missing = os.environ, [n for n in ("PORT", "MCP_URL", "MESSAGES_DB") if not os.environ.get(n)]
    if missing:
        sys.exit(f"{NAME}: set {', '.join(missing)} in the environment")
    try:
        port = int(env["PORT"])
    except ValueError:
        sys.exit(f"{NAME}: PORT must be a port number, not {env['PORT']!r}")
    return port, env["MCP_URL"], env["MESSAGES_DB"]


def main():
    global MCP_URL
    port, MCP_URL, db = config()
    store = Store(db)
    store.init()
    stop = threading.Event()
    worker = Worker(store, stop)
    Handler.store, Handler.worker = store, worker
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    worker.start()
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True).start()
    log(f"listening http://127.0.0.1:{server.server_address[1]} mcp={MCP_URL} db={db}")
    while not stop.wait(0.5):
        pass
    server.shutdown()
    server.server_close()
    # A message in the middle of its call stays `sending`; the next start reconciles it.
    log("stopped")
    sys.stdout.flush()
    os._exit(0)  # the worker thread may be inside a call; it is not waited for


if __name__ == "__main__":
    main()
