"""Push consumer benchmarks: callback and next_msg, jetstream_sync vs nats-py (asyncio).

Usage::

    python benchmarks/bench_push.py [--quick]
    python -m benchmarks.bench_push [--quick]
    python benchmarks/bench_push.py --child callback --lib ours --n 50000 --runs 3

One embedded nats-server with JetStream on serves every measurement. Each (mode, library)
pair runs in a fresh child process of this script, so heaps, threads and event loops never
mix, and a child that hangs is cut off: it dumps every thread's stack to stderr shortly
before its hard deadline, and the table shows the failure. Every measured run reads from a
memory stream of its own, preloaded (untimed, always with jetstream_sync's publish_async, on
a connection closed before the clock starts) with N messages, through an ephemeral push
consumer with ack policy none, flow control on and a 1 s idle heartbeat, made by
``js.subscribe``. The clock runs from the subscribe call to the N-th message handed to the
callback (``callback``) or returned by ``next_msg`` (``next_msg``); afterwards the consumer's
info must show N delivered and nothing pending, and no message beyond the N-th may arrive.
The last form runs one child in this process against a server of its own (or --url), for
profiling. See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import math
import os
import platform
import sys
import threading
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
MODES = ("callback", "next_msg")

IDLE_HEARTBEAT = 1.0  # the consumer's idle heartbeat (both libraries), seconds
NEXT_TIMEOUT = 5.0  # one next_msg; the messages are all in the stream already
RUN_DEADLINE = 60.0  # one measured run, whatever happens
API_TIMEOUT = 10.0  # stream create, info, delete
PRELOAD_TIMEOUT = 60.0  # the acks of the preloading publish_async
EXTRA_WAIT = 0.2  # after the clock stops: how long to watch for messages beyond the N-th
PENDING_SLACK = 1_024  # pending_msgs_limit = N + this (both): nothing may be dropped
PENDING_BYTES = 1 << 30
WARMUP = 2_000  # messages of the untimed warm-up run every child makes first

LIBS = ("ours", "nats-py", "raw")
LABELS = {"ours": "jetstream_sync", "nats-py": "nats-py", "raw": "raw socket"}

Run = Dict[str, Any]
BenchFn = Callable[[str, int, int], List[Run]]


@dataclass(frozen=True)
class Sizes:
    messages: int  # per run
    runs: int
    child_timeout: float


FULL = Sizes(messages=50_000, runs=5, child_timeout=240)
QUICK = Sizes(messages=10_000, runs=3, child_timeout=120)


# --- shared measurement helpers -----------------------------------------------------------


def names(lib: str, mode: str, run: int) -> Tuple[str, str]:
    """A stream and its subject, for one run (run -1: the warm-up)."""
    tag = f"push_{lib.replace('-', '')}_{mode.replace('_', '')}_{'warmup' if run < 0 else run}"
    return f"BENCH_{tag}".upper(), f"bench.push.{tag}.x"


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
    """What one run saw."""

    received: int = 0  # messages handed out when the clock stopped
    extra: int = 0  # messages handed out after that, within EXTRA_WAIT (there should be none)
    timeouts: int = 0  # next_msg calls that timed out (none should: the stream is full)
    errors: int = 0  # other failures, and errors reported through error_cb during the run
    first_error: str = ""


@dataclass
class ConsumerState:
    """The consumer's info once the run is over."""

    delivered: int = -1  # delivered.consumer_seq
    stream_seq: int = -1  # delivered.stream_seq
    pending: int = -1  # messages not delivered yet
    redelivered: int = -1

    @classmethod
    def of(cls, info: Any) -> ConsumerState:
        return cls(
            delivered=int(info.delivered.consumer_seq),
            stream_seq=int(info.delivered.stream_seq),
            pending=int(info.num_pending),
            redelivered=int(info.num_redelivered),
        )


def bench_run(n: int, mode: str, counts: Counts, state: ConsumerState, clock: Clock) -> Run:
    """One measured run. The rate counts the messages handed out before the clock stopped
    (at most N)."""
    elapsed = clock.elapsed
    return {
        "rate": min(counts.received, n) / elapsed if elapsed > 0 else 0.0,
        "seconds": elapsed,
        "client_cpu": clock.cpu,
        "server_cpu": clock.server,
        "expected": n,
        "mode": mode,
        "received": counts.received,
        "extra": counts.extra,
        "timeouts": counts.timeouts,
        "errors": counts.errors,
        "first_error": counts.first_error,
        "delivered": state.delivered,
        "stream_seq": state.stream_seq,
        "pending": state.pending,
        "redelivered": state.redelivered,
    }


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


