"""Soak: publish and consume at load for a while, restarting the server every minute.

Not part of the test suite (it runs for minutes on purpose). One embedded nats-server with
a file store; a publisher thread sends acked publishes with msg ids (retrying a failed one
with the same id); a consume() loop acks what it gets. Every ``--restart-every`` seconds the
server is stopped (SIGTERM, or SIGKILL with ``--kill``) and started again on the same ports
and store. Every ``--report-every`` seconds one line: threads, RSS, published, acked,
consumed, redelivered, reconnects. At the end, the stream is read back and compared:

    lost        acked publishes missing from the stream, or stream messages never consumed
    duplicates  msg ids stored twice in the stream

Exit status 0 only when both are zero and the thread count / memory did not keep growing.

    python soak/soak.py                       # 10 minutes, a restart every 60 s
    python soak/soak.py --minutes 2 --restart-every 20 --kill
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path
from typing import List

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import jetstream_sync as nats
from jetstream_sync import AckPolicy, ConsumerConfig
from jetstream_sync.server import NATSServer


class Marks:
    """One byte per message id (how many times it was seen, capped at 255): the soak's own
    bookkeeping must not grow like a set of ints would, or RSS would say nothing about the
    client."""

    def __init__(self) -> None:
        self.counts = bytearray()
        self.distinct = 0
        self.total = 0

    def add(self, i: int) -> None:
        if i >= len(self.counts):
            self.counts.extend(bytes(max(i + 1 - len(self.counts), 1 << 16)))
        c = self.counts[i]
        if c == 0:
            self.distinct += 1
        if c < 255:
            self.counts[i] = c + 1
        self.total += 1

    def has(self, i: int) -> bool:
        return i < len(self.counts) and self.counts[i] > 0


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


class Publisher(threading.Thread):
    def __init__(self, js: nats.JetStream, rate: float) -> None:
        super().__init__(daemon=True, name="soak-publisher")
        self.js = js
        self.interval = 1.0 / rate if rate > 0 else 0.0
        self.stop = threading.Event()
        self.sent = 0  # ids handed out
        self.acked = Marks()
        self.retries = 0

    def run(self) -> None:
        next_at = time.monotonic()
        while not self.stop.is_set():
            i = self.sent
            self.sent += 1
            while not self.stop.is_set():
                try:
                    self.js.publish("soak.x", str(i).encode(), msg_id=f"s{i}", timeout=2.0)
                    self.acked.add(i)
                    break
                except nats.NATSError:
                    self.retries += 1
                    self.stop.wait(0.1)
            if self.interval:
                next_at += self.interval
                delay = next_at - time.monotonic()
                if delay > 0:
                    self.stop.wait(delay)
                else:
                    next_at = time.monotonic()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--restart-every", type=float, default=60.0)
    ap.add_argument("--report-every", type=float, default=15.0)
    ap.add_argument("--rate", type=float, default=2000.0, help="publishes per second (0: flat out)")
    ap.add_argument("--kill", action="store_true", help="SIGKILL instead of SIGTERM")
    args = ap.parse_args()

    errors: List[str] = []
    with NATSServer() as srv:
        nc = nats.connect(
            srv.url,
            reconnect_time_wait=0.25,
            max_reconnect_attempts=-1,
            error_cb=lambda e: errors.append(type(e).__name__),
        )
        js = nc.jetstream(timeout=5.0)
        js.add_stream(name="SOAK", subjects=["soak.>"], allow_direct=True)
        consumer = js.create_or_update_consumer(
            "SOAK", ConsumerConfig(durable_name="soak", ack_policy=AckPolicy.EXPLICIT, ack_wait=10)
        )
        seen = Marks()
        lock = threading.Lock()

        def handle(msg: nats.Msg) -> None:
            with lock:
                seen.add(int(msg.data))
            msg.ack()

        cc = consumer.consume(handle, max_messages=500, expires=5.0)
        pub = Publisher(js, args.rate)
        pub.start()
        start = time.monotonic()
        end = start + args.minutes * 60
        next_restart = start + args.restart_every
        next_report = start
        restarts = 0
        samples: List[tuple[int, float]] = []
        print("  t s  threads  RSS MiB  published     acked  consumed  redeliv  reconnects")
        while time.monotonic() < end:
            now = time.monotonic()
            if now >= next_report:
                threads, rss = threading.active_count(), rss_mib()
                samples.append((threads, rss))
                with lock:
                    consumed, redelivered = seen.distinct, seen.total - seen.distinct
                print(
                    f"{now - start:5.0f}  {threads:7d}  {rss:7.1f}  {pub.sent:9d} "
                    f"{pub.acked.distinct:9d} {consumed:9d} {redelivered:8d} "
                    f"{nc.stats['reconnects']:11d}",
                    flush=True,
                )
                next_report += args.report_every
            if now >= next_restart:
                if args.kill:
                    srv.kill()
                    srv.start()
                else:
                    srv.restart()
                restarts += 1
                next_restart += args.restart_every
            time.sleep(0.2)  # the soak's own pacing: nothing to wait on
        pub.stop.set()
        pub.join(30)
        acked = pub.acked
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with lock:
                if seen.distinct >= acked.distinct:
                    break
            time.sleep(0.2)
        cc.stop()

        stored = Marks()
        foreign = 0
        info = js.stream_info("SOAK")
        seq = info.state.first_seq or 1
        while seq <= info.state.last_seq:
            got = 0
            for raw in js.get_msgs("SOAK", seq=seq, batch=1000, timeout=30):
                mid = str((raw.headers or {}).get("Nats-Msg-Id", ""))
                if mid.startswith("s") and mid[1:].isdigit():
                    stored.add(int(mid[1:]))
                else:
                    foreign += 1
                seq = raw.seq + 1
                got += 1
            if not got:
                break
        nc.close()

    lost_acked = sum(1 for i in range(len(acked.counts)) if acked.has(i) and not stored.has(i))
    with lock:
        never_consumed = sum(
            1 for i in range(len(stored.counts)) if stored.has(i) and not seen.has(i)
        )
    duplicates = stored.total - stored.distinct + foreign
    half = len(samples) // 2
    early = samples[: max(1, half)]
    thread_growth = max(t for t, _ in samples[half:]) - max(t for t, _ in early)
    rss_first = max(r for _, r in early)
    rss_last = max(r for _, r in samples[half:])
    print()
    print(f"minutes {args.minutes}, restarts {restarts} ({'SIGKILL' if args.kill else 'SIGTERM'})")
    print(
        f"published {pub.sent}, acked {acked.distinct}, stored {stored.total}, "
        f"consumed {seen.distinct}"
    )
    print(f"publish retries {pub.retries}, redelivered {seen.total - seen.distinct}")
    print(f"lost acked {lost_acked}, stored never consumed {never_consumed}, dupes {duplicates}")
    print(f"threads growth {thread_growth}, RSS {rss_first:.1f} -> {rss_last:.1f} MiB")
    reported = {name: errors.count(name) for name in sorted(set(errors))}
    print(f"reported through error_cb: {reported}")
    ok = lost_acked == 0 and never_consumed == 0 and duplicates == 0 and thread_growth <= 2
    print("SOAK PASSED" if ok else "SOAK FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
