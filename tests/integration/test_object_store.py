"""Object Store (ADR-20) against a real server: buckets, put and get of bytes and files,
chunking, digests, meta updates, deletes, lists, watches, links, and memory that stays flat
for a 200 MB object."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import io
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List

import pytest
from support import Errors, stop_after

import jetstream_sync as nats
from jetstream_sync.jetstream.context import JetStream
from jetstream_sync.server import NATSServer
from jetstream_sync.testing import stream_name, wait_until

REPO = Path(nats.__file__).resolve().parent.parent


def sha256_digest(data: bytes) -> str:
    """ADR-20's digest, computed here independently: SHA-256= and URL-safe base64."""
    return "SHA-256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode()


def chunk_subjects(js: JetStream, bucket: str) -> Dict[str, int]:
    """Messages per chunk subject of the bucket, as the server counts them."""
    info = js.stream_info(f"OBJ_{bucket}", subjects_filter=f"$O.{bucket}.C.>")
    return dict(info.state.subjects or {})


@pytest.fixture
def make_bucket(js: JetStream) -> Iterator[Callable[..., nats.ObjectStore]]:
    """``make_bucket(**config)``: a fresh bucket with a name of its own, deleted afterwards."""
    made: List[str] = []

    def make(**config: Any) -> nats.ObjectStore:
        name = stream_name("OB")
        made.append(name)
        return js.create_object_store(name, **config)

    yield make
    for name in made:
        try:
            js.delete_object_store(name)
        except nats.BucketNotFoundError:
            pass


@pytest.fixture
def obs(make_bucket: Callable[..., nats.ObjectStore]) -> nats.ObjectStore:
    return make_bucket()


# --- buckets -----------------------------------------------------------------------------------


def test_bucket_is_a_stream_as_adr_20_says(js: JetStream) -> None:
    store = js.create_object_store(bucket="OBJBASICS", description="testing")
    try:
        assert (store.bucket, store.stream_name) == ("OBJBASICS", "OBJ_OBJBASICS")
        cfg = store.status().stream_info.config
        assert cfg.name == "OBJ_OBJBASICS" and cfg.description == "testing"
        assert cfg.subjects == ["$O.OBJBASICS.C.>", "$O.OBJBASICS.M.>"]
        assert cfg.discard == nats.DiscardPolicy.NEW
        assert cfg.allow_rollup_hdrs is True and cfg.allow_direct is True
        assert cfg.max_bytes == -1 and cfg.max_age == 0
        assert cfg.storage == nats.StorageType.FILE and cfg.num_replicas == 1
        status = store.status()
        assert status.bucket == "OBJBASICS" and status.description == "testing"
        assert status.sealed is False and status.replicas == 1 and status.size == 0
        assert status.storage_type == nats.StorageType.FILE and not status.is_compressed
        # Binding finds it; the same config again is fine.
        assert js.object_store("OBJBASICS").stream_name == "OBJ_OBJBASICS"
        js.create_object_store("OBJBASICS", description="testing")
    finally:
        assert js.delete_object_store("OBJBASICS") is True
    with pytest.raises(nats.BucketNotFoundError, match="OBJBASICS"):
        js.object_store("OBJBASICS")
    with pytest.raises(nats.BucketNotFoundError, match="OBJBASICS"):
        js.delete_object_store("OBJBASICS")
    # An object of a bucket deleted under it.
    with pytest.raises(nats.BucketNotFoundError):
        store.get("anything")


def test_bucket_config_object_and_keywords(
    make_bucket: Callable[..., nats.ObjectStore], js: JetStream
) -> None:
    cfg = nats.ObjectStoreConfig(description="from a config", ttl=3600.0, max_bytes=10 << 20)
    store = make_bucket(config=cfg, storage=nats.StorageType.MEMORY, metadata={"owner": "me"})
    status = store.status()
    assert status.description == "from a config" and status.ttl == 3600.0
    assert status.storage_type == nats.StorageType.MEMORY and not status.is_compressed
    assert status.stream_info.config.max_bytes == 10 << 20
    assert (status.metadata or {}).get("owner") == "me"
    assert cfg.storage is None  # the caller's config is not changed
    packed = make_bucket(compression=True)
    assert packed.status().is_compressed
    packed.put("squeezed", b"s" * 100_000)
    assert packed.get("squeezed").data == b"s" * 100_000


# --- put and get -------------------------------------------------------------------------------


def test_put_and_get_bytes_and_str(obs: nats.ObjectStore) -> None:
    info = obs.put("foo", b"bar")
    assert (info.name, info.size, info.chunks, info.bucket) == ("foo", 3, 1, obs.bucket)
    # b"bar"'s digest has both URL-safe characters: - and _ (not + and /).
    assert (
        info.digest
        == sha256_digest(b"bar")
        == "SHA-256=_N4rLtula_QIYB-3If6bXDONEO5CnqBPrlURto-_j7k="
    )
    assert info.nuid and not info.deleted
    text = obs.put("plaintext", "lorem ipsum ünïcode")
    assert text.size == len("lorem ipsum ünïcode".encode())
    result = obs.get("foo")
    assert result.data == b"bar" and result.info.digest == info.digest
    assert obs.get("plaintext").data == "lorem ipsum ünïcode".encode()
    got = obs.get_info("foo")
    assert (got.name, got.size, got.chunks, got.nuid) == ("foo", 3, 1, info.nuid)
    # mtime is the server's time of the info message.
    assert got.mtime is not None and got.mtime.tzinfo is not None
    assert abs(got.mtime - dt.datetime.now(dt.timezone.utc)) < dt.timedelta(minutes=1)
    # Each put has a new nuid: its chunks never mix with the replaced object's.
    again = obs.put("foo", b"bar")
    assert again.nuid != info.nuid
    assert obs.ObjectResult is nats.ObjectResult  # nats-py nests it in ObjectStore


