"""Services (ADR-32) between nats.js (@nats-io/services 3.0.0-25, the newest published; it
brings its own @nats-io/nats-core 3.0.0-50) and jetstream_sync.micro on one real server.

nats.js's service client (Svcm) discovers our service (PING, INFO, STATS) and calls its
endpoint, a service error included; we call a service nats.js runs, by plain requests and by
our discovery subjects, and read its bodies with our ServiceInfo / ServiceStats.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any, Iterator

import pytest
from interop_peers import HERE, JsonLinesProcess

import jetstream_sync as nats
from jetstream_sync import micro
from jetstream_sync.client import Client
from jetstream_sync.micro import Request, ServiceInfo, ServiceStats
from jetstream_sync.server import NATSServer

PEER = HERE / "micro_peer.mjs"


@pytest.fixture
def services(node: str) -> str:
    if not (HERE / "node_modules" / "@nats-io" / "services").is_dir():
        pytest.skip(
            "tests/interop/node_modules has no @nats-io/services: "
            "`npm ci --prefix tests/interop` installs the lock file's versions"
        )
    return node


def double(req: Request) -> None:
    try:
        req.respond(str(2 * int(req.data)).encode())
    except ValueError:
        req.respond_error("400", f"not a number: {req.data.decode(errors='replace')}", b"?")


def test_natsjs_discovers_and_calls_our_service(
    services: str, nats_server: NATSServer, nc: Client
) -> None:
    svc = micro.add_service(
        nc, name="py-doubler", version="1.0.0", description="d", metadata={"lang": "python"}
    )
    try:
        svc.add_group(name="py").add_endpoint(name="double", handler=double, metadata={"a": "b"})
        out = subprocess.run(
            [services, str(PEER), nats_server.url, "discover", "py-doubler", "py.double"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr[-3000:]
        seen: Any = json.loads(out.stdout)
        (ping,) = seen["ping"]
        assert ping == {
            "type": "io.nats.micro.v1.ping_response",
            "id": svc.id,
            "name": "py-doubler",
            "version": "1.0.0",
            "metadata": {"lang": "python"},
        }
        (info,) = seen["info"]
        assert info["type"] == "io.nats.micro.v1.info_response"
        assert info["description"] == "d"
        assert info["endpoints"] == [
            {"name": "double", "subject": "py.double", "queue_group": "q", "metadata": {"a": "b"}}
        ]
        (stats,) = seen["stats"]
        assert stats["type"] == "io.nats.micro.v1.stats_response" and stats["id"] == svc.id
        assert stats["endpoints"][0]["num_requests"] == 0
        assert seen["ok"] == {"data": "42", "error": ""}
        assert seen["bad"] == {"data": "?", "code": "400", "error": "not a number: fail"}
        st = svc.stats().endpoints[0]
        assert (st.num_requests, st.num_errors) == (2, 1)
    finally:
        svc.stop()


@pytest.fixture
def natsjs_service(services: str, nats_server: NATSServer, tmp_path: Path) -> Iterator[str]:
    peer = JsonLinesProcess(
        [services, str(PEER), nats_server.url, "serve", "js-doubler"],
        "nats.js service",
        tmp_path / "micro_peer.stderr",
    )
    try:
        yield peer.wait_ready("the nats.js service")["service_id"]
    finally:
        peer.close()


def test_we_call_and_discover_a_natsjs_service(natsjs_service: str, nc: Client) -> None:
    sid = natsjs_service
    assert nc.request("math.double", b"21", timeout=5).data == b"42"
    bad = nc.request("math.double", b"zz", timeout=5)
    assert bad.headers["Nats-Service-Error-Code"] == "400"
    assert bad.headers["Nats-Service-Error"] == "not a number: zz"

    ping = micro.ServicePing.from_dict(json.loads(nc.request("$SRV.PING.js-doubler").data))
    assert (ping.id, ping.name, ping.version) == (sid, "js-doubler", "2.0.0")
    assert ping.metadata == {"peer": "nats.js"}

    raw = nc.request(micro.control_subject(micro.ServiceVerb.INFO, "js-doubler", sid)).data
    info = ServiceInfo.from_dict(json.loads(raw))
    assert info.description == "nats.js doubles numbers"
    assert [(e.name, e.subject, e.queue_group, e.metadata) for e in info.endpoints] == [
        ("double", "math.double", "q", {"unit": "none"})
    ]

    stats = ServiceStats.from_dict(json.loads(nc.request("$SRV.STATS.js-doubler").data))
    assert stats.id == sid and stats.type == "io.nats.micro.v1.stats_response"
    (ep,) = stats.endpoints
    assert ep.subject == "math.double" and ep.num_requests == 2


def test_both_answer_one_ping(natsjs_service: str, nc: Client) -> None:
    svc = micro.add_service(nc, name="py-doubler", version="1.0.0")
    try:
        inbox = nc.new_inbox()
        sub = nc.subscribe(inbox)
        nc.publish("$SRV.PING", b"", reply=inbox)
        names = set()
        while True:
            try:
                names.add(json.loads(sub.next_msg(timeout=0.5).data)["name"])
            except nats.TimeoutError:
                break
        assert {"py-doubler", "js-doubler"} <= names
    finally:
        svc.stop()
