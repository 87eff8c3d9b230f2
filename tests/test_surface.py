"""The four facades offer one set of operations (``chronoq.calls.surface``):
``Queue``, ``AsyncQueue``, ``chronoq.http.Client`` and ``AsyncClient`` have
the same operations with the same parameters and defaults, except for the
differences written down here, each with its reason."""

from __future__ import annotations

import asyncio
import functools
import inspect
import re
from pathlib import Path
from typing import Any

import pytest

import chronoq
import chronoq.aio
from chronoq.aio import AsyncQueue
from chronoq.backends.base import AsyncBackend, Backend
from chronoq.calls.call import Op
from chronoq.http import AsyncClient, Client
from chronoq.http.ops import served
from chronoq.queue import Queue

FACADES: dict[str, type[Any]] = {
    "Queue": Queue,
    "AsyncQueue": AsyncQueue,
    "Client": Client,
    "AsyncClient": AsyncClient,
}
ASYNC = {"AsyncQueue", "AsyncClient"}
STORES = {"Queue", "AsyncQueue"}
CLIENTS = {"Client", "AsyncClient"}

# The intended differences: a name offered by only some facades, and why.
ONLY: dict[str, tuple[set[str], str]] = {
    **{
        name: (STORES, "the HTTP API serves no event log: chronoq export reads it from the store")
        for name in ("events", "log_shards", "log_read", "log_head", "log_trim")
    },
    "jobs": (STORES, "bulk reads of a shard (export, Spark) go to the store, not over HTTP"),
    **{
        name: (STORES, "recurring jobs are defined by the code that runs the workers")
        for name in ("recurring", "recurring_list", "recurring_remove", "run_recurring")
    },
    "watch": (STORES, "a watcher of the store, for a consumer with its own wait loop"),
    "reserve_once": (STORES, "one attempt with a store watcher; over HTTP reserve long-polls"),
    "watch_topics": ({"AsyncQueue"}, "one wait over several topics: the server's pop"),
    "wait_for_jobs": ({"AsyncQueue"}, "the worker's wait between attempts, to the tick"),
    "from_queue": ({"AsyncQueue"}, "an asyncio facade on a blocking queue's store"),
    "backend": (STORES, "the store itself"),
    "max_payload": (STORES, "the store's payload limit (over HTTP, the server's)"),
    "backoff": (STORES, "a nack's default backoff (over HTTP, the server's)"),
    "shards": (STORES, "how the store spreads a topic"),
    "shard_of": (STORES, "where the store keeps an id"),
    "settings": (CLIENTS, "timeouts, retries, long poll and batch size of the HTTP client"),
}
# the same name on every facade that is not an operation
PLUMBING = {"url", "close"}


def _instance(facade: str) -> Any:
    """A facade, on an in-memory store or a server that is never asked."""
    if facade == "Queue":
        return chronoq.connect("sqlite://:memory:")
    if facade == "AsyncQueue":
        return chronoq.aio.connect("sqlite://:memory:")
    return FACADES[facade]("http://127.0.0.1:9")


def _close(instance: Any) -> None:
    closing = instance.close()
    if inspect.iscoroutine(closing):
        asyncio.run(closing)


@functools.cache
def _public(cls: type[Any]) -> set[str]:
    """Its methods and properties, and the attributes an instance sets."""
    facade = next(name for name, each in FACADES.items() if each is cls)
    instance = _instance(facade)
    try:
        return {name for name in dir(instance) if not name.startswith("_")}
    finally:
        _close(instance)


def _op(cls: type[Any], name: str) -> Op[Any, Any] | None:
    """The operation a facade's method is made from (``Op.as_method``)."""
    op = getattr(inspect.getattr_static(cls, name, None), "op", None)
    return op if isinstance(op, Op) else None


def _operations(cls: type[Any]) -> set[str]:
    return {name for name in _public(cls) if _op(cls, name) is not None}


def _signature(cls: type[Any], name: str) -> inspect.Signature:
    found = inspect.getattr_static(cls, name)
    function = found.__func__ if isinstance(found, classmethod | staticmethod) else found
    signature = inspect.signature(function)
    return signature.replace(parameters=list(signature.parameters.values())[1:])


def _shape(signature: inspect.Signature) -> list[tuple[str, object, object]]:
    """Names, kinds and defaults: annotations may differ (a blocking or an
    asyncio watcher)."""
    return [(p.name, p.kind, p.default) for p in signature.parameters.values()]


@pytest.mark.parametrize("facade", FACADES)
def test_each_facade_offers_the_common_operations_and_its_listed_extras(facade: str) -> None:
    expected = set(PLUMBING) | {name for name, (who, _) in ONLY.items() if facade in who}
    expected |= _operations(Client)  # what every facade offers
    assert _public(FACADES[facade]) == expected


