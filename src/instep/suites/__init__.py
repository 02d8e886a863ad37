"""instep's built-in conformance suites and the tiers that run them (L0..L6).

``tiers`` (built-in tier data merged with the config's ``[tiers.NAME]``), ``smoke`` (L0
and L1 pytest suites), ``opinfo`` (L5 differential suite over the installed torch's
``op_db``), ``models`` (L6 small models), ``expected_failures`` (data files, import and
export of PyTorch's and torch_npu's disabled-test lists) and ``metrics`` (seed 10.3 run
metrics computed from stored outcomes). The suites are plain pytest files that
``instep run`` executes like any other; nothing here runs tests itself.
"""
