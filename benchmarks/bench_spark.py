"""Spark benchmarks: the ``jetstream`` data source against the limits of its path, in one run.

Usage::

    python benchmarks/bench_spark.py [--quick]
    python -m benchmarks.bench_spark [--quick]
    python benchmarks/bench_spark.py --n 100000 --rounds 5 --partitions 2

One embedded nats-server with JetStream on and one SparkSession (``local[2]``) in this
process serve every measurement. Each path is measured against the most anything could do
on the same machine, in the same run:

- **batch read**: ``spark.read.format("jetstream")`` over a preloaded memory stream of N
  messages of 128 B, ``select(count(*), sum(length(data)))``. Limits: the Python Data
  Source API's (``jss_memory``, a source that yields the same rows as Arrow batches from
  memory: ``_spark_limits.py``) and the client's (this process reads the same range with
  the reader's own code, ``pull_batches``, no Spark).
- **batch write**: N rows of (subject, data) from ``spark.range`` saved with
  ``df.write.format("jetstream")`` into a fresh stream. Limits: the API's (a row writer and
  an Arrow writer that consume every row and send nothing) and the client's (this process
  publishes the same rows with the sink's own code, ``publish_all``, ids included).
- **streaming copy**: ``readStream.format("jetstream")`` of the preloaded stream with
  ``Trigger.AvailableNow``, written to another stream and to parquet.

"of limit" is ours / the lowest limit. Every figure is the median of the rounds, the paths
interleaved round by round; every run is checked (rows, bytes, messages stored) and the exit
status is non-zero when a check failed. See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import faulthandler
import os
import platform
import shutil
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

from _harness import _cores, _cpu_model, _fmt_int, _server_version, _version, median

HERE = os.path.dirname(os.path.abspath(__file__))
MSG_SIZE = 128
PAYLOAD = b"x" * MSG_SIZE
SUBJECTS = 16
API_TIMEOUT = 10.0  # stream create, info, delete (driver side)
PRELOAD_TIMEOUT = 120.0
READ_STREAM, READ_PREFIX = "BENCH_SPARK_READ", "bench.spark.r"


@dataclass(frozen=True)
class Sizes:
    n: int  # rows per run
    rounds: int
    deadline: float  # the whole script: after this, every thread's stack and exit 1


FULL = Sizes(n=200_000, rounds=3, deadline=1_800.0)
QUICK = Sizes(n=20_000, rounds=1, deadline=600.0)


# --- the server side: streams ------------------------------------------------------------------


class Admin:
    """The driver's own connection, for stream set-up and checks (never timed)."""

    def __init__(self, url: str) -> None:
        import jetstream_sync

        self.nc = jetstream_sync.connect(url, name="bench-spark-admin")
        self.js = self.nc.jetstream(timeout=API_TIMEOUT)

    def fresh_stream(self, name: str, subject: str) -> None:
        import jetstream_sync

        self.delete(name)
        self.js.add_stream(name=name, subjects=[subject], storage=jetstream_sync.StorageType.MEMORY)

    def stored(self, name: str) -> int:
        return int(self.js.stream_info(name).state.messages)

    def delete(self, name: str) -> None:
        import jetstream_sync

        try:
            self.js.delete_stream(name)
        except jetstream_sync.StreamNotFoundError:
            pass

    def preload(self, name: str, subject_prefix: str, n: int) -> None:
        """A fresh stream of ``n`` messages of MSG_SIZE bytes on SUBJECTS subjects."""
        self.fresh_stream(name, f"{subject_prefix}.>")
        subjects = [f"{subject_prefix}.{i}" for i in range(SUBJECTS)]
        futures = [self.js.publish_async(subjects[i % SUBJECTS], PAYLOAD) for i in range(n)]
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
    retries: a failed task fails the run instead of being hidden in its time. The workers
    can import ``_spark_limits`` (this folder is on their PYTHONPATH)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    path = os.environ.get("PYTHONPATH", "")
    if HERE not in path.split(os.pathsep):
        os.environ["PYTHONPATH"] = HERE + (os.pathsep + path if path else "")
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


# --- one measured run of each path -------------------------------------------------------------


