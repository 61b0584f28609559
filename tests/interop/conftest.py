"""Fixtures of the nats.js interop tests: node, the peers, our JetStream context, streams.

The server is the session's ``nats_server``, with ``js`` and ``stream`` (jetstream_sync.testing);
nats.js and our client both talk to it. Without node the tests are skipped. Unless
``tests/interop/node_modules`` holds an install of the committed lock file made here (INSTALLED
marks it), the session makes it once (``.ci/run`` relies on this):
``npm ci --prefix tests/interop`` installs the nats.js versions of the committed lock file;
without npm, or if that install fails, the tests are skipped with the reason (a fresh clone
never errors here).
"""

from __future__ import annotations

import fcntl
import hashlib
import itertools
import shutil
import subprocess
import tempfile
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
    out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
    major = int(out.stdout.strip().lstrip("v").split(".")[0])
    if major < 18:
        pytest.skip(f"node {out.stdout.strip()} is too old for nats.js 3 (needs >= 18)")
    why = _install_natsjs_once()
    if why:
        pytest.skip(why)
    return path


# Written into node_modules once ``npm ci`` has installed all of the lock file: its content is
# the lock file's hash, so a changed lock file installs again.
INSTALLED = HERE / "node_modules" / ".jetstream_sync-installed"


def _lock_hash() -> str:
    return hashlib.sha256((HERE / "package-lock.json").read_bytes()).hexdigest()


def _install_natsjs_once() -> str:
    """:func:`_install_natsjs` under a file lock, unless INSTALLED says it is done: the xdist
    workers that reach the interop tests at the same time install once; the others wait, then
    find it done. Every worker takes the lock, even where node_modules is there: ``npm ci``
    writes the packages one by one, and a worker that only looked for one of them started
    nats.js while another worker's install had not written ``@nats-io/transport-node`` yet
    (ERR_MODULE_NOT_FOUND, in 1 of 5 runs on six workers)."""
    lock_path = Path(tempfile.gettempdir()) / (
        "jetstream_sync-npm-" + hashlib.sha256(str(HERE).encode()).hexdigest()[:16] + ".lock"
    )
    with open(lock_path, "a+b") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)  # released when the file is closed
        try:
            if INSTALLED.read_text() == _lock_hash():
                return ""  # installed, by this run's other worker or before
        except OSError:
            pass
        if (HERE / "node_modules" / ".package-lock.json").is_file():
            # Installed by someone else (a user's own `npm ci`): npm writes its hidden lock
            # file once the install is done, and no worker of this run is installing now
            # (this one holds the lock), so it is complete; kept as it is.
            return ""
        why = _install_natsjs()
        if not why:
            INSTALLED.write_text(_lock_hash())
        return why


NPM_CI_TIMEOUT = 600.0


def _install_natsjs() -> str:
    """``npm ci`` in tests/interop (the lock file's nats.js); why it could not, or ""."""
    npm = shutil.which("npm")
    if npm is None:
        return (
            "tests/interop/node_modules has no complete install and npm is not on PATH to "
            "install it: "
            "`npm ci --prefix tests/interop` installs the nats.js versions of the lock file"
        )
    command = [npm, "ci", "--prefix", str(HERE), "--no-audit", "--no-fund", "--loglevel=error"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=NPM_CI_TIMEOUT)
    except subprocess.TimeoutExpired:
        return f"`npm ci --prefix tests/interop` did not finish within {NPM_CI_TIMEOUT:g} s"
    if done.returncode != 0 or not (HERE / "node_modules" / "@nats-io" / "jetstream").is_dir():
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        return f"`npm ci --prefix tests/interop` failed (exit {done.returncode}): " + " / ".join(
            tail
        )
    return ""


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
