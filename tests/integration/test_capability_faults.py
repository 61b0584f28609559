"""Capabilities under faults (issue 35), one row per capability and fault: a mid-frame cut
(server -> client), a black hole that heals, and a server SIGKILL with a restart on the same
store. Each row says what was lost, what was doubled, the worst call against its timeout,
the errors seen, and whether the client works again afterwards (``pytest -s`` prints it).

Counters: adds of 1 with a ``msg_id`` each, retried with the same id until they answer; the
counter must end at exactly the number of adds (none lost, none doubled)."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Dict, Iterator, List

import pytest
from fault_table import print_table
from faultproxy import DOWN, FaultProxy

import jetstream_sync as nats
from jetstream_sync.server import NATSServer
from jetstream_sync.testing import stream_name

CALL_TIMEOUT = 1.0
ADDS = 60
FAULT_SPAN = 2.0  # seconds a black hole lasts before it heals
HANG_MARGIN = 5.0  # a 2-core machine shared with other test runs


@pytest.fixture
def own_server() -> Iterator[NATSServer]:
    """A server of this test's own: the SIGKILL row kills it."""
    with NATSServer(jetstream=True) as srv:
        yield srv


def _sigkill_restart(srv: NATSServer) -> Callable[[FaultProxy], None]:
    def fault(_: FaultProxy) -> None:
        srv.kill()
        srv.start()

    return fault


def counter_row(srv: NATSServer, name: str, fault: Callable[[FaultProxy], None]) -> Dict[str, Any]:
    stream = stream_name("CNTF")
    subject = f"{stream.lower()}.n"
    with nats.connect(srv.url) as admin:
        ajs = admin.jetstream(timeout=5.0)
        ajs.add_stream(
            name=stream,
            subjects=[f"{stream.lower()}.>"],
            allow_msg_counter=True,
            allow_direct=True,
        )
        proxy = FaultProxy("127.0.0.1", srv.port)
        errors_seen: Dict[str, int] = {}
        worst = 0.0
        done = 0
        try:
            nc = nats.connect(
                proxy.url,
                ping_interval=1.0,
                max_outstanding_pings=2,
                reconnect_time_wait=0.2,
                max_reconnect_attempts=-1,
                connect_timeout=1.0,
                error_cb=lambda e: None,
            )
            try:
                counter = nc.jetstream(timeout=CALL_TIMEOUT).counter(stream)
                for i in range(ADDS):
                    if i == ADDS // 3:
                        fault(proxy)
                        healer = threading.Timer(FAULT_SPAN, proxy.heal)  # the fault's span
                        healer.start()
                    deadline = time.monotonic() + 30.0
                    while True:
                        started = time.monotonic()
                        try:
                            counter.add(subject, 1, msg_id=f"add-{i}")
                            break
                        except nats.NATSError as exc:
                            kind = type(exc).__name__
                            errors_seen[kind] = errors_seen.get(kind, 0) + 1
                            assert time.monotonic() < deadline, f"add {i} never answered"
                            threading.Event().wait(0.05)  # a retry pace
                        finally:
                            worst = max(worst, time.monotonic() - started)
                    done += 1
                healer.join()
                proxy.heal()
                works_after = int(counter.add(subject, 0)) >= 0
            finally:
                nc.close()
        finally:
            proxy.close()
        value = ajs.counter(stream).load(subject)
        ajs.delete_stream(stream)
    return {
        "capability": "counter add(msg_id)",
        "fault": name,
        "calls": done,
        "lost": max(0, done - value),
        "doubled": max(0, value - done),
        "worst_call_s": round(worst, 2),
        "timeout_s": CALL_TIMEOUT,
        "errors": ",".join(f"{k}x{v}" for k, v in sorted(errors_seen.items())) or "-",
        "works_after": works_after,
    }


def test_counters_under_faults(own_server: NATSServer) -> None:
    faults: List[Any] = [
        ("cut mid-frame down", lambda p: p.cut(after=7, direction=DOWN)),
        ("black hole, heals", lambda p: p.black_hole()),
        ("SIGKILL + restart", _sigkill_restart(own_server)),
    ]
    rows = [counter_row(own_server, name, fault) for name, fault in faults]
    print_table(rows)
    for row in rows:
        assert row["calls"] == ADDS, row
        assert row["lost"] == 0 and row["doubled"] == 0, row
        assert row["worst_call_s"] <= CALL_TIMEOUT + HANG_MARGIN, row
        assert row["works_after"], row
