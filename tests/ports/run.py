"""Run one of the nats-py programs here: ``python run.py nats-py|ours PROGRAM``.

``nats-py`` runs it as written. ``ours`` deletes the words ``async``, ``await`` and
``asyncio.run`` from it — nothing else — and runs the rest with ``nats`` naming
jetstream_sync (as ``import jetstream_sync as nats`` would; the submodules nats-py code
imports from name ours).
"""

from __future__ import annotations

import os
import re
import sys
import threading
from typing import Any, Dict


def delete_await(source: str) -> str:
    """The port: delete ``async ``, ``await `` and ``asyncio.run``, and nothing else."""
    source = re.sub(r"\basync\s+(?=def|for|with)", "", source)
    source = re.sub(r"\bawait\s+", "", source)
    return source.replace("asyncio.run(", "(")


def alias_nats() -> None:
    import types

    import jetstream_sync
    import jetstream_sync.client
    import jetstream_sync.errors
    import jetstream_sync.jetstream.api
    import jetstream_sync.msg
    import jetstream_sync.subscription

    aio = types.ModuleType("nats.aio")  # nats-py's package of the client's modules
    aio.client = jetstream_sync.client  # type: ignore[attr-defined]
    aio.errors = jetstream_sync.errors  # type: ignore[attr-defined]
    aio.msg = jetstream_sync.msg  # type: ignore[attr-defined]
    aio.subscription = jetstream_sync.subscription  # type: ignore[attr-defined]
    modules: Dict[str, object] = {
        "nats.aio": aio,
        "nats.aio.client": jetstream_sync.client,
        "nats.aio.msg": jetstream_sync.msg,
        "nats.aio.subscription": jetstream_sync.subscription,
        "nats": jetstream_sync,
        "nats.errors": jetstream_sync.errors,
        "nats.js": jetstream_sync.jetstream,
        "nats.js.errors": jetstream_sync.errors,
        "nats.js.api": jetstream_sync.jetstream.api,
        "nats.aio.errors": jetstream_sync.errors,  # nats-py's deprecated names are there
    }
    sys.modules.update(modules)  # type: ignore[arg-type]


class ThreadLines:
    """stdout that writes each thread's lines whole: print() writes its arguments, separators
    and newline one by one, so two threads printing at once mix pieces of their lines. The
    ported program's callbacks run on threads; asyncio's never interleave a print."""

    def __init__(self, out: Any) -> None:
        self._out = out
        self._lock = threading.Lock()
        self._parts: Dict[int, str] = {}

    def write(self, text: str) -> int:
        me = threading.get_ident()
        with self._lock:
            pending = self._parts.get(me, "") + text
            head, sep, rest = pending.rpartition("\n")
            if sep:
                self._out.write(head + sep)
            self._parts[me] = rest
        return len(text)

    def flush(self) -> None:
        with self._lock:
            self._out.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._out, name)


def main() -> None:
    which, path = sys.argv[1], sys.argv[2]
    with open(path) as f:
        source = f.read()
    if which == "ours":
        source = delete_await(source)
        alias_nats()
        if os.environ.get("JSS_THREAD_LINES") == "1":
            sys.stdout = ThreadLines(sys.stdout)
    elif which != "nats-py":
        raise SystemExit(f"run.py: nats-py or ours, not {which!r}")
    code = compile(source, path, "exec")
    exec(code, {"__name__": "__main__", "__file__": path})


if __name__ == "__main__":
    main()
