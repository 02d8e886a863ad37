"""Which tests to run for a unit: upstream tests named by the change, downstream tests that
import the coupled modules.

The downstream's own tests are not indexed (they are not code the backend ships); their
import lines are read with one regex each, statically, so that a unit's couplings can
name the downstream tests that import the coupled downstream modules or the changed
upstream modules themselves. A test that imports a package is not taken to import its
modules: every test imports ``torch_npu``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from instep.impact.model import Coupling, UpstreamChange
from instep.pyindex.model import module_of
from instep.pyindex.test_imports import imported_names

MAX_TESTS = 20  # suggested tests per unit, upstream ones first


class DownstreamTests:
    """The downstream's test files, by the dotted names they import."""

    def __init__(self, files: Iterable[tuple[str, str]]) -> None:
        self.by_name: dict[str, set[str]] = defaultdict(set)
        self.count = 0
        for path, text in files:
            self.count += 1
            for name in imported_names(text):
                self.by_name[name].add(path)

    def for_unit(self, unit: UpstreamChange, couplings: list[Coupling]) -> list[str]:
        """Tests importing a coupled downstream module or a changed upstream module: the
        ones importing more of them first."""
        if not couplings or not self.by_name:
            return []
        wanted = {module_of(c.downstream.rsplit(":", 1)[0]) for c in couplings}
        for c in couplings:
            path, _, qualname = c.upstream.partition("::")
            module = module_of(path)
            wanted.add(module)
            wanted.add(f"{module}.{qualname.split('.', 1)[0]}")
        hits: dict[str, int] = defaultdict(int)
        for name in wanted:
            for test in self.by_name.get(name, ()):
                hits[test] += 1
        return sorted(hits, key=lambda t: (-hits[t], t))


def suggested_tests(upstream: list[str], downstream: list[str]) -> list[str]:
    """Upstream tests first, then downstream ones, at most :data:`MAX_TESTS`."""
    return list(dict.fromkeys([*upstream, *downstream]))[:MAX_TESTS]
