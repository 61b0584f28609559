"""Hostile tests of ``jetstream_sync.pcgroups``, written from the README's "Partitioned consumer
groups" section (now docs/guides/partitioned-groups.md) and issue 34 alone (the implementation
was not read): groups whose names share a prefix, refused and half-done calls, missing groups
and streams, ``max_members``, orbit's zero value for ``partitioning_wildcards``, several groups
on one stream, a member process SIGKILLed while it holds a message, and ``consume_backlog``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Iterator, List, Set, Tuple

import pytest

import jetstream_sync as nats
from jetstream_sync import StreamConfig, pcgroups
from jetstream_sync.jetstream.api import ConsumerConfig, SubjectTransform
from jetstream_sync.jetstream.context import JetStream
from jetstream_sync.server import NATSServer
from jetstream_sync.testing import stream_name, wait_until

REPO = Path(__file__).resolve().parents[2]
ACK_WAIT = 1.0  # every pcgroups timer follows it (README): short pins, quick redelivery
CC = ConsumerConfig(ack_wait=ACK_WAIT)
NOT_FOUND_OR_BAD = (pcgroups.ConsumerGroupNotFoundError, nats.InvalidArgumentError)


class Handled:
    """A handler that acks with ack_sync and keeps every payload it acked, in order."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.payloads: List[bytes] = []
        self.subjects: List[str] = []

    def __call__(self, msg: Any) -> None:
        msg.ack_sync()
        with self.lock:
            self.payloads.append(msg.data)
            self.subjects.append(msg.subject)

    def count(self) -> int:
        with self.lock:
            return len(self.payloads)

    def duplicates(self) -> List[bytes]:
        with self.lock:
            seen: Set[bytes] = set()
            return [p for p in self.payloads if p in seen or seen.add(p)]  # type: ignore[func-returns-value]


class Env:
    """Streams and consume contexts a test makes; all removed at the end."""

    def __init__(self, js: JetStream) -> None:
        self.js = js
        self.streams: List[str] = []
        self.ccs: List[Any] = []

    def elastic_stream(self) -> Tuple[str, str]:
        name = stream_name("PJE")
        subj = name.lower()
        self.js.add_stream(name=name, subjects=[f"{subj}.>"])
        self.streams.append(name)
        return name, subj

    def static_stream(self, partitions: int) -> Tuple[str, str]:
        """A stream whose stored subjects start with the partition number (README's static)."""
        name = stream_name("PJS")
        subj = name.lower()
        transform = SubjectTransform(
            src=f"{subj}.*", dest=f"{{{{Partition({partitions},1)}}}}.{subj}.{{{{Wildcard(1)}}}}"
        )
        self.js.add_stream(
            StreamConfig(name=name, subjects=[f"{subj}.*"], subject_transform=transform)
        )
        self.streams.append(name)
        return name, subj

    def keep(self, cc: Any) -> Any:
        self.ccs.append(cc)
        return cc

    def close(self) -> None:
        for cc in self.ccs:
            cc.stop()
        for cc in self.ccs:
            cc.wait(10)
        for s in self.streams:
            for lister, deleter in (
                (pcgroups.list_static, pcgroups.delete_static),
                (pcgroups.list_elastic, pcgroups.delete_elastic),
            ):
                try:
                    for g in lister(self.js, s):
                        try:
                            deleter(self.js, s, g)
                        except nats.NATSError:
                            pass
                except nats.NATSError:
                    pass
        for name in list(self.js.stream_names()):
            if any(name == s or name.startswith(s + "-") for s in self.streams):
                try:
                    self.js.delete_stream(name)
                except nats.NATSError:
                    pass


@pytest.fixture
def env(js: JetStream) -> Iterator[Env]:
    e = Env(js)
    try:
        yield e
    finally:
        e.close()


def publish(js: JetStream, subj: str, keys: int, start: int, n: int) -> List[bytes]:
    out = []
    for i in range(start, start + n):
        data = b"m%d" % i
        js.publish(f"{subj}.k{i % keys}", data)
        out.append(data)
    return out


def consumers(js: JetStream, stream: str) -> Set[str]:
    return set(js.consumer_names(stream))


def streams_starting(js: JetStream, prefix: str) -> Set[str]:
    return {s for s in js.stream_names() if s.startswith(prefix)}


# --------------------------------------------------------------------------------------------
# 1. groups whose names share a prefix, one stream


PREFIXED = ["g", "g-x", "g-x-1"]


