"""nats-py's methods of the API models (``from_response``, ``as_dict``, ``evolve``) and the
model behaviours nats-py's ported tests hold us to: bools read back False, a zero
``subject_delete_marker_ttl`` not sent, compression and metadata refused before sending,
``ts`` not compared, RFC 3339 text in datetime fields, ``ConsumerPause`` answers. No server."""

from __future__ import annotations

import base64
from datetime import datetime, timedelta, timezone
from typing import Any, Dict, List, Mapping, Optional

import pytest

from jetstream_sync import errors
from jetstream_sync.jetstream import api
from jetstream_sync.jetstream.manager import JetStreamManager
from jetstream_sync.msg import Headers

UTC = timezone.utc


# --- from_response -----------------------------------------------------------------------------


def test_from_response_reads_the_servers_json_like_from_dict() -> None:
    raw = {
        "name": "c",
        "leader": "n1",
        "leader_since": "2025-10-30T21:53:04.123456789Z",
        "replicas": [{"name": "n2", "current": True, "active": 1_500_000_000, "lag": 0}],
        "raft_group": "g",
        "traffic_account": "$SYS",
    }
    info = api.ClusterInfo.from_response(raw)
    assert info == api.ClusterInfo.from_dict(raw)
    assert info.leader_since == datetime(2025, 10, 30, 21, 53, 4, 123456, tzinfo=UTC)
    assert isinstance(info.leader_since, api.NanoDatetime)
    assert info.leader_since.nanosecond == 789  # kept aside, not compared
    assert info.replicas is not None and info.replicas[0].active == 1.5  # ns -> seconds
    assert info.traffic_acc == "$SYS"


def test_from_response_takes_nats_pys_own_keys() -> None:
    info = api.ClusterInfo.from_response({"name": "c", "traffic_acc": "all"})
    assert info.traffic_acc == info.traffic_account == "all"
    assert info.extra == {}
    ack = api.PubAck.from_response({"stream": "S", "seq": 3, "batch_id": "b", "batch_size": 2})
    assert (ack.batch_id, ack.batch_size) == ("b", 2)
    # The server's key wins over nats-py's when both are there.
    both = api.ClusterInfo.from_response({"traffic_account": "srv", "traffic_acc": "py"})
    assert both.traffic_account == "srv"


def test_from_response_leaves_the_dict_alone_and_keeps_unknown_keys() -> None:
    raw: Dict[str, Any] = {"name": "s", "opt_start_time": "2024-02-19T19:20:50+05:30", "new": 1}
    src = api.StreamSource.from_response(raw)
    assert raw == {"name": "s", "opt_start_time": "2024-02-19T19:20:50+05:30", "new": 1}
    assert src.opt_start_time == datetime(2024, 2, 19, 13, 50, 50, tzinfo=UTC)
    assert src.opt_start_time is not None and src.opt_start_time.tzinfo is UTC
    assert src.extra == {"new": 1}
    alias_raw = {"traffic_acc": "x"}
    api.ClusterInfo.from_response(alias_raw)
    assert alias_raw == {"traffic_acc": "x"}


def test_from_response_missing_fields_are_none_or_the_default() -> None:
    info = api.ClusterInfo.from_response({"name": "c", "leader": "n", "replicas": []})
    assert info.leader_since is None and info.raft_group is None and info.traffic_acc is None
    assert info.replicas == []
    seq = api.SequenceInfo.from_response({"consumer_seq": 1, "stream_seq": 2})
    assert seq.last_active is None


def test_from_response_of_a_nested_model() -> None:
    ci = api.ConsumerInfo.from_response(
        {
            "name": "c",
            "stream_name": "S",
            "config": {"ack_policy": "explicit", "ack_wait": 30_000_000_000, "backoff": [10**9]},
            "created": "2024-06-01T12:00:00.123456789Z",
            "delivered": {"consumer_seq": 0, "stream_seq": 0},
        }
    )
    assert ci.config.ack_policy is api.AckPolicy.EXPLICIT
    assert ci.config.ack_wait == 30.0 and ci.config.backoff == [1.0]
    assert ci.created == datetime(2024, 6, 1, 12, 0, 0, 123456, tzinfo=UTC)


