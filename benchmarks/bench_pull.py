"""Pull consumer benchmarks: fetch + explicit ack, jetstream_sync vs nats-py (asyncio).

Usage::

    python benchmarks/bench_pull.py [--quick]
    python -m benchmarks.bench_pull [--quick]
    python benchmarks/bench_pull.py --child fetch --lib ours --batch 100 --n 20000 --runs 3

One embedded nats-server with JetStream on serves every measurement. Each (batch size,
library) pair runs in a fresh child process of this script, so heaps, threads and event loops
never mix, and a child that hangs is cut off: it dumps every thread's stack to stderr shortly
before its hard deadline, and the table shows the failure. Every measured run reads from a
memory stream of its own, preloaded (untimed, always with jetstream_sync's publish_async, on a
connection closed before the clock starts) with N messages and a durable pull consumer with
explicit acks. The clock runs from the first fetch to the flush after the last ack; afterwards
the consumer's info must show N messages delivered and none waiting for an ack. The last form
runs one child in this process against a server of its own (or --url), for profiling.
See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import math
import os
import platform
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

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
    proc_cpu,
    run_interleaved,
    syscall_mark,
)
from _harness import run_child as _run_child

SCRIPT = os.path.abspath(__file__)

MSG_SIZE = 128
PAYLOAD = b"x" * MSG_SIZE
BATCHES = (1, 100, 1000)
CONSUME_MAX = 500  # consume()'s default max_messages: it pulls again at half of it

FETCH_TIMEOUT = 5.0  # one fetch (both libraries' default); the messages are all there already
FLUSH_TIMEOUT = 5.0  # the flush that sees the last acks to the server
RUN_DEADLINE = 60.0  # one measured run's fetch loop, whatever happens
API_TIMEOUT = 10.0  # stream / consumer create, info, delete
PRELOAD_TIMEOUT = 60.0  # the acks of the preloading publish_async
SETTLE_WAIT = 2.0  # after the clock stops: how long consumer info may take to show every ack
SETTLE_POLL = 0.01

LIBS = ("ours", "nats-py", "raw")
LABELS = {"ours": "jetstream_sync", "nats-py": "nats-py", "raw": "raw socket"}
BENCH_NAMES = ("fetch", "consume")
CONSUME_LIBS = ("ours", "raw")  # nats-py 2.16 has no consume()

Run = Dict[str, Any]
BenchFn = Callable[[str, int, int, int], List[Run]]


@dataclass(frozen=True)
class Sizes:
    single: int  # messages per run at batch 1
    batched: int  # messages per run at batch 100 and 1000
    runs: int
    child_timeout: float

    def messages(self, batch: int) -> int:
        return self.single if batch == 1 else self.batched  # consume: batched


FULL = Sizes(single=3_000, batched=20_000, runs=5, child_timeout=150)
QUICK = Sizes(single=1_000, batched=5_000, runs=1, child_timeout=90)


def warmup_size(batch: int) -> int:
    """Messages for the untimed warm-up run every child makes first."""
    return max(200, 2 * batch)


# --- shared measurement helpers -----------------------------------------------------------


def names(lib: str, batch: int, run: int) -> Tuple[str, str, str]:
    """A stream, its subject and its durable consumer, for one run (run -1: the warm-up)."""
    tag = f"pull_{lib.replace('-', '')}_b{batch}_{'warmup' if run < 0 else run}"
    return f"BENCH_{tag}".upper(), f"bench.pull.{tag}.x", f"C_{tag}".upper()


SERVER_PID: Optional[int] = None  # set in a child: the server's CPU time is read from /proc


def _server_cpu() -> Optional[float]:
    """CPU seconds the server process has used so far (Linux), or None."""
    return proc_cpu(SERVER_PID)


class Clock:
    """Wall time of a measured run, with the CPU time this process (every thread) and the
    server used meanwhile: which side was busy."""

    def __init__(self) -> None:
        self.server0 = _server_cpu()
        self.cpu0 = time.process_time()
        syscall_mark("start")
        self.t0 = time.perf_counter()
        self.elapsed = self.cpu = 0.0
        self.server: Optional[float] = None

    def stop(self) -> None:
        self.elapsed = time.perf_counter() - self.t0
        syscall_mark("stop")
        self.cpu = time.process_time() - self.cpu0
        server = _server_cpu()
        if server is not None and self.server0 is not None:
            self.server = server - self.server0


@dataclass
class Counts:
    """What the fetch loop of one run saw."""

    received: int = 0
    acked: int = 0  # ack() calls that returned
    fetches: int = 0
    timeouts: int = 0  # fetches that raised a timeout (none should: the stream is full)
    errors: int = 0  # other failures of fetch, ack or the final flush
    first_error: str = ""


@dataclass
class ConsumerState:
    """The consumer's info once the run is over."""

    delivered: int = -1  # delivered.consumer_seq
    ack_floor: int = -1  # ack_floor.consumer_seq
    ack_pending: int = -1
    redelivered: int = -1
    pending: int = -1  # messages not delivered yet
    settle: float = 0.0  # seconds until the info showed no ack pending (or SETTLE_WAIT)

    @classmethod
    def of(cls, info: Any, settle: float) -> ConsumerState:
        return cls(
            delivered=int(info.delivered.consumer_seq),
            ack_floor=int(info.ack_floor.consumer_seq),
            ack_pending=int(info.num_ack_pending),
            redelivered=int(info.num_redelivered),
            pending=int(info.num_pending),
            settle=settle,
        )


