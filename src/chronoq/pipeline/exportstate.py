"""What ``chronoq export`` keeps in its directory, under ``_chronoq/`` (Spark
and pyarrow skip names that start with ``_`` or ``.``): the store it exports,
the offset of each log shard, and the files of the last flush.

A flush is exactly-once across a crash at any point:

1. its Parquet files are written under hidden temporary names and flushed to
   disk (``.part-….parquet.tmp`` next to where they go);
2. the state, with the new offsets and the renames still to do, replaces the
   old one at once (``write_durably``): this is the commit;
3. the files are renamed into place, then the state is written again
   without them.

A process that starts after a crash finishes the renames of a committed
flush and deletes the temporary files of one that never committed, whose
events are still after the saved offsets and are read again.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chronoq.errors import InvalidInput
from chronoq.pipeline.durable import rename_durably, write_durably

__all__ = ["STATE_DIR", "TEMP_PREFIX", "TEMP_SUFFIX", "ExportState"]

STATE_DIR = "_chronoq"
TEMP_PREFIX, TEMP_SUFFIX = ".part-", ".parquet.tmp"
_FORMAT = 1


@dataclass
class ExportState:
    """The saved progress of one export directory."""

    root: Path
    store: str
    topic: str | None
    offsets: dict[str, int] = field(default_factory=dict)
    #: renames of a committed flush not yet done: (temporary, final), relative to root
    pending: list[tuple[str, str]] = field(default_factory=list)
    #: events lost before they could be exported, as reported (with --allow-gaps)
    gaps: list[dict[str, Any]] = field(default_factory=list)
    events: int = 0
    files: int = 0

    @property
    def path(self) -> Path:
        return self.root / STATE_DIR / "export.json"

    @classmethod
    def open(cls, root: Path, store: str, topic: str | None) -> ExportState:
        """The state of ``root`` (created empty for a new directory), checked
        to belong to this store and topic, with a crashed flush repaired."""
        state = cls(root, store, topic)
        if state.path.exists():
            state = cls.load(root)
            state._check(store, topic)
        state.recover()
        return state

    @classmethod
    def load(cls, root: Path) -> ExportState:
        """The state saved in ``root`` as it is (no check, no repair)."""
        path = root / STATE_DIR / "export.json"
        try:
            doc = json.loads(path.read_text())
            if doc.get("format") != _FORMAT:
                raise ValueError(f"format {doc.get('format')!r}, this chronoq reads {_FORMAT}")
            return cls(
                root,
                str(doc["store"]),
                doc["topic"],
                {str(k): int(v) for k, v in doc["offsets"].items()},
                [(str(a), str(b)) for a, b in doc["pending"]],
                list(doc["gaps"]),
                int(doc["events"]),
                int(doc["files"]),
            )
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise InvalidInput(
                f"{path} is not an export state chronoq can read ({exc}): "
                "export into a new directory"
            ) from None

    def _check(self, store: str, topic: str | None) -> None:
        if self.store != store:
            raise InvalidInput(
                f"{self.root} holds an export of {self.store}, not of {store}: export each "
                "store into a directory of its own (if the store only moved, edit "
                f"'store' in {self.path})"
            )
        if self.topic != topic:
            had = "every topic" if self.topic is None else f"topic {self.topic}"
            asked = "every topic" if topic is None else f"topic {topic}"
            raise InvalidInput(
                f"{self.root} holds an export of {had}, and this run asks for {asked}: "
                "export each selection into a directory of its own"
            )

    def save(self) -> None:
        doc = {
            "format": _FORMAT,
            "store": self.store,
            "topic": self.topic,
            "offsets": dict(sorted(self.offsets.items())),
            "pending": self.pending,
            "gaps": self.gaps,
            "events": self.events,
            "files": self.files,
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_durably(self.path, json.dumps(doc, indent=1).encode())

    def recover(self) -> None:
        """After a crash: finish the renames of a committed flush, and delete
        the temporary files of one that did not commit (its events are read
        again)."""
        self.finish()
        for directory, _, names in os.walk(self.root):
            for name in names:
                if name.startswith(TEMP_PREFIX) and name.endswith(TEMP_SUFFIX):
                    os.unlink(os.path.join(directory, name))

    def finish(self) -> None:
        """Do the renames of the committed flush, then save the state without them."""
        if not self.pending:
            return
        todo = []
        for temp, final in self.pending:
            if (self.root / temp).exists():
                todo.append((self.root / temp, self.root / final))
            elif not (self.root / final).exists():
                raise InvalidInput(
                    f"{self.root / final} was exported and is gone (its temporary file "
                    f"too): the export in {self.root} is incomplete; start a new one"
                )
        rename_durably(todo)
        self.pending = []
        self.save()
