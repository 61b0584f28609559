"""Object Store pieces that need no server."""

from __future__ import annotations

from concurrent.futures import Future

import pytest

from jetstream_sync import errors
from jetstream_sync.jetstream import api
from jetstream_sync.jetstream.object_store import _wait_ack


def test_wait_ack_keeps_the_words_of_a_timeout_the_future_failed_with() -> None:
    # The package's TimeoutError is a builtin TimeoutError, as concurrent.futures'
    # is: a chunk's ack that failed early with a timeout of its own must not be
    # reported as the wait running out ("no ack within 6.0 s" after 3 s).
    fut: Future[api.PubAck] = Future()
    inner = errors.TimeoutError("the publisher expired the ack after 3.0 s")
    fut.set_exception(inner)
    with pytest.raises(errors.TimeoutError) as caught:
        _wait_ack(fut, 6.0, "put of object 'x'")
    assert caught.value is inner
    assert "no ack within" not in str(caught.value)


def test_wait_ack_says_no_ack_when_its_own_wait_runs_out() -> None:
    fut: Future[api.PubAck] = Future()
    with pytest.raises(errors.TimeoutError, match=r"put of object 'x': no ack within 0.05 s"):
        _wait_ack(fut, 0.05, "put of object 'x'")


def test_wait_ack_returns_once_the_ack_is_there() -> None:
    fut: Future[api.PubAck] = Future()
    fut.set_result(api.PubAck(stream="S", seq=1))
    _wait_ack(fut, 1.0, "put of object 'x'")


def test_object_headers_read_as_nats_py_and_keep_every_value() -> None:
    """Issue 37: info.headers is a dict of one str per name (nats-py's form); every value
    stays reachable (get_all, all_headers) and is what the info's JSON stores (ADR-20)."""
    import copy
    import json
    import pickle

    from jetstream_sync.jetstream.object_store import ObjectHeaders, ObjectInfo, ObjectMeta

    h = ObjectHeaders({"Content-Type": ["x-tar"], "X-Many": ["a", "b"]})
    assert h == {"Content-Type": "x-tar", "X-Many": "a"} and h["Content-Type"] == "x-tar"
    assert isinstance(h, dict) and json.loads(json.dumps(h)) == h
    assert h.get_all("X-Many") == ["a", "b"] and h.get_all("nope") == []
    for same in (copy.deepcopy(h), pickle.loads(pickle.dumps(h))):
        assert same.lists() == {"Content-Type": ["x-tar"], "X-Many": ["a", "b"]}
    info = ObjectInfo(name="o", headers=h)
    assert info.to_dict()["headers"] == {"Content-Type": ["x-tar"], "X-Many": ["a", "b"]}
    assert "headers={'Content-Type': 'x-tar', 'X-Many': 'a'}" in repr(info)
    meta = info.meta
    assert meta.all_headers == info.all_headers
    meta.headers["X-Many"] = "c"  # a new value: the name's other values go
    del meta.headers["Content-Type"]
    meta.headers["New"] = "n"
    assert meta.all_headers == {"X-Many": ["c"], "New": ["n"]}
    assert info.all_headers == {"Content-Type": ["x-tar"], "X-Many": ["a", "b"]}  # a copy
    # ObjectMeta given by hand: a str per name as nats-py, or a list for several values
    mixed = ObjectMeta(headers={"A": "1", "B": ["2", "3"]})
    assert mixed.all_headers == {"A": ["1"], "B": ["2", "3"]}
    assert mixed.to_dict()["headers"] == {"A": ["1"], "B": ["2", "3"]}
