"""The fault table: each fault of faultproxy.py, for a bounded time, under a load of acked
JetStream publishes (with message ids, retried until acked) and a pull consumer (fetch and
ack), through the proxy to a real server. One row per fault:

    fault, load, sent, acked, lost, duplicates, hangs (+ consumed, reconnects, worst call)

``lost``: acked ids missing from the stream; ``duplicates``: stream messages whose
Nats-Msg-Id repeats; ``hangs``: calls that overran their timeout by more than HANG_MARGIN,
plus load threads that did not stop. Run it from test_fault_proxy.py (``pytest -s`` shows the
table), or directly: ``python tests/integration/fault_table.py`` starts a server of its own.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from faultproxy import DOWN, UP, FaultProxy

import jetstream_sync as nats
from jetstream_sync.jetstream.context import JetStream

CALL_TIMEOUT = 1.0
HANG_MARGIN = 5.0  # generous: a 2-core machine shared with other test runs
BULK = b"b" * 65536

Fault = Callable[[FaultProxy], None]

# name, what the load is, the fault (called once, at the start of the fault window)
FAULTS: List[Tuple[str, str, Fault]] = [
    ("none", "pub+fetch", lambda p: None),
    ("half-dead both", "pub+fetch+bulk", lambda p: p.half_dead()),
    ("half-dead up", "pub+fetch+bulk", lambda p: p.half_dead(UP)),
    ("black hole, heals", "pub+fetch", lambda p: p.black_hole()),
    ("cut mid-frame up", "pub+fetch", lambda p: p.cut(after=7, direction=UP)),
    ("cut mid-frame down", "pub+fetch", lambda p: p.cut(after=7, direction=DOWN)),
    ("1-byte fragments", "pub+fetch", lambda p: p.fragment(delay=0.0005)),
]


class _Load:
    """The load's threads and what they saw. Every call is timed: one that overruns its
    timeout by more than HANG_MARGIN counts as a hang."""

    def __init__(self, js: JetStream, subject: str, stream: str, bulk: bool) -> None:
        self.js, self.subject = js, subject
        self.stop = threading.Event()
        self.stop_pub = threading.Event()
        self.sent = 0
        self.acked: List[int] = []
        self.consumed: set[int] = set()
        self.worst = 0.0
        self.hangs = 0
        # A short ack wait: what a fault swallowed comes again within the drain below.
        config = nats.ConsumerConfig(ack_wait=2.0)
        self.psub = js.pull_subscribe(subject, durable="table", stream=stream, config=config)
        self.threads = [
            threading.Thread(target=self._publish, name="table-pub", daemon=True),
            threading.Thread(target=self._fetch, name="table-fetch", daemon=True),
        ]
        if bulk:
            self.threads.append(threading.Thread(target=self._bulk, name="table-bulk", daemon=True))

    def _timed(self, fn: Callable[[], Any], timeout: float) -> Any:
        started = time.monotonic()
        try:
            return fn()
        finally:
            took = time.monotonic() - started
            self.worst = max(self.worst, took)
            if took > timeout + HANG_MARGIN:
                self.hangs += 1

    def _publish(self) -> None:
        i = 0
        while not self.stop_pub.is_set():
            self.sent = i + 1
            while not self.stop.is_set():  # the same id until it is acked
                try:
                    self._timed(lambda n=i: self._publish_one(n), CALL_TIMEOUT)
                except nats.NATSError:
                    self.stop.wait(0.02)  # a retry pace, not a synchronisation
                    continue
                self.acked.append(i)
                break
            else:
                return
            i += 1

    def _publish_one(self, i: int) -> Any:
        return self.js.publish(self.subject, str(i).encode(), msg_id=f"m{i}", timeout=CALL_TIMEOUT)

    def _fetch(self) -> None:
        while not self.stop.is_set():
            try:
                msgs = self._timed(lambda: self.psub.fetch(10, timeout=CALL_TIMEOUT), CALL_TIMEOUT)
            except nats.NATSError:
                continue
            for msg in msgs:
                self.consumed.add(int(msg.data))
                try:
                    msg.ack()
                except nats.NATSError:
                    pass

    def _bulk(self) -> None:
        """Core publishes of 64 KB, paced: enough to fill a half-dead link's send buffer."""
        nc = self.js.nc
        while not self.stop.wait(0.01):
            try:
                self._timed(lambda: nc.publish("table.bulk", BULK), 0.0)
            except nats.NATSError:
                pass

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def finish(self, bound: float) -> None:
        """Stop publishing new ids; let the one in hand be acked; stop everything."""
        self.stop_pub.set()
        deadline = time.monotonic() + bound
        self.threads[0].join(bound)
        self.stop.set()
        for t in self.threads:
            t.join(max(0.1, deadline - time.monotonic()))
            if t.is_alive():
                self.hangs += 1