def test_static_delete_of_a_prefix_leaves_other_groups_and_running_member(env: Env) -> None:
    js = env.js
    s, subj = env.static_stream(2)
    for g in PREFIXED:
        pcgroups.create_static(js, s, g, 2, members=["m1", "m2"])
    handled = {g: Handled() for g in PREFIXED}
    for g in PREFIXED:
        for m in ("m1", "m2"):
            env.keep(pcgroups.static_consume(js, s, g, m, handled[g], CC))
    first = publish(js, subj, 8, 0, 40)
    for g in PREFIXED:
        wait_until(lambda g=g: handled[g].count() >= len(first), 20, f"{g} handled the first 40")
    before = consumers(js, s)
    gx_before = {c for c in before if c.startswith("g-x")}
    assert {"g-x-m1", "g-x-m2", "g-x-1-m1", "g-x-1-m2"} <= gx_before, before
    records_before = {g: pcgroups.get_static_config(js, s, g) for g in ("g-x", "g-x-1")}

    pcgroups.delete_static(js, s, "g")

    problems: List[str] = []
    after = consumers(js, s)
    if after != before - {"g-m1", "g-m2"}:
        problems.append(f"consumers before {sorted(before)}, after {sorted(after)}")
    assert sorted(pcgroups.list_static(js, s)) == ["g-x", "g-x-1"]
    for g in ("g-x", "g-x-1"):
        assert pcgroups.get_static_config(js, s, g) == records_before[g]
    with pytest.raises(pcgroups.ConsumerGroupNotFoundError):
        pcgroups.get_static_config(js, s, "g")

    # The running members of g-x and g-x-1 go on with the next messages, and nothing they
    # acked is handled again.
    more = publish(js, subj, 8, 40, 20)
    for g in ("g-x", "g-x-1"):
        wait_until(lambda g=g: handled[g].count() >= 60, 20, f"{g} handled all 60")
        if handled[g].duplicates():
            problems.append(f"{g} handled again: {len(handled[g].duplicates())} messages")
        if sorted(set(handled[g].payloads)) != sorted(first + more):
            problems.append(f"{g} did not handle exactly the 60 sent")

    # A second delete of g, now missing, is not-found and still touches nothing.
    now = consumers(js, s)
    _expect(
        problems,
        "second delete_static of g",
        lambda: pcgroups.delete_static(js, s, "g"),
        pcgroups.ConsumerGroupNotFoundError,
    )
    if consumers(js, s) != now:
        problems.append(f"the second delete removed {now - consumers(js, s)}")
    assert problems == [], "\n".join(problems)


def test_elastic_delete_of_a_prefix_leaves_other_groups_and_running_member(env: Env) -> None:
    js = env.js
    s, subj = env.elastic_stream()
    for g in PREFIXED:
        pcgroups.create_elastic(js, s, g, 2, [pcgroups.PartitioningFilter(f"{subj}.*", [1])])
        pcgroups.add_members(js, s, g, ["m1", "m2"])
    handled = {g: Handled() for g in PREFIXED}
    for g in PREFIXED:
        for m in ("m1", "m2"):
            env.keep(pcgroups.elastic_consume(js, s, g, m, handled[g], CC))
    first = publish(js, subj, 8, 0, 40)
    for g in PREFIXED:
        wait_until(lambda g=g: handled[g].count() >= len(first), 30, f"{g} handled the first 40")
    wait_until(
        lambda: all(len(consumers(js, f"{s}-{g}")) == 2 for g in PREFIXED), 20, "two consumers each"
    )
    kept = {g: consumers(js, f"{s}-{g}") for g in ("g-x", "g-x-1")}
    records_before = {g: pcgroups.get_elastic_config(js, s, g) for g in ("g-x", "g-x-1")}

    pcgroups.delete_elastic(js, s, "g")

    assert streams_starting(js, s) == {s, f"{s}-g-x", f"{s}-g-x-1"}
    assert sorted(pcgroups.list_elastic(js, s)) == ["g-x", "g-x-1"]
    for g in ("g-x", "g-x-1"):
        assert consumers(js, f"{s}-{g}") == kept[g], g
        assert pcgroups.get_elastic_config(js, s, g) == records_before[g]

    more = publish(js, subj, 8, 40, 20)
    for g in ("g-x", "g-x-1"):
        wait_until(lambda g=g: handled[g].count() >= 60, 30, f"{g} handled all 60")
        assert handled[g].duplicates() == [], g
        assert sorted(handled[g].payloads) == sorted(first + more), g

    # A second delete of g, now missing, is not-found and still touches nothing.
    with pytest.raises(pcgroups.ConsumerGroupNotFoundError):
        pcgroups.delete_elastic(js, s, "g")
    assert streams_starting(js, s) == {s, f"{s}-g-x", f"{s}-g-x-1"}


