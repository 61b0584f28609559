"""The publish helpers: PubAck parsing (fast path and generic path agree) and headers."""

from __future__ import annotations

import json
from typing import Any, Dict, Optional

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jetstream_sync import errors
from jetstream_sync.jetstream.api import PubAck
from jetstream_sync.jetstream.publish import pub_ack, publish_headers

names = st.text(st.characters(min_codepoint=33, max_codepoint=0x2FF), min_size=1, max_size=20)


@settings(max_examples=300, deadline=None)
@given(
    stream=names,
    seq=st.integers(min_value=0, max_value=2**63),
    domain=st.none() | names,
    duplicate=st.none() | st.booleans(),
    extra=st.none() | st.sampled_from([{"val": "3"}, {"batch": "b", "count": 2}]),
    compact=st.booleans(),
)
def test_fast_and_generic_ack_parsing_agree(
    stream: str,
    seq: int,
    domain: Optional[str],
    duplicate: Optional[bool],
    extra: Optional[Dict[str, Any]],
    compact: bool,
) -> None:
    obj: Dict[str, Any] = {"stream": stream}
    if domain is not None:
        obj["domain"] = domain
    obj["seq"] = seq
    if duplicate is not None:
        obj["duplicate"] = duplicate
    obj.update(extra or {})
    data = json.dumps(obj, separators=(",", ":") if compact else None).encode()
    assert pub_ack(data, "s") == PubAck.from_dict(obj)


def test_acks_of_a_known_stream_take_the_cached_path_and_agree() -> None:
    for domain in (None, "hub"):
        obj: Dict[str, Any] = {"stream": "CACHED", "seq": 1}
        if domain:
            obj = {"stream": "CACHED", "domain": domain, "seq": 1}
        for seq in (1, 2, 10**15):
            obj["seq"] = seq
            data = json.dumps(obj, separators=(",", ":")).encode()
            got = pub_ack(data, "s")
            assert got == PubAck.from_dict(obj) and got.to_dict() == obj
    # A known head with a tail that is not a plain number goes the long way.
    assert pub_ack(b'{"stream":"CACHED","seq":3,"duplicate":true}', "s").duplicate is True
    with pytest.raises(errors.JetStreamError):
        pub_ack(b'{"stream":"CACHED","seq":x}', "s")


def test_ack_errors() -> None:
    with pytest.raises(errors.StreamWrongLastSequenceError):
        pub_ack(
            b'{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 1"}}', "s"
        )
    with pytest.raises(errors.JetStreamError, match="not a PubAck"):
        pub_ack(b'{"seq":1}', "s")
    with pytest.raises(errors.JetStreamError, match="malformed JSON"):
        pub_ack(b"{nope", "s")


def test_publish_headers() -> None:
    assert publish_headers(None) is None
    plain = {"a": "b"}
    assert publish_headers(plain) is plain
    merged = publish_headers(plain, msg_id="m", expected_last_seq=0)
    assert merged is not None and dict(merged) == {
        "a": "b",
        "Nats-Msg-Id": "m",
        "Nats-Expected-Last-Sequence": "0",
    }
    with pytest.raises(errors.InvalidArgumentError, match="Nats-Msg-Id"):
        publish_headers(None, msg_id="")
    with pytest.raises(errors.InvalidArgumentError, match="Nats-Expected-Last-Sequence"):
        publish_headers(None, expected_last_seq=-1)
