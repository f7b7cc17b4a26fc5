#!/bin/sh
# Schedules per minute of `aocheck explore` against the reference: in process (memory store and
# SQLite) and through the protocol (SQLite), with the median steps per schedule. Run from the
# repository root after `cargo build --release`. SCHEDULES (default 1000 in process, a tenth of
# it through the protocol) sets the budget. Prints one JSON line per arm.
set -eu
BIN="$PWD/target/release/aocheck"
[ -x "$BIN" ] || { echo "build it first: cargo build --release" >&2; exit 3; }
N=${SCHEDULES:-1000}
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
arm() { # NAME, SCHEDULES, then the extra arguments of `aocheck explore`
  name=$1; n=$2; shift 2
  "$BIN" explore --seed 11 --schedules "$n" --out "$D/$name" "$@" > "$D/$name.log" 2>&1 || true
  python3 - "$D/$name/explore.json" "$name" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(json.dumps({"arm": sys.argv[2], "schedules": d["schedules"], "seconds": d["millis"] / 1000,
    "schedules_per_minute": d["schedules_per_minute"], "median_steps": d["median_steps"],
    "findings": len(d["findings"]), "undecided": sum(d["undecided"].values())}))
PY
}
arm in_process_memory "$N" --store memory
arm in_process_sqlite "$N" --store "sqlite:$D/s.db"
arm protocol_sqlite "$(( N / 10 ))" --store "sqlite:$D/p.db" --sut "$BIN sut reference"
