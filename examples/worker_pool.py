"""A queue group of workers: each job is handled by exactly one worker; drain finishes them.

Run: python examples/worker_pool.py   (uses $NATS_URL, or starts an embedded nats-server)
"""

from __future__ import annotations

import collections
import threading

import jetstream_sync as nats
from jetstream_sync.server import url_from_env_or_embedded

JOBS = 1000


def main() -> None:
    handled: collections.Counter[str] = collections.Counter()
    lock = threading.Lock()

    with url_from_env_or_embedded() as url:
        workers = [nats.connect(url, name=f"worker-{n}") for n in range(3)]
        for n, w in enumerate(workers):

            def work(msg: nats.Msg, name: str = f"worker-{n}") -> None:
                with lock:
                    handled[name] += 1

            w.subscribe("jobs", queue="pool", cb=work)
            w.flush()

        with nats.connect(url, name="producer") as producer:
            for i in range(JOBS):
                producer.publish("jobs", f"job {i}".encode())
            producer.flush()

        # drain(): stop taking new jobs, finish the queued ones, then close.
        for w in workers:
            w.drain(timeout=10)

    print(f"handled {sum(handled.values())} of {JOBS} jobs: {dict(sorted(handled.items()))}")


if __name__ == "__main__":
    main()
