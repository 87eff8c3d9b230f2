"""chronoq's data pipeline (``pip install 'chronoq[spark]'``): the event log
exported to Parquet (``chronoq export``), a PySpark data source named
``"chronoq"`` that turns DataFrames into jobs and reads jobs and events back,
and ``chronoq analyze``. See docs/pipeline.md.

Nothing here imports PySpark until a Spark function is called, so ``chronoq
export`` needs only pyarrow."""

from __future__ import annotations

from typing import Any

from chronoq.pipeline.schema import EVENT_DDL, EXPORT_DDL

__all__ = ["EVENT_DDL", "EXPORT_DDL", "read_events", "register"]


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
