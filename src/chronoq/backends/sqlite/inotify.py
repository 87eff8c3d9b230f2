"""Linux's inotify, through ctypes (no dependency): a descriptor that an
event loop can wait on, readable when a file of one directory is written.
Waiters of a SQLite store use it to learn of another process's commit
without reading the database every few ms."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import struct
import sys

__all__ = ["DirectoryWatch"]

_IN_MODIFY = 0x00000002
_IN_CREATE = 0x00000100
_IN_MOVED_TO = 0x00000080
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len; then len bytes of name


class DirectoryWatch:
    """Writes to the files ``names`` of ``directory``; ``open`` answers None
    where inotify is not to be had (not Linux, no libc, out of watches)."""

    def __init__(self, fd: int, names: frozenset[bytes]) -> None:
        self._fd = fd
        self._names = names

    @classmethod
    def open(cls, directory: str, names: list[str]) -> DirectoryWatch | None:
        if not sys.platform.startswith("linux"):
            return None
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
            fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
            if fd < 0:
                return None
            mask = _IN_MODIFY | _IN_CREATE | _IN_MOVED_TO
            if libc.inotify_add_watch(fd, os.fsencode(directory), mask) < 0:
                os.close(fd)
                return None
        except (OSError, AttributeError):
            return None
        return cls(fd, frozenset(os.fsencode(name) for name in names))

    def fileno(self) -> int:
        return self._fd

    def drain(self) -> bool:
        """Read the pending events; True when one was about a watched file."""
        hit = False
        while True:
            try:
                data = os.read(self._fd, 65536)
            except BlockingIOError:
                return hit
            if not data:
                return hit
            at = 0
            while at + _EVENT.size <= len(data):
                _, _, _, length = _EVENT.unpack_from(data, at)
                name = data[at + _EVENT.size : at + _EVENT.size + length].rstrip(b"\0")
                hit = hit or name in self._names
                at += _EVENT.size + length

    def close(self) -> None:
        os.close(self._fd)
