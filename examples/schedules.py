"""Message schedules (ADR-51): a message the stream publishes later, or again and again.

A delayed reminder, a heartbeat every second, a cancelled schedule and a refused one.

Run: python examples/schedules.py   (uses $NATS_URL, or starts an embedded nats-server)
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import jetstream_sync as nats
from jetstream_sync.server import url_from_env_or_embedded


def main() -> None:
    with url_from_env_or_embedded() as url, nats.connect(url) as nc:
        js = nc.jetstream()
        js.add_stream(
            name="JOBS",
            subjects=["schedules.>", "jobs.>"],
            allow_msg_schedules=True,  # needed for schedules
            allow_msg_ttl=True,  # needed for schedule_ttl
        )
        # What a schedule produces is stored by the stream, not published: read it with a
        # consumer (or republish it).
        reminders = js.subscribe("jobs.reminders", ordered_consumer=True)
        heartbeats = js.subscribe("jobs.heartbeats", ordered_consumer=True)

        # Once, a second from now: one schedule per subject, its body goes to the target.
        due = datetime.now(timezone.utc) + timedelta(seconds=1)
        js.publish(
            "schedules.reminder.42",
            b"call the customer",
            schedule=due,
            schedule_target="jobs.reminders",
        )
        # Every second (a timedelta, "@every 1s", or a cron "* * * * * *"), each kept 60 s.
        js.publish(
            "schedules.heartbeat",
            b"still here",
            schedule=timedelta(seconds=1),
            schedule_target="jobs.heartbeats",
            schedule_ttl=60,
        )
        msg = reminders.next_msg(timeout=5)
        scheduler, on_time = msg.headers["Nats-Scheduler"], msg.metadata.timestamp >= due
        print(f"reminder  -> {msg.data.decode()!r} from {scheduler}, not early: {on_time}")
        beats = [heartbeats.next_msg(timeout=5) for _ in range(2)]
        ttl = beats[0].headers["Nats-TTL"]
        print(f"heartbeat -> {[m.data.decode() for m in beats]}, each kept {ttl} s")

        print(f"cancelled -> heartbeat: {js.cancel_schedule('JOBS', 'schedules.heartbeat')}")
        # A fired @at schedule removes itself: there is nothing left to cancel.
        print(f"cancelled -> reminder: {js.cancel_schedule('JOBS', 'schedules.reminder.42')}")

        # What the client can check, it checks before sending...
        try:
            js.publish("schedules.bad", b"", schedule="*/5 * * * *", schedule_target="jobs.x")
        except nats.InvalidArgumentError as exc:
            print(f"refused   -> {str(exc)[:50]}...")
        # ...and the server's refusals say what to do.
        js.add_stream(name="PLAIN", subjects=["plain.>"])
        try:
            js.publish("plain.s", b"", schedule="@hourly", schedule_target="plain.t")
        except nats.MessageSchedulesDisabledError as exc:
            print(f"refused   -> {exc}")
        js.delete_stream("PLAIN")
        js.delete_stream("JOBS")


if __name__ == "__main__":
    main()
