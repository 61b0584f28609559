"""Issue 18, 2b: speculation. One task is held after storing part of its rows; Spark starts a
speculative copy on the other executor (another host: Spark never speculates on the host of
the running attempt), the copy writes the whole partition and wins, the original is killed.
Both published under the same ids: every row is stored exactly once, and no task failed (the
copy was speculative, not a retry)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, Dict

import pytest

from jetstream_sync.server import NATSServer

from ._checks import assert_exactly_once, count, ids, new_stream, read_marks, stored
from ._cluster import Sessions
from ._executor import as_messages, mark, once, wait_for_file, wait_stored

N = 200_000
SLOW = 3  # the partition whose first attempt is held

SPECULATION = {
    "spark.speculation": "true",
    "spark.speculation.interval": "100ms",
    "spark.speculation.quantile": "0.5",
    "spark.speculation.multiplier": "1.5",
    "spark.speculation.minTaskRuntime": "500ms",
    # Speculate on time alone (not on the task's rate of progress).
    "spark.speculation.efficiency.enabled": "false",
}


@pytest.fixture
def speculative(sessions: Sessions) -> Any:
    return sessions.healthy(**SPECULATION)


@pytest.mark.timeout(300)
def test_b_a_speculative_copy_stores_every_row_once(
    speculative: Any, cluster_nats: NATSServer, marks: Path
) -> None:
    spark = speculative
    url = cluster_nats.url
    stream = new_stream(url, "SPEC")
    where = str(marks)

    def subject_of(task: Dict[str, Any]) -> str:
        return f"{stream.lower()}.p{task['partition']}"

    def hold(task: Dict[str, Any], rows: int) -> None:
        # The slow partition's first attempt stores part of its rows, then waits until the
        # speculative copy has read all of its own (Spark kills this attempt when the copy
        # commits; if it is not killed first, it goes on, under the same ids).
        if task["partition"] == SLOW and rows >= 40_000 and once(where, "hold"):
            wait_stored(url, stream, subject_of(task), 10_000)
            mark(where, task, "held")
            wait_for_file(f"{where}/p{SLOW}-a1-end.json")

    group = f"speculation-{uuid.uuid4().hex[:8]}"
    sc = spark.sparkContext
    sc.setJobGroup(group, "speculation test")
    try:
        df = spark.range(N, numPartitions=4).mapInArrow(
            as_messages(subject_of, where, hold), "subject string, data binary"
        )
        df.write.format("jetstream").option("servers", url).option("stream", stream).mode(
            "append"
        ).save()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]  # unset

    found = read_marks(marks)
    held = [m for m in found if m["event"] == "held"]
    assert len(held) == 1 and held[0]["attempt"] == 0, found
    copy = [m for m in found if m["partition"] == SLOW and m["attempt"] == 1]
    assert {m["event"] for m in copy} == {"start", "end"}, found
    assert copy[0]["executor"] != held[0]["executor"], found
    tracker = sc.statusTracker()
    stages = [s for j in tracker.getJobIdsForGroup(group) for s in tracker.getJobInfo(j).stageIds]
    infos = [tracker.getStageInfo(s) for s in stages]
    assert infos and all(i is not None and i.numFailedTasks == 0 for i in infos), infos

    assert count(url, stream) == N
    assert_exactly_once(stored(url, stream), ids(N))
