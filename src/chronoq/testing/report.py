"""What ``run_due`` ran: one ``Run`` per handler call, in the order they ran."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["Outcome", "Report", "Run"]

#: what became of a job after its handler ran, in the words of the worker's
#: log lines (docs/workers.md); ``lost``: its lease was no longer live when the
#: run ended (the handler settled the job itself, or outran the job's ttr)
Outcome = Literal["ack", "retry", "dead", "bury", "lost"]


@dataclass(frozen=True, slots=True)
class Run:
    """One handler call. ``due_at``: when the job was due on the run's clock
    (ms since the epoch): its due time for a job put before the run, and for
    a job put or retried during the run, its delay after the run's clock
    then. ``at``: the run's clock when the handler ran (``due_at``, or later
    for a job that was due already). ``error``: what the handler raised."""

    topic: str
    id: str
    attempt: int
    due_at: int
    at: int
    outcome: Outcome
    error: BaseException | None
    payload: Any


@dataclass(frozen=True, slots=True)
class Report:
    """The runs of one ``run_due`` call, in the order they ran. ``until``: the
    time asked for (ms since the epoch). ``skipped``: the seconds the run's
    clock ended ahead of the wall clock: every job left delayed in the store
    was moved that much earlier, so the store shows what it would at ``until``."""

    runs: list[Run]
    until: int
    skipped: float

    def __iter__(self) -> Iterator[Run]:
        return iter(self.runs)

    def __len__(self) -> int:
        return len(self.runs)

    def ids(self, outcome: Outcome | None = None, *, topic: str | None = None) -> list[str]:
        """The ids of the jobs run (with this outcome, of this topic), in run
        order; a job run twice is there twice."""
        return [
            run.id
            for run in self.runs
            if (outcome is None or run.outcome == outcome) and (topic is None or run.topic == topic)
        ]

    @property
    def outcomes(self) -> list[Outcome]:
        """The outcome of each run, in run order."""
        return [run.outcome for run in self.runs]

    @property
    def errors(self) -> list[BaseException]:
        """What the handlers raised, in run order (``Retry`` and ``Bury`` too)."""
        return [run.error for run in self.runs if run.error is not None]
