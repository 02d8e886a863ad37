"""The downstream side of impact analysis: every place in the backend's tree that names
upstream, before any change is known.

``coupling_index`` indexes one file (and a whole tree in parallel, with the content
cache) by composing one recogniser per coupling kind over ``scope`` (names, typed
bindings ``Local``/``Arg``, emitted references) and ``pruning`` (which lines are worth
visiting): ``imports`` (IMPORT_USE, CONFIG reads), ``monkeypatches`` (MONKEYPATCH, CONFIG
writes), ``registration_sites`` (REGISTRATION), ``definitions`` + ``subclasses``
(SUBCLASS_OVERRIDE), ``patch_helpers`` (MONKEYPATCH through a helper), ``c_shim_names``
(C_SHIM); ``handles`` is their data, ``records`` what is kept per file, ``tree_index``
the cross-file resolution. ``forks`` finds copied upstream files and functions;
``version_gates`` finds code guarded for a torch version. Nothing here diffs upstream or
decides a verdict.
"""
