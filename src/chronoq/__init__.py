"""chronoq: a distributed delay queue for Python."""

from chronoq import errors
from chronoq.backoff import Backoff
from chronoq.job import Event, EventPage, Job, JobInfo, PutResult, Reservation
from chronoq.queue import Queue, connect
from chronoq.states import EventKind, State

__version__ = "0.1.0"

__all__ = [
    "Backoff",
    "Event",
    "EventKind",
    "EventPage",
    "Job",
    "JobInfo",
    "PutResult",
    "Queue",
    "Reservation",
    "State",
    "__version__",
    "connect",
    "errors",
]
