"""The join's passes, in the order their couplings are added (the first of two equal
couplings is kept: see ``join/coupling_book.py``).

To add a coupling kind: its :class:`~instep.impact.model.CouplingKind`, a recogniser in
``impact/downstream/`` when the downstream side has to be read for it (composed by
``coupling_index``), a pass here (a :class:`~instep.impact.join.pass_api.JoinPass` whose
``kinds`` names it), its rules in ``verdict_rules.toml`` (with any new fact in
``fact_names.py``), and its line in docs/impact.md's table of coupling kinds
(docs/architecture.md walks through one). ``tests/impact/test_pass_registry.py`` holds the
four together.
"""

from __future__ import annotations

from instep.impact.join.dropped_attributes import InheritedAttributePass
from instep.impact.join.fork_gaps import ForkGapPass
from instep.impact.join.fork_search import ForkPass
from instep.impact.join.hook_names import HookNamePass
from instep.impact.join.kernel_couplings import RegisteredKernelPass
from instep.impact.join.linked_symbol_pass import LinkedSymbolPass
from instep.impact.join.new_calls import NewCallPass
from instep.impact.join.op_couplings import HigherOrderOpPass, OpSchemaPass
from instep.impact.join.pass_api import JoinPass
from instep.impact.join.references import ReferencePass

PASSES: tuple[type[JoinPass], ...] = (
    ReferencePass,
    NewCallPass,
    OpSchemaPass,
    HigherOrderOpPass,
    RegisteredKernelPass,
    HookNamePass,
    InheritedAttributePass,
    ForkPass,
    ForkGapPass,
    LinkedSymbolPass,
)
