"""JetStream context: stream and consumer management, publish and publish_async."""

from __future__ import annotations

import datetime as dt
import threading
from pathlib import Path
from typing import Callable, List

import pytest

import jetstream_sync as nats
from jetstream_sync.jetstream.api import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    PubAck,
    RetentionPolicy,
    StorageType,
    StreamConfig,
)
from jetstream_sync.jetstream.context import JetStream
from jetstream_sync.server import NATSServer
from jetstream_sync.testing import wait_until

STREAM_PREFIX = "S"  # the shared stream fixture names its streams S<n>


def _subj(stream: str, tail: str = "a") -> str:
    return f"s{stream[1:]}.{tail}"


# --- streams --------------------------------------------------------------------------------


@pytest.mark.smoke
def test_add_info_update_delete_stream(js: JetStream) -> None:
    cfg = StreamConfig(name="MGMT", subjects=["mgmt.>"], max_age=3600.0, storage=StorageType.MEMORY)
    info = js.add_stream(cfg)
    assert info.config.name == "MGMT" and info.config.max_age == 3600.0
    assert info.config.storage == StorageType.MEMORY and info.state.messages == 0
    # The same config again is fine; keyword fields replace config fields.
    assert js.add_stream(cfg).config.name == "MGMT"
    updated = js.update_stream(cfg, max_msgs=10, description="ten at most")
    assert updated.config.max_msgs == 10 and updated.config.description == "ten at most"
    assert js.stream_info("MGMT").config.max_msgs == 10
    assert js.delete_stream("MGMT") is True
    with pytest.raises(nats.StreamNotFoundError) as info_err:
        js.stream_info("MGMT")
    assert info_err.value.code == 404 and info_err.value.err_code == 10059


def test_stream_errors_are_typed(js: JetStream, stream: str) -> None:
    with pytest.raises(nats.StreamNameAlreadyInUseError):
        js.add_stream(name=stream, subjects=["other.>"])
    with pytest.raises(nats.StreamSubjectOverlapError):
        js.add_stream(name="OVERLAP", subjects=[_subj(stream, "x")])
    with pytest.raises(nats.StreamNotFoundError):
        js.delete_stream("NOPE")
    with pytest.raises(nats.InvalidArgumentError, match="name"):
        js.add_stream(name="bad.name", subjects=["x"])
    with pytest.raises(nats.InvalidArgumentError, match="StreamConfig"):
        js.add_stream(config={"name": "dict"})


def test_stream_names_and_infos_paged(js: JetStream) -> None:
    # More streams than one page (the server pages at 1024 names / 256 infos).
    names = [f"PAGE{i}" for i in range(300)]
    for i, name in enumerate(names):
        js.add_stream(name=name, subjects=[f"page{i}"], storage=StorageType.MEMORY)
    try:
        listed = js.stream_names()
        assert set(names) <= set(listed)
        infos = js.streams_info()
        assert set(names) <= {i.config.name for i in infos}
        assert js.stream_names(subject="page7") == ["PAGE7"]
    finally:
        for name in names:
            js.delete_stream(name)


def test_purge_variants(js: JetStream, stream: str) -> None:
    for i in range(10):
        js.publish(_subj(stream, "a" if i % 2 else "b"), str(i).encode())
    assert js.purge_stream_count(stream, subject=_subj(stream, "b")) == 5
    assert js.purge_stream_count(stream, keep=2) == 3
    state = js.stream_info(stream).state
    assert state.messages == 2 and state.last_seq == 10
    assert js.purge_stream_count(stream, seq=10) == 1  # below seq 10
    assert js.purge_stream_count(stream) == 1
    assert js.purge_stream_count(stream) == 0
    # nats-py's value: True, an empty stream too (`if js.purge_stream(...)` ports as is)
    assert js.purge_stream(stream) is True
    js.publish(_subj(stream, "a"), b"x")
    assert js.purge_stream(stream, _subj(stream, "a")) is True
    assert js.stream_info(stream).state.messages == 0
    with pytest.raises(nats.InvalidArgumentError, match="not both"):
        js.purge_stream(stream, seq=1, keep=1)
    with pytest.raises(nats.InvalidArgumentError, match="purge_stream_count: give seq or keep"):
        js.purge_stream_count(stream, seq=1, keep=1)


