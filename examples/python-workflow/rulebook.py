"""Seed 002's rulebook for a designer graph, its run plan and its conditions (standard library only).

`validate` is validate_designer_graph: one pure function, no I/O, the input never changed; a
defect is {node, field, msg} and an empty list means the graph is valid. Only the graph's shape
short-circuits. Where the seed names a rule but not the defect's place, this follows the
readings of docs/decisions.md D81 (node "" for the graph, `nodes[i]` for a node without an id).
`build_run_plan` drops the trigger and the notes and orders the other steps by a stable
topological sort. `evaluate` reads a condition against the outputs recorded so far.
"""

import json
import re

KINDS = ["trigger", "agent", "condition", "approval", "output", "note"]
OPERATORS = ["==", "!=", "<", "<=", ">", ">="]
ABSENT = object()


class PlanError(Exception):
    """A graph that does not plan (hand-written JSON reaches the planner too)."""

    def __init__(self, defects):
        super().__init__("the design does not plan: %s" % "; ".join(d["msg"] for d in defects))
        self.defects = defects


def field(n, key):
    return n.get(key, ABSENT) if isinstance(n, dict) else ABSENT


def is_int(v):  # a whole number: 2.5 and true are not (never rounded, never cast)
    return isinstance(v, int) and not isinstance(v, bool)


def is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def parse_condition(expr):
    """`out.<node>.<path> <op> <literal>` as (node, path, op, literal); else ValueError."""
    parts = re.split(r"\s", expr.strip(), maxsplit=2)
    if len(parts) < 3:
        raise ValueError("expected `out.<node>.<path> <op> <literal>`, got %s" % json.dumps(expr))
    path, op, lit = parts[0].split("."), parts[1], parts[2].strip()
    if path[0] != "out" or len(path) < 3 or not all(path[1:]):
        raise ValueError("the left side must be `out.<node>.<path>`, got %s" % json.dumps(parts[0]))
    if op not in OPERATORS:
        raise ValueError("operator %s: use one of %s" % (json.dumps(op), ", ".join(OPERATORS)))
    if not lit:
        raise ValueError("the literal after the operator is missing")
    return path[1], path[2:], op, lit


def validate(graph):
    """validate_designer_graph: every defect {node, field, msg} (empty: valid). Only the graph's
    shape short-circuits; every other defect accumulates. A graph-level defect names node ""."""
    nodes = graph.get("nodes") if isinstance(graph, dict) else None
    shape = ("an object with a non-empty `nodes` list is needed" if not isinstance(nodes, list)
             else "the `nodes` list is empty" if not nodes
             else "at most 50 nodes, got %d" % len(nodes) if len(nodes) > 50 else None)
    if shape:
        return [{"node": "", "field": "nodes", "msg": shape}]
    out = []

    def defect(node, fld, msg):
        out.append({"node": node, "field": fld, "msg": msg})

    ids, seen = [], set()
    for i, n in enumerate(nodes):  # a node without a usable id is named by its place
        nid = field(n, "id")
        if isinstance(nid, str) and nid.strip():
            if nid in seen:
                defect(nid, "id", "duplicate node id")
            seen.add(nid)
            ids.append(nid)
        else:
            ids.append("nodes[%d]" % i)
            defect(ids[-1], "id", "every node needs a unique, non-empty string id")
    kinds = {i: field(n, "type") for n, i in zip(nodes, ids) if isinstance(field(n, "type"), str)}
    triggers = sorted(i for i, t in kinds.items() if t == "trigger")
    if len(triggers) != 1:
        defect("", "type", "a graph needs exactly one trigger; it has %s" % (", ".join(triggers) or "none"))
    edges = {}
    for n, nid in zip(nodes, ids):
        kind = field(n, "type")
        if kind not in KINDS:
            defect(nid, "type", "%s; one of %s" % ("`type` is required" if kind is ABSENT else
                                                   "unknown type %s" % json.dumps(kind), ", ".join(KINDS)))
            kind = None
        edges[nid] = after_defects(n, nid, kinds, defect)
        node_defects(n, nid, kind, defect)
    cycle = find_cycle(edges)
    if cycle:
        defect(cycle[0], "after", "cycle: %s" % " -> ".join(cycle))
    return out


def after_defects(n, nid, kinds, defect):
    """`after` is a list of strings naming real nodes, never itself, never a note."""
    after, kept = field(n, "after"), []
    if after is ABSENT or after is None:
        return kept
    if not isinstance(after, list):
        defect(nid, "after", "must be a list of node ids, got %s" % json.dumps(after))
        return kept
    for x in after:
        why = ("must list node ids (strings), got %s" % json.dumps(x) if not isinstance(x, str)
               else "a node cannot come after itself" if x == nid
               else "names no node: %s" % json.dumps(x) if x not in kinds
               else "%s is a note; nothing comes after a note" % json.dumps(x) if kinds[x] == "note"
               else None)
        if why:
            defect(nid, "after", why)
        else:
            kept.append(x)
    return kept


