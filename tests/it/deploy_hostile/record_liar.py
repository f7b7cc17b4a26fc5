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

Lies a hostile review of the record route found passing (issue 39); each now fails, or leaves
what it hides not established (see the yamls record-<lie>):

  reentry_retired_refuse  the record is "busy" (503) while the order is unsettled, so the pre-kill
                      look is skipped and no generation is retired; the successor's takeover is
                      replaced by a second entry under the killed generation (AOC-REQ-006, -010)
  reentry_no_generation   the successor's takeover is replaced by a second entry that names no
                      generation (the schema requires one) (AOC-REQ-006, -010)
  second_entry        after the takeover, a second entry under the successor's own generation:
                      the record itself says the unresolved order entered the provider again
                      (AOC-REQ-010)
  phantom_reply       after the restart, the decision rests on a create "response" the provider
                      never delivered, recorded without source_kind (AOC-REQ-009, -007)
  ack_without_ref     "acknowledged" right after entry, while the create is still parked at the
                      provider, with no provider reference (AOC-REQ-009, -004)
  flags_null          every missing-knowledge word is mapped to null and the report drops them
                      (AOC-REQ-009)
  success_from_accepted   the observation the success rests on is interpreted `accepted`
                      (in progress), never `success` (AOC-REQ-011)
  error_read_as_success   the create's 500 reply is interpreted `success` and the decision rests
                      on it (AOC-REQ-009, -011)
  lookup_other_binding    the lookups the decision rests on say they are about another binding
                      (AOC-REQ-003, -007)
  refuse_hide_uncertainty 503 while unsettled; once settled the create's 500 observation (the
                      order's uncertainty) is gone from the record (AOC-REQ-004)
  evidence_not_observation the decision cites entry 0 (the order's creation) as its evidence: the
                      protocol calls an index that names no earlier observation corruption
                      (AOC-REQ-004, -009)

SLOW=1 makes the honest reconciliation wait 1.5 s before it asks the provider (behaviour only,
nothing about the charge changes), so that looks see the order unresolved.

Everything else (the charges, the labels) is shop-keyed's own, so only the record is at fault.
"""

import importlib.util
import os
import pathlib
import sqlite3
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
APP = HERE.parent.parent.parent / "examples" / "shop-keyed" / "app.py"
spec = importlib.util.spec_from_file_location("shop_keyed", APP)
app = importlib.util.module_from_spec(spec)
spec.loader.exec_module(app)

LIE = os.environ.get("LIE", "")
honest_render = app.render


def settled(rec):
    return any(e["kind"] == "decided" for e in rec["entries"])


# ---------- helpers for the lies below: rows are the record's (seq, body) pairs ----------


def rebuild(rows):
    """Renumbers rows 0.. (a row is (old_seq or None, body)) and keeps every decision's
    evidence pointing at the rows it named (an evidence seq whose row is gone is dropped)."""
    remap = {old: i for i, (old, _) in enumerate(rows) if old is not None}
    out = []
    for i, (_, body) in enumerate(rows):
        if body.get("type") == "order_settled" and "_evidence" not in body:
            body = dict(body, evidence=[remap[x] for x in body["evidence"] if x in remap])
        out.append((i, body))
    return out


def strip(rec):
    """Removes envelope fields a lie marked with `_strip`, and every `_` marker."""
    for e in rec["entries"]:
        own = e["entry"]
        for k in own.pop("_strip", []):
            e.pop(k, None)
        if "_evidence" in own:
            e["evidence"] = own.pop("_evidence")
        for k in [k for k in own if k.startswith("_")]:
            del own[k]
    return rec


def busy():
    """What a busy store answers (the handler turns it into a 503)."""
    raise sqlite3.OperationalError("database is locked")


def first(rows, t):
    return next(((s, b) for s, b in rows if b.get("type") == t), (None, None))


def reentry(rows, no_generation=False):
    """The takeover row becomes an entry under the generation it took over from."""
    _, sent = first(rows, "charge_sent")
    out = []
    for s, b in rows:
        if b.get("type") == "job_taken_over" and sent is not None:
            g = b.get("from_generation") or sent["generation"]
            b = {"type": "charge_sent", "generation": g, "attempt": sent["attempt"],
                 "owner": b.get("owner"), "idempotency_key": sent.get("idempotency_key"),
                 "at": b["at"]}
            if no_generation:
                b["_strip"] = ["generation"]
        out.append((s, b))
    return out


def settled_rows(rows):
    return any(b.get("type") == "order_settled" for _, b in rows)


def new_lies(order_id, rows):
    """The lies found to pass (None: not one of them)."""
    if LIE in ("reentry_retired_refuse", "reentry_no_generation"):
        # Served on every look (no 503), reentry_retired_refuse fails AOC-REQ-006
        # (no_retired_entry): the pre-kill look retires generation 1.
        if LIE == "reentry_retired_refuse" and not settled_rows(rows):
            busy()
        return strip(honest_render(order_id, reentry(rows, LIE == "reentry_no_generation")))
    if LIE == "second_entry":
        out = []
        for s, b in rows:
            out.append((s, b))
            if b.get("type") == "job_taken_over":
                _, sent = first(rows, "charge_sent")
                g = b["generation"]
                out.append((None, {"type": "charge_sent", "generation": g,
                                   "attempt": f"{sent['idempotency_key']}/g{g}",
                                   "owner": b.get("owner"),
                                   "idempotency_key": sent["idempotency_key"], "at": b["at"]}))
        return honest_render(order_id, rebuild(out))
    if LIE == "phantom_reply":
        taken, _ = first(rows, "job_taken_over")
        if taken is None:
            return honest_render(order_id, rows)
        _, sent = first(rows, "charge_sent")
        _, bound = first(rows, "charge_bound")
        out = [(s, b) for s, b in rows if s <= taken]
        phantom = {"type": "provider_answered", "source": "stripe.payment_intents.create",
                   "asked": "response", "attempt": sent["attempt"],
                   "binding_digest": bound["binding_digest"], "reply_received": True,
                   "reply": {"status": "succeeded"}, "reading": "paid", "gaps": [],
                   "at": rows[taken][1]["at"]}
        # With source_kind "response" kept, authentic_as_claimed fails it (AOC-REQ-009).
        phantom["_strip"] = ["source_kind"]
        out.append((None, phantom))
        settled = next((b for _, b in rows if b.get("type") == "order_settled"), None)
        if settled is not None:
            out.append((None, dict(settled, evidence=[len(out) - 1], _evidence=[len(out) - 1])))
        return strip(honest_render(order_id, rebuild(out)))
    if LIE == "ack_without_ref":
        out = []
        for s, b in rows:
            out.append((s, b))
            if b.get("type") == "charge_sent" and not any(
                    x.get("_phantom") for _, x in out):
                out.append((None, {"type": "intent_known", "payment_intent": None,
                                   "named_by": None, "at": b["at"], "_phantom": True}))
        return strip(honest_render(order_id, rebuild(out)))
    if LIE == "flags_null":
        # Without the null mapping the dropped flag fails AOC-REQ-009 (state_matches_history).
        rec = honest_render(order_id, rows)
        rec["report"]["missing_knowledge"] = []
        rec["flag_map"] = {w: None for w in app.GAPS}
        return rec
    if LIE == "success_from_accepted":
        out = [(s, dict(b, reading="in_progress")) if b.get("type") == "provider_answered"
               and b.get("reading") == "paid" else (s, b) for s, b in rows]
        return honest_render(order_id, out)
    if LIE == "error_read_as_success":
        err = next((s for s, b in rows if b.get("type") == "provider_answered"
                    and b.get("asked") == "response" and b.get("reading") is None
                    and (b.get("reply") or {}).get("http_status")), None)
        if err is None:
            return honest_render(order_id, rows)
        out = []
        for s, b in rows:
            if s == err:
                b = dict(b, reading="paid", gaps=[])
            elif b.get("type") == "order_settled":
                b = dict(b, evidence=[err])
            out.append((s, b))
        return honest_render(order_id, out)
    if LIE == "lookup_other_binding":
        other = "sha256:" + "1" * 64
        out = [(s, dict(b, binding_digest=other)) if b.get("type") == "provider_answered"
               and b.get("asked") in ("lookup", "listing") and b.get("binding_digest")
               else (s, b) for s, b in rows]
        return honest_render(order_id, out)
    if LIE == "refuse_hide_uncertainty":
        # Served on every look (no 503), the hidden entry fails AOC-REQ-004 (history_append_only).
        if not settled_rows(rows):
            busy()
        out = [(s, b) for s, b in rows if not (
            b.get("type") == "provider_answered" and b.get("asked") == "response"
            and b.get("reading") is None)]
        return honest_render(order_id, rebuild(out))
    if LIE == "evidence_not_observation":
        return honest_render(order_id, [(s, dict(b, evidence=[0])) if b.get("type") == "order_settled"
                                        else (s, b) for s, b in rows])
    return None


NEW_LIES = ("reentry_retired_refuse", "reentry_no_generation", "second_entry", "phantom_reply",
            "ack_without_ref", "flags_null", "success_from_accepted", "error_read_as_success",
            "lookup_other_binding", "refuse_hide_uncertainty", "evidence_not_observation")


def lying_render(order_id, rows):
    if LIE in NEW_LIES:
        return new_lies(order_id, rows)
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

if os.environ.get("SLOW") == "1":
    honest_search = app.Provider.search

    def slow_search(self, order):
        time.sleep(1.5)
        return honest_search(self, order)

    app.Provider.search = slow_search

if __name__ == "__main__":
    if LIE not in ("rewrite", "late_entry", "unbacked_source", "retired_generation",
                   "wrong_binding", "invented_outcome") + NEW_LIES:
        sys.exit(f"record_liar: unknown LIE {LIE!r}")
    sys.exit(app.main())
