"""The downstream side of impact analysis: every place in the backend's tree that names
upstream, before any change is known.

``coupling_index`` yields :class:`~instep.impact.model.Reference` per file (imports and
attribute uses, subclasses, monkey-patches, same-key registrations, config keys, C shim
names); ``forks`` finds copied upstream files and functions; ``version_gates`` finds
code guarded for a torch version. Nothing here diffs upstream or decides a verdict.
"""
