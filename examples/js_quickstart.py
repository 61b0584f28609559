"""JetStream quickstart: a stream, publishes the server acknowledges, a durable pull consumer,
and a Key-Value bucket, all blocking calls.

Run: python examples/js_quickstart.py   (uses $NATS_URL, or starts an embedded nats-server)
"""

from __future__ import annotations

import jetstream_sync as nats
from jetstream_sync.server import url_from_env_or_embedded


def main() -> None:
    with url_from_env_or_embedded() as url, nats.connect(url, name="js-quickstart") as nc:
        js = nc.jetstream()

        # A stream keeps what is published on its subjects; each publish waits for its ack.
        js.add_stream(name="ORDERS", subjects=["orders.>"])
        for i in range(3):
            ack = js.publish("orders.new", f"order {i}".encode())
        print(f"publish   -> stream {ack.stream}, last seq {ack.seq}")

        # A durable pull consumer: fetch a batch, ack each message once handled.
        psub = js.pull_subscribe("orders.new", durable="billing")
        msgs = psub.fetch(3, timeout=2.0)
        for msg in msgs:
            msg.ack()
        print(f"fetch     -> {[m.data.decode() for m in msgs]}")

        # Key-Value: a bucket of keys, each put gives a new revision.
        kv = js.create_key_value(bucket="settings")
        revision = kv.put("color", b"blue")
        entry = kv.get("color")
        same = entry.revision == revision
        print(f"kv        -> color={entry.value.decode()}, revision {revision} read back: {same}")

        js.delete_stream("ORDERS")
        js.delete_stream("KV_settings")  # the stream behind the bucket


if __name__ == "__main__":
    main()
