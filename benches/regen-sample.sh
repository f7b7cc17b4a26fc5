#!/bin/sh
# Regenerates the committed sample run (reports/examples) with a fresh signing key, whose public
# half is committed beside it; the private key is thrown away.
set -eu
cd "$(dirname "$0")/.."
key_dir="$(mktemp -d)"
trap 'rm -rf "$key_dir"' EXIT
cargo run --quiet -- keygen "$key_dir/key.pem"
cargo run --quiet -- run --seed 7 --out reports/examples --sign "$key_dir/key.pem" || true
cp "$key_dir/key.pem.pub" reports/examples/signing-key.pub.pem
rm -f reports/examples/store.db reports/examples/store.db-wal reports/examples/store.db-shm
ls reports/examples
