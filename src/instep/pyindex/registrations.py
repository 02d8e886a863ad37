"""Recognise registrations in source: which op, backend or device key a call claims.

Used on both sides: upstream ``@register_lowering(aten.expand)`` becomes a
:class:`Registration` keyed ``aten.expand`` on the symbol, and a downstream
``@register_lowering(aten.expand)`` or ``make_fallback(aten.expand)`` claims the same key.
The registrars are data (``data/registrars.toml``). Works on AST nodes only; it never
evaluates anything, so an op held in a variable (``make_fallback(op)``) is not resolved.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from instep.pyindex.model import Registration
from instep.tomlfile import parse_toml

#: Registrars whose call raises when the op already has a decomposition, unless the call
#: passes ``override_decomp=True`` (upstream ``make_fallback``).
FALLBACK_CALLS = frozenset({"make_fallback"})
OVERRIDE_DECOMP = "override_decomp"

# Namespaces whose attribute chains are operator references.
OP_NAMESPACES = frozenset(
    {
        "aten",
        "prims",
        "rngprims",
        "higher_order",
        "quantized",
        "quantized_decomposed",
        "_c10d_functional",
        "c10d_functional",
        "c10d",
        "npu",
        "npu_inductor",
        "inductor",
        "_quantized",
        "onednn",
        "mkldnn",
        "_inductor_test",
        "fsdp",
        "mkl",
        "xpu",
        "mlu",
        "musa",
        "torchvision",
        "symm_mem",
        "streams",
    }
)


@dataclass(frozen=True)
class Registrar:
    name: str
    key: str  # 'op' | 'backend' | 'device_backend' | ...
    source: str  # 'first' | 'name_kw' | 'receiver'
    role: str | None = None  # 'lowering' | 'decomposition' | 'meta' | 'py_impl' | None


@dataclass(frozen=True)
class _Table:
    registrars: dict[str, Registrar]
    item_assignment: frozenset[str]
    roles: dict[str, str]  # registrar name ('table:NAME' for tables) -> role


@lru_cache(maxsize=1)
def _table() -> _Table:
    text = (resources.files("instep.pyindex") / "data" / "registrars.toml").read_text("utf-8")
    return parse_registrars(text, "instep/pyindex/data/registrars.toml")


def parse_registrars(text: str, where: str) -> _Table:
    """The registrar table of a ``registrars.toml`` text (``where`` names it in errors)."""
    raw = parse_toml(text, where)
    regs = {
        name: Registrar(name, spec["key"], spec["from"], spec.get("role"))
        for name, spec in raw.get("registrars", {}).items()
    }
    tables = raw.get("tables", {})
    roles = {name: r.role for name, r in regs.items() if r.role is not None}
    roles.update({f"table:{name}": role for name, role in tables.get("roles", {}).items()})
    return _Table(regs, frozenset(tables.get("item_assignment", [])), roles)


def registrars() -> dict[str, Registrar]:
    return _table().registrars


def item_assignment_tables() -> frozenset[str]:
    return _table().item_assignment


def role_of(registrar: str) -> str | None:
    """What a registration by ``registrar`` (a registrar's name, or ``table:NAME`` for a
    table write) claims for its key, from the ``role`` column of ``registrars.toml``:
    two registrations of one op replace each other only when their roles agree."""
    return _table().roles.get(registrar)


def dotted_name(node: ast.AST) -> str | None:
    """'a.b.c' for Name/Attribute chains, None for anything else."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def op_path(node: ast.AST) -> list[str] | None:
    """The parts of a dotted op reference after ``torch.ops`` / ``ops`` (``aten.x.y`` ->
    ['aten', 'x', 'y']); None for an expression that is not a dotted name."""
    dotted = dotted_name(node)
    if dotted is None:
        return None
    parts = dotted.split(".")
    if parts[:2] == ["torch", "ops"]:
        return parts[2:]
    if parts[0] == "ops" and len(parts) >= 3:
        return parts[1:]
    return parts


def op_key(node: ast.AST) -> tuple[str, str | None] | None:
    """An op reference as (``ns.op``, overload) or None.

    ``aten.expand`` -> ('aten.expand', None); ``torch.ops.aten.expand.default`` ->
    ('aten.expand', 'default'); the string ``"aten::expand.default"`` likewise.
    """
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        text = node.value
        if "::" not in text:
            return None
        ns, _, rest = text.partition("::")
        name, _, overload = rest.partition(".")
        return (f"{ns}.{name}", overload or None) if ns and name else None
    parts = op_path(node)
    if parts is None or len(parts) < 2 or parts[0] not in OP_NAMESPACES:
        return None
    if len(parts) == 2:
        return f"{parts[0]}.{parts[1]}", None
    if len(parts) == 3:
        return f"{parts[0]}.{parts[1]}", parts[2]
    return None