def stream_ids(js: JetStream, stream: str) -> List[str]:
    info = js.stream_info(stream)
    ids: List[str] = []
    seq, last = info.state.first_seq or 1, info.state.last_seq
    while seq <= last:
        got = 0
        for raw in js.get_msgs(stream, seq=seq, batch=500, timeout=10):
            ids.append(str((raw.headers or {}).get("Nats-Msg-Id", "")))
            seq = raw.seq + 1
            got += 1
        if got == 0:
            break
    return ids


def run_one(port: int, name: str, load_name: str, fault: Fault, seconds: float) -> Dict[str, Any]:
    stream = "TABLE" + "".join(c for c in name.upper() if c.isalnum())
    with nats.connect(f"nats://127.0.0.1:{port}") as admin:
        ajs = admin.jetstream()
        try:
            ajs.delete_stream(stream)
        except nats.StreamNotFoundError:
            pass
        ajs.add_stream(name=stream, subjects=[f"{stream.lower()}.>"], allow_direct=True)
        proxy = FaultProxy("127.0.0.1", port)
        try:
            nc = nats.connect(
                proxy.url,
                write_timeout=2.0,
                ping_interval=1.0,
                max_outstanding_pings=2,
                reconnect_time_wait=0.2,
                max_reconnect_attempts=-1,
                connect_timeout=1.0,
                error_cb=lambda e: None,
            )
            try:
                load = _Load(
                    nc.jetstream(timeout=2.0), f"{stream.lower()}.x", stream, "bulk" in load_name
                )
                load.start()
                time.sleep(seconds)  # the load's run before the fault: a duration, not a sync
                fault(proxy)
                time.sleep(seconds)  # the fault's span
                proxy.heal()
                time.sleep(seconds)  # recovery
                load.finish(bound=30.0)
                acked = set(load.acked)
                drain_until = time.monotonic() + 20.0
                while not acked <= load.consumed and time.monotonic() < drain_until:
                    try:
                        for msg in load.psub.fetch(100, timeout=CALL_TIMEOUT):
                            load.consumed.add(int(msg.data))
                            msg.ack()
                    except nats.NATSError:
                        pass
                reconnects = nc.stats["reconnects"]
            finally:
                proxy.heal()
                nc.close()
        finally:
            proxy.close()
        ids = stream_ids(ajs, stream)
        ajs.delete_stream(stream)
    present = {int(i[1:]) for i in ids if i.startswith("m")}
    return {
        "fault": name,
        "load": load_name,
        "sent": load.sent,
        "acked": len(acked),
        "lost": len(acked - present),
        "duplicates": len(ids) - len(set(ids)),
        "hangs": load.hangs,
        "consumed": len(load.consumed & acked),
        "reconnects": reconnects,
        "worst_call_s": round(load.worst, 2),
    }


def run_fault_table(
    port: int, seconds: float = 4.0, only: Optional[List[str]] = None
) -> List[Dict[str, Any]]:
    return [
        run_one(port, name, load, fault, seconds)
        for name, load, fault in FAULTS
        if only is None or name in only
    ]


def print_table(rows: List[Dict[str, Any]]) -> None:
    if not rows:
        return
    cols = list(rows[0])
    widths = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in cols}
    print()
    print("  ".join(c.ljust(widths[c]) for c in cols))
    for r in rows:
        print("  ".join(str(r[c]).ljust(widths[c]) for c in cols))


if __name__ == "__main__":
    from jetstream_sync.server import NATSServer

    with NATSServer(jetstream=True) as srv:
        print_table(run_fault_table(srv.port))
