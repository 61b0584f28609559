"""Structured Streaming with the ``jetstream`` data source against a real server: offsets are
stream sequences, so a query stopped and restarted from its checkpoint neither loses nor
repeats a row; a micro-batch replayed after a crash is written again with the same message
ids and the server drops the copies."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any, List, Optional

import jetstream_sync as nats
from jetstream_sync.server import NATSServer


def _stream(url: str, prefix: str, n: int = 0, start: int = 0) -> str:
    name = f"{prefix}{uuid.uuid4().hex[:8]}".upper()
    with nats.connect(url) as nc:
        nc.jetstream().add_stream(name=name, subjects=[f"{name.lower()}.>"])
    if n:
        _publish(url, name, n, start)
    return name


def _publish(url: str, stream: str, n: int, start: int = 0) -> None:
    with nats.connect(url) as nc:
        js = nc.jetstream()
        for i in range(start, start + n):
            js.publish_async(f"{stream.lower()}.{'even' if i % 2 == 0 else 'odd'}", b"%d" % i)
        js.publish_async_completed(timeout=30)


def _source(spark: Any, url: str, stream: str, **options: Any) -> Any:
    reader = spark.readStream.format("jetstream").option("servers", url).option("stream", stream)
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load()


def _wait(predicate: Any, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def _rows_in(spark: Any, path: Path) -> List[int]:
    if not (path / "_spark_metadata").exists():
        return []
    rows = spark.read.schema("stream_seq long").parquet(str(path)).collect()
    return sorted(r.stream_seq for r in rows)


def test_restart_from_checkpoint_neither_loses_nor_repeats(
    spark: Any, spark_nats: NATSServer, tmp_path: Path
) -> None:
    url = spark_nats.url
    stream = _stream(url, "RS", 200)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    def start(**trigger: Any) -> Any:
        df = _source(spark, url, stream, max_rows_per_trigger=100, partitions=2)
        return (
            df.writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(checkpoint))
            .trigger(**trigger)
            .start()
        )

    first = start(processingTime="200 milliseconds")
    try:
        _wait(lambda: len(_rows_in(spark, out)) >= 100, "a micro-batch")
        _publish(url, stream, 150, start=200)  # more arrives while the query runs
    finally:
        first.stop()
    stopped_at = len(_rows_in(spark, out))
    assert 0 < stopped_at < 400  # stopped part way: the restart has work to do
    _publish(url, stream, 50, start=350)  # and more while it is stopped

    second = start(availableNow=True)
    assert second.awaitTermination(120)
    rows = _rows_in(spark, out)
    assert rows == list(range(1, 401))  # every sequence once: nothing lost, nothing twice
    batches = [p["numInputRows"] for p in second.recentProgress if p["numInputRows"]]
    assert batches and max(batches) <= 100  # max_rows_per_trigger held


def test_filter_and_starting_latest(spark: Any, spark_nats: NATSServer, tmp_path: Path) -> None:
    url = spark_nats.url
    stream = _stream(url, "FL", 50)
    got: List[Any] = []
    df = _source(spark, url, stream, filter_subject=f"{stream.lower()}.even", starting="latest")
    query = (
        df.writeStream.foreachBatch(lambda batch, _id: got.extend(batch.collect()))
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        _wait(lambda: query.lastProgress is not None, "the first micro-batch")
        _publish(url, stream, 20, start=50)  # sequences 51..70, even payloads on .even
        _wait(lambda: len(got) >= 10, "the new even messages")
    finally:
        query.stop()
    assert sorted(r.stream_seq for r in got) == list(range(51, 71, 2))
    assert {r.subject for r in got} == {f"{stream.lower()}.even"}
    assert sorted(int(r.data) for r in got) == list(range(50, 70, 2))


def test_replayed_micro_batch_is_deduplicated_by_the_server(
    spark: Any, spark_nats: NATSServer, tmp_path: Path
) -> None:
    url = spark_nats.url
    source = _stream(url, "SRC", 300)
    target = _stream(url, "DST")
    checkpoint = tmp_path / "checkpoint"

    def run() -> None:
        df = _source(spark, url, source, max_rows_per_trigger=150)
        query = (
            df.selectExpr(f"'{target.lower()}.copy' AS subject", "data")
            .writeStream.format("jetstream")
            .option("servers", url)
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(120)
        assert query.exception() is None

    run()
    with nats.connect(url) as nc:
        assert nc.jetstream().stream_info(target).state.messages == 300
    # A crash after the sink wrote the last micro-batch but before Spark recorded it:
    # drop the commit record, and the restarted query runs that micro-batch again.
    commits = sorted((checkpoint / "commits").iterdir(), key=lambda p: p.name)
    last = [p for p in commits if p.name.isdigit()][-1]
    last.unlink()
    (checkpoint / "commits" / f".{last.name}.crc").unlink(missing_ok=True)
    run()
    with nats.connect(url) as nc:
        js = nc.jetstream()
        assert js.stream_info(target).state.messages == 300  # the replay stored nothing new
        datas = sorted(int(js.get_msg(target, s).data) for s in range(1, 301))
    assert datas == list(range(300))


def test_fail_on_data_loss(spark: Any, spark_nats: NATSServer, tmp_path: Path) -> None:
    """A checkpointed sequence no longer in the stream (here: purged) fails the query with a
    clear error by default (Kafka's failOnDataLoss); set to false, the query skips ahead."""
    url = spark_nats.url
    stream = _stream(url, "DL", 20)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    def run(**options: Any) -> Optional[str]:
        """The query's error, or None when it read everything."""
        df = _source(spark, url, stream, **options)
        query = (
            df.writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        try:
            assert query.awaitTermination(120), "the query did not end"
        except Exception as exc:  # the query's failure, raised by awaitTermination
            return str(exc)
        return None

    assert run() is None
    assert _rows_in(spark, out) == list(range(1, 21))
    _publish(url, stream, 10, start=20)  # 21..30, then removed before the query reads them
    with nats.connect(url) as nc:
        nc.jetstream().purge_stream(stream)
    _publish(url, stream, 5, start=30)  # 31..35
    failed = run()
    assert failed is not None
    assert "sequences 21..30" in failed and "failOnDataLoss" in failed
    assert _rows_in(spark, out) == list(range(1, 21))  # nothing read past the loss
    assert run(failOnDataLoss="false") is None
    assert _rows_in(spark, out) == list(range(1, 21)) + list(range(31, 36))


def test_progress_shows_how_far_behind_the_stream_a_query_is(
    spark: Any, spark_nats: NATSServer, tmp_path: Path
) -> None:
    """Each trigger's progress carries the stream's end (latestOffset) beside what the batch
    read to (endOffset): their difference is the backlog, as Kafka's offsets behind latest."""
    url = spark_nats.url
    stream = _stream(url, "LAG", 300)
    df = _source(spark, url, stream, maxOffsetsPerTrigger=100)
    query = (
        df.writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120)
    behind = [
        json.loads(s["latestOffset"])["seq"] - json.loads(s["endOffset"])["seq"]
        for p in query.recentProgress
        for s in p["sources"]
        if p["numInputRows"]
    ]
    assert behind == [200, 100, 0]


def test_min_offsets_per_trigger_and_max_trigger_delay(
    spark: Any, spark_nats: NATSServer, tmp_path: Path
) -> None:
    """Kafka's minOffsetsPerTrigger holds triggers back until enough waits; maxTriggerDelay
    lets a smaller batch through once it has passed (issue 18, 3)."""
    url = spark_nats.url
    stream = _stream(url, "MIN", 5)
    got: List[int] = []

    def run(name: str, **options: Any) -> Any:
        df = _source(spark, url, stream, **options)
        return (
            df.writeStream.foreachBatch(lambda batch, _id: got.append(batch.count()))
            .option("checkpointLocation", str(tmp_path / name))
            .trigger(processingTime="200 milliseconds")
            .start()
        )

    held = run("held", minOffsetsPerTrigger=10, maxTriggerDelay="10m")
    try:
        _wait(lambda: len(held.recentProgress) >= 3, "three triggers")
        assert [n for n in got if n] == []  # 5 waiting, 10 wanted: no batch yet
        _publish(url, stream, 5, start=5)
        _wait(lambda: any(got), "the batch of 10")
        assert [n for n in got if n] == [10]
    finally:
        held.stop()
    got.clear()
    delayed = run("delayed", minOffsetsPerTrigger=1000, maxTriggerDelay="1s")
    try:
        _wait(lambda: any(got), "the batch the delay lets through")
        assert [n for n in got if n] == [10]
    finally:
        delayed.stop()