def test_get_msg_and_delete_msg(js: JetStream, stream: str) -> None:
    js.publish(_subj(stream, "x"), b"one", headers={"H": "1"})
    js.publish(_subj(stream, "y"), b"two")
    js.publish(_subj(stream, "x"), b"three")
    m = js.get_msg(stream, seq=1)
    assert (m.seq, m.subject, m.data, m.headers["H"]) == (1, _subj(stream, "x"), b"one", "1")
    assert isinstance(m.time, dt.datetime) and m.time.tzinfo is not None
    last = js.get_msg(stream, last_by_subject=_subj(stream, "x"))
    assert (last.seq, last.data) == (3, b"three")
    assert js.delete_msg(stream, 2) is True
    with pytest.raises(nats.NoMessageFoundError):
        js.get_msg(stream, seq=2)
    with pytest.raises(nats.InvalidArgumentError):
        js.get_msg(stream)


def test_direct_get_single_and_batched(js: JetStream) -> None:
    js.add_stream(name="DIRECT", subjects=["direct.>"], allow_direct=True)
    try:
        for i in range(25):
            js.publish(f"direct.{i % 3}", str(i).encode())
        m = js.get_msg("DIRECT", seq=5, direct=True)
        assert (m.seq, m.data, m.subject, m.stream) == (5, b"4", "direct.1", "DIRECT")
        last = js.get_msg("DIRECT", last_by_subject="direct.0", direct=True)
        assert last.data == b"24"
        batch = list(js.get_msgs("DIRECT", seq=3, batch=10))
        assert [b.seq for b in batch] == list(range(3, 13))
        tail = list(js.get_msgs("DIRECT", seq=20, batch=100))
        assert [b.seq for b in tail] == list(range(20, 26))  # ends at the 204 end-of-batch
        only = list(js.get_msgs("DIRECT", seq=1, batch=100, next_by_subject="direct.2"))
        assert [b.data for b in only] == [str(i).encode() for i in range(2, 25, 3)]
        assert list(js.get_msgs("DIRECT", seq=1000, batch=5)) == []
        with pytest.raises(nats.NoMessageFoundError):
            js.get_msg("DIRECT", seq=1000, direct=True)
    finally:
        js.delete_stream("DIRECT")


def test_direct_get_of_a_missing_stream_is_no_responders(js: JetStream) -> None:
    # As nats-py: the request's no-responders status, not a timeout; the text says why.
    with pytest.raises(nats.NoRespondersError, match="may not exist, or not have allow_direct"):
        js.get_msg("NO_SUCH_STREAM", seq=1, direct=True)
    with pytest.raises(nats.NoRespondersError):
        js.get_msg("NO_SUCH_STREAM", last_by_subject="x", direct=True)
    with pytest.raises(nats.NotFoundError):
        js.get_msg("NO_SUCH_STREAM", seq=1)


# --- consumers ------------------------------------------------------------------------------


def test_consumer_lifecycle(js: JetStream, stream: str) -> None:
    # With a backoff the server takes ack_wait from its first step.
    cfg = ConsumerConfig(
        durable_name="dur",
        ack_policy=AckPolicy.EXPLICIT,
        ack_wait=30.0,
        filter_subject=_subj(stream, "a"),
        backoff=[30.0, 90.5],
        max_deliver=5,
    )
    info = js.add_consumer(stream, cfg)
    assert info.name == "dur" and info.config.ack_wait == 30.0
    assert info.config.backoff == [30.0, 90.5] and info.stream_name == stream
    assert js.add_consumer(stream, cfg).name == "dur"  # same config
    with pytest.raises(nats.ConsumerAlreadyExistsError):
        js.add_consumer(stream, cfg, description="different")
    updated = js.update_consumer(stream, cfg, description="changed")
    assert updated.config.description == "changed"
    with pytest.raises(nats.ConsumerDoesNotExistError):
        js.update_consumer(stream, durable_name="ghost", ack_policy=AckPolicy.EXPLICIT)
    assert js.create_or_update_consumer(stream, durable_name="cou").name == "cou"
    assert sorted(js.consumer_names(stream)) == ["cou", "dur"]
    assert {c.name for c in js.consumers_info(stream)} == {"cou", "dur"}
    assert js.consumer_info(stream, "dur").config.description == "changed"
    assert js.delete_consumer(stream, "dur") is True
    with pytest.raises(nats.ConsumerNotFoundError):
        js.consumer_info(stream, "dur")


