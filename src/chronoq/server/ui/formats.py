"""Values as the dashboard shows them, as plain text: times, durations,
payloads, and the relative URLs of its fragments. The templates put them
into markup (and escape them there)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlencode

__all__ = ["ago", "payload_text", "preview", "segment", "span", "url", "utc"]

_PAYLOAD_SHOWN = 16 * 1024  # characters of a payload on the page; the API has it whole


def segment(value: str) -> str:
    """One path segment: a job id may hold ``/``, ``?`` or ``#``."""
    return quote(value, safe="")


def url(path: str, **query: object) -> str:
    """A URL relative to the dashboard's root (its page is at ``/ui/``), so it
    works unchanged behind a proxy that serves the app under a prefix."""
    pairs = {name: str(value) for name, value in query.items() if value is not None}
    return f"{path}?{urlencode(pairs)}" if pairs else path


def utc(ms: int | None) -> str:
    if ms is None:
        return "–"
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def span(seconds: float) -> str:
    """A duration for people: 950ms, 42s, 3m 20s, 5h 02m, 12d 4h."""
    seconds = abs(seconds)
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.0f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m {secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h {minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d {hours}h"


def ago(ms: int | None, now_ms: int | None = None) -> str:
    """``ms`` relative to now: "in 3m 20s" or "42s ago"."""
    if ms is None:
        return ""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    delta = (ms - now) / 1000
    return f"in {span(delta)}" if delta > 0 else f"{span(delta)} ago"


def payload_text(payload: Any) -> tuple[str, bool]:
    """A payload as text for a ``<pre>``, and whether it was cut short."""
    if isinstance(payload, bytes | bytearray | memoryview):
        raw = bytes(payload)
        text = f"binary, {len(raw)} bytes: {raw[:256].hex(' ')}"
        return text, len(raw) > 256
    text = json.dumps(payload, indent=2, ensure_ascii=False)
    if len(text) > _PAYLOAD_SHOWN:
        return text[:_PAYLOAD_SHOWN], True
    return text, False


def preview(payload: Any, width: int = 60) -> str:
    """A payload on one line, for a table cell."""
    if isinstance(payload, bytes | bytearray | memoryview):
        return f"binary, {len(bytes(payload))} bytes"
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= width else text[: width - 1] + "…"
