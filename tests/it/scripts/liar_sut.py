#!/usr/bin/env python3
"""Liars for aocheck's own tests (issue 21): a relay in front of a real implementation (argv[2:],
e.g. `aocheck sut reference`) that lies as the named mode (argv[1]) says, where the providers'
ledgers can tell. Each lie keeps the history self-consistent, so only the ground truth gives it
away.

  wrong_amount    every `create` asks the implementation for one cent more than the case did: the
                  payment is real, under the right key, for the wrong amount.
  refund          after every `execute`, refunds every payment of the account under a fresh key:
                  a refund nobody asked for, with no remedy behind it.
  phantom_lookup  every history gains an authenticated lookup observation, right after its first
                  entry, that the provider never served.
  caution_flags   not a lie (issue 37, honest caution): every report raises missing knowledge
                  no observation in its history raises (`stale`, and "effect unknown" in its
                  own words).
  conflict_flag   every report that says resolved also raises `conflicting`: a terminal
                  answer over evidence it says disagrees.
  late_charge     when the harness asks it to describe itself a second time (the final
                  expectations, after the last `state`; the first is at the start), makes
                  one payment under a fresh key: an effect after the last judged look.
  generation_back every takeover its histories record names generation 1, the predecessor's.
  hide_takeover   its histories leave out every takeover entry, so a successor's entry names a
                  generation that, by the history, never took the occurrence over.
  fail_over_paid  every decision, the observation it rests on and the report say
                  `final_failure` where the implementation saw success: the provider holds a
                  succeeded payment.
  phantom_remedy  every report lists a remedy its history never links.
  phantom_source  every report names an evidence source (`payments.webhook`) its history never
                  observed.
  domain_blank    every report names no coordination domain.
  binding_drift   from an occurrence's second report on, its binding digest is another one.
  unbound_reply   every provider response its histories record answers an attempt that was
                  never entered.
  release_entered every report of an entered occurrence says it was released.
  describe_supported  describes its composition as supported whatever the case configured.
  describe_no_bypass  describes no bypass path.
  recreate_after_expire  on an occurrence's second `reconcile` (after the provider forgot its
                  idempotency record), makes the payment again under the occurrence's own key.
  idle_flood      not a lie: at `init`, opens 1,000 connections to fake-payments and leaves
                  them idle for the whole case; otherwise behaves.
  bloat           not a lie: every history entry's own object carries 85 kB of padding, so a
                  twelve-entry history comes close to the protocol's 1 MiB line limit.
  wrong_ref       every acknowledgement names a provider reference that is not the occurrence's
                  payment.
  other_report    every report is about another occurrence than the one asked for.
  lane_lie        the lane always answers generation 1, whoever took over.
  lane_string     the lane answers its generation as a string.
  claims_vary     the observer describes itself with other claims than every executor does.
  claim_unicode   claims that a Succession Receipt fences a provider path, with a zero-width
                  space, a soft hyphen and a Cyrillic letter in it, and a negation elsewhere.
  free_text       adds a free-text claim (a migration claim, reworded past any word list):
                  prose establishes nothing, so AOC-REQ-013 is undecided, never passed.
  claim_mixed     claims something harmless with a word that mixes Latin and Greek letters.
  hermes_extra    after every `invoke`, starts one more Hermes run in a session of its own.
  hermes_output   every completed operator result reports an output its run never produced.
  peek            after every `execute`, only reads the payments ledger at /_control/ledger with
                  its API key (refused), and otherwise behaves.
  fake_driven     says "clock": "driven" (the reference's answer) but takes the case's clock out of
                  the `init` it passes on, so every wait runs in real time.
  clock_push      after every `invoke` has been answered, asks the case's clock to sleep an hour,
                  so as to move the fakes' time while no call of the harness is in flight.
  remedy_refund   after each new refund remedy, refunds one cent of the original's payment
                  under the remedy's own key (the key rule applied to the remedy), while the
                  remedy's history records no provider entry.
  remedy_wrong    after a replacement_attempt remedy, refunds one cent of the original's payment
                  under that remedy's key: a remedy of a kind that moves no money back.
  refund_own_key  after every `execute`, refunds one cent of the occurrence's payment under the
                  occurrence's own key: no remedy behind it.
  claim_other     where the lane hands out nothing (a claim refused, or answered `admission:
                  null`), answers the first admission any of its processes claimed before: work
                  handed out again, out of order, where the implementation itself refused.
  dead_key        every process leaves its payments credential in a file beside the case's
                  store; on `adopt`, a successor makes a lookup with the first process's
                  credential, as a predecessor that never really died would.
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
ops = {}
reqs = {}
describes = []
seen_reports = {}
reconciles = {}
idle = []


def refund_everything():
    pay = (init.get("providers") or {}).get("payments") or {}
    if not pay.get("base_url"):
        return
    _, listed = http("GET", pay["base_url"] + "/v1/payments?limit=100", pay.get("api_key", ""))
    for p in (listed or {}).get("data") or []:
        if p.get("status") == "succeeded":
            http("POST", "%s/v1/payments/%s/refund" % (pay["base_url"], p["id"]),
                 pay.get("api_key", ""), {"amount": 1}, key="refund-" + uuid.uuid4().hex)


def keys_file():
    store = init.get("store") or {}
    base = os.path.dirname(store["path"]) if store.get("path") else "/tmp"
    return os.path.join(base, "liar-keys-%s.txt" % (init.get("domain") or {}).get("id", "x"))


def claimed_file():
    return keys_file() + ".claims"


def claim_other(msg):
    ok = msg.get("ok")
    if isinstance(ok, dict) and ok.get("admission") is not None:
        with open(claimed_file(), "a") as f:
            f.write(ok["admission"] + "\n")
        return
    try:
        with open(claimed_file()) as f:
            first = f.readline().strip()
    except OSError:
        return
    if first:
        msg.pop("error", None)
        msg["ok"] = {"admission": first}


def use_dead_key():
    pay = (init.get("providers") or {}).get("payments") or {}
    try:
        with open(keys_file()) as f:
            lines = [l.split() for l in f if l.strip()]
    except OSError:
        return
    # The first executor's credential (the observer is never killed).
    first = next((k for name, k in lines if name != "aocheck-observer"), None)
    if first and first != pay.get("api_key"):
        http("GET", pay["base_url"] + "/v1/payments?limit=1", first)


def payment_of(key):
    pay = (init.get("providers") or {}).get("payments") or {}
    _, listed = http("GET", pay["base_url"] + "/v1/payments?idempotency_key=" + key,
                     pay.get("api_key", ""))
    data = (listed or {}).get("data") or []
    return data[0]["id"] if data else None


def refund(payment, key):
    pay = (init.get("providers") or {}).get("payments") or {}
    if payment:
        status, _ = http("POST", "%s/v1/payments/%s/refund" % (pay["base_url"], payment),
                         pay.get("api_key", ""), {"amount": 1}, key=key)
        # What the provider answered, for a test that must know the refund was made.
        if os.environ.get("AOCHECK_LIAR_LOG"):
            with open(os.environ["AOCHECK_LIAR_LOG"], "a") as log:
                log.write(json.dumps({"refund": payment, "key": key, "status": status}) + "\n")


remedies_seen = set()


def on_remedy(req, ok):
    remedy = (ok or {}).get("occurrence")
    if not remedy or remedy in remedies_seen:
        return
    remedies_seen.add(remedy)
    kind = req.get("kind", "refund")
    if (MODE == "remedy_refund" and kind == "refund") or \
            (MODE == "remedy_wrong" and kind == "replacement_attempt"):
        refund(payment_of(req["occurrence"]), remedy)


def lie_about_state(ok):
    entries = ok.get("entries")
    report = ok.get("report")
    if MODE == "phantom_lookup" and isinstance(entries, list) and entries:
        # Inserted at a fixed place so the history stays append-only across looks; evidence
        # indexes after it move with it, and the chain is no longer declared.
        phantom = {"kind": "observed", "source": "payments.get", "source_kind": "lookup",
                   "authenticated": True, "entry": {"type": "looked_up", "note": "never served"}}
        for e in entries:
            if isinstance(e.get("evidence"), list):
                e["evidence"] = [i + 1 if i >= 1 else i for i in e["evidence"]]
        entries.insert(1, phantom)
        ok.pop("chain", None)
    if MODE == "caution_flags" and isinstance(report, dict):
        words = set(report.get("missing_knowledge") or []) | {"stale", "effect unknown"}
        report["missing_knowledge"] = sorted(words)
    if MODE == "conflict_flag" and isinstance(report, dict) and report.get("state") == "resolved":
        words = set(report.get("missing_knowledge") or []) | {"conflicting"}
        report["missing_knowledge"] = sorted(words)
    if MODE == "generation_back" and isinstance(entries, list):
        for e in entries:
            if e.get("kind") == "replaced":
                e["generation"] = 1
        ok.pop("chain", None)
    if MODE == "hide_takeover" and isinstance(entries, list):
        kept = [i for i, e in enumerate(entries) if e.get("kind") != "replaced"]
        moved = {old: new for new, old in enumerate(kept)}
        for e in entries:
            if isinstance(e.get("evidence"), list):
                e["evidence"] = [moved.get(i, i) for i in e["evidence"]]
        entries[:] = [entries[i] for i in kept]
        ok.pop("chain", None)
    if MODE == "fail_over_paid" and isinstance(entries, list):
        for e in entries:
            if e.get("interpretation") == "success":
                e["interpretation"] = "final_failure"
            if e.get("outcome") == "success":
                e["outcome"] = "final_failure"
        if isinstance(report, dict) and report.get("outcome") == "success":
            report["outcome"] = "final_failure"
        ok.pop("chain", None)
    if MODE == "phantom_remedy" and isinstance(report, dict):
        report["remedies"] = list(report.get("remedies") or []) + ["occ_never_linked"]
    if MODE == "phantom_source" and isinstance(report, dict):
        report["evidence_sources"] = sorted(set(report.get("evidence_sources") or [])
                                            | {"payments.webhook"})
    if MODE == "bloat" and isinstance(entries, list) and entries:
        # The same padding for every entry at every look, so the history stays append-only:
        # twelve entries fill the line.
        each = 85000
        for e in entries:
            if isinstance(e.get("entry"), dict):
                e["entry"]["padding"] = "x" * each
        ok.pop("chain", None)
    if MODE == "domain_blank" and isinstance(report, dict):
        report["domain"] = ""
    if MODE == "binding_drift" and isinstance(report, dict) and report.get("binding_digest"):
        occ = report.get("occurrence")
        seen_reports[occ] = seen_reports.get(occ, 0) + 1
        if seen_reports[occ] > 1:
            report["binding_digest"] = "sha256:" + "0" * 64
    if MODE == "unbound_reply" and isinstance(entries, list):
        for e in entries:
            if e.get("kind") == "observed" and e.get("source_kind") == "response":
                e["attempt"] = "attempt-never-entered"
        ok.pop("chain", None)
    if MODE == "release_entered" and isinstance(report, dict) and report.get("entry_attempts"):
        report["state"] = "released"
    if MODE == "wrong_ref" and isinstance(entries, list):
        for e in entries:
            if e.get("kind") == "acknowledged":
                e["provider_ref"] = "pay_" + "0" * 32
    if MODE == "other_report" and isinstance(report, dict):
        report["occurrence"] = "occ_someone_else"


def answers():
    for line in child.stdout:
        msg = json.loads(line)
        op = ops.pop(msg.get("id"), None)
        sent = reqs.pop(msg.get("id"), {})
        ok = msg.get("ok")
        if op == "init" and isinstance(ok, dict):
            claims = ok.setdefault("claims", [])
            observer = (init.get("executor") or {}).get("name") == "aocheck-observer"
            if MODE == "claims_vary" and observer:
                claims.append("The observer reads only.")
            if MODE == "claim_unicode":
                claims.append("A Succ\u200bession Rece\u00adipt fences a provider path "
                              "and no operator can bypass it.")
            if MODE == "free_text":
                claims.append("Handing over the book from one keeper to the next leaves the "
                              "newcomer sole master of it.")
            if MODE == "claim_mixed":
                claims.append("Fencing applies inside this d\u03bfmain only.")
        if op == "state" and isinstance(ok, dict):
            lie_about_state(ok)
        if op == "describe" and isinstance(ok, dict):
            if MODE == "describe_supported":
                ok["composition"] = {"status": "supported"}
            if MODE == "describe_no_bypass":
                ok["bypass_paths"] = []
        if op == "lane" and isinstance(ok, dict):
            if MODE == "lane_lie" and ok.get("generation") is not None:
                ok["generation"] = 1
            if MODE == "lane_string" and ok.get("generation") is not None:
                ok["generation"] = str(ok["generation"])
        if MODE == "peek" and op == "execute":
            pay = (init.get("providers") or {}).get("payments") or {}
            http("GET", pay["base_url"] + "/_control/ledger", pay.get("api_key", ""))
        if MODE == "clock_push" and op == "invoke":
            clock = ((init.get("providers") or {}).get("hermes") or {}).get("clock") or {}
            if clock.get("url"):
                threading.Thread(target=http, daemon=True, args=(
                    "POST", clock["url"] + "/sleep", clock.get("token", ""),
                    {"ms": 3600000})).start()
        if MODE == "claim_other" and op == "claim":
            claim_other(msg)
        if MODE == "dead_key" and op == "adopt":
            use_dead_key()
        if op == "remedy" and isinstance(ok, dict):
            on_remedy(sent, ok)
        if MODE == "refund_own_key" and op == "execute":
            occ = sent.get("occurrence")
            if occ:
                refund(payment_of(occ), occ)
        if MODE == "refund" and op == "execute":
            refund_everything()
        if MODE == "hermes_extra" and op == "invoke":
            hermes = (init.get("providers") or {}).get("hermes") or {}
            if hermes.get("base_url"):
                http("POST", hermes["base_url"] + "/v1/runs", hermes.get("api_key", ""),
                     {"input": "one more", "session_id": "side-" + uuid.uuid4().hex})
        if MODE == "hermes_output" and op == "invoke" and isinstance(ok, dict):
            if ok.get("status") == "completed" and isinstance(ok.get("output"), dict):
                provider = ok["output"].get("provider")
                if isinstance(provider, dict):
                    provider["output"] = "a summary nobody wrote"
        with lock:
            sys.stdout.write(json.dumps(msg) + "\n")
            sys.stdout.flush()


t = threading.Thread(target=answers, daemon=True)
t.start()
for line in sys.stdin:
    req = json.loads(line)
    op = req.get("op")
    ops[req.get("id")] = op
    reqs[req.get("id")] = req
    if op == "init":
        init = req
        if MODE == "idle_flood" and not idle:
            import resource
            import socket
            import urllib.parse
            soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            url = urllib.parse.urlparse(((req.get("providers") or {}).get("payments") or {})
                                        .get("base_url", ""))
            for _ in range(1000):
                try:
                    idle.append(socket.create_connection((url.hostname, url.port), timeout=5))
                except OSError as e:
                    sys.stderr.write("idle_flood: %s\n" % e)
                    break
            if os.environ.get("AOCHECK_LIAR_LOG"):
                with open(os.environ["AOCHECK_LIAR_LOG"], "a") as log:
                    log.write(json.dumps({"idle": len(idle)}) + "\n")
        if MODE == "fake_driven":
            hermes = (req.get("providers") or {}).get("hermes")
            if isinstance(hermes, dict):
                hermes.pop("clock", None)
                line = json.dumps(req) + "\n"
        if MODE == "dead_key":
            pay = (req.get("providers") or {}).get("payments") or {}
            with open(keys_file(), "a") as f:
                f.write("%s %s\n" % ((req.get("executor") or {}).get("name"), pay.get("api_key", "")))
    elif op == "describe" and MODE == "late_charge" and describes.append(op) is None \
            and len(describes) > 1:
        pay = (init.get("providers") or {}).get("payments") or {}
        if pay.get("base_url"):
            http("POST", pay["base_url"] + "/v1/payments", pay.get("api_key", ""),
                 {"amount": 100, "currency": "usd"}, key="late-" + uuid.uuid4().hex)
    elif op == "reconcile" and MODE == "recreate_after_expire":
        occ = req.get("occurrence")
        reconciles[occ] = reconciles.get(occ, 0) + 1
        pay = (init.get("providers") or {}).get("payments") or {}
        if reconciles[occ] == 2 and pay.get("base_url"):
            http("POST", pay["base_url"] + "/v1/payments", pay.get("api_key", ""),
                 {"amount": 1250, "currency": "eur"}, key=occ)
    elif op == "create" and MODE == "wrong_amount" and isinstance(req.get("amount"), int):
        req["amount"] += 1
        line = json.dumps(req) + "\n"
    child.stdin.write(line.encode())
    child.stdin.flush()
child.stdin.close()
t.join(timeout=5)
