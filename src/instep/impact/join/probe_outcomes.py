"""Decide the gates that probe upstream (``downstream/source_probes.py``) against the old
and the new upstream sources, the way version gates are decided against version numbers.

- a source probe reads the def or class it names from the side's ``.py`` file (the module
  found from the dotted name, longest prefix first) and tests its needles on that text;
  a signature probe (``"x" in inspect.signature(f).parameters``) tests them on the names of
  the def's parameters (a decorator that rewrites the signature is not followed);
- an extension probe (``hasattr(torch._C, "_x")``) looks the name up in the stubs the
  wheel and the source tree carry (``torch/_C/__init__.pyi``, ``torch/_C/_sub.pyi``, or a
  submodule of that name); a name neither side's stubs bind is left undecided (stubs are
  not complete), as is anything whose file cannot be read.

On the new upstream: gated code that runs is *already adapted* (``gated_for_new``), code
that does not run is the old branch (``old_only``). A probe that decides the same way on
the old and the new upstream, when the oldest supported torch is the old upstream, is
compat debt. Nothing here recognises probes or picks a verdict.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Callable, Iterable

from instep.impact.join.fact_names import Fact
from instep.impact.model import SourceProbe, VersionGate

Side = tuple[frozenset[str], Callable[[str], bytes]]


def stub_reader(snapshot) -> Callable[[str], bytes | None]:
    """Read a file a snapshot does not list (its list holds ``.py`` sources, headers and
    the schema file, not the extension's ``.pyi`` stubs): from the wheel's zip, the git
    tree at the snapshot's commit, or the directory. None when it is not there."""

    def read(path: str) -> bytes | None:
        try:
            return snapshot.read(path)
        except (KeyError, OSError):
            pass
        try:
            if hasattr(snapshot, "_zip"):  # WheelSnapshot
                return snapshot._zip.read(path)
            if hasattr(snapshot, "repo") and hasattr(snapshot, "sha"):  # GitSnapshot
                return snapshot.repo.read_object(f"{snapshot.sha}:{path}")
            if hasattr(snapshot, "root"):  # TreeSnapshot
                return (snapshot.root / path).read_bytes()
        except Exception:  # a stub that cannot be read (any source's error) leaves it open
            return None
        return None

    return read


def _in_range(version: tuple[int, ...] | None, lo, hi) -> bool | None:
    if version is None:
        return None
    return (lo is None or version >= tuple(lo)) and (hi is None or version < tuple(hi))


class ProbeOutcomes:
    """Whether each probe gate's code runs on the old and on the new upstream."""

    def __init__(
        self,
        old: Side,
        new: Side,
        old_version: tuple[int, ...] | None,
        new_version: tuple[int, ...] | None,
        stubs: dict[str, Callable[[str], bytes | None]] | None = None,
    ) -> None:
        self.sides = {"old": old, "new": new}
        self.stubs = stubs or {}
        self.versions = {"old": old_version, "new": new_version}
        self._trees: dict[tuple[str, str], tuple[ast.Module, list[str]] | None] = {}
        self._memo: dict[tuple[SourceProbe, str], bool | None] = {}
        self._stub_memo: dict[tuple[str, str, str], bytes | None] = {}

    # -- reading one side -------------------------------------------------------------

    def _tree(self, side: str, path: str) -> tuple[ast.Module, list[str]] | None:
        key = (side, path)
        if key not in self._trees:
            paths, read = self.sides[side]
            got = None
            try:
                data = read(path) if path in paths else self._stub(side, path)
                if data is not None:
                    text = data.decode("utf-8", "replace")
                    got = (ast.parse(text, path), text.splitlines())
            except (OSError, KeyError, SyntaxError, ValueError):
                got = None
            self._trees[key] = got
        return self._trees[key]

    def _stub(self, side: str, path: str) -> bytes | None:
        if not path.endswith(".pyi") or side not in self.stubs:
            return None
        key = ("stub", side, path)
        if key not in self._stub_memo:
            self._stub_memo[key] = self.stubs[side](path)
        return self._stub_memo[key]

    def _module_file(self, side: str, parts: list[str], suffix: str) -> str | None:
        paths = self.sides[side][0]
        base = "/".join(parts)
        for cand in (f"{base}{suffix}", f"{base}/__init__{suffix}"):
            if cand in paths or self._stub(side, cand) is not None:
                return cand
        return None

    def _source_text(self, side: str, dotted: str) -> str | None:
        parts = dotted.split(".")
        for k in range(len(parts) - 1, 0, -1):
            path = self._module_file(side, parts[:k], ".py")
            if path is None:
                continue
            got = self._tree(side, path)
            if got is None:
                return None
            tree, lines = got
            node: ast.AST = tree
            for name in parts[k:]:
                node = next(
                    (
                        n
                        for n in getattr(node, "body", [])
                        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                        and n.name == name
                    ),
                    None,
                )
                if node is None:
                    return None
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])  # type: ignore[attr-defined]
            return "\n".join(lines[start - 1 : node.end_lineno])  # type: ignore[attr-defined]
        return None

    def _parameter_names(self, side: str, dotted: str) -> frozenset[str] | None:
        """The names ``inspect.signature`` gives for the def ``dotted`` names (``self``
        included: a method is probed through its class, unbound); None when it is no def
        that can be read, a class among them (its signature comes from ``__init__`` or a
        metaclass, ``@dataclass`` may write it)."""
        text = self._source_text(side, dotted)
        if text is None:
            return None
        try:
            node = ast.parse(textwrap.dedent(text)).body[0]
        except (SyntaxError, ValueError, IndexError):
            return None
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return None
        a = node.args
        names = [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
        names += [p.arg for p in (a.vararg, a.kwarg) if p is not None]
        return frozenset(names)

    def _extension_has(self, side: str, dotted: str) -> bool | None:
        parts = dotted.split(".")
        owner, name = parts[:-1], parts[-1]
        if self._module_file(side, [*owner, name], ".pyi") or self._module_file(
            side, [*owner, name], ".py"
        ):
            return True
        stub = self._module_file(side, owner, ".pyi")
        got = self._tree(side, stub) if stub else None
        if got is None:
            return None
        for node in got[0].body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found = node.name == name
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                found = any(isinstance(t, ast.Name) and t.id == name for t in targets)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                found = any((a.asname or a.name.split(".")[0]) == name for a in node.names)
            else:
                found = False
            if found:
                return True
        return False

    def star_sources(self, side: str, module: str) -> list[str]:
        """Modules that ``module``'s source star-imports at module level, in any branch of
        an ``if``/``try`` too (``from torch._C import *`` sits in an ``if``/``else`` of
        ``torch/__init__.py``), absolute; [] when its file cannot be read."""
        path = self._module_file(side, module.split("."), ".py")
        got = self._tree(side, path) if path else None
        if got is None:
            return []
        package = module if path.endswith("__init__.py") else module.rpartition(".")[0]  # type: ignore[union-attr]
        out: list[str] = []
        todo = list(got[0].body)
        while todo:
            node = todo.pop(0)
            if isinstance(node, (ast.If, ast.Try)):
                todo.extend([*node.body, *node.orelse, *getattr(node, "finalbody", ())])
                todo.extend(s for h in getattr(node, "handlers", ()) for s in h.body)
            elif isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                prefix = ".".join(base) if node.level else ""
                name = node.module or ""
                source = f"{prefix}.{name}".strip(".") if prefix else name
                if source not in out:
                    out.append(source)
        return out

    def stub_class(self, side: str, module: str, name: str) -> tuple[str, ast.ClassDef] | None:
        """(stub path, class node) of ``class name`` in ``module``'s ``.pyi`` stubs."""
        stub = self._module_file(side, module.split("."), ".pyi")
        got = self._tree(side, stub) if stub else None
        if got is None:
            return None
        for node in got[0].body:
            if isinstance(node, ast.ClassDef) and node.name == name:
                return stub, node  # type: ignore[return-value]
        return None

    # -- deciding ---------------------------------------------------------------------

    def holds(self, probe: SourceProbe, side: str) -> bool | None:
        """Does the probe (without its version part) hold on that side's upstream?"""
        key = (probe, side)
        if key not in self._memo:
            if probe.needles:
                text = (
                    self._source_text(side, probe.target)
                    if probe.reads == "source"
                    else self._parameter_names(side, probe.target)
                )
                if text is None:
                    result = None
                else:
                    hits = [n in text for n in probe.needles]
                    result = all(hits) if probe.all_of else any(hits)
            else:
                result = self._extension_has(side, probe.target)
                if result is False and not any(
                    self._extension_has(s, probe.target) for s in ("old", "new") if s != side
                ):
                    result = None  # in neither side's stubs: the stubs may be incomplete
            self._memo[key] = result
        return self._memo[key]

    def runs(self, gate: VersionGate, side: str) -> bool | None:
        """Does the gated code run on that side? None when it cannot be told."""
        p = gate.probe
        if p is None or p.join == "?":
            return None
        held = self.holds(p, side)
        probe_part = None if held is None else held == p.runs_when
        if not p.join:
            return probe_part
        v = _in_range(self.versions[side], p.min_version, p.max_version)
        if p.join == "and":
            if v is False or probe_part is False:
                return False
            return True if v and probe_part else None
        if v is True or probe_part is True:
            return True
        return False if v is False and probe_part is False else None

    def facts(self, gate: VersionGate) -> frozenset[str]:
        """``gated_for_new`` / ``old_only`` for a reference behind the gate."""
        on_new = self.runs(gate, "new")
        if on_new is None:
            return frozenset()
        return frozenset({Fact.GATED_FOR_NEW if on_new else Fact.OLD_ONLY})

    def debt(
        self, gates: Iterable[VersionGate], floor: tuple[int, ...] | None
    ) -> list[tuple[VersionGate, str]]:
        """Probe gates that decide the same way on the old and the new upstream, when the
        oldest supported torch is the old upstream (older ones were not read)."""
        old_v = self.versions["old"]
        if floor is None or old_v is None or tuple(floor) < tuple(old_v[: len(floor)]):
            return []
        out = []
        for g in gates:
            if g.probe is None or g.note == "else":
                continue  # a gate and its else branch share a place: report the gate
            old, new = self.runs(g, "old"), self.runs(g, "new")
            if old is None or old != new:
                continue
            what = "runs" if new else "never runs"
            out.append(
                (
                    g,
                    f"{g.path}:{g.line}: `{g.condition}` decides the same on torch "
                    f"{_fmt(old_v)} and {_fmt(self.versions['new'])} (the gated code {what}; "
                    f"probed `{g.probe.target}`): drop the probe and "
                    + ("keep only the gated code" if new else "remove the gated code"),
                )
            )
        return out


def _fmt(v: tuple[int, ...] | None) -> str:
    return ".".join(map(str, v)) if v else "?"
