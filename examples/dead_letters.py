"""Dead letters: keep the messages a consumer gave up on.

A worker acks good orders, terminates a malformed one (``msg.term``) and keeps failing on a
poisonous one until the consumer's ``max_deliver`` is reached. ``js.dead_letters``
republishes both dead messages, once each, into a stream of their own with headers that say
where they came from and why they died.

Run: python examples/dead_letters.py   (uses $NATS_URL, or starts an embedded nats-server)
"""

from __future__ import annotations

import time

import jetstream_sync as nats
from jetstream_sync.server import url_from_env_or_embedded


def main() -> None:
    with url_from_env_or_embedded() as url, nats.connect(url) as nc:
        js = nc.jetstream()
        js.add_stream(name="ORDERS", subjects=["orders.>"])
        js.add_stream(name="DLQ", subjects=["dlq.>"])
        js.create_or_update_consumer("ORDERS", durable_name="billing", max_deliver=3)

        with js.dead_letters("ORDERS", "billing", subject="dlq.orders") as dl:
            for body in (b"order 1", b"malformed", b"order 2", b"poison", b"order 3"):
                js.publish("orders.new", body)

            billing = js.consumer("ORDERS", "billing")
            deadline = time.monotonic() + 30
            while dl.handled < 2 and time.monotonic() < deadline:
                for msg in billing.fetch(10, max_wait=0.5):
                    if msg.data == b"malformed":
                        msg.term("cannot parse")
                    elif msg.data == b"poison":
                        msg.nak()  # fails every time: redelivered until max_deliver
                    else:
                        msg.ack()
            print(f"dead letters handled: {dl.handled}")

        for seq in range(1, js.stream_info("DLQ").state.last_seq + 1):
            dead = js.get_msg("DLQ", seq)
            h = dead.headers or {}
            print(
                f"DLQ #{seq}: {dead.data.decode()!r} from {h['Nats-DLQ-Stream']} "
                f"seq {h['Nats-DLQ-Sequence']}, {h['Nats-DLQ-Reason']} after "
                f"{h['Nats-DLQ-Deliveries']} deliveries {h.get('Nats-DLQ-Description', '')!r}"
            )


if __name__ == "__main__":
    main()
