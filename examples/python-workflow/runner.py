#!/usr/bin/env python3
"""Seed 002's Hermes Workflow runner over aocheck-sut/2, in Python (standard library only).

One process is one runner and one drive (`workflow_start`, `workflow_resume`, `workflow_answer`):
a runner knows only what its home holds, designs in `{home}/workflow-designs/<name>.json` and
runs in `{home}/workflow-runs/<run_id>.json`, each written to a temp file in its own folder,
fsynced, then moved over the old file with os.replace.

The run advances one step at a time through the plan (the design without its trigger and notes,
in a stable topological order) and is saved after every step and before every effect: an agent
step's attempt (`launching`) before its Hermes run is started, a delivery's receipt (`ok: null`)
before it is sent. A resume never launches an attempt still `launching` again (the step parks
at `awaiting_agent`: a run may exist under its correlation), and never sends a receipt still
`ok: null` again (its fate is unknown; the run goes on).

  aocheck run --cases cases/workflow --sut 'python3 examples/python-workflow/runner.py'
"""

import json
import os
import re
import sys
import time
import urllib.error
import urllib.request
import uuid

sys.dont_write_bytecode = True  # nothing is left beside the example
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rulebook import PlanError, build_run_plan, evaluate, field, is_int, validate  # noqa: E402

# Choices seed 002 leaves open, each an honest alternative aocheck must accept:
#   --plan fifo          Kahn's queue order instead of "the earliest ready step in graph order"
#   --approval answers   an approval's result kept only in `answers`, as its choice
CHOICES = {"plan": "earliest", "approval": "outputs"}
for _i, _arg in enumerate(sys.argv[1:-1], 1):
    if _arg.startswith("--") and _arg[2:] in CHOICES:
        CHOICES[_arg[2:]] = sys.argv[_i + 1]

PROTOCOL = "aocheck-sut/2"
OPERATIONS = ["workflow_validate", "workflow_start", "workflow_resume", "workflow_answer"]
STATUSES = ["running", "awaiting_agent", "awaiting_approval", "completed", "failed"]
HTTP_TIMEOUT = 10.0  # seconds, for each HTTP request
PATIENCE = 8.0  # seconds a Hermes run is polled before its end counts as unknown
DESIGN_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}\Z")
RUN_ID = re.compile(r"[a-f0-9]{6,32}\Z")


def log(msg):
    sys.stderr.write("python-workflow: %s\n" % msg)
    sys.stderr.flush()


class Fail(Exception):
    """A refusal, answered as the protocol's error kind: missing, corrupt, not_waiting, invalid."""

    def __init__(self, kind, message, details=None):
        super().__init__(message)
        self.kind, self.details = kind, details


# ------------------------------------------------------------------ the home

def write_atomic(path, data):
    """A temp file in the destination folder, written and fsynced, then os.replace."""
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, ".%s.%s.tmp" % (os.path.basename(path), uuid.uuid4().hex))
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)  # the rename itself is durable
    finally:
        os.close(fd)


