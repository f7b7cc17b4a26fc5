#!/usr/bin/env python3
"""The Python example with a threaded request loop, for AOC-REQ-001's races (tests only).

Each request after `init` is answered on its own thread, so racing requests really run together.

  concurrent_sut.py safe    the example's own transactions decide every entry: an honest,
                            concurrent implementation, which must pass.
  concurrent_sut.py unsafe  entry is decided on a read outside the transaction (check, then act,
                            with a window between): two racing deliveries of one occurrence both
                            enter, and aocheck must fail AOC-REQ-001.
"""

import importlib.util
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "..", "..", "examples", "python-sut", "sut.py")
spec = importlib.util.spec_from_file_location("python_sut_example", EXAMPLE)
example = importlib.util.module_from_spec(spec)
spec.loader.exec_module(example)


class CheckThenAct(example.Executor):
    """Decides entry on its own read, then writes in a later transaction: unserialised."""

    def op_enter(self, f):
        db = self.connect()
        try:
            occ = self.occurrence(db, f["occurrence"])
            st = self.fold(occ["id"], db)
        finally:
            db.close()
        if st["phase"] != "reserved":
            raise example.Refused("AOC-REQ-010", "already %s" % st["phase"])
        time.sleep(0.3)  # the window between the check and the act

        def run(db):
            self.fence(db)
            return self.append_sent(db, occ)
        self.permits[f["occurrence"]] = self.tx(run)
        return {}


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode not in ("safe", "unsafe"):
        sys.stderr.write("usage: concurrent_sut.py safe|unsafe\n")
        sys.exit(2)
    sys.exit(example.serve(CheckThenAct if mode == "unsafe" else example.Executor, threaded=True))
