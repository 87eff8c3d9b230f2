"""Helpers for the tests of code that uses chronoq (docs/testing.md).

``run_due`` runs every job due before a given time through its handler, in
due order, at once: the jobs' due times move instead of the test waiting.
``delayed``, ``ready``, ``reserved`` and ``dead`` list a topic's jobs in
each state, for assertions. They work on any store (SQLite, Redis), through
the public ``Queue`` API only."""

from chronoq.testing.reads import dead, delayed, ready, reserved
from chronoq.testing.report import Report, Run
from chronoq.testing.running import RunError, run_due

__all__ = ["Report", "Run", "RunError", "dead", "delayed", "ready", "reserved", "run_due"]
