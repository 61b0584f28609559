"""The JetStream API models (jetstream_sync.jetstream.api) against real server JSON.

The fixtures in data/js_api_responses.json are answers of nats-server v2.15.1 to the request
bodies in REQUESTS below. The property tests build random models from the type hints and
check that the wire form round-trips and obeys the wire rules (no nulls, ns as ints).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
import string
import sys
from datetime import datetime, timedelta, timezone
from enum import Enum
from pathlib import Path
from typing import (
    Any,
    Dict,
    List,
    Optional,
    Tuple,
    Type,
    Union,
    get_args,
    get_origin,
    get_type_hints,
)

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jetstream_sync.errors import InvalidArgumentError, JetStreamError
from jetstream_sync.jetstream import api
from jetstream_sync.jetstream.api import (
    AccountInfo,
    AckPolicy,
    Base,
    ConsumerConfig,
    ConsumerInfo,
    DeliverPolicy,
    DiscardPolicy,
    NanoDatetime,
    PeerInfo,
    PriorityPolicy,
    PubAck,
    RawStreamMsg,
    RetentionPolicy,
    StoreCompression,
    StreamConfig,
    StreamInfo,
)
from jetstream_sync.msg import Headers

UTC = timezone.utc
SETTINGS = settings(max_examples=120, deadline=None, database=None)

RESPONSES: Dict[str, Any] = json.loads(
    (Path(__file__).parent / "data" / "js_api_responses.json").read_text("utf-8")
)

# The bodies the fixtures answer (what a client sends): configs as the user wrote them.
REQUESTS: Dict[str, Tuple[Type[Base], Dict[str, Any]]] = {
    "stream_create_full": (
        StreamConfig,
        {
            "name": "ORDERS", "description": "orders", "subjects": ["orders.>"],
            "retention": "limits", "max_consumers": 10, "max_msgs": 1000, "max_bytes": 1048576,
            "max_age": 3600000000000, "max_msgs_per_subject": 100, "max_msg_size": 65536,
            "discard": "new", "discard_new_per_subject": True, "storage": "file",
            "num_replicas": 1, "duplicate_window": 60000000000, "allow_rollup_hdrs": True,
            "allow_direct": True, "deny_delete": True, "deny_purge": False,
            "republish": {"src": "orders.>", "dest": "repub.orders.>", "headers_only": True},
            "compression": "s2", "metadata": {"owner": "team-a"}, "allow_msg_ttl": True,
            "subject_delete_marker_ttl": 300000000000,
            "consumer_limits": {"inactive_threshold": 30000000000, "max_ack_pending": 500},
            "subject_transform": {"src": "orders.>", "dest": "orders.>"},
        },
    ),
    "stream_create_sources": (
        StreamConfig,
        {
            "name": "AGG", "subjects": [], "storage": "memory",
            "sources": [
                {"name": "ORDERS", "opt_start_seq": 1, "filter_subject": "orders.eu.>"},
                {"name": "MIN", "subject_transforms": [{"src": "min.>", "dest": "agg.min.>"}]},
            ],
        },
    ),
    "stream_create_mirror": (
        StreamConfig,
        {"name": "MIR",
         "mirror": {"name": "ORDERS", "opt_start_time": "2024-01-02T03:04:05.123456789Z"}},
    ),
    "consumer_create_pull": (
        ConsumerConfig,
        {
            "durable_name": "C", "description": "pull", "deliver_policy": "all",
            "ack_policy": "explicit", "ack_wait": 30000000000, "max_deliver": 5,
            "backoff": [1000000000, 5000000000, 10000000000],
            "filter_subjects": ["orders.eu.>", "orders.us.>"], "replay_policy": "instant",
            "max_waiting": 512, "max_ack_pending": 100, "max_batch": 10,
            "max_expires": 60000000000, "max_bytes": 1048576, "inactive_threshold": 20000000000,
            "num_replicas": 0, "metadata": {"k": "v"}, "priority_groups": ["g1"],
            "priority_policy": "pinned_client", "priority_timeout": 120000000000,
            "pause_until": "2099-01-02T03:04:05.123456789Z",
        },
    ),
    "consumer_create_push": (
        ConsumerConfig,
        {
            "name": "P", "deliver_subject": "push.in", "deliver_group": "",
            "deliver_policy": "by_start_sequence", "opt_start_seq": 1, "ack_policy": "all",
            "replay_policy": "original", "flow_control": True, "idle_heartbeat": 5000000000,
            "headers_only": True, "rate_limit_bps": 1000000, "sample_freq": "50%",
            "mem_storage": True, "filter_subject": "orders.eu.>",
        },
    ),
}  # fmt: skip

# fixture key -> (model, where in the answer the model's dict sits)
MODELS: Dict[str, Tuple[Type[Base], Optional[str]]] = {
    "stream_create_minimal": (StreamInfo, None),
    "stream_create_full": (StreamInfo, None),
    "stream_create_sources": (StreamInfo, None),
    "stream_create_mirror": (StreamInfo, None),
    "stream_info_subjects": (StreamInfo, None),
    "stream_info_deleted": (StreamInfo, None),
    "stream_info_r3": (StreamInfo, None),
    "consumer_create_pull": (ConsumerInfo, None),
    "consumer_create_push": (ConsumerInfo, None),
    "consumer_create_ephemeral": (ConsumerInfo, None),
    "consumer_info_r3": (ConsumerInfo, None),
    "pub_ack": (PubAck, None),
    "pub_ack_duplicate": (PubAck, None),
    "pub_ack_domain": (PubAck, None),
    "msg_get": (RawStreamMsg, "message"),
    "msg_get_no_headers": (RawStreamMsg, "message"),
    "account_info": (AccountInfo, None),
    "account_info_domain": (AccountInfo, None),
}


def real(key: str) -> Dict[str, Any]:
    _, sub = MODELS[key]
    answer: Dict[str, Any] = copy.deepcopy(RESPONSES[key])
    return answer if sub is None else answer[sub]


# --- real server JSON --------------------------------------------------------------------------


def test_every_fixture_is_checked() -> None:
    assert set(MODELS) == set(RESPONSES) - {"_about"}


@pytest.mark.parametrize("key", sorted(MODELS))
def test_real_answer_round_trips(key: str) -> None:
    cls, _ = MODELS[key]
    raw = real(key)
    back = cls.from_dict(raw).to_dict()
    # A duration past 2**52 ns (~52 days) is not exact to the ns as float seconds.
    if "pause_remaining" in raw:
        assert back.pop("pause_remaining") == pytest.approx(raw.pop("pause_remaining"), rel=1e-15)
    assert back == raw
    assert json.loads(json.dumps(back)) == back


@pytest.mark.parametrize("key", sorted(REQUESTS))
def test_config_as_sent_and_as_echoed_round_trips(key: str) -> None:
    cls, sent = REQUESTS[key]
    assert cls.from_dict(sent).to_dict() == sent
    echoed = RESPONSES[key]["config"]
    assert cls.from_dict(echoed).to_dict() == echoed
    # What the client sent comes back, but for what the server omits (empty values),
    # adds to (metadata) or overrides (ack_wait becomes backoff[0]).
    changed = {"metadata", "ack_wait"}
    assert {k: v for k, v in sent.items() if k in echoed and k not in changed} == {
        k: echoed[k] for k in sent if k in echoed and k not in changed
    }


def test_stream_info_values() -> None:
    info = StreamInfo.from_dict(real("stream_create_full"))
    cfg = info.config
    assert cfg.name == "ORDERS" and cfg.subjects == ["orders.>"]
    assert cfg.retention is RetentionPolicy.LIMITS and cfg.discard is DiscardPolicy.NEW
    assert cfg.compression is StoreCompression.S2
    assert cfg.max_age == 3600.0 and cfg.duplicate_window == 60.0
    assert cfg.subject_delete_marker_ttl == 300.0
    assert cfg.consumer_limits is not None and cfg.consumer_limits.inactive_threshold == 30.0
    assert cfg.republish is not None and cfg.republish.headers_only is True
    assert cfg.metadata is not None and cfg.metadata["owner"] == "team-a"
    assert cfg.mirror is None and cfg.sealed is False
    assert isinstance(info.created, NanoDatetime) and info.created.tzinfo is UTC
    assert info.state.first_ts == datetime(1, 1, 1, tzinfo=UTC)  # Go's zero time
    assert info.extra == {"type": "io.nats.jetstream.api.v1.stream_create_response"}
    assert info.did_create is True  # nats-py's field (it was kept in extra before)

    state = StreamInfo.from_dict(real("stream_info_deleted")).state
    assert (state.messages, state.first_seq, state.last_seq) == (3, 1, 5)
    assert state.deleted == [2, 4] and state.num_deleted == 2 and state.subjects == {"d.0": 3}

    sources = StreamInfo.from_dict(real("stream_create_sources"))
    assert sources.config.sources is not None
    transforms = sources.config.sources[1].subject_transforms
    assert transforms is not None and transforms[0].dest == "agg.min.>"
    assert sources.sources is not None and sources.sources[0].active == -1e-9  # never

    mirror = StreamInfo.from_dict(real("stream_create_mirror")).config.mirror
    assert mirror is not None and isinstance(mirror.opt_start_time, NanoDatetime)
    assert mirror.opt_start_time.nanosecond == 789


def test_cluster_info_values() -> None:
    cluster = StreamInfo.from_dict(real("stream_info_r3")).cluster
    assert cluster is not None and cluster.name == "jsync" and cluster.leader == "n1"
    assert cluster.system_account is True and cluster.raft_group is not None
    assert isinstance(cluster.leader_since, datetime)
    assert cluster.replicas is not None and len(cluster.replicas) == 2
    peer = cluster.replicas[0]
    assert isinstance(peer, PeerInfo) and peer.current and 0 < peer.active < 10
    assert peer.lag is None and peer.offline is None


def test_consumer_info_values() -> None:
    info = ConsumerInfo.from_dict(real("consumer_create_pull"))
    cfg = info.config
    assert (info.stream_name, info.name, cfg.durable_name) == ("ORDERS", "C", "C")
    assert cfg.ack_policy is AckPolicy.EXPLICIT and cfg.deliver_policy is DeliverPolicy.ALL
    assert cfg.backoff == [1.0, 5.0, 10.0] and cfg.ack_wait == 1.0
    assert cfg.max_bytes == 1048576 and cfg.max_expires == 60.0
    assert cfg.priority_policy is PriorityPolicy.PINNED_CLIENT
    assert cfg.priority_groups == ["g1"] and cfg.priority_timeout == 120.0
    assert cfg.pause_until == datetime(2099, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)
    assert info.paused is True and info.pause_remaining is not None
    assert info.pause_remaining > 2_000_000_000
    assert info.priority_groups is not None and info.priority_groups[0].group == "g1"
    assert info.delivered.stream_seq == 0 and info.num_pending == 2

    push = ConsumerInfo.from_dict(real("consumer_create_push")).config
    assert push.deliver_subject == "push.in" and push.idle_heartbeat == 5.0
    assert push.deliver_group is None  # sent as "", omitted by the server


def test_pub_ack_msg_and_account_values() -> None:
    assert PubAck.from_dict(real("pub_ack")) == PubAck(stream="ORDERS", seq=1)
    assert repr(PubAck(stream="ORDERS", seq=1)) == (  # nats-py's dataclass repr, None and all
        "PubAck(stream='ORDERS', seq=1, domain=None, duplicate=None, batch_id=None, "
        "batch_size=None, val=None)"
    )
    assert PubAck.from_dict(real("pub_ack_duplicate")).duplicate is True
    assert PubAck.from_dict(real("pub_ack_domain")).domain == "hub"

    msg = RawStreamMsg.from_dict(real("msg_get"))
    assert (msg.subject, msg.seq, msg.data) == ("orders.eu.1", 1, b"hello world")
    assert msg.headers is not None and msg.headers.get_all("X-Foo") == ["a", "b"]
    assert msg.headers["Nats-Msg-Id"] == "abc"
    assert isinstance(msg.time, datetime) and msg.stream is None
    bare = RawStreamMsg.from_dict(real("msg_get_no_headers"))
    assert bare.data == b"" and bare.headers is None

    acct = AccountInfo.from_dict(real("account_info_domain"))
    assert acct.domain == "hub" and acct.limits.max_streams == 10 and acct.api.level == 5
    assert acct.reserved_storage == 1000 and acct.tiers is None


def test_tiered_account_info() -> None:
    # Tiers need JWT accounts; this is the shape of Go's JetStreamAccountStats with tiers.
    limits = {
        "max_memory": -1, "max_storage": 1073741824, "max_streams": 10, "max_consumers": -1,
        "max_ack_pending": -1, "memory_max_stream_bytes": -1, "storage_max_stream_bytes": -1,
        "max_bytes_required": True,
    }  # fmt: skip
    raw = {
        "memory": 0, "storage": 100, "reserved_memory": 0, "reserved_storage": 0,
        "streams": 1, "consumers": 2, "limits": limits, "domain": "leaf",
        "api": {"level": 2, "total": 7, "errors": 1, "inflight": 1},
        "tiers": {
            "R1": {"memory": 0, "storage": 100, "reserved_memory": 0, "reserved_storage": 0,
                   "streams": 1, "consumers": 2, "limits": limits},
        },
    }  # fmt: skip
    info = AccountInfo.from_dict(raw)
    assert info.tiers is not None and info.tiers["R1"].limits.max_bytes_required is True
    assert info.api.inflight == 1
    assert info.to_dict() == raw


# --- unknown fields, None, renamed keys --------------------------------------------------------


def test_unknown_fields_survive_at_every_level() -> None:
    raw = real("stream_info_r3")
    raw["future_field"] = 1
    raw["config"]["future_field"] = {"nested": [1, 2]}
    raw["config"]["consumer_limits"]["future_field"] = "x"
    raw["state"]["future_field"] = None
    raw["cluster"]["replicas"][0]["future_field"] = True
    info = StreamInfo.from_dict(raw)
    assert info.extra["future_field"] == 1
    assert info.config.extra == {"future_field": {"nested": [1, 2]}}
    assert info.cluster is not None and info.cluster.replicas is not None
    assert info.cluster.replicas[0].extra == {"future_field": True}
    assert info.to_dict() == raw

    # An edited config sent as an update keeps what this client does not know.
    update = dataclasses.replace(info.config, max_msgs=10).to_dict()
    assert update["future_field"] == {"nested": [1, 2]} and update["max_msgs"] == 10
    assert update["consumer_limits"]["future_field"] == "x"

    # extra is not compared, not shown, and to_dict hands out a copy of it.
    assert info.config == dataclasses.replace(info.config, extra={})
    assert "future_field" not in repr(info.config)
    update["future_field"]["nested"].append(3)
    assert info.config.extra == {"future_field": {"nested": [1, 2]}}


def test_declared_fields_win_over_extra() -> None:
    cfg = StreamConfig(name="S", extra={"name": "OTHER", "x": 1})
    assert cfg.to_dict() == {"name": "S", "x": 1}


def test_none_is_never_sent_and_keys_can_differ_from_names() -> None:
    assert StreamConfig(name="S").to_dict() == {"name": "S"}
    assert ConsumerConfig().to_dict() == {}
    ack = PubAck(stream="S", seq=3, batch_id="b1", batch_size=2, val="10")
    assert ack.to_dict() == {"stream": "S", "seq": 3, "batch": "b1", "count": 2, "val": "10"}
    assert PubAck.from_dict(ack.to_dict()) == ack
    msg = RawStreamMsg(subject="a", seq=1, headers=Headers({"K": "v"}))
    wire = msg.to_dict()
    assert "data" not in wire and "time" not in wire and "headers" not in wire
    assert RawStreamMsg.from_dict(wire).headers == {"K": "v"}


def test_null_from_the_server() -> None:
    info = StreamInfo.from_dict({"config": None, "cluster": None, "state": {"deleted": None}})
    assert info.config == StreamConfig() and info.cluster is None
    assert info.state.deleted is None


def test_plain_values_are_accepted_where_enums_are_declared() -> None:
    cfg = ConsumerConfig(ack_policy="explicit")  # type: ignore[arg-type]
    assert cfg.to_dict() == {"ack_policy": "explicit"}


def test_from_dict_wants_a_mapping() -> None:
    with pytest.raises(TypeError, match=r"StreamConfig\.from_dict needs a mapping"):
        StreamConfig.from_dict(["name"])  # type: ignore[arg-type]


def test_repr_is_nats_py_s_dataclass_repr() -> None:
    """Issue 37: every field, None included, in nats-py's order; an enum as its text."""
    text = repr(StreamConfig(name="S", max_age=1.5, retention=RetentionPolicy.WORK_QUEUE))
    assert text.startswith(
        "StreamConfig(name='S', description=None, subjects=None, retention='workqueue', "
    )
    assert ", discard=None, discard_new_per_subject=False, max_age=1.5, " in text
    assert text.endswith(", consumer_limits=None, subject_delete_marker_ttl=None)")


