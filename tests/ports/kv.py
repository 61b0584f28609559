# A nats-py program (asyncio), written for this test in nats-py's own style: Key-Value.
# tests/test_port_by_deleting_await.py runs it on nats-py, then deletes `async`, `await`
# and `asyncio.run` and runs what is left on jetstream_sync; the two outputs must match.
import asyncio
import os

import nats
from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError


async def main():
    nc = await nats.connect(os.environ["NATS_URL"])
    js = nc.jetstream()

    kv = await js.create_key_value(bucket="settings", history=5)

    rev = await kv.put("color", b"blue")
    print("put", rev)
    entry = await kv.get("color")
    print("get", entry.key, entry.value, entry.revision)

    rev = await kv.update("color", b"green", last=entry.revision)
    print("update", rev)
    try:
        await kv.update("color", b"red", last=entry.revision)
    except KeyWrongLastSequenceError:
        print("stale update refused")

    await kv.create("size", b"L")
    try:
        await kv.create("size", b"XL")
    except KeyWrongLastSequenceError:
        print("create refused: key exists")

    await kv.put("app.db.host", b"db1")
    await kv.put("app.db.port", b"5432")
    print("keys", sorted(await kv.keys()))

    history = await kv.history("color")
    print("history", [e.value for e in history])

    await kv.delete("size")
    try:
        await kv.get("size")
    except KeyNotFoundError:
        print("size deleted")

    old = await kv.get("color", revision=1)
    print("revision 1", old.value)

    status = await kv.status()
    print("status", status.bucket, status.history)

    watcher = await kv.watch("app.db.*")
    seen = []
    async for entry in watcher:
        if entry is None:
            break
        seen.append((entry.key, entry.value))
    print("watched", sorted(seen))
    await watcher.stop()

    await kv.purge("color")
    try:
        await kv.get("color")
    except KeyNotFoundError:
        print("color purged")

    print("deleted", await js.delete_key_value("settings"))
    await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
