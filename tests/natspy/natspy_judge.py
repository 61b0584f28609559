"""Programs nats-py's authors wrote, run on nats-py and then ported, their outputs compared.

A program runs twice against a fresh real server: once on nats-py as written, once here
after ``tests/ports/run.py`` deleted ``async``, ``await`` and ``asyncio.run`` (and mapped
``nats.*`` imports to ours). Before either run the server URLs it names (nats-py's demo
server, ``localhost``) become the test server's. What each printed is compared after
:func:`mask` hides what differs from run to run by nature (ids, times, ports, which member
of a queue group got a message), with the exit status.

Lines are compared as sorted lists: callbacks print from a thread here, so their lines may
interleave with the main thread's (the README says so); the same lines must be there.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import List, Tuple

from jetstream_sync.server import NATSServer

RUN = Path(__file__).resolve().parents[1] / "ports" / "run.py"

# Masks, in order: each hides a thing two runs of the same program differ in anyway.
_MASKS: List[Tuple[str, str]] = [
    (r"_client=<[^>]*>", "_client=<client>"),  # nats-py's "<nats client v2.16.0>", ours
    (r"_sid=\d+", "_sid=N"),  # subscription ids: each client numbers its own
    (r"_INBOX\.[A-Za-z0-9.]+", "_INBOX.ID"),  # inbox subjects: random
    (r"\$JS\.ACK\.[^\s']+", "$JS.ACK.ID"),  # ack subjects: consumer names and times
    (r"\b[A-Za-z0-9]{22}\b", "ID"),  # nuids: ephemeral consumer names
    (r"\d{4}-\d\d-\d\dT[\d:.]+Z?", "TIME"),
    (r"\b\d+:\d\d:\d\d(\.\d+)?\b", "DURATION"),  # a timedelta printed
    (r"127\.0\.0\.1:\d+|localhost:\d+", "HOST:PORT"),
    (r"QSUB [AB]:", "QSUB ?:"),  # the server picks a queue group's member at random
]


def mask(line: str) -> str:
    """``line`` with what differs between runs by nature replaced by a placeholder."""
    for pattern, placeholder in _MASKS:
        line = re.sub(pattern, placeholder, line)
    return line.rstrip()


def local(source: str, url: str) -> str:
    """The program with the servers it names replaced by the test server's URL."""
    for named in ('"nats://demo.nats.io:4222"', '"localhost"', '"nats://localhost:4222"'):
        source = source.replace(named, repr(url))
    return source


def run(which: str, source: str, timeout: float = 60) -> Tuple[int, List[str], str]:
    """(exit status, masked sorted output lines, stderr) of ``source`` on ``which``
    (``nats-py`` or ``ours``), against a fresh server."""
    with NATSServer(jetstream=True) as srv, tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "program.py"
        path.write_text(local(source, srv.url))
        proc = subprocess.run(
            [sys.executable, str(RUN), which, str(path)],
            env=dict(os.environ, NATS_URL=srv.url, JSS_THREAD_LINES="1"),
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=tmp,
        )
    return proc.returncode, sorted(mask(line) for line in proc.stdout.splitlines()), proc.stderr


def runnable(source: str) -> bool:
    """A whole program (it runs itself), not a fragment of one."""
    return "asyncio.run(" in source and "__main__" in source
