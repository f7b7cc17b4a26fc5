#!/usr/bin/env python3
"""fake-payments' Stripe dialect driven by the official Python SDK (PyPI's `stripe`, 16.1.0).

    python3 tests/sdk/contract.py BASE_URL [--scenario surface|echo|retry] [options]

One scenario per invocation, against a fake that `tests/it/sdk_contract.rs` started; that test
sets the fault plan and the `Stripe-Should-Retry` advice before a run and reads the ground-truth
ledger after it (this script cannot see either). Every check prints one JSON line
(`{"check": NAME, "ok": true}`); the first failure prints `{"check": NAME, "ok": false,
"error": WHY}`, says why on stderr and exits 1. A scenario ends with one `{"summary": ...}` or
`{"result": ...}` line the Rust side reads.

Scenarios:
  surface  every call an integration makes (create, confirm, retrieve, list and its pages,
           search, capture, cancel, refunds), each error parsed into its exception class, and
           the fields an integration reads.
  echo     the `Idempotency-Key` response header the SDK exposes as
           `last_response.idempotency_key` (stripe/_stripe_response.py).
  retry    one confirmed creation under whatever fault the Rust side planned, with
           `--retries N` (StripeClient's `max_network_retries`; unset when absent) and the
           outcome the SDK must give (`--expect ok|api_error|connection_error`).

What the SDK does on a failure is read from its source, not assumed: `HTTPClient._should_retry`
(stripe/_http_client.py) treats an unset `max_network_retries` as 0, stops when the budget is
spent before looking at anything else, then obeys `Stripe-Should-Retry`, then retries 409 and
>= 500; `RequestsClient._handle_request_error` marks a `requests` ConnectionError (a connection
closed without a reply) `should_retry=True`. `_APIRequestor.request_headers` sets one
`Idempotency-Key` per POST call, reused by every retry of that call.
"""

import argparse
import json
import sys
import traceback

try:
    import stripe
except ImportError:
    print(
        "python3 cannot import stripe: run .ci/run, or pip install stripe==16.1.0",
        file=sys.stderr,
    )
    sys.exit(3)

KEY = "sk_test_a"
CARD = {
    "amount": 2000,
    "currency": "usd",
    "payment_method": "pm_card_visa",
    "confirm": True,
}


class Failed(Exception):
    def __init__(self, check, why):
        super().__init__(f"{check}: {why}")
        self.check = check
        self.why = why


def emit(obj):
    print(json.dumps(obj, sort_keys=True), flush=True)


def check(name, cond, why=""):
    if not cond:
        raise Failed(name, why or "does not hold")
    emit({"check": name, "ok": True})


def eq(name, got, want):
    check(name, got == want, f"got {got!r}, want {want!r}")


def prefix(name, got, want):
    check(
        name,
        isinstance(got, str) and got.startswith(want),
        f"got {got!r}, want a string starting with {want!r}",
    )


def raises(name, cls, fn):
    """Runs `fn`; it must raise exactly `cls` (not a sibling or a parent class)."""
    try:
        got = fn()
    except stripe.StripeError as e:
        check(
            f"{name}: raises {cls.__name__}",
            type(e) is cls,
            f"raised {type(e).__name__}: {e!r}",
        )
        return e
    raise Failed(
        f"{name}: raises {cls.__name__}", f"returned {got!r} instead of raising"
    )


def client(base, **kw):
    return stripe.StripeClient(KEY, base_addresses={"api": base}, **kw)


def an_intent(name, pi):
    check(
        f"{name}: a PaymentIntent",
        isinstance(pi, stripe.PaymentIntent),
        f"got {type(pi).__name__}",
    )
    eq(f"{name}: object", pi.object, "payment_intent")
    prefix(f"{name}: id", pi.id, "pi_")
    eq(f"{name}: livemode", pi.livemode, False)
    check(f"{name}: created", isinstance(pi.created, int) and pi.created > 0, repr(pi.created))
    prefix(f"{name}: client_secret", pi.client_secret, pi.id + "_secret_")
    eq(f"{name}: payment_method_types", list(pi.payment_method_types), ["card"])


def a_reply(name, obj):
    resp = obj.last_response
    eq(f"{name}: HTTP status", resp.code, 200)
    prefix(f"{name}: Request-Id", resp.request_id, "req_")


# ---------- surface ----------


