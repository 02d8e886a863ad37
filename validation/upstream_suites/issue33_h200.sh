#!/usr/bin/env bash
# Issue 33's H200 comparison (docs/validation/upstream-suites.md): pytest -n 12 against
# instep run on 242 cases of test_op_dtype_prop.py. Run from the repository root on the
# device, with the wheels in .whl/ and upstream_tests/ rebuilt by fetch_upstream_tests.sh.
# MODES=worker (default) or case; SIDE_S: seconds one side may run; OUT: where logs go.
set -o pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT="${OUT:-/tmp/issue33}"
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
nproc
python3 -c "import torch; print(torch.__version__, torch.version.git_version, torch.cuda.get_device_name())"
cd upstream_tests/inductor || exit 1
python3 ../../validation/upstream_suites/compare.py test/inductor/test_op_dtype_prop.py \
    --workers 12 --profile cuda --devices 0 -k "${K:-float32 or float64 or bool}" \
    --modes "${MODES:-worker}" --side-timeout "${SIDE_S:-270}" --out /tmp/cmp 2>&1 |
    tee "$OUT/compare.txt"
cp /tmp/cmp/*.log /tmp/cmp/pytest.xml /tmp/cmp/instep.db "$OUT"/ 2>/dev/null
