"""Layered triage: file every failure under the earliest layer that broke, then group.

``classifier`` combines the evidence (backend ladder, exception frames, message rules,
eager reference) into a layer, category, signature and confidence per outcome;
``batches`` groups a run's failures by root cause with ids stable across runs;
``migration`` follows a case's error from run to run; ``numerics`` sub-classifies result
mismatches; ``backend_ladder`` re-runs failed cases down eager -> aot_eager ->
aot_eager_decomp_partition -> the target backend; ``selftest`` injects a fault at each
layer and checks the classifier files it there.
"""
