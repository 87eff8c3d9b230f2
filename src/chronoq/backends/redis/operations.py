"""Where the two Redis drivers find each operation of the Backend contract:
written once, without I/O, as a method of ``RedisCore`` (core.py) or a
function of logs.py, schedules.py, topicwide.py or flow.py, each taking the core first and yielding
its round trips (steps.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from chronoq.backends.redis import flow, logs, schedules, topicwide
from chronoq.backends.redis.core import RedisCore
from chronoq.backends.redis.steps import Steps

__all__ = ["operation"]


def operation(name: str) -> Callable[..., Steps[Any]]:
    """The operation ``name``, called as ``operation(name)(core, *args)``:
    a method defined by ``RedisCore`` itself, or a function that logs.py,
    schedules.py, topicwide.py or flow.py exports (never a helper or an imported name)."""
    found = RedisCore.__dict__.get(name)
    for module in (logs, schedules, topicwide, flow):
        if found is None and name in module.__all__:
            found = getattr(module, name)
    if callable(found):
        return found  # type: ignore[no-any-return]
    raise TypeError(
        f"the Redis backend has no operation {name!r}: write it as a method of RedisCore"
    )
