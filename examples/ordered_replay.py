"""Replay a stream in order with an ordered consumer: every message once, even when its
server-side consumer goes away underneath it.

Run: python examples/ordered_replay.py   (uses $NATS_URL, or starts an embedded nats-server)
"""

from __future__ import annotations

import jetstream_sync as nats
from jetstream_sync.server import url_from_env_or_embedded


def main() -> None:
    with url_from_env_or_embedded() as url, nats.connect(url) as nc:
        js = nc.jetstream()
        js.add_stream(name="LEDGER", subjects=["ledger.>"])
        for i in range(1, 501):
            js.publish_async(f"ledger.{'credit' if i % 2 else 'debit'}", str(i).encode())
        js.publish_async_completed(timeout=30)

        replay = js.ordered_consumer("LEDGER")
        total = 0
        last = 0
        with replay.messages(max_messages=100) as it:
            for msg in it:
                value = int(msg.data)
                assert value == last + 1, "out of order"
                last = value
                total += value if msg.subject == "ledger.credit" else -value
                if value == 200:  # its consumer is deleted: the replay carries on
                    js.delete_consumer("LEDGER", replay.name)
                if value == 500:
                    break
        print(f"replayed 500 messages in order, balance {total}, rebuilt {replay.resets} time(s)")

        credits = js.ordered_consumer(
            "LEDGER", filter_subjects=["ledger.credit"], opt_start_seq=401
        )
        print(f"credits from seq 401: {[int(m.data) for m in credits.fetch(5)]}")
        js.delete_stream("LEDGER")


if __name__ == "__main__":
    main()
