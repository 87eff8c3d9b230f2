"""The store calls of a push by id (server/byid.py), counted on a real store:
a new id's entry is created with no read before it, and its entry and job
go through the grouped puts."""

from __future__ import annotations

import asyncio
from typing import Any

import chronoq.aio
from chronoq.server.compat.byid import BYID_TOPIC, IdJobs
from chronoq.server.longpoll import LongPolls
from chronoq.server.metrics import Metrics


def _counting(q: chronoq.aio.AsyncQueue, calls: list[str]) -> None:
    """Each call of the queue's store operations that a push may use, named
    in ``calls`` (with the topic of a put) as it is made."""
    for name in ("get", "put", "put_many", "delete"):
        original = getattr(q, name)

        def counted(*args: Any, _name: str = name, _original: Any = original, **kw: Any) -> Any:
            calls.append(f"{_name} {args[0]}" if _name.startswith("put") else _name)
            return _original(*args, **kw)

        setattr(q, name, counted)


def test_the_store_calls_of_a_push(store_url: str) -> None:
    async def main() -> None:
        q = chronoq.aio.connect(store_url)
        polls = LongPolls(q)
        try:
            jobs = IdJobs(q, polls, Metrics())
            calls: list[str] = []
            _counting(q, calls)
            await jobs.push("t", "new", "one", delay=60, ttr=30)
            # create the entry, put the job, read the entry back
            assert calls == [f"put_many {BYID_TOPIC}", "put_many t", "get"]
            calls.clear()
            await jobs.push("t", "new", "two", delay=60, ttr=30)
            # the create finds the entry: read it, put, read back
            assert calls == [f"put_many {BYID_TOPIC}", "get", "put_many t", "get"]
            info = await q.get("t", "new")
            assert info is not None and info.payload == "two"
        finally:
            await polls.close()
            await q.close()

    asyncio.run(main())
