#!/bin/sh
# Regenerates the committed sample run in reports/examples/ (seed 7, SQLite, signed with a fresh
# key whose public half is committed beside it; the private key is thrown away).
set -eu
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The same build the tests use (test knobs compiled in, all off), so neither rebuilds the other.
cargo build -q --bin aocheck --features test-knobs
./target/debug/aocheck keygen "$tmp/key.pem" >/dev/null
rm -rf reports/examples
./target/debug/aocheck run --seed 7 --store "sqlite:$tmp/store.db" --out reports/examples --sign "$tmp/key.pem" >/dev/null || true
rm -f reports/examples/.aocheck.lock
./target/debug/aocheck verify reports/examples --key reports/examples/signing-key.pub.pem