def bench_run(n: int, batch: int, counts: Counts, state: ConsumerState, clock: Clock) -> Run:
    """One measured run. The rate counts only the messages acked."""
    elapsed = clock.elapsed
    return {
        "rate": counts.acked / elapsed if elapsed > 0 else 0.0,
        "seconds": elapsed,
        "client_cpu": clock.cpu,
        "server_cpu": clock.server,
        "expected": n,
        "batch": batch,
        "received": counts.received,
        "acked": counts.acked,
        "fetches": counts.fetches,
        "timeouts": counts.timeouts,
        "errors": counts.errors,
        "first_error": counts.first_error,
        "delivered": state.delivered,
        "ack_floor": state.ack_floor,
        "ack_pending": state.ack_pending,
        "redelivered": state.redelivered,
        "pending": state.pending,
        "settle": state.settle,
    }


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _past_deadline(clock: Clock, counts: Counts) -> None:
    """Name the run deadline as the cause when it passed: the fetch that was cut short by
    it reports a timeout."""
    if clock.elapsed >= RUN_DEADLINE:
        reason = f"the {RUN_DEADLINE:g} s run deadline passed"
        error = counts.first_error
        counts.first_error = reason + (f"; then {error}" if error else "")


def preload(url: str, stream: str, subject: str, durable: str, n: int) -> None:
    """A fresh memory stream holding ``n`` messages and a durable pull consumer with explicit
    acks on it, made on a jetstream_sync connection of its own that is closed on return, so
    nothing of it runs while the clock does. Raises when the stream is not as wanted."""
    import jetstream_sync as nats

    nc = nats.connect(url)
    try:
        js = nc.jetstream(timeout=API_TIMEOUT)
        try:
            js.delete_stream(stream)  # left over by a killed child (--url)
        except nats.StreamNotFoundError:
            pass
        js.add_stream(name=stream, subjects=[subject], storage=nats.StorageType.MEMORY)
        futures = [js.publish_async(subject, PAYLOAD) for _ in range(n)]
        js.publish_async_completed(timeout=PRELOAD_TIMEOUT)
        failed = sum(1 for fut in futures if fut.exception(0) is not None)
        stored = js.stream_info(stream).state.messages
        if failed or stored != n:
            raise RuntimeError(
                f"preloading {stream}: {failed} publishes failed, {stored} of {n} stored"
            )
        js.add_consumer(
            stream,
            durable_name=durable,
            ack_policy=nats.AckPolicy.EXPLICIT,
            max_ack_pending=-1,
            filter_subject=subject,
        )
    finally:
        nc.close()


