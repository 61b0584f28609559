"""Message ids that survive reordering (issue 18, 1): a retried write task may read a
shuffled partition in another order; every row must still be stored exactly once."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any, Dict, List

from jetstream_sync.server import NATSServer
from jetstream_sync.spark import _clients
from jetstream_sync.spark._publish import publish_all
from jetstream_sync.spark._rows import msgs_from_rows


def _stored(js: Any, stream: str) -> Counter[bytes]:
    """Every message of the stream, read in order, as a multiset of data."""
    total = js.stream_info(stream).state.messages
    oc = js.ordered_consumer(stream)
    got: List[bytes] = []
    for _ in range(100):  # bounded: 1,000 a pull
        if len(got) >= total:
            break
        got += [m.data for m in oc.fetch(1000, max_wait=2)]
    oc.delete()
    return Counter(got)


def test_a_retry_that_reads_its_rows_in_another_order_stores_each_once(
    spark_nats: NATSServer,
) -> None:
    js = _clients.jetstream(spark_nats.url, None, name="ids-test")
    js.add_stream(name="REORDER", subjects=["reorder.>"])
    # 1,500 distinct rows and 500 that repeat one of them: identical rows must stay distinct.
    rows: List[Dict[str, Any]] = [
        {"data": f"row-{i % 1500}".encode(), "subject": f"reorder.{i % 7}"} for i in range(2000)
    ]
    rows[5]["headers"] = {"Kind": "a"}
    rows[6] = {**rows[5], "headers": {"Kind": "b"}}  # differs only in a header: distinct
    # Attempt 0 publishes part of the partition in one order, then fails.
    first = list(rows)
    random.Random(1).shuffle(first)
    publish_all(js, msgs_from_rows(first[:700], "reorder.x"), "w1-0")
    # Attempt 1 (another executor) reads the same partition in another order.
    again = list(rows)
    random.Random(2).shuffle(again)
    result = publish_all(js, msgs_from_rows(again, "reorder.x"), "w1-0")
    assert (result.published, result.duplicates) == (1300, 700)
    assert _stored(js, "REORDER") == Counter(r["data"] for r in rows)
    # A third run in yet another order stores nothing more.
    random.Random(3).shuffle(again)
    third = publish_all(js, msgs_from_rows(again, "reorder.x"), "w1-0")
    assert (third.published, third.duplicates) == (0, 2000)
    js.delete_stream("REORDER")


def test_a_msg_id_column_still_wins(spark_nats: NATSServer) -> None:
    js = _clients.jetstream(spark_nats.url, None, name="ids-test")
    js.add_stream(name="OWNIDS", subjects=["ownids.>"])
    rows = [{"data": b"a", "msg_id": "x"}, {"data": b"b", "msg_id": "x"}]
    result = publish_all(js, msgs_from_rows(rows, "ownids.x"), "w")
    assert (result.published, result.duplicates) == (1, 1)
    js.delete_stream("OWNIDS")
