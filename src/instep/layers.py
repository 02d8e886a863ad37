"""The triage vocabulary: the layers of the compile pipeline, earliest first.

A failure is filed under the *earliest* layer that departed from eager semantics
(see docs/architecture.md). The order of the members is the pipeline order and is used
to compare layers ("deeper" / "shallower") when following error migration.
This module holds only the vocabulary, no classification logic.
"""

from __future__ import annotations

from enum import Enum


class Layer(str, Enum):
    ENV = "env"
    EAGER = "eager"
    REGISTRATION = "registration"
    DYNAMO = "dynamo"
    AOT = "aot"
    DECOMPOSITION = "decomposition"
    LOWERING = "lowering"
    SCHEDULER = "scheduler"
    CODEGEN = "codegen"
    KERNEL_COMPILE = "kernel_compile"
    RUNTIME = "runtime"
    NUMERICS = "numerics"

    @property
    def depth(self) -> int:
        """Position in the pipeline, 0 for ``env``."""
        return _ORDER[self]

    def __str__(self) -> str:  # render as the plain value in tables and JSON
        return self.value


_ORDER = {layer: i for i, layer in enumerate(Layer)}

LAYER_DESCRIPTIONS: dict[Layer, str] = {
    Layer.ENV: "imports, collection, version mismatch, shadowed packages",
    Layer.EAGER: "the eager reference itself fails: a wrong test or the device's eager op",
    Layer.REGISTRATION: "backend / device-op-override / device-interface registration",
    Layer.DYNAMO: "bytecode capture, guards, graph breaks under fullgraph",
    Layer.AOT: "AOTAutograd, functionalization, alias/mutation, partitioning",
    Layer.DECOMPOSITION: "decomposition tables, wrong or missing decompositions",
    Layer.LOWERING: "ATen to IR lowering, missing operators, symbolic-shape asserts",
    Layer.SCHEDULER: "fusion, buffer reuse, realize decisions",
    Layer.CODEGEN: "index/mask/grid generation, zero-dim/empty, structural asserts",
    Layer.KERNEL_COMPILE: "Triton / vendor compiler / C++ compile of generated kernels",
    Layer.RUNTIME: "launch, runtime API parameter errors, device exceptions",
    Layer.NUMERICS: "compiled result differs from eager",
}
