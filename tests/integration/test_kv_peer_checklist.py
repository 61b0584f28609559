"""Key-Value behaviours nats-py's KV tests check that tests/integration/test_kv.py did not:
one test each, against a real server (docs/nats-py-kv-os-tests.md maps them all)."""

from __future__ import annotations

import inspect
import warnings

import pytest
from support import drain

import jetstream_sync as nats
from jetstream_sync.jetstream.api import RePublish
from jetstream_sync.jetstream.context import JetStream
from jetstream_sync.jetstream.kv import KeyValue, KeyValueConfig
from jetstream_sync.testing import stream_name

# --- test_kv_basic / test_kv_direct -------------------------------------------------------------


def test_bucket_stream_has_no_mirror_sources_placement_or_seal(js: JetStream, bucket: str) -> None:
    """The fields of the bucket's stream test_kv.py's layout test leaves out."""
    js.create_key_value(bucket=bucket, history=5, ttl=3600)
    cfg = js.stream_info(f"KV_{bucket}").config
    assert cfg.mirror is None and cfg.sources is None and cfg.placement is None
    assert not cfg.no_ack and cfg.sealed is False and cfg.mirror_direct is False
    assert cfg.template_owner is None


def test_wrong_revision_errors_say_the_servers_last_sequence(kv: KeyValue) -> None:
    """nats-py matches "wrong last sequence: N" in the message, and its tests expect the
    refusal as a 400 (BadRequestError there): both hold for ours."""
    kv.put("name", b"alice")  # 1
    kv.delete("name")  # 2
    assert kv.create("name", b"bob") == 3
    with pytest.raises(nats.KeyWrongLastSequenceError, match="wrong last sequence: 3") as bad:
        kv.delete("name", last=4)
    assert (bad.value.code, bad.value.err_code) == (400, 10071)
    assert kv.create("age", b"2038") == 4
    assert kv.update("age", b"2039", last=4) == 5
    with pytest.raises(nats.KeyWrongLastSequenceError, match="wrong last sequence: 5") as taken:
        kv.create("age", b"1")
    assert taken.value.code == 400
    kv.delete("age", last=5)  # 6
    assert kv.create("age", b"final") == 7
    with pytest.raises(nats.KeyWrongLastSequenceError, match="wrong last sequence: 7"):
        kv.create("age", b"1")


def test_mirror_direct_without_a_mirror_is_refused(js: JetStream) -> None:
    name = stream_name("NOMIRROR")
    with pytest.raises(nats.APIError) as refused:
        js.add_stream(name=name, mirror_direct=True)
    assert refused.value.err_code == 10052
    assert refused.value.description == "stream has no mirror but does have mirror direct"


# --- test_kv_direct_get_msg ----------------------------------------------------------------------


def test_direct_gets_on_a_buckets_stream(js: JetStream, bucket: str) -> None:
    kv = js.create_key_value(bucket=bucket, history=5, direct=True)
    for key, value in zip("ABCDEF", (b"1", b"2", b"3", b"4", b"5", b"6")):
        kv.create(key, value)
    kv.put("C", b"33")
    kv.put("D", b"44")
    kv.put("C", b"333")
    stream, pre = f"KV_{bucket}", f"$KV.{bucket}."
    first = js.get_msg(stream, seq=1, direct=True)
    assert first.data == b"1" and first.time is not None and first.time.tzinfo is not None
    assert js.get_msg(stream, last_by_subject=pre + "C", direct=True).data == b"333"
    # The next message on C from sequence 4 on: revision 7 (b"33"), not 3 or 9.
    nxt = js.get_msg(stream, seq=4, next_by_subject=pre + "C", direct=True)
    assert (nxt.seq, nxt.data) == (7, b"33")


# --- test_key_validation_bypass ------------------------------------------------------------------


def test_validate_keys_false_still_refuses_wildcards(kv: KeyValue) -> None:
    """nats-py with validate_keys=False publishes "x.*" and "x.>" as they are; a wildcard
    is no subject to publish to, and ours refuses it before anything is sent."""
    for key in ("x.*", "x.>"):
        with pytest.raises(nats.BadSubjectError):
            kv.put(key, b"v", validate_keys=False)
        with pytest.raises(nats.BadSubjectError):
            kv.delete(key, validate_keys=False)
    assert kv.status().values == 0


# --- test_kv_watch: inactive_threshold -----------------------------------------------------------


def test_watch_consumer_inactive_threshold(js: JetStream, kv: KeyValue) -> None:
    stream = f"KV_{kv.bucket}"
    with kv.watchall() as w:
        assert js.consumer_info(stream, w._oc.name).config.inactive_threshold == 300.0
    with kv.watchall(inactive_threshold=10.0) as w:
        assert js.consumer_info(stream, w._oc.name).config.inactive_threshold == 10.0
        kv.put("k", b"v")
        assert [e.key if e else None for e in drain(w, 2)] == [None, "k"]
    # nats-py's positional order: keys, headers_only, include_history, ignore_deletes,
    # meta_only, inactive_threshold.
    with kv.watch(">", False, False, False, False, 12.5) as w:
        assert js.consumer_info(stream, w._oc.name).config.inactive_threshold == 12.5
    for bad in (-1, "10", float("nan")):
        with pytest.raises(nats.InvalidArgumentError, match="inactive_threshold"):
            kv.watchall(inactive_threshold=bad)


