"""Counters (ADR-49): js.counter(stream) against the real server: add, load, get, the
many-subject reads, a stream that sources two counter streams, and the refusals."""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterator, List

import pytest

import jetstream_sync as nats
from jetstream_sync.jetstream import CounterEntry
from jetstream_sync.jetstream.api import StreamSource, SubjectTransform
from jetstream_sync.jetstream.context import JetStream
from jetstream_sync.testing import stream_name, wait_until


@pytest.fixture
def streams(js: JetStream) -> Iterator[Callable[..., str]]:
    """``make(**config)`` adds a stream named CNT<n> (subjects ``cnt<n>.>`` unless given);
    every stream made is deleted afterwards."""
    made: List[str] = []

    def make(**config: Any) -> str:
        name = stream_name("CNT")
        config.setdefault("subjects", [f"{name.lower()}.>"])
        js.add_stream(name=name, **config)
        made.append(name)
        return name

    yield make
    for name in reversed(made):
        js.delete_stream(name)


def counter_stream(streams: Callable[..., str], **config: Any) -> str:
    return streams(allow_msg_counter=True, allow_direct=True, **config)


def test_add_load_and_get(js: JetStream, streams: Callable[..., str]) -> None:
    name = counter_stream(streams)
    c = js.counter(name)
    hits = f"{name.lower()}.hits"
    assert c.add(hits, 5) == 5
    assert c.add(hits, -2) == 3
    assert c.add(hits, 0) == 3
    assert c.load(hits) == 3
    assert c.get(hits) == CounterEntry(subject=hits, value=3, sources={}, incr=0)
    assert c.stream == name


def test_values_beyond_64_bits_and_below_zero(js: JetStream, streams: Callable[..., str]) -> None:
    c = js.counter(counter_stream(streams))
    big = f"{c.stream.lower()}.big"
    assert c.add(big, 2**70) == 2**70
    assert c.add(big, 2**70) == 2**71
    assert c.add(big, -(2**100)) == 2**71 - 2**100
    entry = c.get(big)
    assert (entry.value, entry.incr) == (2**71 - 2**100, -(2**100))
    assert c.add(f"{c.stream.lower()}.neg", -(10**40)) == -(10**40)


def test_a_counter_never_added_to_is_not_found(js: JetStream, streams: Callable[..., str]) -> None:
    c = js.counter(counter_stream(streams))
    with pytest.raises(nats.CounterNotFoundError, match="nothing was added") as caught:
        c.load(f"{c.stream.lower()}.never")
    assert isinstance(caught.value, nats.NotFoundError)  # as KeyNotFoundError is
    with pytest.raises(nats.CounterNotFoundError):
        c.get(f"{c.stream.lower()}.never")


def test_load_many_and_get_many_with_wildcards(js: JetStream, streams: Callable[..., str]) -> None:
    c = js.counter(counter_stream(streams))
    p = c.stream.lower()
    for subject, delta in [("eu.clicks", 1), ("eu.views", 10), ("us.clicks", 2), ("eu.clicks", 4)]:
        c.add(f"{p}.{subject}", delta)
    assert c.load_many([f"{p}.eu.*"]) == {f"{p}.eu.views": 10, f"{p}.eu.clicks": 5}
    assert c.load_many([f"{p}.*.clicks", f"{p}.nothing"]) == {
        f"{p}.us.clicks": 2,
        f"{p}.eu.clicks": 5,
    }
    assert c.load_many([f"{p}.none.>"]) == {}
    entries = list(c.get_many([f"{p}.>"]))  # in the order they last changed
    assert [(e.subject, e.value, e.incr) for e in entries] == [
        (f"{p}.eu.views", 10, 10),
        (f"{p}.us.clicks", 2, 2),
        (f"{p}.eu.clicks", 5, 4),
    ]


def test_a_stream_sourcing_two_counter_streams_keeps_the_breakdown(
    js: JetStream, streams: Callable[..., str]
) -> None:
    eu, us = counter_stream(streams), counter_stream(streams)
    c_eu, c_us = js.counter(eu), js.counter(us)
    c_eu.add(f"{eu.lower()}.hits", 2**64)
    c_us.add(f"{us.lower()}.hits", 7)
    total = counter_stream(
        streams,
        sources=[
            StreamSource(
                name=s, subject_transforms=[SubjectTransform(src=f"{s.lower()}.>", dest="agg.>")]
            )
            for s in (eu, us)
        ],
        subjects=["agg.>"],
    )
    c = js.counter(total)
    want = 2**64 + 7

    def summed() -> bool:
        try:
            return c.load("agg.hits") == want
        except nats.CounterNotFoundError:
            return False

    wait_until(summed, what="the sourced totals")
    c_us.add(f"{us.lower()}.hits", -10)
    wait_until(lambda: c.load("agg.hits") == want - 10, what="the sourced decrement")
    entry = c.get("agg.hits")
    assert entry.sources == {eu: {f"{eu.lower()}.hits": 2**64}, us: {f"{us.lower()}.hits": -3}}
    assert entry.incr == -10  # the server rewrote it: the change of that source's total
    assert c.add("agg.hits", 1) == want - 9  # local adds count too; the breakdown stays
    assert c.get("agg.hits").sources == entry.sources
    assert c.load_many(["agg.*"]) == {"agg.hits": want - 9}


