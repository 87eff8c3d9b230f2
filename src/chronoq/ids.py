"""Generated job ids: 26-character ULIDs, sortable by creation time."""

from __future__ import annotations

import itertools
import os
import threading
import time

__all__ = ["encode", "new_id"]

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # Crockford base32: no I, L, O, U
_RANDOM_BITS = 80
_PREFIX_DIGITS = 10  # the 48-bit timestamp, as 50 bits
# A byte holding a 5-bit value, 0-31, to its digit (bytes.translate, all in C).
_DIGIT_OF = bytes.maketrans(bytes(range(32)), _ALPHABET.encode())
# A digit to the one after it: adding 1 to an id text needs no int unless it
# ends in Z. "Z" is left out on purpose.
_SUCCESSOR = dict(itertools.pairwise(_ALPHABET))
# Crockford digits to the ones int(..., 32) reads.
_TO_BASE32 = str.maketrans(_ALPHABET[10:], "abcdefghijklmnopqrstuv")


def _lanes(width: int, lane: int, count: int) -> int:
    """A mask of the low ``width`` bits of each of ``count`` lanes of ``lane`` bits."""
    return sum(((1 << width) - 1) << (lane * i) for i in range(count))


# encode spreads the 26 five-bit digits of a value to one byte each with a few
# big-int operations, rather than looking them up one pair at a time: each step
# moves the upper half of every lane up to the next lane, 80 bits into 128-bit
# lanes, then 40 into 64, 20 into 32, 10 into 16, 5 into 8. ``x + (x & high) *
# (2**shift - 1)`` is ``(x & low) | (x & high) << shift``, one operation less.
_MASK_130 = (1 << 130) - 1  # 26 digits; a wider value keeps its low 130 bits
_HIGH_80 = _lanes(80, 160, 1) << 80
_HIGH_40 = _lanes(40, 128, 2) << 40
_HIGH_20 = _lanes(20, 64, 4) << 20
_HIGH_10 = _lanes(10, 32, 8) << 10
_HIGH_5 = _lanes(5, 16, 16) << 5


def encode(value: int) -> str:
    """A 128-bit value as 26 Crockford base32 digits, most significant first."""
    x = value & _MASK_130
    x += (x & _HIGH_80) * ((1 << 48) - 1)
    x += (x & _HIGH_40) * ((1 << 24) - 1)
    x += (x & _HIGH_20) * ((1 << 12) - 1)
    x += (x & _HIGH_10) * ((1 << 6) - 1)
    x += (x & _HIGH_5) * ((1 << 3) - 1)
    return x.to_bytes(26, "big").translate(_DIGIT_OF).decode()


class _Clock:
    """The state behind new_id: the ms of the last id and its digits.

    The random part is kept as its 16 digits: within a millisecond the next id
    is the last one plus 1, which is a change of the last digit 31 times in 32.
    """

    __slots__ = ("lock", "ms", "prefix", "rand")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ms = -1
        self.prefix = ""  # the digits of ms
        self.rand = ""  # the digits of the random part of the last id

    def start(self, ms: int) -> None:
        """A fresh random part in ``ms``."""
        rand = int.from_bytes(os.urandom(10), "big") >> 1  # headroom to increment
        digits = encode(ms << _RANDOM_BITS | rand)
        self.ms = ms
        self.prefix = digits[:_PREFIX_DIGITS]
        self.rand = digits[_PREFIX_DIGITS:]

    def carry(self) -> None:
        """The random part plus 1 when its last digit is Z."""
        rand = int(self.rand.translate(_TO_BASE32), 32) + 1
        if rand >> _RANDOM_BITS:  # 2**79 ids in one ms: borrow the next ms
            self.start(self.ms + 1)
        else:
            self.rand = encode(rand)[_PREFIX_DIGITS:]


_clock = _Clock()


def _forget_in_child() -> None:
    """A forked child starts a fresh random part: counting on from the parent's
    last id would make the same ids as the parent in the same millisecond (a
    generated id skips the duplicate check: one put would replace the other)."""
    global _clock
    _clock = _Clock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)


def new_id() -> str:
    """A new ULID: 48 bits of ms timestamp then 80 random bits, Crockford base32.

    Monotonic within a process: ids made in the same millisecond increase, so
    put order and id order agree for one producer."""
    clock = _clock
    # acquire/release, not ``with``: half the cost, and this runs once per put
    clock.lock.acquire()
    try:
        ms = time.time_ns() // 1_000_000
        if ms > clock.ms:
            clock.start(ms)
        else:  # the same ms, or the clock went back: count up from the last id
            rand = clock.rand
            successor = _SUCCESSOR.get(rand[-1])
            if successor is None:
                clock.carry()
            else:
                clock.rand = rand[:-1] + successor
        return clock.prefix + clock.rand
    finally:
        clock.lock.release()
