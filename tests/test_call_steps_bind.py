"""Each operation's backend steps fit the backend contract they name.

A call hands its facade ``Use(name, args)``: positional arguments for
``Backend.name`` (or ``AsyncBackend.name``). A swapped or missing argument
would reach the store unnoticed wherever the two have the same arity and
duck-compatible types; here every operation of ``Queue`` and ``AsyncQueue``
runs on a real SQLite store whose backend first binds each call's arguments
to the contract's signature and checks them against its annotations."""

from __future__ import annotations

import asyncio
import inspect
import re
import time
import types
import typing
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest

import chronoq
import chronoq.aio
from chronoq import Job
from chronoq.aio import AsyncQueue
from chronoq.backends.base import AsyncBackend, Backend
from chronoq.calls.call import Call, Op
from chronoq.calls.surface import StoreOperations
from chronoq.queue import Queue


def conforms(value: object, hint: Any) -> bool:
    """Whether ``value`` is of the annotated type, as far as a runtime check
    can tell (protocols and callables only by being callable or present)."""
    if hint is Any or isinstance(hint, typing.TypeVar):
        return True
    if hint is None or hint is type(None):
        return value is None
    origin = typing.get_origin(hint)
    arguments = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(conforms(value, each) for each in arguments)
    if origin is typing.Literal:
        return value in arguments
    if origin is not None and issubclass(origin, Callable):  # type: ignore[arg-type]
        return callable(value)
    if origin is tuple:
        if not isinstance(value, tuple):
            return False
        if len(arguments) == 2 and arguments[1] is Ellipsis:
            return all(conforms(each, arguments[0]) for each in value)
        return len(value) == len(arguments) and all(map(conforms, value, arguments))
    if origin in (list, Sequence, Iterable):
        return isinstance(value, origin) and all(conforms(each, arguments[0]) for each in value)
    return isinstance(value, origin) if origin is not None else _is_a(value, hint)


def _is_a(value: object, cls: type[Any]) -> bool:
    if isinstance(value, bool):  # an int to Python, never meant for one here
        return cls is bool or cls is object
    if cls is float:  # PEP 484: an int is a float
        return isinstance(value, int | float)
    return isinstance(value, cls)


