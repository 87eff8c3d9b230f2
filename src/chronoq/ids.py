"""Generated job ids: 26-character ULIDs, sortable by creation time."""

from __future__ import annotations

import os
import threading
import time

__all__ = ["encode", "new_id"]

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # Crockford base32: no I, L, O, U
# Two digits per lookup (10 bits): ids are made on the put path, so this is hot.
_PAIRS = [a + b for a in _ALPHABET for b in _ALPHABET]
_RANDOM_BITS = 80


def _pairs(value: int, count: int) -> str:
    p = _PAIRS
    return "".join([p[(value >> (10 * i)) & 1023] for i in range(count - 1, -1, -1)])


def encode(value: int) -> str:
    """A 128-bit value as 26 Crockford base32 digits, most significant first."""
    return _pairs(value >> _RANDOM_BITS, 5) + _pairs(value, 8)


class _UlidClock:
    """Monotonic within a process: ids made in the same millisecond increase,
    so put order and id order agree for one producer."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_ms = -1
        self._last_rand = 0
        self._prefix = ""

    def next(self) -> str:
        with self._lock:
            ms = time.time_ns() // 1_000_000
            if ms <= self._last_ms:
                rand = self._last_rand + 1
                if rand >> _RANDOM_BITS:  # 2**79 ids in one ms: borrow the next ms
                    ms = self._last_ms + 1
                    rand = int.from_bytes(os.urandom(10), "big") >> 1
                else:
                    ms = self._last_ms
            else:
                rand = int.from_bytes(os.urandom(10), "big") >> 1  # headroom to increment
            if ms != self._last_ms:
                self._prefix = _pairs(ms, 5)
            self._last_ms, self._last_rand = ms, rand
            return self._prefix + _pairs(rand, 8)


_clock = _UlidClock()


def new_id() -> str:
    """A new ULID: 48 bits of ms timestamp then 80 random bits, Crockford base32."""
    return _clock.next()
