"""Publishing to a stream: acks, de-duplication, optimistic concurrency, pipelining.

Run: python examples/js_publish.py   (uses $NATS_URL, or starts an embedded nats-server)
"""

from __future__ import annotations

import jetstream_sync as nats
from jetstream_sync.server import url_from_env_or_embedded


def main() -> None:
    with url_from_env_or_embedded() as url, nats.connect(url) as nc:
        js = nc.jetstream()
        js.add_stream(name="EVENTS", subjects=["events.>"], duplicate_window=60.0)

        ack = js.publish("events.signup", b'{"user": 1}', msg_id="signup-1")
        print(f"published: stream={ack.stream} seq={ack.seq}")
        dup = js.publish("events.signup", b'{"user": 1}', msg_id="signup-1")
        print(f"same msg_id again: seq={dup.seq} duplicate={dup.duplicate}")

        # Optimistic concurrency: only append if nobody else did since seq 1.
        js.publish("events.signup", b'{"user": 2}', expected_last_seq=1)
        try:
            js.publish("events.signup", b'{"user": 3}', expected_last_seq=1)
        except nats.StreamWrongLastSequenceError as exc:
            print(f"expected_last_seq=1 refused: {exc.description}")

        # Pipelined: futures resolve as acks arrive; wait for all before moving on.
        futures = [js.publish_async("events.click", str(i).encode()) for i in range(10_000)]
        js.publish_async_completed(timeout=30)
        seqs = [f.result().seq for f in futures]
        print(f"publish_async: {len(seqs)} acks, seq {min(seqs)}..{max(seqs)}")

        try:  # no stream captures it: the 503 is retried twice, 0.25 s apart, then raised
            js.publish("nowhere.at.all", b"x")
        except nats.NoStreamResponseError as exc:
            print(f"NoStreamResponseError: {exc}")
        js.delete_stream("EVENTS")


if __name__ == "__main__":
    main()