# --- jetstream_sync -----------------------------------------------------------------------


def _settle_ours(js: Any, stream: str, durable: str) -> ConsumerState:
    """The consumer's info, once it shows no ack pending (the server may still be working
    through acks it has read) or SETTLE_WAIT has passed."""
    started = time.perf_counter()
    waited = 0.0  # stays 0 when the first answer shows every ack
    while True:
        info = js.consumer_info(stream, durable)
        if info.num_ack_pending == 0 or waited >= SETTLE_WAIT:
            return ConsumerState.of(info, waited)
        time.sleep(SETTLE_POLL)
        waited = time.perf_counter() - started


def _run_ours(nc: Any, js: Any, url: str, batch: int, n: int, run: int) -> Run:
    import jetstream_sync as nats

    stream, subject, durable = names("ours", batch, run)
    preload(url, stream, subject, durable, n)
    try:
        psub = js.pull_subscribe(subject, durable=durable, stream=stream)
        fetch = psub.fetch
        received = acked = fetches = timeouts = errors = 0
        first_error = ""
        clock = Clock()
        deadline = clock.t0 + RUN_DEADLINE
        while received < n:
            left = deadline - time.perf_counter()
            if left <= 0:
                break
            fetches += 1
            try:
                msgs = fetch(batch, timeout=min(FETCH_TIMEOUT, left))
            except nats.TimeoutError as exc:
                timeouts += 1
                first_error = first_error or _describe(exc)
                continue
            except nats.NATSError as exc:
                errors += 1
                first_error = first_error or _describe(exc)
                break
            received += len(msgs)
            try:
                for msg in msgs:
                    msg.ack()
                    acked += 1
            except nats.NATSError as exc:
                errors += 1
                first_error = first_error or _describe(exc)
                break
        try:
            nc.flush(FLUSH_TIMEOUT)  # every ack has reached the server
        except nats.NATSError as exc:
            errors += 1
            first_error = first_error or _describe(exc)
        clock.stop()
        counts = Counts(received, acked, fetches, timeouts, errors, first_error)
        _past_deadline(clock, counts)
        state = _settle_ours(js, stream, durable)
        psub.unsubscribe()
    finally:
        js.delete_stream(stream)
    return bench_run(n, batch, counts, state, clock)


def _warm_then_runs(
    url: str, batch: int, n: int, runs: int, one: Callable[[Any, Any, int, int], Run]
) -> List[Run]:
    """``one(nc, js, n, run)`` once untimed at the warm-up size (run -1), then ``runs`` times
    at N, on one jetstream_sync connection for the setup and checks."""
    import jetstream_sync as nats

    nc = nats.connect(url)
    try:
        js = nc.jetstream(timeout=API_TIMEOUT)
        one(nc, js, warmup_size(batch), -1)
        return [one(nc, js, n, i) for i in range(runs)]
    finally:
        nc.close()


def fetch_ours(url: str, batch: int, n: int, runs: int) -> List[Run]:
    return _warm_then_runs(
        url, batch, n, runs, lambda nc, js, k, run: _run_ours(nc, js, url, batch, k, run)
    )


def _run_consume_ours(nc: Any, js: Any, url: str, batch: int, n: int, run: int) -> Run:
    """``js.consumer(stream, durable).consume(cb)``, the callback acking each message, until
    n came; then stop() and a flush. ``batch`` is max_messages."""
    import threading

    import jetstream_sync as nats

    stream, subject, durable = names("ours_consume", batch, run)
    preload(url, stream, subject, durable, n)
    try:
        consumer = js.consumer(stream, durable)
        counts = Counts()
        done = threading.Event()

        def on_msg(msg: Any) -> None:
            counts.received += 1
            msg.ack()
            counts.acked += 1
            if counts.received >= n:
                done.set()

        clock = Clock()
        ctx = consumer.consume(on_msg, max_messages=batch)
        if not done.wait(RUN_DEADLINE):
            counts.errors += 1
            counts.first_error = f"only {counts.received} messages came before the deadline"
        if ctx.error is not None:
            counts.errors += 1
            counts.first_error = counts.first_error or _describe(ctx.error)
        try:
            nc.flush(FLUSH_TIMEOUT)  # every ack has reached the server
        except nats.NATSError as exc:
            counts.errors += 1
            counts.first_error = counts.first_error or _describe(exc)
        clock.stop()
        ctx.stop()
        ctx.wait(API_TIMEOUT)
        _past_deadline(clock, counts)
        state = _settle_ours(js, stream, durable)
    finally:
        js.delete_stream(stream)
    return bench_run(n, batch, counts, state, clock)