def node_defects(n, nid, kind, defect):
    need = {"agent": "prompt", "condition": "expression", "approval": "question"}.get(kind)
    v = field(n, need) if need else None
    if v is ABSENT:
        defect(nid, need, "a step of type %s cannot run without `%s`" % (kind, need))
    elif need and not isinstance(v, str):
        defect(nid, need, "must be a string, got %s" % json.dumps(v))
    elif need and not v.strip():
        defect(nid, need, "must not be empty")
    elif kind == "condition":
        try:
            parse_condition(v)
        except ValueError as e:
            defect(nid, need, str(e))

    def whole(fld, lo, hi):
        v = field(n, fld)
        if v is not ABSENT and not (is_int(v) and lo <= v <= hi):
            defect(nid, fld, "must be a whole number %d–%d, got %s (never rounded)" % (lo, hi, json.dumps(v)))

    def one_of(fld, *allowed):
        v = field(n, fld)
        if v is not ABSENT and not (isinstance(v, str) and v in allowed):
            defect(nid, fld, "must be one of %s, got %s" % (", ".join(map(json.dumps, allowed)), json.dumps(v)))

    if kind == "agent":
        whole("retries", 0, 3)
    whole("timeout_minutes", 1, 4320)
    one_of("on_timeout", "reject", "escalate")
    one_of("deliver", "notification", "channel")
    if field(n, "deliver") == "channel" and not (isinstance(field(n, "target"), str) and ":" in n["target"]):
        defect(nid, "target", "a channel target is `platform:chat`, with a `:`; got %s"
               % ("nothing" if field(n, "target") is ABSENT else json.dumps(n["target"])))
    if kind == "note":
        one_of("color", "yellow", "blue", "green", "red", "")


def find_cycle(edges):
    """The first cycle a DFS over `after` meets (nodes taken in sorted order), as its path."""
    marks = {k: "new" for k in edges}

    def dfs(n, path):
        marks[n] = "active"
        path.append(n)
        for m in edges[n]:
            if marks.get(m) == "active":
                return path[path.index(m):] + [m]
            if marks.get(m) == "new":
                found = dfs(m, path)
                if found:
                    return found
        path.pop()
        marks[n] = "done"
        return None

    for k in sorted(edges):
        found = dfs(k, []) if marks[k] == "new" else None
        if found:
            return found
    return None


def build_run_plan(graph, fifo=False):
    """The trigger and notes dropped, the other steps in a stable topological order: always the
    earliest step (in the graph's order) whose parents are all placed; with `fifo`, Kahn's order
    with a queue (the steps ready at the start in the graph's order, then each step as it becomes
    ready), another stable topological order seed 002 allows."""
    bad, seen, steps = [], set(), []
    for i, n in enumerate(graph.get("nodes") or [] if isinstance(graph, dict) else []):
        nid, kind = field(n, "id"), field(n, "type")
        if not isinstance(nid, str) or not nid.strip() or nid in seen or kind not in KINDS:
            bad.append({"node": nid if isinstance(nid, str) else "nodes[%d]" % i, "field": "id",
                        "msg": "missing or duplicate id, or unknown type %s" % json.dumps(kind, default=str)})
            continue
        seen.add(nid)
        if kind not in ("trigger", "note"):
            after = field(n, "after")
            after = [a for a in after if isinstance(a, str)] if isinstance(after, list) else []
            steps.append({"id": nid, "kind": kind, "after": after, "node": n})
    known, placed, order, queue = {s["id"] for s in steps}, set(), [], []
    while not bad and len(order) < len(steps):
        ready = [s for s in steps if s["id"] not in placed and s not in queue
                 and all(a in placed or a not in known for a in s["after"])]
        if fifo:
            queue.extend(ready)
            ready = queue
        if not ready:
            bad.append({"node": "", "field": "after", "msg": "no order exists: the steps form a cycle"})
            break
        step = ready.pop(0) if fifo else ready[0]
        placed.add(step["id"])
        order.append(step)
    if bad:
        raise PlanError(bad)
    return order


def evaluate(expr, outputs):
    """A condition over the outputs so far. A value missing at the path makes it false; an order
    compares two numbers only; the literal is JSON where it reads as JSON, else the bare word."""
    try:
        node, path, op, lit = parse_condition(expr)
    except ValueError:
        return False
    v = outputs.get(node, ABSENT)
    for p in path:
        v = v.get(p, ABSENT) if isinstance(v, dict) else ABSENT
    if v is ABSENT:
        return False
    try:
        lit = json.loads(lit)
    except ValueError:
        pass
    if op in ("==", "!="):
        same = (v == lit) if is_num(v) and is_num(lit) else \
            json.dumps(v, sort_keys=True) == json.dumps(lit, sort_keys=True)
        return same == (op == "==")
    if not (is_num(v) and is_num(lit)):
        return False
    return {"<": v < lit, "<=": v <= lit, ">": v > lit, ">=": v >= lit}[op]
