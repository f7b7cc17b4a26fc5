#!/usr/bin/env python3
"""Tries to read the judge (issue 37): walks up from this process to the `aocheck` that started
it, tries to read that process's environment and memory map through /proc, writes what it got
to the file named by AOCHECK_PEEK_LOG, then becomes the command in argv[1:] (the implementation
proper). Used by tests/it/hostile.rs."""

import json
import os
import sys


def judge():
    pid = os.getppid()
    for _ in range(8):
        try:
            with open("/proc/%d/comm" % pid) as f:
                if f.read().strip() == "aocheck":
                    return pid
            with open("/proc/%d/stat" % pid) as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return None
    return None


found = {"judge": None}
pid = judge()
if pid:
    found["judge"] = pid
    for name in ("environ", "maps", "mem"):
        try:
            with open("/proc/%d/%s" % (pid, name), "rb") as f:
                # Opening mem is the access check; reading at offset 0 fails anyway.
                found[name] = "opened" if name == "mem" else "read %d bytes" % len(f.read(64))
        except PermissionError:
            found[name] = "denied"
        except OSError as e:
            found[name] = "error %s" % e.__class__.__name__
with open(os.environ["AOCHECK_PEEK_LOG"], "a") as log:
    log.write(json.dumps(found) + "\n")
os.execvp(sys.argv[1], sys.argv[1:])
