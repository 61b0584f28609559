"""Authentication: user/password, a token, credentials in the URL, and an nkey seed.

Run: python examples/auth.py   (starts its own embedded nats-server with auth configured)
The nkey part needs the optional nkeys package: pip install 'jetstream-sync[nkeys]'.
"""

from __future__ import annotations

import os
import tempfile

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

    nkey_user()


def nkey_user() -> None:
    """A user known to the server only by its public nkey; the client signs the server's
    nonce with the seed (kept in a file here, as one usually is)."""
    try:
        import nkeys  # type: ignore[import-untyped,unused-ignore]
    except ImportError:
        print("nkey: skipped (pip install 'jetstream-sync[nkeys]')")
        return
    # A fresh user key pair; in real life `nsc` or `nk -gen user` makes it.
    seed = nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_USER).decode()
    public = nkeys.from_seed(bytearray(seed.encode())).public_key.decode()
    config = f"authorization {{ users = [ {{ nkey: {public} }} ] }}"
    with tempfile.TemporaryDirectory() as tmp, NATSServer(jetstream=False, config=config) as srv:
        seed_file = os.path.join(tmp, "user.nk")
        with open(seed_file, "w") as f:
            f.write(seed + "\n")
        with nats.connect(srv.url, nkeys_seed=seed_file) as nc:
            nc.flush()
            print(f"nkey: connected as {public[:8]}...")


if __name__ == "__main__":
    main()
