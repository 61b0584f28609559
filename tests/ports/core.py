# A nats-py program (asyncio), written for this test in nats-py's own style: core NATS.
# tests/test_port_by_deleting_await.py runs it on nats-py, then deletes `async`, `await`
# and `asyncio.run` and runs what is left on jetstream_sync; the two outputs must match.
import asyncio
import os

import nats
from nats.errors import NoRespondersError, TimeoutError


async def main():
    nc = await nats.connect(os.environ["NATS_URL"], name="port-core")
    print("connected", nc.is_connected)

    sub = await nc.subscribe("greet.*")
    await nc.publish("greet.joe", b"hello", headers={"X-Who": "joe"})
    msg = await sub.next_msg(timeout=5)
    print(msg.subject, msg.data, msg.headers["X-Who"])

    async def upper(msg):
        await msg.respond(msg.data.upper())

    await nc.subscribe("upper", cb=upper)
    await nc.flush()
    reply = await nc.request("upper", b"shout", timeout=5)
    print("reply", reply.data)

    try:
        await nc.request("nobody.home", b"?", timeout=5)
    except NoRespondersError:
        print("no responders")

    try:
        await sub.next_msg(timeout=0.2)
    except TimeoutError:
        print("nothing more")

    workers = await nc.subscribe("jobs", queue="workers")
    for i in range(3):
        await nc.publish("jobs", f"job {i}".encode())
    for _ in range(3):
        job = await workers.next_msg(timeout=5)
        print("job", job.data)

    inbox = nc.new_inbox()
    print("inbox", inbox.startswith("_INBOX."))
    await sub.unsubscribe()
    await nc.drain()
    print("closed", nc.is_closed)


if __name__ == "__main__":
    asyncio.run(main())
