"""TLS: a server certificate checked against your CA, mutual TLS, and TLS before INFO.

Run: python examples/tls.py   (makes a throwaway CA and certificates with the cryptography
package, then starts its own embedded nats-server for each case)
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import jetstream_sync as nats
from jetstream_sync.server import NATSServer
from jetstream_sync.testpki import PKI


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        try:
            pki = PKI(Path(tmp))  # in real life: your CA and the server's certificate
        except ImportError as exc:  # no cryptography package
            print(f"skipped: {exc}")
            return
        run(pki)


def run(pki: PKI) -> None:
    # 1. The server presents a certificate signed by our CA; the client verifies it.
    with NATSServer(jetstream=False, config=pki.server_config()) as srv:
        with nats.connect(f"tls://127.0.0.1:{srv.port}", tls=pki.context()) as nc:
            nc.flush()
            print(f"verified TLS: connected to {nc.connected_url}")
        try:
            nats.connect(srv.url, tls=pki.context(), tls_hostname="elsewhere.test")
        except nats.SecureConnectionRequiredError as exc:
            print(f"wrong name refused: {type(exc).__name__}")

    # 2. Mutual TLS: the server also verifies the client's certificate.
    mutual = NATSServer(jetstream=False, config=pki.server_config(verify=True))
    with mutual as srv, nats.connect(srv.url, tls=pki.context(client_cert=True)) as nc:
        nc.flush()
        print("mutual TLS: connected with a client certificate")

    # 3. TLS first: the server says nothing in the clear, not even INFO.
    config = pki.server_config(handshake_first=True)
    with NATSServer(jetstream=False, config=config) as srv:
        url = f"tls://127.0.0.1:{srv.port}"
        with nats.connect(url, tls=pki.context(), tls_handshake_first=True) as nc:
            nc.flush()
            print("handshake first: connected, TLS before INFO")


if __name__ == "__main__":
    main()
