#!/usr/bin/env bash
# Installs aocheck for this repository's GitHub Action (action.yml) with `cargo install --locked`,
# at a pinned ref, unless an aocheck built from that ref is already on PATH.
#
# Inputs, from the environment:
#   AOCHECK_REF                the git ref to install: a commit (7 to 40 hex digits, or any
#                              `refs/...` name: `--rev`), a tag (`--tag`) or a branch (`--branch`);
#                              which of the last two is asked of the repository (`git ls-remote`).
#                              Empty: the action's own ref, AOCHECK_ACTION_REF.
#   AOCHECK_ACTION_REF         the ref the workflow named the action at (`github.action_ref`)
#   AOCHECK_ACTION_REPOSITORY  owner/name of the action's repository (`github.action_repository`)
#   GITHUB_ACTION_PATH         the action's own copy (set by the runner): installed from when no
#                              ref or no repository is known (GitHub does not promise the two
#                              contexts inside a composite action), which is the same source
#   AOCHECK_INSTALL_DRY_RUN    `true`: print the cargo command instead of running it (tests)
# `aocheck --version` names the version and the commit (`aocheck 0.1.0 (commit 0123456789ab)`):
# a commit ref is already installed when the commit matches, a tag `vX.Y.Z` or `X.Y.Z` when the
# version does; a branch moves, so it is always installed (cargo itself skips an unchanged one).
set -euo pipefail

ref=${AOCHECK_REF:-}
if [[ -z $ref ]]; then ref=${AOCHECK_ACTION_REF:-}; fi
repo=${AOCHECK_ACTION_REPOSITORY:-}
src=${GITHUB_ACTION_PATH:-}
dry=${AOCHECK_INSTALL_DRY_RUN:-false}

say() { printf 'install-aocheck: %s\n' "$*" >&2; }

is_commit() { [[ $1 =~ ^[0-9a-fA-F]{7,40}$ ]]; }

# Already there?
if have=$(aocheck --version 2>/dev/null); then
    version=$(sed -n 's/^aocheck \([^ ]*\).*/\1/p' <<<"$have")
    commit=$(sed -n 's/.*(commit \([0-9a-fA-F]*\)).*/\1/p' <<<"$have")
    wanted=false
    if [[ -n $ref ]] && is_commit "$ref" && [[ -n $commit ]]; then
        n=$((${#ref} < ${#commit} ? ${#ref} : ${#commit}))
        if [[ ${ref:0:n} == "${commit:0:n}" ]]; then wanted=true; fi
    elif [[ -n $ref && -n $version && ${ref#v} == "$version" ]]; then
        wanted=true
    fi
    if [[ $wanted == true ]]; then
        say "$have is on PATH and is $ref: not installing"
        exit 0
    fi
fi

cmd=(cargo install --locked)
if [[ -n $ref && -n $repo ]]; then
    url="https://github.com/$repo"
    if is_commit "$ref" || [[ $ref == refs/* ]]; then
        how=--rev
    else
        refs=$(git ls-remote --tags --heads -- "$url" "refs/tags/$ref" "refs/heads/$ref") || {
            say "cannot list the refs of $url"
            exit 4
        }
        names=$(awk '{ print $2 }' <<<"$refs")
        if grep -qxF -e "refs/tags/$ref" -e "refs/tags/$ref^{}" <<<"$names"; then
            how=--tag
        elif grep -qxF "refs/heads/$ref" <<<"$names"; then
            how=--branch
        else
            how=--rev
        fi
    fi
    cmd+=(--git "$url" "$how" "$ref" aocheck)
    # A build from a 40-digit commit names it even when git cannot be asked.
    if [[ $ref =~ ^[0-9a-fA-F]{40}$ ]]; then export AOCHECK_GIT_COMMIT=${ref:0:12}; fi
elif [[ -n $src && -f $src/Cargo.toml ]]; then
    if [[ -n $ref ]]; then
        say "the action's repository is not known here: installing the action's own copy, not $ref"
    fi
    cmd+=(--path "$src")
else
    say "no ref and no copy of the action to install from"
    exit 3
fi

say "${cmd[*]}"
if [[ $dry == true ]]; then
    printf '%s\n' "${cmd[*]}"
    exit 0
fi
"${cmd[@]}"
bin_dir=${CARGO_HOME:-$HOME/.cargo}/bin
if [[ -n ${GITHUB_PATH:-} ]]; then printf '%s\n' "$bin_dir" >>"$GITHUB_PATH"; fi
PATH=$bin_dir:$PATH aocheck --version