def test_put_with_meta_options_headers_and_metadata(obs: nats.ObjectStore) -> None:
    meta = nats.ObjectMeta(
        description="filedescription",
        headers={"headername": "headerval", "multi": ["a", "b"]},
        options=nats.ObjectMetaOptions(max_chunk_size=5),
        metadata={"k": "v"},
    )
    info = obs.put("filename.txt", b"filevalue", meta=meta)
    assert info.size == 9 and info.chunks == 2 and info.digest == sha256_digest(b"filevalue")
    for got in (info, obs.get_info("filename.txt"), obs.get("filename.txt").info):
        assert got.name == "filename.txt" and got.description == "filedescription"
        # nats-py's form: a str per name (the first value); every value in all_headers
        assert got.headers == {"headername": "headerval", "multi": "a"}
        assert got.headers["headername"] == "headerval"
        assert got.all_headers == {"headername": ["headerval"], "multi": ["a", "b"]}
        assert got.metadata == {"k": "v"}
        assert got.options is not None and got.options.max_chunk_size == 5
        assert got.chunks == 2
    assert obs.get("filename.txt").data == b"filevalue"
    assert meta.name is None  # the caller's meta is not changed
    # Without a name argument, meta.name names the object.
    assert obs.put("", b"x", meta=nats.ObjectMeta(name="by-meta")).name == "by-meta"
    assert obs.get("by-meta").data == b"x"


