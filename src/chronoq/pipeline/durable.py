"""Files that survive a crash: written under a temporary name, flushed to
disk, then renamed into place, with the directory flushed too (a rename is
durable only once its directory is)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["fsync_dir", "fsync_file", "rename_durably", "write_durably"]


def fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_durably(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` at once: a reader, or a process started
    after a crash, sees the old file or the new one, never a part."""
    temp = path.with_name(f".{path.name}.tmp")
    with open(temp, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.replace(temp, path)
    fsync_dir(path.parent)


def rename_durably(renames: list[tuple[Path, Path]]) -> None:
    """Rename each ``(source, target)`` pair, then flush the directories once."""
    for source, target in renames:
        os.replace(source, target)
    for directory in {target.parent for _, target in renames}:
        fsync_dir(directory)
