# A nats-py program (asyncio), written for this test in nats-py's own style: JetStream.
# tests/test_port_by_deleting_await.py runs it on nats-py, then deletes `async`, `await`
# and `asyncio.run` and runs what is left on jetstream_sync; the two outputs must match.
import asyncio
import os

import nats
from nats.errors import TimeoutError
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError


async def main():
    nc = await nats.connect(os.environ["NATS_URL"])
    js = nc.jetstream()

    info = await js.add_stream(name="ORDERS", subjects=["orders.>"])
    print("stream", info.config.name, info.config.subjects)

    for i in range(5):
        ack = await js.publish(f"orders.{i % 2}", f"order {i}".encode())
        print("ack", ack.stream, ack.seq)
    ack = await js.publish("orders.0", b"dup", headers={"Nats-Msg-Id": "id-1"})
    again = await js.publish("orders.0", b"dup", headers={"Nats-Msg-Id": "id-1"})
    print("duplicate", ack.seq == again.seq, again.duplicate)

    psub = await js.pull_subscribe("orders.>", "billing")
    msgs = await psub.fetch(3, timeout=5)
    for msg in msgs:
        print("pulled", msg.subject, msg.data, msg.metadata.sequence.stream)
        await msg.ack()
    msgs = await psub.fetch(10, timeout=5)
    print("then", len(msgs))
    for msg in msgs:
        await msg.ack_sync()
    info = await psub.consumer_info()
    print("billing pending", info.num_pending, info.num_ack_pending)

    one_at_a_time = ConsumerConfig(max_ack_pending=1)
    sub = await js.subscribe("orders.1", durable="audit", manual_ack=True, config=one_at_a_time)
    msg = await sub.next_msg(timeout=5)
    print("pushed", msg.data, msg.metadata.num_delivered)
    await msg.nak()
    msg = await sub.next_msg(timeout=5)
    print("redelivered", msg.data, msg.metadata.num_delivered)
    await msg.term()

    config = ConsumerConfig(
        durable_name="late", deliver_policy=DeliverPolicy.LAST, ack_policy=AckPolicy.EXPLICIT
    )
    await js.add_consumer("ORDERS", config)
    late = await js.pull_subscribe_bind("late", stream="ORDERS")
    (last,) = await late.fetch(1, timeout=5)
    print("last", last.data)

    osub = await js.subscribe("orders.>", ordered_consumer=True)
    data = []
    for _ in range(6):  # the stream's six messages, each waited for generously
        msg = await osub.next_msg(timeout=5)
        data.append(msg.data)
    try:
        extra = await osub.next_msg(timeout=0.5)
        print("ordered: one more than the stream holds", extra.data)
    except TimeoutError:
        pass
    print("ordered", len(data), data[0], data[-1])

    got = await js.get_msg("ORDERS", 2)
    print("get_msg", got.subject, got.data, got.seq)
    last = await js.get_last_msg("ORDERS", "orders.1")
    print("get_last_msg", last.data, last.seq)

    names = [c.name for c in await js.consumers_info("ORDERS")]
    print("consumers", sorted(n for n in names if n in ("audit", "billing", "late")))
    await js.delete_consumer("ORDERS", "audit")
    try:
        await js.consumer_info("ORDERS", "audit")
    except NotFoundError:
        print("audit gone")

    info = await js.stream_info("ORDERS")
    print("messages", info.state.messages)
    await js.purge_stream("ORDERS", subject="orders.1")
    info = await js.stream_info("ORDERS")
    print("after purge", info.state.messages)
    print("deleted", await js.delete_stream("ORDERS"))
    await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