class ErrorSink:
    """What error_cb reported (heartbeat alarms, sequence gaps, slow consumers...)."""

    def __init__(self) -> None:
        self.seen: List[BaseException] = []

    def __call__(self, exc: BaseException) -> None:
        self.seen.append(exc)

    def since(self, mark: int, counts: Counts) -> None:
        """Add what was reported since ``mark`` (an earlier len(seen)) to ``counts``."""
        new = self.seen[mark:]
        if new:
            counts.errors += len(new)
            counts.first_error = counts.first_error or f"error_cb: {_describe(new[0])}"


def _past_deadline(clock: Clock, counts: Counts) -> None:
    if clock.elapsed >= RUN_DEADLINE:
        reason = f"the {RUN_DEADLINE:g} s run deadline passed"
        error = counts.first_error
        counts.first_error = reason + (f"; then {error}" if error else "")


def preload(url: str, stream: str, subject: str, n: int) -> None:
    """A fresh memory stream holding ``n`` messages, made on a jetstream_sync connection of
    its own that is closed on return, so nothing of it runs while the clock does. Raises
    when the stream is not as wanted."""
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
    finally:
        nc.close()


# --- jetstream_sync -----------------------------------------------------------------------


def _run_ours(js: Any, sink: ErrorSink, url: str, mode: str, n: int, run: int) -> Run:
    import jetstream_sync as nats

    stream, subject = names("ours", mode, run)
    preload(url, stream, subject, n)
    try:
        config = nats.ConsumerConfig(ack_policy=nats.AckPolicy.NONE)
        counts = Counts()
        mark = len(sink.seen)
        if mode == "callback":
            seen = 0
            done = threading.Event()

            def cb(_msg: Any) -> None:  # one dispatcher thread: no lock needed
                nonlocal seen
                seen += 1
                if seen == n:
                    done.set()

            clock = Clock()
            sub = js.subscribe(
                subject,
                cb=cb,
                config=config,
                idle_heartbeat=IDLE_HEARTBEAT,
                flow_control=True,
                pending_msgs_limit=n + PENDING_SLACK,
                pending_bytes_limit=PENDING_BYTES,
            )
            done.wait(RUN_DEADLINE)
            clock.stop()
            counts.received = seen
            state = ConsumerState.of(sub.consumer_info())
            time.sleep(EXTRA_WAIT)
            counts.extra = seen - counts.received
        else:
            received = timeouts = errors = 0
            first_error = ""
            clock = Clock()
            sub = js.subscribe(
                subject,
                config=config,
                idle_heartbeat=IDLE_HEARTBEAT,
                flow_control=True,
                pending_msgs_limit=n + PENDING_SLACK,
                pending_bytes_limit=PENDING_BYTES,
            )
            next_msg = sub.next_msg
            deadline = clock.t0 + RUN_DEADLINE
            while received < n:
                try:
                    next_msg(timeout=NEXT_TIMEOUT)
                except nats.TimeoutError as exc:
                    timeouts += 1
                    first_error = first_error or _describe(exc)
                    if time.perf_counter() > deadline:
                        break
                    continue
                except nats.NATSError as exc:
                    errors += 1
                    first_error = first_error or _describe(exc)
                    break
                received += 1
                if not received & 0xFFF and time.perf_counter() > deadline:
                    break
            clock.stop()
            counts.received, counts.timeouts = received, timeouts
            counts.errors, counts.first_error = errors, first_error
            state = ConsumerState.of(sub.consumer_info())
            while True:  # anything beyond the N-th?
                try:
                    next_msg(timeout=EXTRA_WAIT)
                except nats.TimeoutError:
                    break
                except nats.NATSError as exc:
                    counts.errors += 1
                    counts.first_error = counts.first_error or _describe(exc)
                    break
                counts.extra += 1
        sink.since(mark, counts)
        _past_deadline(clock, counts)
        sub.unsubscribe()
    finally:
        js.delete_stream(stream)
    return bench_run(n, mode, counts, state, clock)


