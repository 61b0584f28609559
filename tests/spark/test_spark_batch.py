"""The ``jetstream`` data source against a real server: batch reads (direct get and the
ordered-consumer fallback), batch writes (retried tasks de-duplicated), and one connection
per Python worker for ``publish_partition``."""

from __future__ import annotations

import json
import urllib.request
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator, List, Set, Tuple

import pytest

import jetstream_sync as nats
from jetstream_sync.jetstream.api import format_time
from jetstream_sync.server import NATSServer
from jetstream_sync.spark.helpers import publish_partition

N = 1000

Expected = Dict[int, Tuple[str, bytes, Dict[str, List[str]], Any]]


def _fill(url: str, stream: str, allow_direct: bool) -> Expected:
    """A stream of N messages on <stream>.a / <stream>.b; some with headers and an id."""
    prefix = stream.lower()
    expected: Expected = {}
    with nats.connect(url) as nc:
        js = nc.jetstream()
        js.add_stream(name=stream, subjects=[f"{prefix}.>"], allow_direct=allow_direct)
        futures = []
        for i in range(N):
            subject = f"{prefix}.{'a' if i % 3 == 0 else 'b'}"
            headers = {"K": ["v1", str(i)]} if i % 5 == 0 else {}
            msg_id = f"id-{i}" if i % 7 == 0 else None
            futures.append(
                js.publish_async(subject, b"m%d" % i, headers=headers or None, msg_id=msg_id)
            )
            if msg_id:
                headers = {**headers, "Nats-Msg-Id": [msg_id]}
            expected[i + 1] = (subject, b"m%d" % i, headers, msg_id)
        js.publish_async_completed(timeout=30)
        assert [f.result().seq for f in futures] == list(range(1, N + 1))
    return expected


def _read(spark: Any, url: str, stream: str, **options: Any) -> Any:
    reader = spark.read.format("jetstream").option("servers", url).option("stream", stream)
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load()


def _check_rows(rows: List[Any], expected: Expected, seqs: List[int], stream: str) -> None:
    got = sorted(r.stream_seq for r in rows)
    assert got == sorted(seqs)  # every sequence exactly once
    for r in rows:
        subject, data, headers, msg_id = expected[r.stream_seq]
        assert (r.subject, bytes(r.data), r.msg_id, r.stream) == (subject, data, msg_id, stream)
        assert {k: list(v) for k, v in (r.headers or {}).items()} == headers
        assert r.timestamp is not None


@pytest.fixture(scope="module")
def direct_stream(spark_nats: NATSServer) -> Expected:
    return _fill(spark_nats.url, "RD", allow_direct=True)


def test_read_partitions_filter_and_range(
    spark: Any, spark_nats: NATSServer, direct_stream: Expected
) -> None:
    url = spark_nats.url
    df = _read(spark, url, "RD", partitions=3)
    assert df.rdd.getNumPartitions() == 3
    assert [f.name for f in df.schema.fields] == [
        "subject", "data", "headers", "stream", "stream_seq", "timestamp", "msg_id"
    ]  # fmt: skip
    _check_rows(df.collect(), direct_stream, list(range(1, N + 1)), "RD")

    filtered = _read(spark, url, "RD", partitions=3, filter_subject="rd.a").collect()
    want = [s for s, v in direct_stream.items() if v[0] == "rd.a"]
    _check_rows(filtered, direct_stream, want, "RD")

    ranged = _read(spark, url, "RD", partitions=3, start_seq=100, end_seq=199).collect()
    _check_rows(ranged, direct_stream, list(range(100, 200)), "RD")


def test_read_by_time(spark: Any, spark_nats: NATSServer, direct_stream: Expected) -> None:
    with nats.connect(spark_nats.url) as nc:
        js = nc.jetstream()
        t500 = js.get_msg("RD", seq=500).time
        t700 = js.get_msg("RD", seq=700).time
    assert t500 is not None and t700 is not None
    start, end = format_time(t500), format_time(t700)  # nanoseconds kept
    rows = _read(spark, spark_nats.url, "RD", start_time=start, end_time=end)
    assert rows.rdd.getNumPartitions() == 2  # register(): the default parallelism
    # start_time included, end_time excluded
    assert sorted(r.stream_seq for r in rows.select("stream_seq").collect()) == list(
        range(500, 700)
    )
    future = "2999-01-01T00:00:00Z"
    assert _read(spark, spark_nats.url, "RD", start_time=future).count() == 0


