"""The join of upstream changes with downstream references, and the verdicts.

A pipeline of passes over one set of inputs: ``registry`` lists them in order,
``pass_api`` says what a pass is (one entry point, typed findings), ``pass_runner`` runs
them (some in forked children) and ``coupling_book`` decides and keeps each coupling;
``facts`` computes every fact a rule of ``verdict_rules.toml`` reads (``fact_names``
names them); ``verdicts`` applies the rules (the first matching rule per coupling, the
aggregation per unit); ``test_suggestions`` names the tests to run per coupled unit.
Nothing here indexes a whole tree or renders output.
"""
