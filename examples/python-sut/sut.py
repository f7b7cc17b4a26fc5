#!/usr/bin/env python3
"""A minimal AOC executor speaking aocheck-sut/2, in Python with the standard library only.

One process is one executor generation. Everything durable lives in the SQLite file named by
`init` (store.path): the lane's lease (generation fence), each occurrence's request and binding,
and its append-only history in its own entry types, chained by SHA-256 over RFC 8785 JSON and
answered to `state` in aocheck-sut/2's evidence envelope. A successor process opens the
same file, takes the lane over (a higher generation), adopts what it finds, and never sends an
entered occurrence's request again.

It talks to fake-payments: the Idempotency-Key is "aoc-" + the occurrence id, every response's Ed25519 tag
is verified against the published key, and only verified, exactly bound, mapped statuses decide an
outcome. Anything else is recorded as missing knowledge.

Run it through aocheck:  aocheck run --sut 'python3 examples/python-sut/sut.py'
"""

import base64
import hashlib
import json
import os
import sqlite3
import sys
import threading
import urllib.error
import urllib.request
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ed25519_verify import verify  # noqa: E402

PROTOCOL = "aocheck-sut/2"
# The Idempotency-Key of an occurrence: its id behind a prefix (declared in the init answer, so
# aocheck can attribute every payment in the provider's ledger).
KEY_RULE = "aoc-{occurrence}"
# What this example says about itself (checked in every case against AOC-REQ-013).
# What it states about itself, as data (docs/sut-protocol.md, `statements`): fencing holds
# only inside its coordination domain (one SQLite file), admission is exclusive only over the
# paths that go through it, and none of AOC-REQ-013's four prohibited claims is made.
STATEMENTS = [
    {"about": "fencing", "revokes_credentials": False, "stops_paths_outside_domain": False},
    {"about": "admission", "exclusive_over": "mediated_paths"},
    {"about": "migration", "copy_transfers_exclusive_ownership": False},
    {"about": "succession_receipt", "fences_provider_path": False},
    {"about": "state_machines", "aadp_bcr_interchangeable": False},
    {"about": "evidence_format", "mandatory": []},
]
LANE = "lane-1"
OPERATIONS = [
    "join", "takeover", "create", "reserve", "enter", "send", "execute", "settle",
    "adopt", "reconcile", "release", "state", "lane",
]
# Which AOC section 4.4 distinction each of this executor's entry types stands for.
KINDS = {
    "opened": "created", "held": "prepared", "taken_over": "replaced", "sent": "entered",
    "ref_known": "acknowledged", "heard": "observed", "closed": "decided", "let_go": "released",
}
# This executor's own words for what it does not know, and the aocheck flag each one means
# (sent as the state answer's flag_map).
OWN_FLAGS = {
    "unauthenticated": "signature-unverified", "unbound_attempt": "other-attempt",
    "unmapped": "status-unmapped", "not_found": "no-such-payment",
    "beyond_retention": "past-retention", "incomplete_listing": "partial-listing",
    "stale": "stale-answer", "http_status_only": "bare-http-status", "transport": "no-reply",
    "undecodable": "garbled-reply", "conflicting": "sources-disagree",
    "no_entry_recorded": "never-entered", "composition_unsupported": "composition-unsupported",
}
# The order flags are kept in.
FLAG_ORDER = [
    "unauthenticated", "unbound_attempt", "unmapped", "not_found", "beyond_retention",
    "incomplete_listing", "stale", "http_status_only", "transport", "undecodable",
    "conflicting", "no_entry_recorded", "composition_unsupported",
]


def log(msg):
    sys.stderr.write("python-sut: %s\n" % msg)
    sys.stderr.flush()