def test_read_by_direct_get(spark: Any, spark_nats: NATSServer, direct_stream: Expected) -> None:
    """direct=true: batched direct get instead of a consumer, the same rows."""
    url = spark_nats.url
    _check_rows(
        _read(spark, url, "RD", partitions=3, direct="true").collect(),
        direct_stream,
        list(range(1, N + 1)),
        "RD",
    )
    filtered = _read(spark, url, "RD", direct="true", filter_subjects="rd.a,rd.b", start_seq=7)
    _check_rows(filtered.collect(), direct_stream, list(range(7, N + 1)), "RD")
    with nats.connect(url) as nc:
        assert nc.jetstream().consumer_names("RD") == []  # none was made


def test_read_a_stream_without_allow_direct(
    spark: Any, spark_nats: NATSServer, direct_stream: Expected
) -> None:
    expected = _fill(spark_nats.url, "RX", allow_direct=False)
    url = spark_nats.url
    _check_rows(
        _read(spark, url, "RX", partitions=3).collect(), expected, list(range(1, N + 1)), "RX"
    )
    filtered = _read(spark, url, "RX", partitions=3, filter_subject="rx.a", start_seq=10).collect()
    want = [s for s, v in expected.items() if v[0] == "rx.a" and s >= 10]
    _check_rows(filtered, expected, want, "RX")
    # a filter matching nothing in a piece of the range ends that piece at once
    assert _read(spark, url, "RX", partitions=2, filter_subject="rx.none").count() == 0


def _stream_count(url: str, stream: str) -> int:
    with nats.connect(url) as nc:
        return nc.jetstream().stream_info(stream).state.messages


def _rows_df(spark: Any, prefix: str, n: int = N, partitions: int = 4) -> Any:
    return spark.range(0, n, 1, partitions).selectExpr(
        f"concat('{prefix}.', cast(id % 3 as string)) as subject",
        "cast(concat('row-', cast(id as string)) as binary) as data",
        "map('Row', array(cast(id as string))) as headers",
    )


def test_write(spark: Any, spark_nats: NATSServer) -> None:
    url = spark_nats.url
    with nats.connect(url) as nc:
        nc.jetstream().add_stream(name="WR", subjects=["wr.>"], duplicate_window=300.0)
    _rows_df(spark, "wr").write.format("jetstream").option("servers", url).option(
        "stream", "WR"
    ).mode("append").save()
    assert _stream_count(url, "WR") == N
    with nats.connect(url) as nc:
        m = nc.jetstream().get_msg("WR", seq=1)
        assert m.headers is not None and m.headers.get("Nats-Msg-Id")
        assert m.headers.get("Row") == m.data.decode().split("-")[1]


def _failing_source(flag_dir: str, fail_after: int) -> type:
    """The data source with a writer whose first attempt of partition 0 publishes its first
    ``fail_after`` rows, waits until the stream holds them, and fails. Made in a function,
    so Spark pickles the classes by value."""
    import time

    from pyspark import TaskContext

    from jetstream_sync.spark.datasource import JetStreamBatchWriter, JetStreamDataSource

    def _stored_data(url: str, stream: str) -> Set[bytes]:
        """The payloads ``stream`` holds now."""
        with nats.connect(url) as nc:
            js = nc.jetstream()
            last = js.stream_info(stream).state.last_seq
            if last == 0:
                return set()
            oc = js.ordered_consumer(stream)
            try:
                return {m.data for m in oc.fetch(last, 10)}
            finally:
                oc.delete()

    class FailingWriter(JetStreamBatchWriter):
        def _batches(self, batches: Iterator[Any]) -> Iterator[Any]:
            ctx = TaskContext.get()
            assert ctx is not None
            fail = ctx.partitionId() == 0 and ctx.attemptNumber() == 0
            for batch in super()._batches(batches):
                if not fail:
                    yield batch
                    continue
                first = batch.slice(0, fail_after)
                yield first  # published (written out) before the next batch is asked for
                want = set(first.column("data").to_pylist())
                deadline = time.monotonic() + 30
                while not want <= _stored_data(self.options["servers"], "WF"):
                    assert time.monotonic() < deadline, "the first rows were never stored"
                    time.sleep(0.1)
                Path(flag_dir, "failed-once").write_text(str(len(want)))
                raise RuntimeError("injected failure after acknowledged publishes")

    class FailingSource(JetStreamDataSource):
        @classmethod
        def name(cls) -> str:
            return "jetstream_failing"

        def writer(self, schema: Any, overwrite: bool) -> JetStreamBatchWriter:
            return FailingWriter(dict(self.options), uuid.uuid4().hex)

    return FailingSource


