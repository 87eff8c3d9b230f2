"""The pipeline tests' Spark: one local[2] session for the whole run (UI off,
2 shuffle partitions, UTC, driver on 127.0.0.1), with the chronoq source.

The JVM, and the Python workers it starts, write to a file of their own
(``spark_log``): what the driver logs at a commit is read from there."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


class SparkLog:
    """The stderr of Spark's processes; ``new()`` is what came since the last call."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.seen = 0

    def new(self) -> str:
        data = self.path.read_bytes()
        text, self.seen = data[self.seen :].decode(errors="replace"), len(data)
        return text


@pytest.fixture(scope="session")
def spark_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, SparkLog]]:
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from chronoq.pipeline import local_session

    log = SparkLog(tmp_path_factory.mktemp("spark") / "stderr.log")
    target = os.open(log.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    saved = os.dup(2)
    os.dup2(target, 2)  # the JVM inherits it
    try:
        session = local_session("chronoq-tests", conf={"spark.sql.shuffle.partitions": "2"})
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(target)
    yield session, log
    session.stop()


@pytest.fixture
def spark(spark_session: tuple[Any, SparkLog]) -> Any:
    return spark_session[0]


@pytest.fixture
def spark_log(spark_session: tuple[Any, SparkLog]) -> SparkLog:
    log = spark_session[1]
    log.new()  # from this test on
    return log
