"""The longest server calls, from the private server's SLOWLOG: every command slower
than a threshold (0: every command) is kept with its duration in µs, the function
an FCALL named included. A SLOWLOG entry keeps at most 32 arguments of 128 bytes,
which is enough here: only the first two (FCALL and the function's name) are read."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, cast

import redis
from common import percentile

__all__ = ["MAX_LEN", "Call", "last_id", "longest_fcall", "read_calls", "record", "summary"]

MAX_LEN = 1_000_000  # entries kept: more than a round makes (checked: `overflowed`)
OURS = frozenset({"SLOWLOG", "CONFIG", "INFO", "FLUSHALL"})  # the benchmark's own calls
_LIBRARY = re.compile(r"^chronoq_[0-9a-f]+_")


@dataclass(frozen=True)
class Call:
    id: int  # the log's own sequence: a later call has a higher id
    micros: int
    command: str  # "FCALL reserve", "HGET"...


def record(client: redis.Redis, slower_than_us: int) -> None:
    """Keep every call slower than ``slower_than_us`` from now on, the log emptied."""
    client.config_set("slowlog-max-len", MAX_LEN)
    client.config_set("slowlog-log-slower-than", slower_than_us)
    client.slowlog_reset()


def read_calls(client: redis.Redis, reset: bool = True) -> list[Call]:
    """The calls logged since ``record`` (or the last read), the log emptied after;
    the benchmark's own (reading the log, INFO...) left out."""
    entries = cast(list[dict[str, Any]], client.slowlog_get(-1))
    if reset:
        client.slowlog_reset()
    calls = []
    for entry in entries:
        words = bytes(entry["command"]).split(b" ", 2)
        name = words[0].decode(errors="replace").upper()
        if name in OURS:
            continue
        if name in ("FCALL", "FCALL_RO") and len(words) > 1:
            name = f"FCALL {_LIBRARY.sub('', words[1].decode(errors='replace'))}"
        calls.append(Call(int(entry["id"]), int(entry["duration"]), name))
    return calls


def last_id(client: redis.Redis) -> int:
    """The id of the latest call logged (-1: none): a mark to split a later read at,
    cheaper than reading the log mid-phase (a read of thousands of entries holds the
    server for tens of ms)."""
    newest = cast(list[dict[str, Any]], client.slowlog_get(1))
    return int(newest[0]["id"]) if newest else -1


def summary(calls: list[Call]) -> dict[str, Any]:
    """The longest call of any kind, and the FCALLs' durations (ms) by function."""
    fcalls = [c for c in calls if c.command.startswith("FCALL")]
    longest = max(calls, key=lambda c: c.micros, default=None)
    by_function: dict[str, list[int]] = {}
    for call in fcalls:
        by_function.setdefault(call.command.removeprefix("FCALL "), []).append(call.micros)
    return {
        "calls": len(calls),
        "longest_ms": None if longest is None else longest.micros / 1000,
        "longest": None if longest is None else longest.command,
        "fcalls": len(fcalls),
        "by_function": {
            name: {
                "calls": len(us),
                "p50_ms": percentile([u / 1000 for u in us], 50),
                "p99_ms": percentile([u / 1000 for u in us], 99),
                "max_ms": max(us) / 1000,
            }
            for name, us in sorted(by_function.items())
        },
    }


def longest_fcall(calls_summary: dict[str, Any]) -> tuple[float, str]:
    """(ms, function) of the longest FCALL in a ``summary``; (0, '') when none."""
    functions = calls_summary["by_function"].items()
    name, figures = max(functions, key=lambda item: item[1]["max_ms"], default=("", None))
    return (0.0, "") if figures is None else (figures["max_ms"], name)
