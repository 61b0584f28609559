"""Capabilities under faults (issue 35), one row per capability and fault: a mid-frame cut
(server -> client), a black hole that heals, and a server SIGKILL with a restart on the same
store. Each row says what was lost, what was doubled, the worst call against its timeout,
the errors seen, and whether the client works again afterwards (``pytest -s`` prints it).

Loads: counter adds with a ``msg_id`` (retried with the same id), atomic batches of 3 (an
unknown commit resolved by its Nats-Batch-Id), KV creates, Object Store put + get; each
must end with every call that answered stored exactly once."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Dict, Iterator, List, Tuple

import pytest
from fault_table import print_table
from faultproxy import DOWN, FaultProxy

import jetstream_sync as nats
from jetstream_sync import micro
from jetstream_sync.server import NATSServer
from jetstream_sync.testing import stream_name

CALL_TIMEOUT = 1.0
CALLS = 60
FAULT_SPAN = 2.0  # seconds a black hole lasts before it heals
HANG_MARGIN = 5.0  # a 2-core machine shared with other test runs


@pytest.fixture
def own_server() -> Iterator[NATSServer]:
    """A server of this test's own: the SIGKILL row kills it."""
    with NATSServer(jetstream=True) as srv:
        yield srv


def _sigkill_restart(srv: NATSServer) -> Callable[[FaultProxy], None]:
    def fault(_: FaultProxy) -> None:
        srv.kill()
        srv.start()

    return fault


class Capability:
    """One capability's load: ``setup(js)`` on the admin connection, ``op(js, i)`` the
    i-th call through the proxy (True: done; False: certainly not done, try again; an
    error: try again), ``tally(js, done)`` (lost, doubled) read on the admin connection."""

    name = ""

    def setup(self, js: Any) -> None:
        raise NotImplementedError

    def op(self, js: Any, i: int) -> bool:
        raise NotImplementedError

    def tally(self, js: Any, done: int) -> Tuple[int, int]:
        raise NotImplementedError

    def cleanup(self, js: Any) -> None:
        raise NotImplementedError


class CounterLoad(Capability):
    """Adds of 1, each with a msg_id, retried with the same id."""

    name = "counter add(msg_id)"

    def setup(self, js: Any) -> None:
        self.stream = stream_name("CNTF")
        self.subject = f"{self.stream.lower()}.n"
        js.add_stream(
            name=self.stream,
            subjects=[f"{self.stream.lower()}.>"],
            allow_msg_counter=True,
            allow_direct=True,
        )

    def op(self, js: Any, i: int) -> bool:
        js.counter(self.stream).add(self.subject, 1, msg_id=f"add-{i}")
        return True

    def tally(self, js: Any, done: int) -> Tuple[int, int]:
        value = int(js.counter(self.stream).load(self.subject))
        return max(0, done - value), max(0, value - done)

    def cleanup(self, js: Any) -> None:
        js.delete_stream(self.stream)


