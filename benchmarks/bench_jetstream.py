"""JetStream publish benchmarks: jetstream_sync vs nats-py (asyncio).

Usage::

    python benchmarks/bench_jetstream.py [--quick]
    python -m benchmarks.bench_jetstream [--quick]
    python benchmarks/bench_jetstream.py --child publish_async --lib ours --storage memory

One embedded nats-server with JetStream on serves every measurement. Each (benchmark,
storage, library) triple runs in a fresh child process of this script, so heaps, threads and
event loops never mix, and a child that hangs is cut off: it dumps every thread's stack to
stderr shortly before its hard deadline, and the table shows the failure. Every measured run
publishes into a stream of its own, created just before and deleted just after, and checks
afterwards that the stream holds exactly the messages that were acked. The last form runs one
child in this process against a server of its own (or --url), for profiling.
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
MAX_PENDING = 4_000  # publish_async window, both libraries (it is also both defaults)
WARMUP_SYNC = 200  # acked publishes into a throwaway stream before the measured runs
WARMUP_ASYNC = 2_000  # pipelined publishes, likewise

ACK_TIMEOUT = 5.0  # one acked publish (both libraries' default JetStream timeout)
STALL_WAIT = 5.0  # jetstream_sync: publish_async waits this long for room in the window
COMPLETE_TIMEOUT = 60.0  # waiting for the last acks of a warm-up
RUN_DEADLINE = 60.0  # one measured run, whatever happens
CHUNK = 256  # publishes between two looks at the clock
API_TIMEOUT = 10.0  # stream create / info / delete

LIBS = ("ours", "nats-py", "raw")
LABELS = {"ours": "jetstream_sync", "nats-py": "nats-py", "raw": "raw socket"}
STORAGES = ("file", "memory")
BENCH_NAMES = ("publish", "publish_async")

Run = Dict[str, Any]
BenchFn = Callable[[str, str, int, int], List[Run]]


@dataclass(frozen=True)
class Sizes:
    sync: int
    pipelined: int
    runs: int
    child_timeout: float


FULL = Sizes(sync=5_000, pipelined=50_000, runs=5, child_timeout=150)
QUICK = Sizes(sync=1_000, pipelined=10_000, runs=1, child_timeout=90)


# --- shared measurement helpers -----------------------------------------------------------


def stream_names(bench: str, lib: str, storage: str, run: int) -> Tuple[str, str]:
    """A stream and a subject of its own for one measured run (run -1: the warm-up)."""
    tag = f"{bench}_{lib.replace('-', '')}_{storage}_{'warmup' if run < 0 else run}"
    return f"BENCH_{tag}".upper(), f"bench.js.{tag}.x"


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


def bench_run(
    n: int,
    sent: int,
    acked: int,
    errors: int,
    unresolved: int,
    stored: int,
    clock: Clock,
    first_error: str,
) -> Run:
    """One measured run. The rate counts only the publishes that were acked."""
    elapsed = clock.elapsed
    return {
        "rate": acked / elapsed if elapsed > 0 else 0.0,
        "seconds": elapsed,
        "client_cpu": clock.cpu,
        "server_cpu": clock.server,
        "expected": n,
        "sent": sent,
        "acked": acked,
        "errors": errors,
        "unresolved": unresolved,
        "stored": stored,
        "first_error": first_error,
    }


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _past_deadline(clock: Clock, error: str) -> str:
    """Name the run deadline as the cause when it passed (nats-py, cancelled while waiting
    for room in its window, reports TooManyStalledMsgsError instead)."""
    if clock.elapsed < RUN_DEADLINE:
        return error
    return f"the {RUN_DEADLINE:.0f} s run deadline passed" + (f"; then {error}" if error else "")


# --- jetstream_sync -----------------------------------------------------------------------


def _ours_context(url: str) -> Tuple[Any, Any]:
    import jetstream_sync as nats

    nc = nats.connect(url)
    return nc, nc.jetstream(
        timeout=ACK_TIMEOUT,
        publish_async_max_pending=MAX_PENDING,
        publish_async_stall_wait=STALL_WAIT,
    )


def _ours_stream(js: Any, name: str, subject: str, storage: str) -> None:
    from jetstream_sync import StorageType

    js.add_stream(
        name=name, subjects=[subject.rsplit(".", 1)[0] + ".>"], storage=StorageType(storage)
    )


def publish_ours(url: str, storage: str, n: int, runs: int) -> List[Run]:
    import jetstream_sync as nats

    nc, js = _ours_context(url)
    try:
        name, subject = stream_names("publish", "ours", storage, -1)
        _ours_stream(js, name, subject, storage)
        for _ in range(WARMUP_SYNC):
            js.publish(subject, PAYLOAD)
        js.delete_stream(name)

        out: List[Run] = []
        for i in range(runs):
            name, subject = stream_names("publish", "ours", storage, i)
            _ours_stream(js, name, subject, storage)
            try:
                publish = js.publish
                sent = errors = 0
                first_error = ""
                clock = Clock()
                deadline = clock.t0 + RUN_DEADLINE
                for _ in range(n):
                    try:
                        publish(subject, PAYLOAD)
                    except nats.NATSError as exc:
                        errors += 1
                        first_error = first_error or _describe(exc)
                    sent += 1
                    if not sent % CHUNK and time.perf_counter() > deadline:
                        break
                clock.stop()
                stored = js.stream_info(name).state.messages
            finally:
                js.delete_stream(name)
            out.append(bench_run(n, sent, sent - errors, errors, 0, stored, clock, first_error))
        return out
    finally:
        nc.close()


def publish_async_ours(url: str, storage: str, n: int, runs: int) -> List[Run]:
    from concurrent.futures import Future

    import jetstream_sync as nats

    nc, js = _ours_context(url)
    try:
        name, subject = stream_names("publish_async", "ours", storage, -1)
        _ours_stream(js, name, subject, storage)
        for _ in range(WARMUP_ASYNC):
            js.publish_async(subject, PAYLOAD)
        js.publish_async_completed(timeout=COMPLETE_TIMEOUT)
        js.delete_stream(name)

        out: List[Run] = []
        for i in range(runs):
            name, subject = stream_names("publish_async", "ours", storage, i)
            _ours_stream(js, name, subject, storage)
            try:
                futures: List[Future[Any]] = []
                append, publish_async = futures.append, js.publish_async
                first_error = ""
                clock = Clock()
                deadline = clock.t0 + RUN_DEADLINE
                try:
                    for start in range(0, n, CHUNK):
                        for _ in range(min(CHUNK, n - start)):
                            append(publish_async(subject, PAYLOAD))
                        if time.perf_counter() > deadline:
                            break
                    left = deadline - time.perf_counter()
                    js.publish_async_completed(timeout=max(left, 0.001))
                except nats.NATSError as exc:  # stalled, or acks still missing
                    first_error = _describe(exc)
                clock.stop()
                first_error = _past_deadline(clock, first_error)
                errors = unresolved = 0
                for fut in futures:
                    if not fut.done():
                        unresolved += 1
                    elif fut.exception(0) is not None:
                        errors += 1
                        first_error = first_error or _describe(fut.exception(0))  # type: ignore[arg-type]
                stored = js.stream_info(name).state.messages
            finally:
                js.delete_stream(name)
            acked = len(futures) - errors - unresolved
            out.append(
                bench_run(n, len(futures), acked, errors, unresolved, stored, clock, first_error)
            )
        return out
    finally:
        nc.close()


# --- nats-py ------------------------------------------------------------------------------


async def _natspy_context(url: str) -> Tuple[Any, Any]:
    import nats

    async def on_error(_exc: Exception) -> None:  # keep nats-py from logging to stderr
        pass

    nc = await nats.connect(url, error_cb=on_error)
    return nc, nc.jetstream(timeout=ACK_TIMEOUT, publish_async_max_pending=MAX_PENDING)


async def _natspy_stream(js: Any, name: str, subject: str, storage: str) -> None:
    from nats.js.api import StorageType

    await asyncio.wait_for(
        js.add_stream(
            name=name, subjects=[subject.rsplit(".", 1)[0] + ".>"], storage=StorageType(storage)
        ),
        API_TIMEOUT,
    )


async def _natspy_stored(js: Any, name: str) -> int:
    info = await asyncio.wait_for(js.stream_info(name), API_TIMEOUT)
    return int(info.state.messages)


async def _natspy_delete(js: Any, name: str) -> None:
    await asyncio.wait_for(js.delete_stream(name), API_TIMEOUT)


def publish_natspy(url: str, storage: str, n: int, runs: int) -> List[Run]:
    async def main() -> List[Run]:
        import nats.errors

        nc, js = await _natspy_context(url)
        try:
            name, subject = stream_names("publish", "nats-py", storage, -1)
            await _natspy_stream(js, name, subject, storage)
            for _ in range(WARMUP_SYNC):
                await js.publish(subject, PAYLOAD)
            await _natspy_delete(js, name)

            out: List[Run] = []
            for i in range(runs):
                name, subject = stream_names("publish", "nats-py", storage, i)
                await _natspy_stream(js, name, subject, storage)
                try:
                    publish = js.publish
                    sent = errors = 0
                    first_error = ""
                    clock = Clock()
                    deadline = clock.t0 + RUN_DEADLINE
                    for _ in range(n):
                        try:
                            await publish(subject, PAYLOAD)
                        except nats.errors.Error as exc:
                            errors += 1
                            first_error = first_error or _describe(exc)
                        sent += 1
                        if not sent % CHUNK and time.perf_counter() > deadline:
                            break
                    clock.stop()
                    stored = await _natspy_stored(js, name)
                finally:
                    await _natspy_delete(js, name)
                out.append(bench_run(n, sent, sent - errors, errors, 0, stored, clock, first_error))
            return out
        finally:
            await nc.close()

    return asyncio.run(main())


def publish_async_natspy(url: str, storage: str, n: int, runs: int) -> List[Run]:
    """nats-py's publish_async waits for room in its window with no limit by default, and
    publish_async_completed has no timeout: one wait_for around the whole run bounds both
    without adding a wait_for (a task) to every publish."""

    async def main() -> List[Run]:
        import nats.errors

        nc, js = await _natspy_context(url)
        try:
            name, subject = stream_names("publish_async", "nats-py", storage, -1)
            await _natspy_stream(js, name, subject, storage)
            for _ in range(WARMUP_ASYNC):
                await js.publish_async(subject, PAYLOAD)
            await asyncio.wait_for(js.publish_async_completed(), COMPLETE_TIMEOUT)
            await _natspy_delete(js, name)

            out: List[Run] = []
            for i in range(runs):
                name, subject = stream_names("publish_async", "nats-py", storage, i)
                await _natspy_stream(js, name, subject, storage)
                try:
                    futures: List[asyncio.Future[Any]] = []

                    async def pipeline(
                        futures: List[asyncio.Future[Any]] = futures, subject: str = subject
                    ) -> None:
                        append, publish_async = futures.append, js.publish_async
                        for _ in range(n):
                            append(await publish_async(subject, PAYLOAD))
                        await js.publish_async_completed()

                    first_error = ""
                    clock = Clock()
                    try:
                        await asyncio.wait_for(pipeline(), RUN_DEADLINE)
                    except (asyncio.TimeoutError, nats.errors.Error) as exc:
                        first_error = _describe(exc)
                    clock.stop()
                    first_error = _past_deadline(clock, first_error)
                    errors = unresolved = 0
                    for fut in futures:
                        if not fut.done():
                            unresolved += 1
                        elif fut.cancelled() or fut.exception() is not None:
                            errors += 1
                            if not first_error:
                                failure = None if fut.cancelled() else fut.exception()
                                first_error = "cancelled" if failure is None else _describe(failure)
                    stored = await _natspy_stored(js, name)
                finally:
                    await _natspy_delete(js, name)
                acked = len(futures) - errors - unresolved
                out.append(
                    bench_run(
                        n, len(futures), acked, errors, unresolved, stored, clock, first_error
                    )
                )
            return out
        finally:
            await nc.close()

    return asyncio.run(main())


# --- the raw limit: the same work on a bare socket (benchmarks/_raw.py) ---------------------


def _raw_bench(url: str, storage: str, n: int, runs: int, bench: str) -> List[Run]:
    """Streams made, counted and deleted with jetstream_sync, untimed, as for the others;
    the publishing and the acks on a raw socket."""
    import _raw

    nc, js = _ours_context(url)
    try:
        with _raw.RawConn(url, timeout=ACK_TIMEOUT) as conn:

            def loop(subject: str, count: int) -> Tuple[int, int]:
                if bench == "publish":
                    return _raw.js_publish(conn, subject, PAYLOAD, count)
                return _raw.js_publish_pipelined(conn, subject, PAYLOAD, count, MAX_PENDING)

            name, subject = stream_names(bench, "raw", storage, -1)
            _ours_stream(js, name, subject, storage)
            loop(subject, WARMUP_SYNC if bench == "publish" else WARMUP_ASYNC)
            js.delete_stream(name)
            out: List[Run] = []
            for i in range(runs):
                name, subject = stream_names(bench, "raw", storage, i)
                _ours_stream(js, name, subject, storage)
                try:
                    first_error = ""
                    clock = Clock()
                    try:
                        acked, errors = loop(subject, n)
                    except (OSError, _raw.RawError) as exc:
                        acked, errors, first_error = 0, 0, _describe(exc)
                    clock.stop()
                    stored = js.stream_info(name).state.messages
                finally:
                    js.delete_stream(name)
                unresolved = n - acked - errors
                out.append(bench_run(n, n, acked, errors, unresolved, stored, clock, first_error))
            return out
    finally:
        nc.close()


def publish_raw(url: str, storage: str, n: int, runs: int) -> List[Run]:
    return _raw_bench(url, storage, n, runs, "publish")


def publish_async_raw(url: str, storage: str, n: int, runs: int) -> List[Run]:
    return _raw_bench(url, storage, n, runs, "publish_async")


BENCHES: Dict[Tuple[str, str], BenchFn] = {
    ("publish", "ours"): publish_ours,
    ("publish", "nats-py"): publish_natspy,
    ("publish_async", "ours"): publish_async_ours,
    ("publish_async", "nats-py"): publish_async_natspy,
    ("publish", "raw"): publish_raw,
    ("publish_async", "raw"): publish_async_raw,
}


def run_in_child(
    bench: str,
    lib: str,
    storage: str,
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
    result = BENCHES[(bench, lib)](url, storage, n, runs)
    faulthandler.cancel_dump_traceback_later()
    emit({"runs": result})
    return result


# --- the parent: orchestration and report -------------------------------------------------


def run_child(args: List[str], timeout: float) -> Outcome:
    return _run_child(SCRIPT, args, timeout)


def _filesystem(path: str) -> str:
    """The type of the file system holding ``path`` (from /proc/mounts), if known."""
    best, fstype = "", "unknown file system"
    real = os.path.realpath(path)
    try:
        with open("/proc/mounts", encoding="utf-8") as f:
            for line in f:
                fields = line.split()
                if len(fields) < 3:
                    continue
                mount = fields[1]
                inside = real == mount or real.startswith(mount.rstrip("/") + "/")
                if inside and len(mount) > len(best):
                    best, fstype = mount, fields[2]
    except OSError:
        pass
    return fstype


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


Key = Tuple[str, str, str]  # (benchmark, storage, library)
Results = Dict[Key, Outcome]

TARGETS = {"publish": 1.8, "publish_async": 3.0}
METRICS = {
    "publish": "JetStream publish, wait for each ack",
    "publish_async": "pipelined publish_async, then wait for all acks",
}


def _plan(sizes: Sizes) -> List[Tuple[str, str, int]]:
    """(benchmark, storage, messages) in the order they run."""
    return [
        (bench, storage, sizes.sync if bench == "publish" else sizes.pipelined)
        for bench in BENCH_NAMES
        for storage in STORAGES
    ]


def _run_all(sizes: Sizes, url: str, server_pid: Optional[int]) -> Results:
    """Each (benchmark, storage) in rounds interleaved across the libraries (jetstream_sync,
    nats-py, raw, then again), one fresh child per round."""
    jobs = []
    for bench, storage, n in _plan(sizes):
        args = ["--child", bench, "--storage", storage, "--url", url, "--n", str(n)]
        args += ["--hard-timeout", str(sizes.child_timeout)]
        if server_pid is not None:
            args += ["--server-pid", str(server_pid)]
        jobs.append(((bench, storage), LIBS, args))
    merged = run_interleaved(SCRIPT, jobs, sizes.runs, sizes.child_timeout, LABELS)
    return {(bench, storage, lib): outcome for ((bench, storage), lib), outcome in merged.items()}


def _rows(results: Results) -> List[Row]:
    rows: List[Row] = []
    for bench in BENCH_NAMES:
        for storage in STORAGES:
            values: Dict[str, Optional[float]] = {}
            warned = False
            for lib in LIBS:
                outcome = results.get((bench, storage, lib))
                runs = outcome.runs if outcome is not None else []
                values[lib] = median([r["rate"] for r in runs])
                warned = warned or any(run_problems(r) for r in runs)
            target = TARGETS[bench]
            rows.append(
                Row(
                    f"{METRICS[bench]}, {storage} storage, msgs/s (higher is better)",
                    values,
                    _fmt_int,
                    target=f"≥ {target:g}x",
                    minimum=target,
                    warned=warned,
                )
            )
    return rows


def _print_header(sizes: Sizes, quick: bool, server_version: str, store_fs: str) -> None:
    lines = [
        f"# jetstream_sync JetStream benchmarks ({'quick' if quick else 'full'})",
        "",
        f"- Python: {platform.python_implementation()} {platform.python_version()}",
        f"- nats-server: {server_version} (embedded, one instance for everything, JetStream "
        f"on, store directory on {store_fs})",
        f"- machine: {_cores()} cores, {_cpu_model()}, {platform.system()} {platform.release()}",
        f"- libraries: jetstream_sync {_version('jetstream-sync')}, nats-py "
        f"{_version('nats-py')} (asyncio, default event loop)",
        f"- sizes: acked publish {sizes.sync:,} x {MSG_SIZE} B; pipelined publish "
        f"{sizes.pipelined:,} x {MSG_SIZE} B with a window of {MAX_PENDING:,} outstanding acks "
        "(both libraries)",
        f"- every figure is the median of {sizes.runs} round(s), interleaved: jetstream_sync, "
        "nats-py, raw socket, then again; every round is a fresh child process, after an "
        "untimed warm-up",
        "- raw socket: the same work done by a hand-written loop on one blocking socket, no "
        "client library (benchmarks/_raw.py): the practical limit for Python. 'of limit' = "
        f"jetstream_sync / raw; the goal is ≥ {LIMIT_GOAL:g}",
        "- every run publishes into a fresh R1 stream of its own (created before, deleted "
        "after, neither timed) and checks afterwards that it holds exactly the messages sent",
        "- acked publish: `js.publish` (nats-py: `await js.publish`) in a loop, one message "
        "in flight; timed from the first publish to the last ack",
        "- pipelined: `js.publish_async` for every message, then `js.publish_async_completed`; "
        "timed from the first publish to the last ack; each future's outcome is checked",
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
        # Truncated, not rounded: 1.799 must not show as the 1.80 it fails to reach.
        shown = "n/a" if ratio is None else f"{math.floor(ratio * 100) / 100:.2f}x"
        cells += [shown, row.target, row.verdict()]
        cells += [fmt_share(row.limit()), limit_mark(row.limit())]
        print("| " + " | ".join(cells) + " |")


def run_problems(run: Run) -> List[str]:
    """What went wrong in a run: lost or failed publishes, or a stream that does not hold
    exactly the messages published."""
    n, sent, stored = run["expected"], run["sent"], run["stored"]
    problems = []
    if sent < n:
        problems.append(f"only {sent:,} of {n:,} published before the deadline")
    if run["errors"]:
        problems.append(f"{run['errors']:,} publishes failed")
    if run["unresolved"]:
        problems.append(f"{run['unresolved']:,} futures unresolved at the end")
    if stored != n:
        problems.append(f"the stream holds {stored:,} messages, not {n:,}")
    if not problems and run["first_error"]:
        problems.append("an error was raised")
    return problems


def _notes(results: Results) -> List[str]:
    notes: List[str] = []
    for (bench, storage, lib), outcome in results.items():
        label = f"{bench} / {storage} / {LABELS[lib]}"
        if not outcome.runs:
            continue
        figures = ", ".join(f"{r['rate']:,.0f}" for r in outcome.runs)
        note = f"{label}: runs {figures} msgs/s"
        if bench == "publish":
            per_ack = ", ".join(
                f"{r['seconds'] / max(r['sent'], 1) * 1e6:.0f}" for r in outcome.runs
            )
            note += f" ({per_ack} µs per acked publish)"
        else:
            seconds = ", ".join(f"{r['seconds']:.2f}" for r in outcome.runs)
            note += f" ({seconds} s)"
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
                    "the rate counts only acked messages"
                )
    return notes


def main_parent(quick: bool) -> int:
    from jetstream_sync.server import NATSServer, find_nats_server

    sizes = QUICK if quick else FULL
    started = time.monotonic()
    with NATSServer(jetstream=True) as srv:
        server_version = _server_version(find_nats_server())
        store_fs = _filesystem(srv.store_dir)
        results = _run_all(sizes, srv.url, srv.pid)
    total = time.monotonic() - started

    _print_header(sizes, quick, server_version, store_fs)
    _print_table(_rows(results))
    notes = _notes(results)
    if notes:
        print("\nNotes:")
        for note in notes:
            print(f"- {note}")
    failures = [(key, o) for key, o in results.items() if o.error is not None]
    for (bench, storage, lib), outcome in failures:
        print(f"\n## {bench} / {storage} / {LABELS[lib]} failed: {outcome.error}\n")
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
    one.add_argument("--storage", choices=STORAGES, default="memory", help="default: memory")
    one.add_argument("--n", type=int, help="messages per run (default: the full size)")
    one.add_argument("--runs", type=int, default=1, help="default: 1")
    one.add_argument("--url", help="a JetStream-enabled server to use instead of a new one")
    parser.add_argument("--hard-timeout", type=float, default=120.0, help=argparse.SUPPRESS)
    parser.add_argument("--server-pid", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.child:
        n = args.n or (FULL.sync if args.child == "publish" else FULL.pipelined)
        if args.url:
            run_in_child(
                args.child,
                args.lib,
                args.storage,
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
                    args.storage,
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
