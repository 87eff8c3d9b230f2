"""The worker: runs handlers on the jobs of its topics (see worker.py)."""

from chronoq.worker.outcomes import Bury, Retry
from chronoq.worker.worker import Worker

__all__ = ["Bury", "Retry", "Worker"]