def test_every_difference_is_offered_by_some_facade_and_not_by_all() -> None:
    for name, (who, reason) in ONLY.items():
        assert who and who != set(FACADES), name
        assert reason
        for facade in who:
            assert name in _public(FACADES[facade]), (facade, name)


def test_the_common_operations_are_the_surface_defined_once() -> None:
    common = set.intersection(*(_operations(cls) for cls in FACADES.values()))
    assert common == _operations(Client) == _operations(AsyncClient)
    assert {"put", "put_many", "reserve", "ack", "nack", "get", "stats"} <= common
    for name in common:
        ops = {_op(cls, name) for cls in FACADES.values()}
        assert len(ops) == 1, f"{name} is defined more than once"


def test_every_operation_of_the_clients_has_its_requests() -> None:
    for name in _operations(Client):
        op = _op(Client, name)
        assert op is not None and isinstance(op.make, type) and served(op.make), name


@pytest.mark.parametrize(
    "name", sorted(set().union(*(_public(cls) for cls in FACADES.values())) - {"backend"})
)
def test_a_name_has_the_same_parameters_and_defaults_wherever_it_is_offered(name: str) -> None:
    where = {facade: cls for facade, cls in FACADES.items() if name in _public(cls)}
    attributes = [inspect.getattr_static(cls, name, None) for cls in where.values()]
    if not all(callable(found) for found in attributes):
        return  # a property or an instance's attribute
    shapes = {facade: _shape(_signature(cls, name)) for facade, cls in where.items()}
    first = next(iter(shapes.values()))
    assert all(shape == first for shape in shapes.values()), shapes


@pytest.mark.parametrize("facade", FACADES)
def test_asyncio_facades_answer_with_coroutines_and_blocking_ones_do_not(facade: str) -> None:
    cls = FACADES[facade]
    instance = _instance(facade)
    try:
        for name in _operations(cls) | {"close"} | ({"watch", "reserve_once"} & _public(cls)):
            method = getattr(instance, name)
            is_async = inspect.iscoroutinefunction(method)
            assert is_async == (facade in ASYNC), name
            assert method.__doc__, f"{facade}.{name} has no docstring"
            assert method.__qualname__ == f"{facade}.{name}"
    finally:
        _close(instance)


def test_each_backend_step_of_an_operation_is_a_method_of_both_backend_contracts() -> None:
    source = "".join(path.read_text() for path in Path(inspect.getfile(Op)).parent.glob("*.py"))
    names = set(re.findall(r'(?:Use\(\s*|method = )"(\w+)"', source))
    assert {"put_many", "reserve", "ack_many", "schedules_mark", "release", "bury"} <= names
    for name in names:
        assert name in Backend.__abstractmethods__, name
        assert name in AsyncBackend.__abstractmethods__, name


def test_a_subclass_overrides_an_operation_and_reaches_the_base_by_super() -> None:
    calls: list[str] = []

    class Logged(Queue):
        def stats(self, topic: str, *, per_shard: bool = False) -> dict[str, Any]:
            calls.append(topic)
            return super().stats(topic, per_shard=per_shard)

    with chronoq.connect("sqlite://:memory:") as plain:
        queue = Logged(plain.backend)
        for _ in range(3):
            assert queue.stats("t")["total"] == 0
        assert Queue.stats(queue, "t")["total"] == 0  # called on the class, as any method
    assert calls == ["t", "t", "t"]  # the override each time, not a cached base method


def test_an_operation_is_a_method_of_the_class_with_its_signature_and_doc() -> None:
    assert inspect.signature(Queue.put).parameters["topic"].default is inspect.Parameter.empty
    assert list(inspect.signature(Queue.put).parameters)[:2] == ["self", "topic"]
    assert Queue.put.__doc__ == AsyncClient.put.__doc__ and Queue.put.__doc__
    assert Queue.put.__qualname__ == "Queue.put"


@pytest.mark.parametrize("facade", FACADES)
def test_each_operation_binds_its_arguments_to_its_own_parameters(facade: str) -> None:
    """The signatures compared above are the calls'; this checks that each
    facade's method really binds its arguments to them: a keyword the
    operation lacks is a TypeError, raised before anything is sent."""
    instance = _instance(facade)
    try:
        for name in _operations(FACADES[facade]):
            with pytest.raises(TypeError, match=r"no_such_parameter|takes no arguments"):
                answer = getattr(instance, name)(no_such_parameter=1)
                if inspect.iscoroutine(answer):
                    asyncio.run(answer)
    finally:
        _close(instance)