def test_a_model_without_extra_or_with_an_unmappable_hint_is_refused() -> None:
    @dataclasses.dataclass
    class NoExtra(Base):
        a: Optional[int] = None

    @dataclasses.dataclass
    class Weird(Base):
        a: Union[int, str] = 0
        extra: Dict[str, Any] = dataclasses.field(default_factory=dict)

    @dataclasses.dataclass
    class NsOnInt(Base):
        a: int = dataclasses.field(default=0, metadata={"ns": True})
        extra: Dict[str, Any] = dataclasses.field(default_factory=dict)

    with pytest.raises(TypeError, match="needs an 'extra' field"):
        NoExtra.from_dict({})
    with pytest.raises(TypeError, match=r"Weird\.a: no JSON conversion"):
        Weird.from_dict({})
    with pytest.raises(TypeError, match=r"NsOnInt\.a: no JSON conversion .* with ns"):
        NsOnInt().to_dict()


# --- durations ---------------------------------------------------------------------------------


def test_durations_are_seconds_here_and_nanoseconds_there() -> None:
    assert StreamConfig.from_dict({"max_age": 3600000000000}).max_age == 3600.0
    assert StreamConfig(max_age=3600.0).to_dict() == {"max_age": 3600000000000}
    assert StreamConfig(max_age=5).to_dict() == {"max_age": 5000000000}
    cfg = ConsumerConfig.from_dict({"backoff": [1000000000, 1500000000, 100]})
    assert cfg.backoff == [1.0, 1.5, 1e-7]
    assert ConsumerConfig(backoff=[0.1, 2, 1e-9]).to_dict() == {
        "backoff": [100000000, 2000000000, 1]
    }


