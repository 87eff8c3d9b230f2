"""Reading in bulk, for ``chronoq export`` and the Spark pipeline: the jobs
of a shard, page by page, and the event log shard by shard."""

from __future__ import annotations

from chronoq.calls.call import Call, StoreSide, Use
from chronoq.calls.checks import SEQ_BEYOND, check_limit, jobs_args, log_shard_arg, seq_arg
from chronoq.job import JobPage, LogRead, LogShard, validate_topic

__all__ = ["Jobs", "LogHead", "LogShards", "LogTrim", "ReadLog"]


class Jobs(Call[JobPage]):
    """A page of the jobs of one shard of the topic, in no set order; pass
    ``page.cursor`` back for the next (None: that was the last). A job
    there for the whole scan is in some page, maybe twice on Redis; one
    that moves meanwhile may be missed."""

    __slots__ = ("cursor", "limit", "shard", "topic")

    def __init__(
        self, topic: str, *, shard: int = 0, cursor: str | None = None, limit: int = 1000
    ) -> None:
        jobs_args(shard, cursor, limit)
        self.topic = validate_topic(topic)
        self.shard = shard
        self.cursor = cursor
        self.limit = limit

    def store(self, side: StoreSide) -> Use:
        return Use("jobs", (self.topic, self.shard, self.cursor, self.limit))


class LogShards(Call[list[LogShard]]):
    """The separately numbered parts of the event log (docs/contract.md §7)
    that hold the events of ``topic`` (None: every topic): one for SQLite,
    one per topic and shard for Redis."""

    __slots__ = ("topic",)

    def __init__(self, topic: str | None = None) -> None:
        self.topic = None if topic is None else validate_topic(topic)

    def store(self, side: StoreSide) -> Use:
        return Use("log_shards", (self.topic,))


class ReadLog(Call[LogRead]):
    """About ``limit`` events of a log shard with a seq above ``after``,
    oldest first, and how many the store trimmed before they could be read
    (``lost``). Readers that must see every event, such as ``chronoq
    export``, pass ``page.upto`` as the next ``after``."""

    __slots__ = ("after", "limit", "shard")

    def __init__(self, shard: LogShard, after: int = 0, *, limit: int = 10_000) -> None:
        check_limit(limit)
        self.shard = log_shard_arg(shard)
        self.after = seq_arg(after)
        self.limit = limit

    def store(self, side: StoreSide) -> Use:
        return Use("log_read", (self.shard, self.after, self.limit))


class LogHead(Call[int]):
    """The seq of the newest event of a log shard (0: none yet), read
    without reading events."""

    __slots__ = ("shard",)

    def __init__(self, shard: LogShard) -> None:
        self.shard = log_shard_arg(shard)

    def store(self, side: StoreSide) -> Use:
        return Use("log_read", (self.shard, SEQ_BEYOND, 1), _head)


def _head(page: LogRead) -> int:
    return page.head


class LogTrim(Call[None]):
    """Drop the events of a log shard up to seq ``upto``, once they are
    safely elsewhere (``chronoq export --trim``)."""

    __slots__ = ("shard", "upto")

    def __init__(self, shard: LogShard, upto: int) -> None:
        self.shard = log_shard_arg(shard)
        self.upto = seq_arg(upto)

    def store(self, side: StoreSide) -> Use:
        return Use("log_trim", (self.shard, self.upto))