class AtomicBatchLoad(Capability):
    """Batches of 3; a commit whose outcome is unknown is resolved as the error says (the
    last message's Nats-Batch-Id); a batch certainly not stored is sent again, new."""

    name = "atomic batch x3"

    def setup(self, js: Any) -> None:
        self.stream = stream_name("ABF")
        self.subject = f"{self.stream.lower()}.b"
        js.add_stream(
            name=self.stream,
            subjects=[f"{self.stream.lower()}.>"],
            allow_atomic=True,
            allow_direct=True,
        )
        self.admin = js

    def op(self, js: Any, i: int) -> bool:
        batch = js.batch_publish()
        try:
            batch.add(self.subject, b"%d.0" % i)
            batch.add(self.subject, b"%d.1" % i)
            batch.commit(self.subject, b"%d.2" % i)
        except nats.BatchOutcomeUnknownError:
            last = self.admin.get_last_msg(self.stream, self.subject)
            if (last.headers or {}).get("Nats-Batch-Id") == batch.id:
                return True
            raise
        return True

    def tally(self, js: Any, done: int) -> Tuple[int, int]:
        messages = js.stream_info(self.stream).state.messages
        assert messages % 3 == 0, f"a batch stored in part: {messages} messages"
        return max(0, done - messages // 3), max(0, messages // 3 - done)

    def cleanup(self, js: Any) -> None:
        js.delete_stream(self.stream)


class KeyValueLoad(Capability):
    """KV creates of new keys: one that raised is retried; a retry refused because the key
    exists is done if the stored value is ours (the first try landed)."""

    name = "kv create"

    def setup(self, js: Any) -> None:
        self.bucket = stream_name("KVF")
        js.create_key_value(bucket=self.bucket)
        self.admin = js

    def op(self, js: Any, i: int) -> bool:
        value = b"v%d" % i
        try:
            js.key_value(self.bucket).create(f"k{i}", value)
        except nats.KeyWrongLastSequenceError:
            return bool(self.admin.key_value(self.bucket).get(f"k{i}").value == value)
        return True

    def tally(self, js: Any, done: int) -> Tuple[int, int]:
        keys = len(js.key_value(self.bucket).keys())
        messages = js.stream_info(f"KV_{self.bucket}").state.messages
        return max(0, done - keys), max(0, messages - keys)

    def cleanup(self, js: Any) -> None:
        js.delete_key_value(self.bucket)


class ObjectLoad(Capability):
    """Object Store put of 3 chunks then get, retried; lost: an object that does not read
    back whole; doubled: chunk messages no stored info points to (orphans)."""

    name = "object put+get"
    DATA = b"x" * 250

    def setup(self, js: Any) -> None:
        self.bucket = stream_name("OBF")
        js.create_object_store(self.bucket)
        self.meta = nats.ObjectMeta(options=nats.ObjectMetaOptions(max_chunk_size=100))

    def op(self, js: Any, i: int) -> bool:
        store = js.object_store(self.bucket)
        store.put(f"o{i}", self.DATA, meta=self.meta)
        return bool(store.get(f"o{i}").data == self.DATA)

    def tally(self, js: Any, done: int) -> Tuple[int, int]:
        store = js.object_store(self.bucket)
        infos = store.list()
        whole = sum(1 for info in infos if store.get(info.name).data == self.DATA)
        info = js.stream_info(f"OBJ_{self.bucket}", subjects_filter=f"$O.{self.bucket}.C.>")
        chunks = sum((info.state.subjects or {}).values())
        return max(0, done - whole), max(0, chunks - 3 * len(infos))

    def cleanup(self, js: Any) -> None:
        js.delete_object_store(self.bucket)


class MicroLoad(Capability):
    """Requests through the proxy to a micro service on the admin connection, each sent
    once (a core request is at most once: one that raised is not sent again). Lost: a
    request answered whose handler did not run; doubled: a handler run twice for a request.
    The errors of requests that raised are counted in ``unanswered``."""

    name = "micro requests"

    def setup(self, js: Any) -> None:
        self.runs: Dict[bytes, int] = {}
        self.answered: List[bytes] = []
        self.unanswered: Dict[str, int] = {}
        self.subject = stream_name("svc").lower()

        def handler(req: Any) -> None:
            self.runs[req.data] = self.runs.get(req.data, 0) + 1
            req.respond(req.data)

        self.service = micro.add_service(js.nc, name="faulted", version="1.0.0")
        self.service.add_endpoint(name="echo", subject=self.subject, handler=handler)

    def op(self, js: Any, i: int) -> bool:
        body = b"r%d" % i
        self.last_ok = False
        try:
            reply = js.nc.request(self.subject, body, timeout=CALL_TIMEOUT)
        except nats.NoRespondersError:
            raise  # no handler ran: the harness sends it again
        except nats.NATSError as exc:
            kind = type(exc).__name__
            self.unanswered[kind] = self.unanswered.get(kind, 0) + 1
            return True  # not sent again: its outcome is that of a core request
        assert reply.data == body
        self.answered.append(body)
        self.last_ok = True
        return True

    def tally(self, js: Any, done: int) -> Tuple[int, int]:
        lost = sum(1 for body in self.answered if self.runs.get(body, 0) != 1)
        return lost, sum(1 for n in self.runs.values() if n > 1)

    def cleanup(self, js: Any) -> None:
        self.service.stop()


def capability_row(
    srv: NATSServer, load: Capability, name: str, fault: Callable[[FaultProxy], None]
) -> Dict[str, Any]:
    with nats.connect(srv.url) as admin:
        ajs = admin.jetstream(timeout=5.0)
        load.setup(ajs)
        proxy = FaultProxy("127.0.0.1", srv.port)
        errors_seen: Dict[str, int] = {}
        worst = 0.0
        done = 0
        try:
            nc = nats.connect(
                proxy.url,
                ping_interval=1.0,
                max_outstanding_pings=2,
                reconnect_time_wait=0.2,
                max_reconnect_attempts=-1,
                connect_timeout=1.0,
                error_cb=lambda e: None,
            )
            try:
                js = nc.jetstream(timeout=CALL_TIMEOUT)
                healer = threading.Timer(0, lambda: None)
                for i in range(CALLS):
                    if i == CALLS // 3:
                        fault(proxy)
                        healer = threading.Timer(FAULT_SPAN, proxy.heal)  # the fault's span
                        healer.start()
                    deadline = time.monotonic() + 30.0
                    while True:
                        started = time.monotonic()
                        try:
                            if load.op(js, i):
                                break
                        except nats.NATSError as exc:
                            kind = type(exc).__name__
                            errors_seen[kind] = errors_seen.get(kind, 0) + 1
                            assert time.monotonic() < deadline, f"call {i} never answered"
                            threading.Event().wait(0.05)  # a retry pace
                        finally:
                            worst = max(worst, time.monotonic() - started)
                    done += 1
                healer.join()
                proxy.heal()
                works_after = load.op(js, CALLS) and getattr(load, "last_ok", True)
                done += 1
            finally:
                nc.close()
        finally:
            proxy.close()
        lost, doubled = load.tally(ajs, done)
        errors_seen.update(getattr(load, "unanswered", {}))
        load.cleanup(ajs)
    return {
        "capability": load.name,
        "fault": name,
        "calls": done,
        "lost": lost,
        "doubled": doubled,
        "worst_call_s": round(worst, 2),
        "timeout_s": CALL_TIMEOUT,
        "errors": ",".join(f"{k}x{v}" for k, v in sorted(errors_seen.items())) or "-",
        "works_after": works_after,
    }


@pytest.mark.parametrize(
    "load",
    [CounterLoad, AtomicBatchLoad, KeyValueLoad, ObjectLoad, MicroLoad],
    ids=["counter", "atomic", "kv", "object", "micro"],
)
def test_a_capability_under_faults(own_server: NATSServer, load: type) -> None:
    faults: List[Any] = [
        ("cut mid-frame down", lambda p: p.cut(after=7, direction=DOWN)),
        ("black hole, heals", lambda p: p.black_hole()),
        ("SIGKILL + restart", _sigkill_restart(own_server)),
    ]
    rows = [capability_row(own_server, load(), name, fault) for name, fault in faults]
    print_table(rows)
    for row in rows:
        assert row["calls"] == CALLS + 1, row
        assert row["lost"] == 0 and row["doubled"] == 0, row
        assert row["worst_call_s"] <= CALL_TIMEOUT + HANG_MARGIN, row
        assert row["works_after"], row
