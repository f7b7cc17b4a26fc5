#!/usr/bin/env python3
"""PyPI's official MCP client (`mcp` 2.3.0) against fake-mcp over the stdio transport: the client
starts `fake-mcp --stdio` itself (argv[1] is the binary, argv[2] the fault plan, argv[3] the
control token), initializes, lists the tools and calls them through the faults the plan arms:

  send_message #1 answered; #2 commit_then_drop (the effect is made, no result ever comes)
  create_payment #1 error_after_commit (isError)

then reads the ground truth from fake-mcp's control API over HTTP (its address is announced on
the server's stderr). One JSON line per step on stdout; tests/it/mcp_contract.rs asserts them.
"""

import asyncio
import json
import sys
import tempfile
import time
import urllib.request

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError


def out(**kw):
    print(json.dumps(kw, sort_keys=True), flush=True)


async def call(s, tool, args, meta=None, timeout=10.0):
    started = time.monotonic()
    try:
        r = await asyncio.wait_for(s.call_tool(tool, args, meta=meta), timeout)
        texts = [c.text for c in r.content if getattr(c, "type", "") == "text"]
        return {"outcome": "result", "is_error": bool(r.is_error), "text": texts}
    except asyncio.TimeoutError:
        return {"outcome": "no_reply", "seconds": round(time.monotonic() - started, 3)}
    except MCPError as e:
        return {"outcome": "rpc_error", "code": e.error.code, "message": e.error.message}


def control_address(errlog):
    errlog.flush()
    with open(errlog.name) as f:
        for line in f:
            if line.startswith("listening http://"):
                return line.split(" ", 1)[1].strip()
    return None


async def main(binary, plan, token):
    params = StdioServerParameters(command=binary, args=["--stdio", "--faults", plan, "--control-token", token])
    with tempfile.NamedTemporaryFile("w+", suffix=".log") as errlog:
        async with stdio_client(params, errlog=errlog) as streams:
            async with ClientSession(streams[0], streams[1]) as s:
                init = await s.initialize()
                out(step="initialize", server=init.server_info.name)
                listed = await s.list_tools()
                out(step="tools/list", tools=sorted(t.name for t in listed.tools))
                out(step="send_message#1", **await call(s, "send_message", {"to": "ops", "text": "hi", "idempotency_key": "m1"}))
                out(step="send_message#2", **await call(s, "send_message", {"to": "ops", "text": "again", "idempotency_key": "m2"}, timeout=3.0))
                out(step="create_payment#1", **await call(s, "create_payment", {"amount": 5, "currency": "eur"}, meta={"idempotency_key": "p1"}))
                out(step="lookup m2", **await call(s, "lookup", {"key": "m2"}))
                base = control_address(errlog)
                req = urllib.request.Request(base + "/_control/ledger", headers={"Authorization": "Bearer " + token})
                with urllib.request.urlopen(req, timeout=10) as r:
                    out(step="ledger", ledger=json.loads(r.read()))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
