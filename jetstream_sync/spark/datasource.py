"""The ``jetstream`` Python data source (pyspark >= 4.2): batch read and write (streaming:
``streaming.py``).

Register it, then use it by name::

    import jetstream_sync.spark
    jetstream_sync.spark.register(spark)
    df = spark.read.format("jetstream").option("servers", url).option("stream", "ORDERS").load()
    df.write.format("jetstream").option("servers", url).mode("append").save()

Reading: the driver fixes the range of stream sequences once (the stream's
``first_seq..last_seq``, narrowed by ``start_seq``/``end_seq`` and
``start_time``/``end_time``) and splits it into ``partitions`` contiguous pieces; each task
reads its piece with an ephemeral ack-none pull consumer from the piece's first sequence
(``_pullrange.py``; or batched direct get with the option ``direct`` true) and stops at its
last. Messages stored later are not read. Writing: see :class:`JetStreamBatchWriter`.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, TypeVar

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    LessThan,
    LessThanOrEqual,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from .. import errors
from . import _clients
from ._options import (
    bool_option,
    checked,
    connection,
    filters_option,
    float_option,
    int_option,
    js_options,
    required,
)
from ._publish import check_duplicate_window, publish_arrow
from ._pullrange import range_batches
from ._ranges import parse_time_option, resolve_range, split_range
from ._rows import SCHEMA

__all__ = [
    "JetStreamBatchReader",
    "JetStreamBatchWriter",
    "JetStreamCommitMessage",
    "JetStreamDataSource",
    "SeqRangePartition",
]

log = logging.getLogger("jetstream_sync.spark")

DEFAULT_PARTITIONS = 4


def _js(options: Dict[str, Any]) -> Any:
    servers, kwargs = connection(options)
    return _clients.jetstream(servers, js_options(options), **kwargs)


class JetStreamDataSource(DataSource):
    """``format("jetstream")``. Options: see the module and docs/guides/spark.md."""

    # register() may set a default partition count (the session's default parallelism)
    # on a subclass; the class travels to the workers by value.
    default_partitions: Optional[int] = None
    # register() turns filter pushdown on together with Spark's switch for it
    # (spark.sql.python.filterPushdown.enabled): a reader with pushFilters is refused by a
    # session where that switch is off, so a class registered by hand reads without it.
    filter_pushdown: bool = False

    @classmethod
    def name(cls) -> str:
        """The format's name: ``jetstream``."""
        return "jetstream"

    def schema(self) -> str:
        """The schema of the rows read (a DDL string)."""
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        """A batch reader for the options (the pushdown reader when filter pushdown is on);
        InvalidArgumentError on bad options."""
        cls = JetStreamPushdownReader if self.filter_pushdown else JetStreamBatchReader
        return cls(checked(self.options, "read"), schema, self.default_partitions)

    def writer(self, schema: StructType, overwrite: bool) -> JetStreamBatchWriter:
        """A batch writer for the options, after warning when the stream's duplicate window is
        short; InvalidArgumentError for ``overwrite`` (the source only appends) or bad
        options."""
        if overwrite:
            raise errors.InvalidArgumentError(
                "the jetstream data source only appends: use mode('append')"
            )
        options = checked(self.options, "write")
        # Made once, on the driver: every task (and every retry of one) sees the same id.
        write_id = options.get("write_id") or uuid.uuid4().hex
        writer = JetStreamBatchWriter(options, str(write_id))
        writer.check_stream()
        return writer

    def streamReader(self, schema: StructType) -> Any:
        """A streaming reader for the options; InvalidArgumentError on bad options."""
        from .streaming import JetStreamStreamReader

        return JetStreamStreamReader(
            checked(self.options, "stream read"), schema, self.default_partitions
        )

    def streamWriter(self, schema: StructType, overwrite: bool) -> Any:
        """A streaming writer for the options, after warning when the stream's duplicate window
        is short; InvalidArgumentError for ``overwrite`` (the source only appends) or bad
        options."""
        from .streaming import JetStreamStreamWriter

        if overwrite:
            raise errors.InvalidArgumentError(
                "the jetstream data source only appends: use outputMode('append')"
            )
        writer = JetStreamStreamWriter(checked(self.options, "stream write"))
        writer.check_stream()
        return writer


@dataclass
class SeqRangePartition(InputPartition):
    """Stream sequences ``start..end`` (inclusive) to read, and how."""

    start: int
    end: int
    direct: bool


