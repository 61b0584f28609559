"""The Key-Value store against a real server: for each behaviour nats-py's KV tests check, a
test of ours, plus watchers, input checks, several threads and two racing writers."""

from __future__ import annotations

import datetime as dt
import threading
from typing import Any, Callable, Dict, List, Optional

import pytest
from support import Errors, drain

import jetstream_sync as nats
from jetstream_sync.jetstream.api import (
    DiscardPolicy,
    RePublish,
    RetentionPolicy,
    StorageType,
    StoreCompression,
)
from jetstream_sync.jetstream.context import JetStream
from jetstream_sync.jetstream.kv import Entry, KeyValue, KeyValueConfig, KeyWatcher
from jetstream_sync.jetstream.ordered import OrderedConsumer
from jetstream_sync.server import NATSServer
from jetstream_sync.testing import wait_until

BAD_NAMES = [" x y", "x ", "x!", "xx$", "*", ">", "x.>", "x.*", ".", ".x", ".x.", "x.", ""]
BAD_KEYS = [" x y", "x ", "x!", "xx$", "*", ">", "x.>", "x.*", ".", ".x", ".x.", "x.", "a..b", ""]


# --- buckets --------------------------------------------------------------------------------


@pytest.mark.parametrize("direct", [True, False])
def test_bucket_is_the_stream_adr8_describes(js: JetStream, bucket: str, direct: bool) -> None:
    js.create_key_value(bucket=bucket, history=5, ttl=3600, description="basic", direct=direct)
    cfg = js.stream_info(f"KV_{bucket}").config
    assert cfg.subjects == [f"$KV.{bucket}.>"] and cfg.description == "basic"
    assert (cfg.max_msgs_per_subject, cfg.max_age, cfg.duplicate_window) == (5, 3600.0, 120.0)
    assert cfg.allow_rollup_hdrs is True and cfg.deny_delete is True and cfg.deny_purge is False
    assert cfg.discard == DiscardPolicy.NEW and cfg.retention == RetentionPolicy.LIMITS
    assert (cfg.max_bytes, cfg.max_msgs, cfg.max_msg_size, cfg.max_consumers) == (-1, -1, -1, -1)
    assert cfg.storage == StorageType.FILE and cfg.num_replicas == 1
    assert cfg.allow_direct is direct
    assert not cfg.allow_msg_ttl  # only with limit_marker_ttl


def test_short_ttl_shortens_the_duplicate_window(js: JetStream, bucket: str) -> None:
    js.create_key_value(KeyValueConfig(bucket=bucket, ttl=30.0), storage=StorageType.MEMORY)
    cfg = js.stream_info(f"KV_{bucket}").config
    assert (cfg.max_age, cfg.duplicate_window, cfg.storage) == (30.0, 30.0, StorageType.MEMORY)
    assert cfg.max_msgs_per_subject == 1  # the default history


def test_create_again_is_fine_a_different_config_is_not(js: JetStream, bucket: str) -> None:
    first = js.create_key_value(bucket=bucket, history=3)
    first.put("k", b"v")
    again = js.create_key_value(KeyValueConfig(bucket=bucket, history=3))
    assert again.get("k").value == b"v"
    with pytest.raises(nats.StreamNameAlreadyInUseError):
        js.create_key_value(bucket=bucket, history=4)


def test_bind_missing_and_not_a_bucket(js: JetStream, bucket: str) -> None:
    with pytest.raises(nats.BucketNotFoundError) as missing:
        js.key_value(bucket)
    assert isinstance(missing.value, nats.StreamNotFoundError) and bucket in str(missing.value)
    js.add_stream(name=f"KV_{bucket}", subjects=[f"notkv.{bucket}"])
    with pytest.raises(nats.BadBucketError, match=f"KV_{bucket}"):
        js.key_value(bucket)


def test_bind_sees_what_create_wrote(js: JetStream, kv: KeyValue, bucket: str) -> None:
    kv.put("hello", b"world")
    other = js.key_value(bucket)
    assert other.bucket == bucket and other.get("hello").value == b"world"


def test_delete_bucket(js: JetStream, kv: KeyValue, bucket: str) -> None:
    kv.put("k", b"v")
    assert js.delete_key_value(bucket) is True
    with pytest.raises(nats.BucketNotFoundError):
        js.key_value(bucket)
    with pytest.raises(nats.BucketNotFoundError):
        js.delete_key_value(bucket)
    with pytest.raises(nats.BucketNotFoundError):
        kv.status()


