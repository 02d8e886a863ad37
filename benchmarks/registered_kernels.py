"""What reading the backend's C++ half costs: the CPU time of ``read_registered_kernels``
(every backend yaml composed, every C++ file's bytes tested, the registering ones scanned,
shim headers read) on one downstream, beside the Python index of the same downstream.

    python benchmarks/registered_kernels.py --downstream torch_npu-2.13.0-...whl
    python benchmarks/registered_kernels.py --downstream ~/pytorch_npu_src --repeat 5

The target (docs/impact.md, "Registered ATen kernels"): well under a second of CPU on
torch-npu. Both passes read the same snapshot (``instep.impact.upstream.sources``: the
wheel's members decompressed, or the tree's files), each repetition from a freshly
opened snapshot (nothing kept in memory between them, no instep cache), alternated A, B,
A, B; CPU time is ``time.process_time()`` of this process, so other jobs on a shared
machine move it less than wall time. Every repetition must give the same counts (the
registered overloads and records, the Python files and references) or the script stops:
a faster pass that reads less is no faster pass. The ratio is the native read's CPU over
the Python index's (``coupling_index.index_downstream``, one process, no cache).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path


def _native(spec: str, cache: Path) -> tuple[float, tuple]:
    from instep.impact.downstream.registered_kernels import (
        is_native_source,
        read_registered_kernels,
    )
    from instep.impact.upstream.sources import is_test_path, open_snapshot

    snap = open_snapshot(spec, cache, also=is_native_source)
    paths = snap.paths()
    start = time.process_time()
    index = read_registered_kernels(paths, snap.read, skip=is_test_path)
    cpu = time.process_time() - start
    snap.close()
    stats = index.stats()
    return cpu, (stats["registered_kernels"], len(index.kernels), len(index.shim_references))


def _python(spec: str, cache: Path) -> tuple[float, tuple]:
    from instep.impact.downstream.coupling_index import index_downstream
    from instep.impact.upstream.sources import is_test_path, open_snapshot

    snap = open_snapshot(spec, cache)
    paths = [p for p in snap.paths() if p.endswith(".py") and not is_test_path(p)]
    start = time.process_time()
    items = [(p, snap.read(p)) for p in paths]
    index = index_downstream(items, upstream_roots=("torch",), cache=None, jobs=1)
    cpu = time.process_time() - start
    snap.close()
    return cpu, (len(items), len(list(index.references())))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--downstream", required=True, help="a wheel, a source tree or repo@rev")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="instep-bench-") as tmp:
        cache = Path(tmp)
        runs: dict[str, list[float]] = {"native": [], "python": []}
        seen: dict[str, tuple] = {}
        for _ in range(args.repeat):
            for name, measure in (("native", _native), ("python", _python)):
                cpu, work = measure(args.downstream, cache)
                if seen.setdefault(name, work) != work:
                    print(f"{name}: the work changed between runs: {seen[name]} != {work}")
                    return 1
                runs[name].append(cpu)
    native, python = (statistics.median(runs[k]) for k in ("native", "python"))
    overloads, records, shims = seen["native"]
    files, refs = seen["python"]
    print(f"downstream: {args.downstream}")
    print(
        f"native read: {native:.3f} CPU-s median of {args.repeat} "
        f"({', '.join(f'{x:.3f}' for x in runs['native'])}); {overloads} registered "
        f"overloads, {records} records, {shims} shim declarations"
    )
    print(
        f"python index: {python:.3f} CPU-s median of {args.repeat} "
        f"({', '.join(f'{x:.3f}' for x in runs['python'])}); {files} files, {refs} references"
    )
    print(f"native / python: {native / python:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
