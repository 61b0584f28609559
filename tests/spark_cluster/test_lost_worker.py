"""Issue 18, 2c: a worker (its JVM, its executor JVM and the executor's Python workers) is
killed while a write runs, as a lost machine; the lost tasks run again on the other executor
and every row is stored exactly once."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Dict, List

import pytest

from jetstream_sync.server import NATSServer

from ._checks import assert_exactly_once, count, ids, new_stream, read_marks, stored
from ._cluster import SparkCluster, wait_until
from ._executor import as_messages, mark, once, wait_for_file, wait_stored

N = 200_000
VICTIM = 1  # the worker killed


@pytest.mark.timeout(300)
def test_c_a_worker_killed_mid_write_stores_every_row_once(
    spark: Any, cluster: SparkCluster, cluster_nats: NATSServer, marks: Path
) -> None:
    url = cluster_nats.url
    stream = new_stream(url, "LOST")
    where = str(marks)
    victim = cluster.executor_id(VICTIM)
    assert victim is not None, "worker 1 has no executor"

    def subject_of(task: Dict[str, Any]) -> str:
        return f"{stream.lower()}.p{task['partition']}"

    def hold(task: Dict[str, Any], rows: int) -> None:
        # The victim's first task stores part of its rows, then waits to be killed.
        if task["executor"] == victim and rows >= 40_000 and once(where, "hold"):
            wait_stored(url, stream, subject_of(task), 10_000)
            mark(where, task, "held")
            wait_for_file(f"{where}/never")  # until the kill; raises after 120 s

    killed: List[int] = []
    done = threading.Event()

    def killer() -> None:
        held = wait_until(
            lambda: done.is_set() or list(marks.glob("*-held.json")), "a held task", timeout=150
        )
        if held is not True:
            killed.extend(cluster.kill_worker(VICTIM))

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    try:
        df = spark.range(N, numPartitions=4).mapInArrow(
            as_messages(subject_of, where, hold), "subject string, data binary"
        )
        df.write.format("jetstream").option("servers", url).option("stream", stream).mode(
            "append"
        ).save()
    finally:
        done.set()
        thread.join(timeout=30)
        if cluster.workers[VICTIM].proc.poll() is not None:
            cluster.start_worker(VICTIM)  # for the next tests (the spark fixture waits)

    assert killed, "the worker was not killed"
    found = read_marks(marks)
    held = [m for m in found if m["event"] == "held"]
    assert len(held) == 1, found
    again = [
        m
        for m in found
        if m["partition"] == held[0]["partition"] and m["attempt"] > 0 and m["event"] == "end"
    ]
    assert again and all(m["executor"] != victim for m in again), found
    assert count(url, stream) == N
    assert_exactly_once(stored(url, stream), ids(N))