@dataclass
class Run:
    seconds: float
    rows: int
    problems: List[str] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else 0.0


def _sum_read(df: Any, n: int) -> Tuple[int, List[str]]:
    """``select(count(*), sum(length(data)))`` of ``df``, checked against ``n`` rows."""
    from pyspark.sql import functions as F

    row = df.select(F.count(F.lit(1)).alias("rows"), F.sum(F.length("data")).alias("bytes")).first()
    rows, size = int(row["rows"]), int(row["bytes"] or 0)
    problems = []
    if rows != n:
        problems.append(f"{rows:,} rows read, not {n:,}")
    if size != n * MSG_SIZE:
        problems.append(f"{size:,} payload bytes read, not {n * MSG_SIZE:,}")
    return rows, problems


class Bench:
    def __init__(self, spark: Any, url: str, admin: Admin, n: int, partitions: int) -> None:
        self.spark, self.url, self.admin, self.n, self.partitions = (
            spark,
            url,
            admin,
            n,
            partitions,
        )
        self.tmp = tempfile.mkdtemp(prefix="bench-spark-")
        self.runs = 0

    def _tag(self) -> str:
        self.runs += 1
        return f"t{self.runs}"

    # batch read

    def read_ours(self) -> Run:
        t0 = time.perf_counter()
        df = (
            self.spark.read.format("jetstream")
            .option("servers", self.url)
            .option("stream", READ_STREAM)
            .option("partitions", str(self.partitions))
            .load()
        )
        rows, problems = _sum_read(df, self.n)
        return Run(time.perf_counter() - t0, rows, problems)

    def read_api_limit(self) -> Run:
        t0 = time.perf_counter()
        df = (
            self.spark.read.format("jss_memory")
            .option("n", str(self.n))
            .option("partitions", str(self.partitions))
            .option("size", str(MSG_SIZE))
            .load()
        )
        rows, problems = _sum_read(df, self.n)
        return Run(time.perf_counter() - t0, rows, problems)

    def read_client_limit(self) -> Run:
        """The same range, read by the source's own code in this process: no Spark."""
        from jetstream_sync.spark._pullrange import pull_batches
        from jetstream_sync.spark._rows import COLUMNS

        js = self.admin.js
        t0 = time.perf_counter()
        rows = size = 0
        for batch in pull_batches(js, READ_STREAM, 1, self.n, None, COLUMNS):
            rows += batch.num_rows
            size += batch.column("data").nbytes  # (offsets included: checked loosely)
        run = Run(time.perf_counter() - t0, rows)
        if rows != self.n or size < self.n * MSG_SIZE:
            run.problems.append(f"{rows:,} rows ({size:,} bytes) read, not {self.n:,}")
        return run

    def read_raw_limit(self) -> Run:
        """The same range read by a raw socket loop (``_raw.range_read``): no client."""
        import _raw

        from jetstream_sync.jetstream import api

        info = self.admin.js.add_consumer(
            READ_STREAM,
            config=api.ConsumerConfig(
                ack_policy=api.AckPolicy.NONE, mem_storage=True, inactive_threshold=60.0
            ),
        )
        try:
            with _raw.RawConn(self.url) as conn:
                t0 = time.perf_counter()
                rows = _raw.range_read(conn, READ_STREAM, info.name, self.n, 10_000)
                run = Run(time.perf_counter() - t0, rows)
        finally:
            self.admin.js.delete_consumer(READ_STREAM, info.name)
        if rows != self.n:
            run.problems.append(f"{rows:,} rows read, not {self.n:,}")
        return run

    # batch write

    def _rows(self, prefix: str) -> Any:
        return self.spark.range(0, self.n, 1, self.partitions).selectExpr(
            f"concat('{prefix}.', cast(id % {SUBJECTS} as string)) as subject",
            f"cast(lpad(cast(id as string), {MSG_SIZE}, 'x') as binary) as data",
        )

    def _write_to_stream(
        self, prepare: Callable[[str, str], Any], publish: Callable[[Any], Optional[str]]
    ) -> Run:
        """A write into a fresh stream (made and deleted untimed): ``prepare(prefix, tag)``
        untimed, then ``publish`` of what it made, timed (it returns a problem, or None);
        checked: the stream holds N."""
        tag = self._tag()
        stream, prefix = f"BENCH_SPARK_W_{tag}".upper(), f"bench.spark.w.{tag}"
        self.admin.fresh_stream(stream, f"{prefix}.>")
        try:
            work = prepare(prefix, tag)
            t0 = time.perf_counter()
            problem = publish(work)
            seconds = time.perf_counter() - t0
            stored = self.admin.stored(stream)
            run = Run(seconds, stored)
            if stored != self.n:
                run.problems.append(f"the stream holds {stored:,} messages, not {self.n:,}")
            if problem:
                run.problems.append(problem)
            return run
        finally:
            self.admin.delete(stream)

    def _spark_write(self, df: Any) -> Optional[str]:
        df.write.format("jetstream").option("servers", self.url).mode("append").save()
        return None

    def write_ours(self) -> Run:
        return self._write_to_stream(lambda prefix, tag: self._rows(prefix), self._spark_write)

    def _write_discard(self, fmt: str) -> Run:
        df = self._rows("bench.spark.d")
        t0 = time.perf_counter()
        df.write.format(fmt).mode("append").save()
        return Run(time.perf_counter() - t0, self.n)  # the writers count; Spark checks tasks

    def write_api_rows_limit(self) -> Run:
        return self._write_discard("jss_discard")

    def write_api_arrow_limit(self) -> Run:
        return self._write_discard("jss_discard_arrow")

    def _columns(self, prefix: str) -> Tuple[List[str], List[bytes]]:
        """The rows of ``_rows``, made in this process: subjects and payloads."""
        subjects = [f"{prefix}.{i % SUBJECTS}" for i in range(self.n)]
        return subjects, [str(i).rjust(MSG_SIZE, "x").encode() for i in range(self.n)]

    def write_client_limit(self) -> Run:
        """The same rows, published by the sink's own code in this process: no Spark."""
        from jetstream_sync.spark._publish import publish_all

        def prepare(prefix: str, tag: str) -> Any:
            subjects, datas = self._columns(prefix)
            return [(s, d, None, None) for s, d in zip(subjects, datas)], f"bench-{tag}-0"

        def publish(work: Any) -> Optional[str]:
            publish_all(self.admin.js, *work)
            return None

        return self._write_to_stream(prepare, publish)

    def write_raw_limit(self) -> Run:
        """The same rows published by a raw socket loop with the same ids
        (``_raw.js_publish_with_ids``): no client."""
        import _raw

        def prepare(prefix: str, tag: str) -> Any:
            return (*self._columns(prefix), f"bench-{tag}-0")

        def publish(work: Any) -> Optional[str]:
            with _raw.RawConn(self.url) as conn:
                acked, failed = _raw.js_publish_with_ids(conn, *work, 16_384)
            return None if (acked, failed) == (self.n, 0) else f"{acked} acked, {failed} failed"

        return self._write_to_stream(prepare, publish)

    # streaming copy

    def _stream_source(self) -> Any:
        return (
            self.spark.readStream.format("jetstream")
            .option("servers", self.url)
            .option("stream", READ_STREAM)
            .option("partitions", str(self.partitions))
            .load()
        )

    def copy_to_stream(self) -> Run:
        def save(prefix: str) -> Optional[str]:
            checkpoint = os.path.join(self.tmp, f"cp-{prefix}")
            query = (
                self._stream_source()
                .selectExpr(f"concat('{prefix}.', subject) as subject", "data")
                .writeStream.format("jetstream")
                .option("servers", self.url)
                .option("checkpointLocation", checkpoint)
                .trigger(availableNow=True)
                .start()
            )
            query.awaitTermination()
            return None

        return self._write_to_stream(lambda prefix, tag: prefix, save)

    def copy_to_parquet(self) -> Run:
        tag = self._tag()
        out = os.path.join(self.tmp, f"pq-{tag}")
        t0 = time.perf_counter()
        query = (
            self._stream_source()
            .select("subject", "data", "stream_seq", "timestamp")
            .writeStream.format("parquet")
            .option("path", out)
            .option("checkpointLocation", os.path.join(self.tmp, f"cp-{tag}"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        seconds = time.perf_counter() - t0
        rows = self.spark.read.parquet(out).count()
        run = Run(seconds, rows)
        if rows != self.n:
            run.problems.append(f"{rows:,} rows in parquet, not {self.n:,}")
        shutil.rmtree(out, ignore_errors=True)
        return run

    def close(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


# --- the plan, the rounds, the report ----------------------------------------------------------

# (row of the table, column, label, method name)
PLAN: List[Tuple[str, str, str]] = [
    ("batch read", "ours", "read_ours"),
    ("batch read", "api", "read_api_limit"),
    ("batch read", "client", "read_client_limit"),
    ("batch read", "raw", "read_raw_limit"),
    ("batch write", "ours", "write_ours"),
    ("batch write", "api_rows", "write_api_rows_limit"),
    ("batch write", "api", "write_api_arrow_limit"),
    ("batch write", "client", "write_client_limit"),
    ("batch write", "raw", "write_raw_limit"),
    ("streaming copy, stream to stream", "ours", "copy_to_stream"),
    ("streaming copy, stream to parquet", "ours", "copy_to_parquet"),
]
ROWS = [
    "batch read",
    "batch write",
    "streaming copy, stream to stream",
    "streaming copy, stream to parquet",
]
Key = Tuple[str, str]


def _progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _attempt(label: str, fn: Callable[[], Run], problems: List[str]) -> Optional[Run]:
    started = time.monotonic()
    try:
        run = fn()
    except Exception as exc:
        tb = traceback.format_exc().strip().splitlines()
        problems.append(f"{label}: {type(exc).__name__}: {str(exc).splitlines()[:1]}")
        _progress(
            f"  {label}: ERROR after {time.monotonic() - started:.1f} s\n" + "\n".join(tb[-30:])
        )
        return None
    status = "ok" if not run.problems else "CHECK FAILED: " + "; ".join(run.problems)
    problems.extend(f"{label}: {p}" for p in run.problems)
    _progress(
        f"  {label}: {run.rows:,} rows in {run.seconds:.2f} s = {run.rate:,.0f} rows/s  {status}"
    )
    return run


def run_all(
    spark: Any, url: str, sizes: Sizes, partitions: int
) -> Tuple[Dict[Key, List[float]], List[str]]:
    import _spark_limits

    _spark_limits.register(spark)
    admin = Admin(url)
    rates: Dict[Key, List[float]] = {}
    problems: List[str] = []
    try:
        _progress(f"  preloading {sizes.n:,} messages (untimed)")
        admin.preload(READ_STREAM, READ_PREFIX, sizes.n)
        bench = Bench(spark, url, admin, sizes.n, partitions)
        try:
            _progress("  warming up every path (untimed): the Python workers start here")
            warm = Bench(spark, url, admin, sizes.n, partitions)
            for row, column, method in PLAN:
                _attempt(f"warm-up {row} / {column}", getattr(warm, method), problems)
            warm.close()
            for r in range(1, sizes.rounds + 1):
                for row, column, method in PLAN:
                    label = f"round {r}/{sizes.rounds} {row} / {column}"
                    run = _attempt(label, getattr(bench, method), problems)
                    if run is not None and not run.problems:
                        rates.setdefault((row, column), []).append(run.rate)
        finally:
            bench.close()
        admin.delete(READ_STREAM)
    finally:
        admin.close()
    return rates, problems


def _k(x: Optional[float]) -> str:
    return "—" if x is None else _fmt_int(x)


def report(
    rates: Dict[Key, List[float]],
    problems: List[str],
    sizes: Sizes,
    partitions: int,
    cores: int,
    quick: bool,
    versions: Dict[str, str],
    total: float,
) -> Dict[str, Optional[float]]:
    """Print the table and the notes; returns each row's "of limit"."""
    med = {key: median(values) for key, values in rates.items()}
    print(
        f"# jetstream_sync Spark data source against its limits ({'quick' if quick else 'full'})\n"
    )
    print(
        "| path | jetstream_sync rows/s | Python Data Source API limit rows/s | "
        "client alone (no Spark) rows/s | raw socket loop (no client) rows/s | of limit |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    shares: Dict[str, Optional[float]] = {}
    for row in ROWS:
        ours = med.get((row, "ours"))
        api = med.get((row, "api"))
        rows_writer = med.get((row, "api_rows"))
        client = med.get((row, "client"))
        raw = med.get((row, "raw"))
        limits = [x for x in (api, rows_writer, client) if x]
        share = ours / min(limits) if ours and limits else None
        shares[row] = share
        api_cell = _k(api)
        if rows_writer is not None:
            api_cell = f"{_k(api)} (Arrow writer) · {_k(rows_writer)} (row writer)"
        cells = [row, _k(ours), api_cell, _k(client), _k(raw)]
        cells.append("—" if share is None else f"**{share:.2f}**")
        print("| " + " | ".join(cells) + " |")
    notes = [
        f"N: {sizes.n:,} rows of {MSG_SIZE} B on {SUBJECTS} subjects per run; each figure is "
        f"the median of {sizes.rounds} round(s), the paths interleaved in every round, after "
        "an untimed warm-up of each",
        f"Spark: local[{cores}], {partitions} partitions for every read and write, Python "
        "worker reuse on, no task retries; nats-server on the same machine",
        "of limit: jetstream_sync / the lower of the API's limit and the client alone (1.0: "
        "as fast as the Python Data Source API allows, or as the client alone can read or "
        "publish); the raw socket loop shows how far the client alone is from what Python "
        "can do with one socket",
        "batch read: a memory stream, `select(count(*), sum(length(data)))`, checked: N rows "
        "and N x 128 payload bytes; API limit: `jss_memory` (benchmarks/_spark_limits.py) "
        "yields the same schema and rows as Arrow batches of 10,000 from memory; client alone: "
        "the source's reader (`pull_batches`) over the same range in the driver process; raw "
        "socket loop: the same pulls and parse with no client (`_raw.range_read`), for scale",
        "batch write: `spark.range(N)` as (subject, data 128 B) saved with "
        "`df.write.format('jetstream')` into a fresh memory stream (checked: it holds N), a "
        "Nats-Msg-Id on every message; API limits: writers that count the rows and send "
        "nothing; client alone: the sink's `publish_all` of the same rows and ids in the "
        "driver process; raw socket loop: the same ids, frames and window with no client "
        "(`_raw.js_publish_with_ids`), for scale",
        "streaming copy: `readStream.format('jetstream')` of the read stream with "
        "`Trigger.AvailableNow`, to a fresh stream (`writeStream.format('jetstream')`, "
        "checked: it holds N) and to parquet (checked: N rows read back); timed from start() "
        "to the end of awaitTermination()",
    ]
    for row in ROWS:
        for column in ("ours", "api", "api_rows", "client", "raw"):
            values = rates.get((row, column))
            if values:
                notes.append(f"{row} / {column}: rounds " + ", ".join(f"{v:,.0f}" for v in values))
    notes.append("versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()))
    notes.append(
        f"machine: {_cores()} cores, {_cpu_model()}, {platform.system()} {platform.release()}"
    )
    notes.append(f"total time: {total:.0f} s")
    print("\nNotes:")
    for note in notes:
        print(f"- {note}")
    for problem in problems:
        print(f"- FAILED CHECK {problem}")
    return shares


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="N=20,000, one round")
    parser.add_argument("--n", type=int, help="rows per run")
    parser.add_argument("--rounds", type=int, help="interleaved rounds (medians)")
    parser.add_argument("--partitions", type=int, default=2, help="default: 2")
    parser.add_argument("--cores", type=int, default=2, help="local[cores]; default: 2")
    args = parser.parse_args(argv)

    sizes = QUICK if args.quick else FULL
    sizes = Sizes(
        n=args.n if args.n is not None else sizes.n,
        rounds=args.rounds if args.rounds is not None else sizes.rounds,
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
            rates, problems = run_all(spark, srv.url, sizes, args.partitions)
        finally:
            spark.stop()  # before the server: the workers' clients would log the loss
            jetstream_sync.spark.close_all()
    total = time.monotonic() - started
    report(rates, problems, sizes, args.partitions, args.cores, args.quick, versions, total)
    faulthandler.cancel_dump_traceback_later()
    return 1 if problems else 0


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    sys.exit(main())
