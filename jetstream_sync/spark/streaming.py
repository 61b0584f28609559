"""Structured Streaming for the ``jetstream`` data source: a replayable reader and a writer.

Reading (``spark.readStream.format("jetstream")``): an offset is ``{"seq": n}``, the next
stream sequence to read, so a micro-batch is a range of stream sequences — like Kafka's
offsets, replayable: a query restarted from its checkpoint asks for the same ranges and gets
the same rows. Nothing is acked and no durable consumer is made; what has been read is what
the checkpoint says. Each micro-batch is read like a batch read (an ephemeral pull consumer
per partition, or batched direct get with ``direct`` true).

Options, besides the batch read's ``servers``, ``stream``, ``filter_subject`` /
``filter_subjects``, ``partitions`` and ``direct``: where a new query starts — ``start_seq``,
``start_time``, or ``starting`` ``earliest`` (default) / ``latest`` — and
``max_rows_per_trigger`` (stream sequences per micro-batch; with a filter a batch may hold
fewer rows). ``Trigger.AvailableNow`` reads up to
what was stored when the query started, then stops.

Writing (``df.writeStream.format("jetstream")``): each micro-batch is published like a batch
write; a message without a ``msg_id`` column value gets
``<query id>-<batch id>-<partition>-<digest of the row>`` (see ``_publish``: no dependence on
the order of the rows). The query id survives a restart from the same checkpoint and the batch
id of a replayed micro-batch is the same, so a micro-batch written again is de-duplicated by
the server (within the stream's duplicate window).
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any, Dict, Iterator, List, Optional, Sequence

from pyspark.sql.datasource import (
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from .. import errors
from . import _clients
from ._options import (
    bool_option,
    connection,
    duration_option,
    filters_option,
    float_option,
    int_option,
    js_options,
    required,
)
from ._publish import check_duplicate_window, publish_arrow
from ._pullrange import range_batches
from ._ranges import SeqRange, parse_time_option, seq_at_or_after, split_range

__all__ = ["JetStreamStreamReader", "JetStreamStreamWriter", "SeqRangePartition"]

log = logging.getLogger("jetstream_sync.spark")

DEFAULT_PARTITIONS = 2
_MAX_TRIGGER_DELAY = 15 * 60.0  # Kafka's default for maxTriggerDelay
_QUERY_ID = "sql.streaming.queryId"  # local properties Spark gives every task of a query
_BATCH_ID = "streaming.sql.batchId"


def _js(options: Dict[str, Any]) -> Any:
    servers, kwargs = connection(options)
    return _clients.jetstream(servers, js_options(options), **kwargs)


def _seq_of(offset: Dict[str, Any], what: str) -> int:
    try:
        seq = int(offset["seq"])
    except (KeyError, TypeError, ValueError):
        raise errors.InvalidArgumentError(
            f"the {what} offset of a jetstream source must be {{'seq': <int>}}, got {offset!r}"
        ) from None
    if seq < 1:
        raise errors.InvalidArgumentError(f"the {what} offset's seq must be >= 1, got {seq}")
    return seq


class SeqRangePartition(InputPartition):
    """Stream sequences ``start..end`` (inclusive) of one micro-batch, and how to read them."""

    def __init__(self, start: int, end: int, direct: bool) -> None:
        self.start = start
        self.end = end
        self.direct = direct

    def __repr__(self) -> str:
        return f"SeqRangePartition({self.start}..{self.end}, direct={self.direct})"


class JetStreamStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are stream sequences. The planning methods run in one driver-side process;
    ``read`` runs, pickled, in the executors: nothing here holds a client."""

    def __init__(
        self, options: Dict[str, Any], schema: StructType, default_partitions: Optional[int]
    ) -> None:
        self.options = options
        self.columns: List[str] = list(schema.fieldNames())
        self.stream = required(options, "stream")
        self.filters = filters_option(options)
        self.include_headers = bool_option(options, "include_headers") is not False
        self.partition_count = (
            int_option(options, "partitions", minimum=1) or default_partitions or DEFAULT_PARTITIONS
        )
        self.max_rows = int_option(options, "max_rows_per_trigger", minimum=1)
        # Kafka's minOffsetsPerTrigger / maxTriggerDelay: hold a trigger back until this many
        # sequences wait, or the delay has passed since the last batch.
        self.min_rows = int_option(options, "min_rows_per_trigger", minimum=1)
        self.max_delay = duration_option(options, "max_trigger_delay") or _MAX_TRIGGER_DELAY
        self._last_batch_at = time.monotonic()
        starting = str(options.get("starting", "earliest")).strip().lower()
        if starting not in ("earliest", "latest"):
            raise errors.InvalidArgumentError(
                f"option 'starting' must be earliest or latest, got {starting!r}"
            )
        self.starting = starting
        mode = str(options.get("direct", "auto")).strip().lower()
        if mode not in ("auto", "true", "false"):
            raise errors.InvalidArgumentError(f"option 'direct' must be auto/true/false: {mode!r}")
        self.direct_mode = mode
        self.read_timeout = float_option(options, "read_timeout") or 30.0
        fail = bool_option(options, "fail_on_data_loss")
        self.fail_on_data_loss = True if fail is None else fail
        self.target: Optional[int] = None  # Trigger.AvailableNow: read no further than this

    # --- driver side ----------------------------------------------------------------------

    def _state(self) -> Any:
        return _js(self.options).stream_info(self.stream)

    def initialOffset(self) -> Dict[str, Any]:
        """The first offset of a new query: ``start_seq``, the first sequence at or after
        ``start_time``, the end of the stream for ``starting`` latest, else the stream's first
        sequence."""
        o = self.options
        state = self._state().state
        start_seq = int_option(o, "start_seq", minimum=1)
        if start_seq is not None:
            return {"seq": start_seq}
        if o.get("start_time"):
            when = parse_time_option(o["start_time"], "start_time")
            seq = seq_at_or_after(_js(o), self.stream, when)
            return {"seq": seq if seq is not None else state.last_seq + 1}
        if self.starting == "latest":
            return {"seq": state.last_seq + 1}
        return {"seq": max(1, state.first_seq)}

    def getDefaultReadLimit(self) -> ReadLimit:
        """At most ``max_rows_per_trigger`` rows per micro-batch when set, else everything
        available."""
        return ReadMaxRows(self.max_rows) if self.max_rows else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """For Trigger.AvailableNow: read up to the stream's last sequence now, and no further."""
        self.target = self._state().state.last_seq + 1

    def latestOffset(self, start: Dict[str, Any], limit: ReadLimit) -> Dict[str, Any]:
        """The end offset of the next micro-batch from ``start``, within ``limit`` (``start``
        itself when no batch is due yet). Raises JetStreamError when messages from ``start``
        on were removed before they were read, unless the option fail_on_data_loss is false
        (then a warning is logged)."""
        first = _seq_of(start, "start")
        state = self._state().state
        self._check_data_loss(first, state)
        end = self.target if self.target is not None else state.last_seq + 1
        if self._hold_back(first, end):
            return {"seq": first}
        if isinstance(limit, ReadMaxRows):
            end = min(end, first + max(1, limit.max_rows))
        if end > first:
            self._last_batch_at = time.monotonic()
        return {"seq": max(first, end)}

    def _hold_back(self, first: int, end: int) -> bool:
        """Fewer than min_rows_per_trigger wait and the delay has not passed: no batch yet.
        Trigger.AvailableNow reads what there is (waiting could be for ever)."""
        if self.min_rows is None or self.target is not None or end - first >= self.min_rows:
            return False
        return time.monotonic() - self._last_batch_at < self.max_delay

    def _check_data_loss(self, first: int, state: Any) -> None:
        """Sequences are contiguous: a start below the stream's first sequence (and not past
        its last) means messages this query never read were removed — limits, a purge,
        message TTL. Kafka's failOnDataLoss: fail, unless told to skip ahead."""
        if not (first < state.first_seq and first <= state.last_seq):
            return
        gone = f"sequences {first}..{state.first_seq - 1} of stream {self.stream!r}"
        if self.fail_on_data_loss:
            raise errors.JetStreamError(
                f"{gone} were removed before this query read them (stream limits, a purge or "
                "message TTL); set the option fail_on_data_loss (failOnDataLoss) to false to "
                "skip ahead instead"
            )
        log.warning("jetstream_sync.spark: %s were removed before they were read: skipped", gone)

    def reportLatestOffset(self) -> Optional[Dict[str, Any]]:
        """The offset after the stream's last message."""
        return {"seq": self._state().state.last_seq + 1}

    def partitions(self, start: Dict[str, Any], end: Dict[str, Any]) -> Sequence[InputPartition]:
        """The sequences from ``start`` up to ``end`` (excluded) split in partitions; none when
        the range is empty."""
        lo, hi = _seq_of(start, "start"), _seq_of(end, "end") - 1
        if hi < lo:
            return []
        direct = self.direct_mode == "true"  # auto: a pull consumer, as batch reads
        parts = split_range(SeqRange(lo, hi), self.partition_count)
        return [SeqRangePartition(p.start, p.end, direct) for p in parts]

    def commit(self, end: Dict[str, Any]) -> None:
        """Nothing to do: the checkpoint is the cursor, there is no consumer to move or message
        to ack."""
        pass  # the checkpoint is the cursor: nothing to ack, no consumer to move

    # --- executor side --------------------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """The record batches of one partition, in an executor; InvalidArgumentError for a
        partition this source did not make."""
        if not isinstance(partition, SeqRangePartition):
            raise errors.InvalidArgumentError(f"not a jetstream partition: {partition!r}")
        yield from range_batches(
            _js(self.options),
            self.stream,
            partition.start,
            partition.end,
            self.filters,
            self.columns,
            self.include_headers,
            direct=partition.direct,
            timeout=self.read_timeout,
        )


class JetStreamStreamCommitMessage(WriterCommitMessage):
    """What a streaming write task reports: its partition, and the messages it stored and the
    duplicates dropped."""

    def __init__(self, partition_id: int, published: int, duplicates: int) -> None:
        self.partition_id = partition_id
        self.published = published
        self.duplicates = duplicates


class JetStreamStreamWriter(DataSourceStreamArrowWriter):
    """Publishes each micro-batch's partitions with ``publish_async`` and waits for every
    ack before the task commits. Ids: see the module doc."""

    def __init__(self, options: Dict[str, Any]) -> None:
        self.options = options
        self.subject: Optional[str] = options.get("subject") or None
        self.ack_timeout = float_option(options, "ack_timeout") or 60.0
        # Without Spark's query id (not a Spark task), ids are still stable within this
        # writer: made once, on the driver.
        self.fallback_id = str(options.get("write_id") or uuid.uuid4().hex)

    def check_stream(self) -> None:
        """Warn when the target stream's duplicate window is short (nothing when neither
        ``stream`` nor ``subject`` is set)."""
        stream = self.options.get("stream") or None
        if stream is None and self.subject is None:
            return
        check_duplicate_window(_js(self.options), stream=stream, subject=self.subject)

    def _id_prefix(self) -> str:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx is None:
            return f"{self.fallback_id}-0"
        query = ctx.getLocalProperty(_QUERY_ID) or self.fallback_id
        batch = ctx.getLocalProperty(_BATCH_ID) or "0"
        return f"{query}-{batch}-{ctx.partitionId()}"

    def write(self, iterator: Iterator[Any]) -> JetStreamStreamCommitMessage:
        """Publish one partition of a micro-batch, in a task, and wait for every ack; returns the
        task's counts."""
        from pyspark import TaskContext

        ctx = TaskContext.get()
        result = publish_arrow(
            _js(self.options),
            iterator,
            self.subject,
            self._id_prefix(),
            ack_timeout=self.ack_timeout,
        )
        partition = ctx.partitionId() if ctx is not None else 0
        return JetStreamStreamCommitMessage(partition, result.published, result.duplicates)

    def commit(self, messages: List[Optional[WriterCommitMessage]], batchId: int) -> None:
        """Log the micro-batch's totals, on the driver."""
        done = [m for m in messages if isinstance(m, JetStreamStreamCommitMessage)]
        log.info(
            "jetstream_sync.spark: micro-batch %d stored %d messages (%d duplicates dropped)",
            batchId,
            sum(m.published for m in done),
            sum(m.duplicates for m in done),
        )

    def abort(self, messages: List[Optional[WriterCommitMessage]], batchId: int) -> None:
        """Log that the micro-batch was aborted: acknowledged messages stay, and a retry of the
        batch is de-duplicated by their ids."""
        log.warning(
            "jetstream_sync.spark: micro-batch %d aborted; acknowledged messages stay in the "
            "stream and a retry of the batch is de-duplicated by their ids",
            batchId,
        )
