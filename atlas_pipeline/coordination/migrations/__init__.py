"""Alembic migrations of the coordination store (run by coordination/migrate.py)."""
