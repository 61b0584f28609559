"""Services (jetstream_sync.micro, ADR-32) against a real nats-server: discovery by plain
requests, endpoint calls, error responses, queue group load sharing, stop (issue 28 part 2)."""

from __future__ import annotations

import json
import threading
from collections import Counter
from typing import Any, Iterator, List

import pytest

import jetstream_sync as nats
from jetstream_sync import micro
from jetstream_sync.client import Client
from jetstream_sync.micro import Request, ServiceConfig
from jetstream_sync.server import NATSServer
from jetstream_sync.testing import wait_until


def collect(nc: Client, subject: str, wait: float = 0.5) -> List[Any]:
    """Every answer to one request on ``subject`` (scatter-gather), as JSON."""
    inbox = nc.new_inbox()
    sub = nc.subscribe(inbox)
    nc.publish(subject, b"", reply=inbox)
    out = []
    while True:
        try:
            msg = sub.next_msg(timeout=wait)
        except nats.TimeoutError:
            break
        try:
            out.append(json.loads(msg.data))
        except ValueError:  # the server's 503: nobody listens
            break
    sub.unsubscribe()
    return out


@pytest.fixture
def errors_seen(nats_server: NATSServer) -> Iterator[List[Exception]]:
    yield []


@pytest.fixture
def enc(nats_server: NATSServer, errors_seen: List[Exception]) -> Iterator[Client]:
    client = nats.connect(nats_server.url, error_cb=errors_seen.append)
    try:
        yield client
    finally:
        client.close()


def test_discovery_by_plain_requests(enc: Client, nc: Client) -> None:
    svc = micro.add_service(
        enc, name="disco", version="1.2.3", description="d", metadata={"team": "a"}
    )
    try:
        svc.add_endpoint(name="echo", handler=lambda r: r.respond(r.data), metadata={"e": "1"})
        for subject in ("$SRV.PING", "$SRV.PING.disco", f"$SRV.PING.disco.{svc.id}"):
            pings = [p for p in collect(nc, subject) if p["id"] == svc.id]
            assert pings == [
                {
                    "type": "io.nats.micro.v1.ping_response",
                    "id": svc.id,
                    "name": "disco",
                    "version": "1.2.3",
                    "metadata": {"team": "a"},
                }
            ]
        info = json.loads(nc.request(f"$SRV.INFO.disco.{svc.id}", timeout=2).data)
        assert info["type"] == "io.nats.micro.v1.info_response"
        assert info["description"] == "d"
        assert info["endpoints"] == [
            {"name": "echo", "subject": "echo", "queue_group": "q", "metadata": {"e": "1"}}
        ]
        for _ in range(3):
            assert nc.request("echo", b"hi", timeout=2).data == b"hi"
        stats = json.loads(nc.request("$SRV.STATS.disco", timeout=2).data)
        assert stats["type"] == "io.nats.micro.v1.stats_response"
        assert stats["id"] == svc.id and stats["started"].endswith("Z")
        (ep,) = stats["endpoints"]
        assert ep["num_requests"] == 3 and ep["num_errors"] == 0 and ep["last_error"] == ""
        assert ep["processing_time"] > 0 and ep["average_processing_time"] > 0
        svc.reset()
        stats = json.loads(nc.request("$SRV.STATS.disco", timeout=2).data)
        assert stats["endpoints"][0]["num_requests"] == 0
    finally:
        svc.stop()


def test_respond_error_headers_and_handler_errors(
    enc: Client, nc: Client, errors_seen: List[Exception]
) -> None:
    def handler(req: Request) -> None:
        if req.data == b"bad":
            req.respond_error("400", "bad input", data=b"details", headers={"X-Why": "1"})
        elif req.data == b"crash":
            raise RuntimeError("handler crashed")
        elif req.data == b"refuse":
            raise micro.ServiceError("403", "not you")
        else:
            req.respond(b"fine", headers={"X-Ok": "yes"})

    svc = micro.add_service(enc, ServiceConfig(name="errs", version="0.0.1"))
    try:
        svc.add_group(name="api").add_endpoint(name="do", handler=handler)
        ok = nc.request("api.do", b"ok", timeout=2)
        assert ok.data == b"fine" and ok.headers["X-Ok"] == "yes"
        assert "Nats-Service-Error" not in ok.headers
        bad = nc.request("api.do", b"bad", timeout=2)
        assert bad.data == b"details"
        assert bad.headers["Nats-Service-Error"] == "bad input"
        assert bad.headers["Nats-Service-Error-Code"] == "400"
        assert bad.headers["X-Why"] == "1"
        crash = nc.request("api.do", b"crash", timeout=2)
        assert crash.headers["Nats-Service-Error-Code"] == "500"
        assert "handler crashed" in crash.headers["Nats-Service-Error"]
        refused = nc.request("api.do", b"refuse", timeout=2)
        assert refused.headers["Nats-Service-Error-Code"] == "403"
        assert refused.headers["Nats-Service-Error"] == "not you"
        wait_until(lambda: errors_seen, what="the crash on error_cb")
        assert len(errors_seen) == 1 and "handler crashed" in repr(errors_seen[0])
        st = svc.stats().endpoints[0]
        assert (st.num_requests, st.num_errors) == (4, 3)
        assert st.last_error is not None and "not you" in st.last_error
    finally:
        svc.stop()


