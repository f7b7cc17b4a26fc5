#!/bin/sh
# Schedules per minute of `aocheck explore` against the reference: in process (memory store and
# SQLite) and through the protocol (SQLite), with the median steps per schedule. Run from the
# repository root after `cargo build --release`. SCHEDULES (default 1000 in process, a tenth of
# it through the protocol) sets the budget; each arm runs one schedule at a time (`--jobs 1`)
# and then several (JOBS, default 4 in process, 8 through the protocol). Prints one JSON line
# per arm. BIN overrides the binary.
set -eu
BIN=${BIN:-"$PWD/target/release/aocheck"}
[ -x "$BIN" ] || { echo "build it first: cargo build --release" >&2; exit 3; }
N=${SCHEDULES:-1000}
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
arm() { # NAME, JOBS, SCHEDULES, then the extra arguments of `aocheck explore`
  name=$1; jobs=$2; n=$3; shift 3
  rm -f "$D"/*.db
  "$BIN" explore --seed 11 --schedules "$n" --jobs "$jobs" --out "$D/$name-$jobs" "$@" \
    > "$D/$name-$jobs.log" 2>&1 || true
  python3 - "$D/$name-$jobs/explore.json" "$name" "$jobs" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(json.dumps({"arm": sys.argv[2], "jobs": int(sys.argv[3]), "schedules": d["schedules"],
    "seconds": d["millis"] / 1000,
    "schedules_per_minute": d["schedules_per_minute"], "median_steps": d["median_steps"],
    "findings": len(d["findings"]), "undecided": sum(d["undecided"].values())}))
PY
}
J=${JOBS:-4}
PJ=${PROTOCOL_JOBS:-8}
for j in 1 "$J"; do arm in_process_memory "$j" "$N" --store memory; done
for j in 1 "$J"; do arm in_process_sqlite "$j" "$N" --store "sqlite:$D/s.db"; done
for j in 1 "$PJ"; do
  arm protocol_sqlite "$j" "$(( N / 10 ))" --store "sqlite:$D/p.db" --sut "$BIN sut reference"
done
