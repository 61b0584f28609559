"""A misbehaving peer (issue 8, point 4): the client fails with an error that names the
problem, in bounded time, without its reader thread dying and without buffering without
bound. Also malformed JetStream input: ``$JS.ACK`` subjects and API answers.

The peer is a plain socket listener in a thread: it tests the client against bytes no real
server sends. Everything a real server can do stays on nats-server (the ``nc`` fixture,
with a fake API responder on a custom JetStream prefix).
"""

from __future__ import annotations

import functools
import socket
import threading
import time
import tracemalloc
from typing import Any, Callable, Iterator, List

import pytest

import jetstream_sync as nats
from jetstream_sync import errors
from jetstream_sync._protocol import MAX_CONTROL_LINE
from jetstream_sync.msg import Msg
from jetstream_sync.testing import wait_until

GOOD_INFO = b'INFO {"server_id":"hostile","max_payload":1048576,"headers":true,"proto":1}\r\n'
BOUND = 15.0  # seconds: every failure below must be reported well within this


# --- the hostile peer ---------------------------------------------------------------------------


class HostilePeer:
    """Accepts connections on 127.0.0.1 and runs ``script(conn)`` on each (reconnects too)."""

    def __init__(self, script: Callable[[socket.socket], None]) -> None:
        self.script = script
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.2)
        self.url = f"nats://127.0.0.1:{self.listener.getsockname()[1]}"
        self.stop = threading.Event()
        self.accepted = 0
        self.finished = 0  # scripts that ended (the client hung up, or they were done)
        self.sent = 0  # bytes the scripts managed to hand to the kernel
        self.failures: List[BaseException] = []
        self.thread = threading.Thread(target=self._serve, name="hostile-peer", daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.accepted += 1
            with conn:
                conn.settimeout(BOUND)
                try:
                    self.script(conn)
                except OSError:
                    pass  # the client hung up on us: what we are after
                except BaseException as exc:  # a bug in the test's script
                    self.failures.append(exc)
                self.finished += 1

    def send(self, conn: socket.socket, data: bytes) -> None:
        conn.sendall(data)
        self.sent += len(data)

    def handshake(self, conn: socket.socket) -> bytes:
        """A valid INFO, then wait for CONNECT + PING and answer PONG; what the client sent."""
        self.send(conn, GOOD_INFO)
        got = b""
        while b"PING\r\n" not in got:
            chunk = conn.recv(65536)
            if not chunk:
                raise ConnectionResetError("client left during the handshake")
            got += chunk
        self.send(conn, b"PONG\r\n")
        return got

    def wait_sub(self, conn: socket.socket, got: bytes) -> bytes:
        """Wait for the client's first SUB; its sid."""
        while b"SUB " not in got or b"\r\n" not in got.split(b"SUB ", 1)[1]:
            chunk = conn.recv(65536)
            if not chunk:
                raise ConnectionResetError("client left before subscribing")
            got += chunk
        return got.split(b"SUB ", 1)[1].split(b"\r\n", 1)[0].split()[-1]

    def hold(self, conn: socket.socket) -> None:
        """Keep the connection open until the client closes it (or the test ends)."""
        conn.settimeout(0.2)
        while not self.stop.is_set():
            try:
                if not conn.recv(65536):
                    return
            except socket.timeout:
                continue

    def close(self) -> None:
        self.stop.set()
        self.listener.close()
        self.thread.join(BOUND)
        assert not self.failures, self.failures


@pytest.fixture
def thread_crashes() -> Iterator[List[threading.ExceptHookArgs]]:
    """Every exception that kills a thread while the test runs (none allowed)."""
    seen: List[threading.ExceptHookArgs] = []
    previous = threading.excepthook
    threading.excepthook = seen.append
    try:
        yield seen
    finally:
        threading.excepthook = previous
    assert not seen, [f"{a.thread.name if a.thread else '?'}: {a.exc_value!r}" for a in seen]


def peer(script: Callable[[HostilePeer, socket.socket], None]) -> HostilePeer:
    holder: List[HostilePeer] = []
    p = HostilePeer(lambda conn: script(holder[0], conn))
    holder.append(p)
    return p


def connect_fails(p: HostilePeer, needle: str, **options: Any) -> errors.NATSError:
    """connect() raises a NATSError naming ``needle``, within BOUND seconds."""
    options.setdefault("connect_timeout", 3)
    began = time.monotonic()
    with pytest.raises(errors.NATSError) as info:
        nats.connect(p.url, allow_reconnect=False, **options)
    assert time.monotonic() - began < BOUND
    assert needle in str(info.value), info.value
    return info.value


class Running:
    """A client connected to a peer that turns hostile after the handshake."""

    def __init__(self, p: HostilePeer, ready: bool = True, **options: Any) -> None:
        self.errors: List[Exception] = []
        self.closed = threading.Event()
        options.setdefault("allow_reconnect", False)
        self.nc = nats.connect(
            p.url,
            error_cb=self.errors.append,
            closed_cb=self.closed.set,
            connect_timeout=3,
            **options,
        )
        if ready:  # a SUB tells the peer the client is past its handshake
            self.nc.subscribe("hostile.ready")

    def wait_for_error(self, kind: type, needle: str) -> Exception:
        began = time.monotonic()
        wait_until(lambda: any(isinstance(e, kind) for e in self.errors), BOUND, f"a {kind}")
        assert self.closed.wait(BOUND), "the client did not close"
        assert time.monotonic() - began < BOUND
        err = next(e for e in self.errors if isinstance(e, kind))
        assert needle in str(err), self.errors
        assert self.nc.is_closed
        # The client's threads end cleanly (an unhandled exception is caught by the
        # thread_crashes fixture).
        for t in self.nc._threads:
            t.join(BOUND)
            assert not t.is_alive(), t.name
        return err


# --- (a) a 10 MiB INFO --------------------------------------------------------------------------

HUGE = 10 * 1024 * 1024


@functools.lru_cache(maxsize=1)
def _huge_body() -> memoryview:
    return memoryview(b'INFO {"server_id":"' + b"x" * HUGE + b'"}\r\n')


def _huge_info(p: HostilePeer, conn: socket.socket) -> None:
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
    body = _huge_body()  # built before any tracemalloc measurement
    for i in range(0, len(body), 65536):
        p.send(conn, body[i : i + 65536])  # type: ignore[arg-type]


def test_huge_info_at_connect_stops_at_the_control_line_limit(
    thread_crashes: List[Any],
) -> None:
    _huge_body()
    p = peer(_huge_info)
    try:
        tracemalloc.start()
        try:
            err = connect_fails(p, f"control line longer than {MAX_CONTROL_LINE} bytes")
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert isinstance(err, errors.NoServersError)
        assert isinstance(err.__cause__, errors.ProtocolError)
        # The client read at most a few socket reads of the 10 MiB, and held less.
        assert peak < 2 * 1024 * 1024, peak
        wait_until(lambda: p.finished >= 1, BOUND, "the peer to notice the hang-up")
        assert p.sent < HUGE // 2, p.sent  # the client hung up long before the end
    finally:
        p.close()


def test_huge_info_after_the_handshake(thread_crashes: List[Any]) -> None:
    def script(p: HostilePeer, conn: socket.socket) -> None:
        p.wait_sub(conn, p.handshake(conn))  # the handshake is over on both sides
        _huge_info(p, conn)
        p.hold(conn)

    p = peer(script)
    try:
        run = Running(p)
        run.wait_for_error(errors.ProtocolError, "control line longer")
        assert p.sent < HUGE // 2 + len(GOOD_INFO) + 6, p.sent
    finally:
        p.close()


# --- (b) an overlong control line after a valid handshake ---------------------------------------


@pytest.mark.parametrize("start", [b"MSG foo 1 ", b"INFO {", b"-ERR '", b"PING", b""], ids=repr)
def test_overlong_control_line_trickled_after_the_handshake(
    start: bytes, thread_crashes: List[Any]
) -> None:
    def script(p: HostilePeer, conn: socket.socket) -> None:
        p.wait_sub(conn, p.handshake(conn))  # the client is past its handshake
        p.send(conn, start)
        for _ in range(MAX_CONTROL_LINE // 256 + 4):  # no newline, ever
            p.send(conn, b"9" * 256)
            time.sleep(0.002)
        p.hold(conn)

    p = peer(script)
    try:
        Running(p).wait_for_error(errors.ProtocolError, "control line longer")
    finally:
        p.close()


def test_overlong_control_line_with_reconnect_keeps_reporting(thread_crashes: List[Any]) -> None:
    # Every connection turns hostile after a good handshake. The handshake succeeding resets
    # the reconnect count (as in nats.go), so the client keeps reconnecting: each failure is
    # reported, nothing dies, and close() ends it promptly.
    def script(p: HostilePeer, conn: socket.socket) -> None:
        p.wait_sub(conn, p.handshake(conn))  # the client is past its handshake
        p.send(conn, b"X" * (MAX_CONTROL_LINE + 10))
        p.hold(conn)

    p = peer(script)
    try:
        run = Running(p, allow_reconnect=True, reconnect_time_wait=0.05)
        wait_until(
            lambda: sum(isinstance(e, errors.ProtocolError) for e in run.errors) >= 3,
            BOUND,
            "three reported protocol errors",
        )
        assert p.accepted >= 3
        protocol_errors = [e for e in run.errors if isinstance(e, errors.ProtocolError)]
        assert all("control line longer" in str(e) for e in protocol_errors)
        began = time.monotonic()
        run.nc.close()
        assert run.closed.wait(BOUND) and time.monotonic() - began < BOUND
        for t in run.nc._threads:
            t.join(BOUND)
            assert not t.is_alive(), t.name
    finally:
        p.close()


# --- (c) HMSG without the NATS/1.0 line ---------------------------------------------------------


def test_hmsg_without_nats_line_on_a_subscription(thread_crashes: List[Any]) -> None:
    def script(p: HostilePeer, conn: socket.socket) -> None:
        sid = p.wait_sub(conn, p.handshake(conn))
        header = b"HTTP/1.1 200 OK\r\nX: y\r\n\r\n"
        p.send(conn, b"HMSG hostile.sub %b %d %d\r\n%bhi\r\n" % (
            sid, len(header), len(header) + 2, header))  # fmt: skip
        p.hold(conn)

    p = peer(script)
    try:
        run = Running(p, ready=False)
        sub = run.nc.subscribe("hostile.sub")
        err = run.wait_for_error(errors.ProtocolError, "NATS/1.0")
        assert "HTTP/1.1" in str(err)  # it shows what came instead
        with pytest.raises(errors.NATSError):  # the subscriber is told, not left hanging
            sub.next_msg(timeout=BOUND)
    finally:
        p.close()


# --- (d) garbage bytes --------------------------------------------------------------------------

GARBAGE = bytes((i * 131 + 7) % 256 for i in range(20000))  # deterministic junk with CR/LFs


def test_garbage_instead_of_info(thread_crashes: List[Any]) -> None:
    p = peer(lambda p, conn: (p.send(conn, GARBAGE), p.hold(conn)))
    try:
        err = connect_fails(p, "control line longer")
        assert isinstance(err.__cause__, errors.ProtocolError)
    finally:
        p.close()


@pytest.mark.parametrize(
    ("garbage", "needle"),
    [
        (GARBAGE, "control line longer"),
        (b"\x00\x01\x02\r\n", "unknown protocol operation"),
        (b"PONG\r\n\xff\xfe\xfd garbage \r\n", "unknown protocol operation"),
        (b"MSG a 1 5\r\nhello!!!!!!!!", "not followed by CRLF"),
    ],
)
def test_garbage_after_the_handshake(
    garbage: bytes, needle: str, thread_crashes: List[Any]
) -> None:
    sent_after_the_handshake_is_a_protocol_error(garbage, needle)


def sent_after_the_handshake_is_a_protocol_error(data: bytes, needle: str) -> None:
    """The peer sends ``data`` once the client is past its handshake: error_cb gets a
    ProtocolError whose message has ``needle``."""

    def script(p: HostilePeer, conn: socket.socket) -> None:
        p.wait_sub(conn, p.handshake(conn))
        p.send(conn, data)
        p.hold(conn)

    p = peer(script)
    try:
        Running(p).wait_for_error(errors.ProtocolError, needle)
    finally:
        p.close()


def test_garbage_before_the_first_info(thread_crashes: List[Any]) -> None:
    p = peer(lambda p, conn: (p.send(conn, b"PING\r\n"), p.hold(conn)))
    try:
        connect_fails(p, "expected INFO first")
    finally:
        p.close()


# --- (e) INFO that is not a JSON object ---------------------------------------------------------


@pytest.mark.parametrize(
    ("info", "needle"),
    [
        (b"INFO {not json}\r\n", "INFO is not valid JSON"),
        (b"INFO [1,2]\r\n", "INFO is not a JSON object"),
        (b"INFO " + b"[" * 3000 + b"\r\n", "INFO is not valid JSON"),  # deeper than recursion
        (b'INFO {"a":' * 400 + b"\r\n", "INFO is not valid JSON"),
    ],
    ids=["not-json", "array", "nested-arrays", "nested-objects"],
)
def test_bad_info_at_connect(info: bytes, needle: str, thread_crashes: List[Any]) -> None:
    p = peer(lambda p, conn: (p.send(conn, info), p.hold(conn)))
    try:
        err = connect_fails(p, needle)
        assert isinstance(err.__cause__, errors.ProtocolError)
    finally:
        p.close()


@pytest.mark.parametrize(
    ("info", "needle"),
    [
        (b"INFO {not json}\r\n", "INFO is not valid JSON"),
        (b"INFO " + b"[" * 3000 + b"\r\n", "INFO is not valid JSON"),
    ],
    ids=["not-json", "nested-arrays"],
)
def test_bad_info_after_the_handshake(info: bytes, needle: str, thread_crashes: List[Any]) -> None:
    sent_after_the_handshake_is_a_protocol_error(info, needle)


@pytest.mark.parametrize(
    "info",
    [
        b'INFO {"server_id":"h","connect_urls":5}\r\n',
        b'INFO {"server_id":"h","connect_urls":[5, null, "127.0.0.1:1"]}\r\n',
        b'INFO {"server_id":"h","max_payload":"big","tls_required":false}\r\n',
    ],
    ids=["urls-int", "urls-mixed", "max-payload-str"],
)
def test_info_with_wrongly_typed_fields_at_connect(info: bytes, thread_crashes: List[Any]) -> None:
    # Fields of the wrong type are ignored: the connection works (or fails with a NATSError).
    def script(p: HostilePeer, conn: socket.socket) -> None:
        p.send(conn, info)
        got = b""
        while b"PING\r\n" not in got:
            got += conn.recv(65536)
        p.send(conn, b"PONG\r\n")
        p.hold(conn)

    p = peer(script)
    try:
        nc = nats.connect(p.url, allow_reconnect=False, connect_timeout=3)
        nc.close()
    finally:
        p.close()


# --- (f) a peer that accepts and says nothing ---------------------------------------------------


def test_silent_peer_connect_times_out(thread_crashes: List[Any]) -> None:
    p = peer(lambda p, conn: p.hold(conn))
    try:
        began = time.monotonic()
        err = connect_fails(p, "timed out", connect_timeout=0.5)
        assert time.monotonic() - began < 5
        assert isinstance(err, errors.NoServersError)
    finally:
        p.close()


def test_silent_after_info_connect_times_out(thread_crashes: List[Any]) -> None:
    p = peer(lambda p, conn: (p.send(conn, GOOD_INFO), p.hold(conn)))  # never a PONG
    try:
        began = time.monotonic()
        connect_fails(p, "timed out", connect_timeout=0.5)
        assert time.monotonic() - began < 5
    finally:
        p.close()


def test_peer_silent_after_the_handshake_is_a_stale_connection(
    thread_crashes: List[Any],
) -> None:
    def script(p: HostilePeer, conn: socket.socket) -> None:
        p.wait_sub(conn, p.handshake(conn))  # the client is past its handshake
        p.hold(conn)  # never answers a PING again

    p = peer(script)
    try:
        run = Running(p, ping_interval=0.1, max_outstanding_pings=2)
        run.wait_for_error(errors.StaleConnectionError, "")
    finally:
        p.close()


# --- malformed JetStream input ------------------------------------------------------------------


@pytest.mark.parametrize(
    "reply",
    [
        "$JS.ACK.bad",
        "$JS.ACK.S.C.1.2.3.4",
        "$JS.ACK.S.C.one.2.3.4.5",
        f"$JS.ACK.S.C.1.2.3.{10**30}.5",  # timestamp past what datetime holds
        f"$JS.ACK.S.C.1.2.3.{400_000 * 365 * 86400 * 10**9}.5",  # year 402000
        "$JS.ACK..C.1.2.3.4.5",
        "$JS.ACK.S.C.1.2.3.4.5.6",  # 10 tokens
    ],
)
def test_malformed_ack_subject_on_a_delivered_message(
    reply: str, thread_crashes: List[Any]
) -> None:
    # nats-server refuses a publish with a $JS.ACK reply: the hostile peer delivers it.
    def script(p: HostilePeer, conn: socket.socket) -> None:
        sid = p.wait_sub(conn, p.handshake(conn))
        p.send(conn, b"MSG hostile.js.ack %b %b 1\r\nx\r\n" % (sid, reply.encode()))
        p.hold(conn)

    p = peer(script)
    try:
        run = Running(p, ready=False)
        sub = run.nc.subscribe("hostile.js.ack")
        msg = sub.next_msg(timeout=BOUND)
        assert msg.reply == reply
        with pytest.raises(errors.NotJSMessageError, match="not a JetStream message"):
            msg.metadata  # noqa: B018
        assert not run.errors and not run.nc.is_closed  # the connection is not at fault
        run.nc.close()
    finally:
        p.close()
    plain = Msg("s", reply, b"")
    with pytest.raises(errors.NotJSMessageError, match="not a JetStream message"):
        plain.metadata  # noqa: B018


FAKE_PREFIX = "hostile.fake.api"

BAD_ANSWERS = [
    pytest.param(b"not json", "malformed JSON", id="not-json"),
    pytest.param(b"", "malformed JSON", id="empty"),
    pytest.param(b"\xff\xfe", "malformed JSON", id="not-utf8"),
    pytest.param(b"[1, 2]", "not a JSON object", id="list"),
    pytest.param(b"null", "not a JSON object", id="null"),
    pytest.param(b"[" * 100_000, "malformed JSON", id="nested-deep"),
    pytest.param(b'{"error": "boom"}', "malformed error", id="error-str"),
    pytest.param(b'{"error": {"code": "x", "err_code": []}}', "code=0", id="error-types"),
    pytest.param(b'{"config": 5}', "malformed StreamInfo.config", id="config-int"),
    pytest.param(
        b'{"config": {"name": "S", "subjects": 7}}',
        "malformed StreamConfig.subjects",
        id="subjects-int",
    ),
    pytest.param(b'{"created": "yesterday"}', "malformed StreamInfo.created", id="bad-time"),
    pytest.param(b'{"state": {"subjects": 3}}', "malformed StreamState.subjects", id="state"),
]


@pytest.fixture
def fake_api(nc: nats.Client) -> Iterator[List[bytes]]:
    """A responder on FAKE_PREFIX.> answering with the bytes the test puts in the list."""
    answer: List[bytes] = [b"{}"]
    subs = [
        nc.subscribe(subject, cb=lambda m: m.respond(answer[0]))
        for subject in (FAKE_PREFIX + ".>", "hostile.pub")  # API calls, and a JS publish
    ]
    nc.flush()
    try:
        yield answer
    finally:
        for sub in subs:
            sub.unsubscribe()


@pytest.mark.parametrize(("answer", "needle"), BAD_ANSWERS)
def test_malformed_api_answer_is_a_jetstream_error(
    nc: nats.Client, fake_api: List[bytes], answer: bytes, needle: str
) -> None:
    fake_api[0] = answer
    js = nc.jetstream(prefix=FAKE_PREFIX, timeout=5)
    with pytest.raises(errors.JetStreamError) as info:
        js.stream_info("S")
    assert needle in str(info.value), info.value


@pytest.mark.parametrize(
    ("answer", "call"),
    [
        (b'{"config": 5}', lambda js: js.consumer_info("S", "C")),
        (b'{"config": {"ack_wait": "soon"}}', lambda js: js.consumer_info("S", "C")),
        (b'{"streams": 5, "total": 1}', lambda js: js.stream_names()),
        (b'{"streams": [], "total": "x"}', lambda js: js.streams_info()),
        (b'{"message": {"data": "!!!", "hdrs": 5}}', lambda js: js.get_msg("S", seq=1)),
        (b"[" * 100_000, lambda js: js.account_info()),
        (b"[]", lambda js: js.publish("hostile.pub", b"x")),
        (b'{"seq": 1}', lambda js: js.publish("hostile.pub", b"x")),
        (b'{"streams": [null], "total": 1}', lambda js: js.streams_info()),
        (b'{"streams": ["S", 7], "total": 2}', lambda js: js.stream_names()),
        (b'{"consumers": [{}, []], "total": 2}', lambda js: js.consumers_info("S")),
        (b'{"purged": "x"}', lambda js: js.purge_stream("S")),
        (b'{"message": 5}', lambda js: js.get_msg("S", seq=1)),
    ],
    ids=[
        "consumer-config",
        "ack-wait",
        "names",
        "total",
        "get-msg",
        "deep",
        "pub-list",
        "pub-ack",
        "info-null-item",
        "names-int-item",
        "consumer-list-item",
        "purged-str",
        "message-int",
    ],
)
def test_malformed_answers_to_other_calls(
    nc: nats.Client, fake_api: List[bytes], answer: bytes, call: Callable[[Any], Any]
) -> None:
    fake_api[0] = answer
    js = nc.jetstream(prefix=FAKE_PREFIX, timeout=5)
    with pytest.raises(errors.JetStreamError):
        call(js)


def test_api_answer_missing_every_field_is_not_a_crash(
    nc: nats.Client, fake_api: List[bytes]
) -> None:
    # A well-formed object without the fields: defaults, not a KeyError.
    fake_api[0] = b'{"type": "io.nats.jetstream.api.v1.stream_info_response"}'
    js = nc.jetstream(prefix=FAKE_PREFIX, timeout=5)
    info = js.stream_info("S")
    assert info.config is None or info.config.name is None
    fake_api[0] = b'{"type": "io.nats.jetstream.api.v1.account_info_response"}'
    js.account_info()
