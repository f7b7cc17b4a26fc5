#!/usr/bin/env bash
# Runs aocheck in a CI job: the script behind this repository's GitHub Action (action.yml), and
# usable from any CI. It runs `aocheck run` (and `aocheck explore` when asked), appends the run's
# summary to the job summary, emits one `::error` annotation per failure at its case file and line,
# writes the verdict counts as step outputs, and exits with aocheck's exit code.
#
# Inputs, from the environment (an empty value means "not given"):
#   AOCHECK_SUT           the implementation's command, one argument (`--sut`); empty: the
#                         reference implementation in process
#   AOCHECK_STORE         `--store` (memory, sqlite:PATH, postgres:URL)
#   AOCHECK_CASES         `--cases` (default: cases). When it is `cases` and the working folder
#                         has none, the suite shipped with the action ($GITHUB_ACTION_PATH/cases,
#                         the same ref as the binary) is run
#   AOCHECK_EXPECT        `--expect FILE`, the known failures
#   AOCHECK_STRICT        `true` adds `--strict` (an unexpected pass fails the run)
#   AOCHECK_BASELINE      `--baseline FILE`, an earlier run's report.json
#   AOCHECK_SIGN_KEY      `--sign`: a path to an Ed25519 private key (PEM), or the PEM text itself
#                         (a secret); never printed, and removed from the environment before
#                         aocheck (and the implementation it starts) runs
#   AOCHECK_EXPLORE_TIME  when given, `aocheck explore --time VALUE --out OUT/explore` runs too
#                         (same --sut, --store, --sign and --shard)
#   AOCHECK_OUT           the report folder (default: aocheck-report)
#   AOCHECK_SHARD         `--shard K/N`
#   AOCHECK_SEED          `--seed N` for run and explore; shards of one run need the same seed
#                         to be merged (e.g. the workflow run's id)
#   AOCHECK_EXTRA_ARGS    more arguments for `aocheck run`, split like a shell would
#                         (e.g. `--case AOC-CASE-001 --seed 7`)
#   AOCHECK_ARTIFACT_NAME the name the report folder is to be uploaded under (default:
#                         aocheck-report); a shard's gets `-shard-K-of-N` appended (output
#                         `artifact-name`: artifact names must differ between a run's jobs)
#   AOCHECK_BIN           the aocheck binary (default: aocheck on PATH)
# GitHub's own: GITHUB_STEP_SUMMARY, GITHUB_OUTPUT (appended to when set), GITHUB_ACTIONS (when
# `true`, workflow commands in aocheck's output, which repeats what the implementation said, are
# stopped while it runs), GITHUB_WORKSPACE (annotation paths are relative to it).
#
# Outputs (GITHUB_OUTPUT): pass, fail, other (the run's verdict counts; empty without a report),
# exit-code (what this script exits with), run-exit-code, explore-exit-code (empty when no
# exploration ran), report (the path of report.json; empty without one), artifact-name.
#
# Exit code: `aocheck run`'s; when it is 0 and an exploration ran, `aocheck explore`'s. 3 when an
# input is unusable. JSON is read with python3 (scripts/ci/aocheck_ci.py), not jq.
set -euo pipefail

say() { printf 'aocheck-action: %s\n' "$*" >&2; }
refuse() {
    say "$*"
    exit 3
}

here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
helper=$here/aocheck_ci.py

bin=${AOCHECK_BIN:-aocheck}
sut=${AOCHECK_SUT:-}
store=${AOCHECK_STORE:-}
cases=${AOCHECK_CASES:-}
expect=${AOCHECK_EXPECT:-}
strict=${AOCHECK_STRICT:-}
baseline=${AOCHECK_BASELINE:-}
sign_key=${AOCHECK_SIGN_KEY:-}
explore_time=${AOCHECK_EXPLORE_TIME:-}
out=${AOCHECK_OUT:-}
shard=${AOCHECK_SHARD:-}
seed=${AOCHECK_SEED:-}
extra=${AOCHECK_EXTRA_ARGS:-}
artifact=${AOCHECK_ARTIFACT_NAME:-}
# None of these reaches aocheck or the implementation it starts (the key above all).
unset AOCHECK_SUT AOCHECK_STORE AOCHECK_CASES AOCHECK_EXPECT AOCHECK_STRICT AOCHECK_BASELINE \
    AOCHECK_SIGN_KEY AOCHECK_EXPLORE_TIME AOCHECK_OUT AOCHECK_SHARD AOCHECK_SEED \
    AOCHECK_EXTRA_ARGS AOCHECK_ARTIFACT_NAME
