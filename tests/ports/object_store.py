# A nats-py program (asyncio), written for this test in nats-py's own style: Object Store.
# tests/test_port_by_deleting_await.py runs it on nats-py, then deletes `async`, `await`
# and `asyncio.run` and runs what is left on jetstream_sync; the two outputs must match.
import asyncio
import io
import os

import nats
from nats.js.errors import ObjectNotFoundError


async def main():
    nc = await nats.connect(os.environ["NATS_URL"])
    js = nc.jetstream()

    obs = await js.create_object_store(bucket="files")
    blob = bytes(range(256)) * 1000
    info = await obs.put("blob.bin", blob)
    print("put", info.name, info.size, info.chunks > 1)

    result = await obs.get("blob.bin")
    print("get", result.data == blob, result.info.size)

    await obs.put("notes.txt", io.BytesIO(b"hello"))
    out = io.BytesIO()
    await obs.get("notes.txt", writeinto=out)
    print("streamed", out.getvalue())

    info = await obs.get_info("notes.txt")
    print("info", info.name, info.size)
    print("list", sorted(o.name for o in await obs.list()))

    await obs.delete("notes.txt")
    try:
        await obs.get("notes.txt")
    except ObjectNotFoundError:
        print("notes deleted")

    status = await obs.status()
    print("status", status.bucket)
    print("deleted", await js.delete_object_store("files"))
    await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
