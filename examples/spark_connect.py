"""The ``jetstream`` data source over Spark Connect (Spark 4): a client with no JVM of its
own registers the source, reads a stream into a DataFrame, writes a summary to another
stream and copies the stream with ``Trigger.AvailableNow``.

Needs the test extra's ``pyspark[connect]`` (or ``pip install 'pyspark[connect]'`` beside the
spark extra) and Java 17+ for the server.

Run: python examples/spark_connect.py
  - $SPARK_REMOTE (``sc://host:15002``) names a Connect server to use; without it pyspark
    starts a local one (``remote("local[2]")``) for this process;
  - $NATS_URL names the NATS server (the Connect server's workers must reach it), or else an
    embedded nats-server is started.
"""

from __future__ import annotations

import os
import sys
import tempfile

import jetstream_sync as nats
import jetstream_sync.spark
from jetstream_sync.server import url_from_env_or_embedded


def main() -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # a local server's workers
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    with url_from_env_or_embedded() as url:
        with nats.connect(url) as nc:
            js = nc.jetstream()
            for name in ("READINGS", "SUMMARY", "COPY"):
                try:
                    js.delete_stream(name)
                except nats.StreamNotFoundError:
                    pass
            js.add_stream(name="READINGS", subjects=["readings.>"])
            js.add_stream(name="SUMMARY", subjects=["summary.>"])
            js.add_stream(name="COPY", subjects=["copy.>"])
            for i in range(600):
                js.publish_async(f"readings.sensor{i % 3}", b"%d" % (i % 50))
            js.publish_async_completed(timeout=30)

        remote = os.environ.get("SPARK_REMOTE", "local[2]")
        spark = SparkSession.builder.remote(remote).getOrCreate()
        try:
            # No sparkContext over Connect: say how many partitions a read makes.
            jetstream_sync.spark.register(spark, default_partitions=2)
            print(f"connect session: {type(spark).__module__}")

            readings = (
                spark.read.format("jetstream")
                .option("servers", url)
                .option("stream", "READINGS")
                .load()
            )
            totals = (
                readings.groupBy("subject")
                .agg(F.sum(F.col("data").cast("string").cast("int")).alias("total"))
                .orderBy("subject")
                .collect()
            )
            for row in totals:
                print(f"{row.subject}: total {row.total}")

            summary = spark.createDataFrame(
                [(f"summary.{r.subject.split('.')[-1]}", str(r.total).encode()) for r in totals],
                "subject string, data binary",
            )
            summary.write.format("jetstream").option("servers", url).mode("append").save()

            with tempfile.TemporaryDirectory() as checkpoint:
                query = (
                    spark.readStream.format("jetstream")
                    .option("servers", url)
                    .option("stream", "READINGS")
                    .load()
                    .select(F.concat(F.lit("copy."), "subject").alias("subject"), "data")
                    .writeStream.format("jetstream")
                    .option("servers", url)
                    .option("checkpointLocation", checkpoint)
                    .trigger(availableNow=True)
                    .start()
                )
                query.awaitTermination(120)
        finally:
            spark.stop()  # before the NATS server: the workers' clients would log its loss

        with nats.connect(url) as nc:
            js = nc.jetstream()
            print(f"summary messages: {js.stream_info('SUMMARY').state.messages}")
            # The query ended once every message was stored and acknowledged.
            print(f"copied with AvailableNow: {js.stream_info('COPY').state.messages} of 600")


if __name__ == "__main__":
    main()
