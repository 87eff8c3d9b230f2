"""The checker of a total queue (after Jepsen's): reads a run's history and says which jobs were
lost, unexpected, early, duplicated, or run under two live leases at once.

- **lost**: a put was acknowledged (``ok``), yet no run of the job ended, the job is not dead and
  the store no longer holds it. (Stricter than "never started": a job that started on a worker
  that was then killed, and vanished from the store, is lost too.)
- **never started**: acknowledged and no ``start`` at all (a subset of lost, unless in the store).
- **unexpected**: started, but no producer ever invoked a put of its id.
- **early**: started before its due time (the reservation's, and the earliest any put of the id
  could have set: invoke time + delay) by more than the clock tolerance (the store's clock is
  this machine's).
- **duplicated**: started more than once (at-least-once delivery allows it after a fault).
- **two live leases**: a run started while an earlier run of the same job was still going AND
  before that earlier lease's deadline: docs/contract.md §2.3 forbids it.
- **late starts**: a run started after its own lease's deadline, when the store may already
  have handed the job to another worker (a worker must give such a job back, not start it).
- **indeterminate**: puts whose every attempt ended ``info`` (or with no answer at all, a
  producer killed mid-call); ``indeterminate_stored`` of them reached the store anyway."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .history import History

__all__ = ["Report", "check", "most_live", "timeline"]

CLOCK_TOLERANCE_MS = 5.0
SHOWN = 5  # timelines printed per kind of failure


@dataclass
class Report:
    jobs_invoked: int = 0
    acknowledged: int = 0
    failed: int = 0
    info_records: int = 0
    starts: int = 0
    lost: list[str] = field(default_factory=list)
    never_started: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    early: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    two_live_leases: list[str] = field(default_factory=list)
    late_starts: list[str] = field(default_factory=list)
    indeterminate: list[str] = field(default_factory=list)
    indeterminate_stored: int = 0
    dead: list[str] = field(default_factory=list)
    torn_lines: int = 0

    @property
    def ok(self) -> bool:
        return not (
            self.lost or self.unexpected or self.early or self.two_live_leases or self.late_starts
        )

    def summary(self) -> str:
        return (
            f"invoked={self.jobs_invoked} acknowledged={self.acknowledged} failed={self.failed} "
            f"info_records={self.info_records} starts={self.starts} lost={len(self.lost)} "
            f"never_started={len(self.never_started)} unexpected={len(self.unexpected)} "
            f"early={len(self.early)} duplicated={len(self.duplicated)} "
            f"two_live_leases={len(self.two_live_leases)} late_starts={len(self.late_starts)} "
            f"indeterminate={len(self.indeterminate)} "
            f"(stored: {self.indeterminate_stored}) dead={len(self.dead)} "
            f"torn_lines={self.torn_lines}"
        )

    def failures(self) -> dict[str, list[str]]:
        kinds = {
            "lost": self.lost,
            "unexpected": self.unexpected,
            "early": self.early,
            "two live leases": self.two_live_leases,
            "late starts": self.late_starts,
        }
        return {kind: ids for kind, ids in kinds.items() if ids}


def check(
    history: History, state_of: Callable[[str], str | None], dead: Iterable[str] = ()
) -> Report:
    """Analyse ``history``. ``state_of(id)`` is the job's state in the store now (None: gone);
    ``dead`` the ids the store lists as dead."""
    report = Report(torn_lines=history.torn)
    dead_ids = set(dead)
    for job_id, records in sorted(history.by_id.items()):
        _check_job(report, job_id, records, state_of, dead_ids)
    return report


def _check_job(
    report: Report,
    job_id: str,
    records: list[dict[str, Any]],
    state_of: Callable[[str], str | None],
    dead_ids: set[str],
) -> None:
    types = [r["type"] for r in records]
    starts = [r for r in records if r["type"] == "start"]
    report.starts += len(starts)
    report.info_records += types.count("info")
    invoked = "invoke" in types
    acknowledged = "ok" in types
    report.jobs_invoked += invoked
    report.acknowledged += acknowledged
    report.failed += "fail" in types and not acknowledged
    if starts and not invoked:
        report.unexpected.append(job_id)
    if len(starts) > 1:
        report.duplicated.append(job_id)
    if _early(records, starts):
        report.early.append(job_id)
    if _two_live_leases(records, starts):
        report.two_live_leases.append(job_id)
    if any(start["t"] > start["deadline"] + CLOCK_TOLERANCE_MS for start in starts):
        report.late_starts.append(job_id)
    if invoked and not acknowledged and "fail" not in types:
        report.indeterminate.append(job_id)
        report.indeterminate_stored += bool(starts) or state_of(job_id) is not None
    if job_id in dead_ids:
        report.dead.append(job_id)
    ended = "end" in types
    if acknowledged and not ended and job_id not in dead_ids and state_of(job_id) is None:
        report.lost.append(job_id)
    if acknowledged and not starts:
        report.never_started.append(job_id)


def _early(records: list[dict[str, Any]], starts: list[dict[str, Any]]) -> bool:
    """Before the reservation's own due time, or before the earliest time any put of the id
    could have made it due (first invoke + delay). Not against every ``ok``'s due_at: a retried
    put whose first attempt was indeterminate may re-create the job after the first incarnation
    was delivered and acked (dedupe covers live jobs only), with a later due time."""
    invokes = [r["t"] + r["delay"] * 1000 for r in records if r["type"] == "invoke"]
    earliest = min(invokes, default=float("-inf"))
    return any(start["t"] < max(start["due_at"], earliest) - CLOCK_TOLERANCE_MS for start in starts)


def _two_live_leases(records: list[dict[str, Any]], starts: list[dict[str, Any]]) -> bool:
    """A later start inside an earlier run: before its end (none: killed, so until its
    deadline) and before its lease deadline."""
    ends = {(r["src"], r["lease"]): r["t"] for r in records if r["type"] == "end"}
    for i, first in enumerate(starts):
        running_until = ends.get((first["src"], first["lease"]), float("inf"))
        live_until = min(running_until, first["deadline"] - CLOCK_TOLERANCE_MS)
        if any(first["t"] <= later["t"] < live_until for later in starts[i + 1 :]):
            return True
    return False


def most_live(history: History) -> tuple[int, dict[str | None, int]]:
    """The most runs live at once, in all and per group: a run is live from its start until
    its end, or, killed before it, until its lease's deadline. The store's leases last longer
    (from the reserve to the ack), so a limit on leases that held keeps these within it."""
    spans: dict[str | None, list[tuple[float, int]]] = {}
    everything: list[tuple[float, int]] = []
    for records in history.by_id.values():
        ends = {(r["src"], r["lease"]): r["t"] for r in records if r["type"] == "end"}
        for start in (r for r in records if r["type"] == "start"):
            until = min(
                ends.get((start["src"], start["lease"]), start["deadline"]), start["deadline"]
            )
            # a run ending when another starts does not overlap it: ends sort first
            marks = [(start["t"], 1), (max(until, start["t"]), -1)]
            spans.setdefault(start.get("group"), []).extend(marks)
            everything.extend(marks)

    def peak(marks: list[tuple[float, int]]) -> int:
        live = top = 0
        for _, step in sorted(marks):
            live += step
            top = max(top, live)
        return top

    return peak(everything), {group: peak(marks) for group, marks in spans.items()}


def timeline(
    job_id: str, history: History, events: Iterable[Any] = (), state: str | None = None
) -> str:
    """All records of one job in time order, its events from the store, and its state now."""
    lines = [f"--- timeline of {job_id!r} (state in the store now: {state}) ---"]
    for r in history.by_id.get(job_id, []):
        rest = {k: v for k, v in r.items() if k not in ("t", "type", "id", "src")}
        lines.append(f"  {r['t']:.1f} {r['src']:<16} {r['type']:<6} {rest}")
    for e in events:
        lines.append(
            f"  {e.ts_ms:.1f} store            {e.event.value:<6} attempt={e.attempt} "
            f"due_at={e.due_at} error={e.error}"
        )
    return "\n".join(lines)


def shown(report: Report) -> list[str]:
    """The ids whose timelines a failure prints: a few of each kind."""
    return [job_id for ids in report.failures().values() for job_id in ids[:SHOWN]]
