"""An independent verifier and signer of aocheck's signed folders, on PyPI's securesystemslib
(DSSE) and cryptography (keys): nothing of aocheck's code is used.

  verify DIR ENVELOPE PUBKEY   exit 0 when the envelope verifies and every subject file matches
  sign DIR ENVELOPE PRIVKEY    writes DIR/ENVELOPE over every file of DIR (run-predicate type)
"""
import base64
import hashlib
import json
import os
import sys

from cryptography.hazmat.primitives import serialization
from securesystemslib.dsse import Envelope
from securesystemslib.signer import CryptoSigner, SSlibKey

SKIP = {"report.dsse.json", "explore.dsse.json", "signing-key.pub.pem", ".aocheck.lock"}


def files(root):
    out = {}
    for d, _, names in os.walk(root):
        for n in names:
            p = os.path.join(d, n)
            rel = os.path.relpath(p, root).replace(os.sep, "/")
            if rel in SKIP:
                continue
            with open(p, "rb") as f:
                out[rel] = hashlib.sha256(f.read()).hexdigest()
    return out


def verify(root, envelope, pubkey):
    with open(pubkey, "rb") as f:
        pem = f.read()
    public = serialization.load_pem_public_key(pem)
    der = public.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    keyid = "sha256:" + hashlib.sha256(der).hexdigest()
    key = SSlibKey.from_crypto(public, keyid=keyid)
    with open(os.path.join(root, envelope), "rb") as f:
        env = Envelope.from_dict(json.load(f))
    if env.payload_type != "application/vnd.in-toto+json":
        sys.exit("payloadType " + env.payload_type)
    env.verify([key], 1)
    st = json.loads(env.payload)
    if st["_type"] != "https://in-toto.io/Statement/v1":
        sys.exit("_type " + st["_type"])
    on_disk = files(root)
    signed = {s["name"]: s["digest"]["sha256"] for s in st["subject"]}
    bad = [n for n in signed if on_disk.get(n) != signed[n]]
    bad += [n for n in on_disk if n not in signed]
    if bad:
        sys.exit("not as signed: " + ", ".join(sorted(bad)))
    print("ok", st["predicateType"], len(signed))


def sign(root, envelope, privkey):
    with open(privkey, "rb") as f:
        private = serialization.load_pem_private_key(f.read(), None)
    st = {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [
            {"name": n, "digest": {"sha256": d}} for n, d in sorted(files(root).items())
        ],
        "predicateType": "https://aocheck.dev/conformance-run/v1",
        "predicate": {"run_id": "signed-in-python", "seed": 1, "verdicts": {}},
    }
    env = Envelope(
        payload=json.dumps(st).encode(),
        payload_type="application/vnd.in-toto+json",
        signatures={},
    )
    env.sign(CryptoSigner(private))
    with open(os.path.join(root, envelope), "w") as f:
        json.dump(env.to_dict(), f)
    print("signed", len(st["subject"]))


if __name__ == "__main__":
    what, root, envelope, key = sys.argv[1:5]
    {"verify": verify, "sign": sign}[what](root, envelope, key)
