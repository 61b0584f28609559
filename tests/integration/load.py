"""Load generators and checks for the fault tests (test_cluster.py, test_faults.py).

Each load runs on its own thread, retries what failed until it succeeds or its deadline
passes, and keeps what it saw with the time it saw it, so a test can assert that nothing
was lost and report how long the load stalled around a fault. Set ``JSYNC_FAULT_REPORT``
to a file path to have each test append one JSON line of figures (for the closing table).
"""

from __future__ import annotations

import json
import os
import threading
import time
from concurrent.futures import Future
from typing import Any, Dict, Iterable, List, Optional

import jetstream_sync as nats
from jetstream_sync import AckPolicy, ConsumerConfig
from jetstream_sync.jetstream.context import JetStream


def msg_id(i: int) -> str:
    return f"m{i}"


class AckedPublisher(threading.Thread):
    """Publishes ``count`` messages, each waiting for its PubAck; a publish that fails is
    tried again with the same msg id (the server drops a repeat as a duplicate) until it is
    acked or ``deadline`` seconds have passed."""

    def __init__(self, js: JetStream, subject: str, count: int, deadline: float = 120.0) -> None:
        super().__init__(daemon=True, name="acked-publisher")
        self.js, self.subject, self.count = js, subject, count
        self.deadline = time.monotonic() + deadline
        self.acked: List[int] = []
        self.ack_times: List[float] = []
        self.failures: List[BaseException] = []
        self.stop_event = threading.Event()
        self.winding_down = threading.Event()

    def run(self) -> None:
        for i in range(self.count):
            if self.winding_down.is_set():
                return
            while not self.stop_event.is_set():
                if time.monotonic() > self.deadline:
                    return
                try:
                    self.js.publish(self.subject, str(i).encode(), msg_id=msg_id(i), timeout=2.0)
                except nats.NATSError as exc:
                    self.failures.append(exc)
                    self.stop_event.wait(0.05)  # a retry pace, not a synchronisation
                    continue
                self.acked.append(i)
                self.ack_times.append(time.monotonic())
                break

    def finish(self, timeout: float = 120.0) -> None:
        self.join(timeout)
        assert not self.is_alive(), "publisher did not finish in time"
        assert len(self.acked) == self.count, (len(self.acked), self.count, self.failures[-3:])

    def wind_down(self, timeout: float = 120.0) -> List[int]:
        """For a load that lasts as long as the faults do: stop once the message in hand
        is acked. Returns the acked ids, which are 0..n-1 (each one is retried until it is
        acked, so there is no hole)."""
        self.winding_down.set()
        self.join(timeout)
        assert not self.is_alive(), "publisher did not wind down in time"
        assert self.acked == list(range(len(self.acked))), self.failures[-3:]
        return self.acked


def publish_async_burst(
    js: JetStream, subject: str, ids: Iterable[int], rounds: int = 40
) -> Dict[str, Any]:
    """publish_async every id; republish whatever did not get a PubAck, round after round."""
    todo = list(ids)
    failures: List[BaseException] = []
    acked: List[int] = []
    for _ in range(rounds):
        futures: List[tuple[int, Future[Any]]] = []
        for i in todo:
            try:
                futures.append(
                    (i, js.publish_async(subject, str(i).encode(), msg_id=msg_id(i), timeout=3.0))
                )
            except nats.NATSError as exc:
                failures.append(exc)
                break  # the rest go again next round
        done = {i for i, _ in futures}
        retry = [i for i in todo if i not in done]
        for i, fut in futures:
            try:
                fut.result(timeout=30)
                acked.append(i)
            except (nats.NATSError, TimeoutError) as exc:
                failures.append(exc)
                retry.append(i)
        todo = retry
        if not todo:
            break
        time.sleep(0.2)  # a retry pace while the cluster elects a leader
    return {"acked": acked, "left": todo, "failures": failures}


class Seen:
    """What a consumer handed out: payloads as ints, with the time each came."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.items: List[int] = []
        self.times: List[float] = []

    def add(self, msg: nats.Msg) -> None:
        with self.lock:
            self.items.append(int(msg.data))
            self.times.append(time.monotonic())

    def distinct(self) -> set[int]:
        with self.lock:
            return set(self.items)

    def __len__(self) -> int:
        return len(self.items)


def consume_into(js: JetStream, stream: str, durable: str) -> tuple[Any, Seen]:
    """A durable explicit-ack consume() loop that records what it gets, then acks it."""
    consumer = js.create_or_update_consumer(
        stream, ConsumerConfig(durable_name=durable, ack_policy=AckPolicy.EXPLICIT, ack_wait=5.0)
    )
    seen = Seen()

    def handle(msg: nats.Msg) -> None:
        seen.add(msg)
        msg.ack()

    return consumer.consume(handle, max_messages=100, expires=5.0), seen


def longest_gap(times: List[float], after: float) -> float:
    """The longest stretch without progress from ``after`` on: how long the load stalled."""
    if not times:
        return float("inf")
    marks = [after] + [t for t in times if t >= after]
    return max((b - a for a, b in zip(marks, marks[1:])), default=0.0)


def stream_msg_ids(js: JetStream, stream: str) -> List[str]:
    """Every Nats-Msg-Id in the stream, in stream order (batched direct get)."""
    info = js.stream_info(stream)
    ids: List[str] = []
    seq = info.state.first_seq or 1
    last = info.state.last_seq
    while seq <= last:
        got = 0
        for raw in js.get_msgs(stream, seq=seq, batch=500, timeout=10):
            headers = raw.headers or {}
            ids.append(str(headers.get("Nats-Msg-Id", "")))
            seq = raw.seq + 1
            got += 1
        if got == 0:
            break
    return ids


def report(row: Dict[str, Any], path: Optional[str] = None) -> None:
    """Append one line of figures for the closing note, when asked to."""
    path = path or os.environ.get("JSYNC_FAULT_REPORT")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(row, default=str) + "\n")
