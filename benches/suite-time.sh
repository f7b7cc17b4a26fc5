#!/bin/sh
# The whole conformance suite's wall time and peak memory, in process and through the protocol,
# on SQLite: `/usr/bin/time -v` over the release binary. Run from the repository root after
# `cargo build --release`. Prints one JSON line per arm; the reports go to a temporary folder.
set -eu
BIN="$PWD/target/release/aocheck"
[ -x "$BIN" ] || { echo "build it first: cargo build --release" >&2; exit 3; }
D=$(mktemp -d)
measure() { # ARM, then the extra arguments of `aocheck run`
  arm=$1; shift
  /usr/bin/time -v "$BIN" run --seed 7 --store "sqlite:$D/$arm.db" --out "$D/$arm" "$@" \
    > "$D/$arm.log" 2> "$D/$arm.time" || true
  wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$D/$arm.time")
  rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$D/$arm.time")
  echo "{\"arm\": \"$arm\", \"wall\": \"$wall\", \"max_rss_kb\": $rss, \"result\": \"$(tail -n1 "$D/$arm.log" | cut -d';' -f1)\"}"
}
measure in_process
measure protocol --sut "$BIN sut reference"