def test_from_response_refuses_a_malformed_answer() -> None:
    with pytest.raises(errors.JetStreamError, match="leader_since"):
        api.ClusterInfo.from_response({"leader_since": "yesterday"})
    with pytest.raises(TypeError, match="mapping"):
        api.ClusterInfo.from_response(["not", "a", "dict"])  # type: ignore[arg-type]


# --- as_dict -----------------------------------------------------------------------------------


def test_as_dict_is_the_json_form() -> None:
    cfg = api.ConsumerConfig(
        durable_name="d",
        deliver_policy=api.DeliverPolicy.BY_START_TIME,
        opt_start_time=datetime(2024, 2, 19, 19, 20, 50, tzinfo=UTC),
        ack_wait=1.5,
        backoff=[1.0, 2.5],
        description=None,
    )
    d = cfg.as_dict()
    assert d == cfg.to_dict()
    assert d == {
        "durable_name": "d",
        "deliver_policy": "by_start_time",
        "opt_start_time": "2024-02-19T19:20:50Z",
        "ack_wait": 1_500_000_000,
        "backoff": [1_000_000_000, 2_500_000_000],
    }
    assert type(d["deliver_policy"]) is str  # the value, not the member
    assert "description" not in d  # None left out


def test_as_dict_datetimes() -> None:
    def written(dt: Any) -> Any:
        return api.StreamSource(name="s", opt_start_time=dt).as_dict()["opt_start_time"]

    assert written(datetime(2024, 1, 1)) == "2024-01-01T00:00:00Z"  # naive: UTC
    ist = timezone(timedelta(hours=5, minutes=30))
    assert written(datetime(2024, 1, 1, 5, 30, tzinfo=ist)) == "2024-01-01T00:00:00Z"
    assert written(datetime(2024, 1, 1, 0, 0, 0, 520000, tzinfo=UTC)) == "2024-01-01T00:00:00.52Z"
    parsed = api.parse_time("2024-02-19T19:20:50.123456789Z")
    assert written(parsed) == "2024-02-19T19:20:50.123456789Z"  # nanoseconds kept
    assert "opt_start_time" not in api.StreamSource(name="s").as_dict()


def test_as_dict_nested_models_and_lists_of_them() -> None:
    cfg = api.StreamConfig(
        name="S",
        sources=[api.StreamSource(name="A", subject_transforms=[api.SubjectTransform("a", "b")])],
        placement=api.Placement(cluster="c"),
        max_age=60.0,
    )
    d = cfg.as_dict()
    assert d["sources"] == [{"name": "A", "subject_transforms": [{"src": "a", "dest": "b"}]}]
    assert d["placement"] == {"cluster": "c"}
    assert d["max_age"] == 60 * 10**9
    assert api.StreamConfig.from_response(d) == cfg


def test_as_dict_of_an_info() -> None:
    ci = api.ConsumerInfo(
        name="c",
        stream_name="S",
        config=api.ConsumerConfig(),
        created=datetime(2024, 6, 1, 12, 0, 0, tzinfo=UTC),
    )
    d = ci.as_dict()
    assert d["created"] == "2024-06-01T12:00:00Z"
    assert d["config"] == {} and d["delivered"] == {"consumer_seq": 0, "stream_seq": 0}


# --- evolve ------------------------------------------------------------------------------------


def test_evolve_is_a_copy_with_fields_replaced() -> None:
    cfg = api.StreamConfig(name="S", subjects=["a"], mirror=api.StreamSource(name="M"))
    cfg.extra["future"] = 1
    new = cfg.evolve(mirror=None, max_msgs=5)
    assert new is not cfg and new.mirror is None and new.max_msgs == 5
    assert new.name == "S" and new.subjects == ["a"]
    assert cfg.mirror == api.StreamSource(name="M") and cfg.max_msgs is None  # unchanged
    assert new.extra == {"future": 1} and new.extra is not cfg.extra
    assert cfg.evolve() == cfg