cases=${cases:-cases}
if [[ $cases == cases && ! -e cases && -n ${GITHUB_ACTION_PATH:-} && -d $GITHUB_ACTION_PATH/cases ]]; then
    cases=$GITHUB_ACTION_PATH/cases
    say "no cases/ here: running the suite shipped with the action ($cases)"
fi
out=${out:-aocheck-report}
artifact=${artifact:-aocheck-report}
if [[ -n $shard ]]; then artifact+="-shard-${shard//\//-of-}"; fi
# What an artifact name may not hold.
artifact=${artifact//[$'\"'$':<>|*?\r\n\\/']/-}

case "${strict,,}" in
    true | 1 | yes | on) strict=true ;;
    "" | false | 0 | no | off) strict=false ;;
    *) refuse "strict must be true or false, not '$strict'" ;;
esac

# The signing key: a file, or the PEM itself written to a private file removed on exit.
sign=""
key_file=""
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
    if [[ -n $key_file ]]; then
        rm -f -- "$key_file"
    fi
}
trap cleanup EXIT
if [[ -n $sign_key ]]; then
    if [[ $sign_key == *"-----BEGIN"* ]]; then
        key_file=$(umask 077 && mktemp "${RUNNER_TEMP:-${TMPDIR:-/tmp}}/aocheck-sign.XXXXXXXX")
        # As pasted into a secret: blank lines or spaces around it are not part of the PEM.
        pem=${sign_key#"${sign_key%%[![:space:]]*}"}
        pem=${pem%"${pem##*[![:space:]]}"}
        printf '%s\n' "$pem" >"$key_file"
        pem=""
        sign=$key_file
    elif [[ -f $sign_key && -r $sign_key ]]; then
        sign=$sign_key
    else
        refuse "sign-key is neither a PEM private key nor a readable file (its value is not shown)"
    fi
fi
sign_key=""

# More arguments for `aocheck run`, split as a POSIX shell would (no expansion of any kind).
more=()
if [[ -n $extra ]]; then
    split='import shlex, sys; sys.stdout.write("".join(a + "\0" for a in shlex.split(sys.argv[1])))'
    if ! python3 -c "$split" "$extra" >/dev/null; then
        refuse "AOCHECK_EXTRA_ARGS could not be split (unbalanced quotes?)"
    fi
    while IFS= read -r -d '' a; do
        more+=("$a")
    done < <(python3 -c "$split" "$extra")
fi

# What run and explore share.
common=()
if [[ -n $sut ]]; then common+=(--sut "$sut"); fi
if [[ -n $store ]]; then common+=(--store "$store"); fi
if [[ -n $sign ]]; then common+=(--sign "$sign"); fi
if [[ -n $shard ]]; then common+=(--shard "$shard"); fi
if [[ -n $seed ]]; then common+=(--seed "$seed"); fi

run=(run --cases "$cases" --out "$out" "${common[@]}")
if [[ -n $expect ]]; then run+=(--expect "$expect"); fi
if [[ $strict == true ]]; then run+=(--strict); fi
if [[ -n $baseline ]]; then run+=(--baseline "$baseline"); fi
run+=("${more[@]}")

explore=()
if [[ -n $explore_time ]]; then
    explore=(explore --time "$explore_time" --out "$out/explore" "${common[@]}")
fi

# The command as it will run, the key's path hidden.
shown() {
    local a s="" hide=0
    for a in "$@"; do
        if ((hide)); then
            s+=" '***'"
            hide=0
        else
            s+=" $(printf '%q' "$a")"
        fi
        if [[ $a == --sign ]]; then hide=1; fi
    done
    printf '%s' "${s# }"
}

# aocheck prints what the implementation said; while it runs, a line of it must not be taken
# for a workflow command (GitHub's stop-commands, with a token nobody can guess).
token=""
if [[ ${GITHUB_ACTIONS:-} == true ]]; then
    token=$(python3 -c 'import secrets; print(secrets.token_hex(24))')
    printf '::stop-commands::%s\n' "$token"
fi

say "$(shown "$bin" "${run[@]}")"
set +e
"$bin" "${run[@]}"
run_code=$?
set -e
explore_code=""
if ((${#explore[@]})); then
    say "$(shown "$bin" "${explore[@]}")"
    set +e
    "$bin" "${explore[@]}"
    explore_code=$?
    set -e
fi

if [[ -n $token ]]; then
    printf '::%s::\n' "$token"
fi

code=$run_code
if ((code == 0)) && [[ -n $explore_code ]]; then
    code=$explore_code
fi

# The job summary: the run's summary, its diff against the baseline, the exploration's summary.
# GitHub takes at most 1 MiB per step; what does not fit is cut, the whole is in the artifact.
if [[ -n ${GITHUB_STEP_SUMMARY:-} ]]; then
    budget=1000000
    for f in "$out/summary.md" "$out/diff.md" "$out/explore/summary.md"; do
        if [[ ! -f $f ]]; then continue; fi
        size=$(wc -c <"$f")
        if ((size + 2 > budget)); then
            if ((budget > 200)); then
                head -c "$((budget - 200))" -- "$f" >>"$GITHUB_STEP_SUMMARY"
                # shellcheck disable=SC2016 # the backquotes are Markdown
                printf '\n\n_(cut here: the whole of `%s` is in the report artifact)_\n' \
                    "${f##*/}" >>"$GITHUB_STEP_SUMMARY"
            fi
            break
        fi
        cat -- "$f" >>"$GITHUB_STEP_SUMMARY"
        printf '\n\n' >>"$GITHUB_STEP_SUMMARY"
        budget=$((budget - size - 2))
    done
    if [[ ! -f $out/summary.md ]]; then
        printf '## aocheck\n\naocheck exited %s before writing a report; the job log says why.\n' \
            "$run_code" >>"$GITHUB_STEP_SUMMARY"
    fi
fi

# One annotation per failure, at its case file and line.
if ! python3 "$helper" annotate "$out"; then
    say "could not read the reports in $out for annotations"
fi

# Step outputs.
pass="" fail="" other=""
if counts=$(python3 "$helper" counts "$out"); then
    while IFS='=' read -r k v; do
        case $k in
            pass) pass=$v ;;
            fail) fail=$v ;;
            other) other=$v ;;
        esac
    done <<<"$counts"
fi
report=""
if [[ -f $out/report.json ]]; then report=$out/report.json; fi

output() {
    local name=$1 value=$2 delim
    if [[ -z ${GITHUB_OUTPUT:-} ]]; then return 0; fi
    if [[ $value == *$'\n'* || $value == *$'\r'* ]]; then
        delim="aocheck_$(python3 -c 'import secrets; print(secrets.token_hex(16))')"
        printf '%s<<%s\n%s\n%s\n' "$name" "$delim" "$value" "$delim" >>"$GITHUB_OUTPUT"
    else
        printf '%s=%s\n' "$name" "$value" >>"$GITHUB_OUTPUT"
    fi
}
output pass "$pass"
output fail "$fail"
output other "$other"
output exit-code "$code"
output run-exit-code "$run_code"
output explore-exit-code "$explore_code"
output report "$report"
output artifact-name "$artifact"

say "aocheck run exited $run_code${explore_code:+, aocheck explore $explore_code}; exiting $code"
exit "$code"
