"""Issue 18, 2a: a write task that fails after a shuffle is retried on the other executor,
which usually fetches the shuffle blocks in another order (its own map outputs first). Every
row must be stored exactly once: message ids must not depend on a row's position in the
partition (they did before 94d26ba, and this test lost and doubled rows then). Spark does not
promise another order (a CI run met the same one), so the retry also reverses each batch it
reads: its rows are at other positions in any case."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

import pytest

from jetstream_sync.server import NATSServer

from ._checks import assert_exactly_once, count, ids, new_stream, read_marks, stored
from ._executor import as_messages, spread, wait_stored

N = 200_000
FAIL_PARTITION = 0
FAIL_AFTER = 30_000  # rows through the failing attempt before it fails
# ... of which at least this many are stored first (the rows between the Python stages are
# buffered: of 30,000 through, about 10,000 reach the writer before the attempt stops)
STORED_FIRST = 10_000


@pytest.mark.timeout(300)
def test_a_retry_on_the_other_executor_after_a_shuffle_stores_every_row_once(
    spark: Any, cluster_nats: NATSServer, marks: Path
) -> None:
    url = cluster_nats.url
    stream = new_stream(url, "RETRY")
    where = str(marks)

    def subject_of(task: Dict[str, Any]) -> str:
        return f"{stream.lower()}.p{task['partition']}"

    def fail_once(task: Dict[str, Any], rows: int) -> None:
        if (task["partition"], task["attempt"]) == (FAIL_PARTITION, 0) and rows >= FAIL_AFTER:
            # Part of the partition is stored before the attempt fails: the retry must
            # store the rest, each row once, in whatever order it reads them.
            wait_stored(url, stream, subject_of(task), STORED_FIRST)
            raise RuntimeError("test: attempt 0 fails part way")

    df = (
        spark.range(N, numPartitions=8)
        .mapInArrow(spread(where), "id long")  # map outputs on both executors
        .repartition(4, "id")
        .mapInArrow(
            as_messages(subject_of, where, fail_once, order_of=FAIL_AFTER, reverse_retries=True),
            "subject string, data binary",
        )
    )
    df.write.format("jetstream").option("servers", url).option("stream", stream).mode(
        "append"
    ).save()

    found = read_marks(marks)
    assert len({m["executor"] for m in found if m["event"] == "map"}) == 2, found
    seen = [m for m in found if m["event"] == "start"]
    failing = {m["attempt"]: m for m in seen if m["partition"] == FAIL_PARTITION}
    assert sorted(failing) == [0, 1], seen
    assert failing[0]["executor"] != failing[1]["executor"], f"retried on the same: {failing}"
    # The retry wrote the rows the first attempt got through in another order (else this
    # test could not tell position ids from content ids).
    orders = {
        m["attempt"]: m["digest"]
        for m in found
        if m["event"] == "order" and m["partition"] == FAIL_PARTITION
    }
    assert sorted(orders) == [0, 1] and orders[0] != orders[1], (orders, failing)

    assert count(url, stream) == N
    got = stored(url, stream)
    assert_exactly_once(got, ids(N))