@pytest.mark.parametrize(
    ("seconds", "ns"),
    [(0.1, 100_000_000), (1e-9, 1), (0.3, 300_000_000), (-1e-9, -1), (0, 0),
     (315_360_000.0, 315_360_000_000_000_000), (1.0000000005, 1_000_000_001),
     (2.5e-10, 0), (-2.5e-10, 0), (9.2e9, 9_200_000_000_000_000_000)],
)  # fmt: skip
def test_duration_conversion_is_exact(seconds: float, ns: int) -> None:
    assert api._to_ns(seconds) == ns
    assert isinstance(api._to_ns(seconds), int)


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
@SETTINGS
def test_any_int64_nanoseconds_survive_float_seconds(ns: int) -> None:
    seconds = api._from_ns(ns)
    assert api._from_ns(api._to_ns(seconds)) == seconds
    if abs(ns) < 2**52:  # float seconds finer than 1 ns there
        assert api._to_ns(seconds) == ns


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_a_duration_must_be_finite(bad: float) -> None:
    with pytest.raises(InvalidArgumentError, match="duration must be a finite number"):
        StreamConfig(max_age=bad).to_dict()


# --- datetimes ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected", "nanosecond", "canonical"),
    [
        ("2024-01-02T03:04:05.123456789Z", datetime(2024, 1, 2, 3, 4, 5, 123456, UTC), 789, None),
        ("2024-01-02T03:04:05Z", datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC), 0, None),
        ("2024-01-02T03:04:05.5Z", datetime(2024, 1, 2, 3, 4, 5, 500000, UTC), 0, None),
        ("2024-01-02T03:04:05.000000001Z", datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC), 1, None),
        ("2024-01-02T03:04:05.1234567891Z", datetime(2024, 1, 2, 3, 4, 5, 123456, UTC), 789,
         "2024-01-02T03:04:05.123456789Z"),
        ("2024-01-02T04:04:05.25+01:00", datetime(2024, 1, 2, 3, 4, 5, 250000, UTC), 0,
         "2024-01-02T03:04:05.25Z"),
        ("2024-01-01T23:30:00-05:30", datetime(2024, 1, 2, 5, 0, tzinfo=UTC), 0,
         "2024-01-02T05:00:00Z"),
        ("2024-01-02t03:04:05z", datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC), 0,
         "2024-01-02T03:04:05Z"),
        ("2024-01-02T03:04:05", datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC), 0,
         "2024-01-02T03:04:05Z"),
        ("0001-01-01T00:00:00Z", datetime(1, 1, 1, tzinfo=UTC), 0, None),
    ],
)  # fmt: skip
def test_parse_and_format_time(
    text: str, expected: datetime, nanosecond: int, canonical: Optional[str]
) -> None:
    got = api.parse_time(text)
    assert got == expected and got.nanosecond == nanosecond
    assert got.utcoffset() == timedelta(0)
    assert api.format_time(got) == (canonical or text)