class Home:
    def __init__(self, root):
        self.root = root

    def path(self, folder, name, rule, what):
        if not isinstance(name, str) or not rule.match(name):
            raise Fail("invalid", "%s %s: use ^%s$" % (what, json.dumps(name), rule.pattern[:-2]))
        return os.path.join(self.root, folder, name + ".json")

    def read(self, path, what):
        """JSON, or `missing` (FileNotFoundError), or `corrupt` naming `what` (ValueError)."""
        try:
            with open(path, "rb") as f:
                return json.loads(f.read())
        except FileNotFoundError:
            raise Fail("missing", "%s: no file %s" % (what, path))
        except (OSError, ValueError) as e:
            raise Fail("corrupt", "%s (%s): unreadable or not JSON: %s" % (what, path, e))

    def save_design(self, name, graph):
        path = self.path("workflow-designs", name, DESIGN_NAME, "design name")
        defects = validate(graph)  # the store validates again: a second line of defence
        if defects:
            raise Fail("invalid", "design %s is refused: %s" % (name, "; ".join(
                "%s %s: %s" % (d["node"] or "(graph)", d["field"], d["msg"]) for d in defects)), {"defects": defects})
        write_atomic(path, json.dumps(graph, indent=2).encode())

    def load_design(self, name):
        return self.read(self.path("workflow-designs", name, DESIGN_NAME, "design name"), "design %s" % name)

    def run_path(self, run_id):
        return self.path("workflow-runs", run_id, RUN_ID, "run id")

    def save_run(self, st):
        write_atomic(self.run_path(st["run_id"]), json.dumps(st, indent=2).encode())

    def load_run(self, run_id):
        """The run, or `missing`, or `corrupt` naming the run (seed 002's ValueError)."""
        path = self.run_path(run_id)
        st = self.read(path, "run %s" % run_id)
        why = defect_of(st, run_id)
        if why:
            raise Fail("corrupt", "run %s (%s): %s" % (run_id, path, why))
        return st


STATE_FIELDS = {"run_id": str, "name": str, "cursor": int, "status": str, "outputs": dict,
                "skipped": list, "answers": dict, "deliveries": list, "attempts": dict}


def defect_of(st, run_id):
    """Why a parsed run file is not a state of run `run_id` (None: it is one)."""
    if not isinstance(st, dict):
        return "not a run state"
    for k, t in STATE_FIELDS.items():
        if not isinstance(st.get(k), t) or isinstance(st.get(k), bool):
            return "field %s is missing or not a %s" % (k, t.__name__)
    if "pending" not in st or "error" not in st:
        return "field pending or error is missing"
    if st["status"] not in STATUSES:
        return "unknown status %s" % json.dumps(st["status"])
    if st["run_id"] != run_id:
        return "it holds run %s" % json.dumps(st["run_id"])
    if not all(isinstance(x, dict) for x in st["deliveries"] + list(st["attempts"].values())):
        return "a receipt or an attempt is not an object"
    return None


# ------------------------------------------------------------------ Hermes and the channel

NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def http(method, url, body=None, token=None):
    """(status, body); raises on a transport failure (a closed connection, a timeout)."""
    headers = {"Accept": "application/json", "Content-Type": "application/json"}
    if token:
        headers["Authorization"] = "Bearer " + token
    data = None if body is None else json.dumps(body).encode()
    try:
        with NO_PROXY.open(urllib.request.Request(url, data, headers, method=method), timeout=HTTP_TIMEOUT) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        try:
            return e.code, e.read()
        except Exception:
            return e.code, b""


def launch_agent(hermes, prompt, ctx, corr):
    """An agent step as a Hermes run under session `corr`, polled to its end:
    ("returned", {"output": …}), ("failed", why) when definitive, or ("unknown", why)."""
    base, key = hermes["base_url"].rstrip("/"), hermes.get("api_key")
    text = "%s\n\nContext (the outputs of the steps before):\n%s" % (prompt, json.dumps(ctx, indent=2))
    try:
        status, raw = http("POST", base + "/v1/runs", {"input": text, "session_id": corr}, key)
    except Exception as e:
        return "unknown", "no answer to the start (%r): a run may exist" % (e,)
    if 400 <= status < 500:
        return "failed", "Hermes refused the run: HTTP %d" % status
    if not 200 <= status < 300:
        return "unknown", "the start was answered HTTP %d: a run may exist" % status
    try:
        hid = json.loads(raw).get("run_id")
    except Exception:
        hid = None
    if not isinstance(hid, str) or not hid:
        return "unknown", "the start was answered without a run id: a run may exist"
    until = time.monotonic() + PATIENCE
    while time.monotonic() < until:
        try:
            status, raw = http("GET", "%s/v1/runs/%s" % (base, hid), None, key)
            if status == 404:
                return "unknown", "run %s is no longer known to Hermes: its end is unknown" % hid
            doc = json.loads(raw) if status == 200 else {}
            end = doc.get("status") if isinstance(doc, dict) else None
            if end == "completed":
                return "returned", {"output": doc.get("output")}
            if end in ("failed", "cancelled"):
                return "failed", "run %s ended %s: %s" % (hid, end, doc.get("error"))
        except Exception as e:
            log("polling run %s: %r" % (hid, e))
        time.sleep(0.02)
    return "unknown", "run %s had not ended within %.0f s" % (hid, PATIENCE)


