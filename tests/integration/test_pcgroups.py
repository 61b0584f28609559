"""Partitioned consumer groups against a real server, in one process: the administration
(create, list, members, mappings, delete), what the groups make on the server (orbit.go's
stream, consumers, priority group and transform), how running members follow changes of the
record, step-down, and the refusals."""

from __future__ import annotations

import threading
from typing import Iterator, List, Tuple

import pytest

from jetstream_sync import errors, pcgroups
from jetstream_sync.jetstream.api import (
    AckPolicy,
    ConsumerConfig,
    PriorityPolicy,
    RetentionPolicy,
    SubjectTransform,
)
from jetstream_sync.jetstream.context import JetStream
from jetstream_sync.msg import Msg
from jetstream_sync.testing import stream_name, wait_until

CONFIG = ConsumerConfig(ack_wait=1.0, max_ack_pending=1)


class Seen:
    def __init__(self) -> None:
        self.msgs: List[Tuple[str, bytes]] = []
        self._lock = threading.Lock()

    def __call__(self, msg: Msg) -> None:
        with self._lock:
            self.msgs.append((msg.subject, msg.data))
        msg.ack_sync()


@pytest.fixture
def static_stream(js: JetStream) -> Iterator[str]:
    name = stream_name("PCGS")
    js.add_stream(
        name=name,
        subjects=[f"{name.lower()}.*"],
        subject_transform=SubjectTransform(
            src=f"{name.lower()}.*",
            dest=f"{{{{Partition(2,1)}}}}.{name.lower()}.{{{{Wildcard(1)}}}}",
        ),
    )
    yield name
    js.delete_stream(name)


@pytest.fixture
def plain_stream(js: JetStream) -> Iterator[str]:
    name = stream_name("PCGP")
    js.add_stream(name=name, subjects=[f"{name.lower()}.*"])
    yield name
    for s in (name, f"{name}-cg"):
        try:
            js.delete_stream(s)
        except errors.StreamNotFoundError:
            pass


def test_static_group_lifecycle_and_what_it_makes(js: JetStream, static_stream: str) -> None:
    s = static_stream
    cfg = pcgroups.create_static(js, s, "cg", 2, members=["m1", "m2"])
    assert pcgroups.create_static(js, s, "cg", 2, members=["m1", "m2"]) == cfg  # same: fine
    with pytest.raises(pcgroups.ConsumerGroupExistsError, match="delete it first"):
        pcgroups.create_static(js, s, "cg", 2, members=["m1"])
    assert js.key_value("static-consumer-groups").get(f"{s}.cg").value == (
        b'{"max_members":2,"members":["m1","m2"]}'
    )
    assert pcgroups.list_static(js, s) == ["cg"]
    seen = Seen()
    cc = pcgroups.static_consume(js, s, "cg", "m1", seen, CONFIG)
    # The member's durable, as orbit.go makes it.
    info = js.consumer_info(s, "cg-m1")
    assert info.config.filter_subject == "0.>" or info.config.filter_subjects == ["0.>"]
    assert info.config.priority_groups == ["PCG"]
    assert info.config.priority_policy == PriorityPolicy.PINNED_CLIENT
    assert info.config.priority_timeout == 1.0
    assert info.config.max_ack_pending == 1
    for k in range(6):
        js.publish(f"{s.lower()}.k{k}", b"x")
    wait_until(lambda: seen.msgs, 10, "a message for m1")
    assert all(subject.startswith(f"{s.lower()}.k") for subject, _ in seen.msgs)  # stripped
    wait_until(lambda: pcgroups.static_active_members(js, s, "cg") == ["m1"], 10, "m1 active")
    pcgroups.static_member_step_down(js, s, "cg", "m1")
    pcgroups.delete_static(js, s, "cg")
    assert cc.wait(10) and cc.error is None  # the group deleted: a normal end
    assert "cg-m1" not in js.consumer_names(s)
    assert pcgroups.list_static(js, s) == []


def test_a_static_member_ends_when_its_config_changes(js: JetStream, static_stream: str) -> None:
    s = static_stream
    pcgroups.create_static(js, s, "cg", 2, members=["m1", "m2"])
    cc = pcgroups.static_consume(js, s, "cg", "m1", Seen(), CONFIG)
    kv = js.key_value("static-consumer-groups")
    kv.put(f"{s}.cg", b'{"max_members":2,"members":["m1"]}')
    assert cc.wait(10)
    assert isinstance(cc.error, pcgroups.ConsumerGroupChangedError)
    cc2 = pcgroups.static_consume(js, s, "cg", "m1", Seen(), CONFIG)
    kv.put(f"{s}.cg", b"{not json")
    assert cc2.wait(10) and isinstance(cc2.error, pcgroups.ConsumerGroupConfigError)
    pcgroups.delete_static(js, s, "cg")


