"""Apache Spark support: the ``jetstream`` Python data source and foreachPartition helpers.

Needs pyspark >= 4.2 and pyarrow (the ``spark`` extra); nothing here is imported by
``import jetstream_sync``, and pyspark is imported only when the data source is used::

    import jetstream_sync.spark
    jetstream_sync.spark.register(spark)
    spark.read.format("jetstream").option("servers", url).option("stream", "S").load()

Executors share one connection per worker process (:func:`client`), rebuilt after fork.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

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


def register(
    spark: Any, default_partitions: Optional[int] = None, filter_pushdown: bool = True
) -> type:
    """Register the ``jetstream`` data source with ``spark`` and return the class registered.

    Reads without a ``partitions`` option use ``default_partitions``, else the session's
    default parallelism (when it can be asked: not over Spark Connect), else 4.
    ``filter_pushdown``: a ``where`` on ``stream_seq``, ``timestamp`` or ``subject`` narrows
    what a batch read fetches (sets ``spark.sql.python.filterPushdown.enabled`` for the
    session, which Spark needs for it).
    """
    from .datasource import JetStreamDataSource

    if default_partitions is None:
        try:
            default_partitions = int(spark.sparkContext.defaultParallelism)
        except Exception:  # Spark Connect has no SparkContext
            default_partitions = None
    attrs: Dict[str, Any] = {"__module__": __name__}
    if default_partitions:
        attrs["default_partitions"] = int(default_partitions)
    if filter_pushdown:
        # Spark refuses a reader with pushFilters while its switch is off: turned on here,
        # for this session, with the reader that uses it.
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
        attrs["filter_pushdown"] = True
    # A subclass made here is not importable by name, so Spark's cloudpickle sends it by
    # value, its settings included, to the processes that plan and run the reads.
    cls: type = type("JetStreamDataSource", (JetStreamDataSource,), attrs)
    spark.dataSource.register(cls)
    return cls


def __getattr__(name: str) -> Any:
    if name == "JetStreamDataSource":
        from .datasource import JetStreamDataSource

        return JetStreamDataSource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
