"""DataFrame rows to jobs, without Spark: which columns a write takes (checked
on the driver, before any task runs) and how an Arrow batch of them becomes
``Job`` values (on the executors), with one reason per bad row."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from itertools import repeat
from typing import Any

import pyarrow as pa

from chronoq.errors import InvalidInput
from chronoq.job import Job

__all__ = ["JOB_COLUMNS", "Columns", "RowError", "Rows", "plan_columns", "rows_to_jobs"]

_INTEGRAL = frozenset({"byte", "short", "integer", "long"})
_NUMBER = _INTEGRAL | {"float", "double", "decimal"}
_TIME = frozenset({"timestamp", "timestamp_ntz", "date"})
#: column -> the Spark type names it takes
JOB_COLUMNS: dict[str, frozenset[str]] = {
    "id": frozenset({"string"}) | _INTEGRAL,
    "topic": frozenset({"string"}),
    "payload": frozenset({"string", "binary", "struct", "map", "array"}),
    "delay": _NUMBER,
    "run_at": _TIME,
    "due_at": _TIME | _INTEGRAL,
    "priority": _INTEGRAL,
    "ttr": _NUMBER,
    "max_attempts": _INTEGRAL,
    "unique_for": _NUMBER,
    "traceparent": frozenset({"string"}),  # a W3C trace context (docs/tracing.md)
    "group": frozenset({"string"}),  # the job's group within its topic (a tenant, say)
}
_WHEN = ("delay", "run_at", "due_at")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_DEFAULT = Job()


@dataclass(frozen=True)
class Columns:
    """The job columns of a DataFrame, checked: where the due time and the
    topic come from, and how to read the payload."""

    names: tuple[str, ...]
    when: str
    topic: str | None  # the topic option, when there is no topic column
    payload_type: str | None


@dataclass(frozen=True)
class RowError:
    """A row that is not a valid job, and why."""

    position: int
    id: str | None
    reason: str
    row: dict[str, Any]

    def describe(self) -> str:
        named = f"id {self.id!r}" if self.id is not None else "no id"
        return f"row {self.position} ({named}): {self.reason}"


def plan_columns(
    fields: Sequence[tuple[str, str]], topic: str | None, *, generate_ids: bool = False
) -> Columns:
    """Check a DataFrame's ``(column, Spark type name)`` pairs for a write;
    raises ``InvalidInput`` saying what to change."""
    names = [name.lower() for name, _ in fields]
    if "id" not in names and not generate_ids:
        raise InvalidInput(
            "an id column is required: jobs are put by id, so running the write again "
            "schedules nothing twice (or set option generate_ids=true: then it would)"
        )
    unknown = sorted(set(names) - set(JOB_COLUMNS))
    if unknown:
        raise InvalidInput(
            f"column(s) {', '.join(unknown)} are not job fields: select the columns "
            f"{', '.join(JOB_COLUMNS)} (id and one of delay, run_at, due_at at least)"
        )
    if len(set(names)) != len(names):
        raise InvalidInput(f"a column appears twice in {', '.join(names)}")
    for name, kind in zip(names, (kind for _, kind in fields), strict=True):
        if kind not in JOB_COLUMNS[name]:
            allowed = ", ".join(sorted(JOB_COLUMNS[name]))
            raise InvalidInput(f"column {name} is of type {kind}: it takes {allowed}")
    when = [name for name in _WHEN if name in names]
    if len(when) != 1:
        given = f"got {', '.join(when)}" if when else "got none"
        raise InvalidInput(
            "give the due time as exactly one column: delay (seconds), run_at (timestamp) "
            f"or due_at (timestamp, or ms since the epoch); {given} (for jobs due now: "
            "lit(0).alias('delay'))"
        )
    if "topic" not in names and topic is None:
        raise InvalidInput("give the topic: .option('topic', 'name'), or a topic column")
    if "topic" in names and topic is not None:
        raise InvalidInput("give the topic once: a topic column or the topic option, not both")
    payload_type = dict(zip(names, (kind for _, kind in fields), strict=True)).get("payload")
    return Columns(tuple(names), when[0], topic, payload_type)


def _json_ready(value: Any, kind: pa.DataType) -> Any:
    """A struct, map or array value as JSON, led by its Arrow type (a map
    arrives as (key, value) pairs, an empty one as an empty list); the types
    JSON lacks become text: timestamps and dates ISO 8601, decimals as written,
    binary base64."""
    if value is None:
        return None
    if pa.types.is_struct(kind):
        types = {kind.field(i).name: kind.field(i).type for i in range(kind.num_fields)}
        return {str(k): _json_ready(v, types[k]) for k, v in value.items()}
    if pa.types.is_map(kind):
        return {str(k): _json_ready(v, kind.item_type) for k, v in value}
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return [_json_ready(v, kind.value_type) for v in value]
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    return value


def _moment(value: Any) -> datetime:
    """A timestamp (naive ones are UTC, as timestamp_ntz), a date, or ms since the epoch."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    return _EPOCH + timedelta(milliseconds=value)


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise InvalidInput(f"payload is not JSON text ({exc}): {text[:80]!r}") from None


