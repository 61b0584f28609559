"""Quickstart: publish, subscribe, request/reply and a callback, all blocking calls.

Run: python examples/quickstart.py   (uses $NATS_URL, or starts an embedded nats-server)
"""

from __future__ import annotations

import threading

import jetstream_sync as nats
from jetstream_sync.server import url_from_env_or_embedded


def main() -> None:
    with url_from_env_or_embedded() as url, nats.connect(url, name="quickstart") as nc:
        print(f"connected to {nc.connected_url} (server {nc.server_info.get('version')})")

        # Publish / subscribe, reading with next_msg.
        sub = nc.subscribe("greet.*")
        nc.publish("greet.joe", b"hello joe", headers={"Lang": "en"})
        msg = sub.next_msg(timeout=2.0)
        print(f"next_msg  -> {msg.subject}: {msg.data.decode()} (Lang={msg.headers['Lang']})")

        # A service: the callback runs on the subscription's own thread.
        nc.subscribe("svc.upper", cb=lambda m: m.respond(m.data.upper()))
        reply = nc.request("svc.upper", b"make me loud", timeout=2.0)
        print(f"request   -> {reply.data.decode()}")

        # Nobody listening: a clear error instead of a timeout.
        try:
            nc.request("svc.missing", b"?", timeout=2.0)
        except nats.NoRespondersError as exc:
            print(f"request   -> NoRespondersError: {exc}")

        # Iteration ends by itself when max_msgs is reached.
        batch = nc.subscribe("count", max_msgs=3)
        for i in range(3):
            nc.publish("count", str(i).encode())
        print(f"iterate   -> {[m.data.decode() for m in batch]}")

        done = threading.Event()
        nc.subscribe("events", cb=lambda m: done.set())
        nc.publish("events", b"tick")
        nc.flush(timeout=2.0)
        print(f"callback  -> fired: {done.wait(2.0)}")
        print(f"stats     -> {nc.stats}")


if __name__ == "__main__":
    main()