@pytest.mark.parametrize(
    "bad", ["", "yesterday", "2024-01-02", "2024-13-02T00:00:00Z", "2024-01-02T03:04:60Z",
            "\uff12\uff10\uff12\uff14-01-02T03:04:05Z", "2024-01-02T03:04:05ZZ"],
)  # fmt: skip
def test_bad_times_are_refused_by_value(bad: str) -> None:
    with pytest.raises(ValueError, match="not an RFC 3339 timestamp") as info:
        api.parse_time(bad)
    assert repr(bad) in str(info.value)


def test_format_time_of_python_datetimes() -> None:
    assert api.format_time(datetime(2024, 1, 2, 3, 4, 5, 10)) == "2024-01-02T03:04:05.00001Z"
    east = timezone(timedelta(hours=2))
    assert api.format_time(datetime(2024, 1, 2, 3, 4, 5, tzinfo=east)) == "2024-01-02T01:04:05Z"
    cfg = ConsumerConfig(opt_start_time=datetime(2024, 1, 2, tzinfo=east))
    assert cfg.to_dict() == {"opt_start_time": "2024-01-01T22:00:00Z"}


def test_nanoseconds_survive_copies_and_pickles() -> None:
    t = api.parse_time("2024-01-02T03:04:05.123456789Z")
    for other in (copy.copy(t), copy.deepcopy(t), pickle.loads(pickle.dumps(t))):
        assert type(other) is NanoDatetime and other == t and other.nanosecond == 789
    assert "nanosecond=789" in repr(t)
    assert t + timedelta(seconds=1) == datetime(2024, 1, 2, 3, 4, 6, 123456, UTC)


