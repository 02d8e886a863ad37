"""Which tests to run for a unit: for each changed upstream symbol that a Test or Shim
coupling reaches, the most specific test that runs it on the backend's device.

The rules, most specific first (docs/impact.md, "Suggested tests"):

- ``op.registered``: the changed def is itself registered for an ATen operator (a
  lowering, a decomposition, a meta or fake impl): the OpInfo cases of that operator,
  run by instep's L5 suite (``opinfo:<name>``);
- ``op.schema``: an operator's schema changed in ``native_functions.yaml``: its OpInfo
  cases (with gradients for a ``*_backward`` operator: ``opinfo:cdist:grad``);
- ``op.reaches``: the new upstream's lowerings, decompositions or meta impls of some
  operators call the changed def (``upstream/op_reach.py``, the chain as evidence): the
  OpInfo cases of the nearest of them whose route may run on the backend (not an operator
  it runs eagerly, not a route whose call lies only under a branch the backend never takes:
  ``route_conditions.py``);
- ``stage.case``: a member of a scheduler, kernel-codegen, wrapper or autotuner class that
  every compile of a stage runs (``data/builtin_cases.toml``): the smallest built-in case
  that runs it (``instep:smoke/test_l1_smoke.py::test_smoke[pointwise]``);
- ``commit.touched`` / ``upstream.named_after``: upstream test functions the commit
  changed (commit mode) and upstream test files named after the changed files (trees);
- ``downstream.imports``: the downstream's own tests importing a coupled module.

The OpInfo names come from the new upstream's ``op_db`` read statically
(``upstream/opinfo_index.py``). The downstream's own tests are not indexed (they are not
code the backend ships); their import lines are read with one regex each. A test that
imports a package is not taken to import its modules: every test imports ``torch_npu``.
Nothing here runs a test: ``instep run --impact`` does (``suites/impact_selection.py``).
"""

from __future__ import annotations

import shlex
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

from instep.impact.join.route_conditions import RouteConditions
from instep.impact.model import (
    Action,
    Coupling,
    CouplingKind,
    Reference,
    SuggestedTest,
    SuggestionKind,
    SymbolChange,
    UpstreamChange,
)
from instep.impact.upstream.op_reach import OpReach, OpRoute
from instep.impact.upstream.op_schemas import is_schema_file
from instep.impact.upstream.opinfo_index import OpInfoIndex
from instep.pyindex.model import SymbolKind, Vocab, module_of
from instep.pyindex.registrations import role_of
from instep.pyindex.symbols import index_text
from instep.pyindex.test_imports import imported_names
from instep.tomlfile import parse_toml

MAX_TESTS = 20  # suggested tests per unit, the most specific first
MAX_OPINFO = 4  # OpInfo entries per changed symbol (the nearest operators)
OPINFO_PREFIX = "opinfo:"
GRAD_SUFFIX = ":grad"
_CASES = "instep/impact/data/builtin_cases.toml"


@dataclass(frozen=True)
class BuiltinCase:
    symbols: tuple[str, ...]  # 'path::Class.' prefixes
    test: str
    why: str


@lru_cache(maxsize=1)
def builtin_cases() -> tuple[BuiltinCase, ...]:
    """The shipped table of stage cases (``data/builtin_cases.toml``)."""
    text = (resources.files("instep.impact") / "data" / "builtin_cases.toml").read_text("utf-8")
    raw = parse_toml(text, _CASES)
    return tuple(
        BuiltinCase(tuple(c["symbols"]), str(c["test"]), str(c["why"])) for c in raw.get("case", [])
    )


def opinfo_test(name: str, grad: bool = False) -> str:
    return f"{OPINFO_PREFIX}{name}{GRAD_SUFFIX if grad else ''}"


def parse_opinfo_test(test: str) -> tuple[str, bool] | None:
    """``opinfo:cdist:grad`` -> ('cdist', True); None for any other test."""
    if not test.startswith(OPINFO_PREFIX):
        return None
    rest = test[len(OPINFO_PREFIX) :]
    grad = rest.endswith(GRAD_SUFFIX)
    return (rest[: -len(GRAD_SUFFIX)] if grad else rest), grad


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