def surface(base):
    c = client(base)
    intents = []  # every intent this run created, charged or not
    refunds = []
    explicit = []  # the idempotency keys this script chose (all others are the SDK's)

    # A confirmed creation: the charge, in one call.
    pi = c.v1.payment_intents.create(
        params={**CARD, "metadata": {"order_id": "o-1"}, "description": "contract o-1"}
    )
    intents.append(pi.id)
    an_intent("create confirmed", pi)
    a_reply("create confirmed", pi)
    eq("create confirmed: status", pi.status, "succeeded")
    eq("create confirmed: amount", pi.amount, 2000)
    eq("create confirmed: amount_received", pi.amount_received, 2000)
    eq("create confirmed: amount_capturable", pi.amount_capturable, 0)
    eq("create confirmed: currency", pi.currency, "usd")
    eq("create confirmed: metadata", pi.metadata.to_dict(), {"order_id": "o-1"})
    eq("create confirmed: description", pi.description, "contract o-1")
    eq("create confirmed: payment_method", pi.payment_method, "pm_card_visa")
    eq("create confirmed: capture_method", pi.capture_method, "automatic")
    eq("create confirmed: last_payment_error", pi.last_payment_error, None)
    prefix("create confirmed: latest_charge", pi.latest_charge, "ch_")
    eq(
        "create confirmed: not a replay",
        pi.last_response.headers.get("idempotent-replayed"),
        None,
    )

    # The same call under one key, twice: the second is the first's reply, replayed.
    explicit.append("contract-replay-1")
    first = c.v1.payment_intents.create(
        params={**CARD, "amount": 1200, "metadata": {"order_id": "o-2"}},
        options={"idempotency_key": "contract-replay-1"},
    )
    intents.append(first.id)
    again = c.v1.payment_intents.create(
        params={**CARD, "amount": 1200, "metadata": {"order_id": "o-2"}},
        options={"idempotency_key": "contract-replay-1"},
    )
    eq("replay: same intent", again.id, first.id)
    eq("replay: same body", again.to_dict(), first.to_dict())
    eq(
        "replay: Idempotent-Replayed",
        again.last_response.headers.get("idempotent-replayed"),
        "true",
    )

    # Changed parameters under a used key.
    e = raises(
        "changed parameters under one key",
        stripe.IdempotencyError,
        lambda: c.v1.payment_intents.create(
            params={**CARD, "amount": 1201, "metadata": {"order_id": "o-2"}},
            options={"idempotency_key": "contract-replay-1"},
        ),
    )
    eq("idempotency error: HTTP status", e.http_status, 400)
    eq("idempotency error: type", e.error.type, "idempotency_error")

    # Created unconfirmed, with a method: nothing charged until /confirm.
    draft = c.v1.payment_intents.create(
        params={"amount": 700, "currency": "eur", "payment_method": "pm_card_visa"}
    )
    intents.append(draft.id)
    an_intent("create unconfirmed", draft)
    eq("create unconfirmed: status", draft.status, "requires_confirmation")
    eq("create unconfirmed: amount_received", draft.amount_received, 0)
    eq("create unconfirmed: latest_charge", draft.latest_charge, None)
    seen = c.v1.payment_intents.retrieve(draft.id)
    eq("retrieve unconfirmed: status", seen.status, "requires_confirmation")
    done = c.v1.payment_intents.confirm(draft.id)
    an_intent("confirm", done)
    eq("confirm: same intent", done.id, draft.id)
    eq("confirm: status", done.status, "succeeded")
    eq("confirm: amount_received", done.amount_received, 700)
    eq("confirm: currency", done.currency, "eur")
    e = raises(
        "confirm twice",
        stripe.InvalidRequestError,
        lambda: c.v1.payment_intents.confirm(draft.id),
    )
    eq("confirm twice: HTTP status", e.http_status, 400)
    eq("confirm twice: code", e.code, "payment_intent_unexpected_state")

    # Created with no method: the method comes with /confirm.
    bare = c.v1.payment_intents.create(params={"amount": 900, "currency": "usd"})
    intents.append(bare.id)
    eq("create without a method: status", bare.status, "requires_payment_method")
    paid = c.v1.payment_intents.confirm(
        bare.id, params={"payment_method": "pm_card_visa"}
    )
    eq("confirm with a method: status", paid.status, "succeeded")
    eq("confirm with a method: payment_method", paid.payment_method, "pm_card_visa")

    # Retrieval.
    got = c.v1.payment_intents.retrieve(pi.id)
    an_intent("retrieve", got)
    a_reply("retrieve", got)
    eq("retrieve: the created intent", got.to_dict(), pi.to_dict())
    e = raises(
        "retrieve an unknown intent",
        stripe.InvalidRequestError,
        lambda: c.v1.payment_intents.retrieve("pi_00000000000000000000000000000000"),
    )
    eq("unknown intent: HTTP status", e.http_status, 404)
    eq("unknown intent: code", e.code, "resource_missing")
    eq("unknown intent: param", e.param, "id")

    # Declines: a CardError carrying the intent and its decline code.
    for pm, decline in [
        ("pm_card_chargeDeclined", "generic_decline"),
        ("pm_card_chargeDeclinedInsufficientFunds", "insufficient_funds"),
    ]:
        e = raises(
            f"decline {pm}",
            stripe.CardError,
            lambda pm=pm: c.v1.payment_intents.create(
                params={**CARD, "amount": 500, "payment_method": pm}
            ),
        )
        eq(f"decline {pm}: HTTP status", e.http_status, 402)
        eq(f"decline {pm}: code", e.code, "card_declined")
        eq(f"decline {pm}: type", e.error.type, "card_error")
        eq(f"decline {pm}: decline_code", e.error.decline_code, decline)
        declined = e.error.payment_intent
        check(
            f"decline {pm}: payment_intent is a PaymentIntent",
            isinstance(declined, stripe.PaymentIntent),
            f"got {type(declined).__name__}",
        )
        intents.append(declined.id)
        prefix(f"decline {pm}: payment_intent.id", declined.id, "pi_")
        eq(f"decline {pm}: intent status", declined.status, "requires_payment_method")
        eq(f"decline {pm}: amount_received", declined.amount_received, 0)
        eq(
            f"decline {pm}: last_payment_error.decline_code",
            declined.last_payment_error.decline_code,
            decline,
        )
        eq(
            f"decline {pm}: the intent as retrieved",
            c.v1.payment_intents.retrieve(declined.id).status,
            "requires_payment_method",
        )

    # Refusals before anything happens: InvalidRequestError naming the parameter.
    e = raises(
        "an unknown parameter",
        stripe.InvalidRequestError,
        lambda: c.v1.payment_intents.create(
            params={"amount": 500, "currency": "usd", "colour": "red"}
        ),
    )
    eq("unknown parameter: HTTP status", e.http_status, 400)
    eq("unknown parameter: param", e.param, "colour")
    eq("unknown parameter: code", e.code, "parameter_unknown")
    e = raises(
        "a missing amount",
        stripe.InvalidRequestError,
        lambda: c.v1.payment_intents.create(params={"currency": "usd"}),
    )
    eq("missing amount: param", e.param, "amount")
    eq("missing amount: code", e.code, "parameter_missing")

    # A bad credential.
    e = raises(
        "a bad API key",
        stripe.AuthenticationError,
        lambda: stripe.StripeClient(
            "sk_test_nobody", base_addresses={"api": base}
        ).v1.payment_intents.list(),
    )
    eq("bad API key: HTTP status", e.http_status, 401)

    # Manual capture.
    held = c.v1.payment_intents.create(
        params={**CARD, "capture_method": "manual", "metadata": {"order_id": "o-3"}}
    )
    intents.append(held.id)
    eq("authorise: status", held.status, "requires_capture")
    eq("authorise: capture_method", held.capture_method, "manual")
    eq("authorise: amount_capturable", held.amount_capturable, 2000)
    eq("authorise: amount_received", held.amount_received, 0)
    captured = c.v1.payment_intents.capture(held.id)
    eq("capture: same intent", captured.id, held.id)
    eq("capture: status", captured.status, "succeeded")
    eq("capture: amount_received", captured.amount_received, 2000)
    eq("capture: amount_capturable", captured.amount_capturable, 0)
    e = raises(
        "capture twice",
        stripe.InvalidRequestError,
        lambda: c.v1.payment_intents.capture(held.id),
    )
    eq("capture twice: code", e.code, "payment_intent_unexpected_state")

    # Cancel: an authorisation, a draft; not a captured payment.
    void = c.v1.payment_intents.create(params={**CARD, "capture_method": "manual"})
    intents.append(void.id)
    canceled = c.v1.payment_intents.cancel(
        void.id, params={"cancellation_reason": "requested_by_customer"}
    )
    eq("cancel an authorisation: status", canceled.status, "canceled")
    eq("cancel an authorisation: amount_received", canceled.amount_received, 0)
    unsent = c.v1.payment_intents.create(params={"amount": 300, "currency": "usd"})
    intents.append(unsent.id)
    eq("cancel a draft: status", c.v1.payment_intents.cancel(unsent.id).status, "canceled")
    e = raises(
        "cancel a captured payment",
        stripe.InvalidRequestError,
        lambda: c.v1.payment_intents.cancel(captured.id),
    )
    eq("cancel a captured payment: code", e.code, "payment_intent_unexpected_state")

    # Listing: pages by starting_after, and the SDK's own auto-pagination over them.
    page = c.v1.payment_intents.list(params={"limit": 2})
    check(
        "list: a ListObject",
        isinstance(page, stripe.ListObject),
        f"got {type(page).__name__}",
    )
    eq("list: object", page.object, "list")
    eq("list: url", page.url, "/v1/payment_intents")
    eq("list: page size", len(page.data), 2)
    eq("list: has_more", page.has_more, True)
    check(
        "list: items are PaymentIntents",
        all(isinstance(x, stripe.PaymentIntent) for x in page.data),
    )
    rest = c.v1.payment_intents.list(
        params={"limit": 2, "starting_after": page.data[-1].id}
    )
    check(
        "list: the next page does not repeat the first",
        not {x.id for x in page.data} & {x.id for x in rest.data},
        f"{[x.id for x in page.data]} then {[x.id for x in rest.data]}",
    )
    walked = [
        x.id for x in c.v1.payment_intents.list(params={"limit": 1}).auto_paging_iter()
    ]
    eq("auto-pagination: no intent twice", len(walked), len(set(walked)))
    missing = [i for i in intents if i != unsent.id and i not in walked]
    check(
        "auto-pagination: every charged intent listed",
        not missing,
        f"missing {missing} from {walked}",
    )

    # Search by metadata (Stripe's search syntax), and its pages (`page` = `next_page`).
    found = c.v1.payment_intents.search(params={"query": "metadata['order_id']:'o-1'"})
    check(
        "search: a SearchResultObject",
        isinstance(found, stripe.SearchResultObject),
        f"got {type(found).__name__}",
    )
    eq("search: object", found.object, "search_result")
    eq("search: url", found.url, "/v1/payment_intents/search")
    eq("search: hits", [x.id for x in found.data], [pi.id])
    eq("search: has_more", found.has_more, False)
    eq("search: next_page", found.next_page, None)
    both = c.v1.payment_intents.search(
        params={"query": "status:'succeeded' AND metadata['order_id']:'o-3'"}
    )
    eq("search with AND: hits", [x.id for x in both.data], [held.id])
    batch = []
    for _ in range(3):
        b = c.v1.payment_intents.create(params={**CARD, "metadata": {"batch": "b-1"}})
        intents.append(b.id)
        batch.append(b.id)
    first_page = c.v1.payment_intents.search(
        params={"query": "metadata['batch']:'b-1'", "limit": 2}
    )
    eq("search page: size", len(first_page.data), 2)
    eq("search page: has_more", first_page.has_more, True)
    check("search page: next_page", bool(first_page.next_page), repr(first_page.next_page))
    every = [
        x.id
        for x in c.v1.payment_intents.search(
            params={"query": "metadata['batch']:'b-1'", "limit": 2}
        ).auto_paging_iter()
    ]
    eq("search auto-pagination: every hit once", sorted(every), sorted(batch))

    # Refunds.
    r = c.v1.refunds.create(params={"payment_intent": pi.id, "amount": 500})
    check("refund: a Refund", isinstance(r, stripe.Refund), f"got {type(r).__name__}")
    refunds.append(r.id)
    a_reply("refund", r)
    eq("refund: object", r.object, "refund")
    prefix("refund: id", r.id, "re_")
    eq("refund: amount", r.amount, 500)
    eq("refund: currency", r.currency, "usd")
    eq("refund: payment_intent", r.payment_intent, pi.id)
    eq("refund: charge", r.charge, pi.latest_charge)
    eq("refund: status", r.status, "succeeded")
    again = c.v1.refunds.retrieve(r.id)
    eq("refund retrieve: the refund", again.to_dict(), r.to_dict())
    e = raises(
        "refund more than is left",
        stripe.InvalidRequestError,
        lambda: c.v1.refunds.create(params={"payment_intent": pi.id, "amount": 1501}),
    )
    eq("refund too much: HTTP status", e.http_status, 400)
    rest_refund = c.v1.refunds.create(params={"payment_intent": pi.id})
    refunds.append(rest_refund.id)
    eq("refund the rest: amount", rest_refund.amount, 1500)
    e = raises(
        "refund a fully refunded payment",
        stripe.InvalidRequestError,
        lambda: c.v1.refunds.create(params={"payment_intent": pi.id}),
    )
    eq("refund a fully refunded payment: code", e.code, "charge_already_refunded")
    listed = c.v1.refunds.list(params={"payment_intent": pi.id})
    check(
        "refund list: a ListObject",
        isinstance(listed, stripe.ListObject),
        f"got {type(listed).__name__}",
    )
    eq("refund list: url", listed.url, "/v1/refunds")
    eq("refund list: the refunds", sorted(x.id for x in listed.data), sorted(refunds))
    eq("refund list: has_more", listed.has_more, False)
    e = raises(
        "retrieve an unknown refund",
        stripe.InvalidRequestError,
        lambda: c.v1.refunds.retrieve("re_00000000000000000000000000000000"),
    )
    eq("unknown refund: HTTP status", e.http_status, 404)

    # Stripe lists "sorted by creation date, with the most recently created appearing first";
    # an integration reading `list(limit=1)` as "the latest" relies on it. Checked last, so a
    # wrong order does not hide the checks above.
    charged = [i for i in intents if i != unsent.id]
    newest_first = [
        x.id for x in c.v1.payment_intents.list(params={"limit": 3}).auto_paging_iter()
    ]
    eq(
        "list: newest first",
        [i for i in newest_first if i in charged],
        list(reversed(charged)),
    )

    emit(
        {
            "summary": {
                "sdk": "python",
                "sdk_version": stripe.VERSION,
                "api_version": stripe.api_version,
                "intents": intents,
                "refunds": refunds,
                "explicit_keys": explicit,
                "uncharged": [unsent.id],
            }
        }
    )


