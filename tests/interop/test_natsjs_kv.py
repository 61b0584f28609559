"""Key-Value between nats.js (@nats-io/kv 3.4.0) and jetstream_sync on one real server.

nats.js reads a bucket we wrote (values, revisions, markers, history, keys, status) and
watches our changes; we read, list and watch what nats.js wrote; compare-and-set holds
across the two clients. Waits are bounded (peer answers and events carry deadlines).
"""

from __future__ import annotations

import base64
from typing import Any, Callable, Dict, Iterator, List, Optional

import pytest
from interop_peers import NodePeer, b64

import jetstream_sync as nats
from jetstream_sync.jetstream.context import JetStream
from jetstream_sync.jetstream.kv import Entry
from jetstream_sync.testing import stream_name

# Values that must cross both clients unchanged: empty, binary, large.
VALUES = {
    "empty": b"",
    "binary": bytes(range(256)),
    "text.en": "hello, wörld".encode(),
    "large": bytes(range(256)) * 200,
}


@pytest.fixture
def bucket(js: JetStream) -> Iterator[str]:
    name = stream_name("IOPKV")
    yield name
    try:
        js.delete_key_value(name)
    except nats.BucketNotFoundError:
        pass


def theirs(entry: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """nats.js's entry with the value as bytes (None stays None)."""
    if entry is None:
        return None
    return {**entry, "value": base64.b64decode(entry["value"])}


def as_theirs(e: Entry) -> Dict[str, Any]:
    """Our entry in the fields both clients have; nats.js says PUT where we say None."""
    return {
        "key": e.key,
        "value": e.value,
        "revision": e.revision,
        "operation": e.operation or "PUT",
    }


def pick(entry: Dict[str, Any]) -> Dict[str, Any]:
    return {k: entry[k] for k in ("key", "value", "revision", "operation")}


def kv_events(peer: NodePeer, tag: str) -> Callable[[List[Dict[str, Any]]], List[Dict[str, Any]]]:
    def select(events: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
        return [theirs(e["entry"]) for e in events if e.get("event") == "kv" and e["tag"] == tag]

    return select


def test_natsjs_reads_what_we_wrote(
    natsjs: Callable[[], NodePeer], js: JetStream, bucket: str
) -> None:
    kv = js.create_key_value(bucket=bucket, history=5, description="ours")
    revs = {key: kv.put(key, value) for key, value in VALUES.items()}
    first_text = revs["text.en"]
    revs["text.en"] = kv.update("text.en", b"second", last=first_text)
    kv.put("gone", b"soon deleted")
    kv.delete("gone")
    kv.put("purged", b"1")
    kv.put("purged", b"2")
    kv.purge("purged")
    peer = natsjs()
    for key, value in VALUES.items():
        got = theirs(peer.call("kv_get", bucket=bucket, key=key)["entry"])
        assert got is not None
        want = b"second" if key == "text.en" else value
        assert (got["key"], got["value"], got["revision"], got["operation"]) == (
            key, want, revs[key], "PUT",
        )  # fmt: skip
        assert got["bucket"] == bucket
    # A marker is an entry with its operation to nats.js, KeyDeletedError to us.
    deleted = theirs(peer.call("kv_get", bucket=bucket, key="gone")["entry"])
    purged = theirs(peer.call("kv_get", bucket=bucket, key="purged")["entry"])
    assert deleted is not None and purged is not None
    assert (deleted["operation"], deleted["value"]) == ("DEL", b"")
    assert purged["operation"] == "PURGE"
    with pytest.raises(nats.KeyDeletedError) as ours:
        kv.get("gone")
    assert ours.value.entry.revision == deleted["revision"]
    # An older revision by number.
    first = theirs(peer.call("kv_get", bucket=bucket, key="text.en", revision=first_text)["entry"])
    assert first is not None and first["value"] == VALUES["text.en"]
    # History, keys and status agree.
    their_history = peer.call("kv_history", bucket=bucket, key="text.en")["entries"]
    assert [pick(theirs(e) or {}) for e in their_history] == [
        as_theirs(e) for e in kv.history("text.en")
    ]
    assert sorted(peer.call("kv_keys", bucket=bucket)["keys"]) == sorted(kv.keys())
    assert sorted(peer.call("kv_keys", bucket=bucket, filter="text.*")["keys"]) == ["text.en"]
    status = peer.call("kv_status", bucket=bucket)["status"]
    assert (status["values"], status["history"], status["direct"]) == (kv.status().values, 5, True)


def test_we_read_what_natsjs_wrote(
    natsjs: Callable[[], NodePeer], js: JetStream, bucket: str
) -> None:
    peer = natsjs()
    peer.call("kv_create_bucket", bucket=bucket, opts={"history": 5})
    revs: Dict[str, int] = {}
    for key, value in VALUES.items():
        revs[key] = peer.call("kv_put", bucket=bucket, key=key, data=b64(value))["revision"]
    created = peer.call("kv_create", bucket=bucket, key="new.one", data=b64(b"n1"))["revision"]
    updated = peer.call("kv_update", bucket=bucket, key="new.one", data=b64(b"n2"), last=created)
    peer.call("kv_delete", bucket=bucket, key="binary")
    peer.call("kv_put", bucket=bucket, key="p", data=b64(b"x"))
    peer.call("kv_purge", bucket=bucket, key="p")

    kv = js.key_value(bucket)
    for key, value in VALUES.items():
        if key == "binary":
            continue
        e = kv.get(key)
        assert (e.key, e.value, e.revision, e.operation) == (key, value, revs[key], None)
    assert kv.get("new.one").value == b"n2" and kv.get("new.one").revision == updated["revision"]
    assert kv.get("new.one", revision=created).value == b"n1"
    with pytest.raises(nats.KeyDeletedError) as deleted:
        kv.get("binary")
    assert deleted.value.op == "DEL"
    with pytest.raises(nats.KeyDeletedError) as purged:
        kv.get("p")
    assert purged.value.op == "PURGE"
    assert sorted(kv.keys()) == ["empty", "large", "new.one", "text.en"]
    ours = [as_theirs(e) for e in kv.history("new.one")]
    their_history = peer.call("kv_history", bucket=bucket, key="new.one")["entries"]
    assert ours == [pick(theirs(e) or {}) for e in their_history]
    status = kv.status()
    assert status.history == 5 and status.bucket == bucket


def test_we_watch_what_natsjs_writes(
    natsjs: Callable[[], NodePeer], js: JetStream, bucket: str
) -> None:
    peer = natsjs()
    peer.call("kv_create_bucket", bucket=bucket, opts={"history": 3})
    peer.call("kv_put", bucket=bucket, key="cfg.a", data=b64(b"1"))
    peer.call("kv_put", bucket=bucket, key="cfg.a", data=b64(b"2"))
    peer.call("kv_put", bucket=bucket, key="cfg.b", data=b64(b"3"))
    kv = js.key_value(bucket)
    with kv.watch("cfg.*") as w:
        initial = [w.updates(10) for _ in range(2)]
        assert [(e.key, e.value, e.revision) for e in initial if e] == [
            ("cfg.a", b"2", 2), ("cfg.b", b"3", 3),
        ]  # fmt: skip
        assert w.updates(10) is None
        peer.call("kv_put", bucket=bucket, key="cfg.c", data=b64(b"4"))
        peer.call("kv_delete", bucket=bucket, key="cfg.a")
        peer.call("kv_purge", bucket=bucket, key="cfg.b")
        peer.call("kv_put", bucket=bucket, key="other", data=b64(b"not watched"))
        live = [w.updates(10) for _ in range(3)]
        assert [(e.key, e.value, e.revision, e.operation) for e in live if e] == [
            ("cfg.c", b"4", 4, None), ("cfg.a", b"", 5, "DEL"), ("cfg.b", b"", 6, "PURGE"),
        ]  # fmt: skip
        with pytest.raises(nats.TimeoutError):
            w.updates(0.5)


def test_natsjs_watches_what_we_write(
    natsjs: Callable[[], NodePeer], js: JetStream, bucket: str
) -> None:
    kv = js.create_key_value(bucket=bucket, history=3)
    kv.put("a", b"before")
    peer = natsjs()
    peer.call("kv_watch", bucket=bucket, tag="w")
    seen = kv_events(peer, "w")
    first = peer.wait_for(seen, 20, "nats.js to see the value there was")
    assert [pick(e) for e in first] == [as_theirs(kv.get("a"))]
    kv.put("a", b"after")
    kv.put("b", b"new")
    kv.delete("b")
    kv.purge("a")
    events = peer.wait_for(lambda evs: len(seen(evs)) >= 5 and seen(evs), 20, "four changes")
    assert [(e["key"], e["value"], e["operation"]) for e in events[1:]] == [
        ("a", b"after", "PUT"), ("b", b"new", "PUT"), ("b", b"", "DEL"), ("a", b"", "PURGE"),
    ]  # fmt: skip
    assert all(e["is_update"] for e in events[1:])
    peer.call("kv_unwatch", tag="w")


def test_compare_and_set_across_clients(
    natsjs: Callable[[], NodePeer], js: JetStream, bucket: str
) -> None:
    kv = js.create_key_value(bucket=bucket, history=5)
    peer = natsjs()
    rev = kv.put("lock", b"free")
    # nats.js wins the revision; our update with the same expectation is refused...
    theirs_rev = peer.call("kv_update", bucket=bucket, key="lock", data=b64(b"js"), last=rev)
    with pytest.raises(nats.KeyWrongLastSequenceError):
        kv.update("lock", b"py", last=rev)
    # ...and the other way round.
    ours_rev = kv.update("lock", b"py", last=theirs_rev["revision"])
    with pytest.raises(Exception, match="wrong last sequence"):
        peer.call("kv_update", bucket=bucket, key="lock", data=b64(b"js"), last=rev)
    assert kv.get("lock").revision == ours_rev
    # create over a key the other client deleted works for both.
    peer.call("kv_delete", bucket=bucket, key="lock")
    assert kv.create("lock", b"mine") == ours_rev + 2
    kv.delete("lock")
    created = peer.call("kv_create", bucket=bucket, key="lock", data=b64(b"theirs"))["revision"]
    assert kv.get("lock").value == b"theirs" and kv.get("lock").revision == created
    with pytest.raises(nats.KeyWrongLastSequenceError):
        kv.create("lock", b"taken")


def test_natsjs_sees_our_per_key_ttl_marker(
    natsjs: Callable[[], NodePeer], js: JetStream, bucket: str
) -> None:
    kv = js.create_key_value(bucket=bucket, history=2, limit_marker_ttl=1)
    peer = natsjs()
    peer.call("kv_watch", bucket=bucket, tag="ttl", include="history")
    seen = kv_events(peer, "ttl")
    kv.create("session", b"token", msg_ttl=1)
    events = peer.wait_for(lambda evs: len(seen(evs)) >= 2 and seen(evs), 20, "the expiry marker")
    assert [(e["key"], e["operation"]) for e in events] == [
        ("session", "PUT"),
        ("session", "PURGE"),
    ]
    peer.call("kv_unwatch", tag="ttl")
