"""Object Store between nats.js (@nats-io/obj) and jetstream_sync on one real server.

What one client puts, the other reads: the same bytes, the same SHA-256 digest (each side
checks it while reading), size, chunk count, description and headers; deletes and links made
by one are honoured by the other.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
from typing import Any, Callable, Iterator, List

import pytest
from interop_peers import NodePeer, b64

import jetstream_sync as nats
from jetstream_sync.jetstream.context import JetStream
from jetstream_sync.testing import stream_name


def sha256_digest(data: bytes) -> str:
    return "SHA-256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode()


@pytest.fixture
def bucket(js: JetStream) -> Iterator[Callable[[], nats.ObjectStore]]:
    """``bucket()``: a fresh bucket of ours, deleted afterwards."""
    made: List[str] = []

    def make() -> nats.ObjectStore:
        name = stream_name("IOB")
        made.append(name)
        return js.create_object_store(name)

    yield make
    for name in made:
        try:
            js.delete_object_store(name)
        except nats.BucketNotFoundError:
            pass


def their_get(peer: NodePeer, bucket: str, name: str) -> Any:
    answer = peer.call("obj_get", bucket=bucket, name=name)
    if not answer["found"]:
        return None
    return base64.b64decode(answer["data"]), answer["info"]


@pytest.mark.parametrize(
    ("size", "chunk_size", "chunks"),
    [(0, None, 0), (5, None, 1), (300_001, None, 3), (10_007, 1000, 11)],
)
def test_natsjs_reads_what_we_put(
    natsjs: Callable[[], NodePeer],
    bucket: Callable[[], nats.ObjectStore],
    size: int,
    chunk_size: Any,
    chunks: int,
) -> None:
    ours = bucket()
    peer = natsjs()
    data = os.urandom(size)
    meta = nats.ObjectMeta(
        description="from python",
        headers={"Content-Type": "application/octet-stream", "X-Many": ["a", "b"]},
        options=nats.ObjectMetaOptions(max_chunk_size=chunk_size),
    )
    info = ours.put("ours.bin", io.BytesIO(data), meta=meta)
    assert info.chunks == chunks
    got = their_get(peer, ours.bucket, "ours.bin")
    assert got is not None
    their_data, their_info = got
    assert their_data == data  # nats.js checked the digest as it read
    assert their_info["digest"] == info.digest == sha256_digest(data)
    assert (their_info["size"], their_info["chunks"]) == (size, chunks)
    assert their_info["nuid"] == info.nuid and their_info["description"] == "from python"
    assert their_info["headers"] == {
        "Content-Type": ["application/octet-stream"],
        "X-Many": ["a", "b"],
    }


@pytest.mark.parametrize(
    ("size", "chunk_size"), [(0, None), (7, None), (300_001, None), (2500, 1000)]
)
def test_we_read_what_natsjs_put(
    natsjs: Callable[[], NodePeer],
    bucket: Callable[[], nats.ObjectStore],
    size: int,
    chunk_size: Any,
) -> None:
    ours = bucket()
    peer = natsjs()
    data = os.urandom(size)
    put = peer.call(
        "obj_put",
        bucket=ours.bucket,
        name="theirs.bin",
        data=b64(data),
        chunk_size=chunk_size,
        description="from node",
        headers={"X-Origin": ["nats.js"]},
    )["info"]
    assert put["digest"] == sha256_digest(data)
    result = ours.get("theirs.bin")  # we check size and digest as we read
    assert result.data == data
    info = result.info
    assert (info.name, info.size, info.chunks, info.nuid) == (
        "theirs.bin",
        size,
        put["chunks"],
        put["nuid"],
    )
    assert info.digest == put["digest"] and info.description == "from node"
    assert info.headers == {"X-Origin": "nats.js"}  # nats-py's form
    assert info.all_headers == {"X-Origin": ["nats.js"]}
    assert info.mtime is not None
    out = io.BytesIO()
    ours.get("theirs.bin", writeinto=out)
    assert out.getvalue() == data
    assert [i.name for i in ours.list()] == ["theirs.bin"]


def test_replacing_and_deleting_across_clients(
    natsjs: Callable[[], NodePeer], bucket: Callable[[], nats.ObjectStore]
) -> None:
    ours = bucket()
    peer = natsjs()
    ours.put("doc", b"version 1")
    peer.call("obj_put", bucket=ours.bucket, name="doc", data=b64(b"version 2 from node"))
    assert ours.get("doc").data == b"version 2 from node"
    ours.put("doc", b"version 3")
    assert their_get(peer, ours.bucket, "doc")[0] == b"version 3"
    # Whoever replaced it purged the chunks of the version before: one chunk subject left.
    state = ours._js.stream_info(ours.stream_name, subjects_filter=f"$O.{ours.bucket}.C.>").state
    assert list((state.subjects or {}).values()) == [1]
    # Their delete, our view; our delete, theirs.
    peer.call("obj_delete", bucket=ours.bucket, name="doc")
    with pytest.raises(nats.ObjectNotFoundError):
        ours.get("doc")
    assert ours.get_info("doc", show_deleted=True).deleted
    ours.put("other", b"x")
    ours.delete("other")
    assert their_get(peer, ours.bucket, "other") is None
    assert peer.call("obj_list", bucket=ours.bucket)["names"] == []


def test_links_across_clients(
    natsjs: Callable[[], NodePeer], bucket: Callable[[], nats.ObjectStore]
) -> None:
    here, there = bucket(), bucket()
    peer = natsjs()
    there.put("target", b"linked bytes")
    # A link nats.js makes (it writes no nuid): we follow it, within a bucket and across.
    for where, name in ((there.bucket, "near"), (here.bucket, "far")):
        peer.call("obj_link", bucket=where, name=name, target_bucket=there.bucket, target="target")
    assert there.get("near").data == b"linked bytes"
    assert here.get("far").data == b"linked bytes"
    assert here.get_info("far").is_link()
    # A link we make: nats.js follows it.
    here.add_link("ours", there.get_info("target"))
    assert their_get(peer, here.bucket, "ours")[0] == b"linked bytes"
    link = peer.call("obj_info", bucket=here.bucket, name="ours")["info"]
    assert link["options"]["link"] == {"bucket": there.bucket, "name": "target"}
