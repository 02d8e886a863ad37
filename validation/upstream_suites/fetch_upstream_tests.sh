#!/usr/bin/env bash
# Rebuilds upstream_tests/ (git-ignored: upstream code is never committed here) with the
# PyTorch test files docs/validation/upstream-suites.md ran, at the commits it names, or
# with REF=<tag|commit> at another one (e.g. REF="$(python -c 'import torch;
# print(torch.version.git_version)')" for the tests of the installed torch).
set -euo pipefail

# commit  path   (the versions run for docs/validation/upstream-suites.md)
FILES="
00743e70eda2c19bf968748cb3e9c3630594b26e test/inductor/test_mmdecomp.py
00fc6794cc000ce9c17a7f55e70d60754a9dc5a0 test/inductor/test_op_dtype_prop.py
"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
DEST="$ROOT/upstream_tests/inductor"

echo "$FILES" | while read -r commit path; do
    [ -n "$path" ] || continue
    ref="${REF:-$commit}"
    mkdir -p "$DEST/$(dirname "$path")"
    curl -fsSL "https://raw.githubusercontent.com/pytorch/pytorch/$ref/$path" -o "$DEST/$path"
    echo "fetched $ref:$path -> $DEST/$path"
done
