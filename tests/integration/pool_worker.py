"""One worker of a pool on a shared pull durable, as a separate process (gunicorn worker,
Spark executor): ``python pool_worker.py URL SUBJECT DURABLE MODE [LIMIT]``.

It binds with ``js.pull_subscribe(SUBJECT, DURABLE, config=...)`` (the same config every
member and every restart passes), waits for a line on stdin (so a test can start members
at once), then fetches and acks until LIMIT messages (if given) or until nothing has come
for QUIET seconds, printing ``acked <data>`` per message. MODE is how it leaves: ``unsubscribe`` or
``drain``. The last line is ``left`` or ``error <type>: <text>``.
"""

from __future__ import annotations

import sys
import time

import jetstream_sync as nats
from jetstream_sync.jetstream.api import ConsumerConfig

# A member quits after this long with nothing: well beyond the ack wait, so a message that a
# leaving member's pull brought after its last fetch (never handed out, never acked) is
# redelivered to the members still working, even on a slow machine.
QUIET = 12.0
CONFIG = ConsumerConfig(
    ack_wait=5.0,
    max_ack_pending=1000,
    headers_only=False,
    max_batch=0,
    metadata={"team": "pool"},
)


def main() -> None:
    url, subject, durable, mode = sys.argv[1:5]
    limit = int(sys.argv[5]) if len(sys.argv) > 5 else None
    with nats.connect(url, name=f"pool-{durable}") as nc:
        js = nc.jetstream()
        try:
            psub = js.pull_subscribe(subject, durable, config=CONFIG)
            print("bound", flush=True)
            sys.stdin.readline()
            done = 0
            quiet_since = time.monotonic()
            while (limit is None or done < limit) and time.monotonic() - quiet_since < QUIET:
                try:
                    msgs = psub.fetch(10 if limit is None else min(10, limit - done), timeout=0.5)
                except nats.TimeoutError:
                    continue
                quiet_since = time.monotonic()
                for m in msgs:
                    m.ack_sync(timeout=5)
                    print("acked", m.data.decode(), flush=True)
                    done += 1
            if mode == "drain":
                psub.drain(timeout=5)
            else:
                psub.unsubscribe()
            print("left", flush=True)
        except nats.NATSError as exc:
            print(f"error {type(exc).__name__}: {exc}", flush=True)


if __name__ == "__main__":
    main()