def test_streams_that_do_not_count_are_refused(js: JetStream, streams: Callable[..., str]) -> None:
    plain = streams()
    with pytest.raises(nats.CounterNotEnabledError, match="allow_msg_counter=True"):
        js.counter(plain)
    no_direct = streams(allow_msg_counter=True)
    with pytest.raises(nats.CounterError, match="allow_direct=True"):
        js.counter(no_direct)
    with pytest.raises(nats.StreamNotFoundError):
        js.counter("NO_SUCH_COUNTER")
    # A subject another (non-counter) stream captures: the server refuses the increment.
    c = js.counter(counter_stream(streams))
    with pytest.raises(nats.CounterNotEnabledError, match="without allow_msg_counter") as caught:
        c.add(f"{plain.lower()}.x", 1)
    assert caught.value.err_code == 10168
    with pytest.raises(nats.NoStreamResponseError, match=c.stream):
        c.add("nobody.captures.this", 1)


def test_messages_a_counter_cannot_count_are_refused(
    js: JetStream, streams: Callable[..., str]
) -> None:
    c = js.counter(counter_stream(streams))
    subject = f"{c.stream.lower()}.x"
    with pytest.raises(nats.CounterIncrementError) as caught:
        js.publish(subject, b"not an increment")
    assert caught.value.err_code == 10169
    with pytest.raises(nats.CounterIncrementError):
        js.publish(subject, b"", headers={"Nats-Incr": "one"})
    with pytest.raises(nats.CounterIncrementError):
        js.publish(subject, b"payload", headers={"Nats-Incr": "+1"})
    with pytest.raises(nats.CounterNotFoundError):
        c.load(subject)  # nothing was stored


BAD_DELTAS: Dict[str, Any] = {
    "bool": True,
    "float": 1.5,
    "text": "1",
    "None": None,
}


@pytest.mark.parametrize("delta", BAD_DELTAS.values(), ids=BAD_DELTAS.keys())
def test_a_delta_must_be_an_int(js: JetStream, streams: Callable[..., str], delta: Any) -> None:
    c = js.counter(counter_stream(streams))
    with pytest.raises(nats.InvalidArgumentError, match="delta must be an int"):
        c.add(f"{c.stream.lower()}.x", delta)


def test_bad_subjects_and_a_low_api_level(js: JetStream, streams: Callable[..., str]) -> None:
    c = js.counter(counter_stream(streams))
    with pytest.raises(nats.BadSubjectError):
        c.add(f"{c.stream.lower()}.*", 1)  # a counter is one subject
    with pytest.raises(nats.BadSubjectError):
        c.load("")
    with pytest.raises(nats.InvalidArgumentError):
        c.load_many("not.a.list")
    with pytest.raises(nats.InvalidArgumentError):
        js.counter("bad.name")
    js._levels._known = (js.nc.server_info.get("server_id"), 1)  # as a 2.11 server says
    with pytest.raises(
        nats.ApiLevelError, match=r"counters \(ADR-49\) needs JetStream API level 2"
    ):
        js.counter(c.stream)


def test_an_add_with_a_msg_id_is_counted_once(js: JetStream, streams: Callable[..., str]) -> None:
    # A retry of an add whose outcome was unknown: the same msg_id again must not count twice.
    c = js.counter(counter_stream(streams))
    hits = f"{c.stream.lower()}.hits"
    first = c.add(hits, 5, msg_id="add-1")
    assert (first, first.duplicate) == (5, False)
    assert c.add(hits, 2) == 7
    again = c.add(hits, 5, msg_id="add-1")
    assert (again, again.duplicate) == (5, True)  # the value the first add made
    assert c.load(hits) == 7
    assert c.add(hits, 1, msg_id="add-2") == 8


def test_a_duplicate_add_whose_message_is_gone_says_the_current_value(
    js: JetStream, streams: Callable[..., str]
) -> None:
    c = js.counter(counter_stream(streams, max_msgs_per_subject=1))
    hits = f"{c.stream.lower()}.hits"
    c.add(hits, 5, msg_id="add-1")
    c.add(hits, 2)  # replaces the first add's message
    again = c.add(hits, 5, msg_id="add-1")
    assert (again, again.duplicate) == (7, True)
    assert c.load(hits) == 7


def test_a_msg_id_reused_for_another_subject_is_an_error(
    js: JetStream, streams: Callable[..., str]
) -> None:
    c = js.counter(counter_stream(streams))
    p = c.stream.lower()
    c.add(f"{p}.a", 1, msg_id="same")
    with pytest.raises(nats.CounterError, match=r"msg_id 'same' was already used by an add to"):
        c.add(f"{p}.b", 1, msg_id="same")
    with pytest.raises(nats.CounterNotFoundError):
        c.load(f"{p}.b")


@pytest.mark.parametrize("msg_id", ["", "a b", "tab\there", 7, b"id"], ids=repr)
def test_a_msg_id_must_be_a_word(js: JetStream, streams: Callable[..., str], msg_id: Any) -> None:
    c = js.counter(counter_stream(streams))
    with pytest.raises(nats.InvalidArgumentError, match="msg_id must be a non-empty str"):
        c.add(f"{c.stream.lower()}.x", 1, msg_id=msg_id)
