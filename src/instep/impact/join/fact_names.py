"""Every fact a verdict rule can read, and the modules that compute it.

A fact is a word a coupling carries when something about it holds (``guarded``: the place
is behind a ``hasattr`` probe or an import fallback); ``verdict_rules.toml`` tests facts,
:mod:`~instep.impact.join.verdicts` refuses at load a rule that names a fact not listed
here. Each :class:`Fact` names its producers (paths under ``instep/impact/``): the modules
whose code adds it, which ``tests/impact/test_fact_names.py`` checks, together with the
table of facts in docs/impact.md ("Facts") that says what each one means. A fact is a
``str`` (a :class:`~instep.pyindex.model.Vocab`): sets of facts mix members and plain
strings freely. Nothing here computes a fact.
"""

from __future__ import annotations

from instep.pyindex.model import Vocab

FACTS = "join/facts.py"
PROBES = "join/probe_outcomes.py"
BOOK = "join/coupling_book.py"
OPS = "join/op_couplings.py"
REFERENCES = "join/references.py"
CONSTRUCTORS = "join/constructor_calls.py"
PATHS = "join/breaking_path.py"
HOOKS = "join/hook_names.py"
NEW_CALLS = "join/new_calls.py"
KERNELS = "join/kernel_couplings.py"
NATIVE = "join/native_units.py"


