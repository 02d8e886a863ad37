"""The downstream package of the real-release loop test is its input, not part of the suite
(its cases run under instep, against torch 2.14.1, inside the test)."""

collect_ignore = ["downstream_2_13"]
