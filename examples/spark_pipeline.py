"""A Spark pipeline on JetStream: read a stream into a DataFrame, transform it, write the
result to another stream, then keep a streaming query running on new messages.

Needs the spark extra (``pip install -e '.[spark]'``) and Java 17+.

Run: python examples/spark_pipeline.py   (uses $NATS_URL, or starts an embedded nats-server)
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time

import jetstream_sync as nats
import jetstream_sync.spark
from jetstream_sync.server import url_from_env_or_embedded

COUNTRIES = ["DE", "FR", "NL", "US"]


def publish_orders(js: nats.JetStream, first: int, n: int) -> None:
    for i in range(first, first + n):
        order = {"id": i, "country": COUNTRIES[i % 4], "amount": (i * 37) % 1000}
        js.publish_async("orders.new", json.dumps(order).encode(), msg_id=f"order-{i}")
    js.publish_async_completed(timeout=30)


def wait_for(what: str, predicate: object, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.2)


def main() -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers need pyarrow too
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    with url_from_env_or_embedded() as url, nats.connect(url) as nc:
        js = nc.jetstream()
        js.add_stream(name="ORDERS", subjects=["orders.>"])
        js.add_stream(name="BIG", subjects=["big.>"])
        js.add_stream(name="AUDIT", subjects=["audit.>"])
        publish_orders(js, 0, 1000)

        spark = (
            SparkSession.builder.master("local[2]")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        jetstream_sync.spark.register(spark)
        order_schema = "id long, country string, amount long"

        # 1. Batch: the whole stream as a DataFrame, read in parallel by sequence ranges.
        orders = (
            spark.read.format("jetstream")
            .option("servers", url)
            .option("stream", "ORDERS")
            .load()
            .withColumn("order", F.from_json(F.col("data").cast("string"), order_schema))
        )
        totals = orders.groupBy("order.country").agg(F.sum("order.amount").alias("total"))
        for row in totals.orderBy("country").collect():
            print(f"total {row.country}: {row.total}")

        # 2. Transform and write to another stream: one message per big order. The task's
        #    publishes carry deterministic ids, so a retried task is not stored twice.
        big = orders.where("order.amount >= 900").select(
            F.concat(F.lit("big."), F.col("order.country")).alias("subject"), "data"
        )
        big.write.format("jetstream").option("servers", url).mode("append").save()
        print(f"big orders written: {js.stream_info('BIG').state.messages}")

        # 3. Streaming: every order, now and later, into an audit stream. Offsets are stream
        #    sequences kept in the checkpoint: a restart resumes where it stopped.
        with tempfile.TemporaryDirectory() as checkpoint:
            audit = (
                spark.readStream.format("jetstream")
                .option("servers", url)
                .option("stream", "ORDERS")
                .option("max_rows_per_trigger", "500")
                .load()
                .select(
                    F.lit("audit.orders").alias("subject"),
                    F.concat_ws(":", F.col("stream_seq").cast("string"), F.col("subject"))
                    .cast("binary")
                    .alias("data"),
                )
            )
            query = (
                audit.writeStream.format("jetstream")
                .option("servers", url)
                .option("checkpointLocation", checkpoint)
                .trigger(processingTime="500 milliseconds")
                .start()
            )
            try:
                publish_orders(js, 1000, 200)  # arrives while the query runs
                wait_for("the audit stream", lambda: js.stream_info("AUDIT").state.messages >= 1200)
            finally:
                query.stop()
        print(f"streamed into AUDIT: {js.stream_info('AUDIT').state.messages} of 1200")
        spark.stop()


if __name__ == "__main__":
    main()
