"""The native index shared by impact analysis: what the dynamic linker sees of an ELF
shared object.

One shared object's exported and undefined dynamic symbols, ``DT_NEEDED``, ``DT_SONAME``
and ``DT_RPATH``/``DT_RUNPATH`` (``model``: :class:`~.model.SharedObject`), read with
pyelftools and a bulk decode of the symbol table (``reader``); the shared objects of a
wheel or a directory, each read once — wheel members inflated keeping only what the
reader needs — and remembered in the content cache (``files``); C++ names for people
(``demangle``). It never loads, imports or runs what it reads, and calls no toolchain
(``nm``, ``c++filt``). It knows nothing of upstream changes, couplings or verdicts
(``instep.impact`` imports it; it imports only ``instep.pyindex``'s cache and
vocabulary).
"""
