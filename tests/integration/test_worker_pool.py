"""Worker pools on one pull durable, the way gunicorn workers and Spark executors use it
(issue 17, 1b, 1c, 1d, 1i): separate processes started at once on a wildcard filter,
members leaving while others work, restarts that rebind with the config they always had,
fetches that queue behind other members' pulls."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest
from support import Errors

import jetstream_sync as nats
from jetstream_sync.jetstream.api import AckPolicy, ConsumerConfig
from jetstream_sync.jetstream.context import JetStream
from jetstream_sync.server import NATSServer
from jetstream_sync.testing import drop_inbound, wait_until

STREAM_PREFIX = "POOL"
WORKER = str(Path(__file__).with_name("pool_worker.py"))


class Worker:
    """A pool member in a process of its own."""

    def __init__(self, url: str, subject: str, durable: str, mode: str, limit: int = 0) -> None:
        args = [sys.executable, WORKER, url, subject, durable, mode]
        if limit:
            args.append(str(limit))
        self.proc = subprocess.Popen(
            args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.lines: List[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.strip())

    def go(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def finish(self, timeout: float = 90.0) -> List[str]:
        try:
            self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        self._reader.join(timeout=10)
        assert self.lines and self.lines[-1] == "left", (
            f"worker did not leave cleanly: {self.lines[-3:]} "
            f"stderr: {self.proc.stderr.read()[-2000:] if self.proc.stderr else ''}"
        )
        return [line.split(" ", 1)[1] for line in self.lines if line.startswith("acked ")]


def _start_pool(
    url: str, subject: str, durable: str, members: List[Dict[str, Any]]
) -> List[Worker]:
    workers = [Worker(url, subject, durable, **m) for m in members]
    for w in workers:
        wait_until(lambda w=w: "bound" in w.lines or w.proc.poll() is not None, 60, "bind")
        assert "bound" in w.lines, f"a member could not bind: {w.lines}"
    for w in workers:
        w.go()
    return workers


def test_a_pool_of_processes_shares_a_wildcard_durable_and_leaving_deletes_nothing(
    nats_server: NATSServer, js: JetStream, stream: str
) -> None:
    p = stream.lower()
    subject = f"{p}.jobs.*"
    for i in range(300):
        js.publish(f"{p}.jobs.{'abc'[i % 3]}", str(i).encode())
    js.publish(f"{p}.other", b"not a job")
    # Three members start at once (each may believe it made the durable); one leaves early
    # by unsubscribe, one by drain, one works to the end.
    workers = _start_pool(
        nats_server.url,
        subject,
        "w",
        [
            {"mode": "unsubscribe", "limit": 20},
            {"mode": "drain"},
            {"mode": "unsubscribe"},
        ],
    )
    acked = Counter(d for w in workers for d in w.finish())
    assert sorted(acked, key=int) == [str(i) for i in range(300)]
    assert set(acked.values()) == {1}, "a message was processed twice"
    # The durable outlived every member, with its acks.
    info = js.consumer_info(stream, "w")
    assert info.config.filter_subject == subject
    assert (info.num_pending, info.num_ack_pending) == (0, 0)

    # A restart binds with the config it always had and reprocesses nothing.
    (again,) = _start_pool(nats_server.url, subject, "w", [{"mode": "unsubscribe"}])
    js.publish(f"{p}.jobs.b", b"new")
    assert again.finish() == ["new"]


def test_delete_consumer_when_asked(js: JetStream, stream: str) -> None:
    p = stream.lower()
    js.pull_subscribe(f"{p}.>", "a").unsubscribe(delete_consumer=True)
    js.pull_subscribe(f"{p}.>", "b").drain(timeout=5, delete_consumer=True)
    js.pull_subscribe(f"{p}.>", "c").drain(timeout=5)
    assert js.consumer_names(stream) == ["c"]
    with pytest.raises(nats.InvalidArgumentError, match="delete_consumer"):
        js.pull_subscribe(f"{p}.>", "c").unsubscribe(delete_consumer="yes")  # type: ignore[arg-type]


def test_a_failing_delete_is_raised_by_unsubscribe_and_reported_by_drain(
    nats_server: NATSServer,
) -> None:
    errs = Errors()
    with nats.connect(nats_server.url, error_cb=errs) as nc:
        js = nc.jetstream()
        js.add_stream(name="POOLDEL", subjects=["pooldel.>"])
        raised = js.pull_subscribe("pooldel.*")  # ephemeral: the library deletes it
        reported = js.pull_subscribe("pooldel.*")
        js.delete_stream("POOLDEL")  # the consumers go with it: deleting them now fails
        with pytest.raises(nats.StreamNotFoundError):
            raised.unsubscribe()
        reported.drain(timeout=5)  # no raise
        wait_until(lambda: nats.StreamNotFoundError in errs.kinds(), what="error_cb")


def test_rebinding_compares_only_what_the_caller_set(js: JetStream, stream: str) -> None:
    p = stream.lower()
    cfg = ConsumerConfig(
        ack_wait=0.25,
        backoff=None,
        headers_only=False,
        max_batch=0,
        max_waiting=512,
        metadata={"owner": "billing"},
        inactive_threshold=3600.0,
    )
    js.pull_subscribe(f"{p}.x", "r", config=cfg).unsubscribe()
    # The server added _nats.* metadata and left out False/0: the same config still binds.
    assert "_nats.ver" in (js.consumer_info(stream, "r").config.metadata or {})
    js.pull_subscribe(f"{p}.x", "r", config=cfg).unsubscribe()
    # What the caller set and the consumer does not have is still refused, by name.
    for changed, field in [
        (ConsumerConfig(ack_wait=1.0), "ack_wait"),
        (ConsumerConfig(headers_only=True), "headers_only"),
        (ConsumerConfig(metadata={"owner": "sales"}), "metadata"),
        (ConsumerConfig(max_waiting=7), "max_waiting"),
    ]:
        with pytest.raises(nats.InvalidArgumentError, match=f"another configuration.*{field}"):
            js.pull_subscribe(f"{p}.x", "r", config=changed)


def test_a_subject_and_a_config_filter_that_differ_are_refused(js: JetStream, stream: str) -> None:
    p = stream.lower()
    with pytest.raises(nats.InvalidArgumentError, match="differ"):
        js.pull_subscribe(f"{p}.a", "f", config=ConsumerConfig(filter_subject=f"{p}.b"))
    with pytest.raises(nats.InvalidArgumentError, match="neither one of"):
        js.pull_subscribe(f"{p}.a", "f", config=ConsumerConfig(filter_subjects=[f"{p}.b"]))
    assert js.consumer_names(stream) == []
    js.pull_subscribe(f"{p}.*", "f", config=ConsumerConfig(filter_subject=f"{p}.*"))
    assert js.consumer_info(stream, "f").config.filter_subject == f"{p}.*"


def test_fetch_waits_behind_other_members_pulls(nats_server: NATSServer, stream: str) -> None:
    """The server answers a no_wait pull 408 Requests Pending when messages wait but fewer
    than the pulls already waiting ask for (another member holds max_ack_pending): fetch must
    go on to a long pull, as after a 404, instead of giving up at once (and busy-looping)."""
    p = stream.lower()
    with nats.connect(nats_server.url) as nc_a, nats.connect(nats_server.url) as nc_b:
        js_a, js_b = nc_a.jetstream(), nc_b.jetstream()
        js_a.add_consumer(
            stream,
            durable_name="shared",
            filter_subject=f"{p}.*",
            max_ack_pending=1,
            ack_policy=AckPolicy.EXPLICIT,
        )
        ours = js_a.pull_subscribe(f"{p}.*", "shared")
        theirs = js_b.pull_subscribe(f"{p}.*", "shared")
        js_a.publish(f"{p}.m", b"0")
        held = theirs.fetch(1, timeout=5)[0]  # max_ack_pending reached: nothing more goes out
        js_a.publish(f"{p}.m", b"1")
        results: Dict[str, Any] = {}

        def pull(name: str, psub: Any, batch: int, timeout: float) -> None:
            try:
                results[name] = psub.fetch(batch, timeout=timeout)
            except nats.NATSError as exc:
                results[name] = exc

        waiting = lambda n: js_a.consumer_info(stream, "shared").num_waiting >= n  # noqa: E731
        t_b = threading.Thread(target=pull, args=("theirs", theirs, 10, 5.0))
        t_b.start()
        wait_until(lambda: waiting(1), 10, "their pull")
        t_a = threading.Thread(target=pull, args=("ours", ours, 5, 30.0))
        t_a.start()
        wait_until(lambda: waiting(2) or "ours" in results, 10, "our pull")
        assert "ours" not in results, f"our fetch gave up: {results['ours']!r}"
        t_b.join(30)  # their pull expires with nothing (max_ack_pending still held)
        assert isinstance(results["theirs"], nats.TimeoutError)
        held.ack_sync()  # room again: the waiting message goes to our pull
        t_a.join(30)
        assert isinstance(results["ours"], list), results["ours"]
        assert [m.data for m in results["ours"]] == [b"1"]


def test_fetch_timeout_zero_takes_what_is_there(js: JetStream, stream: str) -> None:
    p = stream.lower()
    psub = js.pull_subscribe(f"{p}.*", "z")
    with pytest.raises(nats.TimeoutError):
        psub.fetch(1, timeout=0)
    with pytest.raises(nats.TimeoutError):
        psub.fetch(10, timeout=0)
    # The server acks a publish a moment before it tells the consumers (nats-server signals
    # them from a queue of its own), and a no_wait pull sent in that moment is answered 404.
    # So this waits until the consumer counts the messages: from then on a no_wait pull
    # must take them.
    for i in range(3):
        js.publish(f"{p}.m", str(i).encode())
    wait_until(lambda: psub.consumer_info().num_pending == 3, what="the consumer counts 3")
    assert [m.data for m in psub.fetch(10, timeout=0)] == [b"0", b"1", b"2"]
    js.publish(f"{p}.m", b"3")
    wait_until(lambda: psub.consumer_info().num_pending == 1, what="the consumer counts 1")
    assert [m.data for m in psub.fetch(1, timeout=0)] == [b"3"]
    # Nothing was left waiting at the server.
    assert js.consumer_info(stream, "z").num_waiting == 0


def test_pull_subscribe_goes_on_when_the_lookup_times_out(
    nats_server: NATSServer, stream: str
) -> None:
    p = stream.lower()
    with nats.connect(nats_server.url) as nc:
        js = nc.jetstream()
        js.pull_subscribe(f"{p}.*", "slow").unsubscribe()
        lookups: List[Optional[bytes]] = []

        def first_lookup_answer(msg: nats.Msg) -> bool:
            if b"consumer_info_response" in msg.data and not lookups:
                lookups.append(msg.data)
                return True
            return False

        with drop_inbound(nc, first_lookup_answer) as dropped:
            # A short timeout only here, where the lookup's answer is dropped.
            psub = nc.jetstream(timeout=2.5).pull_subscribe(f"{p}.*", "slow")
        assert len(dropped) == 1  # the lookup's answer was lost: it timed out
        js.publish(f"{p}.m", b"after")
        assert psub.fetch(1, timeout=5)[0].data == b"after"


def test_add_consumer_defaults_to_explicit_acks(js: JetStream, stream: str) -> None:
    p = stream.lower()
    info = js.add_consumer(stream, durable_name="d", filter_subject=f"{p}.*")
    assert info.config.ack_policy == AckPolicy.EXPLICIT
    js.publish(f"{p}.m", b"x")
    msg = js.consumer(stream, "d").fetch(1, max_wait=5)[0]
    assert js.consumer_info(stream, "d").num_ack_pending == 1
    msg.ack_sync()
    assert js.consumer_info(stream, "d").num_ack_pending == 0
    # Asked for, none is still none.
    none = js.add_consumer(stream, durable_name="n", ack_policy=AckPolicy.NONE)
    assert none.config.ack_policy == AckPolicy.NONE