def touched_test_functions(path: str, old: bytes | None, new: bytes | None) -> list[str]:
    """The test functions and methods a commit added or changed in one test file, as node
    ids (``path::Class::test_x``; a function deleted is not run)."""
    if new is None:
        return []
    after = index_text(path, new.decode("utf-8", "replace"))
    before = index_text(path, old.decode("utf-8", "replace")) if old is not None else None
    out = []
    for qualname, sym in after.symbols.items():
        if sym.kind not in (SymbolKind.FUNCTION, SymbolKind.METHOD):
            continue
        if not qualname.rsplit(".", 1)[-1].startswith("test"):
            continue
        prev = before.symbols.get(qualname) if before is not None else None
        if prev is None or (prev.body_hash, prev.signature) != (sym.body_hash, sym.signature):
            out.append(f"{path}::" + qualname.replace(".", "::"))
    return out


class NoTest(Vocab):
    """Why a changed symbol that a Test or Shim coupling reaches gets no operator or stage
    test (:meth:`TestSuggester.why_none`), for a reader of a row without a command."""

    EAGER = "eager"  # every operator reaching it runs eagerly on the backend (a fallback)
    BRANCH = "branch"  # its operators reach it only under a branch the backend never takes
    NO_OPINFO = "no_opinfo"  # operators reach it, and none has an OpInfo
    BROAD = "broad"  # so many operators reach it that none tests it in particular
    NO_ROUTE = "no_route"  # no operator and no compile stage's built-in case reaches it
    NO_INDEX = "no_index"  # the new upstream's OpInfos were not read


@dataclass(frozen=True)
class DownstreamOps:
    """What the downstream does with ATen operators (packet names), from its op
    references: the ones it runs eagerly (``make_fallback(aten.x)``, a table whose name
    says fallback, such as torch_npu's ``TORCH_NATIVE_FALLBACK_LIST``) and the ones it
    lowers itself (``register_lowering(aten.x)`` and other lowering registrars). The
    packet or a functional overload counts; an ``out=`` overload does not (a compiled
    graph is functional: torch_npu lists ``aten.cumsum.out`` but lowers ``cumsum``)."""

    fallback: frozenset[str] = frozenset()
    lowered: frozenset[str] = frozenset()

    @classmethod
    def from_references(cls, refs: Iterable[Reference]) -> DownstreamOps:
        fallback: set[str] = set()
        lowered: set[str] = set()
        for r in refs:
            if r.kind is not CouplingKind.OP_SCHEMA or not r.target.startswith("schema:aten."):
                continue
            parts = r.target.split(".")
            op, overload = parts[1], (parts[2] if len(parts) > 2 else "")
            if overload == "out" or overload.endswith("_out"):
                continue  # an out= overload: a compiled graph calls the functional one
            role = r.detail or ""
            if "fallback" in role.lower():
                fallback.add(op)
            elif role_of(role) == "lowering":
                lowered.add(op)
        return cls(frozenset(fallback), frozenset(lowered - fallback))


