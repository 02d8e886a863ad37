"""Match the backend's registered ATen kernels (:mod:`instep.impact.downstream.
registered_kernels`: backend yaml entries, ``m.impl``, autocast ``KERNEL_*`` lines, C shim
declarations, C++ op lists) to upstream changes of ``native_functions.yaml``
(:mod:`instep.impact.upstream.op_schemas`), as REGISTERED_KERNEL couplings: the join
pass :class:`RegisteredKernelPass`, which reads the C++ half before the indexing.

A record couples to a change of the overload it names, and only that overload: a bare
name is the default overload (``abs`` is ``aten::abs``), as torchgen's backend codegen and
the dispatcher read it, so a change of ``abs.out`` leaves an ``abs`` entry alone. A C
shim couples through its name (``aoti_torch_npu_add_Tensor`` wraps ``add.Tensor``, as
torchgen's ``gen_aoti_c_shim`` names it), an op list only to a removal (a name does not
depend on the arguments). A ``custom`` entry defines the backend's own op: it couples only
when its name is an upstream overload's (then the detail says so).

The facts the ``kernel.*`` rules of ``verdict_rules.toml`` read are computed here, in one
place, from the record and the two parsed schemas
(:func:`~instep.impact.upstream.schema_comparison.compare_schemas`):

* the role: ``from_yaml`` / ``from_cpp`` (a kernel named in a backend yaml / by
  ``m.impl``), ``custom``, ``autocast`` (``autocast_signature`` when the C++ signature is
  written out), ``c_shim``, ``op_list``; ``boxed_kernel`` (a fallthrough or boxed
  ``m.impl``: it reads its arguments from the stack by the schema);
* what changed, as a kernel sees it: ``kernel_signature_breaks`` (an argument removed,
  added with or without a default, reordered, of another C++ type or mutability, or the
  returns of another count or type: the kernel's C++ signature has one parameter per
  schema argument, defaults exist only for callers), ``argument_renamed``,
  ``schema_behaviour`` (a default value, an alias annotation, int <-> SymInt);
* ``copy_matches_new``: the yaml's ``func:`` copy of the schema already equals the new
  upstream's.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from instep.impact.downstream.kernel_records import (
    UPSTREAM_NAMESPACE,
    KernelIndex,
    KernelSource,
    RegisteredKernel,
)
from instep.impact.downstream.registered_kernels import (
    NATIVE_SOURCE_SUFFIXES,
    read_registered_kernels,
)
from instep.impact.join.change_index import ChangeIndex
from instep.impact.join.fact_names import Fact
from instep.impact.join.pass_api import Findings, Found, JoinInputs, JoinPass, PassSources
from instep.impact.model import (
    ChangeKind,
    CouplingKind,
    KernelRole,
    Reference,
    SymbolChange,
    UpstreamChange,
)
from instep.impact.upstream.op_schemas import NAMESPACE, is_schema_file, parse_schema, schema_of
from instep.impact.upstream.schema_comparison import SchemaDifferenceKind, compare_schemas

K = SchemaDifferenceKind
# differences after which a kernel compiled for the old schema no longer matches the new
BREAKS_KERNEL = frozenset(
    {
        K.ARGUMENT_REMOVED,
        K.ARGUMENT_ADDED,
        K.ARGUMENT_ADDED_WITH_DEFAULT,
        K.ARGUMENTS_REORDERED,
        K.TYPE_CHANGED,
        K.MUTABILITY_CHANGED,
        K.RETURNS_CHANGED,
    }
)
# differences that keep the signature but change what the kernel receives or must return
BEHAVIOUR = frozenset({K.DEFAULT_CHANGED, K.ALIAS_CHANGED, K.RETURN_ALIAS_CHANGED, K.TYPE_SYMINT})
_ROLE_FACT = {
    KernelRole.CUSTOM: Fact.CUSTOM,
    KernelRole.AUTOCAST: Fact.AUTOCAST,
    KernelRole.C_SHIM: Fact.C_SHIM,
    KernelRole.OP_LIST: Fact.OP_LIST,
}

Hit = tuple[int, SymbolChange]


def kernel_facts(
    change: SymbolChange, kernel: RegisteredKernel
) -> tuple[frozenset[str], list[str]]:
    """The facts of one record meeting one schema change, and the differences (as text)
    the rationale quotes."""
    facts: set[str] = set()
    if kernel.role is KernelRole.KERNEL:
        facts.add(Fact.FROM_YAML if kernel.source is KernelSource.YAML else Fact.FROM_CPP)
    else:
        facts.add(_ROLE_FACT[kernel.role])
    if kernel.boxed:
        facts.add(Fact.BOXED_KERNEL)
    if kernel.explicit_signature:
        facts.add(Fact.AUTOCAST_SIGNATURE)
    old = schema_of(change.old) if change.old is not None else None
    new = schema_of(change.new) if change.new is not None else None
    if old is None or new is None:
        return frozenset(facts), []
    differences = compare_schemas(old, new)
    kinds = {d.kind for d in differences}
    if kinds & BREAKS_KERNEL:
        facts.add(Fact.KERNEL_SIGNATURE_BREAKS)
    if K.ARGUMENT_RENAMED in kinds:
        facts.add(Fact.ARGUMENT_RENAMED)
    if kinds & BEHAVIOUR:
        facts.add(Fact.SCHEMA_BEHAVIOUR)
    why = [d.text() for d in differences]
    copy = _copy(kernel)
    if copy is not None:
        if not compare_schemas(copy, new):
            facts.add(Fact.COPY_MATCHES_NEW)
            why.append("the backend's func: copy already has the new schema")
        elif compare_schemas(copy, old):
            why.append("the backend's func: copy differs from the old schema too")
        else:
            why.append("the backend's func: copy holds the old schema")
    return frozenset(facts), why


def _copy(kernel: RegisteredKernel):
    """The schema a backend yaml entry writes out (``func: x(...) -> y``), parsed."""
    if kernel.source is not KernelSource.YAML or not kernel.schema:
        return None
    try:
        return parse_schema(kernel.schema)
    except ValueError:
        return None


class RegisteredKernelPass(JoinPass):
    """registered_kernel couplings (and c_shim ones from the backend's shim headers): the
    backend's C++ half, read before the indexing (:meth:`prepare`: nothing of it depends
    on the diff or the Python index), matched to the schema changes of the units."""

    name = "registered kernels"
    kinds = frozenset({CouplingKind.REGISTERED_KERNEL, CouplingKind.C_SHIM})
    early = True
    lists = NATIVE_SOURCE_SUFFIXES

    def prepare(self, sources: PassSources) -> KernelIndex:
        down = sources.snapshots.down
        return read_registered_kernels(down.paths(), down.read, skip=sources.excluded)

    def run(self, inputs: JoinInputs, earlier: Mapping[str, Findings]) -> Findings:
        index: KernelIndex = inputs.prepared[self.name]
        if not (index.backend_yamls or index.cpp_files_read):
            # nothing read: the scope says "registered kernels not read"
            return Findings(scope={"registered_kernels": None})
        kernels = KernelCouplings(inputs.units)
        found = kernels.match(index.kernels)
        shims = kernels.match_shims(index.shim_references, inputs.changes)
        stats = index.stats()
        return Findings(
            [*found, *shims],
            stats={
                **stats,
                "registered_kernel_couplings": _distinct(found),
                "c_shim_header_couplings": _distinct(shims),
            },
            scope={"registered_kernels": stats["registered_kernels"]},
        )


def _distinct(found: list[Found]) -> int:
    """How many couplings the book keeps of ``found`` (one per kind, change and place: no
    other pass finds these kinds at a yaml or C++ place)."""
    return len({(f.kind, f.change.ref, f.ref.path, f.ref.line) for f in found})


class KernelCouplings:
    """The schema changes of a run indexed by overload; :meth:`match` finds the couplings."""

    def __init__(self, units: list[UpstreamChange]) -> None:
        self.by_name: dict[str, list[Hit]] = defaultdict(list)
        self.by_shim: dict[str, list[Hit]] = defaultdict(list)
        for i, u in enumerate(units):
            for c in u.changes:
                if not (is_schema_file(c.path) and c.qualname.startswith(f"{NAMESPACE}::")):
                    continue
                names = {c.qualname.split("::", 1)[1]}
                if c.renamed_from:
                    names.add(c.renamed_from.split("::")[-1])
                for name in names:
                    self.by_name[name].append((i, c))
                    self.by_shim[name.replace(".", "_")].append((i, c))

    def match(self, kernels: list[RegisteredKernel]) -> list[Found]:
        """A coupling for every record naming a changed overload."""
        out: list[Found] = []
        if not self.by_name:
            return out
        for k in kernels:
            if k.role is KernelRole.C_SHIM:
                hits = self.by_shim.get(k.name, ())
            elif k.namespace in (UPSTREAM_NAMESPACE, ""):
                hits = self.by_name.get(k.name, ())
            else:
                continue  # a registration in another namespace (npu::x) meets no aten change
            for i, c in hits:
                if k.role is KernelRole.OP_LIST and c.kind not in (
                    ChangeKind.REMOVED,
                    ChangeKind.RENAMED,
                ):
                    continue
                out.append(self.found(i, c, k))
        return out

    @staticmethod
    def match_shims(refs: list[Reference], changes: ChangeIndex) -> list[Found]:
        """The C_SHIM references of the backend's shim headers against upstream's shim
        header declarations of the same op (any device: the backend's shim is generated
        from the same schema by the same rules): only a changed parameter list couples.
        Upstream adding or dropping another device's shim of the op says nothing of the
        backend's own (a removed op is a schema removal, coupled by :meth:`match`)."""
        return [
            Found(i, c, r, detail=f"{r.detail}; upstream shim {c.qualname}")
            for r in refs
            for i, c in changes.by_key.get(r.target, ())
            if ChangeKind.SIGNATURE in c.aspects
        ]

    @staticmethod
    def found(i: int, c: SymbolChange, k: RegisteredKernel) -> Found:
        facts, why = kernel_facts(c, k)
        ref = Reference(
            CouplingKind.REGISTERED_KERNEL,
            f"kernel:{NAMESPACE}.{k.name}",
            k.path,
            k.line,
            k.snippet,
            detail=k.describe(),
            role=k.role,
        )
        if c.kind in (ChangeKind.REMOVED, ChangeKind.RENAMED) or c.new is None:
            sym, side = c.old, "old"
        else:
            sym, side = c.new, "new"
        line = sym.line if sym is not None else 0
        detail = f"{k.describe()}; {c.qualname} at native_functions.yaml:{line} ({side})"
        if k.role is KernelRole.CUSTOM:
            detail += "; the backend defines its own op under this upstream overload's name"
        if why:
            detail += ": " + "; ".join(why)
        return Found(
            i,
            c,
            ref,
            CouplingKind.REGISTERED_KERNEL,
            chain=[c.ref, f"{k.describe()} at {k.at}"],
            detail=detail,
            extra=facts,
        )
