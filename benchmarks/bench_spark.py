"""Spark benchmarks: the ``jetstream`` data source against a naive connection per row.

Usage::

    python benchmarks/bench_spark.py [--quick]
    python -m benchmarks.bench_spark [--quick]
    python benchmarks/bench_spark.py --n 50000 --runs 2 --partitions 4

One embedded nats-server with JetStream on and one SparkSession (``local[2]``) in this
process serve every measurement. Batch read: a memory stream (``allow_direct``) preloaded,
untimed, with N messages of 128 B, read with ``spark.read.format("jetstream")`` and summed
(``count(*)``, ``sum(length(data))``: the payloads must really be read). Batch write: N rows
of (subject, data) made by ``spark.range(N)`` and saved with ``df.write.format("jetstream")``
into a fresh stream each run. The naive baseline is what a user writes without the data
source: inside ``foreachPartition`` (write) or an RDD ``map`` over ``spark.range`` (read),
one new connection per row (``connect()``, one ``publish`` or ``get_msg``, ``close()``); it
is slow, so it runs on a smaller N (N/20, at least 1,000): rows/s compare all the same.
Every result is checked (rows, bytes, messages stored); the exit status is non-zero when a
check failed. See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import faulthandler
import os
import platform
import sys
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from _harness import _cores, _cpu_model, _fmt_int, _server_version, _version, proc_cpu

MSG_SIZE = 128
PAYLOAD = b"x" * MSG_SIZE
API_TIMEOUT = 10.0  # stream create, info, delete (driver side)
PRELOAD_TIMEOUT = 120.0  # the acks of the preloading publish_async
WARMUP_ROWS = 1_000  # the untimed warm-up read and write through the data source
NAIVE_WARMUP_ROWS = 50  # and through the naive baseline


@dataclass(frozen=True)
class Sizes:
    n: int  # rows per data-source run
    runs: int  # data-source runs (best of)
    naive_runs: int  # naive runs (best of)
    deadline: float  # the whole script: after this, every thread's stack and exit 1

    @property
    def naive_n(self) -> int:
        return max(1_000, self.n // 20)


FULL = Sizes(n=200_000, runs=3, naive_runs=2, deadline=1_500.0)
QUICK = Sizes(n=20_000, runs=1, naive_runs=1, deadline=600.0)


# --- the server side: CPU time, streams ----------------------------------------------------


class Admin:
    """The driver's own connection, for stream set-up and checks (never timed)."""

    def __init__(self, url: str) -> None:
        import jetstream_sync

        self.nc = jetstream_sync.connect(url, name="bench-spark-admin")
        self.js = self.nc.jetstream(timeout=API_TIMEOUT)

    def fresh_stream(self, name: str, subject: str) -> None:
        import jetstream_sync

        try:
            self.js.delete_stream(name)
        except jetstream_sync.StreamNotFoundError:
            pass
        self.js.add_stream(
            name=name,
            subjects=[subject],
            storage=jetstream_sync.StorageType.MEMORY,
            allow_direct=True,
        )

    def stored(self, name: str) -> int:
        return int(self.js.stream_info(name).state.messages)

    def delete(self, name: str) -> None:
        import jetstream_sync

        try:
            self.js.delete_stream(name)
        except jetstream_sync.StreamNotFoundError:
            pass

    def preload(self, name: str, subject_prefix: str, n: int) -> None:
        """A fresh stream of ``n`` messages of MSG_SIZE bytes on 16 subjects."""
        self.fresh_stream(name, f"{subject_prefix}.>")
        subjects = [f"{subject_prefix}.{i}" for i in range(16)]
        futures = [self.js.publish_async(subjects[i % 16], PAYLOAD) for i in range(n)]
        self.js.publish_async_completed(timeout=PRELOAD_TIMEOUT)
        failed = sum(1 for fut in futures if fut.exception(0) is not None)
        stored = self.stored(name)
        if failed or stored != n:
            raise RuntimeError(f"preloading {name}: {failed} publishes failed, {stored} of {n}")

    def close(self) -> None:
        self.nc.close()


# --- Spark ------------------------------------------------------------------------------------