def test_static_durable_names_of_two_groups_do_not_collide(env: Env) -> None:
    """Group g with member x-m1 and group g-x with member m1 would both own a durable named
    g-x-m1 (README: a static member's durable is <group>-<member>). Not named by the issue:
    either the second create is refused, naming the clash, or both groups see every
    message."""
    js = env.js
    s, subj = env.static_stream(1)
    pcgroups.create_static(js, s, "g", 1, members=["x-m1"])
    try:
        pcgroups.create_static(js, s, "g-x", 1, members=["m1"])
    except (pcgroups.ConsumerGroupError, nats.InvalidArgumentError) as e:
        assert "g-x-m1" in str(e), str(e)
        assert pcgroups.list_static(js, s) == ["g"]
        return
    a, b = Handled(), Handled()
    env.keep(pcgroups.static_consume(js, s, "g", "x-m1", a, CC))
    env.keep(pcgroups.static_consume(js, s, "g-x", "m1", b, CC))
    sent = publish(js, subj, 2, 0, 10)
    wait_until(lambda: a.count() + b.count() >= 10, 20, "10 handled")
    wait_until(
        lambda: a.count() >= 10 and b.count() >= 10,
        10,
        f"each group handled all 10 (g: {a.count()}, g-x: {b.count()}: they share one durable)",
    )
    assert sorted(a.payloads) == sorted(b.payloads) == sorted(sent)


def test_elastic_work_queue_stream_names_do_not_collide(env: Env) -> None:
    """Stream S with group x-y and stream S-x with group y would both own the work-queue
    stream S-x-y (README: <stream>-<group>). Not named by the issue: the second create must
    be refused, naming the clash, and the first group left as it was."""
    js = env.js
    s, subj = env.elastic_stream()
    pcgroups.create_elastic(js, s, "x-y", 2, [pcgroups.PartitioningFilter(f"{subj}.*", [1])])
    pcgroups.add_members(js, s, "x-y", ["m1"])
    other = f"{s}-x"
    js.add_stream(name=other, subjects=[f"{subj}x.>"])
    env.streams.append(other)
    before = js.stream_info(f"{s}-x-y").config
    with pytest.raises((pcgroups.ConsumerGroupError, nats.InvalidArgumentError, nats.APIError)):
        pcgroups.create_elastic(js, other, "y", 2, [pcgroups.PartitioningFilter(f"{subj}x.*", [1])])
    assert js.stream_info(f"{s}-x-y").config == before
    h = Handled()
    env.keep(pcgroups.elastic_consume(js, s, "x-y", "m1", h, CC))
    publish(js, subj, 2, 0, 6)
    wait_until(lambda: h.count() >= 6, 20, "x-y still handles its stream")
    assert pcgroups.list_elastic(js, other) == [], "the refused create left its record"


# --------------------------------------------------------------------------------------------
# 2. refused creates leave nothing behind


def _elastic_refusals(subj: str) -> List[Tuple[str, Callable[[JetStream, str, str], Any]]]:
    pf = pcgroups.PartitioningFilter
    return [
        (
            "bad..* filter",
            lambda js, s, g: pcgroups.create_elastic(js, s, g, 4, [pf("bad..*", [1])]),
        ),
        (
            "wildcard 2 of 1",
            lambda js, s, g: pcgroups.create_elastic(js, s, g, 4, [pf(f"{subj}.*", [2])]),
        ),
        (
            "wildcard 0",
            lambda js, s, g: pcgroups.create_elastic(js, s, g, 4, [pf(f"{subj}.*", [0])]),
        ),
        (
            "zero partitions",
            lambda js, s, g: pcgroups.create_elastic(js, s, g, 0, [pf(f"{subj}.*", [1])]),
        ),
        (
            "negative partitions",
            lambda js, s, g: pcgroups.create_elastic(js, s, g, -1, [pf(f"{subj}.*", [1])]),
        ),
    ]


def _expect(problems: List[str], what: str, call: Callable[[], Any], kind: type) -> None:
    """Record (instead of stopping at) a call that does not raise ``kind`` naming the group."""
    try:
        got = call()
    except kind as e:
        if kind is pcgroups.ConsumerGroupNotFoundError and "g" not in str(e):
            problems.append(f"{what}: message does not name the group: {e}")
        return
    except Exception as e:  # any other kind is what this reports
        problems.append(f"{what}: {type(e).__name__}: {e}")
        return
    if hasattr(got, "stop"):
        got.stop()
        got.wait(5)
    problems.append(f"{what}: returned {got!r}")


