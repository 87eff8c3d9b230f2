"""The embedded SQLite backend (the default)."""

from chronoq.backends.sqlite.backend import SQLiteBackend

__all__ = ["SQLiteBackend"]
