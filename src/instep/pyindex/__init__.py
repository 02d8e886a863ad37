"""The static Python index shared by impact analysis and the doctor.

What one Python file defines, imports and registers (``symbols``, with the nouns in
``model`` and the registration recogniser in ``registrations``), a fast ``unparse``,
parameter-list comparison (``signatures``) and the content-addressed cache of per-file
results (``cache``). It never imports or executes the code it reads, and knows nothing of
upstream changes, couplings or verdicts (``instep.impact``) nor of the environment checks
(``instep.doctor``); both import it, it imports neither.
"""
