"""nats-py's core names (issue 20) that need no server: connect's options refused with a
clear error, the error classes and where they sit, ServerVersion, Msg's nats-py names."""

from __future__ import annotations

import ssl
from typing import Any

import pytest

import jetstream_sync as nats
from jetstream_sync import _protocol as proto
from jetstream_sync import errors
from jetstream_sync._link import CONNECTED, Link
from jetstream_sync._outbox import Outbox
from jetstream_sync._servers import ServerVersion
from jetstream_sync.msg import Msg, encode_headers

# Nothing listens here: every refusal below must come before any dial.
NOWHERE = "nats://127.0.0.1:1"


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"no_echo": True, "echo": True}, "no_echo=True contradict"),
        ({"no_echo": "yes"}, "no_echo must be a bool"),
        ({"dont_randomize": True, "no_randomize": False}, "dont_randomize=True contradict"),
        ({"dont_randomize": 1}, "dont_randomize must be a bool"),
        ({"pending_size": -1}, "pending_size must be an int >= 0"),
        ({"pending_size": 10, "reconnect_buf_size": 20}, "pending_size is nats-py's name"),
        ({"flusher_queue_size": 0}, "flusher_queue_size must be an int > 0"),
        ({"ws_connection_headers": {"a": ["b"]}}, "websocket is not supported"),
        ({"skip_subject_validation": "no"}, "skip_subject_validation must be a bool"),
        ({"token": 42}, "token must be a str or a callable"),
        ({"nkeys_seed_str": 5}, "nkeys_seed_str must be a str"),
        ({"nkeys_seed_str": "SU", "nkeys_seed": "x"}, "not both"),
        ({"discovered_server_cb": "x"}, "discovered_server_cb must be callable"),
        ({"lame_duck_mode_cb": 3}, "lame_duck_mode_cb must be callable"),
        ({"reconnect_to_server_handler": 1}, "reconnect_to_server_handler must be callable"),
    ],
)
def test_natspy_connect_options_are_checked(options: Any, match: str) -> None:
    with pytest.raises(nats.InvalidArgumentError, match=match):
        nats.connect(NOWHERE, **options)


@pytest.mark.parametrize("what", ["drain_timeout", "flush_timeout"])
@pytest.mark.parametrize("value", [0, -1, "2", float("nan")])
def test_drain_and_flush_timeouts_are_checked(what: str, value: Any) -> None:
    with pytest.raises(nats.BadTimeoutError, match=what):
        nats.connect(NOWHERE, **{what: value})


def test_nkeys_seed_str_that_is_no_seed() -> None:
    with pytest.raises(nats.InvalidUserCredentialsError, match="not an nkey seed"):
        nats.connect(NOWHERE, nkeys_seed_str="hunter2")


def test_bad_credentials_file_is_invalid_user_credentials(tmp_path: Any) -> None:
    with pytest.raises(nats.InvalidUserCredentialsError, match="does not exist"):
        nats.connect(NOWHERE, user_credentials=str(tmp_path / "missing.creds"))
    bad = tmp_path / "bad.creds"
    bad.write_text("not a creds file")
    with pytest.raises(nats.InvalidUserCredentialsError, match="no user JWT"):
        nats.connect(NOWHERE, user_credentials=str(bad))


def test_callbacks_that_are_not_callable_or_async() -> None:
    async def coroutine_cb(e: Exception) -> None:  # pragma: no cover - never called
        pass

    with pytest.raises(nats.InvalidCallbackTypeError, match="error_cb must be callable"):
        nats.connect(NOWHERE, error_cb=5)
    with pytest.raises(nats.InvalidCallbackTypeError, match="async function"):
        nats.connect(NOWHERE, error_cb=coroutine_cb)
    with pytest.raises(nats.InvalidCallbackTypeError, match="async function"):
        nats.Client().subscribe("a", cb=coroutine_cb)


def test_subscribe_future_points_to_next_msg_and_cb() -> None:
    with pytest.raises(nats.InvalidArgumentError, match=r"next_msg.*cb="):
        nats.Client().subscribe("a", future=object())


def test_payload_and_data_together_are_refused() -> None:
    nc = nats.Client()
    with pytest.raises(nats.InvalidArgumentError, match="payload is nats-py's name for data"):
        nc.publish("a", b"x", payload=b"y")
    with pytest.raises(nats.InvalidArgumentError, match="payload is nats-py's name for data"):
        nc.request("a", b"x", payload=b"y")
    with pytest.raises(nats.InvalidArgumentError, match="old_style must be a bool"):
        nc.request("a", payload=b"y", old_style="yes")


def test_status_numbers_are_natspy_s() -> None:
    c = nats.Client
    assert (
        c.DISCONNECTED,
        c.CONNECTED,
        c.CLOSED,
        c.RECONNECTING,
        c.CONNECTING,
        c.DRAINING_SUBS,
        c.DRAINING_PUBS,
    ) == (0, 1, 2, 3, 4, 5, 6)


def test_unconnected_client_attributes() -> None:
    nc = nats.Client()
    assert nc.client_id is None and nc.client_ip is None
    assert str(nc.connected_server_version) == "0.0.0-unknown"
    assert not nc.is_connecting and not nc.is_draining and not nc.is_draining_pubs
    assert nc.pending_data_size == 0
    assert isinstance(nc.ssl_context, ssl.SSLContext)
    nc.force_reconnect()  # not connected: nothing, as nats-py
    assert not nc.is_connected