def test_evolve_refuses_an_unknown_field() -> None:
    with pytest.raises(TypeError, match="StreamConfig has no field 'nope'"):
        api.StreamConfig().evolve(nope=1)


# --- bools read back False ---------------------------------------------------------------------


def test_bools_the_server_leaves_out_read_back_false() -> None:
    cfg = api.StreamConfig.from_dict({"name": "S", "sealed": False, "deny_purge": False})
    assert cfg.no_ack is False and cfg.discard_new_per_subject is False
    assert cfg.sealed is False and cfg.deny_purge is False
    assert api.StreamConfig().no_ack is False
    # False is not sent (the server's default), True is.
    assert "no_ack" not in api.StreamConfig(name="S").to_dict()
    assert api.StreamConfig(name="S", no_ack=True).to_dict()["no_ack"] is True
    # printed as nats-py's dataclass repr prints it: every field (issue 37)
    assert "no_ack=False, template_owner=None" in repr(api.StreamConfig(name="S"))


# --- subject_delete_marker_ttl -----------------------------------------------------------------


@pytest.mark.parametrize("ttl", [0, 0.0, None])
def test_a_zero_subject_delete_marker_ttl_is_not_sent(ttl: Optional[float]) -> None:
    assert (
        "subject_delete_marker_ttl"
        not in api.StreamConfig(name="S", subject_delete_marker_ttl=ttl).to_dict()
    )


def test_a_subject_delete_marker_ttl_is_sent_in_nanoseconds() -> None:
    cfg = api.StreamConfig(name="S", subject_delete_marker_ttl=300.0)
    assert cfg.to_dict()["subject_delete_marker_ttl"] == 300 * 10**9


# --- compression and metadata checked before sending ------------------------------------------


@pytest.mark.parametrize("value", ["s3", api.StoreCompression("zstd")])
def test_an_unknown_compression_is_refused(value: Any) -> None:
    name = value.value if isinstance(value, api.StoreCompression) else value
    with pytest.raises(errors.InvalidArgumentError) as info:
        api.StreamConfig(name="S", compression=value).to_dict()
    assert str(info.value) == f"nats: invalid store compression type: {name}"
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("value", ["s2", "none", api.StoreCompression.S2, ""])
def test_known_compressions_are_sent(value: Any) -> None:
    assert api.StreamConfig(name="S", compression=value).to_dict()["compression"] == value


@pytest.mark.parametrize("cls", [api.StreamConfig, api.ConsumerConfig])
def test_metadata_must_be_a_dict_of_strings(cls: Any) -> None:
    with pytest.raises(errors.InvalidArgumentError) as info:
        cls(name="S", metadata=["hello", "world"]).to_dict()
    assert str(info.value) == "nats: invalid metadata format"
    with pytest.raises(errors.InvalidArgumentError, match="keys and values must be str"):
        cls(name="S", metadata={"n": 1}).to_dict()
    assert cls(name="S", metadata={"a": "b"}).to_dict()["metadata"] == {"a": "b"}


# --- ts is not compared ------------------------------------------------------------------------


def test_infos_that_differ_only_in_ts_are_equal() -> None:
    a = api.StreamInfo.from_dict({"config": {"name": "S"}, "ts": "2024-01-01T00:00:00Z"})
    b = api.StreamInfo.from_dict({"config": {"name": "S"}, "ts": "2024-01-01T00:00:09Z"})
    assert a == b and a.ts != b.ts
    c = api.ConsumerInfo.from_dict({"name": "c", "ts": "2024-01-01T00:00:00Z"})
    d = api.ConsumerInfo.from_dict({"name": "c", "ts": "2024-01-01T00:00:01Z"})
    assert c == d
    assert c != api.ConsumerInfo.from_dict({"name": "c", "num_pending": 1})


# --- datetime fields take RFC 3339 text ---------------------------------------------------------


