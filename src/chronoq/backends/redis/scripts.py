"""Loading the Lua scripts from package data and calling them by SHA; a
``NOSCRIPT`` reply (Redis restarted, or SCRIPT FLUSH) loads them again."""

from __future__ import annotations

import hashlib
from importlib.resources import files
from typing import Any

import redis
from redis.exceptions import NoScriptError

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
)


def _source(name: str) -> str:
    lua = files("chronoq.backends.redis").joinpath("lua")
    return lua.joinpath("prelude.lua").read_text() + "\n" + lua.joinpath(f"{name}.lua").read_text()


class Scripts:
    """The scripts of one backend instance, each run in one round trip."""

    def __init__(self) -> None:
        self.sources = {name: _source(name) for name in SCRIPT_NAMES}
        self.shas = {
            name: hashlib.sha1(src.encode()).hexdigest() for name, src in self.sources.items()
        }

    def call(self, client: redis.Redis, name: str, keys: list[str], args: list[Any]) -> Any:
        try:
            return client.evalsha(self.shas[name], len(keys), *keys, *args)
        except NoScriptError:
            client.script_load(self.sources[name])
            return client.evalsha(self.shas[name], len(keys), *keys, *args)

    def call_and_wait(
        self,
        client: redis.Redis,
        name: str,
        keys: list[str],
        args: list[Any],
        replicas: int,
        timeout_ms: int,
    ) -> tuple[Any, int]:
        """Run a script, then ``WAIT replicas timeout_ms`` on the same connection
        (WAIT counts the replicas that have this connection's writes), in one
        round trip. Returns the script's reply and how many replicas confirmed."""
        for attempt in (1, 2):
            pipe = client.pipeline(transaction=False)
            pipe.evalsha(self.shas[name], len(keys), *keys, *args)
            pipe.execute_command("WAIT", replicas, timeout_ms)
            reply, confirmed = pipe.execute(raise_on_error=False)
            if isinstance(reply, NoScriptError) and attempt == 1:
                client.script_load(self.sources[name])
                continue
            if isinstance(reply, Exception):
                raise reply
            if isinstance(confirmed, Exception):
                raise confirmed
            return reply, int(confirmed)
        raise AssertionError("unreachable")