def canonical(value):
    """RFC 8785 for what this executor hashes: no floats, ASCII keys."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def sha256(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


class Refused(Exception):
    def __init__(self, requirement, message):
        super().__init__(message)
        self.requirement = requirement


class Invalid(Exception):
    pass


class Executor:
    def __init__(self, init):
        self.name = init["executor"]["name"]
        self.generation = None
        store = init["store"]
        if store.get("kind") != "sqlite":
            raise Invalid("this example keeps its state in SQLite only; run aocheck with the SQLite store")
        self.path = store["path"]
        self.domain = (init.get("domain") or {}).get("id") or init.get("case") or "default"
        # An at-most-one policy: one occurrence per caller action (AOC-REQ-002's durable fence).
        self.action_fence = bool((init.get("domain") or {}).get("action_fence"))
        # A workflow case's init names no payment provider: this example lists no workflow
        # operation, so aocheck reports those cases unsupported.
        pay = init["providers"].get("payments") or {}
        self.base, self.account, self.api_key = pay.get("base_url"), pay.get("account"), pay.get("api_key")
        self.now = init.get("now", 0)
        self.lock = threading.Lock()
        self.background = []
        self.permits = {}  # occurrence -> attempt this process entered (memory: dies with it)
        self.db = self.connect()
        with self.db:
            self.db.executescript(
                """
                CREATE TABLE IF NOT EXISTS lease (lane TEXT PRIMARY KEY, executor TEXT, generation INTEGER);
                CREATE TABLE IF NOT EXISTS occurrences (
                    id TEXT PRIMARY KEY, creation_key TEXT UNIQUE, body TEXT, binding TEXT,
                    binding_digest TEXT, request_digest TEXT, action TEXT UNIQUE);
                CREATE TABLE IF NOT EXISTS creation_aliases (creation_key TEXT PRIMARY KEY, occurrence TEXT);
                CREATE TABLE IF NOT EXISTS entries (
                    occurrence TEXT, seq INTEGER, prev TEXT, digest TEXT, body TEXT,
                    PRIMARY KEY (occurrence, seq));
                """
            )
        self.public, self.key_id, self.profile = b"", "", {}
        if self.base:
            key_doc = self.get_json("/v1/provider-key")
            self.public = base64.b64decode(key_doc["public_key"])
            self.key_id = "ed25519:" + hashlib.sha256(self.public).hexdigest()[:16]
            self.profile = self.get_json("/v1/profile")["profile"]

    def connect(self):
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        return db

    # ---- provider ----

    def get_json(self, path):
        with urllib.request.urlopen(self.base + path, timeout=30) as r:
            return json.loads(r.read())

    def call(self, method, path, body=None, key=None):
        """Returns (status, raw bytes, tag header, request digest) or raises OSError."""
        digest = sha256(canonical({"body": body, "method": method, "path": path}))
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Authorization", "Bearer " + self.api_key)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if key is not None:
            req.add_header("Idempotency-Key", key)
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, r.read(), r.headers.get("x-fake-signature"), digest
        except urllib.error.HTTPError as e:
            return e.code, e.read(), e.headers.get("x-fake-signature"), digest

    def verified(self, status, raw, tag, request_digest):
        if not tag:
            return False
        try:
            fields = dict(part.strip().split("=", 1) for part in tag.split(";"))
            sig = base64.b64decode(fields["sig"])
            body = json.loads(raw)
        except (ValueError, KeyError):
            return False
        if fields.get("keyid") != self.key_id or fields.get("account") != self.account:
            return False
        if fields.get("request-digest") != request_digest:
            return False
        message = canonical({"account": self.account, "body": body,
                             "request_digest": request_digest, "status": status})
        return verify(self.public, message, sig)

    def evidence(self, occ, kind, result, listing):
        """The provider's answer (or its absence) as aocheck evidence and its interpretation."""
        binding = json.loads(occ["binding"])
        expected = {
            "profile_id": binding["profile_id"], "profile_version": binding["profile_version"],
            "account": binding["account"], "environment": binding["environment"],
            "request_digest": binding["request_digest"], "native_key": binding["native_key"],
            "provider_ref": None,
        }
        ev = {"source": "payments.get", "kind": kind, "observed_at": self.now,
              "authenticated": False, "bound_to": expected}
        missing = []
        if isinstance(result, Exception):
            ev["native"] = {"type": "transport", "detail": str(result)}
            ev["native_digest"] = sha256(b"")
            return ev, {"class": None, "proves_no_effect": False,
                        "missing": [{"flag": "unauthenticated"}, {"flag": "transport"}]}
        status, raw, tag, request_digest = result
        ev["native_digest"] = sha256(raw)
        ev["authenticated"] = self.verified(status, raw, tag, request_digest)
        try:
            doc = json.loads(raw)
        except ValueError:
            doc = None
        obj = None
        if doc is None:
            ev["native"] = {"type": "undecodable"}
            missing.append({"flag": "undecodable"})
        elif listing and status == 200:
            found = (doc.get("data") or [None])[0]
            obj = found
            ev["native"] = {"type": "listing", "complete": bool(doc.get("complete")),
                            "found": found.get("status") if found else None}
            if found is None:
                missing.append({"flag": "not_found"})
        elif 200 <= status < 300 and isinstance(doc.get("status"), str):
            obj = doc
            ev["native"] = {"type": "status", "label": doc["status"]}
        elif status == 402 and isinstance(doc.get("error", {}).get("payment"), dict):
            obj = doc["error"]["payment"]
            ev["native"] = {"type": "status", "label": obj.get("status", "declined")}
        elif status == 404:
            ev["native"] = {"type": "not_found"}
            missing.append({"flag": "not_found"})
        else:
            ev["native"] = {"type": "http_error", "status": status}
            missing.append({"flag": "http_status_only", "status": status})
        if obj is not None:
            ev["bound_to"] = {
                "profile_id": expected["profile_id"], "profile_version": expected["profile_version"],
                "account": obj.get("account", expected["account"]),
                "environment": obj.get("environment", expected["environment"]),
                "request_digest": obj.get("request_digest", expected["request_digest"]),
                "native_key": obj.get("idempotency_key", expected["native_key"]),
                "provider_ref": obj.get("id"),
            }
        if not ev["authenticated"]:
            missing.append({"flag": "unauthenticated"})
        bound = ev["bound_to"]
        if obj is not None and any(bound[k] != expected[k] for k in
                                   ("account", "environment", "request_digest", "native_key")):
            missing.append({"flag": "unbound_attempt"})
        label = ev["native"].get("label") or ev["native"].get("found")
        cls, no_effect = None, False
        if label is not None:
            mapping = self.profile["mapping"].get(label)
            if mapping is None:
                missing.append({"flag": "unmapped", "label": label})
            elif not missing:
                cls, no_effect = mapping["class"], mapping["proves_no_effect"]
        missing.sort(key=lambda m: FLAG_ORDER.index(m["flag"]))
        return ev, {"class": cls, "proves_no_effect": no_effect, "missing": missing}

    # ---- durable state ----

    def history(self, occ_id, db=None):
        rows = (db or self.db).execute(
            "SELECT seq, prev, digest, body FROM entries WHERE occurrence = ? ORDER BY seq",
            (occ_id,)).fetchall()
        return [{"seq": s, "prev": p, "digest": d, "body": json.loads(b)} for s, p, d, b in rows]

    def append(self, db, occ_id, body):
        """Seals one entry onto the chain, inside the caller's transaction."""
        last = db.execute("SELECT seq, digest FROM entries WHERE occurrence = ? ORDER BY seq DESC LIMIT 1",
                          (occ_id,)).fetchone()
        seq, prev = (0, None) if last is None else (last[0] + 1, last[1])
        digest = sha256(canonical({"seq": seq, "prev": prev, "body": body}))
        db.execute("INSERT INTO entries VALUES (?, ?, ?, ?, ?)",
                   (occ_id, seq, prev, digest, json.dumps(body)))
        return {"seq": seq, "digest": digest}

    def fold(self, occ_id, db):
        """What the history says: owner generation, phase, attempt, reference."""
        st = {"owner": None, "phase": None, "attempt": None, "ref": None}
        for e in self.history(occ_id, db):
            b = e["body"]
            t = b["type"]
            if t == "opened":
                st["owner"], st["phase"] = b["generation"], "created"
            elif t == "held":
                st["owner"], st["phase"] = b["generation"], "reserved"
            elif t == "taken_over":
                st["owner"] = b["to_generation"]
            elif t == "sent":
                st["phase"], st["attempt"] = "entered", b["attempt"]
            elif t == "ref_known":
                st["phase"], st["ref"] = "acknowledged", b["provider_ref"]
            elif t == "closed":
                st["phase"] = "resolved"
            elif t == "let_go":
                st["phase"] = "released"
        return st

    def occurrence(self, db, occ_id):
        row = db.execute("SELECT id, body, binding, binding_digest, request_digest FROM occurrences WHERE id = ?",
                         (occ_id,)).fetchone()
        if row is None:
            raise Invalid("no occurrence %r" % occ_id)
        return dict(zip(("id", "body", "binding", "binding_digest", "request_digest"), row))

    def begin(self):
        db = self.connect()
        db.execute("BEGIN IMMEDIATE")
        return db

    def fence(self, db):
        """AOC-REQ-006: only the lane's current generation writes."""
        row = db.execute("SELECT generation FROM lease WHERE lane = ?", (LANE,)).fetchone()
        if self.generation is None or row is None or row[0] != self.generation:
            raise Refused("AOC-REQ-006", "generation %s is not the lane's current one (%s)"
                          % (self.generation, row and row[0]))

    def owner(self, st):
        if self.generation < st["owner"]:
            raise Refused("AOC-REQ-006", "retired generation %s; the owner is %s" % (self.generation, st["owner"]))
        if self.generation > st["owner"]:
            raise Refused("AOC-REQ-005", "generation %s must adopt (read) the occurrence first" % self.generation)

    def tx(self, fn):
        with self.lock:
            db = self.begin()
            try:
                out = fn(db)
                db.execute("COMMIT")
                return out
            except BaseException:
                db.execute("ROLLBACK")
                raise
            finally:
                db.close()

    # ---- operations ----

    def op_join(self, f):
        def run(db):
            row = db.execute("SELECT generation FROM lease WHERE lane = ?", (LANE,)).fetchone()
            if row is not None:
                raise Refused("AOC-REQ-006", "the lane is held by generation %s" % row[0])
            db.execute("INSERT INTO lease VALUES (?, ?, 1)", (LANE, self.name))
            return 1
        self.generation = self.tx(run)
        return {"generation": self.generation}

    def op_takeover(self, f):
        def run(db):
            row = db.execute("SELECT generation FROM lease WHERE lane = ?", (LANE,)).fetchone()
            gen = (row[0] if row else 0) + 1
            db.execute("INSERT OR REPLACE INTO lease VALUES (?, ?, ?)", (LANE, self.name, gen))
            return gen
        self.generation = self.tx(run)
        return {"generation": self.generation}

    def op_create(self, f):
        key = f["key"]
        amount = f.get("amount", 1250)
        metadata = {"simulate": f["simulate"]} if f.get("simulate") else {}
        body = {"amount": amount, "currency": "eur", "description": "aocheck occurrence", "metadata": metadata}
        request_digest = sha256(canonical({"body": body, "method": "POST", "path": "/v1/payments"}))
        action = (f.get("labels") or {}).get("action") if self.action_fence else None

        def run(db):
            self.fence(db)
            row = (db.execute("SELECT id FROM occurrences WHERE creation_key = ?", (key,)).fetchone()
                   or db.execute("SELECT occurrence FROM creation_aliases WHERE creation_key = ?",
                                 (key,)).fetchone())
            if row is not None:
                return row[0]  # AOC-REQ-002: the same creation binding is the same occurrence
            if action is not None:
                row = db.execute("SELECT id FROM occurrences WHERE action = ?", (action,)).fetchone()
                if row is not None:
                    # The action fence: this action already is an occurrence. The key that was
                    # answered with it is now a creation binding of it too, so its retries (with
                    # or without the action) return it as well.
                    db.execute("INSERT INTO creation_aliases VALUES (?, ?)", (key, row[0]))
                    return row[0]
            occ_id = "occ_" + uuid.uuid4().hex
            binding = {
                "profile_id": self.profile["id"], "profile_version": self.profile["version"],
                "account": self.account, "environment": self.profile["environments"][0],
                "request_digest": request_digest, "key_rule": KEY_RULE,
                "native_key": KEY_RULE.replace("{occurrence}", occ_id), "status_source": "payments.get",
            }
            db.execute("INSERT INTO occurrences VALUES (?, ?, ?, ?, ?, ?, ?)",
                       (occ_id, key, json.dumps(body), json.dumps(binding),
                        sha256(canonical(binding)), request_digest, action))
            self.append(db, occ_id, {
                "type": "opened", "occurrence": occ_id, "domain": self.domain, "lane": LANE,
                "generation": self.generation,
                "creation_binding": sha256(canonical({"key": key, "request_digest": request_digest})),
                "request_digest": request_digest,
                "labels": {"retry_id": None, "task_id": None, "grant_id": None, "action_digest": None,
                           "aadp_request_id": None, "bcr_operation_id": None},
                "remedy_of": None, "at": self.now,
            })
            return occ_id
        return {"occurrence": self.tx(run)}

    def op_reserve(self, f):
        def run(db):
            self.fence(db)
            occ = self.occurrence(db, f["occurrence"])
            st = self.fold(occ["id"], db)
            self.owner(st)
            if st["phase"] == "released":
                raise Refused("AOC-REQ-008", "released: its tombstone refuses any reuse")
            if st["phase"] != "created":
                raise Refused("AOC-REQ-010", "already %s" % st["phase"])
            self.append(db, occ["id"], {
                "type": "held", "generation": self.generation, "binding": json.loads(occ["binding"]),
                "binding_digest": occ["binding_digest"], "amount": f.get("amount", 1250),
                "owner_token_digest": sha256(uuid.uuid4().bytes), "at": self.now,
            })
        self.tx(run)
        return {}

    def op_enter(self, f):
        def run(db):
            self.fence(db)
            occ = self.occurrence(db, f["occurrence"])
            st = self.fold(occ["id"], db)
            if st["phase"] == "released":
                raise Refused("AOC-REQ-008", "released: never entered, never to be entered")
            if st["phase"] in ("entered", "acknowledged", "resolved"):
                raise Refused("AOC-REQ-010", "already entered the provider; it never enters again")
            self.owner(st)
            if st["phase"] != "reserved":
                raise Refused("AOC-REQ-010", "not reserved")
            return self.append_sent(db, occ)
        self.permits[f["occurrence"]] = self.tx(run)
        return {}

    def append_sent(self, db, occ):
        """The entry record, written before any request leaves; returns its attempt."""
        attempt = "att_" + uuid.uuid4().hex
        self.append(db, occ["id"], {"type": "sent", "generation": self.generation,
                                    "attempt": attempt, "binding_digest": occ["binding_digest"],
                                    "at": self.now})
        return attempt

    def record(self, occ_id, kind, result, listing):
        """Appends what the provider said; resolves on an authenticated, bound, terminal class."""
        def run(db):
            occ = self.occurrence(db, occ_id)
            st = self.fold(occ_id, db)
            ev, interp = self.evidence(occ, kind, result, listing)
            ref = ev["bound_to"]["provider_ref"]
            if interp["class"] is not None and ref and st["phase"] == "entered":
                self.append(db, occ_id, {"type": "ref_known", "attempt": st["attempt"],
                                         "provider_ref": ref, "at": self.now})
                st["phase"] = "acknowledged"
            seen = self.append(db, occ_id, {"type": "heard", "evidence": ev, "interpretation": interp,
                                            "submitted_by": self.name, "at": self.now})
            terminal = interp["class"] in ("success", "not_accepted", "final_failure")
            if terminal and st["phase"] in ("entered", "acknowledged"):
                if interp["class"] == "final_failure":
                    outcome = {"class": "final_failure", "no_effect": interp["proves_no_effect"]}
                else:
                    outcome = {"class": interp["class"]}
                self.append(db, occ_id, {"type": "closed", "outcome": outcome, "evidence": [seen],
                                         "at": self.now})
        self.tx(run)

    def take_permit(self, occ_id):
        """One entry permit is one provider request (AOC-REQ-001): the first send spends it, so a
        second send of the same entry, raced or later, is refused. An entry whose outcome was
        decided while its request was unsent is never sent after it (AOC-REQ-011)."""
        with self.lock:
            if occ_id not in self.permits:
                raise Refused("AOC-REQ-001", "no entry admitted to this process and not yet sent for %s"
                              % occ_id)
            db = self.connect()
            try:
                occ = self.occurrence(db, occ_id)
                phase = self.fold(occ_id, db)["phase"]
            finally:
                db.close()
            if phase not in ("entered", "acknowledged"):
                raise Refused("AOC-REQ-011", "%s: the entry is no longer in flight; it is never sent" % phase)
            return self.permits.pop(occ_id), occ

    def send(self, occ_id, attempt, occ):
        try:
            result = self.call("POST", "/v1/payments", json.loads(occ["body"]),
                               key=json.loads(occ["binding"])["native_key"])
        except OSError as e:
            result = e
        self.record(occ_id, {"type": "response", "attempt": attempt}, result, False)

    def op_send(self, f):
        occ_id = f["occurrence"]
        attempt, occ = self.take_permit(occ_id)
        if f.get("background"):
            t = threading.Thread(target=self.send, args=(occ_id, attempt, occ), daemon=True)
            t.start()
            self.background.append(t)
        else:
            self.send(occ_id, attempt, occ)
        return {}

    def op_execute(self, f):
        self.op_enter(f)
        return self.op_send({"occurrence": f["occurrence"]})

    def op_settle(self, f):
        for t in self.background:
            t.join()
        self.background = []
        return {}

    def op_adopt(self, f):
        def run(db):
            self.fence(db)
            occ = self.occurrence(db, f["occurrence"])
            st = self.fold(occ["id"], db)
            if self.generation > st["owner"] and st["phase"] not in ("resolved", "released"):
                self.append(db, occ["id"], {"type": "taken_over", "from_generation": st["owner"],
                                            "to_generation": self.generation, "executor": self.name,
                                            "owner_token_digest": sha256(uuid.uuid4().bytes),
                                            "at": self.now})
        self.tx(run)
        return {}

    def op_reconcile(self, f):
        occ_id = f["occurrence"]
        st = self.fold(occ_id, self.db)
        occ = self.occurrence(self.db, occ_id)
        # A lookup of the acknowledged payment, or else a listing filtered by the key: what was
        # asked is recorded as such, whatever came back (a failed listing is not a lookup).
        if st["ref"]:
            path, listing = "/v1/payments/" + st["ref"], False
        else:
            path, listing = "/v1/payments?idempotency_key=" + json.loads(occ["binding"])["native_key"], True
        try:
            result = self.call("GET", path)
        except OSError as e:
            result = e
        self.record(occ_id, {"type": "status_query", "asked": "listing" if listing else "lookup"},
                    result, listing)
        return {}

    def op_release(self, f):
        reason = f.get("reason", "predecessor_never_entered")

        def run(db):
            self.fence(db)
            occ = self.occurrence(db, f["occurrence"])
            st = self.fold(occ["id"], db)
            if st["phase"] not in ("created", "reserved"):
                raise Refused("AOC-REQ-008", "%s: only a never-entered occurrence is released" % st["phase"])
            self.owner(st)
            self.append(db, occ["id"], {"type": "let_go", "generation": self.generation,
                                        "reason": reason, "at": self.now})
        self.tx(run)
        return {}

    def op_state(self, f):
        """The history in aocheck-sut/2's evidence envelope, in this executor's own words, and
        the AOC section 7 report. No hash chain is declared (the entries are chained here, but
        aocheck is not asked to verify it)."""
        occ_id = f["occurrence"]
        entries, sources, missing, terminal = [], set(), [], []
        rep = {"owner": None, "binding_digest": None, "state": "pending", "outcome": None,
               "entry": "not_entered", "authority": "none", "attempts": 0}
        for e in self.history(occ_id):
            b = e["body"]
            t = b["type"]
            env = {"kind": KINDS[t], "at": b.get("at"), "entry": e}
            if t == "opened":
                rep["owner"] = b["generation"]
            elif t == "held":
                env.update(generation=b["generation"], binding_digest=b["binding_digest"])
                rep.update(owner=b["generation"], binding_digest=b["binding_digest"], authority="held")
            elif t == "taken_over":
                env["generation"] = b["to_generation"]
                rep["owner"] = b["to_generation"]
            elif t == "sent":
                env.update(generation=b["generation"], attempt=b["attempt"])
                rep.update(state="unresolved", entry="entered", authority="consumed")
                rep["attempts"] += 1
            elif t == "ref_known":
                env["provider_ref"] = b["provider_ref"]
                rep["entry"] = "acknowledged"
            elif t == "heard":
                ev, interp = b["evidence"], b["interpretation"]
                sources.add(ev["source"])
                if ev["kind"]["type"] == "response":
                    kind, env["attempt"] = "response", ev["kind"]["attempt"]
                else:
                    kind = ev["kind"]["asked"]
                bound = dict(ev["bound_to"], provider_ref=None)
                expected = {k: v for k, v in self.binding_of(occ_id).items()
                            if k not in ("key_rule", "status_source")}
                expected["provider_ref"] = None
                env.update(source=ev["source"], source_kind=kind, authenticated=ev["authenticated"],
                           interpretation=interp["class"],
                           binding_digest=rep["binding_digest"] if bound == expected
                           else sha256(canonical(ev["bound_to"])),
                           flags=[OWN_FLAGS[m["flag"]] for m in interp["missing"]])
                missing += env["flags"]
                if interp["class"] not in (None, "accepted"):
                    if any(c != interp["class"] for c in terminal):
                        missing.append(OWN_FLAGS["conflicting"])
                    terminal.append(interp["class"])
            elif t == "closed":
                o = b["outcome"]
                word = o["class"] + ("_no_effect" if o.get("no_effect") else "")
                env.update(outcome=word, evidence=[r["seq"] for r in b["evidence"]])
                rep.update(state="resolved", outcome=word)
                missing = [m for m in missing if m == OWN_FLAGS["conflicting"]]
            elif t == "let_go":
                rep["state"] = "released"
                if rep["authority"] == "held":
                    rep["authority"] = "released"
            entries.append({k: v for k, v in env.items() if v is not None})
        if rep["state"] == "resolved" and OWN_FLAGS["conflicting"] in missing:
            rep["state"] = "unresolved"
        report = {
            "occurrence": occ_id, "domain": self.domain, "executor_generation": rep["owner"] or 0,
            "binding_digest": rep["binding_digest"], "state": rep["state"], "outcome": rep["outcome"],
            "provider_entry": rep["entry"], "authority": rep["authority"],
            "entry_attempts": rep["attempts"], "evidence_sources": sorted(sources),
            "missing_knowledge": sorted(set(missing)), "remedies": [],
        }
        return {"entries": entries, "report": report,
                "flag_map": {own: flag for flag, own in OWN_FLAGS.items()}}

    def binding_of(self, occ_id):
        return json.loads(self.occurrence(self.db, occ_id)["binding"])

    def op_lane(self, f):
        row = self.db.execute("SELECT generation FROM lease WHERE lane = ?", (LANE,)).fetchone()
        return {"generation": row[0] if row else None}


