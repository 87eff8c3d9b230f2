"""Input parsing for the ``chronoq`` commands: due times, durations, JSON
payloads, and the checks between options that click cannot express."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from typing import IO, Any

import click

__all__ = ["check_one_time", "parse_duration", "parse_payload", "parse_run_at", "parse_until"]

_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([smhdw]?)")


def parse_run_at(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    """The ``--run-at`` callback: epoch seconds as a float, else ISO 8601."""
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is not a time: use ISO 8601 like 2030-01-01T09:30:00Z "
            "(no zone means UTC) or epoch seconds like 1893490200",
            ctx,
            param,
        ) from None


def parse_payload(text: str | None, file: IO[str] | None) -> Any:
    """The JSON payload from PAYLOAD_JSON or --payload-file (default None)."""
    if text is not None and file is not None:
        raise click.UsageError("give PAYLOAD_JSON or --payload-file, not both")
    source = "PAYLOAD_JSON"
    if file is not None:
        text, source = file.read(), "--payload-file"
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(
            f"not valid JSON ({exc}); quote strings, e.g. '\"hello\"' or '{{\"order\": 42}}'",
            param_hint=source,
        ) from None


def check_one_time(delay: float | None, run_at: datetime | float | None, required: bool) -> None:
    """At most one of --delay and --run-at; exactly one when ``required``."""
    if delay is not None and run_at is not None:
        raise click.UsageError("give --delay or --run-at, not both")
    if required and delay is None and run_at is None:
        raise click.UsageError("give the new due time with --delay SECONDS or --run-at TIME")


def _duration(value: str) -> float | None:
    """``90m``, ``12h``, ``1.5d``, ``2w`` or plain seconds, in seconds; None if it is not one."""
    found = _DURATION.fullmatch(value.strip().lower())
    return None if found is None else float(found.group(1)) * _UNITS[found.group(2)]


def parse_duration(ctx: click.Context, param: click.Parameter, value: str) -> float:
    """A duration option (``--step``): seconds."""
    seconds = _duration(value)
    if seconds is None:
        raise click.BadParameter(
            f"{value!r} is not a duration: use seconds like 3600, or 90m, 12h, 30d", ctx, param
        )
    return seconds


def parse_until(ctx: click.Context, param: click.Parameter, value: str) -> datetime | timedelta:
    """``--until``: a duration from now (``timedelta``), or an ISO 8601 time
    (no zone means UTC)."""
    seconds = _duration(value)
    if seconds is not None:
        return timedelta(seconds=seconds)
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is neither a duration from now (90m, 12h, 30d, or seconds) nor "
            "an ISO 8601 time like 2030-01-01T09:30:00Z (no zone means UTC)",
            ctx,
            param,
        ) from None