def consume_ours(url: str, batch: int, n: int, runs: int) -> List[Run]:
    return _warm_then_runs(
        url, batch, n, runs, lambda nc, js, k, run: _run_consume_ours(nc, js, url, batch, k, run)
    )


# --- nats-py ------------------------------------------------------------------------------


async def _settle_natspy(js: Any, stream: str, durable: str) -> ConsumerState:
    started = time.perf_counter()
    waited = 0.0  # stays 0 when the first answer shows every ack
    while True:
        info = await asyncio.wait_for(js.consumer_info(stream, durable), API_TIMEOUT)
        if info.num_ack_pending == 0 or waited >= SETTLE_WAIT:
            return ConsumerState.of(info, waited)
        await asyncio.sleep(SETTLE_POLL)
        waited = time.perf_counter() - started


async def _run_natspy(nc: Any, js: Any, url: str, batch: int, n: int, run: int) -> Run:
    """nats-py's ack awaits a publish that may wait for room in its write buffer without a
    limit: one wait_for around the whole fetch loop bounds it, without adding a task to
    every call; the loop writes what it counted into ``counts`` even when cancelled."""
    import nats.errors

    stream, subject, durable = names("nats-py", batch, run)
    preload(url, stream, subject, durable, n)  # blocks the event loop: nothing is running
    try:
        psub = await asyncio.wait_for(
            js.pull_subscribe(subject, durable=durable, stream=stream), API_TIMEOUT
        )
        counts = Counts()

        async def fetch_loop(deadline: float, counts: Counts = counts) -> None:
            fetch = psub.fetch
            received = acked = fetches = timeouts = errors = 0
            first_error = ""
            try:
                while received < n:
                    left = deadline - time.perf_counter()
                    if left <= 0:
                        break
                    fetches += 1
                    try:
                        msgs = await fetch(batch, timeout=min(FETCH_TIMEOUT, left))
                    except nats.errors.TimeoutError as exc:
                        timeouts += 1
                        first_error = first_error or _describe(exc)
                        continue
                    except nats.errors.Error as exc:
                        errors += 1
                        first_error = first_error or _describe(exc)
                        break
                    received += len(msgs)
                    try:
                        for msg in msgs:
                            await msg.ack()
                            acked += 1
                    except nats.errors.Error as exc:
                        errors += 1
                        first_error = first_error or _describe(exc)
                        break
                try:
                    await nc.flush(FLUSH_TIMEOUT)  # every ack has reached the server
                except nats.errors.Error as exc:
                    errors += 1
                    first_error = first_error or _describe(exc)
            finally:
                counts.received, counts.acked, counts.fetches = received, acked, fetches
                counts.timeouts, counts.errors = timeouts, errors
                counts.first_error = counts.first_error or first_error

        clock = Clock()
        try:
            await asyncio.wait_for(
                fetch_loop(clock.t0 + RUN_DEADLINE), RUN_DEADLINE + FLUSH_TIMEOUT + 5.0
            )
        except asyncio.TimeoutError:
            counts.errors += 1
            counts.first_error = "the fetch loop was cancelled at its hard deadline"
        clock.stop()
        _past_deadline(clock, counts)
        state = await _settle_natspy(js, stream, durable)
        await asyncio.wait_for(psub.unsubscribe(), API_TIMEOUT)
    finally:
        await asyncio.wait_for(js.delete_stream(stream), API_TIMEOUT)
    return bench_run(n, batch, counts, state, clock)


