"""Authentication: user/password, a token, and credentials in the URL.

Run: python examples/auth.py   (starts its own embedded nats-server with auth configured)
"""

from __future__ import annotations

import jetstream_sync as nats
from jetstream_sync.server import NATSServer


def main() -> None:
    with NATSServer(jetstream=False, config="authorization { user: app, password: s3cret }") as srv:
        with nats.connect(srv.url, user="app", password="s3cret") as nc:
            nc.flush()
            print(f"user/password: connected to {nc.connected_url}")
        with nats.connect(f"nats://app:s3cret@127.0.0.1:{srv.port}") as nc:
            nc.flush()
            print(f"URL credentials: connected; repr hides them: {nc!r}")
        try:
            nats.connect(srv.url, user="app", password="nope")
        except nats.AuthorizationError as exc:
            print(f"wrong password: AuthorizationError: {exc}")

    token_server = NATSServer(jetstream=False, config='authorization { token: "tkn" }')
    with token_server as srv, nats.connect(srv.url, token="tkn") as nc:
        nc.flush()
        print("token: connected")


if __name__ == "__main__":
    main()
