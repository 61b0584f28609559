"""Fast-ingest batches (ADR-50) between nats.js 3.4.0 (``startFastIngest``) and
jetstream_sync (``js.fast_publisher()``) on one real server: a batch nats.js publishes is read
back by us whole and in order, and a batch we publish is read by nats.js."""

from __future__ import annotations

import json
import subprocess
from typing import Any, Iterator, List

import pytest
from interop_peers import HERE

import jetstream_sync as nats
from jetstream_sync.jetstream.context import JetStream
from jetstream_sync.server import NATSServer
from jetstream_sync.testing import stream_name

PEER = HERE / "fast_ingest_peer.mjs"
N = 1_000


@pytest.fixture
def batched(js: JetStream) -> Iterator[str]:
    name = stream_name("FIJS")
    js.add_stream(name=name, subjects=[f"{name.lower()}.>"], allow_batched=True, allow_direct=True)
    try:
        yield name
    finally:
        js.delete_stream(name)


def peer(node: str, url: str, *args: str) -> Any:
    out = subprocess.run([node, str(PEER), url, *args], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


def stored(js: JetStream, stream: str) -> List[bytes]:
    out: List[bytes] = []
    total = js.stream_info(stream).state.messages
    while len(out) < total:
        out += [m.data for m in js.get_msgs(stream, seq=len(out) + 1, batch=500)]
    return out


@pytest.mark.parametrize("commit", ["last", "end"])
def test_a_natsjs_batch_is_read_back_whole_and_in_order(
    node: str, nats_server: NATSServer, js: JetStream, batched: str, commit: str
) -> None:
    seen = peer(node, nats_server.url, "publish", f"{batched.lower()}.a", str(N), commit)
    ack = nats.PubAck.from_dict(seen["ack"])
    assert (ack.stream, ack.batch_id, ack.batch_size, ack.seq) == (batched, seen["batch"], N, N)
    assert stored(js, batched) == [b"%d" % i for i in range(N)]


def test_our_batch_is_read_by_natsjs(
    node: str, nats_server: NATSServer, js: JetStream, batched: str
) -> None:
    subject = f"{batched.lower()}.a"
    with js.fast_publisher(flow=50) as pub:
        for i in range(N - 1):
            pub.add(subject, b"%d" % i)
        ack = pub.commit(subject, b"%d" % (N - 1))
    assert ack.batch_size == N
    seen = peer(node, nats_server.url, "read", batched, str(N))
    assert seen["data"] == [str(i) for i in range(N)]
    assert seen["seqs"] == list(range(1, N + 1))