class Fact(Vocab):
    """A fact, with the modules that add it (``Fact.GUARDED.producers``)."""

    producers: tuple[str, ...]

    def __new__(cls, value: str, *producers: str) -> Fact:
        fact = str.__new__(cls, value)
        fact._value_ = value
        fact.producers = producers
        return fact

    # the place's gate
    GATED_FOR_NEW = "gated_for_new", FACTS, PROBES
    OLD_ONLY = "old_only", FACTS, PROBES, BOOK
    GUARDED = "guarded", FACTS, OPS
    FALLBACK_RUNS = "fallback_runs", BOOK
    FALLBACK_FAILS = "fallback_fails", BOOK
    # a replacement (override, patch, same-role registration) against the signatures
    HAS_REPLACEMENT = "has_replacement", FACTS
    INCOMPATIBLE = "incompatible", FACTS
    INCOMPATIBLE_BEFORE = "incompatible_before", FACTS
    SAME_AS_NEW = "same_as_new", FACTS
    CALLS_ORIGINAL = "calls_original", FACTS
    CALLERS_OVERRIDDEN = "callers_overridden", FACTS
    ASSIGNS_ONLY = "assigns_only", FACTS
    DEAD_OVERRIDE = "dead_override", FACTS
    DECLARED_BY_EXTENSION_BASE = "declared_by_extension_base", REFERENCES
    # the breaking-path search
    BREAKING_PATH = "breaking_path", PATHS
    NO_BREAKING_CALL = "no_breaking_call", PATHS
    BREAKING_CALL_CONDITIONAL = "breaking_call_conditional", PATHS
    BREAKING_CALL_NEW_PATH = "breaking_call_new_path", PATHS
    PATH_UNPROVEN = "path_unproven", PATHS
    # a new upstream call passes a keyword a replacement never accepted (the caller changed)
    NEW_BREAKING_CALL = "new_breaking_call", NEW_CALLS
    NEW_CALL_CONDITIONAL = "new_call_conditional", NEW_CALLS
    NEW_CALL_NEW_PATH = "new_call_new_path", NEW_CALLS
    # the calls at a use
    CALLED_DIRECTLY = "called_directly", FACTS, REFERENCES, CONSTRUCTORS
    CALLS_FIT = "calls_fit", FACTS
    CALL_BREAKS = "call_breaks", FACTS, CONSTRUCTORS
    CONSTRUCTOR = "constructor", CONSTRUCTORS
    SUPER_CALL_BREAKS = "super_call_breaks", CONSTRUCTORS
    IMPORT_LINE = "import_line", FACTS
    MEMBER_NOT_NAMED = "member_not_named", FACTS
    NEVER_CONSTRUCTED = "never_constructed", FACTS
    TOUCHES_OVERRIDE = "touches_override", FACTS
    ONLY_ANNOTATIONS = "only_annotations", FACTS
    TYPE_POSITION_ONLY = "type_position_only", REFERENCES
    # forks
    FORK_OLD = "fork_old", FACTS
    FORK_NEW = "fork_new", FACTS
    FORK_LACKS_ADDED = "fork_lacks_added", "join/fork_gaps.py"
    ADDED_CALLED_ON_FORK = "added_called_on_fork", "join/fork_gaps.py"
    # registrations of the same op or key
    OTHER_ROLE = "other_role", FACTS
    MASKED_BY_FALLBACK = "masked_by_fallback", FACTS
    CROSS_REGISTRY = "cross_registry", FACTS
    DECOMPOSED_FIRST = "decomposed_first", FACTS
    INDUCTOR_NOT_RUN = "inductor_not_run", REFERENCES
    WHOLE_UPSTREAM_TABLE = "whole_upstream_table", FACTS
    DECOMPOSITION_MEETS_FALLBACK = "decomposition_meets_fallback", FACTS
    DECOMPOSITION_MEETS_PACKET_FALLBACK = "decomposition_meets_packet_fallback", FACTS
    DECOMPOSITION_BYPASSES_LOWERING = "decomposition_bypasses_lowering", FACTS
    DECOMPOSITION_REMOVED = "decomposition_removed", FACTS
    NOT_OP_ARGUMENT = "not_op_argument", "join/op_arguments.py"
    # ATen schemas
    OVERLOAD_NAMED = "overload_named", OPS
    PACKET = "packet", OPS
    PACKET_GONE = "packet_gone", OPS
    REGISTERED = "registered", OPS
    AT_IMPORT = "at_import", OPS
    SCHEMA_BREAKS = "schema_breaks", OPS
    BINDS_BY_NAME = "binds_by_name", OPS
    # C shims
    SHIM_NAMES_ONLY = "shim_names_only", FACTS
    # registered kernels: the place's role, then what the change does to its kernel
    FROM_YAML = "from_yaml", KERNELS
    FROM_CPP = "from_cpp", KERNELS
    CUSTOM = "custom", KERNELS
    AUTOCAST = "autocast", KERNELS
    AUTOCAST_SIGNATURE = "autocast_signature", KERNELS
    C_SHIM = "c_shim", KERNELS
    OP_LIST = "op_list", KERNELS
    BOXED_KERNEL = "boxed_kernel", KERNELS
    KERNEL_SIGNATURE_BREAKS = "kernel_signature_breaks", KERNELS
    ARGUMENT_RENAMED = "argument_renamed", KERNELS
    SCHEMA_BEHAVIOUR = "schema_behaviour", KERNELS
    COPY_MATCHES_NEW = "copy_matches_new", KERNELS
    # linked symbols: how the object meets the missing symbol, and how it is loaded
    STILL_LOADED = "still_loaded", NATIVE
    WEAK_REFERENCE = "weak_reference", NATIVE
    CXX_RUNTIME = "cxx_runtime", NATIVE
    LOADED_AT_IMPORT = "loaded_at_import", NATIVE
    LOADED_WHEN_CALLED = "loaded_when_called", NATIVE
    LOAD_GUARDED = "load_guarded", NATIVE
    # hook names and dropped attributes
    HOOK_DEFAULT_FAILS = "hook_default_fails", HOOKS
    HOOK_CALL_REACHES = "hook_call_reaches", HOOKS
    HOOK_CALL_CONDITIONAL = "hook_call_conditional", HOOKS
    ATTRIBUTE_READ_PLAIN = "attribute_read_plain", "join/dropped_attributes.py"
    PATCHED_METHOD = "patched_method", "join/dropped_attributes.py"
    OFF_BY_DEFAULT = "off_by_default", "join/coupling_book.py"


# Facts no rule reads, named one by one (a new one fails the test): the fallback facts are
# read by facts.facts_for to decide ``guarded``; fork_new and path_unproven say what the
# evidence shows and leave the decision to the rules' defaults.
READ_BY_NO_RULE = frozenset(
    {Fact.FALLBACK_RUNS, Fact.FALLBACK_FAILS, Fact.FORK_NEW, Fact.PATH_UNPROVEN}
)