class TestSuggester:
    """The suggested tests of each unit, from the new upstream's operators and OpInfos."""

    def __init__(
        self,
        opinfos: OpInfoIndex | None,
        reach: OpReach | None,
        downstream: DownstreamTests | None = None,
        cases: tuple[BuiltinCase, ...] | None = None,
        ops: DownstreamOps | None = None,
        conditions: RouteConditions | None = None,
    ) -> None:
        self.opinfos = opinfos
        self.reach = reach
        self.downstream = downstream
        self.cases = builtin_cases() if cases is None else cases
        self.ops = ops or DownstreamOps()
        self.conditions = conditions  # routes that never reach their change on the backend
        self.left_out: dict[str, str] = {}  # route text -> why it never runs on the backend
        self._memo: dict[str, list[SuggestedTest]] = {}
        self._why: dict[str, NoTest] = {}  # symbol -> why it has no test (for_change empty)
        self._reached: set[str] = set()  # symbols some operator's route reaches

    def for_unit(
        self,
        unit: UpstreamChange,
        couplings: list[Coupling],
        upstream_tests: Iterable[SuggestedTest] = (),
    ) -> list[SuggestedTest]:
        """The unit's tests: per changed symbol a Test or Shim coupling reaches, the
        operator and stage tests (one record per test and symbol, each with its own
        evidence); then ``upstream_tests``; then the downstream's own (for the unit)."""
        live = _live(couplings)
        changes = {c.ref: c for c in unit.changes}
        out: dict[tuple[str, tuple[str, ...]], SuggestedTest] = {}
        for ref in dict.fromkeys(c.upstream for c in live):
            change = changes.get(ref)
            if change is None:
                continue
            for test in self.for_change(change):
                out.setdefault((test.test, test.symbols), test)
        for test in upstream_tests:
            out.setdefault((test.test, test.symbols), test)
        if self.downstream is not None and live:
            for path in self.downstream.for_unit(unit, live)[:MAX_TESTS]:
                test = SuggestedTest(
                    path,
                    SuggestionKind.DOWNSTREAM,
                    "downstream.imports",
                    (),
                    "imports a coupled downstream module or the changed upstream module",
                )
                out.setdefault((test.test, test.symbols), test)
        return list(out.values())

    def untested(self, unit: UpstreamChange, couplings: list[Coupling]) -> dict[str, NoTest]:
        """The changed symbols a Test or Shim coupling of ``unit`` reaches that get no
        operator or stage test, with why (:meth:`why_none`)."""
        changes = {c.ref: c for c in unit.changes}
        out: dict[str, NoTest] = {}
        for ref in dict.fromkeys(c.upstream for c in _live(couplings)):
            change = changes.get(ref)
            why = self.why_none(change) if change is not None else None
            if why is not None:
                out[ref] = why
        return out

    def for_change(self, change: SymbolChange) -> list[SuggestedTest]:
        """The operator or stage tests of one changed upstream symbol (memoised)."""
        ref = change.ref
        if ref not in self._memo:
            self._memo[ref] = self._operator_tests(change) or self._stage_case(change)
        return self._memo[ref]

    def why_none(self, change: SymbolChange) -> NoTest | None:
        """Why :meth:`for_change` gives ``change`` no test; None when it gives one."""
        if self.for_change(change):
            return None
        return self._why.get(change.ref, NoTest.NO_ROUTE)

    def _operator_tests(self, change: SymbolChange) -> list[SuggestedTest]:
        ref = change.ref
        if self.opinfos is None:
            self._why[ref] = NoTest.NO_INDEX
            return []
        if is_schema_file(change.path):
            op = change.qualname.removeprefix("aten::").split(".")[0]
            self._why[ref] = NoTest.NO_OPINFO
            return self._opinfo_tests(
                change,
                [(op, "op.schema", f"the schema of {change.qualname} changed")],
            )
        if self.reach is None or change.symbol_kind not in (
            SymbolKind.FUNCTION,
            SymbolKind.METHOD,
            SymbolKind.CLASS,
        ):
            return []
        reach = self.reach.reach(change.path, change.qualname)
        if reach.broad:
            self._why[ref] = NoTest.BROAD
            return []
        if reach.routes:
            self._reached.add(ref)  # some operator reaches it: no stage case
        skipped: dict[NoTest, int] = {}
        tests = self._opinfo_tests(change, self._routes_that_run(reach.routes, skipped))
        if not tests and reach.routes:
            # the routes that run have no OpInfo (counted as NO_OPINFO), or none runs
            order = (NoTest.NO_OPINFO, NoTest.EAGER, NoTest.BRANCH)
            self._why[ref] = next((k for k in order if skipped.get(k)), NoTest.NO_ROUTE)
        return tests

    def _routes_that_run(
        self, routes: Iterable[OpRoute], skipped: dict[NoTest, int] | None = None
    ) -> Iterator[tuple[str, str, str]]:
        """(operator, rule, evidence) of the routes that may run the change on the
        backend, nearest first; read one at a time, as far as the tests need them. Left
        out (counted in ``skipped`` by why): an operator the backend runs eagerly, and a
        route with a call only under a branch it never takes there (``route_conditions``);
        a route given out counts as ``NO_OPINFO`` until an OpInfo of it is found."""
        skipped = {} if skipped is None else skipped
        for route in sorted(routes, key=self._nearest):
            if not route.op.startswith("aten."):
                continue
            op = route.op.split(".")[1]
            if route.depth and op in self.ops.fallback:
                skipped[NoTest.EAGER] = skipped.get(NoTest.EAGER, 0) + 1
                continue  # the backend runs it eagerly: upstream's route never runs there
            text = _route_text(route)
            if route.depth and self.conditions is not None:
                why_not = self.conditions.unmet(route)
                if why_not is not None:
                    self.left_out[text] = why_not
                    skipped[NoTest.BRANCH] = skipped.get(NoTest.BRANCH, 0) + 1
                    continue
            skipped[NoTest.NO_OPINFO] = skipped.get(NoTest.NO_OPINFO, 0) + 1  # until one has
            yield op, "op.registered" if route.depth == 0 else "op.reaches", text

    def _nearest(self, route: OpRoute) -> tuple:
        """Fewest calls first; then an operator the downstream does not lower itself (its
        own lowering may not take upstream's route); then one whose registered function
        is named after it (``sum_`` for ``aten.sum``: the operator's own lowering, whose
        path is the operator's; ``tuned_mm`` takes a reduction only on one of its paths);
        then the shorter, plainer name."""
        op = route.op.split(".")[1]
        func = route.chain[0].rpartition("::")[2].rsplit(".", 1)[-1].strip("_")
        return (route.depth, op in self.ops.lowered, func != op, len(op), op)

    def _opinfo_tests(
        self, change: SymbolChange, ops: Iterable[tuple[str, str, str]]
    ) -> list[SuggestedTest]:
        assert self.opinfos is not None
        out: dict[str, SuggestedTest] = {}
        for op, rule, why in ops:
            entries, grad = self.opinfos.for_op(op)
            for entry in entries:
                test = opinfo_test(entry.full_name, grad)
                if test in out:
                    continue
                via = " (its backward)" if grad else ""
                out[test] = SuggestedTest(
                    test,
                    SuggestionKind.OPINFO,
                    rule,
                    (change.ref,),
                    f"{why}; OpInfo `{entry.full_name}` calls aten.{op}{via}"
                    f" ({entry.path}:{entry.line})",
                )
                if len(out) >= MAX_OPINFO:
                    return list(out.values())
        return list(out.values())

    def _stage_case(self, change: SymbolChange) -> list[SuggestedTest]:
        """The stage's built-in case, for a member no operator reaches in particular: one
        that operators reach, but whose OpInfos the backend does not lower (it runs them
        eagerly) or that have none, gets no case (the stage's case would not run it)."""
        if change.symbol_kind is not SymbolKind.METHOD or change.ref in self._reached:
            return []
        for case in self.cases:
            if any(change.ref.startswith(prefix) for prefix in case.symbols):
                test = SuggestedTest(
                    case.test, SuggestionKind.BUILTIN, "stage.case", (change.ref,), case.why
                )
                return [test]
        return []


