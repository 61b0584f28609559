"""A PullConsumer (the simplified pull API): fetch, next, a messages() loop and consume().

Run: python examples/consume.py   (uses $NATS_URL, or starts an embedded nats-server)
"""

from __future__ import annotations

import threading

import jetstream_sync as nats
from jetstream_sync import AckPolicy
from jetstream_sync.server import url_from_env_or_embedded


def main() -> None:
    with url_from_env_or_embedded() as url, nats.connect(url) as nc:
        js = nc.jetstream()
        js.add_stream(name="ORDERS", subjects=["orders.>"])
        for i in range(100):
            js.publish("orders.new", f"order {i}".encode())

        consumer = js.create_or_update_consumer(
            "ORDERS", durable_name="billing", ack_policy=AckPolicy.EXPLICIT
        )
        batch = consumer.fetch(10, max_wait=2.0)
        for msg in batch:
            msg.ack()
        print(f"fetch: {len(batch)} messages, first {batch[0].data.decode()!r}")
        msg = consumer.next(timeout=2.0)
        msg.ack()
        print(f"next: {msg.data.decode()!r} (stream seq {msg.metadata.sequence.stream})")
        handled = len(batch) + 1

        # A loop over messages as they come; the consumer pulls ahead in the background.
        # drain() stops the pulling, and the loop still hands out what was already sent,
        # so nothing is left waiting for its ack to time out.
        seen = 0
        with consumer.messages(max_messages=20) as it:
            for msg in it:
                msg.ack()
                seen += 1
                if seen == 39:
                    it.drain(timeout=5.0)
        handled += seen
        print(f"messages(): {seen} messages (39, then what had been pulled ahead)")

        # A callback on a thread of its own, for the rest.
        got = []
        finished = threading.Event()

        def handle(msg: nats.Msg) -> None:
            got.append(msg.data)
            msg.ack_sync()  # confirmed by the server (the count below depends on it)
            if handled + len(got) == 100:
                finished.set()

        cc = consumer.consume(handle, max_messages=25)
        finished.wait(20)
        cc.drain(timeout=5.0)
        print(f"consume(): the other {len(got)}, last {got[-1].decode()!r}")
        print(f"all 100 handled once: {handled + len(got) == 100}")
        # A plain ack() is not confirmed, and a flush does not wait for the server to count
        # it (acks are taken off a queue of their own): the last ack above was ack_sync, and
        # the server handles one consumer's acks in order, so every one is counted by now.
        print(f"unacked left: {consumer.consumer_info().num_ack_pending}")
        js.delete_stream("ORDERS")


if __name__ == "__main__":
    main()
