"""Function calls packed for the wire once per shard, not once per call.

Every call of a chronoq function starts with the same arguments for a shard:
``FCALL <function> 16 <the shard's 16 keys> <event cap:horizon:bucket width>``.
redis-py packed those 20 arguments again on every call (a third of a single put's client
time); a ``Head`` holds them packed, and a ``Packed`` call adds only its own
arguments. A cluster link routes by key, so it asks for the arguments back
(``as_tuple``) and packs them the usual way. No I/O here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

_hiredis_pack: Callable[[tuple[Any, ...]], bytes] | None
try:  # the redis extra installs hiredis; its packer is C
    from hiredis import pack_command as _hiredis_pack
except ImportError:  # pragma: no cover - exercised only without hiredis
    _hiredis_pack = None

__all__ = ["Head", "Packed", "Wired", "pack_args", "unpacked"]


def _arg(value: Any) -> bytes:
    if type(value) is bytes:
        data = value
    elif type(value) is str:
        data = value.encode()
    elif type(value) is int or type(value) is float:
        data = repr(value).encode()
    elif isinstance(value, bytes | bytearray | memoryview):
        data = bytes(value)
    else:
        raise TypeError(f"cannot send {type(value).__name__} to Redis: {value!r}")
    return b"$%d\r\n%s\r\n" % (len(data), data)


def pack_args(args: Sequence[Any]) -> bytes:
    """The RESP bulk strings of ``args``, without the array header."""
    if _hiredis_pack is not None and len(args) > 2:
        packed: bytes = _hiredis_pack(tuple(args))
        return packed[packed.index(b"\n") + 1 :]  # after "*<count>\r\n"
    return b"".join(map(_arg, args))


class Head:
    """The first arguments of many calls, packed once."""

    __slots__ = ("args", "data")

    def __init__(self, *args: Any) -> None:
        self.args = args
        self.data = pack_args(args)

    def __repr__(self) -> str:
        return f"Head{self.args!r}"


class Packed:
    """One command: a ``Head`` and the call's own arguments."""

    __slots__ = ("args", "head")

    def __init__(self, head: Head, args: Sequence[Any]) -> None:
        self.head = head
        self.args = args

    def wire(self) -> bytes:
        """The command as Redis reads it (RESP)."""
        count = len(self.head.args) + len(self.args)
        return b"*%d\r\n%s%s" % (count, self.head.data, pack_args(self.args))

    def as_tuple(self) -> tuple[Any, ...]:
        return (*self.head.args, *self.args)

    def __repr__(self) -> str:
        return f"Packed{self.as_tuple()!r}"


#: a command as the links take it: its arguments, or packed
Wired: TypeAlias = "tuple[Any, ...] | Packed"


def unpacked(commands: Sequence[Wired]) -> list[tuple[Any, ...]]:
    """Commands as argument tuples (what a cluster link routes)."""
    return [c.as_tuple() if isinstance(c, Packed) else c for c in commands]