# ---------- echo ----------


def echo(base):
    c = client(base)
    chosen = c.v1.payment_intents.create(
        params=CARD, options={"idempotency_key": "contract-echo-1"}
    )
    # Stripe reflects the key a POST carried in its reply's `Idempotency-Key` header
    # (stripe-mock does it "like the Stripe API does"); the SDK reads it from there
    # (StripeResponseBase.idempotency_key).
    eq(
        "a chosen key is echoed (last_response.idempotency_key)",
        chosen.last_response.idempotency_key,
        "contract-echo-1",
    )
    generated = c.v1.payment_intents.create(params=CARD)
    key = generated.last_response.idempotency_key
    check(
        "the SDK's own key is echoed (last_response.idempotency_key)",
        isinstance(key, str) and key != "",
        repr(key),
    )
    emit({"result": {"generated_key": key, "intent": generated.id}})


# ---------- retry ----------


def retry(base, retries, expect, status):
    kw = {} if retries is None else {"max_network_retries": retries}
    c = client(base, **kw)
    try:
        pi = c.v1.payment_intents.create(params=CARD)
    except stripe.StripeError as e:
        outcome = {
            stripe.APIError: "api_error",
            stripe.APIConnectionError: "connection_error",
        }.get(type(e), type(e).__name__)
        eq("outcome", outcome, expect)
        if expect == "api_error":
            eq("api_error: HTTP status", e.http_status, status)
            eq("api_error: type", e.error.type, "api_error")
        else:
            eq("connection_error: marked retryable", e.should_retry, True)
        emit({"result": {"outcome": outcome, "status": e.http_status}})
        return
    eq("outcome", "ok", expect)
    an_intent("retried create", pi)
    eq("retried create: status", pi.status, "succeeded")
    emit(
        {
            "result": {
                "outcome": "ok",
                "intent": pi.id,
                "replayed": pi.last_response.headers.get("idempotent-replayed") == "true",
            }
        }
    )


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("base", help="the fake's base URL, e.g. http://127.0.0.1:8080")
    p.add_argument("--scenario", choices=["surface", "echo", "retry"], default="surface")
    p.add_argument("--retries", type=int, help="max_network_retries (retry scenario)")
    p.add_argument(
        "--expect",
        choices=["ok", "api_error", "connection_error"],
        default="ok",
        help="what the SDK must give (retry scenario)",
    )
    p.add_argument("--status", type=int, default=500, help="the 5xx an api_error carries")
    a = p.parse_args()
    try:
        if a.scenario == "surface":
            surface(a.base)
        elif a.scenario == "echo":
            echo(a.base)
        else:
            retry(a.base, a.retries, a.expect, a.status)
    except Failed as f:
        emit({"check": f.check, "ok": False, "error": f.why})
        print(f"contract.py {a.scenario}: FAILED {f.check}: {f.why}", file=sys.stderr)
        sys.exit(1)
    except Exception as e:  # the SDK could not parse a reply, or an unexpected error
        emit({"check": "unexpected exception", "ok": False, "error": repr(e)})
        traceback.print_exc()
        print(f"contract.py {a.scenario}: FAILED with {e!r}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