def make_session(cores: int) -> Any:
    """One local session as tests/spark/conftest.py builds it, but ``local[N]`` without task
    retries: a failed task fails the run instead of being hidden in its time."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    import jetstream_sync.spark

    session = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName("jetstream_sync-bench-spark")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", str(cores))
        .config("spark.default.parallelism", str(cores))
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.python.worker.reuse", "true")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    jetstream_sync.spark.register(session)
    return session


def _java_version(spark: Any) -> str:
    try:
        jvm = spark.sparkContext._jvm
        return (
            f"{jvm.System.getProperty('java.version')} ({jvm.System.getProperty('java.vm.name')})"
        )
    except Exception as exc:  # Spark Connect, or py4j changed
        return f"unknown ({exc})"


# --- one measured run ------------------------------------------------------------------------


@dataclass
class RunResult:
    seconds: float
    rows: int  # rows the run handled (read: counted; write: stored in the stream)
    server_cpu: Optional[float] = None
    problems: List[str] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else 0.0


class Clock:
    def __init__(self, server_pid: Optional[int]) -> None:
        self.pid = server_pid
        self.server0 = proc_cpu(server_pid)
        self.t0 = time.perf_counter()
        self.seconds = 0.0
        self.server: Optional[float] = None

    def stop(self) -> None:
        self.seconds = time.perf_counter() - self.t0
        server = proc_cpu(self.pid)
        if server is not None and self.server0 is not None:
            self.server = server - self.server0


def read_source(
    spark: Any, url: str, stream: str, n: int, partitions: int, server_pid: Optional[int]
) -> RunResult:
    """Read ``stream`` (which holds ``n`` messages) through the data source. Timed: from
    ``load()`` to the aggregate's row on the driver."""
    from pyspark.sql import functions as F

    clock = Clock(server_pid)
    df = (
        spark.read.format("jetstream")
        .option("servers", url)
        .option("stream", stream)
        .option("partitions", str(partitions))
        .load()
    )
    row = df.select(F.count(F.lit(1)).alias("rows"), F.sum(F.length("data")).alias("bytes")).first()
    clock.stop()
    rows, size = int(row["rows"]), int(row["bytes"] or 0)
    result = RunResult(clock.seconds, rows, clock.server)
    if rows != n:
        result.problems.append(f"{rows:,} rows read, not {n:,}")
    if size != n * MSG_SIZE:
        result.problems.append(f"{size:,} payload bytes read, not {n * MSG_SIZE:,}")
    return result


def _naive_reader(url: str, stream: str) -> Callable[[Any], int]:
    """The function a user maps over the sequences: a connection per row. Self-contained:
    cloudpickle sends it, with ``url`` and ``stream``, to the Python workers."""

    def payload_length(row: Any) -> int:
        import jetstream_sync

        with jetstream_sync.connect(url) as nc:
            return len(nc.jetstream().get_msg(stream, seq=int(row.id)).data)

    return payload_length


