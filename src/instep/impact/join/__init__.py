"""The join of upstream changes with downstream references, and the verdicts.

``verdicts`` applies ``verdict_rules.toml`` (the first matching rule per coupling, the
aggregation per unit); ``test_suggestions`` names the tests to run per coupled unit.
Nothing here reads sources, indexes files or renders output.
"""
