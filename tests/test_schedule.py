"""Recurring schedules: where occurrences fall, which one is due, and the
deterministic id every worker gives it."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from chronoq.errors import InvalidInput
from chronoq.schedule import Schedule, occurrence_id


def ms(*args: int, tz: str = "UTC") -> int:
    return round(datetime(*args, tzinfo=ZoneInfo(tz)).timestamp() * 1000)  # type: ignore[misc]


def test_every_counts_from_the_epoch_so_workers_agree() -> None:
    s = Schedule("tick", every=60)
    t = ms(2026, 11, 22, 10, 0, 30)
    assert s.latest_at_or_before(t) == ms(2026, 11, 22, 10, 0)
    assert s.next_after(t) == ms(2026, 11, 22, 10, 1)
    assert s.next_after(ms(2026, 11, 22, 10, 1)) == ms(2026, 11, 22, 10, 2)  # strictly after
    assert Schedule("fast", every=0.25).next_after(1_000) == 1_250


def test_cron_in_utc_and_in_a_zone_across_a_dst_change() -> None:
    nightly = Schedule("nightly", cron="0 3 * * *")
    assert nightly.next_after(ms(2026, 11, 22, 14, 0)) == ms(2026, 11, 23, 3, 0)
    assert nightly.latest_at_or_before(ms(2026, 11, 22, 14, 0)) == ms(2026, 11, 22, 3, 0)
    assert nightly.latest_at_or_before(ms(2026, 11, 22, 3, 0)) == ms(2026, 11, 22, 3, 0)
    paris = Schedule("paris", cron="30 9 * * *", tz="Europe/Paris")
    # the clocks went back on 2026-10-25: 09:30 in Paris is 07:30 UTC before, 08:30 after
    assert paris.next_after(ms(2026, 10, 24, 12, 0)) == ms(2026, 10, 25, 9, 30, tz="Europe/Paris")
    assert paris.next_after(ms(2026, 10, 24, 12, 0)) == ms(2026, 10, 25, 8, 30)
    assert paris.next_after(ms(2026, 10, 23, 12, 0)) == ms(2026, 10, 24, 7, 30)


def test_missed_occurrences_collapse_into_the_latest() -> None:
    hourly = Schedule("hourly", cron="0 * * * *")
    last = ms(2026, 11, 22, 1, 0)
    now = ms(2026, 11, 22, 5, 20)  # down from 01:00 to 05:20: 02..05 missed
    assert hourly.due(last, now) == ms(2026, 11, 22, 5, 0)
    assert hourly.due(ms(2026, 11, 22, 5, 0), now) is None  # already put
    assert hourly.due(None, now) == ms(2026, 11, 22, 5, 0)


def test_a_rare_cron_has_no_occurrence_in_the_year_before() -> None:
    leap_day = Schedule("leap", cron="0 0 29 2 *")
    assert leap_day.latest_at_or_before(ms(2026, 11, 22)) is None
    assert leap_day.due(None, ms(2026, 11, 22)) is None
    assert leap_day.next_after(ms(2026, 11, 22)) == ms(2028, 2, 29)


def test_occurrence_ids_are_the_same_everywhere() -> None:
    at = ms(2026, 11, 22, 3, 0)
    assert occurrence_id("nightly", at) == f"nightly@{at}"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "n"}, "give cron or every"),
        ({"name": "n", "cron": "* * * * *", "every": 5}, "give cron or every"),
        ({"name": "n", "every": 0}, "every must be"),
        ({"name": "n", "every": float("nan")}, "every must be"),
        ({"name": "n", "every": True}, "every must be"),
        ({"name": "n", "every": "5"}, "every must be"),
        ({"name": "n", "cron": "0 3 * *"}, "5 fields"),
        ({"name": "n", "cron": "0 3 * * * *"}, "5 fields"),
        ({"name": "n", "cron": "61 3 * * *"}, "invalid cron"),
        ({"name": "n", "cron": "0 0 30 2 *"}, "never fires"),
        ({"name": "n", "cron": "0 3 * * *", "tz": "Mars/Olympus"}, "unknown time zone"),
        ({"name": "has space", "every": 5}, "invalid schedule name"),
        ({"name": "", "every": 5}, "invalid schedule name"),
    ],
)
def test_bad_schedules_are_refused_with_a_clear_message(
    kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidInput, match=message):
        Schedule(**kwargs)  # type: ignore[arg-type]


def test_next_after_is_always_later_and_latest_never_later() -> None:
    schedules = [
        Schedule("a", cron="*/7 * * * *"),
        Schedule("b", cron="0 9 * * 1-5", tz="America/New_York"),
        Schedule("c", every=3.5),
    ]
    t = ms(2026, 3, 7, 23, 58)  # the US clocks go forward on 2026-03-08
    for s in schedules:
        for step in range(200):
            now = t + step * 997_003
            nxt = s.next_after(now)
            latest = s.latest_at_or_before(now)
            assert nxt > now
            assert latest is None or latest <= now < s.next_after(latest)
            assert datetime.fromtimestamp(nxt / 1000, UTC).second == 0 or s.every


def test_a_wall_clock_time_that_repeats_when_dst_ends_fires_once() -> None:
    # Europe/Paris leaves summer time on 2026-10-25: 03:00 CEST becomes 02:00 CET,
    # so 02:30 comes round twice, at 00:30 and at 01:30 UTC
    nightly = Schedule("nightly", cron="30 2 * * *", tz="Europe/Paris")
    first = int(datetime(2026, 10, 25, 0, 30, tzinfo=UTC).timestamp() * 1000)
    second = first + 3600 * 1000
    next_day = int(datetime(2026, 10, 26, 1, 30, tzinfo=UTC).timestamp() * 1000)
    assert nightly.next_after(first - 1) == first
    assert nightly.next_after(first) == next_day
    assert nightly.latest_at_or_before(second + 60_000) == first
    assert nightly.due(first, second + 60_000) is None
    # a cron that runs every hour runs in both of those hours (as Vixie cron)
    half_hourly = Schedule("half", cron="*/30 * * * *", tz="Europe/Paris")
    assert half_hourly.next_after(first) == first + 1800 * 1000  # 02:00 CET