def test_static_refusals(js: JetStream, static_stream: str) -> None:
    s = static_stream
    with pytest.raises(pcgroups.ConsumerGroupConfigError, match="either members or member"):
        pcgroups.create_static(
            js, s, "cg", 2, members=["a"], member_mappings=[pcgroups.MemberMapping("a", [0, 1])]
        )
    with pytest.raises(pcgroups.ConsumerGroupConfigError, match="max_members"):
        pcgroups.create_static(js, s, "cg", 0, members=["a"])
    with pytest.raises(errors.InvalidArgumentError, match="group"):
        pcgroups.create_static(js, s, "c.g", 2, members=["a"])
    with pytest.raises(errors.StreamNotFoundError):
        pcgroups.create_static(js, "NOSUCH", "cg", 2, members=["a"])
    pcgroups.create_static(js, s, "cg", 2, members=["m1"])
    with pytest.raises(pcgroups.NotAMemberError, match="'m9'"):
        pcgroups.static_consume(js, s, "cg", "m9", Seen(), CONFIG)
    with pytest.raises(pcgroups.ConsumerGroupNotFoundError, match="does not exist"):
        pcgroups.static_consume(js, s, "nope", "m1", Seen(), CONFIG)
    with pytest.raises(errors.InvalidArgumentError, match="callable"):
        pcgroups.static_consume(js, s, "cg", "m1", "not a function", CONFIG)  # type: ignore[arg-type]
    pcgroups.delete_static(js, s, "cg")


def test_elastic_group_lifecycle_and_what_it_makes(js: JetStream, plain_stream: str) -> None:
    s = plain_stream
    pf = [pcgroups.PartitioningFilter(f"{s.lower()}.*", [1])]
    pcgroups.create_elastic(js, s, "cg", 2, pf)
    pcgroups.create_elastic(js, s, "cg", 2, pf)  # the same again: fine
    with pytest.raises(pcgroups.ConsumerGroupExistsError):
        pcgroups.create_elastic(js, s, "cg", 3, pf)
    info = js.stream_info(f"{s}-cg")
    assert info.config.retention == RetentionPolicy.WORK_QUEUE
    assert info.config.allow_direct is True
    source = (info.config.sources or [])[0]
    assert source.name == s
    assert [(t.src, t.dest) for t in source.subject_transforms or []] == [
        (f"{s.lower()}.*", f"{{{{Partition(2,1)}}}}.{s.lower()}.{{{{Wildcard(1)}}}}")
    ]
    assert pcgroups.list_elastic(js, s) == ["cg"]
    seen1, seen2 = Seen(), Seen()
    cc1 = pcgroups.elastic_consume(js, s, "cg", "m1", seen1, CONFIG)  # before being a member
    cc2 = pcgroups.elastic_consume(js, s, "cg", "m2", seen2, CONFIG)
    assert not cc1.consuming
    assert pcgroups.add_members(js, s, "cg", ["m1", "m2"]) == ["m1", "m2"]
    wait_until(lambda: cc1.consuming and cc2.consuming, 10, "both members consuming")
    consumer = js.consumer_info(f"{s}-cg", "m1")
    assert consumer.config.inactive_threshold == 1.0
    assert consumer.config.priority_groups == ["PCG"]
    assert consumer.config.ack_policy == AckPolicy.EXPLICIT
    for k in range(10):
        js.publish(f"{s.lower()}.k{k}", b"x")
    wait_until(lambda: len(seen1.msgs) + len(seen2.msgs) == 10, 10, "ten messages")
    assert seen1.msgs and seen2.msgs
    keys1 = {subj for subj, _ in seen1.msgs}
    assert not keys1 & {subj for subj, _ in seen2.msgs}  # each key with one member
    assert sorted(pcgroups.elastic_active_members(js, s, "cg")) == ["m1", "m2"]
    assert pcgroups.elastic_is_in_membership_and_active(js, s, "cg", "m1") == (True, True)
    # Dropped: m1 consumes nothing more, m2 everything.
    assert pcgroups.delete_members(js, s, "cg", ["m1"]) == ["m2"]
    wait_until(lambda: not cc1.consuming, 10, "m1 stopped")
    before = len(seen1.msgs)
    for k in range(10):
        js.publish(f"{s.lower()}.k{k}", b"y")
    wait_until(lambda: sum(d == b"y" for _, d in seen2.msgs) == 10, 20, "m2 has all keys")
    assert len(seen1.msgs) == before
    # Mappings instead of members, then none.
    pcgroups.set_member_mappings(js, s, "cg", [pcgroups.MemberMapping("m1", [0, 1])])
    rec = pcgroups.get_elastic_config(js, s, "cg")
    assert rec.members == [] and rec.member_mappings == [pcgroups.MemberMapping("m1", [0, 1])]
    with pytest.raises(pcgroups.ConsumerGroupError, match="mappings"):
        pcgroups.add_members(js, s, "cg", ["m3"])
    wait_until(lambda: cc1.consuming and not cc2.consuming, 20, "m1 mapped to everything")
    pcgroups.delete_member_mappings(js, s, "cg")
    assert js.key_value("elastic-consumer-groups").get(f"{s}.cg").value == (
        b'{"max_members":2,"partitioning_filters":[{"filter":"'
        + s.lower().encode()
        + b'.*","partitioning_wildcards":[1]}]}'
    )
    pcgroups.delete_elastic(js, s, "cg")
    for cc in (cc1, cc2):
        assert cc.wait(10) and cc.error is None
    assert pcgroups.list_elastic(js, s) == []


