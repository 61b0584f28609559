"""Spark tasks as members of an elastic partitioned consumer group (examples/pcgroups_spark.py's
pattern): each task is the member named for its partition and runs ``pcgroups.consume_backlog``,
which handles its partitions until drained and leaves nothing behind. One task's first attempt
fails with a message in hand; Spark runs it again, the retry joins as the same member and takes
the message over. Every key's messages are acked in order, each once, none lost."""

from __future__ import annotations

import uuid
from collections import defaultdict
from typing import Any, Callable, Dict, Iterator, List, Tuple

import jetstream_sync as nats
from jetstream_sync import pcgroups
from jetstream_sync.server import NATSServer
from jetstream_sync.testing import wait_until

KEYS, PER_KEY, PARTITIONS, TASKS = 8, 10, 4, 3
ACK_WAIT = 1.0  # also the pin's TTL: how soon the retried task gets the failed one's message
FAILING = "task1"  # its first attempt fails at its second message, before acking it


def _member_job(url: str, stream: str, group: str, records: str) -> Callable[..., Any]:
    """mapInPandas's function. Everything it uses is nested or a module of the library:
    cloudpickle sends it by value (this test module is not importable in the workers)."""

    def run_member(member: str, attempt: int) -> int:
        from jetstream_sync.jetstream.api import ConsumerConfig

        nc = nats.connect(url, name=f"pcg-spark-{member}")
        try:
            js = nc.jetstream()
            acked = 0

            def handle(msg: nats.Msg) -> None:
                nonlocal acked
                if member == FAILING and attempt == 0 and acked == 1:
                    # The task fails with this one in hand: consume_backlog deletes the
                    # member's consumer and raises this, and Spark runs the task again.
                    raise RuntimeError(f"{member}: the first attempt fails (on purpose)")
                msg.ack_sync()
                # Recorded once acked: what the group guarantees is about acked messages.
                js.publish(
                    f"{records}.{member}", b"%s %s %d" % (msg.subject.encode(), msg.data, attempt)
                )
                acked += 1

            config = ConsumerConfig(ack_wait=ACK_WAIT, max_ack_pending=1)
            result = pcgroups.consume_backlog(js, stream, group, member, handle, config, timeout=60)
            # It leaves nothing behind: the member's consumer is gone.
            try:
                js.consumer_info(f"{stream}-{group}", member)
                raise AssertionError(f"{member}'s consumer was left behind")
            except nats.NotFoundError:
                pass
        finally:
            nc.close()
        return result.handled

    def job(batches: Iterator[Any]) -> Iterator[Any]:
        import pandas as pd
        from pyspark import TaskContext

        attempt = TaskContext.get().attemptNumber()
        for batch in batches:
            for i in batch["id"]:
                member = f"task{int(i)}"
                n = run_member(member, attempt)
                yield pd.DataFrame([(member, n, attempt)], columns=["member", "handled", "attempt"])

    return job


def test_tasks_as_members_keep_keys_in_order(
    spark: Any, spark_nats: NATSServer, js: Any, new_stream: Callable[..., str]
) -> None:
    stream = new_stream()
    prefix = stream.lower()
    records = new_stream()
    group = f"g{uuid.uuid4().hex[:6]}"
    pcgroups.create_elastic(
        js, stream, group, PARTITIONS, [pcgroups.PartitioningFilter(f"{prefix}.*", [1])]
    )
    try:
        pcgroups.add_members(js, stream, group, [f"task{i}" for i in range(TASKS)])
        for n in range(PER_KEY):
            for k in range(KEYS):
                js.publish_async(f"{prefix}.k{k}", b"%d" % n)
        js.publish_async_completed(timeout=30)
        total = KEYS * PER_KEY
        wait_until(
            lambda: js.stream_info(f"{stream}-{group}").state.last_seq == total, what="sourced"
        )

        job = _member_job(spark_nats.url, stream, group, records.lower())
        schema = "member string, handled long, attempt int"
        done = spark.range(0, TASKS, 1, TASKS).mapInPandas(job, schema).collect()

        by_member = {r.member: (r.handled, r.attempt) for r in done}
        assert sorted(by_member) == [f"task{i}" for i in range(TASKS)]
        assert by_member[FAILING][1] == 1, "the failing task was not run again"

        seen: Dict[str, List[Tuple[int, str, int]]] = defaultdict(list)
        sub = js.subscribe(f"{records.lower()}.>", ordered_consumer=True)
        try:
            for _ in range(js.stream_info(records).state.messages):
                msg = sub.next_msg(timeout=10)
                subject, n, attempt = msg.data.decode().split()
                seen[subject].append((int(n), msg.subject.rsplit(".", 1)[1], int(attempt)))
        finally:
            sub.unsubscribe()
        assert sum(map(len, seen.values())) == total  # nothing lost, nothing acked twice
        for k in range(KEYS):
            got = seen[f"{prefix}.k{k}"]
            assert [n for n, _, _ in got] == list(range(PER_KEY)), got  # in order, each once
            assert len({m for _, m, _ in got}) == 1  # one member per key (one partition)
        # The retried task handled the message its first attempt failed with, and its keys
        # went on in order from the first attempt's records to the retry's.
        retried = [x for got in seen.values() for x in got if x[1] == FAILING]
        assert {a for _, _, a in retried} == {0, 1}
        assert sum(h for h, _ in by_member.values()) + 1 == total  # + the first attempt's one
    finally:
        pcgroups.delete_elastic(js, stream, group)
