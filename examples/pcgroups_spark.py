"""Spark tasks as members of a partitioned consumer group: order per key across executors.

Events of 12 accounts go to a stream; an elastic consumer group spreads the accounts over 6
partitions. A Spark job runs one task per member: each task joins the group (``mapInPandas``
over one row per member), handles its partitions' events one at a time (max_ack_pending=1),
writes a result per event to the RESULTS stream before acking it, and leaves when its
partitions are drained. A second wave of events is then handled by a job with three tasks
instead of two: the partitions move to other tasks (other Python workers), and every
account's results are still in order, each event once.

Task-as-member rules this follows:
  * a task is short-lived: ``pcgroups.consume_backlog`` joins, consumes the backlog (what the
    stream holds when it runs), then stops and deletes the member's consumer;
  * Spark forks and reuses its Python workers and never runs atexit: the task connects and
    closes its connection itself, in ``finally``;
  * a retried task (Spark runs it again after a failure) joins as the same member: the
    message it had in hand comes again after ack_wait; the result's msg_id lets the RESULTS
    stream drop the second copy of a result written before the failure.

Needs the spark extra (``pip install -e '.[spark]'``) and Java 17+.

Run: python examples/pcgroups_spark.py   (uses $NATS_URL, or starts an embedded nats-server)
"""

from __future__ import annotations

import os
import sys
import time
from collections import defaultdict
from typing import Any, Dict, Iterator, List

import jetstream_sync as nats
from jetstream_sync import pcgroups
from jetstream_sync.jetstream.api import ConsumerConfig
from jetstream_sync.server import url_from_env_or_embedded

STREAM, GROUP, PARTITIONS = "EVENTS", "spark", 6
GROUP_STREAM = f"{STREAM}-{GROUP}"  # the elastic group's work-queue stream (orbit.go's name)
ACCOUNTS, PER_WAVE = 12, 10
ACK_WAIT = 2.0  # also the pin's TTL: how soon a retried task takes over from a failed one


def member_name(index: int) -> str:
    return f"task{index}"


def run_member(url: str, member: str) -> Dict[str, Any]:
    """One Spark task: join the group as ``member``, handle its partitions' backlog, leave
    (``consume_backlog`` deletes the member's consumer: its partitions are free for the next
    job's members at once). Returns what it did."""
    duplicates = 0
    nc = nats.connect(url, name=f"pcgroups-spark-{member}")
    try:
        js = nc.jetstream()

        def handle(msg: nats.Msg) -> None:
            nonlocal duplicates
            account, n = msg.subject.split(".")[1], int(msg.data)  # "events.<account>"
            # The work, made idempotent: the result's msg_id is the event's identity.
            ack = js.publish(f"results.{account}", b"%d" % (n * n), msg_id=f"{account}-{n}")
            duplicates += bool(ack.duplicate)
            msg.ack_sync()  # only now may the account's next event come

        config = ConsumerConfig(ack_wait=ACK_WAIT, max_ack_pending=1)
        result = pcgroups.consume_backlog(js, STREAM, GROUP, member, handle, config, timeout=120)
    finally:
        nc.close()  # no atexit in Spark workers: close explicitly
    return {"member": member, "handled": result.handled, "duplicates": duplicates}


def members_job(url: str) -> Any:
    """The function mapInPandas runs in each task: one row per member index."""

    def job(batches: Iterator[Any]) -> Iterator[Any]:
        import pandas as pd

        for batch in batches:
            rows = [run_member(url, member_name(int(i))) for i in batch["id"]]
            yield pd.DataFrame(rows, columns=["member", "handled", "duplicates"])

    return job


def set_members(js: nats.JetStream, tasks: int) -> List[str]:
    """The group's membership: one member per task of the next job."""
    wanted = [member_name(i) for i in range(tasks)]
    current = pcgroups.get_elastic_config(js, STREAM, GROUP).members
    gone = [m for m in current if m not in wanted]
    if gone:
        pcgroups.delete_members(js, STREAM, GROUP, gone)
    return pcgroups.add_members(js, STREAM, GROUP, wanted)


def publish_wave(js: nats.JetStream, wave: int) -> None:
    for n in range(wave * PER_WAVE, (wave + 1) * PER_WAVE):
        for a in range(ACCOUNTS):
            js.publish_async(f"events.acct{a}", b"%d" % n)
    js.publish_async_completed(timeout=30)
    # The job handles what is there when it starts: wait until the group's stream has it.
    total = (wave + 1) * PER_WAVE * ACCOUNTS
    deadline = time.monotonic() + 30
    while js.stream_info(GROUP_STREAM).state.last_seq < total:
        if time.monotonic() > deadline:
            raise SystemExit("the group's stream did not source the events")
        time.sleep(0.05)


def main() -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # the workers need jetstream_sync
    from pyspark.sql import SparkSession

    with url_from_env_or_embedded() as url, nats.connect(url) as nc:
        js = nc.jetstream()
        js.add_stream(name=STREAM, subjects=["events.*"])
        js.add_stream(name="RESULTS", subjects=["results.*"], duplicate_window=600.0)
        # The account (the second token) is the key.
        pcgroups.create_elastic(
            js, STREAM, GROUP, PARTITIONS, [pcgroups.PartitioningFilter("events.*", [1])]
        )
        spark = (
            SparkSession.builder.master("local[2]")
            .config("spark.ui.enabled", "false")
            .config("spark.python.worker.reuse", "true")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        schema = "member string, handled long, duplicates long"
        try:
            for wave, tasks in enumerate((2, 3)):
                print(f"job {wave + 1}: members {set_members(js, tasks)}")
                publish_wave(js, wave)
                # One partition, one row, one task per member.
                members = spark.range(0, tasks, 1, numPartitions=tasks)
                done = members.mapInPandas(members_job(url), schema).collect()
                for row in sorted(done):
                    print(f"  {row.member}: {row.handled} events, {row.duplicates} duplicates")
        finally:
            spark.stop()

        results: Dict[str, List[int]] = defaultdict(list)
        sub = js.subscribe("results.*", ordered_consumer=True)
        total = js.stream_info("RESULTS").state.messages
        for _ in range(total):
            msg = sub.next_msg(timeout=10)
            results[msg.subject].append(int(msg.data))
        sub.unsubscribe()
        expected = [n * n for n in range(2 * PER_WAVE)]
        in_order = all(results[f"results.acct{a}"] == expected for a in range(ACCOUNTS))
        print(f"results: {total} of {2 * PER_WAVE * ACCOUNTS}")
        print(f"every account in order across both jobs, each event once: {in_order}")
        pcgroups.delete_elastic(js, STREAM, GROUP)


if __name__ == "__main__":
    main()
