"""Helpers for plain Spark jobs (no data source): ``publish_partition`` for
``foreachPartition``, and ``process_work_queue``, foreachBatch-style processing of a durable
pull consumer with acks after success. pyspark is imported only when they run."""

from __future__ import annotations

import threading
from typing import Any, Callable, Iterable, List, Optional, Tuple, Union

from .. import errors
from ..msg import Msg
from . import _clients
from ._publish import PublishResult, check_duplicate_window, publish_all
from ._ranges import _from_consumed
from ._rows import COLUMNS, arrow_schema, batches, msgs_from_rows

__all__ = ["process_work_queue", "publish_partition"]

_JS_KEYS = ("domain", "prefix", "timeout")


def _task_ids() -> Tuple[int, int]:
    try:
        from pyspark import TaskContext
    except ImportError:
        return (0, 0)
    ctx = TaskContext.get()
    if ctx is None:
        return (0, 0)
    return (ctx.stageId(), ctx.partitionId())


def publish_partition(
    rows: Iterable[Any],
    servers: Union[str, List[str]],
    subject: Optional[str] = None,
    *,
    write_id: Optional[str] = None,
    stream: Optional[str] = None,
    ack_timeout: float = 60.0,
    **options: Any,
) -> PublishResult:
    """Publish the rows of one partition to JetStream; return after every ack came back.

    Use it in ``foreachPartition``::

        wid = uuid.uuid4().hex  # made on the driver: the same in every retry
        df.foreachPartition(lambda rows: publish_partition(rows, url, write_id=wid))

    Rows (Spark Rows or dicts) have ``data`` (bytes or str) and optionally ``subject``
    (else ``subject``), ``headers`` (a map of a string or a list of strings) and
    ``msg_id``. A row without ``msg_id`` gets ``<write_id>-<partition>-<digest of its
    subject, headers and data>`` (``-<k>`` for the k-th identical row of the partition);
    without a ``write_id``, ``s<stage>-<partition>-<digest>``. The ids do not depend on the
    order in which a task sees its rows, so a retry in any order stores each row once.

    ``options``: connect() keywords (user, password, token, name, ...) plus ``domain``,
    ``prefix``, ``timeout`` for the JetStream context. The connection is the worker
    process's cached one (see ``_clients``), shared by the tasks that process runs.
    Raises the first failed publish's error, which fails the task (and Spark retries it).
    """
    js_options = {k: options.pop(k) for k in _JS_KEYS if k in options}
    js = _clients.jetstream(servers, js_options, **options)
    if stream is not None or subject is not None:
        check_duplicate_window(js, stream=stream, subject=subject)
    stage, partition = _task_ids()
    prefix = f"{write_id}-{partition}" if write_id is not None else f"s{stage}-{partition}"
    return publish_all(js, msgs_from_rows(rows, subject), prefix, ack_timeout=ack_timeout)


def process_work_queue(
    spark: Any,
    func: Callable[[Any, int], None],
    servers: Union[str, List[str]],
    stream: str,
    consumer: str,
    *,
    batch_size: int = 1000,
    max_wait: float = 5.0,
    max_batches: Optional[int] = None,
    **options: Any,
) -> int:
    """Process a work queue the foreachBatch way, on the driver: fetch up to ``batch_size``
    messages from the durable pull consumer ``consumer`` of ``stream``, hand them to
    ``func(df, batch_id)`` as a DataFrame with the data source's schema, and ack them only
    after ``func`` returned. Returns the number of batches processed.

    At least once: if ``func`` raises, the batch is nak'ed (redelivered) and the error
    raised; a driver that dies mid-batch leaves the batch unacked and the server redelivers
    it after the consumer's ``ack_wait``. While ``func`` runs, the messages are kept from
    redelivery with ``in_progress`` every ``ack_wait / 3``. So ``func`` must tolerate seeing
    a batch again: write with message ids (the jetstream sink does) or idempotently.

    Stops when a fetch comes back empty after ``max_wait`` seconds, or after
    ``max_batches``. ``options``: connect() keywords plus ``domain``, ``prefix``, ``timeout``.
    """
    if not callable(func):
        raise errors.InvalidArgumentError(f"func must be callable, got {type(func).__name__}")
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise errors.InvalidArgumentError(f"batch_size must be an int >= 1, got {batch_size!r}")
    if max_batches is not None and (not isinstance(max_batches, int) or max_batches < 1):
        raise errors.InvalidArgumentError(f"max_batches must be an int >= 1, got {max_batches!r}")
    js_options = {k: options.pop(k) for k in _JS_KEYS if k in options}
    js = _clients.jetstream(servers, js_options, **options)
    pull = js.consumer(stream, consumer)
    config = pull.consumer_info().config
    ack_wait = config.ack_wait or 30.0
    for limit, what in (
        (config.max_ack_pending, "max_ack_pending"),
        (config.max_batch, "max_batch"),
    ):
        if limit is not None and 0 < limit < batch_size:
            # The server would never hand out more than that at once: every "batch" would
            # silently be smaller than asked.
            raise errors.InvalidArgumentError(
                f"batch_size {batch_size} is above the {what} of consumer {consumer!r} "
                f"({limit}): lower batch_size, or raise the consumer's {what}"
            )
    done = 0
    while max_batches is None or done < max_batches:
        msgs = pull.fetch(batch_size, max_wait=max_wait)
        if not msgs:
            break
        df = _dataframe(spark, stream, msgs)
        stop = threading.Event()
        keeper = threading.Thread(
            target=_keep_in_progress, args=(msgs, stop, ack_wait / 3), daemon=True
        )
        keeper.start()
        try:
            func(df, done)
        except BaseException:
            for m in msgs:
                m.nak()
            raise
        finally:
            stop.set()
            keeper.join()
        for m in msgs[:-1]:
            m.ack()
        msgs[-1].ack_sync()  # acks go in order: the last one confirmed means all arrived
        done += 1
    return done


def _dataframe(spark: Any, stream: str, msgs: List[Msg]) -> Any:
    import pyarrow as pa

    table = pa.Table.from_batches(
        list(batches(_from_consumed(m, stream) for m in msgs)), schema=arrow_schema(COLUMNS)
    )
    return spark.createDataFrame(table)


def _keep_in_progress(msgs: List[Msg], stop: threading.Event, every: float) -> None:
    while not stop.wait(every):
        for m in msgs:
            m.in_progress()