def fetch_natspy(url: str, batch: int, n: int, runs: int) -> List[Run]:
    async def main() -> List[Run]:
        import nats

        async def on_error(_exc: Exception) -> None:  # keep nats-py from logging to stderr
            pass

        nc = await nats.connect(url, error_cb=on_error)
        try:
            js = nc.jetstream(timeout=API_TIMEOUT)
            await _run_natspy(nc, js, url, batch, warmup_size(batch), -1)
            return [await _run_natspy(nc, js, url, batch, n, i) for i in range(runs)]
        finally:
            await nc.close()

    return asyncio.run(main())


# --- the raw limit: the same work on a bare socket (benchmarks/_raw.py) ---------------------


def _run_raw(js: Any, url: str, loop: str, batch: int, n: int, run: int) -> Run:
    """Preloaded and checked like the others (jetstream_sync, untimed); the pulls and the
    acks on a raw socket, its inbox subscribed before the clock starts (as pull_subscribe).
    ``loop``: "fetch" (fetch(batch) + acks) or "consume" (pull ``batch`` with an expiry and
    idle heartbeats, take each message inline, pull again at half with the acks)."""
    import _raw

    stream, _subject, durable = names("raw" if loop == "fetch" else "raw_consume", batch, run)
    preload(url, stream, _subject, durable, n)
    try:
        with _raw.RawConn(url, timeout=FETCH_TIMEOUT) as conn:
            conn.sub_once(_raw.PULL_INBOX)
            counts = Counts()
            clock = Clock()
            deadline = clock.t0 + RUN_DEADLINE
            try:
                if loop == "fetch":
                    got = _raw.fetch_loop(conn, stream, durable, batch, n, FETCH_TIMEOUT, deadline)
                else:
                    got = _raw.consume_loop(conn, stream, durable, batch, n, deadline)
                received, acked, pulls, short = got
                counts = Counts(received, acked, pulls, short, 0, "")
            except (OSError, _raw.RawError) as exc:
                counts.errors, counts.first_error = 1, _describe(exc)
            clock.stop()
        _past_deadline(clock, counts)
        state = _settle_ours(js, stream, durable)
    finally:
        js.delete_stream(stream)
    return bench_run(n, batch, counts, state, clock)


def fetch_raw(url: str, batch: int, n: int, runs: int) -> List[Run]:
    return _warm_then_runs(
        url, batch, n, runs, lambda nc, js, k, run: _run_raw(js, url, "fetch", batch, k, run)
    )


def consume_raw(url: str, batch: int, n: int, runs: int) -> List[Run]:
    return _warm_then_runs(
        url, batch, n, runs, lambda nc, js, k, run: _run_raw(js, url, "consume", batch, k, run)
    )


BENCHES: Dict[Tuple[str, str], BenchFn] = {
    ("fetch", "ours"): fetch_ours,
    ("fetch", "nats-py"): fetch_natspy,
    ("fetch", "raw"): fetch_raw,
    ("consume", "ours"): consume_ours,
    ("consume", "raw"): consume_raw,
}


def run_in_child(
    bench: str,
    lib: str,
    batch: int,
    url: str,
    n: int,
    runs: int,
    hard_timeout: float,
    server_pid: Optional[int] = None,
) -> List[Run]:
    # A hang ends with every thread's stack on stderr, before the parent kills us.
    faulthandler.dump_traceback_later(max(5.0, hard_timeout - 10.0), exit=True)
    global SERVER_PID
    SERVER_PID = server_pid
    result = BENCHES[(bench, lib)](url, batch, n, runs)
    faulthandler.cancel_dump_traceback_later()
    emit({"runs": result})
    return result


# --- the parent: orchestration and report -------------------------------------------------


def run_child(args: List[str], timeout: float) -> Outcome:
    return _run_child(SCRIPT, args, timeout)


