"""Services (nats.micro, ADR-32): endpoints, a group, service errors, discovery, load sharing.

Run: python examples/micro_service.py   (uses $NATS_URL, or starts an embedded nats-server)
"""

from __future__ import annotations

import json
from collections import Counter

import jetstream_sync as nats
from jetstream_sync import micro
from jetstream_sync.server import url_from_env_or_embedded


def add(req: micro.Request) -> None:
    """Add the numbers of a JSON list; anything else is a 400 service error."""
    try:
        numbers = json.loads(req.data)
        req.respond(str(sum(numbers)).encode())
    except (ValueError, TypeError) as exc:
        req.respond_error("400", f"want a JSON list of numbers: {exc}")


def main() -> None:
    with url_from_env_or_embedded() as url, nats.connect(url, name="micro-client") as nc:
        # Two instances of one service, each on a connection of its own: the endpoints share
        # queue group "q", so each request goes to one of them.
        workers = [nats.connect(url, name=f"worker-{i}") for i in range(2)]
        services = []
        for i, worker in enumerate(workers):
            svc = micro.add_service(
                worker,
                name="calc",
                version="1.0.0",
                description="arithmetic",
                metadata={"instance": str(i)},
            )
            math = svc.add_group(name="math")
            math.add_endpoint(name="add", handler=add)
            math.add_endpoint(
                name="whoami", handler=lambda req, i=i: req.respond(f"worker-{i}".encode())
            )
            services.append(svc)

        print(f"add       -> {nc.request('math.add', b'[1, 2, 39]', timeout=2).data.decode()}")
        bad = nc.request("math.add", b"one, two", timeout=2)
        print(f"error     -> {bad.headers['Nats-Service-Error-Code']}: ", end="")
        print(bad.headers["Nats-Service-Error"][:24])

        who = Counter(nc.request("math.whoami", timeout=2).data.decode() for _ in range(100))
        print(f"shared    -> both instances served: {sorted(who) == ['worker-0', 'worker-1']}")

        # Discovery: every instance answers $SRV.PING / INFO / STATS (+ .<name>[.<id>]).
        inbox = nc.new_inbox()
        replies = nc.subscribe(inbox)
        nc.publish("$SRV.PING.calc", reply=inbox)
        pings = []
        while True:
            try:
                pings.append(micro.ServicePing.from_dict(json.loads(replies.next_msg(0.5).data)))
            except nats.TimeoutError:
                break
        print(f"ping      -> {len(pings)} instances of {pings[0].name} {pings[0].version}")

        info = micro.ServiceInfo.from_dict(
            json.loads(nc.request(f"$SRV.INFO.calc.{services[0].id}", timeout=2).data)
        )
        print(f"info      -> {[e.subject for e in info.endpoints]}")
        total = 0
        for svc in services:
            stats = micro.ServiceStats.from_dict(
                json.loads(nc.request(f"$SRV.STATS.calc.{svc.id}", timeout=2).data)
            )
            total += sum(e.num_requests for e in stats.endpoints)
        print(f"stats     -> {total} requests handled")

        for svc in services:
            svc.stop()  # drains: requests already received are answered first
        print(f"stopped   -> {all(s.stopped.is_set() for s in services)}")
        for worker in workers:
            worker.close()


if __name__ == "__main__":
    main()
