"""Prioritized priority group (ADR-42): the lowest priority number is served first.

A primary worker pulls with priority 0, a backup with priority 1. While both pulls wait at
the server, every message goes to the primary; once the primary stops pulling, the backup
gets the rest. Nothing is handled twice.

Run: python examples/prioritized.py   (uses $NATS_URL, or starts an embedded nats-server)
"""

from __future__ import annotations

import threading
import time
from typing import Dict, List

import jetstream_sync as nats
from jetstream_sync.server import url_from_env_or_embedded

STREAM, CONSUMER, GROUP = "TASKS", "workers", "tasks"


def main() -> None:
    with url_from_env_or_embedded() as url, nats.connect(url) as nc:
        js = nc.jetstream()
        js.add_stream(name=STREAM, subjects=["tasks.>"])
        js.create_or_update_consumer(
            STREAM, durable_name=CONSUMER, priority_groups=[GROUP], priority_policy="prioritized"
        )
        got: Dict[int, List[bytes]] = {0: [], 1: []}

        def worker(priority: int, batch: int) -> None:
            consumer = js.consumer(STREAM, CONSUMER)
            # Both pulls are served: each returns as soon as its batch is full.
            for m in consumer.fetch(batch, max_wait=20, group=GROUP, priority=priority):
                got[priority].append(m.data)
                m.ack_sync()

        def wait_for_pulls(n: int) -> None:
            deadline = time.monotonic() + 10
            while js.consumer_info(STREAM, CONSUMER).num_waiting < n:
                if time.monotonic() > deadline:
                    raise SystemExit(f"timed out waiting for {n} pulls at the server")
                time.sleep(0.02)

        # The backup asks first, yet the primary (priority 0) is served first.
        threads = [threading.Thread(target=worker, args=(1, 3))]
        threads[0].start()
        wait_for_pulls(1)
        threads.append(threading.Thread(target=worker, args=(0, 5)))
        threads[1].start()
        wait_for_pulls(2)
        for i in range(5):
            js.publish("tasks.new", f"a{i}".encode())
        threads[1].join(timeout=10)
        print(f"both waiting: priority 0 got {len(got[0])}, priority 1 got {len(got[1])}")

        # The primary's pull is complete; the backup is the only one left waiting.
        for i in range(3):
            js.publish("tasks.new", f"b{i}".encode())
        threads[0].join(timeout=10)
        print(f"primary gone: priority 1 got {sorted(d.decode() for d in got[1])}")
        everything = sorted(got[0] + got[1])
        print(f"each of 8 tasks handled once: {len(everything) == len(set(everything)) == 8}")


if __name__ == "__main__":
    main()
