"""Batch direct get (ADR-31) between nats.js 3.4.0 (``jsm.direct.getBatch`` and
``getLastMessagesFor``) and jetstream_sync on one real server: nats.js reads a stream we
wrote, request by request as we read it, and we read a stream nats.js wrote; every message is
compared (subject, sequence, payload, the stored headers). Counters, which nats.js 3.4.0 has
no API for, are cross-checked by its plain publishes with ``Nats-Incr``."""

from __future__ import annotations

import base64
import json
import subprocess
from typing import Any, Dict, Iterator, List

import pytest
from interop_peers import HERE

from jetstream_sync.jetstream import api
from jetstream_sync.jetstream.context import JetStream
from jetstream_sync.server import NATSServer
from jetstream_sync.testing import stream_name

PEER = HERE / "direct_peer.mjs"


def natsjs(node: str, url: str, *args: Any) -> Any:
    out = subprocess.run(
        [node, str(PEER), url, *map(str, args)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


def ours(m: api.RawStreamMsg) -> Dict[str, Any]:
    """A message as direct_peer.mjs describes one."""
    headers: Dict[str, List[str]] = {}
    if m.headers:
        for k, v in m.headers.multi_items():
            headers.setdefault(k, []).append(v)
    return {
        "subject": m.subject,
        "seq": m.seq,
        "data": base64.b64encode(m.data).decode(),
        "headers": headers,
        "stream": m.stream,
    }


@pytest.fixture
def dstream(js: JetStream) -> Iterator[str]:
    name = stream_name("IDG")
    js.add_stream(name=name, subjects=[f"{name.lower()}.>"], allow_direct=True)
    try:
        yield name
    finally:
        js.delete_stream(name)


def test_natsjs_reads_batches_we_wrote(
    node: str, nats_server: NATSServer, js: JetStream, dstream: str
) -> None:
    p = dstream.lower()
    for i in range(30):
        subject = f"{p}.a.{i % 3}" if i % 2 else f"{p}.b.{i}"
        headers = {"X-I": str(i)} if i % 3 else None
        js.publish(subject, bytes(range(i, i + 40)), headers=headers)
    tenth, twentieth = js.get_msg(dstream, seq=10).time, js.get_msg(dstream, seq=20).time
    assert tenth is not None and twentieth is not None
    size = len(f"{p}.b.0") + 40
    asks = [
        ("batch", {"seq": 1, "batch": 100}, js.get_batch(dstream, batch=100)),
        (
            "batch",
            {"seq": 5, "batch": 7, "next_by_subj": f"{p}.a.*"},
            js.get_batch(dstream, seq=5, batch=7, subject=f"{p}.a.*"),
        ),
        (
            "batch",
            {"start_time": api.format_time(tenth), "batch": 4},
            js.get_batch(dstream, start_time=tenth, batch=4),
        ),
        (
            "batch",
            {"seq": 1, "batch": 10, "max_bytes": 3 * size},
            js.get_batch(dstream, batch=10, max_bytes=3 * size),
        ),
        (
            "last",
            {"multi_last": [f"{p}.a.*", f"{p}.b.10"]},
            js.get_last_msgs_for(dstream, [f"{p}.a.*", f"{p}.b.10"]),
        ),
        (
            "last",
            {"multi_last": [f"{p}.>"], "up_to_seq": 12},
            js.get_last_msgs_for(dstream, [f"{p}.>"], up_to_seq=12),
        ),
        (
            "last",
            {"multi_last": [f"{p}.a.>"], "batch": 2},
            js.get_last_msgs_for(dstream, [f"{p}.a.>"], batch=2),
        ),
        (
            "last",
            {"multi_last": [f"{p}.a.*"], "up_to_time": api.format_time(twentieth)},
            js.get_last_msgs_for(dstream, [f"{p}.a.*"], up_to_time=twentieth),
        ),
    ]
    requests = [{"kind": kind, "opts": opts} for kind, opts, _ in asks]
    theirs = natsjs(node, nats_server.url, "read", dstream, json.dumps(requests))
    for (kind, opts, mine), got in zip(asks, theirs):
        expected = [ours(m) for m in mine]
        assert expected, (kind, opts)  # nothing compared would prove nothing
        assert got == expected, (kind, opts)
    assert [m["seq"] for m in theirs[0]] == list(range(1, 31))
    assert theirs[0][2]["headers"] == {"X-I": ["2"]}
    assert [m["seq"] for m in theirs[2]] == [10, 11, 12, 13]
    # before the 20th: a.1 last at 14 (i=13), a.0 at 16 (i=15), a.2 at 18 (i=17)
    assert [m["seq"] for m in theirs[7]] == [14, 16, 18]


def test_we_read_a_stream_natsjs_wrote(
    node: str, nats_server: NATSServer, js: JetStream, dstream: str
) -> None:
    p = dstream.lower()
    written = [
        {
            "subject": f"{p}.{'xy'[i % 2]}.{i % 4}",
            "data": base64.b64encode(bytes([i]) * (i + 1)).decode(),
            "headers": {"From": ["nats.js"], "Multi": [str(i), str(-i)]} if i % 5 else {},
        }
        for i in range(20)
    ]
    acks = natsjs(node, nats_server.url, "write", json.dumps(written))
    assert [a["seq"] for a in acks] == list(range(1, 21))
    want = [{**w, "seq": a["seq"], "stream": dstream} for w, a in zip(written, acks)]
    assert [ours(m) for m in js.get_batch(dstream, batch=20)] == want
    assert [ours(m) for m in js.get_batch(dstream, seq=3, subject=f"{p}.x.*")] == [
        w for w in want if w["seq"] >= 3 and w["subject"].startswith(f"{p}.x.")
    ]
    last = {}
    for w in want:
        last[w["subject"]] = w
    assert [ours(m) for m in js.get_last_msgs_for(dstream, [f"{p}.>"])] == sorted(
        last.values(), key=lambda w: w["seq"]
    )


def test_counters_across_natsjs_publishes(
    node: str, nats_server: NATSServer, js: JetStream
) -> None:
    name = stream_name("ICNT")
    js.add_stream(
        name=name, subjects=[f"{name.lower()}.>"], allow_msg_counter=True, allow_direct=True
    )
    try:
        c = js.counter(name)
        hits = f"{name.lower()}.hits"
        assert c.add(hits, 2**65) == 2**65
        incr = [{"subject": hits, "data": "", "headers": {"Nats-Incr": [d]}} for d in ("+5", "-7")]
        acks = natsjs(node, nats_server.url, "write", json.dumps(incr))
        assert [a["val"] for a in acks] == [str(2**65 + 5), str(2**65 - 2)]
        assert c.load(hits) == 2**65 - 2
        (stored,) = natsjs(
            node,
            nats_server.url,
            "read",
            name,
            json.dumps([{"kind": "last", "opts": {"multi_last": [hits]}}]),
        )[0]
        assert json.loads(base64.b64decode(stored["data"])) == {"val": str(2**65 - 2)}
        assert stored["headers"] == {"Nats-Incr": ["-7"]}
    finally:
        js.delete_stream(name)
