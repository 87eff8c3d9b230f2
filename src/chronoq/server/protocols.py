"""What the two compatibility protocols (youzan.py, ouqiang.py) share
besides the id index: a pop's topic list, and the words of a refusal."""

from __future__ import annotations

from chronoq.errors import ChronoqError, InvalidInput
from chronoq.job import validate_topic
from chronoq.server.byid import Refused, check_not_internal, trim
from chronoq.server.problems import from_chronoq

__all__ = ["check_topics", "refusal_text", "split_topics"]


def split_topics(text: str) -> list[str]:
    """A pop's comma-separated topics, each trimmed, empty ones dropped. (ouqiang
    splits without trimming, so "a, b" waits on " b", which no push can fill.)"""
    return list(dict.fromkeys(part for part in map(trim, text.split(",")) if part))


def check_topics(topics: list[str], most: int) -> list[str]:
    """Refuses a pop on more than ``most`` topics (each one is waited on),
    a bad topic name, and the server's own topics."""
    if len(topics) > most:
        raise Refused(
            f"a pop waits on at most {most} topics (this server's limits.max_pop_topics), "
            f"got {len(topics)}: pop on fewer at once"
        )
    for topic in topics:
        validate_topic(topic)
        check_not_internal(topic)
    return topics


def refusal_text(exc: ChronoqError) -> str:
    """What a protocol's answer says of an error: a bad input's own words,
    else the HTTP API's message for it."""
    return str(exc) if isinstance(exc, InvalidInput) else from_chronoq(exc).message
