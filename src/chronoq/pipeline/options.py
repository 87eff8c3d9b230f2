"""The options of the ``chronoq`` Spark data source, checked on the driver
before any task runs: a missing, unknown or malformed option fails the read
or the write with a message that says what to give."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from chronoq.errors import InvalidInput
from chronoq.job import validate_topic
from chronoq.states import State

__all__ = ["ReadOptions", "WriteOptions", "read_options", "write_options"]

_COMMON = {"store", "topic"}
_READ = _COMMON | {"what", "state", "allow_gaps", "maxeventspertrigger", "startingoffsets"}
_WRITE = _COMMON | {"batch_size", "on_error", "errors_path", "generate_ids"}
# set by Spark itself, not by the user
_SPARK = {"path", "checkpointlocation", "queryname"}


@dataclass(frozen=True)
class ReadOptions:
    store: str
    topic: str | None
    what: str  # "events" or "jobs"
    state: State | None
    allow_gaps: bool
    max_events: int | None  # maxEventsPerTrigger
    start: str  # startingOffsets: "earliest" or "latest"


@dataclass(frozen=True)
class WriteOptions:
    store: str
    topic: str | None
    batch_size: int
    on_error: str  # "fail" or "skip"
    errors_path: str | None
    generate_ids: bool


def _known(options: Mapping[str, str], allowed: set[str], what: str) -> dict[str, str]:
    given = {key.lower(): value for key, value in options.items()}
    unknown = sorted(set(given) - allowed - _SPARK)
    if unknown:
        raise InvalidInput(
            f"unknown option(s) {', '.join(unknown)} for {what} chronoq: it takes "
            f"{', '.join(sorted(allowed))}"
        )
    if not given.get("store"):
        raise InvalidInput(
            "option store is required: the store URL, e.g. .option('store', "
            "'redis://host:6379/0') (a SQLite file must be on a disk every executor sees)"
        )
    return given


def _flag(options: Mapping[str, str], name: str) -> bool:
    value = options.get(name, "false").strip().lower()
    if value not in ("true", "false"):
        raise InvalidInput(f"option {name} must be true or false, got {value!r}")
    return value == "true"


def _count(options: Mapping[str, str], name: str, default: int | None, top: int) -> int | None:
    raw = options.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if not 1 <= value <= top:
        raise InvalidInput(f"option {name} must be an integer from 1 to {top}, got {raw!r}")
    return value


def _topic(options: Mapping[str, str]) -> str | None:
    topic = options.get("topic")
    return None if topic is None else validate_topic(topic)


def read_options(options: Mapping[str, str]) -> ReadOptions:
    given = _known(options, _READ, "reading from")
    what = given.get("what", "events").lower()
    if what not in ("events", "jobs"):
        raise InvalidInput(f"option what must be events or jobs, got {what!r}")
    topic = _topic(given)
    if what == "jobs" and topic is None:
        raise InvalidInput("reading jobs takes a topic: .option('topic', 'name')")
    state = given.get("state")
    if state is not None:
        if what != "jobs":
            raise InvalidInput("option state is for what=jobs")
        try:
            state_value: State | None = State(state.lower())
        except ValueError:
            names = ", ".join(s.value for s in State)
            raise InvalidInput(f"option state must be one of {names}, got {state!r}") from None
    else:
        state_value = None
    start = given.get("startingoffsets", "earliest").lower()
    if start not in ("earliest", "latest"):
        raise InvalidInput(f"option startingOffsets must be earliest or latest, got {start!r}")
    return ReadOptions(
        store=given["store"],
        topic=topic,
        what=what,
        state=state_value,
        allow_gaps=_flag(given, "allow_gaps"),
        max_events=_count(given, "maxeventspertrigger", None, 1 << 40),
        start=start,
    )


def write_options(options: Mapping[str, str]) -> WriteOptions:
    given = _known(options, _WRITE, "writing to")
    on_error = given.get("on_error", "fail").lower()
    if on_error not in ("fail", "skip"):
        raise InvalidInput(f"option on_error must be fail or skip, got {on_error!r}")
    errors_path = given.get("errors_path")
    if on_error == "skip" and not errors_path:
        raise InvalidInput(
            "on_error=skip needs option errors_path: a directory for the rows left out"
        )
    if errors_path and on_error != "skip":
        raise InvalidInput("option errors_path is for on_error=skip")
    batch_size = _count(given, "batch_size", 1000, 10_000)
    assert batch_size is not None
    return WriteOptions(
        store=given["store"],
        topic=_topic(given),
        batch_size=batch_size,
        on_error=on_error,
        errors_path=errors_path,
        generate_ids=_flag(given, "generate_ids"),
    )
