#!/bin/sh
# The "finds what the suite misses" table of issue 22: every broken variant of the reference
# (the combination-only ones first; the fixed suite passes those) explored through the protocol
# (`aocheck sut reference --variant NAME`, SQLite) from five seeds, each with a 60 s budget,
# stopping at the first finding. Prints one JSON line per (variant, seed): seconds to the first
# finding, schedules run until it, the finding's checker and requirement, the steps it was
# shrunk to, how often the shrunk case reproduced, and the reference's verdict on it.
# Run from the repository root after `cargo build --release --features test-knobs` (the broken
# variants exist only with that feature). VARIANTS, SEEDS, TIME and BIN override the defaults.
set -eu
BIN=${BIN:-"$PWD/target/release/aocheck"}
[ -x "$BIN" ] || { echo "build it first: cargo build --release --features test-knobs" >&2; exit 3; }
COMBINATION="successor_resends_after_5xx rebind_after_takeover retired_retries_late_5xx resend_after_forget release_after_forget successor_reads_5xx_as_failed"
BROKEN="replay_unknown retired_enters rebind_account release_on_timeout restore_authority overwrite_history trust_unauthenticated trust_reply_account reset_unknown_to_queued resend_same_key rosy_state drop_observation prohibited_claim aadp_expiry_releases labels_mint no_action_fence remedy_reuses_grant replacement_reenters"
VARIANTS=${VARIANTS:-"$COMBINATION $BROKEN"}
SEEDS=${SEEDS:-"1 2 3 4 5"}
TIME=${TIME:-60s}
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
for v in $VARIANTS; do
  for s in $SEEDS; do
    out="$D/$v-$s"
    "$BIN" explore --sut "$BIN sut reference --variant $v" --seed "$s" --time "$TIME" \
      --stop-on-finding --out "$out" > "$out.log" 2>&1 || true
    python3 - "$out/explore.json" "$v" "$s" <<'PY'
import json, sys
path, variant, seed = sys.argv[1:]
try:
    d = json.load(open(path))
except (OSError, ValueError) as e:
    print(json.dumps({"variant": variant, "seed": int(seed), "error": str(e)}))
    sys.exit(0)
f = (d.get("findings") or [None])[0]
row = {"variant": variant, "seed": int(seed), "found": f is not None,
       "schedules": d["schedules"], "seconds_to_first": None}
if f:
    row.update({
        "seconds_to_first": f["found_after_millis"] / 1000,
        "schedules_to_first": f["found_after_schedules"],
        "key": f"{f['key']['checker']} {f['key']['requirement']}",
        "steps": f"{f['steps_before']} -> {f['steps_after']}",
        "reproduced": f"{f['reproduced']}/{f['replays']}",
        "reference": f.get("reference"),
    })
print(json.dumps(row))
PY
  done
done