def _live(couplings: list[Coupling]) -> list[Coupling]:
    """The couplings that ask for a test: Test or Shim, not already adapted."""
    return [
        c for c in couplings if c.action in (Action.TEST, Action.SHIM) and not c.already_adapted
    ]


def unique_tests(tests: Iterable[SuggestedTest], limit: int = MAX_TESTS) -> list[str]:
    """The distinct ``test`` strings of ``tests`` in order, at most ``limit``."""
    return list(dict.fromkeys(t.test for t in tests))[:limit]


def _route_text(route: OpRoute) -> str:
    """How the operator reaches the change: ``aten.sum's lowering `sum_`
    (torch/_inductor/lowering.py) calls `make_reduction` -> `Reduction.create```."""
    names = [ref.partition("::")[2] for ref in route.chain]
    role = route.role or "registered function"
    if len(names) == 1:
        return f"the changed `{names[0]}` is {route.op}'s {role}"
    where = route.chain[0].partition("::")[0]
    return f"{route.op}'s {role} `{names[0]}` ({where}) calls " + " -> ".join(
        f"`{n}`" for n in names[1:]
    )


def upstream_test_records(
    unit: UpstreamChange,
    upstream_test_paths: list[str],
    read_at: Callable[[str, str], bytes | None],
) -> list[SuggestedTest]:
    """The upstream tests of a unit. Commit mode: the test functions the commit added or
    changed (``read_at(commit, path)`` gives a file at a commit), the test files it
    changed where no test function did; a patch: the test files it changed; a source
    tree: the test files named after a changed file (``upstream_test_paths``)."""
    out: list[SuggestedTest] = []
    touched: set[str] = set()
    if unit.upstream_tests and unit.commit:
        functions: list[str] = []
        for path in unit.upstream_tests:
            new = read_at(unit.commit, path)
            old = read_at(f"{unit.commit}^", path) if new is not None else None
            functions += touched_test_functions(path, old, new)
        touched = {f.partition("::")[0] for f in functions}
        out += upstream_file_tests(
            functions, "commit.touched", "a test function this commit added or changed"
        )
        out += upstream_file_tests(
            [p for p in unit.upstream_tests if p not in touched],
            "commit.touched_file",
            "a test file this commit changed (no test function in it changed)",
        )
    elif unit.upstream_tests:
        out += upstream_file_tests(
            unit.upstream_tests, "commit.touched_file", "a test file this patch changed"
        )
    stems = {Path(p).stem for p in unit.files}
    named = [
        p
        for p in upstream_test_paths
        if Path(p).stem.removeprefix("test_") in stems
        and p not in touched
        and p not in unit.upstream_tests
    ]
    why = "an upstream test file named after a changed file"
    return out + upstream_file_tests(sorted(named), "upstream.named_after", why)


