"""Stream administration: create, inspect, update, purge, read back and delete a stream.

Run: python examples/streams.py   (uses $NATS_URL, or starts an embedded nats-server)
"""

from __future__ import annotations

import jetstream_sync as nats
from jetstream_sync import StorageType, StreamConfig
from jetstream_sync.server import url_from_env_or_embedded


def main() -> None:
    with url_from_env_or_embedded() as url, nats.connect(url) as nc:
        js = nc.jetstream()
        cfg = StreamConfig(
            name="ORDERS",
            subjects=["orders.>"],
            storage=StorageType.FILE,
            max_age=24 * 3600.0,
            duplicate_window=120.0,
            allow_direct=True,
        )
        info = js.add_stream(cfg)
        print(
            f"created {info.config.name}: subjects={info.config.subjects} "
            f"max_age={info.config.max_age:.0f}s"
        )

        for i in range(5):
            js.publish(f"orders.{'eu' if i % 2 else 'us'}", f"order {i}".encode())
        state = js.stream_info("ORDERS").state
        print(f"state: {state.messages} messages, seq {state.first_seq}..{state.last_seq}")

        last_eu = js.get_msg("ORDERS", last_by_subject="orders.eu")
        print(f"last on orders.eu: seq {last_eu.seq} {last_eu.data.decode()!r}")
        batch = [m.seq for m in js.get_msgs("ORDERS", seq=1, batch=10)]
        print(f"batched direct get: {batch}")

        js.update_stream(cfg, max_msgs=1000, description="capped")
        print(f"updated: max_msgs={js.stream_info('ORDERS').config.max_msgs}")
        print(f"streams capturing orders.us: {js.stream_names(subject='orders.us')}")
        print(f"purged {js.purge_stream_count('ORDERS', subject='orders.us')} from orders.us")

        try:
            js.stream_info("MISSING")
        except nats.StreamNotFoundError as exc:
            print(f"StreamNotFoundError: code={exc.code} err_code={exc.err_code}")
        js.delete_stream("ORDERS")
        print("deleted ORDERS")


if __name__ == "__main__":
    main()
