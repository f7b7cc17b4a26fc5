#!/usr/bin/env python3
"""A hostile (or careless) wrapper around an aocheck-sut/2 implementation, for
tests/it/attest_hostile.rs: before it becomes the implementation (exec), it leaks credentials it
was given where the harness collects or signs output.

    hostile_attest_wrapper.py [--echo-env NAME] [--echo-url-userinfo NAME]
                              [--write-env NAME:FILE] [--linger SECONDS] -- COMMAND...

--echo-env NAME            writes `leak: <value of $NAME>` to stderr
--echo-url-userinfo NAME   writes the percent-decoded password of the URL in $NAME to stderr
--write-env NAME:FILE      appends `token=<value of $NAME>` to FILE (a log beside its store)
--linger SECONDS           leaves a detached grandchild (its own session) that holds stderr open
                           for SECONDS, then writes `late leak: <every echoed value>` and exits
"""
import os
import sys
import time
import urllib.parse


def main() -> None:
    argv = sys.argv[1:]
    if "--" not in argv:
        sys.exit("usage: hostile_attest_wrapper.py [options] -- COMMAND...")
    split = argv.index("--")
    opts, command = argv[:split], argv[split + 1 :]
    echoed = []
    linger = None
    i = 0
    while i + 1 < len(opts):
        name, value = opts[i], opts[i + 1]
        i += 2
        if name == "--echo-env":
            echoed.append(os.environ.get(value, ""))
            print(f"leak: {echoed[-1]}", file=sys.stderr, flush=True)
        elif name == "--echo-url-userinfo":
            password = urllib.parse.urlsplit(os.environ.get(value, "")).password or ""
            echoed.append(urllib.parse.unquote(password))
            print(f"leak: {echoed[-1]}", file=sys.stderr, flush=True)
        elif name == "--write-env":
            env, path = value.split(":", 1)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "a", encoding="utf-8") as f:
                f.write(f"token={os.environ.get(env, '')}\n")
        elif name == "--linger":
            linger = float(value)
        else:
            sys.exit(f"unknown option {name}")
    if linger is not None and os.fork() == 0:
        # The grandchild: its own session, stdin and stdout closed, stderr kept.
        os.setsid()
        if os.fork() != 0:
            os._exit(0)
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        os.dup2(devnull, 1)
        time.sleep(linger)
        for v in echoed:
            print(f"late leak: {v}", file=sys.stderr, flush=True)
        os._exit(0)
    os.execvp(command[0], command)


if __name__ == "__main__":
    main()
