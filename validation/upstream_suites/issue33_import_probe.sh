#!/usr/bin/env bash
# Where one process's import of test_op_dtype_prop.py goes on the H200 (the floor of
# --isolate case, docs/validation/upstream-suites.md): -X importtime twice, then a cProfile
# of importing torch.testing._internal.inductor_utils, whose module body is most of it.
# Run from the repository root on the device, with the wheels in .whl/ and upstream_tests/
# rebuilt by fetch_upstream_tests.sh; OUT: where the import-time lists go.
set -o pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT="${OUT:-/tmp/issue33-probe}"
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/expecttest*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
nproc
cd upstream_tests/inductor/test/inductor || exit 1
for i in 1 2; do
    /usr/bin/time -f "import $i: wall %e s, user %U s, sys %S s" python3 -X importtime \
        -c "import test_op_dtype_prop" 2>"$OUT/importtime_$i.txt"
    tail -1 "$OUT/importtime_$i.txt"
    sort -t'|' -k1 -n -r "$OUT/importtime_$i.txt" | head -3  # largest self times
done
python3 - <<'PY'
import cProfile
import io
import pstats

cProfile.run("import torch.testing._internal.inductor_utils", "/tmp/inductor_utils.prof")
out = io.StringIO()
pstats.Stats("/tmp/inductor_utils.prof", stream=out).sort_stats("cumulative").print_stats(25)
print(out.getvalue())
PY