class JetStreamBatchReader(DataSourceReader):
    """Pickled to the executors: holds options only, never a client."""

    def __init__(
        self, options: Dict[str, Any], schema: StructType, default_partitions: Optional[int]
    ) -> None:
        self.options = options
        self.columns: List[str] = list(schema.fieldNames())
        self.default_partitions = default_partitions
        self.stream = required(options, "stream")
        self.filters = filters_option(options)
        self.include_headers = bool_option(options, "include_headers") is not False
        # Bounds from pushed-down filters (JetStreamPushdownReader), tightening the options.
        self.pushed = PushedBounds()

    def partitions(self) -> Sequence[InputPartition]:
        """The read's partitions, on the driver: the stream's sequence range (narrowed by the
        start and end options and the pushed filters) split in ``partitions`` parts; one empty
        partition when there is nothing to read. InvalidArgumentError on a bad ``direct``
        option."""
        o = self.options
        js = _js(o)
        info = js.stream_info(self.stream)
        start_time = o.get("start_time")
        end_time = o.get("end_time")
        p = self.pushed
        rng = resolve_range(
            js,
            self.stream,
            info.state,
            start_seq=_tighter(int_option(o, "start_seq", minimum=1), p.seq_lo, max),
            end_seq=_tighter(int_option(o, "end_seq", minimum=0), p.seq_hi, min),
            start_time=_tighter(
                parse_time_option(start_time, "start_time") if start_time else None,
                p.time_lo,
                max,
            ),
            end_time=_tighter(
                parse_time_option(end_time, "end_time") if end_time else None, p.time_hi, min
            ),
        )
        n = int_option(o, "partitions", minimum=1) or self.default_partitions or DEFAULT_PARTITIONS
        mode = str(o.get("direct", "auto")).lower()
        if mode not in ("auto", "true", "false"):
            raise errors.InvalidArgumentError(f"option 'direct' must be auto/true/false: {mode!r}")
        # auto: a pull consumer, which the server serves several times faster than batched
        # direct get (benchmarks/README.md); true: direct get, for readers not allowed to
        # make consumers.
        direct = mode == "true"
        parts = split_range(rng, n)
        if not parts:  # nothing to read: one empty partition
            return [SeqRangePartition(rng.start, rng.end, direct)]
        return [SeqRangePartition(p.start, p.end, direct) for p in parts]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """The record batches of one partition, in an executor."""
        assert isinstance(partition, SeqRangePartition)
        yield from range_batches(
            _js(self.options),
            self.stream,
            partition.start,
            partition.end,
            self.filters,
            self.columns,
            self.include_headers,
            direct=partition.direct,
            timeout=float_option(self.options, "read_timeout") or 30.0,
        )


_T = TypeVar("_T", int, datetime)


def _tighter(
    option: Optional[_T], pushed: Optional[_T], pick: Callable[[_T, _T], _T]
) -> Optional[_T]:
    if option is None:
        return pushed
    return option if pushed is None else pick(option, pushed)


@dataclass
class PushedBounds:
    """What pushed-down filters allow: stream sequences ``seq_lo..seq_hi`` (included) and
    store times ``time_lo <= t < time_hi``; None is unbounded."""

    seq_lo: Optional[int] = None
    seq_hi: Optional[int] = None
    time_lo: Optional[datetime] = None
    time_hi: Optional[datetime] = None


