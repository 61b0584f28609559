"""A partitioned consumer group on a 3-node cluster: the leader of the group's R3 stream is
SIGKILLed mid-consumption, and the members (processes of their own, pcg_worker.py) go on
once a new leader is elected; no key is handled out of order or twice, nothing is lost.

The members and the test's observer connect to the two nodes that survive: the reports are
core messages, which a connection to the killed node could lose in flight (that a client
reconnects is test_cluster.py's business). What fails over here is JetStream's: the group's
work-queue stream, the members' R3 consumers and the KV bucket whose leaders were on the node.
"""

from __future__ import annotations

import json
import time
from typing import List, Optional

import pytest
from pcg_members import Member, Reports

import jetstream_sync as nats
from jetstream_sync import pcgroups
from jetstream_sync.jetstream.context import JetStream
from jetstream_sync.server import NATSCluster
from jetstream_sync.testing import wait_until

pytestmark = pytest.mark.slow

STREAM, GROUP = "PCGC", "cg"
GROUP_STREAM = f"{STREAM}-{GROUP}"
PARTITIONS, KEYS, PER_KEY = 4, 8, 30
ACK_WAIT = 1.5  # the pin's TTL and the redelivery of a message whose ack was lost


def _add_r3_stream(js: JetStream) -> None:
    """A fresh cluster may refuse the placement while it still counts a peer offline (err_code
    10005), or answer late while its first election is slow: ask again (the same stream
    again is no error), up to 60 s (as test_cluster.create_r3_stream does)."""
    deadline = time.monotonic() + 60.0
    while True:
        try:
            js.add_stream(name=STREAM, subjects=["pcgc.*"], num_replicas=3)
            return
        except nats.TimeoutError:
            if time.monotonic() > deadline:
                raise
        except nats.APIError as exc:
            if exc.err_code != 10005 or time.monotonic() > deadline:
                raise
            time.sleep(0.5)  # the peers' next heartbeats: nothing to poll but the create


def _delete_group(js: JetStream) -> bool:
    """One try at deleting the group; False when the cluster did not answer in time."""
    try:
        pcgroups.delete_elastic(js, STREAM, GROUP)
    except nats.StreamNotFoundError:
        pass  # an earlier try went through after its caller gave up
    except nats.TimeoutError:
        return False
    return True


def _leader(js: JetStream, stream: str) -> Optional[str]:
    try:
        cluster = js.stream_info(stream).cluster
    except nats.NATSError:
        return None  # no leader to answer yet
    return (cluster.leader if cluster else None) or None


def _consumer_leader(js: JetStream, consumer: str) -> Optional[str]:
    try:
        cluster = js.consumer_info(GROUP_STREAM, consumer).cluster
    except nats.NATSError:
        return None
    return (cluster.leader if cluster else None) or None


def _move_consumer_leader(nc: nats.Client, consumer: str, to: str) -> bool:
    """Ask the consumer's leader to step down in favour of ``to`` (nats-server 2.11+'s
    preferred placement; the library has no call for it, the test needs it once)."""
    try:
        nc.request(
            f"$JS.API.CONSUMER.LEADER.STEPDOWN.{GROUP_STREAM}.{consumer}",
            json.dumps({"placement": {"preferred": to}}).encode(),
            timeout=5.0,
        )
    except nats.NATSError:
        pass  # the answer may be lost in the change: ask what happened
    return _consumer_leader(nc.jetstream(), consumer) == to


def _done(js: JetStream, total: int) -> bool:
    """Everything sourced into the group's work queue and acked there (acked messages go)."""
    try:
        state = js.stream_info(GROUP_STREAM).state
    except nats.NATSError:
        return False
    return state.last_seq == total and state.messages == 0


def test_group_stream_leader_killed_mid_consumption() -> None:
    total = KEYS * PER_KEY
    with NATSCluster(n=3) as cluster:
        with nats.connect(cluster.urls) as admin:
            # The group's R3 stream is made once by create_elastic (no retry, unlike
            # _add_r3_stream): its first election, on a loaded machine, once took over 10 s.
            js = admin.jetstream(timeout=30.0)
            _add_r3_stream(js)
            pcgroups.create_elastic(
                js, STREAM, GROUP, PARTITIONS, [pcgroups.PartitioningFilter("pcgc.*", [1])]
            )
            assert js.stream_info(GROUP_STREAM).config.num_replicas == 3
            pcgroups.add_members(js, STREAM, GROUP, ["m1", "m2"])
            leader = wait_until(lambda: _leader(js, GROUP_STREAM), 30, "the group's leader")
        doomed = next(s for s in cluster.servers if s.server_name == leader)
        survivors: List[str] = [s.url for s in cluster.servers if s is not doomed]
        # From here on everyone talks to the nodes that survive.
        with nats.connect(survivors) as nc:
            # After the kill the meta layer may be electing too: a delete waited 10+ s for it.
            js = nc.jetstream(timeout=30.0)
            polls = nc.jetstream(timeout=1.0)  # asked again and again during the election
            reports = Reports(nc)
            ack_times: List[float] = []
            nc.subscribe("pcg.acked.*", cb=lambda _: ack_times.append(time.monotonic()))
            members = [
                Member(url, "elastic", STREAM, GROUP, m, m, ACK_WAIT)
                for url, m in zip(survivors, ("m1", "m2"))
            ]
            try:
                for w in members:
                    w.wait_ready()
                # m1's consumer is led from the doomed node too: the kill takes a member's
                # consumer leader with the stream's (m2's stays wherever it was placed).
                wait_until(lambda: _move_consumer_leader(nc, "m1", leader), 30, "m1 on leader")
                for n in range(PER_KEY):
                    for k in range(KEYS):
                        js.publish_async(f"pcgc.k{k}", str(n).encode())
                js.publish_async_completed(timeout=30)
                wait_until(lambda: reports.count("acked") >= total // 4, 30, "consuming")
                doomed.kill()  # SIGKILL
                killed_at = time.monotonic()
                acked_at_kill = reports.count("acked")
                wait_until(
                    lambda: _leader(polls, GROUP_STREAM) not in (None, leader), 30, "election"
                )
                elected_s = time.monotonic() - killed_at
                wait_until(lambda: _done(polls, total), 30, "everything acked")
                counts = reports.check_processed([f"pcgc.k{k}" for k in range(KEYS)], PER_KEY)
                assert acked_at_kill < total  # the kill came mid-consumption
                after = [t for t in ack_times if t > killed_at]
                assert after  # and the members went on after it
                stall = max(b - a for a, b in zip([killed_at, *after], after))
                print(
                    f"leader {leader} killed after {acked_at_kill} of {total} acked; "
                    f"new leader in {elected_s:.1f} s; longest stall {stall:.1f} s; {counts}"
                )
                # The clean-up as an operator would do it: the node back first. With it still
                # down, deleting the group's R3 stream once got no answer in 30 s in CI.
                doomed.start()
                wait_until(lambda: _delete_group(js), 90, "the group deleted")
                for w in members:
                    assert w.finish() == "ended None"
            finally:
                for w in members:
                    if w.proc.poll() is None:
                        w.kill()
