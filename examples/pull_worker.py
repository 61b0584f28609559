"""A work queue drained by a pool of worker threads with pull_subscribe + fetch (ADR-13).

Each worker binds to the same durable pull consumer and fetches batches; every message
goes to exactly one worker, which acks it when done. A message a worker cannot handle is
nak'ed with a delay and comes back later (to any worker).

Run: python examples/pull_worker.py   (uses $NATS_URL, or starts an embedded nats-server)
"""

from __future__ import annotations

import collections
import threading

import jetstream_sync as nats
from jetstream_sync.server import url_from_env_or_embedded

JOBS = 500
WORKERS = 4


def main() -> None:
    with url_from_env_or_embedded() as url, nats.connect(url) as nc:
        js = nc.jetstream()
        js.add_stream(name="JOBS", subjects=["jobs.>"], retention="workqueue")
        for i in range(JOBS):
            js.publish_async("jobs.resize", str(i).encode())
        js.publish_async_completed(timeout=30)

        done: collections.Counter[str] = collections.Counter()
        handled = set()
        lock = threading.Lock()

        def worker(name: str) -> None:
            # One pull subscription per thread, all bound to the durable "resizer".
            psub = js.pull_subscribe("jobs.resize", durable="resizer")
            while True:
                try:
                    msgs = psub.fetch(batch=25, timeout=1.0)
                except nats.TimeoutError:
                    return  # the queue stayed empty for a second: this worker is done
                for msg in msgs:
                    job = int(msg.data)
                    if job == 7 and msg.metadata.num_delivered == 1:
                        msg.nak(delay=0.2)  # pretend job 7 failed once: retried later
                        continue
                    with lock:
                        handled.add(job)
                        done[name] += 1
                    msg.ack()

        threads = [threading.Thread(target=worker, args=(f"w{i}",)) for i in range(WORKERS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        nc.flush()
        print(
            f"handled {len(handled)} of {JOBS} jobs: "
            + ", ".join(f"{w}={n}" for w, n in sorted(done.items()))
        )
        print(f"left in the work queue: {js.stream_info('JOBS').state.messages}")
        js.delete_stream("JOBS")


if __name__ == "__main__":
    main()
