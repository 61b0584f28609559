"""One instance of a partitioned consumer group member, as a process of its own:
``python pcg_worker.py URL static|elastic STREAM GROUP MEMBER ID ACK_WAIT [HANG_AFTER]``.

It joins the group (``max_ack_pending=1``) and reports on core subjects, on its one
connection, so the reports reach the test in the order the server saw them:

* ``pcg.got.<ID>`` ``<subject> <data>`` before handling a message — sent before its ack, so a
  report of the next message of that key (only delivered once this one is acked) comes after;
* ``pcg.acked.<ID>`` / ``pcg.failed.<ID>`` after ``ack_sync`` succeeded / failed;
* ``pcg.hung.<ID>`` when, after HANG_AFTER messages, it stops in its handler with a message
  unacked (to be SIGKILLed there: a pinned instance dying with work in hand).

It prints ``ready`` once joined, and ``ended <error>`` when its consume context ends (the
group deleted: ``ended None``).
"""

from __future__ import annotations

import sys
import threading
import time

import jetstream_sync as nats
from jetstream_sync import pcgroups
from jetstream_sync.jetstream.api import ConsumerConfig

WORK = 0.003  # simulated processing time per message


def main() -> None:
    url, kind, stream, group, member, wid, ack_wait = sys.argv[1:8]
    hang_after = int(sys.argv[8]) if len(sys.argv) > 8 else 0
    handled = 0
    with nats.connect(url, name=f"pcg-{wid}") as nc:
        # API calls get 20 s, not 5: joining makes consumers (the member's, the config
        # watcher's) on replicated streams of a 3-node cluster, which took longer than 5 s
        # once on the 2-core machine with the whole suite running (the watcher's create).
        js = nc.jetstream(timeout=20.0)

        def handle(msg: nats.Msg) -> None:
            nonlocal handled
            report = f"{msg.subject} {msg.data.decode()}".encode()
            nc.publish(f"pcg.got.{wid}", report)
            handled += 1
            if hang_after and handled > hang_after:
                nc.publish(f"pcg.hung.{wid}", report)
                nc.flush()
                threading.Event().wait()  # until killed
            time.sleep(WORK)
            try:
                msg.ack_sync(timeout=5)
            except nats.NATSError:
                nc.publish(f"pcg.failed.{wid}", report)
            else:
                nc.publish(f"pcg.acked.{wid}", report)

        consume = pcgroups.static_consume if kind == "static" else pcgroups.elastic_consume
        config = ConsumerConfig(ack_wait=float(ack_wait), max_ack_pending=1)
        cc = consume(js, stream, group, member, handle, config)
        nc.flush()
        print("ready", flush=True)
        cc.wait()
        print(f"ended {cc.error}", flush=True)


if __name__ == "__main__":
    main()