def test_server_version_parses_and_compares() -> None:
    v = ServerVersion("2.10.22-beta.1+abc")
    assert (v.major, v.minor, v.patch, v.prerelease, v.build) == (2, 10, 22, "beta.1", "abc")
    assert v.dev == "beta.1+abc"
    assert v < ServerVersion("2.10.22") < "2.11.0" and v > (2, 10, 21)
    assert ServerVersion("2.10.22") == (2, 10, 22) == ServerVersion("v2.10.22")
    assert ServerVersion("2.9.0") < ServerVersion("2.10.0")  # numbers, not text
    assert len({ServerVersion("2.1.0"), ServerVersion("2.1.0")}) == 1
    with pytest.raises(nats.InvalidArgumentError, match="not a semantic version"):
        ServerVersion("two")


# --- errors -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "base"),
    [
        ("UnexpectedEOF", errors.ConnectionLostError),
        ("FlushTimeoutError", errors.TimeoutError),
        ("DrainTimeoutError", errors.TimeoutError),
        ("SecureConnRequiredError", errors.SecureConnectionRequiredError),
        ("SecureConnWantedError", errors.SecureConnectionRequiredError),
        ("SecureConnFailedError", errors.SecureConnectionRequiredError),
        ("BadHeaderError", errors.InvalidArgumentError),
        ("JsonParseError", errors.ProtocolError),
        ("ConnectionDrainingError", errors.ConnectionClosedError),
        ("ConnectionReconnectingError", errors.ConnectionLostError),
        ("InvalidUserCredentialsError", errors.InvalidArgumentError),
        ("InvalidCallbackTypeError", errors.InvalidArgumentError),
        ("ServerNotInPoolError", errors.InvalidArgumentError),
        ("MsgAlreadyAckdError", errors.NATSError),
    ],
)
def test_natspy_error_names_sit_under_ours(name: str, base: type) -> None:
    cls = getattr(nats, name)
    assert cls is getattr(errors, name) and issubclass(cls, base) and cls is not base
    assert name in errors.__doc__  # drawn in the tree


def test_error_is_the_root() -> None:
    assert nats.Error is nats.NATSError


def test_bad_header_error_names_the_key() -> None:
    with pytest.raises(nats.BadHeaderError) as info:
        encode_headers({"Bad Key": "v"})
    assert info.value.key == "Bad Key"
    with pytest.raises(nats.BadHeaderError, match="CR or LF"):
        encode_headers({"K": "a\r\nPUB x 1"})


def test_info_that_is_not_json_is_json_parse_error() -> None:
    parser = proto.Parser()
    parser.receive_data(b"INFO {not json\r\n")
    with pytest.raises(nats.JsonParseError, match="INFO is not valid JSON"):
        parser.next_event()


def test_publish_while_draining_pubs_is_connection_draining() -> None:
    link = Link()
    link.state = CONNECTED
    outbox = Outbox(link, lambda err: None)
    outbox.draining_pubs = True
    with pytest.raises(nats.ConnectionDrainingError, match="draining"):
        outbox.enqueue_pub_slow(b"PUB a 0\r\n\r\n", 0)


def test_skip_subject_validation_keeps_the_framing_checks() -> None:
    outbox = Outbox(Link(), lambda err: None)
    with pytest.raises(nats.BadSubjectError, match="empty token"):
        outbox.build_pub("a..b", b"x", None, None)
    outbox.check_subjects = False
    frame, _ = outbox.build_pub("a..b", b"x", None, None)
    assert frame == b"PUB a..b 1\r\nx\r\n"
    assert outbox.build_pub("a.*", b"", "r..", {"K": "v"})[0].startswith(b"HPUB a.* r.. ")
    for subject in ("a b", "a\r\nPUB x", ""):
        with pytest.raises(nats.BadSubjectError):
            outbox.build_pub(subject, b"x", None, None)


# --- Msg ----------------------------------------------------------------------------------


def test_msg_header_is_natspy_s() -> None:
    plain = Msg("a", "", b"x")
    assert plain.header is None and plain.headers is None  # nats-py's None, both names
    assert plain.all_headers == {}
    with_hdr = Msg("a", "", b"x", hdr=b"NATS/1.0\r\nK: v\r\n\r\n")
    assert with_hdr.header is not None and with_hdr.header["K"] == "v"
    assert with_hdr.header == with_hdr.headers


def test_msg_ack_constants_and_metadata_class() -> None:
    assert (Msg.Ack.Ack, Msg.Ack.Nak, Msg.Ack.Progress, Msg.Ack.Term) == (
        b"+ACK",
        b"-NAK",
        b"+WPI",
        b"+TERM",
    )
    reply = "$JS.ACK.dom.hash.S.C.3.10.7.1700000000000000000.5.tok"
    tokens = reply.split(".")
    assert (tokens[Msg.Ack.Stream], tokens[Msg.Ack.Consumer]) == ("S", "C")
    assert tokens[Msg.Ack.StreamSeq] == "10" and tokens[Msg.Ack.NumPending] == "5"
    meta = Msg("x", reply, b"").metadata
    assert isinstance(meta, Msg.Metadata)
    assert (meta.stream, meta.sequence.stream, meta.num_pending) == ("S", 10, 5)


def test_msg_is_acked_starts_false() -> None:
    assert Msg("x", "$JS.ACK.S.C.1.1.1.1.0", b"").is_acked is False