@dataclass
class Row:
    metric: str
    values: Dict[str, Optional[float]]
    fmt: Callable[[Optional[float]], str]
    target: str = "—"
    minimum: Optional[float] = None  # the target: ratio >= this
    warned: bool = False  # some run failed a check: see the notes

    def ratio(self) -> Optional[float]:
        ours, theirs = self.values.get("ours"), self.values.get("nats-py")
        if not ours or not theirs:
            return None
        return ours / theirs

    def verdict(self) -> str:
        ratio = self.ratio()
        if self.minimum is None:
            return "—"
        if ratio is None:
            return "FAIL (no result)"
        verdict = "PASS" if ratio >= self.minimum else "FAIL"
        return f"{verdict} (see warnings)" if self.warned else verdict

    def limit(self) -> Optional[float]:
        """Issue 21: jetstream_sync / the raw-socket loop (1.0 = the limit)."""
        return of_limit(self.values.get("ours"), self.values.get("raw"))


Key = Tuple[str, str]  # (job: "fetch(100)", "consume(500)"; library)
Results = Dict[Key, Outcome]

TARGETS = {1: 2.0, 100: 4.0, 1000: 4.0}


def _jobs() -> List[Tuple[str, str, int, Tuple[str, ...]]]:
    """(job name, benchmark, batch, libraries) in the order they run and are shown."""
    jobs = [(f"fetch({b})", "fetch", b, LIBS) for b in BATCHES]
    return [*jobs, (f"consume({CONSUME_MAX})", "consume", CONSUME_MAX, CONSUME_LIBS)]


def _run_all(sizes: Sizes, url: str, server_pid: Optional[int]) -> Results:
    """Each job in rounds interleaved across the libraries (jetstream_sync, nats-py, raw,
    then again), one fresh child per round."""
    jobs = []
    for name, bench, batch, libs in _jobs():
        args = ["--child", bench, "--batch", str(batch), "--url", url]
        args += ["--n", str(sizes.messages(batch)), "--hard-timeout", str(sizes.child_timeout)]
        if server_pid is not None:
            args += ["--server-pid", str(server_pid)]
        jobs.append((name, libs, args))
    merged = run_interleaved(SCRIPT, jobs, sizes.runs, sizes.child_timeout, LABELS)
    return {(str(key), lib): outcome for (key, lib), outcome in merged.items()}


def _rows(results: Results) -> List[Row]:
    rows: List[Row] = []
    for name, bench, batch, _libs in _jobs():
        values: Dict[str, Optional[float]] = {}
        warned = False
        for lib in LIBS:
            outcome = results.get((name, lib))
            runs = outcome.runs if outcome is not None else []
            values[lib] = median([r["rate"] for r in runs])
            warned = warned or any(run_problems(r) for r in runs)
        if bench == "consume":
            rows.append(
                Row(
                    f"pull consume(cb, max_messages={batch}) + ack each, msgs/s "
                    "(nats-py has no consume)",
                    values,
                    _fmt_int,
                    warned=warned,
                )
            )
            continue
        target = TARGETS[batch]
        rows.append(
            Row(
                f"pull fetch({batch}) + ack each, msgs/s (higher is better)",
                values,
                _fmt_int,
                target=f"≥ {target:g}x",
                minimum=target,
                warned=warned,
            )
        )
    return rows


