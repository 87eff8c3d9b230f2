"""Fixtures of the fault runs: private redis-servers and runs, every process they start
stopped at teardown, whatever the test did. Every test here carries the ``faults`` marker."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Generator, Iterator
from pathlib import Path

import pytest

from ..redis_server import RedisServer
from .checker import Report
from .run import Run, Setup

RunFactory = Callable[..., Run]
ServerFactory = Callable[..., RedisServer]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "faults: fault-injection runs (make faults)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.faults)


@pytest.fixture
def redis_servers(tmp_path: Path) -> Iterator[ServerFactory]:
    """Start private redis-servers (``extra``: config arguments); all killed at teardown."""
    started: list[RedisServer] = []

    def make(*extra: str) -> RedisServer:
        server = RedisServer(tmp_path / f"redis-{len(started)}", *extra)
        started.append(server)
        return server

    yield make
    for server in started:
        server.stop(kill=True)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.when == "call":
        item.stash[_FAILED] = report.failed
    return report


_FAILED = pytest.StashKey[bool]()


@pytest.fixture
def fault_run(request: pytest.FixtureRequest) -> Iterator[RunFactory]:
    """Make a Run on a store URL; its children are killed at teardown. Its directory (history,
    logs) is outside pytest's tmp_path, which other runs of pytest rotate away: removed after a
    passing test, kept (and its path printed) after a failing one or with CHRONOQ_FAULTS_KEEP=1."""
    runs: list[Run] = []

    def make(url: str, setup: Setup | None = None) -> Run:
        run = Run(url, Path(tempfile.mkdtemp(prefix="chronoq-faults-")), setup)
        runs.append(run)
        return run

    yield make
    failed = request.node.stash.get(_FAILED, True) or bool(os.environ.get("CHRONOQ_FAULTS_KEEP"))
    for run in runs:
        run.cleanup()
        if failed:
            print(f"\nfault run {run.topic}: history and logs kept in {run.workdir}")
        else:
            shutil.rmtree(run.workdir, ignore_errors=True)


def assert_clean(run: Run, report: Report) -> None:
    """The checks every fault run makes."""
    assert report.lost == [], f"lost: {report.summary()}"
    assert report.early == [], f"early: {report.summary()}"
    assert report.two_live_leases == [], f"two live leases: {report.summary()}"
    assert report.late_starts == [], f"started past their lease: {report.summary()}"
    assert report.unexpected == [], f"unexpected: {report.summary()}"
    assert run.tracebacks() == [], f"Traceback in {run.tracebacks()}"
    assert report.starts > 0


def assert_few_duplicates(run: Run, report: Report, faults: int) -> None:
    """Duplicates are allowed after a fault, but only of the jobs a worker held
    when it hit (running or prefetched: concurrency + prefetch each), twice
    over for a fault a producer also retried through. A worker that went on
    running jobs whose acks could not go out ran hundreds twice."""
    s = run.setup
    bound = 2 * faults * len(run.workers) * (s.concurrency + (s.prefetch or s.concurrency))
    assert len(report.duplicated) <= bound, f"duplicated over {bound}: {report.summary()}"
