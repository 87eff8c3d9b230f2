"""PySpark finds Python data sources in top-level modules named ``pyspark_*``
that define ``DefaultSource`` (pyspark.sql.worker.lookup_data_sources): with
chronoq installed where Spark runs Python, ``format("chronoq")`` works
without ``chronoq.pipeline.register(spark)``."""

from chronoq.pipeline.datasource import ChronoqDataSource as DefaultSource

__all__ = ["DefaultSource"]
