"""The Lua transitions as one Redis function library (``FUNCTION LOAD``),
called with ``FCALL``: the shared part (``lua/lib/``, in the order of
``LIB_FILES``) is defined once at load, not on every call (as it was with
``EVALSHA``: 11 of a ``get``'s 20 µs on the server). A
missing library (Redis restarted without persistence, ``FUNCTION FLUSH``) is
loaded again and the calls that found it missing are retried. No I/O here:
``run`` yields its round trips (steps.py) for a driver to make."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from importlib.resources import files
from importlib.resources.abc import Traversable
from typing import Any

from redis.exceptions import ResponseError

from chronoq.backends.redis.packing import Head, Packed
from chronoq.backends.redis.steps import Pipeline, Steps

__all__ = ["LIB_FILES", "SCRIPT_NAMES", "Scripts", "lib_source", "not_loaded"]

#: The shared part of the library, by concept, in this order: Lua locals are
#: lexically scoped, so a file uses only what the files before it define (each
#: file's header says what it uses and which Python code is its twin).
LIB_FILES = (
    "1_keys.lua",  # the call: KEYS layout, arguments, clock, begin_call
    "2_record.lua",  # the record codec (codec._record, leased_fields)
    "3_events.lua",  # packed events, flushed to the stream (codec.decode_entry)
    "4_batched.lua",  # batched writes: call_chunked, zadd_many, wake
    "5_jobs.lua",  # every access to the jobs hash
    "6_flow.lua",  # flow control: groups' turns, limits and counts
    "7_far.lua",  # the far tier: jobs due beyond the horizon, packed in time buckets
    "8_transitions.lua",  # moves shared by several functions
    "9_timer.lua",  # the reserve path's upkeep and the shard's timer
)


def _lua() -> Traversable:
    return files("chronoq.backends.redis").joinpath("lua")


#: one function per transition: each ``lua/<name>.lua`` file (a new file is a
#: new function; its header states KEYS, ARGV, the reply and the events)
SCRIPT_NAMES = tuple(
    sorted(entry.name[:-4] for entry in _lua().iterdir() if entry.name.endswith(".lua"))
)


def lib_source() -> str:
    """The shared Lua definitions: ``lua/lib/`` joined in ``LIB_FILES`` order."""
    lib = _lua().joinpath("lib")
    return "\n".join(lib.joinpath(name).read_text() for name in LIB_FILES)


def _library() -> tuple[str, str]:
    """The library's name (it carries a hash of its code, so that processes
    running different chronoq versions do not replace each other's) and source."""
    lua = _lua()
    code = lib_source() + "".join(
        f"\nlocal function body_{name}()\n"
        f"{lua.joinpath(f'{name}.lua').read_text()}"
        "end\n"
        f"redis.register_function('@_{name}', function(keys, args)\n"
        "  begin_call(keys, args)\n"
        f"  local reply = body_{name}()\n"
        "  flush_events()\n"
        "  return reply\n"
        "end)\n"
        for name in SCRIPT_NAMES
    )
    library = "chronoq_" + hashlib.sha1(code.encode()).hexdigest()[:16]
    return library, f"#!lua name={library}\n" + code.replace("'@_", f"'{library}_")


def not_loaded(reply: object) -> bool:
    """A reply saying that the node lacks chronoq's function library."""
    return isinstance(reply, ResponseError) and "Function not found" in str(reply)


class Scripts:
    """The transitions of one backend instance, each called in one round trip."""

    def __init__(self) -> None:
        self.library, self.source = _library()
        self.functions = {name: f"{self.library}_{name}" for name in SCRIPT_NAMES}

    def head(self, name: str, keys: list[str], *first: Any) -> Head:
        """The arguments every call of function ``name`` on ``keys`` starts
        with (then ``first``), packed once for all of them."""
        return Head("FCALL", self.functions[name], len(keys), *keys, *first)

    def call(self, head: Head, args: Sequence[Any]) -> Steps[Any]:
        """One call in one round trip, on the shortest path (``run`` for one
        call without ``WAIT``): a lone ``Packed`` request. Its reply; an error
        reply is raised."""
        command = Packed(head, args)
        reply = yield command
        if not_loaded(reply):  # it did not run: load the library, then call again
            [loaded] = yield Pipeline([("FUNCTION", "LOAD", "REPLACE", self.source)])
            if isinstance(loaded, Exception):
                raise loaded
            reply = yield command
        if isinstance(reply, Exception):
            raise reply
        return reply

    def run(
        self,
        name: str,
        calls: Iterable[tuple[Head, list[Any]]],
        wait: tuple[int, int] | None = None,
        on_reply: Callable[[int, Any], None] | None = None,
    ) -> Steps[tuple[list[Any], int]]:
        """Call function ``name`` once per ``(head, args)`` in ``calls`` (``head``
        from ``self.head(name, ...)``: the keys and the first arguments), in order and
        in one round trip (each call is sent as soon as ``calls`` yields it). With
        ``wait = (replicas, timeout_ms)``, then ``WAIT`` on the same connection (it
        counts the replicas that have this connection's writes). Returns the
        replies and how many replicas confirmed (0 without ``wait``).
        ``on_reply(index, reply)`` sees each call's successful reply as soon as it
        is read (a call run again after loading the library: later, out of order)."""
        commands: list[Any] = []  # Packed calls, then WAIT

        def each(index: int, reply: Any) -> None:
            not_wait = wait is None or index < len(commands) - 1
            if on_reply is not None and not_wait and not isinstance(reply, Exception):
                on_reply(index, reply)

        def sent() -> Iterator[tuple[Any, ...]]:
            for head, args in calls:
                commands.append(Packed(head, args))
                yield commands[-1]
            if wait is not None:
                commands.append(("WAIT", *wait))
                yield commands[-1]

        replies: list[Any] = yield Pipeline(sent(), each)
        missing = [n for n, reply in enumerate(replies) if not_loaded(reply)]
        if missing:
            if wait is not None:
                missing.append(len(commands) - 1)  # WAIT again, after them
            yield from self._load_and_run(commands, missing, replies, each)
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        if wait is None:
            return replies, 0
        return replies[:-1], int(replies[-1])

    def _load_and_run(
        self,
        commands: list[Any],
        missing: list[int],
        replies: list[Any],
        each: Callable[[int, Any], None],
    ) -> Steps[None]:
        """The calls at ``missing`` found no library, so did not run: load it,
        run them again in order, and put their replies in ``replies``."""
        [loaded] = yield Pipeline([("FUNCTION", "LOAD", "REPLACE", self.source)])
        if isinstance(loaded, Exception):
            raise loaded
        again = yield Pipeline([commands[n] for n in missing])
        for n, reply in zip(missing, again, strict=True):
            replies[n] = reply
            each(n, reply)
