"""Recurring schedules: when the occurrences of a cron expression or a fixed
interval fall, and which one is due to be put now.

An occurrence becomes an ordinary job whose id is the schedule's name and the
occurrence's time (``nightly@1767236400000``), so that any number of workers
putting it put it once. After downtime the missed occurrences collapse into
one: the latest one that is due.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from chronoq.errors import InvalidInput

__all__ = ["Schedule", "occurrence_id"]

MIN_EVERY_S = 0.001
MAX_EVERY_S = 10 * 365 * 24 * 3600
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")


def occurrence_id(name: str, at_ms: int) -> str:
    """The id of the job that an occurrence becomes: the same in every worker."""
    return f"{name}@{at_ms}"


@dataclass(frozen=True, slots=True)
class Schedule:
    """A cron expression (5 fields, in ``tz``) or a fixed interval in seconds
    (``every``, counted from the Unix epoch so that every worker agrees)."""

    name: str
    cron: str | None = None
    every: float | None = None
    tz: str = "UTC"

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME_RE.fullmatch(self.name):
            raise InvalidInput(
                f"invalid schedule name {self.name!r}: use 1-128 characters of "
                "A-Z a-z 0-9 . _ : -, starting with a letter or digit"
            )
        if (self.cron is None) == (self.every is None):
            raise InvalidInput("give cron or every, not both and not neither")
        if self.every is not None:
            every = self.every
            valid = isinstance(every, int | float) and not isinstance(every, bool)
            if not valid or not math.isfinite(every) or not MIN_EVERY_S <= every <= MAX_EVERY_S:
                raise InvalidInput(
                    f"every must be seconds from {MIN_EVERY_S:g} to {MAX_EVERY_S}, got {every!r}"
                )
        self._zone()  # a bad time zone fails here, not at the first occurrence
        if self.cron is not None:
            self._check_cron(self.cron)

    def _zone(self) -> ZoneInfo:
        try:
            return ZoneInfo(self.tz)
        except (ZoneInfoNotFoundError, ValueError, TypeError):
            raise InvalidInput(
                f"unknown time zone {self.tz!r} (an IANA name such as 'Europe/Paris')"
            ) from None

    @staticmethod
    def _check_cron(expression: str) -> None:
        from croniter import CroniterBadDateError, croniter

        if not isinstance(expression, str) or len(expression.split()) != 5:
            raise InvalidInput(
                f"cron must have 5 fields (minute hour day month weekday), got {expression!r}"
            )
        if not croniter.is_valid(expression):
            raise InvalidInput(f"invalid cron expression {expression!r}")
        try:  # valid fields can still name no day at all (30 February)
            croniter(expression, datetime(2000, 1, 1, tzinfo=UTC)).get_next(datetime)
        except CroniterBadDateError:
            raise InvalidInput(
                f"cron expression {expression!r} never fires (a day that no month has?)"
            ) from None

    def _fixed_hours(self) -> bool:
        """A cron at given hours (not ``*`` in the hour field) runs at its
        wall-clock times once, in the hour that repeats when daylight saving
        time ends too; one that runs every hour runs in both (as Vixie cron)."""
        return self.cron is not None and not self.cron.split()[1].startswith("*")

    def next_after(self, after_ms: int) -> int:
        """The first occurrence strictly after ``after_ms`` (epoch ms)."""
        if self.every is not None:
            step = round(self.every * 1000)
            return (after_ms // step + 1) * step
        from croniter import croniter

        start = datetime.fromtimestamp(after_ms / 1000, UTC).astimezone(self._zone())
        assert self.cron is not None
        occurrences = croniter(self.cron, start)
        following: datetime = occurrences.get_next(datetime)
        while self._fixed_hours() and _repeated(following):
            following = occurrences.get_next(datetime)
        return math.floor(following.timestamp() * 1000)

    def latest_at_or_before(self, now_ms: int) -> int | None:
        """The latest occurrence at or before ``now_ms``; None if there is none
        in the year before it (a cron that fires rarely, or not yet)."""
        if self.every is not None:
            step = round(self.every * 1000)
            return now_ms // step * step
        from croniter import croniter

        start = datetime.fromtimestamp((now_ms + 1) / 1000, UTC).astimezone(self._zone())
        assert self.cron is not None
        occurrences = croniter(self.cron, start)
        previous: datetime = occurrences.get_prev(datetime)
        while self._fixed_hours() and _repeated(previous):
            previous = occurrences.get_prev(datetime)
        at = math.floor(previous.timestamp() * 1000)
        return at if now_ms - at <= 366 * 24 * 3600 * 1000 else None

    def due(self, last_ms: int | None, now_ms: int) -> int | None:
        """The occurrence to put now, given the last one put (None: never):
        the latest one due that is after ``last_ms``. Missed ones collapse
        into it. None when nothing new is due."""
        latest = self.latest_at_or_before(now_ms)
        if latest is None or (last_ms is not None and latest <= last_ms):
            return None
        return latest


def _repeated(moment: datetime) -> bool:
    """Whether ``moment`` is the second time its wall-clock time comes round,
    in the hour that repeats when daylight saving time ends."""
    local = datetime.fromtimestamp(moment.timestamp(), moment.tzinfo)
    return local.fold == 1 and local.replace(fold=0).utcoffset() != local.utcoffset()
