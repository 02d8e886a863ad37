"""Reports on stored runs: the offline HTML dashboard and the weekly Markdown summary.

Reads the store only (SQLite or PostgreSQL alike); never runs tests. Evidence bundles for
one case or batch live in :mod:`instep.bundle`.
"""
