"""What a topic and a job id may be (docs/contract.md §1), checked once for every API:
the patterns (the OpenAPI document shows them too) and the checks."""

from __future__ import annotations

import re

from chronoq.errors import InvalidInput

__all__ = [
    "GROUP_PATTERN",
    "ID_PATTERN",
    "NEW_ID_PATTERN",
    "TOPIC_PATTERN",
    "validate_group",
    "validate_id",
    "validate_new_id",
    "validate_topic",
]

TOPIC_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}"
GROUP_PATTERN = TOPIC_PATTERN  # a job's group within its topic (a tenant, say)
ID_PATTERN = r"[!-~]{1,256}"  # printable ASCII, no whitespace
# a new job's id: besides, not "." or "..", which no URL can carry as a path
# segment (clients and browsers resolve them away, even percent-encoded)
NEW_ID_PATTERN = r"(?!\.\.?$)" + ID_PATTERN
_TOPIC_RE = re.compile(TOPIC_PATTERN)
_ID_RE = re.compile(ID_PATTERN)


_valid_topics: set[str] = set()  # checked already: a producer puts to few topics, often


def validate_topic(topic: object) -> str:
    if type(topic) is str and topic in _valid_topics:
        return topic
    if not isinstance(topic, str) or not _TOPIC_RE.fullmatch(topic):
        raise InvalidInput(
            f"invalid topic {topic!r}: use 1-128 characters of A-Z a-z 0-9 . _ : -, "
            "starting with a letter or digit"
        )
    if type(topic) is str:
        if len(_valid_topics) >= 4096:  # topics come and go: stay bounded
            _valid_topics.clear()
        _valid_topics.add(topic)
    return topic


def validate_group(group: object) -> str:
    """A job's group, as given; raises ``InvalidInput``."""
    if isinstance(group, str) and _TOPIC_RE.fullmatch(group):
        return group
    raise InvalidInput(
        f"invalid group {group!r}: use 1-128 characters of A-Z a-z 0-9 . _ : -, "
        "starting with a letter or digit (or None: the topic's default group)"
    )


def validate_id(job_id: object) -> str:
    """An id to look a job up by: 1-256 printable ASCII characters, no spaces."""
    if not isinstance(job_id, str) or not _ID_RE.fullmatch(job_id):
        raise InvalidInput(
            f"invalid job id {job_id!r}: use 1-256 printable ASCII characters without "
            "spaces, or leave it out to get a generated one"
        )
    return job_id


def validate_new_id(job_id: object) -> str:
    """A new job's id: as ``validate_id``, and neither ``.`` nor ``..`` (jobs
    stored before they were refused can still be looked up)."""
    if isinstance(job_id, str) and job_id in (".", ".."):
        raise InvalidInput(
            f"invalid job id {job_id!r}: '.' and '..' cannot be addressed in a URL; "
            "use another id, or leave it out to get a generated one"
        )
    return validate_id(job_id)