def upstream_file_tests(
    paths: Iterable[str], rule: str, why: str, symbols: tuple[str, ...] = ()
) -> list[SuggestedTest]:
    """Upstream test files (or node ids) as suggestions of one rule."""
    return [SuggestedTest(p, SuggestionKind.UPSTREAM, rule, symbols, why) for p in paths]


L5_TIER = "L5"  # the tier of instep's OpInfo suite


@dataclass(frozen=True)
class RunCommand:
    """An ``instep run`` command for some suggested tests, and where to run it."""

    command: str
    where: str  # 'device' (any directory), 'upstream' or 'downstream' checkout
    tests: tuple[str, ...]


def run_commands(tests: Iterable[SuggestedTest], limit: int = 0) -> list[RunCommand]:
    """The commands that run ``tests``: instep's L5 tier narrowed to the OpInfo operators,
    the shipped cases by node id, upstream and downstream tests in their checkouts (each
    with at most ``limit`` tests when ``limit`` > 0)."""
    groups: dict[str, list[str]] = {"opinfo": [], "builtin": [], "upstream": [], "downstream": []}
    for t in tests:
        group = groups[str(t.kind)]
        if t.test not in group:
            group.append(t.test)
    out = []
    ops = groups["opinfo"][:limit] if limit else groups["opinfo"]
    if ops:
        names = ",".join(t[len(OPINFO_PREFIX) :] for t in ops)
        out.append(
            RunCommand(
                f"instep run --tier {L5_TIER} --pytest-arg=--instep-opinfo-ops={names}",
                "device",
                tuple(ops),
            )
        )
    for kind, where in (
        ("builtin", "device"),
        ("upstream", "upstream"),
        ("downstream", "downstream"),
    ):
        chosen = groups[kind][:limit] if limit else groups[kind]
        if chosen:
            out.append(
                RunCommand(
                    "instep run " + " ".join(shlex.quote(t) for t in chosen), where, tuple(chosen)
                )
            )
    return out
