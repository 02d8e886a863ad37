"""The upstream side of impact analysis: what changed between two upstream versions.

``sources`` opens the two versions (tree, wheel, git revision, patch directory) and lists
the changed files; ``file_index`` indexes one file (``instep.pyindex`` for Python,
``c_shims`` for C shim headers); ``release_diff`` and ``history_diff`` turn a release or
a commit range into :class:`~instep.impact.model.SymbolChange` (``symbol_diff`` per file);
``stages`` maps paths to compile stages; ``versions`` reads a snapshot's torch version;
``resolver`` and ``call_paths`` follow re-exports and module-internal calls. Nothing
here reads the downstream tree or decides a verdict.
"""
