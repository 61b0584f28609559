"""Reading direct-get answers and counter values, from bytes alone: the stored message apart
from the coordinates a direct get adds, the end of a batch, and what a counter stores."""

from __future__ import annotations

from typing import Optional

import pytest

import jetstream_sync as nats
from jetstream_sync.jetstream import api
from jetstream_sync.jetstream.counter import CounterEntry, _entry
from jetstream_sync.jetstream.direct import _EndOfBatch, _stored_size, raw_from_direct
from jetstream_sync.msg import Headers, Msg


def _msg(hdr: bytes, data: bytes = b"") -> Msg:
    return Msg("_INBOX.x", "", data, 1, hdr)


def test_a_batch_message_keeps_only_its_stored_headers() -> None:
    hdr = (
        b"NATS/1.0\r\nOwn: 1\r\nOwn: 2\r\nNats-Stream: S\r\nNats-Subject: a.b\r\n"
        b"Nats-Sequence: 7\r\nNats-Time-Stamp: 2025-01-02T03:04:05.123456789Z\r\n"
        b"Nats-Num-Pending: 3\r\nNats-Last-Sequence: 6\r\n\r\n"
    )
    raw = raw_from_direct(_msg(hdr, b"payload"), "fallback")
    assert (raw.subject, raw.seq, raw.data, raw.stream) == ("a.b", 7, b"payload", "S")
    assert raw.headers is not None and raw.headers.get_all("Own") == ["1", "2"]
    assert list(raw.headers.keys()) == ["Own"]
    assert raw.time is not None and raw.time.nanosecond == 789  # type: ignore[attr-defined]
    assert _stored_size(raw) == len("a.b") + len("payload") + 12 + 2 * len("Own: 1\r\n")


def test_an_answer_without_a_sequence_is_an_error() -> None:
    with pytest.raises(nats.JetStreamError, match="Nats-Sequence"):
        raw_from_direct(_msg(b"NATS/1.0\r\nNats-Subject: a\r\n\r\n"), "S")
    with pytest.raises(nats.NoMessageFoundError):
        raw_from_direct(_msg(b"NATS/1.0 404 Message Not Found\r\n\r\n"), "S")


def test_the_end_of_a_batch() -> None:
    eob = _EndOfBatch(
        _msg(
            b"NATS/1.0 204 EOB\r\nNats-Num-Pending: 4\r\nNats-Last-Sequence: 9\r\n"
            b"Nats-UpTo-Sequence: 12\r\n\r\n"
        ),
        "get",
    )
    assert (eob.pending, eob.last, eob.up_to) == (4, 9, 12)
    plain = _EndOfBatch(_msg(b"NATS/1.0 204 EOB\r\nNats-Num-Pending: 0\r\n\r\n"), "get")
    assert (plain.pending, plain.last, plain.up_to) == (0, 0, 0)
    with pytest.raises(nats.JetStreamError, match="malformed end of batch"):
        _EndOfBatch(_msg(b"NATS/1.0 204 EOB\r\nNats-Num-Pending: many\r\n\r\n"), "get")


def _stored(data: bytes, incr: Optional[str] = "+1", sources: Optional[str] = None) -> CounterEntry:
    headers = Headers()
    if incr is not None:
        headers.add("Nats-Incr", incr)
    if sources is not None:
        headers.add("Nats-Counter-Sources", sources)
    return _entry(api.RawStreamMsg(subject="c.x", seq=1, data=data, headers=headers))


def test_counter_values_of_any_size() -> None:
    big = 2**200
    assert _stored(b'{"val":"%d"}' % big, incr="-3") == CounterEntry("c.x", big, {}, -3)
    assert _stored(b'{"val":"-12"}', incr=None).value == -12
    assert _stored(b'{"val":"0"}', incr="+0").incr == 0
    entry = _stored(b'{"val":"15"}', sources='{"EU":{"eu.x":"5"},"US":{"us.x":"10","us.y":"0"}}')
    assert entry.sources == {"EU": {"eu.x": 5}, "US": {"us.x": 10, "us.y": 0}}


@pytest.mark.parametrize(
    "data",
    [b"", b"12", b"{}", b'{"val":12}', b'{"val":"1.5"}', b'{"val":" 5"}', b'{"val":"1_000"}'],
)
def test_a_stored_value_that_is_not_a_counter(data: bytes) -> None:
    with pytest.raises(nats.CounterBrokenError):
        _stored(data)


@pytest.mark.parametrize("sources", ["[]", "{", '{"EU":{"eu.x":5}}', '{"EU":"5"}'])
def test_a_sources_header_that_is_not_a_breakdown(sources: str) -> None:
    with pytest.raises(nats.CounterBrokenError, match=r"Nats-Counter-Sources|not an integer"):
        _stored(b'{"val":"1"}', sources=sources)


def test_an_increment_that_is_not_an_integer() -> None:
    with pytest.raises(nats.CounterBrokenError, match="increment"):
        _stored(b'{"val":"1"}', incr="one")


def test_counter_value_prints_as_its_number() -> None:
    """add() returned a plain int before msg_id came: printing it must not change."""
    from jetstream_sync.jetstream.counter import CounterValue

    v = CounterValue(3, duplicate=True)
    assert (str(v), f"{v}", f"{v:>3}", v + 1) == ("3", "3", "  3", 4)
    assert repr(v) == "CounterValue(3, duplicate=True)"