class JetStreamPushdownReader(JetStreamBatchReader):
    """A batch reader that narrows what it reads by the query's ``where`` (pyspark's
    pushFilters): comparisons of ``stream_seq`` and ``timestamp`` with literals narrow the
    range of sequences, ``subject = '<literal>'`` becomes the read's filter subject.

    Every filter is still handed back to Spark, which evaluates it on what is read: the
    narrowing only has to be safe (never drop a row the filter keeps), not exact.
    """

    def pushFilters(self, filters: List[Filter]) -> Iterator[Filter]:
        """Narrow the read by each filter it can use, and hand every filter back to Spark."""
        for f in filters:
            self._narrow(f)
            yield f

    def _narrow(self, f: Filter) -> None:
        column = getattr(f, "attribute", None)
        value = getattr(f, "value", None)
        p = self.pushed
        if column == ("stream_seq",):
            if isinstance(f, In):
                seqs = [v for v in f.value if isinstance(v, int) and not isinstance(v, bool)]
                if len(seqs) == len(f.value) and seqs:
                    p.seq_lo = _tighter(p.seq_lo, min(seqs), max)
                    p.seq_hi = _tighter(p.seq_hi, max(seqs), min)
                return
            if not isinstance(value, int) or isinstance(value, bool):
                return
            lo = {GreaterThan: value + 1, GreaterThanOrEqual: value, EqualTo: value}
            hi = {LessThan: value - 1, LessThanOrEqual: value, EqualTo: value}
            if type(f) in lo:
                p.seq_lo = _tighter(p.seq_lo, lo[type(f)], max)
            if type(f) in hi:
                p.seq_hi = _tighter(p.seq_hi, hi[type(f)], min)
        elif column == ("timestamp",):
            # Only an instant is safe: a naive datetime's zone is the session's, not known here.
            if not isinstance(value, datetime) or value.tzinfo is None:
                return
            if isinstance(f, (GreaterThan, GreaterThanOrEqual)):
                p.time_lo = _tighter(p.time_lo, value, max)
            elif isinstance(f, (LessThan, LessThanOrEqual)):
                # end exclusive; microseconds are Spark's resolution, nanoseconds the store's
                p.time_hi = _tighter(p.time_hi, value + timedelta(microseconds=1), min)
        elif column == ("subject",) and isinstance(f, EqualTo) and isinstance(value, str):
            literal = value and not {"*", ">"} & set(value.split("."))
            if literal and self.filters is None:
                self.filters = [value]


@dataclass
class JetStreamCommitMessage(WriterCommitMessage):
    """What a batch write task reports: its partition, and the messages it stored and the
    duplicates dropped."""

    partition_id: int
    published: int
    duplicates: int


class JetStreamBatchWriter(DataSourceArrowWriter):
    """Publishes each partition with ``publish_async`` and waits for every ack.

    Message ids: the ``msg_id`` column when given, else ``<write_id>-<partition>-<digest of
    the row's subject, headers and data>`` (``-<k>`` for the k-th identical row); ``write_id``
    is the ``write_id`` option or a random id made once on the driver, so a retried task
    publishes the same ids — in whatever order it reads its rows, a shuffle's included —
    and the server drops the copies (within the stream's duplicate_window).
    """

    def __init__(self, options: Dict[str, Any], write_id: str) -> None:
        self.options = options
        self.write_id = write_id
        self.subject: Optional[str] = options.get("subject") or None
        self.ack_timeout = float_option(options, "ack_timeout") or 60.0

    def check_stream(self) -> None:
        """On the driver: warn about a short duplicate window (needs stream or subject)."""
        stream = self.options.get("stream") or None
        if stream is None and self.subject is None:
            return
        check_duplicate_window(_js(self.options), stream=stream, subject=self.subject)

    def _batches(self, batches: Iterator[Any]) -> Iterator[Any]:
        """The Arrow batches of a partition (tests override this to inject failures)."""
        return batches

    def write(self, iterator: Iterator[Any]) -> JetStreamCommitMessage:
        """Publish one partition's rows, in a task, and wait for every ack; returns the task's
        counts."""
        from pyspark import TaskContext

        ctx = TaskContext.get()
        partition_id = ctx.partitionId() if ctx is not None else 0
        js = _js(self.options)
        result = publish_arrow(
            js,
            self._batches(iterator),
            self.subject,
            f"{self.write_id}-{partition_id}",
            ack_timeout=self.ack_timeout,
        )
        return JetStreamCommitMessage(partition_id, result.published, result.duplicates)

    def commit(self, messages: List[Optional[WriterCommitMessage]]) -> None:
        """Log the write's totals, on the driver."""
        done = [m for m in messages if isinstance(m, JetStreamCommitMessage)]
        log.info(
            "jetstream_sync.spark: write %s stored %d messages (%d duplicates dropped)",
            self.write_id,
            sum(m.published for m in done),
            sum(m.duplicates for m in done),
        )

    def abort(self, messages: List[Optional[WriterCommitMessage]]) -> None:
        """Log that the write was aborted: what was acknowledged stays in the stream (running it
        again with the same ``write_id`` stores only what is missing)."""
        # Published messages cannot be taken back; running the same write again with the
        # same write_id option (within the duplicate window) stores only what is missing.
        log.warning(
            "jetstream_sync.spark: write %s aborted; messages already acknowledged stay in the "
            "stream",
            self.write_id,
        )
