#!/usr/bin/env python3
"""Runs every test binary of the workspace once with libtest's per-test timing and prints the
slowest tests (scripts/test --times calls it, after the build).

libtest's JSON output and `--report-time` are unstable options of the stable test harness;
RUSTC_BOOTSTRAP=1 is set for the test binaries alone (never for cargo or rustc, so nothing is
rebuilt). Each binary runs from its package's folder, as `cargo test` runs it.

    scripts/test-times.py [--top N] [--json FILE] [-- ARGS for every test binary]
"""
import json
import os
import subprocess
import sys
import time


def main() -> int:
    args = sys.argv[1:]
    top, out, extra = 20, None, []
    while args:
        a = args.pop(0)
        if a == "--top":
            top = int(args.pop(0))
        elif a == "--json":
            out = args.pop(0)
        elif a == "--":
            extra = args
            break
        else:
            print(f"test-times: unknown argument {a!r}", file=sys.stderr)
            return 3
    build = subprocess.run(
        ["cargo", "test", "--workspace", "--no-run", "--message-format=json"],
        stdout=subprocess.PIPE, check=False, text=True,
    )
    if build.returncode != 0:
        print("test-times: the build failed", file=sys.stderr)
        return build.returncode
    bins = []
    for line in build.stdout.splitlines():
        try:
            m = json.loads(line)
        except json.JSONDecodeError:
            continue
        if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
            bins.append((os.path.dirname(m["manifest_path"]), m["target"]["name"], m["executable"]))
    env = dict(os.environ, RUSTC_BOOTSTRAP="1")
    times, failed, wall = [], [], {}
    for cwd, name, exe in bins:
        label = f"{os.path.basename(cwd)}::{name}"
        t0 = time.monotonic()
        p = subprocess.Popen(
            [exe, "-Z", "unstable-options", "--format", "json", "--report-time", *extra],
            cwd=cwd, env=env, stdout=subprocess.PIPE, text=True,
        )
        assert p.stdout is not None
        for line in p.stdout:
            try:
                ev = json.loads(line)
            except json.JSONDecodeError:
                continue
            if ev.get("type") != "test" or ev.get("event") not in ("ok", "failed"):
                continue
            times.append((float(ev.get("exec_time", 0.0)), label, ev["name"]))
            if ev["event"] == "failed":
                failed.append(f"{label} {ev['name']}")
                sys.stderr.write(ev.get("stdout", ""))
        p.wait()
        wall[label] = time.monotonic() - t0
        print(f"{label}: {wall[label]:.1f} s", file=sys.stderr)
    times.sort(reverse=True)
    print(f"slowest {top} of {len(times)} tests (seconds, each on its own thread):")
    for t, label, name in times[:top]:
        print(f"{t:8.2f}  {label}  {name}")
    print("wall per binary: " + ", ".join(f"{k} {v:.0f} s" for k, v in wall.items()))
    if out:
        with open(out, "w") as f:
            json.dump({"wall": wall, "tests": [{"secs": t, "binary": l, "name": n} for t, l, n in times]}, f, indent=1)
    for f in failed:
        print(f"FAILED {f}")
    print(f"{len(times) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