def bench_ours(url: str, mode: str, n: int, runs: int) -> List[Run]:
    import jetstream_sync as nats

    sink = ErrorSink()
    nc = nats.connect(url, error_cb=sink)
    try:
        js = nc.jetstream(timeout=API_TIMEOUT)
        _run_ours(js, sink, url, mode, WARMUP, -1)
        return [_run_ours(js, sink, url, mode, n, i) for i in range(runs)]
    finally:
        nc.close()


# --- nats-py ------------------------------------------------------------------------------


async def _run_natspy(js: Any, sink: ErrorSink, url: str, mode: str, n: int, run: int) -> Run:
    """One wait_for around the whole receive loop bounds it, without adding a task to every
    call; the loop writes what it counted into ``counts`` even when cancelled."""
    import nats.errors
    import nats.js.api

    stream, subject = names("nats-py", mode, run)
    preload(url, stream, subject, n)  # blocks the event loop: nothing is running
    try:
        # ack_policy="none", as the enum (a str enum: the same JSON) for the type checker
        config = nats.js.api.ConsumerConfig(ack_policy=nats.js.api.AckPolicy.NONE)
        counts = Counts()
        mark = len(sink.seen)
        if mode == "callback":
            seen = 0
            done = asyncio.Event()

            async def cb(_msg: Any) -> None:
                nonlocal seen
                seen += 1
                if seen == n:
                    done.set()

            clock = Clock()
            sub = await asyncio.wait_for(
                js.subscribe(
                    subject,
                    cb=cb,
                    config=config,
                    idle_heartbeat=IDLE_HEARTBEAT,
                    flow_control=True,
                    manual_ack=True,
                    pending_msgs_limit=n + PENDING_SLACK,
                    pending_bytes_limit=PENDING_BYTES,
                ),
                API_TIMEOUT,
            )
            try:
                left = clock.t0 + RUN_DEADLINE - time.perf_counter()
                await asyncio.wait_for(done.wait(), max(0.0, left))
            except asyncio.TimeoutError:
                pass
            clock.stop()
            counts.received = seen
            info = await asyncio.wait_for(sub.consumer_info(), API_TIMEOUT)
            state = ConsumerState.of(info)
            await asyncio.sleep(EXTRA_WAIT)
            counts.extra = seen - counts.received
        else:
            clock = Clock()
            sub = await asyncio.wait_for(
                js.subscribe(
                    subject,
                    config=config,
                    idle_heartbeat=IDLE_HEARTBEAT,
                    flow_control=True,
                    pending_msgs_limit=n + PENDING_SLACK,
                    pending_bytes_limit=PENDING_BYTES,
                ),
                API_TIMEOUT,
            )

            async def receive_loop(deadline: float, counts: Counts = counts) -> None:
                next_msg = sub.next_msg
                received = timeouts = errors = 0
                first_error = ""
                try:
                    while received < n:
                        try:
                            await next_msg(timeout=NEXT_TIMEOUT)
                        except nats.errors.TimeoutError as exc:
                            timeouts += 1
                            first_error = first_error or _describe(exc)
                            if time.perf_counter() > deadline:
                                break
                            continue
                        except nats.errors.Error as exc:
                            errors += 1
                            first_error = first_error or _describe(exc)
                            break
                        received += 1
                        if not received & 0xFFF and time.perf_counter() > deadline:
                            break
                finally:
                    counts.received, counts.timeouts = received, timeouts
                    counts.errors += errors
                    counts.first_error = counts.first_error or first_error

            try:
                await asyncio.wait_for(
                    receive_loop(clock.t0 + RUN_DEADLINE), RUN_DEADLINE + NEXT_TIMEOUT + 5.0
                )
            except asyncio.TimeoutError:
                counts.errors += 1
                counts.first_error = "the receive loop was cancelled at its hard deadline"
            clock.stop()
            info = await asyncio.wait_for(sub.consumer_info(), API_TIMEOUT)
            state = ConsumerState.of(info)
            while True:  # anything beyond the N-th?
                try:
                    await sub.next_msg(timeout=EXTRA_WAIT)
                except nats.errors.TimeoutError:
                    break
                except nats.errors.Error as exc:
                    counts.errors += 1
                    counts.first_error = counts.first_error or _describe(exc)
                    break
                counts.extra += 1
        sink.since(mark, counts)
        _past_deadline(clock, counts)
        await asyncio.wait_for(sub.unsubscribe(), API_TIMEOUT)
    finally:
        await asyncio.wait_for(js.delete_stream(stream), API_TIMEOUT)
    return bench_run(n, mode, counts, state, clock)


