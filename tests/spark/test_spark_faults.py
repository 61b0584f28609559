"""The Spark write under the capability fault table's faults (issue 35): a DataFrame
written with the ``jetstream`` sink through the fault proxy of tests/integration, the fault
landing mid-write on the sink's acks (held in the proxy, then cut mid-frame or the server
SIGKILLed and restarted on the same store), or a black hole that heals. The README promises
every row stored exactly once (the sink resends what is unacked, the stream drops the copies
by Nats-Msg-Id): lost and doubled are counted by reading the stream back."""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any, Dict, Iterator, List

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "integration"))

from fault_table import print_table
from faultproxy import FaultProxy
from test_capability_faults import (
    BlackHole,
    CutAnswer,
    Fault,
    SigkillAnswer,
)

import jetstream_sync as nats
from jetstream_sync.server import NATSServer
from jetstream_sync.testing import stream_name

ROWS = 20_000
ARM_AFTER = 256 * 1024  # bytes the write sent through the proxy before the fault


@pytest.fixture
def own_server() -> Iterator[NATSServer]:
    """A server of this test's own (file store): the SIGKILL row kills it."""
    with NATSServer(jetstream=True) as srv:
        yield srv


def _stored(js: Any, stream: str) -> Dict[bytes, int]:
    total = js.stream_info(stream).state.messages
    seen: Dict[bytes, int] = {}
    while sum(seen.values()) < total:
        for m in js.get_msgs(stream, seq=sum(seen.values()) + 1, batch=1000):
            seen[m.data] = seen.get(m.data, 0) + 1
    return seen


def spark_row(spark: Any, srv: NATSServer, fault: Fault) -> Dict[str, Any]:
    with nats.connect(srv.url) as admin:
        ajs = admin.jetstream(timeout=10.0)
        stream = stream_name("SPF")
        ajs.add_stream(
            name=stream,
            subjects=[f"{stream.lower()}.>"],
            duplicate_window=300.0,
            allow_direct=True,
        )
        proxy = FaultProxy("127.0.0.1", srv.port)
        done = threading.Event()

        def arm_mid_write() -> None:
            while not done.is_set():
                if proxy.bytes_in["up"] >= ARM_AFTER:
                    fault.arm(proxy)
                    return
                done.wait(0.001)  # a poll of the proxy's counter

        arming = threading.Thread(target=arm_mid_write, name="arm", daemon=True)
        arming.start()
        df = spark.range(0, ROWS, 1, 2).selectExpr(
            f"'{stream.lower()}.w' as subject",
            "cast(concat('row-', cast(id as string)) as binary) as data",
        )
        started = time.monotonic()
        try:
            (
                df.write.format("jetstream")
                .option("servers", proxy.url)
                .option("stream", stream)
                .option("reconnect_time_wait", "0.2")
                .option("ping_interval", "1")
                .option("max_reconnect_attempts", "25")
                .mode("append")
                .save()
            )
            error = "-"
        except Exception as exc:  # the row says so; the test fails on it
            error = type(exc).__name__
        took = time.monotonic() - started
        done.set()
        arming.join(10)
        fault.finish(proxy)
        mid_write = fault.landed and started < fault.struck_at < started + took
        links = proxy.accepted
        proxy.close()
        # Works after: a second write straight to the server (the proxy is gone).
        spark.range(0, 10, 1, 1).selectExpr(
            f"'{stream.lower()}.after' as subject", "cast(id as string) as data"
        ).write.format("jetstream").option("servers", srv.url).option("stream", stream).mode(
            "append"
        ).save()
        seen = _stored(ajs, stream)
        ajs.delete_stream(stream)
    want = {b"row-%d" % i for i in range(ROWS)}
    after = sum(1 for d in seen if not d.startswith(b"row-"))
    return {
        "capability": f"spark write x{ROWS}",
        "fault": fault.name,
        "calls": ROWS,
        "lost": len(want - set(seen)),
        "doubled": sum(n - 1 for d, n in seen.items() if d in want),
        "worst_call_s": round(took, 2),
        "timeout_s": "-",
        "errors": f"{error} ({links} connections through the proxy)",
        "works_after": after == 10,
        "landed": mid_write,
    }


def test_a_spark_write_under_faults(spark: Any, own_server: NATSServer) -> None:
    # A first write, no fault: the session's Python workers start (not timed in a row).
    with nats.connect(own_server.url) as nc:
        nc.jetstream().add_stream(name="WARM", subjects=["warm"])
    spark.range(0, 10, 1, 2).selectExpr(
        "'warm' as subject", "cast(id as string) as data"
    ).write.format("jetstream").option("servers", own_server.url).option("stream", "WARM").mode(
        "append"
    ).save()
    faults: List[Fault] = [CutAnswer(), BlackHole(), SigkillAnswer(own_server)]
    rows = [spark_row(spark, own_server, fault) for fault in faults]
    print_table(rows)
    for row in rows:
        assert row["errors"].startswith("-"), row  # the write raised nothing
        assert row["lost"] == 0 and row["doubled"] == 0, row
        assert row["works_after"], row
        assert row["landed"], row  # the fault struck while the write ran
