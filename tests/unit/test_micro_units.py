"""jetstream_sync.micro's pure parts (ADR-32): validation, control subjects, the JSON bodies,
queue group resolution and group subjects (issue 28 part 2)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, List

import pytest

from jetstream_sync import micro
from jetstream_sync.micro.request import Request
from jetstream_sync.micro.service import (
    EndpointConfig,
    EndpointInfo,
    EndpointStats,
    GroupConfig,
    Service,
    ServiceConfig,
    ServiceInfo,
    ServicePing,
    ServiceStats,
    ServiceVerb,
    _parse_time,
    _resolve_queue_group,
    control_subject,
)
from jetstream_sync.msg import Msg


def noop(req: Request) -> None:
    pass


# --- validation ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["a", "svc-1", "Svc_2", "X" * 40])
def test_good_service_names(name: str) -> None:
    assert ServiceConfig(name=name, version="1.0.0").name == name


@pytest.mark.parametrize(
    "name, needle",
    [
        ("", "Name cannot be empty"),
        ("a.b", "Invalid name 'a.b'"),
        ("a b", "alphanumeric"),
        ("é", "alphanumeric"),
        ("svc@!", "dashes, and underscores"),
    ],
)
def test_bad_service_names(name: str, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        ServiceConfig(name=name, version="1.0.0")


@pytest.mark.parametrize("version", ["0.0.1", "1.2.3-alpha.1", "1.0.0+build.5", "10.20.30"])
def test_good_versions(version: str) -> None:
    ServiceConfig(name="s", version=version)


@pytest.mark.parametrize("version", ["", "1", "1.0", "v1.0.0", "01.0.0", "1.0.0-", "abc"])
def test_bad_versions(version: str) -> None:
    with pytest.raises(ValueError, match=r"Version cannot be empty|semantic versioning"):
        ServiceConfig(name="s", version=version)


def test_bad_types_are_named() -> None:
    with pytest.raises(TypeError, match="version must be a str"):
        ServiceConfig(name="s", version=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="service metadata must map str to str"):
        ServiceConfig(name="s", version="1.0.0", metadata={"a": 1})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="stats_handler must be callable"):
        ServiceConfig(name="s", version="1.0.0", stats_handler=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="handler must be callable"):
        EndpointConfig(name="e", handler=None)  # type: ignore[arg-type]


@pytest.mark.parametrize("subject", ["a b", "a.>.b", "a..b", ".a", "a.", "a\tb"])
def test_bad_endpoint_subjects(subject: str) -> None:
    with pytest.raises(ValueError, match="Invalid subject"):
        EndpointConfig(name="e", subject=subject, handler=noop)


@pytest.mark.parametrize("subject", ["a", "a.b", "a.*.c", "a.>", ">", "$X.y"])
def test_good_endpoint_subjects(subject: str) -> None:
    EndpointConfig(name="e", subject=subject, handler=noop)


@pytest.mark.parametrize("qg", ["a b", "a.>", "q*"])
def test_bad_queue_groups(qg: str) -> None:
    with pytest.raises(ValueError, match="Invalid queue group"):
        EndpointConfig(name="e", handler=noop, queue_group=qg)
    with pytest.raises(ValueError, match="Invalid queue group"):
        ServiceConfig(name="s", version="1.0.0", queue_group=qg)


def test_bad_group_names() -> None:
    with pytest.raises(ValueError, match="cannot contain '>'"):
        GroupConfig(name="a.>")
    with pytest.raises(ValueError, match="Invalid group name 'a b'"):
        GroupConfig(name="a b")


def test_add_service_wants_a_service_config() -> None:
    with pytest.raises(TypeError, match="config must be a ServiceConfig"):
        micro.add_service(object(), {"name": "x"})  # type: ignore[arg-type]


# --- control subjects ----------------------------------------------------------------------


def test_control_subjects() -> None:
    assert control_subject(ServiceVerb.PING) == "$SRV.PING"
    assert control_subject(ServiceVerb.INFO, "svc") == "$SRV.INFO.svc"
    assert control_subject(ServiceVerb.STATS, "svc", "ID1") == "$SRV.STATS.svc.ID1"
    assert control_subject(ServiceVerb.PING, prefix="$X") == "$X.PING"
    with pytest.raises(ValueError, match="an id needs a name"):
        control_subject(ServiceVerb.PING, id="x")


# --- queue groups --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "own, own_off, parent, parent_off, expected",
    [
        (None, False, None, False, (None, False)),  # the endpoint falls back to "q"
        ("e", False, "p", False, ("e", False)),
        (None, False, "p", False, ("p", False)),
        ("", False, "p", False, ("p", False)),
        (None, True, "p", False, (None, True)),
        ("e", False, None, True, ("e", False)),
        (None, False, None, True, (None, True)),
    ],
)
def test_queue_group_resolution(
    own: Any, own_off: bool, parent: Any, parent_off: bool, expected: Any
) -> None:
    assert _resolve_queue_group(own, own_off, parent, parent_off) == expected


class FakeClient:
    """Records the subscriptions a service makes; no network."""

    def __init__(self) -> None:
        self.subs: List[Any] = []

    def subscribe(self, subject: str, queue: Any = None, cb: Any = None) -> Any:
        self.subs.append((subject, queue))
        return None

    def flush(self) -> None:
        pass


def service(**kw: Any) -> Service:
    svc = Service(FakeClient(), ServiceConfig(name="svc", version="1.0.0", **kw))  # type: ignore[arg-type]
    svc.start()
    return svc


def test_discovery_subscriptions() -> None:
    svc = service()
    subjects = {s for s, _q in svc._client.subs}  # type: ignore[attr-defined]
    expected = {
        f"$SRV.{verb}{tail}"
        for verb in ("PING", "INFO", "STATS")
        for tail in ("", ".svc", f".svc.{svc.id}")
    }
    assert subjects == expected
    assert all(q is None for _s, q in svc._client.subs)  # type: ignore[attr-defined]


def test_groups_and_queue_groups() -> None:
    svc = service(queue_group="svc-q")
    svc.add_endpoint(name="a", handler=noop)
    g = svc.add_group(name="g1", queue_group="g-q")
    g.add_endpoint(name="b", handler=noop)
    g.add_group(name="").add_group(GroupConfig(name="g2")).add_endpoint(
        name="c", subject="c.*", handler=noop, queue_group="c-q"
    )
    svc.add_group(name="off", queue_group_disabled=True).add_endpoint(name="d", handler=noop)
    svc.add_endpoint(EndpointConfig(name="e", handler=noop), queue_group_disabled=True)
    got = [(e.name, e.subject, e.queue_group) for e in svc.info().endpoints]
    assert got == [
        ("a", "a", "svc-q"),
        ("b", "g1.b", "g-q"),
        ("c", "g1.g2.c.*", "c-q"),
        ("d", "off.d", ""),
        ("e", "e", ""),
    ]
    subs = svc._client.subs[-5:]  # type: ignore[attr-defined]
    assert subs == [
        ("a", "svc-q"),
        ("g1.b", "g-q"),
        ("g1.g2.c.*", "c-q"),
        ("off.d", None),
        ("e", None),
    ]


def test_default_queue_group_is_q() -> None:
    svc = service()
    svc.add_endpoint(name="a", handler=noop, metadata={"k": "v"})
    assert svc.info().endpoints == [
        EndpointInfo(name="a", subject="a", queue_group="q", metadata={"k": "v"})
    ]


def test_stopped_service_takes_no_endpoint() -> None:
    svc = service()
    svc.stop()
    assert svc.stopped.is_set()
    svc.stop()  # idempotent
    with pytest.raises(ValueError, match="is stopped"):
        svc.add_endpoint(name="a", handler=noop)


# --- the JSON bodies -----------------------------------------------------------------------


def test_ping_and_info_bodies() -> None:
    svc = service(description="d", metadata={"m": "1"})
    svc.add_endpoint(name="a", subject="x.y", handler=noop)
    ping = ServicePing(id=svc.id, name="svc", version="1.0.0", metadata={"m": "1"}).to_dict()
    assert ping == {
        "type": "io.nats.micro.v1.ping_response",
        "id": svc.id,
        "name": "svc",
        "version": "1.0.0",
        "metadata": {"m": "1"},
    }
    info = svc.info().to_dict()
    assert info == {
        "type": "io.nats.micro.v1.info_response",
        "id": svc.id,
        "name": "svc",
        "version": "1.0.0",
        "description": "d",
        "endpoints": [{"name": "a", "subject": "x.y", "queue_group": "q", "metadata": {}}],
        "metadata": {"m": "1"},
    }
    assert ServiceInfo.from_dict(json.loads(json.dumps(info))) == svc.info()


def test_stats_body_and_round_trip() -> None:
    started = datetime(2026, 1, 2, 3, 4, 5, 678000)
    stats = ServiceStats(
        id="I",
        name="svc",
        version="1.0.0",
        started=started,
        endpoints=[EndpointStats("a", "a", "q", 3, 1, 300, 100, "500:boom", {"k": 1})],
    )
    body = stats.to_dict()
    assert body["type"] == "io.nats.micro.v1.stats_response"
    assert body["started"] == "2026-01-02T03:04:05.678Z"
    assert body["endpoints"][0] == {
        "name": "a",
        "subject": "a",
        "queue_group": "q",
        "num_requests": 3,
        "num_errors": 1,
        "last_error": "500:boom",
        "processing_time": 300,
        "average_processing_time": 100,
        "data": {"k": 1},
    }
    assert ServiceStats.from_dict(json.loads(json.dumps(body))) == stats
    no_error = EndpointStats("a", "a", "q", 0, 0, 0, 0).to_dict()
    assert no_error["last_error"] == "" and no_error["data"] is None


@pytest.mark.parametrize(
    "text, micros",
    [
        ("2026-01-02T03:04:05Z", 0),
        ("2026-01-02T03:04:05.5Z", 500000),
        ("2026-01-02T03:04:05.123456789Z", 123456),  # nats.go: nanoseconds
        ("2026-01-02T03:04:05.123+00:00", 123000),
    ],
)
def test_started_parses_any_fraction(text: str, micros: int) -> None:
    assert _parse_time(text) == datetime(2026, 1, 2, 3, 4, 5, micros)


def test_started_refuses_garbage() -> None:
    with pytest.raises(ValueError, match="not an RFC 3339"):
        _parse_time("yesterday")


# --- handling a request (a Msg with no client: respond is what a test replaces) -------------


class Answered(Exception):
    pass


class SentMsg(Msg):
    """A message whose answers are recorded instead of sent."""

    def __init__(self, reply: str, sent: List[Any]) -> None:
        super().__init__("a", reply, b"x")
        self.sent = sent

    def respond(self, data: bytes = b"", headers: Any = None) -> None:
        self.sent.append((data, headers))


def run(svc: Service, endpoint: Any, reply: str, handler: Any) -> List[Any]:
    sent: List[Any] = []
    endpoint._handler = handler
    try:
        endpoint._handle_request(SentMsg(reply, sent))
    except Answered:
        sent.append("raised")
    return sent


def test_handler_errors_count_and_answer() -> None:
    svc = service()
    ep = svc.add_endpoint(name="a", handler=noop)

    def boom(req: Request) -> None:
        raise Answered("boom")

    sent = run(svc, ep, "R", boom)
    assert sent[0][0] == b"" and sent[0][1]["Nats-Service-Error-Code"] == "500"
    assert "boom" in sent[0][1]["Nats-Service-Error"]
    assert sent[1] == "raised"  # raised again: the client's error_cb hears of it

    def refuse(req: Request) -> None:
        raise micro.ServiceError("404", "no such thing")

    sent = run(svc, ep, "R", refuse)
    assert [(h["Nats-Service-Error-Code"], h["Nats-Service-Error"]) for _d, h in sent] == [
        ("404", "no such thing")
    ]

    def explicit(req: Request) -> None:
        req.respond_error("400", "bad", data=b"why", headers={"X": "1", "Nats-Service-Error": "no"})

    sent = run(svc, ep, "R", explicit)
    data, headers = sent[0]
    assert (
        data == b"why" and headers["X"] == "1" and headers.get_all("Nats-Service-Error") == ["bad"]
    )

    run(svc, ep, "R", lambda req: req.respond(b"ok"))
    s = svc.stats().endpoints[0]
    assert (s.num_requests, s.num_errors, s.last_error) == (4, 3, "400:bad")
    assert s.processing_time > 0 and s.average_processing_time == s.processing_time // 4
    svc.reset()
    s = svc.stats().endpoints[0]
    assert (s.num_requests, s.num_errors, s.last_error, s.processing_time) == (0, 0, None, 0)


def test_respond_without_reply_is_a_value_error() -> None:
    req = Request(Msg("a", "", b""))
    with pytest.raises(ValueError, match="no reply subject"):
        req.respond(b"x")
    assert req.reply == "" and req.headers is None and req.subject == "a"


def test_stats_handler_fills_data() -> None:
    svc = service(stats_handler=lambda st: {"seen": st.name})
    svc.add_endpoint(name="a", handler=noop)
    assert svc.stats().endpoints[0].data == {"seen": "a"}
