"""Atomic batches (ADR-50): messages a stream stores all together, or none of them.

Run: python examples/batch_publish.py   (uses $NATS_URL, or starts an embedded nats-server)
"""

from __future__ import annotations

import jetstream_sync as nats
from jetstream_sync.server import url_from_env_or_embedded


def main() -> None:
    with url_from_env_or_embedded() as url, nats.connect(url) as nc:
        js = nc.jetstream()
        js.add_stream(name="USERS", subjects=["user.>"], allow_atomic=True)

        # A user's address is three keys: written together, or not at all.
        with js.batch_publish() as batch:
            batch.add("user.7.street", b"Main St 1")
            batch.add("user.7.city", b"Springfield")
            ack = batch.commit("user.7.zip", b"12345")
        first = ack.seq - ack.batch_size + 1
        print(f"committed -> batch of {ack.batch_size}, sequences {first}..{ack.seq}")

        # An exception in the block abandons the batch: nothing of it is stored.
        try:
            with js.batch_publish() as batch:
                batch.add("user.7.street", b"Elm St 2")
                raise ValueError("the new city failed validation")
        except ValueError:
            print(f"abandoned -> USERS still has {js.stream_info('USERS').state.messages}")

        # Optimistic concurrency: the zip changes only if nobody wrote it since our read.
        zip_seq = js.get_last_msg("USERS", "user.7.zip").seq
        try:
            with js.batch_publish() as batch:
                batch.add("user.7.city", b"Shelbyville")
                batch.commit("user.7.zip", b"54321", expected_last_subject_seq=zip_seq - 1)
        except nats.StreamWrongLastSequenceError as exc:
            print(f"stale     -> refused ({exc.description}), nothing stored")

        # Flow control for a bigger batch: every 100th message waits for the server; the
        # commit stores no message of its own (nats-server 2.14+).
        with js.batch_publish(ack_every=100) as batch:
            for i in range(250):
                batch.add(f"user.{i}.imported", b"yes")
            ack = batch.commit() if js.api_level() >= 4 else batch.commit("user.import.done")
        print(f"imported  -> {ack.batch_size} messages in one batch")

        # A stream must allow atomic batches.
        js.add_stream(name="LOGS", subjects=["log.>"])
        try:
            with js.batch_publish() as batch:
                batch.add("log.1", b"x")
        except nats.BatchNotEnabledError as exc:
            print(f"refused   -> {type(exc).__name__}: {exc.description}")


if __name__ == "__main__":
    main()
