"""What ``Queue`` and ``AsyncQueue`` share besides their operations: the
store they run on and its settings."""

from __future__ import annotations

from typing import Generic, TypeVar

from chronoq.backends.base import AsyncBackend, Backend
from chronoq.backoff import Backoff
from chronoq.calls.surface import StoreOperations
from chronoq.job import shard_of

__all__ = ["OnStore"]

B = TypeVar("B", Backend, AsyncBackend)


class OnStore(StoreOperations, Generic[B]):
    """A facade on ``backend``: ``max_payload`` is the largest payload a put
    takes (bytes, encoded); ``backoff`` the delays of a nack without one."""

    def __init__(self, backend: B, *, max_payload: int, backoff: Backoff | None) -> None:
        self.backend: B = backend
        self.max_payload = max_payload
        self.backoff = backoff or Backoff()

    @property
    def url(self) -> str:
        """The store URL, without any password."""
        return self.backend.url

    @property
    def shards(self) -> int:
        """How many shards the store spreads a topic's jobs over (SQLite: 1)."""
        return self.backend.shards

    def shard_of(self, job_id: str) -> int:
        """The shard a job of this id is kept in (docs/contract.md §2: jobs
        are ordered within a shard)."""
        return shard_of(job_id, self.backend.shards)
