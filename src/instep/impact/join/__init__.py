"""The join of upstream changes with downstream references, and the verdicts.

``matchers`` matches references to changes (one matcher per way of reaching one);
``facts`` computes every fact a rule of ``verdict_rules.toml`` reads; ``verdicts``
applies the rules (the first matching rule per coupling, the aggregation per unit);
``test_suggestions`` names the tests to run per coupled unit. Nothing here reads
sources, indexes files or renders output.
"""
