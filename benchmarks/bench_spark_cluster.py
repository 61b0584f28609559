"""The ``jetstream`` Spark data source on a real standalone cluster against ``local[2]``.

Usage::

    python benchmarks/bench_spark_cluster.py            # 200,000 rows, medians of 3 rounds
    python benchmarks/bench_spark_cluster.py --n 50000 --runs 1 --partitions 4

One embedded nats-server (JetStream on). Two Spark set-ups, one after the other in this
process (a process holds one SparkContext): ``local[2]``, then a standalone cluster started
from the pyspark package the way tests/spark_cluster does (a master and two workers of one
core and 1 GiB, one executor of 512 MiB on each, all on loopback: worker 0 on 127.0.0.1,
worker 1 on 127.0.0.2). The same work on both, with the same number of partitions:

- batch read: a file stream preloaded (untimed) with N messages of 128 B, read with
  ``spark.read.format("jetstream")...load()`` and reduced to ``count(*)`` and
  ``sum(length(data))`` (the payloads must really be read); timed from ``load()`` to the
  result on the driver;
- batch write: ``spark.range(N)`` as (subject on 16 subjects, data: the id padded to 128 B)
  saved with ``df.write.format("jetstream")`` into a fresh stream; timed: ``save()``.

Beside each, in the same session, the limits as bench_spark.py measures them: the Python
Data Source API's (``_spark_limits``: the same rows from memory; an Arrow writer that sends
nothing) and the client's (the driver reads the same range / publishes the same rows, no
Spark); "of limit" is ours / the lowest. Each set-up gets an untimed warm-up of every path;
the figures are medians of interleaved rounds. Every result is checked (rows, bytes, messages
stored); the exit status is non-zero when a check failed. Rows/s are printed, never asserted:
on one 2-core machine the cluster's extra JVMs and the loopback shuffle of its processes cost
CPU that a real cluster would spread over machines.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from bench_spark import make_session

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))  # the cluster launcher of tests/spark_cluster

MSG_SIZE = 128
WARMUP_ROWS = 1_000
TIMEOUT = 300.0  # publish_async_completed of the preload


def _stream_count(url: str, stream: str) -> int:
    import jetstream_sync as nats

    with nats.connect(url, name="bench") as nc:
        return int(nc.jetstream().stream_info(stream).state.messages)


def _new_stream(url: str, prefix: str) -> str:
    import jetstream_sync as nats

    name = f"{prefix}{uuid.uuid4().hex[:8]}".upper()
    with nats.connect(url, name="bench") as nc:
        nc.jetstream().add_stream(name=name, subjects=[f"{name.lower()}.>"])
    return name


def _summed(df: Any, n: int, t0: float) -> Tuple[float, str]:
    """``select(count(*), sum(length(data)))`` of ``df``: the seconds since ``t0`` and a
    problem ("" when it is N rows of MSG_SIZE bytes)."""
    from pyspark.sql import functions as F

    row = df.select(F.count(F.lit(1)).alias("rows"), F.sum(F.length("data")).alias("bytes")).first()
    took = time.perf_counter() - t0
    ok = (row["rows"], row["bytes"]) == (n, n * MSG_SIZE)
    return took, "" if ok else f"read {row['rows']} rows / {row['bytes']} B, expected {n}"


def read_once(spark: Any, url: str, stream: str, n: int, partitions: int) -> Tuple[float, str]:

    t0 = time.perf_counter()
    df = (
        spark.read.format("jetstream")
        .option("servers", url)
        .option("stream", stream)
        .option("partitions", str(partitions))
        .load()
    )
    return _summed(df, n, t0)


def write_once(spark: Any, url: str, n: int, partitions: int) -> Tuple[float, str]:
    stream = _new_stream(url, "BW")
    subject = stream.lower()
    df = spark.range(0, n, 1, partitions).selectExpr(
        f"concat('{subject}.', cast(id % 16 as string)) as subject",
        f"cast(lpad(cast(id as string), {MSG_SIZE}, 'x') as binary) as data",
    )
    t0 = time.perf_counter()
    df.write.format("jetstream").option("servers", url).option("stream", stream).mode(
        "append"
    ).save()
    took = time.perf_counter() - t0
    stored = _stream_count(url, stream)
    return took, "" if stored == n else f"stored {stored} messages, expected {n}"


def read_api_limit(spark: Any, n: int, partitions: int) -> Tuple[float, str]:

    t0 = time.perf_counter()
    df = (
        spark.read.format("jss_memory")
        .option("n", str(n))
        .option("partitions", str(partitions))
        .option("size", str(MSG_SIZE))
        .load()
    )
    return _summed(df, n, t0)


def write_api_limit(spark: Any, n: int, partitions: int) -> Tuple[float, str]:
    df = spark.range(0, n, 1, partitions).selectExpr(
        "concat('bench.d.', cast(id % 16 as string)) as subject",
        f"cast(lpad(cast(id as string), {MSG_SIZE}, 'x') as binary) as data",
    )
    t0 = time.perf_counter()
    df.write.format("jss_discard_arrow").mode("append").save()
    return time.perf_counter() - t0, ""


def read_client_limit(url: str, stream: str, n: int) -> Tuple[float, str]:
    import jetstream_sync as nats
    from jetstream_sync.spark._pullrange import pull_batches
    from jetstream_sync.spark._rows import COLUMNS

    with nats.connect(url, name="bench") as nc:
        js = nc.jetstream()
        t0 = time.perf_counter()
        rows = sum(b.num_rows for b in pull_batches(js, stream, 1, n, None, COLUMNS))
        took = time.perf_counter() - t0
    return took, "" if rows == n else f"read {rows} rows, expected {n}"


def write_client_limit(url: str, n: int) -> Tuple[float, str]:
    import jetstream_sync as nats
    from jetstream_sync.spark._publish import publish_all

    stream = _new_stream(url, "BC")
    subject = stream.lower()
    msgs = [
        (f"{subject}.{i % 16}", str(i).rjust(MSG_SIZE, "x").encode(), None, None) for i in range(n)
    ]
    with nats.connect(url, name="bench") as nc:
        t0 = time.perf_counter()
        publish_all(nc.jetstream(), msgs, "bench-client-0")
        took = time.perf_counter() - t0
    stored = _stream_count(url, stream)
    return took, "" if stored == n else f"stored {stored} messages, expected {n}"


PATHS = ("read ours", "read api", "read client", "write ours", "write api", "write client")


def measure(
    label: str, spark: Any, url: str, source: str, n: int, runs: int, partitions: int
) -> Dict[str, Any]:
    import _spark_limits

    _spark_limits.register(spark)
    paths: Dict[str, Callable[[int], Tuple[float, str]]] = {
        "read ours": lambda k: read_once(spark, url, source, k, partitions),
        "read api": lambda k: read_api_limit(spark, k, partitions),
        "read client": lambda k: read_client_limit(url, source, k),
        "write ours": lambda k: write_once(spark, url, k, partitions),
        "write api": lambda k: write_api_limit(spark, k, partitions),
        "write client": lambda k: write_client_limit(url, k),
    }
    warm = _new_stream(url, "WARM")
    _preload_into(url, warm, WARMUP_ROWS)
    read_once(spark, url, warm, WARMUP_ROWS, partitions)
    for path in ("read api", "write ours", "write api"):
        paths[path](WARMUP_ROWS)
    result: Dict[str, Any] = {"label": label, "errors": []}
    rates: Dict[str, List[float]] = {path: [] for path in PATHS}
    for i in range(runs):
        for path in PATHS:
            try:
                took, problem = paths[path](n)
            except Exception as exc:  # recorded, and the other paths still run
                result["errors"].append(f"{label} {path}: {type(exc).__name__}: {exc}")
                print(f"  {label} {path} round {i + 1}: ERROR {type(exc).__name__}: {exc}")
                continue
            print(f"  {label} {path} round {i + 1}: {took:.2f} s ({n / took:,.0f} rows/s)")
            if problem:
                result["errors"].append(f"{label} {path}: {problem}")
            else:
                rates[path].append(n / took)
    for path in PATHS:
        result[path] = statistics.median(rates[path]) if rates[path] else None
    return result


def _on_cluster(body: Callable[[Any], Dict[str, Any]]) -> Dict[str, Any]:
    from spark_cluster._cluster import Sessions, SparkCluster, java_missing

    why = java_missing()
    if why:
        raise SystemExit(f"cannot start the cluster: {why}")
    with tempfile.TemporaryDirectory(prefix="bench-spark-cluster-") as root:
        cluster = SparkCluster(Path(root)).start()
        sessions = Sessions(cluster, app="jetstream_sync-bench-spark-cluster")
        try:
            return body(sessions.get())
        finally:
            sessions.stop()
            cluster.stop()


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=200_000, help="rows (default 200,000)")
    parser.add_argument("--runs", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--partitions", type=int, default=4, help="default: 4")
    args = parser.parse_args(argv)

    from jetstream_sync.server import NATSServer

    started = time.perf_counter()
    results: List[Dict[str, Any]] = []
    with NATSServer(jetstream=True) as srv:
        url = srv.url
        source = _new_stream(url, "BR")
        print(f"preloading {args.n:,} messages of {MSG_SIZE} B ...", flush=True)
        _preload_into(url, source, args.n)

        print("local[2]:", flush=True)
        spark = make_session(2)  # bench_spark's local session
        try:
            results.append(
                measure("local[2]", spark, url, source, args.n, args.runs, args.partitions)
            )
        finally:
            spark.stop()
            import jetstream_sync.spark

            jetstream_sync.spark.close_all()

        print("standalone cluster (2 workers x 1 core):", flush=True)
        results.append(
            _on_cluster(
                lambda s: measure("cluster 2x1", s, url, source, args.n, args.runs, args.partitions)
            )
        )

    import pyspark

    print()
    print(
        f"jetstream_sync Spark data source, {args.n:,} rows of {MSG_SIZE} B, "
        f"{args.partitions} partitions, medians of {args.runs} rounds; pyspark "
        f"{pyspark.__version__}, Python {platform.python_version()}, {os.cpu_count()} CPUs"
    )
    print()
    print(
        "| set-up | path | jetstream_sync rows/s | Python Data Source API limit rows/s | "
        "client alone rows/s | of limit |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for r in results:
        for kind in ("read", "write"):
            ours, api, client = (r.get(f"{kind} {c}") for c in ("ours", "api", "client"))
            limits = [x for x in (api, client) if x]
            share = f"**{ours / min(limits):.2f}**" if ours and limits else "n/a"
            cells = [_rate(x) for x in (ours, api, client)]
            print(f"| {r['label']} | batch {kind} | " + " | ".join(cells) + f" | {share} |")
    errors = [e for r in results for e in r["errors"]]
    for e in errors:
        print(f"CHECK FAILED: {e}")
    print(f"\n(total {time.perf_counter() - started:.0f} s)")
    return 1 if errors else 0


def _rate(x: Optional[float]) -> str:
    return "n/a" if x is None else f"{x:,.0f}"


def _preload_into(url: str, stream: str, n: int) -> None:
    """Fill the existing stream ``stream`` (made by _new_stream) with ``n`` messages."""
    import jetstream_sync as nats

    with nats.connect(url, name="bench") as nc:
        js = nc.jetstream()
        for i in range(n):
            js.publish_async(f"{stream.lower()}.{i % 16}", b"%0*d" % (MSG_SIZE, i))
        js.publish_async_completed(timeout=TIMEOUT)


if __name__ == "__main__":
    sys.exit(main())
