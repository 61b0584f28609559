"""process_work_queue: foreachBatch-style processing of a durable pull consumer, acked only
after the batch function returned (at least once)."""

from __future__ import annotations

import uuid
from typing import Any, Dict, List

import pytest

import jetstream_sync as nats
from jetstream_sync.server import NATSServer
from jetstream_sync.spark.helpers import process_work_queue
from jetstream_sync.testing import wait_until


def _queue(url: str, n: int) -> str:
    name = f"WQ{uuid.uuid4().hex[:8]}".upper()
    with nats.connect(url) as nc:
        js = nc.jetstream()
        js.add_stream(name=name, subjects=[f"{name.lower()}.>"], retention="workqueue")
        js.create_or_update_consumer(name, durable_name="spark", ack_wait=30.0)
        for i in range(n):
            js.publish_async(f"{name.lower()}.job", b"%d" % i)
        js.publish_async_completed(timeout=30)
    return name


def test_batches_are_acked_after_success(spark: Any, spark_nats: NATSServer) -> None:
    url = spark_nats.url
    stream = _queue(url, 250)
    seen: Dict[int, List[int]] = {}

    def func(df: Any, batch_id: int) -> None:
        seen[batch_id] = [r.stream_seq for r in df.select("stream_seq").collect()]

    n = process_work_queue(spark, func, url, stream, "spark", batch_size=100, max_wait=3.0)
    assert n == 3
    assert [len(v) for v in seen.values()] == [100, 100, 50]
    assert sorted(s for v in seen.values() for s in v) == list(range(1, 251))
    with nats.connect(url) as nc:
        info = nc.jetstream().consumer_info(stream, "spark")
        assert (info.num_pending, info.num_ack_pending) == (0, 0)
        # work queue: all done (the server removes acked messages after the acks arrive)
        wait_until(lambda: nc.jetstream().stream_info(stream).state.messages == 0, what="empty")


def test_a_failed_batch_is_redelivered(spark: Any, spark_nats: NATSServer) -> None:
    url = spark_nats.url
    stream = _queue(url, 150)
    processed: List[int] = []

    def failing(df: Any, batch_id: int) -> None:
        if batch_id == 1:
            raise RuntimeError("the sink is down")
        processed.extend(r.stream_seq for r in df.select("stream_seq").collect())

    with pytest.raises(RuntimeError, match="the sink is down"):
        process_work_queue(spark, failing, url, stream, "spark", batch_size=100, max_wait=3.0)
    assert sorted(processed) == list(range(1, 101))  # the first batch, acked

    def ok(df: Any, batch_id: int) -> None:
        processed.extend(r.stream_seq for r in df.select("stream_seq").collect())

    process_work_queue(spark, ok, url, stream, "spark", batch_size=100, max_wait=3.0)
    assert sorted(processed) == list(range(1, 151))  # the failed batch again, nothing twice


def test_arguments_are_checked(spark: Any, spark_nats: NATSServer) -> None:
    with pytest.raises(nats.InvalidArgumentError, match="func must be callable"):
        process_work_queue(spark, "nope", spark_nats.url, "S", "C")  # type: ignore[arg-type]
    with pytest.raises(nats.InvalidArgumentError, match="batch_size"):
        process_work_queue(spark, print, spark_nats.url, "S", "C", batch_size=0)


def test_a_batch_size_the_consumer_cannot_serve_is_refused(
    spark: Any, spark_nats: NATSServer
) -> None:
    """batch_size above max_ack_pending would silently run smaller batches (issue 18, 3)."""
    url = spark_nats.url
    stream = _queue(url, 10)
    with nats.connect(url) as nc:
        js = nc.jetstream()
        js.delete_consumer(stream, "spark")  # a work queue takes one unfiltered consumer
        js.add_consumer(stream, durable_name="small", max_ack_pending=100)
    with pytest.raises(nats.InvalidArgumentError, match=r"above the max_ack_pending.*\(100\)"):
        process_work_queue(spark, print, url, stream, "small", batch_size=1000)
    done: List[int] = []
    n = process_work_queue(
        spark, lambda df, i: done.append(df.count()), url, stream, "small", batch_size=100
    )
    assert (n, sum(done)) == (1, 10)
