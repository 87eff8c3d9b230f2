"""Flow control on the Redis backend (docs/contract.md §10): not built yet.

Until it is, a Redis store holds no limits and no paused group: setting
either is refused with ``InvalidInput`` (a clear error, never a limit
silently not enforced), and jobs with a group are handed out in the order
of a topic without groups. operations.py finds these functions here."""

from __future__ import annotations

from chronoq.backends.redis.core import RedisCore
from chronoq.backends.redis.steps import Steps
from chronoq.errors import InvalidInput
from chronoq.limits import Limits, Rule

__all__ = ["clear_limits", "limits", "set_group_paused", "set_limits"]

NOT_YET = (
    "limits and paused groups are not yet served by the Redis backend (issue 28 builds "
    "them store by store; the SQLite store has them): nothing was changed"
)


def limits(core: RedisCore, topic: str) -> Steps[Limits]:
    return Limits(topic)  # none can be set yet
    yield  # a generator that takes no step


def set_limits(
    core: RedisCore, topic: str, group: str | None, given: Rule, defaults: Rule
) -> Steps[Limits]:
    raise InvalidInput(NOT_YET)
    yield


def clear_limits(core: RedisCore, topic: str, group: str | None) -> Steps[Limits]:
    return Limits(topic)
    yield


def set_group_paused(core: RedisCore, topic: str, group: str, paused: bool) -> Steps[None]:
    raise InvalidInput(NOT_YET)
    yield
