"""Overflow priority group (ADR-42): remote workers help only above a backlog.

One pull consumer with the "overflow" policy. A local worker pulls as usual; a remote worker
pulls with ``min_pending=100``, so the server serves it only while 100 or more messages wait
to be delivered. Below that, the local worker has the consumer to itself.

Run: python examples/overflow.py   (uses $NATS_URL, or starts an embedded nats-server)
"""

from __future__ import annotations

from collections import Counter

import jetstream_sync as nats
from jetstream_sync.server import url_from_env_or_embedded

STREAM, CONSUMER, GROUP = "WORK", "workers", "work"
THRESHOLD = 100


def main() -> None:
    with url_from_env_or_embedded() as url, nats.connect(url) as nc:
        js = nc.jetstream()
        js.add_stream(name=STREAM, subjects=["work.>"])
        js.create_or_update_consumer(
            STREAM, durable_name=CONSUMER, priority_groups=[GROUP], priority_policy="overflow"
        )
        local = js.consumer(STREAM, CONSUMER)
        remote = js.consumer(STREAM, CONSUMER)
        handled: Counter[bytes] = Counter()

        def handle(who: str, msgs: list[nats.Msg]) -> None:
            for m in msgs:
                handled[m.data] += 1
                m.ack_sync()
            pending = local.consumer_info().num_pending
            print(f"{who:<6} got {len(msgs):>3}, backlog now {pending}")

        for i in range(150):
            js.publish("work.job", str(i).encode())
        print(f"backlog {local.consumer_info().num_pending}, remote helps at >= {THRESHOLD}")

        handle("remote", remote.fetch(20, max_wait=2, group=GROUP, min_pending=THRESHOLD))
        handle("local", local.fetch(50, max_wait=2, group=GROUP))
        # 80 left: under the threshold, the server keeps the remote worker's pull waiting.
        handle("remote", remote.fetch(20, max_wait=1, group=GROUP, min_pending=THRESHOLD))
        handle("local", local.fetch(100, max_wait=2, group=GROUP))

        once = len(handled) == 150 and set(handled.values()) == {1}
        print(f"each of 150 jobs handled once: {once}")


if __name__ == "__main__":
    main()
