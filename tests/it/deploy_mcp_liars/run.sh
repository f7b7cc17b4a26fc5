#!/bin/sh
# run.sh LIE CASE...: runs the deploy file LIE.yaml against the cases given (one aocheck run
# per case), into ${TMPDIR:-/tmp}/liar-LIE-CASE, and prints each case's verdict and failures.
# The aocheck binary is $AOCHECK (default: the checkout's target/debug/aocheck); the Python
# environment the README's test command made comes first on PATH.
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
aocheck=${AOCHECK:-$root/target/debug/aocheck}
lie=$1; shift
for c in "$@"; do
  out=${TMPDIR:-/tmp}/liar-$lie-$c
  rm -rf "$out"
  PATH=$root/target/test-env/venv/bin:$PATH "$aocheck" deploy run "$here/$lie.yaml" \
    --out "$out" --case "$c" >"$out.stdout" 2>"$out.stderr"
  rc=$?
  python3 "$here/verdict.py" "$out" "$lie" "$c" "$rc"
done
