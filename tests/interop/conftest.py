"""Fixtures of the nats.js interop tests: node, the peers, our JetStream context, streams.

The server is the session's ``nats_server``, with ``js`` and ``stream`` (jetstream_sync.testing);
nats.js and our client both talk to it. Without node the tests are skipped; with node but without
``tests/interop/node_modules`` they fail, because that is a setup step left out, not a
missing tool: ``npm ci --prefix tests/interop`` makes it from the committed lock file.
"""

from __future__ import annotations

import itertools
import shutil
import subprocess
from pathlib import Path
from typing import Callable, Iterator, List

import pytest
from interop_peers import HERE, JsonLinesProcess, NodePeer, SyncPeer

from jetstream_sync.server import NATSServer


@pytest.fixture(scope="session")
def node() -> str:
    path = shutil.which("node")
    if path is None:
        pytest.skip("node is not installed: the nats.js interop tests need node >= 18 on PATH")
    if not (HERE / "node_modules" / "@nats-io" / "jetstream").is_dir():
        pytest.fail(
            "tests/interop/node_modules is missing: run `npm ci --prefix tests/interop` "
            "(installs the nats.js versions pinned in tests/interop/package-lock.json)",
            pytrace=False,
        )
    out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
    major = int(out.stdout.strip().lstrip("v").split(".")[0])
    if major < 18:
        pytest.skip(f"node {out.stdout.strip()} is too old for nats.js 3 (needs >= 18)")
    return path


@pytest.fixture
def peers(tmp_path: Path) -> Iterator[List[JsonLinesProcess]]:
    """Every peer process a test starts; all are ended (and their stderr kept) afterwards."""
    started: List[JsonLinesProcess] = []
    try:
        yield started
    finally:
        for p in started:
            p.close()


@pytest.fixture
def natsjs(
    node: str, nats_server: NATSServer, peers: List[JsonLinesProcess], tmp_path: Path
) -> Callable[[], NodePeer]:
    """``natsjs()`` starts a nats.js peer on the session's server."""
    count = itertools.count()

    def start() -> NodePeer:
        peer = NodePeer(node, nats_server.url, tmp_path / f"natsjs{next(count)}.stderr")
        peers.append(peer)
        return peer

    return start


@pytest.fixture
def syncpeer(
    nats_server: NATSServer, peers: List[JsonLinesProcess], tmp_path: Path
) -> Callable[[str, str, str], SyncPeer]:
    """``syncpeer(stream, consumer, group)`` starts our client in a process of its own."""
    count = itertools.count()

    def start(stream: str, consumer: str, group: str) -> SyncPeer:
        err = tmp_path / f"syncpeer{next(count)}.stderr"
        peer = SyncPeer(nats_server.url, stream, consumer, group, err)
        peers.append(peer)
        return peer

    return start
