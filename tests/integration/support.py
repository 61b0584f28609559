"""What several integration test modules share: an error_cb that keeps what it is given,
names for the streams the tests make, and the client operations a server trace log
(``nats-server -V``) shows."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import List

# One counter for every module: the session's server outlives each module's streams.
_numbers = itertools.count()


def stream_name(prefix: str) -> str:
    """A stream name no other test of this session uses: ``<prefix><n>``."""
    return f"{prefix}{next(_numbers)}"


class Errors:
    """An error_cb that keeps what it is given."""

    def __init__(self) -> None:
        self.seen: List[Exception] = []

    def __call__(self, exc: Exception) -> None:
        self.seen.append(exc)

    def kinds(self) -> List[type]:
        return [type(e) for e in self.seen]


def our_ops(trace: Path) -> List[str]:
    """Every operation our client sent, in order, as the trace log shows it."""
    ops = []
    for line in trace.read_text(errors="replace").splitlines():
        if "python3-sync" in line and "<<- [" in line:
            ops.append(line.split("<<- [", 1)[1].rstrip("]"))
    return ops
