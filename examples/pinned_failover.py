"""Pinned-client failover (ADR-42) between worker processes.

Two worker processes consume one pinned_client consumer: the server pins one of them and
the other stands by. The pinned worker is killed; after priority_timeout the standby is
pinned and takes over. Then a third worker joins and an admin unpins: the pin moves at once.
Each job is handled by exactly one worker.

A job the server sent to the worker just as it was killed (before the server noticed the
closed connection) is not lost: nobody acked it, so it is delivered again after the
consumer's ack_wait, set short here for that reason.

Run: python examples/pinned_failover.py   (uses $NATS_URL, or starts an embedded nats-server)
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from typing import Dict, List

import jetstream_sync as nats
from jetstream_sync.server import url_from_env_or_embedded

STREAM, CONSUMER, GROUP = "JOBS", "workers", "jobs"
PRIORITY_TIMEOUT = 2.0
ACK_WAIT = 5.0  # a job in flight to the killed worker comes back after this


def worker(url: str, name: str) -> None:
    """A worker process: consume, tell the parent what it did on core subjects."""
    with nats.connect(url) as nc:
        consumer = nc.jetstream().consumer(STREAM, CONSUMER)

        def handle(msg: nats.Msg) -> None:
            msg.ack_sync()
            nc.publish(f"done.{name}", msg.data)

        consumer.consume(
            handle,
            group=GROUP,
            on_pinned=lambda pin: nc.publish(f"pinned.{name}", pin.encode()),
            on_unpinned=lambda: nc.publish(f"unpinned.{name}"),
        )
        nc.publish(f"ready.{name}")
        threading.Event().wait()  # until killed


def main() -> None:
    with url_from_env_or_embedded() as url, nats.connect(url) as nc:
        js = nc.jetstream()
        js.add_stream(name=STREAM, subjects=["jobs.>"])
        js.create_or_update_consumer(
            STREAM,
            durable_name=CONSUMER,
            priority_groups=[GROUP],
            priority_policy="pinned_client",
            priority_timeout=PRIORITY_TIMEOUT,
            ack_wait=ACK_WAIT,
        )
        done: Dict[str, List[int]] = {}
        pinned: List[str] = []
        ready = nc.subscribe("ready.*")
        nc.subscribe("done.*", cb=lambda m: done.setdefault(m.subject[5:], []).append(int(m.data)))
        nc.subscribe("pinned.*", cb=lambda m: pinned.append(m.subject[7:]))
        procs: Dict[str, subprocess.Popen[bytes]] = {}

        def start(name: str) -> None:
            procs[name] = subprocess.Popen([sys.executable, __file__, "--worker", url, name])
            ready.next_msg(timeout=30)

        def jobs(first: int, n: int) -> None:
            for i in range(first, first + n):
                js.publish("jobs.new", str(i).encode())

        def handled() -> int:
            return sum(len(v) for v in done.values())

        def wait_for(what: str, predicate: object, timeout: float = 20.0) -> None:
            deadline = time.monotonic() + timeout
            while not predicate():  # type: ignore[operator]
                if time.monotonic() > deadline:
                    raise SystemExit(f"timed out waiting for {what}")
                time.sleep(0.05)

        try:
            start("A")
            jobs(0, 1)  # the first delivery picks the pinned client
            wait_for("a pin", lambda: pinned)
            start("B")
            jobs(1, 19)
            wait_for("20 jobs", lambda: handled() == 20)
            first = pinned[-1]
            print(f"pinned: {first}; jobs handled: { {k: len(v) for k, v in done.items()} }")

            procs[first].kill()  # the pinned worker dies
            procs[first].wait()
            killed_at = time.monotonic()
            jobs(20, 20)
            # The pin moves after PRIORITY_TIMEOUT; a job that was in flight to the dead
            # worker takes up to ACK_WAIT more.
            wait_for("the standby", lambda: handled() == 40, 4 * (PRIORITY_TIMEOUT + ACK_WAIT))
            took = time.monotonic() - killed_at
            print(f"killed {first}; {pinned[-1]} took over after {took:.1f} s")

            start("C")
            before = pinned[-1]
            js.unpin_consumer(STREAM, CONSUMER, GROUP)  # an admin moves the pin
            jobs(40, 10)
            wait_for("after unpin", lambda: handled() == 50)
            print(f"unpinned {before}: new pin at once, now {pinned[-1]} (pins so far: {pinned})")
            everything = sorted(i for v in done.values() for i in v)
            print(f"each of 50 jobs handled exactly once: {everything == list(range(50))}")
        finally:
            for p in procs.values():
                p.kill()
                p.wait()


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3])
    else:
        main()