def bench_natspy(url: str, mode: str, n: int, runs: int) -> List[Run]:
    async def main() -> List[Run]:
        import nats

        sink = ErrorSink()

        async def on_error(exc: Exception) -> None:  # keeps nats-py from logging to stderr
            sink(exc)

        nc = await nats.connect(url, error_cb=on_error)
        try:
            js = nc.jetstream(timeout=API_TIMEOUT)
            await _run_natspy(js, sink, url, mode, WARMUP, -1)
            return [await _run_natspy(js, sink, url, mode, n, i) for i in range(runs)]
        finally:
            await nc.close()

    return asyncio.run(main())


# --- the raw limit: the same work on a bare socket (benchmarks/_raw.py) ---------------------


def _run_raw(js: Any, url: str, mode: str, n: int, run: int) -> Run:
    """Preloaded and checked like the others (jetstream_sync, untimed). Timed on a raw
    socket, as for the others from the subscribe: the stream looked up by subject, the
    deliver subject subscribed, the consumer created, then an inline read loop answering
    flow control. Both modes compare against this one loop."""
    import _raw

    stream, subject = names("raw", mode, run)
    preload(url, stream, subject, n)
    try:
        counts = Counts()
        with _raw.RawConn(url, timeout=NEXT_TIMEOUT) as conn:
            clock = Clock()
            try:
                found, consumer, received, _replies = _raw.push_loop(
                    conn, subject, n, IDLE_HEARTBEAT, clock.t0 + RUN_DEADLINE
                )
                counts.received = received
            except (OSError, _raw.RawError, ValueError) as exc:
                found, consumer = stream, ""
                counts.errors, counts.first_error = 1, _describe(exc)
            clock.stop()
            if consumer:
                state = ConsumerState.of(js.consumer_info(found, consumer))
            else:
                state = ConsumerState()
            counts.extra = _raw.drain_extra(conn, EXTRA_WAIT)
        _past_deadline(clock, counts)
    finally:
        js.delete_stream(stream)
    return bench_run(n, mode, counts, state, clock)


def bench_raw(url: str, mode: str, n: int, runs: int) -> List[Run]:
    import jetstream_sync as nats

    nc = nats.connect(url)
    try:
        js = nc.jetstream(timeout=API_TIMEOUT)
        _run_raw(js, url, mode, WARMUP, -1)
        return [_run_raw(js, url, mode, n, i) for i in range(runs)]
    finally:
        nc.close()


BENCHES: Dict[str, Callable[[str, str, int, int], List[Run]]] = {
    "ours": bench_ours,
    "nats-py": bench_natspy,
    "raw": bench_raw,
}


