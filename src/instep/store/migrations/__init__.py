"""Alembic migrations of the result store, shipped inside the package (see ``database.py``)."""
