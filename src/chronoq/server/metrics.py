"""Prometheus metrics of the server (``GET /metrics``). Counters and
histograms live in prometheus-client's registry; with ``--workers N``,
``chronoq serve`` sets ``PROMETHEUS_MULTIPROC_DIR`` before any worker starts,
so each worker writes its own files and a scrape of any worker sums them all.
The jobs per topic and state are read from the store at each scrape."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from chronoq.aio import AsyncQueue
from chronoq.job import Reservation
from chronoq.server.auth import is_internal

__all__ = ["CONTENT_TYPE", "Metrics"]

CONTENT_TYPE = CONTENT_TYPE_LATEST.encode()
_STATES = ("delayed", "ready", "reserved", "dead")
_MAX_TOPICS = 1000  # a scrape reads the counts of this many topics at most
_STATS_AT_ONCE = 8
_LAG_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 60)


class _JobCounts(Collector):
    def __init__(self, counts: dict[str, dict[str, int]]) -> None:
        self.counts = counts

    def collect(self):  # type: ignore[no-untyped-def]
        family = GaugeMetricFamily(
            "chronoq_jobs", "Jobs in the store per topic and state", labels=["topic", "state"]
        )
        for topic, stats in sorted(self.counts.items()):
            for state in _STATES:
                family.add_metric([topic, state], stats.get(state, 0))
        yield family


class Metrics:
    """The metrics of one server process (one instance per process)."""

    def __init__(self) -> None:
        # a registry of our own: two apps in one process (tests) register twice
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Histogram(
            "chronoq_http_request_duration_seconds",
            "HTTP requests by route template and status",
            ["route", "status"],
            registry=self.registry,
        )
        self.transitions = Counter(
            "chronoq_transitions",
            "Job transitions made through this server, per topic and kind",
            ["topic", "kind"],
            registry=self.registry,
        )
        self.lag = Histogram(
            "chronoq_handover_lag_seconds",
            "Reserve time minus due time of jobs reserved through this server",
            ["topic"],
            buckets=_LAG_BUCKETS,
            registry=self.registry,
        )
        self._requests: dict[tuple[str, int], Any] = {}
        self._transitions: dict[tuple[str, str], Any] = {}
        self._lags: dict[str, Any] = {}

    def observe_request(self, route: str, status: int, seconds: float) -> None:
        child = self._requests.get((route, status))
        if child is None:  # labels() is a quarter of a reserve's own time: once per pair
            child = self._requests[route, status] = self.requests.labels(route, str(status))
        child.observe(seconds)

    def transition(self, topic: str, kind: str, count: int = 1) -> None:
        if count:
            child = self._transitions.get((topic, kind))
            if child is None:
                child = self._transitions[topic, kind] = self.transitions.labels(topic, kind)
            child.inc(count)

    def reserved(self, jobs: list[Reservation]) -> None:
        if not jobs:
            return
        self.transition(jobs[0].topic, "reserve", len(jobs))
        lag = self._lags.get(jobs[0].topic)
        if lag is None:
            lag = self._lags[jobs[0].topic] = self.lag.labels(jobs[0].topic)
        for job in jobs:
            # the lease started at deadline - ttr, on the store's clock, as due_at
            started = job.deadline - round(job.ttr * 1000)
            lag.observe(max(started - job.due_at, 0) / 1000)

    async def render(self, queue: AsyncQueue) -> bytes:
        # the server's own topics (chronoq.*) are not part of the API
        topics = [topic for topic in await queue.topics() if not is_internal(topic)][:_MAX_TOPICS]
        calls = asyncio.Semaphore(_STATS_AT_ONCE)  # a scrape must not open a connection per topic

        async def stats_of(topic: str) -> dict[str, Any]:
            async with calls:
                return await queue.stats(topic)

        stats = await asyncio.gather(*(stats_of(topic) for topic in topics))
        registry = CollectorRegistry(auto_describe=False)
        if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        else:
            registry.register(_Forward(self.registry))
        registry.register(_JobCounts(dict(zip(topics, stats, strict=True))))
        return generate_latest(registry)


class _Forward(Collector):
    def __init__(self, registry: CollectorRegistry) -> None:
        self.inner = registry

    def collect(self):  # type: ignore[no-untyped-def]
        yield from self.inner.collect()
