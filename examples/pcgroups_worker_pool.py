"""A pool of worker processes on one partitioned consumer group: order per key, scaled out.

Events of 12 accounts go to a stream. An elastic consumer group spreads the accounts over 6
partitions; three worker processes join it as members "w1", "w2", "w3" (any number of
processes may run per member: one is pinned, the others stand by). With max_ack_pending=1
each account's events are handled one at a time, in order, although three processes share
the work. Halfway through, w3 is added to the membership and w1 dropped: the partitions move,
and no account's events are handled out of order or twice.

Run: python examples/pcgroups_worker_pool.py   (uses $NATS_URL, or starts an embedded server)
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections import defaultdict
from typing import Dict, List

import jetstream_sync as nats
from jetstream_sync import pcgroups
from jetstream_sync.jetstream.api import ConsumerConfig
from jetstream_sync.server import url_from_env_or_embedded

STREAM, GROUP = "EVENTS", "billing"
ACCOUNTS, PER_ACCOUNT = 12, 20


def worker(url: str, member: str) -> None:
    """A worker process: join the group as ``member``; report each event handled."""
    with nats.connect(url) as nc:
        js = nc.jetstream()

        def handle(msg: nats.Msg) -> None:
            # msg.subject is "events.<account>": the partition number is stripped.
            event = f"{msg.subject} {msg.data.decode()}".encode()
            # Told before the ack: the next event of this account comes only after the ack,
            # so the parent hears of the events in the order they were handled.
            nc.publish(f"handled.{member}", event)
            time.sleep(0.005)  # the work
            try:
                msg.ack_sync()
            except nats.NATSError:  # its partition moved meanwhile: it comes again elsewhere
                nc.publish(f"retract.{member}", event)

        config = ConsumerConfig(ack_wait=2.0, max_ack_pending=1)
        cc = pcgroups.elastic_consume(js, STREAM, GROUP, member, handle, config)
        nc.publish(f"ready.{member}")
        cc.wait()  # until the group is deleted


def main() -> None:
    with url_from_env_or_embedded() as url, nats.connect(url) as nc:
        js = nc.jetstream()
        js.add_stream(name=STREAM, subjects=["events.*"])
        # The second token (the account) is the key: 6 partitions.
        pcgroups.create_elastic(
            js, STREAM, GROUP, 6, [pcgroups.PartitioningFilter("events.*", [1])]
        )
        order: Dict[str, List[int]] = defaultdict(list)
        by_member: Dict[str, int] = defaultdict(int)
        lock = threading.Lock()

        def on_handled(msg: nats.Msg) -> None:
            account, n = msg.data.decode().split()
            with lock:
                if msg.subject.startswith("retract."):
                    order[account].remove(int(n))
                    by_member[msg.subject.split(".")[1]] -= 1
                else:
                    order[account].append(int(n))
                    by_member[msg.subject.split(".")[1]] += 1

        nc.subscribe("handled.*", cb=on_handled)
        nc.subscribe("retract.*", cb=on_handled)
        ready = nc.subscribe("ready.*")
        procs = [
            subprocess.Popen([sys.executable, __file__, "--worker", url, m])
            for m in ("w1", "w2", "w3")
        ]
        try:
            for _ in procs:
                ready.next_msg(timeout=30)
            print("members:", pcgroups.add_members(js, STREAM, GROUP, ["w1", "w2"]))
            for n in range(PER_ACCOUNT):
                for a in range(ACCOUNTS):
                    js.publish(f"events.acct{a}", str(n).encode())

            def handled() -> int:
                with lock:
                    return sum(len(v) for v in order.values())

            total = ACCOUNTS * PER_ACCOUNT
            deadline = time.monotonic() + 60
            while handled() < total // 3 and time.monotonic() < deadline:
                time.sleep(0.05)
            pcgroups.add_members(js, STREAM, GROUP, ["w3"])
            print("members:", pcgroups.delete_members(js, STREAM, GROUP, ["w1"]))
            while handled() < total and time.monotonic() < deadline:
                time.sleep(0.05)
            in_order = all(
                order[f"events.acct{a}"] == list(range(PER_ACCOUNT)) for a in range(ACCOUNTS)
            )
            counts = dict(sorted(by_member.items()))
            print(f"handled {handled()} of {total} events; by member: {counts}")
            print(f"every account in order, each event once: {in_order}")
            pcgroups.delete_elastic(js, STREAM, GROUP)  # the workers' consume contexts end
            for p in procs:
                p.wait(30)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3])
    else:
        main()
