"""Key-Value store: a bucket of settings, compare-and-set, history, and a watcher on a thread.

Run: python examples/kv.py   (uses $NATS_URL, or starts an embedded nats-server)
"""

from __future__ import annotations

import threading
from typing import List

import jetstream_sync as nats
from jetstream_sync.server import url_from_env_or_embedded


def main() -> None:
    with url_from_env_or_embedded() as url, nats.connect(url) as nc:
        js = nc.jetstream()
        kv = js.create_key_value(bucket="SETTINGS", history=5, description="example")

        # Put, get: every value has a revision (its stream sequence).
        kv.put("db.host", b"db-1.internal")
        rev = kv.put("db.port", b"5432")
        entry = kv.get("db.port")
        print(f"get       -> {entry.key} = {entry.value.decode()} (revision {entry.revision})")

        # A watcher on a thread of its own: the current values, one None, then each change.
        seen: List[str] = []
        initial_done = threading.Event()
        caught_up = threading.Event()
        watcher = kv.watch("db.*")

        def watch() -> None:
            for e in watcher:  # ends when watcher.stop() is called
                if e is None:
                    initial_done.set()
                elif e.operation is not None:
                    seen.append(f"{e.key} {e.operation}")
                else:
                    seen.append(f"{e.key}={e.value.decode()}")
                    if e.value == b"db-2.internal":
                        caught_up.set()

        thread = threading.Thread(target=watch)
        thread.start()
        initial_done.wait(10)

        # Compare-and-set: two writers start from the same revision; only one lands.
        kv.update("db.port", b"6432", last=rev)
        try:
            kv.update("db.port", b"7432", last=rev)
        except nats.KeyWrongLastSequenceError:
            now = kv.get("db.port").value.decode()
            print(f"update    -> the second writer lost: db.port is {now}")

        # create() only if the key has no value; a deleted key counts as free.
        kv.delete("db.host")
        try:
            kv.get("db.host")
        except nats.KeyDeletedError as exc:
            print(f"deleted   -> {exc.op} at revision {exc.entry.revision}")
        kv.create("db.host", b"db-2.internal")

        print(f"keys      -> {sorted(kv.keys())}")
        print(f"history   -> {[e.value.decode() or e.operation for e in kv.history('db.host')]}")

        # Everything the watcher saw, once it has caught up with the last change.
        caught_up.wait(10)
        watcher.stop()
        thread.join(10)
        print(f"watched   -> {seen}")
        print(f"status    -> {kv.status().values} values kept in bucket {kv.bucket}")
        js.delete_key_value("SETTINGS")


if __name__ == "__main__":
    main()
