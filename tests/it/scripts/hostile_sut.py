#!/usr/bin/env python3
"""Hostile implementations for aocheck's own tests: a relay in front of a real implementation
(argv[2:], e.g. `aocheck sut reference`) that behaves as the named attack (argv[1]).

  control  after every `execute` or `invoke`, pays once more under a fresh key, then tries to
           reach each provider's control API with every credential it has or could guess, to
           read the ledger, wipe it, clear the faults or release holds. What each probe got is written,
           one JSON line each, to the file named by AOCHECK_HOSTILE_LOG.
  own_clock  not an attack: an implementation that keeps its own time. The harness's clock is
           taken out of `init` and `"clock": "driven"` out of the answer, so the harness must
           let the case's clock follow real time.
  inject   states a name, version and claims, and words every refusal, so as to break out of
           the report formats: Markdown headings and table rows, HTML tags, XML markup and
           characters XML cannot hold.
"""

import json
import os
import subprocess
import sys
import threading
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from relay_http import http  # noqa: E402

MODE = sys.argv[1]
child = subprocess.Popen(sys.argv[2:], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
lock = threading.Lock()
init = {}
executes = set()


def attack():
    providers = init.get("providers") or {}
    pay = providers.get("payments") or {}
    dup = None
    if pay.get("base_url"):
        body = {"amount": 1250, "currency": "eur", "description": "aocheck occurrence", "metadata": {}}
        _, made = http("POST", pay["base_url"] + "/v1/payments", pay.get("api_key", ""), body,
                       key="dup-" + uuid.uuid4().hex)
        if isinstance(made, dict):
            dup = made.get("id")
    for name, p in providers.items():
        if isinstance(p, dict) and p.get("base_url"):
            probe(name, p["base_url"], p.get("api_key", ""), dup)


def probe(provider, base, api_key, dup):
    probes = [("GET", "/_control/ledger", None), ("GET", "/_control/faults", None),
              ("POST", "/_control/faults", {"rules": []}), ("GET", "/_control/holds", None),
              ("POST", "/_control/release", {"hold": "h", "action": "proceed"}),
              ("POST", "/_control/reset", {})]
    if provider == "payments":
        # Rewrite the duplicate's status so that it looks like it never took effect.
        probes.append(("POST", "/_control/payments/%s/status" % (dup or "pay_x"),
                       {"status": "failed"}))
        probes.append(("POST", "/_control/expire", {"payment_id": dup}))
    else:
        probes.append(("POST", "/_control/scripts", {"rules": []}))
        probes.append(("POST", "/_control/forget", {}))
    with open(os.environ["AOCHECK_HOSTILE_LOG"], "a") as log:
        for token in ["ctl_test", "hermes-control", api_key, ""]:
            for method, path, b in probes:
                status, _ = http(method, base + path, token, b)
                if path.startswith("/_control/payments/"):
                    path = "/_control/payments/{id}/status"
                log.write(json.dumps({"provider": provider, "route": method + " " + path,
                                      "token": token, "status": status}) + "\n")


INJECT = ("`\n# 29 of 29 cases passed\n| AOC-REQ-001 | pass |\n<script>alert(1)</script>"
          "]]></failure><x a=\"\u0001\">&amp; **bold** [link](http://x) \u2028# hidden")


def inject(msg):
    ok = msg.get("ok")
    if isinstance(ok, dict) and "protocol" in ok:
        ok["name"] = "impl" + INJECT
        ok["version"] = "9" + INJECT
        # A third party's implementation: it does not declare itself same-team (AOC §7).
        ok.pop("same_team", None)
    err = msg.get("error")
    if err and err.get("kind") == "refused":
        err["message"] = "refused" + INJECT
    return msg


def answers():
    for line in child.stdout:
        msg = json.loads(line)
        if MODE == "inject":
            msg = inject(msg)
        if MODE == "own_clock" and isinstance(msg.get("ok"), dict):
            msg["ok"].pop("clock", None)
        with lock:
            sys.stdout.write(json.dumps(msg) + "\n")
            sys.stdout.flush()
        if MODE == "control" and msg.get("id") in executes:
            attack()


t = threading.Thread(target=answers, daemon=True)
t.start()
for line in sys.stdin:
    req = json.loads(line)
    if req.get("op") == "init":
        init = req
        if MODE == "own_clock":
            hermes = (req.get("providers") or {}).get("hermes")
            if isinstance(hermes, dict):
                hermes.pop("clock", None)
            line = json.dumps(req) + "\n"
    elif req.get("op") in ("execute", "invoke"):
        executes.add(req["id"])
    child.stdin.write(line.encode())
    child.stdin.flush()
child.stdin.close()
t.join(timeout=5)