@pytest.mark.parametrize("name", BAD_NAMES)
def test_bad_bucket_names(js: JetStream, name: str) -> None:
    for call in (
        lambda: js.create_key_value(bucket=name),
        lambda: js.key_value(name),
        lambda: js.delete_key_value(name),
    ):
        with pytest.raises(nats.InvalidBucketNameError):
            call()
    with pytest.raises(nats.InvalidArgumentError):  # the same error, as bad input
        js.key_value(name)


def test_bad_bucket_configs(js: JetStream, bucket: str) -> None:
    with pytest.raises(nats.KeyHistoryTooLargeError, match="64"):
        js.create_key_value(bucket=bucket, history=65)
    js.create_key_value(bucket=bucket, history=64).put("k", b"v")  # the limit itself is fine
    js.delete_key_value(bucket)
    bad: List[Dict[str, object]] = [
        {"history": 0},
        {"history": "5"},
        {"ttl": -1},
        {"replicas": 0},
        {"max_bytes": 0},
        {"max_value_size": "big"},
        {"storage": "disk"},
        {"direct": "yes"},
        {"placement": {"cluster": "x"}},
        {"limit_marker_ttl": 0.5},
        {"nonsense": 1},
    ]
    for fields in bad:
        with pytest.raises(nats.InvalidArgumentError):
            js.create_key_value(bucket=bucket, **fields)
    with pytest.raises(nats.InvalidArgumentError, match="bucket"):
        js.create_key_value()  # no bucket at all
    with pytest.raises(nats.InvalidArgumentError, match="KeyValueConfig"):
        js.create_key_value({"bucket": bucket})  # type: ignore[arg-type]
    with pytest.raises(nats.BucketNotFoundError):
        js.key_value(bucket)  # nothing was made


def test_status(js: JetStream, bucket: str) -> None:
    kv = js.create_key_value(bucket=bucket, history=5, ttl=3600, compression=True)
    status = kv.status()
    assert (status.bucket, status.values, status.history, status.ttl) == (bucket, 0, 5, 3600.0)
    assert status.is_compressed and status.marker_ttl is None
    assert status.backing_store == "JetStream"
    assert status.stream_info.config.compression == StoreCompression.S2
    kv.put("a", b"1")
    kv.put("a", b"22")
    kv.delete("a")
    after = kv.status()
    assert after.values == 3 and after.bytes > 0


# --- get, put, revisions ----------------------------------------------------------------------


def test_put_get_revisions_delete_and_purge(js: JetStream, bucket: str) -> None:
    kv = js.create_key_value(bucket=bucket, history=5, ttl=3600)
    with pytest.raises(nats.KeyNotFoundError) as nothing:
        kv.get("hello")
    assert not isinstance(nothing.value, nats.KeyDeletedError)
    assert kv.put("hello", b"world") == 1
    e = kv.get("hello")
    assert (e.bucket, e.key, e.value, e.revision, e.delta, e.operation) == (
        bucket, "hello", b"world", 1, 0, None,
    )  # fmt: skip
    assert isinstance(e.created, dt.datetime) and e.created.tzinfo is not None
    for i in range(100):
        kv.put(f"hello.{i}", b"Hello JS KV!")
    assert kv.status().values == 101
    kv.delete("hello.1")
    assert kv.status().values == 102  # the marker is a message
    with pytest.raises(nats.KeyDeletedError) as deleted:
        kv.get("hello.1")
    assert deleted.value.op == "DEL" and deleted.value.entry.revision == 102
    assert deleted.value.entry.key == "hello.1" and deleted.value.entry.value is None  # nats-py's
    kv.put("hello.5", b"second")
    assert kv.status().values == 103
    assert kv.purge("hello.5") is True  # two values become one marker
    assert kv.status().values == 102
    with pytest.raises(nats.KeyDeletedError) as purged:
        kv.get("hello.5")
    assert purged.value.op == "PURGE" and purged.value.entry.revision == 104
    assert kv.get("hello").revision == 1  # untouched
    assert kv.put("hello.102", b"x") == 105


def test_get_by_revision(kv: KeyValue) -> None:
    assert kv.put("name", b"alice") == 1
    assert kv.put("age", b"20") == 2
    assert kv.put("name", b"bob") == 3
    kv.delete("name")
    assert kv.get("name", revision=1).value == b"alice"
    assert kv.get("name", revision=3).value == b"bob"
    assert kv.get("name", revision=1).delta is None  # not known for an older revision
    with pytest.raises(nats.KeyNotFoundError, match="it is key 'age'"):
        kv.get("name", revision=2)
    with pytest.raises(nats.KeyDeletedError):
        kv.get("name", revision=4)
    with pytest.raises(nats.KeyNotFoundError, match="revision 99"):
        kv.get("name", revision=99)
    for bad in (0, -1, "1", True):
        with pytest.raises(nats.InvalidArgumentError, match="revision"):
            kv.get("name", revision=bad)  # type: ignore[arg-type]