def test_queue_group_shares_load_across_connections(nats_server: NATSServer, nc: Client) -> None:
    clients = [nats.connect(nats_server.url, name=f"worker{i}") for i in range(2)]
    served: Counter[str] = Counter()
    lock = threading.Lock()
    try:
        svcs = []
        for i, c in enumerate(clients):

            def handler(req: Request, who: str = f"w{i}") -> None:
                with lock:
                    served[who] += 1
                req.respond(who.encode())

            svc = micro.add_service(c, name="shared", version="1.0.0")
            svc.add_endpoint(name="work", handler=handler)
            svcs.append(svc)
        answers = Counter(nc.request("work", b"", timeout=2).data for _ in range(200))
        assert sum(answers.values()) == 200 and set(answers) == {b"w0", b"w1"}
        assert sum(served.values()) == 200  # each request once: a queue group
        assert min(served.values()) > 20
        assert len(collect(nc, "$SRV.PING.shared")) == 2
        per = [s.stats().endpoints[0].num_requests for s in svcs]
        assert sorted(per) == sorted(served.values())
        for s in svcs:
            s.stop()
    finally:
        for c in clients:
            c.close()


def test_queue_group_disabled_gets_every_request(enc: Client, nc: Client) -> None:
    seen: List[str] = []
    svcs = [
        micro.add_service(enc, name="fan", version="1.0.0", queue_group_disabled=True)
        for _ in range(2)
    ]
    for i, svc in enumerate(svcs):
        svc.add_endpoint(name="hear", handler=lambda r, i=i: seen.append(str(i)))
    enc.flush()
    nc.publish("hear", b"x")
    wait_until(lambda: len(seen) == 2, what="both instances hearing it")
    assert sorted(seen) == ["0", "1"]
    assert [s.info().endpoints[0].queue_group for s in svcs] == ["", ""]
    for svc in svcs:
        svc.stop()


def test_stop_drains_and_unsubscribes(enc: Client, nc: Client) -> None:
    started = threading.Event()
    release = threading.Event()

    def slow(req: Request) -> None:
        started.set()
        release.wait(5)
        req.respond(b"late but answered")

    svc = micro.add_service(enc, name="stopper", version="1.0.0")
    svc.add_endpoint(name="slow", handler=slow)
    inbox = nc.new_inbox()
    sub = nc.subscribe(inbox)
    nc.publish("slow", b"", reply=inbox)
    assert started.wait(5)
    stopper = threading.Thread(target=svc.stop)
    stopper.start()
    wait_until(svc.stopped.is_set, what="stopped set")
    release.set()
    stopper.join(5)
    assert not stopper.is_alive()
    assert sub.next_msg(timeout=2).data == b"late but answered"  # drained, not dropped
    with pytest.raises(nats.NoRespondersError):
        nc.request("slow", b"", timeout=2)
    assert [p for p in collect(nc, "$SRV.PING.stopper")] == []
    svc.stop()  # again: nothing


def test_service_as_context_manager_and_stop_inside_a_handler(enc: Client, nc: Client) -> None:
    with micro.add_service(enc, name="ctx", version="1.0.0") as svc:

        def bye(req: Request) -> None:
            req.respond(b"bye")
            svc.stop()  # from the endpoint's own thread: must not wait for itself

        svc.add_endpoint(name="bye", handler=bye)
        assert nc.request("bye", timeout=2).data == b"bye"
        wait_until(svc.stopped.is_set, what="stopped from the handler")
    assert svc.stopped.is_set()
