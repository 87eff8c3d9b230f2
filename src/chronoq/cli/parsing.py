"""Input parsing for the ``chronoq`` commands: due times, JSON payloads, and
the checks between options that click cannot express."""

from __future__ import annotations

import json
from datetime import datetime
from typing import IO, Any

import click

__all__ = ["check_one_time", "parse_payload", "parse_run_at"]


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
