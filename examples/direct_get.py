"""Batch direct get (ADR-31): many stored messages per request, without a consumer. Batches
by sequence, by time and by subject, and the last value of many subjects as of a point in
the stream's past.

Run: python examples/direct_get.py   (uses $NATS_URL, or starts an embedded nats-server)
"""

from __future__ import annotations

import jetstream_sync as nats
from jetstream_sync.server import url_from_env_or_embedded


def main() -> None:
    with url_from_env_or_embedded() as url, nats.connect(url) as nc:
        js = nc.jetstream()
        js.add_stream(name="SENSORS", subjects=["sensors.>"], allow_direct=True)
        js.add_stream(name="PLAIN", subjects=["plain.>"])  # allow_direct is off by default
        try:
            for i in range(30):  # readings of three sensors, in turn
                js.publish(f"sensors.s{i % 3}.temp", str(20 + i).encode())

            batch = [m.seq for m in js.get_batch("SENSORS", seq=11, batch=5)]
            print(f"by seq    -> {batch}")
            s1 = [m.data.decode() for m in js.get_batch("SENSORS", subject="sensors.s1.*", batch=4)]
            print(f"s1 only   -> {s1}")
            when = js.get_msg("SENSORS", seq=25).time
            since = [m.seq for m in js.get_batch("SENSORS", start_time=when, batch=100)]
            print(f"by time   -> {since}")

            latest = {
                m.subject: m.data.decode()
                for m in js.get_last_msgs_for("SENSORS", ["sensors.*.temp"])
            }
            print(f"latest    -> {latest}")
            then = js.get_last_msgs_for("SENSORS", ["sensors.>"], up_to_seq=6)
            print(f"as of 6   -> {[(m.subject, m.data.decode()) for m in then]}")

            try:
                list(js.get_batch("PLAIN"))
            except nats.DirectGetNotAllowedError as exc:
                print(f"refused   -> {exc}")
        finally:
            js.delete_stream("SENSORS")
            js.delete_stream("PLAIN")


if __name__ == "__main__":
    main()