def test_an_edited_consumer_config_keeps_its_start_time_to_the_nanosecond() -> None:
    # The server refuses an update whose opt_start_time moved, even by 789 ns.
    raw = {"deliver_policy": "by_start_time", "opt_start_time": "2024-01-02T03:04:05.123456789Z"}
    cfg = dataclasses.replace(ConsumerConfig.from_dict(raw), description="d")
    assert cfg.to_dict()["opt_start_time"] == raw["opt_start_time"]


# --- enums -------------------------------------------------------------------------------------


def test_an_unknown_enum_value_is_kept() -> None:
    cfg = ConsumerConfig.from_dict({"ack_policy": "quorum", "priority_policy": "fair"})
    assert cfg.ack_policy == "quorum" and isinstance(cfg.ack_policy, AckPolicy)
    assert cfg.ack_policy.value == "quorum" and cfg.ack_policy is not AckPolicy.ALL
    assert cfg.to_dict() == {"ack_policy": "quorum", "priority_policy": "fair"}
    assert AckPolicy("explicit") is AckPolicy.EXPLICIT
    assert len(AckPolicy) == 4  # the pseudo-member is not added to the enum
    with pytest.raises(ValueError):
        AckPolicy(5)


def test_enum_values_match_the_server() -> None:
    values = {cls.__name__: {m.value for m in cls} for cls in api._ServerEnum.__subclasses__()}
    assert values == {
        "AckPolicy": {"none", "all", "explicit", "flow_control"},
        "DeliverPolicy": {"all", "last", "new", "by_start_sequence", "by_start_time",
                          "last_per_subject"},
        "ReplayPolicy": {"instant", "original"},
        "RetentionPolicy": {"limits", "interest", "workqueue"},
        "StorageType": {"file", "memory"},
        "DiscardPolicy": {"old", "new"},
        "PriorityPolicy": {"none", "overflow", "pinned_client", "prioritized"},
        "StoreCompression": {"none", "s2"},
        "PersistMode": {"default", "async"},
    }  # fmt: skip


