"""Push subscriptions (ADR-15): a callback on a durable, a queue group, and next_msg.

Run: python examples/push.py   (uses $NATS_URL, or starts an embedded nats-server)
"""

from __future__ import annotations

import threading
from typing import Callable

import jetstream_sync as nats
from jetstream_sync.server import url_from_env_or_embedded


def main() -> None:
    with url_from_env_or_embedded() as url, nats.connect(url) as nc:
        js = nc.jetstream()
        js.add_stream(name="EVENTS", subjects=["events.>"])
        for i in range(20):
            js.publish("events.click", str(i).encode())

        # A callback; each message is acked when the callback returns.
        seen = []
        done = threading.Event()

        def on_event(msg: nats.Msg) -> None:
            seen.append(int(msg.data))
            if len(seen) == 20:
                done.set()

        sub = js.subscribe(
            "events.click", durable="audit", cb=on_event, idle_heartbeat=1.0, flow_control=True
        )
        done.wait(10)
        sub.drain(timeout=5)  # made by this subscription: deleted once drained
        print(f"callback: {len(seen)} events, in order: {seen == list(range(20))}")

        # A queue group: the queue name is the durable; members share the messages.
        counts = [0, 0]
        lock = threading.Lock()
        all_in = threading.Event()

        def member(n: int) -> Callable[[nats.Msg], None]:
            def cb(msg: nats.Msg) -> None:
                with lock:
                    counts[n] += 1
                    if sum(counts) == 20:
                        all_in.set()

            return cb

        members = [js.subscribe("events.click", queue="workers", cb=member(n)) for n in (0, 1)]
        all_in.wait(10)
        print(f"queue group 'workers': {sum(counts)} events shared by 2 members")
        for m in reversed(members):
            m.drain(timeout=5)

        # next_msg, acking by hand.
        sub = js.subscribe("events.click")
        first = sub.next_msg(timeout=5)
        first.ack()
        print(f"next_msg: first event {first.data.decode()}, seq {first.metadata.sequence.stream}")
        sub.unsubscribe()

        # An ordered consumer: every message once, in order, whatever happens to its
        # server-side consumer (here: deleted under it; its heartbeats stop, so it relinks).
        ordered = js.subscribe("events.click", ordered_consumer=True, idle_heartbeat=0.5)
        replay = [int(ordered.next_msg(timeout=10).data) for _ in range(20)]
        js.delete_consumer("EVENTS", ordered.consumer)
        for i in range(20, 30):
            js.publish("events.click", str(i).encode())
        replay += [int(ordered.next_msg(timeout=20).data) for _ in range(10)]
        print(f"ordered: {replay == list(range(30))}, relinked {ordered.resets} time(s)")
        ordered.unsubscribe()
        js.delete_stream("EVENTS")


if __name__ == "__main__":
    main()
