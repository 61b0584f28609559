"""Fast-ingest batch publishing (ADR-50) against publish_async and the raw limit.

Usage::

    python benchmarks/bench_fast_ingest.py [--quick]
    python -m benchmarks.bench_fast_ingest [--quick]
    python benchmarks/bench_fast_ingest.py --child fast --n 200000   # one run, for profiling

One embedded nats-server (JetStream on) serves every run. Three columns publish the same N
messages of 128 bytes into a fresh FILE-storage stream with ``allow_batched``:

* ``publish_async``: ``js.publish_async`` for every message, then
  ``js.publish_async_completed`` (a window of 4,000 acks, as in bench_jetstream.py);
* ``fast``: ``js.fast_publisher(flow, max_outstanding_acks)``, ``add`` for every message,
  then ``commit()`` (EOB);
* ``raw``: the same fast-ingest protocol on a bare socket (benchmarks/_raw.py
  ``fast_ingest``), with the same flow and outstanding acks: the practical limit.

Rounds are interleaved (publish_async, fast, raw, then again), each in a fresh child
process; figures are medians. Each run is checked: the stream holds exactly N messages, and
the batch's PubAck says N (fast, raw). See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import faulthandler
import os
import platform
import sys
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from _harness import (
    Outcome,
    _cores,
    _cpu_model,
    _fmt_int,
    _server_version,
    _version,
    emit,
    fmt_share,
    median,
    proc_cpu,
    run_interleaved,
    syscall_mark,
)

SCRIPT = os.path.abspath(__file__)

MSG_SIZE = 128
PAYLOAD = b"x" * MSG_SIZE
# The fast publisher's defaults (--flow, --outstanding change them for both columns): the
# server acks every 100 messages at most, and the publisher waits once two acks are due.
FLOW = 100
MAX_OUTSTANDING = 2
ASYNC_WINDOW = 4_000  # publish_async's default window (bench_jetstream.py's too)
WARMUP = 2_000  # messages into a throwaway stream before the measured runs
TIMEOUT = 10.0  # every wait for the server: acks, API calls
RUN_DEADLINE = 90.0  # one measured run

LIBS = ("async", "fast", "raw")
LABELS = {"async": "publish_async", "fast": "fast publisher", "raw": "raw socket"}

Run = Dict[str, Any]


@dataclass(frozen=True)
class Sizes:
    n: int
    runs: int
    child_timeout: float


FULL = Sizes(n=200_000, runs=5, child_timeout=240)
QUICK = Sizes(n=50_000, runs=1, child_timeout=120)

SERVER_PID: Optional[int] = None


class Clock:
    """Wall time of a run, with this process's CPU time (all threads) and the server's."""

    def __init__(self) -> None:
        self.server0 = proc_cpu(SERVER_PID)
        self.cpu0 = time.process_time()
        syscall_mark("start")
        self.t0 = time.perf_counter()
        self.elapsed = self.cpu = 0.0
        self.server: Optional[float] = None

    def stop(self) -> None:
        self.elapsed = time.perf_counter() - self.t0
        syscall_mark("stop")
        self.cpu = time.process_time() - self.cpu0
        server = proc_cpu(SERVER_PID)
        if server is not None and self.server0 is not None:
            self.server = server - self.server0


def _connect(url: str) -> Any:
    import jetstream_sync as nats

    nc = nats.connect(url)
    return nc, nc.jetstream(timeout=TIMEOUT, publish_async_max_pending=ASYNC_WINDOW)


def _stream(js: Any, lib: str, run: int) -> Tuple[str, str]:
    """A fresh file-storage stream with allow_batched, and its subject (run -1: warm-up)."""
    tag = f"{lib}_{'warmup' if run < 0 else run}"
    name, subject = f"BENCH_FI_{tag}".upper(), f"bench.fi.{tag}"
    from jetstream_sync import StorageType

    js.add_stream(name=name, subjects=[subject], storage=StorageType.FILE, allow_batched=True)
    return name, subject


def _publish_async(js: Any, subject: str, n: int) -> Optional[int]:
    publish_async = js.publish_async
    for _ in range(n):
        publish_async(subject, PAYLOAD)
    js.publish_async_completed(timeout=RUN_DEADLINE)
    return None  # no batch: nothing to report as its size


def _fast(js: Any, subject: str, n: int) -> Optional[int]:
    with js.fast_publisher(flow=FLOW, max_outstanding_acks=MAX_OUTSTANDING) as pub:
        add = pub.add
        for _ in range(n):
            add(subject, PAYLOAD)
        return int(pub.commit().batch_size)


def _runs(url: str, lib: str, n: int, runs: int) -> List[Run]:
    """Warm up, then ``runs`` measured runs, each into a stream of its own."""
    import _raw

    nc, js = _connect(url)
    raw = _raw.RawConn(url, timeout=TIMEOUT) if lib == "raw" else None

    def one(subject: str, count: int) -> Optional[int]:
        if raw is not None:
            final = _raw.fast_ingest(raw, subject, PAYLOAD, count, FLOW, MAX_OUTSTANDING)
            return int(final["count"])  # type: ignore[call-overload]
        return (_fast if lib == "fast" else _publish_async)(js, subject, count)

    try:
        name, subject = _stream(js, lib, -1)
        one(subject, WARMUP)
        js.delete_stream(name)
        out: List[Run] = []
        for i in range(runs):
            name, subject = _stream(js, lib, i)
            error = ""
            batch_size: Optional[int] = None
            try:
                clock = Clock()
                try:
                    batch_size = one(subject, n)
                except Exception as exc:  # reported in the notes
                    error = f"{type(exc).__name__}: {exc}"
                clock.stop()
                stored = int(js.stream_info(name).state.messages)
            finally:
                js.delete_stream(name)
            out.append(
                {
                    "rate": stored / clock.elapsed if clock.elapsed > 0 else 0.0,
                    "seconds": clock.elapsed,
                    "client_cpu": clock.cpu,
                    "server_cpu": clock.server,
                    "expected": n,
                    "stored": stored,
                    "batch_size": batch_size,
                    "error": error,
                }
            )
        return out
    finally:
        if raw is not None:
            raw.close()
        nc.close()


def run_in_child(
    lib: str, url: str, n: int, runs: int, hard_timeout: float, server_pid: Optional[int]
) -> List[Run]:
    faulthandler.dump_traceback_later(max(5.0, hard_timeout - 10.0), exit=True)
    global SERVER_PID
    SERVER_PID = server_pid
    result = _runs(url, lib, n, runs)
    faulthandler.cancel_dump_traceback_later()
    emit({"runs": result})
    return result


# --- the parent ---------------------------------------------------------------------------


def problems(run: Run) -> List[str]:
    found = []
    if run["error"]:
        found.append(run["error"])
    if run["stored"] != run["expected"]:
        found.append(f"the stream holds {run['stored']:,} messages, not {run['expected']:,}")
    size = run["batch_size"]
    if size is not None and size != run["expected"]:
        found.append(f"the batch's PubAck says {size:,} messages, not {run['expected']:,}")
    return found


def _ratio(a: Optional[float], b: Optional[float]) -> str:
    return "n/a" if not a or not b else f"{fmt_share(a / b)}x"


def report(results: Dict[str, Outcome], sizes: Sizes, quick: bool, server: str) -> int:
    rates = {lib: median([r["rate"] for r in results[lib].runs]) for lib in LIBS}
    print(f"# jetstream_sync fast-ingest benchmark ({'quick' if quick else 'full'})\n")
    print(f"- Python: {platform.python_implementation()} {platform.python_version()}")
    print(f"- nats-server: {server} (embedded, JetStream on, file storage)")
    print(f"- machine: {_cores()} cores, {_cpu_model()}, {platform.system()} {platform.release()}")
    print(f"- jetstream_sync {_version('jetstream-sync')}")
    print(
        f"- {sizes.n:,} messages x {MSG_SIZE} B per run into a fresh file-storage stream with "
        f"allow_batched; fast and raw: flow {FLOW}, {MAX_OUTSTANDING} acks outstanding, gap "
        f"fail, EOB commit; publish_async: a window of {ASYNC_WINDOW:,} acks"
    )
    print(
        f"- medians of {sizes.runs} round(s), interleaved (publish_async, fast, raw, then "
        "again), each a fresh child process after an untimed warm-up\n"
    )
    print("| column | msgs/s | runs |")
    print("| --- | ---: | --- |")
    for lib in LIBS:
        runs = ", ".join(f"{r['rate']:,.0f}" for r in results[lib].runs) or "failed"
        print(f"| {LABELS[lib]} | {_fmt_int(rates[lib])} | {runs} |")
    print()
    print(f"- fast / publish_async: **{_ratio(rates['fast'], rates['async'])}** (goal ≥ 2x)")
    print(f"- fast / raw (of limit): **{fmt_share(_share(rates['fast'], rates['raw']))}**")
    notes = []
    for lib in LIBS:
        for i, run in enumerate(results[lib].runs, 1):
            found = problems(run)
            if found:
                notes.append(f"WARNING {LABELS[lib]} run {i}: {'; '.join(found)}")
        if results[lib].runs:
            best = max(results[lib].runs, key=lambda r: float(r["rate"]))
            busy = f"client CPU {best['client_cpu'] / best['seconds']:.0%}"
            if best["server_cpu"] is not None:
                busy += f", server CPU {best['server_cpu'] / best['seconds']:.0%}"
            notes.append(f"{LABELS[lib]}, best run: {busy} of its wall time")
    print("\nNotes:")
    for note in notes:
        print(f"- {note}")
    failed = False
    for lib in LIBS:
        outcome = results[lib]
        if outcome.error is not None:
            failed = True
            print(f"\n## {LABELS[lib]} failed: {outcome.error}\n```")
            print("\n".join(outcome.stderr.strip().splitlines()[-60:]))
            print("```")
    return 1 if failed or any(problems(r) for o in results.values() for r in o.runs) else 0


def _share(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return a / b if a and b else None


def main_parent(quick: bool) -> int:
    from jetstream_sync.server import NATSServer, find_nats_server

    sizes = QUICK if quick else FULL
    with NATSServer(jetstream=True) as srv:
        args = ["--child", "--url", srv.url, "--n", str(sizes.n)]
        args += ["--flow", str(FLOW), "--outstanding", str(MAX_OUTSTANDING)]
        args += ["--hard-timeout", str(sizes.child_timeout), "--server-pid", str(srv.pid)]
        merged = run_interleaved(
            SCRIPT, [("fast_ingest", LIBS, args)], sizes.runs, sizes.child_timeout, LABELS
        )
    results = {lib: merged.get(("fast_ingest", lib), Outcome([])) for lib in LIBS}
    return report(results, sizes, quick, _server_version(find_nats_server()))


def main(argv: Optional[List[str]] = None) -> int:
    global FLOW, MAX_OUTSTANDING
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="50k messages, one round")
    one = parser.add_argument_group("one column in this process (its own server unless --url)")
    one.add_argument("--child", action="store_true", help="run one column here")
    one.add_argument("--lib", choices=LIBS, default="fast", help="default: fast")
    one.add_argument("--n", type=int, default=FULL.n, help="messages per run")
    one.add_argument("--runs", type=int, default=1, help="default: 1")
    one.add_argument("--url", help="a JetStream-enabled server to use instead of a new one")
    parser.add_argument("--flow", type=int, default=FLOW, help=f"default: {FLOW}")
    parser.add_argument(
        "--outstanding", type=int, default=MAX_OUTSTANDING, help=f"default: {MAX_OUTSTANDING}"
    )
    parser.add_argument("--hard-timeout", type=float, default=200.0, help=argparse.SUPPRESS)
    parser.add_argument("--server-pid", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    FLOW, MAX_OUTSTANDING = args.flow, args.outstanding
    if not args.child:
        return main_parent(args.quick)
    if args.url:
        run_in_child(args.lib, args.url, args.n, args.runs, args.hard_timeout, args.server_pid)
    else:
        from jetstream_sync.server import NATSServer

        with NATSServer(jetstream=True) as srv:
            run_in_child(args.lib, srv.url, args.n, args.runs, args.hard_timeout, srv.pid)
    return 0


if __name__ == "__main__":
    sys.exit(main())