# --- names -------------------------------------------------------------------------------------

GOOD_NAMES = ["ORDERS", "my-stream_1", "KV_bucket", "ünïcode", "a" * 255, "a:b", "$x"]
BAD_NAMES = ["", "a.b", "a*", "a>", ">", "a b", "a\tb", "a\nb", "a\rb", "a/b", "a\\b", "a\x00b",
             "\u00a0", "ab\u2028"]  # fmt: skip


@pytest.mark.parametrize("check", [api.check_stream_name, api.check_consumer_name])
@pytest.mark.parametrize("name", GOOD_NAMES)
def test_good_names(check: Any, name: str) -> None:
    assert check(name) == name


@pytest.mark.parametrize("check", [api.check_stream_name, api.check_consumer_name])
@pytest.mark.parametrize("name", BAD_NAMES)
def test_bad_names_are_refused_naming_the_value(check: Any, name: str) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        check(name)
    assert isinstance(info.value, ValueError)
    kind = "stream" if check is api.check_stream_name else "consumer"
    # nats-py's texts, which ported tests match, then what is wrong
    if name:
        assert str(info.value).startswith(f"nats: invalid {kind} name: {name!r}: it contains")
    else:
        assert str(info.value) == f"nats: {kind} name is required: it is empty"


@pytest.mark.parametrize("name", [None, 5, b"ORDERS"])
def test_names_must_be_str(name: Any) -> None:
    with pytest.raises(InvalidArgumentError, match="stream name must be a str"):
        api.check_stream_name(name)