def read_naive(
    spark: Any, url: str, stream: str, n: int, partitions: int, server_pid: Optional[int]
) -> RunResult:
    """Sequences 1..n of ``stream``, each got on a new connection in an RDD ``map``."""
    clock = Clock(server_pid)
    size = int(spark.range(1, n + 1, 1, partitions).rdd.map(_naive_reader(url, stream)).sum())
    clock.stop()
    result = RunResult(clock.seconds, size // MSG_SIZE, clock.server)
    if size != n * MSG_SIZE:
        result.problems.append(f"{size:,} payload bytes read, not {n * MSG_SIZE:,}")
    return result


def _rows_to_write(spark: Any, n: int, partitions: int, subject_prefix: str) -> Any:
    """``n`` rows (subject string on 16 subjects, data binary of MSG_SIZE bytes: the row's id
    padded with 'x')."""
    return spark.range(0, n, 1, partitions).selectExpr(
        f"concat('{subject_prefix}.', cast(id % 16 as string)) as subject",
        f"cast(lpad(cast(id as string), {MSG_SIZE}, 'x') as binary) as data",
    )


def _write_run(
    spark: Any,
    admin: Admin,
    tag: str,
    n: int,
    partitions: int,
    server_pid: Optional[int],
    save: Callable[[Any], None],
) -> RunResult:
    """``n`` rows written by ``save(df)`` into a fresh stream (made and deleted untimed).
    Timed: ``save``; checked: the stream holds ``n``."""
    stream, prefix = f"BENCH_SPARK_W_{tag}".upper(), f"bench.spark.w.{tag}"
    admin.fresh_stream(stream, f"{prefix}.>")
    try:
        df = _rows_to_write(spark, n, partitions, prefix)
        clock = Clock(server_pid)
        save(df)
        clock.stop()
        return _check_written(admin, stream, n, clock)
    finally:
        admin.delete(stream)


def write_source(
    spark: Any,
    admin: Admin,
    url: str,
    tag: str,
    n: int,
    partitions: int,
    server_pid: Optional[int],
) -> RunResult:
    """Save ``n`` rows through the data source."""

    def save(df: Any) -> None:
        df.write.format("jetstream").option("servers", url).mode("append").save()

    return _write_run(spark, admin, tag, n, partitions, server_pid, save)


def _naive_writer(url: str) -> Callable[[Iterator[Any]], None]:
    """The function a user hands to ``foreachPartition``: a connection per row."""

    def publish_rows(rows: Iterator[Any]) -> None:
        import jetstream_sync

        for row in rows:
            with jetstream_sync.connect(url) as nc:
                nc.jetstream().publish(row.subject, bytes(row.data))

    return publish_rows


def write_naive(
    spark: Any,
    admin: Admin,
    url: str,
    tag: str,
    n: int,
    partitions: int,
    server_pid: Optional[int],
) -> RunResult:
    """``n`` rows published from ``foreachPartition``, a new connection for each."""
    writer = _naive_writer(url)
    return _write_run(
        spark, admin, tag, n, partitions, server_pid, lambda df: df.foreachPartition(writer)
    )


def _check_written(admin: Admin, stream: str, n: int, clock: Clock) -> RunResult:
    stored = admin.stored(stream)
    result = RunResult(clock.seconds, stored, clock.server)
    if stored != n:
        result.problems.append(f"the stream holds {stored:,} messages, not {n:,}")
    return result


# --- the whole benchmark ---------------------------------------------------------------------


@dataclass
class Series:
    """The runs of one (operation, method)."""

    n: int
    runs: List[RunResult] = field(default_factory=list)
    errors: List[str] = field(default_factory=list)

    def best(self) -> Optional[RunResult]:
        good = [r for r in self.runs if not r.problems]
        return max(good, key=lambda r: r.rate) if good else None

    def problems(self) -> List[str]:
        out = list(self.errors)
        for i, run in enumerate(self.runs, 1):
            out += [f"run {i}: {p}" for p in run.problems]
        return out


OPS = ("read", "write")
METHODS = ("source", "naive")
Key = Tuple[str, str]  # (operation, method)


def _progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _attempt(
    series: Series, label: str, fn: Callable[[int, int], RunResult], n: int, i: int = 0
) -> None:
    """One run, ``fn(n, i)``; an exception is recorded (its traceback goes to stderr), not
    raised."""
    started = time.monotonic()
    try:
        run = fn(n, i)
    except Exception as exc:
        tb = traceback.format_exc().strip().splitlines()
        series.errors.append(f"{label}: {type(exc).__name__}: {str(exc).splitlines()[0:1]}")
        _progress(
            f"  {label}: ERROR after {time.monotonic() - started:.1f} s\n" + "\n".join(tb[-30:])
        )
        return
    series.runs.append(run)
    status = "ok" if not run.problems else "CHECK FAILED: " + "; ".join(run.problems)
    _progress(
        f"  {label}: {run.rows:,} rows in {run.seconds:.2f} s = {run.rate:,.0f} rows/s  {status}"
    )


@dataclass
class Overheads:
    """Seconds for a one-row read and a one-row write through the data source: the fixed
    cost of a query (planning, a Python worker round trip per task), whatever N is."""

    read: Optional[float] = None
    write: Optional[float] = None


def _one_row_costs(
    spark: Any, admin: Admin, url: str, stream: str, server_pid: Optional[int], tries: int
) -> Overheads:
    from pyspark.sql import functions as F

    costs = Overheads()
    reads, writes = [], []
    for i in range(tries):
        t0 = time.perf_counter()
        df = (
            spark.read.format("jetstream")
            .option("servers", url)
            .option("stream", stream)
            .option("end_seq", "1")
            .load()
        )
        row = df.select(F.sum(F.length("data")).alias("bytes")).first()
        if int(row["bytes"] or 0) == MSG_SIZE:
            reads.append(time.perf_counter() - t0)
        run = write_source(spark, admin, url, f"one_{i}", 1, 1, server_pid)
        if not run.problems:
            writes.append(run.seconds)
    costs.read = min(reads) if reads else None
    costs.write = min(writes) if writes else None
    return costs


def run_all(
    spark: Any, url: str, server_pid: Optional[int], sizes: Sizes, partitions: int
) -> Tuple[Dict[Key, Series], Overheads]:
    admin = Admin(url)
    results: Dict[Key, Series] = {}
    try:
        read_stream, naive_stream = "BENCH_SPARK_READ", "BENCH_SPARK_READ_NAIVE"
        _progress(f"  preloading {sizes.n:,} + {sizes.naive_n:,} messages (untimed)")
        admin.preload(read_stream, "bench.spark.r", sizes.n)
        # The naive reads get a stream of their own of naive_n messages: reading the first
        # naive_n of the big one would do as well; a stream of that size keeps the two
        # read paths on streams of the sizes they read.
        admin.preload(naive_stream, "bench.spark.rn", sizes.naive_n)

        measure: Dict[Key, Callable[[int, int], RunResult]] = {
            ("read", "source"): lambda n, i: read_source(
                spark, url, read_stream, n, partitions, server_pid
            ),
            ("read", "naive"): lambda n, i: read_naive(
                spark, url, naive_stream, n, partitions, server_pid
            ),
            ("write", "source"): lambda n, i: write_source(
                spark, admin, url, f"s{i}", n, partitions, server_pid
            ),
            ("write", "naive"): lambda n, i: write_naive(
                spark, admin, url, f"n{i}", n, partitions, server_pid
            ),
        }
        _progress("  warming up (untimed): the first Python workers start here")
        warm = Series(WARMUP_ROWS)
        t0 = time.monotonic()
        _attempt(
            warm,
            "warm-up read",
            lambda n, i: read_source(spark, url, naive_stream, n, partitions, server_pid),
            sizes.naive_n,
        )
        _attempt(
            warm,
            "warm-up write",
            lambda n, i: write_source(spark, admin, url, "warmup", n, partitions, server_pid),
            WARMUP_ROWS,
        )
        _attempt(warm, "warm-up naive read", measure[("read", "naive")], NAIVE_WARMUP_ROWS)
        _attempt(
            warm,
            "warm-up naive write",
            lambda n, i: write_naive(spark, admin, url, "warmup_naive", n, partitions, server_pid),
            NAIVE_WARMUP_ROWS,
        )
        _progress(f"  warm-up took {time.monotonic() - t0:.1f} s")
        if warm.problems():
            results[("warmup", "all")] = warm

        plan: List[Tuple[str, str, int, int]] = [
            ("read", "source", sizes.n, sizes.runs),
            ("read", "naive", sizes.naive_n, sizes.naive_runs),
            ("write", "source", sizes.n, sizes.runs),
            ("write", "naive", sizes.naive_n, sizes.naive_runs),
        ]
        for op, method, n, runs in plan:
            series = results.setdefault((op, method), Series(n))
            for i in range(runs):
                label = f"{op} {method} run {i + 1}/{runs} ({n:,} rows)"
                _attempt(series, label, measure[(op, method)], n, i)

        _progress("  one-row read and write (the fixed cost of a query)")
        overheads = _one_row_costs(spark, admin, url, read_stream, server_pid, tries=3)
        admin.delete(read_stream)
        admin.delete(naive_stream)
    finally:
        admin.close()
    return results, overheads


# --- the report --------------------------------------------------------------------------------


def _ratio(a: Optional[float], b: Optional[float]) -> str:
    if not a or not b:
        return "n/a"
    ratio = a / b
    return f"{ratio:,.0f}x" if ratio >= 100 else f"{ratio:,.1f}x"


def print_report(
    results: Dict[Key, Series],
    overheads: Overheads,
    sizes: Sizes,
    partitions: int,
    cores: int,
    quick: bool,
    versions: Dict[str, str],
    total: float,
) -> List[str]:
    """The table and the notes; returns the problems found (empty: every check passed)."""
    print(f"# jetstream_sync Spark data source benchmarks ({'quick' if quick else 'full'})\n")
    print("| operation | data source rows/s | naive (connection per row) rows/s | ratio |")
    print("| --- | ---: | ---: | ---: |")
    for op in OPS:
        rates: Dict[str, Optional[float]] = {}
        for method in METHODS:
            series = results.get((op, method))
            best = series.best() if series is not None else None
            rates[method] = best.rate if best is not None else None
        label = f"batch {op}"
        cells = [label, _fmt_int(rates["source"]), _fmt_int(rates["naive"])]
        cells.append(_ratio(rates["source"], rates["naive"]))
        print("| " + " | ".join(cells) + " |")

    notes = [
        f"N: {sizes.n:,} rows of {MSG_SIZE} B per data-source run, {sizes.naive_n:,} per naive "
        f"run (N/20, at least 1,000); rows/s is the best of {sizes.runs} data-source run(s) "
        f"and {sizes.naive_runs} naive run(s), after an untimed warm-up of each path",
        f"Spark: local[{cores}], {partitions} partitions for every read and write (the "
        "`partitions` option; `spark.range(..., numPartitions)` for the written rows and the "
        "naive reads), Python worker reuse on, no task retries",
        "read: a memory stream with allow_direct, so the data source reads with batched direct "
        "gets; timed from `load()` to the row of `select(count(*), sum(length(data)))` on the "
        "driver, checked: N rows and N x 128 payload bytes",
        "naive read: `spark.range(1, n + 1).rdd.map(f).sum()`, f: `with connect(url) as nc: "
        "return len(nc.jetstream().get_msg(stream, seq=row.id).data)`; checked: n x 128 bytes",
        "write: `spark.range(N)` as (subject on 16 subjects, data binary 128 B), "
        "`df.write.format('jetstream').option('servers', url).mode('append').save()` into a "
        "fresh memory stream per run (made and deleted untimed); the data source adds a "
        "Nats-Msg-Id to every message (retries are de-duplicated); checked: the stream holds N",
        "naive write: `df.foreachPartition(f)`, f: for each row `with connect(url) as nc: "
        "nc.jetstream().publish(row.subject, bytes(row.data))` (no message id); checked: the "
        "stream holds n",
    ]
    if overheads.read is not None or overheads.write is not None:
        r = "n/a" if overheads.read is None else f"{overheads.read:.2f} s"
        w = "n/a" if overheads.write is None else f"{overheads.write:.2f} s"
        notes.append(
            f"fixed cost of a query through the data source (a one-row read / write, best of "
            f"3): {r} / {w}; it is in every data-source figure above"
        )
    for op in OPS:
        for method in METHODS:
            series = results.get((op, method))
            if series is None or not series.runs:
                continue
            figures = ", ".join(f"{r.rate:,.0f}" for r in series.runs)
            seconds = ", ".join(f"{r.seconds:.2f}" for r in series.runs)
            note = f"{op} / {method}: runs {figures} rows/s ({seconds} s)"
            best = series.best()
            if best is not None and best.server_cpu is not None and best.seconds > 0:
                note += (
                    f"; server CPU {best.server_cpu / best.seconds:.0%} of the best run's wall time"
                )
            notes.append(note)
    notes.append(
        "versions: " + ", ".join(f"{name} {version}" for name, version in versions.items())
    )
    notes.append(
        f"machine: {_cores()} cores, {_cpu_model()}, {platform.system()} {platform.release()}"
    )
    notes.append(f"total time: {total:.0f} s")

    problems: List[str] = []
    for (op, method), series in results.items():
        problems += [f"{op} / {method}: {p}" for p in series.problems()]
        if (op, method) != ("warmup", "all") and not series.runs and not series.errors:
            problems.append(f"{op} / {method}: no run")
    print("\nNotes:")
    for note in notes:
        print(f"- {note}")
    for problem in problems:
        print(f"- FAILED CHECK {problem}")
    return problems


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="N=20,000, one run each")
    parser.add_argument("--n", type=int, help="rows per data-source run (naive: N/20, >= 1,000)")
    parser.add_argument("--runs", type=int, help="data-source runs (naive runs: at most 2)")
    parser.add_argument("--partitions", type=int, default=2, help="default: 2")
    parser.add_argument("--cores", type=int, default=2, help="local[cores]; default: 2")
    args = parser.parse_args(argv)

    sizes = QUICK if args.quick else FULL
    if args.n is not None or args.runs is not None:
        runs = args.runs if args.runs is not None else sizes.runs
        sizes = Sizes(
            n=args.n if args.n is not None else sizes.n,
            runs=runs,
            naive_runs=min(runs, 2),
            deadline=sizes.deadline,
        )
    # A hang ends with every thread's stack on stderr and exit status 1.
    faulthandler.dump_traceback_later(sizes.deadline, exit=True)

    import jetstream_sync.spark
    from jetstream_sync.server import NATSServer, find_nats_server

    started = time.monotonic()
    with NATSServer(jetstream=True) as srv:
        _progress("  starting Spark")
        spark = make_session(args.cores)
        try:
            versions = {
                "Python": platform.python_version(),
                "pyspark": _version("pyspark"),
                "pyarrow": _version("pyarrow"),
                "Java": _java_version(spark),
                "jetstream_sync": _version("jetstream-sync"),
                "nats-server": _server_version(find_nats_server()),
            }
            results, overheads = run_all(spark, srv.url, srv.pid, sizes, args.partitions)
        finally:
            spark.stop()  # before the server: the workers' clients would log the loss
            jetstream_sync.spark.close_all()
    total = time.monotonic() - started
    problems = print_report(
        results, overheads, sizes, args.partitions, args.cores, args.quick, versions, total
    )
    faulthandler.cancel_dump_traceback_later()
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