def _refused_then_made_right(
    env: Env, kind: str, s: str, subj: str, bad: Callable[[JetStream, str, str], Any]
) -> List[str]:
    """Every way a refused create can have left something behind, each one reported."""
    js = env.js
    problems: List[str] = []
    listing = pcgroups.list_elastic if kind == "elastic" else pcgroups.list_static
    get = pcgroups.get_elastic_config if kind == "elastic" else pcgroups.get_static_config
    consume = pcgroups.elastic_consume if kind == "elastic" else pcgroups.static_consume
    before_streams, before_consumers = streams_starting(js, s), consumers(js, s)
    try:
        got = bad(js, s, "g")
        problems.append(f"the bad create was accepted: {got!r}")
    except nats.NATSError as e:
        print(f"refused: {type(e).__name__}: {e}")
    if "g" in listing(js, s):
        problems.append("listed after the refusal")
    _expect(problems, "get config", lambda: get(js, s, "g"), pcgroups.ConsumerGroupNotFoundError)
    _expect(
        problems,
        "consume",
        lambda: consume(js, s, "g", "m1", Handled(), CC),
        pcgroups.ConsumerGroupNotFoundError,
    )
    if streams_starting(js, s) != before_streams:
        problems.append(f"streams left: {streams_starting(js, s) - before_streams}")
    if consumers(js, s) != before_consumers:
        problems.append(f"consumers left: {consumers(js, s) - before_consumers}")
    # And the same group made right works, and consumes.
    try:
        if kind == "elastic":
            pf = pcgroups.PartitioningFilter(f"{subj}.*", [1])
            pcgroups.create_elastic(js, s, "g", 2, [pf])
            pcgroups.add_members(js, s, "g", ["m1"])
        else:
            pcgroups.create_static(js, s, "g", 2, members=["m1"])
    except nats.NATSError as e:
        problems.append(f"creating it right afterwards: {type(e).__name__}: {e}")
        return problems
    h = Handled()
    env.keep(consume(js, s, "g", "m1", h, CC))
    publish(js, subj, 4, 0, 8)
    wait_until(lambda: h.count() == 8, 20, "the good group handled 8")
    return problems


@pytest.mark.parametrize("case", [c for c, _ in _elastic_refusals("x")])
def test_refused_elastic_create_leaves_nothing(env: Env, case: str) -> None:
    s, subj = env.elastic_stream()
    bad = dict(_elastic_refusals(subj))[case]
    problems = _refused_then_made_right(env, "elastic", s, subj, bad)
    assert problems == [], "\n".join(problems)


def _static_refusals() -> List[Tuple[str, Callable[[JetStream, str, str], Any]]]:
    return [
        ("bad..* filter", lambda js, s, g: pcgroups.create_static(js, s, g, 2, ["bad..*"], ["m1"])),
        ("zero partitions", lambda js, s, g: pcgroups.create_static(js, s, g, 0, members=["m1"])),
        (
            "negative partitions",
            lambda js, s, g: pcgroups.create_static(js, s, g, -2, members=["m1"]),
        ),
        (
            "members beyond max",
            lambda js, s, g: pcgroups.create_static(js, s, g, 2, members=["a", "b", "c"]),
        ),
        (
            "member with a dot",
            lambda js, s, g: pcgroups.create_static(js, s, g, 2, members=["a.b"]),
        ),
    ]


@pytest.mark.parametrize("case", [c for c, _ in _static_refusals()])
def test_refused_static_create_leaves_nothing(env: Env, case: str) -> None:
    s, subj = env.static_stream(2)
    bad = dict(_static_refusals())[case]
    problems = _refused_then_made_right(env, "static", s, subj, bad)
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize("group", ["g.x", "g x", "", "g*", "g>"])
def test_bad_group_names_refused_before_anything_is_written(env: Env, group: str) -> None:
    js = env.js
    s, subj = env.elastic_stream()
    with pytest.raises(nats.InvalidArgumentError):
        pcgroups.create_elastic(js, s, group, 2, [pcgroups.PartitioningFilter(f"{subj}.*", [1])])
    assert pcgroups.list_elastic(js, s) == []
    assert streams_starting(js, s) == {s}
    s2, _ = env.static_stream(2)
    with pytest.raises(nats.InvalidArgumentError):
        pcgroups.create_static(js, s2, group, 2, members=["m1"])
    assert pcgroups.list_static(js, s2) == []
    assert consumers(js, s2) == set()


@pytest.mark.parametrize("member", ["a.b", "", "a*", "a>", "a b"])
def test_bad_member_names_refused_and_membership_unchanged(env: Env, member: str) -> None:
    js = env.js
    s, subj = env.elastic_stream()
    pcgroups.create_elastic(js, s, "g", 3, [pcgroups.PartitioningFilter(f"{subj}.*", [1])])
    pcgroups.add_members(js, s, "g", ["m1"])
    with pytest.raises(nats.InvalidArgumentError):
        pcgroups.add_members(js, s, "g", ["m2", member])
    assert pcgroups.get_elastic_config(js, s, "g").members == ["m1"]
    with pytest.raises(nats.InvalidArgumentError):
        pcgroups.elastic_consume(js, s, "g", member, Handled(), CC)
    assert consumers(js, f"{s}-g") == set()


