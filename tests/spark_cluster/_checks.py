"""Driver-side helpers: streams, and reading a stream back as a multiset of data."""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any, Dict, Iterable, List

import jetstream_sync as nats

READ_TIMEOUT = 120.0
DUPLICATE_WINDOW = 900.0  # seconds


def new_stream(url: str, prefix: str, **config: Any) -> str:
    """A fresh file stream capturing ``<name lower-cased>.>``, keeping message ids for
    DUPLICATE_WINDOW: a retry later than the window stores its rows again (documented), and
    a loaded machine must not turn that into a failure of these tests."""
    name = f"{prefix}{uuid.uuid4().hex[:8]}".upper()
    config.setdefault("duplicate_window", DUPLICATE_WINDOW)
    with nats.connect(url, name="cluster-test") as nc:
        nc.jetstream().add_stream(name=name, subjects=[f"{name.lower()}.>"], **config)
    return name


def fill(url: str, stream: str, datas: Iterable[bytes], subject: str) -> int:
    n = 0
    with nats.connect(url, name="cluster-test") as nc:
        js = nc.jetstream()
        for data in datas:
            js.publish_async(subject, data)
            n += 1
        js.publish_async_completed(timeout=READ_TIMEOUT)
    return n


def count(url: str, stream: str) -> int:
    with nats.connect(url, name="cluster-test") as nc:
        return int(nc.jetstream().stream_info(stream).state.messages)


def stored(url: str, stream: str) -> Counter[bytes]:
    """Every message of the stream, as a multiset of data (an ordered consumer)."""
    got: List[bytes] = []
    with nats.connect(url, name="cluster-test") as nc:
        js = nc.jetstream()
        total = js.stream_info(stream).state.messages
        oc = js.ordered_consumer(stream)
        deadline = time.monotonic() + READ_TIMEOUT
        try:
            while len(got) < total:
                assert time.monotonic() < deadline, f"read {len(got)} of {total} in time"
                got += [m.data for m in oc.fetch(5000, max_wait=2)]
        finally:
            oc.delete()
    return Counter(got)


def ids(n: int) -> Counter[bytes]:
    return Counter(b"%d" % i for i in range(n))


def assert_exactly_once(got: Counter[bytes], expected: Counter[bytes]) -> None:
    """Every expected row exactly once, by content; the message says what went wrong."""
    lost = expected - got
    extra = got - expected
    assert not lost and not extra, (
        f"{sum(got.values())} messages stored for {sum(expected.values())} rows: "
        f"{sum(lost.values())} rows lost (e.g. {sorted(lost)[:5]}), "
        f"{sum(extra.values())} extra copies (e.g. {sorted(extra)[:5]})"
    )


def read_marks(directory: Path) -> List[Dict[str, Any]]:
    """The marks the executors wrote (see _executor.mark), oldest first."""
    found = [json.loads(p.read_text()) for p in directory.glob("*.json")]
    return sorted(found, key=lambda m: (str(m.get("batch")), m["partition"], m["attempt"]))
