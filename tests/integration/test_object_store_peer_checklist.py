"""Object Store behaviours nats-py's tests check that tests/integration/test_object_store.py
did not: one test each, against a real server (docs/nats-py-kv-os-tests.md maps them all)."""

from __future__ import annotations

import base64
import hashlib
from typing import Iterator

import pytest

import jetstream_sync as nats
from jetstream_sync.jetstream.context import JetStream
from jetstream_sync.testing import stream_name


def sha256_digest(data: bytes) -> str:
    return "SHA-256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode()


@pytest.fixture
def obs(js: JetStream) -> Iterator[nats.ObjectStore]:
    name = stream_name("OBP")
    store = js.create_object_store(name)
    yield store
    try:
        js.delete_object_store(name)
    except nats.BucketNotFoundError:
        pass


# --- test_object_basics --------------------------------------------------------------------------


def test_bucket_stream_limits_are_all_unset(obs: nats.ObjectStore) -> None:
    """The stream fields test_object_store.py's layout test leaves out."""
    cfg = obs.status().stream_info.config
    assert cfg.retention == nats.RetentionPolicy.LIMITS
    assert (cfg.max_consumers, cfg.max_msgs, cfg.max_msgs_per_subject, cfg.max_msg_size) == (
        -1, -1, -1, -1,
    )  # fmt: skip
    assert cfg.mirror_direct is False


def test_meta_options_come_back_equal(obs: nats.ObjectStore) -> None:
    opts = nats.ObjectMetaOptions(max_chunk_size=5)
    info = obs.put("filename.txt", b"filevalue", meta=nats.ObjectMeta(options=opts))
    assert info.chunks == 2 and info.digest == sha256_digest(b"filevalue")
    assert info.options == opts
    assert obs.get_info("filename.txt").options == opts
    assert obs.get("filename.txt").info.options == opts


# --- test_object_file_basics ---------------------------------------------------------------------


def test_sealed_bucket_refuses_a_put_as_a_bad_request(obs: nats.ObjectStore) -> None:
    obs.put("sample", b"A" * 2000)
    obs.seal()
    with pytest.raises(nats.APIError) as refused:
        obs.put("tmp", b"no more")
    assert (refused.value.code, refused.value.err_code) == (400, 10109)  # nats-py: BadRequest
    with pytest.raises(nats.ObjectNotFoundError):
        obs.get("tmp")


def test_empty_name_and_a_deleted_bucket(js: JetStream, obs: nats.ObjectStore) -> None:
    """nats-py answers get("") with NotFoundError (it asks the server); ours refuses the
    name before anything is sent. A get from a bucket deleted since: BucketNotFoundError."""
    with pytest.raises(nats.InvalidObjectNameError):
        obs.get("")
    assert js.delete_object_store(obs.bucket) is True
    with pytest.raises(nats.BucketNotFoundError):
        obs.get("big")
    with pytest.raises(nats.BucketNotFoundError):
        js.delete_object_store(obs.bucket)


# --- test_object_watch_updates_only --------------------------------------------------------------


def test_watch_updates_only_sees_every_kind_of_change(obs: nats.ObjectStore) -> None:
    for name in "ABC":
        obs.put(name, name.encode())
    with obs.watch(updates_only=True) as watcher:
        with pytest.raises(nats.TimeoutError):
            watcher.updates(timeout=0.3)  # neither the current objects nor a None
        obs.put("D", b"D")  # a new object
        d = watcher.updates()
        assert d is not None and (d.name, d.bucket, d.size, d.chunks) == ("D", obs.bucket, 1, 1)
        obs.put("A", b"AA")  # a replaced one
        a = watcher.updates()
        assert a is not None and (a.name, a.size, a.deleted) == ("A", 2, False)
        obs.delete("B")  # a deleted one
        b = watcher.updates()
        assert b is not None and (b.name, b.deleted) == ("B", True)
        meta = obs.get_info("C").meta
        meta.description = "changed"
        obs.update_meta("C", meta)  # new meta
        c = watcher.updates()
        assert c is not None and (c.name, c.description) == ("C", "changed")
        with pytest.raises(nats.TimeoutError):
            watcher.updates(timeout=0.3)