def test_write_retried_task_is_deduplicated(
    spark: Any, spark_nats: NATSServer, tmp_path: Path
) -> None:
    url = spark_nats.url
    with nats.connect(url) as nc:
        nc.jetstream().add_stream(name="WF", subjects=["wf.>"], duplicate_window=300.0)
    spark.dataSource.register(_failing_source(str(tmp_path), fail_after=100))
    _rows_df(spark, "wf", partitions=2).write.format("jetstream_failing").option(
        "servers", url
    ).mode("append").save()
    assert (tmp_path / "failed-once").read_text() == "100"  # the first attempt did fail
    assert _stream_count(url, "WF") == N


def _connections(monitoring_url: str, name: str) -> int:
    with urllib.request.urlopen(f"{monitoring_url}/connz?state=all&limit=4096") as resp:
        connz = json.load(resp)
    return sum(1 for c in connz.get("connections", []) if c.get("name") == name)


def test_publish_partition_reuses_connections(spark: Any, spark_nats: NATSServer) -> None:
    url = spark_nats.url
    assert spark_nats.monitoring_url is not None
    with nats.connect(url) as nc:
        nc.jetstream().add_stream(name="CR", subjects=["cr.>"])
    name = f"conn-reuse-{uuid.uuid4().hex[:8]}"
    wid = uuid.uuid4().hex

    def publish(rows: Iterator[Any]) -> None:
        publish_partition(({"data": str(r.id)} for r in rows), url, "cr.x", write_id=wid, name=name)

    spark.range(0, 1200, 1, 12).foreachPartition(publish)
    assert _stream_count(url, "CR") == 1200
    used = _connections(spark_nats.monitoring_url, name)
    print(f"publish_partition: {used} connection(s) for 12 tasks")
    assert 1 <= used <= 4, f"{used} connections for 12 tasks"


def test_kafka_option_names_and_unknown_options(
    spark: Any, spark_nats: NATSServer, direct_stream: Expected
) -> None:
    """Kafka's names where the meaning is the same (issue 18, 3); any other unknown option is
    an error naming the valid ones instead of being ignored (Spark lower-cases the keys)."""
    url = spark_nats.url
    ranged = _read(spark, url, "RD", startingOffsets='{"seq": 100}', endingOffsets=199)
    _check_rows(ranged.collect(), direct_stream, list(range(100, 200)), "RD")
    tail = _read(spark, url, "RD", startingOffsets=990, endingOffsets="latest").collect()
    assert sorted(r.stream_seq for r in tail) == list(range(990, N + 1))
    with pytest.raises(Exception, match=r"unknown option 'maxoffsetspertrigger'.*valid options"):
        _read(spark, url, "RD", maxOffsetsPerTrigger=10).collect()
    with pytest.raises(Exception, match=r"unknown option 'filtr_subject'.*filter_subject"):
        _read(spark, url, "RD", filtr_subject="rd.a").collect()
    with pytest.raises(Exception, match="unknown option 'startingoffsets' for a jetstream write"):
        (
            spark.createDataFrame([("rd.a", b"x")], "subject string, data binary")
            .write.format("jetstream")
            .option("servers", url)
            .option("startingOffsets", "earliest")
            .mode("append")
            .save()
        )


def _out_msgs(srv: NATSServer) -> int:
    with urllib.request.urlopen(f"{srv.monitoring_url}/varz", timeout=10) as resp:
        return int(json.load(resp)["out_msgs"])


