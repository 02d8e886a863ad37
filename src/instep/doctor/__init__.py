"""The compile doctor: environment and API checks before a compile, stage timings and a
watchdog during one.

Before: ``version_matrix`` (seed 000 5.1), ``env_checks`` (imports, shadowing, autoload,
Dynamo backends, device interface and op overrides), ``api_scan`` (test sources against the
installed torch). During: ``stage_timing`` (per-graph stage seconds from torch's own
events), ``compile_hooks`` (the torch glue), ``watchdog`` and ``compile_workers`` (hung
compiles, dead workers), ``compile_bootstrap`` / ``compile_session`` (``instep doctor
compile -- python script.py``). This package imports nothing heavy: the modules used
inside a user's process (stage_timing, compile_hooks, watchdog, compile_workers,
compile_bootstrap) need only the standard library and instep's own light modules.
"""
