"""chronoq: a distributed delay queue for Python."""

from chronoq import errors
from chronoq.backoff import Backoff
from chronoq.job import (
    Event,
    EventPage,
    Forecast,
    Job,
    JobInfo,
    JobLease,
    PutResult,
    Reservation,
)
from chronoq.queue import Queue, connect
from chronoq.recurring import Recurring, RecurringRun
from chronoq.states import EventKind, State
from chronoq.worker import Bury, Retry, Worker

__version__ = "0.2.0"

__all__ = [
    "Backoff",
    "Bury",
    "Event",
    "EventKind",
    "EventPage",
    "Forecast",
    "Job",
    "JobInfo",
    "JobLease",
    "PutResult",
    "Queue",
    "Recurring",
    "RecurringRun",
    "Reservation",
    "Retry",
    "State",
    "Worker",
    "__version__",
    "connect",
    "errors",
]
