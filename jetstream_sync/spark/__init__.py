"""Apache Spark support: the ``jetstream`` Python data source and foreachPartition helpers.

Needs pyspark >= 4.2 and pyarrow (the ``spark`` extra); nothing here is imported by
``import jetstream_sync``, and pyspark is imported only when the data source is used::

    import jetstream_sync.spark
    jetstream_sync.spark.register(spark)
    spark.read.format("jetstream").option("servers", url).option("stream", "S").load()

Executors share one connection per worker process (:func:`client`), rebuilt after fork.
"""

from __future__ import annotations

from typing import Any, Optional

from ._clients import client, close_all, jetstream
from .helpers import publish_partition

__all__ = [
    "JetStreamDataSource",
    "client",
    "close_all",
    "jetstream",
    "publish_partition",
    "register",
]


def register(spark: Any, default_partitions: Optional[int] = None) -> type:
    """Register the ``jetstream`` data source with ``spark`` and return the class registered.

    Reads without a ``partitions`` option use ``default_partitions``, else the session's
    default parallelism (when it can be asked: not over Spark Connect), else 4.
    """
    from .datasource import JetStreamDataSource

    if default_partitions is None:
        try:
            default_partitions = int(spark.sparkContext.defaultParallelism)
        except Exception:  # Spark Connect has no SparkContext
            default_partitions = None
    cls: type = JetStreamDataSource
    if default_partitions:
        # A subclass made here is not importable by name, so Spark's cloudpickle sends it
        # by value, default included, to the processes that plan and run the reads.
        cls = type(
            "JetStreamDataSource",
            (JetStreamDataSource,),
            {"default_partitions": int(default_partitions), "__module__": __name__},
        )
    spark.dataSource.register(cls)
    return cls


def __getattr__(name: str) -> Any:
    if name == "JetStreamDataSource":
        from .datasource import JetStreamDataSource

        return JetStreamDataSource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
