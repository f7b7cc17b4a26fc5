#!/usr/bin/env python3
"""A lying twin of examples/shop-keyed for aocheck deploy's report route
(tests/it/deploy_hostile.rs): the same service, charging exactly as shop-keyed does, whose
served record (GET /orders/{order_id}/aoc) lies in one way, chosen by LIE:

  rewrite             an earlier entry disappears once the order is settled (AOC-REQ-004)
  late_entry          the provider entry is shown only once the order is settled, although the
                      create left long before (AOC-REQ-004)
  unbacked_source     the report names an evidence source the history never observed
                      (AOC-REQ-009)
  retired_generation  after a takeover, an entry under the retired generation (AOC-REQ-006)
  wrong_binding       the report names another binding than the history bound (AOC-REQ-003)
  invented_outcome    the report says resolved/success while the history decided nothing
                      (AOC-REQ-009 / -011)

Everything else (the charges, the labels) is shop-keyed's own, so only the record is at fault.
"""

import importlib.util
import os
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
APP = HERE.parent.parent.parent / "examples" / "shop-keyed" / "app.py"
spec = importlib.util.spec_from_file_location("shop_keyed", APP)
app = importlib.util.module_from_spec(spec)
spec.loader.exec_module(app)

LIE = os.environ.get("LIE", "")
honest_render = app.render


def settled(rec):
    return any(e["kind"] == "decided" for e in rec["entries"])


def lying_render(order_id, rows):
    rec = honest_render(order_id, rows)
    entries, report = rec["entries"], rec["report"]
    if LIE == "rewrite" and settled(rec):
        del entries[0]
        # The indexes a decision cites shift with it: keep them pointing at what they named.
        for e in entries:
            if e["kind"] == "decided":
                e["evidence"] = [i - 1 for i in e["evidence"]]
    elif LIE == "late_entry" and not settled(rec):
        rec["entries"] = [e for e in entries if e["kind"] != "entered"]
        if report["provider_entry"] == "entered":
            report["provider_entry"] = "not_entered"
        report["authority"] = "held" if report["binding_digest"] else "none"
        report["entry_attempts"] = 0
        if report["state"] == "unresolved":
            report["state"] = "pending"
    elif LIE == "unbacked_source":
        report["evidence_sources"] = sorted(set(report["evidence_sources"]) | {"stripe.webhook"})
    elif LIE == "retired_generation":
        taken = [e for e in entries if e["kind"] == "replaced"]
        first = next((e for e in entries if e["kind"] == "entered"), None)
        if taken and first is not None:
            phantom = dict(first)
            phantom["entry"] = dict(first["entry"], seq=len(entries), type="charge_sent")
            entries.append(phantom)
            report["entry_attempts"] += 1
    elif LIE == "wrong_binding" and report["binding_digest"]:
        report["binding_digest"] = "sha256:" + "0" * 64
    elif LIE == "invented_outcome" and not settled(rec) and report["entry_attempts"]:
        report["state"] = "resolved"
        report["outcome"] = "success"
        report["missing_knowledge"] = []
    return rec


app.render = lying_render

if __name__ == "__main__":
    if LIE not in ("rewrite", "late_entry", "unbacked_source", "retired_generation",
                   "wrong_binding", "invented_outcome"):
        sys.exit(f"record_liar: unknown LIE {LIE!r}")
    sys.exit(app.main())
