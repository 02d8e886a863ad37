"""Upstream impact analysis: which upstream changes touch a downstream backend, and how.

Flow, one module per step: ``sources`` (git range, wheels, trees, patches) ->
``symbols`` (static index of a file) -> ``symbol_diff`` (SymbolChange) ->
``coupling_index`` + ``forks`` (downstream References) -> ``verdicts`` (Coupling, Impact)
-> ``export`` (md, csv, json, html). ``analysis`` wires them together.
Static only: no analysed code is ever imported or executed.
"""
