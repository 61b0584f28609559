"""Issue 18, 2d: a streaming query from one jetstream stream to another, stopped while a
micro-batch is being written (part of it stored), then restarted from its checkpoint: the
restart writes that micro-batch again under the same query id and batch id, the server drops
the copies, and the target holds every source row exactly once."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict

import pytest

from jetstream_sync.server import NATSServer

from ._checks import assert_exactly_once, count, fill, ids, new_stream, stored
from ._cluster import wait_until
from ._executor import as_messages, mark, once, wait_for_file, wait_stored

N = 100_000
PER_TRIGGER = 20_000  # two partitions of 10,000 per micro-batch
ARROW_BATCH = "1000"  # rows per Arrow batch into the mapInArrow: 10 a partition
HELD_BATCH = "1"  # the micro-batch stopped part way


@pytest.mark.timeout(300)
def test_d_a_query_stopped_mid_batch_and_restarted_writes_every_row_once(
    spark: Any, cluster_nats: NATSServer, marks: Path, tmp_path: Path
) -> None:
    url = cluster_nats.url
    source = new_stream(url, "SRC")
    target = new_stream(url, "DST")
    fill(url, source, (b"%d" % i for i in range(N)), f"{source.lower()}.rows")
    where = str(marks)
    holding = marks / "holding"  # while it exists, the held micro-batch waits
    holding.touch()
    hold_path = str(holding)
    checkpoint = tmp_path / "checkpoint"

    def subject_of(task: Dict[str, Any]) -> str:
        return f"{target.lower()}.b{task['batch']}p{task['partition']}"

    def hold(task: Dict[str, Any], rows: int) -> None:
        # Micro-batch 1, partition 0, after 6,000 of its 10,000 rows: once some are stored
        # (Arrow batches queue between the Python stages), wait there until the query is
        # stopped (which kills this task).
        if (task["batch"], task["partition"]) != (HELD_BATCH, 0) or rows < 6_000:
            return
        if os.path.exists(hold_path) and once(where, "hold"):
            wait_stored(url, target, subject_of(task), 1_000)
            mark(where, task, "held")
            wait_for_file(hold_path, present=False)

    def start(**trigger: Any) -> Any:
        df = (
            spark.readStream.format("jetstream")
            .option("servers", url)
            .option("stream", source)
            .option("max_rows_per_trigger", str(PER_TRIGGER))
            .option("partitions", "2")
            .load()
            .select("data")
            .mapInArrow(as_messages(subject_of, where, hold), "subject string, data binary")
        )
        writer = (
            df.writeStream.format("jetstream")
            .option("servers", url)
            .option("stream", target)
            .option("checkpointLocation", str(checkpoint))
        )
        if trigger:
            writer = writer.trigger(**trigger)
        return writer.start()

    previous = spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", ARROW_BATCH)
    try:
        first = start()
        try:
            wait_until(
                lambda: list(marks.glob("*-held.json")),
                lambda: f"the held micro-batch (marks: {sorted(p.name for p in marks.iterdir())})",
                150,
            )
        finally:
            first.stop()
        assert first.exception() is None
        # Stopped inside micro-batch 1: planned (offsets/1) but not committed (commits/1),
        # with part of it stored.
        assert (checkpoint / "offsets" / HELD_BATCH).exists()
        assert not (checkpoint / "commits" / HELD_BATCH).exists()
        stopped_at = count(url, target)
        assert PER_TRIGGER < stopped_at < 2 * PER_TRIGGER, stopped_at

        holding.unlink()
        second = start(availableNow=True)
        try:
            assert second.awaitTermination(240), "the restarted query did not finish"
        finally:
            second.stop()
        assert second.exception() is None
    finally:
        spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", previous)

    assert count(url, target) == N
    assert_exactly_once(stored(url, target), ids(N))
