"""What the two compatibility protocols (youzan.py, ouqiang.py) share
besides the id index: Go's trimming of ids and topics, a pop's topic list,
and the words of a refusal."""

from __future__ import annotations

from chronoq.errors import ChronoqError, InvalidInput
from chronoq.job import validate_topic
from chronoq.server.compat.byid import Refused, check_not_internal
from chronoq.server.web.problems import from_chronoq

__all__ = ["check_topics", "refusal_text", "split_topics", "trim"]

# Go's strings.TrimSpace set (unicode.IsSpace). str.strip() would also strip
# \x1c-\x1f; ouqiang keeps them, so ids and topics trim the same in both.
_GO_SPACE = (
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)


def trim(text: str) -> str:
    """``text`` without leading and trailing white space, as Go trims it."""
    return text.strip(_GO_SPACE)


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
