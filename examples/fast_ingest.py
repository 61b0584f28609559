"""Fast-ingest batches (ADR-50, nats-server 2.14+): many messages into a stream without an
ack each; the server paces the publisher with an ack every few messages.

Run: python examples/fast_ingest.py   (uses $NATS_URL, or starts an embedded nats-server)
"""

from __future__ import annotations

import jetstream_sync as nats
from jetstream_sync.server import url_from_env_or_embedded


def main() -> None:
    with url_from_env_or_embedded() as url, nats.connect(url) as nc:
        js = nc.jetstream()
        js.add_stream(name="METRICS", subjects=["metrics.>"], allow_batched=True)

        # A batch: add() returns at once while the window has room, commit() ends it.
        with js.fast_publisher(flow=100, max_outstanding_acks=2) as pub:
            for i in range(50_000):
                pub.add("metrics.cpu", b"%d" % (i % 100))
            ack = pub.commit("metrics.cpu", b"last")  # or commit(): end without a message
        print(f"batch {ack.batch_id}: {ack.batch_size} messages, last at seq {ack.seq}")
        print(f"stream holds {js.stream_info('METRICS').state.messages} messages")

        # gap="fail" (the default): a message the server refuses stops the batch; what
        # came before it stays stored (fast ingest is not atomic).
        last = js.stream_info("METRICS").state.last_seq
        try:
            with js.fast_publisher() as pub:
                pub.add("metrics.mem", b"1", expected_last_seq=last)  # holds
                pub.add("metrics.mem", b"2", expected_last_seq=last)  # refused: last moved
                pub.commit()
        except nats.FastIngestMessageError as exc:
            kept = exc.pub_ack.batch_size if exc.pub_ack else "?"
            print(f"refused message {exc.batch_seq}: {exc.error.description}; kept {kept}")

        # gap="ok": refusals (and lost messages) go to error_cb (on the client's callback
        # thread) and pub.errors; the batch goes on.
        with js.fast_publisher(gap="ok", error_cb=lambda err: None) as pub:
            pub.add("metrics.disk", b"1", expected_last_seq=0)  # refused: not empty
            pub.add("metrics.disk", b"2")
            ack = pub.commit()
        refused = [err.batch_seq for err in pub.errors]
        print(f"gap ok: batch of {ack.batch_size}, refused: {refused}")

        try:  # a stream without allow_batched refuses the first message
            js.add_stream(name="PLAIN", subjects=["plain.>"])
            with js.fast_publisher() as pub:
                pub.add("plain.x", b"x")
        except nats.FastIngestNotEnabledError as exc:
            print(f"FastIngestNotEnabledError: {exc.description}")
        js.delete_stream("METRICS")
        js.delete_stream("PLAIN")


if __name__ == "__main__":
    main()
