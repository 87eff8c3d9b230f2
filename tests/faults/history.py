"""The histories of a fault run: one JSON-lines file per process, each line written with one
``os.write`` on an ``O_APPEND`` descriptor, so that a ``kill -9`` loses at most the line being
written and lines of concurrent threads never interleave.

Record types: a producer's ``invoke`` (before the put), then ``ok`` (the put returned; with the
``due_at`` it returned), ``fail`` (a chronoq error meaning nothing was written) or ``info``
(indeterminate: it may or may not be stored); a handler's ``start`` (with attempt, lease,
deadline, due_at) and ``end``. Every record carries ``t``, ``time.time()`` in ms."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["History", "Recorder", "now_ms", "read_history"]


def now_ms() -> float:
    return time.time() * 1000.0


class Recorder:
    """Appends records to one file; safe from several threads (one write per line)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def record(self, type_: str, job_id: str, **fields: Any) -> None:
        doc = {"type": type_, "id": job_id, "t": round(now_ms(), 3), **fields}
        os.write(self._fd, (json.dumps(doc, separators=(",", ":")) + "\n").encode())

    def close(self) -> None:
        os.close(self._fd)


@dataclass
class History:
    """Every record of a run, in time order, and the same grouped by job id."""

    records: list[dict[str, Any]]
    torn: int = 0  # lines cut short by a kill -9
    by_id: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.records.sort(key=lambda r: r["t"])
        for record in self.records:
            self.by_id.setdefault(record["id"], []).append(record)

    def of(self, type_: str) -> Iterator[dict[str, Any]]:
        return (r for r in self.records if r["type"] == type_)


def read_history(directory: Path) -> History:
    """Every ``*.jsonl`` file of ``directory``; each record gets ``src``, its file's stem."""
    records: list[dict[str, Any]] = []
    torn = 0
    for path in sorted(directory.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                torn += 1
                continue
            record["src"] = path.stem
            records.append(record)
    return History(records, torn)
