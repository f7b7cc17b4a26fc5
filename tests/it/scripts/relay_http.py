"""One HTTP call as the relays in this folder make it (standard library only): what both the
hostile relay and the liars send to the providers."""

import json
import urllib.error
import urllib.request


def http(method, url, token, body=None, key=None):
    """Sends one request with a Bearer `token` (and an Idempotency-Key `key`); answers
    (status, JSON body or None). An HTTP error is its status; no connection is status 0."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Authorization", "Bearer " + token)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if key:
        req.add_header("Idempotency-Key", key)
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            try:
                return r.status, json.loads(r.read() or b"null")
            except ValueError:
                return r.status, None
    except urllib.error.HTTPError as e:
        return e.code, None
    except OSError:
        return 0, None
