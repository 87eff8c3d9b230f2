"""chronoq's data pipeline (``pip install 'chronoq[spark]'``): the event log
exported to Parquet (``chronoq export``), a PySpark data source named
``"chronoq"`` that turns DataFrames into jobs and reads jobs and events back,
and ``chronoq analyze``. See docs/pipeline.md.

Nothing here imports PySpark until a Spark function is called, so ``chronoq
export`` needs only pyarrow."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

from chronoq.pipeline.schema import EVENT_DDL, EXPORT_DDL

__all__ = ["EVENT_DDL", "EXPORT_DDL", "local_session", "read_events", "register"]

#: what a local session of chronoq's own jobs (tests, benchmarks, examples) sets
LOCAL_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",  # event times are UTC
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}


def local_session(
    app_name: str, *, master: str = "local[2]", conf: Mapping[str, str] | None = None
) -> Any:
    """A local SparkSession with the ``chronoq`` source registered: Spark's
    UI off, the session time zone UTC, the driver on loopback, its Python
    workers on this interpreter; ``conf`` adds or overrides settings."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession  # PySpark, only now

    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in {**LOCAL_CONF, **(conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def register(spark: Any) -> None:
    """Make ``spark.read.format("chronoq")`` and ``df.write.format("chronoq")``
    work in this session. (With chronoq installed where Spark runs Python,
    PySpark also finds the source by itself: see ``pyspark_chronoq``.)"""
    from chronoq.pipeline.datasource import ChronoqDataSource  # PySpark, only now

    spark.dataSource.register(ChronoqDataSource)


def read_events(spark: Any, path: str) -> Any:
    """The events exported under ``path`` as a DataFrame with the types of
    docs/pipeline.md (``topic`` and ``date`` come from the directory names;
    without a schema Spark would guess them, reading a topic named "42" as a
    number)."""
    return spark.read.schema(EXPORT_DDL).parquet(str(path))