def test_values_are_bytes_of_any_kind(kv: KeyValue) -> None:
    blob = bytes(range(256)) * 10
    kv.put("blob", blob)
    kv.put("empty", b"")
    kv.put("ba", bytearray(b"from a bytearray"))
    kv.put("mv", memoryview(b"from a memoryview"))
    assert kv.get("blob").value == blob and kv.get("empty").value == b""
    assert kv.get("ba").value == b"from a bytearray" and kv.get("mv").value == b"from a memoryview"
    with pytest.raises(nats.InvalidArgumentError, match="encode it"):
        kv.put("s", "a str")  # type: ignore[arg-type]
    with pytest.raises(nats.InvalidArgumentError, match="bytes"):
        kv.put("n", None)  # type: ignore[arg-type]


def test_max_value_size(js: JetStream, bucket: str) -> None:
    kv = js.create_key_value(bucket=bucket, max_value_size=100)
    kv.put("ok", b"x" * 100)
    with pytest.raises(nats.MessageTooLargeError):
        kv.put("big", b"x" * 101)
    with pytest.raises(nats.KeyNotFoundError):
        kv.get("big")


# --- create, update, delete(last=) -------------------------------------------------------------


@pytest.mark.parametrize("direct", [True, False])
def test_create_update_and_conditional_delete(js: JetStream, bucket: str, direct: bool) -> None:
    kv = js.create_key_value(bucket=bucket, history=5, direct=direct)
    assert kv.put("name", b"alice") == 1
    kv.delete("name")
    assert kv.create("name", b"bob") == 3  # over a deleted key
    with pytest.raises(nats.KeyWrongLastSequenceError):
        kv.delete("name", last=4)
    assert kv.get("name").value == b"bob"  # the refused delete left nothing
    assert kv.delete("name", last=3) is True
    assert kv.update("name", b"hoge", last=4) == 5
    with pytest.raises(nats.KeyWrongLastSequenceError) as stale:
        kv.update("name", b"hoge", last=3)
    assert isinstance(stale.value, nats.StreamWrongLastSequenceError)
    assert stale.value.err_code == 10071 and "revision 3" in str(stale.value)
    assert kv.update("name", b"fuga", last=5) == 6
    assert kv.create("age", b"2038") == 7
    with pytest.raises(nats.KeyWrongLastSequenceError, match="has a value already"):
        kv.create("age", b"1")
    assert kv.update("age", b"2039", last=7) == 8
    kv.purge("age")
    assert kv.create("age", b"again") == 10  # over a purged key
    assert kv.get("age").revision == 10
    assert kv.update("fresh", b"v", last=0) == 11  # last=0: only a key without a value
    with pytest.raises(nats.KeyWrongLastSequenceError):
        kv.update("fresh", b"v")
    for bad in (-1, "3", 1.5):
        with pytest.raises(nats.InvalidArgumentError, match="last"):
            kv.update("fresh", b"v", last=bad)  # type: ignore[arg-type]