@pytest.mark.parametrize(
    "mappings",
    [
        [("m1", [0, 1]), ("m2", [1, 2])],  # partition 1 twice
        [("m1", [0]), ("m2", [1])],  # partition 2 unmapped
        [("m1", [0, 1, 2, 3])],  # partition 3 does not exist
        [("m1", [0, 1]), ("m1", [2])],  # a member twice
    ],
)
def test_bad_member_mappings_refused_and_record_unchanged(
    env: Env, mappings: List[Tuple[str, List[int]]]
) -> None:
    js = env.js
    s, subj = env.elastic_stream()
    pcgroups.create_elastic(js, s, "g", 3, [pcgroups.PartitioningFilter(f"{subj}.*", [1])])
    pcgroups.add_members(js, s, "g", ["m1", "m2"])
    before = pcgroups.get_elastic_config(js, s, "g")
    with pytest.raises((pcgroups.ConsumerGroupConfigError, nats.InvalidArgumentError)):
        pcgroups.set_member_mappings(
            js, s, "g", [pcgroups.MemberMapping(m, ps) for m, ps in mappings]
        )
    assert pcgroups.get_elastic_config(js, s, "g") == before


# --------------------------------------------------------------------------------------------
# 3. missing groups: one rule, ConsumerGroupNotFoundError naming stream and group


def _missing_calls() -> List[Tuple[str, Callable[[JetStream, str, str], Any]]]:
    h = Handled()
    return [
        ("static_consume", lambda js, s, g: pcgroups.static_consume(js, s, g, "m1", h, CC)),
        ("elastic_consume", lambda js, s, g: pcgroups.elastic_consume(js, s, g, "m1", h, CC)),
        ("delete_static", lambda js, s, g: pcgroups.delete_static(js, s, g)),
        ("delete_elastic", lambda js, s, g: pcgroups.delete_elastic(js, s, g)),
        ("get_static_config", lambda js, s, g: pcgroups.get_static_config(js, s, g)),
        ("get_elastic_config", lambda js, s, g: pcgroups.get_elastic_config(js, s, g)),
        ("add_members", lambda js, s, g: pcgroups.add_members(js, s, g, ["m1"])),
        ("delete_members", lambda js, s, g: pcgroups.delete_members(js, s, g, ["m1"])),
        (
            "set_member_mappings",
            lambda js, s, g: pcgroups.set_member_mappings(
                js, s, g, [pcgroups.MemberMapping("m1", [0, 1])]
            ),
        ),
        ("delete_member_mappings", lambda js, s, g: pcgroups.delete_member_mappings(js, s, g)),
        ("static_active_members", lambda js, s, g: pcgroups.static_active_members(js, s, g)),
        ("elastic_active_members", lambda js, s, g: pcgroups.elastic_active_members(js, s, g)),
        (
            "static_member_step_down",
            lambda js, s, g: pcgroups.static_member_step_down(js, s, g, "m1"),
        ),
        (
            "elastic_member_step_down",
            lambda js, s, g: pcgroups.elastic_member_step_down(js, s, g, "m1"),
        ),
    ]


def _not_found_everywhere(js: JetStream, stream: str, group: str) -> List[str]:
    wrong = []
    for name, call in _missing_calls():
        try:
            got = call(js, stream, group)
        except pcgroups.ConsumerGroupNotFoundError as e:
            if stream not in str(e) or group not in str(e):
                wrong.append(f"{name}: message does not name {stream}/{group}: {e}")
        except Exception as e:  # any other kind is what this reports
            wrong.append(f"{name}: {type(e).__name__}: {e}")
        else:
            if hasattr(got, "stop"):
                got.stop()
                got.wait(5)
            wrong.append(f"{name}: returned {got!r}")
    return wrong


def test_missing_group_with_buckets_present(env: Env) -> None:
    js = env.js
    s, subj = env.elastic_stream()
    # Both buckets exist, with groups whose names share the missing one's prefix.
    pcgroups.create_elastic(js, s, "grp-x", 2, [pcgroups.PartitioningFilter(f"{subj}.*", [1])])
    s2, _ = env.static_stream(2)
    pcgroups.create_static(js, s2, "grp-x", 2, members=["m1"])
    for stream in (s, s2):
        wrong = _not_found_everywhere(js, stream, "grp")
        assert wrong == [], "\n".join(wrong)
    assert pcgroups.list_elastic(js, s) == ["grp-x"]
    assert pcgroups.list_static(js, s2) == ["grp-x"]
    assert streams_starting(js, s) == {s, f"{s}-grp-x"}


def test_missing_group_without_buckets() -> None:
    with NATSServer(jetstream=True) as srv, nats.connect(srv.url) as nc:
        js = nc.jetstream()
        js.add_stream(name="ORDERS", subjects=["orders.>"])
        wrong = _not_found_everywhere(js, "ORDERS", "nosuch")
        assert wrong == [], "\n".join(wrong)
        # list on no bucket is an empty list, not an error
        assert pcgroups.list_elastic(js, "ORDERS") == []
        assert pcgroups.list_static(js, "ORDERS") == []