def deliver(channel, receipt, payload):
    """(ok, detail): a 2xx delivered, a 4xx refused (nothing delivered), anything else unknown."""
    if not (channel or {}).get("base_url"):
        return False, "no channel is configured: nothing was delivered"
    body = {"id": receipt["id"], "deliver": receipt["deliver"], "target": receipt["target"], "payload": payload}
    try:
        status, _ = http("POST", channel["base_url"].rstrip("/") + "/v1/deliveries", body)
    except Exception as e:
        return None, "no answer from the channel (%r): it may have been delivered" % (e,)
    if 200 <= status < 300:
        return True, None
    if 400 <= status < 500:
        return False, "the channel refused it: HTTP %d" % status
    return None, "the channel answered HTTP %d: it may have been delivered" % status


# ------------------------------------------------------------------ the sequential runner

def new_state(run_id, name):
    return {"run_id": run_id, "name": name, "cursor": 0, "status": "running", "outputs": {}, "skipped": [],
            "pending": None, "error": None, "answers": {}, "deliveries": [], "attempts": {}}


def context(step, st):
    """The parents' outputs, by id (a skipped parent has none)."""
    return {p: st["outputs"][p] for p in step["after"] if p in st["outputs"]}


def text(step, key):
    v = step["node"].get(key)
    return v if isinstance(v, str) else ""


def decide(plan, st, seam, now):
    """One step. ("stepped"|"parked"|"finished", None), or an effect whose record is already in
    the state: ("launch", step) with its attempt, ("deliver", (receipt, payload)) with its receipt."""
    if st["status"] in ("completed", "failed"):
        return "finished", None
    if st["status"] in ("awaiting_agent", "awaiting_approval"):
        return "parked", None
    if st["cursor"] >= len(plan):
        st["status"], st["pending"] = "completed", None
        return "finished", None
    step = plan[st["cursor"]]
    sid, kind = step["id"], step["kind"]
    if any(p in st["skipped"] for p in step["after"]):  # skip propagation is transitive
        st["skipped"].append(sid)
    elif kind == "agent":
        return decide_agent(step, st, seam)
    elif kind == "condition":
        if evaluate(text(step, "expression"), st["outputs"]):
            st["outputs"][sid] = True
        else:
            st["skipped"].append(sid)
    elif kind == "approval" and sid in st["answers"]:
        if CHOICES["approval"] == "outputs":
            st["outputs"][sid] = st["answers"][sid]
    elif kind == "approval":
        st["status"] = "awaiting_approval"
        st["pending"] = {"node": sid, "kind": "approval", "question": text(step, "question"),
                         "options": step["node"].get("options", ["approve", "reject"]),
                         "context": context(step, st), "waiting_since": now}
        return "parked", None
    elif kind == "output":
        return decide_output(step, st)
    else:
        st["status"], st["error"] = "failed", "step %s: unknown kind %s" % (sid, json.dumps(kind))
        return "finished", None
    st["cursor"] += 1
    return "stepped", None