def _op_keys(node: ast.AST) -> list[tuple[str, str | None]]:
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return [k for elt in node.elts if (k := op_key(elt)) is not None]
    key = op_key(node)
    return [key] if key else []


def _string_keys(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return [
            e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)
        ]
    return []


def callee_name(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


def registrations_of_call(
    call: ast.Call, path: str, symbol: str | None = None
) -> list[Registration]:
    """Registrations made by one call or decorator call (``@register_lowering(aten.x)``).

    Also handles the curried form ``register_lowering(aten.x)(fn)``.
    """
    if isinstance(call.func, ast.Call):  # register_lowering(aten.x)(fn)
        inner = registrations_of_call(call.func, path, symbol)
        if inner:
            return inner
    name = callee_name(call)
    if name is None:
        return []
    reg = registrars().get(name)
    if reg is None:
        return []
    line = call.lineno
    if reg.key == "op":
        if reg.source == "receiver":
            target = call.func.value if isinstance(call.func, ast.Attribute) else None
            keys = _op_keys(target) if target is not None else []
        else:
            keys = _op_keys(call.args[0]) if call.args else []
        return [Registration(name, key, ovl, path, line, symbol) for key, ovl in keys]
    # string-keyed registrations: backends, devices, passes
    values: list[str] = []
    if reg.source == "name_kw":
        for kw in call.keywords:
            if kw.arg == "name":
                values = _string_keys(kw.value)
    if not values and call.args:
        values = _string_keys(call.args[0])
    if not values and reg.source == "name_kw" and symbol:
        values = [symbol.rsplit(".", 1)[-1]]  # @register_backend on a def: its name
    return [Registration(name, f"{reg.key}:{v}", None, path, line, symbol) for v in values]


def overrides_decomposition(call: ast.Call) -> bool:
    """``make_fallback(op, override_decomp=True)`` (any value but a false constant)."""
    for kw in call.keywords:
        if kw.arg == OVERRIDE_DECOMP:
            return not (isinstance(kw.value, ast.Constant) and not kw.value.value)
    return False


def registrations_of_decorators(
    decorators: list[ast.expr], path: str, symbol: str
) -> list[Registration]:
    out: list[Registration] = []
    for dec in decorators:
        if isinstance(dec, ast.Call):
            out.extend(registrations_of_call(dec, path, symbol))
        else:
            name = dotted_name(dec)
            reg = registrars().get(name.rsplit(".", 1)[-1]) if name else None
            if reg is not None and reg.source == "name_kw":  # bare @register_backend
                out.append(
                    Registration(
                        reg.name,
                        f"{reg.key}:{symbol.rsplit('.', 1)[-1]}",
                        None,
                        path,
                        dec.lineno,
                        symbol,
                    )
                )
    return out


def registry_entries(target_name: str, value: ast.AST, path: str) -> list[Registration]:
    """Op entries of a module-level table literal, recorded as ``table:NAME`` registrations."""
    elts: list[ast.AST]
    if isinstance(value, (ast.List, ast.Tuple, ast.Set)):
        elts = list(value.elts)
    elif isinstance(value, ast.Dict):
        elts = [k for k in value.keys if k is not None]
    elif isinstance(value, ast.Call) and callee_name(value) in {
        "set",
        "frozenset",
        "dict",
        "OrderedDict",
        "fromkeys",
    }:
        elts = []
        for arg in value.args:
            if isinstance(arg, (ast.List, ast.Tuple, ast.Set)):
                elts.extend(arg.elts)
    else:
        return []
    out = []
    for elt in elts:
        key = op_key(elt)
        if key is not None:
            out.append(
                Registration(
                    f"table:{target_name}",
                    key[0],
                    key[1],
                    path,
                    getattr(elt, "lineno", value.lineno),
                    None,
                )
            )
    return out


def item_assignment(
    target: ast.Subscript, path: str, symbol: str | None = None
) -> list[Registration]:
    """``lowerings[aten.x] = fn`` and the like, for the tables named in the data file."""
    table = dotted_name(target.value)
    if table is None or table.rsplit(".", 1)[-1] not in item_assignment_tables():
        return []
    key = op_key(target.slice)
    if key is None:
        return []
    name = table.rsplit(".", 1)[-1]
    return [Registration(f"table:{name}", key[0], key[1], path, target.lineno, symbol)]