# --- properties: random models round-trip and obey the wire rules -----------------------------

_ALL_MODELS = sorted(
    (obj for obj in vars(api).values() if isinstance(obj, type) and issubclass(obj, Base)),
    key=lambda cls: cls.__name__,
)
_ALL_MODELS.remove(Base)

_text = st.text(max_size=6)
_header_key = st.text(alphabet=string.ascii_letters + string.digits + "-_", min_size=1, max_size=6)
_header_value = st.text(alphabet=string.ascii_letters + string.digits + "-_ .", max_size=6).map(
    str.strip
)
_json_scalar = st.none() | st.booleans() | st.integers() | _text
_extras = st.dictionaries(st.text(max_size=4).map("x_future_".__add__), _json_scalar, max_size=2)


def _nano_datetimes() -> st.SearchStrategy[datetime]:
    def make(dt: datetime, nanosecond: int) -> datetime:
        return api._nano_datetime(dt, nanosecond)

    return st.builds(make, st.datetimes(timezones=st.just(UTC)), st.integers(0, 999))


def _values(tp: Any, ns: bool) -> st.SearchStrategy[Any]:
    """A strategy for one type hint of a model field."""
    origin = get_origin(tp)
    if origin is Union:
        (inner,) = [a for a in get_args(tp) if a is not type(None)]
        return st.none() | _values(inner, ns)
    if origin is list:
        return st.lists(_values(get_args(tp)[0], ns), max_size=3)
    if origin is dict:
        return st.dictionaries(_text, _values(get_args(tp)[1], ns), max_size=3)
    if ns:  # any int64 nanoseconds, as seconds
        return st.integers(-(2**63), 2**63 - 1).map(api._from_ns)
    if issubclass(tp, Base):
        return _models(tp)
    if issubclass(tp, Enum):
        return st.sampled_from(list(tp))
    if tp is datetime:
        return _nano_datetimes()
    if tp is Headers:
        return st.lists(st.tuples(_header_key, _header_value), max_size=3).map(Headers)
    simple: Dict[Any, st.SearchStrategy[Any]] = {
        str: _text,
        int: st.integers(-(2**63), 2**64 - 1),
        bool: st.booleans(),
        bytes: st.binary(max_size=8),
    }
    return simple[tp]


def _models(cls: Type[Base]) -> st.SearchStrategy[Any]:
    hints = get_type_hints(cls)
    fields = {
        f.name: _values(hints[f.name], bool(f.metadata.get("ns")))
        for f in dataclasses.fields(cls)
        if f.name != "extra"
    }
    for f in dataclasses.fields(cls):
        if f.metadata.get("omitempty"):  # a falsy value is not sent: the same as unset
            fields[f.name] = fields[f.name].map(lambda v, d=f.default: v if v else d)
    return st.builds(cls, extra=_extras, **fields)


def _check_wire(cls: Type[Base], wire: Dict[str, Any]) -> None:
    """No nulls outside extra; every duration an int; nested models checked too."""
    hints = get_type_hints(cls)
    by_key = {f.metadata.get("json", f.name): f for f in dataclasses.fields(cls)}
    for key, value in wire.items():
        f = by_key.get(key)
        if f is None:
            assert key.startswith("x_future_")
        else:
            _check_value(hints[f.name], value, bool(f.metadata.get("ns")), f"{cls.__name__}.{key}")


def _check_value(tp: Any, value: Any, ns: bool, where: str) -> None:
    assert value is not None, where
    origin = get_origin(tp)
    if origin is Union:
        (inner,) = [a for a in get_args(tp) if a is not type(None)]
        _check_value(inner, value, ns, where)
    elif origin is list:
        for item in value:
            _check_value(get_args(tp)[0], item, ns, where)
    elif origin is dict:
        for item in value.values():
            _check_value(get_args(tp)[1], item, ns, where)
    elif ns:
        assert type(value) is int, (where, value)
    elif isinstance(tp, type) and issubclass(tp, Base):
        _check_wire(tp, value)


