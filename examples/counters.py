"""Counters (ADR-49): the server adds, the client says how much. Every subject of a stream
with allow_msg_counter is a counter of any size; a stream that sources counter streams adds
their totals into its own and keeps the breakdown.

Run: python examples/counters.py   (uses $NATS_URL, or starts an embedded nats-server)
"""

from __future__ import annotations

import time

import jetstream_sync as nats
from jetstream_sync.jetstream.api import StreamSource, SubjectTransform
from jetstream_sync.server import url_from_env_or_embedded


def main() -> None:
    with url_from_env_or_embedded() as url, nats.connect(url) as nc:
        js = nc.jetstream()
        for region in ("EU", "US"):
            js.add_stream(
                name=f"HITS_{region}",
                subjects=[f"hits.{region.lower()}.>"],
                allow_msg_counter=True,  # fixed at creation
                allow_direct=True,  # the counters' reads are direct gets
            )
        # A global counter stream: the regions' totals, their subjects mapped onto its own.
        js.add_stream(
            name="HITS",
            subjects=["hits.all.>"],
            allow_msg_counter=True,
            allow_direct=True,
            sources=[
                StreamSource(
                    name=f"HITS_{r}",
                    subject_transforms=[
                        SubjectTransform(src=f"hits.{r.lower()}.>", dest="hits.all.>")
                    ],
                )
                for r in ("EU", "US")
            ],
        )
        try:
            eu, us, world = js.counter("HITS_EU"), js.counter("HITS_US"), js.counter("HITS")

            print(f"add       -> {eu.add('hits.eu.home', 3)}, then {eu.add('hits.eu.home', 2)}")
            eu.add("hits.eu.cart", 1)
            us.add("hits.us.home", 10)
            us.add("hits.us.home", -4)  # a negative delta subtracts
            print(f"load      -> hits.us.home = {us.load('hits.us.home')}")
            print(f"load_many -> {eu.load_many(['hits.eu.*'])}")

            eu.add("hits.eu.bytes", 2**64)  # any size: the server keeps big integers
            big = eu.add("hits.eu.bytes", 2**64)
            print(f"big       -> {big} (2**65: {big == 2**65})")

            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:  # sourcing is asynchronous
                try:
                    if world.load("hits.all.home") == 11:
                        break
                except nats.CounterNotFoundError:
                    pass
                time.sleep(0.05)
            entry = world.get("hits.all.home")
            print(f"sourced   -> hits.all.home = {entry.value}, from {entry.sources}")

            try:
                eu.load("hits.eu.never")
            except nats.CounterNotFoundError as exc:
                print(f"missing   -> CounterNotFoundError: {exc}")
            try:
                eu.add("hits.eu.home", 1.5)  # type: ignore[arg-type]
            except nats.InvalidArgumentError as exc:
                print(f"bad delta -> {exc}")
        finally:
            for name in ("HITS", "HITS_EU", "HITS_US"):
                js.delete_stream(name)


if __name__ == "__main__":
    main()
