"""Loading the Lua scripts from package data and calling them by SHA; a
``NOSCRIPT`` reply (Redis restarted, or SCRIPT FLUSH) loads them again."""

from __future__ import annotations

import hashlib
from importlib.resources import files
from typing import Any

from redis.exceptions import NoScriptError

from chronoq.backends.redis.link import Link

__all__ = ["SCRIPT_NAMES", "Scripts"]

SCRIPT_NAMES = (
    "put",
    "reserve",
    "ack",
    "nack",
    "touch",
    "bury",
    "delete",
    "reschedule",
    "requeue",
    "purge",
    "pause",
    "get",
    "stats",
    "dead",
    "release",
)


def _source(name: str) -> str:
    """The prelude, then the script's body as a function whose events are
    appended to the stream however it returns."""
    lua = files("chronoq.backends.redis").joinpath("lua")
    return (
        lua.joinpath("prelude.lua").read_text()
        + "\nlocal function body()\n"
        + lua.joinpath(f"{name}.lua").read_text()
        + "\nend\nlocal reply = body()\nflush_events()\nreturn reply\n"
    )


class Scripts:
    """The scripts of one backend instance, called by SHA, in one round trip."""

    def __init__(self) -> None:
        self.sources = {name: _source(name) for name in SCRIPT_NAMES}
        self.shas = {
            name: hashlib.sha1(src.encode()).hexdigest() for name, src in self.sources.items()
        }

    def run(
        self,
        link: Link,
        name: str,
        calls: list[tuple[list[str], list[Any]]],
        wait: tuple[int, int] | None = None,
    ) -> tuple[list[Any], int]:
        """Run script ``name`` once per ``(keys, args)`` in ``calls``, in order and in
        one round trip. With ``wait = (replicas, timeout_ms)``, then ``WAIT`` on the
        same connection (it counts the replicas that have this connection's writes).
        Returns the replies and how many replicas confirmed (0 without ``wait``)."""
        sha = self.shas[name]
        commands: list[tuple[Any, ...]] = [
            ("EVALSHA", sha, len(keys), *keys, *args) for keys, args in calls
        ]
        if wait is not None:
            commands.append(("WAIT", *wait))
        replies = link.pipeline(commands, raise_on_error=False)
        missing = [n for n, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
        if missing:  # those did not run: load the script, run them again in order
            link.call("SCRIPT", "LOAD", self.sources[name])
            if wait is not None:
                missing.append(len(commands) - 1)  # WAIT again, after them
            again = link.pipeline([commands[n] for n in missing], raise_on_error=False)
            for n, reply in zip(missing, again, strict=True):
                replies[n] = reply
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        if wait is None:
            return replies, 0
        return replies[:-1], int(replies[-1])
