"""Every example runs to completion and prints what it promises."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

EXPECTED = {
    "quickstart.py": ["request   -> MAKE ME LOUD", "NoRespondersError", "fired: True"],
    "js_quickstart.py": [
        "publish   -> stream ORDERS, last seq 3",
        "fetch     -> ['order 0', 'order 1', 'order 2']",
        "kv        -> color=blue, revision 1 read back: True",
    ],
    "worker_pool.py": ["handled 1000 of 1000 jobs"],
    "otel_tracing.py": [
        "handled 6 orders with 3 workers",
        "checkout [INTERNAL]\n  publish orders.new [PRODUCER]\n    process orders.new [CONSUMER]"
        "\n      ack orders.new [CLIENT]",
    ],
    "otel_pipeline.py": [
        "shipped: ORDER 1",
        "checkout [INTERNAL]\n  publish orders.order [PRODUCER]"
        "\n    process orders.order [CONSUMER]\n      publish packed.order [PRODUCER]"
        "\n        receive shipped.order [CONSUMER]",
    ],
    "micro_service.py": [
        "add       -> 42",
        "error     -> 400: want a JSON list",
        "both instances served: True",
        "ping      -> 2 instances of calc 1.0.0",
        "info      -> ['math.add', 'math.whoami']",
        "stats     -> 102 requests handled",
        "stopped   -> True",
    ],
    "reconnect.py": ["received: ['buffered 0', 'buffered 1'", "reconnected to"],
    "tls.py": ["verified TLS: connected", "wrong name refused", "mutual TLS", "handshake first"],
    "auth.py": ["wrong password: AuthorizationError", "token: connected", "nkey: connected"],
    "streams.py": ["created ORDERS", "batched direct get: [1, 2, 3, 4, 5]", "err_code=10059"],
    "js_publish.py": ["duplicate=True", "expected_last_seq=1 refused", "10000 acks"],
    "batch_publish.py": [
        "committed -> batch of 3, sequences 1..3",
        "abandoned -> USERS still has 3",
        "stale     -> refused (wrong last sequence: 3), nothing stored",
        "imported  -> 250 messages in one batch",
        "refused   -> BatchNotEnabledError: atomic publish is disabled",
    ],
    "pull_worker.py": ["handled 500 of 500 jobs", "left in the work queue: 0"],
    "process_pool.py": [
        "handled 600 of 600 orders, each once: True",
        "durable kept after every worker left: pending 0, unacked 0",
        "after a restart: ['late order']",
    ],
    "consume.py": ["fetch: 10 messages", "all 100 handled once: True", "unacked left: 0"],
    "push.py": [
        "callback: 20 events, in order: True",
        "shared by 2 members",
        "first event 0",
        "ordered: True",
    ],
    "ordered_replay.py": ["replayed 500 messages in order", "[401, 403, 405, 407, 409]"],
    "pinned_failover.py": [
        "pinned: A",
        "took over after",
        "unpinned B: new pin at once, now C",
        "each of 50 jobs handled exactly once: True",
    ],
    "pcgroups_worker_pool.py": [
        "members: ['w2', 'w3']",
        "handled 240 of 240 events",
        "every account in order, each event once: True",
    ],
    "pcgroups_spark.py": [
        "job 2: members ['task0', 'task1', 'task2']",
        "results: 240 of 240",
        "every account in order across both jobs, each event once: True",
    ],
    "overflow.py": ["remote got   0, backlog now 80", "each of 150 jobs handled once: True"],
    "prioritized.py": [
        "both waiting: priority 0 got 5, priority 1 got 0",
        "priority 1 got ['b0', 'b1', 'b2']",
        "each of 8 tasks handled once: True",
    ],
    "spark_pipeline.py": [
        "total DE: 124500",
        "total US: 125250",
        "big orders written: 100",
        "streamed into AUDIT: 1200 of 1200",
    ],
    "spark_connect.py": [
        "connect session: pyspark.sql.connect.session",
        "readings.sensor0: total 4900",
        "readings.sensor2: total 4900",
        "summary messages: 3",
        "copied with AvailableNow: 600 of 600",
    ],
    "dead_letters.py": [
        "dead letters handled: 2",
        "'malformed' from ORDERS seq 2, terminated after 1 deliveries 'cannot parse'",
        "'poison' from ORDERS seq 4, max_deliveries after 3 deliveries",
    ],
    "object_store.py": [
        "get file  -> same bytes: True",
        "watch     -> then: news.txt",
        "link      -> hello, objects",
        "ObjectNotFoundError: object 'news.txt' in bucket 'ASSETS' is deleted",
    ],
    "fast_ingest.py": [
        "50001 messages, last at seq 50001",
        "refused message 2: wrong last sequence",
        "kept 1",
        "gap ok: batch of 2, refused: [1]",
        "set allow_batched=True",
    ],
    "schedules.py": [
        "reminder  -> 'call the customer' from schedules.reminder.42, not early: True",
        "heartbeat -> ['still here', 'still here'], each kept 60 s",
        "cancelled -> heartbeat: True",
        "cancelled -> reminder: False",
        "refused   -> cron schedule '*/5 * * * *' has 5 fields",
        "allow_msg_schedules=True",
    ],
    "counters.py": [
        "add       -> 3, then 5",
        "load_many -> {'hits.eu.home': 5, 'hits.eu.cart': 1}",
        "(2**65: True)",
        "hits.all.home = 11, from {'HITS_EU': {'hits.eu.home': 5}, 'HITS_US': {'hits.us.home': 6}}",
        "CounterNotFoundError",
    ],
    "direct_get.py": [
        "by seq    -> [11, 12, 13, 14, 15]",
        "by time   -> [25, 26, 27, 28, 29, 30]",
        "as of 6   -> [('sensors.s0.temp', '23'), ('sensors.s1.temp', '24'), ('sensors.s2.temp'",
        "does not allow direct gets",
    ],
    "kv.py": [
        "the second writer lost: db.port is 6432",
        "history   -> ['db-1.internal', 'DEL', 'db-2.internal']",
        "'db.port=6432', 'db.host DEL', 'db.host=db-2.internal']",
    ],
}


# Examples that need pyspark, which the test extra installs on Python 3.10 and later only.
NEEDS_SPARK = {"spark_pipeline.py", "pcgroups_spark.py", "otel_pipeline.py"}
needs_spark = pytest.mark.skipif(
    importlib.util.find_spec("pyspark") is None,
    reason="pyspark is not installed (pyspark 4.2 needs Python 3.10)",
)

# The Spark Connect example also needs the Connect client (grpcio: the test extra's
# pyspark[connect]); without it pyspark cannot start or reach a Connect server.
needs_connect = pytest.mark.skipif(
    importlib.util.find_spec("pyspark") is None or importlib.util.find_spec("grpc") is None,
    reason="the Spark Connect client is not installed (the test extra's pyspark[connect])",
)

# Servers that run until stopped: each has a test of its own.
SERVERS = {"flask_app.py": "tests/test_flask_app.py"}


def test_every_example_is_covered() -> None:
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == sorted({*EXPECTED, *SERVERS})


MARKS = {**dict.fromkeys(NEEDS_SPARK, needs_spark), "spark_connect.py": needs_connect}


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=MARKS.get(n, ())) for n in sorted(EXPECTED)]
)
def test_example_runs(name: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "NATS_URL"}
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        capture_output=True,
        text=True,
        # A Spark example starts a JVM (spark_connect.py a Connect server too): 70 s on eight
        # busy workers, and once 120 s on a slow stretch of the 2-core machine, its output all
        # but complete. Its time is not under test; that it runs to the end is.
        timeout=300 if name in NEEDS_SPARK or name == "spark_connect.py" else 120,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    for needle in EXPECTED[name]:
        assert needle in proc.stdout, proc.stdout