def _print_header(sizes: Sizes, quick: bool, server_version: str) -> None:
    lines = [
        f"# jetstream_sync pull consumer benchmarks ({'quick' if quick else 'full'})",
        "",
        f"- Python: {platform.python_implementation()} {platform.python_version()}",
        f"- nats-server: {server_version} (embedded, one instance for everything, JetStream on)",
        f"- machine: {_cores()} cores, {_cpu_model()}, {platform.system()} {platform.release()}",
        f"- libraries: jetstream_sync {_version('jetstream-sync')}, nats-py "
        f"{_version('nats-py')} (asyncio, default event loop)",
        f"- sizes: {sizes.single:,} x {MSG_SIZE} B messages per run at batch 1, "
        f"{sizes.batched:,} x {MSG_SIZE} B at batch 100 and 1000",
        f"- every figure is the median of {sizes.runs} round(s), interleaved: jetstream_sync, "
        "nats-py, raw socket, then again; every round is a fresh child process, after an "
        "untimed warm-up",
        "- raw socket: the same work done by a hand-written loop on one blocking socket, no "
        "client library (benchmarks/_raw.py): the practical limit for Python. 'of limit' = "
        f"jetstream_sync / raw; the goal is ≥ {LIMIT_GOAL:g}",
        "- every run reads from a fresh R1 memory stream of its own, preloaded with "
        "jetstream_sync's `publish_async` on a separate connection closed before the clock "
        "starts (both columns), with a durable pull consumer (ack_policy explicit, "
        "max_ack_pending -1); neither the preload nor `pull_subscribe` is timed",
        "- timed: `msgs = psub.fetch(batch)` then `msg.ack()` for each (nats-py: `await "
        "psub.fetch(batch)`, `await msg.ack()`) until N messages came, then a flush "
        "(PING/PONG) so every ack has reached the server",
        f"- consume: `js.consumer(stream, durable).consume(cb, max_messages={CONSUME_MAX})`, "
        "the callback acking each message, timed from the consume() call to the flush after "
        "the last ack (raw: the same pulls, re-pulling at half with the acks in the write)",
        "- checked afterwards: the consumer's info shows N delivered, none pending delivery, "
        "none waiting for an ack and none redelivered",
        "- ratio: jetstream_sync / nats-py; > 1 means jetstream_sync is faster "
        "(truncated to 2 decimals, not rounded)",
        "",
    ]
    print("\n".join(lines))


def _print_table(rows: List[Row]) -> None:
    header = ["metric", *(LABELS[lib] for lib in LIBS), "ratio", "target", "result"]
    header += ["of limit", f"≥ {LIMIT_GOAL:g} of limit"]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join([" --- "] + [" ---: "] * 4 + [" --- "] * 2 + [" ---: ", " --- "]) + "|")
    for row in rows:
        ratio = row.ratio()
        cells = [row.metric] + [row.fmt(row.values.get(lib)) for lib in LIBS]
        # Truncated, not rounded: 1.999 must not show as the 2.00 it fails to reach.
        shown = "n/a" if ratio is None else f"{math.floor(ratio * 100) / 100:.2f}x"
        cells += [shown, row.target, row.verdict()]
        cells += [fmt_share(row.limit()), limit_mark(row.limit())]
        print("| " + " | ".join(cells) + " |")


def run_problems(run: Run) -> List[str]:
    """What went wrong in a run: messages not received or not acked, failed calls, or a
    consumer whose info does not show every message delivered once and acked."""
    n = run["expected"]
    problems = []
    if run["received"] < n:
        problems.append(f"only {run['received']:,} of {n:,} messages received")
    elif run["received"] > n:
        problems.append(f"{run['received']:,} messages received, more than the {n:,} sent")
    if run["acked"] < run["received"]:
        problems.append(f"only {run['acked']:,} of {run['received']:,} received acked")
    if run["timeouts"]:
        problems.append(f"{run['timeouts']:,} fetches timed out")
    if run["errors"]:
        problems.append(f"{run['errors']:,} calls failed")
    if run["delivered"] != n:
        problems.append(f"the consumer delivered {run['delivered']:,}, not {n:,}")
    if run["pending"] != 0:
        problems.append(f"{run['pending']:,} messages not delivered")
    if run["ack_pending"] != 0:
        problems.append(
            f"{run['ack_pending']:,} messages still waiting for an ack "
            f"{run['settle']:.1f} s after the clock stopped"
        )
    elif run["ack_floor"] != n:
        problems.append(f"the ack floor is {run['ack_floor']:,}, not {n:,}")
    if run["redelivered"]:
        problems.append(f"{run['redelivered']:,} messages redelivered")
    if not problems and run["first_error"]:
        problems.append("an error was raised")
    return problems


