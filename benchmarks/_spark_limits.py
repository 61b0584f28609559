"""The Python Data Source API's own limits, for bench_spark.py: data sources that do nothing
but the API's part of the work, so that no data source can beat them on this machine.

- ``jss_memory`` (read): yields the jetstream source's schema as Arrow record batches made
  in memory, once per worker process and then cached: a read of it measures Spark and the
  API (Arrow to the JVM, the query), never the making of the rows.
- ``jss_discard`` (write): a row writer (``DataSourceWriter``: Spark hands it Row objects)
  that consumes every row and sends nothing; ``jss_discard_arrow`` the same as an Arrow
  writer (``DataSourceArrowWriter``: record batches), the API the jetstream sink uses.

This module must be importable in Spark's Python workers (bench_spark.py puts its folder on
PYTHONPATH before Spark starts), so that the classes are pickled by reference and the cache
of made batches survives from task to task in a reused worker.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Sequence, Tuple

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)

from jetstream_sync.spark._rows import COLUMNS, SCHEMA, arrow_schema

BATCH_ROWS = 10_000  # as the jetstream source's batches
_made: Dict[Tuple[int, int, int, int], List[Any]] = {}  # (n, parts, index, size) -> batches


@dataclass
class Piece(InputPartition):
    index: int
    start: int  # first row number (a stream sequence in the real source)
    count: int


def memory_batches(start: int, count: int, size: int, columns: Sequence[str]) -> List[Any]:
    """Record batches of ``count`` rows numbered from ``start``: what the jetstream source
    yields for a stream of ``size``-byte payloads on 16 subjects."""
    import pyarrow as pa

    schema = arrow_schema(columns)
    out = []
    for lo in range(start, start + count, BATCH_ROWS):
        seqs = list(range(lo, min(lo + BATCH_ROWS, start + count)))
        k = len(seqs)
        values = {
            "subject": pa.array([f"bench.spark.r.{s % 16}" for s in seqs], pa.string()),
            "data": pa.array([b"x" * size] * k, pa.binary()),
            "headers": pa.nulls(k, schema.field("headers").type),
            "stream": pa.array(["BENCH_SPARK_READ"] * k, pa.string()),
            "stream_seq": pa.array(seqs, pa.int64()),
            "timestamp": pa.array([1_700_000_000_000_000 + s for s in seqs], pa.int64()).view(
                schema.field("timestamp").type
            ),
            "msg_id": pa.nulls(k, pa.string()),
        }
        out.append(pa.RecordBatch.from_arrays([values[c] for c in columns], schema=schema))
    return out


class MemoryReader(DataSourceReader):
    def __init__(self, n: int, parts: int, size: int, columns: Sequence[str]) -> None:
        self.n, self.parts, self.size, self.columns = n, parts, size, list(columns)

    def partitions(self) -> Sequence[InputPartition]:
        base, extra = divmod(self.n, self.parts)
        out, start = [], 1
        for i in range(self.parts):
            count = base + (1 if i < extra else 0)
            out.append(Piece(i, start, count))
            start += count
        return out

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, Piece)
        key = (self.n, self.parts, partition.index, self.size)
        batches = _made.get(key)
        if batches is None:
            batches = _made[key] = memory_batches(
                partition.start, partition.count, self.size, self.columns
            )
        yield from batches


class MemorySource(DataSource):
    """``format("jss_memory")``, options ``n``, ``partitions``, ``size``."""

    @classmethod
    def name(cls) -> str:
        return "jss_memory"

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema: Any) -> DataSourceReader:
        o = self.options
        columns = list(schema.fieldNames()) if schema is not None else list(COLUMNS)
        return MemoryReader(int(o["n"]), int(o.get("partitions", 2)), int(o["size"]), columns)


@dataclass
class Counted(WriterCommitMessage):
    rows: int


class DiscardRows(DataSourceWriter):
    def write(self, iterator: Iterator[Any]) -> Counted:
        rows = 0
        for _ in iterator:
            rows += 1
        return Counted(rows)


class DiscardArrow(DataSourceArrowWriter):
    def write(self, iterator: Iterator[Any]) -> Counted:
        rows = 0
        for batch in iterator:
            rows += batch.num_rows
        return Counted(rows)


class _Discard(DataSource):
    def schema(self) -> str:
        return "subject string, data binary"


class DiscardSource(_Discard):
    """``format("jss_discard")``: a row writer that sends nothing."""

    @classmethod
    def name(cls) -> str:
        return "jss_discard"

    def writer(self, schema: Any, overwrite: bool) -> DataSourceWriter:
        return DiscardRows()


class DiscardArrowSource(_Discard):
    """``format("jss_discard_arrow")``: an Arrow writer that sends nothing."""

    @classmethod
    def name(cls) -> str:
        return "jss_discard_arrow"

    def writer(self, schema: Any, overwrite: bool) -> DataSourceWriter:
        return DiscardArrow()  # type: ignore[return-value]


def register(spark: Any) -> None:
    for cls in (MemorySource, DiscardSource, DiscardArrowSource):
        spark.dataSource.register(cls)