def test_watch_headers_only_leaves_the_values_out(js: JetStream, kv: KeyValue) -> None:
    kv.put("big", b"x" * 1000)
    with kv.watch("big", headers_only=True) as w:
        assert js.consumer_info(f"KV_{kv.bucket}", w._oc.name).config.headers_only is True
        e = w.updates()
        assert e is not None and (e.key, e.revision, e.value) == ("big", 1, b"")
    with pytest.raises(nats.InvalidArgumentError, match="headers_only"):
        kv.watch("big", headers_only="yes")  # type: ignore[arg-type]


# --- test_kv_republish ---------------------------------------------------------------------------


def test_republish_headers_only(js: JetStream, nc: nats.Client, bucket: str) -> None:
    full = js.create_key_value(bucket=bucket, republish=RePublish(src=">", dest=f"rf.{bucket}.>"))
    sub = nc.subscribe(f"rf.{bucket}.>")
    nc.flush()
    full.put("hello.world", b"Hello World!")
    msg = sub.next_msg(timeout=5)
    assert msg.data == b"Hello World!" and "Nats-Msg-Size" not in (msg.headers or {})
    sub.unsubscribe()
    other = stream_name("KVP")
    try:
        slim = js.create_key_value(
            bucket=other, republish=RePublish(src=">", dest=f"rh.{other}.>", headers_only=True)
        )
        sub = nc.subscribe(f"rh.{other}.>")
        nc.flush()
        slim.put("hello.world", b"Hello World!")
        msg = sub.next_msg(timeout=5)
        assert msg.data == b""
        assert msg.headers is not None
        assert msg.headers["Nats-Sequence"] == "1" and msg.headers["Nats-Msg-Size"] == "12"
        assert msg.headers["Nats-Stream"] == f"KV_{other}"
    finally:
        js.delete_key_value(other)


# --- test_keys_with_filters ----------------------------------------------------------------------


def test_keys_filters_are_substrings_as_in_natspy(kv: KeyValue) -> None:
    """nats-py 2.16 keeps a key if any filter is a substring of it ("greet" lists
    "greeting"); so do we since issue 37 (ported code must not get fewer keys silently). A
    filter with a wildcard is a key pattern, as in nats.go, and a malformed one is refused."""
    kv.put("hello", b"world")
    kv.put("greeting", b"hi")
    kv.put("other", b"x")
    assert sorted(kv.keys(filters=["hello", "greeting"])) == ["greeting", "hello"]
    assert sorted(kv.keys(filters=["hello", "greet"])) == ["greeting", "hello"]
    assert sorted(kv.keys(filters=[">"])) == ["greeting", "hello", "other"]
    with pytest.raises(nats.InvalidKeyError):
        kv.keys(filters=["greet*"])


# --- test_kv_put_no_ttl / test_kv_update_no_direct_ttl / test_kv_delete_msg_ttl_deprecation ------


def test_put_and_update_take_no_msg_ttl(kv: KeyValue) -> None:
    """ADR-8: a TTL on put (or update) could surface older history once it expired."""
    assert "msg_ttl" not in inspect.signature(kv.put).parameters
    assert "msg_ttl" not in inspect.signature(kv.update).parameters
    assert kv.put("counter", b"1") == 1
    assert kv.update("counter", b"2", last=1) == 2
    assert kv.get("counter").value == b"2"


def test_delete_msg_ttl_is_deprecated_and_ignored(js: JetStream, kv: KeyValue) -> None:
    kv.put("k", b"v")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert kv.delete("k", msg_ttl=60.0) is True
    (warning,) = [w for w in caught if issubclass(w.category, DeprecationWarning)]
    assert "msg_ttl on delete()" in str(warning.message)
    assert warning.filename == __file__  # it points at the caller
    # The marker is written, without a TTL of its own.
    marker = js.get_msg(f"KV_{kv.bucket}", seq=2)
    assert marker.headers is not None and marker.headers["KV-Operation"] == "DEL"
    assert "Nats-TTL" not in marker.headers
    with pytest.raises(nats.KeyDeletedError):
        kv.get("k")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kv.delete("k")  # without msg_ttl: no warning


# --- KVLimitMarkerTTLTest / APIDataClassTest -----------------------------------------------------


def test_limit_marker_ttl_from_a_config_object(js: JetStream, bucket: str) -> None:
    cfg = KeyValueConfig(bucket=bucket, limit_marker_ttl=60.0)
    assert cfg.limit_marker_ttl == 60.0
    kv = js.create_key_value(cfg)
    stream_cfg = js.stream_info(f"KV_{bucket}").config
    assert stream_cfg.subject_delete_marker_ttl == 60.0 and stream_cfg.allow_msg_ttl is True
    assert kv.status().marker_ttl == 60.0


# --- test_purge_stream ---------------------------------------------------------------------------


def test_purge_up_to_a_sequence_keeps_the_subject_sequences(js: JetStream) -> None:
    name = stream_name("PURGESEQ")
    js.add_stream(name=name, subjects=[f"{name}.A", f"{name}.B", f"{name}.C"])
    try:
        for subject, data in (("A", b"1"), ("C", b"1"), ("B", b"1"), ("C", b"2")):
            js.publish(f"{name}.{subject}", data)
        js.purge_stream(name, seq=3)  # everything below sequence 3
        assert js.stream_info(name).state.messages == 2
        oc = js.ordered_consumer(name)
        got = oc.fetch(2, max_wait=10)
        assert [m.subject for m in got] == [f"{name}.B", f"{name}.C"]
        # C's last sequence is still 4: a conditional publish on it goes through.
        ack = js.publish(f"{name}.C", b"3", expected_last_subject_seq=4)
        assert ack.seq == 5
        with pytest.raises(nats.StreamWrongLastSequenceError):
            js.publish(f"{name}.C", b"4", expected_last_subject_seq=4)
    finally:
        js.delete_stream(name)