def test_ephemeral_consumer_and_filters(js: JetStream, stream: str) -> None:
    info = js.add_consumer(
        stream,
        filter_subjects=[_subj(stream, "a"), _subj(stream, "b")],
        deliver_policy=DeliverPolicy.LAST_PER_SUBJECT,
        inactive_threshold=60.0,
    )
    assert info.name and info.config.durable_name is None
    assert info.config.filter_subjects == [_subj(stream, "a"), _subj(stream, "b")]
    assert info.config.inactive_threshold == 60.0


def test_pause_and_resume_consumer(js: JetStream, stream: str) -> None:
    js.add_consumer(stream, durable_name="p", ack_policy=AckPolicy.EXPLICIT)
    until = dt.datetime.now(dt.timezone.utc) + dt.timedelta(minutes=5)
    paused = js.pause_consumer(stream, "p", until)  # nats-py's ConsumerPause
    assert paused.paused is True and paused and paused.pause_until == until
    assert paused.pause_remaining is not None and 0 < paused.pause_remaining <= 300
    info = js.consumer_info(stream, "p")
    assert info.paused is True and info.config.pause_until is not None
    resumed = js.resume_consumer(stream, "p")
    assert resumed.paused is False and not resumed and resumed.pause_remaining is None
    assert not js.consumer_info(stream, "p").paused


def test_account_info(js: JetStream, stream: str) -> None:
    info = js.account_info()
    assert info.streams >= 1 and info.limits is not None


# --- publish --------------------------------------------------------------------------------


@pytest.mark.smoke
def test_publish_returns_pub_ack_with_duplicates(js: JetStream, stream: str) -> None:
    ack = js.publish(_subj(stream), b"x", msg_id="id-1")
    assert isinstance(ack, PubAck) and ack.stream == stream and ack.seq == 1 and not ack.duplicate
    again = js.publish(_subj(stream), b"x", msg_id="id-1")
    assert again.seq == 1 and again.duplicate is True
    assert js.stream_info(stream).state.messages == 1


def test_publish_expectations(js: JetStream, stream: str) -> None:
    s = _subj(stream)
    js.publish(s, b"1", msg_id="m1")
    js.publish(s, b"2", expected_stream=stream, expected_last_seq=1, expected_last_msg_id="m1")
    js.publish(s, b"3", expected_last_subject_seq=2)
    with pytest.raises(nats.StreamNotMatchError):
        js.publish(s, b"x", expected_stream="OTHER")
    with pytest.raises(nats.StreamWrongLastSequenceError):
        js.publish(s, b"x", expected_last_seq=1)
    with pytest.raises(nats.StreamWrongLastMsgIdError):
        js.publish(s, b"x", expected_last_msg_id="nope")
    with pytest.raises(nats.StreamWrongLastSequenceError):
        js.publish(s, b"x", expected_last_subject_seq=1)
    assert js.stream_info(stream).state.messages == 3


def test_publish_to_no_stream_is_a_clear_error(js: JetStream) -> None:
    with pytest.raises(nats.NoStreamResponseError, match="no stream"):
        js.publish("nostream.here", b"x", timeout=0.3)


def test_message_too_large(js: JetStream) -> None:
    js.add_stream(name="SMALL", subjects=["small"], max_msg_size=10)
    try:
        with pytest.raises(nats.MessageTooLargeError):
            js.publish("small", b"x" * 11)
    finally:
        js.delete_stream("SMALL")


