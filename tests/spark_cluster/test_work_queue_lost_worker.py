"""Issue 18, 2e: ``process_work_queue`` while a worker is killed under the batch function's
Spark job. The job's lost task runs again on the other executor, ``func`` returns, and the
batch is acked: every job is processed (at least once, as docs/guides/spark.md promises) and
nothing is left pending or unacked."""

from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path
from typing import Any, Dict, List

import pytest

import jetstream_sync as nats
from jetstream_sync.server import NATSServer
from jetstream_sync.spark.helpers import process_work_queue

from ._cluster import SparkCluster, wait_until
from ._executor import as_messages, mark, once, wait_for_file

JOBS = 600
BATCH = 200
HELD_BATCH = 1  # the batch during whose job a worker dies


def _queue(url: str) -> str:
    name = f"WQC{uuid.uuid4().hex[:8]}".upper()
    with nats.connect(url, name="cluster-test") as nc:
        js = nc.jetstream()
        js.add_stream(name=name, subjects=[f"{name.lower()}.>"], retention="workqueue")
        js.create_or_update_consumer(name, durable_name="spark", ack_wait=30.0)
        for i in range(JOBS):
            js.publish_async(f"{name.lower()}.job", b"%d" % i)
        js.publish_async_completed(timeout=60)
    return name


@pytest.mark.timeout(300)
def test_e_a_worker_killed_while_func_runs_every_job_is_processed_and_acked(
    spark: Any, cluster: SparkCluster, cluster_nats: NATSServer, marks: Path
) -> None:
    url = cluster_nats.url
    stream = _queue(url)
    processed: List[bytes] = []
    batches: List[int] = []

    def func(df: Any, batch_id: int) -> None:
        where = marks / f"b{batch_id}"
        where.mkdir()
        place = str(where)

        def hold(task: Dict[str, Any], rows: int) -> None:
            # In the held batch's job, the first task to get here waits to be killed.
            if batch_id == HELD_BATCH and once(place, "hold"):
                mark(place, task, "held")
                wait_for_file(f"{place}/never")  # until the kill; raises after 120 s

        rows = (
            df.select("data")
            .mapInArrow(
                as_messages(lambda task: "done", place, hold), "subject string, data binary"
            )
            .collect()
        )
        processed.extend(bytes(r.data) for r in rows)
        batches.append(batch_id)

    killed: Dict[str, Any] = {}
    done = threading.Event()

    def killer() -> None:
        held = wait_until(
            lambda: done.is_set() or list((marks / f"b{HELD_BATCH}").glob("*-held.json")),
            "a held task",
            200,
        )
        if held is True:
            return
        executor = json.loads(held[0].read_text())["executor"]
        index = next(i for i in cluster.workers if cluster.executor_id(i) == executor)
        killed["worker"] = index
        killed["pids"] = cluster.kill_worker(index)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    try:
        n = process_work_queue(spark, func, url, stream, "spark", batch_size=BATCH, max_wait=2.0)
    finally:
        done.set()
        thread.join(timeout=30)
        for index, daemon in cluster.workers.items():
            if daemon.proc.poll() is not None:
                cluster.start_worker(index)  # for the next tests (the spark fixture waits)

    assert killed.get("pids"), "no worker was killed"
    assert n == JOBS // BATCH == len(batches)
    # At least once: every job; a repeat would be allowed, but none is expected here.
    assert set(processed) == {b"%d" % i for i in range(JOBS)}
    with nats.connect(url, name="cluster-test") as nc:
        js = nc.jetstream()
        info = js.consumer_info(stream, "spark")
        assert (info.num_pending, info.num_ack_pending) == (0, 0)
        assert js.stream_info(stream).state.messages == 0  # work queue: every job acked
