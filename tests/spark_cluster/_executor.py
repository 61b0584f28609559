"""Functions that run in the executors' Python workers (``mapInArrow`` bodies and what they
call). The test modules register this module with cloudpickle by value: the executors cannot
import the tests.

Each function notes its attempts in a ``marks`` directory shared by every process of the
machine (``p<partition>-a<attempt>-<event>.json``: executor id, pid, first ids seen), so a
test can tell which executor ran what and in which order it read its rows, and can wait for
a task to reach a given point instead of sleeping.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional

WAIT = 120.0  # the longest an executor-side wait may last before it gives up

Batches = Iterator[Any]
MapFn = Callable[[Batches], Batches]


def executor_id() -> str:
    """The id of the executor this Python worker belongs to: the ``--executor-id`` of the
    nearest CoarseGrainedExecutorBackend JVM among its ancestors."""
    pid = os.getpid()
    for _ in range(8):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = [a.decode(errors="replace") for a in f.read().split(b"\0")]
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
        if "org.apache.spark.executor.CoarseGrainedExecutorBackend" in args:
            return args[args.index("--executor-id") + 1]
        if parent <= 1:
            break
        pid = parent
    return "?"


def task() -> Dict[str, Any]:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return {
        "partition": ctx.partitionId(),
        "attempt": ctx.attemptNumber(),  # counts from 0 again in a resubmitted stage
        "batch": ctx.getLocalProperty("streaming.sql.batchId"),
        "executor": executor_id(),
        "pid": os.getpid(),
    }


def mark(marks: str, info: Dict[str, Any], event: str, **extra: Any) -> None:
    """Write a mark atomically (rename): a reader never sees half a file."""
    batch = f"b{info['batch']}-" if info.get("batch") is not None else ""
    name = f"{batch}p{info['partition']}-a{info['attempt']}-{event}.json"
    tmp = Path(marks) / f".{name}.{os.getpid()}"
    tmp.write_text(json.dumps({**info, "event": event, **extra}))
    os.replace(tmp, Path(marks) / name)


def stored(url: str, stream: str, subject: str) -> int:
    """How many messages of ``subject`` the stream holds (a fresh connection)."""
    import jetstream_sync as nats

    with nats.connect(url, name="cluster-test-probe") as nc:
        info = nc.jetstream().stream_info(stream, subjects_filter=subject)
        return int((info.state.subjects or {}).get(subject, 0))


def wait_stored(url: str, stream: str, subject: str, n: int) -> None:
    deadline = time.monotonic() + WAIT
    while stored(url, stream, subject) < n:
        if time.monotonic() > deadline:
            raise RuntimeError(f"test: {subject} never held {n} messages")
        time.sleep(0.1)


def once(marks: str, name: str) -> bool:
    """True for the first caller only, across every process and attempt (a resubmitted
    stage numbers its task attempts from 0 again, so the attempt number cannot tell)."""
    try:
        os.close(os.open(os.path.join(marks, f"once-{name}"), os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        return False
    return True


def wait_for_file(path: str, present: bool = True) -> None:
    """Block until ``path`` exists (or no longer does); raise after WAIT seconds."""
    deadline = time.monotonic() + WAIT
    while os.path.exists(path) != present:
        if time.monotonic() > deadline:
            raise RuntimeError(f"test: gave up waiting for {path} (present={present})")
        time.sleep(0.1)


def spread(marks: str, executors: int = 2) -> MapFn:
    """A ``mapInArrow`` body (rows unchanged) for a map stage: each task marks ``map`` with
    its executor, then waits until ``executors`` distinct executors ran a task of the stage,
    so the map outputs land on every executor (else a retry on another executor could fetch
    every block remotely, in the same order as the first attempt)."""

    def run(batches: Batches) -> Batches:
        info = task()
        mark(marks, info, "map")
        deadline = time.monotonic() + WAIT
        while len(_map_executors(marks)) < executors and time.monotonic() < deadline:
            time.sleep(0.05)
        yield from batches

    return run


def _map_executors(marks: str) -> set[str]:
    found = set()
    for path in Path(marks).glob("*-map.json"):
        try:
            found.add(json.loads(path.read_text())["executor"])
        except (OSError, ValueError, KeyError):
            pass
    return found


def as_messages(
    subject_of: Callable[[Dict[str, Any]], str],
    marks: str,
    pause: Optional[Callable[[Dict[str, Any], int], None]] = None,
    order_of: int = 0,
    reverse_retries: bool = False,
) -> MapFn:
    """A ``mapInArrow`` body: (id bigint) or (data binary) rows become (subject, data) with
    ``data`` the decimal id (or the data as it is); marks ``start`` (with the first ids),
    ``order`` (a digest of the first ``order_of`` rows in the order written, to compare the
    orders of two attempts) and ``end``; after each output batch calls
    ``pause(task, rows so far)``, which may block or raise. With ``reverse_retries`` a
    retried attempt reverses each batch it reads, so its rows sit at other positions than
    in the first attempt whatever order Spark fetched the shuffle blocks in."""

    def run(batches: Batches) -> Batches:
        import hashlib

        import pyarrow as pa
        import pyarrow.compute as pc

        info = task()
        subject = subject_of(info)
        seen = 0
        first: Optional[List[Any]] = None
        order = hashlib.blake2b(digest_size=16)
        for batch in batches:
            if reverse_retries and info["attempt"] > 0:
                batch = batch.take(pa.array(range(batch.num_rows - 1, -1, -1)))
            column = batch.column(0)
            if first is None:
                first = column.slice(0, 5).to_pylist()
                mark(marks, info, "start", first=[str(v) for v in first])
            if seen < order_of:
                head = column.slice(0, order_of - seen).to_pylist()
                order.update(repr(head).encode())
                if seen + len(head) >= order_of:
                    mark(marks, info, "order", digest=order.hexdigest())
            if pa.types.is_integer(column.type):
                data = pc.cast(pc.cast(column, pa.string()), pa.binary())
            else:
                data = column
            subjects = pa.array([subject] * batch.num_rows, pa.string())
            yield pa.RecordBatch.from_arrays([subjects, data], names=["subject", "data"])
            seen += batch.num_rows
            if pause is not None:
                pause(info, seen)
        mark(marks, info, "end", rows=seen)

    return run