def _notes(results: Results) -> List[str]:
    notes: List[str] = []
    for (job, lib), outcome in results.items():
        label = f"{job} / {LABELS[lib]}"
        if not outcome.runs:
            continue
        figures = ", ".join(f"{r['rate']:,.0f}" for r in outcome.runs)
        per_msg = ", ".join(f"{r['seconds'] / max(r['acked'], 1) * 1e6:.1f}" for r in outcome.runs)
        note = f"{label}: runs {figures} msgs/s ({per_msg} µs per message)"
        best = max(outcome.runs, key=lambda r: float(r["rate"]))
        busy = f"client CPU {best['client_cpu'] / best['seconds']:.0%}"
        if best.get("server_cpu") is not None:
            busy += f", server CPU {best['server_cpu'] / best['seconds']:.0%}"
        note += f"; best run: {best['fetches']:,} fetches, {busy} of its wall time"
        if best["settle"] > 0:
            note += f"; the server showed every ack {best['settle'] * 1e3:.0f} ms after the clock"
        notes.append(note)
        for i, run in enumerate(outcome.runs, 1):
            problems = run_problems(run)
            if problems:
                detail = f" (first error: {run['first_error']})" if run["first_error"] else ""
                notes.append(
                    f"WARNING {label} run {i}: {'; '.join(problems)}{detail}; "
                    "the rate counts only acked messages"
                )
    return notes


def main_parent(quick: bool) -> int:
    from jetstream_sync.server import NATSServer, find_nats_server

    sizes = QUICK if quick else FULL
    started = time.monotonic()
    with NATSServer(jetstream=True) as srv:
        server_version = _server_version(find_nats_server())
        results = _run_all(sizes, srv.url, srv.pid)
    total = time.monotonic() - started

    _print_header(sizes, quick, server_version)
    _print_table(_rows(results))
    notes = _notes(results)
    if notes:
        print("\nNotes:")
        for note in notes:
            print(f"- {note}")
    failures = [(key, o) for key, o in results.items() if o.error is not None]
    for (job, lib), outcome in failures:
        print(f"\n## {job} / {LABELS[lib]} failed: {outcome.error}\n")
        print("```")
        print("\n".join(outcome.stderr.strip().splitlines()[-80:]))
        print("```")
    print(f"\nTotal time: {total:.0f} s")
    return 1 if failures else 0


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller counts, one run each")
    one = parser.add_argument_group(
        "one benchmark in this process (for profiling; its own server unless --url)"
    )
    one.add_argument("--child", choices=BENCH_NAMES, help="the benchmark")
    one.add_argument("--lib", choices=LIBS, default="ours", help="default: ours")
    one.add_argument(
        "--batch",
        type=int,
        choices=(*BATCHES, CONSUME_MAX),
        default=100,
        help="fetch's batch or consume's max_messages (default: 100)",
    )
    one.add_argument("--n", type=int, help="messages per run (default: the full size)")
    one.add_argument("--runs", type=int, default=1, help="default: 1")
    one.add_argument("--url", help="a JetStream-enabled server to use instead of a new one")
    parser.add_argument("--hard-timeout", type=float, default=120.0, help=argparse.SUPPRESS)
    parser.add_argument("--server-pid", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.child:
        n = args.n or FULL.messages(args.batch)
        if args.url:
            run_in_child(
                args.child,
                args.lib,
                args.batch,
                args.url,
                n,
                args.runs,
                args.hard_timeout,
                args.server_pid,
            )
        else:
            from jetstream_sync.server import NATSServer

            with NATSServer(jetstream=True) as srv:
                run_in_child(
                    args.child,
                    args.lib,
                    args.batch,
                    srv.url,
                    n,
                    args.runs,
                    args.hard_timeout,
                    srv.pid,
                )
        return 0
    return main_parent(args.quick)


if __name__ == "__main__":
    sys.exit(main())
