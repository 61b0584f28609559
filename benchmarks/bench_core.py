"""Core NATS benchmarks: jetstream_sync vs nats-py (asyncio) vs pynats2 (threaded).

Usage::

    python benchmarks/bench_core.py [--quick]
    python -m benchmarks.bench_core [--quick]
    python benchmarks/bench_core.py --memory-only ours|nats-py [--url nats://...]

One embedded nats-server serves every measurement. Each (benchmark, library) pair runs in a
fresh child process of this script, so heaps, threads and event loops never mix, and a child
that hangs is cut off: it dumps every thread's stack to stderr shortly before its hard
deadline, and the table shows the failure. Messages for the subscribe and memory benchmarks,
and the replies for request/reply, always come from a separate helper process running
jetstream_sync, so only the receiving (or requesting) side differs between the columns.
See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import gc
import math
import os
import platform
import select
import subprocess
import sys
import threading
import time
import tracemalloc
import warnings
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Awaitable, Callable, Dict, List, Optional, Tuple

from _harness import (
    LIMIT_GOAL,
    Outcome,
    _cores,
    _cpu_model,
    _fmt_int,
    _server_version,
    _version,
    emit,
    fmt_share,
    limit_mark,
    median,
    of_limit,
    parse_result,
    run_interleaved,
)
from _harness import run_child as _run_child

SCRIPT = os.path.abspath(__file__)

MSG_SIZE = 128
REQ_SIZE = 16
PAYLOAD = b"x" * MSG_SIZE
REQ_PAYLOAD = b"r" * REQ_SIZE
WARMUP_PUBLISHES = 2_000
WARMUP_REQUESTS = 200
PENDING_SLACK = 1_024  # pending_msgs_limit = expected messages + this: nothing may be dropped
PENDING_BYTES = 1 << 30

HELPER_READY_TIMEOUT = 20.0  # a helper process imports, connects and subscribes
STARTUP_WAIT = 20.0  # for the first message after telling the publisher to go
IDLE_WAIT = 3.0  # no new message for this long: the rest are not coming (dropped)
RUN_DEADLINE = 60.0  # one measured run, whatever happens
FLUSH_TIMEOUT = 60.0
REQUEST_TIMEOUT = 2.0
PUBLISHER_EXIT_TIMEOUT = 60.0
RESPONDER_MAX_LIFETIME = 600.0

MEMORY_TARGET_BYTES = 340.0

LIBS = ("ours", "nats-py", "pynats2", "raw")
LABELS = {"ours": "jetstream_sync", "nats-py": "nats-py", "pynats2": "pynats2", "raw": "raw socket"}

Run = Dict[str, float]
BenchFn = Callable[[str, int, int], List[Run]]


@dataclass(frozen=True)
class Sizes:
    publish: int
    subscribe: int
    requests: int
    memory: int
    runs: int
    child_timeout: float


FULL = Sizes(
    publish=200_000, subscribe=100_000, requests=5_000, memory=50_000, runs=3, child_timeout=150
)
QUICK = Sizes(
    publish=50_000, subscribe=30_000, requests=1_000, memory=50_000, runs=1, child_timeout=90
)


# --- helper processes (always jetstream_sync) ---------------------------------------------


def _spawn(args: List[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, SCRIPT, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def _stop(proc: subprocess.Popen[str], grace: float = 5.0) -> None:
    if proc.stdin is not None and not proc.stdin.closed:
        try:
            proc.stdin.close()
        except OSError:
            pass
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(grace)
    if proc.stdout is not None:
        proc.stdout.close()


def _await_ready(proc: subprocess.Popen[str], role: str, timeout: float) -> None:
    assert proc.stdout is not None
    readable, _, _ = select.select([proc.stdout], [], [], timeout)
    line = proc.stdout.readline() if readable else ""
    if line.strip() != "READY":
        proc.kill()
        proc.wait(5)
        raise RuntimeError(
            f"{role} helper process not ready within {timeout:.0f} s "
            f"(read {line!r}, exit code {proc.returncode})"
        )


class Publisher:
    """A separate process that publishes ``n`` 128-byte messages with jetstream_sync.

    It connects, says READY, and publishes only when told to go, so the receiving side can
    take its baseline (memory) or arm its timer before anything arrives.
    """

    def __init__(self, url: str, subject: str, n: int) -> None:
        self._proc = _spawn(["--publisher", "--url", url, "--subject", subject, "--n", str(n)])
        _await_ready(self._proc, "publisher", HELPER_READY_TIMEOUT)

    def go(self) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.write("go\n")
        self._proc.stdin.flush()

    @property
    def finished(self) -> bool:
        return self._proc.poll() is not None

    def result(self, timeout: float = PUBLISHER_EXIT_TIMEOUT) -> Dict[str, Any]:
        """Wait for the publisher to finish; its own publish+flush rate."""
        out, _ = self._proc.communicate(timeout=timeout)
        result = parse_result(out)
        if self._proc.returncode != 0 or result is None:
            raise RuntimeError(f"publisher failed with exit code {self._proc.returncode}")
        return result

    def close(self) -> None:
        _stop(self._proc)

    def __enter__(self) -> Publisher:
        return self

    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.close()


class Responder:
    """A separate process answering requests on ``subject`` with jetstream_sync (echo)."""

    def __init__(self, url: str, subject: str) -> None:
        self._proc = _spawn(["--responder", "--url", url, "--subject", subject])
        _await_ready(self._proc, "responder", HELPER_READY_TIMEOUT)

    def __enter__(self) -> Responder:
        return self

    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        _stop(self._proc)


def role_publisher(url: str, subject: str, n: int) -> None:
    import jetstream_sync as nats

    nc = nats.connect(url)
    try:
        print("READY", flush=True)
        if sys.stdin.readline().strip() != "go":
            return  # the receiving side gave up before starting
        publish = nc.publish
        t0 = time.perf_counter()
        for _ in range(n):
            publish(subject, PAYLOAD)
        nc.flush(timeout=FLUSH_TIMEOUT)
        elapsed = time.perf_counter() - t0
    finally:
        nc.close()
    emit({"rate": n / elapsed, "seconds": elapsed})


def role_responder(url: str, subject: str) -> None:
    import jetstream_sync as nats

    nc = nats.connect(url)
    try:
        nc.subscribe(subject, cb=lambda msg: msg.respond(msg.data))
        nc.flush(timeout=10)
        print("READY", flush=True)
        stop = threading.Event()

        def watch_stdin() -> None:  # EOF: the requester is done (or died)
            sys.stdin.read()
            stop.set()

        threading.Thread(target=watch_stdin, daemon=True).start()
        stop.wait(RESPONDER_MAX_LIFETIME)
    finally:
        nc.close()


# --- shared measurement helpers -----------------------------------------------------------


class Tally:
    """Callback deliveries: how many, and when the first and the latest arrived."""

    __slots__ = ("count", "first", "last", "target")

    def __init__(self, target: int) -> None:
        self.count = 0
        self.first = 0.0
        self.last = 0.0
        self.target = target

    def hit(self) -> bool:
        """Count one message; True when the target is reached."""
        now = time.perf_counter()
        self.count += 1
        if self.count == 1:
            self.first = now
        self.last = now
        return self.count >= self.target


class Progress:
    """Decides when to stop waiting: done, stalled, or out of time."""

    def __init__(self) -> None:
        self.deadline = time.monotonic() + RUN_DEADLINE
        self._seen = -1
        self._since = time.monotonic()

    def should_stop(self, count: int) -> bool:
        now = time.monotonic()
        if count != self._seen:
            self._seen, self._since = count, now
        elif now - self._since > (STARTUP_WAIT if count == 0 else IDLE_WAIT):
            return True
        return now > self.deadline


def receive_run(
    received: int, expected: int, t_first: float, t_last: float, dropped: int, pub: Dict[str, Any]
) -> Run:
    span = t_last - t_first
    rate = (received - 1) / span if received > 1 and span > 0 else 0.0
    return {
        "rate": rate,
        "received": received,
        "expected": expected,
        "dropped": dropped,
        "publisher_rate": float(pub.get("rate", 0.0)),
    }


def latency_run(samples_ns: List[int]) -> Run:
    ordered = sorted(samples_ns)

    def pct(q: float) -> float:
        return ordered[max(0, math.ceil(q * len(ordered)) - 1)] / 1000.0

    return {"p50_us": pct(0.50), "p99_us": pct(0.99), "mean_us": sum(ordered) / len(ordered) / 1e3}


def memory_run(before: int, after: int, queued: int, expected: int, dropped: int) -> Run:
    return {
        "bytes_per_msg": (after - before) / queued if queued else float("nan"),
        "queued": queued,
        "expected": expected,
        "dropped": dropped,
    }


def _natspy_error_sink() -> Tuple[List[Exception], Callable[[Exception], Awaitable[None]]]:
    seen: List[Exception] = []

    async def on_error(exc: Exception) -> None:
        seen.append(exc)

    return seen, on_error


def _slow_consumer_count(seen: List[Exception]) -> int:
    from nats.errors import SlowConsumerError

    return sum(isinstance(e, SlowConsumerError) for e in seen)


def _import_pynats2() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pkg_resources deprecation noise
        import pynats2  # type: ignore[import-untyped]

    return pynats2


# --- 1. publish ---------------------------------------------------------------------------


def publish_ours(url: str, n: int, runs: int) -> List[Run]:
    import jetstream_sync as nats

    nc = nats.connect(url)
    try:
        subject = "bench.publish"
        for _ in range(WARMUP_PUBLISHES):
            nc.publish(subject, PAYLOAD)
        nc.flush(timeout=10)
        out: List[Run] = []
        for _ in range(runs):
            publish = nc.publish
            t0 = time.perf_counter()
            for _ in range(n):
                publish(subject, PAYLOAD)
            nc.flush(timeout=FLUSH_TIMEOUT)
            out.append({"rate": n / (time.perf_counter() - t0)})
        return out
    finally:
        nc.close()


def publish_natspy(url: str, n: int, runs: int) -> List[Run]:
    async def main() -> List[Run]:
        import nats

        _, on_error = _natspy_error_sink()
        nc = await nats.connect(url, error_cb=on_error)
        try:
            subject = "bench.publish"
            for _ in range(WARMUP_PUBLISHES):
                await nc.publish(subject, PAYLOAD)
            await nc.flush(timeout=10)
            out: List[Run] = []
            for _ in range(runs):
                publish = nc.publish
                t0 = time.perf_counter()
                for _ in range(n):
                    await publish(subject, PAYLOAD)
                await nc.flush(timeout=int(FLUSH_TIMEOUT))
                out.append({"rate": n / (time.perf_counter() - t0)})
            return out
        finally:
            await nc.close()

    return asyncio.run(main())


def publish_pynats2(url: str, n: int, runs: int) -> List[Run]:
    """pynats2 has no flush: a message to a subject it subscribes to itself comes back only
    after the server has processed everything published before it on this connection."""
    pynats2 = _import_pynats2()
    client = pynats2.NATSClient(url, socket_timeout=1.0)
    client.connect()
    try:
        subject, sentinel = "bench.publish", "bench.publish.sentinel"
        echoed = threading.Event()
        client.subscribe(sentinel, callback=lambda _msg: echoed.set())

        def round_trip() -> None:
            echoed.clear()
            client.publish(sentinel, payload=b"")
            if not echoed.wait(FLUSH_TIMEOUT):
                raise RuntimeError(f"pynats2: sentinel not echoed within {FLUSH_TIMEOUT} s")

        for _ in range(WARMUP_PUBLISHES):
            client.publish(subject, payload=PAYLOAD)
        round_trip()
        out: List[Run] = []
        for _ in range(runs):
            publish = client.publish
            t0 = time.perf_counter()
            for _ in range(n):
                publish(subject, payload=PAYLOAD)
            round_trip()
            out.append({"rate": n / (time.perf_counter() - t0)})
        return out
    finally:
        client.close()


# --- 2. subscribe through next_msg --------------------------------------------------------


def next_msg_ours(url: str, n: int, runs: int) -> List[Run]:
    import jetstream_sync as nats

    nc = nats.connect(url)
    try:
        out: List[Run] = []
        for i in range(runs):
            subject = f"bench.next_msg.{i}"
            sub = nc.subscribe(
                subject, pending_msgs_limit=n + PENDING_SLACK, pending_bytes_limit=PENDING_BYTES
            )
            nc.flush(timeout=10)
            with Publisher(url, subject, n) as pub:
                pub.go()
                next_msg = sub.next_msg
                next_msg(timeout=STARTUP_WAIT)
                t_first = t_last = time.perf_counter()
                deadline = t_first + RUN_DEADLINE
                received = 1
                while received < n:
                    try:
                        next_msg(timeout=IDLE_WAIT)
                    except nats.TimeoutError:
                        break
                    received += 1
                    t_last = time.perf_counter()
                    if not received & 0xFFF and t_last > deadline:
                        break
                pub_result = pub.result()
            out.append(receive_run(received, n, t_first, t_last, sub.dropped, pub_result))
            sub.unsubscribe()
        return out
    finally:
        nc.close()


def next_msg_natspy(url: str, n: int, runs: int) -> List[Run]:
    async def main() -> List[Run]:
        import nats
        from nats.errors import TimeoutError as NatsTimeoutError

        seen, on_error = _natspy_error_sink()
        nc = await nats.connect(url, error_cb=on_error)
        try:
            out: List[Run] = []
            for i in range(runs):
                subject = f"bench.next_msg.{i}"
                sub = await nc.subscribe(
                    subject,
                    pending_msgs_limit=n + PENDING_SLACK,
                    pending_bytes_limit=PENDING_BYTES,
                )
                await nc.flush(timeout=10)
                slow_before = _slow_consumer_count(seen)
                with Publisher(url, subject, n) as pub:
                    pub.go()
                    next_msg = sub.next_msg
                    await next_msg(timeout=STARTUP_WAIT)
                    t_first = t_last = time.perf_counter()
                    deadline = t_first + RUN_DEADLINE
                    received = 1
                    while received < n:
                        try:
                            await next_msg(timeout=IDLE_WAIT)
                        except NatsTimeoutError:
                            break
                        received += 1
                        t_last = time.perf_counter()
                        if not received & 0xFFF and t_last > deadline:
                            break
                    pub_result = pub.result()
                dropped = _slow_consumer_count(seen) - slow_before
                out.append(receive_run(received, n, t_first, t_last, dropped, pub_result))
                await sub.unsubscribe()
            return out
        finally:
            await nc.close()

    return asyncio.run(main())


# --- 3. subscribe through a callback ------------------------------------------------------


def _wait_threaded(tally: Tally, done: threading.Event) -> None:
    progress = Progress()
    while not done.wait(0.1):
        if progress.should_stop(tally.count):
            return


def callback_ours(url: str, n: int, runs: int) -> List[Run]:
    import jetstream_sync as nats

    nc = nats.connect(url)
    try:
        out: List[Run] = []
        for i in range(runs):
            subject = f"bench.callback.{i}"
            tally, done = Tally(n), threading.Event()

            def on_msg(_msg: nats.Msg, tally: Tally = tally, done: threading.Event = done) -> None:
                if tally.hit():
                    done.set()

            sub = nc.subscribe(
                subject,
                cb=on_msg,
                pending_msgs_limit=n + PENDING_SLACK,
                pending_bytes_limit=PENDING_BYTES,
            )
            nc.flush(timeout=10)
            with Publisher(url, subject, n) as pub:
                pub.go()
                _wait_threaded(tally, done)
                pub_result = pub.result()
            out.append(
                receive_run(tally.count, n, tally.first, tally.last, sub.dropped, pub_result)
            )
            sub.unsubscribe()
        return out
    finally:
        nc.close()


def callback_natspy(url: str, n: int, runs: int) -> List[Run]:
    async def main() -> List[Run]:
        import nats
        from nats.aio.msg import Msg

        seen, on_error = _natspy_error_sink()
        nc = await nats.connect(url, error_cb=on_error)
        try:
            out: List[Run] = []
            for i in range(runs):
                subject = f"bench.callback.{i}"
                tally, done = Tally(n), asyncio.Event()

                async def on_msg(
                    _msg: Msg, tally: Tally = tally, done: asyncio.Event = done
                ) -> None:
                    if tally.hit():
                        done.set()

                sub = await nc.subscribe(
                    subject,
                    cb=on_msg,
                    pending_msgs_limit=n + PENDING_SLACK,
                    pending_bytes_limit=PENDING_BYTES,
                )
                await nc.flush(timeout=10)
                slow_before = _slow_consumer_count(seen)
                with Publisher(url, subject, n) as pub:
                    pub.go()
                    progress = Progress()
                    while not done.is_set() and not progress.should_stop(tally.count):
                        try:
                            await asyncio.wait_for(done.wait(), 0.1)
                        except asyncio.TimeoutError:
                            pass
                    pub_result = pub.result()
                dropped = _slow_consumer_count(seen) - slow_before
                out.append(
                    receive_run(tally.count, n, tally.first, tally.last, dropped, pub_result)
                )
                await sub.unsubscribe()
            return out
        finally:
            await nc.close()

    return asyncio.run(main())


def callback_pynats2(url: str, n: int, runs: int) -> List[Run]:
    """pynats2 runs callbacks on a pool of 3 worker threads, so the count takes a lock."""
    pynats2 = _import_pynats2()
    client = pynats2.NATSClient(url, socket_timeout=1.0)
    client.connect()
    try:
        out: List[Run] = []
        for i in range(runs):
            subject = f"bench.callback.{i}"
            tally, done, lock = Tally(n), threading.Event(), threading.Lock()

            def on_msg(
                _msg: Any,
                tally: Tally = tally,
                done: threading.Event = done,
                lock: threading.Lock = lock,
            ) -> None:
                with lock:
                    if tally.hit():
                        done.set()

            sub = client.subscribe(subject, callback=on_msg)
            # Its SUB is fire-and-forget: a message on another subscribed subject that comes
            # back proves the server has processed the SUB sent before it.
            ready = threading.Event()
            probe = client.subscribe(f"{subject}.ready", callback=lambda _m, r=ready: r.set())
            client.publish(f"{subject}.ready", payload=b"")
            if not ready.wait(10):
                raise RuntimeError("pynats2: subscription not confirmed within 10 s")
            client.unsubscribe(probe)
            with Publisher(url, subject, n) as pub:
                pub.go()
                _wait_threaded(tally, done)
                pub_result = pub.result()
            out.append(receive_run(tally.count, n, tally.first, tally.last, 0, pub_result))
            client.unsubscribe(sub)
        return out
    finally:
        client.close()


# --- 4. request / reply -------------------------------------------------------------------

REQ_SUBJECT = "bench.request"


def request_ours(url: str, n: int, runs: int) -> List[Run]:
    import jetstream_sync as nats

    with Responder(url, REQ_SUBJECT):
        nc = nats.connect(url)
        try:
            request = nc.request
            for _ in range(WARMUP_REQUESTS):
                request(REQ_SUBJECT, REQ_PAYLOAD, timeout=REQUEST_TIMEOUT)
            samples: List[int] = []
            clock = time.perf_counter_ns
            for _ in range(n):
                t0 = clock()
                request(REQ_SUBJECT, REQ_PAYLOAD, timeout=REQUEST_TIMEOUT)
                samples.append(clock() - t0)
            return [latency_run(samples)]
        finally:
            nc.close()


def request_natspy(url: str, n: int, runs: int) -> List[Run]:
    async def main() -> List[Run]:
        import nats

        _, on_error = _natspy_error_sink()
        nc = await nats.connect(url, error_cb=on_error)
        try:
            request = nc.request
            for _ in range(WARMUP_REQUESTS):
                await request(REQ_SUBJECT, REQ_PAYLOAD, timeout=REQUEST_TIMEOUT)
            samples: List[int] = []
            clock = time.perf_counter_ns
            for _ in range(n):
                t0 = clock()
                await request(REQ_SUBJECT, REQ_PAYLOAD, timeout=REQUEST_TIMEOUT)
                samples.append(clock() - t0)
            return [latency_run(samples)]
        finally:
            await nc.close()

    with Responder(url, REQ_SUBJECT):
        return asyncio.run(main())


def request_pynats2(url: str, n: int, runs: int) -> List[Run]:
    pynats2 = _import_pynats2()
    with Responder(url, REQ_SUBJECT):
        client = pynats2.NATSClient(url, socket_timeout=1.0)
        client.connect()
        try:
            request = client.request
            for _ in range(WARMUP_REQUESTS):
                request(REQ_SUBJECT, payload=REQ_PAYLOAD, timeout=REQUEST_TIMEOUT)
            samples: List[int] = []
            clock = time.perf_counter_ns
            for _ in range(n):
                t0 = clock()
                request(REQ_SUBJECT, payload=REQ_PAYLOAD, timeout=REQUEST_TIMEOUT)
                samples.append(clock() - t0)
            return [latency_run(samples)]
        finally:
            client.close()


# --- 5. memory per queued message ---------------------------------------------------------

MEM_SUBJECT = "bench.memory"


def memory_ours(url: str, n: int, runs: int) -> List[Run]:
    import jetstream_sync as nats

    nc = nats.connect(url)
    try:
        sub = nc.subscribe(
            MEM_SUBJECT, pending_msgs_limit=n + PENDING_SLACK, pending_bytes_limit=PENDING_BYTES
        )
        nc.flush(timeout=10)
        with Publisher(url, MEM_SUBJECT, n) as pub:
            gc.collect()
            tracemalloc.start()
            before = tracemalloc.get_traced_memory()[0]
            pub.go()
            progress = Progress()
            while sub.pending_msgs < n and not progress.should_stop(sub.pending_msgs):
                time.sleep(0.01)
            pub.result()
            queued = sub.pending_msgs
            gc.collect()
            after = tracemalloc.get_traced_memory()[0]
            tracemalloc.stop()
        return [memory_run(before, after, queued, n, sub.dropped)]
    finally:
        nc.close()


def memory_natspy(url: str, n: int, runs: int) -> List[Run]:
    async def main() -> List[Run]:
        import nats

        seen, on_error = _natspy_error_sink()
        nc = await nats.connect(url, error_cb=on_error)
        try:
            sub = await nc.subscribe(
                MEM_SUBJECT,
                pending_msgs_limit=n + PENDING_SLACK,
                pending_bytes_limit=PENDING_BYTES,
            )
            await nc.flush(timeout=10)
            with Publisher(url, MEM_SUBJECT, n) as pub:
                gc.collect()
                tracemalloc.start()
                before = tracemalloc.get_traced_memory()[0]
                pub.go()
                progress = Progress()
                while sub.pending_msgs < n and not progress.should_stop(sub.pending_msgs):
                    await asyncio.sleep(0.01)
                pub.result()
                queued = sub.pending_msgs
                gc.collect()
                after = tracemalloc.get_traced_memory()[0]
                tracemalloc.stop()
            return [memory_run(before, after, queued, n, _slow_consumer_count(seen))]
        finally:
            await nc.close()

    return asyncio.run(main())


# --- the raw limit: the same work on a bare socket (benchmarks/_raw.py) ---------------------


def publish_raw(url: str, n: int, runs: int) -> List[Run]:
    import _raw

    with _raw.RawConn(url) as conn:
        subject = "bench.publish"
        _raw.publish(conn, subject, PAYLOAD, WARMUP_PUBLISHES)
        out: List[Run] = []
        for _ in range(runs):
            t0 = time.perf_counter()
            _raw.publish(conn, subject, PAYLOAD, n)
            out.append({"rate": n / (time.perf_counter() - t0)})
        return out


def receive_raw(url: str, n: int, runs: int, bench: str) -> List[Run]:
    """The limit of both subscribe rows: one inline read loop (parse each MSG line, read its
    payload, count it), timed from the first message to the last like the others."""
    import _raw

    with _raw.RawConn(url, timeout=IDLE_WAIT) as conn:
        out: List[Run] = []
        for i in range(runs):
            subject = f"bench.{bench}.{i}"
            sid = conn.sub(subject)
            conn.flush()
            with Publisher(url, subject, n) as pub:
                pub.go()
                deadline = time.perf_counter() + RUN_DEADLINE
                received, t_first, t_last = _raw.receive(conn, n, STARTUP_WAIT, IDLE_WAIT, deadline)
                pub_result = pub.result()
            conn.sock.sendall(f"UNSUB {sid}\r\n".encode())
            out.append(receive_run(received, n, t_first, t_last, 0, pub_result))
        return out


def next_msg_raw(url: str, n: int, runs: int) -> List[Run]:
    return receive_raw(url, n, runs, "next_msg")


def callback_raw(url: str, n: int, runs: int) -> List[Run]:
    return receive_raw(url, n, runs, "callback")


def request_raw(url: str, n: int, runs: int) -> List[Run]:
    import _raw

    with Responder(url, REQ_SUBJECT), _raw.RawConn(url, timeout=REQUEST_TIMEOUT) as conn:
        _raw.request_loop(conn, REQ_SUBJECT, REQ_PAYLOAD, WARMUP_REQUESTS)
        return [latency_run(_raw.request_loop(conn, REQ_SUBJECT, REQ_PAYLOAD, n))]


BENCHES: Dict[Tuple[str, str], BenchFn] = {
    ("publish", "ours"): publish_ours,
    ("publish", "nats-py"): publish_natspy,
    ("publish", "pynats2"): publish_pynats2,
    ("next_msg", "ours"): next_msg_ours,
    ("next_msg", "nats-py"): next_msg_natspy,
    ("callback", "ours"): callback_ours,
    ("callback", "nats-py"): callback_natspy,
    ("callback", "pynats2"): callback_pynats2,
    ("request", "ours"): request_ours,
    ("request", "nats-py"): request_natspy,
    ("request", "pynats2"): request_pynats2,
    ("memory", "ours"): memory_ours,
    ("memory", "nats-py"): memory_natspy,
    ("publish", "raw"): publish_raw,
    ("next_msg", "raw"): next_msg_raw,
    ("callback", "raw"): callback_raw,
    ("request", "raw"): request_raw,
}


def run_in_child(
    bench: str, lib: str, url: str, n: int, runs: int, hard_timeout: float
) -> List[Run]:
    # A hang ends with every thread's stack on stderr, before the parent kills us.
    faulthandler.dump_traceback_later(max(5.0, hard_timeout - 10.0), exit=True)
    result = BENCHES[(bench, lib)](url, n, runs)
    faulthandler.cancel_dump_traceback_later()
    emit({"runs": result})
    return result


# --- the parent: orchestration and report -------------------------------------------------


def run_child(args: List[str], timeout: float) -> Outcome:
    return _run_child(SCRIPT, args, timeout)


def _fmt_1(x: Optional[float]) -> str:
    return "n/a" if x is None else f"{x:,.1f}"


@dataclass
class Row:
    metric: str
    values: Dict[str, Optional[float]]
    fmt: Callable[[Optional[float]], str]
    higher_is_better: bool = True
    target: str = "—"
    check: Optional[Callable[[float, float], bool]] = None  # (ratio, ours) -> pass?

    def ratio(self) -> Optional[float]:
        ours, theirs = self.values.get("ours"), self.values.get("nats-py")
        if not ours or not theirs:
            return None
        return ours / theirs if self.higher_is_better else theirs / ours

    def verdict(self) -> str:
        ratio, ours = self.ratio(), self.values.get("ours")
        if self.check is None:
            return "—"
        if ratio is None or ours is None:
            return "FAIL (no result)"
        return "PASS" if self.check(ratio, ours) else "FAIL"

    def limit(self) -> Optional[float]:
        """Issue 21: jetstream_sync as a share of the raw-socket loop (1.0 = the limit)."""
        return of_limit(self.values.get("ours"), self.values.get("raw"), self.higher_is_better)


Results = Dict[Tuple[str, str], Outcome]


def _run_all(sizes: Sizes, url: str) -> Results:
    """Every benchmark in rounds interleaved across the libraries (jetstream_sync, nats-py,
    pynats2, raw, then again), one fresh child per round; memory: one child per library."""
    common = ["--url", url, "--hard-timeout", str(sizes.child_timeout)]
    jobs = [
        ("publish", LIBS, ["--child", "publish", "--n", str(sizes.publish), *common]),
        (
            "next_msg",
            ("ours", "nats-py", "raw"),
            ["--child", "next_msg", "--n", str(sizes.subscribe), *common],
        ),
        ("callback", LIBS, ["--child", "callback", "--n", str(sizes.subscribe), *common]),
        ("request", LIBS, ["--child", "request", "--n", str(sizes.requests), *common]),
    ]
    results: Results = run_interleaved(SCRIPT, jobs, sizes.runs, sizes.child_timeout, LABELS)
    for lib in ("ours", "nats-py"):
        print(f"  running {'memory':<22} {LABELS[lib]:<15}", end="", file=sys.stderr, flush=True)
        args = ["--memory-only", lib, "--url", url, "--n", str(sizes.memory)]
        args += ["--hard-timeout", str(sizes.child_timeout)]
        outcome = run_child(args, sizes.child_timeout)
        results[("memory", lib)] = outcome
        status = "ok" if outcome.error is None else f"ERROR: {outcome.error}"
        print(f" {outcome.seconds:5.1f} s  {status}", file=sys.stderr)
    return results


def _rows(results: Results) -> List[Row]:
    def values(bench: str, key: str) -> Dict[str, Any]:
        """The median of the rounds, per library."""
        picked: Dict[str, Any] = {}
        for lib in LIBS:
            outcome = results.get((bench, lib))
            picked[lib] = median([r[key] for r in outcome.runs]) if outcome else None
        return picked

    return [
        Row(
            "core publish, msgs/s (higher is better)",
            values("publish", "rate"),
            _fmt_int,
            higher_is_better=True,
            target="≥ 2.5x",
            check=lambda ratio, _ours: ratio >= 2.5,
        ),
        Row(
            "subscribe via next_msg, msgs/s (higher is better)",
            values("next_msg", "rate"),
            _fmt_int,
            higher_is_better=True,
            target="≥ 8x",
            check=lambda ratio, _ours: ratio >= 8.0,
        ),
        Row(
            "subscribe via callback, msgs/s (higher is better)",
            values("callback", "rate"),
            _fmt_int,
            higher_is_better=True,
        ),
        Row(
            "request/reply p50, µs (lower is better)",
            values("request", "p50_us"),
            _fmt_1,
            higher_is_better=False,
            target="≥ 1.0x",
            check=lambda ratio, _ours: ratio >= 1.0,
        ),
        Row(
            "request/reply p99, µs (lower is better)",
            values("request", "p99_us"),
            _fmt_1,
            higher_is_better=False,
        ),
        Row(
            f"memory, bytes per queued {MSG_SIZE} B msg (lower is better)",
            values("memory", "bytes_per_msg"),
            _fmt_1,
            higher_is_better=False,
            target=f"ours ≤ {MEMORY_TARGET_BYTES:.0f} B",
            check=lambda _ratio, ours: ours <= MEMORY_TARGET_BYTES,
        ),
    ]


def _print_header(sizes: Sizes, quick: bool, server_version: str) -> None:
    lines = [
        f"# jetstream_sync core benchmarks ({'quick' if quick else 'full'})",
        "",
        f"- Python: {platform.python_implementation()} {platform.python_version()}",
        f"- nats-server: {server_version} (embedded, one instance for everything, JetStream off)",
        f"- machine: {_cores()} cores, {_cpu_model()}, {platform.system()} {platform.release()}",
        f"- libraries: jetstream_sync {_version('jetstream-sync')}, nats-py "
        f"{_version('nats-py')} (asyncio, default event loop), pynats2 {_version('pynats2')}",
        f"- sizes: publish {sizes.publish:,} x {MSG_SIZE} B; subscribe {sizes.subscribe:,} x "
        f"{MSG_SIZE} B; request {sizes.requests:,} x {REQ_SIZE} B after {WARMUP_REQUESTS} "
        f"warm-up; memory {sizes.memory:,} x {MSG_SIZE} B",
        f"- every figure is the median of {sizes.runs} round(s), interleaved: jetstream_sync, "
        "nats-py, pynats2, raw socket, then again; every round runs in a fresh child process",
        "- raw socket: the same work done by a hand-written loop on one blocking socket, no "
        "client library (benchmarks/_raw.py): the practical limit for Python. "
        f"'of limit' = jetstream_sync / raw (latency: raw / jetstream_sync); the goal is "
        f"≥ {LIMIT_GOAL:g}",
        "- publish: timed from the first publish to the end of a flush (PING/PONG); pynats2 "
        "has no flush, so its clock stops when a message it publishes to a subject it "
        "subscribes to itself comes back",
        "- subscribe: for every column the messages come from a separate process publishing "
        "with jetstream_sync, so only the receive side differs; timed from the first message "
        "received to the last",
        "- request/reply: for every column the responder is a separate process running "
        "jetstream_sync (echo, callback subscription); sequential requests",
        "- memory: tracemalloc in a separate process per library; heap growth from before "
        "publishing to when all messages sit in the subscription's pending queue, / messages",
        "- ratio: throughput = jetstream_sync / nats-py; latency and memory (lower is better) "
        "= nats-py / jetstream_sync. Either way > 1 means jetstream_sync is better "
        "(truncated to 2 decimals, not rounded)",
        "",
    ]
    print("\n".join(lines))


def _print_table(rows: List[Row]) -> None:
    header = ["metric", *(LABELS[lib] for lib in LIBS), "ratio", "target", "result"]
    header += ["of limit", f"≥ {LIMIT_GOAL:g} of limit"]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join([" --- "] + [" ---: "] * 5 + [" --- "] * 2 + [" ---: ", " --- "]) + "|")
    for row in rows:
        ratio = row.ratio()
        cells = [row.metric] + [row.fmt(row.values.get(lib)) for lib in LIBS]
        # Truncated, not rounded: 2.499 must not show as the 2.50 it fails to reach.
        shown = "n/a" if ratio is None else f"{math.floor(ratio * 100) / 100:.2f}x"
        cells += [shown, row.target, row.verdict()]
        limit = row.limit()
        cells += [fmt_share(limit), limit_mark(limit) if row.values.get("raw") else "—"]
        print("| " + " | ".join(cells) + " |")


def main_parent(quick: bool) -> int:
    from jetstream_sync.server import NATSServer, find_nats_server

    sizes = QUICK if quick else FULL
    started = time.monotonic()
    with NATSServer(jetstream=False) as srv:
        server_version = _server_version(find_nats_server())
        results = _run_all(sizes, srv.url)
    total = time.monotonic() - started

    _print_header(sizes, quick, server_version)
    _print_table(_rows(results))
    notes = _notes(results)
    if notes:
        print("\nNotes:")
        for note in notes:
            print(f"- {note}")
    failures = [(key, o) for key, o in results.items() if o.error is not None]
    for (bench, lib), outcome in failures:
        print(f"\n## {bench} / {LABELS[lib]} failed: {outcome.error}\n")
        print("```")
        print("\n".join(outcome.stderr.strip().splitlines()[-80:]))
        print("```")
    print(f"\nTotal time: {total:.0f} s")
    return 1 if failures else 0


def _notes(results: Dict[Tuple[str, str], Outcome]) -> List[str]:
    notes: List[str] = []
    for (bench, lib), outcome in results.items():
        label = f"{bench} / {LABELS[lib]}"
        if bench in ("publish", "next_msg", "callback") and outcome.runs:
            figures = ", ".join(f"{r['rate']:,.0f}" for r in outcome.runs)
            note = f"{label}: runs {figures} msgs/s"
            pub_rates = [r["publisher_rate"] for r in outcome.runs if r.get("publisher_rate")]
            if pub_rates:
                rates = ", ".join(f"{r:,.0f}" for r in pub_rates)
                note += f" (the publisher process meanwhile sent at {rates} msgs/s)"
            notes.append(note)
        for i, run in enumerate(outcome.runs, 1):
            expected = run.get("expected")
            got = run.get("received", run.get("queued"))
            if expected is not None and got is not None and got < expected:
                notes.append(
                    f"WARNING {label} run {i}: only {got:,.0f} of {expected:,.0f} messages "
                    f"arrived ({run.get('dropped', 0):,.0f} reported dropped); the figure "
                    "counts only those received"
                )
            pub_rate = run.get("publisher_rate")
            if pub_rate and run.get("rate", 0.0) > 0.85 * pub_rate:
                notes.append(
                    f"{label} run {i}: receive rate {run['rate']:,.0f} msgs/s is close to the "
                    f"publisher's own rate ({pub_rate:,.0f} msgs/s): possibly publisher-bound"
                )
        if bench == "request" and outcome.runs:
            run = outcome.runs[0]
            notes.append(
                f"{label}: p50 {run['p50_us']:.1f} µs, p99 {run['p99_us']:.1f} µs, "
                f"mean {run['mean_us']:.1f} µs"
            )
    return notes


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller counts, one run each")
    parser.add_argument(
        "--memory-only",
        choices=("ours", "nats-py"),
        help="run only the memory benchmark for one library (own server unless --url)",
    )
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--runs", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--child", choices=sorted({b for b, _ in BENCHES}), help=argparse.SUPPRESS)
    parser.add_argument("--lib", choices=LIBS, help=argparse.SUPPRESS)
    parser.add_argument("--hard-timeout", type=float, default=120.0, help=argparse.SUPPRESS)
    parser.add_argument("--publisher", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--responder", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--subject", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.publisher:
        role_publisher(args.url, args.subject, args.n)
        return 0
    if args.responder:
        role_responder(args.url, args.subject)
        return 0
    if args.child:
        run_in_child(args.child, args.lib, args.url, args.n, args.runs, args.hard_timeout)
        return 0
    if args.memory_only:
        n = args.n or FULL.memory
        if args.url:
            runs = run_in_child("memory", args.memory_only, args.url, n, 1, args.hard_timeout)
        else:
            from jetstream_sync.server import NATSServer

            with NATSServer(jetstream=False) as srv:
                runs = run_in_child("memory", args.memory_only, srv.url, n, 1, args.hard_timeout)
        run = runs[0]
        print(
            f"{LABELS[args.memory_only]}: {run['bytes_per_msg']:.1f} bytes per queued "
            f"{MSG_SIZE} B message ({run['queued']:,.0f} of {run['expected']:,.0f} queued, "
            f"{run['dropped']:,.0f} dropped)",
            file=sys.stderr,
        )
        return 0
    return main_parent(args.quick)


if __name__ == "__main__":
    sys.exit(main())