def test_missing_stream(env: Env) -> None:
    js = env.js
    env.elastic_stream()  # the buckets may exist; the stream asked for does not
    missing = stream_name("NOSUCH")
    wrong = _not_found_everywhere(js, missing, "g")
    assert wrong == [], "\n".join(wrong)
    with pytest.raises(nats.NATSError):
        pcgroups.create_elastic(js, missing, "g", 2, [pcgroups.PartitioningFilter("ns.*", [1])])
    with pytest.raises(nats.NATSError):
        pcgroups.create_static(js, missing, "g", 2, members=["m1"])
    assert pcgroups.list_elastic(js, missing) == []
    assert pcgroups.list_static(js, missing) == []
    assert streams_starting(js, missing) == set()


# --------------------------------------------------------------------------------------------
# 4. max_members


def test_add_members_beyond_max_members_refused(env: Env) -> None:
    js = env.js
    s, subj = env.elastic_stream()
    pcgroups.create_elastic(js, s, "g", 2, [pcgroups.PartitioningFilter(f"{subj}.*", [1])])
    with pytest.raises((pcgroups.ConsumerGroupConfigError, nats.InvalidArgumentError)) as e:
        pcgroups.add_members(js, s, "g", ["a", "b", "c"])
    assert "max_members" in str(e.value) or "2" in str(e.value), str(e.value)
    assert pcgroups.get_elastic_config(js, s, "g").members == []
    assert sorted(pcgroups.add_members(js, s, "g", ["a", "b"])) == ["a", "b"]
    with pytest.raises((pcgroups.ConsumerGroupConfigError, nats.InvalidArgumentError)):
        pcgroups.add_members(js, s, "g", ["c"])
    assert sorted(pcgroups.get_elastic_config(js, s, "g").members) == ["a", "b"]
    # re-adding a member already there is not "more members"
    pcgroups.add_members(js, s, "g", ["a"])
    assert sorted(pcgroups.get_elastic_config(js, s, "g").members) == ["a", "b"]


def test_create_static_with_too_many_members_refused_clearly(env: Env) -> None:
    js = env.js
    s, _ = env.static_stream(2)
    with pytest.raises((pcgroups.ConsumerGroupConfigError, nats.InvalidArgumentError)) as e:
        pcgroups.create_static(js, s, "g", 2, members=["a", "b", "c"])
    assert "max_members" in str(e.value) or "2" in str(e.value), str(e.value)
    assert pcgroups.list_static(js, s) == []


def test_record_written_elsewhere_with_more_members_is_still_read(env: Env) -> None:
    """Issue 34, item 4: a record another tool wrote with more members than max_members is
    read, as orbit reads it."""
    js = env.js
    s, _ = env.static_stream(2)
    pcgroups.create_static(js, s, "g", 2, members=["a", "b"])
    kv = js.key_value(pcgroups.STATIC_BUCKET)
    raw = json.loads(kv.get(f"{s}.g").value)
    raw["members"] = ["a", "b", "c"]
    kv.put(f"{s}.g", json.dumps(raw).encode())
    assert pcgroups.get_static_config(js, s, "g").members == ["a", "b", "c"]
    assert "g" in pcgroups.list_static(js, s)


# --------------------------------------------------------------------------------------------
# 5. orbit's zero value for partitioning_wildcards


def test_partitioning_filter_default_is_orbits_null(env: Env) -> None:
    js = env.js
    s, subj = env.elastic_stream()
    pf = pcgroups.PartitioningFilter(f"{subj}.>")
    pcgroups.create_elastic(js, s, "g", 2, [pf])
    raw = json.loads(js.key_value(pcgroups.ELASTIC_BUCKET).get(f"{s}.g").value)
    assert raw["partitioning_filters"][0]["partitioning_wildcards"] is None, raw
    # create if absent with the same-looking config is accepted
    again = pcgroups.create_elastic(js, s, "g", 2, [pcgroups.PartitioningFilter(f"{subj}.>")])
    assert again.max_members == 2
    # as is a record Go wrote with null
    kv = js.key_value(pcgroups.ELASTIC_BUCKET)
    go_record = {
        "max_members": 2,
        "partitioning_filters": [{"filter": f"{subj}.>", "partitioning_wildcards": None}],
    }
    kv.put(f"{s}.go", json.dumps(go_record).encode())
    cfg = pcgroups.get_elastic_config(js, s, "go")
    assert cfg.partitioning_filters is not None
    assert cfg.partitioning_filters[0].partitioning_wildcards in (None, [])
    # and Python's create-if-absent of the same-looking config accepts Go's record
    pcgroups.create_elastic(js, s, "go", 2, [pcgroups.PartitioningFilter(f"{subj}.>")])