def _assert_round_trip(cls: Type[Base], model: Base) -> None:
    wire = model.to_dict()
    _check_wire(cls, wire)
    wire = json.loads(json.dumps(wire))
    again = cls.from_dict(wire)
    assert again == model
    assert again.extra == model.extra
    assert again.to_dict() == wire  # nanoseconds and extras included


@given(_models(StreamConfig))
@SETTINGS
def test_stream_config_round_trips(cfg: StreamConfig) -> None:
    _assert_round_trip(StreamConfig, cfg)


@given(_models(ConsumerConfig))
@SETTINGS
def test_consumer_config_round_trips(cfg: ConsumerConfig) -> None:
    _assert_round_trip(ConsumerConfig, cfg)


@pytest.mark.parametrize("cls", _ALL_MODELS, ids=lambda cls: cls.__name__)
@given(data=st.data())
@settings(max_examples=10, deadline=None, database=None)
def test_every_model_round_trips(cls: Type[Base], data: st.DataObject) -> None:
    _assert_round_trip(cls, data.draw(_models(cls)))


def test_the_models_cover_the_brief() -> None:
    def names(cls: Type[Base]) -> List[str]:
        return [f.name for f in dataclasses.fields(cls)]

    assert {"subject_delete_marker_ttl", "consumer_limits", "allow_msg_ttl", "template_owner",
            "mirror_direct", "republish", "first_seq"} <= set(names(StreamConfig))  # fmt: skip
    assert {"priority_timeout", "pause_until", "max_bytes", "backoff", "filter_subjects",
            "priority_policy", "mem_storage"} <= set(names(ConsumerConfig))  # fmt: skip
    assert {"paused", "pause_remaining", "priority_groups", "ts"} <= set(names(ConsumerInfo))


@pytest.mark.skipif(sys.version_info < (3, 10), reason="X | None needs Python 3.10")
def test_pep_604_optionals_in_a_user_model() -> None:
    ns: Dict[str, Any] = {"__name__": __name__, "Base": Base, "dataclasses": dataclasses}
    exec(  # a real X | None annotation, which this file cannot write for Python 3.9
        "@dataclasses.dataclass\n"
        "class Mine(Base):\n"
        "    ttl: float | None = dataclasses.field(default=None, metadata={'ns': True})\n"
        "    extra: Dict[str, Any] = dataclasses.field(default_factory=dict)\n",
        ns,
    )
    mine: Any = ns["Mine"]
    assert mine.from_dict({"ttl": 1500000000}).ttl == 1.5
    assert mine.from_dict({"ttl": None}).to_dict() == {}


# --- nats-py's names (issue 20) ---------------------------------------------------------------


def test_nats_py_models_and_constants() -> None:
    from jetstream_sync.jetstream import kv, object_store

    assert api.ClusterInfo(traffic_account="acc").traffic_acc == "acc"
    assert api.Header.MSG_TTL == "Nats-TTL" and api.StatusCode.NO_MESSAGES == "404"
    assert api.KeyValueConfig is kv.KeyValueConfig
    assert api.ObjectStoreConfig is object_store.ObjectStoreConfig
    assert api.ObjectMeta is object_store.ObjectMeta
    with pytest.raises(AttributeError):
        api.NoSuchModel  # noqa: B018
    pause = api.ConsumerPause.from_dict(
        {"paused": True, "pause_until": "2099-01-01T00:00:00Z", "pause_remaining": 1_500_000_000}
    )
    assert pause.paused is True and pause.pause_remaining == 1.5
    assert pause.pause_until is not None and pause.pause_until.year == 2099
    assert api.StreamPurgeRequest(seq=5, filter="a.>").to_dict() == {"seq": 5, "filter": "a.>"}
    it = api.StreamsListIterator(0, 2, [{"config": {"name": "A"}}, {"config": {"name": "B"}}])
    assert [i.config.name for i in it] == ["A", "B"] and (it.offset, it.total) == (0, 2)
    reset = api.ConsumerReset.from_answer(
        {"type": "x", "stream_name": "S", "name": "c", "reset_seq": 7}
    )
    assert reset.reset_seq == 7 and reset.info.name == "c" and reset.info.extra == {}
    with pytest.raises(JetStreamError, match="reset_seq"):
        api.ConsumerReset.from_answer({"name": "c", "reset_seq": "7"})
    assert AckPolicy("flow_control") is AckPolicy.FLOW_CONTROL