def test_pause_until_as_text() -> None:
    cfg = api.ConsumerConfig(durable_name="d", pause_until="2099-01-01T01:00:00+01:00")  # type: ignore[arg-type]
    assert cfg.to_dict()["pause_until"] == "2099-01-01T00:00:00Z"
    z = api.ConsumerConfig(pause_until="2099-01-01T00:00:00Z")  # type: ignore[arg-type]
    assert z.to_dict()["pause_until"] == "2099-01-01T00:00:00Z"
    when = datetime(2099, 1, 1, tzinfo=UTC)
    assert api.ConsumerConfig(pause_until=when).to_dict()["pause_until"] == "2099-01-01T00:00:00Z"


@pytest.mark.parametrize("value", ["tomorrow", 12345])
def test_a_bad_datetime_is_refused_naming_the_field(value: Any) -> None:
    with pytest.raises(errors.InvalidArgumentError, match=r"ConsumerConfig\.pause_until"):
        api.ConsumerConfig(pause_until=value).to_dict()


# --- ConsumerPause and pause_consumer / resume_consumer ----------------------------------------


class _FakeJS(JetStreamManager):
    """A manager whose API answers are canned: what was asked is recorded."""

    def __init__(self, answer: Mapping[str, Any]) -> None:
        self.answer = dict(answer)
        self.asked: List[Any] = []
        self._timeout = 5.0

    def _api(
        self, suffix: str, body: Optional[Mapping[str, Any]] = None, timeout: Optional[float] = None
    ) -> Dict[str, Any]:
        self.asked.append((suffix, body))
        return self.answer


def test_pause_consumer_returns_the_answer_as_a_consumer_pause() -> None:
    js = _FakeJS(
        {
            "type": "io.nats.jetstream.api.v1.consumer_pause_response",
            "paused": True,
            "pause_until": "2099-01-01T00:00:00Z",
            "pause_remaining": 3_600_000_000_000,
        }
    )
    resp = js.pause_consumer("S", "c", "2099-01-01T00:00:00Z")
    assert isinstance(resp, api.ConsumerPause)
    assert resp.paused is True and bool(resp) is True
    assert resp.pause_until == datetime(2099, 1, 1, tzinfo=UTC)
    assert resp.pause_remaining == 3600.0
    assert js.asked == [("CONSUMER.PAUSE.S.c", {"pause_until": "2099-01-01T00:00:00Z"})]


def test_resume_consumer_returns_a_falsy_consumer_pause() -> None:
    js = _FakeJS({"paused": False, "pause_until": "0001-01-01T00:00:00Z"})
    resp = js.resume_consumer("S", "c")
    assert isinstance(resp, api.ConsumerPause)
    assert resp.paused is False and not resp and resp.pause_remaining is None
    assert js.asked == [("CONSUMER.PAUSE.S.c", {})]


# --- RawStreamMsg.hdrs and get_msg's sequence ---------------------------------------------------


def test_hdrs_is_the_base64_block_as_nats_py_has_it() -> None:
    raw = api.RawStreamMsg.from_dict(
        {"subject": "foo.a", "seq": 1, "hdrs": "TkFUUy8xLjANCmZvbzogYmFyDQoNCg==", "data": ""}
    )
    assert raw.headers is not None and raw.headers["foo"] == "bar"
    assert raw.hdrs == "TkFUUy8xLjANCmZvbzogYmFyDQoNCg=="
    assert base64.b64decode(raw.hdrs).startswith(b"NATS/1.0\r\n")
    assert api.RawStreamMsg(subject="x", seq=1).hdrs is None
    assert api.RawStreamMsg(subject="x", seq=1, headers=Headers()).hdrs is None


@pytest.mark.parametrize("seq", [0, -1, True])
def test_a_bad_message_sequence_is_a_bad_request_before_sending(seq: Any) -> None:
    js = _FakeJS({})
    for call in (lambda: js.get_msg("S", seq), lambda: js.delete_msg("S", seq)):
        with pytest.raises(errors.BadRequestError) as info:
            call()
        assert isinstance(info.value, errors.InvalidArgumentError)
        assert info.value.code == 400 and "seq must be an int >= 1" in str(info.value)
    assert js.asked == []
