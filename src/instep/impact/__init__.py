"""Upstream impact analysis: which upstream changes touch a downstream backend, and how.

Flow, one package per step: ``upstream`` (sources: git range, wheels, trees, patches ->
symbol diff -> SymbolChange; the static index of a file is ``instep.pyindex``) ->
``downstream`` (coupling index, forks, version gates -> References) -> ``join``
(changes x references -> Coupling, verdicts -> Impact) -> ``export`` (md, csv, json,
html). ``analysis`` wires them together (``logged_warnings`` collects the warnings for
the report, ``report_memo`` remembers whole reports); ``model`` holds the nouns.
Static only: no analysed code is ever imported or executed.
"""