@pytest.mark.smoke
def test_publish_async_resolves_every_future(js: JetStream, stream: str) -> None:
    futs = [js.publish_async(_subj(stream), str(i).encode()) for i in range(2000)]
    js.publish_async_completed(timeout=30)
    acks = [f.result(timeout=0) for f in futs]
    assert sorted(a.seq for a in acks) == list(range(1, 2001))
    assert js.publish_async_pending == 0
    bad = js.publish_async(_subj(stream), b"x", expected_last_seq=1)
    with pytest.raises(nats.StreamWrongLastSequenceError):
        bad.result(timeout=10)
    nostream = js.publish_async("nowhere.at.all", b"x")
    with pytest.raises(nats.NoStreamResponseError):
        nostream.result(timeout=10)


def test_publish_async_window_stalls_then_errors(nats_server: NATSServer, stream: str) -> None:
    with nats.connect(nats_server.url) as nc:
        js = nc.jetstream(publish_async_max_pending=5, publish_async_stall_wait=0.3)
        # A subject no stream captures: the server's 503s are the only answers, so hold the
        # acks back by stalling this client's reader is not needed — publish to a subject
        # with a responder that never answers instead.
        nc.subscribe("blackhole")
        nc.flush()
        futs = [js.publish_async("blackhole", b"x", timeout=30) for _ in range(5)]
        with pytest.raises(nats.PublishStalledError, match="window"):
            js.publish_async("blackhole", b"x")
        assert js.publish_async_pending == 5 and not any(f.done() for f in futs)