@pytest.mark.parametrize("size", [1, 999, 1000, 1001, 2999, 3000, 3001, 10_007])
def test_chunk_boundaries(obs: nats.ObjectStore, size: int) -> None:
    data = os.urandom(size)
    meta = nats.ObjectMeta(options=nats.ObjectMetaOptions(max_chunk_size=1000))
    info = obs.put("obj", data, meta=meta)
    assert info.size == size and info.chunks == -(-size // 1000)
    assert info.digest == sha256_digest(data)
    assert obs.get("obj").data == data
    out = io.BytesIO()
    assert obs.get("obj", writeinto=out).data == b""
    assert out.getvalue() == data


def test_a_megabyte_and_more_in_default_chunks(obs: nats.ObjectStore) -> None:
    data = b"A" * (1024 * 1024 + 33)
    info = obs.put("big", io.BytesIO(data))
    assert (info.size, info.chunks) == (1048609, 9)  # eight of 128 KiB and 33 bytes
    assert info.digest == sha256_digest(data)
    assert sorted(chunk_subjects(obs._js, obs.bucket).values()) == [9]
    assert obs.get("big").data == data


def test_a_get_does_not_wait_for_a_batch_the_object_cannot_fill(
    nc: nats.Client, obs: nats.ObjectStore
) -> None:
    # 33 chunks: more than one pull's worth (32 of 128 KiB), and not a multiple of it.
    data = os.urandom(32 * 128 * 1024 + 1)
    assert obs.put("odd", data).chunks == 33
    patient = nc.jetstream(timeout=30.0).object_store(obs.bucket)
    started = time.monotonic()
    assert patient.get("odd").data == data
    assert time.monotonic() - started < 10.0  # not the 30 s of waiting for more chunks


def test_file_objects_in_and_out(obs: nats.ObjectStore, tmp_path: Path) -> None:
    data = os.urandom(300_000)
    src = tmp_path / "src.bin"
    src.write_bytes(data)
    with src.open("rb") as f:
        assert obs.put("binary", f).digest == sha256_digest(data)
    with src.open("rb", buffering=0) as raw:  # unbuffered: reads may come back short
        assert obs.put("raw", raw).chunks == 3
    text = "line one\nline two ü\n" * 1000
    (tmp_path / "src.txt").write_text(text, encoding="utf-8")
    with (tmp_path / "src.txt").open(encoding="utf-8") as f:  # read through its buffer
        assert obs.put("text", f).size == len(text.encode())
    # Into a binary file, and into a text file (through its buffer).
    with (tmp_path / "out.bin").open("wb") as f:
        result = obs.get("binary", writeinto=f)
    assert result.data == b"" and result.info.size == len(data)
    assert (tmp_path / "out.bin").read_bytes() == data
    with (tmp_path / "out.txt").open("w", encoding="utf-8") as f:
        f.write("header\n")
        obs.get("text", writeinto=f)
    assert (tmp_path / "out.txt").read_text(encoding="utf-8") == "header\n" + text
    assert obs.get("raw").data == data


class Trickle(io.RawIOBase):
    """A source that hands out at most 7 bytes per read."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        n = min(7, len(b), len(self.data) - self.pos)
        b[:n] = self.data[self.pos : self.pos + n]
        self.pos += n
        return n


def test_short_reads_still_make_full_chunks(obs: nats.ObjectStore) -> None:
    data = os.urandom(2500)
    meta = nats.ObjectMeta(options=nats.ObjectMetaOptions(max_chunk_size=1000))
    info = obs.put("trickle", Trickle(data), meta=meta)
    assert info.chunks == 3 and info.size == 2500
    assert obs.get("trickle").data == data


def test_empty_object(obs: nats.ObjectStore, tmp_path: Path) -> None:
    info = obs.put("empty", b"")
    assert (info.size, info.chunks) == (0, 0)
    assert info.digest == sha256_digest(b"")
    assert obs.get("empty").data == b""
    with (tmp_path / "out").open("wb") as f:
        assert obs.get("empty", writeinto=f).info.size == 0
    assert (tmp_path / "out").read_bytes() == b""
    assert obs.put("empty-file", io.BytesIO()).size == 0
    assert chunk_subjects(obs._js, obs.bucket) == {}


def test_chunk_size_is_capped_by_max_payload(obs: nats.ObjectStore, nc: nats.Client) -> None:
    data = os.urandom(nc.max_payload + 10)
    meta = nats.ObjectMeta(options=nats.ObjectMetaOptions(max_chunk_size=nc.max_payload * 4))
    info = obs.put("huge-chunks", data, meta=meta)
    assert info.options is not None and info.options.max_chunk_size == nc.max_payload
    assert info.chunks == 2
    assert obs.get("huge-chunks").data == data


def test_names_are_not_restricted(obs: nats.ObjectStore) -> None:
    names = ["dir/sub dir/file ü.txt", "a.b.c", "*", ">", "with\ttab", "=" * 5]
    for name in names:
        obs.put(name, name.encode())
    for name in names:
        assert obs.get(name).data == name.encode()
    assert sorted(i.name for i in obs.list()) == sorted(names)


def test_replacing_an_object_purges_the_old_chunks(obs: nats.ObjectStore) -> None:
    meta = nats.ObjectMeta(options=nats.ObjectMetaOptions(max_chunk_size=10))
    first = obs.put("doc", b"x" * 35, meta=meta)
    assert chunk_subjects(obs._js, obs.bucket) == {f"$O.{obs.bucket}.C.{first.nuid}": 4}
    second = obs.put("doc", b"y" * 15, meta=meta)
    assert chunk_subjects(obs._js, obs.bucket) == {f"$O.{obs.bucket}.C.{second.nuid}": 2}
    assert obs.get("doc").data == b"y" * 15
    # Only the newest info of a name is kept (rollup).
    meta_info = obs._js.stream_info(obs.stream_name, subjects_filter=f"$O.{obs.bucket}.M.>")
    assert list((meta_info.state.subjects or {}).values()) == [1]


class Failing(io.RawIOBase):
    """A source that fails after ``good`` bytes."""

    def __init__(self, good: int) -> None:
        self.left = good

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        if self.left <= 0:
            raise OSError("disk on fire")
        n = min(len(b), self.left)
        b[:n] = b"z" * n
        self.left -= n
        return n


def test_a_failed_put_leaves_no_chunks_and_no_object(obs: nats.ObjectStore) -> None:
    meta = nats.ObjectMeta(options=nats.ObjectMetaOptions(max_chunk_size=100))
    with pytest.raises(OSError, match="disk on fire"):
        obs.put("broken", Failing(450), meta=meta)
    assert chunk_subjects(obs._js, obs.bucket) == {}
    with pytest.raises(nats.ObjectNotFoundError):
        obs.get_info("broken")
    # A failed replacement keeps the old object whole.
    obs.put("kept", b"old")
    with pytest.raises(OSError):
        obs.put("kept", Failing(250), meta=meta)
    assert obs.get("kept").data == b"old"


def lose_the_info_ack(
    monkeypatch: pytest.MonkeyPatch, js: JetStream, bucket: str, *, stored: bool
) -> List[str]:
    """The info publish of a put into ``bucket`` raises ConnectionLostError, after the
    server stored the info (``stored``) or without sending it; the subjects cut, listed."""
    real = js.publish
    cut: List[str] = []

    def publish(subject: str, *args: Any, **kwargs: Any) -> Any:
        if not subject.startswith(f"$O.{bucket}.M."):
            return real(subject, *args, **kwargs)
        cut.append(subject)
        if stored:
            real(subject, *args, **kwargs)
        raise nats.ConnectionLostError("connection lost while waiting for the ack")

    monkeypatch.setattr(js, "publish", publish)
    return cut


def test_a_put_whose_info_ack_was_lost_after_it_was_stored_succeeded(
    obs: nats.ObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The info reached the server and replaced the old one: its chunks must stay (the
    # put used to purge them, leaving an info whose object get() could not read).
    meta = nats.ObjectMeta(options=nats.ObjectMetaOptions(max_chunk_size=10))
    old = obs.put("doc", b"o" * 25, meta=meta)
    cut = lose_the_info_ack(monkeypatch, obs._js, obs.bucket, stored=True)
    new = obs.put("doc", b"n" * 35, meta=meta)
    monkeypatch.undo()
    assert cut  # the ack was lost indeed
    assert new.nuid != old.nuid
    assert [i.nuid for i in obs.list()] == [new.nuid]
    assert obs.get("doc").data == b"n" * 35
    # ...and the put finished its work: the old chunks are purged.
    assert chunk_subjects(obs._js, obs.bucket) == {f"$O.{obs.bucket}.C.{new.nuid}": 4}


def test_a_put_whose_info_never_reached_the_server_keeps_the_old_object(
    obs: nats.ObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    meta = nats.ObjectMeta(options=nats.ObjectMetaOptions(max_chunk_size=10))
    old = obs.put("doc", b"o" * 25, meta=meta)
    lose_the_info_ack(monkeypatch, obs._js, obs.bucket, stored=False)
    with pytest.raises(nats.ConnectionLostError, match="connection lost") as caught:
        obs.put("doc", b"n" * 35, meta=meta)
    monkeypatch.undo()
    assert not isinstance(caught.value, nats.ObjectOutcomeUnknownError)
    assert [i.nuid for i in obs.list()] == [old.nuid]
    assert obs.get("doc").data == b"o" * 25
    # The new chunks, which no info points to, are purged.
    assert chunk_subjects(obs._js, obs.bucket) == {f"$O.{obs.bucket}.C.{old.nuid}": 3}


def test_an_info_still_on_its_way_in_when_its_ack_timed_out_is_not_destroyed(
    obs: nats.ObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A busy stream: the info's ack timed out with the info still queued at the server,
    # where a direct get can overtake it. Modelled here by holding the info back until
    # this connection publishes again (the stream takes one client's publishes in order);
    # whatever the put did, the info lands in the end, and must find its chunks there.
    meta = nats.ObjectMeta(options=nats.ObjectMetaOptions(max_chunk_size=10))
    obs.put("doc", b"o" * 25, meta=meta)
    js = obs._js
    real = js.publish
    held: List[Callable[[], Any]] = []

    def land() -> None:
        while held:
            held.pop()()

    def publish(subject: str, *args: Any, **kwargs: Any) -> Any:
        if subject.startswith(f"$O.{obs.bucket}.M.") and not held:
            held.append(lambda: real(subject, *args, **kwargs))
            raise nats.TimeoutError("no ack within 5.0 s (the stream is busy)")
        land()  # what this connection sent before is handled first
        return real(subject, *args, **kwargs)

    monkeypatch.setattr(js, "publish", publish)
    try:
        obs.put("doc", b"n" * 35, meta=meta)
    except nats.NATSError:
        pass
    land()  # at the latest now
    monkeypatch.undo()
    assert len(obs.list()) == 1
    assert obs.get("doc").data == b"n" * 35


def test_a_put_asks_again_when_its_first_look_at_the_info_is_cut(
    obs: nats.ObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    meta = nats.ObjectMeta(options=nats.ObjectMetaOptions(max_chunk_size=10))
    obs.put("doc", b"o" * 25, meta=meta)
    cut = lose_the_info_ack(monkeypatch, obs._js, obs.bucket, stored=True)
    read = obs._last_msg
    looks: List[str] = []

    def cut_once(subject: str, **kw: Any) -> Any:
        if cut:
            looks.append(subject)
            if len(looks) == 1:
                raise nats.ConnectionLostError("the connection dropped again")
        return read(subject, **kw)

    monkeypatch.setattr(obs, "_last_msg", cut_once)
    new = obs.put("doc", b"n" * 35, meta=meta)
    monkeypatch.undo()
    assert len(looks) == 2
    assert obs.get("doc").data == b"n" * 35
    assert chunk_subjects(obs._js, obs.bucket) == {f"$O.{obs.bucket}.C.{new.nuid}": 4}


def test_a_put_whose_info_fate_cannot_be_learned_says_so_and_purges_nothing(
    nc: nats.Client, obs: nats.ObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = nc.jetstream(timeout=0.5).object_store(obs.bucket)  # a short resolution budget
    meta = nats.ObjectMeta(options=nats.ObjectMetaOptions(max_chunk_size=10))
    old = store.put("doc", b"o" * 25, meta=meta)
    cut = lose_the_info_ack(monkeypatch, store._js, store.bucket, stored=True)
    read = store._last_msg

    def unanswered(subject: str, **kw: Any) -> Any:
        if not cut:  # the put's look at the old info, before the cut
            return read(subject, **kw)
        raise nats.TimeoutError(f"no answer for the last message on {subject}")

    monkeypatch.setattr(store, "_last_msg", unanswered)
    with pytest.raises(nats.ObjectOutcomeUnknownError, match=r"get_info\('doc'\)\.nuid") as caught:
        store.put("doc", b"n" * 35, meta=meta)
    monkeypatch.undo()
    assert isinstance(caught.value, nats.ConnectionLostError)  # what cut it, for old handlers
    assert isinstance(caught.value, nats.ObjectStoreError)
    new_nuid = obs.get_info("doc").nuid
    assert new_nuid != old.nuid  # the info was stored: the new object is whole
    assert obs.get("doc").data == b"n" * 35
    assert set(chunk_subjects(obs._js, obs.bucket)) == {
        f"$O.{obs.bucket}.C.{old.nuid}",  # nothing purged: litter, not loss
        f"$O.{obs.bucket}.C.{new_nuid}",
    }


# --- corruption --------------------------------------------------------------------------------


def test_digest_mismatch_is_detected(obs: nats.ObjectStore, js: JetStream) -> None:
    meta = nats.ObjectMeta(options=nats.ObjectMetaOptions(max_chunk_size=4))
    info = obs.put("victim", b"0123456789", meta=meta)
    subject = f"$O.{obs.bucket}.C.{info.nuid}"
    # Same sizes, one byte different: only the digest can tell.
    js.purge_stream(obs.stream_name, subject=subject)
    for piece in (b"0123", b"4567", b"89"[:1] + b"X"):
        js.publish(subject, piece)
    with pytest.raises(nats.DigestMismatchError, match="victim") as err:
        obs.get("victim")
    assert info.digest is not None and info.digest in str(err.value)
    with pytest.raises(nats.DigestMismatchError, match="victim"):
        obs.get("victim", writeinto=io.BytesIO())
    # One chunk too many: more bytes than the info says.
    js.purge_stream(obs.stream_name, subject=subject)
    for piece in (b"0123", b"4567", b"89", b"!"):
        js.publish(subject, piece)
    with pytest.raises(nats.DigestMismatchError, match="more than the 10 bytes"):
        obs.get("victim")
    # A chunk short: fewer bytes than the info says.
    js.purge_stream(obs.stream_name, subject=subject)
    for piece in (b"0123", b"4567"):
        js.publish(subject, piece)
    with pytest.raises(nats.DigestMismatchError, match="read 8 bytes, its info says 10"):
        obs.get("victim")
    # No chunks at all: the get gives up after the JetStream timeout, naming the object.
    js.purge_stream(obs.stream_name, subject=subject)
    impatient = js.nc.jetstream(timeout=0.5).object_store(obs.bucket)
    with pytest.raises(nats.TimeoutError, match=r"victim.*after 0 of 3 chunks"):
        impatient.get("victim")


def test_unreadable_info_is_bad_object_meta(obs: nats.ObjectStore, js: JetStream) -> None:
    subject = f"$O.{obs.bucket}.M.{base64.urlsafe_b64encode(b'garbled').decode()}"
    for payload in (
        b"not json",
        b"[1, 2]",
        json.dumps({"name": "garbled", "size": "big"}).encode(),
    ):
        js.publish(subject, payload, headers={"Nats-Rollup": "sub"})
        with pytest.raises(nats.BadObjectMetaError, match="garbled"):
            obs.get_info("garbled")
    # An info without a nuid cannot be read.
    js.publish(subject, json.dumps({"name": "garbled", "bucket": obs.bucket, "size": 1}).encode())
    with pytest.raises(nats.BadObjectMetaError, match="nuid"):
        obs.get("garbled")


# --- delete, update_meta -----------------------------------------------------------------------


def test_delete_and_show_deleted(obs: nats.ObjectStore) -> None:
    meta = nats.ObjectMeta(options=nats.ObjectMetaOptions(max_chunk_size=2))
    obs.put("B", b"BBBBB", meta=meta)
    assert len(chunk_subjects(obs._js, obs.bucket)) == 1
    marker = obs.delete("B")
    assert marker.deleted and marker.size == 0 and marker.chunks == 0
    assert chunk_subjects(obs._js, obs.bucket) == {}
    with pytest.raises(nats.ObjectNotFoundError, match="'B'"):
        obs.get("B")
    with pytest.raises(nats.ObjectNotFoundError):
        obs.get_info("B")
    info = obs.get_info("B", show_deleted=True)
    assert info.deleted and info.size == 0
    deleted = obs.get("B", show_deleted=True)
    assert deleted.info.deleted and deleted.data == b""
    # Deleting it again is fine; deleting what never was is not.
    assert obs.delete("B").deleted
    with pytest.raises(nats.ObjectNotFoundError, match="'never'"):
        obs.delete("never")
    # Put over a deleted name: alive again.
    again = obs.put("B", b"back")
    assert not again.deleted and obs.get("B").data == b"back"


def test_update_meta_and_rename(obs: nats.ObjectStore) -> None:
    obs.put("A", b"A")
    obs.put("B", b"B")
    meta = obs.get_info("A").meta
    meta.description = "changed"
    meta.headers = {"h": ["1", "2"]}
    updated = obs.update_meta("A", meta)
    assert updated.description == "changed"
    got = obs.get("A")
    assert got.info.description == "changed" and got.info.headers == {"h": "1"}
    assert got.info.all_headers == {"h": ["1", "2"]}
    # info.meta round-trips every value; a name set anew has the new value only
    again = got.info.meta
    assert again.all_headers == {"h": ["1", "2"]}
    again.headers["g"] = "x"  # type: ignore[index]
    obs.update_meta("A", again)
    assert obs.get_info("A").all_headers == {"h": ["1", "2"], "g": ["x"]}
    again.headers["h"] = "3"  # type: ignore[index]
    del again.headers["g"]  # type: ignore[union-attr]
    obs.update_meta("A", again)
    assert obs.get_info("A").all_headers == {"h": ["3"]}
    meta = obs.get_info("A").meta
    meta.headers = {"h": ["1", "2"]}
    assert got.data == b"A"
    # Rename: the data follows, the old name is gone.
    meta.name = "Z"
    obs.update_meta("A", meta)
    assert obs.get("Z").data == b"A" and obs.get_info("Z").description == "changed"
    with pytest.raises(nats.ObjectNotFoundError):
        obs.get_info("A", show_deleted=True)
    # Not onto a live object...
    meta.name = "B"
    with pytest.raises(nats.ObjectAlreadyExistsError, match="'B'"):
        obs.update_meta("Z", meta)
    assert obs.get("B").data == b"B" and obs.get("Z").data == b"A"
    # ...but onto a deleted one.
    obs.delete("B")
    obs.update_meta("Z", meta)
    assert obs.get("B").data == b"A"
    assert nats.ObjectAlreadyExists is nats.ObjectAlreadyExistsError  # nats-py's name


def test_update_meta_of_deleted_or_missing_object(obs: nats.ObjectStore) -> None:
    obs.put("gone", b"x")
    obs.delete("gone")
    with pytest.raises(nats.ObjectDeletedError, match="'gone'"):
        obs.update_meta("gone", nats.ObjectMeta(description="ng"))
    with pytest.raises(nats.ObjectDeletedError, match="'X'"):
        obs.update_meta("X", nats.ObjectMeta(description="ng"))
    assert issubclass(nats.ObjectDeletedError, nats.ObjectNotFoundError)


# --- list and watch ----------------------------------------------------------------------------


def test_list(obs: nats.ObjectStore) -> None:
    assert obs.list() == []
    for name in "ABCD":
        obs.put(name, name.encode() * 3)
    assert [i.name for i in obs.list()] == ["A", "B", "C", "D"]
    obs.delete("B")
    listed = obs.list()
    assert [(i.name, i.deleted) for i in listed] == [
        ("A", False),
        ("C", False),
        ("D", False),
        ("B", True),
    ]
    assert [i.name for i in obs.list(ignore_deletes=True)] == ["A", "C", "D"]
    assert all(i.mtime is not None for i in listed)


def test_watch_initial_values_then_none_then_updates(obs: nats.ObjectStore) -> None:
    obs.put("A", b"A")
    obs.put("B", b"B")
    obs.put("A", b"AA")  # only the newest info of A is an initial value
    with obs.watch() as watcher:
        first = [watcher.updates(), watcher.updates(), watcher.updates()]
        assert [(i.name, i.size) if i else None for i in first] == [("B", 1), ("A", 2), None]
        with pytest.raises(nats.TimeoutError):
            watcher.updates(timeout=0.3)  # nothing more until something changes
        obs.put("C", b"CCC")
        c = watcher.updates()
        assert c is not None and (c.name, c.size, c.digest) == ("C", 3, sha256_digest(b"CCC"))
        obs.delete("B")
        b = watcher.updates()
        assert b is not None and b.name == "B" and b.deleted
        meta = obs.get_info("C").meta
        meta.description = "changed"
        obs.update_meta("C", meta)
        c2 = watcher.updates()
        assert c2 is not None and c2.name == "C" and c2.description == "changed"
    with pytest.raises(StopIteration):
        watcher.updates()


def test_watch_of_an_empty_bucket_and_as_an_iterator(obs: nats.ObjectStore) -> None:
    watcher = obs.watch()
    assert watcher.updates() is None  # nothing there: the initial values are done at once
    obs.put("A", b"A")
    obs.put("B", b"B")
    seen: List[str] = []
    with stop_after(watcher, 30):
        for info in watcher:
            assert info is not None
            seen.append(info.name)
            if len(seen) == 2:
                watcher.stop()
    assert seen == ["A", "B"]
    assert list(watcher) == []  # stopped: the iteration is over


def test_watch_options(obs: nats.ObjectStore) -> None:
    obs.put("A", b"1")
    obs.put("A", b"22")
    obs.put("D", b"D")
    obs.delete("D")
    with obs.watch(include_history=True) as history:
        # include_history: infos the rollup left are all there (A's newest, D's delete)
        got = [history.updates() for _ in range(3)]
        assert [(i.name, i.size, i.deleted) if i else None for i in got] == [
            ("A", 2, False),
            ("D", 0, True),
            None,
        ]
    with obs.watch(ignore_deletes=True) as quiet:
        got = [quiet.updates() for _ in range(2)]
        assert [i.name if i else None for i in got] == ["A", None]
        obs.put("E", b"E")
        obs.delete("E")
        obs.put("F", b"F")
        nxt = [quiet.updates(), quiet.updates()]
        assert [i.name if i else None for i in nxt] == ["E", "F"]  # E's delete is skipped
    with obs.watch(updates_only=True) as fresh:
        with pytest.raises(nats.TimeoutError):
            fresh.updates(timeout=0.3)  # no initial values and no None
        obs.put("G", b"G")
        g = fresh.updates()
        assert g is not None and g.name == "G"


def test_watch_reports_an_unreadable_info_and_goes_on(
    ejs: JetStream, errs: Errors, make_bucket: Callable[..., nats.ObjectStore]
) -> None:
    bucket = make_bucket().bucket
    store = ejs.object_store(bucket)
    with store.watch() as watcher:
        assert watcher.updates() is None
        ejs.publish(f"$O.{bucket}.M.eA==", b"{broken")
        store.put("good", b"g")
        info = watcher.updates()
        assert info is not None and info.name == "good"
    wait_until(lambda: errs.kinds() == [nats.BadObjectMetaError], what="the report")
    assert bucket in str(errs.seen[0])


# --- links -------------------------------------------------------------------------------------


def test_links(make_bucket: Callable[..., nats.ObjectStore], tmp_path: Path) -> None:
    here, there = make_bucket(), make_bucket()
    target = here.put("target", b"the data")
    remote = there.put("remote", b"far away")
    link = here.add_link("link", target)
    assert link.is_link() and link.options is not None and link.options.link is not None
    assert (link.options.link.bucket, link.options.link.name) == (here.bucket, "target")
    assert here.get_info("link").is_link()
    # get follows links: in this bucket and to another; into a file too.
    got = here.get("link")
    assert got.data == b"the data" and got.info.name == "target"
    here.add_link("far", remote)
    assert here.get("far").data == b"far away"
    with (tmp_path / "out").open("wb") as f:
        here.get("far", writeinto=f)
    assert (tmp_path / "out").read_bytes() == b"far away"
    # A link to a whole bucket cannot be read as one object.
    blink = here.add_bucket_link("all-there", there)
    assert blink.options is not None and blink.options.link is not None
    assert (blink.options.link.bucket, blink.options.link.name) == (there.bucket, None)
    with pytest.raises(nats.LinkIsABucketError, match="all-there"):
        here.get("all-there")
    # A link may replace a link, or take a deleted object's name; not a live object's.
    here.add_link("link", remote)
    assert here.get("link").data == b"far away"
    here.put("dead", b"x")
    here.delete("dead")
    here.add_link("dead", target)
    assert here.get("dead").data == b"the data"
    with pytest.raises(nats.ObjectAlreadyExistsError, match="target"):
        here.add_link("target", remote)
    with pytest.raises(nats.ObjectAlreadyExistsError, match="target"):
        here.add_bucket_link("target", there)
    # Not to a link, nor to a deleted object.
    with pytest.raises(nats.InvalidArgumentError, match="is a link"):
        here.add_link("l2", here.get_info("link"))
    there.delete("remote")
    with pytest.raises(nats.InvalidArgumentError, match="deleted"):
        here.add_link("l3", there.get_info("remote", show_deleted=True))
    # Following a link to an object deleted since: not found.
    with pytest.raises(nats.ObjectNotFoundError, match="remote"):
        here.get("far")
    # Deleting a link leaves its target alone.
    here.delete("dead")
    assert here.get("target").data == b"the data"


# --- seal --------------------------------------------------------------------------------------


def test_seal(obs: nats.ObjectStore) -> None:
    obs.put("sample", b"A" * 1000)
    assert obs.seal() is None
    assert obs.status().sealed is True
    assert obs._js.stream_info(obs.stream_name).config.sealed is True
    with pytest.raises(nats.APIError):
        obs.put("tmp", b"no more")
    assert obs.get("sample").data == b"A" * 1000  # reading still works
    with pytest.raises(nats.ObjectNotFoundError):
        obs.get("tmp")


# --- bad input ---------------------------------------------------------------------------------


def test_bad_input_is_refused_before_anything_is_sent(js: JetStream, obs: nats.ObjectStore) -> None:
    for bad in ("notok!", "", "a.b", "sp ace", None, 7):
        with pytest.raises(nats.InvalidBucketNameError, match="bucket name"):
            js.create_object_store(bucket=bad)  # type: ignore[arg-type]
        with pytest.raises(nats.InvalidBucketNameError):
            js.object_store(bad)  # type: ignore[arg-type]
        with pytest.raises(nats.InvalidBucketNameError):
            js.delete_object_store(bad)  # type: ignore[arg-type]
    assert issubclass(nats.InvalidBucketNameError, nats.InvalidArgumentError)
    with pytest.raises(nats.InvalidArgumentError, match="ObjectStoreConfig"):
        js.create_object_store("X", config={"bucket": "X"})  # type: ignore[arg-type]
    with pytest.raises(nats.InvalidArgumentError, match="ObjectStoreConfig field"):
        js.create_object_store("X", colour="blue")
    with pytest.raises(nats.InvalidArgumentError, match="replicas"):
        js.create_object_store("X", replicas=-3)
    with pytest.raises(nats.BadTimeoutError, match="ttl"):
        js.create_object_store("X", ttl=-1)

    for name in ("", None, b"bytes"):
        with pytest.raises(nats.InvalidObjectNameError, match="name"):
            obs.put(name, b"x")  # type: ignore[arg-type]
        with pytest.raises(nats.InvalidObjectNameError, match="name"):
            obs.get(name)  # type: ignore[arg-type]
        with pytest.raises(nats.InvalidObjectNameError, match="name"):
            obs.get_info(name)  # type: ignore[arg-type]
        with pytest.raises(nats.InvalidObjectNameError, match="name"):
            obs.delete(name)  # type: ignore[arg-type]
    with pytest.raises(nats.InvalidArgumentError, match="binary file object, got int"):
        obs.put("x", 42)  # type: ignore[arg-type]
    with pytest.raises(nats.InvalidArgumentError, match="StringIO"):
        obs.put("x", io.StringIO("text"))
    with pytest.raises(nats.InvalidArgumentError, match="ObjectMeta"):
        obs.put("x", b"x", meta={"name": "x"})  # type: ignore[arg-type]
    for size in (-1, "big", 1.5):
        meta = nats.ObjectMeta(options=nats.ObjectMetaOptions(max_chunk_size=size))  # type: ignore[arg-type]
        with pytest.raises(nats.InvalidArgumentError, match="max_chunk_size"):
            obs.put("x", b"x", meta=meta)
    link_meta = nats.ObjectMeta(options=nats.ObjectMetaOptions(link=nats.ObjectLink(bucket="b")))
    with pytest.raises(nats.InvalidArgumentError, match="add_link"):
        obs.put("x", b"x", meta=link_meta)
    with pytest.raises(nats.InvalidArgumentError, match="headers"):
        obs.put("x", b"x", meta=nats.ObjectMeta(headers={"h": 1}))  # type: ignore[dict-item]
    with pytest.raises(nats.InvalidArgumentError, match="metadata"):
        obs.put("x", b"x", meta=nats.ObjectMeta(metadata={"k": 1}))  # type: ignore[dict-item]
    with pytest.raises(nats.InvalidArgumentError, match="writeinto"):
        obs.get("x", writeinto=object())  # type: ignore[arg-type]
    with pytest.raises(nats.InvalidArgumentError, match="writeinto"):
        obs.get("x", writeinto=io.StringIO())
    with pytest.raises(nats.InvalidArgumentError, match="ObjectMeta"):
        obs.update_meta("x", "meta")  # type: ignore[arg-type]
    with pytest.raises(nats.InvalidArgumentError, match="ObjectInfo"):
        obs.add_link("l", {"name": "x"})  # type: ignore[arg-type]
    with pytest.raises(nats.InvalidArgumentError, match="ObjectStore"):
        obs.add_bucket_link("l", "bucket")  # type: ignore[arg-type]
    with pytest.raises(nats.InvalidObjectNameError, match="link name"):
        obs.add_bucket_link("", obs)
    with pytest.raises(nats.InvalidArgumentError, match="ignore_deletes"):
        obs.watch(ignore_deletes="yes")  # type: ignore[arg-type]
    with pytest.raises(nats.InvalidArgumentError, match="not both"):
        obs.watch(include_history=True, updates_only=True)
    with obs.watch() as watcher, pytest.raises(nats.BadTimeoutError):
        watcher.updates(timeout=-1)
    # None of it reached the server.
    assert obs.status().stream_info.state.messages == 0
    with pytest.raises(nats.BucketNotFoundError):
        js.object_store("X")


# --- memory --------------------------------------------------------------------------------------

# The child process: a 200 MB object put from a file object whose bytes are made as they are
# read, and got into a file object that only hashes what it is given. Nobody holds the
# object; the peak RSS (VmHWM) before and after says what put and get themselves held.
MEMORY_CHILD = textwrap.dedent(
    """
    import hashlib, io, json, sys, time
    import jetstream_sync as nats

    SIZE = 200 * 1024 * 1024

    def peak():
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024

    class Made(io.RawIOBase):
        def __init__(self, size):
            self.left, self.pos = size, 0
            self.block = hashlib.sha256(b"seed").digest() * 32771  # ~1 MiB, odd length
            self.sha = hashlib.sha256()
        def readable(self):
            return True
        def readinto(self, b):
            n = min(len(b), self.left, len(self.block) - self.pos)
            b[:n] = self.block[self.pos : self.pos + n]
            self.sha.update(memoryview(b)[:n])
            self.pos = (self.pos + n) % len(self.block)
            self.left -= n
            return n

    class Hashing(io.RawIOBase):
        def __init__(self):
            self.sha, self.n = hashlib.sha256(), 0
        def writable(self):
            return True
        def write(self, b):
            self.sha.update(b)
            self.n += len(b)
            return len(b)

    url, bucket = sys.argv[1], sys.argv[2]
    with nats.connect(url) as nc:
        js = nc.jetstream()
        obs = js.create_object_store(bucket, storage=nats.StorageType.FILE)
        obs.put("warm-up", b"w" * 300_000)  # every code path once, before the baseline
        obs.get("warm-up", writeinto=Hashing())
        before = peak()
        t0 = time.monotonic()
        made = Made(SIZE)
        info = obs.put("big", io.BufferedReader(made))
        t1 = time.monotonic()
        after_put = peak()
        sink = Hashing()
        result = obs.get("big", writeinto=sink)
        t2 = time.monotonic()
        print(json.dumps({
            "before": before, "after_put": after_put, "after_get": peak(),
            "put_s": t1 - t0, "get_s": t2 - t1, "size": info.size, "chunks": info.chunks,
            "written": sink.n, "data_len": len(result.data),
            "same": sink.sha.digest() == made.sha.digest(),
            "digest_ok": info.digest == "SHA-256=" + __import__("base64").urlsafe_b64encode(
                made.sha.digest()).decode(),
        }))
    """
)


def test_200_mb_object_in_flat_memory(
    nats_server: NATSServer, js: JetStream, capsys: pytest.CaptureFixture[str]
) -> None:
    bucket = stream_name("OBMEM")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    try:
        proc = subprocess.run(
            [sys.executable, "-c", MEMORY_CHILD, nats_server.url, bucket],
            capture_output=True,
            text=True,
            timeout=150,
            env=env,
        )
    finally:
        try:
            js.delete_object_store(bucket)
        except nats.BucketNotFoundError:
            pass
    assert proc.returncode == 0, proc.stderr
    r = json.loads(proc.stdout)
    mib = 1024 * 1024
    with capsys.disabled():
        print(
            f"\n200 MB object: peak RSS {r['before'] / mib:.1f} MiB before, "
            f"{r['after_put'] / mib:.1f} after put ({r['put_s']:.1f} s), "
            f"{r['after_get'] / mib:.1f} after get ({r['get_s']:.1f} s)"
        )
    assert r["size"] == r["written"] == 200 * mib and r["chunks"] == 1600
    assert r["same"] and r["digest_ok"] and r["data_len"] == 0
    assert r["after_get"] - r["before"] < 64 * mib, r
