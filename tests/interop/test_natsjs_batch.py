"""Atomic batch publish (ADR-50) between nats.js (@nats-io/jetstream 3.4.0's startBatch) and
jetstream_sync on one real server: a batch nats.js commits, read by us; ours, read by
nats.js. Both see every message, its headers and its stream sequence."""

from __future__ import annotations

import base64
import json
import subprocess
from typing import Any, Dict, Iterator, List

import pytest
from interop_peers import HERE

from jetstream_sync.jetstream.batch import BATCH_COMMIT, BATCH_ID, BATCH_SEQUENCE
from jetstream_sync.jetstream.context import JetStream
from jetstream_sync.server import NATSServer
from jetstream_sync.testing import stream_name

PEER = HERE / "batch_peer.mjs"


@pytest.fixture
def atomic(js: JetStream) -> Iterator[str]:
    name = stream_name("IOPBATCH")
    js.add_stream(name=name, subjects=[f"{name.lower()}.>"], allow_atomic=True, allow_direct=True)
    try:
        yield name
    finally:
        js.delete_stream(name)


def run_peer(node: str, url: str, *args: str) -> Dict[str, Any]:
    out = subprocess.run([node, str(PEER), url, *args], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-3000:]
    result: Dict[str, Any] = json.loads(out.stdout)
    return result


def test_we_read_a_batch_natsjs_committed(
    node: str, nats_server: NATSServer, js: JetStream, atomic: str
) -> None:
    prefix = atomic.lower()
    seen = run_peer(node, nats_server.url, "publish", prefix, "6")
    batch_id = seen["batch"]
    assert seen["ack"] == {"stream": atomic, "seq": 6, "batch": batch_id, "count": 6}
    msgs = list(js.get_msgs(atomic, seq=1, batch=10))
    assert [m.seq for m in msgs] == [1, 2, 3, 4, 5, 6]
    subjects = ["first", "n2", "n3", "n4", "n5", "last"]
    assert [m.subject for m in msgs] == [f"{prefix}.{s}" for s in subjects]
    for i, m in enumerate(msgs, 1):
        assert m.data == f"natsjs {i}".encode()
        assert (m.headers["Peer"], m.headers["Index"]) == ("natsjs", str(i))
        assert (m.headers[BATCH_ID], m.headers[BATCH_SEQUENCE]) == (batch_id, str(i))
        assert m.headers.get(BATCH_COMMIT) == ("1" if i == 6 else None)


def test_natsjs_reads_a_batch_we_committed(
    node: str, nats_server: NATSServer, js: JetStream, atomic: str
) -> None:
    prefix = atomic.lower()
    payloads = [b"", bytes(range(256)), "wörld".encode(), b"x" * 5000]
    with js.batch_publish(ack_every=2) as batch:
        for i, data in enumerate(payloads, 1):
            batch.add(f"{prefix}.ours.{i}", data, headers={"Multi": ["a", "b"], "Index": str(i)})
        ack = batch.commit()  # end of batch: the server marks the 4th as the commit
    assert (ack.seq, ack.batch_size) == (4, 4)
    seen: List[Dict[str, Any]] = run_peer(node, nats_server.url, "read", atomic)["messages"]
    assert [m["seq"] for m in seen] == [1, 2, 3, 4]
    for i, (m, data) in enumerate(zip(seen, payloads), 1):
        assert m["subject"] == f"{prefix}.ours.{i}"
        assert base64.b64decode(m["data"]) == data
        expected = {
            "Multi": ["a", "b"],
            "Index": [str(i)],
            BATCH_ID: [batch.id],
            BATCH_SEQUENCE: [str(i)],
        }
        if i == 4:
            expected[BATCH_COMMIT] = ["1"]
        assert m["headers"] == expected