def test_publish_async_window_shared_by_several_threads(
    nats_server: NATSServer, stream: str
) -> None:
    """Four threads push through one small window: each waiting thread gets its own wake-up
    (none stalls while acks flow), and every publish is stored once."""
    with nats.connect(nats_server.url) as nc:
        js = nc.jetstream(publish_async_max_pending=64, publish_async_stall_wait=10.0)
        failures: List[BaseException] = []

        def publish(who: int) -> None:
            try:
                for i in range(2000):
                    js.publish_async(_subj(stream), b"%d-%d" % (who, i))
            except BaseException as exc:  # a stall would land here
                failures.append(exc)

        threads = [threading.Thread(target=publish, args=(w,)) for w in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        js.publish_async_completed(timeout=30)
        assert failures == []
        assert js.stream_info(stream).state.messages == 8000


def test_publish_async_futures_time_out_and_fail_on_close(nats_server: NATSServer) -> None:
    nc = nats.connect(nats_server.url)
    js = nc.jetstream()
    nc.subscribe("silent.js")
    nc.flush()
    quick = js.publish_async("silent.js", b"x", timeout=0.2)
    with pytest.raises(nats.TimeoutError):
        quick.result(timeout=10)
    slow = js.publish_async("silent.js", b"x", timeout=60)
    nc.close()
    with pytest.raises(nats.ConnectionClosedError):
        slow.result(timeout=10)


def test_publish_async_default_timeout_expires(nats_server: NATSServer) -> None:
    with nats.connect(nats_server.url) as nc:
        js = nc.jetstream(timeout=0.3)  # the context's timeout: the checkpoint path
        nc.subscribe("silent.default")
        nc.flush()
        fut = js.publish_async("silent.default", b"x")
        with pytest.raises(nats.TimeoutError, match=r"silent\.default"):
            fut.result(timeout=10)
        assert js.publish_async_pending == 0


def test_publish_async_callbacks_not_on_reader_thread(js: JetStream, stream: str) -> None:
    seen: List[str] = []
    done = threading.Event()

    def cb(_: object) -> None:
        seen.append(threading.current_thread().name)
        done.set()

    js.publish_async(_subj(stream), b"x").add_done_callback(cb)
    assert done.wait(10)
    assert seen and seen[0] != "nats-network"


def test_jetstream_not_enabled_is_clear(server_factory: Callable[..., NATSServer]) -> None:
    srv = server_factory(jetstream=False)
    with nats.connect(srv.url) as nc:
        js = nc.jetstream()
        with pytest.raises(nats.JetStreamNotEnabledError, match="not enabled"):
            js.account_info()
        with pytest.raises(nats.JetStreamNotEnabledError):
            js.add_stream(name="X", subjects=["x"])


def test_domain_prefix(nc: nats.Client) -> None:
    assert nc.jetstream(domain="hub").prefix == "$JS.hub.API"
    with pytest.raises(nats.InvalidArgumentError):
        nc.jetstream(domain="a.b")
    with pytest.raises(nats.JetStreamNotEnabledError, match="domain"):
        nc.jetstream(domain="nowhere", timeout=5).account_info()


def test_retention_workqueue_round_trip(js: JetStream) -> None:
    info = js.add_stream(name="WQ", subjects=["wq.>"], retention=RetentionPolicy.WORK_QUEUE)
    try:
        assert info.config.retention == RetentionPolicy.WORK_QUEUE
    finally:
        js.delete_stream("WQ")


def test_consumer_create_subjects_on_the_wire(
    server_factory: Callable[..., NATSServer], tmp_path: Path
) -> None:
    """The server's trace log shows the subjects and actions of consumer creation."""
    trace = tmp_path / "trace.log"
    srv = server_factory(jetstream=True, trace_log=str(trace))
    with nats.connect(srv.url) as nc:
        js = nc.jetstream()
        js.add_stream(name="W", subjects=["w.>"])
        js.add_consumer("W", durable_name="d1", filter_subject="w.a")
        js.update_consumer("W", durable_name="d1", filter_subject="w.a", description="u")
        js.create_or_update_consumer("W", durable_name="d2", filter_subjects=["w.a", "w.b"])
    log = srv.wait_for_log("$JS.API.CONSUMER.CREATE.W.d2")
    assert "$JS.API.CONSUMER.CREATE.W.d1.w.a" in log
    sent = [line for line in log.splitlines() if "<<- MSG_PAYLOAD" in line]
    bodies = [line for line in sent if "stream_name" in line]
    assert '\\"action\\":\\"create\\"' in bodies[0] or '"action":"create"' in bodies[0]
    assert "update" in bodies[1]
    assert "action" not in bodies[2]


def test_legacy_servers_get_the_durable_create_subject(nc: nats.Client) -> None:
    """Before 2.9 the server knows only CONSUMER.DURABLE.CREATE (and no actions)."""
    from jetstream_sync.jetstream.manager import _version

    assert _version("2.8.4") < (2, 9, 0) <= _version("2.9.0") < _version("2.15.1-beta.2")
    sent: List[str] = []
    js = nc.jetstream()
    js._api = lambda suffix, body=None, timeout=None: sent.append(suffix) or {}  # type: ignore[method-assign]
    nc._network.server_info = {**nc.server_info, "version": "2.8.4"}
    js.add_consumer("S", durable_name="old")
    js.add_consumer("S", name="eph")
    assert sent == ["CONSUMER.DURABLE.CREATE.S.old", "CONSUMER.CREATE.S"]


def test_publish_retries_503_until_a_stream_appears(js: JetStream) -> None:
    """No responders (no stream yet, or a leader election) is retried until the timeout
    with retry_attempts=-1 (the default gives up after two retries, 0.25 s apart)."""
    result: List[object] = []

    def publish() -> None:
        try:
            result.append(js.publish("late.stream", b"x", timeout=10, retry_attempts=-1))
        except BaseException as exc:
            result.append(exc)

    t = threading.Thread(target=publish)
    t.start()
    try:
        # The publish is already retrying; the stream appears only afterwards.
        wait_until(lambda: js.nc.stats["out_msgs"] > 0, 5, "first publish attempt")
        js.add_stream(name="LATE", subjects=["late.>"])
        t.join(15)
        assert len(result) == 1 and isinstance(result[0], PubAck), result
        assert result[0].stream == "LATE" and result[0].seq == 1
    finally:
        js.delete_stream("LATE")


def test_publish_async_pending_reads_as_nats_py_s_method_too(js: JetStream, stream: str) -> None:
    assert js.publish_async_pending == 0 and js.publish_async_pending() == 0
    js.publish_async(f"{stream.lower()}.x", b"1").result(10)
    assert js.publish_async_pending() == js.publish_async_pending == 0
