"""Worker processes sharing one durable pull consumer on a wildcard filter — gunicorn workers,
Spark executors or a multiprocessing pool, each with its own connection.

Every worker calls ``js.pull_subscribe("orders.*", durable="billing", config=CONFIG)`` with
the same config; whichever starts first creates the durable, the others bind to it. Workers
come and go: none deletes the durable on leaving (it is the application's state, with every
ack in it), and a restarted worker binds again with the config it always had, reprocessing
nothing.

Run: python examples/process_pool.py   (uses $NATS_URL, or starts an embedded nats-server)
"""

from __future__ import annotations

import collections
import multiprocessing
from typing import List

import jetstream_sync as nats
from jetstream_sync.jetstream.api import ConsumerConfig
from jetstream_sync.server import url_from_env_or_embedded

ORDERS = 600
CONFIG = ConsumerConfig(ack_wait=30.0, max_ack_pending=500, metadata={"team": "billing"})


def worker(url: str, results: multiprocessing.Queue[List[str]]) -> None:
    """One process: bind, fetch and ack until the queue stays empty for a second, leave."""
    handled: List[str] = []
    with nats.connect(url) as nc:
        psub = nc.jetstream().pull_subscribe("orders.*", durable="billing", config=CONFIG)
        while True:
            try:
                msgs = psub.fetch(batch=20, timeout=1.0)
            except nats.TimeoutError:
                break
            for msg in msgs:
                handled.append(msg.data.decode())
                msg.ack_sync()  # confirmed: a crash after this never reprocesses it
        psub.unsubscribe()  # leaves the durable in place for the others
    results.put(handled)


def run_pool(url: str, size: int) -> List[str]:
    ctx = multiprocessing.get_context("spawn")  # a fresh interpreter, as a forked server's
    results: multiprocessing.Queue[List[str]] = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(url, results)) for _ in range(size)]
    for p in procs:
        p.start()
    handled = [job for _ in procs for job in results.get(timeout=120)]
    for p in procs:
        p.join(timeout=30)
    return handled


def main() -> None:
    with url_from_env_or_embedded() as url, nats.connect(url) as nc:
        js = nc.jetstream()
        js.add_stream(name="ORDERS", subjects=["orders.>"])
        for i in range(ORDERS):
            js.publish_async(f"orders.{('eu', 'us', 'apac')[i % 3]}", str(i).encode())
        js.publish("orders.eu.archive", b"not for billing: orders.* matches one token")
        js.publish_async_completed(timeout=30)

        handled = run_pool(url, size=3)
        counts = collections.Counter(handled)
        print(f"handled {len(counts)} of {ORDERS} orders, each once: {set(counts.values()) == {1}}")
        info = js.consumer_info("ORDERS", "billing")
        print(
            f"durable kept after every worker left: pending {info.num_pending}, "
            f"unacked {info.num_ack_pending}"
        )

        # A restart: the same config binds again; only what is new is handled.
        js.publish("orders.eu", b"late order")
        print(f"after a restart: {run_pool(url, size=1)}")

        js.delete_consumer("ORDERS", "billing")  # asked for explicitly: the library never does
        js.delete_stream("ORDERS")


if __name__ == "__main__":
    main()