class Checking:
    """A real backend, whose methods first hold their arguments to the
    contract's (``Backend`` or ``AsyncBackend``) signature and annotations."""

    def __init__(self, backend: Any, contract: type[Any]) -> None:
        self._backend = backend
        self._contract = contract
        self.used: set[str] = set()

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._backend, name)
        if name not in self._contract.__abstractmethods__:
            return found
        declared = getattr(self._contract, name)
        signature = inspect.signature(declared)
        hints = typing.get_type_hints(declared)

        def checked(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(self._backend, *args, **kwargs)
            for parameter, value in list(bound.arguments.items())[1:]:
                assert conforms(value, hints[parameter]), (
                    f"{self._contract.__name__}.{name}: {parameter}={value!r} "
                    f"is not {hints[parameter]}"
                )
            self.used.add(name)
            return found(*args, **kwargs)

        return checked


def _every_call() -> set[type[Call[Any]]]:
    return {
        op.make
        for cls in StoreOperations.__mro__
        for op in vars(cls).values()
        if isinstance(op, Op) and isinstance(op.make, type)
    }


def _named_by_calls() -> set[str]:
    """The backend methods the calls' steps name (``Use("name", …)``)."""
    source = "".join(path.read_text() for path in Path(inspect.getfile(Op)).parent.glob("*.py"))
    return set(re.findall(r'(?:Use\(\s*|method = )"(\w+)"', source)) | {"reserve"}


def _workload(run: Callable[..., Any]) -> None:
    """Every operation of a store's facade, once at least, in an order that
    gives each one something to act on."""
    run("put", "t", {"n": 1}, id="a", priority=3, ttr=5.0, max_attempts=2, unique_for=60.0)
    run("put", "t", b"raw", delay=0.0, id="b")
    run("put", "t", None, run_at=1.0, id="c", replace=True)
    run("put_many", "t", [Job({"n": 2}, id="d"), Job("e", delay=3600.0, id="e")], replace=False)
    assert run("get", "t", "a") is not None
    assert run("reschedule", "t", "e", delay=7200.0)
    assert run("reschedule", "t", "e", run_at=1.0)
    held = run("reserve", "t", 3, wait=0.0, ttr=10.0)
    assert len(held) == 3
    assert run("touch", held[0], ttr=20.0)
    run("ack", held[0])
    run("nack", held[1], delay=0.0, error=RuntimeError("once"))
    run("release", held[2], error="later")
    again = run("reserve", "t", 5, wait=0.1)  # the nacked, the released, two more
    assert len(again) == 4
    run("ack_many", again[:1])
    run("bury", again[1], error="poison")
    run("ack", again[2].topic, again[2].id, again[2].lease)
    run("bury", again[3], error=None)
    assert run("dead", "t", 10)
    assert run("requeue", "t", None) >= 1
    run("requeue", "t", ["nope"])
    run("pause", "t")
    run("resume", "t")
    run("pause", "t", group="g")
    run("resume", "t", group="g")
    assert run("set_limits", "t", rate=1000.0, group_concurrency=5).default.concurrency == 5
    assert run("set_limits", "t", group="g", concurrency=2).groups["g"].concurrency == 2
    assert run("limits", "t").topic_rule.rate == 1000.0
    assert not run("clear_limits", "t", group="g").groups
    assert run("clear_limits", "t").empty
    assert run("stats", "t", per_shard=True, groups=True)
    assert run("forecast", "t", until=time.time() + 7200.0, step=1800.0).counts
    assert "t" in run("topics")
    run("events", "t", cursor=None, limit=5)
    run("jobs", "t", shard=0, cursor=None, limit=5)
    shards = run("log_shards", None)  # every topic's: a SQLite log is trimmed whole
    assert shards
    head = run("log_head", shards[0])
    assert run("log_read", shards[0], 0, limit=10).events
    run("log_trim", shards[0], head // 2)
    run("recurring", "r", name="tick", every=60.0, payload={"k": 1})
    run("recurring", "r", name="daily", cron="0 3 * * *", tz="Europe/Paris")
    assert len(run("recurring_list", "r")) == 2
    run("recurring", "r", name="fast", every=0.05)
    time.sleep(0.1)  # an occurrence falls due: the run puts it and marks it
    assert run("run_recurring", "r").put
    assert run("recurring_remove", "r", "tick")
    assert run("delete", "t", "a") in (True, False)
    assert run("purge", "t") >= 0


def test_every_store_operation_is_in_the_workload() -> None:
    """So that the two tests below reach every call's steps."""
    seen: set[type[Call[Any]]] = set()

    class Recording(Queue):
        def _perform(self, call: Call[Any]) -> Any:
            seen.add(type(call))
            return super()._perform(call)

    with chronoq.connect("sqlite://:memory:") as plain:
        queue = Recording(plain.backend)
        _workload(lambda op, /, *a, **k: getattr(queue, op)(*a, **k))
    assert seen == _every_call()


def test_queue_steps_bind_to_the_backend_contract(tmp_path: Path) -> None:
    with chronoq.connect(f"sqlite:///{tmp_path / 'q.db'}") as plain:
        backend = Checking(plain.backend, Backend)
        queue = Queue(backend)  # type: ignore[arg-type]
        _workload(lambda op, /, *a, **k: getattr(queue, op)(*a, **k))
    assert backend.used == _named_by_calls()


def test_async_queue_steps_bind_to_the_backend_contract(tmp_path: Path) -> None:
    loop = asyncio.new_event_loop()
    try:
        real = chronoq.aio.connect(f"sqlite:///{tmp_path / 'q.db'}")
        backend = Checking(real.backend, AsyncBackend)
        queue = AsyncQueue(backend)  # type: ignore[arg-type]
        _workload(lambda op, /, *a, **k: loop.run_until_complete(getattr(queue, op)(*a, **k)))
        loop.run_until_complete(real.close())
    finally:
        loop.close()
    assert backend.used == _named_by_calls()


@pytest.mark.parametrize(
    ("value", "hint", "fits"),
    [
        (1, int, True),
        (True, int, False),
        (1, float, True),
        ("1", int, False),
        (None, int | None, True),
        (["a"], Sequence[str], True),
        ([1], Sequence[str], False),
        ((1, "a"), tuple[int, str], True),
        (("a", 1), tuple[int, str], False),
    ],
)
def test_the_check_itself_tells_a_wrong_argument(value: object, hint: Any, fits: bool) -> None:
    assert conforms(value, hint) is fits