def test_an_elastic_member_ends_when_the_shape_changes(js: JetStream, plain_stream: str) -> None:
    s = plain_stream
    pcgroups.create_elastic(js, s, "cg", 2)
    cc = pcgroups.elastic_consume(js, s, "cg", "m1", Seen(), CONFIG)
    js.key_value("elastic-consumer-groups").put(
        f"{s}.cg", b'{"max_members":3,"partitioning_filters":null}'
    )
    assert cc.wait(10) and isinstance(cc.error, pcgroups.ConsumerGroupChangedError)
    pcgroups.delete_elastic(js, s, "cg")


def test_elastic_refusals(js: JetStream, plain_stream: str) -> None:
    s = plain_stream
    with pytest.raises(pcgroups.ConsumerGroupConfigError, match="wildcard"):
        pcgroups.create_elastic(js, s, "cg", 2, [pcgroups.PartitioningFilter("a.b", [])])
    with pytest.raises(pcgroups.ConsumerGroupNotFoundError):
        pcgroups.add_members(js, s, "nope", ["m1"])
    pcgroups.create_elastic(js, s, "cg", 2)
    with pytest.raises(errors.InvalidArgumentError, match="at least one"):
        pcgroups.add_members(js, s, "cg", [])
    with pytest.raises(pcgroups.ConsumerGroupConfigError, match="every partition"):
        pcgroups.set_member_mappings(js, s, "cg", [pcgroups.MemberMapping("m1", [0])])
    with pytest.raises(errors.InvalidArgumentError, match="explicit"):
        pcgroups.elastic_consume(
            js, s, "cg", "m1", Seen(), ConsumerConfig(ack_policy=AckPolicy.NONE)
        )
    # One not-found rule (issue 34): a missing group is ConsumerGroupNotFoundError.
    with pytest.raises(pcgroups.ConsumerGroupNotFoundError, match="other"):
        pcgroups.elastic_consume(js, s, "other", "m1", Seen(), CONFIG)
    pcgroups.delete_elastic(js, s, "cg")


def test_step_down_moves_the_pin_to_another_instance(js: JetStream, plain_stream: str) -> None:
    s = plain_stream
    pcgroups.create_elastic(js, s, "cg", 1)
    pcgroups.add_members(js, s, "cg", ["m1"])
    a, b = Seen(), Seen()
    cca = pcgroups.elastic_consume(js, s, "cg", "m1", a, CONFIG)
    js.publish(f"{s.lower()}.k", b"1")
    wait_until(lambda: a.msgs, 10, "the first instance pinned")
    ccb = pcgroups.elastic_consume(js, s, "cg", "m1", b, CONFIG)
    wait_until(lambda: ccb.consuming, 10, "the second instance standing by")
    pcgroups.elastic_member_step_down(js, s, "cg", "m1")
    n = 2

    def b_got_one() -> bool:
        nonlocal n
        js.publish(f"{s.lower()}.k", str(n).encode())
        n += 1
        return bool(b.msgs)

    wait_until(b_got_one, 15, "the pin moved to the second instance")
    cca.stop()
    ccb.stop()
    assert cca.wait(10) and ccb.wait(10)
    pcgroups.delete_elastic(js, s, "cg")
