"""Reconnect: the server restarts, the client follows; publishes made meanwhile are kept.

Run: python examples/reconnect.py   (always starts its own embedded nats-server to restart)
"""

from __future__ import annotations

import threading

import jetstream_sync as nats
from jetstream_sync.server import NATSServer


def main() -> None:
    disconnected, reconnected = threading.Event(), threading.Event()

    with NATSServer(jetstream=False) as srv:
        nc = nats.connect(
            srv.url,
            reconnect_time_wait=0.1,
            max_reconnect_attempts=-1,
            disconnected_cb=disconnected.set,
            reconnected_cb=reconnected.set,
            error_cb=lambda e: print(f"error_cb: {type(e).__name__}: {e}"),
        )
        with nc:
            sub = nc.subscribe("updates")
            nc.flush()

            srv.stop()
            disconnected.wait(10)
            print(f"server down; is_reconnecting={nc.is_reconnecting}")
            for i in range(5):
                nc.publish("updates", f"buffered {i}".encode())  # kept in the reconnect buffer

            srv.start()  # same port, same store
            reconnected.wait(20)
            print(f"reconnected to {nc.connected_url}")
            nc.flush(timeout=5)
            print("received:", [sub.next_msg(timeout=5).data.decode() for _ in range(5)])


if __name__ == "__main__":
    main()
