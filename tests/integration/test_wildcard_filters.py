"""Consumers on wildcard filters (issue 17, 1a): ``*`` and ``>`` wherever a filter is taken,
the way most people use JetStream. A bad filter is named as the user wrote it, never by the
internal API subject it would have gone on."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, List

import pytest

import jetstream_sync as nats
from jetstream_sync.jetstream.api import ConsumerConfig
from jetstream_sync.jetstream.context import JetStream
from jetstream_sync.server import NATSServer

STREAM_PREFIX = "WF"


def _publish(js: JetStream, subjects: List[str]) -> None:
    for i, subject in enumerate(subjects):
        js.publish(subject, f"m{i}".encode())


def test_pull_subscribe_on_a_star_filter_gets_only_what_matches(js: JetStream, stream: str) -> None:
    p = stream.lower()
    psub = js.pull_subscribe(f"{p}.jobs.*", "w")
    assert js.consumer_info(stream, "w").config.filter_subject == f"{p}.jobs.*"
    _publish(js, [f"{p}.jobs.a", f"{p}.other", f"{p}.jobs.b", f"{p}.jobs.b.deep"])
    got = psub.fetch(10, timeout=2)
    assert [m.subject for m in got] == [f"{p}.jobs.a", f"{p}.jobs.b"]
    for m in got:
        m.ack()
    with pytest.raises(nats.TimeoutError):
        psub.fetch(10, timeout=0.5)


def test_push_subscribe_on_a_gt_filter(js: JetStream, stream: str) -> None:
    p = stream.lower()
    sub = js.subscribe(f"{p}.orders.>")
    _publish(js, [f"{p}.orders.eu.1", f"{p}.payments.1", f"{p}.orders.us.2"])
    got = [sub.next_msg(timeout=5).subject for _ in range(2)]
    assert got == [f"{p}.orders.eu.1", f"{p}.orders.us.2"]
    with pytest.raises(nats.TimeoutError):
        sub.next_msg(timeout=0.3)
    sub.unsubscribe()


def test_ordered_push_on_a_star_filter(js: JetStream, stream: str) -> None:
    p = stream.lower()
    _publish(js, [f"{p}.a.1", f"{p}.b.1", f"{p}.a.2"])
    sub = js.subscribe(f"{p}.a.*", ordered_consumer=True)
    assert [sub.next_msg(timeout=5).data for _ in range(2)] == [b"m0", b"m2"]
    sub.unsubscribe()


def test_ordered_pull_on_wildcard_filters(js: JetStream, stream: str) -> None:
    p = stream.lower()
    _publish(js, [f"{p}.a.1", f"{p}.b.1", f"{p}.a.2.x", f"{p}.c"])
    oc = js.ordered_consumer(stream, filter_subjects=[f"{p}.a.>", f"{p}.c"])
    assert [m.data for m in oc.fetch(10, max_wait=2)] == [b"m0", b"m2", b"m3"]


def test_add_consumer_with_a_wildcard_filter(js: JetStream, stream: str) -> None:
    p = stream.lower()
    info = js.add_consumer(stream, durable_name="c", filter_subject=f"{p}.a.>")
    assert info.config.filter_subject == f"{p}.a.>"
    # The same again is no error, and create_or_update_consumer takes it too.
    js.add_consumer(stream, durable_name="c", filter_subject=f"{p}.a.>")
    cfg = ConsumerConfig(durable_name="d", filter_subject=f"{p}.*.x")
    js.create_or_update_consumer(stream, cfg)
    assert js.consumer_info(stream, "d").config.filter_subject == f"{p}.*.x"
    _publish(js, [f"{p}.a.x", f"{p}.b", f"{p}.q.x"])
    got = js.consumer(stream, "d").fetch(5, max_wait=2)
    assert [m.subject for m in got] == [f"{p}.a.x", f"{p}.q.x"]


def test_the_create_subject_carries_the_wildcard_filter(
    server_factory: Callable[..., NATSServer], tmp_path: Path
) -> None:
    """The server's trace: the filter rides in the create subject as nats.go sends it."""
    srv = server_factory(jetstream=True, trace_log=str(tmp_path / "trace.log"))
    with nats.connect(srv.url) as nc:
        js = nc.jetstream()
        js.add_stream(name="T", subjects=["t.>"])
        js.pull_subscribe("t.*.x", "w")
        js.subscribe("t.>", durable="p")
    log = srv.wait_for_log("$JS.API.CONSUMER.CREATE.T.p.t.>")
    assert "$JS.API.CONSUMER.CREATE.T.w.t.*.x" in log