def test_a_where_narrows_what_is_read(
    spark: Any, spark_nats: NATSServer, direct_stream: Expected
) -> None:
    """pushFilters (issue 18, 3): a where on stream_seq, timestamp or subject reads only the
    matching range, counted by the messages the server sent."""
    url = spark_nats.url
    before = _out_msgs(spark_nats)
    rows = _read(spark, url, "RD", partitions=3).where("stream_seq BETWEEN 100 AND 199").collect()
    sent = _out_msgs(spark_nats) - before
    _check_rows(rows, direct_stream, list(range(100, 200)), "RD")
    assert sent < 400, f"the server sent {sent} messages for 100 rows of 1,000"

    with nats.connect(url) as nc:
        js = nc.jetstream()
        t500 = js.get_msg("RD", seq=500).time
        assert t500 is not None
        # Spark's timestamps are microseconds: messages stored earlier in the same microsecond
        # as 500 match too (datetimes compare to the microsecond, nanoseconds left out).
        first = 500
        while first > 1 and js.get_msg("RD", seq=first - 1).time == t500:
            first -= 1
    df = _read(spark, url, "RD", partitions=2)
    before = _out_msgs(spark_nats)
    rows = df.where(df.timestamp >= t500).collect()
    sent = _out_msgs(spark_nats) - before
    _check_rows(rows, direct_stream, list(range(first, N + 1)), "RD")
    assert sent < 800, f"the server sent {sent} messages for 501 rows of 1,000"
    before = _out_msgs(spark_nats)
    rows = df.where(df.subject == "rd.a").collect()
    sent = _out_msgs(spark_nats) - before
    want = [s for s, v in direct_stream.items() if v[0] == "rd.a"]
    _check_rows(rows, direct_stream, want, "RD")
    assert sent < 600, f"the server sent {sent} messages for {len(want)} rows of 1,000"

    # Conditions it cannot narrow by are left to Spark, and still hold.
    odd = _read(spark, url, "RD").where("stream_seq % 2 = 1 OR stream_seq = 2").collect()
    _check_rows(odd, direct_stream, [2, *range(1, N + 1, 2)], "RD")


def test_several_filter_subjects(
    spark: Any, spark_nats: NATSServer, direct_stream: Expected
) -> None:
    """filter_subjects (issue 18, 3): comma-separated, wildcards allowed, one that another
    covers dropped; by direct get (one read per filter, merged) or an ordered consumer."""
    url = spark_nats.url
    want = sorted(s for s, v in direct_stream.items() if v[0] in ("rd.a", "rd.b"))
    for direct in ("true", "false"):
        rows = _read(spark, url, "RD", filter_subjects="rd.a, rd.*", direct=direct).collect()
        _check_rows(rows, direct_stream, want, "RD")
    only_a = [s for s, v in direct_stream.items() if v[0] == "rd.a"]
    rows = _read(spark, url, "RD", filter_subject="rd.a", filter_subjects="rd.none").collect()
    _check_rows(rows, direct_stream, only_a, "RD")
    rows = _read(spark, url, "RD", filter_subjects="rd.a,rd.b").collect()
    _check_rows(rows, direct_stream, want, "RD")
    with pytest.raises(Exception, match="empty token"):
        _read(spark, url, "RD", filter_subjects="rd..a").collect()
    with pytest.raises(Exception, match="overlap"):
        _read(spark, url, "RD", filter_subjects="rd.*.x,rd.a.*").collect()


def test_include_headers(spark: Any, spark_nats: NATSServer, direct_stream: Expected) -> None:
    """include_headers (Kafka's includeHeaders) false: the headers column stays null, and the
    msg_id column is still filled (issue 18, 3)."""
    rows = _read(spark, spark_nats.url, "RD", includeHeaders="false").collect()
    assert len(rows) == N and all(r.headers is None for r in rows)
    assert {r.stream_seq: r.msg_id for r in rows if r.msg_id} == {
        s: v[3] for s, v in direct_stream.items() if v[3]
    }
    with pytest.raises(Exception, match="true or false"):
        _read(spark, spark_nats.url, "RD", include_headers="maybe").collect()