def test_racing_creates_one_wins(js: JetStream, kv: KeyValue) -> None:
    start = threading.Barrier(6)
    won: List[int] = []
    lost: List[Exception] = []

    def create(i: int) -> None:
        start.wait(10)
        try:
            kv.create("leader", str(i).encode())
            won.append(i)
        except nats.KeyWrongLastSequenceError as exc:
            lost.append(exc)

    threads = [threading.Thread(target=create, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(won) == 1 and len(lost) == 5
    assert kv.get("leader").value == str(won[0]).encode()


def test_two_clients_race_update_exactly_one_wins_each_round(
    nats_server: NATSServer, kv: KeyValue, bucket: str
) -> None:
    """Hostile: two connections update one key with the same expected revision, in lock
    step; every round exactly one write lands and the other is refused."""
    rounds = 40
    kv.put("counter", b"0")
    with nats.connect(nats_server.url) as nc1, nats.connect(nats_server.url) as nc2:
        sides = [nc1.jetstream().key_value(bucket), nc2.jetstream().key_value(bucket)]
        step = threading.Barrier(2)
        outcome: List[List[str]] = [[], []]
        failures: List[BaseException] = []

        def writer(side: int) -> None:
            mine = sides[side]
            try:
                for r in range(rounds):
                    step.wait(10)  # both read the same revision...
                    seen = mine.get("counter")
                    step.wait(10)  # ...before either writes
                    try:
                        mine.update("counter", f"{r}:{side}".encode(), last=seen.revision)
                        outcome[side].append("won")
                    except nats.KeyWrongLastSequenceError:
                        outcome[side].append("lost")
            except BaseException as exc:  # handed to the test thread
                failures.append(exc)
                step.abort()

        threads = [threading.Thread(target=writer, args=(s,)) for s in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not failures, failures
        assert all(len(o) == rounds for o in outcome)
        for r in range(rounds):
            assert sorted((outcome[0][r], outcome[1][r])) == ["lost", "won"], r
        history = kv.history("counter")
        assert len(history) == 5  # the bucket's history
        last = kv.get("counter")
        assert last.revision == 1 + rounds  # one write per round, no more
        winner = 0 if outcome[0][-1] == "won" else 1
        assert last.value == f"{rounds - 1}:{winner}".encode()


def test_several_threads_share_one_bucket(kv: KeyValue) -> None:
    per_thread, threads_n = 30, 6
    revisions: List[int] = []
    lock = threading.Lock()
    failures: List[BaseException] = []

    def work(t: int) -> None:
        try:
            for i in range(per_thread):
                rev = kv.put(f"t{t}.k{i % 5}", f"{t}-{i}".encode())
                assert kv.get(f"t{t}.k{i % 5}", revision=rev).value == f"{t}-{i}".encode()
                with lock:
                    revisions.append(rev)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(threads_n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    assert not failures, failures
    assert sorted(revisions) == list(range(1, per_thread * threads_n + 1))  # unique, no gaps
    for t in range(threads_n):
        for k in range(5):
            last_i = max(i for i in range(per_thread) if i % 5 == k)
            assert kv.get(f"t{t}.k{k}").value == f"{t}-{last_i}".encode()
    assert len(kv.keys()) == threads_n * 5


# --- keys ------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", BAD_KEYS)
def test_bad_keys(kv: KeyValue, key: str) -> None:
    for call in (
        lambda: kv.put(key, b""),
        lambda: kv.get(key),
        lambda: kv.update(key, b"", last=1),
        lambda: kv.create(key, b""),
        lambda: kv.delete(key),
        lambda: kv.purge(key),
    ):
        with pytest.raises(nats.InvalidKeyError):
            call()
    assert kv.status().values == 0  # nothing reached the bucket


def test_patterns_where_patterns_belong(kv: KeyValue) -> None:
    kv.put("a.b.c", b"1")
    assert kv.keys("a.*.c") == ["a.b.c"] and kv.keys("a.>") == ["a.b.c"]
    assert [e.key for e in kv.history("*.b.*")] == ["a.b.c"]
    for bad in ("a.>.c", "a..b", ".a", "a.b!", "", [], ["a", ""], 7):
        with pytest.raises(nats.InvalidKeyError):
            kv.keys(bad)  # type: ignore[arg-type]
        with pytest.raises(nats.InvalidKeyError):
            kv.watch(bad)  # type: ignore[arg-type]


def test_validate_keys_false_lets_other_characters_through(kv: KeyValue) -> None:
    rev = kv.put("x!", b"bang", validate_keys=False)
    assert kv.get("x!", validate_keys=False).value == b"bang"
    assert kv.update("x!", b"bang2", last=rev, validate_keys=False) == rev + 1
    assert kv.delete("x!", validate_keys=False) is True
    with pytest.raises(nats.InvalidKeyError):
        kv.put("x!", b"no")
    with pytest.raises(nats.BadSubjectError):  # what no subject can be stays refused
        kv.put("x.>", b"no", validate_keys=False)


def test_keys_and_no_keys(kv: KeyValue) -> None:
    with pytest.raises(nats.NoKeysError):
        kv.keys()
    for key, value in (("a", b"1"), ("b", b"2"), ("a", b"11"), ("b", b"22"), ("a", b"111")):
        kv.put(key, value)
    assert sorted(kv.keys()) == ["a", "b"]
    kv.delete("a")
    assert kv.keys() == ["b"]
    kv.purge("b")
    with pytest.raises(nats.NoKeysError):
        kv.keys()
    kv.create("c", b"3")
    assert kv.keys() == ["c"]


def test_keys_with_wildcard_filters(kv: KeyValue) -> None:
    for key in ("hello", "greeting", "greet.en", "greet.fr", "orders.1.state", "orders.2.state"):
        kv.put(key, b"x")
    assert sorted(kv.keys(filters=["hello", "greet.*"])) == ["greet.en", "greet.fr", "hello"]
    assert sorted(kv.keys("orders.*.state")) == ["orders.1.state", "orders.2.state"]
    assert sorted(kv.keys(">")) == sorted(kv.keys())
    with pytest.raises(nats.NoKeysError, match="nothing"):
        kv.keys("nothing.>")


# --- history ---------------------------------------------------------------------------------


def test_history_keeps_the_last_n(js: JetStream, bucket: str) -> None:
    kv = js.create_key_value(bucket=bucket, history=10)
    for i in range(50):
        kv.put("age", str(i).encode())
    entries = kv.history("age")
    assert [e.revision for e in entries] == list(range(41, 51))
    assert [int(e.value) for e in entries] == list(range(40, 50))
    assert [e.delta for e in entries] == list(range(9, -1, -1))
    assert all(e.key == "age" and e.operation is None for e in entries)
    with pytest.raises(nats.NoKeysError):
        kv.history("other")


def test_history_shows_markers(kv: KeyValue) -> None:
    kv.put("k", b"1")
    kv.delete("k")
    kv.put("k", b"2")
    assert [(e.value, e.operation) for e in kv.history("k")] == [
        (b"1", None), (b"", "DEL"), (b"2", None),
    ]  # fmt: skip
    kv.purge("k")
    assert [e.operation for e in kv.history("k")] == ["PURGE"]


# --- purge_deletes ---------------------------------------------------------------------------


def test_purge_deletes_removes_every_marker(js: JetStream, bucket: str) -> None:
    kv = js.create_key_value(bucket=bucket, history=10)
    for i in range(10):
        kv.put(f"key-{i}", str(i).encode())
    for i in range(10):
        kv.delete(f"key-{i}")
    kv.put("key-last", b"101")
    assert kv.purge_deletes(olderthan=-1) is True
    assert js.stream_info(f"KV_{bucket}").state.messages == 1
    assert kv.keys() == ["key-last"]


def test_purge_deletes_keeps_young_markers(js: JetStream, bucket: str) -> None:
    kv = js.create_key_value(bucket=bucket, history=10)
    for key, value in (("foo", b"a"), ("bar", b"a"), ("bar", b"b"), ("foo", b"b")):
        kv.put(key, value)
    kv.delete("foo")
    foo_marker = kv.history("foo")[-1]
    assert foo_marker.created is not None
    wait_until(
        lambda: dt.datetime.now(dt.timezone.utc) - foo_marker.created > dt.timedelta(seconds=3),
        what="the foo marker to be three seconds old",
    )
    kv.delete("bar")  # young: it must stay under 3 s old until the purge (a loaded machine)
    assert js.stream_info(f"KV_{bucket}").state.messages == 6
    kv.purge_deletes(olderthan=3.0)
    # foo (old marker) is gone entirely; bar keeps its young marker, but not its values.
    assert js.stream_info(f"KV_{bucket}").state.messages == 1
    with pytest.raises(nats.NoKeysError):
        kv.history("foo")
    (bar,) = kv.history("bar")
    assert (bar.key, bar.revision, bar.operation) == ("bar", 6, "DEL")
    with pytest.raises(nats.InvalidArgumentError):
        kv.purge_deletes(olderthan="1")  # type: ignore[arg-type]


def test_purge_deletes_leaves_values_alone(kv: KeyValue) -> None:
    kv.put("kept", b"1")
    kv.put("gone", b"1")
    kv.delete("gone")
    kv.put("back", b"1")
    kv.delete("back")
    kv.put("back", b"2")  # a value after a marker: the key is alive
    kv.purge_deletes(olderthan=0)
    assert sorted(kv.keys()) == ["back", "kept"]
    assert [e.value for e in kv.history("back")] == [b"1", b"", b"2"]
    assert kv.status().values == 4


def test_purge_deletes_spares_a_value_written_meanwhile(
    js: JetStream, kv: KeyValue, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key is written again between the listing of the markers and their purge: the new
    value stays (the purge stops at the marker's revision)."""
    kv.put("k", b"old")
    kv.delete("k")
    real = js.purge_stream

    def write_first(name: str, **kw: Any) -> int:
        kv.put("k", b"new")  # after purge_deletes saw the marker, before its purge
        return real(name, **kw)

    monkeypatch.setattr(js, "purge_stream", write_first)
    kv.purge_deletes(olderthan=0)
    monkeypatch.undo()
    assert kv.get("k").value == b"new"
    assert [e.value for e in kv.history("k")] == [b"new"]


# --- ttl ---------------------------------------------------------------------------------------


def test_bucket_ttl_expires_values(js: JetStream, bucket: str) -> None:
    # 3 s, not 1: the get right after the put must come before the expiry on a loaded machine
    kv = js.create_key_value(bucket=bucket, ttl=3.0)
    assert js.stream_info(f"KV_{bucket}").config.duplicate_window == 3.0
    kv.put("short", b"lived")
    assert kv.get("short").value == b"lived"

    def expired() -> bool:
        try:
            kv.get("short")
        except nats.KeyNotFoundError:
            return True
        return False

    wait_until(expired, timeout=10, what="the value to expire")
    assert kv.status().values == 0


def test_per_key_ttl_and_the_servers_markers(js: JetStream, bucket: str) -> None:
    # (nats-server raises a message's TTL below limit_marker_ttl to it: 1 s for both here)
    kv = js.create_key_value(bucket=bucket, history=5, limit_marker_ttl=1)
    cfg = js.stream_info(f"KV_{bucket}").config
    assert cfg.allow_msg_ttl is True and cfg.subject_delete_marker_ttl == 1.0
    assert kv.status().marker_ttl == 1.0
    # 3 s: the watch below must see the value before it expires, even on a loaded machine
    assert kv.create("age", b"30", msg_ttl=3) == 1
    with kv.watch("age", include_history=True) as w:
        first = w.updates(5)
        assert first is not None and first.value == b"30"
        assert w.updates(5) is None
        marker = w.updates(10)  # the server's own, when the value expires
        assert marker is not None and (marker.key, marker.operation) == ("age", "PURGE")
        assert marker.revision == 2 and marker.value == b""
    with pytest.raises(nats.KeyNotFoundError):
        kv.get("age")  # the marker (KeyDeletedError), or nothing once it expired too
    wait_until(lambda: kv.status().values == 0, timeout=10, what="the marker to expire")
    assert kv.create("age", b"31") == 3  # free again
    for bad in (0, 0.5, 1.5, "1", True):
        with pytest.raises(nats.InvalidArgumentError, match="msg_ttl"):
            kv.create("other", b"x", msg_ttl=bad)  # type: ignore[arg-type]


def test_purge_marker_with_its_own_ttl(js: JetStream, bucket: str) -> None:
    kv = js.create_key_value(bucket=bucket, limit_marker_ttl=1)
    kv.put("name", b"alice")
    kv.purge("name", msg_ttl=3)  # 3 s: the marker is still there for the count below
    assert kv.status().values == 1
    wait_until(lambda: kv.status().values == 0, timeout=10, what="the marker to expire")
    with pytest.raises(nats.KeyNotFoundError) as nothing:
        kv.get("name")
    assert not isinstance(nothing.value, nats.KeyDeletedError)


def test_msg_ttl_needs_a_bucket_that_allows_it(kv: KeyValue) -> None:
    with pytest.raises(nats.APIError, match="TTL"):
        kv.create("k", b"v", msg_ttl=5)


# --- watch -------------------------------------------------------------------------------------


def test_watch_empty_then_live_updates(kv: KeyValue, bucket: str) -> None:
    with kv.watchall() as w:
        assert w.updates(timeout=1) is None  # nothing there: the marker at once
        kv.create("name", b"alice:1")
        e = w.updates()
        assert e is not None and (e.bucket, e.key, e.value, e.revision, e.delta) == (
            bucket, "name", b"alice:1", 1, 0,
        )  # fmt: skip
        # Each update is read before the next write: the purge is a rollup, which drops the
        # key's earlier messages from the stream, alice:2 with them if the watch's consumer
        # had not delivered it yet (nothing can deliver a message that is gone; nats.go's
        # watchers alike). Written all at once, one full run on the 2-core machine waited 5 s
        # for a fourth update that never came: the delivery of alice:2 had lagged behind three
        # acked publishes and the rollup, the one way an update of this test can go missing.
        got = []
        for write in (
            lambda: kv.put("name", b"alice:2"),
            lambda: kv.put("age", b"22"),
            lambda: kv.delete("age"),
            lambda: kv.purge("name"),
        ):
            write()
            got.append(w.updates())
        assert [(g.key, g.value, g.revision, g.operation) for g in got if g] == [
            ("name", b"alice:2", 2, None),
            ("age", b"22", 3, None),
            ("age", b"", 4, "DEL"),
            ("name", b"", 5, "PURGE"),
        ]
        with pytest.raises(nats.TimeoutError):
            w.updates(timeout=0.3)


def test_watch_starts_with_latest_values_then_one_none(kv: KeyValue) -> None:
    kv.create("new", b"hello world")
    for key, value in (("t.name", b"a"), ("t.name", b"b"), ("t.age", b"c"), ("t.age", b"d")):
        kv.put(key, value)
    kv.put("t.a", b"a")
    kv.put("t.b", b"b")
    with kv.watch("t.*") as w:
        initial = [w.updates() for _ in range(4)]
        assert [(e.key, e.value, e.revision, e.delta) for e in initial if e] == [
            ("t.name", b"b", 3, 3), ("t.age", b"d", 5, 2), ("t.a", b"a", 6, 1), ("t.b", b"b", 7, 0),
        ]  # fmt: skip
        assert w.updates() is None
        kv.put("t.hello", b"hi")
        kv.put("other", b"not watched")
        kv.put("t.name", b"c")
        rest = drain(w, 2)
        assert [(e.key, e.revision) for e in rest if e] == [("t.hello", 8), ("t.name", 10)]
        assert None not in rest  # exactly one None


def test_watch_several_patterns(kv: KeyValue) -> None:
    for key in ("a.1", "b.1", "c.1"):
        kv.put(key, b"v")
    with kv.watch(["a.*", "c.>"]) as w:
        got = drain(w, 3)
    assert [e.key if e else None for e in got] == ["a.1", "c.1", None]


def test_watch_include_history(kv: KeyValue) -> None:
    kv.put("k", b"1")
    kv.put("k", b"2")
    kv.delete("k")
    kv.put("j", b"x")
    with kv.watch("k", include_history=True) as w:
        got = drain(w, 4)
    assert [(e.value, e.operation) if e else None for e in got] == [
        (b"1", None), (b"2", None), (b"", "DEL"), None,
    ]  # fmt: skip
    with kv.watch("k") as w:  # without: only the latest, the marker
        assert [e.operation if e else None for e in drain(w, 2)] == ["DEL", None]


def test_watch_ignore_deletes(kv: KeyValue) -> None:
    kv.put("a", b"1")
    kv.put("b", b"1")
    kv.delete("b")  # the last initial entry, left out: None still comes
    with kv.watchall(ignore_deletes=True) as w:
        assert [e.key if e else None for e in drain(w, 2)] == ["a", None]
        kv.delete("a")
        kv.purge("a")
        kv.put("c", b"3")
        assert [e.key if e else None for e in drain(w, 1)] == ["c"]


def test_watch_meta_only(kv: KeyValue) -> None:
    kv.put("big", b"x" * 5000)
    with kv.watchall(meta_only=True) as w:
        e = w.updates()
        assert e is not None and (e.key, e.revision, e.value) == ("big", 1, b"")
        assert w.updates() is None
        kv.put("big", b"y" * 10)
        e2 = w.updates()
        assert e2 is not None and (e2.revision, e2.value) == (2, b"")


def test_watch_updates_only(kv: KeyValue) -> None:
    kv.put("old", b"1")
    with kv.watchall(updates_only=True) as w:
        assert w.updates() is None
        kv.put("new", b"2")
        got = drain(w, 1)
    assert [e.key if e else None for e in got] == ["new"]
    with pytest.raises(nats.InvalidArgumentError, match="not both"):
        kv.watchall(updates_only=True, include_history=True)
    with pytest.raises(nats.InvalidArgumentError, match="meta_only"):
        kv.watchall(meta_only="yes")


def test_watch_iterates_until_stopped_from_another_thread(kv: KeyValue) -> None:
    kv.put("a", b"1")
    w = kv.watchall()
    seen: List[Optional[Entry]] = []
    done = threading.Event()

    def read() -> None:
        for e in w:
            seen.append(e)
        done.set()

    reader = threading.Thread(target=read)
    reader.start()
    # b after the end of the initial values: put before "a" is delivered, b would be an
    # initial value too (the marker follows the delivery with nothing pending, as in nats.go)
    # and the order a, b, None (seen once, under load from other tests, in an xdist run)
    wait_until(lambda: len(seen) == 2, what="a and the end of the initial values")
    kv.put("b", b"2")
    wait_until(lambda: len(seen) == 3, what="a, None and b")
    w.stop()
    assert done.wait(10)
    reader.join(10)
    assert [e.key if e else None for e in seen] == ["a", None, "b"]
    with pytest.raises(nats.BadSubscriptionError):
        w.updates(1)


def test_watch_does_not_read_ahead_and_stops_promptly(kv: KeyValue) -> None:
    for i in range(600):
        kv.put(f"k{i}", b"v")
    w = kv.watchall()
    assert w.updates() is not None  # one read; the rest stays on the server
    stopper = threading.Thread(target=w.stop)
    stopper.start()
    stopper.join(5)
    assert not stopper.is_alive()


def test_watch_when_the_initial_values_vanish(
    js: JetStream, kv: KeyValue, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The consumer said values were pending, and they were purged before any came: the
    None must still come (ADR-8: the signal is always sent), and later changes too (the
    server's consumer delivers nothing more: the watcher replaces it)."""
    for i in range(3):
        kv.put(f"k{i}", b"v")
    stream = f"KV_{kv.bucket}"
    made: List[OrderedConsumer] = []
    real = js.ordered_consumer

    def purge_after_the_first(*args: Any, **kwargs: Any) -> OrderedConsumer:
        oc = real(*args, **kwargs)
        made.append(oc)
        if len(made) == 1:
            assert oc.info.num_pending == 3
            js.purge_stream(stream)  # gone before the watcher's first pull
        return oc

    monkeypatch.setattr(js, "ordered_consumer", purge_after_the_first)
    with kv.watchall() as w:
        assert w.updates(timeout=10) is None
        kv.put("after", b"v")
        e = w.updates()
        assert e is not None and (e.key, e.revision) == ("after", 4)
        kv.put("later", b"v")
        assert [x.key if x else None for x in drain(w, 1)] == ["later"]
    assert len(made) == 2


def test_watch_survives_a_server_restart(server_factory: Callable[..., NATSServer]) -> None:
    srv = server_factory(jetstream=True)
    with nats.connect(srv.url, reconnect_time_wait=0.1, max_reconnect_attempts=-1) as nc:
        js = nc.jetstream(timeout=15)
        kv = js.create_key_value(bucket="RESTART", history=3)  # file storage: it stays
        kv.put("a", b"1")
        with kv.watchall() as w:
            assert [e.key if e else None for e in drain(w, 2)] == ["a", None]
            srv.restart()
            kv.put("b", b"2")
            e = w.updates(30)
            assert e is not None and (e.key, e.revision) == ("b", 2)
            kv.delete("a")
            assert [(x.key, x.operation) if x else None for x in drain(w, 1)] == [("a", "DEL")]


def test_watchers_on_a_missing_bucket(js: JetStream, kv: KeyValue, bucket: str) -> None:
    js.delete_key_value(bucket)
    with pytest.raises(nats.BucketNotFoundError):
        kv.watchall()
    with pytest.raises(nats.BucketNotFoundError):
        kv.keys()


def test_republish(js: JetStream, nc: nats.Client, bucket: str) -> None:
    kv = js.create_key_value(bucket=bucket, republish=RePublish(src=">", dest=f"re.{bucket}.>"))
    sub = nc.subscribe(f"re.{bucket}.>")
    nc.flush()
    kv.put("hello.world", b"Hello World!")
    msg = sub.next_msg(timeout=5)
    assert (msg.subject, msg.data) == (f"re.{bucket}.$KV.{bucket}.hello.world", b"Hello World!")
    assert msg.headers["Nats-Stream"] == f"KV_{bucket}"


def test_watch_and_keys_report_nothing(ejs: JetStream, errs: Errors, bucket: str) -> None:
    """A watch, its stop and a keys() listing report nothing through error_cb."""
    kv = ejs.create_key_value(bucket=bucket)
    kv.put("a", b"1")
    assert kv.keys() == ["a"]
    with kv.watchall() as w:
        assert drain(w, 2)[-1] is None
    assert errs.seen == []


def test_nats_py_names(js: JetStream, kv: KeyValue) -> None:
    """The names nats-py code uses, without ``await``."""
    names: Dict[str, Callable[..., object]] = {
        "create_key_value": js.create_key_value,
        "key_value": js.key_value,
        "delete_key_value": js.delete_key_value,
    }
    assert all(callable(f) for f in names.values())
    for method in (
        "get", "put", "create", "update", "delete", "purge", "purge_deletes", "status",
        "watch", "watchall", "keys", "history",
    ):  # fmt: skip
        assert callable(getattr(kv, method))
    assert KeyValue.Entry is Entry and KeyValue.KeyWatcher is KeyWatcher
    assert KeyValue.BucketStatus is type(kv.status())
    kv.put("k", b"v")
    e = kv.get("k")
    assert isinstance(e, KeyValue.Entry)


def test_keys_with_a_filter_without_wildcards_lists_the_keys_containing_it(kv: KeyValue) -> None:
    """nats-py's examples/kv.py: keys(filters=["hello", "greet"]) lists every key that
    contains a filter; a filter with wildcards is a key pattern (nats.go's, ADR-8)."""
    for key in ("hello", "goodbye", "greetings", "greeting", "app.x", "app.y.z"):
        kv.put(key, b"v")
    assert kv.keys(filters=["hello", "greet"]) == ["hello", "greetings", "greeting"]
    assert kv.keys(filters=["app.*"]) == ["app.x"]
    assert kv.keys(filters=["bye", "app.>"]) == ["goodbye", "app.x", "app.y.z"]
    with pytest.raises(nats.NoKeysError):
        kv.keys(filters=["nothing"])