@pytest.mark.parametrize(
    "bad, what",
    [
        ("a..b", "empty token"),
        ("a.>.b", "'>' must be the last token"),
        ("a b", "whitespace"),
    ],
)
def test_a_bad_filter_is_named_as_written(js: JetStream, stream: str, bad: str, what: str) -> None:
    p = stream.lower()
    with pytest.raises(nats.BadSubjectError) as e1:
        js.add_consumer(stream, durable_name="c", filter_subject=f"{p}.{bad}")
    with pytest.raises(nats.BadSubjectError) as e2:
        js.pull_subscribe(f"{p}.{bad}", "w", stream=stream)
    with pytest.raises(nats.BadSubjectError) as e3:
        js.subscribe(f"{p}.{bad}", stream=stream)
    for e in (e1, e2, e3):
        assert what in str(e.value)
        assert "$JS" not in str(e.value)
    assert "filter_subject" in str(e1.value)
    assert js.consumer_names(stream) == []


def test_api_errors_say_what_was_asked_not_the_api_subject(js: JetStream, stream: str) -> None:
    with pytest.raises(nats.ConsumerNotFoundError) as e:
        js.consumer_info(stream, "nobody")
    assert "$JS" not in str(e.value)
    assert f"stream {stream!r}" in str(e.value) and "consumer 'nobody'" in str(e.value)
    assert e.value.subject == f"$JS.API.CONSUMER.INFO.{stream}.nobody"  # kept for programs
    with pytest.raises(nats.StreamNotFoundError) as e2:
        js.stream_info("NOSUCH")
    assert "$JS" not in str(e2.value) and "'NOSUCH'" in str(e2.value)


def test_a_literal_publish_subject_is_still_checked(js: JetStream, stream: str) -> None:
    """The consumer-create path skips the publish check; a user's publish does not."""
    p = stream.lower()
    with pytest.raises(nats.BadSubjectError):
        js.publish(f"{p}.a.*", b"x")
    with pytest.raises(nats.BadSubjectError):
        js.nc.publish(f"{p}.a.>", b"x")
    with pytest.raises(nats.BadSubjectError):
        js.nc.request(f"{p}.a.*", b"x", timeout=0.5)


def test_a_filter_of_everything_stays_out_of_the_create_subject(
    server_factory: Callable[..., NATSServer], tmp_path: Path
) -> None:
    """nats-py's rule: filter_subject=">" creates on CONSUMER.CREATE.<stream>.<name>, which a
    pedantic connection may publish to; on one, a wildcard filter stays out of it too."""
    srv = server_factory(jetstream=True, trace_log=str(tmp_path / "trace.log"))
    with nats.connect(srv.url, pedantic=True) as nc:
        js = nc.jetstream()
        js.add_stream(name="S", subjects=["s.>"])
        info = js.add_consumer("S", durable_name="d", filter_subject=">")
        assert info.config.filter_subject == ">"
        js.add_consumer("S", durable_name="w", filter_subject="s.*")
        js.add_consumer("S", durable_name="lit", filter_subject="s.x")
    log = srv.wait_for_log("$JS.API.CONSUMER.CREATE.S.lit.s.x")
    assert "$JS.API.CONSUMER.CREATE.S.d.>" not in log
    assert "$JS.API.CONSUMER.CREATE.S.w.s.*" not in log