def run_in_child(
    mode: str,
    lib: str,
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
    result = BENCHES[lib](url, mode, n, runs)
    faulthandler.cancel_dump_traceback_later()
    emit({"runs": result})
    return result


# --- the parent: orchestration and report -------------------------------------------------


def run_child(args: List[str], timeout: float) -> Outcome:
    return _run_child(SCRIPT, args, timeout)


Key = Tuple[str, str]  # (mode, library)
Results = Dict[Key, Outcome]

METRICS = {
    "callback": "push `cb=` callback, msgs/s (higher is better)",
    "next_msg": "push `next_msg` loop, msgs/s (higher is better)",
}


def _run_all(sizes: Sizes, url: str, server_pid: Optional[int]) -> Results:
    """Each mode in rounds interleaved across the libraries (jetstream_sync, nats-py, raw,
    then again), one fresh child per round."""
    jobs = []
    for mode in MODES:
        args = ["--child", mode, "--url", url, "--n", str(sizes.messages)]
        args += ["--hard-timeout", str(sizes.child_timeout)]
        if server_pid is not None:
            args += ["--server-pid", str(server_pid)]
        jobs.append((mode, LIBS, args))
    return run_interleaved(SCRIPT, jobs, sizes.runs, sizes.child_timeout, LABELS)


def run_problems(run: Run) -> List[str]:
    """What went wrong in a run: not N messages handed out, failed calls or reported
    errors, or a consumer whose info does not show exactly N delivered once."""
    n = run["expected"]
    problems = []
    if run["received"] < n:
        problems.append(f"only {run['received']:,} of {n:,} messages received")
    elif run["received"] > n:
        problems.append(f"{run['received']:,} messages received, more than the {n:,} sent")
    if run["extra"]:
        problems.append(f"{run['extra']:,} more messages after the N-th")
    if run["timeouts"]:
        problems.append(f"{run['timeouts']:,} next_msg calls timed out")
    if run["errors"]:
        problems.append(f"{run['errors']:,} errors")
    if run["delivered"] != n:
        problems.append(f"the consumer delivered {run['delivered']:,}, not {n:,}")
    if run["stream_seq"] != n:
        problems.append(f"the consumer's last stream sequence is {run['stream_seq']:,}, not {n:,}")
    if run["pending"] != 0:
        problems.append(f"{run['pending']:,} messages not delivered")
    if run["redelivered"]:
        problems.append(f"{run['redelivered']:,} messages redelivered")
    if not problems and run["first_error"]:
        problems.append("an error was raised")
    return problems


@dataclass
class Row:
    metric: str
    values: Dict[str, Optional[float]]
    warned: bool = False  # some run failed a check: see the notes
    failed: bool = False  # some child produced no result

    def ratio(self) -> Optional[float]:
        ours, theirs = self.values.get("ours"), self.values.get("nats-py")
        if not ours or not theirs:
            return None
        return ours / theirs

    def verdict(self) -> str:
        if self.failed or any(v is None for v in self.values.values()):
            return "FAIL (no result)"
        if self.warned:
            return "FAIL (see warnings)"
        return "ok"

    def limit(self) -> Optional[float]:
        """Issue 21: jetstream_sync / the raw-socket loop (1.0 = the limit)."""
        return of_limit(self.values.get("ours"), self.values.get("raw"))


def _rows(results: Results) -> List[Row]:
    rows: List[Row] = []
    for mode in MODES:
        values: Dict[str, Optional[float]] = {}
        warned = failed = False
        for lib in LIBS:
            outcome = results.get((mode, lib))
            runs = outcome.runs if outcome is not None else []
            values[lib] = median([r["rate"] for r in runs])
            warned = warned or any(run_problems(r) for r in runs)
            failed = failed or outcome is None or outcome.error is not None
        rows.append(Row(METRICS[mode], values, warned, failed))
    return rows


def _print_header(sizes: Sizes, quick: bool, server_version: str) -> None:
    lines = [
        f"# jetstream_sync push consumer benchmarks ({'quick' if quick else 'full'})",
        "",
        f"- Python: {platform.python_implementation()} {platform.python_version()}",
        f"- nats-server: {server_version} (embedded, one instance for everything, JetStream on)",
        f"- machine: {_cores()} cores, {_cpu_model()}, {platform.system()} {platform.release()}",
        f"- libraries: jetstream_sync {_version('jetstream-sync')}, nats-py "
        f"{_version('nats-py')} (asyncio, default event loop)",
        f"- sizes: {sizes.messages:,} x {MSG_SIZE} B messages per run",
        f"- every figure is the median of {sizes.runs} round(s), interleaved: jetstream_sync, "
        "nats-py, raw socket, then again; every round is a fresh child process, after an "
        f"untimed warm-up run ({WARMUP:,} messages) on a throwaway stream",
        "- raw socket: the same work done by a hand-written loop on one blocking socket, no "
        "client library (benchmarks/_raw.py): the practical limit for Python; both modes "
        f"compare against the same loop. 'of limit' = jetstream_sync / raw; the goal is "
        f"≥ {LIMIT_GOAL:g}",
        "- every run reads from a fresh R1 memory stream of its own, preloaded with "
        "jetstream_sync's `publish_async` on a separate connection closed before the clock "
        "starts (both columns); the preload is not timed",
        "- timed: from `js.subscribe(subject, ...)` (an ephemeral push consumer: ack policy "
        f"none, flow control on, idle heartbeat {IDLE_HEARTBEAT:g} s; the stream looked up by "
        "subject, the consumer created) until the N-th message reached the callback "
        "(`callback`; nats-py: an `async def`, `manual_ack=True`) or came out of "
        "`sub.next_msg(timeout)` (`next_msg`; nats-py: `await sub.next_msg(timeout)`)",
        f"- checked afterwards: exactly N messages handed out (none more within "
        f"{EXTRA_WAIT * 1e3:.0f} ms), the consumer's info shows N delivered, stream sequence N, "
        "none pending and none redelivered, and error_cb saw nothing",
        "- ratio: jetstream_sync / nats-py; > 1 means jetstream_sync is faster "
        "(truncated to 2 decimals, not rounded)",
        "",
    ]
    print("\n".join(lines))


def _print_table(rows: List[Row]) -> None:
    header = ["metric", *(LABELS[lib] for lib in LIBS), "ratio", "result"]
    header += ["of limit", f"≥ {LIMIT_GOAL:g} of limit"]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join([" --- "] + [" ---: "] * 4 + [" --- ", " ---: ", " --- "]) + "|")
    for row in rows:
        ratio = row.ratio()
        cells = [row.metric] + [_fmt_int(row.values.get(lib)) for lib in LIBS]
        shown = "n/a" if ratio is None else f"{math.floor(ratio * 100) / 100:.2f}x"
        cells += [shown, row.verdict(), fmt_share(row.limit()), limit_mark(row.limit())]
        print("| " + " | ".join(cells) + " |")