class Rows:
    """A batch's columns as Python lists, read column by column (a row as a
    dict only for a row that is refused)."""

    def __init__(self, batch: pa.RecordBatch) -> None:
        self.names = [name.lower() for name in batch.schema.names]
        self.data: list[list[Any]] = [
            (column.cast(pa.float64()) if pa.types.is_decimal(column.type) else column).to_pylist()
            for column in batch.columns
        ]
        self.count = batch.num_rows
        self.types = dict(zip(self.names, batch.schema.types, strict=True))

    def column(self, name: str, default: Any) -> Iterable[Any]:
        if name in self.names:
            return self.data[self.names.index(name)]
        return repeat(default, self.count)

    def row(self, n: int) -> dict[str, Any]:
        return {name: values[n] for name, values in zip(self.names, self.data, strict=True)}


def rows_to_jobs(
    batch: pa.RecordBatch, columns: Columns, *, generate_ids: bool, first: int = 0
) -> Iterator[tuple[str, int, Job | RowError, Rows, int]]:
    """``(topic, position, job or why not, rows, n)`` for each row ``n`` of
    ``batch``, whose first row is at ``first``. Fields left null take the
    defaults of ``Job``, as the very objects ``prepare_job`` knows them by."""
    rows = Rows(batch)
    kind = columns.payload_type
    by_delay = columns.when == "delay"
    fields = zip(
        rows.column("topic", columns.topic),
        rows.column("id", None),
        rows.column(columns.when, None),
        rows.column("payload", None),
        rows.column("priority", None),
        rows.column("ttr", None),
        rows.column("max_attempts", None),
        rows.column("unique_for", None),
        rows.column("traceparent", None),
        rows.column("group", None),
        strict=True,
    )
    for n, row in enumerate(fields):
        topic, job_id, when, raw, priority, ttr, attempts, unique_for, traceparent, group = row
        try:
            if job_id is None:
                if not generate_ids:
                    raise InvalidInput(
                        "id is null: every row needs an id (that makes the write idempotent), "
                        "or set option generate_ids=true"
                    )
            elif type(job_id) is not str:
                job_id = str(job_id)
            if when is None:
                raise InvalidInput(f"{columns.when} is null")
            if topic is None:
                raise InvalidInput("topic is null")
            if raw is None or kind == "binary":
                payload = raw
            else:
                payload = (
                    _loads(raw) if kind == "string" else _json_ready(raw, rows.types["payload"])
                )
            job = Job(
                payload,
                when if by_delay else None,
                None if by_delay else _moment(when),
                job_id,
                _DEFAULT.priority if priority is None else priority,
                _DEFAULT.ttr if ttr is None else ttr,
                _DEFAULT.max_attempts if attempts is None else attempts,
                _DEFAULT.unique_for if unique_for is None else unique_for,
                traceparent,
                group,
            )
        except (InvalidInput, OverflowError, ValueError, TypeError) as exc:
            error = RowError(first + n, _text(job_id), str(exc), rows.row(n))
            yield topic or "", first + n, error, rows, n
            continue
        yield topic, first + n, job, rows, n


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
