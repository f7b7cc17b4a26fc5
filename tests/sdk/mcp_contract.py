#!/usr/bin/env python3
"""PyPI's official MCP client (`mcp` 2.3.0, pinned in tests/requirements.txt) against fake-mcp,
over Streamable HTTP: `initialize`, `tools/list` and `tools/call` of every tool, and what the
client makes of each fault fake-mcp injects. One JSON line per step on stdout; the Rust side
(tests/it/mcp_contract.rs) arms the faults before and reads the ground-truth ledger after.

The fault plan the Rust side arms (the nth call of each tool):
  send_message   #2 commit_then_drop     (the effect is made; no result ever comes)
  create_payment #2 error_after_commit   (isError)
                 #3 rpc_error_after_commit (a JSON-RPC error)
                 #4 refuse               (isError; nothing made)
  write_record   #1 slow 300 ms
Then the server restarts (POST /_control/restart with the control token, argv[2]).
Everything the client parses is printed: a renamed field breaks the Rust side's assertions.
"""

import asyncio
import json
import sys
import time

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError


def out(**kw):
    print(json.dumps(kw, sort_keys=True), flush=True)


def result_of(r):
    """What a CallToolResult says: isError, and its text content parsed as JSON where it is."""
    texts = [c.text for c in r.content if getattr(c, "type", "") == "text"]
    parsed = []
    for t in texts:
        try:
            parsed.append(json.loads(t))
        except ValueError:
            parsed.append(t)
    return {"is_error": bool(r.is_error), "content": parsed}


async def call(s, tool, args, meta=None, timeout=10.0):
    started = time.monotonic()
    try:
        r = await asyncio.wait_for(s.call_tool(tool, args, meta=meta), timeout)
        return dict(result_of(r), outcome="result", seconds=round(time.monotonic() - started, 3))
    except asyncio.TimeoutError:
        return {"outcome": "no_reply", "seconds": round(time.monotonic() - started, 3)}
    except MCPError as e:
        return {"outcome": "rpc_error", "code": e.error.code, "message": e.error.message}


async def main(url):
    control, token = url.rsplit("/mcp", 1)[0], sys.argv[2]
    async with streamable_http_client(url) as streams:
        async with ClientSession(streams[0], streams[1]) as s:
            init = await s.initialize()
            out(step="initialize", server=init.server_info.name, version=init.server_info.version,
                tools=init.capabilities.tools is not None, protocol=str(init.protocol_version))
            listed = await s.list_tools()
            out(step="tools/list", tools=[{"name": t.name, "required": sorted(t.input_schema.get("required", [])),
                                           "properties": sorted(t.input_schema.get("properties", {}))}
                                          for t in listed.tools])
            out(step="send_message#1", **await call(s, "send_message", {"to": "ops", "text": "hi", "idempotency_key": "m1"}))
            out(step="send_message#2", **await call(s, "send_message", {"to": "ops", "text": "again", "idempotency_key": "m2"}, timeout=3.0))
            for n in (1, 2, 3, 4):
                out(step="create_payment#%d" % n,
                    **await call(s, "create_payment", {"amount": 1250, "currency": "eur"}, meta={"idempotency_key": "p%d" % n}))
            out(step="write_record#1", **await call(s, "write_record", {"key": "a", "value": "b"}))
            out(step="lookup m2", **await call(s, "lookup", {"key": "m2"}))
            out(step="lookup p4", **await call(s, "lookup", {"key": "p4"}))
            out(step="list_effects", **await call(s, "list_effects", {}))
            out(step="unknown tool", **await call(s, "no_such_tool", {}))
            # The server restarts: it forgets every session and keeps every effect. The old
            # session's next call fails; a new session finds the effects made before.
            restart(control, token)
            out(step="after restart, old session", **await call(s, "send_message", {"to": "ops", "text": "late"}, timeout=5.0))
    async with streamable_http_client(url) as streams:
        async with ClientSession(streams[0], streams[1]) as s:
            await s.initialize()
            out(step="after restart, new session", **await call(s, "lookup", {"key": "m2"}))


def restart(control, token):
    import urllib.request
    req = urllib.request.Request(control + "/_control/restart", data=b"{}", method="POST",
                                 headers={"Authorization": "Bearer " + token})
    with urllib.request.urlopen(req, timeout=10) as r:
        out(step="restart", status=r.status, body=json.loads(r.read()))


if __name__ == "__main__":
    url = sys.argv[1]
    control, token = url.rsplit("/mcp", 1)[0], sys.argv[2]
    asyncio.run(main(url))
