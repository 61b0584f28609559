"""Our client as a process of its own, so that a test can SIGKILL it while it holds a pin.

Usage: python sync_peer.py <server-url> <stream> <consumer> <group>

Consumes the priority-group consumer with ``consume(group=...)``, acks each message (waiting for
the server's confirmation) and then prints it as a JSON line, as peer.mjs does:
{"event": "ready"}, {"event": "pinned", "pin": ...}, {"event": "unpinned"},
{"event": "msg", "msg": {...}}. Leaves when its stdin ends.
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any, Dict

from interop_peers import describe

import jetstream_sync as nats

_out = threading.Lock()


def emit(obj: Dict[str, Any]) -> None:
    with _out:  # the callback thread and the pin callbacks print; lines must not interleave
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()


def main(url: str, stream: str, consumer: str, group: str) -> None:
    with nats.connect(url, name="jetstream_sync-peer") as nc:
        pull = nc.jetstream().consumer(stream, consumer)

        def handle(msg: nats.Msg) -> None:
            msg.ack_sync(timeout=5.0)
            emit({"event": "msg", "msg": describe(msg)})

        ctx = pull.consume(
            handle,
            group=group,
            on_pinned=lambda pin: emit({"event": "pinned", "pin": pin}),
            on_unpinned=lambda: emit({"event": "unpinned"}),
        )
        emit({"event": "ready"})
        sys.stdin.read()  # until the test closes our stdin (or kills us)
        ctx.stop()


if __name__ == "__main__":
    main(*sys.argv[1:5])