# --------------------------------------------------------------------------------------------
# 6. several groups of a kind on one stream


def test_several_elastic_groups_each_see_every_message(env: Env) -> None:
    js = env.js
    s, subj = env.elastic_stream()
    groups = ["a", "b", "c"]
    handled = {g: Handled() for g in groups}
    for g in groups:
        pcgroups.create_elastic(js, s, g, 3, [pcgroups.PartitioningFilter(f"{subj}.*", [1])])
        pcgroups.add_members(js, s, g, ["m1", "m2"])
        for m in ("m1", "m2"):
            env.keep(pcgroups.elastic_consume(js, s, g, m, handled[g], CC))
    sent = publish(js, subj, 6, 0, 30)
    for g in groups:
        wait_until(lambda g=g: handled[g].count() >= 30, 30, f"{g} handled 30")
        assert sorted(handled[g].payloads) == sorted(sent), g
    assert sorted(pcgroups.list_elastic(js, s)) == groups


def test_several_static_groups_each_see_every_message(env: Env) -> None:
    js = env.js
    s, subj = env.static_stream(3)
    groups = ["a", "b", "c"]
    handled = {g: Handled() for g in groups}
    for g in groups:
        pcgroups.create_static(js, s, g, 3, members=["m1", "m2"])
        for m in ("m1", "m2"):
            env.keep(pcgroups.static_consume(js, s, g, m, handled[g], CC))
    sent = publish(js, subj, 6, 0, 30)
    for g in groups:
        wait_until(lambda g=g: handled[g].count() >= 30, 30, f"{g} handled 30")
        assert sorted(handled[g].payloads) == sorted(sent), g
    assert sorted(pcgroups.list_static(js, s)) == groups


# --------------------------------------------------------------------------------------------
# 7. a member process SIGKILLed while it holds a message

HOLDER = r"""
import sys, threading
import jetstream_sync as nats
from jetstream_sync import pcgroups
from jetstream_sync.jetstream.api import ConsumerConfig
url, kind, stream, group, member = sys.argv[1:6]
nc = nats.connect(url)
js = nc.jetstream()
def hold(msg):
    sys.stdout.write("holding " + msg.data.decode() + "\n")  # one write: one whole line
    sys.stdout.flush()
    threading.Event().wait()  # never acks: killed while holding it
consume = pcgroups.elastic_consume if kind == "elastic" else pcgroups.static_consume
cc = consume(js, stream, group, member, hold, ConsumerConfig(ack_wait=1.0, max_ack_pending=1))
cc.wait()
"""


def _run_holder(url: str, kind: str, stream: str, group: str, member: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", HOLDER, url, kind, stream, group, member],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},  # this worktree's package
    )


def _read_line(proc: subprocess.Popen, prefix: str, timeout: float) -> str:
    got: List[str] = []

    def reader() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith(prefix):
                got.append(line.strip())
                return

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    t.join(timeout)
    assert got, f"the member process did not say {prefix!r} within {timeout} s"
    return got[0]


@pytest.mark.parametrize("standby", [False, True], ids=["started-after", "standing-by"])
@pytest.mark.parametrize("kind", ["elastic", "static"])
def test_member_process_killed_holding_a_message(
    env: Env, nats_server: NATSServer, kind: str, standby: bool
) -> None:
    """The pinned instance of m1, a process of its own, is SIGKILLed while it holds a message
    (never acked). Another instance of m1 (already standing by, or started afterwards) gets
    every message, the held one included, each key in order."""
    js = env.js
    if kind == "elastic":
        s, subj = env.elastic_stream()
        pcgroups.create_elastic(js, s, "g", 1, [pcgroups.PartitioningFilter(f"{subj}.*", [1])])
        pcgroups.add_members(js, s, "g", ["m1"])
    else:
        s, subj = env.static_stream(1)
        pcgroups.create_static(js, s, "g", 1, members=["m1"])
    h = Handled()
    consume = pcgroups.elastic_consume if kind == "elastic" else pcgroups.static_consume
    one_at_a_time = ConsumerConfig(ack_wait=ACK_WAIT, max_ack_pending=1)
    proc = _run_holder(nats_server.url, kind, s, "g", "m1")
    try:
        sent = publish(js, subj, 3, 0, 10)
        held = _read_line(proc, "holding", 30).split()[1].encode()
        if standby:
            env.keep(consume(js, s, "g", "m1", h, one_at_a_time))
            assert h.count() == 0  # the process holds the pin
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()
    if not standby:
        env.keep(consume(js, s, "g", "m1", h, one_at_a_time))
    wait_until(lambda: h.count() >= len(sent), 30, "the new instance handled all 10")
    assert held in h.payloads
    assert sorted(h.payloads) == sorted(sent)
    for k in range(3):
        of_key = [int(p[1:]) for p, sj in zip(h.payloads, h.subjects) if sj.endswith(f".k{k}")]
        assert of_key == sorted(of_key), (k, of_key)