def decide_agent(step, st, seam):
    sid = step["id"]
    corr, attempt = "workflow:%s:%s" % (st["run_id"], sid), st["attempts"].get(sid, {})
    pending = {"node": sid, "kind": "agent", "prompt": text(step, "prompt"), "context": context(step, st),
               "correlation": corr}
    if attempt.get("state") == "launching":
        # Launched, its result never recorded: a run may exist. Nothing is guessed, nothing relaunched.
        pending.update(unknown=True, reason="this step was launched and its result was not recorded: a run "
                       "may exist under its correlation id; it is not launched again")
    elif attempt.get("state") == "done":
        st["cursor"] += 1
        return "stepped", None
    elif seam:
        st["attempts"][sid] = {"correlation": corr, "launches": attempt.get("launches", 0) + 1,
                               "state": "launching"}
        return "launch", step
    st["status"], st["pending"] = "awaiting_agent", pending  # no seam: say what the step needs
    return "parked", None


def decide_output(step, st):
    sid, rid, payload = step["id"], "workflow:%s:%s" % (st["run_id"], step["id"]), context(step, st)
    earlier = [r for r in st["deliveries"] if r.get("id") == rid]
    if earlier or not text(step, "deliver"):
        # A receipt from before that is still in flight has an unknown fate: never sent again.
        for r in earlier:
            if r.get("ok") is None and r.get("detail") is None:
                r["detail"] = "in flight when the runner stopped: its outcome is unknown, and it is not sent again"
        st["outputs"][sid] = payload
        st["cursor"] += 1
        return "stepped", None
    receipt = {"node": sid, "id": rid, "deliver": text(step, "deliver"),
               "target": step["node"]["target"] if isinstance(field(step["node"], "target"), str) else None,
               "ok": None, "detail": None}
    st["deliveries"].append(receipt)
    return "deliver", (receipt, payload)


def recorded(plan, st, node):
    """A step's result is recorded: the cursor moves past it (only past it); the run runs on."""
    if st["cursor"] < len(plan) and plan[st["cursor"]]["id"] == node:
        st["cursor"] += 1
    st["status"], st["pending"] = "running", None


def agent_returned(plan, st, node, result):
    """`structured` if the key is there, else `output`, else "" (presence, not truthiness)."""
    has = isinstance(result, dict)
    st["outputs"][node] = result["structured"] if has and "structured" in result else \
        result["output"] if has and "output" in result else ""
    if node in st["attempts"]:
        st["attempts"][node]["state"] = "done"
    recorded(plan, st, node)


def agent_failed(plan, st, node, why):
    """A definitive failure: launched again while the step's retries allow, else the run fails."""
    retries = next(s for s in plan if s["id"] == node)["node"].get("retries", 0)
    attempt = st["attempts"][node]
    attempt["state"], attempt["detail"] = "failed", why
    if attempt["launches"] > (retries if is_int(retries) and retries >= 0 else 0):
        st["status"], st["error"] = "failed", "step %s: %s" % (node, why)


def answer(plan, st, node, value):
    """An approval's choice, or an agent step's result (as a person or a cron session gives it)."""
    waiting = (st["pending"] or {}).get("node") if st["status"].startswith("awaiting") else None
    if waiting is None or waiting != node:
        raise Fail("not_waiting", "run %s waits for %s, not %s" % (
            st["run_id"], json.dumps(waiting) if waiting else "nothing", json.dumps(node)))
    st["answers"][node] = value
    if st["status"] == "awaiting_approval":
        if CHOICES["approval"] == "answers":
            st["answers"][node] = value.get("choice", value) if isinstance(value, dict) else value
        else:
            st["outputs"][node] = value
        recorded(plan, st, node)
    else:
        agent_returned(plan, st, node, value)


