"""Object Store: files of any size in a bucket, chunked and checked, with a watch and links.

Run: python examples/object_store.py   (uses $NATS_URL, or starts an embedded nats-server)
"""

from __future__ import annotations

import filecmp
import os
import tempfile
from pathlib import Path

import jetstream_sync as nats
from jetstream_sync.server import url_from_env_or_embedded


def main() -> None:
    with url_from_env_or_embedded() as url, nats.connect(url, name="object-store") as nc:
        js = nc.jetstream()
        obs = js.create_object_store("ASSETS", description="example assets")
        try:
            info = obs.put("greeting.txt", b"hello, objects")
            print(f"put       -> {info.name}: {info.size} bytes, {info.digest}")
            print(f"get       -> {obs.get('greeting.txt').data.decode()}")

            # A file goes in and comes out chunk by chunk: memory stays flat for any size.
            with tempfile.TemporaryDirectory() as tmp:
                src, dst = Path(tmp, "big.bin"), Path(tmp, "copy.bin")
                with src.open("wb") as f:
                    for _ in range(5):
                        f.write(os.urandom(1024 * 1024))
                meta = nats.ObjectMeta(
                    description="5 MiB of noise",
                    headers={"Content-Type": "application/octet-stream"},
                )
                with src.open("rb") as f:
                    info = obs.put("big.bin", f, meta=meta)
                print(f"put file  -> {info.size} bytes in {info.chunks} chunks")
                with dst.open("wb") as f:
                    obs.get("big.bin", writeinto=f)  # the digest is checked as it is read
                print(f"get file  -> same bytes: {filecmp.cmp(src, dst, shallow=False)}")

            # A watch: the current objects, a None when they are all there, then changes.
            with obs.watch() as watcher:
                initial = []
                for seen in watcher:
                    if seen is None:
                        break
                    initial.append(seen.name)
                print(f"watch     -> now: {sorted(initial)}")
                obs.put("news.txt", b"fresh")
                update = watcher.updates(timeout=5.0)
                print(f"watch     -> then: {update.name if update else None}")

            # Rename, link, delete.
            meta = obs.get_info("greeting.txt").meta
            meta.name, meta.description = "hello.txt", "renamed"
            obs.update_meta("greeting.txt", meta)
            obs.add_link("latest", obs.get_info("hello.txt"))
            print(f"link      -> {obs.get('latest').data.decode()}")
            obs.delete("news.txt")
            listed = [(i.name, "deleted" if i.deleted else i.size) for i in obs.list()]
            print(f"list      -> {listed}")
            try:
                obs.get("news.txt")
            except nats.ObjectNotFoundError as exc:
                print(f"get       -> ObjectNotFoundError: {exc}")
            print(f"status    -> {obs.status().size} bytes stored")
        finally:
            js.delete_object_store("ASSETS")


if __name__ == "__main__":
    main()
