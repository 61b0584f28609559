"""Durable sourcing (ADR-60): a source or mirror that reads through a consumer made
beforehand on the origin (``StreamSource.consumer``, a push consumer acking by flow control).
The config goes to the server and comes back the same, the data flows through it, and the
server's refusals arrive as DurableSourceError saying what to do."""

from __future__ import annotations

from typing import Iterator, List, Optional

import pytest

import jetstream_sync as nats
from jetstream_sync.jetstream.api import (
    AckPolicy,
    APIErrorInfo,
    ConsumerConfig,
    RetentionPolicy,
    StreamConfig,
    StreamConsumerSource,
    StreamSource,
    SubjectTransform,
)
from jetstream_sync.jetstream.context import JetStream
from jetstream_sync.testing import stream_name, wait_until


@pytest.fixture
def made(js: JetStream) -> Iterator[List[str]]:
    """The streams a test made, deleted afterwards (sourcing ones first)."""
    names: List[str] = []
    yield names
    for name in reversed(names):
        try:
            js.delete_stream(name)
        except nats.StreamNotFoundError:
            pass


def origin(js: JetStream, made: List[str], retention: RetentionPolicy) -> str:
    name = stream_name("ORIGIN")
    js.add_stream(StreamConfig(name=name, subjects=[f"{name.lower()}.>"], retention=retention))
    made.append(name)
    return name


def flow_control_consumer(js: JetStream, stream: str, durable: str) -> StreamConsumerSource:
    """The consumer ADR-60 wants, made on the origin; what a source names to read through it."""
    deliver = f"deliver.{stream}.{durable}"
    info = js.add_consumer(
        stream,
        ConsumerConfig(
            durable_name=durable, deliver_subject=deliver, ack_policy=AckPolicy.FLOW_CONTROL
        ),
    )
    # The server fills in what that ack policy needs: flow control, a 1 s heartbeat.
    assert info.config.ack_policy is AckPolicy.FLOW_CONTROL
    assert info.config.flow_control is True and info.config.idle_heartbeat == 1.0
    return StreamConsumerSource(name=durable, deliver_subject=deliver)


def test_a_durable_source_round_trips_and_drains_a_work_queue(
    js: JetStream, made: List[str]
) -> None:
    wq = origin(js, made, RetentionPolicy.WORK_QUEUE)
    source = StreamSource(name=wq, consumer=flow_control_consumer(js, wq, "to-agg"))
    agg = stream_name("AGG")
    info = js.add_stream(StreamConfig(name=agg, sources=[source]))
    made.append(agg)
    assert info.config.sources == [source]  # the server took it as sent
    assert info.config.sources[0].consumer == StreamConsumerSource(
        name="to-agg", deliver_subject=f"deliver.{wq}.to-agg"
    )
    assert js.stream_info(agg).config.sources == [source]
    assert "consumer" in info.config.to_dict()["sources"][0]

    for i in range(5):
        js.publish(f"{wq.lower()}.job.{i}", f"job {i}".encode())
    wait_until(lambda: js.stream_info(agg).state.messages == 5, what="the 5 jobs sourced")
    got = [js.get_msg(agg, seq).data for seq in range(1, 6)]
    assert got == [f"job {i}".encode() for i in range(5)]
    # The sourcing stream acks what it stored by flow control: the work queue empties.
    wait_until(lambda: js.stream_info(wq).state.messages == 0, what="the work queue drained")
    (progress,) = js.stream_info(agg).sources or []
    assert progress.name == wq and progress.error is None and progress.lag == 0


def test_a_durable_mirror_round_trips_and_mirrors(js: JetStream, made: List[str]) -> None:
    limits = origin(js, made, RetentionPolicy.LIMITS)
    mirror = StreamSource(name=limits, consumer=flow_control_consumer(js, limits, "to-mirror"))
    copy = stream_name("MIRROR")
    info = js.add_stream(StreamConfig(name=copy, mirror=mirror))
    made.append(copy)
    assert info.config.mirror == mirror
    assert js.stream_info(copy).config.mirror == mirror
    js.publish(f"{limits.lower()}.a", b"mirrored")
    wait_until(lambda: js.stream_info(copy).state.messages == 1, what="the message mirrored")
    assert js.get_msg(copy, 1).data == b"mirrored"


def test_what_the_server_refuses_of_durable_sourcing(js: JetStream, made: List[str]) -> None:
    limits = origin(js, made, RetentionPolicy.LIMITS)
    consumer = flow_control_consumer(js, limits, "fc")
    wildcard = StreamConsumerSource(name="fc", deliver_subject="d.*")
    refused = [
        # Where to start and what to filter belong to the consumer.
        ({"sources": [StreamSource(name=limits, filter_subject="x", consumer=consumer)]}, 10215),
        ({"sources": [StreamSource(name=limits, opt_start_seq=2, consumer=consumer)]}, 10215),
        ({"mirror": StreamSource(name=limits, opt_start_seq=2, consumer=consumer)}, 10213),
        ({"sources": [StreamSource(name=limits, consumer=wildcard)]}, 10215),
    ]
    for config, err_code in refused:
        with pytest.raises(nats.DurableSourceError) as caught:
            js.add_stream(StreamConfig(name=stream_name("REFUSED"), **config))  # type: ignore[arg-type]
        assert caught.value.err_code == err_code
        assert "configure those on the consumer" in str(caught.value)
    with pytest.raises(nats.DurableSourceError, match="give each its own") as caught:
        js.add_stream(
            StreamConfig(
                name=stream_name("REFUSED"),
                sources=[
                    StreamSource(name=limits, consumer=consumer, subject_transforms=[t])
                    for t in (
                        SubjectTransform(src=">", dest="a.>"),
                        SubjectTransform(src=">", dest="b.>"),
                    )
                ],
            )
        )
    assert caught.value.err_code == 10216
    # The consumer's own config, for flow-control acks.
    for config, advice in (
        (ConsumerConfig(durable_name="pull", ack_policy=AckPolicy.FLOW_CONTROL), "push consumer"),
        (
            ConsumerConfig(
                durable_name="capped",
                deliver_subject="d.capped",
                ack_policy=AckPolicy.FLOW_CONTROL,
                max_deliver=3,
            ),
            "no max_deliver",
        ),
    ):
        with pytest.raises(nats.DurableSourceError, match=advice):
            js.add_consumer(limits, config)
    # A consumer that acks otherwise is accepted in the config, and the source says why it
    # is stuck.
    js.add_consumer(
        limits,
        ConsumerConfig(
            durable_name="explicit", deliver_subject="d.explicit", ack_policy=AckPolicy.EXPLICIT
        ),
    )
    stuck = stream_name("STUCK")
    js.add_stream(
        StreamConfig(
            name=stuck,
            sources=[
                StreamSource(
                    name=limits,
                    consumer=StreamConsumerSource(name="explicit", deliver_subject="d.explicit"),
                )
            ],
        )
    )
    made.append(stuck)

    def source_error() -> Optional[APIErrorInfo]:
        (progress,) = js.stream_info(stuck).sources or []
        return progress.error

    error = wait_until(source_error, what="the source's error")
    assert error.err_code == 10217 and "flow control ack policy" in (error.description or "")