def _notes(results: Results) -> List[str]:
    notes: List[str] = []
    for (mode, lib), outcome in results.items():
        label = f"{mode} / {LABELS[lib]}"
        if not outcome.runs:
            continue
        figures = ", ".join(f"{r['rate']:,.0f}" for r in outcome.runs)
        per_msg = ", ".join(
            f"{r['seconds'] / max(min(r['received'], r['expected']), 1) * 1e6:.1f}"
            for r in outcome.runs
        )
        note = f"{label}: runs {figures} msgs/s ({per_msg} µs per message)"
        best = max(outcome.runs, key=lambda r: float(r["rate"]))
        busy = f"client CPU {best['client_cpu'] / best['seconds']:.0%}"
        if best.get("server_cpu") is not None:
            busy += f", server CPU {best['server_cpu'] / best['seconds']:.0%}"
        note += f"; best run: {busy} of its wall time"
        notes.append(note)
        for i, run in enumerate(outcome.runs, 1):
            problems = run_problems(run)
            if problems:
                detail = f" (first error: {run['first_error']})" if run["first_error"] else ""
                notes.append(
                    f"WARNING {label} run {i}: {'; '.join(problems)}{detail}; "
                    "the rate counts at most N messages, those before the clock stopped"
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
    rows = _rows(results)
    _print_table(rows)
    notes = _notes(results)
    if notes:
        print("\nNotes:")
        for note in notes:
            print(f"- {note}")
    failures = [(key, o) for key, o in results.items() if o.error is not None]
    for (mode, lib), outcome in failures:
        print(f"\n## {mode} / {LABELS[lib]} failed: {outcome.error}\n")
        print("```")
        print("\n".join(outcome.stderr.strip().splitlines()[-80:]))
        print("```")
    print(f"\nTotal time: {total:.0f} s")
    return 1 if failures or any(row.verdict() != "ok" for row in rows) else 0


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="smaller counts, median of 3 rounds instead of 5"
    )
    one = parser.add_argument_group(
        "one benchmark in this process (for profiling; its own server unless --url)"
    )
    one.add_argument("--child", choices=MODES, help="the mode")
    one.add_argument("--lib", choices=LIBS, default="ours", help="default: ours")
    one.add_argument("--n", type=int, help="messages per run (default: the full size)")
    one.add_argument("--runs", type=int, default=1, help="default: 1")
    one.add_argument("--url", help="a JetStream-enabled server to use instead of a new one")
    parser.add_argument("--hard-timeout", type=float, default=180.0, help=argparse.SUPPRESS)
    parser.add_argument("--server-pid", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.child:
        n = args.n or FULL.messages
        if args.url:
            run_in_child(
                args.child, args.lib, args.url, n, args.runs, args.hard_timeout, args.server_pid
            )
        else:
            from jetstream_sync.server import NATSServer

            with NATSServer(jetstream=True) as srv:
                run_in_child(
                    args.child, args.lib, srv.url, n, args.runs, args.hard_timeout, srv.pid
                )
        return 0
    return main_parent(args.quick)


if __name__ == "__main__":
    sys.exit(main())
