"""The OpInfo entries a torch ships (``torch.testing._internal``), read statically.

A torch wheel or tree carries ``torch/testing/_internal/common_methods_invocations.py``
and ``opinfo/definitions/*.py``: the ``op_db`` that upstream's OpInfo tests and instep's
L5 suite run. This module reads the entries of those ``op_db`` lists from the source
(``OpInfo('cdist', ...)``, ``UnaryUfuncInfo('nn.functional.relu', aten_name='relu',
...)``): the OpInfo's name, ``variant_test_name``, ``aten_name`` (default: the name, as
``OpInfo.__post_init__`` sets it), ``aten_backward_name`` and any ``torch.ops.aten.X`` its
``op=`` names, so that an ATen operator can be mapped to the OpInfo cases that call it.

It never imports the test modules (they import torch and touch devices) and does not
decide which dtypes an entry supports: the run enumerates the cases on the device.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

CMI = "torch/testing/_internal/common_methods_invocations.py"
DEFINITIONS = "torch/testing/_internal/opinfo/definitions/"
_OP_DB = "op_db"
_ATEN_IN_OP = re.compile(r"torch\.ops\.aten\.([A-Za-z_]\w*)")


@dataclass(frozen=True)
class OpInfoEntry:
    """One entry of ``op_db``: what the L5 suite calls ``name[.variant]``."""

    name: str  # 'nn.functional.softmax'
    variant: str  # '' or 'with_dtype'
    aten_names: tuple[str, ...]  # ATen operators it calls forward ('softmax', ...)
    aten_backward: str | None  # ``aten_backward_name`` when the entry sets it
    path: str
    line: int

    @property
    def full_name(self) -> str:
        """The name the L5 suite selects by (``--instep-opinfo-ops``)."""
        return f"{self.name}.{self.variant}" if self.variant else self.name


@dataclass
class OpInfoIndex:
    """ATen operator name (packet, no overload) -> the ``op_db`` entries that run it."""

    entries: list[OpInfoEntry] = field(default_factory=list)
    forward: dict[str, list[OpInfoEntry]] = field(default_factory=dict)
    backward: dict[str, list[OpInfoEntry]] = field(default_factory=dict)

    def add(self, entry: OpInfoEntry) -> None:
        self.entries.append(entry)
        for name in entry.aten_names:
            self.forward.setdefault(name, []).append(entry)
        if entry.aten_backward:
            self.backward.setdefault(entry.aten_backward, []).append(entry)

    def for_op(self, op: str) -> tuple[list[OpInfoEntry], bool]:
        """The entries exercising ATen operator ``op`` (``sum``, ``add_``,
        ``_cdist_backward``), and whether they need gradients to reach it.

        Forward: the entries whose ATen name is ``op`` (an in-place ``x_`` runs as ``x``
        once functionalised). Backward: the entries naming ``op`` as their
        ``aten_backward_name``, else, for ``[_]x_backward``, the entries of ``x``: the
        derivative autograd records for ``x`` (derivatives.yaml's naming).
        """
        found = self.forward.get(op) or self.forward.get(op.rstrip("_")) or []
        if found:
            return list(found), False
        if op in self.backward:
            return list(self.backward[op]), True
        if op.endswith("_backward"):
            base = op[: -len("_backward")]
            for name in (base, base.lstrip("_")):
                if name in self.forward:
                    return list(self.forward[name]), True
        return [], False


def opinfo_paths(paths: Iterable[str]) -> list[str]:
    """The files of a snapshot that hold ``op_db`` entries."""
    return sorted(
        p
        for p in paths
        if p == CMI or (p.startswith(DEFINITIONS) and p.endswith(".py") and "__init__" not in p)
    )


def read_index(paths: Iterable[str], read: Callable[[str], bytes | None]) -> OpInfoIndex:
    """The ``op_db`` entries of the snapshot's OpInfo files (empty when it has none)."""
    index = OpInfoIndex()
    for path in opinfo_paths(paths):
        data = read(path)
        if data is None:
            continue
        for entry in entries_of(path, data.decode("utf-8", "replace")):
            index.add(entry)
    return index


def entries_of(path: str, text: str) -> list[OpInfoEntry]:
    """The ``*Info(...)`` calls listed in the file's ``op_db`` (``op_db = [...]``,
    ``op_db += [...]``, ``op_db.extend([...])``); Python reference entries (``_refs.*``)
    belong to ``python_ref_db`` and are left out."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    out: list[OpInfoEntry] = []
    for node in tree.body:
        for literal in _op_db_lists(node):
            for item in literal.elts:
                entry = _entry(path, item)
                if entry is not None:
                    out.append(entry)
    return out


def _op_db_lists(node: ast.stmt) -> list[ast.List]:
    value = None
    targets: list[ast.expr] = []
    if isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        targets = [node.target]
    elif isinstance(node, ast.Assign):
        targets = list(node.targets)
    if any(_is_name(t, _OP_DB) for t in targets):
        value = node.value  # type: ignore[union-attr]
    elif (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Attribute)
        and node.value.func.attr == "extend"
        and _is_name(node.value.func.value, _OP_DB)
        and node.value.args
    ):
        value = node.value.args[0]
    return [value] if isinstance(value, ast.List) else []


def _is_name(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _callee(node: ast.Call) -> str:
    func = node.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def _string(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _entry(path: str, node: ast.AST) -> OpInfoEntry | None:
    if not isinstance(node, ast.Call):
        return None
    callee = _callee(node)
    if not callee.endswith("Info") or "Ref" in callee or callee == "DecorateInfo":
        return None
    kw = {k.arg: k.value for k in node.keywords if k.arg}
    name = _string(node.args[0]) if node.args else _string(kw.get("name"))
    if not name or name.startswith(("_refs.", "ops.")):
        return None
    variant = _string(kw.get("variant_test_name")) or ""
    aten = _string(kw.get("aten_name"))
    names: dict[str, None] = {}
    if aten:
        names[aten] = None
    else:  # OpInfo.__post_init__: aten_name defaults to the name
        names[name] = None
        names[name.replace(".", "_")] = None  # linalg.solve -> linalg_solve
        if name.startswith("nn.functional."):
            names[name.rsplit(".", 1)[1]] = None  # nn.functional.relu -> relu
    op = kw.get("op")
    if op is not None:
        names.update(dict.fromkeys(_ATEN_IN_OP.findall(ast.unparse(op))))
    decomp = _string(kw.get("decomp_aten_name"))
    if decomp:
        names[decomp] = None
    return OpInfoEntry(
        name=name,
        variant=variant,
        aten_names=tuple(n for n in names if "." not in n),
        aten_backward=_string(kw.get("aten_backward_name")),
        path=path,
        line=node.lineno,
    )


def op_names(keys: Iterable[str]) -> list[str]:
    """ATen operator names from registration keys (``aten.sum`` -> ``sum``); other
    namespaces (``prims.``, ``quantized_decomposed.``) have no OpInfo."""
    out: dict[str, None] = {}
    for key in keys:
        if key.startswith("aten."):
            out[key.split(".")[1]] = None
    return list(out)


def by_aten_name(entries: Iterable[OpInfoEntry]) -> dict[str, list[OpInfoEntry]]:
    grouped: dict[str, list[OpInfoEntry]] = defaultdict(list)
    for e in entries:
        for n in e.aten_names:
            grouped[n].append(e)
    return dict(grouped)