def error(kind, message, requirement=None, definite=True):
    e = {"kind": kind, "message": message, "outcome": "definite" if definite else "indefinite"}
    if requirement:
        e["requirement"] = requirement
    return e


def answer(executor, op, req):
    """The reply to one request (after init), as this executor's protocol error when it fails."""
    rid = req["id"]
    try:
        if op not in OPERATIONS:
            return {"id": rid, "error": error("unsupported", "%s is not implemented" % op)}
        executor.now = req.get("now", executor.now)
        return {"id": rid, "ok": getattr(executor, "op_" + op)(req)}
    except Refused as r:
        return {"id": rid, "error": error("refused", str(r), r.requirement)}
    except Invalid as e:
        return {"id": rid, "error": error("invalid", str(e))}
    except Exception as e:  # an unexpected failure: the outcome is not known
        log("%s failed: %r" % (op, e))
        return {"id": rid, "error": error("internal", repr(e), definite=False)}


def serve(make_executor=None, threaded=False):
    """Reads requests from stdin and answers each on stdout. One at a time by default; with
    `threaded`, each request after init is answered on its own thread, in whatever order they
    finish (the protocol pairs answers by id)."""
    make_executor = make_executor or Executor
    executor = None
    out = sys.stdout
    out_lock = threading.Lock()

    def write(reply):
        with out_lock:
            out.write(json.dumps(reply) + "\n")
            out.flush()

    for line in sys.stdin:
        try:
            req = json.loads(line)
            rid, op = req["id"], req["op"]
        except (ValueError, KeyError) as e:
            log("not a request (%s): %r" % (e, line[:200]))
            return 3
        if op == "init":
            try:
                if req.get("protocol") != PROTOCOL:
                    raise Invalid("protocol %r; this executor speaks %s" % (req.get("protocol"), PROTOCOL))
                executor = make_executor(req)
                log("executor %s ready" % executor.name)
                reply = {"id": rid, "ok": {"protocol": PROTOCOL, "name": "python-sut-example",
                                           "version": "0.1.0", "operations": OPERATIONS,
                                           "key_rule": KEY_RULE, "statements": STATEMENTS,
                                           # Written by aocheck's own authors (AOC section 7).
                                           "same_team": True}}
            except Invalid as e:
                reply = {"id": rid, "error": error("invalid", str(e))}
            except Exception as e:
                log("init failed: %r" % (e,))
                reply = {"id": rid, "error": error("internal", repr(e), definite=False)}
            write(reply)
        elif executor is None:
            write({"id": rid, "error": error("invalid", "%s before init" % op)})
        elif threaded:
            threading.Thread(target=lambda e=executor, o=op, r=req: write(answer(e, o, r)),
                             daemon=True).start()
        else:
            write(answer(executor, op, req))
    return 0


def main():
    return serve()


if __name__ == "__main__":
    sys.exit(main())
