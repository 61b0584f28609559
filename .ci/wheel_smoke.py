"""Smoke test of an installed wheel, run by .ci/run with the Python of a fresh venv that holds
the wheel and nothing else (``python -I``, from a directory outside the source tree).

It checks that jetstream_sync comes from site-packages, that the distribution carries its
LICENSE and py.typed, then does one real round trip on a nats-server ($NATS_SERVER_BIN):
connect, publish/subscribe, request/reply, a JetStream publish and a pull fetch.
"""

from __future__ import annotations

import sys
from importlib import metadata

import jetstream_sync as nats
from jetstream_sync.server import NATSServer


def main() -> None:
    where = nats.__file__
    assert "site-packages" in where, f"jetstream_sync imported from {where}, not the wheel"
    dist = metadata.distribution("jetstream-sync")
    assert dist.version == nats.__version__, (dist.version, nats.__version__)
    files = {str(f) for f in dist.files or ()}
    assert any(f.endswith("LICENSE") for f in files), "no LICENSE in the installed wheel"
    assert "jetstream_sync/py.typed" in files, "no py.typed in the installed wheel"
    requires = [r for r in dist.requires or () if "extra ==" not in r]
    assert requires == [], f"runtime dependencies: {requires}"
    print(f"wheel: jetstream-sync {dist.version} from {where} (Python {sys.version.split()[0]})")

    with NATSServer() as srv, nats.connect(srv.url, name="wheel-smoke") as nc:
        sub = nc.subscribe("smoke.>")
        nc.publish("smoke.hello", b"hi")
        assert sub.next_msg(timeout=5).data == b"hi"
        nc.subscribe("smoke.svc", cb=lambda m: m.respond(m.data.upper()))
        assert nc.request("smoke.svc", b"ping", timeout=5).data == b"PING"
        js = nc.jetstream()
        js.add_stream(name="SMOKE", subjects=["jsmoke.>"])
        ack = js.publish("jsmoke.one", b"stored")
        psub = js.pull_subscribe("jsmoke.>", durable="smoke")
        (msg,) = psub.fetch(1, timeout=5)
        msg.ack()
        assert (ack.seq, msg.data) == (1, b"stored")
        print(f"wheel: pub/sub, request, JetStream publish and fetch on {nc.connected_url}: ok")


if __name__ == "__main__":
    main()