def test_elastic_member_killed_its_partitions_move_to_another_member(
    env: Env, nats_server: NATSServer
) -> None:
    js = env.js
    s, subj = env.elastic_stream()
    pcgroups.create_elastic(js, s, "g", 2, [pcgroups.PartitioningFilter(f"{subj}.*", [1])])
    pcgroups.add_members(js, s, "g", ["m1"])
    proc = _run_holder(nats_server.url, "elastic", s, "g", "m1")
    try:
        sent = publish(js, subj, 4, 0, 12)
        held = _read_line(proc, "holding", 30).split()[1].encode()
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()
    pcgroups.add_members(js, s, "g", ["m2"])
    pcgroups.delete_members(js, s, "g", ["m1"])
    h = Handled()
    env.keep(pcgroups.elastic_consume(js, s, "g", "m2", h, CC))
    wait_until(lambda: h.count() >= len(sent), 30, "m2 handled all 12")
    assert held in h.payloads
    assert sorted(h.payloads) == sorted(sent)


# --------------------------------------------------------------------------------------------
# 8. consume_backlog (issue 34, item 7)


def _backlog_group(env: Env, n: int) -> Tuple[str, List[bytes]]:
    js = env.js
    s, subj = env.elastic_stream()
    pcgroups.create_elastic(js, s, "g", 2, [pcgroups.PartitioningFilter(f"{subj}.*", [1])])
    pcgroups.add_members(js, s, "g", ["t0"])
    sent = publish(js, subj, 5, 0, n)
    wait_until(
        lambda: js.stream_info(f"{s}-g").state.messages == n, 20, "the group's stream sourced all"
    )
    return s, sent


def _count(result: Any) -> int:
    return result if isinstance(result, int) else len(result)


def test_consume_backlog_handles_all_and_leaves_nothing(env: Env) -> None:
    js = env.js
    s, sent = _backlog_group(env, 20)
    h = Handled()
    got = pcgroups.consume_backlog(js, s, "g", "t0", h, CC, timeout=30)
    assert _count(got) == 20
    assert sorted(h.payloads) == sorted(sent)
    assert consumers(js, f"{s}-g") == set()
    again = Handled()
    assert _count(pcgroups.consume_backlog(js, s, "g", "t0", again, CC, timeout=30)) == 0
    assert again.payloads == []
    assert consumers(js, f"{s}-g") == set()


def test_consume_backlog_cb_raises(env: Env) -> None:
    js = env.js
    s, sent = _backlog_group(env, 6)

    class Boom(Exception):
        pass

    seen: List[bytes] = []

    def bad(msg: Any) -> None:
        seen.append(msg.data)
        if len(seen) == 3:
            raise Boom("the third message")
        msg.ack_sync()

    with pytest.raises(Exception) as e:
        pcgroups.consume_backlog(js, s, "g", "t0", bad, CC, timeout=30)
    assert isinstance(e.value, Boom) or isinstance(e.value.__cause__, Boom), repr(e.value)
    assert consumers(js, f"{s}-g") == set()
    # the one that raised was not acked: the next call handles it, nothing lost
    h = Handled()
    pcgroups.consume_backlog(js, s, "g", "t0", h, CC, timeout=30)
    assert seen[2] in h.payloads
    assert sorted(set(seen[:2]) | set(h.payloads)) == sorted(sent)
    assert consumers(js, f"{s}-g") == set()


def test_consume_backlog_timeout(env: Env) -> None:
    js = env.js
    s, sent = _backlog_group(env, 4)
    release = threading.Event()

    def stuck(msg: Any) -> None:
        release.wait(20)

    try:
        with pytest.raises(nats.TimeoutError):
            pcgroups.consume_backlog(js, s, "g", "t0", stuck, CC, timeout=2.0)
    finally:
        release.set()
    wait_until(lambda: consumers(js, f"{s}-g") == set(), 10, "no consumer left after a timeout")
    h = Handled()
    assert _count(pcgroups.consume_backlog(js, s, "g", "t0", h, CC, timeout=30)) == 4
    assert sorted(h.payloads) == sorted(sent)


def test_consume_backlog_not_a_member_and_missing_group(env: Env) -> None:
    js = env.js
    s, _ = _backlog_group(env, 2)
    with pytest.raises(pcgroups.NotAMemberError):
        pcgroups.consume_backlog(js, s, "g", "stranger", Handled(), CC, timeout=10)
    with pytest.raises(pcgroups.ConsumerGroupNotFoundError) as e:
        pcgroups.consume_backlog(js, s, "nosuch", "t0", Handled(), CC, timeout=10)
    assert s in str(e.value) and "nosuch" in str(e.value)
    assert consumers(js, f"{s}-g") == set()