class Runner:
    def __init__(self, init):
        self.home = Home((init.get("workflow") or {}).get("home") or "")
        providers = init.get("providers") or {}
        self.hermes, self.channel, self.now = providers.get("hermes"), providers.get("channel"), init.get("now")

    def plan(self, graph):
        try:
            return build_run_plan(graph, fifo=CHOICES["plan"] == "fifo")
        except PlanError as e:
            raise Fail("invalid", str(e), {"defects": e.defects})

    def drive(self, plan, st):
        """Until the run parks or ends: saved after every decision, and before every effect."""
        while True:
            what, effect = decide(plan, st, bool(self.hermes), self.now)
            self.home.save_run(st)
            if what in ("parked", "finished"):
                log("run %s is %s at cursor %d" % (st["run_id"], st["status"], st["cursor"]))
                return {"state": st}
            if what == "stepped":
                continue
            if what == "launch":
                sid, attempt = effect["id"], st["attempts"][effect["id"]]
                log("launching %s (launch %d)" % (attempt["correlation"], attempt["launches"]))
                got, value = launch_agent(self.hermes, text(effect, "prompt"), context(effect, st),
                                          attempt["correlation"])
                log("%s: %s %s" % (attempt["correlation"], got, "" if got == "returned" else value))
                if got == "returned":
                    agent_returned(plan, st, sid, value)
                elif got == "failed":
                    agent_failed(plan, st, sid, value)
                # unknown: the attempt stays `launching`, and the next decision parks the step
            elif what == "deliver":
                receipt, payload = effect
                receipt["ok"], receipt["detail"] = deliver(self.channel, receipt, payload)
                log("delivery %s: ok %s %s" % (receipt["id"], receipt["ok"], receipt["detail"] or ""))
                st["outputs"][receipt["node"]] = payload
                recorded(plan, st, receipt["node"])
            self.home.save_run(st)

    def op_workflow_validate(self, req):
        return {"defects": validate(req.get("graph"))}

    def op_workflow_start(self, req):
        name, design, run_id = req.get("name"), req.get("design"), req.get("run_id")
        path = self.home.run_path(run_id)
        self.home.save_design(name, design)
        if os.path.exists(path):
            self.home.load_run(run_id)  # a corrupt one is refused as such
            raise Fail("invalid", "run %s exists already: resume it" % run_id)
        return self.drive(self.plan(design), new_state(run_id, name))

    def op_workflow_resume(self, req):
        st = self.home.load_run(req.get("run_id"))
        return self.drive(self.plan(self.home.load_design(st["name"])), st)

    def op_workflow_answer(self, req):
        st = self.home.load_run(req.get("run_id"))
        plan = self.plan(self.home.load_design(st["name"]))
        answer(plan, st, req.get("node"), req.get("answer"))
        self.home.save_run(st)
        return self.drive(plan, st)


# ------------------------------------------------------------------ the protocol

def error(kind, message, definite=True, details=None):
    e = {"kind": kind, "message": message, "outcome": "definite" if definite else "indefinite"}
    if details is not None:
        e["details"] = details
    return e


def write(reply):
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()


def main():
    runner = None
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
            rid, op = req["id"], req["op"]
        except (ValueError, KeyError, TypeError) as e:
            log("not a request (%s): %r" % (e, line[:200]))
            return 3
        if op == "init":
            if req.get("protocol") != PROTOCOL:
                log("protocol %r asked; this runner speaks %s" % (req.get("protocol"), PROTOCOL))
            runner = Runner(req)
            log("runner ready, home %s" % runner.home.root)
            write({"id": rid, "ok": {"protocol": PROTOCOL, "name": "python-workflow-example", "version": "0.1.0",
                                     "operations": OPERATIONS,
                                     "key_rule": "{occurrence}",  # required; no payments are made here
                                     "same_team": True}})  # written inside aocheck's project (AOC §7)
        elif runner is None:
            write({"id": rid, "error": error("invalid", "%s before init" % op)})
        elif op not in OPERATIONS:
            write({"id": rid, "error": error("unsupported", "%s: this process is a workflow runner" % op)})
        else:
            runner.now = req.get("now", runner.now)
            try:
                write({"id": rid, "ok": getattr(runner, "op_" + op)(req)})
            except Fail as f:
                log("%s refused (%s): %s" % (op, f.kind, f))
                write({"id": rid, "error": error(f.kind, str(f), details=f.details)})
            except Exception as e:  # unexpected: what happened outside is not known
                log("%s failed: %r" % (op, e))
                write({"id": rid, "error": error("internal", repr(e), definite=False)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
